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
 * So the product walks its pairs of states checking for that conflict:
 * one side reads the marker, the other a bracket. Where it happens, the
 * side with the marker is expanded at that state: the call edge is
 * replaced by a copy of μ's own automaton, whose final states (the closed
 * container) are replaced by the call's return state, and whose inner
 * values are again calls. Expanding never changes a side's language, so
 * the walk goes on where it was: the pairs of an expanded state are walked
 * again with its new moves, and pairs met before stay (at worst they ask
 * for an expansion that was not needed). Each round goes one container
 * level deeper, as deep as the other side spells values out, which a
 * finite automaton does only to a bounded depth, so the rounds end. Without
 * conflicts the product is exact: walk any string through both sides;
 * wherever one side consumes a container by a call, the other consumes it
 * by the same call or not at all (it reads no bracket there), so the two
 * walks stay in step, marker for marker. The pairs walked are then the
 * product's states, minimized as any product's.
 *
 * What stays refused (SV_ERR_UNSUPPORTED, and the schema compiler builds
 * the product from flat pieces instead): a marker of any other part, a
 * state that both calls μ and reads a bracket itself (an expansion there
 * would need subset construction), and a part whose final states are not
 * ends. */
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/memacct.h"
#include "fsm/internal/dfa_internal.h"

#define MAX_ROUNDS 256

/* One operand as a growing table over the classes common to both operands
 * and the part. */
typedef struct {
    int32_t *t;
    uint8_t *acc, *mark;
    int32_t *copy;     /* per state r: the copy of the part that returns to r, or -1 */
    uint32_t n, cap;
} side_t;

typedef sv_pair_t pair_t;

typedef struct {
    const sv_fsm_limits_t *lim;
    sv_error_t *err;
    uint64_t deadline;
    uint32_t k, cmark, copen[2];
    uint8_t classes[256];
    side_t s[2];
    /* the part, over the common classes */
    const int32_t *pt;
    const uint8_t *pacc;
    uint32_t pn;
    /* the pairs met, in order, and their hash table */
    pair_t *q;
    uint32_t nq, capq, *table, tcap;
    bool meets_only, found; /* sv_dfa_meets_calls: stop at the first pair both accept */
} walk_t;

static const char refused[] = "a free-form value meets a value spelled out where it also reads a bracket";

static sv_status nomem(walk_t *w) { return sv_error_set(w->err, SV_ERR_NOMEM, -1, "out of memory in a product of calls"); }

/* Frees the sides and the pairs (what a walk holds besides the part);
 * the walk can be freed again. */
static void walk_free(walk_t *w) {
    free(w->q);
    free(w->table);
    w->q = NULL;
    w->table = NULL;
    for (int i = 0; i < 2; i++) {
        side_t *s = &w->s[i];
        free(s->t), free(s->acc), free(s->mark), free(s->copy);
        s->t = NULL, s->acc = s->mark = NULL, s->copy = NULL;
    }
}

static sv_status over_budget(walk_t *w) {
    return sv_error_set(w->err, SV_ERR_BUDGET, -1, "combining constraints needs more than %u DFA states (the "
                        "max_dfa_states budget)", w->lim->max_dfa_states);
}

static int32_t step(const side_t *s, uint32_t k, int32_t x, uint32_t c) { return x < 0 ? -1 : s->t[(size_t)x * k + c]; }

static bool calls_at(const walk_t *w, int side, int32_t x) { return step(&w->s[side], w->k, x, w->cmark) >= 0; }

static bool bracket_at(const walk_t *w, int side, int32_t x) {
    return step(&w->s[side], w->k, x, w->copen[0]) >= 0 || step(&w->s[side], w->k, x, w->copen[1]) >= 0;
}

/* The return state of the marker path from x in table t (k classes, class
 * map cls) when it calls part id alone (each marker state moves on exactly
 * the expected digit), else -1; x itself must read the marker byte. */
static int32_t marker_return(const int32_t *t, uint32_t k, const uint8_t cls[256], int32_t x, uint32_t id) {
    uint8_t digits[SV_CALL_DIGITS];
    sv_call_digits(id, digits);
    x = t[(size_t)x * k + cls[SV_CALL_MARK]];
    for (int i = 0; i < SV_CALL_DIGITS && x >= 0; i++) {
        const int32_t *row = t + (size_t)x * k;
        uint32_t want = cls[digits[i]];
        for (uint32_t c = 0; c < k; c++)
            if (row[c] >= 0 && c != want) return -1;
        x = row[want];
    }
    return x;
}

/* Whether every marker of d calls part id. */
static bool calls_only(const sv_dfa_t *d, uint32_t id) {
    for (uint32_t s = 0; s < d->nstates; s++)
        if (sv_dfa_next(d, (int32_t)s, SV_CALL_MARK) >= 0 &&
            marker_return(d->trans, d->nclasses, d->classes, (int32_t)s, id) < 0)
            return false;
    return true;
}

static sv_status side_load(walk_t *w, side_t *s, const sv_dfa_t *d, const uint8_t rep[256]) {
    s->n = d->nstates;
    s->cap = d->nstates ? d->nstates : 1;
    if (!sv_memacct_fits((size_t)s->cap * (w->k * sizeof *s->t + 2), w->lim->max_memory))
        return sv_error_set(w->err, SV_ERR_BUDGET, -1, "combining constraints exceeds what is left of the compile's "
                            "memory budget of %zu bytes", w->lim->max_memory);
    s->t = malloc((size_t)s->cap * w->k * sizeof *s->t);
    s->acc = malloc(s->cap);
    s->mark = calloc(s->cap, 1);
    s->copy = malloc((size_t)s->cap * sizeof *s->copy);
    if (!s->t || !s->acc || !s->mark || !s->copy) return nomem(w);
    memset(s->copy, 0xFF, (size_t)s->cap * sizeof *s->copy);
    for (uint32_t x = 0; x < d->nstates; x++) {
        for (uint32_t c = 0; c < w->k; c++) s->t[(size_t)x * w->k + c] = d->trans[(size_t)x * d->nclasses + d->classes[rep[c]]];
        s->acc[x] = d->accept[x];
    }
    return SV_OK;
}

/* Replaces the call at every marked state of s by a copy of the part, one
 * copy per return state. */
static sv_status expand(walk_t *w, int side, uint32_t id) {
    side_t *s = &w->s[side];
    /* First the return states that need a copy (-2: counted, pending). */
    uint32_t need = 0;
    for (uint32_t x = 0; x < s->n; x++) {
        if (!s->mark[x]) continue;
        int32_t ret = marker_return(s->t, w->k, w->classes, (int32_t)x, id);
        if (ret < 0 || bracket_at(w, side, (int32_t)x))
            return sv_error_set(w->err, SV_ERR_UNSUPPORTED, -1, "%s", refused);
        if (s->copy[ret] == -1) s->copy[ret] = -2, need++;
    }
    size_t n = (size_t)s->n + (size_t)need * w->pn;
    if (n > w->lim->max_dfa_states) return over_budget(w);
    if (n > s->cap) {
        size_t cap = (size_t)s->cap * 2 > n ? (size_t)s->cap * 2 : n;
        if (!sv_memacct_fits(cap * (w->k * sizeof *s->t + 2), w->lim->max_memory))
            return sv_error_set(w->err, SV_ERR_BUDGET, -1, "combining constraints exceeds what is left of the "
                                "compile's memory budget of %zu bytes", w->lim->max_memory);
        int32_t *t = realloc(s->t, cap * w->k * sizeof *t);
        if (t) s->t = t;
        uint8_t *acc = realloc(s->acc, cap), *mark = acc ? realloc(s->mark, cap) : NULL;
        if (acc) s->acc = acc;
        if (mark) s->mark = mark;
        int32_t *copy = mark ? realloc(s->copy, cap * sizeof *copy) : NULL;
        if (copy) s->copy = copy;
        if (!t || !acc || !mark || !copy) return nomem(w);
        s->cap = (uint32_t)cap;
    }
    uint32_t base = s->n, n0 = s->n;
    for (uint32_t x = 0; x < n0; x++) {
        if (!s->mark[x]) continue;
        int32_t ret = marker_return(s->t, w->k, w->classes, (int32_t)x, id); /* checked above */
        uint32_t at = (uint32_t)s->copy[ret];
        if (s->copy[ret] == -2) {
            at = base;
            s->copy[ret] = (int32_t)at;
            for (uint32_t y = 0; y < w->pn; y++) {
                int32_t *row = s->t + (size_t)(at + y) * w->k;
                for (uint32_t c = 0; c < w->k; c++) {
                    int32_t u = w->pt[(size_t)y * w->k + c];
                    row[c] = u < 0 ? -1 : w->pacc[u] ? ret : (int32_t)(at + (uint32_t)u);
                }
                s->acc[at + y] = 0;
                s->mark[at + y] = 0;
                s->copy[at + y] = -1;
            }
            base += w->pn;
        }
        /* The call's state enters the copy: the part's start row, on
         * classes where x has no move of its own (no bracket, checked). */
        int32_t *row = s->t + (size_t)x * w->k;
        const int32_t *start = s->t + (size_t)at * w->k;
        row[w->cmark] = -1;
        for (uint32_t c = 0; c < w->k; c++)
            if (start[c] >= 0) {
                if (row[c] >= 0) return sv_error_set(w->err, SV_ERR_UNSUPPORTED, -1, "%s", refused);
                row[c] = start[c];
            }
    }
    s->n = base;
    return SV_OK;
}

static bool accepts(const walk_t *w, pair_t p, sv_dfa_op op) {
    return sv_pair_accepts(p.a >= 0 && w->s[0].acc[p.a], p.b >= 0 && w->s[1].acc[p.b], op);
}

/* The index of pair p (-1 when it was never met), added when new and add. */
static sv_status pair_id(walk_t *w, pair_t p, bool add, int32_t *id) {
    uint32_t h = sv_pair_hash(p) & (w->tcap - 1);
    while (w->table[h] && (w->q[w->table[h] - 1].a != p.a || w->q[w->table[h] - 1].b != p.b)) h = (h + 1) & (w->tcap - 1);
    if (w->table[h] || !add) {
        *id = (int32_t)w->table[h] - 1;
        return SV_OK;
    }
    if (w->nq >= w->lim->max_dfa_states) return over_budget(w);
    if ((w->nq & 255) == 0 && sv_memacct_cancelled())
        return sv_error_set(w->err, SV_ERR_CANCELLED, -1, "the compile was cancelled");
    if (w->deadline && (w->nq & 255) == 0 && sv_now_ns() > w->deadline)
        return sv_error_set(w->err, SV_ERR_TIMEOUT, -1, "combining constraints exceeded the time budget of %llu ms",
                            (unsigned long long)((w->lim->time_budget_us ? w->lim->time_budget_us : w->lim->max_time_us) / 1000));
    if (w->nq == w->capq) {
        uint32_t cap = w->capq * 2;
        if (!sv_memacct_fits((size_t)cap * (sizeof *w->q + 2 * sizeof *w->table + w->k * sizeof(int32_t)), w->lim->max_memory))
            return sv_error_set(w->err, SV_ERR_BUDGET, -1, "combining constraints exceeds what is left of the "
                                "compile's memory budget of %zu bytes", w->lim->max_memory);
        pair_t *q = realloc(w->q, cap * sizeof *q);
        if (!q) return nomem(w);
        w->q = q;
        w->capq = cap;
    }
    w->q[w->nq] = p;
    w->table[h] = ++w->nq;
    *id = (int32_t)w->nq - 1;
    if (2 * w->nq > w->tcap) {
        uint32_t ncap = w->tcap * 2;
        uint32_t *t = calloc(ncap, sizeof *t);
        if (!t) return nomem(w);
        for (uint32_t i = 0; i < w->nq; i++) {
            uint32_t hh = sv_pair_hash(w->q[i]) & (ncap - 1);
            while (t[hh]) hh = (hh + 1) & (ncap - 1);
            t[hh] = i + 1;
        }
        free(w->table);
        w->table = t;
        w->tcap = ncap;
    }
    return SV_OK;
}

typedef struct {
    uint32_t *v;
    size_t n, cap;
} work_t;

static bool work_push(work_t *wk, uint32_t x) {
    if (wk->n == wk->cap) {
        size_t cap = wk->cap ? wk->cap * 2 : 1024;
        uint32_t *v = realloc(wk->v, cap * sizeof *v);
        if (!v) return false;
        wk->v = v;
        wk->cap = cap;
    }
    wk->v[wk->n++] = x;
    return true;
}

/* Scans the pairs on the work list and those they reach, marking the calls
 * that meet a bracket; *any says whether one was marked. */
static sv_status walk(walk_t *w, sv_dfa_op op, work_t *wk, bool *any) {
    sv_status st;
    *any = false;
    for (size_t i = 0; i < wk->n; i++) {
        pair_t p = w->q[wk->v[i]];
        if (calls_at(w, 0, p.a) && bracket_at(w, 1, p.b)) w->s[0].mark[p.a] = 1, *any = true;
        if (calls_at(w, 1, p.b) && bracket_at(w, 0, p.a)) w->s[1].mark[p.b] = 1, *any = true;
        for (uint32_t c = 0; c < w->k; c++) {
            pair_t t = {step(&w->s[0], w->k, p.a, c), step(&w->s[1], w->k, p.b, c)};
            if (!sv_pair_alive(t, op)) continue;
            uint32_t before = w->nq;
            int32_t id;
            if ((st = pair_id(w, t, true, &id))) return st;
            if (w->nq > before && w->meets_only && accepts(w, t, SV_DFA_AND)) {
                w->found = true;
                return SV_OK;
            }
            if (w->nq > before && !work_push(wk, (uint32_t)id)) return nomem(w);
        }
    }
    wk->n = 0;
    return SV_OK;
}

/* The product's raw DFA: the pairs met, in order (the start pair first). */
static sv_status product_raw(walk_t *w, sv_dfa_op op, sv_rawdfa_t *raw) {
    size_t n = w->nq;
    if (!sv_memacct_fits(n * (w->k * sizeof *raw->trans + 1), w->lim->max_memory))
        return sv_error_set(w->err, SV_ERR_BUDGET, -1, "combining constraints exceeds what is left of the compile's "
                            "memory budget of %zu bytes", w->lim->max_memory);
    raw->trans = malloc(n * w->k * sizeof *raw->trans);
    raw->accept = malloc(n);
    if (!raw->trans || !raw->accept) return nomem(w);
    raw->nstates = (uint32_t)n;
    raw->nclasses = w->k;
    memcpy(raw->classes, w->classes, 256);
    raw->start = 0;
    for (size_t i = 0; i < n; i++) {
        pair_t p = w->q[i];
        raw->accept[i] = accepts(w, p, op);
        for (uint32_t c = 0; c < w->k; c++) {
            pair_t t = {step(&w->s[0], w->k, p.a, c), step(&w->s[1], w->k, p.b, c)};
            int32_t id = -1;
            if (sv_pair_alive(t, op)) {
                sv_status st = pair_id(w, t, false, &id);
                if (st) return st;
            }
            /* Pairs met before an expansion that no longer move this way
             * are left unreached, and every pair an expanded state makes
             * was walked: a missing one would be a bug. */
            if (sv_pair_alive(t, op) && id < 0)
                return sv_error_set(w->err, SV_ERR_INTERNAL, -1, "internal: a product of calls missed a pair");
            raw->trans[i * w->k + c] = id;
        }
    }
    return SV_OK;
}

/* The product, or with meets (op SV_DFA_AND) only whether it is empty. */
static sv_status product_calls(const sv_dfa_t *a, const sv_dfa_t *b, sv_dfa_op op, uint32_t id, const sv_dfa_t *part,
                               const sv_fsm_limits_t *lim, sv_dfa_t **out, bool *meets, sv_error_t *err) {
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    if (!part || !calls_only(a, id) || !calls_only(b, id) || !calls_only(part, id))
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a call to a part other than the free-form value reached a "
                            "product");
    /* The part: a start that does not accept, final states with no moves. */
    if (part->accept[0]) return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", refused);
    for (uint32_t x = 0; x < part->nstates; x++)
        if (part->accept[x])
            for (uint32_t c = 0; c < part->nclasses; c++)
                if (part->trans[(size_t)x * part->nclasses + c] >= 0)
                    return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", refused);
    walk_t w = {.lim = lim, .err = err, .meets_only = meets != NULL};
    if (lim->max_time_us) w.deadline = sv_now_ns() + lim->max_time_us * 1000;
    /* Classes: the common refinement of the three class maps, with the
     * marker byte alone in its class (the call an expansion removes). */
    uint8_t rep[256];
    uint32_t key[256];
    for (int x = 0; x < 256; x++) {
        uint32_t kx = x == SV_CALL_MARK ? UINT32_MAX
                                        : (uint32_t)a->classes[x] << 16 | (uint32_t)b->classes[x] << 8 | part->classes[x];
        uint32_t c = 0;
        while (c < w.k && key[c] != kx) c++;
        if (c == w.k) key[w.k] = kx, rep[w.k] = (uint8_t)x, w.k++;
        w.classes[x] = (uint8_t)c;
    }
    w.cmark = w.classes[SV_CALL_MARK];
    w.copen[0] = w.classes['['];
    w.copen[1] = w.classes['{'];
    sv_status st = SV_OK;
    sv_rawdfa_t raw = {0};
    work_t wk = {0};
    int32_t *pt = malloc((size_t)part->nstates * w.k * sizeof *pt);
    if (!pt) { st = nomem(&w); goto done; }
    for (uint32_t x = 0; x < part->nstates; x++)
        for (uint32_t c = 0; c < w.k; c++)
            pt[(size_t)x * w.k + c] = part->trans[(size_t)x * part->nclasses + part->classes[rep[c]]];
    w.pt = pt;
    w.pacc = part->accept;
    w.pn = part->nstates;
    if ((st = side_load(&w, &w.s[0], a, rep)) || (st = side_load(&w, &w.s[1], b, rep))) goto done;
    w.capq = 1024;
    w.tcap = 2048;
    w.q = malloc(w.capq * sizeof *w.q);
    w.table = calloc(w.tcap, sizeof *w.table);
    if (!w.q || !w.table) { st = nomem(&w); goto done; }
    pair_t start = {0, 0};
    if (!sv_pair_alive(start, op)) { st = sv_error_set(err, SV_ERR_EMPTY, -1, "the combination matches no string"); goto done; }
    int32_t sid;
    if ((st = pair_id(&w, start, true, &sid))) goto done;
    w.found = meets && accepts(&w, start, SV_DFA_AND);
    if (!work_push(&wk, 0)) { st = nomem(&w); goto done; }
    for (int round = 0; !w.found; round++) {
        bool any;
        if ((st = walk(&w, op, &wk, &any)) || !any || w.found) break;
        if (round == MAX_ROUNDS) {
            st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "free-form values met values spelled out more than %d "
                              "levels deep in one product", MAX_ROUNDS);
            break;
        }
        /* Expand, then walk again every pair that holds an expanded state. */
        uint32_t n0[2] = {w.s[0].n, w.s[1].n};
        if ((st = expand(&w, 0, id)) || (st = expand(&w, 1, id))) break;
        for (uint32_t i = 0; i < w.nq; i++) {
            pair_t p = w.q[i];
            if (((p.a >= 0 && (uint32_t)p.a < n0[0] && w.s[0].mark[p.a]) ||
                 (p.b >= 0 && (uint32_t)p.b < n0[1] && w.s[1].mark[p.b])) && !work_push(&wk, i)) {
                st = nomem(&w);
                break;
            }
        }
        if (st) break;
        memset(w.s[0].mark, 0, w.s[0].n);
        memset(w.s[1].mark, 0, w.s[1].n);
    }
    if (meets) {
        *meets = w.found;
        goto done;
    }
    if (!st) st = product_raw(&w, op, &raw);
    if (!st && 4 * w.k > 5 * (a->nclasses > b->nclasses ? a->nclasses : b->nclasses)) st = sv_rawdfa_merge_classes(&raw, err);
    /* The sides (with their copies of the part) and the pairs are not
     * needed past here: freed before minimization, which is the peak of a
     * big product's memory. */
    walk_free(&w);
    if (!st) st = sv_dfa_minimize_budget(&raw, 0, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    if (st == SV_ERR_EMPTY) sv_error_set(err, SV_ERR_EMPTY, -1, "the combination matches no string");
done:
    sv_rawdfa_free(&raw);
    free(pt);
    free(wk.v);
    walk_free(&w);
    return st;
}

sv_status sv_dfa_product_calls_uncached(const sv_dfa_t *a, const sv_dfa_t *b, sv_dfa_op op, uint32_t id,
                                        const sv_dfa_t *part, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                                        sv_error_t *err) {
    return product_calls(a, b, op, id, part, lim, out, NULL, err);
}

sv_status sv_dfa_meets_calls(const sv_dfa_t *a, const sv_dfa_t *b, uint32_t id, const sv_dfa_t *part,
                             const sv_fsm_limits_t *lim, bool *meets, sv_error_t *err) {
    *meets = false;
    return product_calls(a, b, SV_DFA_AND, id, part, lim, NULL, meets, err);
}
