/* batch_input.h — the input file of a batch: OpenAI's batch request lines.
 *
 * A batch input is JSON Lines, one request a line, as OpenAI's Batch API
 * takes it:
 *
 *     {"custom_id": "doc-17", "method": "POST", "url": "/v1/chat/completions",
 *      "body": {"model": "...", "messages": [...], "response_format": {...}}}
 *
 * url is /v1/chat/completions or /v1/completions. sv_batch_input_read checks
 * the whole file before anything runs and reports every bad line (1-based
 * line numbers, blank lines counted) with a code, so that a bad file costs
 * nothing and is fixed in one pass:
 *   invalid_json         the line is not a JSON object
 *   missing_custom_id    custom_id absent, not a string, empty or over 512 bytes
 *   duplicate_custom_id  the same custom_id on an earlier line
 *   invalid_method       method is not "POST"
 *   invalid_url          url is not one of the two endpoints
 *   invalid_body         body is not an object, or over the body size limit
 *   mismatched_model     body.model differs from the first line's
 *   invalid_request      the body is not a valid request for its endpoint
 *                        (sv_api_parse: the same checks as the server), or
 *                        asks to stream
 *   invalid_constraint   its schema or regex does not compile (the check
 *                        callback: the caller compiles, normally through the
 *                        constraint cache the run then uses)
 *   too_many_lines       past max_lines
 * Errors are capped at SV_BATCH_MAX_ERRORS (the count goes on). */
#ifndef SV_BATCH_BATCH_INPUT_H
#define SV_BATCH_BATCH_INPUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "src/api/api.h"
#include "util/error.h"

#define SV_BATCH_MAX_ERRORS 1000
#define SV_BATCH_MAX_CUSTOM_ID 512

typedef struct sv_batch_line {
    char *custom_id;
    sv_api_kind kind;  /* from url */
    char *body;        /* the body, compact JSON (what is sent) */
    size_t body_len;
    uint32_t lineno;   /* 1-based */
} sv_batch_line_t;

typedef struct sv_batch_input {
    sv_batch_line_t *lines;
    size_t n;
    char *model;       /* the model every body names, or NULL when none does */
    json_t *errors;    /* [{"line", "code", "message", "param"}] (at most SV_BATCH_MAX_ERRORS) */
    size_t n_errors;   /* all of them */
} sv_batch_input_t;

typedef struct sv_batch_input_config {
    const sv_api_limits_t *lim; /* the server's (sv_server_api_limits) */
    size_t max_body_bytes;      /* a body's compact JSON */
    size_t max_lines;
    int endpoint;               /* 0, or the kind (sv_api_kind) every line's url must name */
    /* Checks a parsed request further (its constraint compiles): 0, or -1
     * with e filled. May be NULL. */
    int (*check)(void *ud, const sv_api_request_t *r, sv_api_error_t *e);
    void *ud;
} sv_batch_input_config_t;

/* Reads the file at path ("-": standard input) into in. SV_OK even when
 * lines are bad (in->n_errors says); SV_ERR_IO when the file cannot be read,
 * SV_ERR_NOMEM. Free with sv_batch_input_free in every case. */
sv_status sv_batch_input_read(const char *path, const sv_batch_input_config_t *cfg, sv_batch_input_t *in,
                              sv_error_t *err);
/* The same from an open stream (name for messages); the caller closes it. */
sv_status sv_batch_input_read_stream(FILE *f, const char *name, const sv_batch_input_config_t *cfg,
                                     sv_batch_input_t *in, sv_error_t *err);
void sv_batch_input_free(sv_batch_input_t *in);

#endif
