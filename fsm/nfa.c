/* nfa.c — Thompson construction from the AST to an NFA over bytes.
 *
 * Each AST node becomes a fragment with one entry state and one exit state
 * whose `out` is patched by the caller. Code-point classes become the UTF-8
 * byte-range sequences of cpset.c, one branch each. Counted repetition is
 * expanded: x{m,n} is m copies of x followed by n-m nested optional copies
 * (x(x(x)?)?)?, which keeps the subset construction's sets small. Every state
 * allocation is checked against the NFA budget, so `(a{1000}){1000}` stops
 * with a clear error instead of eating memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/memacct.h"
#include "fsm/internal/dfa_internal.h"

typedef struct { int32_t start, end; } frag_t;

typedef struct {
    sv_nfa_t *nfa;
    const sv_fsm_limits_t *lim;
    sv_error_t *err;
} builder_t;

static sv_status add_state(builder_t *b, uint8_t kind, uint8_t lo, uint8_t hi, int32_t *id) {
    sv_nfa_t *n = b->nfa;
    if (n->n >= b->lim->max_nfa_states)
        return sv_error_set(b->err, SV_ERR_BUDGET, -1,
                            "the constraint needs more than %u NFA states (the max_nfa_states budget); "
                            "reduce repetition counts or nesting", b->lim->max_nfa_states);
    if (n->n == n->cap) {
        uint32_t cap = n->cap ? n->cap * 2 : 64;
        if (cap > b->lim->max_nfa_states) cap = b->lim->max_nfa_states;
        if (!sv_memacct_fits((size_t)cap * sizeof *n->s, b->lim->max_memory))
            return sv_error_set(b->err, SV_ERR_BUDGET, -1, "the NFA exceeds what is left of the compile's memory budget of %zu bytes",
                                b->lim->max_memory);
        sv_nfa_state_t *s = realloc(n->s, cap * sizeof *s);
        if (!s) return sv_error_set(b->err, SV_ERR_NOMEM, -1, "out of memory building the NFA");
        n->s = s;
        n->cap = cap;
    }
    n->s[n->n] = (sv_nfa_state_t){.kind = kind, .lo = lo, .hi = hi, .out = -1, .out1 = -1};
    *id = (int32_t)n->n++;
    return SV_OK;
}

static void patch(builder_t *b, int32_t end, int32_t to) { b->nfa->s[end].out = to; }

static sv_status build(builder_t *b, const sv_ast_t *a, frag_t *f);

/* A class becomes the minimal acyclic automaton of its UTF-8 sequences.
 * cpset.c yields the sequences in code-point order, and two sequences that
 * share a byte value at a position share the whole range there, so the
 * sequences form a deterministic trie of byte ranges; equal subtrees are then
 * merged bottom-up (a node is its range plus its children). The result is a
 * small DAG (\p{L}: about 300 nodes instead of 2,000 chain states), so the
 * subset construction over repeated classes stays cheap. */
typedef struct {
    uint8_t lo, hi, depth;
    int32_t first_child, next_sibling; /* trie links; -1 = none */
    int32_t canon;                     /* merged representative */
    int32_t nfa;                       /* its BYTE state, -1 until emitted */
} cnode_t;

typedef struct {
    cnode_t *v;
    uint32_t n, cap;
    int32_t root_first;                /* first top-level node */
    int32_t path[4];                   /* nodes of the last inserted sequence */
    uint8_t path_len;
    sv_status st;
} ctrie_t;

static int32_t cnode_new(ctrie_t *t, uint8_t lo, uint8_t hi, uint8_t depth) {
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        cnode_t *v = realloc(t->v, cap * sizeof *v);
        if (!v) return -1;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n] = (cnode_t){.lo = lo, .hi = hi, .depth = depth, .first_child = -1, .next_sibling = -1, .canon = -1, .nfa = -1};
    return (int32_t)t->n++;
}

static sv_status ctrie_insert(void *vctx, const sv_utf8_seq_t *seq) {
    ctrie_t *t = vctx;
    int k = 0;
    while (k < t->path_len && k < seq->len && t->v[t->path[k]].lo == seq->lo[k] && t->v[t->path[k]].hi == seq->hi[k]) k++;
    for (int i = k; i < seq->len; i++) {
        int32_t id = cnode_new(t, seq->lo[i], seq->hi[i], (uint8_t)i);
        if (id < 0) return SV_ERR_NOMEM;
        /* Append as the last child of the parent (order is kept sorted). */
        int32_t *link = i == 0 ? &t->root_first : &t->v[t->path[i - 1]].first_child;
        while (*link >= 0) link = &t->v[*link].next_sibling;
        *link = id;
        t->path[i] = id;
    }
    t->path_len = seq->len;
    return SV_OK;
}

/* Bottom-up merge: two nodes are equal iff same range and the same list of
 * canonical children. Quadratic in the worst case over nodes with equal
 * ranges, but linear-time hashing is not needed at these sizes (< 5,000). */
static bool same_children(const ctrie_t *t, int32_t a, int32_t b) {
    int32_t x = t->v[a].first_child, y = t->v[b].first_child;
    while (x >= 0 && y >= 0) {
        if (t->v[x].canon != t->v[y].canon) return false;
        x = t->v[x].next_sibling, y = t->v[y].next_sibling;
    }
    return x < 0 && y < 0;
}

static void ctrie_merge(ctrie_t *t) {
    /* Children are created after their parents, so a reverse scan is
     * bottom-up. Candidates for a node are earlier-merged nodes with the
     * same range at the same depth: scan a bucket table sized to the trie
     * (clearing a fixed 4,096 buckets for each class, most of a few nodes,
     * was 6% of a median MaskBench schema's compile). */
    uint32_t nb = 16;
    while (nb < 2 * t->n && nb < 4096) nb *= 2;
    int32_t *bucket = malloc(nb * sizeof *bucket), *chain = malloc((t->n + 1) * sizeof *chain);
    if (!bucket || !chain) {
        for (uint32_t i = 0; i < t->n; i++) t->v[i].canon = (int32_t)i;
        free(bucket);
        free(chain);
        return;
    }
    for (uint32_t i = 0; i < nb; i++) bucket[i] = -1;
    for (uint32_t i = t->n; i-- > 0;) {
        cnode_t *c = &t->v[i];
        uint32_t h = (uint32_t)c->lo * 31u + c->hi * 7u + c->depth;
        for (int32_t x = t->v[i].first_child; x >= 0; x = t->v[x].next_sibling) h = h * 131u + (uint32_t)t->v[x].canon;
        h %= nb;
        c->canon = (int32_t)i;
        for (int32_t j = bucket[h]; j >= 0; j = chain[j]) {
            if (t->v[j].lo == c->lo && t->v[j].hi == c->hi && t->v[j].depth == c->depth && same_children(t, j, (int32_t)i)) {
                c->canon = j;
                break;
            }
        }
        if (c->canon == (int32_t)i) chain[i] = bucket[h], bucket[h] = (int32_t)i;
    }
    free(bucket);
    free(chain);
}

/* Emits the alternation over a sibling list as a chain of SPLITs whose
 * leaves are the canonical nodes' BYTE states; returns its entry. */
static sv_status emit_node(builder_t *b, ctrie_t *t, int32_t id, int32_t end);

static sv_status emit_list(builder_t *b, ctrie_t *t, int32_t first, int32_t end, int32_t *entry) {
    int32_t acc = -1;
    sv_status st;
    /* Build from the back so the SPLIT chain visits siblings in order. */
    int32_t ids[256];
    int n = 0;
    for (int32_t x = first; x >= 0; x = t->v[x].next_sibling) {
        if (n == 256) return sv_error_set(b->err, SV_ERR_ARG, -1, "class trie fan-out above 256");
        ids[n++] = t->v[x].canon;
    }
    for (int i = n; i-- > 0;) {
        if ((st = emit_node(b, t, ids[i], end))) return st;
        int32_t s = t->v[ids[i]].nfa;
        if (acc < 0) {
            acc = s;
        } else {
            int32_t sp;
            if ((st = add_state(b, NFA_SPLIT, 0, 0, &sp))) return st;
            b->nfa->s[sp].out = s;
            b->nfa->s[sp].out1 = acc;
            acc = sp;
        }
    }
    *entry = acc;
    return SV_OK;
}

static sv_status emit_node(builder_t *b, ctrie_t *t, int32_t id, int32_t end) {
    cnode_t *c = &t->v[id];
    if (c->nfa >= 0) return SV_OK;
    int32_t s, next = end;
    sv_status st;
    if (c->first_child >= 0 && (st = emit_list(b, t, c->first_child, end, &next))) return st;
    if ((st = add_state(b, NFA_BYTE, t->v[id].lo, t->v[id].hi, &s))) return st;
    b->nfa->s[s].out = next;
    t->v[id].nfa = s;
    return SV_OK;
}

static sv_status build_class(builder_t *b, const sv_ast_t *a, frag_t *f) {
    sv_status st;
    if (a->nranges == 1 && a->ranges[0].lo == a->ranges[0].hi) {
        /* A literal code point: a plain chain of bytes. */
        uint8_t enc[4];
        int n = sv_utf8_encode(a->ranges[0].lo, enc);
        int32_t prev = -1;
        for (int i = 0; i < n; i++) {
            int32_t id;
            if ((st = add_state(b, NFA_BYTE, enc[i], enc[i], &id))) return st;
            if (prev < 0) f->start = id;
            else patch(b, prev, id);
            prev = id;
        }
        f->end = prev;
        return SV_OK;
    }
    ctrie_t t = {.root_first = -1};
    sv_cpset_t set = {.r = (sv_cprange_t *)a->ranges, .n = a->nranges, .cap = a->nranges, .sorted = true};
    st = sv_cpset_utf8_sequences(&set, ctrie_insert, &t);
    if (st) {
        free(t.v);
        return sv_error_set(b->err, SV_ERR_NOMEM, -1, "out of memory building a character class");
    }
    ctrie_merge(&t);
    int32_t end, entry;
    if (!(st = add_state(b, NFA_EPS, 0, 0, &end))) st = emit_list(b, &t, t.root_first, end, &entry);
    free(t.v);
    if (st) return st;
    *f = (frag_t){entry, end};
    return SV_OK;
}

/* The JSON escape of byte x as json.dumps(ensure_ascii=False) writes it, or
 * NULL when x stands for itself. */
static const char *json_escape_of(uint8_t x, char buf[8]) {
    switch (x) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default:
        if (x >= 0x20) return NULL;
        snprintf(buf, 8, "\\u%04x", x);
        return buf;
    }
}

/* Adds a byte edge (or, for an escaped byte, a chain) from nowhere to
 * target; returns the entry state in *entry. */
static sv_status byte_edge(builder_t *b, uint8_t lo, uint8_t hi, int32_t target, int32_t *entry) {
    int32_t s;
    sv_status st = add_state(b, NFA_BYTE, lo, hi, &s);
    if (st) return st;
    b->nfa->s[s].out = target;
    *entry = s;
    return SV_OK;
}

static sv_status escape_edge(builder_t *b, const char *esc, int32_t target, int32_t *entry) {
    int32_t prev = -1;
    sv_status st;
    for (const char *c = esc; *c; c++) {
        int32_t s = -1;
        if ((st = add_state(b, NFA_BYTE, (uint8_t)*c, (uint8_t)*c, &s))) return st;
        if (prev < 0) *entry = s;
        else b->nfa->s[prev].out = s;
        prev = s;
    }
    b->nfa->s[prev].out = target;
    return SV_OK;
}

/* Links a new alternative into the SPLIT chain *acc. */
static sv_status chain_alt(builder_t *b, int32_t alt, int32_t *acc) {
    if (*acc < 0) { *acc = alt; return SV_OK; }
    int32_t sp;
    sv_status st = add_state(b, NFA_SPLIT, 0, 0, &sp);
    if (st) return st;
    b->nfa->s[sp].out = alt;
    b->nfa->s[sp].out1 = *acc;
    *acc = sp;
    return SV_OK;
}

static bool needs_escape(uint8_t x) { return x < 0x20 || x == '"' || x == '\\'; }

/* A compiled DFA as an NFA fragment. Without escaping, each DFA state is
 * one NFA_DFA state that reads its moves from the DFA itself. With JSON
 * escaping, escaped bytes become byte chains, so the DFA is spelled out: one
 * entry per DFA state, a SPLIT chain over its byte intervals, and an epsilon
 * to the exit when it accepts. */
static sv_status build_dfa(builder_t *b, const sv_dfa_t *d, bool esc, frag_t *f) {
    sv_status st;
    int32_t exit, base;
    if ((st = add_state(b, NFA_EPS, 0, 0, &exit))) return st;
    base = (int32_t)b->nfa->n;
    if (!esc) {
        sv_nfa_t *n = b->nfa;
        if (n->nembeds == n->capembeds) {
            uint32_t cap = n->capembeds ? n->capembeds * 2 : 16;
            sv_nfa_embed_t *e = realloc(n->embeds, cap * sizeof *e);
            if (!e) return sv_error_set(b->err, SV_ERR_NOMEM, -1, "out of memory building the NFA");
            n->embeds = e;
            n->capembeds = cap;
        }
        n->embeds[n->nembeds] = (sv_nfa_embed_t){d, base};
        for (uint32_t s = 0; s < d->nstates; s++) {
            int32_t id;
            if ((st = add_state(b, NFA_DFA, 0, 0, &id))) return st;
            b->nfa->s[id].out = d->accept[s] ? exit : -1;
            b->nfa->s[id].out1 = (int32_t)n->nembeds;
        }
        n->nembeds++;
        *f = (frag_t){base, exit};
        return SV_OK;
    }
    /* Entry placeholders first, so transitions can point at them. */
    for (uint32_t s = 0; s < d->nstates; s++) {
        int32_t id;
        if ((st = add_state(b, NFA_EPS, 0, 0, &id))) return st;
    }
    for (uint32_t s = 0; s < d->nstates; s++) {
        int32_t acc = d->accept[s] ? exit : -1;
        for (int x = 255; x >= 0;) {
            /* A maximal byte interval [lo, x] with one target (escaped bytes
             * are intervals of their own). */
            int32_t t = d->trans[(size_t)s * d->nclasses + d->classes[x]];
            int lo = x;
            if (!needs_escape((uint8_t)x))
                while (lo > 0 && d->trans[(size_t)s * d->nclasses + d->classes[lo - 1]] == t &&
                       !needs_escape((uint8_t)(lo - 1)))
                    lo--;
            if (t >= 0) {
                int32_t e = -1;
                char buf[8];
                const char *seq = json_escape_of((uint8_t)x, buf);
                if (seq) st = escape_edge(b, seq, base + t, &e);
                else st = byte_edge(b, (uint8_t)lo, (uint8_t)x, base + t, &e);
                if (st || (st = chain_alt(b, e, &acc))) return st;
            }
            x = lo - 1;
        }
        b->nfa->s[base + (int32_t)s].out = acc;
    }
    *f = (frag_t){base, exit};
    return SV_OK;
}

/* A GRAPH node: one EPS state per graph node; each edge builds its label
 * fragment from the source node's state to the target's; accepting nodes
 * reach the exit. A node's outgoing edges hang off a SPLIT chain. */
static sv_status build_graph(builder_t *b, const sv_ast_t *g, frag_t *f) {
    sv_status st;
    int32_t exit, base;
    if ((st = add_state(b, NFA_EPS, 0, 0, &exit))) return st;
    base = (int32_t)b->nfa->n;
    for (uint32_t i = 0; i < g->nnodes; i++) {
        int32_t id;
        if ((st = add_state(b, NFA_EPS, 0, 0, &id))) return st;
    }
    /* Per node, the chain of alternatives built so far. */
    int32_t *acc = malloc((g->nnodes ? g->nnodes : 1) * sizeof *acc);
    if (!acc) return sv_error_set(b->err, SV_ERR_NOMEM, -1, "out of memory building the NFA");
    for (uint32_t i = 0; i < g->nnodes; i++) acc[i] = g->final[i] ? exit : -1;
    for (uint32_t k = 0; k < g->nedges && !st; k++) {
        const sv_ast_edge_t *e = &g->edges[k];
        int32_t entry;
        if (e->label) {
            frag_t x;
            if ((st = build(b, e->label, &x))) break;
            patch(b, x.end, base + (int32_t)e->to);
            entry = x.start;
        } else {
            if ((st = add_state(b, NFA_EPS, 0, 0, &entry))) break;
            patch(b, entry, base + (int32_t)e->to);
        }
        st = chain_alt(b, entry, &acc[e->from]);
    }
    for (uint32_t i = 0; i < g->nnodes && !st; i++) b->nfa->s[base + (int32_t)i].out = acc[i];
    free(acc);
    if (st) return st;
    *f = (frag_t){base, exit};
    return SV_OK;
}

/* x? around an already-built fragment. */
static sv_status make_optional(builder_t *b, frag_t x, frag_t *f) {
    int32_t sp, e;
    sv_status st;
    if ((st = add_state(b, NFA_SPLIT, 0, 0, &sp)) || (st = add_state(b, NFA_EPS, 0, 0, &e))) return st;
    b->nfa->s[sp].out = x.start;
    b->nfa->s[sp].out1 = e;
    patch(b, x.end, e);
    *f = (frag_t){sp, e};
    return SV_OK;
}

static sv_status build_repeat(builder_t *b, const sv_ast_t *a, frag_t *f) {
    const sv_ast_t *kid = a->kids[0];
    sv_status st;
    int32_t head = -1, tail = -1;
    /* Mandatory copies. */
    for (uint32_t i = 0; i < a->min; i++) {
        frag_t x;
        if ((st = build(b, kid, &x))) return st;
        if (head < 0) head = x.start;
        else patch(b, tail, x.start);
        tail = x.end;
    }
    frag_t rest;
    if (a->max == SV_AST_INF) {
        /* x*: split -> (x -> split) | exit */
        frag_t x;
        int32_t sp, e;
        if ((st = build(b, kid, &x)) || (st = add_state(b, NFA_SPLIT, 0, 0, &sp)) ||
            (st = add_state(b, NFA_EPS, 0, 0, &e)))
            return st;
        b->nfa->s[sp].out = x.start;
        b->nfa->s[sp].out1 = e;
        patch(b, x.end, sp);
        rest = (frag_t){sp, e};
    } else if (a->max > a->min) {
        /* Nested optionals, built from the innermost out. */
        int32_t e;
        if ((st = add_state(b, NFA_EPS, 0, 0, &e))) return st;
        frag_t inner = {-1, -1};
        for (uint32_t i = a->min; i < a->max; i++) {
            frag_t x;
            if ((st = build(b, kid, &x))) return st;
            if (inner.start >= 0) patch(b, x.end, inner.start);
            else patch(b, x.end, e);
            int32_t sp;
            if ((st = add_state(b, NFA_SPLIT, 0, 0, &sp))) return st;
            b->nfa->s[sp].out = x.start;
            b->nfa->s[sp].out1 = e;
            inner = (frag_t){sp, e};
        }
        rest = inner;
    } else {
        if (head >= 0) { *f = (frag_t){head, tail}; return SV_OK; }
        int32_t e;
        if ((st = add_state(b, NFA_EPS, 0, 0, &e))) return st;
        *f = (frag_t){e, e};
        return SV_OK;
    }
    if (head < 0) { *f = rest; return SV_OK; }
    patch(b, tail, rest.start);
    *f = (frag_t){head, rest.end};
    return SV_OK;
}

static sv_status build(builder_t *b, const sv_ast_t *a, frag_t *f) {
    sv_status st;
    int32_t id, id2;
    if (!a) return sv_error_set(b->err, SV_ERR_NOMEM, -1, "out of memory building the constraint");
    switch (a->kind) {
    case SV_AST_NONE:
        /* An entry that leads nowhere and a separate, unreachable exit. */
        if ((st = add_state(b, NFA_EPS, 0, 0, &id)) || (st = add_state(b, NFA_EPS, 0, 0, &id2))) return st;
        *f = (frag_t){id, id2};
        return SV_OK;
    case SV_AST_EMPTY:
        if ((st = add_state(b, NFA_EPS, 0, 0, &id))) return st;
        *f = (frag_t){id, id};
        return SV_OK;
    case SV_AST_BOL:
    case SV_AST_EOL:
        if ((st = add_state(b, a->kind == SV_AST_BOL ? NFA_BOL : NFA_EOL, 0, 0, &id))) return st;
        *f = (frag_t){id, id};
        return SV_OK;
    case SV_AST_BYTES:
        if ((st = add_state(b, NFA_BYTE, a->lo, a->hi, &id))) return st;
        *f = (frag_t){id, id};
        return SV_OK;
    case SV_AST_CLASS:
        return build_class(b, a, f);
    case SV_AST_DFA:
        return build_dfa(b, a->dfa, a->json_escape, f);
    case SV_AST_GRAPH:
        if (a->nnodes == 0) return build(b, &(sv_ast_t){.kind = SV_AST_NONE}, f);
        return build_graph(b, a, f);
    case SV_AST_CAT: {
        frag_t x;
        if ((st = build(b, a->kids[0], f))) return st;
        for (uint32_t i = 1; i < a->nkids; i++) {
            if ((st = build(b, a->kids[i], &x))) return st;
            patch(b, f->end, x.start);
            f->end = x.end;
        }
        return SV_OK;
    }
    case SV_AST_ALT: {
        int32_t e;
        if ((st = add_state(b, NFA_EPS, 0, 0, &e))) return st;
        int32_t first = -1;
        for (uint32_t i = a->nkids; i-- > 0;) {
            frag_t x;
            if ((st = build(b, a->kids[i], &x))) return st;
            patch(b, x.end, e);
            if (first < 0) {
                first = x.start;
            } else {
                if ((st = add_state(b, NFA_SPLIT, 0, 0, &id))) return st;
                b->nfa->s[id].out = x.start;
                b->nfa->s[id].out1 = first;
                first = id;
            }
        }
        *f = (frag_t){first, e};
        return SV_OK;
    }
    case SV_AST_REPEAT:
        if (a->max == 0) return build(b, &(sv_ast_t){.kind = SV_AST_EMPTY}, f);
        if (a->min == 0 && a->max == 1) {
            frag_t x;
            if ((st = build(b, a->kids[0], &x))) return st;
            return make_optional(b, x, f);
        }
        return build_repeat(b, a, f);
    }
    return sv_error_set(b->err, SV_ERR_ARG, -1, "unknown AST node kind %d", (int)a->kind);
}

sv_status sv_nfa_build(const sv_ast_t *ast, const sv_fsm_limits_t *lim, sv_nfa_t *nfa, sv_error_t *err) {
    memset(nfa, 0, sizeof *nfa);
    builder_t b = {.nfa = nfa, .lim = lim, .err = err};
    frag_t f = {-1, -1};
    int32_t m = -1;
    sv_status st = build(&b, ast, &f);
    if (!st) st = add_state(&b, NFA_MATCH, 0, 0, &m);
    if (st) {
        sv_nfa_free(nfa);
        return st;
    }
    patch(&b, f.end, m);
    nfa->start = f.start;
    return SV_OK;
}

void sv_nfa_free(sv_nfa_t *nfa) {
    if (!nfa) return;
    free(nfa->s);
    free(nfa->embeds);
    memset(nfa, 0, sizeof *nfa);
}
