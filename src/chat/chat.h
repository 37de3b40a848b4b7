/* chat.h — chat templates: messages to the prompt text a model was trained on.
 *
 * Models ship their template as Jinja (GGUF tokenizer.chat_template,
 * tokenizer_config.json chat_template). sieve does not run Jinja: it
 * recognizes the template families the supported models use and renders
 * them in C (tests/model/test_chat_template.py checks each against Jinja2).
 *
 * - ChatML (SmolLM2, Qwen2): "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per
 *   message, then "<|im_start|>assistant\n". When the template writes a
 *   default system message for conversations without one (SmolLM2 and
 *   Qwen2.5 do), that text is taken from the template and rendered the same
 *   way. With tools, Qwen2.5's layout: the system turn gets a "# Tools"
 *   section listing each tool as JSON inside <tools></tools> and asking for
 *   <tool_call>{"name": ..., "arguments": ...}</tool_call>; an assistant's
 *   calls are written that way; consecutive tool results form one user turn
 *   of <tool_response> blocks.
 * - Llama 3: "<|begin_of_text|>" then
 *   "<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>" per
 *   message (content stripped of surrounding whitespace, as the template
 *   does), then "<|start_header_id|>assistant<|end_header_id|>\n\n". The
 *   date lines that Llama 3.1's template adds to system prompts are not
 *   written. Tool results use the "ipython" role, as Llama 3.1 does.
 * - Mistral (Mistral 7B Instruct): "<s>" then "[INST] USER [/INST]" and
 *   "ASSISTANT</s>"; a system message is prepended to the next user
 *   message with a blank line (the v0.1 template has no system role).
 * - Gemma: "<bos>" then "<start_of_turn>ROLE\nCONTENT<end_of_turn>\n" per
 *   message (assistant -> "model", content stripped), then
 *   "<start_of_turn>model\n"; a leading system message becomes a prefix of
 *   the first user turn followed by a blank line (Gemma 3's template).
 *
 * Tools for Llama 3, Mistral and Gemma (whose own templates differ between
 * versions or have none) go into the system text as a "tools" section that
 * asks for a JSON list of {"name", "arguments"} calls, and an assistant's
 * earlier calls are written as that JSON list. Tool results are user turns
 * for Mistral and Gemma.
 *
 * A template of no known family is SV_ERR_UNSUPPORTED, never guessed. */
#ifndef SV_ENGINE_CHAT_H
#define SV_ENGINE_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "src/tokenizer/buf.h"
#include "util/error.h"

typedef enum { SV_CHAT_CHATML = 1, SV_CHAT_LLAMA3 = 2, SV_CHAT_MISTRAL = 3, SV_CHAT_GEMMA = 4 } sv_chat_kind;

#define SV_CHAT_MAX_SYSTEM 4096 /* bytes of a template's default system message */

typedef struct sv_chat_template {
    sv_chat_kind kind;
    char default_system[SV_CHAT_MAX_SYSTEM]; /* "" when the template has none */
} sv_chat_template_t;

/* One call in an assistant message: name, and the arguments object as JSON
 * text the way the template's tojson writes it (Python json.dumps: ", " and
 * ": " separators, non-ASCII unescaped). Both borrowed. */
typedef struct sv_chat_tool_call {
    const char *name;
    const char *arguments;
} sv_chat_tool_call_t;

typedef struct sv_chat_msg {
    const char *role;    /* "system", "user", "assistant", "tool" */
    const char *content; /* UTF-8, NUL-terminated; NULL only for an assistant with tool calls */
} sv_chat_msg_t;

/* An assistant message's calls (borrowed): calls[0..n). */
typedef struct sv_chat_calls {
    const sv_chat_tool_call_t *calls;
    size_t n;
} sv_chat_calls_t;

/* Recognizes the Jinja template text tmpl[0..n). SV_ERR_UNSUPPORTED names
 * what was found when it is no known family. */
sv_status sv_chat_template_detect(const char *tmpl, size_t n, sv_chat_template_t *out, sv_error_t *err);
/* The chat template of the model at path: a GGUF file's
 * tokenizer.chat_template, or tokenizer_config.json's chat_template in a
 * Hugging Face model directory. */
sv_status sv_chat_template_load(const char *path, sv_chat_template_t *out, sv_error_t *err);

/* A built-in template by name: "chatml", "llama3", "mistral", "gemma"
 * (no default system message). SV_ERR_ARG for another name. */
sv_status sv_chat_template_named(const char *name, sv_chat_template_t *out, sv_error_t *err);

/* Appends the prompt for msgs[0..n) to out, ending with the assistant's
 * header (the generation prompt). SV_ERR_ARG for a role outside the four
 * above or a message without content. */
sv_status sv_chat_render(const sv_chat_template_t *t, const sv_chat_msg_t *msgs, size_t n, sv_bytes_t *out,
                         sv_error_t *err);

/* As sv_chat_render, with calls (NULL, or n entries: calls[i] are the tool
 * calls of msgs[i], an assistant message) and tools[0..n_tools), each the
 * JSON text of one tool definition ({"type": "function", "function": {...}})
 * as tojson writes it. Without calls and tools it renders exactly as
 * sv_chat_render. */
sv_status sv_chat_render_tools(const sv_chat_template_t *t, const sv_chat_msg_t *msgs, const sv_chat_calls_t *calls,
                               size_t n, const char *const *tools, size_t n_tools, sv_bytes_t *out, sv_error_t *err);

#endif
