/* render.h — OpenAI response bodies and SSE chunks.
 *
 * Shapes (as OpenAI's API writes them):
 *   chat:       {"id": "chatcmpl-..", "object": "chat.completion", "created", "model",
 *                "choices": [{"index", "message": {"role": "assistant", "content",
 *                "tool_calls"?}, "logprobs", "finish_reason"}], "usage"}
 *   chat chunk: {"id", "object": "chat.completion.chunk", "created", "model",
 *                "choices": [{"index", "delta": {...}, "logprobs", "finish_reason"}]}
 *               (+ "usage": null on every chunk when include_usage, and a last
 *               chunk with "choices": [] and the usage)
 *   completion: {"id": "cmpl-..", "object": "text_completion", "created", "model",
 *                "choices": [{"index", "text", "logprobs", "finish_reason"}], "usage"}
 *   usage:      {"prompt_tokens", "completion_tokens", "total_tokens",
 *                "prompt_tokens_details": {"cached_tokens"}}
 * Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs":
 * [{"token", "logprob", "bytes"}]}]}; completion logprobs: {"tokens",
 * "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
 * Token strings are the token's bytes decoded (lossy) as UTF-8; "bytes" has
 * the exact bytes. */
#ifndef SV_SERVER_RENDER_H
#define SV_SERVER_RENDER_H

#include <jansson.h>
#include <stdint.h>

#include "api.h"
#include "src/engine/sample.h"
#include "src/tokenizer/vocab.h"

typedef struct sv_render_head {
    const char *id;      /* "chatcmpl-..." / "cmpl-..." */
    const char *model;
    int64_t created;     /* Unix seconds */
    sv_api_kind kind;
} sv_render_head_t;

/* {"id", "object", "created", "model", "choices": []} for a whole response
 * (chunk false) or a chunk. */
json_t *sv_render_head(const sv_render_head_t *h, bool chunk);

json_t *sv_render_usage(uint32_t prompt, uint32_t completion, uint32_t cached);

/* Appends logprob entries for tokens[0..n) to acc: for chat, acc is the
 * "content" array; for completions, acc is the {"tokens", "token_logprobs",
 * "top_logprobs", "text_offset"} object and *text_offset advances by each
 * token's text length. */
int sv_render_logprobs(sv_api_kind kind, const sv_vocab_t *v, const int32_t *tokens, const sv_logprobs_t *lps,
                       uint32_t n, bool top, json_t *acc, size_t *text_offset);
/* An empty accumulator for sv_render_logprobs. */
json_t *sv_render_logprobs_new(sv_api_kind kind);

/* A finish reason's name: "stop", "length", "tool_calls" (tool_calls set),
 * "abort". */
const char *sv_render_finish(sv_finish_reason f, bool tool_calls);

/* "data: JSON\n\n" into a malloc'd string (NULL when out of memory). */
char *sv_render_sse(json_t *chunk, size_t *len);

#endif
