/* prefetch.h — mask prefetch workers: compute the masks of states a
 * constrained request may reach next, off the engine thread.
 *
 * A token index computes a (state, whitespace run) mask on first request
 * and memoizes it; a first visit on the engine thread would stall the whole
 * batch for one trie walk. After a request's matcher moves to a state, the
 * engine posts (index, state, run); a worker computes that state's mask and
 * the masks of the states one allowed token away (its successors), so that
 * whichever token the request samples next, its mask is most likely known.
 * The token index is thread-safe for this (sv_token_index_mask: lock-free
 * readers, a miss takes the index's lock), and a mask is the same whoever
 * computes it.
 *
 * Bounded work. The queue holds queue_cap jobs; a post into a full queue
 * drops the oldest job (the newest states are the ones the engine visits
 * next). One job computes at most max_states masks: the state's own and
 * those of its first max_states - 1 distinct successors in token-id order.
 * A post of a job already queued, or of a state whose every successor is
 * known (remembered per index once a job completed it), does nothing. When
 * an index answers SV_ERR_BUDGET (its mask memo is full), prefetching for
 * that index stops: its queued jobs are dropped and later posts ignored,
 * until sv_prefetch_forget.
 *
 * Lifetime. The prefetcher borrows each index it is given. Before an index
 * may be freed (the last request using it has ended and its constraint may
 * be released), call sv_prefetch_forget(pf, ix): it removes ix's queued
 * jobs and waits until no worker uses ix (a running job notices within one
 * mask computation and stops early).
 *
 * Use from the engine: after a constrained request's matcher has taken its
 * tokens in a step, post (constraint, sv_matcher_state(m),
 * sv_matcher_ws_run(m)); count a first visit (stats.mask_waits) when
 * sv_token_index_mask_known says no just before sv_matcher_mask; call
 * forget when the last request using a constraint ends, before its final
 * output (the caller may free the constraint after that output).
 *
 * Threads: every function is thread-safe. Post takes a mutex for a few
 * comparisons (no allocation except the first post of an index). */
#ifndef SV_ENGINE_PREFETCH_H
#define SV_ENGINE_PREFETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "fsm/token_index.h"
#include "util/error.h"

#define SV_PREFETCH_MAX_THREADS 64

typedef struct sv_prefetch sv_prefetch_t;

typedef struct sv_prefetch_limits {
    uint32_t queue_cap;  /* jobs waiting, 1..65536 (default 64) */
    uint32_t max_states; /* masks one job may compute, 1..65536 (default 64) */
} sv_prefetch_limits_t;

void sv_prefetch_limits_default(sv_prefetch_limits_t *l);

/* n_threads workers, 1..SV_PREFETCH_MAX_THREADS; lim NULL: the defaults.
 * SV_ERR_ARG for values out of range, SV_ERR_NOMEM (also when a thread
 * cannot start). Caller frees with sv_prefetch_destroy. */
sv_status sv_prefetch_create(uint32_t n_threads, const sv_prefetch_limits_t *lim, sv_prefetch_t **out,
                             sv_error_t *err);

/* Stops the workers (a running job finishes its current mask) and frees
 * everything. NULL is a no-op. */
void sv_prefetch_destroy(sv_prefetch_t *pf);

/* Queues "compute the masks of state and of the states one allowed token
 * from it" for ix (borrowed until sv_prefetch_forget(pf, ix)). ws_run is
 * the matcher's whitespace run (sv_matcher_ws_run), clamped to the index's
 * cap. A dead state (< 0) or one out of the DFA's range is ignored. Never blocks on a worker's job. */
void sv_prefetch_post(sv_prefetch_t *pf, sv_token_index_t *ix, int32_t state, uint32_t ws_run);

/* Removes ix's queued jobs and everything remembered about ix, and waits
 * until no worker uses it. After it returns, ix may be freed (unless it is
 * posted again). */
void sv_prefetch_forget(sv_prefetch_t *pf, sv_token_index_t *ix);

/* Waits until the queue is empty and no job runs, or timeout_ms passes.
 * True when idle. */
bool sv_prefetch_wait_idle(sv_prefetch_t *pf, uint32_t timeout_ms);

typedef struct sv_prefetch_stats {
    uint64_t posted;       /* posts queued */
    uint64_t skipped;      /* posts already queued or already complete */
    uint64_t dropped;      /* jobs dropped: oldest of a full queue, removed by forget or a budget stop */
    uint64_t jobs;         /* jobs run */
    uint64_t computed;     /* masks the workers found unknown and computed (a mask the engine computed at
                              the same moment may be counted too) */
    uint64_t budget_stops; /* indexes whose memo ran out (prefetching for them stopped) */
} sv_prefetch_stats_t;

void sv_prefetch_stats(sv_prefetch_t *pf, sv_prefetch_stats_t *st);

#endif
