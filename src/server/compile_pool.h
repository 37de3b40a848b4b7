/* compile_pool.h — a few threads that compile constraints, off the HTTP
 * and engine threads (DESIGN.md, "One request, end to end", step 2).
 *
 * A job is one sv_ccache_get: a hit returns at once, a miss compiles the
 * constraint under its options' budgets (states, time), and several jobs
 * for the same key wait for one compilation (the cache does that). The
 * job's callback runs on the worker thread with the result; it must be
 * short (the server's copies the result into its request and wakes
 * libevent). The queue is bounded: submit says no when it is full. */
#ifndef SV_SERVER_COMPILE_POOL_H
#define SV_SERVER_COMPILE_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "src/engine/constraint_cache.h"

typedef struct sv_cpool sv_cpool_t;

/* On success c is held by the callee (release with sv_constraint_release);
 * on failure c is NULL and err says why. us: the wall time of the job. */
typedef void (*sv_cpool_cb)(void *ud, sv_constraint_t *c, bool hit, uint64_t us, const sv_error_t *err);

/* threads >= 1; queue: the most jobs waiting. cache and tokens are
 * borrowed. */
sv_status sv_cpool_create(uint32_t threads, uint32_t queue, sv_constraint_cache_t *cache, sv_cpool_t **out,
                          sv_error_t *err);

/* Copies text and opts. Returns false (callback never called) when the
 * queue is full, the pool is stopping or memory runs out. */
bool sv_cpool_submit(sv_cpool_t *p, sv_constraint_kind kind, const char *text, size_t len, const sv_schema_opts_t *opts,
                     const sv_token_set_t *tokens, uint32_t ws_cap, sv_cpool_cb cb, void *ud);

/* Jobs not started are dropped (their callbacks are never called); running
 * ones finish first. NULL is a no-op. */
void sv_cpool_destroy(sv_cpool_t *p);

#endif
