/* runner.h — sends a batch's requests to a sieve server and hands back each
 * response.
 *
 * The runner is an HTTP client on its own libevent base: it keeps up to
 * `concurrency` requests in flight, one a connection, so that the server's
 * engine always has the next requests waiting while it decodes. It sends
 * each line's body as is, to its endpoint, so a batch line gets exactly what
 * the same request gets online (the server's parsing, constraint cache,
 * tools and response shapes), at batch priority (X-Sieve-Priority: batch),
 * so that a server with online traffic serves that first
 * (src/engine/engine.h, "Priorities"). `sieve batch` points it at a server it runs
 * in the same process, on loopback (src/cli/cmd_batch.c).
 *
 * What comes back:
 *   a final status (200, or a 4xx/5xx the request itself earned): on_result,
 *       which writes it durably before the line counts as done;
 *   429 (the server is full for now): the line waits for Retry-After (at
 *       least 100 ms) and goes again: never a result;
 *   503, or a connection that fails: the server is stopping or gone; the
 *       run ends with SV_ERR_IO and the line is not done (a resumed run
 *       sends it again).
 * A stop request (*stop set, read every 100 ms) cancels the requests in
 * flight, which stay undone, and ends the run with SV_ERR_CANCELLED. */
#ifndef SV_BATCH_RUNNER_H
#define SV_BATCH_RUNNER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch_input.h"

typedef struct sv_batch_progress {
    size_t total, done, failed; /* lines of this run; failed: done with a status other than 200 */
    uint64_t completion_tokens, prompt_tokens;
    double elapsed_s;
    uint32_t in_flight;
} sv_batch_progress_t;

typedef struct sv_batch_runner_config {
    const char *host;
    uint16_t port;
    const char *api_key;   /* sent as a bearer token; may be NULL */
    uint32_t concurrency;  /* requests in flight (>= 1) */
    double timeout_s;      /* one request's time limit (0: none) */
    /* A line's final answer: status, the response body. False when it cannot
     * be kept (the output is unwritable): the run stops with SV_ERR_IO. */
    bool (*on_result)(void *ud, const sv_batch_line_t *line, int status, const char *body, size_t len);
    /* Every 200 ms and at the end; may be NULL. */
    void (*on_progress)(void *ud, const sv_batch_progress_t *p);
    void *ud;
    volatile sig_atomic_t *stop;
} sv_batch_runner_config_t;

/* Runs the lines of in whose skip[i] is false (skip may be NULL). SV_OK when
 * every one got its result; SV_ERR_CANCELLED on a stop; SV_ERR_IO when the
 * server went away or on_result failed (err says which). */
sv_status sv_batch_run(const sv_batch_input_t *in, const bool *skip, const sv_batch_runner_config_t *cfg,
                       sv_batch_progress_t *prog, sv_error_t *err);

#endif
