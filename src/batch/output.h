/* output.h — a batch's answers: OpenAI's batch output lines, each checked
 * again and made durable before it counts as done, and read back to resume.
 *
 * Shared by `sieve batch` (src/cli/cmd_batch.c) and the server's Batch API
 * (src/server/batches.c). A line:
 *
 *     {"id": "batch_req_…", "custom_id": "…",
 *      "response": {"status_code": 200, "request_id": "…", "body": {…}},
 *      "error": null}
 *
 * is written with one write(2) on a file opened O_APPEND, then fdatasync'ed.
 * A 200 answer to a request with a JSON Schema, regex or tool-call
 * constraint is first checked again, by code that shares nothing with the
 * compiler (src/api/schema_check.h): one that does not match keeps its
 * response and gets "error": {"code": "validation_failed", ...}. Answers
 * with an error status, and failed checks, go to the errors file when there
 * is one. A line the batch never ran (an expired window) is
 * {"id", "custom_id", "response": null, "error": {"code", "message"}}. */
#ifndef SV_BATCH_OUTPUT_H
#define SV_BATCH_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "batch_input.h"

typedef struct sv_batch_output {
    int fd, err_fd;              /* err_fd -1: errors go to fd */
    const sv_api_limits_t *lim;  /* to parse a line's request again (its constraint) */
    uint64_t rng;
    size_t checked_valid, checked_unchecked, checked_failed; /* constrained 200 answers */
    size_t n_ok, n_failed;       /* lines written: answers, and error lines */
} sv_batch_output_t;

sv_status sv_batch_output_open(sv_batch_output_t *o, const char *path, const char *err_path,
                               const sv_api_limits_t *lim, sv_error_t *err);
void sv_batch_output_close(sv_batch_output_t *o);
/* The runner's on_result (src/batch/runner.h), with ud the output. False
 * when the line could not be written. */
bool sv_batch_output_result(void *ud, const sv_batch_line_t *line, int status, const char *body, size_t len);
/* A line that never ran: response null, error {code, message}. */
bool sv_batch_output_error(sv_batch_output_t *o, const sv_batch_line_t *line, const char *code, const char *message);
/* Marks skip[i] for the lines of in whose custom_id path already holds,
 * counting them in *held, and truncates a last line without its newline (a
 * write cut by a crash). A missing file holds nothing. */
sv_status sv_batch_output_done(const char *path, const sv_batch_input_t *in, bool *skip, size_t *held,
                               sv_error_t *err);

#endif
