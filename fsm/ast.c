#include "ast.h"
#include "dfa.h"

#include <string.h>

static sv_ast_t *node(sv_arena_t *a, sv_ast_kind kind) {
    sv_ast_t *n = sv_arena_alloc(a, sizeof *n);
    if (n) n->kind = kind;
    return n;
}

sv_ast_t *sv_ast_none(sv_arena_t *a) { return node(a, SV_AST_NONE); }
sv_ast_t *sv_ast_empty(sv_arena_t *a) { return node(a, SV_AST_EMPTY); }

sv_ast_t *sv_ast_class(sv_arena_t *a, const sv_cpset_t *set) {
    if (set->n == 0) return sv_ast_none(a);
    sv_ast_t *n = node(a, SV_AST_CLASS);
    if (!n) return NULL;
    sv_cprange_t *r = sv_arena_alloc(a, set->n * sizeof *r);
    if (!r) return NULL;
    memcpy(r, set->r, set->n * sizeof *r);
    n->ranges = r;
    n->nranges = set->n;
    return n;
}

sv_ast_t *sv_ast_codepoint(sv_arena_t *a, uint32_t cp) {
    if (cp > SV_CP_MAX || (cp >= 0xD800 && cp <= 0xDFFF)) return sv_ast_none(a);
    sv_ast_t *n = node(a, SV_AST_CLASS);
    if (!n) return NULL;
    sv_cprange_t *r = sv_arena_alloc(a, sizeof *r);
    if (!r) return NULL;
    r->lo = r->hi = cp;
    n->ranges = r;
    n->nranges = 1;
    return n;
}

sv_ast_t *sv_ast_bytes(sv_arena_t *a, uint8_t lo, uint8_t hi) {
    sv_ast_t *n = node(a, SV_AST_BYTES);
    if (!n) return NULL;
    n->lo = lo;
    n->hi = hi;
    return n;
}

static sv_ast_t *list(sv_arena_t *a, sv_ast_kind kind, sv_ast_t *const *kids, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (!kids[i]) return NULL; /* a kid that failed to allocate: propagate */
    if (n == 0) return kind == SV_AST_CAT ? sv_ast_empty(a) : sv_ast_none(a);
    if (n == 1) return kids[0];
    sv_ast_t *x = node(a, kind);
    if (!x) return NULL;
    x->kids = sv_arena_alloc(a, n * sizeof *x->kids);
    if (!x->kids) return NULL;
    memcpy(x->kids, kids, n * sizeof *x->kids);
    x->nkids = n;
    return x;
}

sv_ast_t *sv_ast_cat(sv_arena_t *a, sv_ast_t *const *kids, uint32_t n) { return list(a, SV_AST_CAT, kids, n); }
sv_ast_t *sv_ast_alt(sv_arena_t *a, sv_ast_t *const *kids, uint32_t n) { return list(a, SV_AST_ALT, kids, n); }

sv_ast_t *sv_ast_repeat(sv_arena_t *a, sv_ast_t *kid, uint32_t min, uint32_t max) {
    if (!kid) return NULL;
    sv_ast_t *n = node(a, SV_AST_REPEAT);
    if (!n) return NULL;
    n->kids = sv_arena_alloc(a, sizeof *n->kids);
    if (!n->kids) return NULL;
    n->kids[0] = kid;
    n->nkids = 1;
    n->min = min;
    n->max = max;
    return n;
}

sv_ast_t *sv_ast_assert(sv_arena_t *a, sv_ast_kind k) { return node(a, k); }

sv_ast_t *sv_ast_dfa(sv_arena_t *a, const struct sv_dfa *dfa, bool json_escape) {
    sv_ast_t *n = node(a, SV_AST_DFA);
    if (n) n->dfa = dfa, n->json_escape = json_escape;
    return n;
}

sv_ast_t *sv_ast_graph(sv_arena_t *a, uint32_t nnodes, const sv_ast_edge_t *edges, uint32_t nedges,
                       const uint8_t *final) {
    sv_ast_t *n = node(a, SV_AST_GRAPH);
    if (!n) return NULL;
    n->edges = sv_arena_alloc(a, (nedges ? nedges : 1) * sizeof *edges);
    uint8_t *f = sv_arena_alloc(a, nnodes ? nnodes : 1);
    if (!n->edges || !f) return NULL;
    if (nedges) memcpy(n->edges, edges, nedges * sizeof *edges);
    memcpy(f, final, nnodes);
    n->final = f;
    n->nnodes = nnodes;
    n->nedges = nedges;
    return n;
}

uint64_t sv_ast_weight(const sv_ast_t *a, uint64_t cap) {
    if (!a) return 0;
    uint64_t w = 0;
    switch (a->kind) {
    case SV_AST_NONE:
    case SV_AST_EMPTY:
    case SV_AST_BOL:
    case SV_AST_EOL: return 0;
    case SV_AST_BYTES: return 1;
    case SV_AST_CLASS: return a->ranges[a->nranges - 1].hi < 0x80 ? 1 : 4;
    case SV_AST_DFA: return a->dfa ? sv_dfa_num_states(a->dfa) : 0;
    case SV_AST_CAT:
    case SV_AST_ALT:
        for (uint32_t i = 0; i < a->nkids && w < cap; i++) w += sv_ast_weight(a->kids[i], cap);
        break;
    case SV_AST_REPEAT: {
        uint64_t k = sv_ast_weight(a->kids[0], cap);
        uint64_t times = a->max == SV_AST_INF ? (uint64_t)a->min + 1 : a->max;
        w = k && times > cap / k ? cap : k * times;
        break;
    }
    case SV_AST_GRAPH:
        w = a->nnodes;
        for (uint32_t i = 0; i < a->nedges && w < cap; i++) w += sv_ast_weight(a->edges[i].label, cap);
        break;
    }
    return w < cap ? w : cap;
}
