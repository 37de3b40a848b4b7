/* determinize.c — subset construction from the Thompson NFA to a DFA.
 *
 * Bytes are first partitioned into intervals that no NFA byte range splits
 * (at most 256, usually a few dozen); the DFA is built over those classes.
 * A DFA state is the set of "important" NFA states (byte-consuming ones)
 * reachable by epsilon moves, plus an accept flag; sets are interned in a
 * hash table over a shared pool of sorted state lists.
 *
 * Zero-width assertions ride on the epsilon closure. `^` is crossed only in
 * the closure of the start state (position 0). `$` is crossed into an
 * "at-end" mode in which no byte may follow: states reached in that mode only
 * decide whether the DFA state accepts. Whole-string semantics therefore hold
 * for `^` and `$` anywhere: `a|^b$`, `(^|x)y`, `a$b` (empty).
 *
 * Costs: each DFA state costs one closure per distinct successor set. The
 * budgets (states, memory, wall time) are checked as states are created, so
 * an exponential blow-up such as `(a|b)*a(a|b){30}` ends with SV_ERR_BUDGET
 * after at most max_dfa_states states. */
#include <stdlib.h>
#include <string.h>

#include "util/memacct.h"
#include "util/clock.h"
#include "util/hash.h"
#include "fsm/internal/dfa_internal.h"

typedef struct {
    const sv_nfa_t *nfa;
    const sv_fsm_limits_t *lim;
    uint64_t deadline_ns;  /* 0 = none */
    sv_error_t *err;

    uint32_t nclasses;
    uint8_t classes[256];
    uint8_t class_lo[256];

    /* closure scratch */
    uint32_t *mark, *mark_eol; /* generation stamps, per NFA state */
    uint32_t gen;
    int32_t *stack;            /* entries are state<<1 | eol */
    int32_t *set;              /* result set under construction */
    int32_t *sort_tmp;         /* (n) radix sort scratch */
    uint32_t nset;

    /* interned sets */
    int32_t *pool;
    size_t npool, cappool;
    size_t *set_off;
    uint32_t *set_len;
    uint8_t *accept;
    uint32_t nstates, capstates;
    int32_t *trans;
    uint32_t *indeg;           /* per state, the moves into it (sv_rawdfa_t) */
    uint32_t *table;           /* open addressing: DFA id + 1, 0 = empty */
    uint32_t tcap;
} det_t;

/* Sorts the non-negative ids v[0..n): insertion sort for short sets, else
 * 8-bit LSD radix passes (as many as the largest id needs) through tmp.
 * Closures are sorted once per DFA transition, so this is on the hot path,
 * and qsort's comparator calls cost more than the sorting. */
static void sort_ids(int32_t *v, uint32_t n, int32_t *tmp) {
    if (n <= 48) {
        for (uint32_t i = 1; i < n; i++) {
            int32_t x = v[i];
            uint32_t j = i;
            while (j > 0 && v[j - 1] > x) v[j] = v[j - 1], j--;
            v[j] = x;
        }
        return;
    }
    int32_t max = 0;
    for (uint32_t i = 0; i < n; i++)
        if (v[i] > max) max = v[i];
    int32_t *src = v, *dst = tmp;
    for (int shift = 0; shift < 32 && ((uint32_t)max >> shift); shift += 8) {
        uint32_t cnt[256] = {0};
        for (uint32_t i = 0; i < n; i++) cnt[((uint32_t)src[i] >> shift) & 0xFF]++;
        uint32_t sum = 0;
        for (int k = 0; k < 256; k++) {
            uint32_t c = cnt[k];
            cnt[k] = sum;
            sum += c;
        }
        for (uint32_t i = 0; i < n; i++) dst[cnt[((uint32_t)src[i] >> shift) & 0xFF]++] = src[i];
        int32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, n * sizeof *v);
}

/* Epsilon closure of seeds[0..n). Fills d->set (sorted) and returns whether
 * MATCH is reachable. */
static bool closure(det_t *d, const int32_t *seeds, uint32_t n, bool at_start) {
    const sv_nfa_state_t *s = d->nfa->s;
    uint32_t gen = ++d->gen, sp = 0;
    bool acc = false;
    d->nset = 0;
    for (uint32_t i = 0; i < n; i++) d->stack[sp++] = seeds[i] << 1;
    while (sp) {
        int32_t top = d->stack[--sp], id = top >> 1;
        bool eol = top & 1;
        uint32_t *mk = eol ? d->mark_eol : d->mark;
        if (id < 0 || mk[id] == gen) continue;
        mk[id] = gen;
        const sv_nfa_state_t *st = &s[id];
        switch (st->kind) {
        case NFA_BYTE:
            if (!eol) d->set[d->nset++] = id;
            break;
        case NFA_DFA:
            if (!eol) d->set[d->nset++] = id;
            if (st->out >= 0) d->stack[sp++] = st->out << 1 | eol; /* an accepting embedded state */
            break;
        case NFA_MATCH:
            acc = true;
            break;
        case NFA_EPS:
            if (st->out >= 0) d->stack[sp++] = st->out << 1 | eol;
            break;
        case NFA_SPLIT:
            d->stack[sp++] = st->out1 << 1 | eol;
            d->stack[sp++] = st->out << 1 | eol;
            break;
        case NFA_BOL:
            if (at_start) d->stack[sp++] = st->out << 1 | eol;
            break;
        case NFA_EOL:
            d->stack[sp++] = st->out << 1 | 1;
            break;
        }
    }
    if (d->nset > 1) sort_ids(d->set, d->nset, d->sort_tmp);
    return acc;
}

#define HASH_SEED 0x9e3779b97f4a7c15ull
#define HASH_FINISH(h) ((uint32_t)((h) ^ ((h) >> 29)))

static uint32_t hash_set(const int32_t *v, uint32_t n, bool acc) {
    uint64_t h = HASH_SEED ^ acc;
    for (uint32_t i = 0; i < n; i++) h = sv_hash_step(h, (uint32_t)v[i]);
    return HASH_FINISH(h);
}

static size_t mem_used(const det_t *d) {
    return d->cappool * sizeof *d->pool + (size_t)d->capstates * (sizeof *d->set_off + sizeof *d->set_len + 1 +
                                                                   sizeof *d->indeg + d->nclasses * sizeof *d->trans) +
           d->tcap * sizeof *d->table;
}

static sv_status budget_memory(det_t *d) {
    if (!sv_memacct_fits(mem_used(d), d->lim->max_memory))
        return sv_error_set(d->err, SV_ERR_BUDGET, -1,
                            "determinizing the constraint exceeds what is left of the compile's memory budget of %zu bytes",
                            d->lim->max_memory);
    return SV_OK;
}

static sv_status grow_table(det_t *d) {
    uint32_t cap = d->tcap ? d->tcap * 2 : 1024;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return sv_error_set(d->err, SV_ERR_NOMEM, -1, "out of memory in subset construction");
    for (uint32_t i = 0; i < d->nstates; i++) {
        uint32_t h = hash_set(d->pool + d->set_off[i], d->set_len[i], d->accept[i]) & (cap - 1);
        while (t[h]) h = (h + 1) & (cap - 1);
        t[h] = i + 1;
    }
    free(d->table);
    d->table = t;
    d->tcap = cap;
    return budget_memory(d);
}

/* Returns the DFA id of the current d->set / acc, creating it if new;
 * SV_DFA_DEAD for the empty, non-accepting set. */
static sv_status intern(det_t *d, bool acc, int32_t *id) {
    if (d->nset == 0 && !acc) { *id = SV_DFA_DEAD; return SV_OK; }
    uint32_t h = hash_set(d->set, d->nset, acc);
    for (uint32_t i = h & (d->tcap - 1);; i = (i + 1) & (d->tcap - 1)) {
        uint32_t e = d->table[i];
        if (!e) break;
        e--;
        if (d->accept[e] == acc && d->set_len[e] == d->nset &&
            memcmp(d->pool + d->set_off[e], d->set, d->nset * sizeof *d->set) == 0) {
            *id = (int32_t)e;
            return SV_OK;
        }
    }
    if (d->nstates >= d->lim->max_dfa_states)
        return sv_error_set(d->err, SV_ERR_BUDGET, -1,
                            "the constraint needs more than %u DFA states (the max_dfa_states budget); "
                            "patterns like (a|b)*a(a|b){n} grow exponentially", d->lim->max_dfa_states);
    if ((d->nstates & 63) == 0 && sv_memacct_cancelled())
        return sv_error_set(d->err, SV_ERR_CANCELLED, -1, "the compile was cancelled");
    if (d->deadline_ns && (d->nstates & 63) == 0 && sv_now_ns() > d->deadline_ns)
        return sv_error_set(d->err, SV_ERR_TIMEOUT, -1, "compiling the constraint exceeded the time budget of %llu ms",
                            (unsigned long long)((d->lim->time_budget_us ? d->lim->time_budget_us : d->lim->max_time_us) / 1000));
    if (d->nstates == d->capstates) {
        uint32_t cap = d->capstates ? d->capstates * 2 : 256;
        size_t *so = realloc(d->set_off, cap * sizeof *so);
        if (so) d->set_off = so;
        uint32_t *sl = realloc(d->set_len, cap * sizeof *sl);
        if (sl) d->set_len = sl;
        uint8_t *ac = realloc(d->accept, cap);
        if (ac) d->accept = ac;
        int32_t *tr = realloc(d->trans, (size_t)cap * d->nclasses * sizeof *tr);
        if (tr) d->trans = tr;
        uint32_t *in = realloc(d->indeg, (size_t)cap * sizeof *in);
        if (in) d->indeg = in;
        if (!so || !sl || !ac || !tr || !in)
            return sv_error_set(d->err, SV_ERR_NOMEM, -1, "out of memory in subset construction");
        d->capstates = cap;
    }
    if (!d->pool || d->npool + d->nset > d->cappool) {
        size_t cap = d->cappool ? d->cappool * 2 : 4096;
        while (cap < d->npool + d->nset) cap *= 2;
        int32_t *p = realloc(d->pool, cap * sizeof *p);
        if (!p) return sv_error_set(d->err, SV_ERR_NOMEM, -1, "out of memory in subset construction");
        d->pool = p;
        d->cappool = cap;
    }
    sv_status st = budget_memory(d);
    if (st) return st;
    uint32_t n = d->nstates++;
    if (d->nset) memcpy(d->pool + d->npool, d->set, d->nset * sizeof *d->set);
    d->set_off[n] = d->npool;
    d->set_len[n] = d->nset;
    d->accept[n] = acc;
    d->indeg[n] = 0;
    d->npool += d->nset;
    if (2 * d->nstates > d->tcap) {
        if ((st = grow_table(d))) return st;
    } else {
        uint32_t i = h & (d->tcap - 1);
        while (d->table[i]) i = (i + 1) & (d->tcap - 1);
        d->table[i] = n + 1;
    }
    *id = (int32_t)n;
    return SV_OK;
}

static void compute_classes(det_t *d) {
    bool cut[257] = {false};
    cut[0] = true;
    for (uint32_t i = 0; i < d->nfa->n; i++) {
        const sv_nfa_state_t *s = &d->nfa->s[i];
        if (s->kind != NFA_BYTE) continue;
        cut[s->lo] = true;
        cut[s->hi + 1] = true;
    }
    /* Embedded DFAs: their classes need not be intervals; cut wherever the
     * class changes, so each interval lies inside one class of every DFA. */
    for (uint32_t e = 0; e < d->nfa->nembeds; e++) {
        const uint8_t *cl = d->nfa->embeds[e].dfa->classes;
        for (int b = 1; b < 256; b++)
            if (cl[b] != cl[b - 1]) cut[b] = true;
    }
    int c = -1;
    for (int b = 0; b < 256; b++) {
        if (cut[b]) d->class_lo[++c] = (uint8_t)b;
        d->classes[b] = (uint8_t)c;
    }
    d->nclasses = (uint32_t)c + 1;
}

/* An embedded DFA's state q (an NFA state numbered from the embed's base):
 * its row over the DFA's own classes, and per inner class the outer classes
 * it stands for (outer[off[ic] .. off[ic + 1]), built in
 * sv_dfa_determinize). */
typedef struct {
    const int32_t *row;
    const uint16_t *off;
    const uint8_t *outer;
    uint32_t k;
    int32_t base;
} embed_row_t;

static embed_row_t embed_row(const sv_nfa_t *nfa, const uint16_t *embed_off, const uint8_t *embed_outer,
                             const sv_nfa_state_t *s, int32_t q) {
    const sv_nfa_embed_t *e = &nfa->embeds[s->out1];
    return (embed_row_t){e->dfa->trans + (size_t)(q - e->base) * e->dfa->nclasses, embed_off + (size_t)s->out1 * 257,
                         embed_outer + (size_t)s->out1 * 256, e->dfa->nclasses, e->base};
}

sv_status sv_dfa_determinize(const sv_nfa_t *nfa, const sv_fsm_limits_t *lim, uint64_t t0_ns, sv_rawdfa_t *out,
                             sv_error_t *err) {
    det_t d = {.nfa = nfa, .lim = lim, .err = err};
    if (lim->max_time_us) d.deadline_ns = t0_ns + lim->max_time_us * 1000;
    compute_classes(&d);
    sv_status st = SV_OK;
    uint32_t n = nfa->n;
    d.mark = calloc(n, sizeof *d.mark);
    d.mark_eol = calloc(n, sizeof *d.mark_eol);
    /* Each (state, mode) pair pushes at most two entries once marked, plus
     * at most n seeds: 5n bounds the stack. */
    d.stack = malloc(5 * (size_t)n * sizeof *d.stack + 16);
    d.set = malloc((size_t)n * sizeof *d.set + 16);
    d.sort_tmp = malloc((size_t)n * sizeof *d.sort_tmp + 16);
    int32_t *targets = malloc((size_t)n * sizeof *targets + 16);
    uint32_t *bucket_n = calloc(256, sizeof *bucket_n);
    uint32_t *bucket_off = calloc(257, sizeof *bucket_off);
    int32_t *bucket = malloc(16 * sizeof *bucket); /* never NULL below: no pointer arithmetic on NULL */
    /* the seed lists met in the current row: open addressing over a
       power of two above twice the 256 classes */
    enum { SEEN_SLOTS = 512 };
    uint32_t seen_stamp[SEEN_SLOTS] = {0}, seen_hash[SEEN_SLOTS], seen_gen = 0;
    uint8_t seen_class[SEEN_SLOTS];
    uint8_t touch[256]; /* the classes a row has a move on */
    uint64_t hacc[256];
    /* per embedded DFA, its classes' outer classes (below) */
    uint16_t *embed_off = malloc((size_t)(nfa->nembeds ? nfa->nembeds : 1) * 257 * sizeof *embed_off);
    uint8_t *embed_outer = malloc((size_t)(nfa->nembeds ? nfa->nembeds : 1) * 256);
    if (!d.mark || !d.mark_eol || !d.stack || !d.set || !d.sort_tmp || !targets || !bucket_n || !bucket_off || !bucket ||
        !embed_off || !embed_outer) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in subset construction");
        goto done;
    }
    /* Per embedded DFA: the outer classes of each of its classes,
     * grouped (ecl[eoff[ic] .. eoff[ic + 1]) for inner class ic), so that an
     * embedded state visits only the outer classes of its live moves
     * rather than testing every outer class (a string's or a key's state
     * has moves on a few of the dozens an object's automaton has). */
    for (uint32_t e = 0; e < nfa->nembeds; e++) {
        uint16_t *eoff = embed_off + (size_t)e * 257;
        uint8_t *ecl = embed_outer + (size_t)e * 256;
        const uint8_t *inner = nfa->embeds[e].dfa->classes; /* by byte: an outer class's lowest */
        memset(eoff, 0, 257 * sizeof *eoff);
        for (uint32_t c = 0; c < d.nclasses; c++) eoff[inner[d.class_lo[c]] + 1]++;
        for (uint32_t ic = 0; ic < 256; ic++) eoff[ic + 1] += eoff[ic];
        uint16_t fill[256];
        memcpy(fill, eoff, sizeof fill);
        for (uint32_t c = 0; c < d.nclasses; c++) ecl[fill[inner[d.class_lo[c]]]++] = (uint8_t)c;
    }
    if ((st = grow_table(&d))) goto done;

    int32_t start_seed = nfa->start, start;
    bool acc = closure(&d, &start_seed, 1, true);
    if ((st = intern(&d, acc, &start))) goto done;
    size_t bucket_cap = 16;
    for (uint32_t cur = 0; cur < d.nstates; cur++) {
        const int32_t *set = d.pool + d.set_off[cur];
        uint32_t len = d.set_len[cur];
        /* Bucket each important state's target by the classes its range
         * covers (an embedded DFA's state: the classes it has a move on),
         * noting the classes touched: in an object's automaton most states
         * touch one or two classes of dozens, and only those are visited
         * below; the row starts all dead. */
        memset(d.trans + (size_t)cur * d.nclasses, 0xFF, d.nclasses * sizeof *d.trans); /* SV_DFA_DEAD */
        uint32_t ntouch = 0;
        size_t total = 0;
        for (uint32_t i = 0; i < len; i++) {
            const sv_nfa_state_t *s = &nfa->s[set[i]];
            if (s->kind == NFA_DFA) {
                embed_row_t r = embed_row(nfa, embed_off, embed_outer, s, set[i]);
                for (uint32_t ic = 0; ic < r.k; ic++) {
                    if (r.row[ic] < 0) continue;
                    for (uint32_t j = r.off[ic]; j < r.off[ic + 1]; j++) {
                        uint32_t c = r.outer[j];
                        if (bucket_n[c]++ == 0) touch[ntouch++] = (uint8_t)c;
                        total++;
                    }
                }
                continue;
            }
            for (uint32_t c = d.classes[s->lo]; c <= d.classes[s->hi]; c++) {
                if (bucket_n[c]++ == 0) touch[ntouch++] = (uint8_t)c;
                total++;
            }
        }
        if (total > bucket_cap) {
            int32_t *b = realloc(bucket, total * sizeof *b);
            if (!b) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory in subset construction"); goto done; }
            bucket = b;
            bucket_cap = total;
        }
        /* each class's seed list is hashed as it fills (as hash_set would) */
        uint32_t run = 0;
        for (uint32_t t = 0; t < ntouch; t++) {
            uint32_t c = touch[t];
            bucket_off[c] = run;
            run += bucket_n[c];
            bucket_n[c] = 0;
            hacc[c] = HASH_SEED;
        }
        for (uint32_t i = 0; i < len; i++) {
            const sv_nfa_state_t *s = &nfa->s[set[i]];
            if (s->kind == NFA_DFA) {
                embed_row_t r = embed_row(nfa, embed_off, embed_outer, s, set[i]);
                for (uint32_t ic = 0; ic < r.k; ic++) {
                    if (r.row[ic] < 0) continue;
                    int32_t t = r.base + r.row[ic];
                    for (uint32_t j = r.off[ic]; j < r.off[ic + 1]; j++) {
                        uint32_t c = r.outer[j];
                        bucket[bucket_off[c] + bucket_n[c]++] = t;
                        hacc[c] = sv_hash_step(hacc[c], (uint32_t)t);
                    }
                }
                continue;
            }
            for (uint32_t c = d.classes[s->lo]; c <= d.classes[s->hi]; c++) {
                bucket[bucket_off[c] + bucket_n[c]++] = s->out;
                hacc[c] = sv_hash_step(hacc[c], (uint32_t)s->out);
            }
        }
        /* Classes with the same seeds (in the same order, since buckets fill
         * in set order) go to the same state: one closure per distinct list,
         * found through a table of the lists seen in this row (by hash; the
         * stamp clears it for the next row). */
        if (++seen_gen == 0) memset(seen_stamp, 0, sizeof seen_stamp), seen_gen = 1;
        for (uint32_t t = 0; t < ntouch; t++) {
            uint32_t c = touch[t], m = bucket_n[c];
            const int32_t *seeds = bucket + bucket_off[c];
            uint32_t h = HASH_FINISH(hacc[c]);
            int32_t next = 0;
            bool found = false;
            uint32_t slot = h & (SEEN_SLOTS - 1);
            for (; seen_stamp[slot] == seen_gen; slot = (slot + 1) & (SEEN_SLOTS - 1)) {
                uint32_t c2 = seen_class[slot];
                if (seen_hash[slot] == h && bucket_n[c2] == m &&
                    memcmp(seeds, bucket + bucket_off[c2], m * sizeof *seeds) == 0) {
                    next = d.trans[(size_t)cur * d.nclasses + c2];
                    found = true;
                    break;
                }
            }
            if (!found) {
                seen_stamp[slot] = seen_gen, seen_hash[slot] = h, seen_class[slot] = (uint8_t)c;
                memcpy(targets, seeds, m * sizeof *seeds);
                bool a = closure(&d, targets, m, false);
                if ((st = intern(&d, a, &next))) goto done;
            }
            d.trans[(size_t)cur * d.nclasses + c] = next;
            if (next >= 0) d.indeg[next]++;
        }
        for (uint32_t t = 0; t < ntouch; t++) bucket_n[touch[t]] = 0;
    }
    out->nstates = d.nstates;
    out->nclasses = d.nclasses;
    memcpy(out->classes, d.classes, 256);
    out->trans = d.trans;
    out->accept = d.accept;
    out->start = start;
    out->indeg = d.indeg;
    d.trans = NULL;
    d.accept = NULL;
    d.indeg = NULL;
done:
    free(embed_off);
    free(embed_outer);
    free(d.mark);
    free(d.mark_eol);
    free(d.stack);
    free(d.set);
    free(d.sort_tmp);
    free(targets);
    free(bucket_n);
    free(bucket_off);
    free(bucket);
    free(d.pool);
    free(d.set_off);
    free(d.set_len);
    free(d.accept);
    free(d.trans);
    free(d.indeg);
    free(d.table);
    return st;
}

void sv_rawdfa_free(sv_rawdfa_t *r) {
    if (!r) return;
    free(r->trans);
    free(r->accept);
    free(r->indeg);
    memset(r, 0, sizeof *r);
}
