/* dfa.c — the canonical DFA: accessors, analysis (distances, forced
 * chains), random sampling and structural comparison. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>

#include "util/memacct.h"
#include "fsm/internal/dfa_internal.h"

void sv_fsm_limits_default(sv_fsm_limits_t *lim) {
    lim->max_nfa_states = 2000000;
    lim->max_dfa_states = 200000;
    lim->max_memory = (size_t)256 << 20;
    lim->max_time_us = 10 * 1000 * 1000;
    lim->time_budget_us = 0;
}

static sv_status over_budget(size_t n, sv_error_t *err) {
    return sv_error_set(err, SV_ERR_BUDGET, -1,
                        "the compile's automata exceed its memory budget (%zu more bytes would not fit)", n);
}

sv_status sv_dfa_charge(sv_dfa_t *d, sv_error_t *err) {
    if (d->holds || d->charged) return SV_OK; /* charged already */
    size_t n = sv_dfa_memory(d);
    sv_dfa_tables_t *t = d->tables;
    uint64_t cur = sv_memacct_current();
    if (t && cur) {
        pthread_mutex_lock(&t->lock);
        bool first = !t->holders;
        if (first || t->acct == cur) {
            /* The struct is d's own (a memo hit allocates one: a compile
             * that makes 100,000 hits keeps 50 MiB of them); the tables
             * are charged with the first holder, released with the last. */
            if (!sv_memacct_charge(first ? n : sizeof *d, &d->acct)) {
                pthread_mutex_unlock(&t->lock);
                return over_budget(n, err);
            }
            if (first) {
                t->acct = d->acct;
                t->bytes = n - sizeof *d;
            }
            t->holders++;
            d->holds = true;
            d->charged = sizeof *d;
            pthread_mutex_unlock(&t->lock);
            return SV_OK;
        }
        pthread_mutex_unlock(&t->lock); /* another account's: charged in full below */
    }
    if (!sv_memacct_charge(n, &d->acct)) return over_budget(n, err);
    d->charged = d->acct ? n : 0;
    return SV_OK;
}

/* Drops what d is charged: its own, and one holder of its tables'. */
static void release_charge(sv_dfa_t *d) {
    if (d->holds) {
        sv_dfa_tables_t *t = d->tables;
        pthread_mutex_lock(&t->lock);
        if (--t->holders == 0) {
            sv_memacct_release(t->acct, t->bytes);
            t->acct = 0;
            t->bytes = 0;
        }
        pthread_mutex_unlock(&t->lock);
        d->holds = false;
    }
    sv_memacct_release(d->acct, d->charged);
    d->acct = 0;
    d->charged = 0;
}

void sv_dfa_uncharge(sv_dfa_t *d) {
    if (d) release_charge(d);
}

static void free_tables(int32_t *trans, uint8_t *accept, uint32_t *dist, uint32_t *forced_off, uint32_t *forced_len,
                        uint8_t *forced_buf) {
    free(trans);
    free(accept);
    free(dist);
    free(forced_off);
    free(forced_len);
    free(forced_buf);
}

sv_dfa_t *sv_dfa_share(sv_dfa_t *d) {
    if (d->call_off) return NULL; /* programs own their call tables */
    if (!d->tables) {
        sv_dfa_tables_t *t = malloc(sizeof *t);
        if (!t) return NULL;
        atomic_init(&t->refs, 1);
        t->trans = d->trans, t->accept = d->accept, t->dist = d->dist;
        t->forced_off = d->forced_off, t->forced_len = d->forced_len, t->forced_buf = d->forced_buf;
        pthread_mutex_init(&t->lock, NULL);
        /* d's charge for its tables becomes the tables': d their first
         * holder. */
        bool held = d->charged > sizeof *d;
        t->acct = held ? d->acct : 0;
        t->holders = held;
        t->bytes = held ? d->charged - sizeof *d : 0;
        d->holds = held;
        if (held) d->charged = sizeof *d;
        d->tables = t;
    }
    sv_dfa_t *c = malloc(sizeof *c);
    if (!c) return NULL;
    memcpy(c, d, sizeof *c);
    atomic_init(&c->fp, atomic_load(&d->fp));
    c->acct = 0;
    c->charged = 0;
    c->holds = false;
    atomic_fetch_add_explicit(&d->tables->refs, 1, memory_order_relaxed);
    return c;
}

void *sv_big_table(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge) return malloc(bytes ? bytes : 1);
    size_t rounded = (bytes + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, rounded);
    if (p) (void)madvise(p, rounded, MADV_HUGEPAGE);
    return p;
}

void sv_dfa_destroy(sv_dfa_t *d) {
    if (!d) return;
    release_charge(d);
    if (!d->tables) {
        free_tables(d->trans, d->accept, d->dist, d->forced_off, d->forced_len, d->forced_buf);
    } else if (atomic_fetch_sub_explicit(&d->tables->refs, 1, memory_order_acq_rel) == 1) {
        sv_dfa_tables_t *t = d->tables;
        free_tables(t->trans, t->accept, t->dist, t->forced_off, t->forced_len, t->forced_buf);
        pthread_mutex_destroy(&t->lock);
        free(t);
    }
    free(d->call_off);
    free(d->calls);
    free(d->bdist);
    free(d->qcrit);
    sv_keysets_free(d->ks);
    free(d);
}

size_t sv_dfa_memory(const sv_dfa_t *d) {
    size_t forced = 0;
    for (uint32_t s = 0; s < d->nstates; s++)
        if ((size_t)d->forced_off[s] + d->forced_len[s] > forced) forced = (size_t)d->forced_off[s] + d->forced_len[s];
    if (d->call_off) forced += ((size_t)d->nstates + 1) * sizeof *d->call_off + (size_t)d->ncalls * sizeof *d->calls;
    if (d->bdist) forced += (size_t)d->nstates * (sizeof *d->bdist + sizeof *d->qcrit);
    if (d->ks) forced += (size_t)d->nstates * (2 + sizeof *d->ks->reach + 4 * sizeof(uint32_t)) +
                         (size_t)d->ks->nobjs * sizeof *d->ks->objs;
    return sizeof *d + forced +
           (size_t)d->nstates * (d->nclasses * sizeof *d->trans + sizeof *d->accept + sizeof *d->dist +
                                 sizeof *d->forced_off + sizeof *d->forced_len);
}

uint32_t sv_dfa_num_states(const sv_dfa_t *d) { return d->nstates; }
uint32_t sv_dfa_num_classes(const sv_dfa_t *d) { return d->nclasses; }
const uint8_t *sv_dfa_byte_classes(const sv_dfa_t *d) { return d->classes; }
uint32_t sv_dfa_num_forced_states(const sv_dfa_t *d) { return d->nforced; }
uint32_t sv_dfa_num_parts(const sv_dfa_t *d) { return d->nparts ? d->nparts : 1; }
uint32_t sv_dfa_distance(const sv_dfa_t *d, int32_t s) { return d->dist[s]; }

int32_t sv_dfa_next(const sv_dfa_t *d, int32_t s, uint8_t b) {
    return d->trans[(size_t)s * d->nclasses + d->classes[b]];
}

bool sv_dfa_is_accepting(const sv_dfa_t *d, int32_t s) { return d->accept[s] != 0; }

bool sv_dfa_matches(const sv_dfa_t *d, const uint8_t *s, size_t n) {
    if (d->call_off) return sv_program_matches(d, s, n);
    int32_t q = 0;
    for (size_t i = 0; i < n && q >= 0; i++) q = sv_dfa_next(d, q, s[i]);
    return q >= 0 && d->accept[q];
}

size_t sv_dfa_viable_prefix(const sv_dfa_t *d, const uint8_t *s, size_t n) {
    if (d->call_off) return sv_program_viable_prefix(d, s, n);
    int32_t q = 0;
    size_t i = 0;
    for (; i < n; i++)
        if ((q = sv_dfa_next(d, q, s[i])) < 0) break;
    return i;
}

const uint8_t *sv_dfa_forced(const sv_dfa_t *d, int32_t s, uint32_t *len) {
    *len = d->forced_len[s];
    return d->forced_buf + d->forced_off[s];
}

sv_status sv_dfa_analyze(sv_dfa_t *d, sv_error_t *err) { return sv_dfa_analyze_forced(d, NULL, err); }

sv_status sv_dfa_analyze_forced(sv_dfa_t *d, const int16_t *given, sv_error_t *err) {
    uint32_t n = d->nstates, k = d->nclasses;
    bool have_dist = d->dist != NULL; /* set by minimize.c or program.c */
    if (!d->dist) d->dist = malloc(n * sizeof *d->dist);
    d->forced_off = calloc(n, sizeof *d->forced_off);
    d->forced_len = calloc(n, sizeof *d->forced_len);
    uint32_t *off = calloc((size_t)n + 1, sizeof *off), *fill = calloc(n, sizeof *fill);
    uint32_t *src = have_dist || d->call_off ? NULL : malloc(((size_t)n * k + 1) * sizeof *src);
    uint32_t *queue = malloc((n ? n : 1) * sizeof *queue);
    int32_t *next = malloc(n * sizeof *next);
    int16_t *fb = malloc(n * sizeof *fb);
    sv_status st = SV_OK;
    if (!d->dist || !d->forced_off || !d->forced_len || !off || !fill || (!src && !have_dist && !d->call_off) || !queue ||
        !next || !fb) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory analyzing the DFA");
        goto done;
    }
    /* Distance to acceptance: BFS from the accepting states over reversed
     * edges (a program's distances count calls: program.c sets them). */
    if (d->call_off || have_dist) goto forced;
    for (size_t i = 0; i < (size_t)n * k; i++)
        if (d->trans[i] >= 0) off[d->trans[i] + 1]++;
    for (uint32_t i = 0; i < n; i++) off[i + 1] += off[i];
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t c = 0; c < k; c++) {
            int32_t t = d->trans[(size_t)s * k + c];
            if (t >= 0) src[off[t] + fill[t]++] = s;
        }
    uint32_t qh = 0, qt = 0;
    for (uint32_t s = 0; s < n; s++) {
        d->dist[s] = UINT32_MAX;
        if (d->accept[s]) d->dist[s] = 0, queue[qt++] = s;
    }
    while (qh < qt) {
        uint32_t t = queue[qh++];
        for (uint32_t i = off[t]; i < off[t + 1]; i++)
            if (d->dist[src[i]] == UINT32_MAX) d->dist[src[i]] = d->dist[t] + 1, queue[qt++] = src[i];
    }
forced:;
    /* Forced chains. A trimmed DFA has no cycle of forced states (it could
     * never reach acceptance), so the chains form a forest and each state's
     * chain length is 1 + its successor's. */
    uint32_t class_size[256] = {0};
    for (int b = 0; b < 256; b++) class_size[d->classes[b]]++;
    d->nforced = 0;
    for (uint32_t s = 0; s < n; s++) {
        int b = given ? given[s] : sv_dfa_forced_byte(d, s, class_size);
        fb[s] = (int16_t)b;
        next[s] = b < 0 ? -1 : sv_dfa_next(d, (int32_t)s, (uint8_t)b);
        if (b >= 0) d->nforced++;
    }
    /* Lengths: walk each chain once, then unwind it. */
    for (uint32_t s = 0; s < n; s++) {
        if (fb[s] < 0 || d->forced_len[s]) continue;
        uint32_t depth = 0;
        int32_t q = (int32_t)s;
        while (q >= 0 && fb[q] >= 0 && !d->forced_len[q]) queue[depth++] = (uint32_t)q, q = next[q];
        uint32_t tail = (q >= 0 && fb[q] >= 0) ? d->forced_len[q] : 0;
        while (depth) d->forced_len[queue[--depth]] = ++tail;
    }
    /* Layout: heads (longest chains first) write their whole chain; every
     * state on it points at its suffix. The total is the sum of the heads'
     * lengths, i.e. linear unless many chains merge into one long tail. */
    size_t total = 0;
    for (uint32_t s = 0; s < n; s++) fill[s] = 0; /* reuse: 1 = placed */
    /* Order forced states by decreasing length with a counting pass. */
    uint32_t maxlen = 0;
    for (uint32_t s = 0; s < n; s++) if (d->forced_len[s] > maxlen) maxlen = d->forced_len[s];
    uint32_t *cnt = calloc((size_t)maxlen + 2, sizeof *cnt);
    if (!cnt) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory analyzing the DFA"); goto done; }
    for (uint32_t s = 0; s < n; s++) if (d->forced_len[s]) cnt[maxlen - d->forced_len[s] + 1]++;
    for (uint32_t i = 0; i <= maxlen; i++) cnt[i + 1] += cnt[i];
    uint32_t nf = 0;
    for (uint32_t s = 0; s < n; s++) if (d->forced_len[s]) queue[cnt[maxlen - d->forced_len[s]]++] = s, nf++;
    free(cnt);
    for (uint32_t i = 0; i < nf; i++) {
        uint32_t s = queue[i];
        if (!fill[s]) {
            total += d->forced_len[s];
            for (int32_t q = (int32_t)s; q >= 0 && fb[q] >= 0; q = next[q]) fill[q] = 1;
        }
    }
    if (total > ((size_t)1 << 31)) {
        st = sv_error_set(err, SV_ERR_BUDGET, -1, "forced paths of the constraint exceed 2 GiB");
        goto done;
    }
    d->forced_buf = malloc(total + 1);
    if (!d->forced_buf) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory analyzing the DFA"); goto done; }
    for (uint32_t s = 0; s < n; s++) fill[s] = 0;
    size_t at = 0;
    for (uint32_t i = 0; i < nf; i++) {
        uint32_t s = queue[i];
        if (fill[s]) continue;
        for (int32_t q = (int32_t)s; q >= 0 && fb[q] >= 0; q = next[q]) {
            if (!fill[q]) fill[q] = 1, d->forced_off[q] = (uint32_t)at;
            d->forced_buf[at++] = (uint8_t)fb[q];
        }
    }
done:
    free(off);
    free(fill);
    free(src);
    free(queue);
    free(next);
    free(fb);
    return st;
}

uint8_t sv_dfa_class_byte(const sv_dfa_t *d, uint32_t c, sv_rng_t *rng) {
    uint32_t members = 0, pick;
    for (int b = 0; b < 256; b++) members += d->classes[b] == c;
    pick = (uint32_t)sv_rng_below(rng, members);
    for (int b = 0; b < 256; b++)
        if (d->classes[b] == c && pick-- == 0) return (uint8_t)b;
    return 0;
}

sv_status sv_dfa_sample(const sv_dfa_t *d, sv_rng_t *rng, uint32_t soft_len, uint8_t *buf, size_t cap, size_t *len) {
    if (d->call_off) return sv_program_sample(d, rng, soft_len, buf, cap, len);
    int32_t s = 0;
    size_t n = 0;
    uint32_t live[256];
    for (;;) {
        if (d->accept[s] && (n >= soft_len || sv_rng_below(rng, 4) == 0)) break;
        uint32_t nl = 0;
        for (uint32_t c = 0; c < d->nclasses; c++) {
            int32_t t = d->trans[(size_t)s * d->nclasses + c];
            if (t < 0) continue;
            if (n >= soft_len && d->dist[t] >= d->dist[s]) continue;
            live[nl++] = c;
        }
        if (nl == 0) break; /* accepting with no way on (or no nearer way) */
        uint8_t byte = sv_dfa_class_byte(d, live[sv_rng_below(rng, nl)], rng);
        if (n == cap) return SV_ERR_BUDGET;
        buf[n++] = (uint8_t)byte;
        s = sv_dfa_next(d, s, (uint8_t)byte);
    }
    *len = n;
    return SV_OK;
}

bool sv_dfa_equal(const sv_dfa_t *a, const sv_dfa_t *b) {
    if (a->nstates != b->nstates) return false;
    if (a->nclasses == b->nclasses && memcmp(a->classes, b->classes, sizeof a->classes) == 0)
        return memcmp(a->accept, b->accept, a->nstates) == 0 &&
               memcmp(a->trans, b->trans, (size_t)a->nstates * a->nclasses * sizeof *a->trans) == 0;
    for (uint32_t s = 0; s < a->nstates; s++) {
        if (a->accept[s] != b->accept[s]) return false;
        for (int x = 0; x < 256; x++)
            if (sv_dfa_next(a, (int32_t)s, (uint8_t)x) != sv_dfa_next(b, (int32_t)s, (uint8_t)x)) return false;
    }
    return true;
}
