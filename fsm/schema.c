/* schema.c — JSON Schema to DFA: loading, $ref, keyword dispatch and the
 * boolean keywords.
 *
 * A schema denotes a set of JSON values; we build the regular language of
 * their canonical spellings (see schema.h). The language of a schema object
 * is the union over the types it allows of the type's language (null,
 * boolean, number/integer, string, array, object), each shaped by the
 * keywords that apply to that type; const/enum, allOf, anyOf, oneOf, not and
 * if/then/else then combine languages:
 *   anyOf       union (an AST alternation: no product needed)
 *   allOf       intersection (DFA product)
 *   not S       U \ L(S), where U is the universe of canonical spellings at
 *               this location (one per value, keys in the location's order)
 *   oneOf       union when the branches are pairwise disjoint (checked by
 *               products), else the strings in exactly one branch, each
 *               branch first restricted to U
 *   if/then/else (L(if) ∩ L(then)) ∪ ((U \ L(if)) ∩ L(else))
 * Differences are exact only if L(S) holds the canonical spelling of every
 * value valid for S; that holds by construction, except where a recursive
 * $ref was cut at the depth limit, which makes a difference over it an error.
 *
 * Object keys: one fixed order per instance location, computed from all the
 * schemas that apply there (sv_loc_t), so that products and differences
 * compare like with like. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/hash.h"
#include "util/memacct.h"
#include "json_num.h"
#include "regex.h"
#include "fsm/internal/schema_internal.h"
#include "fsm/internal/part_jobs.h"

void sv_schema_opts_default(sv_schema_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->ws = SV_WS_CANONICAL;
    o->max_ref_depth = 5;
    o->max_any_depth = 3; /* auto reaches deeper but compiles several times slower (BENCHMARKS.md) */
    o->any_depth_total = 6;
    o->any_deep_levels = 3;
    o->any_deep_arrays = 1;
    o->max_string_length = 512;
    o->any_calls = true;
    o->extra_key_orders = true;
    sv_fsm_limits_default(&o->lim);
}

uint32_t sv_sc_any_depth(sctx_t *c, uint32_t level) {
    if (c->o->max_any_depth != SV_SCHEMA_ANY_DEPTH_AUTO) return c->o->max_any_depth;
    uint32_t t = c->o->any_depth_total;
    uint32_t d = level < t ? t - level : 0;
    if (d <= SV_SCHEMA_ANY_DEPTH_MIN) return SV_SCHEMA_ANY_DEPTH_MIN;
    c->deep_any = true;
    return d;
}

uint32_t sv_sc_child_level(const sctx_t *c, const sv_loc_t *loc) {
    /* Levels past the one where the depth bottoms out are all alike (so the
     * memo shares their languages); with a fixed depth, all levels are. */
    uint32_t cap = 0, t = c->o->any_depth_total;
    if (c->o->max_any_depth == SV_SCHEMA_ANY_DEPTH_AUTO && t > SV_SCHEMA_ANY_DEPTH_MIN) cap = t - SV_SCHEMA_ANY_DEPTH_MIN;
    return loc->level + 1 < cap ? loc->level + 1 : cap;
}

/* ---- errors and pointers --------------------------------------------------- */

sv_status sv_sc_fail(sctx_t *c, sv_status code, const char *keyword, const char *fmt, ...) {
    char msg[sizeof c->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->err) {
        c->err->code = code;
        c->err->offset = -1;
        snprintf(c->err->message, sizeof c->err->message, "%s", msg);
        snprintf(c->err->keyword, sizeof c->err->keyword, "%s", keyword ? keyword : "");
        if (keyword && *keyword)
            snprintf(c->err->pointer, sizeof c->err->pointer, "%.*s/%s", (int)c->ptr_len, c->ptr, keyword);
        else
            snprintf(c->err->pointer, sizeof c->err->pointer, "%.*s", (int)c->ptr_len, c->ptr);
    }
    return code;
}

const sv_fsm_limits_t *sv_sc_lim(sctx_t *c) {
    c->lim_now = c->o->lim;
    if (c->deadline_ns) {
        uint64_t now = sv_now_ns();
        c->lim_now.max_time_us = now >= c->deadline_ns ? 1 : (c->deadline_ns - now) / 1000 + 1;
        c->lim_now.time_budget_us = c->o->lim.max_time_us;
    }
    return &c->lim_now;
}

sv_status sv_sc_nomem(sctx_t *c) {
    if (sv_memacct_refused()) /* an allocation the compile's account refused */
        return sv_sc_fail(c, SV_ERR_BUDGET, NULL, "the compile exceeds its memory budget of %zu bytes", c->o->lim.max_memory);
    return sv_sc_fail(c, SV_ERR_NOMEM, NULL, "out of memory compiling the schema");
}

size_t sv_sc_push(sctx_t *c, const char *token) {
    size_t keep = c->ptr_len;
    if (c->ptr_len + 2 >= sizeof c->ptr) return keep;
    c->ptr[c->ptr_len++] = '/';
    for (const char *t = token; *t && c->ptr_len + 3 < sizeof c->ptr; t++) {
        if (*t == '~') c->ptr[c->ptr_len++] = '~', c->ptr[c->ptr_len++] = '0';
        else if (*t == '/') c->ptr[c->ptr_len++] = '~', c->ptr[c->ptr_len++] = '1';
        else c->ptr[c->ptr_len++] = *t;
    }
    c->ptr[c->ptr_len] = '\0';
    return keep;
}

void sv_sc_pop(sctx_t *c, size_t len) {
    c->ptr_len = len;
    c->ptr[len] = '\0';
}

static size_t push_index(sctx_t *c, size_t i) {
    char b[24];
    snprintf(b, sizeof b, "%zu", i);
    return sv_sc_push(c, b);
}

sv_status sv_sc_dfa(sctx_t *c, sv_ast_t *ast, sv_dfa_t **out) {
    if (!ast) return sv_sc_nomem(c);
    sv_error_t e;
    sv_error_clear(&e);
    sv_status st = sv_dfa_from_ast(ast, sv_sc_lim(c), out, &e);
    if (st == SV_ERR_EMPTY) return sv_sc_fail(c, SV_ERR_EMPTY, NULL, "the schema at this location matches no value");
    if (st) return sv_sc_fail(c, st, NULL, "%s", e.message);
    if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, *out)) return sv_sc_nomem(c);
    /* The node now stands for its minimized DFA: an automaton that holds it
     * later (a member value, a tool's arguments, a union of tools) embeds
     * these states instead of building the node's NFA again, which was most
     * of a big constraint's subset construction. Same language, same arena
     * lifetime; schema ASTs hold no ^/$ assertions, whose meaning an
     * embedded DFA would change. */
    *ast = (sv_ast_t){.kind = SV_AST_DFA, .dfa = *out};
    return SV_OK;
}

/* ---- keywords ----------------------------------------------------------------- */

/* Keywords compiled by this file or the container/text files. */
static const char *const handled[] = {
    "type", "enum", "const", "nullable",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependencies",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains", "minContains", "maxContains",
    "uniqueItems",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
    "minLength", "maxLength", "pattern", "format", "dependentSchemas",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "$defs", "definitions",
};

/* Keywords that constrain instances and that sieve refuses. */
static const char *const refused[] = {
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
};

static bool in_list(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(k, list[i]) == 0) return true;
    return false;
}

static void note_ignored(sctx_t *c, const char *k) {
    if (!c->info) return;
    uint32_t n = c->info->nignored < SV_SCHEMA_MAX_IGNORED ? c->info->nignored : SV_SCHEMA_MAX_IGNORED;
    for (uint32_t i = 0; i < n; i++)
        if (strncmp(c->info->ignored[i], k, sizeof c->info->ignored[i] - 1) == 0) return;
    if (c->info->nignored < SV_SCHEMA_MAX_IGNORED)
        snprintf(c->info->ignored[c->info->nignored], sizeof c->info->ignored[0], "%s", k);
    c->info->nignored++;
}

/* Checks every keyword of s: refused ones fail, unknown ones are noted. */
static sv_status check_keywords(sctx_t *c, json_t *s) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (in_list(k, handled, sizeof handled / sizeof handled[0])) continue;
        if (in_list(k, refused, sizeof refused / sizeof refused[0])) {
            if (strcmp(k, "unevaluatedProperties") == 0 || strcmp(k, "unevaluatedItems") == 0) {
                if (json_is_true(v)) continue; /* allows everything */
            }
            return sv_sc_fail(c, SV_ERR_UNSUPPORTED, k, "the keyword %s is not supported", k);
        }
        note_ignored(c, k);
    }
    json_t *u = json_object_get(s, "uniqueItems");
    if (json_is_true(u)) {
        json_t *mx = json_object_get(s, "maxItems");
        if (!(mx && json_is_number(mx) && json_number_value(mx) <= 1))
            return sv_sc_fail(c, SV_ERR_UNSUPPORTED, "uniqueItems",
                              "uniqueItems: true is not supported on arrays that may hold more than one item "
                              "(distinctness of unbounded items is not a regular language)");
    }
    return SV_OK;
}

/* ---- $ref ----------------------------------------------------------------------- */

/* ---- locations ---------------------------------------------------------------- */

typedef struct { json_t **v; uint32_t n, cap; } jvec_t;

static sv_status jvec_add(sctx_t *c, jvec_t *v, json_t *x) {
    for (uint32_t i = 0; i < v->n; i++)
        if (v->v[i] == x) return SV_OK;
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 8;
        json_t **nv = sv_arena_alloc(c->arena, cap * sizeof *nv);
        if (!nv) return sv_sc_nomem(c);
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return SV_OK;
}

static sv_status closure_add(sctx_t *c, jvec_t *v, json_t *s, int depth) {
    if (!json_is_object(s) || depth > 64) return SV_OK;
    uint32_t before = v->n;
    sv_status st = jvec_add(c, v, s);
    if (st || v->n == before) return st; /* already there */
    static const char *const lists[] = {"allOf", "anyOf", "oneOf"};
    for (int l = 0; l < 3; l++) {
        json_t *a = json_object_get(s, lists[l]);
        for (size_t i = 0; json_is_array(a) && i < json_array_size(a); i++)
            if ((st = closure_add(c, v, json_array_get(a, i), depth + 1))) return st;
    }
    static const char *const singles[] = {"not", "if", "then", "else"};
    for (int l = 0; l < 4; l++)
        if ((st = closure_add(c, v, json_object_get(s, singles[l]), depth + 1))) return st;
    static const char *const dep_maps[] = {"dependentSchemas", "dependencies"};
    for (int l = 0; l < 2; l++) {
        json_t *m = json_object_get(s, dep_maps[l]), *x;
        const char *k;
        if (json_is_object(m)) json_object_foreach(m, k, x) if (!st && json_is_object(x)) st = closure_add(c, v, x, depth + 1);
        if (st) return st;
    }
    json_t *ref = json_object_get(s, "$ref");
    if (ref && json_is_string(ref)) {
        json_t *t;
        sv_error_t *keep = c->err;
        sv_error_t scratch;
        c->err = &scratch; /* unresolvable refs are reported where they are compiled */
        if (sv_sc_resolve_ref(c, s, json_string_value(ref), &t) == SV_OK) st = closure_add(c, v, t, depth + 1);
        c->err = keep;
    }
    return st;
}

static bool pattern_matches(sctx_t *c, const char *pattern, const char *key);

/* Member context. A free member value (a key the schema at hand gives no
 * schema, e.g. the base {"type": "object"} of a schema whose allOf names the
 * properties) would be any value nested at most max_any_depth levels; that
 * cut is needless where other schemas at the location constrain the member
 * anyway. The context K of a location is a set of schemas that every valid
 * value there satisfies: at the root, the root and what it applies
 * unconditionally (allOf entries, a $ref, a one-branch anyOf/oneOf: ctx_add);
 * at member k of a location with context K, the same closure of the schemas
 * K's members put on k (properties, patternProperties, additionalProperties).
 * Every object language built at a location gives a free member k the
 * intersection of the languages of K's schemas for k instead of the any-value.
 * That is exact: for values whose members satisfy K's member schemas (the
 * values that matter, since K's own languages are conjuncts of the result),
 * membership is unchanged in every language built at the location, positive
 * or subtracted by not/oneOf/if; and any value outside them is rejected by
 * the conjunct of K that it breaks (by induction on the value's depth). So
 * free members are cut only where no schema at all constrains them. */
static sv_status ctx_add(sctx_t *c, jvec_t *v, json_t *s, int depth) {
    if (!json_is_object(s) || depth > 64) return SV_OK;
    sv_status st;
    json_t *ref = json_object_get(s, "$ref"), *t;
    bool ref_only = ref && (c->draft <= 7 || json_object_size(s) == 1); /* siblings ignored */
    if (!ref_only) {
        uint32_t before = v->n;
        if ((st = jvec_add(c, v, s)) || v->n == before) return st;
        json_t *all = json_object_get(s, "allOf");
        for (size_t i = 0; json_is_array(all) && i < json_array_size(all); i++)
            if ((st = ctx_add(c, v, json_array_get(all, i), depth + 1))) return st;
        static const char *const single[] = {"anyOf", "oneOf"};
        for (int l = 0; l < 2; l++) {
            json_t *a = json_object_get(s, single[l]);
            if (json_is_array(a) && json_array_size(a) == 1 && (st = ctx_add(c, v, json_array_get(a, 0), depth + 1)))
                return st;
        }
    }
    if (json_is_string(ref)) {
        sv_error_t *keep = c->err, scratch;
        c->err = &scratch; /* unresolvable refs are reported where they are compiled */
        bool ok = sv_sc_resolve_ref(c, s, json_string_value(ref), &t) == SV_OK;
        c->err = keep;
        if (ok && (st = ctx_add(c, v, t, depth + 1))) return st;
    }
    return SV_OK;
}

sv_status sv_sc_loc_context(sctx_t *c, json_t *const *seeds, uint32_t n, sv_loc_t *loc) {
    jvec_t v = {0};
    sv_status st = SV_OK;
    for (uint32_t i = 0; i < n && !st; i++) st = ctx_add(c, &v, seeds[i], 0);
    if (st) return st;
    loc->ctx = v.v;
    loc->nctx = v.n;
    return SV_OK;
}

/* Whether subschema x accepts every value: true, {}, or only keywords sieve
 * ignores (annotations) beside a "type" that lists every JSON type, as
 * protocol descriptions write an untyped payload ({"type": ["array",
 * "boolean", "integer", "null", "number", "object", "string"]}). Such a
 * schema adds nothing where schemas meet (a member's allOf, a member's
 * context, an object's additionalProperties), and leaving it out spares a
 * product of the free-form value with the others. */
static bool unconstrained(json_t *x) {
    if (json_is_true(x)) return true;
    if (!json_is_object(x)) return false;
    const char *k;
    json_t *v;
    json_object_foreach(x, k, v) {
        if (!strcmp(k, "type")) {
            static const char *const all[] = {"array", "boolean", "null", "number", "object", "string"};
            if (!json_is_array(v)) return false;
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
                bool has = false;
                for (size_t j = 0; j < json_array_size(v) && !has; j++)
                    has = json_is_string(json_array_get(v, j)) && !strcmp(json_string_value(json_array_get(v, j)), all[i]);
                if (!has) return false;
            }
            continue;
        }
        if (!strcmp(k, "$defs") || !strcmp(k, "definitions")) continue;
        if (in_list(k, handled, sizeof handled / sizeof handled[0]) || in_list(k, refused, sizeof refused / sizeof refused[0]))
            return false;
    }
    return true;
}


sv_status sv_sc_ctx_sources(sctx_t *c, const sv_loc_t *loc, const char *key, json_t ***out, uint32_t *n) {
    jvec_t v = {0};
    sv_status st = SV_OK;
    for (uint32_t i = 0; i < loc->nctx && !st; i++) {
        json_t *s = loc->ctx[i];
        json_t *props = json_object_get(s, "properties"), *p = json_is_object(props) ? json_object_get(props, key) : NULL;
        bool matched = p != NULL;
        if (p && !unconstrained(p)) st = jvec_add(c, &v, p);
        json_t *pp = json_object_get(s, "patternProperties"), *ps;
        const char *pat;
        if (json_is_object(pp)) json_object_foreach(pp, pat, ps) {
            if (!st && pattern_matches(c, pat, key)) {
                matched = true;
                if (!unconstrained(ps)) st = jvec_add(c, &v, ps);
            }
        }
        json_t *ap = json_object_get(s, "additionalProperties");
        if (!st && !matched && json_is_object(ap) && !unconstrained(ap)) st = jvec_add(c, &v, ap);
    }
    if (st) return st;
    *out = v.v;
    *n = v.n;
    return SV_OK;
}

sv_status sv_sc_loc_closure(sctx_t *c, json_t *const *seeds, uint32_t n, json_t *const *lits, uint32_t nlits,
                            sv_loc_t *out) {
    jvec_t v = {0}, l = {0};
    sv_status st = SV_OK;
    for (uint32_t i = 0; i < n && !st; i++) st = closure_add(c, &v, seeds[i], 0);
    for (uint32_t i = 0; i < nlits && !st; i++) st = jvec_add(c, &l, lits[i]);
    for (uint32_t i = 0; i < v.n && !st; i++) {
        json_t *cn = json_object_get(v.v[i], "const"), *en = json_object_get(v.v[i], "enum");
        if (cn) st = jvec_add(c, &l, cn);
        for (size_t j = 0; json_is_array(en) && j < json_array_size(en) && !st; j++) st = jvec_add(c, &l, json_array_get(en, j));
    }
    if (st) return st;
    *out = (sv_loc_t){v.v, v.n, l.v, l.n, NULL, 0, 1, 0};
    return SV_OK;
}

sv_status sv_sc_loc_property(sctx_t *c, const sv_loc_t *loc, const char *key, sv_loc_t *out) {
    jvec_t seeds = {0}, lits = {0};
    sv_status st = SV_OK;
    for (uint32_t i = 0; i < loc->n && !st; i++) {
        json_t *s = loc->v[i];
        json_t *props = json_object_get(s, "properties"), *p = props ? json_object_get(props, key) : NULL;
        bool matched = p != NULL;
        if (p) st = jvec_add(c, &seeds, p);
        json_t *pp = json_object_get(s, "patternProperties");
        const char *pat;
        json_t *ps;
        if (json_is_object(pp)) json_object_foreach(pp, pat, ps) {
            if (!st && pattern_matches(c, pat, key)) matched = true, st = jvec_add(c, &seeds, ps);
        }
        json_t *ap = json_object_get(s, "additionalProperties");
        if (!st && !matched && json_is_object(ap)) st = jvec_add(c, &seeds, ap);
    }
    for (uint32_t i = 0; i < loc->nlits && !st; i++) {
        json_t *x = json_is_object(loc->lits[i]) ? json_object_get(loc->lits[i], key) : NULL;
        if (x) st = jvec_add(c, &lits, x);
    }
    json_t **cs;
    uint32_t ncs;
    if (st || (st = sv_sc_loc_closure(c, seeds.v, seeds.n, lits.v, lits.n, out)) ||
        (st = sv_sc_ctx_sources(c, loc, key, &cs, &ncs)))
        return st;
    out->orders = loc->orders; /* the object at loc divides it among its members */
    out->level = sv_sc_child_level(c, loc);
    return sv_sc_loc_context(c, cs, ncs, out);
}

sv_status sv_sc_loc_item(sctx_t *c, const sv_loc_t *loc, uint32_t index, sv_loc_t *out) {
    jvec_t seeds = {0}, lits = {0};
    sv_status st = SV_OK;
    for (uint32_t i = 0; i < loc->n && !st; i++) {
        json_t *s = loc->v[i];
        json_t *prefix = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
        json_t *tuple = json_is_array(prefix) ? prefix : json_is_array(items) ? items : NULL;
        json_t *rest = json_is_array(prefix) ? items : json_is_array(items) ? json_object_get(s, "additionalItems") : items;
        if (tuple && index < json_array_size(tuple)) st = jvec_add(c, &seeds, json_array_get(tuple, index));
        else if (json_is_object(rest)) st = jvec_add(c, &seeds, rest);
        json_t *cont = json_object_get(s, "contains");
        if (!st && json_is_object(cont)) st = jvec_add(c, &seeds, cont);
    }
    /* Literal arrays: the item at this index; for the shared "rest" index,
     * every item from there on. */
    for (uint32_t i = 0; i < loc->nlits && !st; i++) {
        json_t *a = loc->lits[i];
        if (!json_is_array(a)) continue;
        for (size_t j = index; j < json_array_size(a) && !st; j++) st = jvec_add(c, &lits, json_array_get(a, j));
    }
    if (st || (st = sv_sc_loc_closure(c, seeds.v, seeds.n, lits.v, lits.n, out))) return st;
    out->orders = loc->orders;
    out->level = sv_sc_child_level(c, loc);
    return SV_OK;
}

typedef struct sv_patcache { const char *pattern; sv_dfa_t *dfa; sv_status st; } patcache_t;

sv_status sv_sc_pattern_dfa(sctx_t *c, const char *pattern, const char *kw, sv_dfa_t **out) {
    for (uint32_t i = 0; i < c->npats; i++)
        if (strcmp(c->pats[i].pattern, pattern) == 0) {
            *out = c->pats[i].dfa;
            if (c->pats[i].st) return sv_sc_fail(c, c->pats[i].st, kw, "pattern /%s/ does not compile", pattern);
            return SV_OK;
        }
    sv_ast_t *p, *any;
    sv_error_t e;
    sv_error_clear(&e);
    sv_dfa_t *d = NULL;
    sv_status st = sv_regex_parse(pattern, strlen(pattern), c->arena, &p, &e);
    if (st) {
        sv_sc_fail(c, st, kw, "pattern /%s/: %s", pattern, e.message);
    } else if (!(st = sv_regex_parse("[^]*", 4, c->arena, &any, c->err))) {
        sv_ast_t *k[3] = {any, p, any};
        st = sv_sc_dfa(c, sv_ast_cat(c->arena, k, 3), &d);
        if (st == SV_ERR_EMPTY) d = NULL, st = SV_OK;
    }
    if (st == SV_ERR_NOMEM || st == SV_ERR_TIMEOUT) return st;
    if (c->npats == c->cappats) {
        uint32_t cap = c->cappats ? c->cappats * 2 : 16;
        patcache_t *np = sv_arena_alloc(c->arena, cap * sizeof *np);
        if (!np) return sv_sc_nomem(c);
        if (c->npats) memcpy(np, c->pats, c->npats * sizeof *np);
        c->pats = np;
        c->cappats = cap;
    }
    c->pats[c->npats++] = (patcache_t){pattern, d, st};
    *out = d;
    return st;
}

/* Whether a patternProperties regex (search semantics) matches a key; a
 * pattern that does not compile matches nothing here and fails where the
 * patternProperties are compiled. */
static bool pattern_matches(sctx_t *c, const char *pattern, const char *key) {
    sv_dfa_t *d = NULL;
    sv_error_t *keep = c->err, scratch;
    c->err = &scratch;
    sv_status st = sv_sc_pattern_dfa(c, pattern, "patternProperties", &d);
    c->err = keep;
    return !st && d && sv_dfa_matches(d, (const uint8_t *)key, strlen(key));
}

/* ---- types ------------------------------------------------------------------- */

static int type_bit(const char *t) {
    static const struct { const char *n; int b; } map[] = {
        {"null", T_NULL}, {"boolean", T_BOOL}, {"object", T_OBJECT}, {"array", T_ARRAY},
        {"string", T_STRING}, {"number", T_NUMBER}, {"integer", T_INTEGER},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(t, map[i].n) == 0) return map[i].b;
    return 0;
}

static sv_status type_mask(sctx_t *c, json_t *s, int *mask) {
    json_t *t = json_object_get(s, "type");
    int m = 0;
    if (!t) {
        m = T_ALL;
    } else if (json_is_string(t)) {
        m = type_bit(json_string_value(t));
        if (!m) return sv_sc_fail(c, SV_ERR_SYNTAX, "type", "unknown type \"%s\"", json_string_value(t));
    } else if (json_is_array(t)) {
        for (size_t i = 0; i < json_array_size(t); i++) {
            json_t *x = json_array_get(t, i);
            int b = json_is_string(x) ? type_bit(json_string_value(x)) : 0;
            if (!b) return sv_sc_fail(c, SV_ERR_SYNTAX, "type", "type array entries must be type names");
            m |= b;
        }
    } else {
        return sv_sc_fail(c, SV_ERR_SYNTAX, "type", "type must be a string or an array of strings");
    }
    if (json_is_true(json_object_get(s, "nullable"))) m |= T_NULL;
    if (m & T_NUMBER) m &= ~T_INTEGER;
    *mask = m;
    return SV_OK;
}

/* Whether a JSON value has one of the types in mask (integer: any number
 * with an integral value). */
static bool value_has_type(sctx_t *c, json_t *v, int mask) {
    switch (json_typeof(v)) {
    case JSON_NULL: return mask & T_NULL;
    case JSON_TRUE: case JSON_FALSE: return mask & T_BOOL;
    case JSON_OBJECT: return mask & T_OBJECT;
    case JSON_ARRAY: return mask & T_ARRAY;
    case JSON_STRING: return mask & T_STRING;
    case JSON_INTEGER: return mask & (T_NUMBER | T_INTEGER);
    case JSON_REAL: {
        if (mask & T_NUMBER) return true;
        char buf[400];
        const char *d = sv_sc_decimal(c, v, buf, sizeof buf);
        return (mask & T_INTEGER) && d && !strchr(d, '.');
    }
    }
    return false;
}

static sv_status bound(sctx_t *c, json_t *s, const char *kw, const char *excl_kw, sv_num_bound_t *b) {
    json_t *x = json_object_get(s, kw), *e = json_object_get(s, excl_kw);
    char *buf;
    memset(b, 0, sizeof *b);
    /* draft 6+: exclusiveMinimum is a number; draft 4: a boolean modifier. */
    if (e && json_is_number(e)) {
        buf = sv_arena_alloc(c->arena, 400);
        if (!buf) return sv_sc_nomem(c);
        const char *d = sv_sc_decimal(c, e, buf, 400);
        if (!d) return sv_sc_fail(c, SV_ERR_UNSUPPORTED, excl_kw, "%s has an exponent beyond 4000", excl_kw);
        b->set = b->exclusive = true;
        b->value = d;
    }
    if (x) {
        if (!json_is_number(x)) return sv_sc_fail(c, SV_ERR_SYNTAX, kw, "%s must be a number", kw);
        buf = sv_arena_alloc(c->arena, 400);
        if (!buf) return sv_sc_nomem(c);
        const char *d = sv_sc_decimal(c, x, buf, 400);
        if (!d) return sv_sc_fail(c, SV_ERR_UNSUPPORTED, kw, "%s has an exponent beyond 4000", kw);
        buf = (char *)d;
        bool excl = json_is_true(e);
        if (b->set) {
            /* Both forms: keep the tighter bound. */
            double xv = json_number_value(x), ev = json_number_value(e);
            bool lower = strcmp(kw, "minimum") == 0;
            if ((lower && xv > ev) || (!lower && xv < ev)) b->exclusive = false, b->value = buf;
        } else {
            b->set = true;
            b->exclusive = excl;
            b->value = buf;
        }
    }
    return SV_OK;
}

static sv_status number_spelled(sctx_t *c, const sv_num_spec_t *sp, bool integer, sv_ast_t **out);

static sv_status number_lang(sctx_t *c, json_t *s, bool integer, sv_ast_t **out) {
    sv_num_spec_t spec = {.integer = integer};
    sv_status st;
    if ((st = bound(c, s, "minimum", "exclusiveMinimum", &spec.min)) || (st = bound(c, s, "maximum", "exclusiveMaximum", &spec.max)))
        return st;
    json_t *m = json_object_get(s, "multipleOf");
    char buf[400];
    if (m) {
        if (!json_is_number(m) || json_number_value(m) <= 0)
            return sv_sc_fail(c, SV_ERR_SYNTAX, "multipleOf", "multipleOf must be a positive number");
        spec.multiple_of = sv_sc_decimal(c, m, buf, sizeof buf);
        if (!spec.multiple_of) return sv_sc_fail(c, SV_ERR_UNSUPPORTED, "multipleOf", "multipleOf has an exponent beyond 4000");
    }
    if (!spec.min.set && !spec.max.set && !spec.multiple_of && !integer) return sv_sc_any_number(c, true, out);
    /* The same bounds are the same language: an API description writes
     * {"minimum": 0, "maximum": 99999999999.99} on a hundred amounts
     * (Github_ultra---o46393), each a number automaton built and
     * minimized. */
    char *key = NULL;
    {
        char kb[1300];
        int kn = snprintf(kb, sizeof kb, "%d|%d%d%s|%d%d%s|%s", integer, spec.min.set, spec.min.exclusive,
                          spec.min.set ? spec.min.value : "", spec.max.set, spec.max.exclusive,
                          spec.max.set ? spec.max.value : "", spec.multiple_of ? spec.multiple_of : "");
        if (kn > 0 && (size_t)kn < sizeof kb) {
            for (uint32_t i = 0; i < c->nnums; i++)
                if (strcmp(c->nums[i].key, kb) == 0) {
                    *out = c->nums[i].ast;
                    return SV_OK;
                }
            if (c->nnums < sizeof c->nums / sizeof c->nums[0] && (key = sv_arena_alloc(c->arena, (size_t)kn + 1)))
                memcpy(key, kb, (size_t)kn + 1);
        }
    }
    st = number_spelled(c, &spec, integer, out);
    if (!st && key) c->nums[c->nnums++] = (struct sv_numlang){key, *out};
    return st;
}

/* number_lang's language of one bound specification. */
static sv_status number_spelled(sctx_t *c, const sv_num_spec_t *sp, bool integer, sv_ast_t **out) {
    sv_num_spec_t spec = *sp;
    sv_status st;
    sv_error_t e;
    sv_error_clear(&e);
    st = sv_json_number(c->arena, &spec, sv_sc_lim(c), out, &e);
    if (st) {
        const char *kw = spec.multiple_of && st == SV_ERR_BUDGET ? "multipleOf" : spec.min.set ? "minimum" : "maximum";
        if (st == SV_ERR_EMPTY) return sv_sc_fail(c, st, kw, "no number satisfies the bounds: %s", e.message);
        return sv_sc_fail(c, st, kw, "%s", e.message);
    }
    if (integer) return sv_sc_integer_spellings(c, *out, out);
    st = sv_sc_python_numbers(c, *out, out);
    if (st == SV_ERR_EMPTY) return sv_sc_fail(c, st, "multipleOf", "no number satisfies the constraints");
    sv_ast_t *exp;
    if (st || (st = sv_json_number_exp(c->arena, &spec, &exp, c->err)) || !exp) return st;
    *out = sv_ast_alt(c->arena, (sv_ast_t *[]){*out, exp}, 2);
    return *out ? SV_OK : sv_sc_nomem(c);
}

static sv_status type_lang(sctx_t *c, json_t *s, int type, const sv_loc_t *loc, sv_ast_t **out) {
    switch (type) {
    case T_NULL: *out = sv_sc_lit(c, "null", 4); break;
    case T_BOOL:
        *out = sv_ast_alt(c->arena, (sv_ast_t *[]){sv_sc_lit(c, "true", 4), sv_sc_lit(c, "false", 5)}, 2);
        break;
    case T_NUMBER: return number_lang(c, s, false, out);
    case T_INTEGER: return number_lang(c, s, true, out);
    case T_STRING: return sv_sc_string(c, s, out);
    case T_ARRAY: return sv_sc_array(c, s, loc, false, out);
    case T_OBJECT: return sv_sc_object(c, s, loc, false, out);
    }
    return *out ? SV_OK : sv_sc_nomem(c);
}

/* ---- boolean keywords -------------------------------------------------------- */

/* The deepest nesting of containers in d's strings (1: an array or an
 * object of scalars), or SV_SC_CANON_DEPTH_MAX when deeper: a search over
 * (state, where the lexer is: outside strings, inside one, after a
 * backslash), each pair at the depth of its first path. d's strings are
 * JSON texts, where every path to a state nests alike; a call (marker
 * bytes) is a value of its own, not counted. 0 when out of memory (the
 * caller then keeps its own depth). */
static uint32_t json_depth(const sv_dfa_t *d) {
    enum { OUT, STR, ESC };
    uint32_t n = sv_dfa_num_states(d), k = d->nclasses, maxd = 0;
    /* what a class's bytes do outside strings and inside them */
    uint8_t kinds[256] = {0}; /* bit 0 open, 1 close, 2 quote, 3 backslash, 4 other */
    for (int b = 0; b < 256; b++)
        kinds[d->classes[b]] |= b == '[' || b == '{' ? 1 : b == ']' || b == '}' ? 2 : b == '"' ? 4 : b == '\\' ? 8 : 16;
    int32_t *depth = malloc((size_t)n * 3 * sizeof *depth);
    uint32_t *queue = malloc((size_t)n * 3 * sizeof *queue);
    if (!depth || !queue) {
        free(depth);
        free(queue);
        return 0;
    }
    for (size_t i = 0; i < (size_t)n * 3; i++) depth[i] = -1;
    uint32_t qh = 0, qt = 0;
    depth[0] = 0, queue[qt++] = 0; /* start state 0, outside strings */
    while (qh < qt && maxd < SV_SC_CANON_DEPTH_MAX) {
        uint32_t v = queue[qh++], x = v / 3, lex = v % 3;
        int32_t dx = depth[v];
        for (uint32_t cl = 0; cl < k; cl++) {
            int32_t y = d->trans[(size_t)x * k + cl];
            if (y < 0) continue;
            for (uint32_t kind = 1; kind <= 16; kind <<= 1) {
                if (!(kinds[cl] & kind)) continue;
                uint32_t nlex = lex;
                int32_t nd = dx;
                if (lex == ESC) nlex = STR;
                else if (lex == STR) nlex = kind == 4 ? OUT : kind == 8 ? ESC : STR;
                else if (kind == 4) nlex = STR;
                else if (kind == 1) nd++;
                else if (kind == 2 && nd > 0) nd--;
                uint32_t w = (uint32_t)y * 3 + nlex;
                if (depth[w] >= 0) continue;
                depth[w] = nd;
                if ((uint32_t)nd > maxd) maxd = (uint32_t)nd;
                queue[qt++] = w;
            }
        }
    }
    free(depth);
    free(queue);
    return maxd < SV_SC_CANON_DEPTH_MAX ? maxd : SV_SC_CANON_DEPTH_MAX;
}

/* The universe at a location: every value, canonical spellings, keys in the
 * location's order; containers nested to the depth of free-form values
 * there, or to `depth` where that is more. */
static sv_status universe_to(sctx_t *c, const sv_loc_t *loc, uint32_t depth, sv_dfa_t **out);

static sv_status universe(sctx_t *c, const sv_loc_t *loc, sv_dfa_t **out) { return universe_to(c, loc, 0, out); }

static bool narrower(sv_status st);

static sv_status universe_to(sctx_t *c, const sv_loc_t *loc, uint32_t depth, sv_dfa_t **out) {
    sv_ast_t *alts[6];
    sv_status st;
    sv_dfa_t *content;
    if ((st = sv_sc_any_number(c, false, &alts[0])) || (st = sv_sc_any_string_content(c, &content))) return st;
    alts[1] = sv_sc_quoted(c, content);
    alts[2] = sv_sc_lit(c, "null", 4);
    alts[3] = sv_ast_alt(c->arena, (sv_ast_t *[]){sv_sc_lit(c, "true", 4), sv_sc_lit(c, "false", 5)}, 2);
    uint32_t keep = c->canon_depth;
    c->canon_depth = sv_sc_any_depth(c, loc->level);
    if (depth > c->canon_depth) c->canon_depth = depth;
    c->no_calls++;
    st = sv_sc_array(c, NULL, loc, true, &alts[4]);
    if (!st) st = sv_sc_object(c, NULL, loc, true, &alts[5]);
    c->no_calls--;
    c->canon_depth = keep;
    if (st) return st;
    return sv_sc_dfa(c, sv_ast_alt(c->arena, alts, 6), out);
}

sv_status sv_sc_to_dfa(sctx_t *c, sv_ast_t *a, sv_dfa_t **out) {
    if (!a) return sv_sc_nomem(c); /* a constructor ran out of memory */
    if (a->kind == SV_AST_DFA && !a->json_escape) { *out = (sv_dfa_t *)a->dfa; return SV_OK; }
    sv_status st = sv_sc_dfa(c, a, out);
    if (st == SV_ERR_EMPTY) { *out = NULL; return SV_OK; }
    return st;
}

static const sv_dfa_t *resolve_part(void *ctx, uint32_t id, sv_error_t *err);

/* sv_sc_product, or with meets (op SV_DFA_AND) whether the product would
 * be empty, without building it. */
static sv_status product_or_meets(sctx_t *c, sv_dfa_t *a, sv_dfa_t *b, sv_dfa_op op, const char *kw, sv_dfa_t **out,
                                  bool *meets);

sv_status sv_sc_product(sctx_t *c, sv_dfa_t *a, sv_dfa_t *b, sv_dfa_op op, const char *kw, sv_dfa_t **out) {
    return product_or_meets(c, a, b, op, kw, out, NULL);
}

/* Whether L(a) and L(b) share a string (NULL: the empty language). */
static sv_status sc_meets(sctx_t *c, sv_dfa_t *a, sv_dfa_t *b, const char *kw, bool *meets) {
    *meets = false;
    if (!a || !b) return SV_OK;
    return product_or_meets(c, a, b, SV_DFA_AND, kw, NULL, meets);
}

static sv_status product_or_meets(sctx_t *c, sv_dfa_t *a, sv_dfa_t *b, sv_dfa_op op, const char *kw, sv_dfa_t **out,
                                  bool *meets) {
    if (!a) { *out = op == SV_DFA_OR || op == SV_DFA_XOR ? b : NULL; return SV_OK; }
    if (!b) { *out = op == SV_DFA_AND ? NULL : a; return SV_OK; }
    bool calls = c->calls && (sv_dfa_has_markers(a) || sv_dfa_has_markers(b));
    if (calls && !c->any_products) {
        /* A product over bytes would treat a call as a literal: redo the
         * whole compilation with flat free-form values. */
        c->calls_conflict = true;
        return sv_sc_fail(c, SV_ERR_UNSUPPORTED, kw, "a call reached a product (compiled again without calls)");
    }
    sv_error_t e;
    sv_error_clear(&e);
    /* Only the free-form part is called inside products. A side that calls
     * other parts (a big value, a `$ref` target), or that both calls the
     * free-form part and reads a bracket at one state (a union of a
     * free-form value and a spelled-out container), is first determinized
     * again with those calls expanded (program.c), the free-form part's
     * inner calls kept; if that cannot be done (a part still being
     * compiled, a recursive one, a budget), the product below refuses it
     * as before. */
    for (int side = 0; calls && side < 2; side++) {
        sv_dfa_t **x = side ? &b : &a, *nx = NULL;
        if (!sv_dfa_has_markers(*x)) continue;
        sv_error_t ee;
        sv_error_clear(&ee);
        sv_status xs = c->any_part ? sv_program_expand(*x, resolve_part, c, c->any_part, sv_sc_lim(c), &nx, &ee)
                                   : SV_ERR_UNSUPPORTED;
        if (xs == SV_ERR_NOMEM || xs == SV_ERR_TIMEOUT) return sv_sc_fail(c, xs, kw, "%s", ee.message);
        if (xs || !nx) continue;
        if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, nx)) return sv_sc_nomem(c); /* destroyed */
        *x = nx;
    }
    /* Free-form values called on both sides stay calls; where one side
     * spells values out, the other's call is expanded to match
     * (program_product.c). When that cannot be exact, or the expansions
     * outgrow a budget, the compilation is redone with flat free-form
     * values in products. */
    sv_status st;
    if (meets && calls && (sv_dfa_has_markers(a) || sv_dfa_has_markers(b)))
        st = sv_dfa_meets_calls(a, b, SV_SCHEMA_PART_ANY, c->any_part, sv_sc_lim(c), meets, &e);
    else if (meets)
        st = sv_dfa_meets(a, b, sv_sc_lim(c), meets, &e);
    else
        st = calls ? sv_dfa_product_calls(a, b, op, SV_SCHEMA_PART_ANY, c->any_part, sv_sc_lim(c), out, &e)
                   : sv_dfa_product(a, b, op, sv_sc_lim(c), out, &e);
    if (calls && (st == SV_ERR_UNSUPPORTED || (st == SV_ERR_BUDGET && !sv_memacct_pool_short()))) {
        c->calls_conflict = true;
        return sv_sc_fail(c, st, kw, "%s (compiled again with flat free-form values)", e.message);
    }
    if (st == SV_ERR_EMPTY) { /* callers decide whether empty is an error */
        if (out) *out = NULL;
        return SV_OK;
    }
    if (st) return sv_sc_fail(c, st, kw, "%s", e.message);
    if (meets) return SV_OK;
    if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, *out)) return sv_sc_nomem(c);
    return SV_OK;
}

void sv_sc_drop(sctx_t *c, sv_dfa_t *d) {
    /* the products of a chain are the arena's last registrations but for
     * what their own expansions registered (sv_program_expand above) */
    if (d) sv_arena_release(c->arena, d, 64);
}

/* The union of the two unions on top of an exact oneOf's stack (schema.c
 * lang_object), in their place. */
static sv_status join_top(sctx_t *c, sv_dfa_t **xs, size_t *n) {
    sv_dfa_t *u;
    sv_status st = sv_sc_product(c, xs[*n - 2], xs[*n - 1], SV_DFA_OR, "oneOf", &u);
    if (st) return st;
    sv_arena_release(c->arena, xs[*n - 2], ~0u);
    sv_arena_release(c->arena, xs[*n - 1], ~0u);
    xs[*n - 2] = u;
    --*n;
    return SV_OK;
}

/* Compiles a subschema to a DFA; *out NULL when it matches nothing. *trunc
 * (if non-NULL) says whether a recursive $ref inside was cut; with negated,
 * that is an error, since the difference would be unsound. */
static sv_status sub_dfa(sctx_t *c, json_t *s, const sv_loc_t *loc, const char *kw, bool negated, sv_dfa_t **out,
                         bool *trunc) {
    bool keep = c->truncated;
    c->truncated = false;
    sv_ast_t *a;
    c->no_calls++; /* the result enters a product */
    sv_status st = sv_sc_lang(c, s, loc, &a);
    if (st == SV_OK) {
        st = sv_sc_to_dfa(c, a, out);
        if (st == SV_ERR_EMPTY) { *out = NULL; st = SV_OK; }
    } else if (st == SV_ERR_EMPTY) {
        *out = NULL;
        st = SV_OK;
    }
    c->no_calls--;
    if (!st && negated && c->truncated)
        st = sv_sc_fail(c, SV_ERR_UNSUPPORTED, kw,
                        "%s over a language sieve narrows (a recursive $ref cut at max_ref_depth %u, or a format "
                        "other than date and ipv4) cannot be compiled exactly", kw, c->o->max_ref_depth);
    if (trunc) *trunc = c->truncated;
    c->truncated = keep || c->truncated;
    return st;
}

/* *acc ∩= d (*acc is the whole language while *unset). *made says whether
 * *acc is a product meet made: the next meet frees it once it has the next
 * one (nothing else refers to it). */
static sv_status meet(sctx_t *c, sv_dfa_t **acc, bool *unset, bool *made, sv_dfa_t *d, const char *kw) {
    sv_status st = SV_OK;
    sv_dfa_t *old = *acc;
    if (*unset) *acc = d, *unset = false;
    else if (!*acc || !d) *acc = NULL;
    else if (!(st = sv_sc_product(c, old, d, SV_DFA_AND, kw, acc))) {
        if (*made) sv_sc_drop(c, old);
        *made = *acc != NULL;
    }
    if (!st && !*acc)
        return sv_sc_fail(c, SV_ERR_EMPTY, kw, "no value satisfies %s together with the rest of this schema", kw);
    return st;
}

static sv_status ref_part(sctx_t *c, sv_ast_t *ta, sv_ast_t **out);

/* Recursive $refs as calls. rec_open reserves a part id for target t (an
 * open entry); a recursive reference to t while it is open becomes a call
 * to that part (recursive_call); rec_close compiles the target's language
 * into the part when a call was made, and the reference itself becomes a
 * call too. The part is t's language at the location of its first
 * expansion; inner references reuse it, which is sound in the languages
 * calls live in (no product sees them, so only validity matters, and a
 * value valid for t is valid wherever t is referenced alone). */
static sv_status rec_open(sctx_t *c, json_t *t, uint32_t *idx) {
    if (c->nrecs == sizeof c->recs / sizeof c->recs[0]) return SV_OK; /* deeper: expand as before */
    sv_status st = sv_sc_part(c, NULL, NULL);
    if (st) return st;
    c->recs[c->nrecs] = (struct sv_rec){t, SV_SCHEMA_PART_FIRST + c->nparts - 1, false};
    *idx = c->nrecs++;
    return SV_OK;
}

static sv_ast_t *recursive_call(sctx_t *c, json_t *t) {
    if (!c->ref_parts || !sv_sc_calls(c)) return NULL;
    for (uint32_t i = c->nrecs; i-- > 0;)
        if (c->recs[i].t == t) {
            c->recs[i].used = true;
            return sv_call_marker(c->arena, c->recs[i].id);
        }
    return NULL;
}

static sv_status rec_close(sctx_t *c, uint32_t idx, sv_status st, sv_ast_t **ta) {
    struct sv_rec r = c->recs[idx];
    c->nrecs = idx;
    if (st || !r.used) return st;
    sv_dfa_t *d;
    if ((*ta)->kind == SV_AST_NONE)
        return sv_sc_fail(c, SV_ERR_EMPTY, "$ref", "the recursive schema matches no value");
    if ((st = sv_sc_to_dfa(c, *ta, &d))) return st;
    if (!d) return sv_sc_fail(c, SV_ERR_EMPTY, "$ref", "the recursive schema matches no value");
    c->parts[r.id - SV_SCHEMA_PART_FIRST] = d;
    *ta = sv_call_marker(c->arena, r.id);
    return *ta ? SV_OK : sv_sc_nomem(c);
}

/* The part a branch calls when the branch is a call marker alone (the
 * bytes of sv_call_marker), compiled or still open, else -1 (the free-form
 * part too). */
/* The id a DFA spells when its language is one call marker alone, else 0. */
static uint32_t dfa_marker(const sv_dfa_t *d) {
    if (d->call_off || d->nstates != 2 + SV_CALL_DIGITS) return 0;
    int32_t x = 0;
    uint32_t id = 0;
    for (int i = 0; i <= SV_CALL_DIGITS; i++) {
        if (d->accept[x]) return 0;
        int32_t next = -1;
        int byte = -1;
        for (int b = 0; b < 256; b++) {
            int32_t t = sv_dfa_next(d, x, (uint8_t)b);
            if (t < 0) continue;
            if (next >= 0) return 0; /* two bytes: not one string */
            next = t, byte = b;
        }
        if (next < 0) return 0;
        if (i == 0 ? byte != SV_CALL_MARK : byte < SV_CALL_DIGIT0 || byte > SV_CALL_DIGIT0 + 9) return 0;
        if (i) id = id * 10 + (uint32_t)(byte - SV_CALL_DIGIT0);
        x = next;
    }
    for (int b = 0; b < 256; b++)
        if (sv_dfa_next(d, x, (uint8_t)b) >= 0) return 0;
    return d->accept[x] ? id : 0;
}

static int32_t marker_id(const sctx_t *c, const sv_ast_t *a) {
    if (a && a->kind == SV_AST_DFA && !a->json_escape) {
        uint32_t id = dfa_marker(a->dfa);
        if (id < SV_SCHEMA_PART_FIRST || id - SV_SCHEMA_PART_FIRST >= c->nparts) return -1;
        return (int32_t)(id - SV_SCHEMA_PART_FIRST);
    }
    if (!a || a->kind != SV_AST_CAT || a->nkids != 1 + SV_CALL_DIGITS) return -1;
    const sv_ast_t *m = a->kids[0];
    if (m->kind != SV_AST_BYTES || m->lo != SV_CALL_MARK || m->hi != SV_CALL_MARK) return -1;
    uint32_t id = 0;
    for (int i = 1; i <= SV_CALL_DIGITS; i++) {
        const sv_ast_t *d = a->kids[i];
        if (d->kind != SV_AST_BYTES || d->lo != d->hi || d->lo < SV_CALL_DIGIT0 || d->lo > SV_CALL_DIGIT0 + 9) return -1;
        id = id * 10 + (uint32_t)(d->lo - SV_CALL_DIGIT0);
    }
    if (id < SV_SCHEMA_PART_FIRST || id - SV_SCHEMA_PART_FIRST >= c->nparts) return -1;
    return (int32_t)(id - SV_SCHEMA_PART_FIRST);
}

/* The same, for compiled parts only. */
static int32_t marker_part(sctx_t *c, const sv_ast_t *a) {
    int32_t p = marker_id(c, a);
    return p >= 0 && sv_sc_part_at(c, (uint32_t)p) ? p : -1;
}

/* The bytes a DFA's strings start with, a marker byte among them where
 * one starts with a call (whose callee's bytes are not known here). */
static void start_bytes(const sv_dfa_t *d, uint64_t out[4]) {
    memset(out, 0, 4 * sizeof *out);
    for (int b = 0; b < 256; b++)
        if (sv_dfa_next(d, 0, (uint8_t)b) >= 0) out[b >> 6] |= 1ull << (b & 63);
}

static bool bytes_meet(const uint64_t *a, const uint64_t *b) {
    return ((a[0] & b[0]) | (a[1] & b[1]) | (a[2] & b[2]) | (a[3] & b[3])) != 0;
}

static bool starts_with_call(const uint64_t *first) { return (first[SV_CALL_MARK >> 6] >> (SV_CALL_MARK & 63)) & 1; }

bool sv_sc_big_part_ok(const sv_dfa_t *d) {
    return d && !d->call_off && sv_dfa_num_states(d) >= SV_SC_BIG_PART_MIN && sv_dfa_next(d, 0, SV_CALL_MARK) < 0;
}

sv_status sv_sc_big_alts_as_parts(sctx_t *c, sv_ast_t **alts, uint32_t n) {
    if (!sv_sc_calls(c) || !c->ref_parts) return SV_OK;
    bool any = false;
    for (uint32_t i = 0; i < n && !any; i++)
        any = alts[i] && alts[i]->kind == SV_AST_DFA && !alts[i]->json_escape && sv_sc_big_part_ok(alts[i]->dfa);
    if (!any) return SV_OK;
    uint64_t(*first)[4] = sv_arena_alloc(c->arena, (n ? n : 1) * sizeof *first);
    if (!first) return sv_sc_nomem(c);
    for (uint32_t i = 0; i < n; i++) {
        sv_dfa_t *d = NULL;
        sv_status st = sv_sc_to_dfa(c, alts[i], &d);
        if (st) return st;
        if (!d) { /* an empty branch: starts with nothing */
            memset(first[i], 0, sizeof first[i]);
            continue;
        }
        /* compiled once, not again in the union; not a call alone, which
         * union_calls reads as a call */
        if ((alts[i]->kind != SV_AST_DFA || alts[i]->json_escape) && marker_id(c, alts[i]) < 0) {
            sv_ast_t *x = sv_ast_dfa(c->arena, d, false);
            if (!x) return sv_sc_nomem(c);
            alts[i] = x;
        }
        start_bytes(d, first[i]);
    }
    for (uint32_t i = 0; i < n; i++) {
        const sv_dfa_t *d = alts[i]->dfa;
        if (alts[i]->kind != SV_AST_DFA || !sv_sc_big_part_ok(d)) continue; /* a call, or small */
        /* apart from every other alternative, one that starts with a call
         * (its callee's bytes unknown here) included */
        bool alone = true;
        for (uint32_t j = 0; j < n && alone; j++)
            alone = j == i || (!bytes_meet(first[i], first[j]) && !starts_with_call(first[j]));
        if (!alone) continue;
        sv_status st = sv_sc_part(c, (sv_dfa_t *)d, &alts[i]);
        if (st) return st;
    }
    return SV_OK;
}

/* Branches of one union that call parts starting with a common byte (two
 * $refs to objects: both start with `{`) are a choice the linker cannot
 * make, and it would refuse the whole program, which then compiles again
 * without $ref parts. Such branches take their parts' DFAs inline instead:
 * the union of the languages, the parts' own inner calls kept (a union of
 * strings that hold call markers is the union of what they stand for). */
static void inline_alike_calls(sctx_t *c, sv_ast_t **alts, uint32_t n) {
    int32_t part[64];
    uint64_t first[64][4];
    if (n < 2 || n > 64) return;
    uint32_t calls = 0;
    for (uint32_t i = 0; i < n; i++) {
        part[i] = marker_part(c, alts[i]);
        memset(first[i], 0, sizeof first[i]);
        if (part[i] < 0) continue;
        const sv_dfa_t *d = c->parts[part[i]];
        for (int b = 0; b < 256; b++)
            if (d->trans[d->classes[b]] >= 0) first[i][b >> 6] |= 1ull << (b & 63);
        calls++;
    }
    if (calls < 2) return;
    bool alike[64] = {false};
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++)
            if (part[i] >= 0 && part[j] >= 0 && part[i] != part[j] &&
                ((first[i][0] & first[j][0]) | (first[i][1] & first[j][1]) | (first[i][2] & first[j][2]) |
                 (first[i][3] & first[j][3])))
                alike[i] = alike[j] = true;
    for (uint32_t i = 0; i < n; i++) {
        if (!alike[i]) continue;
        sv_ast_t *x = sv_ast_dfa(c->arena, c->parts[part[i]], false);
        if (x) alts[i] = x;
    }
}

/* A union whose branch calls a part while another branch may start with
 * the same byte (a recursive object beside another object: both start
 * with `{`, as in `"items": {"anyOf": [{"$ref": "#/$defs/leaf"}, {"$ref":
 * "#/$defs/node"}]}` inside node) is a choice the linker cannot make, and
 * it would refuse the whole program, which then compiled without $ref
 * parts: flat, the recursion cut at max_ref_depth, and often over a state
 * budget. Such a branch takes its part's DFA inline instead (the part's own
 * inner calls kept), and where that part is still open (being expanded:
 * its DFA does not exist yet) the union itself becomes a part, reserved now
 * and compiled by finish_deferred once every part is known. Whether two
 * branches may start alike is judged from their schemas' value classes
 * (sv_sc_first_classes: objects, arrays, strings, numbers, ...), an
 * over-approximation: at worst a part is copied where a call would have
 * done. Only for a union that is a whole schema in a language of calls
 * (no product sees the marker). */
static sv_status union_calls(sctx_t *c, json_t **bj, sv_ast_t **alts, uint32_t n, sv_ast_t **out) {
    *out = NULL;
    if (n < 2 || !c->ref_parts || !sv_sc_calls(c)) return SV_OK;
    int *cls = sv_arena_alloc(c->arena, n * sizeof *cls);
    uint8_t *flag = sv_arena_alloc(c->arena, n);
    if (!cls || !flag) return sv_sc_nomem(c);
    int32_t *id = sv_arena_alloc(c->arena, n * sizeof *id);
    if (!id) return sv_sc_nomem(c);
    bool calls = false;
    for (uint32_t i = 0; i < n; i++) calls |= (id[i] = marker_id(c, alts[i])) >= 0;
    if (!calls) return SV_OK;
    for (uint32_t i = 0; i < n; i++) cls[i] = sv_sc_first_classes(c, bj[i]);
    bool some = false, open = false;
    for (uint32_t i = 0; i < n; i++) {
        flag[i] = 0;
        if (id[i] < 0) continue;
        for (uint32_t j = 0; j < n && !flag[i]; j++) flag[i] = j != i && (cls[i] & cls[j]);
        some |= flag[i];
        open |= flag[i] && !sv_sc_part_at(c, (uint32_t)id[i]);
    }
    if (!some) return SV_OK;
    if (!open) {
        for (uint32_t i = 0; i < n; i++)
            if (flag[i]) {
                sv_ast_t *x = sv_ast_dfa(c->arena, c->parts[id[i]], false);
                if (!x) return sv_sc_nomem(c);
                alts[i] = x;
            }
        return SV_OK;
    }
    sv_status st = sv_sc_part(c, NULL, NULL);
    if (st) return st;
    if (c->ndeferred == c->capdeferred) {
        uint32_t cap = c->capdeferred ? 2 * c->capdeferred : 8;
        struct sv_deferred *v = sv_arena_alloc(c->arena, cap * sizeof *v);
        if (!v) return sv_sc_nomem(c);
        if (c->ndeferred) memcpy(v, c->deferred, c->ndeferred * sizeof *v);
        c->deferred = v;
        c->capdeferred = cap;
    }
    sv_ast_t **keep = sv_arena_alloc(c->arena, n * sizeof *keep);
    char *ptr = sv_arena_alloc(c->arena, c->ptr_len + 1);
    if (!keep || !ptr) return sv_sc_nomem(c);
    memcpy(keep, alts, n * sizeof *keep);
    memcpy(ptr, c->ptr, c->ptr_len + 1);
    uint32_t part = SV_SCHEMA_PART_FIRST + c->nparts - 1;
    c->deferred[c->ndeferred++] = (struct sv_deferred){part, keep, flag, n, ptr};
    *out = sv_call_marker(c->arena, part);
    return *out ? SV_OK : sv_sc_nomem(c);
}

/* The JSON pointer errors name set to ptr (a location compiled later than
 * its keyword was met), the current one kept in saved for ptr_leave. */
static size_t ptr_enter(sctx_t *c, const char *ptr, char saved[sizeof c->ptr]) {
    size_t keep = c->ptr_len, len = strlen(ptr);
    memcpy(saved, c->ptr, keep + 1);
    if (len < sizeof c->ptr) memcpy(c->ptr, ptr, len + 1), c->ptr_len = len;
    return keep;
}

static void ptr_leave(sctx_t *c, const char saved[sizeof c->ptr], size_t keep) {
    memcpy(c->ptr, saved, keep + 1);
    c->ptr_len = keep;
}

/* Compiles the deferred unions (union_calls), in the order they were
 * made: a union made inside another's branches comes first, so its DFA
 * exists when the outer one inlines it. */
static sv_status finish_deferred(sctx_t *c) {
    for (uint32_t k = 0; k < c->ndeferred; k++) {
        struct sv_deferred *d = &c->deferred[k];
        for (uint32_t i = 0; i < d->n; i++) {
            int32_t p = d->inline_it[i] ? marker_part(c, d->alts[i]) : -1;
            if (p < 0) continue; /* still no DFA (a union that starts with itself): the linker refuses it */
            sv_ast_t *x = sv_ast_dfa(c->arena, c->parts[p], false);
            if (!x) return sv_sc_nomem(c);
            d->alts[i] = x;
        }
        /* errors point at the union: its pointer stands in for the root's */
        char saved[sizeof c->ptr];
        size_t keep = ptr_enter(c, d->ptr, saved);
        sv_dfa_t *dfa = NULL;
        sv_ast_t *u = sv_ast_alt(c->arena, d->alts, d->n);
        sv_status st = sv_sc_to_dfa(c, u, &dfa);
        if (!st && !dfa) st = sv_sc_fail(c, SV_ERR_EMPTY, NULL, "the union matches no value");
        ptr_leave(c, saved, keep);
        if (st) return st;
        c->parts[d->id - SV_SCHEMA_PART_FIRST] = dfa;
    }
    return SV_OK;
}

static const char *const type_kw[] = {
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames", "minProperties",
    "maxProperties", "dependentRequired", "dependencies", "items", "prefixItems", "additionalItems", "minItems",
    "maxItems", "contains", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
};

/* Whether keyword k may constrain a value: sieve compiles it (handled) or
 * refuses it; any other is an annotation or one sieve ignores (check_keywords
 * reports it in ignored_keywords). */
static bool constrains(const char *k) {
    return in_list(k, handled, sizeof handled / sizeof handled[0]) || in_list(k, refused, sizeof refused / sizeof refused[0]);
}

/* A $ref whose siblings constrain nothing ($defs, annotations): the ref
 * alone decides the language, in every draft. */
bool sv_sc_ref_alone(json_t *s) {
    /* Beside $ref, a keyword sieve compiles (handled) or refuses constrains
     * the value; any other is an annotation or one sieve ignores (reported
     * in ignored_keywords), which constrains nothing: editors' hints such
     * as Skaffold's "x-intellij-html-description" beside each of its 48
     * $refs made every one a product of the target with the whole language
     * (o6375: most of its compile). */
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) if (strcmp(k, "$ref") && strcmp(k, "$defs") && strcmp(k, "definitions") && constrains(k))
        return false;
    return true;
}

/* sv_sc_ref_alone, or a $ref whose one constraining sibling is a `type`
 * that the target's own `type` implies ({"$ref": "#/$defs/node", "type":
 * "object"} where node says "type": "object"): the intersection is the
 * target, so the $ref stands for the whole schema and takes no product (a
 * product builds the target flat, its recursion cut at max_ref_depth:
 * MaskBench's Github_easy---o83258, a recursive React element, had
 * every object of it kept in schema order under --key-order any). */
bool sv_sc_ref_stands_alone(sctx_t *c, json_t *s) {
    if (sv_sc_ref_alone(s)) return true;
    json_t *ref = json_object_get(s, "$ref"), *v, *t;
    const char *k;
    if (!json_is_string(ref) || !json_object_get(s, "type")) return false;
    json_object_foreach(s, k, v) if (strcmp(k, "$ref") && strcmp(k, "$defs") && strcmp(k, "definitions") &&
                                     strcmp(k, "type") && constrains(k)) return false;
    sv_error_t *keep = c->err, scratch;
    c->err = &scratch; /* a bad $ref or type is reported where it is compiled */
    int ms = 0, mt = 0;
    bool ok = sv_sc_resolve_ref(c, s, json_string_value(ref), &t) == SV_OK && json_is_object(t) &&
              json_object_get(t, "type") && type_mask(c, s, &ms) == SV_OK && type_mask(c, t, &mt) == SV_OK;
    c->err = keep;
    if (ms & T_NUMBER) ms |= T_INTEGER;
    return ok && (mt & ~ms) == 0;
}

/* Keywords that never change a schema's language: annotations, and every
 * keyword sieve neither compiles nor refuses (check_keywords reports them
 * in ignored_keywords), but OpenAPI's discriminator, which the oneOf beside
 * it reads (schema_disjoint.c sv_sc_require_discriminators), and the
 * identifiers that $refs inside resolve against. */
bool sv_sc_inert_keyword(const char *k) {
    static const char *const read[] = {"discriminator", "$id", "id", "$anchor", "$dynamicAnchor"};
    return !constrains(k) && !in_list(k, read, sizeof read / sizeof read[0]);
}

/* ---- key conditions --------------------------------------------------------- */

/* A schema that names keys only, as {"required": [...]} and allOf, anyOf,
 * oneOf and not of such (with "type": "object" allowed among them), is a
 * condition on which keys an object holds: under `not`, the difference from
 * the canonical universe (a product, with every value at the location spelled
 * out to the free-form depth) becomes a few bits in the object's automaton,
 * one a key the condition names (schema_container.c sv_sc_object). */
bool sv_sc_add_key(const char **fk, uint32_t *nfk, uint32_t cap, const char *key) {
    if (!key) return false;
    uint32_t j = 0;
    while (j < *nfk && strcmp(fk[j], key)) j++;
    if (j == *nfk) {
        if (*nfk == cap) return false;
        fk[(*nfk)++] = key;
    }
    return true;
}

static bool keys_only(json_t *x, const char **fk, uint32_t *nfk, uint32_t cap, int depth) {
    if (json_is_boolean(x)) return true;
    if (!json_is_object(x) || depth > 16) return false;
    const char *k;
    json_t *v;
    json_object_foreach(x, k, v) {
        if (!strcmp(k, "required")) {
            if (!json_is_array(v)) return false;
            for (size_t i = 0; i < json_array_size(v); i++) {
                if (!sv_sc_add_key(fk, nfk, cap, json_string_value(json_array_get(v, i)))) return false;
            }
        } else if (!strcmp(k, "allOf") || !strcmp(k, "anyOf") || !strcmp(k, "oneOf")) {
            if (!json_is_array(v) || json_array_size(v) == 0) return false;
            for (size_t i = 0; i < json_array_size(v); i++)
                if (!keys_only(json_array_get(v, i), fk, nfk, cap, depth + 1)) return false;
        } else if (!strcmp(k, "not")) {
            if (!keys_only(v, fk, nfk, cap, depth + 1)) return false;
        } else if (!strcmp(k, "type")) {
            if (!json_is_string(v) || strcmp(json_string_value(v), "object")) return false;
        } else if (!sv_sc_inert_keyword(k)) {
            return false;
        }
    }
    return true;
}

bool sv_sc_keycond_collect(json_t *x, const char **keys, uint32_t *n, uint32_t cap) { return keys_only(x, keys, n, cap, 0); }

uint32_t sv_sc_keycond_keys(json_t *x, const char *keys[SV_KEYCOND_MAX]) {
    uint32_t n = 0;
    return keys_only(x, keys, &n, SV_KEYCOND_MAX, 0) ? n + 1 : 0;
}

bool sv_sc_keycond_list(json_t *a, const char *kw, const char *const *keys, uint32_t n, uint32_t present, bool object) {
    uint32_t met = 0;
    for (size_t i = 0; i < json_array_size(a); i++) met += sv_sc_keycond_eval(json_array_get(a, i), keys, n, present, object);
    if (!strcmp(kw, "allOf")) return met == json_array_size(a);
    return !strcmp(kw, "anyOf") ? met > 0 : met == 1;
}

bool sv_sc_keycond_eval(json_t *x, const char *const *keys, uint32_t n, uint32_t present, bool object) {
    if (json_is_boolean(x)) return json_is_true(x);
    if (json_object_get(x, "type") && !object) return false;
    json_t *req = json_object_get(x, "required");
    for (size_t i = 0; object && i < json_array_size(req); i++) {
        const char *key = json_string_value(json_array_get(req, i));
        uint32_t j = 0;
        while (j < n && strcmp(keys[j], key)) j++;
        if (j == n || !(present >> j & 1)) return false;
    }
    static const char *const lists[] = {"allOf", "anyOf", "oneOf"};
    for (int l = 0; l < 3; l++) {
        json_t *a = json_object_get(x, lists[l]);
        if (a && !sv_sc_keycond_list(a, lists[l], keys, n, present, object)) return false;
    }
    json_t *nt = json_object_get(x, "not");
    return !nt || !sv_sc_keycond_eval(nt, keys, n, present, object);
}

bool sv_sc_deps_keys(json_t *s) {
    static const char *const maps[] = {"dependentSchemas", "dependencies"};
    const char *keys[SV_KEYCOND_MAX];
    uint32_t n = 0, schemas = 0;
    if (json_object_get(s, "const") || json_object_get(s, "enum")) return false;
    for (int l = 0; l < 2; l++) {
        json_t *m = json_object_get(s, maps[l]), *x;
        const char *k;
        if (!m) continue;
        if (!json_is_object(m)) return false;
        json_object_foreach(m, k, x) {
            if (json_is_array(x)) continue; /* dependentRequired form: objects handle it */
            schemas++;
            /* the trigger key and the keys its schema names, all of them
             * over the schema's entries at most SV_KEYCOND_MAX */
            uint32_t j = 0;
            while (j < n && strcmp(keys[j], k)) j++;
            if (j == n) {
                if (n == SV_KEYCOND_MAX) return false;
                keys[n++] = k;
            }
            if (!keys_only(x, keys, &n, SV_KEYCOND_MAX, 0)) return false;
        }
    }
    return schemas > 0;
}

bool sv_sc_not_keys(json_t *s) {
    const char *keys[SV_KEYCOND_MAX];
    json_t *nt = json_object_get(s, "not");
    return nt && !json_object_get(s, "const") && !json_object_get(s, "enum") && sv_sc_keycond_keys(nt, keys) > 0;
}

/* The keys every key condition of s names, a union's branches besides
 * (kw, or NULL), into fk (at most cap). False when they do not fit. */
static bool cond_keys(json_t *s, const char *kw, const char **fk, uint32_t *n, uint32_t cap) {
    json_t *x, *a = kw ? json_object_get(s, kw) : NULL;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!keys_only(json_array_get(a, i), fk, n, cap, 1)) return false;
    if (kw && !strcmp(kw, "oneOf") && sv_sc_union_keys(s, "anyOf") && !cond_keys(s, "anyOf", fk, n, cap)) return false;
    if (sv_sc_not_keys(s) && !keys_only(json_object_get(s, "not"), fk, n, cap, 1)) return false;
    static const char *const maps[] = {"dependentSchemas", "dependencies", "dependentRequired"};
    for (int l = 0; l < 3; l++) {
        json_t *m = json_object_get(s, maps[l]);
        const char *k;
        if (!json_is_object(m)) continue;
        json_object_foreach(m, k, x) {
            if (!sv_sc_add_key(fk, n, cap, k)) return false;
            for (size_t i = 0; json_is_array(x) && i < json_array_size(x); i++)
                if (!sv_sc_add_key(fk, n, cap, json_string_value(json_array_get(x, i)))) return false;
            if (!json_is_array(x) && sv_sc_deps_keys(s) && !keys_only(x, fk, n, cap, 1)) return false;
        }
    }
    return true;
}

bool sv_sc_union_keys(json_t *s, const char *kw) {
    bool any = !strcmp(kw, "anyOf");
    json_t *a = json_object_get(s, kw);
    if (!json_is_array(a) || json_array_size(a) == 0 || json_object_get(s, "const") || json_object_get(s, "enum"))
        return false;
    if (any ? sv_sc_any_required(s) : sv_sc_one_required(s)) return false;
    /* The object's condition bits (schema_container.c) hold at most 8 keys,
     * after the bits of single-key anyOf and oneOf conditions. */
    uint32_t cap = 8 - (sv_sc_any_required(s) ? 1 : 0) - (sv_sc_one_required(s) ? 2 : 0), n = 0;
    const char *fk[8];
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!keys_only(json_array_get(a, i), fk, &n, cap, 1)) return false;
    /* a list of boolean schemas names no key: a union as before */
    return n > 0 && cond_keys(s, kw, fk, &n, cap);
}

/* Whether a and b are the same schema: equal JSON, the annotation keywords
 * of their top level aside (nested ones compare as written, which only
 * misses some equal pairs). For schemas whose $refs resolve from the same
 * base. */
bool sv_sc_same_schema(json_t *a, json_t *b) {
    if (a == b) return true;
    if (!json_is_object(a) || !json_is_object(b)) return json_equal(a, b);
    const char *k;
    json_t *v;
    size_t na = 0, nb = 0;
    json_object_foreach(a, k, v) {
        if (sv_sc_inert_keyword(k)) continue;
        na++;
        json_t *w = json_object_get(b, k);
        if (!w || !json_equal(v, w)) return false;
    }
    json_object_foreach(b, k, v) nb += !sv_sc_inert_keyword(k);
    return na == nb;
}

static bool has_type_keywords(json_t *s);

/* Whether every branch of array a is {"required": [one key]} (and
 * annotations), and s builds its object language from type keywords (no
 * const/enum): sv_sc_any_required, sv_sc_one_required. */
static bool required_branches(json_t *s, json_t *a) {
    if (!json_is_array(a) || json_array_size(a) == 0) return false;
    if (json_object_get(s, "const") || json_object_get(s, "enum") ||
        !(json_object_get(s, "type") || has_type_keywords(s)))
        return false;
    static const char *const inert[] = {"required", "title", "description", "$comment"};
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *b = json_array_get(a, i), *v, *req = json_object_get(b, "required");
        const char *k;
        if (!json_is_object(b) || !json_is_array(req) || json_array_size(req) != 1 ||
            !json_is_string(json_array_get(req, 0)))
            return false;
        json_object_foreach(b, k, v) {
            bool ok = false;
            for (size_t j = 0; j < sizeof inert / sizeof *inert && !ok; j++) ok = !strcmp(k, inert[j]);
            if (!ok) return false;
        }
    }
    return true;
}

bool sv_sc_any_required(json_t *s) { return required_branches(s, json_object_get(s, "anyOf")); }

bool sv_sc_one_required(json_t *s) {
    /* Non-objects satisfy every branch, so two or more branches exclude
     * them: only where s admits objects alone. */
    json_t *t = json_object_get(s, "type");
    return json_is_string(t) && !strcmp(json_string_value(t), "object") && !json_object_get(s, "nullable") &&
           required_branches(s, json_object_get(s, "oneOf"));
}

/* The anyOf and oneOf that lang_object compiles as unions or products
 * (not the conditions on keys, sv_sc_any_required / sv_sc_one_required),
 * decided once per schema by sv_sc_lang: whether the oneOf's branches are
 * proven disjoint (schema_disjoint.c), and whether one may be an open
 * object. */
typedef struct {
    json_t *any, *one;
    bool disjoint, open;
    bool type_implied; /* the schema's type holds every branch's: see type_implied */
    int type_filter;   /* else a type mask read off the union's first byte (type_filtered), or 0 */
    bool meets;        /* a union here meets type keywords in a product (no calls) */
} unions_t;

/* The types a schema's values may have (T_ALL where it does not say, or
 * says it wrongly: that is reported where it is compiled), following a
 * $ref that stands for the whole schema. */
static int branch_types(sctx_t *c, json_t *s, int depth) {
    if (json_is_false(s)) return 0;
    if (!json_is_object(s) || depth > 16) return T_ALL;
    json_t *ref = json_object_get(s, "$ref"), *t;
    if (json_is_string(ref) && (c->draft <= 7 || sv_sc_ref_stands_alone(c, s))) {
        sv_error_t *keep = c->err, scratch;
        c->err = &scratch;
        bool ok = sv_sc_resolve_ref(c, s, json_string_value(ref), &t) == SV_OK;
        c->err = keep;
        return ok ? branch_types(c, t, depth + 1) : T_ALL;
    }
    int m;
    sv_error_t *keep = c->err, scratch;
    c->err = &scratch;
    sv_status st = type_mask(c, s, &m);
    c->err = keep;
    return st ? T_ALL : m;
}

/* Whether the schema is a union (anyOf, or oneOf alone) beside a type that
 * every branch's own type already implies, and nothing else that
 * constrains, where a branch refers to a schema being expanded:
 * {"anyOf": [{"$ref": "#/$defs/node"}, {"$ref": "#/$defs/leaf"}], "type":
 * "object"} inside node, as generators write it. The type then adds
 * nothing, and compiling it as a conjunct would make a product of the
 * union (flat, so the recursion is cut at max_ref_depth). */
static bool type_implied(sctx_t *c, json_t *s, json_t *arr, const char *kw) {
    if (!json_is_array(arr) || json_array_size(arr) == 0 || !json_object_get(s, "type")) return false;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) if (strcmp(k, kw) && strcmp(k, "type") && strcmp(k, "$defs") &&
                                     strcmp(k, "definitions") && !sv_sc_inert_keyword(k)) return false;
    /* Only where a branch recurses: elsewhere the product costs nothing in
     * language, and its shared key order keeps unions of many objects
     * small (MaskBench's Github_ultra---o21375, 23 closed objects). */
    bool recursive = false;
    for (size_t i = 0; i < json_array_size(arr) && !recursive; i++) {
        json_t *br = json_array_get(arr, i), *ref = json_object_get(br, "$ref"), *t;
        if (!json_is_string(ref)) continue;
        sv_error_t *keep = c->err, scratch;
        c->err = &scratch;
        bool ok = sv_sc_resolve_ref(c, br, json_string_value(ref), &t) == SV_OK;
        c->err = keep;
        for (uint32_t d = 0; ok && d < c->ref_depth && !recursive; d++) recursive = c->ref_stack[d] == t;
    }
    if (!recursive) return false;
    int m = branch_types(c, s, 0);
    if (m == T_ALL) return false;
    if (m & T_NUMBER) m |= T_INTEGER; /* integers are numbers */
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (branch_types(c, json_array_get(arr, i), 0) & ~m) return false;
    return true;
}

/* Whether the schema is a union (anyOf, or a oneOf that is one) beside a
 * type and nothing else that constrains, so that the type is the union's
 * strings that start with its bytes (schema_typed.c): the type mask, or 0.
 * Only with calls, which a product would turn off for the whole union;
 * without, the product is the same language at the same cost. */
static int type_filtered(sctx_t *c, json_t *s, const unions_t *u) {
    if (!sv_sc_calls(c) || !json_object_get(s, "type")) return 0;
    const char *kw = u->any && !json_object_get(s, "oneOf") ? "anyOf"
                     : u->one && !json_object_get(s, "anyOf") && u->disjoint && !(u->open && sv_sc_keysets(c)) ? "oneOf"
                                                                                                         : NULL;
    if (!kw || !json_is_array(json_object_get(s, kw)) || json_array_size(json_object_get(s, kw)) == 0) return 0;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) if (strcmp(k, kw) && strcmp(k, "type") && strcmp(k, "nullable") && strcmp(k, "$defs") &&
                                     strcmp(k, "definitions") &&
                                     in_list(k, handled, sizeof handled / sizeof handled[0])) return 0;
    int m;
    sv_error_t *keep = c->err, scratch;
    c->err = &scratch;
    sv_status st = type_mask(c, s, &m);
    c->err = keep;
    return st || (m & T_INTEGER) || m == T_ALL ? 0 : m;
}

static void unions_of(sctx_t *c, json_t *s, unions_t *u) {
    u->any = sv_sc_any_required(s) || sv_sc_union_keys(s, "anyOf") ? NULL : json_object_get(s, "anyOf");
    u->one = sv_sc_one_required(s) || sv_sc_union_keys(s, "oneOf") ? NULL : json_object_get(s, "oneOf");
    u->disjoint = u->one && sv_sc_oneof_disjoint(c, u->one, s);
    if (u->one && !u->disjoint) {
        /* closed objects that overlap: branches made disjoint by conditions
         * on their keys (schema_disjoint.c) */
        json_t *apart = sv_sc_closed_oneof(c, u->one);
        if (apart && sv_arena_defer(c->arena, (sv_arena_cleanup_fn)json_decref, apart))
            u->one = apart, u->disjoint = true;
    }
    u->open = u->disjoint && sv_sc_oneof_open(c, u->one);
    u->type_implied = u->any && !json_object_get(s, "oneOf") ? type_implied(c, s, u->any, "anyOf")
                      : u->one && !json_object_get(s, "anyOf") && u->disjoint ? type_implied(c, s, u->one, "oneOf")
                                                                               : false;
    u->type_filter = u->type_implied ? 0 : type_filtered(c, s, u);
    if (u->type_filter) u->type_implied = true; /* no product: the type is read off the first byte */
    u->meets = json_object_size(s) > 1 && !u->type_implied &&
               (json_object_get(s, "type") || json_object_get(s, "const") || json_object_get(s, "enum") ||
                has_type_keywords(s));
}

/* Whether the oneOf is a union here. With keys in any order, two open
 * objects in one union would meet at a key that is one branch's member and
 * the other's extra member (a call beside bytes), which the program linker
 * refuses, and the whole compile would go flat: such a oneOf keeps its
 * difference, whose objects keep their key order. */
static bool one_union(const sctx_t *c, const unions_t *u) {
    return u->disjoint && !(u->open && sv_sc_keysets(c) && sv_sc_calls(c) && !u->meets);
}

static bool has_type_keywords(json_t *s) {
    for (size_t i = 0; i < sizeof type_kw / sizeof type_kw[0]; i++)
        if (json_object_get(s, type_kw[i])) return true;
    return false;
}

bool sv_sc_has_string(json_t *arr, const char *s) {
    for (size_t i = 0; json_is_array(arr) && i < json_array_size(arr); i++)
        if (json_is_string(json_array_get(arr, i)) && !strcmp(json_string_value(json_array_get(arr, i)), s)) return true;
    return false;
}

/* The dependentSchemas entry (k, D) as a union without a difference:
 * {"anyOf": [{"properties": {k: false}}, D']}, the values that are not an
 * object holding k, and the objects holding k that D accepts: D' is D with
 * "type": "object" and k added to its "required". The branches are
 * disjoint, so the union is exact, where the general form, {"if": {"type":
 * "object", "required": [k]}, "then": D}, takes the universe minus the
 * `if`: a difference over every free-form or recursive value the object
 * holds. NULL (the general form then) when D is not an object schema that
 * takes those keywords as they are: a "type" of its own, a "$ref" (whose
 * siblings drafts up to 7 ignore), a "required" that is not a list of
 * strings; or when D is a oneOf, whose branches D' would meet in a product
 * beside "type" and "required", which costs more than the difference
 * (Github_medium---o11667: 195 ms in the general form, 480 ms as a
 * union); or out of memory. */
static bool dependency_union_ok(json_t *d) {
    if (!json_is_object(d) || json_object_get(d, "type") || json_object_get(d, "$ref") || json_object_get(d, "oneOf"))
        return false;
    json_t *req = json_object_get(d, "required");
    if (req && !json_is_array(req)) return false;
    for (size_t i = 0; req && i < json_array_size(req); i++)
        if (!json_is_string(json_array_get(req, i))) return false;
    return true;
}

static json_t *dependency_union(const char *k, json_t *d) {
    if (!dependency_union_ok(d)) return NULL;
    json_t *req = json_object_get(d, "required");
    json_t *dp = json_copy(d), *nreq = req ? json_copy(req) : json_array();
    json_t *out = NULL;
    if (dp && nreq && (sv_sc_has_string(req, k) || !json_array_append_new(nreq, json_string(k))) &&
        !json_object_set_new(dp, "type", json_string("object")) && !json_object_set(dp, "required", nreq))
        out = json_pack("{s:[{s:{s:b}}, O]}", "anyOf", "properties", k, 0, dp);
    json_decref(dp);
    json_decref(nreq);
    return out;
}

/* allOf members that switch on one key: {"if": {"properties": {k: L}},
 * "then": T} with L a const or an enum of strings, booleans or nulls (and
 * beside it, in the `if`, at most "required": [k] and "type": "object"),
 * each member's literals apart from the others', all on the same k: JSON
 * Schema Store's way of writing a tagged union (a resource's "type" picks
 * its schema, JsonSchemaStore---jfrog-pipelines has 14 and 28 such cases).
 * Met one by one, each case is a union, (if ∩ then) ∪ (U \ if), and the
 * products of those unions grow with every case (jfrog's refused its
 * memory budget). Together they are one union of disjoint branches, no
 * difference but the tag's own:
 *   - for each case, the objects whose k is in its literals, and its then;
 *   - the objects whose k is none of the literals: no then;
 *   - the objects without k, and every then whose `if` does not require k;
 *   - the non-objects, and every then whose `if` does not say "type".
 * The last two are left out where the schema itself requires k or says
 * "type": "object". Two cases met one by one cost less than the union's
 * branches beside them (JsonSchemaStore---meta, two cases on a boolean
 * whose thens are key conditions: 689 ms met, 1,468 ms as a switch). */
#define SWITCH_MIN_CASES 3
/* Two cases take the switch where the schema is an object that requires k
 * (then it has no branch for objects without k nor for non-objects), or
 * where a then names values: met one by one the cases are differences,
 * whose universe spells values out to a bounded depth only
 * (JsonSchemaStore---schema-project, a tagged dependency whose storage case
 * holds CORS rules; minecraft-dimension's generator settings). A then of
 * key conditions alone is exact either way, and cheaper met (meta). */
#define SWITCH_MIN_CASES_TAGGED 2

/* Whether a then names values: keywords that hold members' or items'
 * schemas, or schemas of its own that may ($ref, the combinators). */
static bool then_names_values(json_t *t) {
    static const char *const kw[] = {"properties", "patternProperties", "additionalProperties", "items",
                                     "prefixItems", "additionalItems", "contains", "$ref", "allOf", "anyOf",
                                     "oneOf", "if", "dependentSchemas", "unevaluatedProperties"};
    if (!json_is_object(t)) return false;
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (json_object_get(t, kw[i])) return true;
    return false;
}

typedef struct {
    const char *key;
    uint32_t n;            /* cases */
    bool taken;            /* enough cases: the allOf's cases are the switch */
    bool *is_case;         /* (allOf size) */
} switch_t;

static bool switch_literals(json_t *p, json_t **lits) {
    json_t *cst = json_object_get(p, "const"), *en = json_object_get(p, "enum"), *v;
    const char *k;
    json_object_foreach(p, k, v) if (strcmp(k, "const") && strcmp(k, "enum") && strcmp(k, "type") &&
                                     !sv_sc_inert_keyword(k)) return false;
    if (!cst == !en) return false;
    json_t *ty = json_object_get(p, "type");
    if (ty && !json_is_string(ty)) return false;
    *lits = cst ? json_pack("[O]", cst) : json_copy(en);
    if (!*lits || json_array_size(*lits) == 0) goto no;
    for (size_t i = 0; i < json_array_size(*lits); i++) {
        json_t *l = json_array_get(*lits, i);
        if (!json_is_string(l) && !json_is_boolean(l) && !json_is_null(l)) goto no;
        /* a literal of another type than the one named matches nothing:
         * leave such a case to the general form */
        if (ty && strcmp(json_string_value(ty), json_is_string(l) ? "string" : json_is_null(l) ? "null" : "boolean"))
            goto no;
    }
    return true;
no:
    json_decref(*lits);
    *lits = NULL;
    return false;
}

/* An `if` that is an anyOf of single-key literal tests on one key, as
 * {"anyOf": [{"properties": {"k": {"const": "a"}}}, {"properties": {"k":
 * {"const": "b"}}}]}: the same case as {"properties": {"k": {"enum": ["a",
 * "b"]}}}, since no branch requires k or says "type" (each holds for an
 * object without k and for a non-object, as the one test does). *key and
 * *lits (a new reference) as switch_case. */
static bool switch_anyof(json_t *i, const char **key, json_t **lits) {
    json_t *any = json_object_get(i, "anyOf"), *v;
    const char *k;
    if (!json_is_array(any) || json_array_size(any) == 0) return false;
    json_object_foreach(i, k, v) if (strcmp(k, "anyOf") && !sv_sc_inert_keyword(k)) return false;
    json_t *all = json_array();
    if (!all) return false;
    *key = NULL;
    for (size_t j = 0; j < json_array_size(any); j++) {
        json_t *b = json_array_get(any, j), *props = json_object_get(b, "properties"), *l = NULL;
        bool ok = json_is_object(b) && json_is_object(props) && json_object_size(props) == 1;
        if (ok) json_object_foreach(b, k, v) if (strcmp(k, "properties") && !sv_sc_inert_keyword(k)) ok = false;
        void *it = ok ? json_object_iter(props) : NULL;
        const char *bk = ok ? json_object_iter_key(it) : NULL;
        ok = ok && (!*key || !strcmp(*key, bk)) && switch_literals(json_object_iter_value(it), &l);
        if (!ok || json_array_extend(all, l)) {
            json_decref(l);
            json_decref(all);
            return false;
        }
        json_decref(l);
        *key = bk;
    }
    *lits = all;
    return true;
}

/* Whether allOf member m is a switch case; *key its key and *lits its
 * literals (a new reference). */
static bool switch_case(json_t *m, const char **key, json_t **lits) {
    json_t *i = json_object_get(m, "if"), *v;
    const char *k;
    if (!json_is_object(m) || !json_is_object(i) || json_object_get(m, "else")) return false;
    json_object_foreach(m, k, v) if (strcmp(k, "if") && strcmp(k, "then") && !sv_sc_inert_keyword(k)) return false;
    if (json_object_get(i, "anyOf")) return switch_anyof(i, key, lits);
    json_t *props = json_object_get(i, "properties");
    if (!json_is_object(props) || json_object_size(props) != 1) return false;
    void *it = json_object_iter(props);
    *key = json_object_iter_key(it);
    json_object_foreach(i, k, v) {
        if (!strcmp(k, "properties") || sv_sc_inert_keyword(k)) continue;
        if (!strcmp(k, "type") && json_is_string(v) && !strcmp(json_string_value(v), "object")) continue;
        if (!strcmp(k, "required") && json_array_size(v) == 1 && sv_sc_has_string(v, *key)) continue;
        return false;
    }
    return switch_literals(json_object_iter_value(it), lits);
}

static bool lits_meet(json_t *a, json_t *b) {
    for (size_t i = 0; i < json_array_size(a); i++)
        for (size_t j = 0; j < json_array_size(b); j++)
            if (json_equal(json_array_get(a, i), json_array_get(b, j))) return true;
    return false;
}

/* The switch among s's allOf members (the cases on the key the first case
 * names), or !sw->taken when there is none (or too few cases to pay for
 * the branches beside them); the union it stands for (a new reference), or
 * NULL when out of memory. */
static json_t *allof_switch(sctx_t *c, json_t *s, json_t *all, switch_t *sw) {
    size_t n = json_array_size(all);
    sw->n = 0;
    sw->key = NULL;
    sw->taken = false;
    if (n < 2 || !(sw->is_case = sv_arena_alloc(c->arena, n * sizeof *sw->is_case))) return NULL;
    json_t **lits = sv_arena_alloc(c->arena, n * sizeof *lits);
    if (!lits) return NULL;
    for (size_t i = 0; i < n; i++) lits[i] = NULL, sw->is_case[i] = false;
    json_t *every = json_array(), *branches = json_array(), *wo_key = json_array(), *non_obj = json_array();
    json_t *out = NULL;
    if (!every || !branches || !wo_key || !non_obj) goto done;
    for (size_t i = 0; i < n; i++) {
        const char *k;
        if (!switch_case(json_array_get(all, i), &k, &lits[i])) continue;
        bool ok = !sw->key || !strcmp(sw->key, k);
        for (size_t j = 0; ok && j < i; j++) ok = !sw->is_case[j] || !lits_meet(lits[i], lits[j]);
        if (!ok) {
            json_decref(lits[i]);
            lits[i] = NULL;
            continue;
        }
        sw->key = k;
        sw->is_case[i] = true;
        sw->n++;
    }
    json_t *ty = json_object_get(s, "type");
    bool obj_only = json_is_string(ty) && !strcmp(json_string_value(ty), "object");
    bool key_req = sw->key && sv_sc_has_string(json_object_get(s, "required"), sw->key);
    bool values = false; /* a case's then names members' values (not only keys) */
    for (size_t i = 0; i < n && !values; i++)
        if (sw->is_case[i]) values = then_names_values(json_object_get(json_array_get(all, i), "then"));
    if (sw->n < ((obj_only && key_req) || values ? SWITCH_MIN_CASES_TAGGED : SWITCH_MIN_CASES)) goto done;
    sw->taken = true;
    for (size_t i = 0; i < n; i++) {
        if (!sw->is_case[i]) continue;
        json_t *m = json_array_get(all, i), *iff = json_object_get(m, "if"), *thn = json_object_get(m, "then");
        if (json_array_extend(every, lits[i])) goto done;
        json_t *b = json_pack("{s:s, s:[s], s:{s:{s:O}}}", "type", "object", "required", sw->key, "properties", sw->key,
                              "enum", lits[i]);
        if (!b || (thn && json_object_set_new(b, "allOf", json_pack("[O]", thn))) || json_array_append_new(branches, b))
            goto done;
        if (thn && !json_object_get(iff, "required") && json_array_append(wo_key, thn)) goto done;
        if (thn && !json_object_get(iff, "type") && json_array_append(non_obj, thn)) goto done;
    }
    if (json_array_append_new(branches, json_pack("{s:s, s:[s], s:{s:{s:{s:O}}}}", "type", "object", "required", sw->key,
                                                  "properties", sw->key, "not", "enum", every)))
        goto done;
    if (!key_req) {
        json_t *b = json_pack("{s:s, s:{s:b}}", "type", "object", "properties", sw->key, 0);
        if (!b || (json_array_size(wo_key) && json_object_set(b, "allOf", wo_key)) || json_array_append_new(branches, b))
            goto done;
    }
    if (!obj_only) {
        json_t *b = json_pack("{s:[s,s,s,s,s]}", "type", "null", "boolean", "number", "string", "array");
        if (!b || (json_array_size(non_obj) && json_object_set(b, "allOf", non_obj)) || json_array_append_new(branches, b))
            goto done;
    }
    out = json_pack("{s:O}", "anyOf", branches);
done:
    for (size_t i = 0; i < n; i++) json_decref(lits[i]);
    json_decref(every);
    json_decref(branches);
    json_decref(wo_key);
    json_decref(non_obj);
    return out;
}

/* How the dependencies of s compile, beyond what objects take themselves
 * (the array form, dependentRequired, and schemas that name keys only:
 * sv_sc_deps_keys): DEPS_NONE; DEPS_UNIONS, each a union of disjoint
 * branches met in a product (dependency_union); DEPS_DIFFERENCES, some in
 * the general if/then form, whose `if` is subtracted from the universe. */
enum { DEPS_NONE, DEPS_UNIONS, DEPS_DIFFERENCES };
static int deps_form(json_t *s) {
    static const char *const maps[] = {"dependentSchemas", "dependencies"};
    if (sv_sc_deps_keys(s)) return DEPS_NONE;
    int form = DEPS_NONE;
    for (int l = 0; l < 2; l++) {
        json_t *m = json_object_get(s, maps[l]), *x;
        const char *k;
        if (!json_is_object(m)) continue;
        json_object_foreach(m, k, x) {
            if (json_is_array(x) || json_is_true(x) || (json_is_object(x) && json_object_size(x) == 0)) continue;
            if (!dependency_union_ok(x)) return DEPS_DIFFERENCES;
            form = DEPS_UNIONS;
        }
    }
    return form;
}

static sv_status lang_object(sctx_t *c, json_t *s, const sv_loc_t *loc, const unions_t *u, sv_ast_t **out) {
    sv_status st = check_keywords(c, s);
    if (st) return st;
    int mask = T_ALL;
    if ((st = type_mask(c, s, &mask))) return st;
    /* A `not` that names keys only is a condition the object's automaton
     * checks (sv_sc_object); non-objects meet it as every `required` holds
     * for them. */
    json_t *not = json_object_get(s, "not");
    bool not_keys = sv_sc_not_keys(s);
    if (not_keys && sv_sc_keycond_eval(not, NULL, 0, 0, false)) {
        mask &= T_OBJECT;
        const char *fk[SV_KEYCOND_MAX];
        uint32_t nfk = sv_sc_keycond_keys(not, fk) - 1;
        bool some = false; /* a key set that meets the condition */
        for (uint32_t set = 0; set < 1u << nfk && !some; set++) some = !sv_sc_keycond_eval(not, fk, nfk, set, true);
        if (!some) mask = 0;
    }
    if (not_keys && !mask) return sv_sc_fail(c, SV_ERR_EMPTY, "not", "no value satisfies not here");
    /* Schema-valued dependencies that name keys only: conditions too
     * (sv_sc_deps_keys); they ask nothing of non-objects. */
    bool deps_keys = sv_sc_deps_keys(s);
    /* An anyOf or oneOf of key conditions (sv_sc_union_keys): non-objects
     * meet each branch as every `required` holds for them. */
    bool union_keys = false;
    static const char *const ulists[] = {"anyOf", "oneOf"};
    for (int l = 0; l < 2; l++) {
        if (!sv_sc_union_keys(s, ulists[l])) continue;
        union_keys = true;
        json_t *a = json_object_get(s, ulists[l]);
        if (!sv_sc_keycond_list(a, ulists[l], NULL, 0, 0, false)) mask &= T_OBJECT;
        const char *fk[8];
        uint32_t nfk = 0;
        for (size_t i = 0; i < json_array_size(a); i++) sv_sc_keycond_collect(json_array_get(a, i), fk, &nfk, 8);
        bool some = false; /* a key set that meets it */
        for (uint32_t set = 0; set < 1u << nfk && !some; set++) some = sv_sc_keycond_list(a, ulists[l], fk, nfk, set, true);
        if (!some) mask &= ~T_OBJECT;
        if (!mask) return sv_sc_fail(c, SV_ERR_EMPTY, ulists[l], "no value satisfies %s here", ulists[l]);
    }

    /* $ref: in drafts up to 7 it replaces its siblings; later it is one more
     * conjunct. Recursion is expanded up to max_ref_depth times per target. */
    json_t *ref = json_object_get(s, "$ref");
    sv_dfa_t *acc = NULL;
    bool unset = true, made = false;
    if (ref) {
        if (!json_is_string(ref)) return sv_sc_fail(c, SV_ERR_SYNTAX, "$ref", "$ref must be a string");
        json_t *t;
        if ((st = sv_sc_resolve_ref(c, s, json_string_value(ref), &t))) return st;
        uint32_t seen = 0;
        for (uint32_t i = 0; i < c->ref_depth; i++) seen += c->ref_stack[i] == t;
        sv_ast_t *ta = NULL;
        if (seen >= c->o->max_ref_depth || c->ref_depth >= sizeof c->ref_stack / sizeof c->ref_stack[0]) {
            c->truncated = true;
            if (c->info) c->info->ref_truncated = true;
            ta = sv_ast_none(c->arena);
        } else if (seen > 0 && (ta = recursive_call(c, t))) {
            /* recursion with calls: the part of t calls itself, to any depth */
        } else {
            /* With calls, the first expansion of a target reserves a part,
             * so that a recursive reference inside it can call it. */
            uint32_t rec = UINT32_MAX;
            if (seen == 0 && c->ref_parts && sv_sc_calls(c) && (st = rec_open(c, t, &rec))) return st;
            c->ref_stack[c->ref_depth++] = t;
            size_t m = sv_sc_push(c, "$ref");
            st = sv_sc_lang(c, t, loc, &ta);
            sv_sc_pop(c, m);
            c->ref_depth--;
            if (st == SV_ERR_EMPTY) { ta = sv_ast_none(c->arena); st = SV_OK; }
            if (rec != UINT32_MAX && (st = rec_close(c, rec, st, &ta))) return st;
            if (st) return st;
        }
        if (c->draft <= 7 || sv_sc_ref_stands_alone(c, s)) {
            if (c->draft > 7 && json_object_size(s) > 1 && ta->kind == SV_AST_NONE) /* as meet() reports it */
                return sv_sc_fail(c, SV_ERR_EMPTY, "$ref", "no value satisfies $ref together with the rest of this schema");
            *out = ta;
            /* A big target is a part of its own, compiled once and called
             * from each place that refers to it (each tool's arguments are
             * one, tools.c): the caller's automaton holds a call, not a copy. */
            if (c->ref_parts && sv_sc_calls(c) && ta->kind != SV_AST_NONE) st = ref_part(c, ta, out);
            return st;
        }
        sv_dfa_t *td = NULL;
        if (ta->kind != SV_AST_NONE && (st = sv_sc_to_dfa(c, ta, &td)) && st != SV_ERR_EMPTY) return st;
        if ((st = meet(c, &acc, &unset, &made, ta->kind == SV_AST_NONE ? NULL : td, "$ref"))) return st;
    }

    /* The type-shaped base language. */
    bool any_type_keywords = has_type_keywords(s);
    json_t *cnst = json_object_get(s, "const"), *en = json_object_get(s, "enum");
    sv_ast_t *base = NULL;
    if (cnst || en) {
        /* Literals of the allowed types. */
        json_t *vals = en;
        if (en && !json_is_array(en)) return sv_sc_fail(c, SV_ERR_SYNTAX, "enum", "enum must be an array");
        size_t nv = cnst ? 1 : json_array_size(en);
        sv_ast_t **alts = sv_arena_alloc(c->arena, (nv + 1) * sizeof *alts);
        if (!alts) return sv_sc_nomem(c);
        uint32_t k = 0;
        for (size_t i = 0; i < nv; i++) {
            json_t *v = cnst ? cnst : json_array_get(vals, i);
            if (!value_has_type(c, v, mask)) continue;
            size_t m = sv_sc_push(c, cnst ? "const" : "enum");
            if (json_is_number(v) && (mask & T_INTEGER) && !(mask & T_NUMBER)) {
                /* An integer-typed location: the integer spelling only (draft 4
                 * counts 1.0 as no integer at all). */
                char buf[400];
                const char *d = sv_sc_decimal(c, v, buf, sizeof buf);
                st = d ? SV_OK : sv_sc_fail(c, SV_ERR_UNSUPPORTED, cnst ? "const" : "enum", "number out of range");
                if (!st && !(alts[k] = sv_sc_lit(c, d, strlen(d)))) st = sv_sc_nomem(c);
                if (!st && c->draft >= 6) {
                    /* and as an integral float: 10.0 (and -0.0 for 0) */
                    sv_ast_t *f[2] = {sv_sc_cat2(c, alts[k], sv_ast_repeat(c->arena, sv_sc_lit(c, ".0", 2), 0, 1)),
                                      sv_sc_lit(c, "-0.0", 4)};
                    alts[k] = sv_ast_alt(c->arena, f, strcmp(d, "0") == 0 ? 2 : 1);
                    if (!f[0] || !f[1] || !alts[k]) st = sv_sc_nomem(c);
                }
            } else {
                st = sv_sc_literal(c, v, loc, &alts[k]);
            }
            sv_sc_pop(c, m);
            if (st) return st;
            k++;
        }
        sv_ast_t *lits = sv_ast_alt(c->arena, alts, k);
        if (cnst && en) {
            /* Both: the const must also be in the enum. */
            bool found = false;
            for (size_t i = 0; i < json_array_size(en); i++) found |= json_equal(cnst, json_array_get(en, i));
            if (!found) lits = sv_ast_none(c->arena);
        }
        if (any_type_keywords) {
            sv_ast_t **tl = sv_arena_alloc(c->arena, 7 * sizeof *tl);
            uint32_t nt = 0;
            for (int b = 1; b <= T_INTEGER; b <<= 1)
                if ((mask & b) && (st = type_lang(c, s, b, loc, &tl[nt++]))) return st;
            sv_dfa_t *td, *ld;
            if ((st = sv_sc_to_dfa(c, sv_ast_alt(c->arena, tl, nt), &td)) && st != SV_ERR_EMPTY) return st;
            if (st == SV_ERR_EMPTY) td = NULL;
            st = sv_sc_to_dfa(c, lits, &ld);
            if (st == SV_ERR_EMPTY) ld = NULL, st = SV_OK;
            if (st) return st;
            if ((st = meet(c, &acc, &unset, &made, td, "type")) ||
                (st = meet(c, &acc, &unset, &made, ld, cnst ? "const" : "enum")))
                return st;
        } else {
            base = lits;
        }
    } else if ((any_type_keywords || mask != T_ALL || not_keys || deps_keys || union_keys) && !u->type_implied) {
        sv_ast_t *tl[7];
        uint32_t nt = 0;
        sv_status empty = SV_OK;
        for (int b = 1; b <= T_INTEGER; b <<= 1) {
            if (!(mask & b)) continue;
            /* A type with no value here (an object whose required key is
             * closed out) leaves the schema's other types. */
            if ((st = type_lang(c, s, b, loc, &tl[nt])) == SV_ERR_EMPTY && (mask & ~b)) {
                empty = st;
                continue;
            }
            if (st) return st;
            nt++;
        }
        if (nt == 0 && empty) return empty;
        if (nt > 1 && (st = sv_sc_big_alts_as_parts(c, tl, nt))) return st;
        base = sv_ast_alt(c->arena, tl, nt);
    }

    /* anyOf: union. So is a oneOf whose branches share no value (proven
     * from their text, schema_disjoint.c) where no anyOf stands beside it. */
    json_t *any = u->any, *one = u->one;
    const char *any_kw = "anyOf";
    bool one_disjoint = one && one_union(c, u);
    if (one_disjoint && !any && json_array_size(one) > 0) {
        any = one;
        any_kw = "oneOf";
        one = NULL;
    }
    sv_ast_t *anyl = NULL;
    if (any) {
        if (!json_is_array(any) || json_array_size(any) == 0) return sv_sc_fail(c, SV_ERR_SYNTAX, any_kw, "%s must be a non-empty array", any_kw);
        size_t n = json_array_size(any);
        sv_ast_t **alts = sv_arena_alloc(c->arena, n * sizeof *alts);
        json_t **bj = sv_arena_alloc(c->arena, n * sizeof *bj); /* the branch of each alternative */
        if (!alts || !bj) return sv_sc_nomem(c);
        uint32_t k = 0;
        /* A union that is the whole schema, in a language no product will
         * see (sv_sc_calls: positive, and memoized apart), gives each branch
         * its own location and so its own key order: a tool's arguments in
         * the order its parameters list them, whatever the other tools'
         * order. The shared order matters only where a difference must see
         * one spelling per value. Not beside an implied type (type_implied),
         * which compiled as a product before and keeps that shape: a union
         * of many objects each in its own key order outgrows the state
         * budget where one shared order does not (MaskBench's
         * Github_ultra---o21375, 30 objects). */
        bool whole = sv_sc_calls(c) && base == NULL && unset && !json_object_get(s, "allOf") && !one &&
                     !(not && !not_keys) && !json_object_get(s, "if") &&
                     deps_form(s) == DEPS_NONE;
        bool split = whole && !u->type_implied;
        for (size_t i = 0; i < n; i++) {
            size_t m = sv_sc_push(c, any_kw);
            push_index(c, i);
            sv_loc_t bl;
            const sv_loc_t *use = loc;
            json_t *br = json_array_get(any, i);
            if (split && json_is_object(br)) {
                st = sv_sc_loc_closure(c, &br, 1, loc->lits, loc->nlits, &bl);
                if (!st) st = sv_sc_loc_context(c, &br, 1, &bl);
                if (st) { sv_sc_pop(c, m); return st; }
                bl.orders = loc->orders;
                bl.level = loc->level;
                use = &bl;
            }
            st = sv_sc_lang(c, br, use, &alts[k]);
            sv_sc_pop(c, m);
            if (st == SV_ERR_EMPTY) continue;
            if (st) return st;
            bj[k++] = br;
        }
        if (k == 0) return sv_sc_fail(c, SV_ERR_EMPTY, any_kw, "no branch of %s matches any value", any_kw);
        inline_alike_calls(c, alts, k);
        if (k > 1 && (st = sv_sc_big_alts_as_parts(c, alts, k))) return st;
        if (whole && (st = union_calls(c, bj, alts, k, &anyl))) return st;
        if (!anyl) anyl = sv_ast_alt(c->arena, alts, k);
    }

    bool dep_schemas = deps_form(s) != DEPS_NONE;
    bool needs_dfa = !unset || json_object_get(s, "allOf") || one || (not && !not_keys) ||
                     json_object_get(s, "if") || (base && anyl) || dep_schemas;
    if (!needs_dfa) {
        if (base && !anyl) *out = base;
        else if (anyl) *out = anyl;
        else if ((st = sv_sc_any_value(c, sv_sc_any_depth(c, loc->level), out))) return st;
        return SV_OK;
    }
    sv_dfa_t *d;
    if (base) {
        st = sv_sc_to_dfa(c, base, &d);
        if (st == SV_ERR_EMPTY) d = NULL, st = SV_OK;
        if (st || (st = meet(c, &acc, &unset, &made, d, "type"))) return st;
    }
    if (anyl) {
        st = sv_sc_to_dfa(c, anyl, &d);
        if (st == SV_ERR_EMPTY) d = NULL, st = SV_OK;
        if (st || (st = meet(c, &acc, &unset, &made, d, any_kw))) return st;
    }
    json_t *all = json_object_get(s, "allOf");
    if (all) {
        if (!json_is_array(all)) return sv_sc_fail(c, SV_ERR_SYNTAX, "allOf", "allOf must be an array");
        switch_t sw;
        json_t *su = allof_switch(c, s, all, &sw);
        if (sw.taken) {
            /* a failed defer has released su already */
            if (!su || !sv_arena_defer(c->arena, (sv_arena_cleanup_fn)json_decref, su)) return sv_sc_nomem(c);
            size_t m = sv_sc_push(c, "allOf");
            st = sub_dfa(c, su, loc, "allOf", false, &d, NULL);
            sv_sc_pop(c, m);
            if (st || (st = meet(c, &acc, &unset, &made, d, "allOf"))) return st;
        }
        for (size_t i = 0; i < json_array_size(all); i++) {
            if (sw.taken && sw.is_case[i]) continue;
            size_t m = sv_sc_push(c, "allOf");
            push_index(c, i);
            st = sub_dfa(c, json_array_get(all, i), loc, "allOf", false, &d, NULL);
            sv_sc_pop(c, m);
            if (st || (st = meet(c, &acc, &unset, &made, d, "allOf"))) return st;
        }
    }
    sv_dfa_t *U = NULL;
    if (one) {
        if (!json_is_array(one) || json_array_size(one) == 0) return sv_sc_fail(c, SV_ERR_SYNTAX, "oneOf", "oneOf must be a non-empty array");
        size_t n = json_array_size(one);
        sv_dfa_t **br = sv_arena_alloc(c->arena, n * sizeof *br);
        if (!br) return sv_sc_nomem(c);
        bool trunc = false;
        for (size_t i = 0; i < n; i++) {
            size_t m = sv_sc_push(c, "oneOf");
            push_index(c, i);
            bool t;
            st = sub_dfa(c, json_array_get(one, i), loc, "oneOf", false, &br[i], &t);
            sv_sc_pop(c, m);
            if (st) return st;
            trunc |= t;
        }
        /* Pairwise disjoint branches: the union is exact as it is. Which
         * pairs share a string (meets[i * n + j]): a branch subtracts only
         * those (the branches are spelled at one location, so two that
         * share a value share its spelling there, as the union's case
         * assumes). */
        bool disjoint = true;
        uint8_t *meets = one_disjoint ? NULL : sv_arena_alloc(c->arena, n * n);
        if (!one_disjoint && !meets) return sv_sc_nomem(c);
        if (meets) memset(meets, 0, n * n);
        for (size_t i = 0; i < n && !one_disjoint; i++)
            for (size_t j = i + 1; j < n; j++) {
                bool m;
                if ((st = sc_meets(c, br[i], br[j], "oneOf", &m))) return st;
                if (m) disjoint = false, meets[i * n + j] = meets[j * n + i] = 1;
            }
        if (!disjoint) {
            /* Exactly one: each branch restricted to canonical spellings, minus
             * the others. A cut recursive branch may miss values that another
             * branch has, which would let those through: refuse. */
            if (trunc)
                return sv_sc_fail(c, SV_ERR_UNSUPPORTED, "oneOf",
                                  "overlapping oneOf branches over a language sieve narrows (a recursive $ref cut at "
                                  "max_ref_depth %u, or a format other than date and ipv4) cannot be compiled exactly",
                                  c->o->max_ref_depth);
            /* The universe nests as deep as the deepest branch spells its
             * containers: a shallower one would cut the branches' own
             * structure, where the depth limit is meant for free-form
             * values; and a branch's free-form values under the keys
             * another branch spells go as deep as that branch's. Only
             * where free-form values are calls, to any depth: a bounded
             * free-form value in the branch subtracted would miss the
             * deeper values of the universe, and keep them; and only where
             * free-form values have their deep levels (the default), which
             * a schema that exceeds a state budget loses. The deeper
             * universe makes bigger products: past a compile's allowance
             * of their states (SV_SC_DEEP_ONEOF_WORK), a oneOf is built
             * again over the universe of free-form depth, and the schema's
             * stats say so (narrowed_by_budget "oneof_depth"). */
            uint32_t depth = 0;
            bool may = c->calls && c->any_products && c->deep_oneof_left &&
                       (c->o->any_deep_levels > 0 || c->o->max_any_depth == SV_SCHEMA_ANY_DEPTH_AUTO);
            for (size_t i = 0; i < n && may; i++) {
                uint32_t di = br[i] ? json_depth(br[i]) : 0;
                if (di > depth) depth = di;
            }
            bool deep = depth > sv_sc_any_depth(c, loc->level);
            /* an attempt after one that failed on a budget keeps the
             * universe at the free-form depth (compile_schema) */
            if (deep && c->o->oneof_shallow) {
                deep = false;
                if (c->info) c->info->narrowed_by_budget |= SV_SCHEMA_NARROWED_ONEOF_DEPTH;
            }
            /* as the deep levels: a state budget the schema then exceeds
             * redoes it without them (compile_schema) */
            if (deep) c->deep_any = true;
            /* products to make: per branch, one with the universe and one
             * per branch it shares a string with */
            uint64_t nprod = 0;
            for (size_t i = 0; i < n * n; i++) nprod += meets[i];
            for (size_t i = 0; i < n; i++) nprod += br[i] != NULL;
            sv_dfa_t *res = NULL;
            bool conflict0 = c->calls_conflict, narrowed = false;
            if (!deep) depth = 0;
            if ((st = universe_to(c, loc, depth, &U))) return st;
            /* The same branches over the same universe (one definition
             * behind $refs at several keys) make the same result: each
             * deep one costs hundreds of milliseconds, and the DFA memo
             * does not keep products that big. Keyed by the automata's
             * fingerprints, as the DFA memo keys its products. */
            uint64_t *fp = sv_arena_alloc(c->arena, (n + 1) * sizeof *fp);
            if (!fp) return sv_sc_nomem(c);
            for (size_t i = 0; i < n; i++) fp[i] = br[i] ? sv_dfa_fingerprint(br[i]) ^ sv_dfa_num_states(br[i]) : 0;
            fp[n] = sv_dfa_fingerprint(U) ^ sv_dfa_num_states(U);
            bool hit = false;
            for (oneof_memo_t *e = c->oneofs; e && !hit; e = e->next) {
                if (e->n != n || e->depth != depth || memcmp(e->fp, fp, (n + 1) * sizeof *fp)) continue;
                hit = true;
                res = e->res;
                if (e->narrowed && c->info) c->info->narrowed_by_budget |= SV_SCHEMA_NARROWED_ONEOF_DEPTH;
            }
            for (int pass = 0; pass < 2 && !hit; pass++) {
                uint64_t work = 0;
                bool over = false, sized = false;
                if (!U) st = universe_to(c, loc, 0, &U);
                if (deep && !st) work += sv_dfa_num_states(U);
                sv_dfa_t **xs = st ? NULL : sv_arena_alloc(c->arena, n * sizeof *xs); /* unions of the branches' parts */
                size_t nxs = 0, nparts = 0;
                if (!st && !xs) return sv_sc_nomem(c);
                for (size_t i = 0; i < n && !over && !st; i++) {
                    if (!br[i]) continue;
                    /* every branch in the universe: one spelling per value,
                     * as the others see it */
                    sv_dfa_t *x;
                    if ((st = sv_sc_product(c, br[i], U, SV_DFA_AND, "oneOf", &x))) break;
                    if (x) {
                        /* the first branch in the universe sizes them all */
                        if (deep && !sized && (uint64_t)sv_dfa_num_states(x) * nprod > c->deep_oneof_left) over = true;
                        sized = true;
                        work += sv_dfa_num_states(x);
                    }
                    for (size_t j = 0; j < n && x && !over; j++) {
                        sv_dfa_t *prev = x;
                        if (!meets[i * n + j]) continue;
                        /* what is left of a branch often shares nothing
                         * more with the next one (a tag the others reject
                         * once a first difference took their common
                         * values): finding that builds no product */
                        bool m;
                        if ((st = sc_meets(c, prev, br[j], "oneOf", &m))) break;
                        if (!m) continue;
                        if ((st = sv_sc_product(c, prev, br[j], SV_DFA_DIFF, "oneOf", &x))) break;
                        sv_sc_drop(c, prev);
                        if (x) work += sv_dfa_num_states(x);
                    }
                    if (st) break;
                    over = over || (deep && work > c->deep_oneof_left);
                    if (!x || over) {
                        if (x) sv_sc_drop(c, x);
                        continue;
                    }
                    /* the branches' parts joined in pairs, then pairs of
                     * those (a stack of unions of 1, 2, 4, ... parts, as
                     * the bits of the count so far): each union about the
                     * size of its operands, where one growing union would
                     * meet every part at nearly the result's size; log n
                     * of them alive at once */
                    xs[nxs++] = x;
                    for (size_t k = ++nparts; !(k & 1) && !st; k >>= 1) st = join_top(c, xs, &nxs);
                    if (st) break;
                }
                while (!st && !over && nxs > 1) st = join_top(c, xs, &nxs);
                if (!st && !over) res = nxs ? xs[0] : NULL;
                else
                    for (size_t i = 0; i < nxs; i++)
                        if (xs[i]) sv_arena_release(c->arena, xs[i], ~0u);
                /* A budget met over the deeper universe is met again over
                 * the other: the products are smaller there. */
                if (st && !(deep && narrower(st))) return st;
                if (!over && !st) {
                    if (deep) c->deep_oneof_left -= work;
                    break;
                }
                /* over the allowance: again at the free-form depth */
                if (st) {
                    if (c->err) sv_error_clear(c->err);
                    c->calls_conflict = conflict0;
                    st = SV_OK;
                }
                sv_sc_drop(c, res);
                res = U = NULL;
                deep = false;
                narrowed = true;
                c->deep_oneof_left = 0;
                if (c->info) c->info->narrowed_by_budget |= SV_SCHEMA_NARROWED_ONEOF_DEPTH;
            }
            if (!hit) {
                oneof_memo_t *e = sv_arena_alloc(c->arena, sizeof *e);
                if (!e) return sv_sc_nomem(c);
                *e = (oneof_memo_t){c->oneofs, (uint32_t)n, depth, fp, res, narrowed};
                c->oneofs = e;
            }
            if ((st = meet(c, &acc, &unset, &made, res, "oneOf"))) return st;
        } else {
            sv_dfa_t *res = NULL;
            bool made_res = false;
            for (size_t i = 0; i < n; i++) {
                if (!br[i]) continue;
                sv_dfa_t *prev = res;
                if (!res) res = br[i];
                else if ((st = sv_sc_product(c, prev, br[i], SV_DFA_OR, "oneOf", &res))) return st;
                if (made_res) sv_sc_drop(c, prev);
                made_res = prev != NULL;
            }
            if ((st = meet(c, &acc, &unset, &made, res, "oneOf"))) return st;
        }
    }
    if (not && !not_keys) {
        size_t m = sv_sc_push(c, "not");
        st = sub_dfa(c, not, loc, "not", true, &d, NULL);
        sv_sc_pop(c, m);
        if (st) return st;
        if (!U && (st = universe(c, loc, &U))) return st;
        sv_dfa_t *x = U;
        if (d && (st = sv_sc_product(c, U, d, SV_DFA_DIFF, "not", &x))) return st;
        if ((st = meet(c, &acc, &unset, &made, x, "not"))) return st;
    }
    /* dependentSchemas (and schema-valued dependencies): for each key k with
     * schema D, a conjunct that says exactly "an object holding k must
     * satisfy D". */
    static const char *const dep_maps[] = {"dependentSchemas", "dependencies"};
    for (int l = 0; l < 2 && !deps_keys; l++) {
        json_t *m = json_object_get(s, dep_maps[l]), *x;
        const char *k;
        if (!json_is_object(m)) continue;
        json_object_foreach(m, k, x) {
            if (json_is_array(x)) continue; /* dependentRequired form: objects handle it */
            if (json_is_true(x) || (json_is_object(x) && json_object_size(x) == 0)) continue;
            json_t *cond = dependency_union(k, x);
            if (!cond) cond = json_pack("{s:{s:s, s:[s]}, s:O}", "if", "type", "object", "required", k, "then", x);
            if (!cond || !sv_arena_defer(c->arena, (sv_arena_cleanup_fn)json_decref, cond)) return sv_sc_nomem(c);
            size_t mk = sv_sc_push(c, dep_maps[l]);
            sv_sc_push(c, k);
            st = sub_dfa(c, cond, loc, dep_maps[l], false, &d, NULL);
            sv_sc_pop(c, mk);
            if (st || (st = meet(c, &acc, &unset, &made, d, dep_maps[l]))) return st;
        }
    }
    json_t *iff = json_object_get(s, "if");
    if (iff) {
        json_t *thn = json_object_get(s, "then"), *els = json_object_get(s, "else");
        sv_dfa_t *di, *dt = NULL, *de = NULL;
        size_t m = sv_sc_push(c, "if");
        st = sub_dfa(c, iff, loc, "if", true, &di, NULL);
        sv_sc_pop(c, m);
        if (st) return st;
        if (!U && (st = universe(c, loc, &U))) return st;
        if (thn) {
            m = sv_sc_push(c, "then");
            st = sub_dfa(c, thn, loc, "then", false, &dt, NULL);
            sv_sc_pop(c, m);
            if (st) return st;
        } else {
            dt = U;
        }
        if (els) {
            m = sv_sc_push(c, "else");
            st = sub_dfa(c, els, loc, "else", false, &de, NULL);
            sv_sc_pop(c, m);
            if (st) return st;
        } else {
            de = U;
        }
        /* (if ∩ then) ∪ ((U \ if) ∩ else) */
        sv_dfa_t *a = NULL, *b = U, *r = NULL;
        if (di && dt && (st = sv_sc_product(c, di, dt, SV_DFA_AND, "then", &a))) return st;
        if (di && (st = sv_sc_product(c, U, di, SV_DFA_DIFF, "if", &b))) return st;
        if (b && de && (st = sv_sc_product(c, b, de, SV_DFA_AND, "else", &b))) return st;
        if (!de) b = NULL;
        if (a && b) { if ((st = sv_sc_product(c, a, b, SV_DFA_OR, "if", &r))) return st; }
        else r = a ? a : b;
        if ((st = meet(c, &acc, &unset, &made, r, "if"))) return st;
    }
    if (unset) return sv_sc_any_value(c, sv_sc_any_depth(c, loc->level), out);
    if (!acc) return sv_sc_fail(c, SV_ERR_EMPTY, NULL, "the schema at this location matches no value");
    *out = sv_ast_dfa(c->arena, acc, false);
    return *out ? SV_OK : sv_sc_nomem(c);
}

/* Memo of compiled subschemas. A language depends on the schema and on its
 * location (which fixes key orders); it also depends on the $ref stack, but
 * only when an expansion was cut there, so only uncut results are kept. The
 * ASTs are immutable and live in the arena, so a hit shares the subtree:
 * definitions referenced from many places are compiled once. */
typedef struct sv_memo {
    json_t *s;
    bool calls;
    bool plain;   /* built for a product (no_calls > 0): no calls */
    bool keysets; /* built with key sets (sv_sc_keysets) */
    bool seen;    /* built where a difference sees it (no_keysets > 0: integers take "1.0") */
    sv_loc_t loc;
    sv_ast_t *ast;
} memo_t;

static bool loc_equal(const sv_loc_t *a, const sv_loc_t *b) {
    return a->n == b->n && a->nlits == b->nlits && a->nctx == b->nctx && a->orders == b->orders &&
           a->level == b->level &&
           (a->n == 0 || memcmp(a->v, b->v, a->n * sizeof *a->v) == 0) &&
           (a->nlits == 0 || memcmp(a->lits, b->lits, a->nlits * sizeof *a->lits) == 0) &&
           (a->nctx == 0 || memcmp(a->ctx, b->ctx, a->nctx * sizeof *a->ctx) == 0);
}

static sv_status merge_allof(sctx_t *c, json_t *s, json_t **out, uint32_t *idx);

/* A union (anyOf or oneOf) beside the object keywords it meets, which is
 * the conjunction an allOf writes (distribute_allof): beside required
 * keys without properties, or, with key sets (--key-order any), beside
 * properties: each merged object takes its keys in any order, where the
 * product's objects range over the location's keys, too many for key sets
 * (docs/fsm.md, "An allOf over one union is distributed"). */
static bool union_beside_object(const sctx_t *c, json_t *s) {
    if (!json_object_get(s, "anyOf") && !json_object_get(s, "oneOf")) return false;
    if (json_object_get(s, "properties")) return c->keyset;
    return json_object_get(s, "required") != NULL;
}

sv_status sv_sc_lang(sctx_t *c, json_t *s, const sv_loc_t *loc, sv_ast_t **out) {
    if (json_is_true(s)) return sv_sc_any_value(c, sv_sc_any_depth(c, loc->level), out);
    if (json_is_false(s)) return sv_sc_fail(c, SV_ERR_EMPTY, NULL, "the schema false matches no value");
    if (!json_is_object(s)) return sv_sc_fail(c, SV_ERR_SYNTAX, NULL, "a schema must be an object or a boolean");
    for (uint32_t i = 0; i < c->nmemo; i++)
        if (c->memo[i].s == s && c->memo[i].calls == sv_sc_calls(c) && c->memo[i].plain == (c->no_calls > 0) &&
            c->memo[i].keysets == sv_sc_keysets(c) && c->memo[i].seen == (c->no_keysets > 0) &&
            loc_equal(&c->memo[i].loc, loc)) {
            *out = c->memo[i].ast;
            return SV_OK;
        }
    /* An allOf, or a union beside object keywords (union_beside_object:
     * the schema's keywords one conjunct, its union another), that merges
     * into one object or distributes over the union (distribute_allof). */
    if (json_object_get(s, "allOf") || union_beside_object(c, s)) {
        json_t *m;
        uint32_t mi;
        sv_status st = merge_allof(c, s, &m, &mi);
        if (st) return st;
        /* The merge resolved the $refs that guard recursion (schema.c
         * rec_open): met again inside itself, s takes the product path. */
        if (m && !c->merges[mi].active) {
            c->merges[mi].active = true;
            st = sv_sc_lang(c, m, loc, out);
            c->merges[mi].active = false;
            return st;
        }
    }
    /* Nesting is bounded here, where every path of the compiler recurses:
     * $ref counts its own expansions, but a member context (schema_container.c)
     * can reach a schema again without a $ref, which would recurse until the
     * stack runs out. */
    /* The time budget, between the stages that check it themselves (a
     * schema of many small pieces spends its time here, in no one stage). */
    if (sv_memacct_cancelled()) return sv_sc_fail(c, SV_ERR_CANCELLED, NULL, "the compile was cancelled");
    if (c->deadline_ns && sv_now_ns() > c->deadline_ns)
        return sv_sc_fail(c, SV_ERR_TIMEOUT, NULL, "compiling the schema exceeded the time budget of %llu ms",
                          (unsigned long long)(c->o->lim.max_time_us / 1000));
    if (c->lang_depth >= SV_SCHEMA_MAX_NESTING)
        return sv_sc_fail(c, SV_ERR_BUDGET, NULL, "the schema nests deeper than %u levels", SV_SCHEMA_MAX_NESTING);
    bool keep = c->truncated;
    c->truncated = false;
    /* A schema whose keywords are combined by products builds its pieces
     * flat (calls reach no product); a superset of lang_object's cases. */
    bool ty = json_object_get(s, "type") != NULL, lit = json_object_get(s, "const") || json_object_get(s, "enum");
    /* A oneOf of disjoint branches is a union, as anyOf is (lang_object),
     * unless an anyOf stands beside it. */
    unions_t u;
    unions_of(c, s, &u);
    bool ou = u.one && one_union(c, &u);
    int deps = deps_form(s);
    bool products = json_object_get(s, "allOf") || (u.one && (!ou || u.any)) ||
                    (json_object_get(s, "not") && !sv_sc_not_keys(s)) ||
                    json_object_get(s, "if") ||
                    deps != DEPS_NONE ||
                    (json_object_get(s, "$ref") && c->draft > 7 && !sv_sc_ref_stands_alone(c, s)) ||
                    ((u.any || ou) && json_object_size(s) > 1 && (ty || lit || has_type_keywords(s)) &&
                     !(u.type_implied && (u.any || ou))) ||
                    (lit && (ty || has_type_keywords(s)));
    /* the products that take differences: no key sets (sv_sc_keysets) */
    bool differences = (u.one && !ou) || (json_object_get(s, "not") && !sv_sc_not_keys(s)) ||
                       json_object_get(s, "if") || deps == DEPS_DIFFERENCES;
    if (products) c->no_calls++;
    if (differences) c->no_keysets++;
    c->lang_depth++;
    sv_status st = lang_object(c, s, loc, &u, out);
    if (!st && u.type_filter) st = sv_sc_type_filter(c, *out, u.type_filter, out);
    c->lang_depth--;
    if (products) c->no_calls--;
    if (differences) c->no_keysets--;
    bool cut = c->truncated;
    c->truncated = keep || cut;
    if (st || cut) return st;
    if (c->nmemo == c->capmemo) {
        uint32_t cap = c->capmemo ? c->capmemo * 2 : 64;
        memo_t *m = sv_arena_alloc(c->arena, cap * sizeof *m);
        if (!m) return SV_OK; /* the memo is an optimization */
        if (c->nmemo) memcpy(m, c->memo, c->nmemo * sizeof *m);
        c->memo = m;
        c->capmemo = cap;
    }
    c->memo[c->nmemo++] = (memo_t){s, sv_sc_calls(c), c->no_calls > 0, sv_sc_keysets(c), c->no_keysets > 0, *loc, *out};
    return SV_OK;
}

/* Room for one more element in an arena array of n used, *cap allocated
 * (doubling from 16; the old block stays in the arena). */
static bool arena_room(sctx_t *c, void **v, uint32_t n, uint32_t *cap, size_t elem) {
    if (n < *cap) return true;
    uint32_t ncap = *cap ? 2 * *cap : 16;
    void *p = sv_arena_alloc(c->arena, (size_t)ncap * elem);
    if (!p) return false;
    if (n) memcpy(p, *v, (size_t)n * elem);
    *v = p;
    *cap = ncap;
    return true;
}

/* ---- allOf of plain objects ----------------------------------------------------- */

/* An allOf whose conjuncts (the schema itself, its allOf branches, the
 * targets of their $refs, recursively) use only type "object", properties
 * and required, besides keywords sieve ignores, is one object: each key's
 * value meets every conjunct that names it, the required keys are the
 * union, and a key no conjunct names is free in all of them. Compiled as
 * that object, it needs no product: its free-form values stay calls and nest
 * to any depth, and its members are built once instead of once per branch
 * and intersected. The merged schema holds the original subschemas (their
 * $refs resolve from where they are); a key named by several conjuncts gets
 * a new {"allOf": [...]} of them. Key order is unchanged: the location, which
 * the caller built from the same closure, fixes it. */
#define MERGE_MAX_CONJUNCTS 64

static bool merge_kw_ok(const char *k) {
    static const char *const ok[] = {"type", "properties", "required", "allOf", "$ref", "$defs", "definitions"};
    if (in_list(k, ok, sizeof ok / sizeof ok[0])) return true;
    /* any other keyword sieve compiles or refuses constrains the instance */
    return !in_list(k, handled, sizeof handled / sizeof handled[0]) &&
           !in_list(k, refused, sizeof refused / sizeof refused[0]);
}

/* The target of x's $ref for a merge, or NULL where it does not resolve
 * (the compile that follows reports that, so c->err is kept). */
static json_t *merge_ref_target(sctx_t *c, json_t *x, json_t *ref) {
    json_t *t;
    if (!json_is_string(ref)) return NULL;
    sv_error_t keep;
    if (c->err) keep = *c->err;
    bool ok = sv_sc_resolve_ref(c, x, json_string_value(ref), &t) == SV_OK;
    if (c->err) *c->err = keep;
    return ok ? t : NULL;
}

/* The conjuncts that hold a union, for distribute_allof. */
#define DISTRIBUTE_MAX_UNIONS 3
typedef struct { json_t *v[DISTRIBUTE_MAX_UNIONS]; uint32_t n; } holders_t;

/* Adds x and what it implies to conj; false when some conjunct cannot merge.
 * With u, up to DISTRIBUTE_MAX_UNIONS conjuncts may also hold one anyOf or
 * oneOf each (and no $ref), which u receives (distribute_allof). */
static bool merge_collect(sctx_t *c, json_t *x, int depth, json_t **conj, uint32_t *n, bool *object, holders_t *u) {
    if (json_is_true(x)) return true;
    if (!json_is_object(x) || depth > 16) return false;
    for (uint32_t i = 0; i < *n; i++)
        if (conj[i] == x) return true; /* allOf is idempotent (and a $ref cycle ends here) */
    const char *k;
    json_t *v;
    json_object_foreach(x, k, v) {
        if (merge_kw_ok(k)) continue;
        if (!strcmp(k, "additionalProperties") && (json_is_boolean(v) || unconstrained(v))) continue;
        bool uk = !strcmp(k, "anyOf") || !strcmp(k, "oneOf");
        if (!u || !uk || u->n == DISTRIBUTE_MAX_UNIONS || json_object_get(x, "$ref") ||
            (json_object_get(x, "anyOf") && json_object_get(x, "oneOf")) || !json_is_array(v) ||
            json_array_size(v) < 2)
            return false;
        u->v[u->n++] = x; /* x is met once (conj holds it from here on) */
    }
    json_t *ref = json_object_get(x, "$ref");
    if (ref) {
        json_t *t = merge_ref_target(c, x, ref);
        if (!t || !merge_collect(c, t, depth + 1, conj, n, object, u)) return false;
        if (c->draft <= 7) return true; /* a $ref's siblings are ignored before 2019-09 */
    }
    json_t *ty = json_object_get(x, "type");
    if (ty && !(json_is_string(ty) && strcmp(json_string_value(ty), "object") == 0)) return false;
    if (ty) *object = true;
    json_t *props = json_object_get(x, "properties"), *req = json_object_get(x, "required");
    if ((props && !json_is_object(props)) || (req && !json_is_array(req))) return false;
    if (*n == MERGE_MAX_CONJUNCTS) return false;
    conj[(*n)++] = x;
    json_t *all = json_object_get(x, "allOf");
    if (all) {
        if (!json_is_array(all) || json_array_size(all) == 0) return false;
        for (size_t i = 0; i < json_array_size(all); i++)
            if (!merge_collect(c, json_array_get(all, i), depth + 1, conj, n, object, u)) return false;
    }
    return true;
}

/* The object that conjuncts conj[0..n) merged by merge_collect stand for
 * (object: one of them says "type": "object"); *out is NULL when out of
 * memory. Only their properties and required are read: their allOf and
 * $ref were followed by merge_collect, and a union that distribute_allof
 * took out is the caller's. */
static json_t *merge_conjuncts(json_t *const *conj, uint32_t n, bool object) {
    /* per key, the subschemas that name it, in conjunct order */
    json_t *lists = json_object(), *props = json_object(), *req = json_array(), *m = json_object();
    bool ok = lists && props && req && m;
    /* A conjunct with additionalProperties false admits only the keys it
     * names: the merged object admits those every such conjunct names, and
     * is closed. A required key outside them leaves no object (the object
     * compiler finds the required member empty). */
    bool closed = false;
    for (uint32_t i = 0; i < n; i++) closed |= json_is_false(json_object_get(conj[i], "additionalProperties"));
    for (uint32_t i = 0; ok && i < n; i++) {
        const char *k;
        json_t *v, *r = json_object_get(conj[i], "required");
        json_object_foreach(json_object_get(conj[i], "properties"), k, v) {
            json_t *l = json_object_get(lists, k);
            if (!l && ok) ok = (l = json_array()) && json_object_set_new(lists, k, l) == 0;
            if (ok) ok = json_array_append(l, v) == 0;
        }
        for (size_t j = 0; ok && json_is_array(r) && j < json_array_size(r); j++) {
            json_t *x = json_array_get(r, j);
            bool dup = false;
            for (size_t q = 0; q < json_array_size(req) && !dup; q++) dup = json_equal(json_array_get(req, q), x);
            if (!dup) ok = json_array_append(req, x) == 0;
        }
    }
    const char *k;
    json_t *l;
    json_object_foreach(lists, k, l) {
        if (!ok) break;
        bool admitted = true;
        for (uint32_t i = 0; closed && i < n && admitted; i++)
            admitted = !json_is_false(json_object_get(conj[i], "additionalProperties")) ||
                       json_object_get(json_object_get(conj[i], "properties"), k);
        if (!admitted) continue;
        /* conjuncts that accept every value add nothing (one stays if all do) */
        for (size_t j = json_array_size(l); ok && j-- > 0 && json_array_size(l) > 1;)
            if (unconstrained(json_array_get(l, j))) ok = json_array_remove(l, j) == 0;
        if (!ok) break;
        if (json_array_size(l) == 1) ok = json_object_set(props, k, json_array_get(l, 0)) == 0;
        else ok = json_object_set_new(props, k, json_pack("{s:O}", "allOf", l)) == 0;
    }
    if (ok && object) ok = json_object_set_new(m, "type", json_string("object")) == 0;
    if (ok) ok = json_object_set(m, "properties", props) == 0 && json_object_set(m, "required", req) == 0;
    if (ok && closed) ok = json_object_set_new(m, "additionalProperties", json_false()) == 0;
    json_decref(lists);
    json_decref(props);
    json_decref(req);
    if (!ok) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* An allOf that would merge but for one anyOf or oneOf among its conjuncts
 * (an object base beside a union of its kinds: {"allOf": [{"$ref":
 * "#/definitions/base"}, {"oneOf": [...kinds]}]}, as API descriptions write
 * it) is distributed over the union: A and (B1 or ... or Bn) is (A and B1) or
 * ... or (A and Bn), and exactly one Bi holds beside A exactly when exactly
 * one (A and Bi) holds. Each (A and Bi) merges into one object, so the union
 * is one of plain objects, whose values are calls, instead of a product of A
 * with the union's automaton (MaskBench's Github_ultra---o358 took 2.9 s
 * so, 72 ms now). Only where every branch merges, and a oneOf only where the merged
 * objects are proven disjoint (schema_disjoint.c; the tag that tells the
 * kinds apart is often required by A, not by the branches). Several unions
 * (two lists of kinds met at one member: properties and a matching
 * patternProperties entry) distribute over every combination of their
 * branches, at most DISTRIBUTE_MAX_ALTS of them; combinations that admit no
 * object (closed objects whose required keys exclude each other) are
 * dropped where they are compiled. With a oneOf among them, the merged
 * objects proven pairwise disjoint make it exact: a value that meets
 * (A and Bi and Cj) meets no (A and Bk and Cj) with k != i, so exactly one
 * Bi holds. *out: {"anyOf" or "oneOf": [merged objects]}, or NULL. */
#define DISTRIBUTE_MAX_ALTS 64

static sv_status distribute_allof(sctx_t *c, json_t *s, json_t **out) {
    *out = NULL;
    if (!c->distribute || c->o->strict_properties) return SV_OK; /* as merge_allof */
    json_t *conj[MERGE_MAX_CONJUNCTS];
    holders_t u = {0};
    uint32_t n = 0;
    bool object = false;
    if (!merge_collect(c, s, 0, conj, &n, &object, &u) || u.n == 0) return SV_OK;
    sv_status st = SV_OK;
    for (uint32_t i = 0; i < n && !st; i++) st = check_keywords(c, conj[i]);
    if (st) return st;
    bool any = true, own = !json_object_get(s, "allOf") && !json_object_get(s, "properties");
    json_t *br[DISTRIBUTE_MAX_UNIONS];
    size_t combos = 1;
    for (uint32_t j = 0; j < u.n; j++) {
        bool a = json_object_get(u.v[j], "anyOf") != NULL;
        /* a union of key conditions is checked by its object's automaton
         * (sv_sc_union_keys), cheaper than a union of objects */
        if (sv_sc_union_keys(u.v[j], a ? "anyOf" : "oneOf") || (a ? sv_sc_any_required(u.v[j]) : sv_sc_one_required(u.v[j])))
            return SV_OK;
        any &= a;
        br[j] = json_object_get(u.v[j], a ? "anyOf" : "oneOf");
        combos *= json_array_size(br[j]);
        if (combos > DISTRIBUTE_MAX_ALTS) return SV_OK;
    }
    json_t *alts = json_array();
    if (!alts) return sv_sc_nomem(c);
    bool ok = true;
    size_t idx[DISTRIBUTE_MAX_UNIONS] = {0};
    for (size_t k = 0; ok && k < combos; k++) {
        json_t *ci[MERGE_MAX_CONJUNCTS], *bi[MERGE_MAX_CONJUNCTS];
        uint32_t seg[DISTRIBUTE_MAX_UNIONS + 1];
        memcpy(bi, conj, n * sizeof *bi);
        uint32_t m = n;
        bool o = object;
        for (uint32_t j = 0; j < u.n; j++) {
            seg[j] = m;
            if (!merge_collect(c, json_array_get(br[j], idx[j]), 0, bi, &m, &o, NULL)) {
                json_decref(alts);
                return SV_OK; /* a branch that does not merge: the product path */
            }
        }
        seg[u.n] = m;
        for (uint32_t j = n; j < m && !st; j++) st = check_keywords(c, bi[j]);
        if (st) {
            json_decref(alts);
            return st;
        }
        /* Each branch's conjuncts go where its union stands among the
         * others (right after the schema that holds it), so the merged
         * objects list their properties in the order the schema defines
         * them, as the product path does. A union beside required keys
         * with no allOf or properties (own) goes before them: the
         * required keys the branch names come first, as the branch's own
         * order has them. */
        uint32_t q = 0;
        for (uint32_t a = 0; a < n; a++) {
            if (!own) ci[q++] = conj[a];
            for (uint32_t j = 0; j < u.n; j++)
                if (conj[a] == u.v[j]) {
                    memcpy(ci + q, bi + seg[j], (seg[j + 1] - seg[j]) * sizeof *ci);
                    q += seg[j + 1] - seg[j];
                }
            if (own) ci[q++] = conj[a];
        }
        json_t *x = merge_conjuncts(ci, q, o);
        ok = x && json_array_append_new(alts, x) == 0;
        for (uint32_t j = 0; j < u.n && ++idx[j] == json_array_size(br[j]); j++) idx[j] = 0; /* the next combination */
    }
    if (ok && !any && !sv_sc_oneof_disjoint(c, alts, NULL)) {
        json_decref(alts);
        return SV_OK;
    }
    json_t *d = ok ? json_object() : NULL;
    ok = d && json_object_set_new(d, any ? "anyOf" : "oneOf", alts) == 0;
    if (!ok) json_decref(alts);
    if (!ok) {
        json_decref(d);
        return sv_sc_nomem(c);
    }
    if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)json_decref, d)) return sv_sc_nomem(c); /* released */
    *out = d;
    c->distributed = true;
    return SV_OK;
}

/* An allOf whose conjuncts (the schema itself, its allOf branches, the
 * targets of their $refs) use only type "array", items (one schema for
 * every item), minItems and maxItems, besides keywords sieve ignores, is
 * one array: its items meet every conjunct's items (a new {"allOf": [...]}
 * of them, which merges in turn or is a product over items alone), its
 * length is at least the largest minItems and at most the least maxItems.
 * A property named by both properties and a matching patternProperties
 * entry is often such an allOf: {"type": "array", "items": A, "maxItems":
 * 1} beside {"type": "array", "items": {"anyOf": [...]}} (MaskBench's
 * Washington Post schemas). Built whole, that was a product of two array
 * languages, whose item parts (recursive $ref targets) cannot enter it. */
static bool array_collect(sctx_t *c, json_t *x, int depth, json_t **conj, uint32_t *n) {
    if (json_is_true(x)) return true;
    if (!json_is_object(x) || depth > 16) return false;
    for (uint32_t i = 0; i < *n; i++)
        if (conj[i] == x) return true;
    static const char *const ok[] = {"type", "items", "minItems", "maxItems", "allOf", "$ref", "$defs", "definitions"};
    const char *k;
    json_t *v;
    json_object_foreach(x, k, v) {
        if (in_list(k, ok, sizeof ok / sizeof ok[0])) continue;
        if (in_list(k, handled, sizeof handled / sizeof handled[0]) || in_list(k, refused, sizeof refused / sizeof refused[0]))
            return false;
    }
    json_t *ref = json_object_get(x, "$ref");
    if (ref) {
        json_t *t = merge_ref_target(c, x, ref);
        if (!t || !array_collect(c, t, depth + 1, conj, n)) return false;
        if (c->draft <= 7) return true; /* a $ref's siblings are ignored before 2019-09 */
    }
    json_t *ty = json_object_get(x, "type"), *items = json_object_get(x, "items");
    if (ty && !(json_is_string(ty) && strcmp(json_string_value(ty), "array") == 0)) return false;
    if (items && !json_is_object(items) && !json_is_boolean(items)) return false; /* a tuple */
    static const char *const lens[] = {"minItems", "maxItems"};
    for (int i = 0; i < 2; i++) {
        json_t *l = json_object_get(x, lens[i]);
        if (l && !(json_is_integer(l) && json_integer_value(l) >= 0)) return false; /* the compile reports it */
    }
    if (*n == MERGE_MAX_CONJUNCTS) return false;
    conj[(*n)++] = x;
    json_t *all = json_object_get(x, "allOf");
    if (all) {
        if (!json_is_array(all) || json_array_size(all) == 0) return false;
        for (size_t i = 0; i < json_array_size(all); i++)
            if (!array_collect(c, json_array_get(all, i), depth + 1, conj, n)) return false;
    }
    return true;
}

/* *out: s's allOf merged into one array schema (array_collect), or NULL. */
static sv_status merge_arrays(sctx_t *c, json_t *s, json_t **out) {
    *out = NULL;
    json_t *conj[MERGE_MAX_CONJUNCTS];
    uint32_t n = 0;
    if (!array_collect(c, s, 0, conj, &n)) return SV_OK;
    sv_status st = SV_OK;
    for (uint32_t i = 0; i < n && !st; i++) st = check_keywords(c, conj[i]);
    if (st) return st;
    json_t *m = json_object(), *items = json_array();
    bool ok = m && items, typed = false;
    json_int_t lo = 0, hi = -1;
    for (uint32_t i = 0; ok && i < n; i++) {
        json_t *it = json_object_get(conj[i], "items"), *mn = json_object_get(conj[i], "minItems"),
               *mx = json_object_get(conj[i], "maxItems");
        typed |= json_object_get(conj[i], "type") != NULL;
        if (it && !json_is_true(it)) ok = json_array_append(items, it) == 0;
        if (mn && json_integer_value(mn) > lo) lo = json_integer_value(mn);
        if (mx && (hi < 0 || json_integer_value(mx) < hi)) hi = json_integer_value(mx);
    }
    if (ok && typed) ok = json_object_set_new(m, "type", json_string("array")) == 0;
    if (ok && json_array_size(items) == 1) ok = json_object_set(m, "items", json_array_get(items, 0)) == 0;
    else if (ok && json_array_size(items) > 1) ok = json_object_set_new(m, "items", json_pack("{s:O}", "allOf", items)) == 0;
    if (ok && lo > 0) ok = json_object_set_new(m, "minItems", json_integer(lo)) == 0;
    if (ok && hi >= 0) ok = json_object_set_new(m, "maxItems", json_integer(hi)) == 0;
    json_decref(items);
    if (!ok) {
        json_decref(m);
        return sv_sc_nomem(c);
    }
    if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)json_decref, m)) return sv_sc_nomem(c); /* released */
    *out = m;
    return SV_OK;
}

/* *out: s's allOf merged into one object schema (kept until the compile
 * ends), or NULL when it cannot merge; *idx: its entry in c->merges. */
static sv_status merge_allof(sctx_t *c, json_t *s, json_t **out, uint32_t *idx) {
    *out = NULL;
    for (uint32_t i = 0; i < c->nmerges; i++)
        if (c->merges[i].from == s) {
            *out = c->merges[i].merged;
            *idx = i;
            return SV_OK;
        }
    json_t *conj[MERGE_MAX_CONJUNCTS];
    uint32_t n = 0;
    /* With strict_properties every conjunct without additionalProperties
     * is closed over its own properties, which one merged object is not. */
    bool object = false, ok = !c->o->strict_properties && merge_collect(c, s, 0, conj, &n, &object, NULL);
    json_t *m = NULL;
    sv_status st = SV_OK;
    for (uint32_t i = 0; ok && i < n && !st; i++) st = check_keywords(c, conj[i]); /* refused keywords, ignored ones */
    if (st) return st;
    if (!ok && (st = distribute_allof(c, s, &m))) return st;
    if (!ok && !m && (st = merge_arrays(c, s, &m))) return st;
    if (ok) {
        if (!(m = merge_conjuncts(conj, n, object))) return sv_sc_nomem(c);
        if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)json_decref, m)) return sv_sc_nomem(c); /* released */
    }
    if (!arena_room(c, (void **)&c->merges, c->nmerges, &c->capmerges, sizeof *c->merges)) return sv_sc_nomem(c);
    c->merges[c->nmerges].from = s;
    c->merges[c->nmerges].merged = m;
    c->merges[c->nmerges].active = false;
    *idx = c->nmerges++;
    *out = m;
    return SV_OK;
}

sv_status sv_sc_meet(sctx_t *c, json_t *const *src, uint32_t n, const sv_loc_t *loc, sv_ast_t **out, bool *merged) {
    *merged = false;
    if (n < 2 || n > 8) return SV_OK;
    json_t *all = NULL;
    for (uint32_t i = 0; i < c->nmeets && !all; i++)
        if (c->meets[i].n == n && memcmp(c->meets[i].src, src, n * sizeof *src) == 0) all = c->meets[i].all;
    if (!all) {
        json_t *l = json_array();
        bool ok = l != NULL;
        for (uint32_t i = 0; ok && i < n; i++) ok = json_array_append(l, src[i]) == 0;
        all = ok ? json_pack("{s:O}", "allOf", l) : NULL;
        json_decref(l);
        /* a failed defer has released all already */
        if (!all || !sv_arena_defer(c->arena, (sv_arena_cleanup_fn)json_decref, all)) return sv_sc_nomem(c);
        if (!arena_room(c, (void **)&c->meets, c->nmeets, &c->capmeets, sizeof *c->meets)) return sv_sc_nomem(c);
        memcpy(c->meets[c->nmeets].src, src, n * sizeof *src);
        c->meets[c->nmeets].n = n;
        c->meets[c->nmeets++].all = all;
    }
    json_t *m;
    uint32_t mi;
    sv_status st = merge_allof(c, all, &m, &mi);
    if (st || !m || c->merges[mi].active) return st;
    *merged = true;
    c->merges[mi].active = true;
    st = sv_sc_lang(c, m, loc, out);
    c->merges[mi].active = false;
    return st;
}

static int detect_draft(json_t *root) {
    json_t *sch = json_is_object(root) ? json_object_get(root, "$schema") : NULL;
    const char *s = sch && json_is_string(sch) ? json_string_value(sch) : "";
    if (strstr(s, "draft-04")) return 4;
    if (strstr(s, "draft-06")) return 6;
    if (strstr(s, "draft-07")) return 7;
    if (strstr(s, "2019-09")) return 2019;
    return 2020;
}

/* The call to the part of a $ref target's language ta (REF_PART_MIN states
 * or more; smaller ones stay inline, where a copy costs little and the walk
 * needs no frame). The same AST (memoized per schema and location) is the
 * same part. */
#define REF_PART_MIN 256u
/* Whether every string of a's language opens an object or an array (its
 * first byte '{' or '['), as far as its shape shows. */
static bool opens_container(const sv_ast_t *a, int depth) {
    if (!a || depth > 8) return false;
    switch (a->kind) {
    case SV_AST_BYTES: return a->lo == a->hi && (a->lo == '{' || a->lo == '[');
    case SV_AST_CAT: return a->nkids && opens_container(a->kids[0], depth + 1);
    case SV_AST_ALT:
        for (uint32_t i = 0; i < a->nkids; i++)
            if (!opens_container(a->kids[i], depth + 1)) return false;
        return a->nkids > 0;
    default: return false;
    }
}

/* A language that weighs SV_SC_JOB_MIN or more (sv_ast_weight: bytes and
 * the states of the DFAs it embeds), as a part compiled on a helper thread
 * (fsm/internal/part_jobs.h): *call the call to it, or NULL where the
 * caller compiles it itself (too light, no helpers, a key too long for the
 * memo). Such a part is one whatever its DFA's size (the compile does not
 * wait to see), and it is shared with an equal language by their ASTs' memo
 * key, not by their DFAs, which the compile has not seen yet. */
sv_status sv_sc_part_job(sctx_t *c, sv_ast_t *ta, sv_ast_t **call) {
    *call = NULL;
    if (!c->async_parts || ta->kind == SV_AST_DFA) return SV_OK;
    /* a container is a part from SMALL_VALUE_PART_MIN states on anyway
     * (schema_container.c): a lighter one is worth a helper too */
    uint64_t min = opens_container(ta, 0) ? SV_SC_JOB_MIN / 4 : SV_SC_JOB_MIN;
    if (sv_ast_weight(ta, min) < min) return SV_OK;
    /* the same language (a definition referred to from many places, each
     * its own location's AST) is the same part */
    size_t nkey = 0;
    uint8_t *key = sv_ast_key(ta, &nkey);
    if (!key) return SV_OK; /* too big to key: compiled here, and shared by language */
    uint64_t h = sv_hash_words(key, nkey);
    for (uint32_t k = 0; k < c->npending; k++)
        if (c->pending[k].hash == h && c->pending[k].nkey == nkey && memcmp(c->pending[k].key, key, nkey) == 0) {
            free(key);
            *call = c->pending[k].call;
            return SV_OK;
        }
    sv_status st = SV_OK;
    char *ptr = NULL;
    if (!arena_room(c, (void **)&c->pending, c->npending, &c->cappending, sizeof *c->pending) ||
        !(ptr = sv_arena_alloc(c->arena, c->ptr_len + 1))) {
        free(key);
        return sv_sc_nomem(c);
    }
    memcpy(ptr, c->ptr, c->ptr_len + 1);
    sv_part_job_t *job = sv_part_job_submit(ta, sv_sc_lim(c));
    if (!job) {
        free(key);
        return SV_OK; /* compiled here instead */
    }
    st = sv_sc_part(c, NULL, NULL);
    if (!st && !(*call = sv_call_marker(c->arena, SV_SCHEMA_PART_FIRST + c->nparts - 1))) st = sv_sc_nomem(c);
    if (st) {
        sv_part_job_drop(job);
        free(key);
        return st;
    }
    c->pending[c->npending++] = (struct sv_pending){c->nparts - 1, job, ptr, key, nkey, h, *call};
    return SV_OK;
}

static sv_status ref_part(sctx_t *c, sv_ast_t *ta, sv_ast_t **out) {
    for (uint32_t i = 0; i < c->nrefparts; i++)
        if (c->refparts[i].ast == ta) { *out = c->refparts[i].call; return SV_OK; }
    sv_dfa_t *d;
    sv_status st;
    sv_ast_t *call = NULL;
    if ((st = sv_sc_part_job(c, ta, &call))) return st;
    if (!call) {
        if ((st = sv_sc_to_dfa(c, ta, &d)) || !d) return st;
        if (sv_dfa_num_states(d) < REF_PART_MIN) return SV_OK;
        if ((st = sv_sc_part(c, d, &call))) return st;
    }
    if (!arena_room(c, (void **)&c->refparts, c->nrefparts, &c->caprefparts, sizeof *c->refparts))
        return sv_sc_nomem(c);
    c->refparts[c->nrefparts].ast = ta;
    c->refparts[c->nrefparts++].call = call;
    *out = call;
    return SV_OK;
}

sv_status sv_sc_part_id(sctx_t *c, sv_dfa_t *d, uint32_t *id) {
    /* equal languages are one part (minimal BFS-numbered DFAs are equal
     * field by field); fingerprints rule out all but the equal ones, which
     * are compared once (a schema of many wide objects asks this for every
     * value of every object) */
    uint64_t fp = d ? sv_dfa_fingerprint(d) : 0;
    for (uint32_t i = 0; d && i < c->nparts; i++)
        if (c->parts[i] == d || (c->parts[i] && sv_dfa_num_states(c->parts[i]) == sv_dfa_num_states(d) &&
                                 sv_dfa_fingerprint(c->parts[i]) == fp && sv_dfa_equal(c->parts[i], d))) {
            *id = SV_SCHEMA_PART_FIRST + i;
            return SV_OK;
        }
    if (SV_SCHEMA_PART_FIRST + c->nparts > SV_CALL_MAX_ID)
        return sv_sc_fail(c, SV_ERR_BUDGET, NULL, "the schema needs more than %u parts", SV_CALL_MAX_ID);
    if (c->nparts == c->capparts) {
        uint32_t cap = c->capparts ? 2 * c->capparts : 16;
        sv_dfa_t **p = sv_arena_alloc(c->arena, cap * sizeof *p);
        if (!p) return sv_sc_nomem(c);
        if (c->nparts) memcpy(p, c->parts, c->nparts * sizeof *p);
        c->parts = p;
        c->capparts = cap;
    }
    c->parts[c->nparts] = d;
    *id = SV_SCHEMA_PART_FIRST + c->nparts++;
    return SV_OK;
}

sv_status sv_sc_part(sctx_t *c, sv_dfa_t *d, sv_ast_t **out) {
    uint32_t id;
    sv_status st = sv_sc_part_id(c, d, &id);
    if (st || !out) return st; /* without out: reserved (rec_open) */
    *out = sv_call_marker(c->arena, id);
    return *out ? SV_OK : sv_sc_nomem(c);
}

/* The parts that the schema compiler's call markers name. */
const sv_dfa_t *sv_sc_part_dfa(sctx_t *c, uint32_t id) {
    if (id == SV_SCHEMA_PART_ANY) return c->any_part;
    if (id >= SV_SCHEMA_PART_FIRST && id - SV_SCHEMA_PART_FIRST < c->nparts)
        return sv_sc_part_at(c, id - SV_SCHEMA_PART_FIRST);
    return NULL;
}

/* Waits for the job of pending entry k and installs its DFA. */
static void install(sctx_t *c, struct sv_pending *pe) {
    sv_dfa_t *d = NULL;
    sv_error_t e;
    sv_error_clear(&e);
    sv_status st = sv_part_job_wait(pe->job, &d, &e);
    pe->job = NULL;
    if (!st && !sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, d)) st = SV_ERR_NOMEM;
    if (!st) {
        c->parts[pe->idx] = d;
        return;
    }
    if (c->job_st) return; /* the first failure is the compile's */
    c->job_st = st;
    /* its error points at the $ref that made the part */
    char saved[sizeof c->ptr];
    size_t keep = ptr_enter(c, pe->ptr, saved);
    if (st == SV_ERR_EMPTY) sv_sc_fail(c, st, NULL, "the schema at this location matches no value");
    else if (st == SV_ERR_NOMEM) sv_sc_nomem(c);
    else sv_sc_fail(c, st, NULL, "%s", e.message);
    ptr_leave(c, saved, keep);
}

sv_dfa_t *sv_sc_part_at(sctx_t *c, uint32_t i) {
    if (!c->parts[i] && c->npending)
        for (uint32_t k = 0; k < c->npending; k++)
            if (c->pending[k].idx == i && c->pending[k].job) install(c, &c->pending[k]);
    return c->parts[i];
}

/* Every part a helper compiles, installed (in the order they were made);
 * the first failure's status. */
static sv_status install_all(sctx_t *c) {
    /* the jobs no helper has started, run here from the newest (a helper
     * takes the oldest), rather than waiting on one a helper runs while
     * others still queue */
    for (uint32_t k = c->npending; k-- > 0;)
        if (c->pending[k].job) sv_part_job_help(c->pending[k].job);
    for (uint32_t k = 0; k < c->npending; k++)
        if (c->pending[k].job) install(c, &c->pending[k]);
    return c->job_st;
}

/* The jobs nobody waited for (a compile that failed), dropped. */
static void drop_all(sctx_t *c) {
    for (uint32_t k = 0; k < c->npending; k++) {
        sv_part_job_drop(c->pending[k].job);
        c->pending[k].job = NULL;
        free(c->pending[k].key);
        c->pending[k].key = NULL;
    }
}

static const sv_dfa_t *resolve_part(void *ctx, uint32_t id, sv_error_t *err) {
    sctx_t *c = ctx;
    const sv_dfa_t *d = sv_sc_part_dfa(c, id);
    if (!d && c->job_st) /* a helper's part failed: its error */
        sv_error_set(err, c->job_st, -1, "%s", c->err ? c->err->message : "");
    else if (!d) sv_error_set(err, SV_ERR_INTERNAL, -1, "internal: call marker %u names no part", id);
    return d;
}

/* One compilation of the loaded schema, objects accepting up to `orders` key
 * orders along any path; *more_orders says whether some object took more
 * than one, *deep whether some free-form value nests deeper than
 * SV_SCHEMA_ANY_DEPTH_MIN. */
/* compile_once's *keysets_met: where objects took key sets */
#define KEYSETS_IN_PRODUCTS 1u
#define KEYSETS_IN_DIFFERENCES 2u

/* --key-order any: the locations whose objects keep the schema's orders in
 * the languages a difference sees (sctx_t.ko_locs), and the one an attempt
 * found an object too big for key sets at. */
typedef struct {
    const uint64_t *locs;
    uint32_t n;
    uint64_t failed;
} ko_t;
#define KO_MAX_LOCS 4u

static sv_status compile_once(const char *text, size_t len, const sv_schema_opts_t *o, json_t *root, uint32_t orders,
                              uint64_t deadline, int level, bool any_products, bool small_parts, bool distribute,
                              sv_dfa_t **out, sv_schema_info_t *info, sv_error_t *err, bool *more_orders, bool *deep,
                              bool *conflict, bool *in_products, bool *small_used, bool *distributed,
                              uint32_t *keysets_met, bool async, bool *async_redo, bool frames, bool *frames_used,
                              ko_t *ko) {
    sctx_t c = {.o = o, .info = info, .err = err, .root = root, .draft = detect_draft(root), .deadline_ns = deadline,
                .calls = level > 0, .ref_parts = level > 1, .any_products = level > 0 && any_products,
                .small_parts = level > 1 && small_parts, .distribute = distribute,
                .keyset = o->key_order != SV_KEY_ORDER_SCHEMA && orders > 1, .frames = frames && level > 0,
                .async_parts = async && level > 1 && sv_part_jobs_enabled(), .deep_oneof_left = SV_SC_DEEP_ONEOF_WORK,
                .ko_locs = ko->locs, .nko_locs = ko->n};
    c.arena = sv_arena_create(0);
    if (!c.arena) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_loc_t loc;
    sv_ast_t *top = NULL;
    sv_status st = sv_sc_refs_index(&c);
    if (!st) st = sv_sc_numtexts_index(&c, text, len);
    if (!st) st = sv_sc_loc_closure(&c, &root, 1, NULL, 0, &loc);
    if (!st) st = sv_sc_loc_context(&c, &root, 1, &loc);
    loc.orders = orders;
    if (!st) st = sv_sc_lang(&c, root, &loc, &top);
    if (!st) st = install_all(&c);
    if (!st) st = finish_deferred(&c);
    if (!st) st = sv_sc_type_filter_finish(&c);
    if (!st && o->ws == SV_WS_FLEXIBLE) top = sv_sc_cat3(&c, sv_sc_ws(&c), top, sv_sc_ws(&c));
    sv_dfa_t *framing[2] = {NULL, NULL};
    if (!st && o->frame) st = sv_sc_frame(&c, o->frame, &top, framing);
    if (!st) {
        sv_error_t e;
        sv_error_clear(&e);
        st = sv_dfa_from_ast(top, sv_sc_lim(&c), out, &e);
        if (st == SV_ERR_EMPTY) sv_sc_fail(&c, st, NULL, "the schema matches no value (it is unsatisfiable)");
        else if (st) sv_sc_fail(&c, st, NULL, "%s", e.message);
        if (!st && sv_dfa_has_markers(*out)) {
            sv_dfa_t *raw = *out, *prog = NULL;
            sv_error_clear(&e);
            st = sv_program_link_ks(raw, resolve_part, &c, c.kconds, c.nkconds, sv_sc_lim(&c), &prog, &e);
            sv_dfa_destroy(raw);
            *out = prog;
            if (st == SV_ERR_UNSUPPORTED) c.calls_conflict = true;
            if (st) sv_sc_fail(&c, st, NULL, "%s", e.message);
        }
    } else if (st == SV_ERR_EMPTY && err) { /* a keyword found it empty: say what that means */
        static const char prefix[] = "the schema is unsatisfiable: ";
        size_t keep = sizeof err->message - sizeof prefix;
        memmove(err->message + sizeof prefix - 1, err->message, keep);
        err->message[sizeof err->message - 1] = '\0';
        memcpy(err->message, prefix, sizeof prefix - 1);
    }
    sv_dfa_destroy(framing[0]);
    sv_dfa_destroy(framing[1]);
    *more_orders = c.more_orders;
    *keysets_met = (c.product_keysets ? KEYSETS_IN_PRODUCTS : 0) | (c.diff_keysets ? KEYSETS_IN_DIFFERENCES : 0);
    *deep = c.deep_any;
    *conflict = st && c.calls_conflict;
    *in_products = c.any_products_used;
    *small_used = c.small_parts_used;
    *distributed = c.distributed;
    *frames_used = c.frames_used;
    ko->failed = st ? c.ko_failed : 0;
    drop_all(&c);
    /* A helper's part that was empty (a $ref target compiled here would
     * have stayed inline), a budget that two threads reached together, or
     * a call the linker or a product refused (a helper's part may be one
     * the compile here would have inlined) is compiled again on this thread
     * alone: the language, and the narrowing a conflict leads to, are then
     * the sequential compile's and do not depend on which thread ran
     * first. */
    *async_redo = st && c.npending &&
                  (st == SV_ERR_BUDGET || st == SV_ERR_EMPTY || c.job_st == SV_ERR_EMPTY || c.calls_conflict);
    sv_arena_destroy(c.arena);
    return st;
}

/* compile_once with free-form values as calls where the options ask for
 * them, and flat when a call met a product or a competing choice (the
 * language is then the bounded one: info->narrowed_by_budget says so). */
static sv_status compile_attempt(const char *text, size_t len, const sv_schema_opts_t *o, json_t *root, uint32_t orders,
                                 uint64_t deadline, sv_dfa_t **out, sv_schema_info_t *info, sv_error_t *err,
                                 bool *more_orders, bool *deep, uint32_t *narrowed, uint32_t *keysets_met, ko_t *ko) {
    /* With calls: first with $ref targets and member values of 16 states
     * or more as parts, free-form values as calls inside products, and
     * allOf distributed over unions; on a conflict, first without
     * distributing (when the compile did), then with only big member values
     * as parts (when it made small ones), then without calls inside
     * products (when it made some), then without $ref parts (a conflict
     * there is mostly two refs that start alike), then flat. */
    bool conflict = false, in_products = false, anyp = true, small = true, small_used = false;
    bool dist = true, dist_used = false, async = true, redo = false, frames = true, frames_used = false;
    int level = o->any_calls ? 2 : 0;
    /* deep: whether any of the attempts met deep values (one that failed
     * early may not have; the caller narrows by it) */
    bool met_deep = false;
    sv_status st = compile_once(text, len, o, root, orders, deadline, level, anyp, small, dist, out, info, err,
                                more_orders, &met_deep, &conflict, &in_products, &small_used, &dist_used,
                                keysets_met, async, &redo, frames, &frames_used, ko);
    *deep = met_deep;
    while ((conflict && level > 0) || redo) {
        if (info) memset(info, 0, sizeof *info);
        sv_error_clear(err);
        if (redo) async = false; /* the same attempt without helpers */
        else if (frames && frames_used) frames = false; /* wide objects in their orders */
        else if (dist && dist_used) dist = false;
        else if (small && small_used) small = false;
        else if (anyp && in_products) anyp = false;
        else if (--level == 0) *narrowed |= SV_SCHEMA_NARROWED_CALLS;
        st = compile_once(text, len, o, root, orders, deadline, level, anyp, small, dist, out, info, err, more_orders,
                          &met_deep, &conflict, &in_products, &small_used, &dist_used, keysets_met, async, &redo,
                          frames, &frames_used, ko);
        *deep |= met_deep;
    }
    return st;
}

/* Free-form values at the shallow depth, without the deep levels. */
static void make_shallow(sv_schema_opts_t *o) {
    if (o->max_any_depth == SV_SCHEMA_ANY_DEPTH_AUTO) o->max_any_depth = SV_SCHEMA_ANY_DEPTH_MIN;
    o->any_deep_levels = 0;
}

/* Whether a failed attempt is retried with a narrower language: on a budget
 * of the compile's own, not on the server's shared compile memory being
 * short (the language would then depend on the load; util/memacct.h). */
static bool narrower(sv_status st) { return st == SV_ERR_BUDGET && !sv_memacct_pool_short(); }

/* Every place a subschema is expected holds an object or a boolean, and
 * every $ref there is a string. Checked once, before compiling: the compilers read only the subschemas they
 * need (an unsatisfiable branch is dropped unread, and programs read them
 * in another order than flat automata), so a malformed one would otherwise
 * be an error under some options and silently ignored under others. */
typedef struct {
    char ptr[256]; /* the JSON pointer so far, cut short where it outgrows the error's */
    size_t len;
} shape_ptr_t;

static size_t shape_push(shape_ptr_t *p, const char *tok) {
    size_t keep = p->len;
    if (p->len + 1 >= sizeof p->ptr) return keep;
    p->ptr[p->len++] = '/';
    for (; *tok; tok++) {
        const char *e = *tok == '~' ? "~0" : *tok == '/' ? "~1" : NULL;
        size_t n = e ? 2 : 1;
        if (p->len + n >= sizeof p->ptr) break;
        if (e) memcpy(p->ptr + p->len, e, 2);
        else p->ptr[p->len] = *tok;
        p->len += n;
    }
    p->ptr[p->len] = '\0';
    return keep;
}

static void shape_pop(shape_ptr_t *p, size_t keep) {
    p->len = keep;
    p->ptr[keep] = '\0';
}

static sv_status shapes_at(json_t *s, shape_ptr_t *p, int depth, sv_error_t *err);

static sv_status shape_one(json_t *s, shape_ptr_t *p, const char *tok, int depth, sv_error_t *err) {
    size_t keep = shape_push(p, tok);
    sv_status st = shapes_at(s, p, depth + 1, err);
    shape_pop(p, keep);
    return st;
}

static sv_status shapes_at(json_t *s, shape_ptr_t *p, int depth, sv_error_t *err) {
    static const char *const one[] = {"additionalProperties", "additionalItems", "contains", "not", "if", "then", "else",
                                      "propertyNames", "unevaluatedItems", "unevaluatedProperties", "items"};
    static const char *const map[] = {"properties", "patternProperties", "dependentSchemas", "dependencies", "$defs",
                                      "definitions"};
    static const char *const arr[] = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};
    if (json_is_boolean(s)) return SV_OK;
    if (!json_is_object(s)) {
        sv_error_set(err, SV_ERR_SYNTAX, -1, "a schema must be an object or a boolean");
        if (err) snprintf(err->pointer, sizeof err->pointer, "%s", p->ptr);
        return SV_ERR_SYNTAX;
    }
    if (depth > 4096) return SV_OK; /* the JSON parser stops far sooner */
    json_t *ref = json_object_get(s, "$ref");
    if (ref && !json_is_string(ref)) { /* a reference is checked where it stands, read or not */
        sv_error_set(err, SV_ERR_SYNTAX, -1, "$ref must be a string");
        if (err) {
            snprintf(err->pointer, sizeof err->pointer, "%.*s/$ref", (int)(sizeof err->pointer - 6), p->ptr);
            snprintf(err->keyword, sizeof err->keyword, "$ref");
        }
        return SV_ERR_SYNTAX;
    }
    sv_status st;
    for (size_t i = 0; i < sizeof one / sizeof *one; i++) {
        json_t *x = json_object_get(s, one[i]);
        if (x && !(json_is_array(x) && !strcmp(one[i], "items")) && (st = shape_one(x, p, one[i], depth, err))) return st;
    }
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        json_t *m = json_object_get(s, map[i]), *x;
        const char *k;
        if (!json_is_object(m)) continue;
        size_t keep = shape_push(p, map[i]);
        json_object_foreach(m, k, x) {
            if (i == 3 && json_is_array(x)) continue; /* dependencies: the dependentRequired form */
            if ((st = shape_one(x, p, k, depth, err))) return st;
        }
        shape_pop(p, keep);
    }
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) {
        json_t *a = json_object_get(s, arr[i]), *x;
        size_t j;
        if (!json_is_array(a)) continue;
        size_t keep = shape_push(p, arr[i]);
        json_array_foreach(a, j, x) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", j);
            if ((st = shape_one(x, p, idx, depth, err))) return st;
        }
        shape_pop(p, keep);
    }
    return SV_OK;
}

static sv_status check_shapes(json_t *root, sv_error_t *err) {
    shape_ptr_t p = {.len = 0};
    return shapes_at(root, &p, 0, err);
}

static sv_status compile_schema(const char *text, size_t len, const sv_schema_opts_t *o, sv_dfa_t **out,
                                sv_schema_info_t *info, sv_error_t *err) {
    sv_error_clear(err);
    json_error_t je;
    size_t flags = JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
    json_t *root = json_loadb(text, len, flags, &je);
    if (!root && json_error_code(&je) == json_error_numeric_overflow) /* integers beyond 64 bits: read them as doubles */
        root = json_loadb(text, len, flags | JSON_DECODE_INT_AS_REAL, &je);
    if (!root) {
        sv_error_set(err, SV_ERR_SYNTAX, je.position, "the schema is not valid JSON: %s (line %d, column %d)", je.text,
                     je.line, je.column);
        return SV_ERR_SYNTAX;
    }
    sv_status shape = check_shapes(root, err);
    if (shape) {
        json_decref(root);
        return shape;
    }
    uint32_t ndisc = o->discriminator_annotation ? 0 : sv_sc_require_discriminators(root);
    /* What goes beyond one canonical spelling per value and a free-form depth
     * of max_any_depth (the deep levels of any_deep_levels, the deeper values
     * of auto near the root, extra key orders) is dropped again when it
     * exceeds a budget: first the depth, then the orders. When the schema
     * may go deep, the first attempt gets three quarters of the DFA state
     * budget, so that a schema large only because of the deep values still
     * compiles without them (on MaskBench the largest schema the deep levels
     * help has 125,101 states); one that fails for other reasons runs again
     * with the whole budget. The fallback is on state budgets only, never on
     * time, so the language is the same on every machine and load. The
     * attempts share the time budget. */
    uint64_t deadline = o->lim.max_time_us ? sv_now_ns() + o->lim.max_time_us * 1000 : 0;
    bool may_go_deep = o->max_any_depth == SV_SCHEMA_ANY_DEPTH_AUTO || o->any_deep_levels > 0;
    sv_schema_opts_t first = *o;
    if (may_go_deep && o->lim.max_dfa_states > 4) first.lim.max_dfa_states = o->lim.max_dfa_states - o->lim.max_dfa_states / 4;
    sv_schema_opts_t shallow = *o;
    make_shallow(&shallow);
    uint32_t orders = o->extra_key_orders ? SV_SCHEMA_MAX_ORDERS : 1;
    bool more_orders = false, deep = false;
    uint32_t keysets_met = 0;
    uint32_t narrowed = 0;
    ko_t ko = {0};
    uint64_t t_attempt = sv_now_ns();
    sv_status st = compile_attempt(text, len, &first, root, orders, deadline, out, info, err, &more_orders, &deep,
                                   &narrowed, &keysets_met, &ko);
    bool deep_seen = deep, shallowed = false;
    /* Past the first attempt, overlapping oneOfs keep their universes at
     * the free-form depth: a schema that meets a budget does not get the
     * bigger products of the deeper ones (schema.c "The universe nests as
     * deep"). */
    sv_schema_opts_t whole = *o;
    whole.oneof_shallow = true;
    shallow.oneof_shallow = true;
    if (narrower(st) && (deep || may_go_deep)) {
        if (info) memset(info, 0, sizeof *info);
        sv_error_clear(err);
        o = &whole;
        if (deep) {
            o = &shallow;
            narrowed |= SV_SCHEMA_NARROWED_DEPTH;
            shallowed = true;
        }
        t_attempt = sv_now_ns();
        st = compile_attempt(text, len, o, root, orders, deadline, out, info, err, &more_orders, &deep, &narrowed,
                             &keysets_met, &ko);
        deep_seen |= deep;
    }
    /* --key-order any: an object in a language a difference sees that is
     * too big for key sets keeps the schema's orders first at its location
     * alone (every language there, the universe's too, so both sides of
     * the difference hold the same spellings; the locations around keep
     * their key sets), a new attempt for each such location, up to
     * KO_MAX_LOCS of them, while the time left holds two more attempts as
     * long as the last (the whole fallback must still fit); then in every
     * such language (step 0 below). */
    uint64_t ko_locs[KO_MAX_LOCS];
    ko.locs = ko_locs;
    uint32_t met_before = keysets_met; /* what the steps below take back */
    bool orders_before = more_orders;
    while (narrower(st) && o->key_order == SV_KEY_ORDER_ANY && ko.failed && ko.n < KO_MAX_LOCS) {
        uint64_t now = sv_now_ns();
        if (deadline && now + 2 * (now - t_attempt) > deadline) break;
        bool known = false;
        for (uint32_t i = 0; i < ko.n; i++) known |= ko_locs[i] == ko.failed;
        if (known) break;
        ko_locs[ko.n++] = ko.failed;
        if (info) memset(info, 0, sizeof *info);
        sv_error_clear(err);
        narrowed |= SV_SCHEMA_NARROWED_DIFFERENCE_KEY_SETS;
        t_attempt = now;
        st = compile_attempt(text, len, o, root, orders, deadline, out, info, err, &more_orders, &deep, &narrowed,
                             &keysets_met, &ko);
        deep_seen |= deep;
    }
    ko.n = 0;
    keysets_met |= met_before;
    more_orders |= orders_before;
    /* The narrower attempts below also drop the deep levels once any
     * attempt met them (one that failed early may not have). */
    sv_schema_opts_t next[4];
    uint32_t nnext = 0;
    static const sv_key_order to[3] = {SV_KEY_ORDER_ANY_OUTSIDE_DIFFERENCES, SV_KEY_ORDER_ANY_OUTSIDE_PRODUCTS,
                                       SV_KEY_ORDER_SCHEMA};
    static const uint32_t why[3] = {SV_SCHEMA_NARROWED_DIFFERENCE_KEY_SETS, SV_SCHEMA_NARROWED_PRODUCT_KEY_SETS,
                                    SV_SCHEMA_NARROWED_KEY_SETS};
    for (int step = 0; step < 4 && narrower(st); step++) {
        /* --key-order any: first without key sets in languages a
         * difference sees, then without them in intersections, then in the
         * schema's key orders; then one key order per object */
        sv_key_order k = o->key_order;
        bool take = step == 0 ? (keysets_met & KEYSETS_IN_DIFFERENCES) && k == SV_KEY_ORDER_ANY
                  : step == 1 ? (keysets_met & KEYSETS_IN_PRODUCTS) &&
                                    (k == SV_KEY_ORDER_ANY || k == SV_KEY_ORDER_ANY_OUTSIDE_DIFFERENCES)
                  : step == 2 ? more_orders && k != SV_KEY_ORDER_SCHEMA
                              : more_orders;
        if (!take) continue;
        sv_schema_opts_t *x = &next[nnext++];
        *x = *o;
        if (step < 3) x->key_order = to[step];
        if (deep_seen && !shallowed) {
            make_shallow(x);
            narrowed |= SV_SCHEMA_NARROWED_DEPTH;
            shallowed = true;
        }
        o = x;
        if (info) memset(info, 0, sizeof *info);
        sv_error_clear(err);
        narrowed |= step < 3 ? why[step] : SV_SCHEMA_NARROWED_ORDERS;
        st = compile_attempt(text, len, o, root, step < 3 ? orders : 1, deadline, out, info, err, &more_orders, &deep,
                             &narrowed, &keysets_met, &ko);
        deep_seen |= deep;
    }
    if (info && !st) info->narrowed_by_budget |= narrowed, info->ndiscriminator_required = ndisc;
    json_decref(root);
    return st;
}

sv_status sv_schema_compile(const char *text, size_t len, const sv_schema_opts_t *o, sv_dfa_t **out,
                            sv_schema_info_t *info, sv_error_t *err) {
    sv_schema_opts_t def;
    if (!o) sv_schema_opts_default(&def), o = &def;
    if (info) memset(info, 0, sizeof *info);
    /* Everything the compile keeps at once (arenas, automata) is charged to
     * one account within max_memory (util/memacct.h); the attempts
     * above run one after another, so each starts from what the last freed. */
    sv_memacct_t acct;
    bool own = sv_memacct_begin(&acct, sv_memacct_limit_for(o->lim.max_memory, len));
    sv_status st = compile_schema(text, len, o, out, info, err);
    if (st == SV_ERR_NOMEM && own && acct.refused) {
        /* an allocation failed because the account refused it: the budget */
        st = SV_ERR_BUDGET;
        if (err) {
            err->code = st;
            snprintf(err->message, sizeof err->message, "the compile exceeds its memory budget of %zu bytes",
                     o->lim.max_memory);
        }
    }
    if (st && own) st = sv_memacct_outcome(st, &acct, err);
    if (own) {
        if (!st) sv_dfa_uncharge(*out); /* the result outlives the account */
        if (info) info->mem_peak = acct.peak;
        sv_memacct_end(&acct);
    }
    return st;
}

sv_status sv_schema_prelude_warm(const sv_schema_opts_t *o, sv_error_t *err) {
    /* a free-form value quotes any string and calls the container part */
    sv_dfa_t *d = NULL;
    sv_status st = sv_schema_compile("{}", 2, o, &d, NULL, err);
    sv_dfa_destroy(d);
    return st;
}
