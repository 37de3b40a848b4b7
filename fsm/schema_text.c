/* schema_text.c — the textual pieces of JSON languages: whitespace and
 * separators per mode, JSON strings (content DFAs spelled with json.dumps's
 * escapes), literals for const/enum, and the universe of JSON values. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/memacct.h"
#include "fsm/internal/json_format.h"
#include "json_num.h"
#include "regex.h"
#include "fsm/internal/schema_internal.h"

sv_ast_t *sv_sc_lit(sctx_t *c, const char *bytes, size_t n) {
    if (n == 0) return sv_ast_empty(c->arena);
    sv_ast_t **kids = sv_arena_alloc(c->arena, n * sizeof *kids);
    if (!kids) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(kids[i] = sv_ast_bytes(c->arena, (uint8_t)bytes[i], (uint8_t)bytes[i]))) return NULL;
    return sv_ast_cat(c->arena, kids, (uint32_t)n);
}

sv_ast_t *sv_sc_ws(sctx_t *c) {
    if (c->o->ws != SV_WS_FLEXIBLE) return sv_ast_empty(c->arena);
    sv_ast_t *alts[4] = {sv_ast_bytes(c->arena, ' ', ' '), sv_ast_bytes(c->arena, '\t', '\t'),
                         sv_ast_bytes(c->arena, '\n', '\n'), sv_ast_bytes(c->arena, '\r', '\r')};
    if (!alts[0] || !alts[1] || !alts[2] || !alts[3]) return NULL;
    sv_ast_t *alt = sv_ast_alt(c->arena, alts, 4);
    return alt ? sv_ast_repeat(c->arena, alt, 0, SV_AST_INF) : NULL;
}

sv_ast_t *sv_sc_cat2(sctx_t *c, sv_ast_t *x, sv_ast_t *y) {
    if (!x || !y) return NULL;
    sv_ast_t *k[2] = {x, y};
    return sv_ast_cat(c->arena, k, 2);
}

sv_ast_t *sv_sc_cat3(sctx_t *c, sv_ast_t *x, sv_ast_t *y, sv_ast_t *z) {
    if (!x || !y || !z) return NULL;
    sv_ast_t *k[3] = {x, y, z};
    return sv_ast_cat(c->arena, k, 3);
}

static sv_ast_t *punct(sctx_t *c, char p, const char *canonical) {
    switch (c->o->ws) {
    case SV_WS_CANONICAL: return sv_sc_lit(c, canonical, strlen(canonical));
    case SV_WS_COMPACT: return sv_sc_lit(c, &p, 1);
    case SV_WS_FLEXIBLE: return sv_sc_cat3(c, sv_sc_ws(c), sv_sc_lit(c, &p, 1), sv_sc_ws(c));
    }
    return NULL;
}

sv_ast_t *sv_sc_sep(sctx_t *c) { return punct(c, ',', ", "); }
sv_ast_t *sv_sc_colon(sctx_t *c) { return punct(c, ':', ": "); }

sv_ast_t *sv_sc_quoted(sctx_t *c, const sv_dfa_t *content) {
    for (uint32_t i = 0; i < c->nquoted; i++)
        if (c->quoted[i].content == content) return c->quoted[i].ast;
    /* Built directly as its minimized DFA (json_quote.c), once per content:
     * a string member's value is in every object automaton that holds the
     * member, and every object with extra members quotes its own key
     * region. A budget stop here leaves the AST ('"' escaped content '"'),
     * for the caller's own compile to report. */
    sv_error_t scratch;
    sv_error_clear(&scratch);
    sv_dfa_t *d = NULL;
    sv_ast_t *a;
    if (sv_dfa_json_quoted(content, sv_sc_lim(c), &d, &scratch) == SV_OK) {
        if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, d)) return NULL; /* destroyed */
        a = sv_ast_dfa(c->arena, d, false);
    } else {
        sv_ast_t *q = sv_ast_bytes(c->arena, '"', '"');
        a = sv_sc_cat3(c, q, sv_ast_dfa(c->arena, content, true), q);
    }
    if (a && d && c->nquoted < sizeof c->quoted / sizeof c->quoted[0])
        c->quoted[c->nquoted++] = (struct sv_quoted){content, a};
    return a;
}

size_t sv_sc_escape_json(const char *s, size_t n, char *buf) {
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)s[i];
        const char *e = NULL;
        switch (x) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        default: break;
        }
        if (e) {
            memcpy(buf + o, e, 2);
            o += 2;
        } else if (x < 0x20) {
            o += (size_t)sprintf(buf + o, "\\u%04x", x);
        } else {
            buf[o++] = (char)x;
        }
    }
    buf[o++] = '"';
    return o;
}

sv_ast_t *sv_sc_key(sctx_t *c, const char *key, size_t len) {
    char *buf = sv_arena_alloc(c->arena, len * 6 + 3);
    if (!buf) return NULL;
    size_t n = sv_sc_escape_json(key, len, buf);
    return sv_sc_lit(c, buf, n);
}

static sv_status compile_regex_dfa(sctx_t *c, const char *pattern, sv_dfa_t **out) {
    sv_ast_t *ast;
    sv_status st = sv_regex_parse(pattern, strlen(pattern), c->arena, &ast, c->err);
    return st ? st : sv_sc_dfa(c, ast, out);
}

/* ---- the prelude: constants of the JSON language ----------------------------
 *
 * A few automata are the same in every schema: the content of any string,
 * its quoted spelling, and the free-form container part (one per
 * whitespace mode, the only option they depend on). The first compile
 * that needs one builds it as before, under its own budgets, and leaves a
 * copy over the same tables here; every later compile in the process
 * borrows that copy instead of building it again (about a tenth of a
 * median MaskBench compile when the DFA memo is cold, and the memo's LRU
 * may evict them under big schemas). They are never freed: three small
 * DFAs per mode (the free-form part is 192 states), charged to no compile.
 * sv_schema_prelude_warm builds them ahead (the server at startup). */
static struct {
    pthread_mutex_t lock;
    sv_dfa_t *any_string, *any_quoted;
    sv_dfa_t *any_part[SV_WS_FLEXIBLE + 1];
} prelude = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The prelude's copy of *slot, or NULL. */
static sv_dfa_t *prelude_get(sv_dfa_t *const *slot) {
    pthread_mutex_lock(&prelude.lock);
    sv_dfa_t *d = *slot;
    pthread_mutex_unlock(&prelude.lock);
    return d;
}

/* Leaves a copy of d (a compile's own, built from scratch) in *slot, unless
 * another compile did first. Out of memory: nothing is left, which costs
 * only a later rebuild. */
static void prelude_put(sv_dfa_t **slot, sv_dfa_t *d) {
    if (!d || d->call_off) return;
    pthread_mutex_lock(&prelude.lock);
    if (!*slot) *slot = sv_dfa_share(d);
    pthread_mutex_unlock(&prelude.lock);
}

sv_status sv_sc_any_string_content(sctx_t *c, sv_dfa_t **out) {
    if (!c->any_string) {
        sv_dfa_t *s = prelude_get(&prelude.any_string), *q = prelude_get(&prelude.any_quoted);
        if (s && q && c->nquoted < sizeof c->quoted / sizeof c->quoted[0]) {
            sv_ast_t *a = sv_ast_dfa(c->arena, q, false);
            if (!a) return sv_sc_nomem(c);
            c->any_string = s;
            c->quoted[c->nquoted++] = (struct sv_quoted){s, a};
        } else {
            sv_status st = compile_regex_dfa(c, "[^]*", &c->any_string);
            if (st) return st;
            sv_ast_t *a = sv_sc_quoted(c, c->any_string);
            if (!a) return sv_sc_nomem(c);
            if (a->kind == SV_AST_DFA) { /* not where a budget left the AST */
                prelude_put(&prelude.any_quoted, (sv_dfa_t *)a->dfa);
                prelude_put(&prelude.any_string, c->any_string);
            }
        }
    }
    *out = c->any_string;
    return SV_OK;
}

/* The plain spellings Python's json.dumps writes for ints and floats: the
 * exponent forms are added apart (sv_json_number_exp), since bounded
 * languages can keep them only in part. */
#define PY_NUMBERS "(0|-?[1-9][0-9]*)(\\.0)?|-?(0|[1-9][0-9]*)\\.[0-9]*[1-9]|-0\\.0"

sv_status sv_sc_python_numbers(sctx_t *c, sv_ast_t *lang, sv_ast_t **out) {
    sv_status st;
    if (!c->py_numbers && (st = compile_regex_dfa(c, PY_NUMBERS, &c->py_numbers))) return st;
    sv_dfa_t *d, *r;
    if ((st = sv_sc_dfa(c, lang, &d))) return st;
    sv_error_t e;
    sv_error_clear(&e);
    st = sv_dfa_product(d, c->py_numbers, SV_DFA_AND, sv_sc_lim(c), &r, &e);
    if (st) return sv_sc_fail(c, st, NULL, "%s", e.message);
    if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, r)) return sv_sc_nomem(c);
    *out = sv_ast_dfa(c->arena, r, false);
    return *out ? SV_OK : sv_sc_nomem(c);
}

sv_status sv_sc_any_number(sctx_t *c, bool exponents, sv_ast_t **out) {
    if (!c->any_number[exponents]) {
        /* Every plain Python spelling of each value (10 and 10.0), as in
         * every number language, so that differences are exact; the
         * exponent forms only where asked for. */
        sv_status st = sv_regex_parse(PY_NUMBERS, strlen(PY_NUMBERS), c->arena, &c->any_number[exponents], c->err);
        if (st) return st;
        if (exponents) {
            sv_num_spec_t any = {0};
            sv_ast_t *exp;
            if ((st = sv_json_number_exp(c->arena, &any, &exp, c->err))) return st;
            sv_ast_t *alt = sv_ast_alt(c->arena, (sv_ast_t *[]){c->any_number[exponents], exp}, 2);
            if (!alt) return sv_sc_nomem(c);
            c->any_number[exponents] = alt;
        }
    }
    *out = c->any_number[exponents];
    return SV_OK;
}

sv_status sv_sc_integer_spellings(sctx_t *c, sv_ast_t *lang, sv_ast_t **out) {
    /* Draft 4: 1.0 is no integer. From draft 6 on it is, but an integer is
     * written plainly wherever no difference sees the language: "8", never
     * "8.0", which strict readers (serde's i64, Go's int, Pydantic's strict
     * mode) refuse. Dropping spellings is sound (every one left is valid);
     * only a difference needs every spelling of each value it subtracts, so
     * there (no_keysets > 0, the same contexts as sv_sc_keysets) "1.0" and
     * "-0.0" stay. The language memo keeps the two apart (schema.c). */
    if (c->draft < 6 || !c->no_keysets) { *out = lang; return SV_OK; }
    sv_dfa_t *d;
    sv_status st = sv_sc_to_dfa(c, lang, &d);
    if (st) return st;
    if (!d) { *out = lang; return SV_OK; }
    sv_ast_t *dot0 = sv_ast_repeat(c->arena, sv_sc_lit(c, ".0", 2), 0, 1);
    sv_ast_t *alts[2] = {sv_sc_cat2(c, sv_ast_dfa(c->arena, d, false), dot0), NULL};
    uint32_t n = 1;
    if (sv_dfa_matches(d, (const uint8_t *)"0", 1)) alts[n++] = sv_sc_lit(c, "-0.0", 4);
    if (!dot0 || !alts[0] || (n == 2 && !alts[1])) return sv_sc_nomem(c);
    *out = sv_ast_alt(c->arena, alts, n);
    return *out ? SV_OK : sv_sc_nomem(c);
}

/* Free-form values. A DFA cannot count: it tells an array from an object at
 * every open level by being in a different copy of the levels below, so a
 * value that may nest d levels costs about 2^d copies of a level (42 states
 * each). Two limits keep that finite. Every stack of containers up to
 * `general` levels deep is accepted (max_any_depth). Deeper stacks, up to
 * `extra` more levels (any_deep_levels), only with at most `arrays` arrays in
 * them (any_deep_arrays). A stack of objects alone adds one copy per level:
 * at the defaults (3, 3, 1) a free-form value is 1,494 states where depth 6
 * for every stack would be 5,387, and it accepts what MaskBench's deep values
 * mostly are, objects in objects with a list somewhere. */
typedef struct {
    uint32_t general, extra, arrays;
} any_shape_t;

static bool any_room(const any_shape_t *sh, uint32_t stack, uint32_t arrays) {
    return stack <= sh->general || (stack <= sh->general + sh->extra && arrays <= sh->arrays);
}

#define ANY_ARRAYS_KEY (SV_SCHEMA_ANY_DEEP_ARRAYS_MAX + 2)

/* The value at `stack` open levels (counted from the free-form value) of
 * which `arrays` are arrays. */
static sv_status any_value_at(sctx_t *c, const any_shape_t *sh, uint32_t stack, uint32_t arrays, sv_dfa_t **out) {
    if (!c->any_value) {
        /* extra is an option (and a function of general where clamped), so not in the key */
        size_t n = (size_t)(SV_SCHEMA_MAX_ANY + 1) * (SV_SCHEMA_MAX_ANY + 1) * ANY_ARRAYS_KEY;
        c->any_value = sv_arena_alloc(c->arena, n * sizeof *c->any_value);
        if (!c->any_value) return sv_sc_nomem(c);
        memset(c->any_value, 0, n * sizeof *c->any_value);
    }
    /* Past `arrays` + 1 the count no longer matters: only general levels are left. */
    uint32_t akey = arrays > sh->arrays ? sh->arrays + 1 : arrays;
    sv_dfa_t **slot = &c->any_value[(sh->general * (SV_SCHEMA_MAX_ANY + 1) + stack) * ANY_ARRAYS_KEY + akey];
    if (*slot) { *out = *slot; return SV_OK; }
    sv_status st;
    sv_ast_t *num, *str;
    sv_dfa_t *content;
    if ((st = sv_sc_any_number(c, false, &num)) || (st = sv_sc_any_string_content(c, &content))) return st;
    str = sv_sc_quoted(c, content);
    sv_ast_t *alts[7] = {sv_sc_lit(c, "null", 4), sv_sc_lit(c, "true", 4), sv_sc_lit(c, "false", 5), num, str};
    uint32_t n = 5;
    sv_ast_t *ws = sv_sc_ws(c);
    if (any_room(sh, stack + 1, arrays + 1)) {
        sv_dfa_t *d;
        if ((st = any_value_at(c, sh, stack + 1, arrays + 1, &d))) return st;
        sv_ast_t *inner = sv_ast_dfa(c->arena, d, false);
        /* [ (v (, v)*)? ] */
        sv_ast_t *items = sv_sc_cat2(c, inner, sv_ast_repeat(c->arena, sv_sc_cat2(c, sv_sc_sep(c), inner), 0, SV_AST_INF));
        sv_ast_t *body = sv_ast_repeat(c->arena, sv_sc_cat3(c, ws, items, ws), 0, 1);
        if (c->o->ws == SV_WS_FLEXIBLE) /* "[ ]" is JSON too: whitespace alone inside empty brackets. */
            body = sv_ast_alt(c->arena, (sv_ast_t *[]){sv_sc_cat3(c, ws, items, ws), ws}, 2);
        alts[n++] = sv_sc_cat3(c, sv_sc_lit(c, "[", 1), body, sv_sc_lit(c, "]", 1));
    }
    if (any_room(sh, stack + 1, arrays)) {
        sv_dfa_t *d;
        if ((st = any_value_at(c, sh, stack + 1, arrays, &d))) return st;
        sv_ast_t *inner = sv_ast_dfa(c->arena, d, false);
        /* { (k: v (, k: v)*)? } */
        sv_ast_t *member = sv_sc_cat3(c, str, sv_sc_colon(c), inner);
        sv_ast_t *members = sv_sc_cat2(c, member, sv_ast_repeat(c->arena, sv_sc_cat2(c, sv_sc_sep(c), member), 0, SV_AST_INF));
        sv_ast_t *body = sv_ast_repeat(c->arena, sv_sc_cat3(c, ws, members, ws), 0, 1);
        if (c->o->ws == SV_WS_FLEXIBLE)
            body = sv_ast_alt(c->arena, (sv_ast_t *[]){sv_sc_cat3(c, ws, members, ws), ws}, 2);
        alts[n++] = sv_sc_cat3(c, sv_sc_lit(c, "{", 1), body, sv_sc_lit(c, "}", 1));
    }
    for (uint32_t i = 0; i < n; i++)
        if (!alts[i]) return sv_sc_nomem(c);
    sv_ast_t *alt = sv_ast_alt(c->arena, alts, n);
    if (!alt) return sv_sc_nomem(c);
    if ((st = sv_sc_dfa(c, alt, slot))) return st;
    *out = *slot;
    return SV_OK;
}

/* Free-form values as calls (program.c): a scalar, or a call into the one
 * free-form container part, whose values are again scalars or calls. Any
 * depth, and one copy of the part per constraint (about 85 states) where
 * the bounded shape above copies 1,494 states into every place that holds
 * a free-form value. */
static sv_status any_scalars(sctx_t *c, sv_ast_t **alts) {
    sv_status st;
    sv_ast_t *num;
    sv_dfa_t *content;
    if ((st = sv_sc_any_number(c, false, &num)) || (st = sv_sc_any_string_content(c, &content))) return st;
    alts[0] = sv_sc_lit(c, "null", 4);
    alts[1] = sv_sc_lit(c, "true", 4);
    alts[2] = sv_sc_lit(c, "false", 5);
    alts[3] = num;
    alts[4] = sv_sc_quoted(c, content);
    for (int i = 0; i < 5; i++)
        if (!alts[i]) return sv_sc_nomem(c);
    return SV_OK;
}

static sv_status any_call(sctx_t *c, sv_ast_t **out) {
    sv_status st;
    sv_ast_t *alts[6];
    if ((st = any_scalars(c, alts))) return st;
    alts[5] = sv_call_marker(c->arena, SV_SCHEMA_PART_ANY);
    if (!alts[5]) return sv_sc_nomem(c);
    sv_ast_t *value = sv_ast_alt(c->arena, alts, 6);
    if (!value) return sv_sc_nomem(c);
    if (!c->any_part) c->any_part = prelude_get(&prelude.any_part[c->o->ws]);
    if (!c->any_part) {
        sv_ast_t *ws = sv_sc_ws(c), *str = alts[4];
        sv_ast_t *items = sv_sc_cat2(c, value, sv_ast_repeat(c->arena, sv_sc_cat2(c, sv_sc_sep(c), value), 0, SV_AST_INF));
        sv_ast_t *member = sv_sc_cat3(c, str, sv_sc_colon(c), value);
        sv_ast_t *members = sv_sc_cat2(c, member, sv_ast_repeat(c->arena, sv_sc_cat2(c, sv_sc_sep(c), member), 0, SV_AST_INF));
        sv_ast_t *abody = sv_ast_repeat(c->arena, sv_sc_cat3(c, ws, items, ws), 0, 1);
        sv_ast_t *obody = sv_ast_repeat(c->arena, sv_sc_cat3(c, ws, members, ws), 0, 1);
        if (c->o->ws == SV_WS_FLEXIBLE) { /* "[ ]" is JSON too */
            abody = sv_ast_alt(c->arena, (sv_ast_t *[]){sv_sc_cat3(c, ws, items, ws), ws}, 2);
            obody = sv_ast_alt(c->arena, (sv_ast_t *[]){sv_sc_cat3(c, ws, members, ws), ws}, 2);
        }
        sv_ast_t *arr = sv_sc_cat3(c, sv_sc_lit(c, "[", 1), abody, sv_sc_lit(c, "]", 1));
        sv_ast_t *obj = sv_sc_cat3(c, sv_sc_lit(c, "{", 1), obody, sv_sc_lit(c, "}", 1));
        if (!arr || !obj) return sv_sc_nomem(c);
        if ((st = sv_sc_dfa(c, sv_ast_alt(c->arena, (sv_ast_t *[]){arr, obj}, 2), &c->any_part))) return st;
        prelude_put(&prelude.any_part[c->o->ws], c->any_part);
    }
    *out = value;
    return SV_OK;
}

sv_status sv_sc_any_call_in_product(sctx_t *c, sv_ast_t **out) {
    c->any_products_used = true;
    return any_call(c, out);
}

sv_status sv_sc_any_value(sctx_t *c, uint32_t depth, sv_ast_t **out) {
    if (sv_sc_calls(c)) return any_call(c, out);
    if (c->calls && c->any_products) return sv_sc_any_call_in_product(c, out);
    any_shape_t sh = {depth > SV_SCHEMA_MAX_ANY ? SV_SCHEMA_MAX_ANY : depth, c->o->any_deep_levels, c->o->any_deep_arrays};
    if (sh.extra > SV_SCHEMA_MAX_ANY - sh.general) sh.extra = SV_SCHEMA_MAX_ANY - sh.general;
    if (sh.arrays > SV_SCHEMA_ANY_DEEP_ARRAYS_MAX) sh.arrays = SV_SCHEMA_ANY_DEEP_ARRAYS_MAX;
    if (sh.arrays >= sh.general + sh.extra) sh.arrays = sh.general + sh.extra; /* no limit at all */
    if (sh.extra) c->deep_any = true;
    sv_dfa_t *d;
    sv_status st = any_value_at(c, &sh, 0, 0, &d);
    if (st) return st;
    *out = sv_ast_dfa(c->arena, d, false);
    return *out ? SV_OK : sv_sc_nomem(c);
}

/* ---- literals ------------------------------------------------------------ */

static sv_status number_literal(sctx_t *c, json_t *v, sv_ast_t **out) {
    char buf[400], exp[48];
    const char *d = sv_sc_decimal(c, v, buf, sizeof buf);
    if (!d) return sv_sc_fail(c, SV_ERR_UNSUPPORTED, "const", "a number with an exponent beyond 4000 cannot be spelled");
    sv_ast_t *all;
    sv_status st = sv_json_number_value(c->arena, d, &all, c->err);
    if (!st) st = sv_sc_python_numbers(c, all, out);
    if (st || !sv_json_number_exp_spelling(d, exp, sizeof exp)) return st;
    /* The value as json.dumps writes it when it is a float: 1e-05. */
    *out = sv_ast_alt(c->arena, (sv_ast_t *[]){*out, sv_sc_lit(c, exp, strlen(exp))}, 2);
    return *out ? SV_OK : sv_sc_nomem(c);
}

sv_status sv_sc_literal(sctx_t *c, json_t *v, const sv_loc_t *loc, sv_ast_t **out) {
    sv_status st = SV_OK;
    switch (json_typeof(v)) {
    case JSON_NULL: *out = sv_sc_lit(c, "null", 4); break;
    case JSON_TRUE: *out = sv_sc_lit(c, "true", 4); break;
    case JSON_FALSE: *out = sv_sc_lit(c, "false", 5); break;
    case JSON_INTEGER:
    case JSON_REAL: return number_literal(c, v, out);
    case JSON_STRING: *out = sv_sc_key(c, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        sv_ast_t **parts = sv_arena_alloc(c->arena, (2 * n + 3) * sizeof *parts);
        if (!parts) return sv_sc_nomem(c);
        uint32_t k = 0;
        parts[k++] = sv_sc_lit(c, "[", 1);
        if (n) parts[k++] = sv_sc_ws(c);
        for (size_t i = 0; i < n; i++) {
            sv_loc_t child;
            if ((st = sv_sc_loc_item(c, loc, (uint32_t)i, &child))) return st;
            if (i) parts[k++] = sv_sc_sep(c);
            if ((st = sv_sc_literal(c, json_array_get(v, i), &child, &parts[k++]))) return st;
        }
        if (n) parts[k++] = sv_sc_ws(c);
        else if (c->o->ws == SV_WS_FLEXIBLE) parts[k++] = sv_sc_ws(c);
        parts[k++] = sv_sc_lit(c, "]", 1);
        *out = sv_ast_cat(c->arena, parts, k);
        break;
    }
    case JSON_OBJECT: {
        /* Keys in the location's orders (its keys contain every const/enum
         * key): each order an object built here takes (sv_sc_lit_orders),
         * so that a difference that subtracts the literal sees every
         * spelling of it that the universe there holds. */
        const char **keys, **lk;
        uint32_t nk, **perm, np, child_orders;
        if ((st = sv_sc_loc_keys(c, loc, &keys, &nk))) return st;
        if ((st = sv_sc_lit_orders(c, loc, keys, nk, &perm, &np, &child_orders))) return st;
        size_t n = json_object_size(v);
        lk = sv_arena_alloc(c->arena, (n + 1) * sizeof *lk);
        sv_ast_t **lv = sv_arena_alloc(c->arena, (n + 1) * sizeof *lv);
        int32_t *at = sv_arena_alloc(c->arena, (nk + 1) * sizeof *at);
        if (!lk || !lv || !at) return sv_sc_nomem(c);
        uint32_t done = 0;
        for (uint32_t i = 0; i < nk; i++) {
            json_t *x = json_object_get(v, keys[i]);
            at[i] = -1;
            if (!x) continue;
            sv_loc_t child;
            if ((st = sv_sc_loc_property(c, loc, keys[i], &child))) return st;
            child.orders = child_orders;
            at[i] = (int32_t)done;
            lk[done] = keys[i];
            if ((st = sv_sc_literal(c, x, &child, &lv[done++]))) return st;
        }
        if (done != n)
            return sv_sc_fail(c, SV_ERR_INTERNAL, "const", "internal: an object literal key is missing from the key order");
        if (c->keyset && n >= 2) { /* --key-order any: the same members in any order, where key sets may be */
            sv_ast_t *any;
            if ((st = sv_sc_object_literal(c, loc, lk, lv, (uint32_t)n, &any))) return st;
            if (any) { *out = any; break; }
        }
        sv_ast_t **alts = sv_arena_alloc(c->arena, np * sizeof *alts);
        sv_ast_t **parts = sv_arena_alloc(c->arena, (4 * n + 3) * sizeof *parts);
        if (!alts || !parts) return sv_sc_nomem(c);
        for (uint32_t o = 0; o < np; o++) {
            uint32_t k = 0, w = 0;
            parts[k++] = sv_sc_lit(c, "{", 1);
            if (n) parts[k++] = sv_sc_ws(c);
            for (uint32_t j = 0; j < nk; j++) {
                int32_t m = at[perm[o][j]];
                if (m < 0) continue;
                if (w++) parts[k++] = sv_sc_sep(c);
                parts[k++] = sv_sc_key(c, lk[m], strlen(lk[m]));
                parts[k++] = sv_sc_colon(c);
                parts[k++] = lv[m];
            }
            if (n) parts[k++] = sv_sc_ws(c);
            else if (c->o->ws == SV_WS_FLEXIBLE) parts[k++] = sv_sc_ws(c);
            parts[k++] = sv_sc_lit(c, "}", 1);
            if (!(alts[o] = sv_ast_cat(c->arena, parts, k))) return sv_sc_nomem(c);
        }
        *out = np == 1 ? alts[0] : sv_ast_alt(c->arena, alts, np);
        break;
    }
    }
    return *out ? SV_OK : sv_sc_nomem(c);
}

/* ---- string content -------------------------------------------------------- */

static sv_status get_count(sctx_t *c, json_t *s, const char *kw, uint32_t cap, bool *set, uint32_t *v) {
    json_t *x = json_object_get(s, kw);
    *set = false;
    if (!x) return SV_OK;
    double d = json_number_value(x);
    if (!json_is_number(x) || d < 0 || d != floor(d))
        return sv_sc_fail(c, SV_ERR_SYNTAX, kw, "%s must be a non-negative integer", kw);
    *set = true;
    *v = d > cap ? cap + 1 : (uint32_t)d;
    return SV_OK;
}

/* The shortest maxLength a pattern's product with the length is narrowed
 * to (sv_sc_string). */
#define STRING_NARROW_MIN 16u

/* The intersection of the languages parts[0..n): *out. */
static sv_status string_product(sctx_t *c, sv_ast_t **parts, uint32_t n, sv_dfa_t **out) {
    sv_dfa_t *acc = NULL;
    sv_status st;
    for (uint32_t i = 0; i < n; i++) {
        if (!parts[i]) return sv_sc_nomem(c);
        sv_dfa_t *d;
        size_t mark = c->ptr_len;
        if ((st = sv_sc_dfa(c, parts[i], &d))) {
            if (st == SV_ERR_EMPTY) return sv_sc_fail(c, SV_ERR_EMPTY, "pattern", "the string constraints match no string");
            return st;
        }
        sv_sc_pop(c, mark);
        if (!acc) { acc = d; continue; }
        sv_dfa_t *r;
        st = sv_dfa_product(acc, d, SV_DFA_AND, sv_sc_lim(c), &r, c->err);
        if (st == SV_ERR_EMPTY)
            return sv_sc_fail(c, SV_ERR_EMPTY, "pattern", "no string satisfies pattern, length and format together");
        if (st) return sv_sc_fail(c, st, "pattern", "%s", c->err->message);
        if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, r)) return sv_sc_nomem(c);
        acc = r;
    }
    *out = acc;
    return SV_OK;
}

/* A string of mn to mx code points and nothing else, quoted, written down
 * directly (json_quote.c); narrowed as string_product narrows a length
 * whose automaton does not fit. */
static sv_status counted_string(sctx_t *c, uint32_t mn, uint32_t mx, bool counted, sv_ast_t **out) {
    for (;;) {
        sv_dfa_t *d = NULL;
        sv_error_t e;
        sv_error_clear(&e);
        sv_status st = sv_dfa_json_quoted_counted(mn, mx, sv_sc_lim(c), &d, &e);
        if (!st) {
            if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, d)) return sv_sc_nomem(c); /* destroyed */
            *out = sv_ast_dfa(c->arena, d, false);
            return *out ? SV_OK : sv_sc_nomem(c);
        }
        if (st != SV_ERR_BUDGET || mx == SV_AST_INF || mx / 2 < STRING_NARROW_MIN || mx / 2 < mn ||
            sv_memacct_pool_short())
            return sv_sc_fail(c, st, mx == SV_AST_INF ? "minLength" : "maxLength", "%s", e.message);
        mx /= 2;
        if (!counted && c->info) c->info->nnarrowed++;
        counted = true;
        c->truncated = true;
    }
}

sv_status sv_sc_string(sctx_t *c, json_t *s, sv_ast_t **out) {
    sv_ast_t *parts[3];
    uint32_t n = 0;
    sv_status st;
    bool has_min, has_max;
    uint32_t mn = 0, mx = 0;
    const uint32_t cap = UINT32_MAX - 1;
    if ((st = get_count(c, s, "minLength", cap, &has_min, &mn)) || (st = get_count(c, s, "maxLength", cap, &has_max, &mx)))
        return st;
    /* Each counted character costs about 14 DFA states, so a large maxLength
     * is narrowed (never widened) to max_string_length, and reported. */
    uint32_t lim = c->o->max_string_length;
    if (has_min && mn > lim)
        return sv_sc_fail(c, SV_ERR_BUDGET, "minLength", "minLength %u is above max_string_length (%u)", mn, lim);
    bool counted = false; /* this schema's cut reported in info->nnarrowed */
    if (has_max && mx > lim) {
        mx = lim;
        c->truncated = true;
        if (c->info) c->info->nnarrowed++;
        counted = true;
    }
    sv_ast_t *cp = NULL;
    int len_part = -1;
    if ((has_min && mn > 0) || has_max) {
        sv_cpset_t any;
        sv_cpset_init(&any);
        if (sv_cpset_add(&any, 0, SV_CP_MAX) || sv_cpset_normalize(&any)) { sv_cpset_free(&any); return sv_sc_nomem(c); }
        cp = sv_ast_class(c->arena, &any);
        sv_cpset_free(&any);
        if (has_max && has_min && mn > mx) return sv_sc_fail(c, SV_ERR_EMPTY, "minLength", "minLength %u is above maxLength %u", mn, mx);
        len_part = (int)n;
        parts[n++] = sv_ast_repeat(c->arena, cp, has_min ? mn : 0, has_max ? mx : SV_AST_INF);
    }
    json_t *pat = json_object_get(s, "pattern");
    if (pat) {
        if (!json_is_string(pat)) return sv_sc_fail(c, SV_ERR_SYNTAX, "pattern", "pattern must be a string");
        sv_ast_t *p;
        sv_error_t perr;
        sv_error_clear(&perr);
        st = sv_regex_parse(json_string_value(pat), json_string_length(pat), c->arena, &p, &perr);
        if (st)
            return sv_sc_fail(c, st, "pattern", "pattern /%s/: %s", json_string_value(pat), perr.message);
        /* JSON Schema patterns search: they match anywhere unless anchored. */
        sv_ast_t *any = NULL;
        const char *star = "[^]*";
        if ((st = sv_regex_parse(star, 4, c->arena, &any, c->err))) return st;
        parts[n++] = sv_sc_cat3(c, any, p, any);
    }
    json_t *fmt = json_object_get(s, "format");
    if (fmt && json_is_string(fmt)) {
        const char *f = json_string_value(fmt);
        if (sv_json_format_known(f)) {
            sv_ast_t *fa;
            if ((st = sv_json_format(c->arena, f, &fa, c->err))) return sv_sc_fail(c, st, "format", "%s", c->err->message);
            parts[n++] = fa;
            if (!sv_json_format_exact(f)) c->truncated = true; /* narrower than the format: no complement over it */
        } else if (!c->o->unknown_formats_ok) {
            return sv_sc_fail(c, SV_ERR_UNSUPPORTED, "format",
                              "unknown format \"%s\" (supported: date-time, date, time, duration, email, hostname, "
                              "ipv4, ipv6, uri, uri-reference, uuid; unknown formats can be allowed as annotations)", f);
        }
    }
    if (n == 0) {
        sv_dfa_t *content;
        if ((st = sv_sc_any_string_content(c, &content))) return st;
        *out = sv_sc_quoted(c, content);
        return *out ? SV_OK : sv_sc_nomem(c);
    }
    if (n == 1 && len_part == 0) return counted_string(c, has_min ? mn : 0, has_max ? mx : SV_AST_INF, counted, out);
    /* A pattern counted to a length can outgrow the state budget (words
     * times characters: `^(?:\\S+\\s+){0,49}\\S+$` within 500 characters):
     * the length is then narrowed further, halved while the product does
     * not fit, down to STRING_NARROW_MIN characters, and reported as the
     * cut to max_string_length is. */
    sv_dfa_t *content = NULL;
    for (;;) {
        st = string_product(c, parts, n, &content);
        if (!st) {
            *out = sv_sc_quoted(c, content);
            return *out ? SV_OK : sv_sc_nomem(c);
        }
        if (st != SV_ERR_BUDGET || len_part < 0 || !has_max || mx / 2 < STRING_NARROW_MIN || mx / 2 < mn ||
            sv_memacct_pool_short())
            return st;
        mx /= 2;
        if (!(parts[len_part] = sv_ast_repeat(c->arena, cp, has_min ? mn : 0, mx))) return sv_sc_nomem(c);
        if (!counted && c->info) c->info->nnarrowed++;
        counted = true;
        c->truncated = true;
        if (c->err) sv_error_clear(c->err);
    }
}
