/* schema_container.c — objects and arrays as graphs of sub-languages.
 *
 * An object is "{" members "}" where the members follow the location's key
 * order K = k1..kn and then any extra keys. The members form a small
 * automaton (an AST GRAPH) whose nodes are
 *     (i, m, count, bits)   about to decide key ki; m = a member was emitted
 *                           (so the next needs a separator); count = members
 *                           so far (only when min/maxProperties need it);
 *                           bits = which dependentRequired keys are present
 *     kmid(i, count', bits') after "[, ]ki: ", before ki's value
 * and edges: skip ki (epsilon, if ki is optional and no dependency forbids
 * it), emit ki (separator edge or epsilon into kmid, then the key and value),
 * and at i = n a loop of extra members. Each value language is built once
 * per (count, bits) pair, so an object with n optional keys costs O(n), not
 * O(n^2) as the regex (k1 (, k2)? ...)|(k2 ...)|... would. Positions follow
 * a key order: the canonical K, and in positive languages a few more
 * (loc_orders), one such graph per order, the member values shared.
 *
 * An array is "[" items "]" with nodes (i, j): i items so far (up to
 * maxItems, or saturating at max(prefix length, minItems)), j items matching
 * `contains` (up to maxContains, or saturating at minContains); each item
 * edge carries the item language of its index, split into its part that
 * matches `contains` and the part that does not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "regex.h"
#include "fsm/internal/schema_internal.h"

/* ---- location keys ----------------------------------------------------------- */

typedef struct { const char **v; uint32_t n, cap; } keyvec_t;

static sv_status key_add(sctx_t *c, keyvec_t *k, const char *key) {
    for (uint32_t i = 0; i < k->n; i++)
        if (strcmp(k->v[i], key) == 0) return SV_OK;
    if (k->n == k->cap) {
        uint32_t cap = k->cap ? k->cap * 2 : 16;
        const char **nv = sv_arena_alloc(c->arena, cap * sizeof *nv);
        if (!nv) return sv_sc_nomem(c);
        if (k->n) memcpy(nv, k->v, k->n * sizeof *nv);
        k->v = nv;
        k->cap = cap;
    }
    k->v[k->n++] = key;
    return SV_OK;
}

static sv_status value_keys(sctx_t *c, keyvec_t *k, json_t *v) {
    const char *key;
    json_t *x;
    sv_status st = SV_OK;
    if (json_is_object(v)) json_object_foreach(v, key, x) if (!st) st = key_add(c, k, key);
    return st;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* A sum of mixed pointers: the multiset of schemas, whatever their order
 * in the closure. The schemas are the loaded document's, which every
 * attempt of one compile shares. */
uint64_t sv_sc_loc_id(const sv_loc_t *loc) {
    uint64_t h = mix64(loc->n + ((uint64_t)loc->nlits << 32));
    for (uint32_t i = 0; i < loc->n; i++) h += mix64((uint64_t)(uintptr_t)loc->v[i]);
    for (uint32_t i = 0; i < loc->nlits; i++) h += mix64((uint64_t)(uintptr_t)loc->lits[i] ^ 0x9e3779b97f4a7c15ull);
    return h ? h : 1;
}

/* Puts the first np keys of k (the properties of the location's schemas,
 * in first mention) in the order that keeps every schema's `properties`
 * order, where the schemas agree: each pair of keys one schema lists in a
 * row is an edge, and the keys go out as their predecessors have, the
 * first mentioned first among those ready. Where two schemas disagree (a
 * cycle) the first mention stays. With one schema, or schemas that list
 * shared keys alike, this is the first mention; the branches of a tagged
 * oneOf that each put their own keys between the tag and a shared
 * `message` keep their order, where first mention put `message` right
 * after the tag (Github_hard---o17529's asserts), and a difference, which
 * spells each value in the location's orders only, rejected them. */
static sv_status keys_in_schema_orders(sctx_t *c, const sv_loc_t *loc, keyvec_t *k, uint32_t np) {
    if (np < 3 || loc->n < 2 || np > 256) return SV_OK; /* past 256 keys: first mention */
    uint32_t *indeg = sv_arena_alloc(c->arena, np * sizeof *indeg), *out = sv_arena_alloc(c->arena, np * sizeof *out);
    uint8_t *edge = sv_arena_alloc(c->arena, (size_t)np * np), *done = sv_arena_alloc(c->arena, np);
    const char **v = sv_arena_alloc(c->arena, np * sizeof *v);
    if (!indeg || !out || !edge || !done || !v) return sv_sc_nomem(c);
    memset(indeg, 0, np * sizeof *indeg);
    memset(edge, 0, (size_t)np * np);
    memset(done, 0, np);
    for (uint32_t i = 0; i < loc->n; i++) {
        json_t *props = json_object_get(loc->v[i], "properties"), *x;
        const char *key;
        uint32_t prev = np;
        if (!json_is_object(props)) continue;
        json_object_foreach(props, key, x) {
            uint32_t j = 0;
            while (j < np && strcmp(k->v[j], key)) j++;
            if (prev < np && j < np && j != prev && !edge[(size_t)prev * np + j]) edge[(size_t)prev * np + j] = 1, indeg[j]++;
            prev = j;
        }
    }
    for (uint32_t w = 0; w < np; w++) {
        uint32_t pick = np;
        for (uint32_t j = 0; j < np && pick == np; j++)
            if (!done[j] && !indeg[j]) pick = j;
        if (pick == np) return SV_OK; /* a cycle: the schemas disagree */
        done[pick] = 1;
        out[w] = pick;
        for (uint32_t j = 0; j < np; j++)
            if (edge[(size_t)pick * np + j]) indeg[j]--;
    }
    for (uint32_t w = 0; w < np; w++) v[w] = k->v[out[w]];
    memcpy(k->v, v, np * sizeof *v);
    return SV_OK;
}

sv_status sv_sc_loc_keys(sctx_t *c, const sv_loc_t *loc, const char ***keys, uint32_t *n) {
    keyvec_t k = {0};
    sv_status st = SV_OK;
    /* The properties of every schema first, then keys named only by
     * required or dependencies: where a schema requires a key that a later
     * one (an anyOf branch, a $ref) defines, values follow the definition. */
    for (uint32_t i = 0; i < loc->n && !st; i++) {
        json_t *props = json_object_get(loc->v[i], "properties"), *x;
        const char *key;
        if (json_is_object(props)) json_object_foreach(props, key, x) if (!st) st = key_add(c, &k, key);
    }
    if (!st) st = keys_in_schema_orders(c, loc, &k, k.n);
    for (uint32_t i = 0; i < loc->n && !st; i++) {
        json_t *s = loc->v[i], *x;
        const char *key;
        json_t *req = json_object_get(s, "required");
        for (size_t j = 0; json_is_array(req) && j < json_array_size(req) && !st; j++)
            if (json_is_string(json_array_get(req, j))) st = key_add(c, &k, json_string_value(json_array_get(req, j)));
        static const char *const dep_kw[] = {"dependentRequired", "dependencies", "dependentSchemas"};
        for (int d = 0; d < 3 && !st; d++) {
            json_t *deps = json_object_get(s, dep_kw[d]);
            if (!json_is_object(deps)) continue;
            json_object_foreach(deps, key, x) {
                if (!st) st = key_add(c, &k, key);
                if (!json_is_array(x)) continue;
                for (size_t j = 0; j < json_array_size(x) && !st; j++)
                    if (json_is_string(json_array_get(x, j))) st = key_add(c, &k, json_string_value(json_array_get(x, j)));
            }
        }
    }
    for (uint32_t i = 0; i < loc->nlits && !st; i++) st = value_keys(c, &k, loc->lits[i]);
    if (st) return st;
    *keys = k.v;
    *n = k.n;
    return SV_OK;
}

/* Key orders besides the canonical one. Positive languages may hold more
 * spellings than the canonical ones (differences subtract from the canonical
 * universe, and every language at a location holds the canonical spelling of
 * each value it accepts), so an object may also accept its keys in a few
 * other orders that real data follows: the order an anyOf/oneOf branch
 * defines (each branch's properties first, then the rest), and the order of
 * a required list (its keys in the slots they hold, or first). Every
 * language built at the location uses the same orders, so products keep
 * them. Each order is a permutation of the location's keys (perm[position] =
 * key index); at most SV_SCHEMA_MAX_ORDERS - 1 of them, each a copy of the
 * object's automaton after the first key where the orders differ. */
typedef struct { uint32_t **v; uint32_t n, cap; const char **keys; uint32_t nk; } orders_t;

static uint32_t key_index(const orders_t *o, const char *key) {
    for (uint32_t i = 0; i < o->nk; i++)
        if (strcmp(o->keys[i], key) == 0) return i;
    return o->nk;
}

/* Adds the order that puts pre[0..np) (key indices, nk for unknown keys)
 * first and the other keys after, in canonical order, unless it is known. */
static sv_status order_add(sctx_t *c, orders_t *o, const uint32_t *pre, uint32_t np) {
    if (o->n >= o->cap) return SV_OK;
    uint32_t *perm = sv_arena_alloc(c->arena, (o->nk + 1) * sizeof *perm);
    uint8_t *used = sv_arena_alloc(c->arena, o->nk + 1);
    if (!perm || !used) return sv_sc_nomem(c);
    memset(used, 0, o->nk + 1);
    uint32_t k = 0;
    for (uint32_t i = 0; i < np; i++)
        if (pre[i] < o->nk && !used[pre[i]]) used[pre[i]] = 1, perm[k++] = pre[i];
    for (uint32_t i = 0; i < o->nk; i++)
        if (!used[i]) perm[k++] = i;
    for (uint32_t j = 0; j < o->n; j++)
        if (memcmp(o->v[j], perm, o->nk * sizeof *perm) == 0) return SV_OK;
    o->v[o->n++] = perm;
    return SV_OK;
}

static sv_status loc_orders(sctx_t *c, const sv_loc_t *loc, const char **keys, uint32_t nk, bool canonical_only,
                            orders_t *o) {
    sv_status st;
    uint32_t cap = canonical_only || loc->orders < 1 ? 1 : loc->orders < SV_SCHEMA_MAX_ORDERS ? loc->orders : SV_SCHEMA_MAX_ORDERS;
    *o = (orders_t){sv_arena_alloc(c->arena, cap * sizeof *o->v), 0, cap, keys, nk};
    uint32_t *pre = sv_arena_alloc(c->arena, (nk + 1) * sizeof *pre);
    if (!o->v || !pre) return sv_sc_nomem(c);
    if ((st = order_add(c, o, NULL, 0))) return st; /* canonical */
    if (nk < 2 || cap == 1) return SV_OK;
    /* anyOf/oneOf branches: the properties of the branch's closure first. */
    static const char *const lists[] = {"anyOf", "oneOf"};
    for (uint32_t i = 0; i < loc->n; i++)
        for (int l = 0; l < 2; l++) {
            json_t *a = json_object_get(loc->v[i], lists[l]);
            for (size_t b = 0; json_is_array(a) && json_array_size(a) > 1 && b < json_array_size(a); b++) {
                json_t *br = json_array_get(a, b);
                sv_loc_t bl;
                if ((st = sv_sc_loc_closure(c, &br, 1, NULL, 0, &bl))) return st;
                uint32_t np = 0;
                for (uint32_t j = 0; j < bl.n && np < nk; j++) {
                    json_t *props = json_object_get(bl.v[j], "properties"), *x;
                    const char *key;
                    if (json_is_object(props)) json_object_foreach(props, key, x) if (np < nk) pre[np++] = key_index(o, key);
                }
                if (np && (st = order_add(c, o, pre, np))) return st;
            }
        }
    /* required lists: their keys in required order, in the slots they hold
     * in the canonical order, or first. */
    for (uint32_t i = 0; i < loc->n; i++) {
        json_t *req = json_object_get(loc->v[i], "required");
        if (!json_is_array(req) || json_array_size(req) < 2) continue;
        uint8_t *in = sv_arena_alloc(c->arena, nk + 1);
        if (!in) return sv_sc_nomem(c);
        memset(in, 0, nk + 1);
        uint32_t nr = 0;
        for (size_t j = 0; j < json_array_size(req) && nr < nk; j++) {
            const char *key = json_string_value(json_array_get(req, j));
            uint32_t x = key ? key_index(o, key) : nk;
            if (x < nk && !in[x]) in[x] = 1, pre[nr++] = x;
        }
        if (nr < 2) continue;
        uint32_t *slots = sv_arena_alloc(c->arena, nk * sizeof *slots);
        if (!slots) return sv_sc_nomem(c);
        for (uint32_t x = 0, r = 0; x < nk; x++) slots[x] = in[x] ? pre[r++] : x;
        if ((st = order_add(c, o, slots, nk)) || (st = order_add(c, o, pre, nr))) return st;
    }
    return SV_OK;
}

/* ---- helpers ------------------------------------------------------------------- */

typedef struct { sv_ast_edge_t *v; uint32_t n, cap; } edgevec_t;

static sv_status edge(sctx_t *c, edgevec_t *e, uint32_t from, uint32_t to, sv_ast_t *label) {
    if (e->n == e->cap) {
        uint32_t cap = e->cap ? e->cap * 2 : 64;
        sv_ast_edge_t *nv = realloc(e->v, cap * sizeof *nv);
        if (!nv) return sv_sc_nomem(c);
        e->v = nv;
        e->cap = cap;
    }
    e->v[e->n++] = (sv_ast_edge_t){from, to, label};
    return SV_OK;
}

/* The language of a subschema (NULL when it matches nothing). */
static sv_status sub_lang(sctx_t *c, json_t *s, const sv_loc_t *loc, sv_ast_t **out) {
    sv_status st = sv_sc_lang(c, s, loc, out);
    if (st == SV_ERR_EMPTY) { *out = NULL; return SV_OK; }
    return st;
}

/* The canonical universe one level down (for canonical_any containers). */
static sv_status canon_value(sctx_t *c, const sv_loc_t *loc, sv_ast_t **out);

static sv_status get_uint(sctx_t *c, json_t *s, const char *kw, bool *set, uint64_t *v) {
    json_t *x = s ? json_object_get(s, kw) : NULL;
    *set = false;
    if (!x) return SV_OK;
    double d = json_number_value(x);
    if (!json_is_number(x) || d < 0 || d != floor(d))
        return sv_sc_fail(c, SV_ERR_SYNTAX, kw, "%s must be a non-negative integer", kw);
    *set = true;
    *v = d > 1e15 ? (uint64_t)1e15 : (uint64_t)d;
    return SV_OK;
}

#define MAX_GRAPH_NODES 200000u
#define ITEM_PART_MIN 4096u
#define WIDE_OBJECT_MIN 32u  /* members from which values become parts */
#define VALUE_PART_MIN 8u    /* smaller values stay inline */
#define BIG_VALUE_PART_MIN SV_SC_BIG_PART_MIN /* in any object, values this big become parts, */
#define SMALL_VALUE_PART_MIN 16u /* or this big in an attempt with small parts (sctx_t) */
#define CTX_MAX_NESTING 16u  /* member contexts inside member contexts */
#define KEYSET_MAX_KEYS 16u  /* --key-order any: objects with more keys keep their orders */
/* --key-order any: an object whose automaton of key sets would be bigger
 * keeps its set in the walk instead, where it can (object_frames): a few
 * such objects made a compile exceed its state budget and fall back to the
 * schema's orders (Github_medium---o70035) */
#define FRAMES_OVER_STATES 4096u

/* ---- objects -------------------------------------------------------------------- */

typedef struct {
    const char *key;
    bool allowed, required;
    sv_ast_t *value;   /* NULL when no value is allowed */
    int dep_bit;       /* -1 if the key takes no part in dependentRequired */
} member_t;

/* Whether the JSON string of key k is in L(propertyNames). */
static sv_status key_name_ok(sctx_t *c, sv_dfa_t *names, const char *k, bool *ok) {
    if (!names) { *ok = true; return SV_OK; }
    size_t len = strlen(k);
    char *buf = malloc(len * 6 + 3);
    if (!buf) return sv_sc_nomem(c);
    size_t n = sv_sc_escape_json(k, len, buf);
    *ok = sv_dfa_matches(names, (const uint8_t *)buf, n);
    free(buf);
    return SV_OK;
}

/* Content DFA of a patternProperties regex with search semantics. */
static sv_status pattern_content(sctx_t *c, const char *pattern, sv_dfa_t **out) {
    return sv_sc_pattern_dfa(c, pattern, "patternProperties", out);
}

/* The extra members: alternatives (key region ": " value) for keys outside K. */
static sv_status extras(sctx_t *c, json_t *s, uint32_t child_orders, uint32_t child_level, const member_t *mem, uint32_t n,
                        sv_dfa_t *names, bool names_empty, bool canonical_any, sv_ast_t *after_key, sv_ast_t **out) {
    *out = NULL;
    if (names_empty) return SV_OK; /* propertyNames admits no key */
    json_t *ap = s ? json_object_get(s, "additionalProperties") : NULL;
    if (s && !ap && c->o->strict_properties) ap = json_false();
    json_t *pp = s ? json_object_get(s, "patternProperties") : NULL;
    uint32_t m = json_is_object(pp) ? (uint32_t)json_object_size(pp) : 0;
    if (json_is_false(ap) && m == 0) return SV_OK;
    if (m > 6)
        return sv_sc_fail(c, SV_ERR_BUDGET, "patternProperties",
                          "more than 6 patternProperties at one location (their overlaps need 2^n regions)");
    sv_status st;
    sv_dfa_t *any;
    if ((st = sv_sc_any_string_content(c, &any))) return st;
    /* Keys of K excluded. Without patternProperties, the quoted key region
     * written down where the keys allow (sv_dfa_json_quoted_except). */
    sv_ast_t *free_quoted = NULL;
    if (m == 0 && n) {
        sv_ast_t *qa = sv_sc_quoted(c, any);
        if (!qa) return sv_sc_nomem(c);
        const char **keys = sv_arena_alloc(c->arena, n * sizeof *keys);
        if (!keys) return sv_sc_nomem(c);
        for (uint32_t i = 0; i < n; i++) keys[i] = mem[i].key;
        sv_dfa_t *d = NULL;
        sv_error_t e;
        sv_error_clear(&e);
        if (qa->kind == SV_AST_DFA && (st = sv_dfa_json_quoted_except(qa->dfa, keys, n, sv_sc_lim(c), &d, &e)))
            return sv_sc_fail(c, st, "additionalProperties", "%s", e.message);
        if (d) {
            if (!sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, d)) return sv_sc_nomem(c); /* destroyed */
            if (!(free_quoted = sv_ast_dfa(c->arena, d, false))) return sv_sc_nomem(c);
        }
    }
    /* Else the content DFA of the K strings, subtracted from any string. */
    sv_dfa_t *known = NULL;
    if (n && !free_quoted) {
        sv_ast_t **alts = sv_arena_alloc(c->arena, n * sizeof *alts);
        if (!alts) return sv_sc_nomem(c);
        for (uint32_t i = 0; i < n; i++) {
            size_t len = strlen(mem[i].key);
            sv_ast_t **cps = sv_arena_alloc(c->arena, (len + 1) * sizeof *cps);
            if (!cps) return sv_sc_nomem(c);
            for (size_t j = 0; j < len; j++) cps[j] = sv_ast_bytes(c->arena, (uint8_t)mem[i].key[j], (uint8_t)mem[i].key[j]);
            alts[i] = sv_ast_cat(c->arena, cps, (uint32_t)len);
        }
        if ((st = sv_sc_to_dfa(c, sv_ast_alt(c->arena, alts, n), &known))) return st;
    }
    sv_dfa_t *free_keys = any;
    if (!free_quoted && (st = sv_sc_product(c, any, known, SV_DFA_DIFF, "additionalProperties", &free_keys))) return st;
    if (!free_keys) return SV_OK;
    sv_dfa_t *pats[6];
    json_t *pschemas[6];
    const char *pat;
    json_t *ps;
    uint32_t j = 0;
    if (m) json_object_foreach(pp, pat, ps) {
        size_t mark = sv_sc_push(c, "patternProperties");
        sv_sc_push(c, pat);
        st = pattern_content(c, pat, &pats[j]);
        sv_sc_pop(c, mark);
        if (st) return st;
        pschemas[j++] = ps;
    }
    sv_ast_t **alts = sv_arena_alloc(c->arena, ((size_t)1 << m) * sizeof *alts);
    if (!alts) return sv_sc_nomem(c);
    uint32_t na = 0;
    for (uint32_t set = 0; set < (1u << m); set++) {
        sv_dfa_t *region = free_keys;
        for (uint32_t b = 0; b < m && region; b++)
            if ((st = sv_sc_product(c, region, pats[b], (set >> b) & 1 ? SV_DFA_AND : SV_DFA_DIFF, "patternProperties", &region)))
                return st;
        if (!region) continue;
        /* The value: the matching patterns' schemas, or additionalProperties. */
        sv_ast_t *val = NULL;
        if (canonical_any) {
            if ((st = canon_value(c, NULL, &val))) return st;
        } else if (set == 0) {
            if (json_is_false(ap)) continue;
            if (!ap || json_is_true(ap)) {
                if ((st = sv_sc_any_value(c, sv_sc_any_depth(c, child_level), &val))) return st;
            } else {
                sv_loc_t child;
                if ((st = sv_sc_loc_closure(c, &ap, 1, NULL, 0, &child))) return st;
                child.orders = child_orders;
                child.level = child_level;
                size_t mark = sv_sc_push(c, "additionalProperties");
                st = sub_lang(c, ap, &child, &val);
                sv_sc_pop(c, mark);
                if (st) return st;
            }
        } else {
            json_t *seeds[6];
            uint32_t ns = 0;
            for (uint32_t b = 0; b < m; b++)
                if ((set >> b) & 1) seeds[ns++] = pschemas[b];
            sv_loc_t child;
            if ((st = sv_sc_loc_closure(c, seeds, ns, NULL, 0, &child))) return st;
            child.orders = child_orders;
            child.level = child_level;
            sv_dfa_t *acc = NULL;
            bool first = true, met = false;
            if (ns >= 2) {
                size_t mark = sv_sc_push(c, "patternProperties");
                st = sv_sc_meet(c, seeds, ns, &child, &val, &met);
                sv_sc_pop(c, mark);
                if (st == SV_ERR_EMPTY) val = NULL, st = SV_OK;
                if (st) return st;
            }
            for (uint32_t b = 0; b < ns && !met; b++) {
                sv_ast_t *x;
                size_t mark = sv_sc_push(c, "patternProperties");
                st = sub_lang(c, seeds[b], &child, &x);
                sv_sc_pop(c, mark);
                if (st) return st;
                if (ns == 1) { val = x; break; }
                sv_dfa_t *d = NULL;
                if (x && (st = sv_sc_to_dfa(c, x, &d))) return st;
                if (first) acc = d, first = false;
                else if ((st = sv_sc_product(c, acc, d, SV_DFA_AND, "patternProperties", &acc))) return st;
            }
            if (ns > 1 && !met) val = acc ? sv_ast_dfa(c->arena, acc, false) : NULL;
        }
        if (!val) continue;
        sv_ast_t *key = free_quoted ? free_quoted : sv_sc_quoted(c, region);
        if (names) {
            /* propertyNames: intersect at the JSON-string level. */
            sv_dfa_t *kd;
            if ((st = sv_sc_to_dfa(c, key, &kd)) || (st = sv_sc_product(c, kd, names, SV_DFA_AND, "propertyNames", &kd))) return st;
            if (!kd) continue;
            key = sv_ast_dfa(c->arena, kd, false);
        }
        if (after_key && !(key = sv_sc_cat2(c, key, after_key))) return sv_sc_nomem(c);
        if (!(alts[na++] = sv_sc_cat3(c, key, sv_sc_colon(c), val))) return sv_sc_nomem(c);
    }
    if (na && !(*out = sv_ast_alt(c->arena, alts, na))) return sv_sc_nomem(c);
    return SV_OK;
}

typedef struct { uint32_t a, b; } dep_t;  /* b is required when a is present */

/* What every key order of an object shares. */
typedef struct {
    member_t *mem;
    uint32_t n;
    const dep_t *deps;
    uint32_t ndeps, nbits;
    /* anyOf / oneOf of single required keys (sv_sc_any_required,
     * sv_sc_one_required): per member, how many branches name its key (at
     * most 2), or NULL; any_bit: "a branch was met"; one_bit: two bits
     * from there counting the branches met, 0, 1 or 2 (more); -1 if none */
    const uint8_t *any_w, *one_w;
    const uint8_t *cond_ok; /* per value of the bits: whether the key condition of a
                               `not` holds (sv_sc_not_keys), or NULL */
    int any_bit;
    int one_bit;
    bool has_min, has_max;
    uint64_t minp, C;   /* C: the member count saturates (or stops, with a max) at C */
    sv_ast_t *extra;    /* the extra members, or NULL */
    bool extra_anywhere; /* --key-order any, an object kept in order: extra members may
                            come before and between the known ones too */
    sv_ast_t **kv;      /* kv[key index]: "key": value, or NULL when the key is not allowed */
} object_shape_t;

/* The members automaton of an object for one key order: perm[p] is the
 * member decided at position p (see the top of this file). */
static sv_status object_graph(sctx_t *c, const object_shape_t *o, const uint32_t *perm, sv_ast_t **out) {
    const member_t *mem = o->mem;
    const dep_t *deps = o->deps;
    uint32_t n = o->n, ndeps = o->ndeps;
    bool has_min = o->has_min, has_max = o->has_max;
    uint64_t minp = o->minp, C = o->C;
    sv_ast_t *extra = o->extra;
    uint64_t B = (uint64_t)1 << o->nbits;
    uint64_t per_pos = (C + 1) * B;
    uint64_t nbase = (uint64_t)(n + 1) * 2 * per_pos + (uint64_t)n * per_pos + per_pos;
    uint64_t nnodes = nbase + (o->extra_anywhere && extra ? (uint64_t)n * per_pos : 0);
    uint32_t *pos = malloc((n + 1) * sizeof *pos); /* pos[key index] = position */
    if (!pos) return sv_sc_nomem(c);
    for (uint32_t p = 0; p < n; p++) pos[perm[p]] = p;
    sv_status st = SV_OK;
#define NODE(i, m, cnt, bits) ((uint32_t)((((uint64_t)(i) * 2 + (m)) * (C + 1) + (cnt)) * B + (bits)))
#define KMID(i, cnt, bits) ((uint32_t)((uint64_t)(n + 1) * 2 * per_pos + ((uint64_t)(i) * (C + 1) + (cnt)) * B + (bits)))
#define EMID(cnt, bits) ((uint32_t)((uint64_t)(n + 1) * 2 * per_pos + (uint64_t)n * per_pos + (cnt) * B + (bits)))
#define XMID(i, cnt, bits) ((uint32_t)(nbase + ((uint64_t)(i) * (C + 1) + (cnt)) * B + (bits)))
    edgevec_t ev = {0};
    uint8_t *final = calloc(nnodes, 1), *kmid_done = calloc(nnodes, 1);
    if (!final || !kmid_done) { free(final); free(kmid_done); free(pos); return sv_sc_nomem(c); }
    sv_ast_t *sep = sv_sc_sep(c);
    if (!sep) st = sv_sc_nomem(c);
    for (uint32_t i = 0; i < n && !st; i++) {
        uint32_t mi = perm[i];
        const member_t *m = &mem[mi];
        sv_ast_t *kv = o->kv[mi];
        for (uint64_t cnt = 0; cnt <= C && !st; cnt++)
            for (uint64_t bits = 0; bits < B && !st; bits++) {
                /* Dependencies decided at this key. */
                bool can_skip = !m->required, can_take = m->allowed;
                for (uint32_t d = 0; d < ndeps; d++) {
                    if (deps[d].b == mi && pos[deps[d].a] < i && (bits >> mem[deps[d].a].dep_bit & 1)) can_skip = false;
                    if (deps[d].a == mi && pos[deps[d].b] < i && !(bits >> mem[deps[d].b].dep_bit & 1)) can_take = false;
                }
                uint64_t cnt2 = cnt + 1;
                if (cnt2 > C) {
                    if (has_max) can_take = false;
                    else cnt2 = C;
                }
                uint64_t bits2 = m->dep_bit >= 0 ? bits | (1ull << m->dep_bit) : bits;
                if (o->any_w && o->any_w[mi]) bits2 |= 1ull << o->any_bit;
                if (o->one_w && o->one_w[mi]) {
                    uint64_t met = (bits2 >> o->one_bit & 3) + o->one_w[mi];
                    bits2 = (bits2 & ~(3ull << o->one_bit)) | (met > 2 ? 2 : met) << o->one_bit;
                }
                for (int md = 0; md < 2 && !st; md++) {
                    if (can_skip) st = edge(c, &ev, NODE(i, md, cnt, bits), NODE(i + 1, md, cnt, bits), NULL);
                    if (can_take && !st)
                        st = edge(c, &ev, NODE(i, md, cnt, bits), KMID(i, cnt2, bits2), md ? sep : NULL);
                }
                if (o->extra_anywhere && extra && !st && (cnt + 1 <= C || !has_max)) {
                    /* an extra member before the key at position i */
                    uint64_t ce = cnt + 1 > C ? C : cnt + 1;
                    st = edge(c, &ev, NODE(i, 0, cnt, bits), XMID(i, cnt, bits), NULL);
                    if (!st) st = edge(c, &ev, NODE(i, 1, cnt, bits), XMID(i, cnt, bits), sep);
                    if (!st) st = edge(c, &ev, XMID(i, cnt, bits), NODE(i, 1, ce, bits), extra);
                }
                if (can_take && !st && !kmid_done[KMID(i, cnt2, bits2)]) {
                    /* kmid(i, cnt2, bits2) -> (i+1, 1, cnt2, bits2): one value copy per target. */
                    kmid_done[KMID(i, cnt2, bits2)] = 1;
                    st = edge(c, &ev, KMID(i, cnt2, bits2), NODE(i + 1, 1, cnt2, bits2), kv);
                }
            }
    }
    for (uint64_t cnt = 0; cnt <= C && !st; cnt++)
        for (uint64_t bits = 0; bits < B && !st; bits++) {
            bool ok = (!has_min || cnt >= minp) && (o->any_bit < 0 || (bits >> o->any_bit & 1)) &&
                      (o->one_bit < 0 || (bits >> o->one_bit & 3) == 1) && (!o->cond_ok || o->cond_ok[bits]);
            final[NODE(n, 0, cnt, bits)] = ok;
            final[NODE(n, 1, cnt, bits)] = ok;
            if (!extra) continue;
            uint64_t cnt2 = cnt + 1;
            if (cnt2 > C) {
                if (has_max) continue;
                cnt2 = C;
            }
            st = edge(c, &ev, NODE(n, 0, cnt, bits), EMID(cnt, bits), NULL);
            if (!st) st = edge(c, &ev, NODE(n, 1, cnt, bits), EMID(cnt, bits), sep);
            if (!st) st = edge(c, &ev, EMID(cnt, bits), NODE(n, 1, cnt2, bits), extra);
        }
#undef NODE
#undef KMID
#undef EMID
#undef XMID
    sv_ast_t *g = st ? NULL : sv_ast_graph(c->arena, (uint32_t)nnodes, ev.v, ev.n, final);
    free(ev.v);
    free(final);
    free(kmid_done);
    free(pos);
    if (st) return st;
    *out = g;
    return g ? SV_OK : sv_sc_nomem(c);
}

/* An object that takes key sets (--key-order any). */
static void took_keysets(sctx_t *c) {
    c->more_orders = true;
    c->product_keysets |= c->no_calls > 0;
    c->diff_keysets |= c->no_keysets > 0;
}

/* An object that could not take key sets where they are on keeps the
 * schema's orders: counted; in a language a difference sees, a budget met
 * (sv_sc_keysets: the other operand may hold orders this one lacks). */
static sv_status order_narrowed(sctx_t *c, const sv_loc_t *loc) {
    if (c->info) c->info->nkey_order_narrowed++;
    if (c->no_keysets && c->o->key_order == SV_KEY_ORDER_ANY) {
        c->diff_keysets = true; /* the retry goes without them there */
        c->ko_failed = sv_sc_loc_id(loc); /* or only at this location first (compile_schema) */
        return sv_sc_fail(c, SV_ERR_BUDGET, NULL,
                          "an object in a language a difference sees is too big for its key sets");
    }
    return SV_OK;
}

/* Whether object_anyorder's automaton stays within a share of the DFA
 * state budget: about 2^(n-1) copies of each member ("key": value, a call
 * when the value is a part) and 2^n of the extra members. */
static sv_status keyset_fits(sctx_t *c, object_shape_t *o, bool *fits, uint64_t *states) {
    *fits = false;
    *states = UINT64_MAX;
    uint32_t na = 0;
    uint64_t member_states = 0, extra_states = 0;
    sv_status st;
    for (uint32_t i = 0; i < o->n; i++)
        na += o->mem[i].allowed;
    /* one key or none: its one order is every order */
    if (na < 2) return *fits = true, *states = 0, SV_OK;
    /* The labels become minimized DFAs first: the graph copies each label
     * once per edge, and a DFA copies as its states, where an AST (a
     * free-form value's alternatives) may copy as many more NFA states. */
    na = 0;
    for (uint32_t i = 0; i < o->n; i++) {
        if (!o->mem[i].allowed) continue;
        sv_dfa_t *d;
        if ((st = sv_sc_to_dfa(c, o->kv[i], &d))) return st;
        if (!d && o->mem[i].required) return SV_OK; /* no valid object: the ordered graph finds it empty */
        if (!d) {
            /* a member with no valid value (`"k": {"not": {}}`) is a key
             * the object cannot have */
            o->mem[i].allowed = false;
            o->kv[i] = NULL;
            continue;
        }
        na++;
        member_states += sv_dfa_num_states(d);
        if (!(o->kv[i] = sv_ast_dfa(c->arena, d, false))) return sv_sc_nomem(c);
    }
    if (na < 2) return *fits = true, *states = 0, SV_OK;
    if (o->extra) {
        sv_dfa_t *d;
        if ((st = sv_sc_to_dfa(c, o->extra, &d))) return st;
        extra_states = d ? sv_dfa_num_states(d) : 0;
        if (d && !(o->extra = sv_ast_dfa(c->arena, d, false))) return sv_sc_nomem(c);
    }
    const sv_fsm_limits_t *lim = sv_sc_lim(c);
    uint64_t cap = lim->max_dfa_states ? lim->max_dfa_states / 2 : 100000;
    if (lim->max_nfa_states && lim->max_nfa_states / 4 < cap) cap = lim->max_nfa_states / 4;
    uint64_t est = (member_states << (na - 1)) + (extra_states << na);
    *fits = est <= cap;
    *states = est;
    return SV_OK;
}

/* The members automaton of an object whose keys may come in any order
 * (--key-order any): its nodes are the sets of keys written so far, so each
 * key is written at most once, and the object may close where every
 * required key is in the set and every dependency is met. The states are
 * 2^n times the keys left, so sv_sc_object takes this shape only for
 * objects with few keys (keyset_fits) and keeps the others in their key
 * orders (info->nkey_order_narrowed counts them). A count of members is
 * kept beside the set only when min/maxProperties binds and extra members
 * may come; otherwise the set's size is the count. */
static sv_status object_anyorder(sctx_t *c, const object_shape_t *o, sv_ast_t **out) {
    const member_t *mem = o->mem;
    uint32_t idx[KEYSET_MAX_KEYS], na = 0;
    for (uint32_t i = 0; i < o->n; i++)
        if (mem[i].allowed) idx[na++] = i;
    uint64_t nsets = (uint64_t)1 << na;
    bool counted = (o->has_min || o->has_max) && o->extra;
    uint64_t C = counted ? o->C : 0;
    /* Bits of the required keys, and the dependencies between allowed keys
     * (a key whose dependency is not allowed cannot be written at all). */
    uint64_t req = 0, never = 0, anyreq = 0;
    struct { uint64_t a, b; } dep[64];
    uint32_t ndep = 0;
    for (uint32_t k = 0; k < na; k++) {
        if (mem[idx[k]].required) req |= 1ull << k;
        if (o->any_w && o->any_w[idx[k]]) anyreq |= 1ull << k;
    }
    for (uint32_t d = 0; d < o->ndeps; d++) {
        int ka = -1, kb = -1;
        for (uint32_t k = 0; k < na; k++) {
            if (idx[k] == o->deps[d].a) ka = (int)k;
            if (idx[k] == o->deps[d].b) kb = (int)k;
        }
        if (ka < 0) continue;
        if (kb < 0) never |= 1ull << ka;
        else dep[ndep].a = 1ull << ka, dep[ndep++].b = 1ull << kb;
    }
    /* Nodes: (set, md, cnt) with md = some member written (a separator
     * comes first); mids (set, key, cnt) hold one copy of each member's
     * "key": value per set it leads to; emids (set, cnt) one copy of the
     * extra members. */
    uint64_t per = C + 1;
    uint64_t nmain = nsets * 2 * per, nmid = nsets * na * per, nemid = nsets * per;
    uint64_t nnodes = nmain + nmid + nemid;
    if (nnodes > MAX_GRAPH_NODES * 4ull)
        return sv_sc_fail(c, SV_ERR_BUDGET, "properties", "the object needs %llu automaton nodes for its key sets",
                          (unsigned long long)nnodes);
#define ANODE(set, md, cnt) ((uint32_t)(((set) * 2 + (md)) * per + (cnt)))
#define AMID(set, k, cnt) ((uint32_t)(nmain + ((set) * na + (k)) * per + (cnt)))
#define AEMID(set, cnt) ((uint32_t)(nmain + nmid + (set) * per + (cnt)))
    edgevec_t ev = {0};
    uint8_t *final = calloc(nnodes, 1), *mid_done = calloc(nmid ? nmid : 1, 1);
    sv_ast_t *sep = sv_sc_sep(c);
    sv_status st = final && mid_done && sep ? SV_OK : sv_sc_nomem(c);
    for (uint64_t set = 0; set < nsets && !st; set++) {
        uint32_t written = (uint32_t)__builtin_popcountll(set);
        bool ok = (set & req) == req && (o->any_bit < 0 || (set & anyreq));
        if (ok && o->one_bit >= 0) {
            uint32_t met = 0;
            for (uint32_t k = 0; k < na; k++)
                if (set >> k & 1) met += o->one_w[idx[k]];
            ok = met == 1;
        }
        for (uint32_t d = 0; d < ndep && ok; d++)
            if ((set & dep[d].a) && !(set & dep[d].b)) ok = false;
        if (ok && o->cond_ok) {
            uint64_t bits = 0;
            for (uint32_t k = 0; k < na; k++)
                if ((set >> k & 1) && mem[idx[k]].dep_bit >= 0) bits |= 1ull << mem[idx[k]].dep_bit;
            ok = o->cond_ok[bits];
        }
        for (uint64_t cnt = 0; cnt <= C && !st; cnt++) {
            uint64_t total = counted ? cnt : written;
            bool fin = ok && (!o->has_min || total >= o->minp) && (!o->has_max || total <= o->C);
            final[ANODE(set, 0, cnt)] = fin;
            final[ANODE(set, 1, cnt)] = fin;
            /* The next count after one more member, or none past the max. */
            uint64_t next = total + 1;
            bool room = true;
            if (counted && next > C) {
                if (o->has_max) room = false;
                else next = C;
            } else if (!counted && o->has_max && next > o->C) {
                room = false;
            }
            uint64_t cnt2 = counted ? next : 0;
            for (uint32_t k = 0; k < na && room && !st; k++) {
                uint64_t bit = 1ull << k;
                if ((set & bit) || (never & bit)) continue;
                uint64_t set2 = set | bit;
                for (int md = 0; md < 2 && !st; md++)
                    st = edge(c, &ev, ANODE(set, md, cnt), AMID(set2, k, cnt2), md ? sep : NULL);
                if (!st && !mid_done[AMID(set2, k, cnt2) - nmain]) {
                    mid_done[AMID(set2, k, cnt2) - nmain] = 1;
                    st = edge(c, &ev, AMID(set2, k, cnt2), ANODE(set2, 1, cnt2), o->kv[idx[k]]);
                }
            }
            if (o->extra && room && !st) {
                st = edge(c, &ev, ANODE(set, 0, cnt), AEMID(set, cnt), NULL);
                if (!st) st = edge(c, &ev, ANODE(set, 1, cnt), AEMID(set, cnt), sep);
                if (!st) st = edge(c, &ev, AEMID(set, cnt), ANODE(set, 1, cnt2), o->extra);
            }
        }
    }
#undef ANODE
#undef AMID
#undef AEMID
    sv_ast_t *g = st ? NULL : sv_ast_graph(c->arena, (uint32_t)nnodes, ev.v, ev.n, final);
    free(ev.v);
    free(final);
    free(mid_done);
    if (st) return st;
    *out = g;
    return g ? SV_OK : sv_sc_nomem(c);
}

/* Per key of keys[0..n), how many of the branches (each {"required":
 * [one key]}) name it, at most 2; arena memory, NULL when out of it. */
static uint8_t *required_weights(sctx_t *c, json_t *branches, const char **keys, uint32_t n) {
    uint8_t *w = sv_arena_alloc(c->arena, n + 1);
    if (!w) return NULL;
    memset(w, 0, n + 1);
    for (size_t b = 0; b < json_array_size(branches); b++) {
        const char *k = json_string_value(json_array_get(json_object_get(json_array_get(branches, b), "required"), 0));
        for (uint32_t i = 0; k && i < n; i++)
            if (strcmp(keys[i], k) == 0 && w[i] < 2) w[i]++;
    }
    return w;
}

/* The intersection of n member-value languages (NULL ones match nothing). */
static sv_status member_and(sctx_t *c, sv_ast_t *const *vals, uint32_t n, sv_ast_t **out) {
    if (n == 1) { *out = vals[0]; return SV_OK; }
    sv_dfa_t *acc = NULL;
    sv_status st;
    for (uint32_t k = 0; k < n; k++) {
        sv_dfa_t *d = NULL;
        if (vals[k] && (st = sv_sc_to_dfa(c, vals[k], &d))) return st;
        if (k == 0) acc = d;
        else if ((st = sv_sc_product(c, acc, d, SV_DFA_AND, "patternProperties", &acc))) return st;
    }
    *out = acc ? sv_ast_dfa(c->arena, acc, false) : NULL;
    return acc && !*out ? sv_sc_nomem(c) : SV_OK;
}

/* The value language of a member whose schemas are src[0..n), at child. */
static sv_status member_value(sctx_t *c, json_t *const *src, uint32_t n, const sv_loc_t *child, sv_ast_t **out) {
    sv_ast_t *vals[8];
    bool met;
    sv_status st = sv_sc_meet(c, src, n, child, out, &met);
    if (st == SV_ERR_EMPTY) { *out = NULL; return SV_OK; }
    if (st || met) return st;
    for (uint32_t k = 0; k < n; k++)
        if ((st = sub_lang(c, src[k], child, &vals[k]))) return st;
    return member_and(c, vals, n, out);
}

/* The order sv_sc_object reads the members of s in (*idx: indexes into
 * keys[0..n)). A required key that no schema lets in (no property, pattern or
 * additionalProperties for it, a false one among them, or a name
 * propertyNames refuses) empties the object before any value is read;
 * then the required keys' values are read first, in the order
 * `required` lists them. So whether a member value that sieve refuses
 * is ever read does not depend on the order of the location's keys: a
 * union's branches get their own key orders where calls are on
 * (schema.c lang_object), and a branch that cannot match must fail
 * alike either way (fuzz/corpus/schema/crash-unsupported-in-dead-branch). */
static sv_status member_order(sctx_t *c, json_t *s, const char **keys, uint32_t n, sv_dfa_t *names, bool names_empty,
                              bool canonical_any, uint32_t **idx_out) {
    json_t *props = s ? json_object_get(s, "properties") : NULL, *req = s ? json_object_get(s, "required") : NULL;
    json_t *ap = s ? json_object_get(s, "additionalProperties") : NULL;
    if (s && !ap && c->o->strict_properties) ap = json_false();
    json_t *pp = s ? json_object_get(s, "patternProperties") : NULL;
    sv_status st;
    uint32_t *idx = sv_arena_alloc(c->arena, (n + 1) * sizeof *idx), ni = 0;
    uint8_t *placed = sv_arena_alloc(c->arena, n + 1);
    if (!idx || !placed) return sv_sc_nomem(c);
    memset(placed, 0, n + 1);
    for (size_t r = 0; r < json_array_size(req) && !canonical_any; r++) {
        const char *k = json_string_value(json_array_get(req, r));
        uint32_t i = 0;
        while (k && i < n && strcmp(keys[i], k) != 0) i++;
        if (!k || i == n) continue;
        if (placed[i]) continue;
        placed[i] = 1;
        idx[ni++] = i;
        bool ok = !names_empty;
        if (ok && (st = key_name_ok(c, names, k, &ok))) return st;
        json_t *p = props ? json_object_get(props, k) : NULL;
        bool some = p != NULL, none_false = !json_is_false(p);
        const char *pat;
        json_t *ps;
        if (json_is_object(pp)) json_object_foreach(pp, pat, ps) {
            sv_dfa_t *pd;
            if ((st = pattern_content(c, pat, &pd))) return st;
            if (pd && sv_dfa_matches(pd, (const uint8_t *)k, strlen(k))) {
                some = true;
                none_false = none_false && !json_is_false(ps);
            }
        }
        if (!some) none_false = !json_is_false(ap);
        if (!ok || !none_false)
            return sv_sc_fail(c, SV_ERR_EMPTY, "required", "required property \"%s\" can have no valid value", k);
    }
    for (uint32_t i = 0; i < n; i++)
        if (!placed[i]) idx[ni++] = i;
    *idx_out = idx;
    return SV_OK;
}

/* ',' with a key's OPEN guard right after it, in the whitespace mode's
 * spelling (sv_sc_sep). */
static sv_ast_t *sep_open(sctx_t *c, sv_ast_t *open) {
    switch (c->o->ws) {
    case SV_WS_CANONICAL: return sv_sc_cat3(c, sv_sc_lit(c, ",", 1), open, sv_sc_lit(c, " ", 1));
    case SV_WS_COMPACT: return sv_sc_cat2(c, sv_sc_lit(c, ",", 1), open);
    case SV_WS_FLEXIBLE: return sv_sc_cat2(c, sv_sc_cat3(c, sv_sc_ws(c), sv_sc_lit(c, ",", 1), open), sv_sc_ws(c));
    }
    return NULL;
}

/* Members that key conditions name (a dependency, an anyOf or oneOf of
 * required keys, a key condition): the keys of object_frames' table. */
static bool cond_member(const member_t *m, const uint8_t *any_w, const uint8_t *one_w, uint32_t i) {
    return m[i].dep_bit >= 0 || (any_w && any_w[i]) || (one_w && one_w[i]);
}

/* object_frames' conditions as one table (sv_kcond_t.tok, text) over the
 * members they name (cond_member), kof[] their key numbers (-1: never
 * written, held absent; a required one is held present). */
static sv_status kcond_table(sctx_t *c, const member_t *mem, uint32_t n, const int32_t *kof, const dep_t *deps,
                             uint32_t ndeps, const uint8_t *any_w, const uint8_t *one_w, const uint8_t *cond_ok,
                             sv_kcond_t *kc) {
    uint32_t tm[SV_KCOND_TABLE_KEYS], ntk = 0, never = 0, req = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!cond_member(mem, any_w, one_w, i)) continue;
        if (ntk == SV_KCOND_TABLE_KEYS)
            return sv_sc_fail(c, SV_ERR_INTERNAL, "properties", "the key conditions name more keys than were counted");
        kc->tkey[ntk] = kof[i] >= 0 ? (uint8_t)kof[i] : 0xFF;
        if (kof[i] < 0) never |= 1u << ntk;
        else if (mem[i].required) req |= 1u << ntk;
        tm[ntk++] = i;
    }
    kc->ntk = (uint8_t)ntk;
    /* each dependency's two ends as table bits (members with a dep_bit are
     * table keys) */
    uint32_t da[64], db[64];
    for (uint32_t d = 0; d < ndeps; d++)
        for (uint32_t j = da[d] = db[d] = 0; j < ntk; j++) {
            if (tm[j] == deps[d].a) da[d] = 1u << j;
            if (tm[j] == deps[d].b) db[d] = 1u << j;
        }
    for (uint32_t b = 0; b < 1u << ntk; b++) {
        bool ok = !(b & never) && (b & req) == req;
        uint64_t bits = 0; /* the condition bits (dep_bit) of the keys in b */
        uint32_t ones = 0;
        bool anyhit = false;
        for (uint32_t j = 0; j < ntk; j++) {
            if (!(b >> j & 1)) continue;
            if (mem[tm[j]].dep_bit >= 0) bits |= 1ull << mem[tm[j]].dep_bit;
            anyhit |= any_w && any_w[tm[j]];
            ones += one_w ? one_w[tm[j]] : 0;
        }
        for (uint32_t d = 0; d < ndeps && ok; d++) ok = !(b & da[d]) || (b & db[d]);
        kc->tok[b] = ok && (!any_w || anyhit) && (!one_w || ones == 1) && (!cond_ok || cond_ok[bits]);
    }
    for (uint32_t b = 1u << ntk; b-- > 0;) {
        kc->text[b] = kc->tok[b];
        for (uint32_t j = 0; j < ntk && !kc->text[b]; j++)
            if (!(b >> j & 1)) kc->text[b] = kc->text[b | 1u << j];
    }
    if (!kc->text[0])
        return sv_sc_fail(c, SV_ERR_EMPTY, cond_ok ? "not" : "oneOf", "no set of keys meets the object's key conditions");
    return SV_OK;
}

/* An object whose key set the walk keeps (--key-order any; program.c, "Key
 * sets"): one loop over its members, each key's closing quote followed by
 * its guard (SV_ANN_REQ + k for required key k), an extra member's by
 * SV_ANN_XEND (in extra), the places a key may start by SV_ANN_OPEN and the
 * '}' by SV_ANN_CLOSE: {OPEN ws (}CLOSE | M (,OPEN ws M)* ws }CLOSE). The
 * object becomes a part of its own, so that its guards stand for one set. */
static sv_status object_frames(sctx_t *c, const member_t *mem, uint32_t n, const dep_t *deps, uint32_t ndeps,
                                const uint8_t *any_w, const uint8_t *one_w, const uint8_t *cond_ok, sv_ast_t *extra,
                                sv_ast_t **out) {
    sv_ast_t **alts = sv_arena_alloc(c->arena, (n + 1) * sizeof *alts);
    sv_ast_t *colon = sv_sc_colon(c), *open = sv_ann_marker(c->arena, SV_ANN_OPEN), *ws = sv_sc_ws(c);
    int32_t *kof = sv_arena_alloc(c->arena, (n + 1) * sizeof *kof); /* member -> key number, -1: none */
    bool *never = sv_arena_alloc(c->arena, n + 1);
    if (!alts || !colon || !open || !ws || !kof || !never) return sv_sc_nomem(c);
    /* a key whose dependency cannot be written cannot be written either */
    for (uint32_t i = 0; i < n; i++) never[i] = !mem[i].allowed;
    for (bool more = true; more;) {
        more = false;
        for (uint32_t d = 0; d < ndeps; d++)
            if (never[deps[d].b] && !never[deps[d].a]) never[deps[d].a] = more = true;
    }
    uint32_t na = 0, k = 0;
    for (uint32_t i = 0; i < n; i++) {
        kof[i] = -1;
        if (never[i]) {
            if (mem[i].required && mem[i].allowed)
                return sv_sc_fail(c, SV_ERR_EMPTY, "required", "required property \"%s\" depends on one that cannot be written", mem[i].key);
            continue;
        }
        /* The guards name the required keys: a required member whose value
         * turns out empty (a $ref to an unsatisfiable object) would take its
         * guard with it, and the close would not miss it. Values become DFAs
         * here, which the object's automaton then embeds. */
        sv_dfa_t *vd;
        sv_status st = sv_sc_to_dfa(c, mem[i].value, &vd);
        if (st) return st;
        if (!vd) {
            if (!mem[i].required) continue;
            return sv_sc_fail(c, SV_ERR_EMPTY, "required", "required property \"%s\" can have no valid value", mem[i].key);
        }
        sv_ast_t *val = sv_ast_dfa(c->arena, vd, false);
        kof[i] = (int32_t)k;
        sv_ast_t *g = sv_ann_marker(c->arena, (mem[i].required ? SV_ANN_REQ : 0) + k++);
        sv_ast_t *key = g && val ? sv_sc_cat2(c, sv_sc_key(c, mem[i].key, strlen(mem[i].key)), g) : NULL;
        if (!(alts[na++] = sv_sc_cat3(c, key, colon, val))) return sv_sc_nomem(c);
    }
    if (extra) alts[na++] = extra;
    /* the close's conditions: dependencies among the keys written, and an
     * anyOf of required keys; with conditions that writing a key can break
     * (a key condition, a oneOf of required keys), all of them as one
     * table over the keys they name (at most 8, sv_sc_object checks) */
    sv_kcond_t kc = {0};
    if (cond_ok || one_w) {
        sv_status st = kcond_table(c, mem, n, kof, deps, ndeps, any_w, one_w, cond_ok, &kc);
        if (st) return st;
    } else {
        for (uint32_t d = 0; d < ndeps; d++) {
            if (kof[deps[d].a] < 0) continue; /* never written: nothing to ask */
            kc.dep_a[kc.ndeps] = (uint8_t)kof[deps[d].a];
            kc.dep_b[kc.ndeps++] = (uint8_t)kof[deps[d].b];
        }
        bool any = false;
        for (uint32_t i = 0; any_w && i < n; i++)
            if (any_w[i]) {
                any = true;
                if (kof[i] >= 0) kc.anyreq |= 1ull << kof[i];
            }
        if (any && !kc.anyreq) return sv_sc_fail(c, SV_ERR_EMPTY, "anyOf", "no key the anyOf requires can be written");
    }
    uint32_t code = SV_ANN_CLOSE;
    if (kc.ndeps || kc.anyreq || kc.ntk) {
        if (SV_ANN_COND0 + c->nkconds >= SV_ANN_CODES)
            return sv_sc_fail(c, SV_ERR_BUDGET, "properties", "more than %u objects with key conditions keep their key sets",
                              SV_ANN_CODES - SV_ANN_COND0);
        if (c->nkconds == c->capkconds) {
            uint32_t cap = c->capkconds ? 2 * c->capkconds : 8;
            sv_kcond_t *nk = sv_arena_alloc(c->arena, cap * sizeof *nk);
            if (!nk) return sv_sc_nomem(c);
            if (c->nkconds) memcpy(nk, c->kconds, c->nkconds * sizeof *nk);
            c->kconds = nk;
            c->capkconds = cap;
        }
        code = SV_ANN_COND0 + c->nkconds;
        c->kconds[c->nkconds++] = kc;
    }
    sv_ast_t *close = sv_ann_marker(c->arena, code);
    sv_ast_t *m = sv_ast_alt(c->arena, alts, na), *sep = sep_open(c, open);
    sv_ast_t *more = m && sep ? sv_ast_repeat(c->arena, sv_sc_cat2(c, sep, m), 0, SV_AST_INF) : NULL;
    sv_ast_t *shut = sv_sc_cat2(c, sv_sc_lit(c, "}", 1), close);
    sv_ast_t *body = more && shut ? sv_sc_cat3(c, sv_sc_cat2(c, m, more), ws, shut) : NULL;
    sv_ast_t *inner[2] = {shut, body};
    sv_ast_t *obj = body ? sv_sc_cat3(c, sv_sc_cat2(c, sv_sc_lit(c, "{", 1), open), ws, sv_ast_alt(c->arena, inner, 2)) : NULL;
    if (!obj) return sv_sc_nomem(c);
    sv_dfa_t *d;
    sv_status st = sv_sc_to_dfa(c, obj, &d);
    if (st) return st;
    if (!d) return sv_sc_fail(c, SV_ERR_EMPTY, "properties", "the object has no valid value");
    return sv_sc_part(c, d, out);
}

/* The key orders of an object literal (a const or an enum value) at loc,
 * as permutations of its nk keys, and the allowance of the locations
 * below it: those of an object built there (sv_sc_object), so that every
 * language at the location, the universe of a difference included, holds
 * the same spellings of each value. Where key sets are on, the object
 * built there takes the canonical order and object_anyorder adds the rest. */
sv_status sv_sc_lit_orders(sctx_t *c, const sv_loc_t *loc, const char **keys, uint32_t nk, uint32_t ***perm,
                           uint32_t *n, uint32_t *child_orders) {
    bool try_any = sv_sc_keysets_at(c, loc) && nk >= 2 && nk <= KEYSET_MAX_KEYS;
    orders_t ord;
    sv_status st = loc_orders(c, loc, keys, nk, try_any, &ord);
    if (st) return st;
    *perm = ord.v;
    *n = ord.n;
    *child_orders = try_any ? loc->orders : loc->orders / ord.n ? loc->orders / ord.n : 1;
    return SV_OK;
}

sv_status sv_sc_object(sctx_t *c, json_t *s, const sv_loc_t *loc, bool canonical_any, sv_ast_t **out) {
    sv_status st;
    const char **keys;
    uint32_t n;
    if ((st = sv_sc_loc_keys(c, loc, &keys, &n))) return st;
    member_t *mem = sv_arena_alloc(c->arena, (n + 1) * sizeof *mem);
    if (!mem) return sv_sc_nomem(c);
    json_t *props = s ? json_object_get(s, "properties") : NULL, *req = s ? json_object_get(s, "required") : NULL;
    json_t *ap = s ? json_object_get(s, "additionalProperties") : NULL;
    if (s && !ap && c->o->strict_properties) ap = json_false();
    json_t *pp = s ? json_object_get(s, "patternProperties") : NULL;
    json_t *pn = s ? json_object_get(s, "propertyNames") : NULL;
    if (props && !json_is_object(props)) return sv_sc_fail(c, SV_ERR_SYNTAX, "properties", "properties must be an object");
    if (req && !json_is_array(req)) return sv_sc_fail(c, SV_ERR_SYNTAX, "required", "required must be an array");
    sv_dfa_t *names = NULL;
    bool names_empty = false;
    if (pn) {
        sv_loc_t nl;
        sv_ast_t *na;
        if ((st = sv_sc_loc_closure(c, &pn, 1, NULL, 0, &nl))) return st;
        size_t mark = sv_sc_push(c, "propertyNames");
        st = sub_lang(c, pn, &nl, &na);
        sv_sc_pop(c, mark);
        if (st) return st;
        if (!na) {
            names_empty = true; /* no key is allowed at all: only {} remains */
        } else if ((st = sv_sc_to_dfa(c, na, &names))) {
            return st;
        }
    }
    /* Key orders, the universe's (canonical_any) as every other object's
     * here, so that a difference sees the same spellings on both sides;
     * the objects below share what is left of the location's allowance, so
     * orders multiply to at most SV_SCHEMA_MAX_ORDERS along any path. */
    /* --key-order any: an object with few keys takes every order of them
     * (object_anyorder), and leaves the orders allowance to its members. */
    bool keyset = sv_sc_keysets_at(c, loc) && (!canonical_any || c->o->key_order == SV_KEY_ORDER_ANY);
    bool try_any = keyset && n >= 2 && n <= KEYSET_MAX_KEYS;
    orders_t ord;
    if ((st = loc_orders(c, loc, keys, n, try_any, &ord))) return st;
    uint32_t child_orders = try_any ? loc->orders : loc->orders / ord.n ? loc->orders / ord.n : 1;
    if (ord.n > 1) c->more_orders = true;
    uint32_t *idx = NULL;
    if ((st = member_order(c, s, keys, n, names, names_empty, canonical_any, &idx))) return st;
    /* Members of K, the required ones first. */
    uint32_t nreq = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = idx[j];
        member_t *m = &mem[i];
        m->key = keys[i];
        m->dep_bit = -1;
        m->required = sv_sc_has_string(req, m->key);
        sv_loc_t child;
        if ((st = sv_sc_loc_property(c, loc, m->key, &child))) return st;
        child.orders = child_orders;
        bool ok = !names_empty;
        if (ok && (st = key_name_ok(c, names, m->key, &ok))) return st;
        m->value = NULL;
        if (ok && canonical_any) {
            if ((st = canon_value(c, &child, &m->value))) return st;
        } else if (ok) {
            /* Sources: properties[k], each matching patternProperties, or additionalProperties. */
            json_t *src[8];
            sv_ast_t *vals[8];
            uint32_t ns = 0;
            json_t *p = props ? json_object_get(props, m->key) : NULL;
            if (p) src[ns++] = p;
            const char *pat;
            json_t *ps;
            if (json_is_object(pp)) json_object_foreach(pp, pat, ps) {
                sv_dfa_t *pd;
                if ((st = pattern_content(c, pat, &pd))) return st;
                if (pd && sv_dfa_matches(pd, (const uint8_t *)m->key, strlen(m->key))) {
                    /* A schema met twice adds nothing: by A and A is A, and
                     * its product would be built for nothing (or refused,
                     * when A recurses). Siblings of one object, so their
                     * $refs resolve alike. */
                    bool dup = false;
                    for (uint32_t k = 0; k < ns && !dup; k++) dup = sv_sc_same_schema(src[k], ps);
                    if (dup) continue;
                    if (ns == 8)
                        return sv_sc_fail(c, SV_ERR_BUDGET, "patternProperties", "more than 8 schemas apply to key \"%s\"", m->key);
                    src[ns++] = ps;
                }
            }
            bool done = false;
            if (ns == 0 && !json_is_false(ap)) {
                /* A free member: the schemas of the location's context for
                 * it, if there are any (see "Member context" in schema.c).
                 * The context is an optimization: where its schemas give a
                 * language that may miss values (a cut recursion, a narrowed
                 * format), or fail to compile, the member stays free. */
                json_t **cs;
                uint32_t ncs = 0;
                if ((!ap || json_is_true(ap) || (json_is_object(ap) && json_object_size(ap) == 0)) &&
                    (st = sv_sc_ctx_sources(c, loc, m->key, &cs, &ncs)))
                    return st;
                /* Contexts nest like $refs (a context can hold the schema
                 * that led to it), so past CTX_MAX_NESTING the member stays free. */
                if (ncs > 0 && c->ctx_depth < CTX_MAX_NESTING) {
                    bool keep = c->truncated;
                    c->truncated = false;
                    size_t mark = sv_sc_push(c, "properties");
                    sv_sc_push(c, m->key);
                    c->ctx_depth++;
                    st = member_value(c, cs, ncs < 8 ? ncs : 8, &child, &m->value);
                    c->ctx_depth--;
                    sv_sc_pop(c, mark);
                    bool cut = c->truncated;
                    c->truncated = keep;
                    if (st == SV_ERR_NOMEM || st == SV_ERR_TIMEOUT) return st;
                    done = !st && !cut;
                }
                if (!done) src[ns++] = ap ? ap : json_true();
            }
            if (!done && ns >= 2) {
                /* schemas that merge into one need no product */
                size_t mark = sv_sc_push(c, p ? "properties" : "patternProperties");
                if (p) sv_sc_push(c, m->key);
                st = sv_sc_meet(c, src, ns, &child, &m->value, &done);
                sv_sc_pop(c, mark);
                if (st == SV_ERR_EMPTY) m->value = NULL, st = SV_OK;
                if (st) return st;
            }
            for (uint32_t k = 0; k < ns && !done; k++) {
                const char *kw = k == 0 && p ? "properties" : src[k] == ap ? "additionalProperties" : "patternProperties";
                size_t mark = sv_sc_push(c, kw);
                if (k == 0 && p) sv_sc_push(c, m->key);
                st = member_value(c, src + k, 1, &child, &vals[k]);
                sv_sc_pop(c, mark);
                if (st) return st;
            }
            if (!done && (st = member_and(c, vals, ns, &m->value))) return st;
        }
        m->allowed = m->value != NULL;
        if (m->required && !m->allowed)
            return sv_sc_fail(c, SV_ERR_EMPTY, "required", "required property \"%s\" can have no valid value", m->key);
        nreq += m->required;
    }
    /* A wide object holds every member's value once or twice (before and
     * after the first member written); with calls, the values of a wide
     * object are parts, equal ones shared, so the object's automaton holds
     * its keys and calls. In any object, so does a big value (a string with
     * maxLength 280 is 3,900 states): the object holds it once per key
     * order it accepts (the schema's and the required keys' first), and
     * every tool or object that has it shares one compiled part. So does a
     * container value of SMALL_VALUE_PART_MIN states or more, in the first
     * attempt (docs/fsm.md, "Container values"). Not in the retry without
     * $ref parts (ref_parts), which a refused program takes. */
    bool wide = n >= WIDE_OBJECT_MIN || try_any;
    if (sv_sc_calls(c) && !canonical_any && (wide || c->ref_parts))
        for (uint32_t i = 0; i < n; i++) {
            if (!mem[i].value) continue;
            /* compiling each value only pays where it may be big */
            uint32_t min = wide ? VALUE_PART_MIN : c->small_parts ? SMALL_VALUE_PART_MIN : BIG_VALUE_PART_MIN;
            if (!wide && sv_ast_weight(mem[i].value, min) < min) continue;
            sv_ast_t *call; /* a heavy value: a part a helper compiles */
            if ((st = sv_sc_part_job(c, mem[i].value, &call))) return st;
            if (call) {
                mem[i].value = call;
                continue;
            }
            sv_dfa_t *d;
            if ((st = sv_sc_to_dfa(c, mem[i].value, &d))) return st;
            if (!d) continue;
            bool small = !wide && sv_dfa_num_states(d) < BIG_VALUE_PART_MIN;
            /* small values only where they may hold objects or arrays: a
               container is minimized again in every object around it when
               inline, a scalar (a tag's literal, an enum) is cheap inline
               and told apart from its siblings in a union by its bytes */
            bool part = sv_dfa_num_states(d) >= min &&
                        (!small || sv_dfa_next(d, sv_dfa_start(d), '{') >= 0 || sv_dfa_next(d, sv_dfa_start(d), '[') >= 0);
            if (part) {
                if ((st = sv_sc_part(c, d, &mem[i].value))) return st;
                c->small_parts_used |= small;
            } else if (!(mem[i].value = sv_ast_dfa(c->arena, d, false))) {
                return sv_sc_nomem(c); /* inline: the DFA just built, not the AST again */
            }
        }
    /* dependentRequired (and the array form of dependencies). */
    dep_t deps[64];
    uint32_t ndeps = 0, nbits = 0;
    static const char *const dep_kw[] = {"dependentRequired", "dependencies"};
    for (int d = 0; d < 2 && s && !canonical_any; d++) {
        json_t *dj = json_object_get(s, dep_kw[d]), *arr;
        const char *key;
        if (!json_is_object(dj)) continue;
        json_object_foreach(dj, key, arr) {
            if (!json_is_array(arr)) continue;
            uint32_t a = n;
            for (uint32_t i = 0; i < n; i++) if (strcmp(keys[i], key) == 0) a = i;
            for (size_t j = 0; j < json_array_size(arr); j++) {
                const char *bk = json_string_value(json_array_get(arr, j));
                uint32_t b = n;
                for (uint32_t i = 0; bk && i < n; i++) if (strcmp(keys[i], bk) == 0) b = i;
                if (a == n || b == n || a == b) continue;
                if (ndeps == 64) return sv_sc_fail(c, SV_ERR_BUDGET, dep_kw[d], "more than 64 dependencies at one location");
                deps[ndeps++] = (dep_t){a, b};
                if (mem[a].dep_bit < 0) mem[a].dep_bit = (int)nbits++;
                if (mem[b].dep_bit < 0) mem[b].dep_bit = (int)nbits++;
            }
        }
    }
    /* anyOf of single required keys: one more bit, set by any of those
     * keys; oneOf: a count of the branches met, saturating at 2, in two
     * bits. A key no member stands for can never be written, so its branch
     * never holds. */
    const uint8_t *any_w = NULL, *one_w = NULL;
    int any_bit = -1, one_bit = -1;
    if (s && !canonical_any && sv_sc_any_required(s)) {
        if (!(any_w = required_weights(c, json_object_get(s, "anyOf"), keys, n))) return sv_sc_nomem(c);
        any_bit = (int)nbits++;
    }
    if (s && !canonical_any && sv_sc_one_required(s)) {
        if (!(one_w = required_weights(c, json_object_get(s, "oneOf"), keys, n))) return sv_sc_nomem(c);
        one_bit = (int)nbits;
        nbits += 2;
    }
    /* A `not` that names keys only (sv_sc_not_keys): a presence bit for
     * each key it names that may be written (shared with dependencies),
     * and below, a table over the bits of where the condition holds. */
    const char *fk[2 * SV_KEYCOND_MAX];
    int fbit[2 * SV_KEYCOND_MAX];
    uint32_t nfk = 0;
    bool fmissing = false;
    json_t *ncond = s && !canonical_any && sv_sc_not_keys(s) ? json_object_get(s, "not") : NULL;
    bool dconds = s && !canonical_any && sv_sc_deps_keys(s);
    static const char *const cond_maps[] = {"dependentSchemas", "dependencies"};
    if (ncond) nfk = sv_sc_keycond_keys(ncond, fk) - 1;
    /* anyOf and oneOf of key conditions (sv_sc_union_keys) */
    static const char *const ulists[] = {"anyOf", "oneOf"};
    json_t *ucond[2] = {NULL, NULL};
    for (int l = 0; l < 2; l++) {
        if (!s || canonical_any || !sv_sc_union_keys(s, ulists[l])) continue;
        ucond[l] = json_object_get(s, ulists[l]);
        for (size_t b = 0; b < json_array_size(ucond[l]); b++)
            if (!sv_sc_keycond_collect(json_array_get(ucond[l], b), fk, &nfk, 2 * SV_KEYCOND_MAX))
                return sv_sc_fail(c, SV_ERR_INTERNAL, ulists[l], "the key condition names more keys than it was taken with");
    }
    bool uconds = ucond[0] || ucond[1];
    for (int l = 0; l < 2 && dconds; l++) {
        /* schema-valued dependencies (sv_sc_deps_keys): their trigger keys
         * and the keys their schemas name */
        json_t *m = json_object_get(s, cond_maps[l]), *x;
        const char *k, *dk[SV_KEYCOND_MAX];
        if (json_is_object(m)) json_object_foreach(m, k, x) {
            if (json_is_array(x)) continue;
            uint32_t nd = sv_sc_keycond_keys(x, dk) - 1;
            for (uint32_t i = 0; i <= nd; i++) {
                const char *key = i < nd ? dk[i] : k;
                uint32_t j = 0;
                while (j < nfk && strcmp(fk[j], key)) j++;
                if (j == nfk && nfk < 2 * SV_KEYCOND_MAX) fk[nfk++] = key;
            }
        }
    }
    if (ncond || dconds || uconds) {
        for (uint32_t j = 0; j < nfk; j++) {
            uint32_t i = 0;
            while (i < n && strcmp(keys[i], fk[j])) i++;
            fbit[j] = -1;
            fmissing |= i == n;
            if (i == n || !mem[i].allowed) continue;
            if (mem[i].dep_bit < 0) mem[i].dep_bit = (int)nbits++;
            fbit[j] = mem[i].dep_bit;
        }
    }
    if (nbits > 8)
        return sv_sc_fail(c, SV_ERR_BUDGET, ncond ? "not" : ucond[0] ? "anyOf" : ucond[1] ? "oneOf" : "dependentRequired",
                          "dependencies and key conditions involve more than 8 keys at one location");
    /* Counting only when min/maxProperties can bind. */
    bool has_min, has_max;
    uint64_t minp = 0, maxp = 0;
    if (!canonical_any && ((st = get_uint(c, s, "minProperties", &has_min, &minp)) || (st = get_uint(c, s, "maxProperties", &has_max, &maxp))))
        return st;
    if (canonical_any) has_min = has_max = false;
    sv_ast_t *extra;
    if ((st = extras(c, s, child_orders, sv_sc_child_level(c, loc), mem, n, names, names_empty, canonical_any, NULL,
                     &extra)))
        return st;
    uint32_t nallowed = 0;
    for (uint32_t i = 0; i < n; i++) nallowed += mem[i].allowed;
    if (has_max && !extra && maxp >= nallowed) has_max = false;
    if (has_min && minp <= nreq) has_min = false;
    if (has_min && !extra && minp > nallowed)
        return sv_sc_fail(c, SV_ERR_EMPTY, "minProperties", "minProperties %llu exceeds the %u properties allowed",
                          (unsigned long long)minp, nallowed);
    if (has_max && maxp < nreq)
        return sv_sc_fail(c, SV_ERR_EMPTY, "maxProperties", "maxProperties %llu is below the %u required properties",
                          (unsigned long long)maxp, nreq);
    uint64_t C = has_max ? maxp : has_min ? minp : 0;
    uint64_t B = (uint64_t)1 << nbits;
    uint8_t *cond_ok = NULL;
    if (ncond || dconds || uconds) {
        /* The location's keys hold every key a `required` under it names
         * (sv_sc_loc_keys over the closure, which enters `not`); an extra
         * member could otherwise be one the bits do not see. */
        if (fmissing && extra)
            return sv_sc_fail(c, SV_ERR_INTERNAL, ncond ? "not" : ucond[0] ? "anyOf" : ucond[1] ? "oneOf" : "dependentSchemas",
                              "a key the condition names is not among the location's keys");
        if (!(cond_ok = sv_arena_alloc(c->arena, B))) return sv_sc_nomem(c);
        for (uint64_t bits = 0; bits < B; bits++) {
            uint32_t present = 0;
            for (uint32_t j = 0; j < nfk; j++)
                if (fbit[j] >= 0 && (bits >> fbit[j] & 1)) present |= 1u << j;
            bool ok = !ncond || !sv_sc_keycond_eval(ncond, fk, nfk, present, true);
            for (int l = 0; l < 2 && ok; l++)
                ok = !ucond[l] || sv_sc_keycond_list(ucond[l], ulists[l], fk, nfk, present, true);
            for (int l = 0; l < 2 && dconds && ok; l++) {
                json_t *m = json_object_get(s, cond_maps[l]), *x;
                const char *k;
                if (json_is_object(m)) json_object_foreach(m, k, x) {
                    if (json_is_array(x) || !ok) continue;
                    uint32_t j = 0;
                    while (j < nfk && strcmp(fk[j], k)) j++;
                    if (j < nfk && (present >> j & 1)) ok = sv_sc_keycond_eval(x, fk, nfk, present, true);
                }
            }
            cond_ok[bits] = ok;
        }
    }
    uint64_t per_pos = (C + 1) * B;
    uint64_t nnodes = (uint64_t)(n + 1) * 2 * per_pos + (uint64_t)n * per_pos + per_pos;
    if (keyset && extra) nnodes += (uint64_t)n * per_pos; /* extra members anywhere (object_graph) */
    if (nnodes > MAX_GRAPH_NODES)
        return sv_sc_fail(c, SV_ERR_BUDGET, has_max ? "maxProperties" : "minProperties",
                          "the object needs %llu automaton nodes to count its properties (limit %u)",
                          (unsigned long long)nnodes, MAX_GRAPH_NODES);
    object_shape_t shape = {.mem = mem, .n = n, .deps = deps, .ndeps = ndeps, .nbits = nbits, .any_w = any_w,
                            .one_w = one_w, .cond_ok = cond_ok, .any_bit = any_bit, .one_bit = one_bit, .has_min = has_min,
                            .has_max = has_max, .minp = minp, .C = C, .extra = extra};
    shape.kv = sv_arena_alloc(c->arena, (n + 1) * sizeof *shape.kv);
    if (!shape.kv) return sv_sc_nomem(c);
    sv_ast_t *colon = sv_sc_colon(c);
    if (!colon) return sv_sc_nomem(c);
    for (uint32_t i = 0; i < n; i++) {
        shape.kv[i] = mem[i].allowed ? sv_sc_cat3(c, sv_sc_key(c, mem[i].key, strlen(mem[i].key)), colon, mem[i].value) : NULL;
        if (mem[i].allowed && !shape.kv[i]) return sv_sc_nomem(c); /* a NULL label would be an epsilon edge */
    }
    sv_ast_t *g[SV_SCHEMA_MAX_ORDERS];
    bool any_order = false;
    uint64_t keyset_states = UINT64_MAX;
    if (try_any && (st = keyset_fits(c, &shape, &any_order, &keyset_states))) return st;
    /* Too many keys for the automaton of key sets: the walk keeps the set
     * (program.c, "Key sets"), where the object's language needs nothing
     * beside it (no count, no dependency, no key condition). */
    uint32_t ncond_keys = 0;
    for (uint32_t i = 0; i < n; i++) ncond_keys += cond_member(mem, any_w, one_w, i);
    if (keyset && (!any_order || keyset_states > FRAMES_OVER_STATES) && c->frames && sv_sc_calls(c) &&
        ((!cond_ok && !one_w) || ncond_keys <= SV_KCOND_TABLE_KEYS) && !has_min && !has_max && nallowed >= 2 &&
        nallowed <= SV_KS_MAX_KEYS) {
        sv_ast_t *xend = sv_ann_marker(c->arena, SV_ANN_XEND), *fextra = NULL;
        if (!xend) return sv_sc_nomem(c);
        if (extra && (st = extras(c, s, child_orders, sv_sc_child_level(c, loc), mem, n, names, names_empty, false, xend,
                                  &fextra)))
            return st;
        if ((st = object_frames(c, mem, n, deps, ndeps, any_w, one_w, cond_ok, fextra, out))) return st;
        c->frames_used = true;
        c->more_orders = true;
        if (c->info) c->info->nkey_set_frames++;
        return SV_OK;
    }
    if (keyset && n > KEYSET_MAX_KEYS && (st = order_narrowed(c, loc))) return st;
    if (any_order) {
        if ((st = object_anyorder(c, &shape, &g[0]))) return st;
        took_keysets(c);
        ord.n = 0;
    } else if (try_any) {
        /* Too big for key sets: the orders schema mode takes (the members
         * were built with the whole allowance, so this may exceed
         * SV_SCHEMA_MAX_ORDERS along a path; it only costs states). */
        if ((st = order_narrowed(c, loc))) return st;
        if ((st = loc_orders(c, loc, keys, n, false, &ord))) return st;
        if (ord.n > 1) c->more_orders = true;
    }
    if (!any_order && keyset && extra) {
        shape.extra_anywhere = true;
        c->more_orders = true;
    }
    for (uint32_t o = 0; o < ord.n; o++)
        if ((st = object_graph(c, &shape, ord.v[o], &g[o]))) return st;
    sv_ast_t *ws = sv_sc_ws(c);
    sv_ast_t *body = ord.n <= 1 ? g[0] : sv_ast_alt(c->arena, g, ord.n);
    *out = sv_sc_cat3(c, sv_sc_cat2(c, sv_sc_lit(c, "{", 1), ws), body, sv_sc_cat2(c, ws, sv_sc_lit(c, "}", 1)));
    return *out ? SV_OK : sv_sc_nomem(c);
}

/* An object literal (a const or an enum value) with --key-order any: its
 * keys in any order, each once, all present, as an object of required
 * members whose values are the literals' (vals[i], key keys[i]). *out is
 * NULL where key sets are off (sv_sc_keysets) or too big (keyset_fits):
 * the caller then spells the literal in the location's order, and the
 * narrowing is counted (info->nkey_order_narrowed). */
sv_status sv_sc_object_literal(sctx_t *c, const sv_loc_t *loc, const char *const *keys, sv_ast_t *const *vals, uint32_t n,
                               sv_ast_t **out) {
    *out = NULL;
    if (!sv_sc_keysets_at(c, loc) || n < 2) return SV_OK;
    if (n > KEYSET_MAX_KEYS) return order_narrowed(c, loc);
    member_t *mem = sv_arena_alloc(c->arena, n * sizeof *mem);
    sv_ast_t **kv = sv_arena_alloc(c->arena, (n + 1) * sizeof *kv);
    sv_ast_t *colon = sv_sc_colon(c);
    if (!mem || !kv || !colon) return sv_sc_nomem(c);
    for (uint32_t i = 0; i < n; i++) {
        mem[i] = (member_t){.key = keys[i], .allowed = true, .required = true, .value = vals[i], .dep_bit = -1};
        if (!(kv[i] = sv_sc_cat3(c, sv_sc_key(c, keys[i], strlen(keys[i])), colon, vals[i]))) return sv_sc_nomem(c);
    }
    object_shape_t shape = {.mem = mem, .n = n, .any_bit = -1, .one_bit = -1, .kv = kv};
    bool fits = false;
    uint64_t states;
    sv_ast_t *g;
    sv_status st = keyset_fits(c, &shape, &fits, &states);
    if (st || !fits) return st ? st : order_narrowed(c, loc);
    if ((st = object_anyorder(c, &shape, &g))) return st;
    took_keysets(c);
    sv_ast_t *ws = sv_sc_ws(c);
    *out = sv_sc_cat3(c, sv_sc_cat2(c, sv_sc_lit(c, "{", 1), ws), g, sv_sc_cat2(c, ws, sv_sc_lit(c, "}", 1)));
    return *out ? SV_OK : sv_sc_nomem(c);
}

/* ---- arrays -------------------------------------------------------------------- */

static sv_status canon_value(sctx_t *c, const sv_loc_t *loc, sv_ast_t **out) {
    /* One level down in the canonical universe; at the depth limit only
     * scalars, which keeps the universe finite (a smaller universe is still
     * sound for differences). */
    sv_status st;
    /* Where no schema names the location, every spelling is canonical (no
     * key order to keep): the free-form part, to any depth, as a call. */
    if (c->calls && c->any_products && (!loc || (loc->n == 0 && loc->nlits == 0 && loc->nctx == 0)))
        return sv_sc_any_call_in_product(c, out);
    sv_ast_t *alts[6];
    sv_dfa_t *content;
    if ((st = sv_sc_any_number(c, false, &alts[0])) || (st = sv_sc_any_string_content(c, &content))) return st;
    alts[1] = sv_sc_quoted(c, content);
    alts[2] = sv_sc_lit(c, "null", 4);
    alts[3] = sv_ast_alt(c->arena, (sv_ast_t *[]){sv_sc_lit(c, "true", 4), sv_sc_lit(c, "false", 5)}, 2);
    uint32_t n = 4;
    if (c->canon_depth > 1) {
        sv_loc_t empty = {0};
        const sv_loc_t *l = loc ? loc : &empty;
        c->canon_depth--;
        st = sv_sc_array(c, NULL, l, true, &alts[n++]);
        if (!st) st = sv_sc_object(c, NULL, l, true, &alts[n++]);
        c->canon_depth++;
        if (st) return st;
    }
    *out = sv_ast_alt(c->arena, alts, n);
    return *out ? SV_OK : sv_sc_nomem(c);
}

static sv_status array_lang(sctx_t *c, json_t *s, const sv_loc_t *loc, bool canonical_any, sv_ast_t **out);

sv_status sv_sc_array(sctx_t *c, json_t *s, const sv_loc_t *loc, bool canonical_any, sv_ast_t **out) {
    /* maxContains subtracts the contains language from the items' (a
     * language differences see, sv_sc_keysets) */
    bool diff = s && !canonical_any && c->draft >= 2019 && json_object_get(s, "contains") &&
                json_object_get(s, "maxContains");
    c->no_keysets += diff;
    sv_status st = array_lang(c, s, loc, canonical_any, out);
    c->no_keysets -= diff;
    return st;
}

static sv_status array_lang(sctx_t *c, json_t *s, const sv_loc_t *loc, bool canonical_any, sv_ast_t **out) {
    sv_status st;
    json_t *prefix = s ? json_object_get(s, "prefixItems") : NULL, *items = s ? json_object_get(s, "items") : NULL;
    json_t *tuple = json_is_array(prefix) ? prefix : json_is_array(items) ? items : NULL;
    json_t *rest = json_is_array(prefix) ? items : json_is_array(items) ? (s ? json_object_get(s, "additionalItems") : NULL) : items;
    const char *rest_kw = json_is_array(prefix) ? "items" : json_is_array(items) ? "additionalItems" : "items";
    uint32_t P = tuple && !canonical_any ? (uint32_t)json_array_size(tuple) : 0;
    bool has_min = false, has_max = false, has_minc = false, has_maxc = false;
    uint64_t mini = 0, maxi = 0, minc = 0, maxc = 0;
    json_t *cont = s && !canonical_any ? json_object_get(s, "contains") : NULL;
    if (!canonical_any) {
        if ((st = get_uint(c, s, "minItems", &has_min, &mini)) || (st = get_uint(c, s, "maxItems", &has_max, &maxi))) return st;
        if (cont && ((st = get_uint(c, s, "minContains", &has_minc, &minc)) || (st = get_uint(c, s, "maxContains", &has_maxc, &maxc))))
            return st;
    } else {
        has_min = has_max = has_minc = has_maxc = false;
    }
    if (cont && !has_minc) minc = 1;
    if (cont && c->draft < 2019) has_maxc = false, minc = 1; /* min/maxContains are 2019-09 keywords */
    bool rest_false = json_is_false(rest) && !canonical_any;
    if (rest_false) {
        if (!has_max || maxi > P) maxi = P, has_max = true;
    }
    if (has_min && has_max && mini > maxi)
        return sv_sc_fail(c, SV_ERR_EMPTY, "minItems", "minItems %llu is above the items allowed (%llu)",
                          (unsigned long long)mini, (unsigned long long)maxi);
    /* Unbounded arrays saturate at a node with at least one item, so the
     * loop there always has a separator. */
    uint64_t N = has_max ? maxi : (P > mini ? P : mini);
    if (!has_max && N == 0) N = 1;
    uint64_t J = !cont ? 0 : has_maxc ? maxc : minc;
    uint64_t nnodes = (N + 1) * (J + 1) * 2;
    if (nnodes > MAX_GRAPH_NODES)
        return sv_sc_fail(c, SV_ERR_BUDGET, has_max ? "maxItems" : "minItems",
                          "the array needs %llu automaton nodes to count its items (limit %u)", (unsigned long long)nnodes,
                          MAX_GRAPH_NODES);
    /* Item languages: prefix positions, then the rest (shared). */
    sv_ast_t **lang = sv_arena_alloc(c->arena, (P + 1) * sizeof *lang);
    sv_dfa_t **in = NULL, **outc = NULL;
    if (!lang) return sv_sc_nomem(c);
    for (uint32_t i = 0; i <= P; i++) {
        sv_loc_t child;
        if ((st = sv_sc_loc_item(c, loc, i, &child))) return st;
        json_t *x = i < P ? json_array_get(tuple, i) : rest;
        if (canonical_any) {
            st = canon_value(c, &child, &lang[i]);
        } else if (i == P && rest_false) {
            lang[i] = NULL;
        } else if (!x || json_is_true(x)) {
            st = sv_sc_any_value(c, sv_sc_any_depth(c, sv_sc_child_level(c, loc)), &lang[i]);
        } else {
            size_t mark = sv_sc_push(c, i < P ? (json_is_array(prefix) ? "prefixItems" : "items") : rest_kw);
            if (i < P) {
                char b[16];
                snprintf(b, sizeof b, "%u", i);
                sv_sc_push(c, b);
            }
            st = sub_lang(c, x, &child, &lang[i]);
            sv_sc_pop(c, mark);
        }
        if (st) return st;
    }
    /* Items counted by maxItems: a DFA holds a copy of the item per count.
     * With calls, a big item becomes a part of its own (sv_sc_part), and
     * each count costs a call instead of a copy. */
    if (!cont && has_max && N >= 2 && sv_sc_calls(c)) {
        for (uint32_t i = 0; i <= P; i++) {
            if (!lang[i]) continue;
            uint64_t uses = i < P ? 1 : (N > P ? N - P : 0);
            if (uses < 2) continue;
            sv_dfa_t *d;
            if ((st = sv_sc_to_dfa(c, lang[i], &d))) return st;
            if (!d || (uint64_t)sv_dfa_num_states(d) * uses < ITEM_PART_MIN) continue;
            if ((st = sv_sc_part(c, d, &lang[i]))) return st;
        }
    }
    /* So is any big item where big values are parts: the array is then a
     * few states around its calls, and the item's DFA is not determinized
     * and minimized again inside it (a string with maxLength 512 is 7,171
     * states, held once after '[' and once after each separator). An item
     * never starts with what an array reads beside it (']', a separator). */
    if (!cont && sv_sc_calls(c) && c->ref_parts)
        for (uint32_t i = 0; i <= P; i++) {
            if (!lang[i] || sv_ast_weight(lang[i], BIG_VALUE_PART_MIN) < BIG_VALUE_PART_MIN) continue;
            sv_dfa_t *d;
            if ((st = sv_sc_to_dfa(c, lang[i], &d))) return st;
            if (sv_sc_big_part_ok(d) && (st = sv_sc_part(c, d, &lang[i]))) return st;
        }
    if (cont) {
        /* Split each item language by contains: matching / not matching. The
         * not-matching part is taken within canonical spellings when a
         * maximum bounds the matches, so a match is never miscounted. */
        in = sv_arena_alloc(c->arena, (P + 1) * sizeof *in);
        outc = sv_arena_alloc(c->arena, (P + 1) * sizeof *outc);
        if (!in || !outc) return sv_sc_nomem(c);
        for (uint32_t i = 0; i <= P; i++) {
            in[i] = outc[i] = NULL;
            if (!lang[i]) continue;
            sv_loc_t child;
            if ((st = sv_sc_loc_item(c, loc, i, &child))) return st;
            sv_ast_t *ca;
            bool keep = c->truncated;
            c->truncated = false;
            size_t mark = sv_sc_push(c, "contains");
            st = sub_lang(c, cont, &child, &ca);
            sv_sc_pop(c, mark);
            if (st) return st;
            if (has_maxc && c->truncated)
                return sv_sc_fail(c, SV_ERR_UNSUPPORTED, "maxContains",
                                  "maxContains over a recursive schema deeper than max_ref_depth cannot be counted exactly");
            c->truncated |= keep;
            sv_dfa_t *ld, *cd = NULL, *base;
            if ((st = sv_sc_to_dfa(c, lang[i], &ld))) return st;
            if (ca && (st = sv_sc_to_dfa(c, ca, &cd))) return st;
            if ((st = sv_sc_product(c, ld, cd, SV_DFA_AND, "contains", &in[i]))) return st;
            base = ld;
            if (has_maxc) {
                sv_ast_t *u;
                sv_dfa_t *ud;
                uint32_t keepd = c->canon_depth;
                c->canon_depth = sv_sc_any_depth(c, child.level) + 1;
                st = canon_value(c, &child, &u);
                c->canon_depth = keepd;
                if (st || (st = sv_sc_to_dfa(c, u, &ud)) || (st = sv_sc_product(c, ld, ud, SV_DFA_AND, "contains", &base))) return st;
            }
            if ((st = sv_sc_product(c, base, cd, SV_DFA_DIFF, "contains", &outc[i]))) return st;
        }
    }
    /* Graph nodes (i, j) and imid(i, j) after a separator. */
#define ANODE(i, j) ((uint32_t)((i) * (J + 1) + (j)))
#define AMID(i, j) ((uint32_t)((N + 1) * (J + 1) + (i) * (J + 1) + (j)))
    edgevec_t ev = {0};
    uint8_t *final = calloc(nnodes, 1);
    if (!final) return sv_sc_nomem(c);
    sv_ast_t *sep = sv_sc_sep(c);
    if (!sep) st = sv_sc_nomem(c);
    for (uint64_t i = 0; i <= N && !st; i++) {
        uint32_t li = i < P ? (uint32_t)i : P;
        bool loop = i == N && !has_max;
        uint64_t i2 = loop ? N : i + 1;
        for (uint64_t j = 0; j <= J && !st; j++) {
            final[ANODE(i, j)] = (!has_min || i >= mini) && j >= minc * (cont != NULL);
            if (i == N && has_max) continue;
            if (!lang[li]) continue;
            uint32_t from = ANODE(i, j);
            if (i > 0) {
                st = edge(c, &ev, from, AMID(i, j), sep);
                from = AMID(i, j);
            }
            if (!cont) {
                if (!st) st = edge(c, &ev, from, ANODE(i2, 0), lang[li]);
                continue;
            }
            uint64_t j2 = j + 1;
            bool can_match = in[li] != NULL;
            if (j2 > J) {
                if (has_maxc) can_match = false;
                else j2 = J;
            }
            sv_ast_t *lin = can_match ? sv_ast_dfa(c->arena, in[li], false) : NULL;
            sv_ast_t *lout = outc[li] ? sv_ast_dfa(c->arena, outc[li], false) : NULL;
            if (!st && ((can_match && !lin) || (outc[li] && !lout))) st = sv_sc_nomem(c);
            if (!st && can_match) st = edge(c, &ev, from, ANODE(i2, j2), lin);
            if (!st && outc[li]) st = edge(c, &ev, from, ANODE(i2, j), lout);
        }
    }
#undef ANODE
#undef AMID
    sv_ast_t *g = st ? NULL : sv_ast_graph(c->arena, (uint32_t)nnodes, ev.v, ev.n, final);
    free(ev.v);
    free(final);
    if (st) return st;
    sv_ast_t *ws = sv_sc_ws(c);
    *out = sv_sc_cat3(c, sv_sc_cat2(c, sv_sc_lit(c, "[", 1), ws), g, sv_sc_cat2(c, ws, sv_sc_lit(c, "]", 1)));
    return *out ? SV_OK : sv_sc_nomem(c);
}
