/* structural_tag.c — XGrammar's structural tags to one DFA (structural_tag.h).
 *
 * A structural tag is a tree of formats; each becomes an AST (fsm/ast.h)
 * and the whole tree one DFA through sv_dfa_from_ast. The leaves are
 * compiled on their own and embedded as DFAs: a const_string is its bytes,
 * a regex and a grammar their own compilers' DFAs (a regex's ^ and $ keep
 * their whole-string meaning that way), a JSON Schema its flat DFA. A
 * grammar with recursive rules is embedded as its start rule's AST, whose
 * calls name its parts (sv_grammar_lower), and the whole is linked at the
 * end with every such grammar's parts (sv_program_link).
 *
 * Free text is where a DFA needs care. XGrammar's triggered tags read text
 * until the first trigger, then the tag that trigger starts; inside a tag,
 * text also stops at the first occurrence of the tag's end string. With S
 * the strings that stop the text (triggers, end strings) and X the excluded
 * strings:
 *   P(S ∪ X)  = Σ* \ Σ*(S ∪ X)Σ*         text containing none of them,
 *   First(k)  = P(S ∪ X)·c  ∩  Σ*k        text up to the first occurrence of
 *                                        k ∈ S (c: k's last code point), no
 *                                        earlier stop inside it,
 * built with sv_dfa_product (AND, DIFF). Then
 *   triggered_tags = (∪_t First(t)·Rest_t)* · (∪_e First(e)  or  P at the end)
 * where Rest_t are the tags that trigger t starts, less the trigger's bytes.
 * This is exact only when no stop or excluded string is part of another
 * (which would fire first depends on more than the text seen): such sets
 * are refused. The product DFAs are small (the Aho-Corasick automaton of S
 * ∪ X, twice); the memo (dfa_cache.c) builds each P once per compile.
 *
 * Budgets: SV_STAG_MAX_DEPTH, SV_STAG_MAX_FORMATS, SV_STAG_MAX_STOPS, and
 * lim's states, memory (one account for the whole compile, util/memacct.h)
 * and time: each step gets what is left of the compile's time. */
#define _GNU_SOURCE /* memmem */
#include "structural_tag.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/arena.h"
#include "util/clock.h"
#include "util/memacct.h"
#include "fsm/grammar.h"
#include "fsm/regex.h"
#include "fsm/internal/dfa_internal.h"
#include "fsm/internal/free_text.h"
#include "fsm/internal/grammar_internal.h"

typedef struct {
    const char *s;
    size_t n;
    const char *what; /* "trigger", "end string", "excluded string": for messages */
} str_t;

/* A tag of a tags list (or a legacy structure). */
typedef struct {
    str_t begin;
    str_t *ends;
    uint32_t nends;
    json_t *content;
    bool content_is_schema; /* legacy: content is a JSON Schema */
    const char *list_key;   /* "tags" or "structures": its pointer */
    size_t index;
    sv_ast_t *body;         /* content and end, built once (ASTs may be shared) */
} tag_t;

typedef struct {
    sv_schema_opts_t so; /* JSON Schema contents: the caller's options, flat */
    sv_fsm_limits_t lim; /* the whole compile's budgets */
    uint64_t t0_ns;
    sv_arena_t *a;
    sv_dfa_t **dfas; /* every DFA the ASTs embed: freed at the end */
    uint32_t ndfas, capdfas;
    sv_grammar_lowered_t **grammars; /* recursive grammars, their calls linked at the end */
    uint32_t ngrammars, capgrammars;
    uint32_t next_id;                /* the call ids the grammars have taken */
    uint32_t nformats;
    sv_error_t *err;
    char ptr[256]; /* the JSON pointer of the part being compiled */
    size_t plen;
} cx_t;

/* ---- errors and pointers ------------------------------------------------- */

static size_t push(cx_t *c, const char *tok) {
    size_t keep = c->plen;
    if (c->plen + 1 >= sizeof c->ptr) return keep;
    c->ptr[c->plen++] = '/';
    for (; *tok; tok++) {
        const char *e = *tok == '~' ? "~0" : *tok == '/' ? "~1" : NULL;
        size_t n = e ? 2 : 1;
        if (c->plen + n >= sizeof c->ptr) break;
        if (e) memcpy(c->ptr + c->plen, e, 2);
        else c->ptr[c->plen] = *tok;
        c->plen += n;
    }
    c->ptr[c->plen] = '\0';
    return keep;
}

static size_t push_index(cx_t *c, size_t i) {
    char b[24];
    snprintf(b, sizeof b, "%zu", i);
    return push(c, b);
}

static void pop(cx_t *c, size_t keep) {
    c->plen = keep;
    c->ptr[keep] = '\0';
}

static sv_status fail(cx_t *c, sv_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static sv_status fail(cx_t *c, sv_status st, const char *fmt, ...) {
    if (!c->err) return st;
    char msg[sizeof c->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sv_error_set(c->err, st, -1, "%s", msg);
    snprintf(c->err->pointer, sizeof c->err->pointer, "%s", c->plen ? c->ptr : "");
    return st;
}

static sv_status nomem(cx_t *c) { return fail(c, SV_ERR_NOMEM, "out of memory"); }

/* A sub-compiler's error under the current pointer: its message (a regex's
 * and a grammar's say where in their own text: offset, line and column),
 * and for a schema its keyword and pointer after ours. err->offset stays
 * -1: the sub-compiler's offset is into the sub-text, not into the
 * structural tag. */
static sv_status sub_fail(cx_t *c, sv_status st, const sv_error_t *e) {
    fail(c, st, "%s", e->message[0] ? e->message : sv_status_name(st));
    if (c->err) {
        snprintf(c->err->keyword, sizeof c->err->keyword, "%s", e->keyword);
        size_t n = strlen(c->err->pointer);
        snprintf(c->err->pointer + n, sizeof c->err->pointer - n, "%s", e->pointer);
    }
    return st;
}

/* ---- budgets -------------------------------------------------------------- */

/* lim with what is left of the compile's time; SV_ERR_TIMEOUT when none is. */
static sv_status left(cx_t *c, sv_fsm_limits_t *l) {
    *l = c->lim;
    if (!c->lim.max_time_us) return SV_OK;
    uint64_t spent = (sv_now_ns() - c->t0_ns) / 1000;
    if (spent >= c->lim.max_time_us)
        return fail(c, SV_ERR_TIMEOUT, "compiling the structural tag exceeds the time budget of %llu ms",
                    (unsigned long long)((c->lim.time_budget_us ? c->lim.time_budget_us : c->lim.max_time_us) / 1000));
    l->max_time_us = c->lim.max_time_us - spent;
    if (!l->time_budget_us) l->time_budget_us = c->lim.max_time_us;
    return SV_OK;
}

static sv_status keep_dfa(cx_t *c, sv_dfa_t *d) {
    if (c->ndfas == c->capdfas) {
        uint32_t cap = c->capdfas ? 2 * c->capdfas : 16;
        sv_dfa_t **p = realloc(c->dfas, cap * sizeof *p);
        if (!p) {
            sv_dfa_destroy(d);
            return nomem(c);
        }
        c->dfas = p;
        c->capdfas = cap;
    }
    c->dfas[c->ndfas++] = d;
    return SV_OK;
}

/* ---- AST pieces ----------------------------------------------------------- */

static sv_status lit(cx_t *c, const char *s, size_t n, sv_ast_t **out) {
    if (n == 0) {
        *out = sv_ast_empty(c->a);
        return *out ? SV_OK : nomem(c);
    }
    sv_ast_t **k = sv_arena_alloc(c->a, n * sizeof *k);
    if (!k) return nomem(c);
    for (size_t i = 0; i < n; i++) {
        k[i] = sv_ast_bytes(c->a, (uint8_t)s[i], (uint8_t)s[i]);
        if (!k[i]) return nomem(c);
    }
    *out = n == 1 ? k[0] : sv_ast_cat(c->a, k, (uint32_t)n);
    return *out ? SV_OK : nomem(c);
}

static sv_status cat(cx_t *c, sv_ast_t **k, uint32_t n, sv_ast_t **out) {
    *out = n == 0 ? sv_ast_empty(c->a) : n == 1 ? k[0] : sv_ast_cat(c->a, k, n);
    return *out ? SV_OK : nomem(c);
}

static sv_status alt(cx_t *c, sv_ast_t **k, uint32_t n, sv_ast_t **out) {
    *out = n == 0 ? sv_ast_none(c->a) : n == 1 ? k[0] : sv_ast_alt(c->a, k, n);
    return *out ? SV_OK : nomem(c);
}

static sv_status alt_lits(cx_t *c, const str_t *s, uint32_t n, sv_ast_t **out) {
    sv_ast_t **k = sv_arena_alloc(c->a, (n ? n : 1) * sizeof *k);
    if (!k) return nomem(c);
    for (uint32_t i = 0; i < n; i++) {
        sv_status st = lit(c, s[i].s, s[i].n, &k[i]);
        if (st) return st;
    }
    return alt(c, k, n, out);
}

static sv_status embed(cx_t *c, const sv_dfa_t *d, sv_ast_t **out) {
    *out = sv_ast_dfa(c->a, d, false);
    return *out ? SV_OK : nomem(c);
}

/* P(s): the text that contains none of s[0..n) (fsm/internal/free_text.h). */
static sv_status avoid(cx_t *c, const str_t *s, uint32_t n, const sv_dfa_t **out) {
    const char **p = sv_arena_alloc(c->a, (n ? n : 1) * sizeof *p);
    size_t *len = sv_arena_alloc(c->a, (n ? n : 1) * sizeof *len);
    if (!p || !len) return nomem(c);
    for (uint32_t i = 0; i < n; i++) p[i] = s[i].s, len[i] = s[i].n;
    sv_fsm_limits_t l;
    sv_status st = left(c, &l);
    if (st) return st;
    sv_error_t e;
    sv_error_clear(&e);
    sv_dfa_t *d;
    if ((st = sv_text_avoiding(p, len, n, &l, &d, &e))) return sub_fail(c, st, &e);
    if ((st = keep_dfa(c, d))) return st;
    *out = d;
    return SV_OK;
}

/* First(k): text of P up to and including the first occurrence of k. */
static sv_status first(cx_t *c, const sv_dfa_t *p, str_t k, sv_ast_t **out) {
    sv_fsm_limits_t l;
    sv_status st = left(c, &l);
    if (st) return st;
    sv_error_t e;
    sv_error_clear(&e);
    sv_dfa_t *d;
    if ((st = sv_text_until(p, k.s, k.n, &l, &d, &e))) return sub_fail(c, st, &e);
    if ((st = keep_dfa(c, d))) return st;
    return embed(c, d, out);
}

/* No string of s[0..n) may be part of another (nor equal to one). */
static sv_status check_stops(cx_t *c, const str_t *s, uint32_t n) {
    if (n > SV_STAG_MAX_STOPS)
        return fail(c, SV_ERR_BUDGET, "free text here scans for %u triggers, end strings and excluded strings; "
                    "the limit is %u", n, SV_STAG_MAX_STOPS);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < n; j++) {
            if (i == j || s[i].n > s[j].n || !memmem(s[j].s, s[j].n, s[i].s, s[i].n)) continue;
            if (s[i].n == s[j].n && i > j) continue; /* equal: said once */
            return fail(c, SV_ERR_UNSUPPORTED,
                        "the %s \"%.*s\" is %s the %s \"%.*s\": free text cannot tell which one it meets "
                        "(make no trigger, end string or excluded string part of another)",
                        s[i].what, (int)(s[i].n > 60 ? 60 : s[i].n), s[i].s,
                        s[i].n == s[j].n ? "the same as" : "part of", s[j].what,
                        (int)(s[j].n > 60 ? 60 : s[j].n), s[j].s);
        }
    return SV_OK;
}

/* ---- reading the JSON ----------------------------------------------------- */

static sv_status check_keys(cx_t *c, json_t *f, const char *type, const char *const *keys) {
    const char *k;
    json_t *v;
    json_object_foreach(f, k, v) {
        bool ok = false;
        for (const char *const *p = keys; *p && !ok; p++) ok = !strcmp(*p, k);
        if (!ok) {
            size_t m = push(c, k);
            sv_status st = fail(c, SV_ERR_UNSUPPORTED, "unknown field \"%s\" in a %s format", k, type);
            pop(c, m);
            return st;
        }
    }
    return SV_OK;
}

/* f[key] as a string; required: absent is an error, else *s is {NULL, 0}. */
static sv_status get_str(cx_t *c, json_t *f, const char *key, bool required, bool nonempty, str_t *s) {
    json_t *v = json_object_get(f, key);
    *s = (str_t){NULL, 0, NULL};
    size_t m = push(c, key);
    sv_status st = SV_OK;
    if (!v && required) st = fail(c, SV_ERR_SYNTAX, "\"%s\" is required", key);
    else if (v && !json_is_string(v)) st = fail(c, SV_ERR_SYNTAX, "\"%s\" must be a string", key);
    else if (v && nonempty && json_string_length(v) == 0) st = fail(c, SV_ERR_SYNTAX, "\"%s\" must not be empty", key);
    else if (v) *s = (str_t){json_string_value(v), json_string_length(v), NULL};
    pop(c, m);
    return st;
}

static sv_status get_bool(cx_t *c, json_t *f, const char *key, bool *out) {
    json_t *v = json_object_get(f, key);
    *out = false;
    if (!v || json_is_null(v)) return SV_OK;
    if (!json_is_boolean(v)) {
        size_t m = push(c, key);
        sv_status st = fail(c, SV_ERR_SYNTAX, "\"%s\" must be a boolean", key);
        pop(c, m);
        return st;
    }
    *out = json_is_true(v);
    return SV_OK;
}

/* f[key], a list of non-empty strings, appended to *s (arena) as `what`.
 * Absent: nothing, unless required. */
static sv_status get_strs(cx_t *c, json_t *f, const char *key, bool required, const char *what, str_t **s,
                          uint32_t *n) {
    json_t *v = json_object_get(f, key);
    if (!v || json_is_null(v)) {
        if (!required) return SV_OK;
    }
    size_t m = push(c, key);
    sv_status st = SV_OK;
    if (!json_is_array(v) || (required && json_array_size(v) == 0)) {
        st = fail(c, SV_ERR_SYNTAX, "\"%s\" must be a %slist of strings", key, required ? "non-empty " : "");
    } else if (json_array_size(v) + *n > SV_STAG_MAX_STOPS) {
        st = fail(c, SV_ERR_BUDGET, "\"%s\" has %zu strings; the limit is %u", key, json_array_size(v),
                  SV_STAG_MAX_STOPS);
    } else {
        str_t *ns = sv_arena_alloc(c->a, (*n + json_array_size(v) + 1) * sizeof *ns);
        if (!ns) st = nomem(c);
        else if (*n) memcpy(ns, *s, *n * sizeof *ns);
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            if (st) break;
            if (!json_is_string(x) || json_string_length(x) == 0) {
                size_t m2 = push_index(c, i);
                st = fail(c, SV_ERR_SYNTAX, "a %s must be a non-empty string", what);
                pop(c, m2);
                break;
            }
            ns[(*n)++] = (str_t){json_string_value(x), json_string_length(x), what};
        }
        if (!st) *s = ns;
    }
    pop(c, m);
    return st;
}

static const char *type_of(json_t *f) {
    json_t *t = json_object_get(f, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

/* Whether f reads text to the end of what holds it (XGrammar's
 * "unlimited" formats): any_text, triggered_tags, tags_with_separator, and
 * a sequence or an or of them. Malformed input is left to visit. */
static bool unlimited(json_t *f, uint32_t depth) {
    const char *t = type_of(f);
    if (!t || depth > SV_STAG_MAX_DEPTH) return false;
    if (!strcmp(t, "any_text") || !strcmp(t, "triggered_tags") || !strcmp(t, "tags_with_separator")) return true;
    json_t *el = json_object_get(f, "elements");
    if (!json_is_array(el) || json_array_size(el) == 0) return false;
    if (!strcmp(t, "sequence")) return unlimited(json_array_get(el, json_array_size(el) - 1), depth + 1);
    if (!strcmp(t, "or")) {
        size_t i;
        json_t *x;
        json_array_foreach(el, i, x) if (unlimited(x, depth + 1)) return true;
    }
    return false;
}

static sv_status visit(cx_t *c, json_t *f, const str_t *ends, uint32_t nends, uint32_t depth, sv_ast_t **out);
static sv_status schema_leaf(cx_t *c, json_t *s, sv_ast_t **out);

/* ---- tags ------------------------------------------------------------------ */

static sv_status read_tag(cx_t *c, json_t *f, bool legacy, tag_t *t) {
    static const char *const keys[] = {"type", "begin", "content", "end", NULL};
    static const char *const lkeys[] = {"begin", "schema", "end", NULL};
    if (!json_is_object(f)) return fail(c, SV_ERR_SYNTAX, "a tag must be an object");
    const char *ty = type_of(f);
    if (!legacy && json_object_get(f, "type") && (!ty || strcmp(ty, "tag")))
        return fail(c, SV_ERR_SYNTAX, "a tag's \"type\" must be \"tag\"");
    sv_status st = check_keys(c, f, "tag", legacy ? lkeys : keys);
    if (!st) st = get_str(c, f, "begin", true, false, &t->begin);
    if (st) return st;
    t->content_is_schema = legacy;
    t->body = NULL;
    t->content = json_object_get(f, legacy ? "schema" : "content");
    if (!t->content) {
        size_t m = push(c, legacy ? "schema" : "content");
        st = fail(c, SV_ERR_SYNTAX, "\"%s\" is required", legacy ? "schema" : "content");
        pop(c, m);
        return st;
    }
    json_t *e = json_object_get(f, "end");
    t->ends = NULL;
    t->nends = 0;
    if (json_is_string(e)) {
        t->ends = sv_arena_alloc(c->a, sizeof *t->ends);
        if (!t->ends) return nomem(c);
        t->ends[0] = (str_t){json_string_value(e), json_string_length(e), "end string"};
        t->nends = 1;
        return SV_OK;
    }
    if (legacy || !json_is_array(e) || json_array_size(e) == 0) {
        size_t m = push(c, "end");
        if (!e) st = fail(c, SV_ERR_SYNTAX, "\"end\" is required");
        else st = fail(c, SV_ERR_SYNTAX, "\"end\" must be a string%s", legacy ? "" : " or a non-empty list of strings");
        pop(c, m);
        return st;
    }
    return get_strs(c, f, "end", true, "end string", &t->ends, &t->nends);
}

/* begin[skip..] content end: the tag after its first skip bytes. A content
 * that reads to the end of the tag (unlimited) stops at, and takes, the end
 * string itself. The content and end are built once per tag (a triggered
 * tag uses them twice: whole as the first tag, after its trigger later). */
static sv_status tag_rest(cx_t *c, tag_t *t, size_t skip, uint32_t depth, sv_ast_t **out) {
    sv_ast_t *k[3];
    sv_status st = lit(c, t->begin.s + skip, t->begin.n - skip, &k[0]);
    if (st) return st;
    if (t->body) {
        sv_ast_t *k2[2] = {k[0], t->body};
        return cat(c, k2, 2, out);
    }
    size_t m = t->list_key ? push(c, t->list_key) : c->plen;
    if (t->list_key) push_index(c, t->index);
    size_t m2 = push(c, t->content_is_schema ? "schema" : "content");
    uint32_t n = 2;
    if (t->content_is_schema) {
        st = schema_leaf(c, t->content, &k[1]);
        if (!st) st = alt_lits(c, t->ends, t->nends, &k[n++]);
    } else if (unlimited(t->content, depth + 1)) {
        for (uint32_t i = 0; i < t->nends && !st; i++)
            if (t->ends[i].n == 0) {
                pop(c, m2);
                push(c, "end");
                st = fail(c, SV_ERR_SYNTAX, "a tag whose content reads to its end (any_text, triggered_tags, "
                                            "tags_with_separator) needs a non-empty end string");
            }
        if (!st) st = visit(c, t->content, t->ends, t->nends, depth + 1, &k[1]);
    } else {
        st = visit(c, t->content, NULL, 0, depth + 1, &k[1]);
        if (!st) st = alt_lits(c, t->ends, t->nends, &k[n++]);
    }
    pop(c, m);
    if (!st) st = cat(c, k + 1, n - 1, &t->body);
    if (st) return st;
    sv_ast_t *k2[2] = {k[0], t->body};
    return cat(c, k2, 2, out);
}

/* The tags of f[key] into *tags (arena). */
static sv_status read_tags(cx_t *c, json_t *f, const char *key, bool legacy, tag_t **tags, uint32_t *n) {
    json_t *v = json_object_get(f, key);
    size_t m = push(c, key);
    sv_status st = SV_OK;
    if (!json_is_array(v) || json_array_size(v) == 0) {
        st = fail(c, SV_ERR_SYNTAX, "\"%s\" must be a non-empty list of tags", key);
    } else if (json_array_size(v) > SV_STAG_MAX_FORMATS) {
        st = fail(c, SV_ERR_BUDGET, "\"%s\" has %zu tags; the limit is %u", key, json_array_size(v), SV_STAG_MAX_FORMATS);
    } else {
        *n = (uint32_t)json_array_size(v);
        *tags = sv_arena_alloc(c->a, *n * sizeof **tags);
        if (!*tags) st = nomem(c);
        for (uint32_t i = 0; i < *n && !st; i++) {
            size_t m2 = push_index(c, i);
            st = read_tag(c, json_array_get(v, i), legacy, &(*tags)[i]);
            (*tags)[i].list_key = key;
            (*tags)[i].index = i;
            pop(c, m2);
        }
    }
    pop(c, m);
    return st;
}

/* triggered_tags, from its parts (the current format's fields or a legacy
 * structural tag's). ends: the enclosing tag's end strings (none: the text
 * runs to the end of the output). */
static sv_status triggered(cx_t *c, const str_t *trig, uint32_t ntrig, tag_t *tags, uint32_t ntags,
                           const str_t *excl, uint32_t nexcl, bool at_least_one, bool stop_after_first,
                           const char *trig_key, const str_t *ends, uint32_t nends, uint32_t depth, sv_ast_t **out) {
    /* each tag's trigger */
    uint32_t *of = sv_arena_alloc(c->a, ntags * sizeof *of);
    if (!of) return nomem(c);
    for (uint32_t i = 0; i < ntags; i++) {
        of[i] = UINT32_MAX;
        for (uint32_t t = 0; t < ntrig && of[i] == UINT32_MAX; t++)
            if (trig[t].n <= tags[i].begin.n && !memcmp(trig[t].s, tags[i].begin.s, trig[t].n)) of[i] = t;
        if (of[i] == UINT32_MAX) {
            size_t m = push(c, tags[i].list_key);
            push_index(c, i);
            push(c, "begin");
            sv_status st = fail(c, SV_ERR_UNSUPPORTED, "the tag's begin \"%.*s\" starts with none of the triggers",
                                (int)(tags[i].begin.n > 60 ? 60 : tags[i].begin.n), tags[i].begin.s);
            pop(c, m);
            return st;
        }
    }
    /* the strings free text stops at or avoids */
    uint32_t nstops = ntrig + nends + nexcl;
    str_t *stops = sv_arena_alloc(c->a, (nstops + 1) * sizeof *stops);
    if (!stops) return nomem(c);
    memcpy(stops, trig, ntrig * sizeof *stops);
    for (uint32_t i = 0; i < nends; i++) stops[ntrig + i] = ends[i];
    if (nexcl) memcpy(stops + ntrig + nends, excl, nexcl * sizeof *stops);
    size_t m = push(c, trig_key);
    sv_status st = check_stops(c, stops, nstops);
    pop(c, m);
    if (st) return st;

    sv_ast_t **full = sv_arena_alloc(c->a, ntags * sizeof *full);
    if (!full) return nomem(c);
    for (uint32_t i = 0; i < ntags && !st; i++) st = tag_rest(c, &tags[i], 0, depth, &full[i]);
    sv_ast_t *any_tag = NULL, *end_alt = NULL;
    if (!st) st = alt(c, full, ntags, &any_tag);
    if (!st && nends) st = alt_lits(c, ends, nends, &end_alt);
    if (st) return st;
    if (at_least_one && stop_after_first) { /* exactly one tag, no text */
        sv_ast_t *k[2] = {any_tag, end_alt};
        return cat(c, k, nends ? 2 : 1, out);
    }
    const sv_dfa_t *p;
    st = avoid(c, stops, nstops, &p);
    if (st) return st;
    /* Loop: the text up to a trigger, then a tag it starts */
    sv_ast_t **loops = sv_arena_alloc(c->a, ntrig * sizeof *loops), **rest = sv_arena_alloc(c->a, ntags * sizeof *rest);
    if (!loops || !rest) return nomem(c);
    uint32_t nloops = 0;
    for (uint32_t t = 0; t < ntrig && !st; t++) {
        uint32_t nr = 0;
        for (uint32_t i = 0; i < ntags && !st; i++)
            if (of[i] == t) st = tag_rest(c, &tags[i], trig[t].n, depth, &rest[nr++]);
        if (st || nr == 0) continue; /* a trigger without tags only stops free text: it may not appear */
        sv_ast_t *k[2];
        st = first(c, p, trig[t], &k[0]);
        if (!st) st = alt(c, rest, nr, &k[1]);
        if (!st) st = cat(c, k, 2, &loops[nloops++]);
    }
    sv_ast_t *loop = NULL, *close = NULL;
    if (!st) st = alt(c, loops, nloops, &loop);
    if (st) return st;
    if (nends) {
        sv_ast_t **cl = sv_arena_alloc(c->a, nends * sizeof *cl);
        if (!cl) return nomem(c);
        for (uint32_t i = 0; i < nends && !st; i++) st = first(c, p, ends[i], &cl[i]);
        if (!st) st = alt(c, cl, nends, &close);
    } else {
        st = embed(c, p, &close);
    }
    if (st) return st;
    if (stop_after_first) { /* text, then at most one tag, which ends the structure */
        sv_ast_t *k[2] = {loop, end_alt}, *one;
        st = cat(c, k, nends ? 2 : 1, &one);
        sv_ast_t *a2[2] = {close, one};
        if (!st) st = alt(c, a2, 2, out);
        return st;
    }
    sv_ast_t *k[3];
    uint32_t n = 0;
    if (at_least_one) k[n++] = any_tag; /* XGrammar: the first tag opens the output, no text before it */
    k[n] = sv_ast_repeat(c->a, loop, 0, SV_AST_INF);
    if (!k[n++]) return nomem(c);
    k[n++] = close;
    return cat(c, k, n, out);
}

/* ---- formats ---------------------------------------------------------------- */

static sv_status elements(cx_t *c, json_t *f, json_t **el) {
    *el = json_object_get(f, "elements");
    if (json_is_array(*el) && json_array_size(*el) > 0) return SV_OK;
    size_t m = push(c, "elements");
    sv_status st = fail(c, SV_ERR_SYNTAX, "\"elements\" must be a non-empty list of formats");
    pop(c, m);
    return st;
}

/* A JSON Schema (an object, a boolean, or its JSON text) compiled flat,
 * embedded; the pointer is the schema's. */
static sv_status schema_leaf(cx_t *c, json_t *s, sv_ast_t **out) {
    char *text = NULL;
    if (json_is_string(s)) text = strndup(json_string_value(s), json_string_length(s));
    else if (json_is_object(s) || json_is_boolean(s)) text = json_dumps(s, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    else return fail(c, SV_ERR_SYNTAX, s ? "a schema must be an object, a boolean, or its JSON text" : "the schema is required");
    if (!text) return nomem(c);
    sv_fsm_limits_t l;
    sv_error_t e;
    sv_error_clear(&e);
    sv_dfa_t *d = NULL;
    sv_status st = left(c, &l);
    if (!st) {
        sv_schema_opts_t so = c->so;
        so.lim = l;
        st = sv_schema_compile(text, strlen(text), &so, &d, NULL, &e);
        if (st) st = sub_fail(c, st, &e);
    }
    free(text);
    if (!st && sv_dfa_num_parts(d) > 1) { /* any_calls is off: the compiler promises none */
        sv_dfa_destroy(d);
        st = fail(c, SV_ERR_INTERNAL, "the schema compiled to a program with calls, which cannot be embedded");
    }
    if (st) return st;
    if ((st = keep_dfa(c, d))) return st;
    return embed(c, d, out);
}

/* A grammar with recursive rules (its compile made a program): its start
 * rule as an AST whose calls name parts c->next_id + 1 .., kept for the
 * link at the end. */
static sv_status lowered_grammar(cx_t *c, str_t s, const sv_fsm_limits_t *l, sv_ast_t **out) {
    if (c->ngrammars == c->capgrammars) {
        uint32_t cap = c->capgrammars ? 2 * c->capgrammars : 4;
        sv_grammar_lowered_t **g = realloc(c->grammars, cap * sizeof *g);
        if (!g) return nomem(c);
        c->grammars = g;
        c->capgrammars = cap;
    }
    sv_error_t e;
    sv_error_clear(&e);
    sv_grammar_lowered_t *g;
    sv_status st = sv_grammar_lower(SV_GRAMMAR_AUTO, s.s, s.n, l, c->next_id, &g, &e);
    if (st) return sub_fail(c, st, &e);
    c->grammars[c->ngrammars++] = g;
    c->next_id += sv_grammar_lowered_parts(g);
    *out = sv_grammar_lowered_ast(g);
    return SV_OK;
}

/* The link's resolver: call id's part, from the grammar that owns it. */
static const sv_dfa_t *grammar_part(void *ctx, uint32_t id, sv_error_t *err) {
    cx_t *c = ctx;
    uint32_t base = 0;
    for (uint32_t i = 0; i < c->ngrammars; i++) {
        uint32_t n = sv_grammar_lowered_parts(c->grammars[i]);
        if (id > base && id <= base + n) return sv_grammar_lowered_part(c->grammars[i], id, err);
        base += n;
    }
    sv_error_set(err, SV_ERR_INTERNAL, -1, "internal: call %u names no grammar's rule", id);
    return NULL;
}

static sv_status visit_leaf(cx_t *c, json_t *f, const char *t, sv_ast_t **out) {
    sv_fsm_limits_t l;
    sv_error_t e;
    sv_error_clear(&e);
    sv_dfa_t *d = NULL;
    sv_status st;
    if (!strcmp(t, "regex")) {
        static const char *const keys[] = {"type", "pattern", NULL};
        str_t s;
        st = check_keys(c, f, t, keys);
        if (!st) st = get_str(c, f, "pattern", true, false, &s);
        if (!st) st = left(c, &l);
        if (st) return st;
        size_t m = push(c, "pattern");
        st = sv_regex_compile(s.s, s.n, &l, &d, &e);
        if (st) st = sub_fail(c, st, &e);
        pop(c, m);
    } else if (!strcmp(t, "grammar")) {
        static const char *const keys[] = {"type", "grammar", NULL};
        str_t s;
        st = check_keys(c, f, t, keys);
        if (!st) st = get_str(c, f, "grammar", true, true, &s);
        if (!st) st = left(c, &l);
        if (st) return st;
        size_t m = push(c, "grammar");
        st = sv_grammar_compile(s.s, s.n, &l, &d, &e);
        if (st) st = sub_fail(c, st, &e);
        if (!st && sv_dfa_num_parts(d) > 1) {
            /* Recursive rules: the grammar's calls go into the whole, which
             * links them at the end (compile). */
            sv_dfa_destroy(d);
            st = lowered_grammar(c, s, &l, out);
            pop(c, m);
            return st;
        }
        pop(c, m);
    } else { /* json_schema */
        static const char *const keys[] = {"type", "json_schema", NULL};
        st = check_keys(c, f, t, keys);
        if (st) return st;
        size_t m = push(c, "json_schema");
        st = schema_leaf(c, json_object_get(f, "json_schema"), out);
        pop(c, m);
        return st;
    }
    if (st) return st;
    if ((st = keep_dfa(c, d))) return st;
    return embed(c, d, out);
}

static sv_status visit(cx_t *c, json_t *f, const str_t *ends, uint32_t nends, uint32_t depth, sv_ast_t **out) {
    if (depth > SV_STAG_MAX_DEPTH)
        return fail(c, SV_ERR_BUDGET, "formats nest deeper than %u levels", SV_STAG_MAX_DEPTH);
    if (++c->nformats > SV_STAG_MAX_FORMATS)
        return fail(c, SV_ERR_BUDGET, "the structural tag has more than %u formats", SV_STAG_MAX_FORMATS);
    if (!json_is_object(f)) return fail(c, SV_ERR_SYNTAX, "a format must be an object");
    const char *t = type_of(f);
    if (!t) {
        size_t m = push(c, "type");
        sv_status st = fail(c, SV_ERR_SYNTAX, "a format needs a \"type\" string");
        pop(c, m);
        return st;
    }
    sv_status st;
    if (!strcmp(t, "const_string")) {
        static const char *const keys[] = {"type", "value", NULL};
        str_t s;
        st = check_keys(c, f, t, keys);
        if (!st) st = get_str(c, f, "value", true, false, &s);
        return st ? st : lit(c, s.s, s.n, out);
    }
    if (!strcmp(t, "regex") || !strcmp(t, "grammar") || !strcmp(t, "json_schema")) return visit_leaf(c, f, t, out);
    if (!strcmp(t, "sequence") || !strcmp(t, "or")) {
        static const char *const keys[] = {"type", "elements", NULL};
        json_t *el;
        if ((st = check_keys(c, f, t, keys)) || (st = elements(c, f, &el))) return st;
        bool seq = !strcmp(t, "sequence");
        size_t n = json_array_size(el);
        if (n > SV_STAG_MAX_FORMATS) return fail(c, SV_ERR_BUDGET, "too many elements (%zu)", n);
        sv_ast_t **k = sv_arena_alloc(c->a, n * sizeof *k);
        if (!k) return nomem(c);
        bool any_unl = false, all_unl = true;
        for (size_t i = 0; i < n; i++) {
            bool u = unlimited(json_array_get(el, i), depth + 1);
            any_unl |= u;
            all_unl &= u;
            if (seq && u && i + 1 < n) {
                size_t m = push(c, "elements");
                push_index(c, i);
                st = fail(c, SV_ERR_UNSUPPORTED, "only the last element of a sequence may read to the end "
                          "(any_text, triggered_tags, tags_with_separator, or a sequence or or ending in one): "
                          "put it inside a tag, whose end string stops it");
                pop(c, m);
                return st;
            }
        }
        if (!seq && any_unl && !all_unl) {
            size_t m = push(c, "elements");
            st = fail(c, SV_ERR_UNSUPPORTED, "an or mixes formats that read to the end (any_text, triggered_tags, "
                      "tags_with_separator) with formats that do not; make all of them one kind");
            pop(c, m);
            return st;
        }
        size_t m = push(c, "elements");
        for (size_t i = 0; i < n; i++) {
            size_t m2 = push_index(c, i);
            bool last = !seq || i + 1 == n;
            st = visit(c, json_array_get(el, i), last ? ends : NULL, last ? nends : 0, depth + 1, &k[i]);
            pop(c, m2);
            if (st) break;
        }
        pop(c, m);
        if (st) return st;
        return seq ? cat(c, k, (uint32_t)n, out) : alt(c, k, (uint32_t)n, out);
    }
    if (!strcmp(t, "tag")) {
        tag_t tag;
        if ((st = read_tag(c, f, false, &tag))) return st;
        tag.list_key = NULL;
        return tag_rest(c, &tag, 0, depth, out);
    }
    if (!strcmp(t, "any_text")) {
        static const char *const keys[] = {"type", "excludes", NULL};
        str_t *s = NULL;
        uint32_t n = 0;
        if ((st = check_keys(c, f, t, keys)) || (st = get_strs(c, f, "excludes", false, "excluded string", &s, &n)))
            return st;
        str_t *stops = sv_arena_alloc(c->a, (n + nends + 1) * sizeof *stops);
        if (!stops) return nomem(c);
        for (uint32_t i = 0; i < nends; i++) stops[i] = ends[i];
        if (n) memcpy(stops + nends, s, n * sizeof *s);
        if ((st = check_stops(c, stops, n + nends))) return st;
        const sv_dfa_t *p;
        if ((st = avoid(c, stops, n + nends, &p))) return st;
        if (!nends) return embed(c, p, out);
        sv_ast_t **cl = sv_arena_alloc(c->a, nends * sizeof *cl);
        if (!cl) return nomem(c);
        for (uint32_t i = 0; i < nends && !st; i++) st = first(c, p, ends[i], &cl[i]);
        return st ? st : alt(c, cl, nends, out);
    }
    if (!strcmp(t, "triggered_tags")) {
        static const char *const keys[] = {"type", "triggers", "tags", "at_least_one", "stop_after_first", "excludes", NULL};
        str_t *trig = NULL, *excl = NULL;
        uint32_t ntrig = 0, nexcl = 0, ntags = 0;
        tag_t *tags = NULL;
        bool alo, saf;
        if ((st = check_keys(c, f, t, keys)) || (st = get_strs(c, f, "triggers", true, "trigger", &trig, &ntrig)) ||
            (st = read_tags(c, f, "tags", false, &tags, &ntags)) || (st = get_bool(c, f, "at_least_one", &alo)) ||
            (st = get_bool(c, f, "stop_after_first", &saf)) ||
            (st = get_strs(c, f, "excludes", false, "excluded string", &excl, &nexcl)))
            return st;
        return triggered(c, trig, ntrig, tags, ntags, excl, nexcl, alo, saf, "triggers", ends, nends, depth, out);
    }
    if (!strcmp(t, "tags_with_separator")) {
        static const char *const keys[] = {"type", "tags", "separator", "at_least_one", "stop_after_first", NULL};
        tag_t *tags = NULL;
        uint32_t ntags = 0;
        str_t sep;
        bool alo, saf;
        if ((st = check_keys(c, f, t, keys)) || (st = read_tags(c, f, "tags", false, &tags, &ntags)) ||
            (st = get_str(c, f, "separator", true, false, &sep)) || (st = get_bool(c, f, "at_least_one", &alo)) ||
            (st = get_bool(c, f, "stop_after_first", &saf)))
            return st;
        sv_ast_t **full = sv_arena_alloc(c->a, ntags * sizeof *full), *any_tag, *end_alt = NULL, *body;
        if (!full) return nomem(c);
        for (uint32_t i = 0; i < ntags && !st; i++) st = tag_rest(c, &tags[i], 0, depth, &full[i]);
        if (!st) st = alt(c, full, ntags, &any_tag);
        if (!st) st = nends ? alt_lits(c, ends, nends, &end_alt) : cat(c, NULL, 0, &end_alt);
        if (st) return st;
        /* XGrammar: a separator equal to an end string ends the list after one tag */
        for (uint32_t i = 0; i < nends; i++) saf |= ends[i].n == sep.n && !memcmp(ends[i].s, sep.s, sep.n);
        if (saf) {
            body = any_tag;
        } else {
            sv_ast_t *k[2], *s;
            st = lit(c, sep.s, sep.n, &k[0]);
            k[1] = any_tag;
            if (!st) st = cat(c, k, 2, &s);
            sv_ast_t *r = st ? NULL : sv_ast_repeat(c->a, s, 0, SV_AST_INF);
            if (!st && !r) st = nomem(c);
            sv_ast_t *k2[2] = {any_tag, r};
            if (!st) st = cat(c, k2, 2, &body);
            if (st) return st;
        }
        sv_ast_t *k[2] = {body, end_alt}, *one;
        if ((st = cat(c, k, 2, &one))) return st;
        if (alo) {
            *out = one;
            return SV_OK;
        }
        sv_ast_t *a2[2] = {one, end_alt};
        return alt(c, a2, 2, out);
    }
    size_t m = push(c, "type");
    st = fail(c, SV_ERR_UNSUPPORTED, "unknown format type \"%s\" (const_string, json_schema, grammar, regex, sequence, "
              "or, tag, any_text, triggered_tags, tags_with_separator)", t);
    pop(c, m);
    return st;
}

/* The legacy form: structures (each {begin, schema, end}) and triggers. */
static sv_status legacy(cx_t *c, json_t *root, sv_ast_t **out) {
    str_t *trig = NULL;
    uint32_t ntrig = 0, ntags = 0;
    tag_t *tags = NULL;
    sv_status st = get_strs(c, root, "triggers", true, "trigger", &trig, &ntrig);
    if (!st) st = read_tags(c, root, "structures", true, &tags, &ntags);
    if (st) return st;
    return triggered(c, trig, ntrig, tags, ntags, NULL, 0, false, false, "triggers", NULL, 0, 0, out);
}

static sv_status compile(cx_t *c, const char *json, size_t len, sv_dfa_t **out) {
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root) {
        sv_error_set(c->err, SV_ERR_SYNTAX, (long)je.position, "the structural tag is not JSON: %s (line %d, column %d)",
                     je.text, je.line, je.column);
        return SV_ERR_SYNTAX;
    }
    sv_status st = SV_OK;
    sv_ast_t *top = NULL;
    const char *t = type_of(root);
    if (!json_is_object(root)) {
        st = fail(c, SV_ERR_SYNTAX, "a structural tag must be an object");
    } else if (!t || strcmp(t, "structural_tag")) {
        push(c, "type");
        st = fail(c, SV_ERR_SYNTAX, "a structural tag's \"type\" must be \"structural_tag\"");
    } else if (json_object_get(root, "format")) {
        static const char *const keys[] = {"type", "format", NULL};
        st = check_keys(c, root, "structural_tag", keys);
        push(c, "format");
        if (!st) st = visit(c, json_object_get(root, "format"), NULL, 0, 0, &top);
    } else if (json_object_get(root, "structures")) {
        static const char *const keys[] = {"type", "structures", "triggers", NULL};
        st = check_keys(c, root, "structural_tag", keys);
        if (!st) st = legacy(c, root, &top);
    } else {
        st = fail(c, SV_ERR_SYNTAX, "a structural tag needs \"format\" (XGrammar's format) or \"structures\" and "
                                    "\"triggers\" (the legacy form)");
    }
    if (!st) {
        sv_fsm_limits_t l;
        st = left(c, &l);
        sv_error_t e;
        sv_error_clear(&e);
        pop(c, 0);
        if (!st) st = sv_dfa_from_ast(top, &l, out, &e);
        bool linking = !st && sv_dfa_has_markers(*out);
        if (linking) {
            /* Recursive grammars inside: link their calls (fsm/program.c). */
            sv_dfa_t *raw = *out;
            *out = NULL;
            if (!(st = left(c, &l))) st = sv_program_link(raw, grammar_part, c, &l, out, &e);
            sv_dfa_destroy(raw);
        }
        if (st == SV_ERR_EMPTY)
            st = fail(c, st, "the structural tag matches no string");
        else if (st == SV_ERR_UNSUPPORTED && linking)
            st = fail(c, st, "a grammar's recursive rules cannot be told apart by the next character where the "
                             "structural tag uses it (%s); what follows the grammar must not start with a "
                             "character the grammar could go on with", e.message);
        else if (st && st != SV_ERR_TIMEOUT)
            sub_fail(c, st, &e);
        else if (st)
            fail(c, st, "compiling the structural tag exceeds the time budget of %llu ms",
                 (unsigned long long)((c->lim.time_budget_us ? c->lim.time_budget_us : c->lim.max_time_us) / 1000));
    }
    json_decref(root);
    return st;
}

sv_status sv_structural_tag_compile(const char *json, size_t len, const sv_schema_opts_t *o, sv_dfa_t **out,
                                    sv_error_t *err) {
    sv_error_clear(err);
    *out = NULL;
    cx_t c = {.err = err, .t0_ns = sv_now_ns()};
    if (o) c.so = *o;
    else sv_schema_opts_default(&c.so);
    c.so.any_calls = false; /* contents are embedded: flat automata only */
    c.lim = c.so.lim;
    sv_memacct_t acct; /* the whole compile within lim.max_memory (util/memacct.h) */
    bool own = sv_memacct_begin(&acct, sv_memacct_limit_for(c.lim.max_memory, len));
    c.a = sv_arena_create(0);
    sv_status st = c.a ? compile(&c, json, len, out) : sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    for (uint32_t i = 0; i < c.ndfas; i++) sv_dfa_destroy(c.dfas[i]);
    free(c.dfas);
    for (uint32_t i = 0; i < c.ngrammars; i++) sv_grammar_lowered_free(c.grammars[i]);
    free(c.grammars);
    sv_arena_destroy(c.a);
    if (st == SV_ERR_NOMEM && own && acct.refused)
        st = sv_error_set(err, SV_ERR_BUDGET, -1, "compiling the structural tag exceeds the memory budget of %zu bytes",
                          c.lim.max_memory);
    if (st && own) st = sv_memacct_outcome(st, &acct, err);
    if (own) {
        if (!st) sv_dfa_uncharge(*out);
        sv_memacct_end(&acct);
    }
    if (st) {
        sv_dfa_destroy(*out);
        *out = NULL;
    }
    return st;
}
