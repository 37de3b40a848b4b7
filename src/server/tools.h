/* tools.h — OpenAI tools: validation, the tool-call constraint, and reading
 * calls back out of the generated text.
 *
 * The tool definitions go into the prompt through the chat template
 * (src/engine/chat.h renders them as the model family expects). What the
 * model writes back depends on the mode:
 *
 * - tool_choice "required" or a named function: the output is constrained
 *   to a JSON array of calls,
 *       [{"name": "get_weather", "arguments": {...}}, ...]
 *   with one item (parallel_tool_calls false, or a named function) or 1 to
 *   SV_TOOLS_MAX_PARALLEL items, each "name" one of the tools (the named
 *   one) and "arguments" valid under that tool's "parameters" schema. The
 *   schema is built here as text and compiled like any other (so the
 *   compiled-constraint cache serves an agent's repeated tool lists).
 * - "auto": the model writes text, or calls in its family's syntax
 *   (<tool_call>{"name": ..., "arguments": ...}</tool_call> for ChatML,
 *   a bare {"name": ..., "arguments"|"parameters": ...} object for the
 *   others); sv_tools_calls_from_text finds them. Those calls are not
 *   constrained while they are generated (the engine runs one constraint
 *   from the first token); a call that does not parse, or names no tool,
 *   stays text.
 * - "none" or no tools: text.
 *
 * Every call the response carries has "arguments" as a JSON string, as
 * OpenAI's API does. */
#ifndef SV_SERVER_TOOLS_H
#define SV_SERVER_TOOLS_H

#include <jansson.h>
#include <stddef.h>

#include "api.h"

#define SV_TOOLS_MAX_PARALLEL 8

/* Validates an assistant message's tool_calls (message index i). */
int sv_tools_check_calls(json_t *calls, size_t i, sv_api_error_t *e);

/* Validates tools and tool_choice (either may be NULL) into r->tools,
 * r->tool_choice, r->tool_name. */
int sv_tools_parse(sv_api_request_t *r, json_t *tools, json_t *tool_choice, sv_api_error_t *e);

/* The JSON Schema (compact text) of the call array for r (required or
 * named). *out: caller frees. */
int sv_tools_call_schema(const sv_api_request_t *r, char **out, sv_api_error_t *e);

/* The constrained output (the call array) as OpenAI tool_calls:
 * [{"id", "type": "function", "function": {"name", "arguments": "<JSON>"}}].
 * NULL when text is not such an array. Caller decrefs. */
json_t *sv_tools_calls_from_array(const char *text, size_t len);

/* "auto": the calls in a free text answer, and in *content_len the length of
 * the text before the first one (the message content). NULL when there is
 * no call naming one of tools. Caller decrefs. */
json_t *sv_tools_calls_from_text(const char *text, size_t len, json_t *tools, size_t *content_len);

/* True when text[0..len), leading whitespace skipped, may still become a
 * call (is a prefix of, or starts with, "<tool_call>" or "{"): a streaming
 * "auto" response holds such text back until the end. */
bool sv_tools_may_be_call(const char *text, size_t len);

#endif
