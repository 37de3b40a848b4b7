/* workers.h — a fixed set of threads taking jobs from their owner's queue.
 *
 * The owner keeps the queue and the lock that guards it; the workers keep
 * only the threads, one condition variable and a stop flag. Each worker
 * loops: under the owner's lock, take a job (the take callback), or sleep
 * until sv_workers_wake or stop; then, without the lock, run it (the run
 * callback). What a job is, how the queue orders, drops or cancels jobs,
 * and what is counted after one are the owner's. Users: the mask
 * prefetcher (src/engine/prefetch.c).
 *
 * Threads: take runs on a worker with the owner's lock held and must not
 * block; run runs on a worker without it (it may take the lock to account
 * for the job). A worker that sees stop exits before taking another job; a
 * job already running finishes first. Jobs left in the queue at stop stay
 * there, the owner's to free. */
#ifndef SV_UTIL_WORKERS_H
#define SV_UTIL_WORKERS_H

#include <pthread.h>
#include <stdint.h>

#include "error.h"

typedef struct sv_workers sv_workers_t;

/* Under the owner's lock: the next job for worker i (0 .. n-1), taken off
 * the queue, or NULL when there is none. */
typedef void *(*sv_workers_take_fn)(void *owner, uint32_t i);
/* Without the lock: runs job on worker i. */
typedef void (*sv_workers_run_fn)(void *owner, uint32_t i, void *job);
/* Optional: once on worker i's thread before its first job (its
 * priority, say). */
typedef void (*sv_workers_start_fn)(void *owner, uint32_t i);

typedef struct {
    uint32_t n;                /* threads, >= 1 */
    pthread_mutex_t *lock;     /* borrowed: the owner's, guarding its queue; outlives the workers */
    sv_workers_take_fn take;
    sv_workers_run_fn run;
    sv_workers_start_fn start; /* or NULL */
    void *owner;               /* passed to the callbacks */
} sv_workers_config_t;

/* Starts cfg->n threads, which may call take at once: the owner's queue
 * must be ready. On failure no thread is left running, *out is NULL and
 * err says why (SV_ERR_ARG for n == 0, SV_ERR_NOMEM when a thread cannot
 * start). The caller frees the result with sv_workers_destroy. */
sv_status sv_workers_create(const sv_workers_config_t *cfg, sv_workers_t **out, sv_error_t *err);

/* With the owner's lock held, after queueing one job: wakes one sleeping
 * worker. */
void sv_workers_wake(sv_workers_t *w);

/* With the owner's lock held: tells every worker to exit (after the job it
 * runs) and wakes them all; no job is taken after it. For owners that must
 * change their own state in the same critical section as the stop. */
void sv_workers_stop_locked(sv_workers_t *w);

/* Without the lock: stops the workers (if sv_workers_stop_locked did not),
 * waits for every thread to exit and frees w. NULL is a no-op. */
void sv_workers_destroy(sv_workers_t *w);

#endif
