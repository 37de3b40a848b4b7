/* compile_pool.h — the threads that get constraints for requests, off the
 * HTTP and engine threads (docs/architecture.md, "One request, end to end", step 2).
 *
 * A job is one constraint to get from the cache (src/constraint/constraint_cache.h).
 * Every job first goes to the lookup thread, which answers a cached
 * constraint at once and never waits on a compile: a request whose
 * constraint is cached does not queue behind slow compiles. A miss goes on
 * to the compile queue, where worker threads compile under the options'
 * budgets (states, time, memory); several jobs for the same key wait for one
 * compilation (the cache does that).
 *
 * Under abuse:
 *   - the compile queue is bounded: a miss past it ends with SV_ERR_CAPACITY
 *     (the server answers 429 with Retry-After);
 *   - the compiles in flight share one memory pool (util/memacct.h): a
 *     compile refused by the pool, not by its own budget, also ends with
 *     SV_ERR_CAPACITY, and its language never narrows because of the load;
 *   - a job can be cancelled (its client went away): dropped if it waits, and
 *     stopped at the compile's next time check if it runs (SV_ERR_CANCELLED).
 *
 * The job's callback runs once, on a pool thread, with the result; it must be
 * short (the server's copies the result into its request and wakes
 * libevent). */
#ifndef SV_SERVER_COMPILE_POOL_H
#define SV_SERVER_COMPILE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/constraint/constraint_cache.h"

typedef struct sv_cpool sv_cpool_t;

typedef struct sv_cpool_config {
    uint32_t threads;     /* compile workers, 1 to 64 */
    uint32_t queue;       /* compiles waiting for a worker before SV_ERR_CAPACITY (>= 1) */
    size_t memory;        /* bytes for all compiles in flight together; 0: no shared bound */
} sv_cpool_config_t;

typedef struct sv_cpool_stats {
    uint32_t waiting;     /* compiles queued */
    uint32_t running;     /* compiles on a worker */
    size_t memory_in_use; /* charged to the shared pool now */
    uint64_t refused;     /* jobs ended with SV_ERR_CAPACITY (queue or memory) */
    uint64_t cancelled;   /* jobs cancelled (waiting or running) */
} sv_cpool_stats_t;

/* On success c is held by the callee (release with sv_constraint_release);
 * on failure c is NULL and err says why. us: the wall time of the job. */
typedef void (*sv_cpool_cb)(void *ud, sv_constraint_t *c, bool hit, uint64_t us, const sv_error_t *err);

/* cache and tokens are borrowed. */
sv_status sv_cpool_create(const sv_cpool_config_t *cfg, sv_constraint_cache_t *cache, sv_cpool_t **out,
                          sv_error_t *err);

/* Copies spec's text and opts (its tokens are borrowed). Returns the job's
 * id (never 0), or 0 (callback never called) when the pool is stopping, its
 * lookup queue (4096 jobs) is full or memory runs out. */
uint64_t sv_cpool_submit(sv_cpool_t *p, const sv_constraint_spec_t *spec, sv_cpool_cb cb, void *ud);

/* The caller no longer wants job id's result. Its callback still runs
 * exactly once (with SV_ERR_CANCELLED unless it had finished). An id that
 * has finished is a no-op. Any thread. */
void sv_cpool_cancel(sv_cpool_t *p, uint64_t id);

void sv_cpool_stats(sv_cpool_t *p, sv_cpool_stats_t *st);

/* Jobs not started are dropped (their callbacks are never called); running
 * ones finish first. NULL is a no-op. */
void sv_cpool_destroy(sv_cpool_t *p);

#endif
