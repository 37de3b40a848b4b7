/* minimize.c — from the raw subset-construction DFA to the canonical DFA.
 *
 * (Before it, products call sv_rawdfa_merge_classes: see there.)
 * 1. Trim: states that cannot reach acceptance are the dead state.
 * 2. Hopcroft's partition refinement on the completed DFA (live states plus
 *    one sink). Blocks live in one array (elems), each a contiguous slice;
 *    splitting a block moves its marked members to the front of the slice.
 *    The worklist holds splitter blocks; a popped splitter is refined against
 *    every class at once, and when a block not on the worklist splits, only
 *    the smaller half is added, which gives O(k n log n).
 * 3. Renumber the surviving blocks breadth-first from the start, so equal
 *    languages give identical tables.
 * 4. Coarsen byte classes again: columns may agree only once states merged.
 *    The column hashes also give the DFA's fingerprint (dfa_cache.c).
 * 5. Analyze: distance to acceptance (reverse BFS) and forced chains. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/memacct.h"
#include "fsm/internal/dfa_internal.h"

static sv_status oom(sv_error_t *err) {
    return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory while minimizing the DFA");
}

/* Groups the k columns of the row-major table t (n rows) into classes of
 * equal columns: cmap[c] is c's new class, repc[j] the first column of
 * class j, in order of first appearance (so equal tables give equal
 * results). Columns are hashed row by row and each checked against the
 * first column of its hash in one more row-by-row pass; a column that
 * differs there (a hash collision) is compared whole against every class.
 * Returns the number of classes. */
/* A column's hash is the sum of its live cells' hashes (cell q holding v:
 * sv_hash_u64 of q and v), so missing moves, most of a table, cost
 * nothing and are skipped eight at a time. */
static inline uint64_t cell_hash(uint32_t q, int32_t v) { return sv_hash_u64((uint64_t)q << 32 | (uint32_t)v); }

void sv_dfa_column_hashes(const int32_t *t, uint32_t n, uint32_t k, uint64_t h[256]) {
    for (uint32_t c = 0; c < k; c++) h[c] = 0;
    for (uint32_t q = 0; q < n; q++) {
        const int32_t *row = t + (size_t)q * k;
        for (uint32_t c = 0; c < k; c++) {
            if (c + 8 <= k && sv_dead_run8(row + c)) { c += 7; continue; }
            if (row[c] >= 0) h[c] += cell_hash(q, row[c]);
        }
    }
}

uint64_t sv_dfa_fingerprint_of(const sv_dfa_t *d, const uint64_t *colh) {
    uint64_t h = ((uint64_t)d->nstates << 32 | d->nclasses) * 0x9e3779b97f4a7c15ull;
    for (int b = 0; b < 256; b++) h = sv_hash_step(h, d->classes[b]);
    for (uint32_t c = 0; c < d->nclasses; c++) h = ((h ^ colh[c]) * 0xff51afd7ed558ccdull) ^ (h >> 29);
    for (uint32_t s = 0; s < d->nstates; s++) h = sv_hash_step(h, d->accept[s]);
    h ^= h >> 31;
    return h ? h : 1;
}

/* (h: the hashes of t's columns, sv_dfa_column_hashes: filled here unless
 * hashed says the caller did.) */
static uint32_t merge_columns(const int32_t *t, uint32_t n, uint32_t k, int32_t cmap[256], uint32_t repc[256],
                              uint64_t h[256], bool hashed) {
    if (!hashed) sv_dfa_column_hashes(t, n, k, h);
    uint32_t first[256]; /* the first column with c's hash */
    uint32_t dup[256], ndup = 0; /* the columns whose hash an earlier one has */
    for (uint32_t c = 0; c < k; c++) {
        first[c] = c;
        for (uint32_t j = 0; j < c; j++)
            if (h[j] == h[c]) { first[c] = j; dup[ndup++] = c; break; }
    }
    bool ok[256];
    for (uint32_t c = 0; c < k; c++) ok[c] = true;
    for (uint32_t q = 0; q < n && ndup; q++) {
        const int32_t *row = t + (size_t)q * k;
        for (uint32_t i = 0; i < ndup; i++)
            if (row[dup[i]] != row[first[dup[i]]]) ok[dup[i]] = false;
    }
    uint32_t nc = 0;
    for (uint32_t c = 0; c < k; c++) {
        cmap[c] = -1;
        if (first[c] != c && ok[c]) {
            cmap[c] = cmap[first[c]];
        } else if (first[c] != c) {
            for (uint32_t j = 0; j < nc && cmap[c] < 0; j++) {
                uint32_t r = repc[j], q = 0;
                while (q < n && t[(size_t)q * k + c] == t[(size_t)q * k + r]) q++;
                if (q == n) cmap[c] = (int32_t)j;
            }
        }
        if (cmap[c] < 0) repc[nc] = c, cmap[c] = (int32_t)nc++;
    }
    return nc;
}

/* Marks in live[] the states that can reach an accepting state, and
 * writes their distance to acceptance in dist[] (UINT32_MAX elsewhere): a
 * BFS back from the accepting states over the inverse transitions
 * (ioff/isrc, CSR by target). Equivalent states have equal distances, so
 * these are the minimal DFA's too. */
static sv_status coreachable(const sv_rawdfa_t *r, const uint32_t *ioff, const uint32_t *isrc, uint8_t *live,
                             uint32_t *dist, sv_error_t *err) {
    uint32_t n = r->nstates;
    uint32_t *queue = malloc(((size_t)n + 1) * sizeof *queue);
    if (!queue) return oom(err);
    uint32_t qh = 0, qt = 0;
    for (uint32_t s = 0; s < n; s++) {
        dist[s] = UINT32_MAX;
        if (r->accept[s]) live[s] = 1, dist[s] = 0, queue[qt++] = s;
    }
    while (qh < qt) {
        uint32_t t = queue[qh++];
        for (uint32_t i = ioff[t]; i < ioff[t + 1]; i++)
            if (!live[isrc[i]]) live[isrc[i]] = 1, dist[isrc[i]] = dist[t] + 1, queue[qt++] = isrc[i];
    }
    free(queue);
    return SV_OK;
}

typedef struct {
    uint32_t n;                    /* states, sink included */
    uint32_t sink;
    uint32_t *elems, *pos, *blk;   /* partition arrays */
    uint32_t *bstart, *bend, *bmark;
    uint8_t *inw;
    uint32_t nblocks;
    uint32_t *work;                /* worklist stack of blocks */
    uint32_t nwork;
} part_t;

static void push_work(part_t *p, uint32_t b) {
    if (p->inw[b]) return;
    p->inw[b] = 1;
    p->work[p->nwork++] = b;
}

/* Splits block b into its marked prefix and the rest, unless all or none
 * of it is marked; the smaller part gets the new block id. */
static void split_block(part_t *p, uint32_t b) {
    uint32_t s0 = p->bstart[b], e = p->bend[b], mk = p->bmark[b];
    p->bmark[b] = 0;
    if (mk == 0 || mk == e - s0) return;
    uint32_t nb = p->nblocks++;
    bool marked_small = mk <= (e - s0) - mk;
    if (marked_small) {
        p->bstart[nb] = s0, p->bend[nb] = s0 + mk;
        p->bstart[b] = s0 + mk;
    } else {
        p->bstart[nb] = s0 + mk, p->bend[nb] = e;
        p->bend[b] = s0 + mk;
    }
    p->bmark[nb] = 0;
    for (uint32_t i = p->bstart[nb]; i < p->bend[nb]; i++) p->blk[p->elems[i]] = nb;
    /* Hopcroft: if b is a pending splitter, both halves must be (b stays
     * queued). Otherwise either half suffices: the smaller (nb) for the
     * O(n log n) bound, except that the sink's half is never a splitter (its
     * predecessors are every dead transition; no block holding the sink is
     * ever queued, see sv_dfa_minimize). */
    if (p->inw[b]) push_work(p, nb);
    else if (p->blk[p->sink] == nb) push_work(p, b);
    else push_work(p, nb);
}

sv_status sv_rawdfa_merge_classes(sv_rawdfa_t *raw, sv_error_t *err) {
    int32_t cmap[256];
    uint32_t repc[256], k = raw->nclasses, n = raw->nstates;
    uint64_t h[256];
    uint32_t nc = merge_columns(raw->trans, n, k, cmap, repc, h, false);
    if (nc == k) return SV_OK;
    /* in place, row by row: row q's new cells never pass its old ones */
    for (uint32_t q = 0; q < n; q++)
        for (uint32_t j = 0; j < nc; j++) raw->trans[(size_t)q * nc + j] = raw->trans[(size_t)q * k + repc[j]];
    size_t cells = (size_t)n * nc;
    int32_t *t = realloc(raw->trans, (cells ? cells : 1) * sizeof *t);
    if (t) raw->trans = t;
    raw->nclasses = nc;
    for (int b = 0; b < 256; b++) raw->classes[b] = (uint8_t)cmap[raw->classes[b]];
    free(raw->indeg); /* merged columns took moves away */
    raw->indeg = NULL;
    (void)err;
    return SV_OK;
}

sv_status sv_dfa_minimize_budget(const sv_rawdfa_t *raw, size_t held, const sv_fsm_limits_t *lim, sv_error_t *err) {
    /* Inverse transitions (4 + 1 bytes), predecessor scratch (4) per
     * (state, class) pair, and about 52 bytes of partition arrays and
     * distances per state; beside them, still alive and charged nowhere:
     * the raw DFA itself (4 bytes a transition, 1 a state, 4 more for its
     * in-degree) and what the caller holds. */
    size_t n = (size_t)raw->nstates + 1;
    size_t bytes = n * raw->nclasses * 13 + n * 57 + held;
    if (!sv_memacct_fits(bytes, lim->max_memory))
        return sv_error_set(err, SV_ERR_BUDGET, -1, "minimizing the DFA needs about %zu bytes, more than is left of the compile's "
                            "memory budget of %zu bytes", bytes, lim->max_memory);
    return SV_OK;
}

sv_status sv_dfa_minimize(const sv_rawdfa_t *raw, sv_dfa_t **out, sv_error_t *err) {
    if (raw->nstates == 0 || raw->start < 0)
        return sv_error_set(err, SV_ERR_EMPTY, -1, "the constraint matches no string");
    uint32_t n = raw->nstates, k = raw->nclasses;
    sv_status st = SV_OK;
    uint32_t N = n + 1, sink = n;
    /* Inverse transitions, CSR by target: (source, class) pairs of the
     * transitions that exist. The BFS for liveness uses all of them;
     * Hopcroft asks only for the predecessors of live states, which are
     * live themselves: exactly the completed DFA's edges that do not go to
     * the sink (edges into the sink are never asked for: no block holding
     * the sink is ever a splitter). */
    size_t E = 0;
    uint32_t *ioff = calloc((size_t)N + 1, sizeof *ioff);
    uint8_t *live = calloc(n, 1);
    uint32_t *rdist = malloc((size_t)n * sizeof *rdist);
    if (!ioff || !live || !rdist) {
        free(ioff);
        free(live);
        free(rdist);
        return oom(err);
    }
    /* Tables here are mostly missing transitions (-1, every bit set): runs
       of 8 cells whose AND is negative are all missing and skipped whole
       (sv_dead_run8), which also spares the branch on each cell. */
    if (raw->indeg) { /* counted as subset construction wrote them */
        for (uint32_t t = 0; t < n; t++) ioff[t + 1] = raw->indeg[t], E += raw->indeg[t];
    } else {
        size_t cells = (size_t)n * k;
        for (size_t i = 0; i < cells;) {
            if (i + 8 <= cells && sv_dead_run8(raw->trans + i)) { i += 8; continue; }
            int32_t t = raw->trans[i++];
            if (t >= 0) ioff[t + 1]++, E++;
        }
    }
    for (uint32_t t = 0; t < N; t++) ioff[t + 1] += ioff[t];
    uint32_t *isrc = malloc((E ? E : 1) * sizeof *isrc);
    uint8_t *icls = malloc(E ? E : 1);
    uint32_t *ifill = calloc(N, sizeof *ifill);
    part_t p = {.n = N, .sink = n};
    p.elems = malloc(N * sizeof *p.elems);
    p.pos = malloc(N * sizeof *p.pos);
    p.blk = calloc(N, sizeof *p.blk);
    p.bstart = malloc(N * sizeof *p.bstart);
    p.bend = malloc(N * sizeof *p.bend);
    p.bmark = calloc(N, sizeof *p.bmark);
    p.inw = calloc(N, 1);
    p.work = malloc(N * sizeof *p.work);
    uint32_t *snap = malloc(N * sizeof *snap);
    uint32_t *ccount = calloc((size_t)k + 1, sizeof *ccount), cstart[256];
    uint8_t cls[256];
    uint32_t *pre = malloc((E ? E : 1) * sizeof *pre);
    uint32_t *touched = malloc(N * sizeof *touched);
    int32_t *newid = NULL, *order = NULL;
    sv_dfa_t *d = NULL;
    if (!isrc || !icls || !ifill || !p.elems || !p.pos || !p.blk || !p.bstart || !p.bend || !p.bmark ||
        !p.inw || !p.work || !snap || !ccount || !pre || !touched) {
        st = oom(err);
        goto done;
    }
    for (uint32_t s = 0; s < n; s++) {
        const int32_t *row = raw->trans + (size_t)s * k;
        for (uint32_t c = 0; c < k; c++) {
            if (c + 8 <= k && sv_dead_run8(row + c)) { c += 7; continue; }
            int32_t t = row[c];
            if (t < 0) continue;
            uint32_t at = ioff[t] + ifill[t]++;
            isrc[at] = s;
            icls[at] = (uint8_t)c;
        }
    }
    if ((st = coreachable(raw, ioff, isrc, live, rdist, err))) goto done;
    if (!live[raw->start]) {
        st = sv_error_set(err, SV_ERR_EMPTY, -1, "the constraint matches no string");
        goto done;
    }
    /* The completed DFA: the live states and a sink (id n) that every
     * missing or dead transition goes to. */

    /* Initial partition: the live states by their distance to acceptance
     * (0: the accepting ones), then the rest with the sink. Equivalent
     * states have equal distances, so no block holds two states the result
     * keeps apart, and the result is the same as from accepting | rest; but
     * refinement starts close to it (an object's automaton is mostly chains
     * of key bytes, which accepting | rest splits one level a round). A
     * counting sort by distance, its counts in the splitter scratch (the
     * largest distance is below the number of live states). Every block but
     * the sink's is a splitter: all blocks but one suffice, and the sink's
     * stays off the worklist for good. */
    if (raw->minimal) { /* each live state a block of its own, the rest with the sink */
        p.nblocks = 0;
        for (uint32_t s = 0; s < n; s++)
            if (live[s]) p.blk[s] = p.nblocks++;
        for (uint32_t s = 0; s < n; s++)
            if (!live[s]) p.blk[s] = p.nblocks;
        p.blk[sink] = p.nblocks++;
        goto refined;
    }
    uint32_t maxd = 0, nlive = 0;
    for (uint32_t s = 0; s < n; s++)
        if (live[s]) {
            nlive++;
            if (rdist[s] > maxd) maxd = rdist[s];
        }
    uint32_t *cnt = snap; /* maxd + 2 <= nlive + 1 <= N entries */
    memset(cnt, 0, ((size_t)maxd + 2) * sizeof *cnt);
    for (uint32_t s = 0; s < n; s++)
        if (live[s]) cnt[rdist[s] + 1]++;
    for (uint32_t x = 0; x <= maxd; x++) cnt[x + 1] += cnt[x];
    uint32_t nr = nlive; /* the rest after the live states */
    for (uint32_t s = 0; s < N; s++) {
        uint32_t at = s < n && live[s] ? cnt[rdist[s]]++ : nr++;
        p.elems[at] = s;
        p.pos[s] = at;
    }
    p.nblocks = 0;
    for (uint32_t i = 0, j; i < nlive; i = j) {
        for (j = i + 1; j < nlive && rdist[p.elems[j]] == rdist[p.elems[i]];) j++;
        p.bstart[p.nblocks] = i, p.bend[p.nblocks] = j;
        for (uint32_t x = i; x < j; x++) p.blk[p.elems[x]] = p.nblocks;
        push_work(&p, p.nblocks++);
    }
    p.bstart[p.nblocks] = nlive, p.bend[p.nblocks] = N; /* the rest, the sink last */
    for (uint32_t x = nlive; x < N; x++) p.blk[p.elems[x]] = p.nblocks;
    p.nblocks++;

    while (p.nwork) {
        uint32_t a = p.work[--p.nwork];
        p.inw[a] = 0;
        uint32_t sn = 0;
        for (uint32_t i = p.bstart[a]; i < p.bend[a]; i++) snap[sn++] = p.elems[i];
        /* Predecessors of the splitter, grouped by class (counting sort over
         * the classes they use only: a small splitter has few, and the
         * coarsest partition does not depend on the order of the classes). */
        uint32_t ncl = 0, sum = 0;
        for (uint32_t i = 0; i < sn; i++)
            for (uint32_t j = ioff[snap[i]]; j < ioff[snap[i] + 1]; j++)
                if (ccount[icls[j]]++ == 0) cls[ncl++] = icls[j];
        for (uint32_t t = 0; t < ncl; t++) {
            uint32_t c = cls[t], x = ccount[c];
            cstart[c] = ccount[c] = sum;
            sum += x;
        }
        for (uint32_t i = 0; i < sn; i++)
            for (uint32_t j = ioff[snap[i]]; j < ioff[snap[i] + 1]; j++) pre[ccount[icls[j]]++] = isrc[j];
        /* class c's run is now pre[cstart[c] .. ccount[c]) */
        for (uint32_t t = 0; t < ncl; t++) {
            uint32_t c = cls[t], lo = cstart[c], hi = ccount[c], nt = 0;
            ccount[c] = 0;
            for (uint32_t i = lo; i < hi; i++) {
                uint32_t s = pre[i], b = p.blk[s];
                uint32_t mpos = p.bstart[b] + p.bmark[b];
                if (p.pos[s] < mpos) continue; /* already marked */
                if (p.bmark[b] == 0) touched[nt++] = b;
                /* swap s into the marked prefix */
                uint32_t other = p.elems[mpos];
                p.elems[mpos] = s, p.elems[p.pos[s]] = other;
                p.pos[other] = p.pos[s], p.pos[s] = mpos;
                p.bmark[b]++;
            }
            for (uint32_t i = 0; i < nt; i++) split_block(&p, touched[i]);
        }
    }

refined:;
    /* BFS renumbering over blocks, skipping the sink's block. */
    uint32_t dead = p.blk[sink];
    newid = malloc(p.nblocks * sizeof *newid);
    order = malloc(p.nblocks * sizeof *order); /* new id -> a representative state */
    if (!newid || !order) { st = oom(err); goto done; }
    for (uint32_t b = 0; b < p.nblocks; b++) newid[b] = -2; /* not met yet */
    uint32_t m = 0;
    newid[p.blk[raw->start]] = (int32_t)m;
    order[m++] = (int32_t)raw->start;
    /* The table is sized for every block; the BFS meets at most that many
     * (the sink's block it skips). */
    d = calloc(1, sizeof *d);
    if (!d) { st = oom(err); goto done; }
    d->trans = malloc((size_t)p.nblocks * k * sizeof *d->trans);
    if (!d->trans) { st = oom(err); goto done; }
    /* bmap[t]: the block of raw state t in the completed DFA (the sink's
       when t cannot reach acceptance), in the splitter scratch (N entries) */
    uint32_t *bmap = snap;
    for (uint32_t t = 0; t < n; t++) bmap[t] = live[t] ? p.blk[t] : dead;
    /* Rows are written in BFS order, so a target block's new id is known
     * when a row first names it: each row is written once, final, and the
     * columns hashed on the way (sv_dfa_column_hashes). */
    newid[dead] = SV_DFA_DEAD;
    uint64_t h[256];
    for (uint32_t c = 0; c < k; c++) h[c] = 0;
    for (uint32_t q = 0; q < m; q++) {
        const int32_t *rrow = raw->trans + (size_t)order[q] * k;
        int32_t *row = d->trans + (size_t)q * k;
        for (uint32_t c = 0; c < k; c++) {
            if (c + 8 <= k && sv_dead_run8(rrow + c)) {
                memset(row + c, 0xFF, 8 * sizeof *row); /* SV_DFA_DEAD */
                c += 7;
                continue;
            }
            int32_t t = rrow[c], v = SV_DFA_DEAD;
            if (t >= 0) {
                uint32_t b = bmap[t];
                if (newid[b] == -2) newid[b] = (int32_t)m, order[m++] = t;
                v = newid[b];
                if (v >= 0) h[c] += cell_hash(q, v);
            }
            row[c] = v;
        }
    }
    d->nstates = m;
    d->accept = calloc(m, 1);
    if (!d->accept) { st = oom(err); goto done; }
    for (uint32_t q = 0; q < m; q++) d->accept[q] = raw->accept[order[q]];
    /* distances from the trim's BFS (sv_dfa_analyze then keeps them) */
    d->dist = malloc((size_t)m * sizeof *d->dist);
    if (!d->dist) { st = oom(err); goto done; }
    for (uint32_t q = 0; q < m; q++) d->dist[q] = rdist[order[q]];
    /* Coarsen classes: merge classes whose columns are now equal. */
    {
        int32_t cmap[256];
        uint32_t repc[256];
        uint32_t nc = merge_columns(d->trans, m, k, cmap, repc, h, true);
        if (nc < k) {
            /* in place, row by row: row q's new cells never pass its old
               ones (repc[j] >= j), and no fresh table faults in */
            for (uint32_t q = 0; q < m; q++)
                for (uint32_t j = 0; j < nc; j++) d->trans[(size_t)q * nc + j] = d->trans[(size_t)q * k + repc[j]];
        }
        if (nc < k || m < p.nblocks) { /* the table was sized for every block and every class */
            int32_t *t2 = realloc(d->trans, (size_t)m * nc * sizeof *t2);
            if (t2) d->trans = t2;
        }
        d->nclasses = nc;
        bool seen[256] = {false};
        for (int b = 0; b < 256; b++) {
            uint8_t c = (uint8_t)cmap[raw->classes[b]];
            d->classes[b] = c;
            if (!seen[c]) seen[c] = true, d->class_rep[c] = (uint8_t)b;
        }
        /* The fingerprint (dfa_cache.c) from the columns just hashed: the
         * final table's columns are the representatives'. */
        uint64_t colh[256];
        for (uint32_t j = 0; j < nc; j++) colh[j] = h[repc[j]];
        atomic_store_explicit(&d->fp, sv_dfa_fingerprint_of(d, colh), memory_order_relaxed);
    }
    if ((st = sv_dfa_analyze(d, err)) || (st = sv_dfa_charge(d, err))) goto done;
    *out = d;
    d = NULL;
done:
    sv_dfa_destroy(d);
    free(live);
    free(rdist);
    free(ioff);
    free(isrc);
    free(icls);
    free(ifill);
    free(p.elems);
    free(p.pos);
    free(p.blk);
    free(p.bstart);
    free(p.bend);
    free(p.bmark);
    free(p.inw);
    free(p.work);
    free(snap);
    free(ccount);
    free(pre);
    free(touched);
    free(newid);
    free(order);
    return st;
}
