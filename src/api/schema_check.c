/* schema_check.c — JSON Schema validation over jansson values (see schema_check.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "schema_check.h"

#include <math.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/grammar.h"
#include "fsm/structural_tag.h"

#define MAX_DEPTH 256
#define MAX_PATTERNS 64

typedef struct {
    const void *schema;   /* the schema value that holds the pattern (its address keys the cache) */
    pcre2_code *code;     /* NULL: PCRE2 does not take it */
} pattern_t;

typedef struct {
    const json_t *root;
    sv_check_result_t *res;
    bool failed_recorded;
    bool unchecked;
    int quiet; /* > 0 inside anyOf, oneOf, not, if, contains: failures there are expected */
    int depth;
    char path[256];
    size_t plen;
    pattern_t pats[MAX_PATTERNS];
    size_t n_pats;
    pcre2_match_data *md;
} ctx_t;

static bool check(ctx_t *c, const json_t *s, const json_t *v);

static bool fail(ctx_t *c, const char *kw) {
    if (!c->quiet && !c->failed_recorded && c->res) {
        snprintf(c->res->pointer, sizeof c->res->pointer, "%.*s", (int)c->plen, c->path);
        snprintf(c->res->keyword, sizeof c->res->keyword, "%s", kw);
        c->failed_recorded = true;
    }
    return false;
}

/* Something this validator does not check: the outcome is UNCHECKED. */
static bool unchecked(ctx_t *c, const char *what) {
    if (!c->unchecked && c->res) snprintf(c->res->keyword, sizeof c->res->keyword, "%s", what);
    c->unchecked = true;
    return true;
}

/* ---- the instance location --------------------------------------------------- */

static size_t push_key(ctx_t *c, const char *k) {
    size_t was = c->plen;
    if (c->plen + 2 >= sizeof c->path) return was;
    c->path[c->plen++] = '/';
    for (; *k && c->plen + 3 < sizeof c->path; k++) {
        if (*k == '~' || *k == '/') {
            c->path[c->plen++] = '~';
            c->path[c->plen++] = *k == '~' ? '0' : '1';
        } else {
            c->path[c->plen++] = *k;
        }
    }
    return was;
}

static size_t push_index(ctx_t *c, size_t i) {
    size_t was = c->plen;
    int n = snprintf(c->path + c->plen, sizeof c->path - c->plen, "/%zu", i);
    if (n > 0 && c->plen + (size_t)n < sizeof c->path) c->plen += (size_t)n;
    return was;
}

/* ---- values ------------------------------------------------------------------ */

/* JSON equality: numbers by value (1 == 1.0), objects regardless of key order. */
static bool json_eq(const json_t *a, const json_t *b) {
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b)) return json_integer_value(a) == json_integer_value(b);
        return json_number_value(a) == json_number_value(b);
    }
    if (json_typeof(a) != json_typeof(b)) return false;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
    case JSON_ARRAY: {
        if (json_array_size(a) != json_array_size(b)) return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_eq(json_array_get(a, i), json_array_get(b, i))) return false;
        return true;
    }
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)a, k, x) {
            json_t *y = json_object_get(b, k);
            if (!y || !json_eq(x, y)) return false;
        }
        return true;
    }
    default: return true; /* true, false, null: the same type */
    }
}

static bool is_type(const json_t *v, const char *t) {
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer")) {
        if (json_is_integer(v)) return true;
        double x = json_number_value(v);
        return json_is_real(v) && isfinite(x) && floor(x) == x;
    }
    return false;
}

static size_t code_points(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((uint8_t)s[i] & 0xC0) != 0x80;
    return k;
}

/* A non-negative integer keyword's value, or -1 when absent or not one. */
static double count_kw(const json_t *s, const char *kw) {
    json_t *x = json_object_get(s, kw);
    if (!json_is_number(x)) return -1;
    double d = json_number_value(x);
    return d >= 0 ? d : -1;
}

/* ---- patterns ---------------------------------------------------------------- */

/* 1: the pattern matches somewhere in text; 0: it does not; -1: unchecked
 * (PCRE2 does not take the pattern). Compiled once a check, keyed by key
 * (the address of the schema value that holds the pattern). */
static int search(ctx_t *c, const void *key, const char *pattern, size_t plen, const char *text, size_t len) {
    pattern_t *p = NULL;
    for (size_t i = 0; i < c->n_pats; i++)
        if (c->pats[i].schema == key) p = &c->pats[i];
    if (!p) {
        if (c->n_pats == MAX_PATTERNS) {
            pcre2_code_free(c->pats[0].code);
            memmove(c->pats, c->pats + 1, (MAX_PATTERNS - 1) * sizeof *c->pats);
            c->n_pats--;
        }
        int ec;
        PCRE2_SIZE eo;
        p = &c->pats[c->n_pats++];
        p->schema = key;
        p->code = pcre2_compile((PCRE2_SPTR)pattern, plen, PCRE2_UTF, &ec, &eo, NULL);
    }
    if (!p->code) return -1;
    if (!c->md && !(c->md = pcre2_match_data_create(1, NULL))) return -1;
    int rc = pcre2_match(p->code, (PCRE2_SPTR)text, len, 0, 0, c->md, NULL);
    if (rc >= 0) return 1;
    return rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}

/* ---- $ref -------------------------------------------------------------------- */

/* The schema a local JSON-pointer reference names, or NULL. */
static const json_t *resolve(const json_t *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const json_t *cur = root;
    const char *p = ref + 1;
    if (!*p) return cur;
    if (*p != '/') return NULL; /* an anchor */
    char tok[512];
    while (*p == '/') {
        p++;
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            char ch = *p++;
            if (ch == '~' && (*p == '0' || *p == '1')) ch = *p++ == '0' ? '~' : '/';
            else if (ch == '%' && p[0] && p[1]) {
                char hex[3] = {p[0], p[1], 0};
                char *e;
                long x = strtol(hex, &e, 16);
                if (*e) return NULL;
                ch = (char)x;
                p += 2;
            }
            tok[n++] = ch;
        }
        tok[n] = 0;
        if (json_is_object(cur)) cur = json_object_get(cur, tok);
        else if (json_is_array(cur)) {
            char *e;
            unsigned long i = strtoul(tok, &e, 10);
            cur = *tok && !*e ? json_array_get(cur, i) : NULL;
        } else return NULL;
        if (!cur) return NULL;
    }
    return *p ? NULL : cur;
}

/* ---- keywords by instance type ----------------------------------------------- */

static bool check_number(ctx_t *c, const json_t *s, const json_t *v) {
    double x = json_number_value(v);
    json_t *k;
    bool ok = true;
    json_t *exmin = json_object_get(s, "exclusiveMinimum"), *exmax = json_object_get(s, "exclusiveMaximum");
    if (json_is_number(k = json_object_get(s, "minimum"))) {
        double m = json_number_value(k);
        if (json_is_true(exmin) ? !(x > m) : !(x >= m)) ok = fail(c, "minimum");
    }
    if (json_is_number(k = json_object_get(s, "maximum"))) {
        double m = json_number_value(k);
        if (json_is_true(exmax) ? !(x < m) : !(x <= m)) ok = fail(c, "maximum");
    }
    if (json_is_number(exmin) && !(x > json_number_value(exmin))) ok = fail(c, "exclusiveMinimum");
    if (json_is_number(exmax) && !(x < json_number_value(exmax))) ok = fail(c, "exclusiveMaximum");
    if (json_is_number(k = json_object_get(s, "multipleOf")) && json_number_value(k) > 0) {
        bool mult;
        if (json_is_integer(k) && json_is_integer(v)) {
            mult = json_integer_value(v) % json_integer_value(k) == 0;
        } else {
            double q = x / json_number_value(k);
            /* A float's quotient is off by rounding: within 1e-9 of an integer. */
            mult = isfinite(q) ? fabs(q - nearbyint(q)) <= 1e-9 * fmax(1.0, fabs(q)) : false;
        }
        if (!mult) ok = fail(c, "multipleOf");
    }
    return ok;
}

static bool check_string(ctx_t *c, const json_t *s, const json_t *v) {
    bool ok = true;
    size_t n = json_string_length(v);
    double lim;
    if ((lim = count_kw(s, "minLength")) >= 0 && (double)code_points(json_string_value(v), n) < lim)
        ok = fail(c, "minLength");
    if ((lim = count_kw(s, "maxLength")) >= 0 && (double)code_points(json_string_value(v), n) > lim)
        ok = fail(c, "maxLength");
    json_t *pat = json_object_get(s, "pattern");
    if (json_is_string(pat)) {
        int m = search(c, pat, json_string_value(pat), json_string_length(pat), json_string_value(v), n);
        if (m < 0) unchecked(c, "pattern");
        else if (!m) ok = fail(c, "pattern");
    }
    return ok;
}

static bool check_array(ctx_t *c, const json_t *s, const json_t *v) {
    bool ok = true;
    size_t n = json_array_size(v);
    const json_t *prefix = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
    if (json_is_array(items)) { /* draft 7: a tuple, then additionalItems */
        prefix = items;
        items = json_object_get(s, "additionalItems");
    }
    size_t np = json_is_array(prefix) ? json_array_size(prefix) : 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *is = i < np ? json_array_get(prefix, i) : items;
        if (!is) continue;
        size_t was = push_index(c, i);
        if (!check(c, is, json_array_get(v, i))) ok = false;
        c->plen = was;
    }
    double lim;
    if ((lim = count_kw(s, "minItems")) >= 0 && (double)n < lim) ok = fail(c, "minItems");
    if ((lim = count_kw(s, "maxItems")) >= 0 && (double)n > lim) ok = fail(c, "maxItems");
    if (json_is_true(json_object_get(s, "uniqueItems")))
        for (size_t i = 0; i < n && ok; i++)
            for (size_t j = i + 1; j < n; j++)
                if (json_eq(json_array_get(v, i), json_array_get(v, j))) {
                    ok = fail(c, "uniqueItems");
                    break;
                }
    const json_t *contains = json_object_get(s, "contains");
    if (contains) {
        size_t hits = 0;
        c->quiet++;
        for (size_t i = 0; i < n; i++) hits += check(c, contains, json_array_get(v, i));
        c->quiet--;
        double mn = count_kw(s, "minContains"), mx = count_kw(s, "maxContains");
        if (mn < 0) mn = 1;
        if ((double)hits < mn) ok = fail(c, "contains");
        if (mx >= 0 && (double)hits > mx) ok = fail(c, "maxContains");
    }
    return ok;
}

static bool check_object(ctx_t *c, const json_t *s, const json_t *v) {
    bool ok = true;
    const json_t *props = json_object_get(s, "properties"), *pprops = json_object_get(s, "patternProperties");
    const json_t *addl = json_object_get(s, "additionalProperties"), *names = json_object_get(s, "propertyNames");
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x) {
        size_t was = push_key(c, k);
        bool matched = false;
        const json_t *ps = json_is_object(props) ? json_object_get(props, k) : NULL;
        if (ps) {
            matched = true;
            if (!check(c, ps, x)) ok = false;
        }
        if (json_is_object(pprops)) {
            const char *pk;
            json_t *pv;
            json_object_foreach((json_t *)pprops, pk, pv) {
                int m = search(c, pk, pk, strlen(pk), k, strlen(k)); /* keyed by the key: a value may be a shared true */
                if (m < 0) unchecked(c, "patternProperties");
                else if (m) {
                    matched = true;
                    if (!check(c, pv, x)) ok = false;
                }
            }
        }
        if (!matched && addl && !check(c, addl, x)) ok = fail(c, "additionalProperties");
        if (names) {
            json_t *ks = json_string(k);
            if (ks && !check(c, names, ks)) ok = fail(c, "propertyNames");
            json_decref(ks);
        }
        c->plen = was;
    }
    const json_t *req = json_object_get(s, "required");
    for (size_t i = 0; json_is_array(req) && i < json_array_size(req); i++) {
        const char *r = json_string_value(json_array_get(req, i));
        if (r && !json_object_get(v, r)) ok = fail(c, "required");
    }
    double lim;
    size_t n = json_object_size(v);
    if ((lim = count_kw(s, "minProperties")) >= 0 && (double)n < lim) ok = fail(c, "minProperties");
    if ((lim = count_kw(s, "maxProperties")) >= 0 && (double)n > lim) ok = fail(c, "maxProperties");
    static const char *const dep_kws[] = {"dependentRequired", "dependentSchemas", "dependencies"};
    for (int d = 0; d < 3; d++) {
        const json_t *deps = json_object_get(s, dep_kws[d]);
        if (!json_is_object(deps)) continue;
        const char *dk;
        json_t *dv;
        json_object_foreach((json_t *)deps, dk, dv) {
            if (!json_object_get(v, dk)) continue;
            if (json_is_array(dv)) {
                for (size_t i = 0; i < json_array_size(dv); i++) {
                    const char *r = json_string_value(json_array_get(dv, i));
                    if (r && !json_object_get(v, r)) ok = fail(c, dep_kws[d]);
                }
            } else if (d > 0 && !check(c, dv, v)) {
                ok = fail(c, dep_kws[d]);
            }
        }
    }
    return ok;
}

/* ---- one schema at one location ---------------------------------------------- */

static bool check(ctx_t *c, const json_t *s, const json_t *v) {
    if (json_is_true(s)) return true;
    if (json_is_false(s)) return fail(c, "false");
    if (!json_is_object(s)) return unchecked(c, "schema");
    if (++c->depth > MAX_DEPTH) {
        c->depth--;
        return unchecked(c, "depth");
    }
    bool ok = true;
    static const char *const unsupported[] = {"$dynamicRef", "$recursiveRef", "unevaluatedProperties",
                                              "unevaluatedItems"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (json_object_get(s, unsupported[i])) unchecked(c, unsupported[i]);
    json_t *k;
    if ((k = json_object_get(s, "$ref"))) {
        const json_t *t = json_is_string(k) ? resolve(c->root, json_string_value(k)) : NULL;
        if (!t) unchecked(c, "$ref");
        else if (!check(c, t, v)) ok = false;
    }
    if ((k = json_object_get(s, "type"))) {
        bool any = false;
        if (json_is_string(k)) any = is_type(v, json_string_value(k));
        for (size_t i = 0; json_is_array(k) && i < json_array_size(k) && !any; i++)
            any = json_is_string(json_array_get(k, i)) && is_type(v, json_string_value(json_array_get(k, i)));
        if (!any) ok = fail(c, "type");
    }
    if ((k = json_object_get(s, "enum")) && json_is_array(k)) {
        bool any = false;
        for (size_t i = 0; i < json_array_size(k) && !any; i++) any = json_eq(json_array_get(k, i), v);
        if (!any) ok = fail(c, "enum");
    }
    if ((k = json_object_get(s, "const")) && !json_eq(k, v)) ok = fail(c, "const");
    if (json_is_number(v) && !check_number(c, s, v)) ok = false;
    if (json_is_string(v) && !check_string(c, s, v)) ok = false;
    if (json_is_array(v) && !check_array(c, s, v)) ok = false;
    if (json_is_object(v) && !check_object(c, s, v)) ok = false;

    if (json_is_array(k = json_object_get(s, "allOf")))
        for (size_t i = 0; i < json_array_size(k); i++)
            if (!check(c, json_array_get(k, i), v)) ok = false;
    if (json_is_array(k = json_object_get(s, "anyOf"))) {
        bool any = false;
        c->quiet++;
        for (size_t i = 0; i < json_array_size(k) && !any; i++) any = check(c, json_array_get(k, i), v);
        c->quiet--;
        if (!any) ok = fail(c, "anyOf");
    }
    if (json_is_array(k = json_object_get(s, "oneOf"))) {
        size_t hits = 0;
        c->quiet++;
        for (size_t i = 0; i < json_array_size(k); i++) hits += check(c, json_array_get(k, i), v);
        c->quiet--;
        if (hits != 1) ok = fail(c, "oneOf");
    }
    if ((k = json_object_get(s, "not"))) {
        c->quiet++;
        bool in = check(c, k, v);
        c->quiet--;
        if (in) ok = fail(c, "not");
    }
    if ((k = json_object_get(s, "if"))) {
        c->quiet++;
        bool cond = check(c, k, v);
        c->quiet--;
        const json_t *branch = json_object_get(s, cond ? "then" : "else");
        if (branch && !check(c, branch, v)) ok = fail(c, cond ? "then" : "else");
    }
    c->depth--;
    return ok;
}

sv_check_outcome sv_schema_check(const json_t *schema, const json_t *instance, sv_check_result_t *res) {
    ctx_t c = {.root = schema, .res = res};
    if (res) memset(res, 0, sizeof *res);
    /* A meta-schema of its own may turn vocabularies off: only the standard ones. */
    const char *meta = json_string_value(json_object_get(schema, "$schema"));
    if (meta && !strstr(meta, "://json-schema.org/")) unchecked(&c, "$schema");
    bool ok = check(&c, schema, instance);
    for (size_t i = 0; i < c.n_pats; i++) pcre2_code_free(c.pats[i].code);
    pcre2_match_data_free(c.md);
    if (c.unchecked) return SV_CHECK_UNCHECKED;
    return ok ? SV_CHECK_VALID : SV_CHECK_INVALID;
}

sv_check_outcome sv_regex_check(const char *pattern, size_t plen, const char *text, size_t len) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, plen, PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &ec,
                                     &eo, NULL);
    if (!code) return SV_CHECK_UNCHECKED;
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = md ? pcre2_match(code, (PCRE2_SPTR)text, len, 0, 0, md, NULL) : PCRE2_ERROR_NOMEMORY;
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    if (rc >= 0) return SV_CHECK_VALID;
    return rc == PCRE2_ERROR_NOMATCH ? SV_CHECK_INVALID : SV_CHECK_UNCHECKED;
}

sv_check_outcome sv_grammar_check(const char *grammar, size_t glen, const char *text, size_t len) {
    sv_dfa_t *d = NULL;
    sv_error_t err;
    if (sv_grammar_compile(grammar, glen, NULL, &d, &err)) return SV_CHECK_UNCHECKED;
    bool ok = sv_dfa_matches(d, (const uint8_t *)text, len);
    sv_dfa_destroy(d);
    return ok ? SV_CHECK_VALID : SV_CHECK_INVALID;
}

sv_check_outcome sv_structural_tag_check(const char *stag, size_t slen, int ws, const char *text, size_t len) {
    sv_dfa_t *d = NULL;
    sv_error_t err;
    sv_schema_opts_t o;
    sv_schema_opts_default(&o);
    o.ws = (sv_ws_mode)ws;
    if (sv_structural_tag_compile(stag, slen, &o, &d, &err)) return SV_CHECK_UNCHECKED;
    bool ok = sv_dfa_matches(d, (const uint8_t *)text, len);
    sv_dfa_destroy(d);
    return ok ? SV_CHECK_VALID : SV_CHECK_INVALID;
}
