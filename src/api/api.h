/* api.h — OpenAI request bodies to sieve requests, and OpenAI-shaped errors.
 *
 * sv_api_parse turns the JSON body of POST /v1/chat/completions or
 * /v1/completions into an sv_api_request_t: every field a client may send is
 * validated here, on the HTTP thread, before anything else runs, so a bad
 * request costs a parse and nothing more. Unknown fields are ignored (real
 * clients send many). The request's constraint, from whichever field carried
 * it, becomes one spec (kind + canonical text + options), compiled later on
 * the compile pool; the `param` it came from is kept so that a schema that
 * does not compile is a 400 naming that param.
 *
 * Where a constraint comes from, in order (one of them at most; two is a
 * 400):
 *   tool_choice "required" / {"type": "function", ...} with tools
 *       -> the tool-call schema (tools.h)
 *   tool_choice "auto" with tools and a JSON response_format
 *       -> {"anyOf": [the call array, the response schema]}: the model calls
 *       (a JSON call list) or answers as response_format says. The
 *       response schema's $defs / definitions move to the root so that its
 *       "#/$defs/..." references still resolve; a schema with other
 *       root-relative references or an $id keeps response_format alone
 *       (no call possible)
 *   response_format {"type": "json_schema", "json_schema": {"schema": ...}}
 *       -> that schema ("strict": false is enforced all the same)
 *   response_format {"type": "json_object"} -> {"type": "object"}
 *   the extras: "regex" / "guided_regex", "choice" / "guided_choice",
 *       "guided_json", "structured_outputs": {"json" | "regex" | "choice" |
 *       "json_object"}
 * A choice list becomes a regex alternation of the escaped strings.
 *
 * Errors: sv_api_error_t carries the HTTP status, OpenAI's error type, the
 * offending param and a message; sv_api_error_json renders
 * {"error": {"message", "type", "param", "code"}}. */
#ifndef SV_SERVER_API_H
#define SV_SERVER_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "fsm/schema.h"
#include "src/constraint/constraint_cache.h"
#include "src/engine/engine.h"
#include "src/engine/sample.h"

typedef struct sv_api_error {
    int status;          /* HTTP status: 400, 401, 404, 413, 429, 500, 503 */
    char type[40];       /* "invalid_request_error", "authentication_error", ... */
    char param[64];      /* "" -> null */
    char code[40];       /* "" -> null */
    char message[1024];
    int retry_after;     /* seconds for a Retry-After header; 0: none */
} sv_api_error_t;

/* Fills e and returns -1, for `return sv_api_fail(e, 400, "temperature", ...)`.
 * param may be NULL. The type follows the status (400/413: invalid_request_error,
 * 401: authentication_error, 404: not_found_error, 429: rate_limit_error,
 * 503: service_unavailable_error, other: server_error). */
int sv_api_fail(sv_api_error_t *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The HTTP status of a failed operation's status code: the one table the
 * server decides by (no error message is ever read for it).
 *   400  the request is at fault: it does not parse, asks for something
 *        unsupported or empty, or exceeds a budget of this server (a
 *        constraint over the state, memory or time budget, a prompt over
 *        the context), or has a bad argument;
 *   429  SV_ERR_CAPACITY: the server is full for now (Retry-After);
 *   503  SV_ERR_IO: the engine is not running;
 *   500  sieve's own fault (SV_ERR_INTERNAL) or out of memory. */
int sv_api_http_status(sv_status code);

/* {"error": {...}}; caller frees with json_decref. NULL when out of memory. */
json_t *sv_api_error_json(const sv_api_error_t *e);

typedef enum { SV_API_CHAT = 1, SV_API_COMPLETION = 2 } sv_api_kind;
typedef enum { SV_TOOLS_NONE = 0, SV_TOOLS_AUTO, SV_TOOLS_REQUIRED, SV_TOOLS_NAMED } sv_tool_choice;

#define SV_API_MAX_MESSAGES 4096
#define SV_API_MAX_TOOLS 128

/* Server-wide limits and defaults the parser checks against. */
typedef struct sv_api_limits {
    uint32_t vocab_size;        /* logit_bias ids and prompt ids must be below it */
    uint32_t max_ctx;           /* context of one request (prompt + output) */
    uint32_t max_n;             /* choices (<= SV_ENGINE_MAX_N) */
    size_t max_constraint_bytes;/* canonical constraint text */
    sv_ws_mode ws;              /* whitespace of schemas (default canonical) */
    bool reasoning;             /* the server has a reasoning parser (src/api/reasoning.h) */
} sv_api_limits_t;

typedef struct sv_api_constraint {
    bool on;
    sv_constraint_kind kind;    /* regex, schema or grammar */
    char *text;                 /* owned: canonical text (compact schema, the regex or the grammar) */
    size_t len;
    char param[64];             /* where it came from: "response_format", "tools", "regex", ... */
    bool tool_calls;            /* the output is the tool-call array (tools.h) */
    bool calls_or_answer;       /* tools "auto" with response_format: the output is the call array
                                   ({"anyOf": [calls, answer]}, answer at /anyOf/1) or the answer */
    bool tagged_calls;          /* tools "auto": free text with calls in the family's format (a framed
                                   schema, tools.h) */
    json_t *tools;              /* tagged_calls: the request's tools (borrowed), for error pointers */
} sv_api_constraint_t;

typedef struct sv_api_request {
    sv_api_kind kind;
    json_t *body;               /* owned; the borrowed pointers below point into it */
    const char *model;          /* NULL when absent */

    json_t *messages;           /* chat: borrowed array, validated */
    json_t *tools;              /* chat: borrowed array of {"type": "function", "function": {...}}, or NULL */
    sv_tool_choice tool_choice;
    const char *tool_name;      /* SV_TOOLS_NAMED: the function */
    bool parallel_tool_calls;   /* default true, as OpenAI */

    const char *prompt;         /* completion: the prompt text, or NULL when given as ids */
    int32_t *prompt_ids;        /* completion: owned ids (a list of integers), else NULL */
    uint32_t n_prompt_ids;

    sv_sample_params_t sp;      /* validated; logit_bias points at bias[] */
    sv_logit_bias_t *bias;      /* owned */
    bool seed_given;
    uint32_t n;                 /* choices, >= 1 */
    uint32_t max_tokens;        /* 0: not given (the context left) */
    const char *stop[SV_ENGINE_MAX_STOP]; /* borrowed */
    uint32_t n_stop;
    bool stream, include_usage;
    bool logprobs;              /* chat: logprobs true; completion: logprobs given */
    int32_t top_logprobs;       /* 0..20 */
    bool echo;                  /* completion echo (refused when true: see api.c) */
    /* Reasoning (src/api/reasoning.h; chat, with a reasoning parser only):
     * max_reasoning_tokens (0..max_ctx) when given, and
     * chat_template_kwargs.enable_thinking (default true). */
    bool max_reasoning_given;
    uint32_t max_reasoning_tokens;
    bool enable_thinking;

    sv_api_constraint_t c;
} sv_api_request_t;

/* Parses body[0..len) for kind. On success fills r (free with
 * sv_api_request_free) and returns 0; on failure fills e (status 400) and
 * returns -1, and r holds nothing to free. */
int sv_api_parse(sv_api_kind kind, const char *body, size_t len, const sv_api_limits_t *lim,
                 sv_api_request_t *r, sv_api_error_t *e);
void sv_api_request_free(sv_api_request_t *r);

/* A regex matching exactly one of the strings (escaped), for "choice".
 * Caller frees. NULL when out of memory. */
char *sv_api_choice_regex(const char *const *choices, size_t n);

/* The message of a constraint that does not compile, in e (param c->param,
 * code "invalid_constraint", with the keyword and JSON pointer when the
 * schema is at fault); a status other than 400 (sv_api_http_status: an
 * internal fault, out of memory) gets code "internal_error" and no param. */
void sv_api_constraint_error(const sv_api_constraint_t *c, const sv_error_t *err, sv_api_error_t *e);

#endif
