/* program_product.c — products of automata that call the free-form part.
 *
 * A product runs two automata in lockstep over bytes (dfa_ops.c). A raw
 * DFA that calls a part holds the call as a marker, a string of bytes that
 * no text has (program.c), so a product treats the call as a literal: a
 * free-form value that both operands call at one position pairs marker with
 * marker, which is exact, because both sides then accept the same set of
 * values there. The one thing a product over bytes cannot see is a call on
 * one side where the other side spells values out: an operand that calls
 * the free-form part μ at a position where the other reads `[` or `{`
 * (μ's values all start with one of those) would let the product pair μ
 * with nothing, so a difference would keep values the other side holds.
 *
 * So before the product, every pair of states the product can reach is
 * checked for that conflict: one side reads the marker, the other a
 * bracket. Where it happens, the side with the marker is expanded at that
 * state: the call edge is replaced by a copy of μ's own automaton, whose
 * final states (the closed container) are replaced by the call's return
 * state, and whose inner values are again calls. Expanding goes one
 * container level deeper each round, as deep as the other side spells
 * values out, which a finite automaton does only to a bounded depth, so
 * the rounds end. Without conflicts the product is exact: walk any string
 * through both sides; wherever one side consumes a container by a call,
 * the other consumes it by the same call or not at all (it reads no
 * bracket there), so the two walks stay in step, marker for marker.
 *
 * What stays refused (SV_ERR_UNSUPPORTED, and the schema compiler builds
 * the product from flat pieces instead): a marker of any other part, a
 * state that both calls μ and reads a bracket itself (an expansion there
 * would need subset construction), and a part whose final states are not
 * ends. */
#include <stdlib.h>
#include <string.h>

#include "../src/util/memacct.h"
#include "dfa_internal.h"

#define MAX_ROUNDS 256

static int32_t next_byte(const sv_dfa_t *d, int32_t s, uint8_t b) {
    return s < 0 ? -1 : d->trans[(size_t)s * d->nclasses + d->classes[b]];
}

static bool reads_bracket(const sv_dfa_t *d, int32_t s) {
    return next_byte(d, s, '[') >= 0 || next_byte(d, s, '{') >= 0;
}

/* The return state of the marker path from s when it is a call to part id
 * alone (each marker state moves on exactly the expected digit), else -1. */
static int32_t marker_return(const sv_dfa_t *d, int32_t s, uint32_t id) {
    int32_t x = next_byte(d, s, SV_CALL_MARK);
    uint8_t digits[SV_CALL_DIGITS];
    uint32_t v = id;
    for (int i = SV_CALL_DIGITS - 1; i >= 0; i--, v /= 10) digits[i] = (uint8_t)(SV_CALL_DIGIT0 + v % 10);
    for (int i = 0; i < SV_CALL_DIGITS && x >= 0; i++) {
        const int32_t *row = d->trans + (size_t)x * d->nclasses;
        uint8_t want = d->classes[digits[i]];
        for (uint32_t c = 0; c < d->nclasses; c++)
            if (row[c] >= 0 && c != want) return -1;
        x = row[want];
    }
    return x;
}

/* Whether every marker of d calls part id. */
static bool calls_only(const sv_dfa_t *d, uint32_t id) {
    for (uint32_t s = 0; s < d->nstates; s++)
        if (next_byte(d, (int32_t)s, SV_CALL_MARK) >= 0 && marker_return(d, (int32_t)s, id) < 0) return false;
    return true;
}

typedef struct { int32_t a, b; } pair_t;

static uint32_t hash_pair(pair_t p) {
    uint64_t h = ((uint64_t)(uint32_t)p.a << 32 | (uint32_t)p.b) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 32);
}

static bool alive(pair_t p, sv_dfa_op op) {
    switch (op) {
    case SV_DFA_AND: return p.a >= 0 && p.b >= 0;
    case SV_DFA_DIFF: return p.a >= 0;
    default: return p.a >= 0 || p.b >= 0;
    }
}

/* Walks the pairs the product of a and b reaches and marks, in ma and mb,
 * the states of each side that call μ where the other reads a bracket.
 * *any says whether one was marked. */
static sv_status find_conflicts(const sv_dfa_t *A, const sv_dfa_t *B, sv_dfa_op op, const sv_fsm_limits_t *lim,
                                uint8_t *ma, uint8_t *mb, bool *any, sv_error_t *err) {
    int16_t pairc[256][256];
    memset(pairc, -1, sizeof pairc);
    uint8_t rep_a[256], rep_b[256];
    uint32_t k = 0;
    for (int x = 0; x < 256; x++) {
        uint8_t ca = A->classes[x], cb = B->classes[x];
        if (pairc[ca][cb] < 0) pairc[ca][cb] = (int16_t)k, rep_a[k] = ca, rep_b[k] = cb, k++;
    }
    uint32_t cap = 1024, n = 0, tcap = 2048;
    pair_t *q = malloc(cap * sizeof *q);
    uint32_t *table = calloc(tcap, sizeof *table);
    sv_status st = SV_OK;
    *any = false;
    if (!q || !table) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in a product of calls"); goto done; }
    q[n++] = (pair_t){0, 0};
    table[hash_pair(q[0]) & (tcap - 1)] = 1;
    for (uint32_t cur = 0; cur < n; cur++) {
        pair_t p = q[cur];
        bool ca = next_byte(A, p.a, SV_CALL_MARK) >= 0, cb = next_byte(B, p.b, SV_CALL_MARK) >= 0;
        if (ca && reads_bracket(B, p.b)) ma[p.a] = 1, *any = true;
        if (cb && reads_bracket(A, p.a)) mb[p.b] = 1, *any = true;
        for (uint32_t c = 0; c < k; c++) {
            pair_t t = {p.a >= 0 ? A->trans[(size_t)p.a * A->nclasses + rep_a[c]] : -1,
                        p.b >= 0 ? B->trans[(size_t)p.b * B->nclasses + rep_b[c]] : -1};
            if (!alive(t, op)) continue;
            uint32_t h = hash_pair(t) & (tcap - 1);
            while (table[h] && (q[table[h] - 1].a != t.a || q[table[h] - 1].b != t.b)) h = (h + 1) & (tcap - 1);
            if (table[h]) continue;
            if (n >= lim->max_dfa_states) {
                st = sv_error_set(err, SV_ERR_BUDGET, -1, "combining constraints needs more than %u DFA states (the "
                                  "max_dfa_states budget)", lim->max_dfa_states);
                goto done;
            }
            if (n == cap) {
                if (!sv_memacct_fits((size_t)cap * 2 * sizeof *q + (size_t)tcap * 2 * sizeof *table, lim->max_memory)) {
                    st = sv_error_set(err, SV_ERR_BUDGET, -1, "combining constraints exceeds what is left of the "
                                      "compile's memory budget of %zu bytes", lim->max_memory);
                    goto done;
                }
                pair_t *nq = realloc(q, cap * 2 * sizeof *nq);
                if (!nq) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in a product of calls"); goto done; }
                q = nq;
                cap *= 2;
            }
            q[n] = t;
            table[h] = ++n;
            if (2 * n > tcap) {
                uint32_t ncap = tcap * 2;
                uint32_t *nt = calloc(ncap, sizeof *nt);
                if (!nt) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in a product of calls"); goto done; }
                for (uint32_t i = 0; i < n; i++) {
                    uint32_t hh = hash_pair(q[i]) & (ncap - 1);
                    while (nt[hh]) hh = (hh + 1) & (ncap - 1);
                    nt[hh] = i + 1;
                }
                free(table);
                table = nt;
                tcap = ncap;
            }
        }
    }
done:
    free(q);
    free(table);
    return st;
}

/* d with the call at each marked state replaced by a copy of part P, the
 * copy's final states being the call's return state. */
static sv_status expand(const sv_dfa_t *d, const uint8_t *mark, uint32_t id, const sv_dfa_t *P,
                        const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    static const char refused[] = "a free-form value meets a value spelled out where it also reads a bracket";
    /* P: a start that does not accept, final states with no moves. */
    if (P->accept[0]) return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", refused);
    for (uint32_t s = 0; s < P->nstates; s++)
        if (P->accept[s])
            for (uint32_t c = 0; c < P->nclasses; c++)
                if (P->trans[(size_t)s * P->nclasses + c] >= 0)
                    return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", refused);
    uint32_t nm = 0;
    for (uint32_t s = 0; s < d->nstates; s++)
        if (mark[s]) {
            if (reads_bracket(d, (int32_t)s)) return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", refused);
            nm++;
        }
    /* Common refinement of the two class maps, with the marker byte alone
     * in its class (it is the call being removed). */
    int16_t pairc[256][256];
    memset(pairc, -1, sizeof pairc);
    uint8_t rep_d[256], rep_p[256];
    sv_rawdfa_t raw = {0};
    uint32_t k = 0;
    for (int x = 0; x < 256; x++) {
        uint8_t cd = d->classes[x], cp = P->classes[x];
        if (x == SV_CALL_MARK) {
            raw.classes[x] = (uint8_t)k, rep_d[k] = cd, rep_p[k] = cp, k++;
            continue;
        }
        if (pairc[cd][cp] < 0) pairc[cd][cp] = (int16_t)k, rep_d[k] = cd, rep_p[k] = cp, k++;
        raw.classes[x] = (uint8_t)pairc[cd][cp];
    }
    if (k > 256) return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", refused); /* cannot happen: 256 bytes */
    raw.nclasses = k;
    uint32_t mk = raw.classes[SV_CALL_MARK];
    size_t n = d->nstates + (size_t)nm * P->nstates;
    if (n > lim->max_dfa_states)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "combining constraints needs more than %u DFA states (the "
                            "max_dfa_states budget)", lim->max_dfa_states);
    if (!sv_memacct_fits(n * k * sizeof *raw.trans + n, lim->max_memory))
        return sv_error_set(err, SV_ERR_BUDGET, -1, "combining constraints exceeds what is left of the compile's "
                            "memory budget of %zu bytes", lim->max_memory);
    raw.trans = malloc(n * k * sizeof *raw.trans);
    raw.accept = calloc(n, 1);
    if (!raw.trans || !raw.accept) {
        sv_rawdfa_free(&raw);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in a product of calls");
    }
    raw.nstates = (uint32_t)n;
    raw.start = 0;
    for (uint32_t s = 0; s < d->nstates; s++) {
        int32_t *row = raw.trans + (size_t)s * k;
        for (uint32_t c = 0; c < k; c++) row[c] = d->trans[(size_t)s * d->nclasses + rep_d[c]];
        raw.accept[s] = d->accept[s];
    }
    uint32_t base = d->nstates;
    for (uint32_t s = 0; s < d->nstates; s++) {
        if (!mark[s]) continue;
        int32_t ret = marker_return(d, (int32_t)s, id);
        if (ret < 0) {
            sv_rawdfa_free(&raw);
            return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", refused);
        }
        for (uint32_t t = 0; t < P->nstates; t++) {
            int32_t *row = raw.trans + (size_t)(base + t) * k;
            for (uint32_t c = 0; c < k; c++) {
                int32_t u = P->trans[(size_t)t * P->nclasses + rep_p[c]];
                row[c] = u < 0 ? -1 : P->accept[u] ? ret : (int32_t)(base + (uint32_t)u);
            }
        }
        /* The call's state enters the copy instead: P's start row, on
         * classes where s has no move of its own (no bracket, checked). */
        int32_t *row = raw.trans + (size_t)s * k;
        row[mk] = -1;
        const int32_t *start = raw.trans + (size_t)base * k;
        for (uint32_t c = 0; c < k; c++)
            if (start[c] >= 0) {
                if (row[c] >= 0) {
                    sv_rawdfa_free(&raw);
                    return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", refused);
                }
                row[c] = start[c];
            }
        base += P->nstates;
    }
    sv_status st = sv_dfa_minimize_budget(&raw, 0, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    sv_rawdfa_free(&raw);
    return st;
}

sv_status sv_dfa_product_calls(const sv_dfa_t *a, const sv_dfa_t *b, sv_dfa_op op, uint32_t id, const sv_dfa_t *part,
                               const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    bool ha = sv_dfa_has_markers(a), hb = sv_dfa_has_markers(b);
    if (!ha && !hb) return sv_dfa_product(a, b, op, lim, out, err);
    if (!part || (ha && !calls_only(a, id)) || (hb && !calls_only(b, id)) || !calls_only(part, id))
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a call to a part other than the free-form value reached a "
                            "product");
    const sv_dfa_t *A = a, *B = b;
    sv_dfa_t *own_a = NULL, *own_b = NULL;
    sv_status st = SV_OK;
    for (int round = 0;; round++) {
        uint8_t *ma = calloc(A->nstates, 1), *mb = calloc(B->nstates, 1);
        bool any = false;
        if (!ma || !mb) st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in a product of calls");
        if (!st) st = find_conflicts(A, B, op, lim, ma, mb, &any, err);
        if (!st && !any) {
            free(ma);
            free(mb);
            st = sv_dfa_product(A, B, op, lim, out, err);
            break;
        }
        if (!st && round == MAX_ROUNDS)
            st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "free-form values met values spelled out more than %d "
                              "levels deep in one product", MAX_ROUNDS);
        for (int side = 0; side < 2 && !st; side++) {
            const uint8_t *m = side ? mb : ma;
            const sv_dfa_t *d = side ? B : A;
            bool some = false;
            for (uint32_t s = 0; s < d->nstates && !some; s++) some = m[s];
            if (!some) continue;
            sv_dfa_t *x;
            if ((st = expand(d, m, id, part, lim, &x, err))) break;
            sv_dfa_t **own = side ? &own_b : &own_a;
            sv_dfa_destroy(*own);
            *own = x;
            if (side) B = x;
            else A = x;
        }
        free(ma);
        free(mb);
        if (st) break;
    }
    sv_dfa_destroy(own_a);
    sv_dfa_destroy(own_b);
    return st;
}
