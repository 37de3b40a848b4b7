/* program.c — constraints composed from compiled parts.
 *
 * A flat DFA multiplies states wherever pieces combine: a free-form value
 * nested d levels costs about 2^d copies of a level, because a DFA tells an
 * array from an object at every open level only by being in another copy
 * of what lies below. A program instead keeps each piece once, as a part (a
 * minimized DFA), and lets a part *call* another: a call edge enters the
 * callee at its start and, when the callee reaches one of its final
 * states, continues at the call's return state. The matcher carries the
 * stack of return states. This is a recursive transition network; a part
 * that calls itself nests to any depth.
 *
 * How parts are written. The compilers build each part as an ordinary
 * AST → NFA → DFA, with a call written as a marker: the byte SV_CALL_MARK
 * then SV_CALL_DIGITS digit bytes naming the callee. Those bytes never occur
 * in UTF-8, so determinization and minimization treat a call like a
 * literal, and nothing downstream of the marker path changes. Linking
 * (sv_program_link) concatenates the parts into one table, drops the
 * marker bytes and records each marker path as a call edge.
 *
 * Determinism. A walk takes, for each byte, the direct transition if there
 * is one, else the call whose callee starts with the byte, else (in a final
 * state with a frame on the stack) a return. The linker checks that these
 * choices never compete: no byte both continues and starts a call, no two
 * calls of a state start alike, a callee never accepts the empty string,
 * and a part that may go on after reaching a final state never shares a
 * byte with what its callers do after it returns. Every schema construct
 * that uses calls (free-form values) meets that check by construction;
 * anything that does not is compiled without calls. Soundness does not
 * depend on the check (every accepted string has a derivation); the check
 * makes the walk complete.
 *
 * Costs. Linking is linear in the parts' tables. Distances (the fewest
 * bytes to a part's end, a call costing its callee's shortest string) are
 * a shortest-path problem whose call weights depend on the callees' own
 * distances: Dijkstra over each part's reversed edges, redone for the
 * callers of a part whose start distance fell (see distances()). */
#include <stdlib.h>
#include <string.h>

#include "../src/util/grow.h"
#include "dfa_internal.h"

void sv_call_digits(uint32_t id, uint8_t digits[SV_CALL_DIGITS]) {
    for (int i = SV_CALL_DIGITS - 1; i >= 0; i--, id /= 10) digits[i] = (uint8_t)(SV_CALL_DIGIT0 + id % 10);
}

sv_ast_t *sv_call_marker(sv_arena_t *a, uint32_t id) {
    if (id > SV_CALL_MAX_ID) return NULL;
    sv_ast_t *k[1 + SV_CALL_DIGITS];
    uint8_t digits[SV_CALL_DIGITS];
    sv_call_digits(id, digits);
    k[0] = sv_ast_bytes(a, SV_CALL_MARK, SV_CALL_MARK);
    for (int i = 0; i < SV_CALL_DIGITS; i++) k[1 + i] = sv_ast_bytes(a, digits[i], digits[i]);
    for (int i = 0; i <= SV_CALL_DIGITS; i++)
        if (!k[i]) return NULL;
    return sv_ast_cat(a, k, 1 + SV_CALL_DIGITS);
}

bool sv_dfa_has_markers(const sv_dfa_t *d) {
    if (d->call_off) return false; /* linked: the markers became calls */
    uint8_t c = d->classes[SV_CALL_MARK];
    for (uint32_t s = 0; s < d->nstates; s++)
        if (d->trans[(size_t)s * d->nclasses + c] >= 0) return true;
    return false;
}

/* ---- linking ------------------------------------------------------------------ */

typedef struct {
    uint32_t part, state; /* the caller (part-local state) */
    uint32_t callee;      /* part index */
    uint32_t ret;         /* part-local state of the caller */
} site_t;

typedef struct {
    const sv_dfa_t **parts;
    uint32_t nparts, capparts;
    site_t *sites;
    uint32_t nsites, capsites;
} linker_t;


static sv_status add_part(linker_t *L, const sv_dfa_t *d, uint32_t *idx, sv_error_t *err) {
    for (uint32_t i = 0; i < L->nparts; i++)
        if (L->parts[i] == d) { *idx = i; return SV_OK; }
    if (L->nparts >= SV_CALL_MAX_ID)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "the constraint has more than %u parts", SV_CALL_MAX_ID);
    if (!sv_grow((void **)&L->parts, &L->capparts, L->nparts + 1, sizeof *L->parts))
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
    *idx = L->nparts;
    L->parts[L->nparts++] = d;
    return SV_OK;
}

/* The marker paths of part p: each (state, id, return state). */
static sv_status scan_part(linker_t *L, uint32_t p, sv_call_resolve_fn resolve, void *ctx, sv_error_t *err) {
    const sv_dfa_t *d = L->parts[p];
    for (uint32_t s = 0; s < d->nstates; s++) {
        int32_t m = sv_dfa_next(d, (int32_t)s, SV_CALL_MARK);
        if (m < 0) continue;
        /* depth-first over the digit bytes */
        int32_t st[SV_CALL_DIGITS + 1];
        uint32_t dig[SV_CALL_DIGITS + 1];
        int k = 0;
        st[0] = m;
        dig[0] = 0;
        while (k >= 0) {
            if (dig[k] == 10) { k--; if (k >= 0) dig[k]++; continue; }
            int32_t t = sv_dfa_next(d, st[k], (uint8_t)(SV_CALL_DIGIT0 + dig[k]));
            if (t < 0) { dig[k]++; continue; }
            if (k + 1 < SV_CALL_DIGITS) {
                st[k + 1] = t;
                dig[k + 1] = 0;
                k++;
                continue;
            }
            uint32_t id = 0;
            for (int i = 0; i < SV_CALL_DIGITS; i++) id = id * 10 + dig[i];
            const sv_dfa_t *cd = resolve(ctx, id, err);
            if (!cd) return err && err->code ? err->code : SV_ERR_ARG;
            uint32_t ci;
            sv_status r = add_part(L, cd, &ci, err);
            if (r) return r;
            if (!sv_grow((void **)&L->sites, &L->capsites, L->nsites + 1, sizeof *L->sites))
                return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
            L->sites[L->nsites++] = (site_t){p, s, ci, (uint32_t)t};
            dig[k]++;
        }
    }
    return SV_OK;
}

static inline void bset(uint64_t *s, uint32_t b) { s[b >> 6] |= 1ull << (b & 63); }
static inline bool bmeet(const uint64_t *a, const uint64_t *b) {
    return (a[0] & b[0]) | (a[1] & b[1]) | (a[2] & b[2]) | (a[3] & b[3]);
}
static inline void bor(uint64_t *a, const uint64_t *b) {
    for (int i = 0; i < 4; i++) a[i] |= b[i];
}

/* The bytes with a direct move from x. */
static void direct_set(const sv_dfa_t *d, int32_t x, uint64_t out[4]) {
    memset(out, 0, 4 * sizeof *out);
    const int32_t *row = d->trans + (size_t)x * d->nclasses;
    for (int b = 0; b < 256; b++)
        if (row[d->classes[b]] >= 0) bset(out, (uint32_t)b);
}

/* first(q): the bytes a callee starting at q can begin with (its direct
 * bytes and those of the calls at q). A call at a start that leads back to
 * the same start without a byte (left recursion) has no finite first set. */
static sv_status first_of(sv_dfa_t *d, int32_t q, uint8_t *mark, uint64_t (*memo)[4], sv_error_t *err) {
    if (mark[q] == 2) return SV_OK;
    if (mark[q] == 1)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a part calls itself before reading a byte");
    mark[q] = 1;
    direct_set(d, q, memo[q]);
    for (uint32_t i = d->call_off[q]; i < d->call_off[q + 1]; i++) {
        sv_status st = first_of(d, d->calls[i].callee, mark, memo, err);
        if (st) return st;
        bor(memo[q], memo[d->calls[i].callee]);
    }
    mark[q] = 2;
    return SV_OK;
}

/* A binary heap of (distance, state) for distances(). */
typedef struct { uint32_t d, s; } heap_t;

static void heap_push(heap_t *h, uint32_t *n, heap_t x) {
    uint32_t i = (*n)++;
    while (i && h[(i - 1) / 2].d > x.d) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = x;
}

static heap_t heap_pop(heap_t *h, uint32_t *n) {
    heap_t top = h[0], x = h[--*n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].d < h[c].d) c++;
        if (h[c].d >= x.d) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

/* The part holding linked state x: the last p with base[p] <= x. */
static uint32_t part_of(const uint32_t *base, uint32_t np, uint32_t x) {
    uint32_t lo = 0, hi = np; /* base[lo] <= x < base[hi] (base[np] is the total) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (base[mid] <= x) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Distances with calls: per part, Dijkstra from its final states over
 * reversed edges, a call s -> ret weighing dist[callee] (the callee's start
 * distance as known so far). Parts are redone from a worklist: a part whose
 * start distance fell puts its callers back. Edges never leave a part, so
 * each redo touches one part; distances only fall, so it ends, at the least
 * fixed point (every edge then holds, and every distance is a real
 * completion's length). Parts are found callers first (the root is 0), so the
 * worklist takes them from the last: callees first, and a program without
 * recursion is one Dijkstra a part. */
static sv_status distances(sv_dfa_t *d, const uint32_t *base, sv_error_t *err) {
    uint32_t n = d->nstates, k = d->nclasses, np = d->nparts;
    uint32_t *off = calloc((size_t)n + 1, sizeof *off), *fill = calloc(n ? n : 1, sizeof *fill);
    size_t ne = 0;
    for (size_t i = 0; i < (size_t)n * k; i++) ne += d->trans[i] >= 0;
    ne += d->ncalls;
    uint32_t *src = malloc((ne + 1) * sizeof *src);
    int32_t *via = malloc((ne + 1) * sizeof *via); /* -1: a byte; else the callee */
    heap_t *heap = malloc((ne + n + 1) * sizeof *heap);
    uint8_t *done = malloc(n ? n : 1);
    /* callers[coff[p] .. coff[p + 1]): the parts that call part p */
    uint32_t *coff = calloc((size_t)np + 1, sizeof *coff), *callers = malloc((d->ncalls + 1) * sizeof *callers);
    uint32_t *work = malloc(((size_t)np + 1) * sizeof *work);
    uint8_t *queued = calloc(np ? np : 1, 1);
    d->dist = malloc((n ? n : 1) * sizeof *d->dist);
    sv_status st = SV_OK;
    if (!off || !fill || !src || !via || !heap || !done || !coff || !callers || !work || !queued || !d->dist) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory analyzing the constraint");
        goto out;
    }
    for (uint32_t s = 0; s < n; s++) {
        for (uint32_t c = 0; c < k; c++) {
            int32_t t = d->trans[(size_t)s * k + c];
            if (t >= 0) off[t + 1]++;
        }
        for (uint32_t i = d->call_off[s]; i < d->call_off[s + 1]; i++) off[d->calls[i].ret + 1]++;
    }
    for (uint32_t i = 0; i < n; i++) off[i + 1] += off[i];
    for (uint32_t s = 0; s < n; s++) {
        for (uint32_t c = 0; c < k; c++) {
            int32_t t = d->trans[(size_t)s * k + c];
            if (t >= 0) src[off[t] + fill[t]] = s, via[off[t] + fill[t]++] = -1;
        }
        for (uint32_t i = d->call_off[s]; i < d->call_off[s + 1]; i++) {
            int32_t t = d->calls[i].ret;
            src[off[t] + fill[t]] = s, via[off[t] + fill[t]++] = d->calls[i].callee;
        }
    }
    for (uint32_t i = 0; i < d->ncalls; i++) coff[part_of(base, np, (uint32_t)d->calls[i].callee) + 1]++;
    for (uint32_t p = 0; p < np; p++) coff[p + 1] += coff[p];
    memset(fill, 0, (n ? n : 1) * sizeof *fill);
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t i = d->call_off[s]; i < d->call_off[s + 1]; i++) {
            uint32_t q = part_of(base, np, (uint32_t)d->calls[i].callee);
            callers[coff[q] + fill[q]++] = part_of(base, np, s);
        }
    for (uint32_t s = 0; s < n; s++) d->dist[s] = UINT32_MAX;
    uint32_t nw = 0;
    for (uint32_t p = 0; p < np; p++) work[nw++] = p, queued[p] = 1;
    while (nw) {
        uint32_t p = work[--nw];
        queued[p] = 0;
        uint32_t lo = base[p], hi = base[p + 1], before = d->dist[lo];
        uint32_t hn = 0;
        /* The distances known so far are lengths of real completions, so
         * they seed the search: only what a fallen callee shortens moves. */
        for (uint32_t s = lo; s < hi; s++) {
            done[s] = 0;
            if (d->accept[s]) d->dist[s] = 0;
            if (d->dist[s] != UINT32_MAX) heap_push(heap, &hn, (heap_t){d->dist[s], s});
        }
        while (hn) {
            heap_t h = heap_pop(heap, &hn);
            if (done[h.s] || h.d != d->dist[h.s]) continue;
            done[h.s] = 1;
            for (uint32_t i = off[h.s]; i < off[h.s + 1]; i++) {
                uint32_t w = via[i] < 0 ? 1 : d->dist[via[i]];
                if (w == UINT32_MAX) continue;
                uint64_t nd = (uint64_t)h.d + w;
                if (nd < d->dist[src[i]]) {
                    d->dist[src[i]] = (uint32_t)nd;
                    heap_push(heap, &hn, (heap_t){(uint32_t)nd, src[i]});
                }
            }
        }
        if (d->dist[lo] == before) continue;
        for (uint32_t i = coff[p]; i < coff[p + 1]; i++)
            if (!queued[callers[i]]) queued[callers[i]] = 1, work[nw++] = callers[i];
    }
out:
    free(off);
    free(fill);
    free(src);
    free(via);
    free(heap);
    free(done);
    free(coff);
    free(callers);
    free(work);
    free(queued);
    return st;
}

/* The determinism check of the header comment. */
static sv_status check_choices(sv_dfa_t *d, const uint32_t *base, sv_error_t *err) {
    uint32_t n = d->nstates;
    uint8_t *mark = calloc(n, 1);
    uint64_t (*first)[4] = calloc(n, sizeof *first);
    sv_status st = SV_OK;
    if (!mark || !first) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint"); goto out; }
    for (uint32_t i = 0; i < d->ncalls && !st; i++) st = first_of(d, d->calls[i].callee, mark, first, err);
    if (st) goto out;
    for (uint32_t i = 0; i < d->ncalls; i++) memcpy(d->calls[i].first, first[d->calls[i].callee], sizeof d->calls[i].first);
    for (uint32_t s = 0; s < n && !st; s++) {
        uint32_t lo = d->call_off[s], hi = d->call_off[s + 1];
        if (lo == hi) continue;
        uint64_t seen[4];
        direct_set(d, (int32_t)s, seen);
        for (uint32_t i = lo; i < hi; i++) {
            if (d->accept[d->calls[i].callee]) {
                st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a called part accepts the empty string");
                break;
            }
            if (bmeet(seen, d->calls[i].first)) {
                st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a byte both continues and starts a call at one state");
                break;
            }
            bor(seen, d->calls[i].first);
        }
    }
    if (st) goto out;
    /* A final state that can go on (bytes or calls) competes with what its
     * callers do after it returns: FOLLOW(part), the bytes that may come
     * after the part ends, is the union over its call sites of FIRSTX(ret)
     * (ret's own bytes and calls, and FOLLOW of ret's part when ret is
     * final); nothing follows the root part. A fixed point over parts. */
    uint32_t np = d->nparts;
    uint64_t (*follow)[4] = calloc(np, sizeof *follow);
    if (!follow) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint"); goto out; }
#define PART_OF(x, p) ((p) = part_of(base, np, (uint32_t)(x)))
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t i = 0; i < d->ncalls; i++) {
            int32_t q = d->calls[i].callee, r = d->calls[i].ret;
            uint32_t pq, pr;
            PART_OF(q, pq);
            PART_OF(r, pr);
            uint64_t fx[4];
            direct_set(d, r, fx);
            for (uint32_t j = d->call_off[r]; j < d->call_off[r + 1]; j++) bor(fx, d->calls[j].first);
            if (d->accept[r]) bor(fx, follow[pr]);
            for (int w = 0; w < 4; w++)
                if (fx[w] & ~follow[pq][w]) follow[pq][w] |= fx[w], changed = true;
        }
    }
    for (uint32_t f = 0; f < n && !st; f++) {
        if (!d->accept[f]) continue;
        uint32_t pf;
        PART_OF(f, pf);
        uint64_t go[4];
        direct_set(d, (int32_t)f, go);
        for (uint32_t j = d->call_off[f]; j < d->call_off[f + 1]; j++) bor(go, d->calls[j].first);
        if (bmeet(go, follow[pf]))
            st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a called part may go on where its caller continues");
    }
#undef PART_OF
    free(follow);
out:
    free(mark);
    free(first);
    return st;
}

sv_status sv_program_link(const sv_dfa_t *root, sv_call_resolve_fn resolve, void *ctx, const sv_fsm_limits_t *lim,
                          sv_dfa_t **out, sv_error_t *err) {
    *out = NULL;
    linker_t L = {0};
    sv_dfa_t *d = NULL;
    uint32_t *base = NULL;
    sv_status st;
    uint32_t idx;
    if ((st = add_part(&L, root, &idx, err))) goto fail;
    for (uint32_t p = 0; p < L.nparts; p++)
        if ((st = scan_part(&L, p, resolve, ctx, err))) goto fail;
    base = malloc(((size_t)L.nparts + 1) * sizeof *base);
    if (!base) goto nomem;
    uint64_t total = 0;
    for (uint32_t p = 0; p < L.nparts; p++) base[p] = (uint32_t)total, total += L.parts[p]->nstates;
    if (lim && total > lim->max_dfa_states) {
        st = sv_error_set(err, SV_ERR_BUDGET, -1, "the constraint's parts need more than %u DFA states",
                          lim->max_dfa_states);
        goto fail;
    }
    base[L.nparts] = (uint32_t)total;
    d = calloc(1, sizeof *d);
    if (!d) goto nomem;
    d->nstates = (uint32_t)total;
    d->nparts = L.nparts;
    d->root_states = root->nstates;
    /* Byte classes: the common refinement of the parts' classes, one part
     * at a time (a byte's class so far and its class in the part name its
     * class after the part: an open-addressing table of those pairs, reset
     * per part), then numbered by first byte; the marker bytes form one
     * class with no moves. */
    {
        uint16_t cls[256] = {0};
        for (uint32_t p = 0; p < L.nparts; p++) {
            const uint8_t *pc = L.parts[p]->classes;
            int32_t slot_key[512];
            uint16_t slot_val[512], nn = 0;
            for (int i = 0; i < 512; i++) slot_key[i] = -1;
            for (int b = 0; b < SV_CALL_DIGIT0; b++) {
                int32_t key = (int32_t)cls[b] << 8 | pc[b];
                uint32_t h = ((uint32_t)key * 2654435761u) >> 23; /* 9 bits */
                while (slot_key[h] >= 0 && slot_key[h] != key) h = (h + 1) & 511;
                if (slot_key[h] < 0) slot_key[h] = key, slot_val[h] = nn++;
                cls[b] = slot_val[h];
            }
        }
        uint8_t rep[256];
        int32_t id[256];
        for (int i = 0; i < 256; i++) id[i] = -1;
        uint32_t nc = 0;
        int marker_class = -1;
        for (int b = 0; b < 256; b++) {
            if (b >= SV_CALL_DIGIT0) {
                if (marker_class < 0) marker_class = (int)nc, rep[nc++] = (uint8_t)b;
                d->classes[b] = (uint8_t)marker_class;
                continue;
            }
            if (id[cls[b]] < 0) id[cls[b]] = (int32_t)nc, rep[nc++] = (uint8_t)b;
            d->classes[b] = (uint8_t)id[cls[b]];
        }
        d->nclasses = nc;
        for (uint32_t c = 0; c < nc; c++) d->class_rep[c] = rep[c];
    }
    uint32_t nc = d->nclasses;
    d->trans = malloc((size_t)total * nc * sizeof *d->trans);
    d->accept = calloc(total ? total : 1, 1);
    d->call_off = calloc(total + 1, sizeof *d->call_off);
    d->calls = malloc(((size_t)L.nsites + 1) * sizeof *d->calls);
    if (!d->trans || !d->accept || !d->call_off || !d->calls) goto nomem;
    for (uint32_t p = 0; p < L.nparts; p++) {
        const sv_dfa_t *q = L.parts[p];
        for (uint32_t s = 0; s < q->nstates; s++) {
            int32_t *row = d->trans + (size_t)(base[p] + s) * nc;
            for (uint32_t c = 0; c < nc; c++) {
                uint8_t b = d->class_rep[c];
                int32_t t = b >= SV_CALL_DIGIT0 ? -1 : q->trans[(size_t)s * q->nclasses + q->classes[b]];
                row[c] = t < 0 ? -1 : (int32_t)(base[p] + (uint32_t)t);
            }
            d->accept[base[p] + s] = q->accept[s];
        }
    }
    /* Calls, grouped by caller state (sites are in part, state order). */
    for (uint32_t i = 0; i < L.nsites; i++) d->call_off[base[L.sites[i].part] + L.sites[i].state + 1]++;
    for (uint32_t s = 0; s < total; s++) d->call_off[s + 1] += d->call_off[s];
    {
        uint32_t *fill = calloc(total ? total : 1, sizeof *fill);
        if (!fill) goto nomem;
        for (uint32_t i = 0; i < L.nsites; i++) {
            uint32_t s = base[L.sites[i].part] + L.sites[i].state;
            d->calls[d->call_off[s] + fill[s]++] =
                (sv_dfa_call_t){(int32_t)base[L.sites[i].callee], (int32_t)(base[L.sites[i].part] + L.sites[i].ret), {0}};
        }
        free(fill);
    }
    d->ncalls = L.nsites;
    if ((st = check_choices(d, base, err))) goto fail;
    if ((st = distances(d, base, err))) goto fail;
    if (d->dist[0] == UINT32_MAX) {
        st = sv_error_set(err, SV_ERR_EMPTY, -1, "the constraint matches no string");
        goto fail;
    }
    if ((st = sv_dfa_analyze(d, err)) || (st = sv_dfa_charge(d, err))) goto fail;
    free(base);
    free(L.parts);
    free(L.sites);
    *out = d;
    return SV_OK;
nomem:
    st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
fail:
    free(base);
    free(L.parts);
    free(L.sites);
    sv_dfa_destroy(d);
    return st;
}

/* ---- walks with a stack ------------------------------------------------------- */

#define STACK_MAX (1u << 20)

typedef struct {
    int32_t *v;
    uint32_t n, cap;
} istack_t;

static bool ipush(istack_t *s, int32_t x) {
    if (s->n >= STACK_MAX || !sv_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return false;
    s->v[s->n++] = x;
    return true;
}

/* One byte: the direct move, else a call, else a return. */
static int32_t step(const sv_dfa_t *d, int32_t x, uint8_t b, istack_t *stk) {
    for (;;) {
        int32_t t = sv_dfa_next(d, x, b);
        if (t >= 0) return t;
        const sv_dfa_call_t *c = sv_dfa_call_for(d, x, b);
        if (c) {
            if (!ipush(stk, c->ret)) return -1;
            x = c->callee;
            continue;
        }
        if (d->accept[x] && stk->n) {
            x = stk->v[--stk->n];
            continue;
        }
        return -1;
    }
}

/* Final with an empty stack after unwinding the returns that are left. */
static bool ends(const sv_dfa_t *d, int32_t x, istack_t *stk) {
    while (d->accept[x] && stk->n) x = stk->v[--stk->n];
    return d->accept[x] && !stk->n && (uint32_t)x < d->root_states;
}

bool sv_program_viable(const sv_dfa_t *d, const uint8_t *s, size_t n) {
    if (!d->call_off) {
        int32_t q = 0;
        for (size_t i = 0; i < n && q >= 0; i++) q = sv_dfa_next(d, q, s[i]);
        return q >= 0;
    }
    istack_t stk = {0};
    int32_t x = 0;
    for (size_t i = 0; i < n && x >= 0; i++) x = step(d, x, s[i], &stk);
    free(stk.v);
    return x >= 0;
}

bool sv_program_matches(const sv_dfa_t *d, const uint8_t *s, size_t n) {
    istack_t stk = {0};
    int32_t x = 0;
    for (size_t i = 0; i < n && x >= 0; i++) x = step(d, x, s[i], &stk);
    bool ok = x >= 0 && ends(d, x, &stk);
    free(stk.v);
    return ok;
}

sv_status sv_program_sample(const sv_dfa_t *d, sv_rng_t *rng, uint32_t soft_len, uint8_t *buf, size_t cap,
                            size_t *len) {
    istack_t stk = {0};
    uint64_t below = 0; /* sum of the dist of the return states on the stack */
    int32_t x = 0;
    size_t n = 0;
    sv_status st = SV_OK;
    uint32_t opt[512];
    for (;;) {
        uint64_t here = (uint64_t)d->dist[x] + below;
        /* the choices: 0..nclasses-1 a byte class, nclasses + i call i, and
         * 2 * 256 a return */
        uint32_t no = 0;
        for (uint32_t c = 0; c < d->nclasses; c++) {
            int32_t t = d->trans[(size_t)x * d->nclasses + c];
            if (t < 0) continue;
            if (n >= soft_len && (uint64_t)d->dist[t] + below >= here) continue;
            opt[no++] = c;
        }
        for (uint32_t i = d->call_off[x]; i < d->call_off[x + 1]; i++) {
            const sv_dfa_call_t *c = &d->calls[i];
            uint64_t via = (uint64_t)d->dist[c->callee] + d->dist[c->ret] + below;
            if (n >= soft_len && via > here) continue; /* only a call on a shortest way */
            opt[no++] = 256 + (i - d->call_off[x]);
        }
        if (d->accept[x]) {
            if (!stk.n) {
                if (n >= soft_len || no == 0 || sv_rng_below(rng, 4) == 0) break;
            } else if (no == 0 || n >= soft_len || sv_rng_below(rng, 4) == 0) {
                x = stk.v[--stk.n];
                below -= d->dist[x];
                continue;
            }
        }
        if (no == 0) { st = SV_ERR_ARG; break; } /* cannot happen in a trimmed program */
        uint32_t o = opt[sv_rng_below(rng, no)];
        if (o >= 256) {
            const sv_dfa_call_t *c = &d->calls[d->call_off[x] + (o - 256)];
            if (!ipush(&stk, c->ret)) { st = SV_ERR_BUDGET; break; }
            below += d->dist[c->ret];
            x = c->callee;
            continue;
        }
        uint8_t byte = sv_dfa_class_byte(d, o, rng);
        if (n == cap) { st = SV_ERR_BUDGET; break; }
        buf[n++] = (uint8_t)byte;
        x = sv_dfa_next(d, x, (uint8_t)byte);
    }
    free(stk.v);
    *len = n;
    return st;
}

/* The shortest completion of the part from x (calls expanded), appended at
 * buf[*n]. */
static bool part_completion(const sv_dfa_t *d, int32_t x, uint8_t *buf, uint32_t cap, uint32_t *n, int depth) {
    if (depth > 64) return false;
    while (!d->accept[x]) {
        const int32_t *row = d->trans + (size_t)x * d->nclasses;
        int32_t best = -1;
        uint32_t bc = 0;
        for (uint32_t c = 0; c < d->nclasses; c++)
            if (row[c] >= 0 && d->dist[row[c]] != UINT32_MAX && d->dist[row[c]] + 1 == d->dist[x]) {
                best = row[c];
                bc = c;
                break;
            }
        if (best >= 0) {
            if (*n >= cap) return false;
            buf[(*n)++] = d->class_rep[bc];
            x = best;
            continue;
        }
        const sv_dfa_call_t *use = NULL;
        for (uint32_t i = d->call_off[x]; i < d->call_off[x + 1]; i++) {
            const sv_dfa_call_t *c = &d->calls[i];
            if ((uint64_t)d->dist[c->callee] + d->dist[c->ret] == d->dist[x]) { use = c; break; }
        }
        if (!use || !part_completion(d, use->callee, buf, cap, n, depth + 1)) return false;
        x = use->ret;
    }
    return true;
}

uint32_t sv_program_completion(const sv_dfa_t *d, int32_t x, const int32_t *ret, uint32_t n, uint8_t *buf,
                               uint32_t cap) {
    uint32_t len = 0;
    if (!part_completion(d, x, buf, cap, &len, 0)) return UINT32_MAX;
    for (uint32_t i = n; i-- > 0;)
        if (!part_completion(d, ret[i], buf, cap, &len, 0)) return UINT32_MAX;
    return len;
}
