/* prefetch.c — mask prefetch workers (see prefetch.h).
 *
 * One mutex guards the job ring, the per-index records and the counters;
 * the workers (util/workers.h, over this mutex) hold it only to pop a
 * job and to account for it, never while computing. A record per index
 * carries the users count that forget waits on, the budget-stop flag, a
 * forgetting flag the running jobs poll, and the set of (state, run) keys
 * whose expansion completed.
 *
 * A job: the state's mask, then one pass over its allowed tokens (normal
 * ones; EOG leads nowhere) walking each through the DFA to collect the
 * distinct successor keys (next state, whitespace run after the token), up
 * to max_states - 1 of them, then each successor's mask. The pass costs one
 * DFA walk per allowed token, no trie walk; the masks cost one trie walk
 * each, and only when unknown. */
#include "prefetch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/hash.h"
#include "util/workers.h"

enum { DONE_MAX = 1u << 16 }; /* completed keys remembered per index */

typedef struct pf_index {
    struct pf_index *next;
    sv_token_index_t *ix;
    uint32_t users;        /* jobs running on ix */
    bool exhausted;        /* the memo said SV_ERR_BUDGET */
    atomic_bool forgetting;
    uint64_t *done;        /* open addressing, key + 1 (0 = empty) */
    uint32_t done_cap, done_n;
} pf_index_t;

typedef struct job {
    pf_index_t *rec;
    int32_t state;
    uint32_t ws;
} job_t;

typedef struct worker {
    sv_prefetch_t *pf;
    job_t job;       /* the job it runs (take_job copies it off the ring) */
    uint64_t *seen;  /* (seen_cap) successor keys + 1 of the current job */
    uint32_t seen_cap;
    uint64_t *succ;  /* (max_states) successor keys in discovery order */
} worker_t;

struct sv_prefetch {
    sv_prefetch_limits_t lim;
    pthread_mutex_t mu;
    pthread_cond_t idle; /* a job ended */
    job_t *ring;         /* (lim.queue_cap) */
    uint32_t head, n;
    uint32_t active;     /* jobs running */
    pf_index_t *recs;
    sv_prefetch_stats_t st;
    worker_t *workers;   /* (n_alloc) per-thread scratch */
    uint32_t n_alloc;
    sv_workers_t *pool;  /* the threads, over mu; NULL until started */
};

static uint64_t key_of(int32_t state, uint32_t ws) { return ((uint64_t)(uint32_t)state << 32 | ws) + 1; }

/* ---- the per-index done set (under pf->mu) ---- */

static bool done_has(const pf_index_t *r, uint64_t k) {
    if (!r->done_n) return false;
    for (uint32_t i = (uint32_t)sv_hash_u64(k) & (r->done_cap - 1);; i = (i + 1) & (r->done_cap - 1)) {
        if (r->done[i] == k) return true;
        if (!r->done[i]) return false;
    }
}

static void done_add(pf_index_t *r, uint64_t k) {
    if (r->done_n >= DONE_MAX || done_has(r, k)) return;
    if ((r->done_n + 1) * 2 > r->done_cap) {
        uint32_t cap = r->done_cap ? r->done_cap * 2 : 64;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t) return; /* only a missed shortcut */
        for (uint32_t j = 0; j < r->done_cap; j++)
            if (r->done[j]) {
                uint32_t i = (uint32_t)sv_hash_u64(r->done[j]) & (cap - 1);
                while (t[i]) i = (i + 1) & (cap - 1);
                t[i] = r->done[j];
            }
        free(r->done);
        r->done = t;
        r->done_cap = cap;
    }
    uint32_t i = (uint32_t)sv_hash_u64(k) & (r->done_cap - 1);
    while (r->done[i]) i = (i + 1) & (r->done_cap - 1);
    r->done[i] = k;
    r->done_n++;
}

static pf_index_t *find_rec(sv_prefetch_t *pf, const sv_token_index_t *ix) {
    for (pf_index_t *r = pf->recs; r; r = r->next)
        if (r->ix == ix) return r;
    return NULL;
}

/* Removes the queued jobs of rec, keeping the others in order. */
static void purge(sv_prefetch_t *pf, const pf_index_t *rec) {
    uint32_t cap = pf->lim.queue_cap, k = 0;
    for (uint32_t i = 0; i < pf->n; i++) {
        job_t j = pf->ring[(pf->head + i) % cap];
        if (j.rec == rec) {
            pf->st.dropped++;
            continue;
        }
        pf->ring[(pf->head + k) % cap] = j;
        k++;
    }
    pf->n = k;
}

/* ---- a job (no lock held) ---- */

/* One mask; *computed when it was unknown. SV_ERR_BUDGET stops the job. */
static sv_status ensure(sv_token_index_t *ix, int32_t state, uint32_t ws, uint64_t *computed) {
    if (sv_token_index_mask_known(ix, state, ws)) return SV_OK;
    const uint32_t *mask;
    sv_status st = sv_token_index_mask(ix, state, ws, &mask, NULL);
    if (st == SV_OK) (*computed)++;
    return st;
}

/* Runs job j; *complete when every successor's mask is known at the end. */
static sv_status run_job(worker_t *w, const job_t *j, uint64_t *computed, bool *complete) {
    sv_token_index_t *ix = j->rec->ix;
    *complete = false;
    sv_status st = ensure(ix, j->state, j->ws, computed);
    if (st) return st;
    uint32_t max_succ = w->pf->lim.max_states - 1;
    if (max_succ == 0) return SV_OK;
    const uint32_t *mask;
    if ((st = sv_token_index_mask(ix, j->state, j->ws, &mask, NULL))) return st;
    const sv_token_set_t *ts = sv_token_index_tokens(ix);
    uint32_t n_ids = sv_token_set_size(ts), cap = sv_token_index_ws_cap(ix), n_succ = 0;
    memset(w->seen, 0, (size_t)w->seen_cap * sizeof *w->seen);
    bool truncated = false;
    for (uint32_t word = 0; word < (n_ids + 31) / 32 && !truncated; word++) {
        if (atomic_load_explicit(&j->rec->forgetting, memory_order_relaxed)) return SV_OK;
        for (uint32_t bits = mask[word]; bits; bits &= bits - 1) {
            int32_t id = (int32_t)(word * 32 + (uint32_t)__builtin_ctz(bits));
            if ((uint32_t)id >= n_ids || sv_token_set_kind(ts, id) != SV_TOKKIND_NORMAL) continue;
            int32_t next = sv_token_index_next(ix, j->state, id);
            uint32_t wa = 0;
            if (next < 0 || !sv_token_index_ws_after(ix, j->ws, id, &wa)) continue;
            if (wa > cap) wa = cap;
            uint64_t k = key_of(next, wa);
            uint32_t i = (uint32_t)sv_hash_u64(k) & (w->seen_cap - 1);
            while (w->seen[i] && w->seen[i] != k) i = (i + 1) & (w->seen_cap - 1);
            if (w->seen[i]) continue;
            if (n_succ == max_succ) {
                truncated = true;
                break;
            }
            w->seen[i] = k;
            w->succ[n_succ++] = k;
        }
    }
    for (uint32_t i = 0; i < n_succ; i++) {
        if (atomic_load_explicit(&j->rec->forgetting, memory_order_relaxed)) return SV_OK;
        uint64_t k = w->succ[i] - 1;
        if ((st = ensure(ix, (int32_t)(uint32_t)(k >> 32), (uint32_t)k, computed))) return st;
    }
    *complete = !truncated;
    return SV_OK;
}

/* ---- the workers' callbacks (util/workers.h) ---- */

/* Under pf->mu: the oldest queued job, into worker i's slot. */
static void *take_job(void *owner, uint32_t i) {
    sv_prefetch_t *pf = owner;
    if (pf->n == 0) return NULL;
    worker_t *w = &pf->workers[i];
    w->job = pf->ring[pf->head];
    pf->head = (pf->head + 1) % pf->lim.queue_cap;
    pf->n--;
    w->job.rec->users++;
    pf->active++;
    return &w->job;
}

/* Without the lock: runs the job, then accounts for it under pf->mu. */
static void run_taken(void *owner, uint32_t i, void *job) {
    sv_prefetch_t *pf = owner;
    const job_t j = *(const job_t *)job;
    uint64_t computed = 0;
    bool complete = false;
    sv_status st = run_job(&pf->workers[i], &j, &computed, &complete);

    pthread_mutex_lock(&pf->mu);
    pf->st.jobs++;
    pf->st.computed += computed;
    if (st == SV_ERR_BUDGET && !j.rec->exhausted) {
        j.rec->exhausted = true;
        pf->st.budget_stops++;
        purge(pf, j.rec);
    } else if (st == SV_OK && complete && !atomic_load(&j.rec->forgetting)) {
        done_add(j.rec, key_of(j.state, j.ws));
    }
    j.rec->users--;
    pf->active--;
    pthread_cond_broadcast(&pf->idle);
    pthread_mutex_unlock(&pf->mu);
}

/* ---- the API ---- */

void sv_prefetch_limits_default(sv_prefetch_limits_t *l) {
    l->queue_cap = 64;
    l->max_states = 64;
}

sv_status sv_prefetch_create(uint32_t n_threads, const sv_prefetch_limits_t *lim, sv_prefetch_t **out,
                             sv_error_t *err) {
    *out = NULL;
    sv_prefetch_limits_t l;
    sv_prefetch_limits_default(&l);
    if (lim) l = *lim;
    if (n_threads < 1 || n_threads > SV_PREFETCH_MAX_THREADS)
        return sv_error_set(err, SV_ERR_ARG, -1, "prefetch: %u threads (1..%d)", n_threads,
                            SV_PREFETCH_MAX_THREADS);
    if (l.queue_cap < 1 || l.queue_cap > 65536 || l.max_states < 1 || l.max_states > 65536)
        return sv_error_set(err, SV_ERR_ARG, -1, "prefetch: queue_cap %u and max_states %u must be 1..65536",
                            l.queue_cap, l.max_states);
    sv_prefetch_t *pf = calloc(1, sizeof *pf);
    if (!pf) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    pf->lim = l;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&pf->mu, NULL);
    pthread_cond_init(&pf->idle, &ca);
    pthread_condattr_destroy(&ca);
    pf->ring = calloc(l.queue_cap, sizeof *pf->ring);
    pf->workers = calloc(n_threads, sizeof *pf->workers);
    if (!pf->ring || !pf->workers) goto nomem;
    pf->n_alloc = n_threads;
    uint32_t seen_cap = 16;
    while (seen_cap < 2 * l.max_states) seen_cap *= 2;
    for (uint32_t i = 0; i < n_threads; i++) {
        worker_t *w = &pf->workers[i];
        w->pf = pf;
        w->seen_cap = seen_cap;
        w->seen = calloc(seen_cap, sizeof *w->seen);
        w->succ = calloc(l.max_states, sizeof *w->succ);
        if (!w->seen || !w->succ) goto nomem;
    }
    sv_workers_config_t wc = {.n = n_threads, .lock = &pf->mu, .take = take_job, .run = run_taken, .owner = pf};
    sv_error_t werr;
    if (sv_workers_create(&wc, &pf->pool, &werr)) {
        sv_prefetch_destroy(pf);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "prefetch: cannot start a worker thread");
    }
    *out = pf;
    return SV_OK;
nomem:
    sv_prefetch_destroy(pf);
    return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
}

void sv_prefetch_destroy(sv_prefetch_t *pf) {
    if (!pf) return;
    pthread_mutex_lock(&pf->mu);
    if (pf->pool) sv_workers_stop_locked(pf->pool);
    for (pf_index_t *r = pf->recs; r; r = r->next) atomic_store(&r->forgetting, true);
    pthread_mutex_unlock(&pf->mu);
    sv_workers_destroy(pf->pool);
    for (uint32_t i = 0; i < pf->n_alloc; i++) {
        free(pf->workers[i].seen);
        free(pf->workers[i].succ);
    }
    while (pf->recs) {
        pf_index_t *r = pf->recs;
        pf->recs = r->next;
        free(r->done);
        free(r);
    }
    free(pf->workers);
    free(pf->ring);
    pthread_cond_destroy(&pf->idle);
    pthread_mutex_destroy(&pf->mu);
    free(pf);
}

void sv_prefetch_post(sv_prefetch_t *pf, sv_token_index_t *ix, int32_t state, uint32_t ws_run) {
    if (!pf || !ix || state < 0 || (uint32_t)state >= sv_token_index_num_states(ix)) return;
    uint32_t cap = sv_token_index_ws_cap(ix);
    if (ws_run > cap) ws_run = cap;
    uint64_t k = key_of(state, ws_run);
    pthread_mutex_lock(&pf->mu);
    pf_index_t *rec = find_rec(pf, ix);
    if (!rec) {
        rec = calloc(1, sizeof *rec);
        if (!rec) { /* prefetch is an optimisation: nothing is lost but time */
            pf->st.dropped++;
            goto out;
        }
        rec->ix = ix;
        atomic_init(&rec->forgetting, false);
        rec->next = pf->recs;
        pf->recs = rec;
    }
    if (rec->exhausted || atomic_load(&rec->forgetting)) {
        pf->st.dropped++;
        goto out;
    }
    if (done_has(rec, k)) {
        pf->st.skipped++;
        goto out;
    }
    uint32_t qcap = pf->lim.queue_cap;
    for (uint32_t i = 0; i < pf->n; i++) {
        const job_t *j = &pf->ring[(pf->head + i) % qcap];
        if (j->rec == rec && j->state == state && j->ws == ws_run) {
            pf->st.skipped++;
            goto out;
        }
    }
    if (pf->n == qcap) { /* drop the oldest */
        pf->head = (pf->head + 1) % qcap;
        pf->n--;
        pf->st.dropped++;
    }
    pf->ring[(pf->head + pf->n) % qcap] = (job_t){rec, state, ws_run};
    pf->n++;
    pf->st.posted++;
    sv_workers_wake(pf->pool);
out:
    pthread_mutex_unlock(&pf->mu);
}

void sv_prefetch_forget(sv_prefetch_t *pf, sv_token_index_t *ix) {
    if (!pf || !ix) return;
    pthread_mutex_lock(&pf->mu);
    pf_index_t *rec = find_rec(pf, ix);
    if (rec) {
        purge(pf, rec);
        atomic_store(&rec->forgetting, true);
        while (rec->users) pthread_cond_wait(&pf->idle, &pf->mu);
        pf_index_t **p = &pf->recs;
        while (*p != rec) p = &(*p)->next;
        *p = rec->next;
        free(rec->done);
        free(rec);
    }
    pthread_mutex_unlock(&pf->mu);
}

bool sv_prefetch_wait_idle(sv_prefetch_t *pf, uint32_t timeout_ms) {
    struct timespec until = sv_deadline_ms(timeout_ms);
    pthread_mutex_lock(&pf->mu);
    bool idle;
    while (!(idle = pf->n == 0 && pf->active == 0))
        if (pthread_cond_timedwait(&pf->idle, &pf->mu, &until)) {
            idle = pf->n == 0 && pf->active == 0;
            break;
        }
    pthread_mutex_unlock(&pf->mu);
    return idle;
}

void sv_prefetch_stats(sv_prefetch_t *pf, sv_prefetch_stats_t *st) {
    pthread_mutex_lock(&pf->mu);
    *st = pf->st;
    pthread_mutex_unlock(&pf->mu);
}
