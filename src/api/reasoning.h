/* reasoning.h — reasoning models: a free <think>…</think> section before
 * the answer, as vLLM's reasoning parsers name them (docs/api.md,
 * "Reasoning").
 *
 * A parser names the tags and what the chat prompt ends with:
 *   qwen3        the model opens "<think>" itself (stripped from the
 *                reasoning text); chat_template_kwargs.enable_thinking false
 *                ends the prompt with an empty "<think>\n\n</think>\n\n", as
 *                Qwen3's template does, and the request has no reasoning;
 *   deepseek_r1  the prompt ends with "<think>\n" (DeepSeek-R1's template),
 *                so the output starts inside the reasoning.
 * The reasoning's constraint (sv_reasoning_think_regex) is built once per
 * server: the engine walks it while the model thinks and starts the
 * request's own constraint after its end tag (src/engine/engine.h,
 * sv_engine_reasoning_t). */
#ifndef SV_API_REASONING_H
#define SV_API_REASONING_H

#include <stdbool.h>
#include <stdint.h>

#include "src/constraint/constraint_cache.h"
#include "src/constraint/tokens.h"
#include "src/engine/engine.h"

typedef enum { SV_REASONING_NONE = 0, SV_REASONING_QWEN3, SV_REASONING_DEEPSEEK_R1 } sv_reasoning_parser;

/* "qwen3" or "deepseek_r1"; SV_ERR_ARG for another name. */
sv_status sv_reasoning_parser_named(const char *name, sv_reasoning_parser *out, sv_error_t *err);

/* A regex (fsm/regex.h) of any text without end_tag, then end_tag: the
 * strings split at each '<'-like first byte of the tag into pieces, none of
 * which may begin with the tag. Needs a tag whose first character occurs
 * nowhere else in it (so the tag cannot overlap itself) and of printable
 * ASCII. Caller frees; NULL for such a tag or out of memory. */
char *sv_reasoning_think_regex(const char *end_tag);

/* What the chat prompt of a request ends with under parser p (appended to
 * the template's generation prompt), and whether the request reasons. */
const char *sv_reasoning_prompt_suffix(sv_reasoning_parser p, bool enable_thinking, bool *reasons);

/* A server's reasoning: the parser, its compiled constraint (held in the
 * cache until destroyed) and the end tag's tokens. */
typedef struct sv_reasoning {
    sv_reasoning_parser parser;
    sv_constraint_t *think;
    int32_t end[SV_ENGINE_MAX_END];
    uint32_t n_end;
} sv_reasoning_t;

/* Compiles the constraint of parser p over tok's token set into cache and
 * encodes the end tag; checks that the constraint takes the encoded tag
 * (SV_ERR_UNSUPPORTED when the tokenizer spells it with a special token,
 * which constrained output may not hold). On success release with
 * sv_reasoning_release. */
sv_status sv_reasoning_init(sv_reasoning_parser p, sv_constraint_cache_t *cache, sv_tokens_t *tok, sv_reasoning_t *out,
                            sv_error_t *err);
void sv_reasoning_release(sv_reasoning_t *rs, sv_constraint_cache_t *cache);

/* The engine's view of rs for one request (max_tokens UINT32_MAX: no limit
 * of its own). Borrows rs. */
void sv_reasoning_engine(const sv_reasoning_t *rs, uint32_t max_tokens, sv_engine_reasoning_t *out);

#endif
