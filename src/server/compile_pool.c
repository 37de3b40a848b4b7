/* compile_pool.c — constraint lookups and compiles (see compile_pool.h).
 *
 * One mutex guards both queues and the workers' running slots; the lookup
 * thread and the compile threads are two sets of workers over it
 * (util/workers.h). A job is in
 * exactly one place: the lookup queue, the compile queue, a running slot,
 * or (briefly, between them) in the hands of the thread that took it. */
#ifdef __linux__
#define _DEFAULT_SOURCE /* syscall(SYS_gettid), for the workers' nice value */
#endif
#include "compile_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "util/clock.h"
#include "util/memacct.h"
#include "util/workers.h"

#define LOOKUP_QUEUE_MAX 4096

typedef struct job {
    struct job *next;
    uint64_t id;
    _Atomic bool cancel;
    bool looked_up; /* the lookup thread has missed it: it is a compile */
    sv_constraint_spec_t spec; /* its text and opts are the two below */
    char *text;
    sv_schema_opts_t opts;
    sv_cpool_cb cb;
    void *ud;
    uint64_t t0;
} job_t;

typedef struct {
    job_t *head, *tail;
    uint32_t n;
} queue_t;

struct sv_cpool {
    sv_constraint_cache_t *cache;
    pthread_mutex_t mu;
    queue_t lookups, compiles;
    uint32_t queue_max;
    job_t **running; /* per worker: the job it compiles, or NULL */
    uint64_t next_id, refused, cancelled;
    bool stop;                /* submits and misses are refused */
    uint32_t n_threads;       /* compile threads (running's length) */
    sv_workers_t *compilers;  /* n_threads, over mu, taking compiles */
    sv_workers_t *lookup;     /* one, over mu, taking lookups */
    sv_memacct_pool_t mem;
};

static void push(queue_t *q, job_t *j) {
    j->next = NULL;
    if (q->tail) q->tail->next = j;
    else q->head = j;
    q->tail = j;
    q->n++;
}

static void push_front(queue_t *q, job_t *j) {
    j->next = q->head;
    q->head = j;
    if (!q->tail) q->tail = j;
    q->n++;
}

static job_t *pop(queue_t *q) {
    job_t *j = q->head;
    if (!j) return NULL;
    q->head = j->next;
    if (!q->head) q->tail = NULL;
    q->n--;
    j->next = NULL;
    return j;
}

/* Unlinks job id from q; NULL when it is not there. */
static job_t *unlink_id(queue_t *q, uint64_t id) {
    job_t *prev = NULL;
    for (job_t *j = q->head; j; prev = j, j = j->next) {
        if (j->id != id) continue;
        if (prev) prev->next = j->next;
        else q->head = j->next;
        if (q->tail == j) q->tail = prev;
        q->n--;
        j->next = NULL;
        return j;
    }
    return NULL;
}

static void job_free(job_t *j) {
    free(j->text);
    free(j);
}

static void finish(job_t *j, sv_constraint_t *c, bool hit, const sv_error_t *err) {
    j->cb(j->ud, c, hit, (sv_now_ns() - j->t0) / 1000, err);
    job_free(j);
}

static void finish_error(job_t *j, sv_status code, const char *msg) {
    sv_error_t err;
    sv_error_set(&err, code, -1, "%s", msg);
    finish(j, NULL, false, &err);
}

/* ---- the lookup thread ---- */

/* Under p->mu. */
static void *take_lookup(void *owner, uint32_t i) {
    (void)i;
    return pop(&((sv_cpool_t *)owner)->lookups);
}

static void run_lookup(void *owner, uint32_t i, void *job) {
    sv_cpool_t *p = owner;
    job_t *j = job;
    (void)i;
    if (atomic_load(&j->cancel)) {
        finish_error(j, SV_ERR_CANCELLED, "the request went away before its constraint was ready");
        return;
    }
    if (!j->looked_up) {
        sv_error_t err;
        sv_error_clear(&err);
        sv_constraint_t *c = NULL;
        sv_status st = sv_constraint_find(p->cache, &j->spec, &c, &err);
        if (st || c) {
            if (st && err.code == SV_OK) err.code = st;
            finish(j, c, c != NULL, &err);
            return;
        }
        j->looked_up = true;
    }
    /* A miss: to the compile queue, if it has room. */
    pthread_mutex_lock(&p->mu);
    bool room = p->compiles.n < p->queue_max && !p->stop;
    if (room) {
        push(&p->compiles, j);
        sv_workers_wake(p->compilers);
    } else {
        p->refused++;
    }
    uint32_t waiting = p->compiles.n;
    pthread_mutex_unlock(&p->mu);
    if (!room) {
        sv_error_t err;
        sv_error_set(&err, SV_ERR_CAPACITY, -1, "%u constraints are waiting to compile; retry later", waiting);
        finish(j, NULL, false, &err);
    }
}

/* ---- the compile threads ---- */

static void start_compiler(void *owner, uint32_t slot) {
    (void)owner, (void)slot;
#ifdef __linux__
    /* Compiles yield the CPU to decoding and HTTP: a flood of slow schemas
     * must not slow the requests whose constraints are cached (on Linux a
     * thread's nice value is its own). */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
#endif
}

/* Under p->mu: the oldest compile, into the worker's running slot. */
static void *take_compile(void *owner, uint32_t slot) {
    sv_cpool_t *p = owner;
    job_t *j = pop(&p->compiles);
    if (j) p->running[slot] = j;
    return j;
}

static void run_compile(void *owner, uint32_t slot, void *job) {
    sv_cpool_t *p = owner;
    job_t *j = job;
    uint64_t t0 = sv_now_ns();
    sv_error_t err;
    sv_error_clear(&err);
    sv_constraint_t *c = NULL;
    bool hit = false;
    /* The compile's memory goes to the pool's account, and it stops at
     * its next time check once the job is cancelled (util/memacct.h). */
    sv_memacct_thread_setup(&p->mem, &j->cancel);
    sv_status st = sv_constraint_get(p->cache, &j->spec, &c, &hit, &err);
    sv_memacct_thread_setup(NULL, NULL);
    if (st && err.code == SV_OK) err.code = st;
    uint64_t us = (sv_now_ns() - t0) / 1000;

    pthread_mutex_lock(&p->mu);
    p->running[slot] = NULL;
    if (st == SV_ERR_CAPACITY) p->refused++;
    bool idle = p->compiles.n == 0;
    for (uint32_t i = 0; idle && i < p->n_threads; i++) idle = !p->running[i];
    pthread_mutex_unlock(&p->mu);
    finish(j, st ? NULL : c, hit, &err);
#ifdef __GLIBC__
    /* A compile that failed, or ran long, has freed what it built (its
     * arena and automata): hand the pages back to the system, so one
     * big schema does not leave the server holding gigabytes. So does
     * the last compile before the pool goes idle: what the compiles in
     * a burst freed goes back once, not after each. */
    if (!hit && (st || us > 100000 || idle)) malloc_trim(0);
#endif
}

sv_status sv_cpool_create(const sv_cpool_config_t *cfg, sv_constraint_cache_t *cache, sv_cpool_t **out,
                          sv_error_t *err) {
    *out = NULL;
    if (cfg->threads == 0 || cfg->threads > 64) return sv_error_set(err, SV_ERR_ARG, -1, "compile threads: 1 to 64");
    sv_cpool_t *p = calloc(1, sizeof *p);
    if (!p) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    p->cache = cache;
    p->queue_max = cfg->queue ? cfg->queue : 1;
    p->mem.limit = cfg->memory;
    p->next_id = 1;
    pthread_mutex_init(&p->mu, NULL);
    p->n_threads = cfg->threads;
    p->running = calloc(cfg->threads, sizeof *p->running);
    if (!p->running) goto fail;
    /* the compile threads first: a lookup's miss wakes them */
    sv_workers_config_t wc = {.n = cfg->threads, .lock = &p->mu, .take = take_compile, .run = run_compile,
                              .start = start_compiler, .owner = p};
    sv_workers_config_t lc = {.n = 1, .lock = &p->mu, .take = take_lookup, .run = run_lookup, .owner = p};
    sv_error_t werr;
    if (sv_workers_create(&wc, &p->compilers, &werr) || sv_workers_create(&lc, &p->lookup, &werr)) goto fail;
    *out = p;
    return SV_OK;
fail:
    sv_cpool_destroy(p);
    return sv_error_set(err, SV_ERR_NOMEM, -1, "compile pool: cannot start its threads");
}

uint64_t sv_cpool_submit(sv_cpool_t *p, const sv_constraint_spec_t *spec, sv_cpool_cb cb, void *ud) {
    job_t *j = calloc(1, sizeof *j);
    if (!j) return 0;
    j->text = malloc(spec->len + 1);
    if (!j->text) {
        free(j);
        return 0;
    }
    memcpy(j->text, spec->text, spec->len);
    j->text[spec->len] = 0;
    if (spec->opts) j->opts = *spec->opts;
    else sv_schema_opts_default(&j->opts);
    j->spec = *spec;
    j->spec.text = j->text;
    j->spec.opts = &j->opts;
    j->cb = cb;
    j->ud = ud;
    j->t0 = sv_now_ns();
    atomic_init(&j->cancel, false);
    pthread_mutex_lock(&p->mu);
    if (p->stop || p->lookups.n >= LOOKUP_QUEUE_MAX) {
        pthread_mutex_unlock(&p->mu);
        job_free(j);
        return 0;
    }
    uint64_t id = j->id = p->next_id++;
    push(&p->lookups, j);
    sv_workers_wake(p->lookup);
    pthread_mutex_unlock(&p->mu);
    return id;
}

void sv_cpool_cancel(sv_cpool_t *p, uint64_t id) {
    if (!id) return;
    pthread_mutex_lock(&p->mu);
    job_t *j = unlink_id(&p->lookups, id);
    if (!j) j = unlink_id(&p->compiles, id);
    if (j) {
        /* Waiting: its callback runs now, on the lookup thread. */
        atomic_store(&j->cancel, true);
        push_front(&p->lookups, j);
        sv_workers_wake(p->lookup);
        p->cancelled++;
    } else {
        for (uint32_t i = 0; i < p->n_threads; i++)
            if (p->running[i] && p->running[i]->id == id && !atomic_load(&p->running[i]->cancel)) {
                atomic_store(&p->running[i]->cancel, true);
                p->cancelled++;
            }
    }
    pthread_mutex_unlock(&p->mu);
}

void sv_cpool_stats(sv_cpool_t *p, sv_cpool_stats_t *st) {
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&p->mu);
    st->waiting = p->compiles.n;
    for (uint32_t i = 0; i < p->n_threads; i++) st->running += p->running[i] != NULL;
    st->refused = p->refused;
    st->cancelled = p->cancelled;
    pthread_mutex_unlock(&p->mu);
    st->memory_in_use = atomic_load(&p->mem.used);
}

void sv_cpool_destroy(sv_cpool_t *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    if (p->compilers) sv_workers_stop_locked(p->compilers);
    if (p->lookup) sv_workers_stop_locked(p->lookup);
    pthread_mutex_unlock(&p->mu);
    sv_workers_destroy(p->lookup);
    sv_workers_destroy(p->compilers);
    for (queue_t *q = &p->lookups; q; q = q == &p->lookups ? &p->compiles : NULL)
        for (job_t *j; (j = pop(q));) job_free(j);
    free(p->running);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
