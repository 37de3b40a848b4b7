/* nfa.c — Thompson construction from the AST to an NFA over bytes.
 *
 * Each AST node becomes a fragment with one entry state and one exit state
 * whose `out` is patched by the caller. Code-point classes become the UTF-8
 * byte-range sequences of cpset.c, one branch each. Counted repetition is
 * expanded: x{m,n} is m copies of x followed by n-m nested optional copies
 * (x(x(x)?)?)?, which keeps the subset construction's sets small. Every state
 * allocation is checked against the NFA budget, so `(a{1000}){1000}` stops
 * with a clear error instead of eating memory. */
#include <stdlib.h>
#include <string.h>

#include "dfa_internal.h"

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
        if ((size_t)cap * sizeof *n->s > b->lim->max_memory)
            return sv_error_set(b->err, SV_ERR_BUDGET, -1, "the NFA exceeds the memory budget of %zu bytes", b->lim->max_memory);
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

typedef struct {
    builder_t *b;
    int32_t end;      /* shared exit of all sequences */
    int32_t first;    /* entry of the alternation so far (-1 if none) */
} class_ctx_t;

/* Adds one byte-range sequence as a new branch of the class alternation. */
static sv_status class_seq(void *vctx, const sv_utf8_seq_t *seq) {
    class_ctx_t *c = vctx;
    int32_t ids[4];
    sv_status st;
    for (int i = 0; i < seq->len; i++)
        if ((st = add_state(c->b, NFA_BYTE, seq->lo[i], seq->hi[i], &ids[i]))) return st;
    for (int i = 0; i + 1 < seq->len; i++) patch(c->b, ids[i], ids[i + 1]);
    patch(c->b, ids[seq->len - 1], c->end);
    if (c->first < 0) {
        c->first = ids[0];
    } else {
        int32_t sp;
        if ((st = add_state(c->b, NFA_SPLIT, 0, 0, &sp))) return st;
        c->b->nfa->s[sp].out = ids[0];
        c->b->nfa->s[sp].out1 = c->first;
        c->first = sp;
    }
    return SV_OK;
}

static sv_status build(builder_t *b, const sv_ast_t *a, frag_t *f);

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
    class_ctx_t c = {.b = b, .first = -1};
    if ((st = add_state(b, NFA_EPS, 0, 0, &c.end))) return st;
    sv_cpset_t set = {.r = (sv_cprange_t *)a->ranges, .n = a->nranges, .cap = a->nranges, .sorted = true};
    if ((st = sv_cpset_utf8_sequences(&set, class_seq, &c))) return st;
    f->start = c.first;
    f->end = c.end;
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
    frag_t f;
    int32_t m;
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
    memset(nfa, 0, sizeof *nfa);
}
