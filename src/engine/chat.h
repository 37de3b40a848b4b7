/* chat.h — chat templates: messages to the prompt text a model was trained on.
 *
 * Models ship their template as Jinja (GGUF tokenizer.chat_template,
 * tokenizer_config.json chat_template). sieve does not run Jinja: it
 * recognizes the two template families the supported models use and
 * renders them in C.
 *
 * - ChatML (SmolLM2, Qwen2): "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per
 *   message, then "<|im_start|>assistant\n". When the template writes a
 *   default system message for conversations without one (SmolLM2 does),
 *   that text is taken from the template and rendered the same way.
 * - Llama 3: "<|begin_of_text|>" then
 *   "<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>" per
 *   message (content stripped of surrounding whitespace, as the template
 *   does), then "<|start_header_id|>assistant<|end_header_id|>\n\n". The
 *   date lines that Llama 3.1's template adds to system prompts are not
 *   written.
 * A template that is neither is SV_ERR_UNSUPPORTED, never guessed. */
#ifndef SV_ENGINE_CHAT_H
#define SV_ENGINE_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "src/tokenizer/buf.h"
#include "src/util/error.h"

typedef enum { SV_CHAT_CHATML = 1, SV_CHAT_LLAMA3 = 2 } sv_chat_kind;

#define SV_CHAT_MAX_SYSTEM 4096 /* bytes of a template's default system message */

typedef struct sv_chat_template {
    sv_chat_kind kind;
    char default_system[SV_CHAT_MAX_SYSTEM]; /* "" when the template has none */
} sv_chat_template_t;

typedef struct sv_chat_msg {
    const char *role;    /* "system", "user", "assistant", "tool" */
    const char *content; /* UTF-8, NUL-terminated */
} sv_chat_msg_t;

/* Recognizes the Jinja template text tmpl[0..n). SV_ERR_UNSUPPORTED names
 * what was found when it is neither family. */
sv_status sv_chat_template_detect(const char *tmpl, size_t n, sv_chat_template_t *out, sv_error_t *err);

/* Appends the prompt for msgs[0..n) to out, ending with the assistant's
 * header (the generation prompt). SV_ERR_ARG for a role outside the four
 * above or a message without content. */
sv_status sv_chat_render(const sv_chat_template_t *t, const sv_chat_msg_t *msgs, size_t n, sv_bytes_t *out,
                         sv_error_t *err);

#endif
