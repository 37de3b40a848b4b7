/* dfa_ops.c — boolean algebra on DFAs by product construction.
 *
 * Regular languages are closed under intersection and complement, and on
 * DFAs both are cheap: run the two machines in lockstep over the common
 * refinement of their byte classes, and decide acceptance of a pair of states
 * by the operator. A missing transition is the implicit dead state (-1), so
 * union and difference keep walking one side after the other has died. The
 * result goes through the same minimizer as everything else, so it is
 * canonical and trimmed. This is what makes JSON Schema's allOf, not, oneOf
 * and if/then/else exact rather than approximated. sv_dfa_product itself
 * (dfa_cache.c) looks the result up in the process-wide memo first. */
#include <stdlib.h>
#include <string.h>

#include "util/memacct.h"
#include "util/clock.h"
#include "fsm/internal/dfa_internal.h"

typedef sv_pair_t pair_t;

static bool pair_accepts(const sv_dfa_t *A, const sv_dfa_t *B, pair_t p, sv_dfa_op op) {
    return sv_pair_accepts(p.a >= 0 && A->accept[p.a], p.b >= 0 && B->accept[p.b], op);
}

/* The common refinement of A's and B's byte classes: classes[x] is byte x's
 * class, rep_a[c] and rep_b[c] the operands' classes of class c; returns
 * how many there are. */
static uint32_t common_classes(const sv_dfa_t *A, const sv_dfa_t *B, uint8_t classes[256], uint8_t rep_a[256],
                               uint8_t rep_b[256]) {
    int16_t pairc[256][256];
    /* only the rows and columns of the operands' classes are read (clearing
     * all 128 KB was most of a small product's time) */
    for (uint32_t ca = 0; ca < A->nclasses; ca++) memset(pairc[ca], -1, B->nclasses * sizeof pairc[ca][0]);
    uint32_t k = 0;
    for (int x = 0; x < 256; x++) {
        uint8_t ca = A->classes[x], cb = B->classes[x];
        if (pairc[ca][cb] < 0) {
            pairc[ca][cb] = (int16_t)k;
            rep_a[k] = ca, rep_b[k] = cb;
            k++;
        }
        classes[x] = (uint8_t)pairc[ca][cb];
    }
    return k;
}

/* The budgets checked as a walk over pairs meets its n-th new pair. */
static sv_status pair_budgets(uint32_t n, const sv_fsm_limits_t *lim, uint64_t deadline, sv_error_t *err) {
    if (n >= lim->max_dfa_states)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "combining constraints needs more than %u DFA states (the max_dfa_states budget)", lim->max_dfa_states);
    if ((n & 255) == 0 && sv_memacct_cancelled()) return sv_error_set(err, SV_ERR_CANCELLED, -1, "the compile was cancelled");
    if (deadline && (n & 255) == 0 && sv_now_ns() > deadline)
        return sv_error_set(err, SV_ERR_TIMEOUT, -1, "combining constraints exceeded the time budget of %llu ms", (unsigned long long)((lim->time_budget_us ? lim->time_budget_us : lim->max_time_us) / 1000));
    return SV_OK;
}

/* Doubles the pairs' open-addressing table (ids + 1) once it is half full
 * with n pairs; false when out of memory. */
static bool pairs_rehash(const pair_t *states, uint32_t n, uint32_t **table, uint32_t *tcap) {
    if (2 * n <= *tcap) return true;
    uint32_t ncap = *tcap * 2;
    uint32_t *nt = calloc(ncap, sizeof *nt);
    if (!nt) return false;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t hh = sv_pair_hash(states[i]) & (ncap - 1);
        while (nt[hh]) hh = (hh + 1) & (ncap - 1);
        nt[hh] = i + 1;
    }
    free(*table);
    *table = nt;
    *tcap = ncap;
    return true;
}

sv_status sv_dfa_product_uncached(const sv_dfa_t *A, const sv_dfa_t *B, sv_dfa_op op, const sv_fsm_limits_t *lim,
                                  sv_dfa_t **out, sv_error_t *err) {
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    uint64_t deadline = lim->max_time_us ? sv_now_ns() + lim->max_time_us * 1000 : 0;
    sv_rawdfa_t raw = {0};
    uint8_t rep_a[256], rep_b[256];
    uint32_t k = common_classes(A, B, raw.classes, rep_a, rep_b);
    raw.nclasses = k;
    uint32_t cap = 256, n = 0, tcap = 1024;
    pair_t *states = malloc(cap * sizeof *states);
    uint32_t *table = calloc(tcap, sizeof *table);
    raw.trans = malloc((size_t)cap * k * sizeof *raw.trans);
    raw.accept = malloc(cap);
    sv_status st = SV_OK;
    if (!states || !table || !raw.trans || !raw.accept) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in DFA product"); goto done; }
    pair_t start = {0, 0};
    if (!sv_pair_alive(start, op)) { st = sv_error_set(err, SV_ERR_EMPTY, -1, "the combination matches no string"); goto done; }
    states[n] = start;
    raw.accept[n] = pair_accepts(A, B, start, op);
    table[sv_pair_hash(start) & (tcap - 1)] = ++n;
    for (uint32_t cur = 0; cur < n; cur++) {
        pair_t p = states[cur];
        for (uint32_t c = 0; c < k; c++) {
            pair_t q = {p.a >= 0 ? A->trans[(size_t)p.a * A->nclasses + rep_a[c]] : -1,
                        p.b >= 0 ? B->trans[(size_t)p.b * B->nclasses + rep_b[c]] : -1};
            int32_t id = -1;
            if (sv_pair_alive(q, op)) {
                uint32_t h = sv_pair_hash(q) & (tcap - 1);
                while (table[h] && (states[table[h] - 1].a != q.a || states[table[h] - 1].b != q.b)) h = (h + 1) & (tcap - 1);
                if (table[h]) {
                    id = (int32_t)table[h] - 1;
                } else {
                    if ((st = pair_budgets(n, lim, deadline, err))) goto done;
                    if (n == cap) {
                        cap *= 2;
                        if (!sv_memacct_fits((size_t)cap * (k * sizeof *raw.trans + sizeof *states + 1), lim->max_memory)) {
                            st = sv_error_set(err, SV_ERR_BUDGET, -1, "combining constraints exceeds what is left of the compile's memory budget of %zu bytes", lim->max_memory);
                            goto done;
                        }
                        pair_t *ns = realloc(states, cap * sizeof *ns);
                        if (ns) states = ns;
                        int32_t *nt = realloc(raw.trans, (size_t)cap * k * sizeof *nt);
                        if (nt) raw.trans = nt;
                        uint8_t *na = realloc(raw.accept, cap);
                        if (na) raw.accept = na;
                        if (!ns || !nt || !na) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in DFA product"); goto done; }
                    }
                    states[n] = q;
                    raw.accept[n] = pair_accepts(A, B, q, op);
                    table[h] = n + 1;
                    id = (int32_t)n++;
                    if (!pairs_rehash(states, n, &table, &tcap)) {
                        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in DFA product");
                        goto done;
                    }
                }
            }
            raw.trans[(size_t)cur * k + c] = id;
        }
    }
    raw.nstates = n;
    raw.start = 0;
    /* A refinement much finer than either operand's classes likely holds
     * pairs that move alike; otherwise the merge would only cost its pass. */
    if (4 * k > 5 * (A->nclasses > B->nclasses ? A->nclasses : B->nclasses)) st = sv_rawdfa_merge_classes(&raw, err);
    /* The pairs are not needed past here: freed before minimization, which
     * is the peak of a big product's memory. */
    free(states);
    free(table);
    states = NULL;
    table = NULL;
    if (!st) st = sv_dfa_minimize_budget(&raw, 0, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    if (st == SV_ERR_EMPTY) sv_error_set(err, SV_ERR_EMPTY, -1, "the combination matches no string");
done:
    free(states);
    free(table);
    sv_rawdfa_free(&raw);
    return st;
}

sv_status sv_dfa_meets(const sv_dfa_t *A, const sv_dfa_t *B, const sv_fsm_limits_t *lim, bool *meets,
                       sv_error_t *err) {
    /* The product's walk over pairs of live states, up to the first pair
     * where both accept: no table, no minimization (a oneOf asks this of
     * every pair of its branches). */
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    uint64_t deadline = lim->max_time_us ? sv_now_ns() + lim->max_time_us * 1000 : 0;
    *meets = false;
    uint8_t classes[256], rep_a[256], rep_b[256];
    uint32_t k = common_classes(A, B, classes, rep_a, rep_b);
    uint32_t cap = 256, n = 0, tcap = 1024;
    pair_t *states = malloc(cap * sizeof *states);
    uint32_t *table = calloc(tcap, sizeof *table);
    sv_status st = SV_OK;
    if (!states || !table) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in DFA product"); goto done; }
    pair_t start = {0, 0};
    states[n] = start;
    table[sv_pair_hash(start) & (tcap - 1)] = ++n;
    for (uint32_t cur = 0; cur < n && !*meets; cur++) {
        pair_t p = states[cur];
        if (A->accept[p.a] && B->accept[p.b]) { *meets = true; break; }
        for (uint32_t c = 0; c < k; c++) {
            pair_t q = {A->trans[(size_t)p.a * A->nclasses + rep_a[c]], B->trans[(size_t)p.b * B->nclasses + rep_b[c]]};
            if (q.a < 0 || q.b < 0) continue;
            uint32_t h = sv_pair_hash(q) & (tcap - 1);
            while (table[h] && (states[table[h] - 1].a != q.a || states[table[h] - 1].b != q.b)) h = (h + 1) & (tcap - 1);
            if (table[h]) continue;
            if ((st = pair_budgets(n, lim, deadline, err))) goto done;
            if (n == cap) {
                cap *= 2;
                if (!sv_memacct_fits((size_t)cap * sizeof *states + 2 * (size_t)tcap * sizeof *table, lim->max_memory)) {
                    st = sv_error_set(err, SV_ERR_BUDGET, -1, "combining constraints exceeds what is left of the compile's memory budget of %zu bytes", lim->max_memory);
                    goto done;
                }
                pair_t *ns = realloc(states, cap * sizeof *ns);
                if (!ns) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in DFA product"); goto done; }
                states = ns;
            }
            states[n] = q;
            table[h] = ++n;
            if (!pairs_rehash(states, n, &table, &tcap)) {
                st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in DFA product");
                goto done;
            }
        }
    }
done:
    free(states);
    free(table);
    return st;
}
