/* prompt.h — a validated request to the prompt text: chat messages through
 * the chat template (with tools), or a completion's prompt as given.
 *
 * Chat templates write JSON (tool definitions, call arguments) with Jinja's
 * tojson as Hugging Face defines it, Python's json.dumps(ensure_ascii=False):
 * sv_pyjson_dumps writes that spelling (", " and ": " separators, floats as
 * Python's repr, integers exact, non-ASCII unescaped), so that the prompt is
 * byte for byte what the model's Jinja template would have given. */
#ifndef SV_SERVER_PROMPT_H
#define SV_SERVER_PROMPT_H

#include <jansson.h>

#include "api.h"
#include "src/chat/chat.h"
#include "src/tokenizer/buf.h"

/* Appends v as Python's json.dumps(v, ensure_ascii=False) writes it (keys in
 * the object's order). SV_ERR_NOMEM on failure. */
sv_status sv_pyjson_dumps(json_t *v, sv_bytes_t *out);

/* The chat prompt of r (a chat request) with template t, appended to out;
 * "developer" messages render as "system". -1 with e (400) on failure. */
int sv_prompt_render_chat(const sv_chat_template_t *t, const sv_api_request_t *r, sv_bytes_t *out, sv_api_error_t *e);

#endif
