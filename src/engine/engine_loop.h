/* engine_loop.h — the engine thread: one thread that owns an sv_engine_t
 * and runs its steps, with a thread-safe, asynchronous front for the HTTP
 * thread (docs/architecture.md, "Threads and ownership").
 *
 * Other threads never touch the engine. They post messages (submit,
 * cancel) to a locked inbox, which the engine thread drains between steps;
 * the engine thread hands every output to the request's callback, on the
 * engine thread, as soon as the step that produced it ends. A callback
 * must be short and must not call back into the loop except
 * sv_engine_loop_cancel (the server's callback copies the output into its
 * connection's queue and wakes libevent with event_active).
 *
 * Submit is asynchronous: it deep-copies the request (prompt, stop ids,
 * stop strings, logit bias), assigns the id and returns at once. If the
 * engine then refuses the request (queue full, prompt too long, a
 * constraint that cannot fit max_tokens), the callback gets one call with
 * `refused` set and the engine's error, and nothing else. Otherwise it gets
 * the request's outputs, ending with one whose request_done is set. Either
 * way the callback is called at least once, and after the call that ends
 * the request (refused or request_done) never again for that id: the
 * caller may then release what it lent (the constraint).
 *
 * Cancel is asynchronous and idempotent: a request still in the inbox, or
 * waiting or running in the engine, ends with ABORT outputs; an id that
 * has ended is ignored.
 *
 * If a step fails on a broken invariant (SV_ERR_INTERNAL), the requests in
 * the engine get their one last call as refused with that error, and when
 * the engine is whole without them (sv_engine_check) the loop goes on: a
 * bug of sieve's fails the requests it touched, not the server. If a step
 * fails otherwise (a backend error), or the engine is not whole after a
 * fault, every request ends with ABORT, the loop marks itself dead (sv_engine_loop_alive ->
 * false, for /health) and later submits are refused with that error
 * (SV_ERR_IO); a request still in the inbox then gets its one call as a
 * refusal carrying the step's error.
 *
 * Drain: sv_engine_loop_drain stops accepting (submits are refused with
 * SV_ERR_BUDGET, "draining") and waits until no request is left or the
 * timeout passes; sv_engine_loop_stop then cancels whatever remains,
 * delivers the ABORT outputs, joins the thread and destroys the engine. */
#ifndef SV_ENGINE_ENGINE_LOOP_H
#define SV_ENGINE_ENGINE_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

typedef struct sv_engine_loop sv_engine_loop_t;

/* Submits waiting for the engine thread (it takes them all between two
 * steps) before sv_engine_loop_submit says SV_ERR_BUDGET. */
#define SV_ENGINE_LOOP_MAX_INBOX 4096

/* out: the output (its pointers borrowed for the call only); refusal: NULL
 * unless the engine refused the request, then out->finish is ABORT,
 * out->request_done is true and refusal holds the engine's error. An output
 * the loop makes up itself (a refusal, a cancel that caught the request in
 * the inbox, a dead engine) is a single one for choice 0, with no tokens
 * (tokens non-NULL, n_tokens 0) and request_done set. */
typedef void (*sv_engine_loop_cb)(void *ud, const sv_engine_output_t *out, const sv_error_t *refusal);

/* Starts the engine thread over e, which the loop then owns (destroyed by
 * sv_engine_loop_stop, also on failure here). */
sv_status sv_engine_loop_start(sv_engine_t *e, sv_engine_loop_t **out, sv_error_t *err);

/* Thread-safe. Copies req; *id gets the request's id at once. SV_ERR_ARG for
 * a NULL callback or a malformed request (empty prompt, n or stop strings
 * out of range), SV_ERR_BUDGET when draining or the inbox is full, SV_ERR_IO
 * when the loop is dead, SV_ERR_NOMEM: then nothing was queued and the
 * callback is never called. */
sv_status sv_engine_loop_submit(sv_engine_loop_t *l, const sv_engine_request_t *req, sv_engine_loop_cb cb,
                                void *ud, uint64_t *id, sv_error_t *err);

/* Thread-safe, asynchronous, idempotent. */
void sv_engine_loop_cancel(sv_engine_loop_t *l, uint64_t id);

/* Thread-safe snapshot of the engine's counters as of the last step, plus
 * the pool's usage. */
typedef struct sv_engine_loop_stats {
    sv_engine_stats_t engine;
    uint32_t kv_blocks, kv_blocks_used; /* used: held by a request (not by the prefix cache alone) */
    uint32_t inbox;                     /* submits not yet seen by the engine */
    uint64_t prefix_hits;               /* prompt tokens served by the prefix cache (= engine.cached_tokens) */
    uint64_t faults;                    /* internal faults recovered from (their requests failed) */
} sv_engine_loop_stats_t;
void sv_engine_loop_stats(sv_engine_loop_t *l, sv_engine_loop_stats_t *st);

/* Thread-safe: false once a step has failed. */
bool sv_engine_loop_alive(sv_engine_loop_t *l);

/* Thread-safe. Stops accepting, then waits up to timeout_ms (0: no wait)
 * for the requests to finish. Returns true when none is left. */
bool sv_engine_loop_drain(sv_engine_loop_t *l, uint32_t timeout_ms);

/* Cancels what is left, delivers its outputs, joins the thread, destroys
 * the engine. From any thread but the engine thread (never from a
 * callback). Submits racing with it are refused (SV_ERR_BUDGET,
 * "stopping"); none may follow its return. NULL is a no-op. */
void sv_engine_loop_stop(sv_engine_loop_t *l);

#endif
