/* tools.h — OpenAI tools: validation, the tool-call constraint, and reading
 * calls back out of the generated text.
 *
 * The tool definitions go into the prompt through the chat template
 * (src/chat/chat.h renders them as the model family expects). What the
 * model writes back depends on the mode:
 *
 * - tool_choice "required" or a named function: the output is constrained
 *   to a JSON array of calls,
 *       [{"name": "get_weather", "arguments": {...}}, ...]
 *   with exactly one item (parallel_tool_calls false, or a named function)
 *   or any number of items, at least one (parallel_tool_calls true), each
 *   "name" one of the tools (the named one) and "arguments" valid under
 *   that tool's "parameters" schema. The schema is built here as text and
 *   compiled like any other (so the compiled-constraint cache serves an
 *   agent's repeated tool lists). The parallel list has no maxItems on
 *   purpose: a bound of k makes the DFA hold k copies of the union of all
 *   the tools' schemas, while an open list is a loop over one copy (the
 *   subset construction still meets two, the first call and the loop's,
 *   before minimizing merges them); its length is bounded by max_tokens,
 *   and the engine's budget rule closes the list in time. The `sieve compile|match|sample --tools` verbs build
 *   their constraint with this same function (src/cli/cmd_fsm.c).
 * - "auto": one constraint, the calls' schema framed in free text
 *   (sv_tools_tagged_calls, fsm/schema.h): the model writes free text, and from the moment
 *   it writes its family's trigger (sv_tools_trigger) the call is enforced,
 *   one of the tools with valid arguments:
 *       ChatML (Qwen, SmolLM2)   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
 *                                per call, text allowed between them;
 *       the others               [{"name": "NAME", "arguments": ARGS}, ...]
 *                                (the JSON list their prompt asks for).
 *   Any number of calls (one with parallel_tool_calls false, and nothing
 *   after it). Since it is one constraint, n > 1 and every stop string work
 *   as for any other. The server streams the text before the trigger as
 *   content and the calls as they are generated (sv_tools_scan_tagged),
 *   and reads them at the end (sv_tools_calls_tagged).
 * - "auto" with a JSON response_format: one constraint, {"anyOf": [the
 *   call array, the answer schema]} (api.h): a call list or the answer.
 * - "none" or no tools: text.
 *
 * Every call the response carries has "arguments" as a JSON string, as
 * OpenAI's API does. */
#ifndef SV_SERVER_TOOLS_H
#define SV_SERVER_TOOLS_H

#include <jansson.h>
#include <stddef.h>

#include "api.h"

/* Validates an assistant message's tool_calls (message index i). */
int sv_tools_check_calls(json_t *calls, size_t i, sv_api_error_t *e);

/* Validates tools and tool_choice (either may be NULL) into r->tools,
 * r->tool_choice, r->tool_name. */
int sv_tools_parse(sv_api_request_t *r, json_t *tools, json_t *tool_choice, sv_api_error_t *e);

/* The JSON Schema (compact text) of the calls r allows: with array true the
 * call array, {"type": "array", "items": CALL, "minItems": 1} plus
 * "maxItems": 1 when r->parallel_tool_calls is false or r->tool_choice is
 * SV_TOOLS_NAMED; with array false one call object CALL. CALL is
 * {"name": const, "arguments": parameters} of the named tool, or an anyOf
 * of those of every tool (required, auto). r needs only the fields
 * sv_tools_parse fills (a validated tools list, tool_choice other than
 * none, tool_name) and parallel_tool_calls. *out: caller frees. */
int sv_tools_call_schema(const sv_api_request_t *r, bool array, char **out, sv_api_error_t *e);

/* "auto": the constraint (compact JSON text into *out, caller frees) of
 * free text with calls in chat_kind's format (above): an
 * SV_CONSTRAINT_FRAMED_SCHEMA (src/constraint/constraint_cache.h), the
 * call object (ChatML, in <tool_call> blocks) or the call list
 * (sv_tools_call_schema) inside free text that stops at the family's
 * trigger. The calls keep the parts the tool constraint compiles to (a
 * tool's arguments, free-form values), so a big tool set costs what it
 * costs under "required". */
int sv_tools_tagged_calls(const sv_api_request_t *r, int chat_kind, char **out, sv_api_error_t *e);

/* The text that starts a call in chat_kind's format: "<tool_call>" for
 * ChatML, "[{\"name\"" for the others. */
const char *sv_tools_trigger(int chat_kind);

/* The calls of an "auto" answer (sv_tools_tagged_calls) as OpenAI
 * tool_calls, and in *content_len the length of the text before the first
 * (without the whitespace before it). NULL when there is none. Caller
 * decrefs. */
json_t *sv_tools_calls_tagged(const char *text, size_t len, int chat_kind, json_t *tools, size_t *content_len);

/* The constrained output (the call array) as OpenAI tool_calls:
 * [{"id", "type": "function", "function": {"name", "arguments": "<JSON>"}}].
 * NULL when text is not such an array. Caller decrefs. */
json_t *sv_tools_calls_from_array(const char *text, size_t len);

/* "auto": the calls in a free text answer, and in *content_len the length of
 * the text before the first one (the message content). NULL when there is
 * no call naming one of tools. Caller decrefs. */
json_t *sv_tools_calls_from_text(const char *text, size_t len, json_t *tools, size_t *content_len);

/* A new call id, "call_" and 24 hex digits, into id (30 bytes with NUL). */
void sv_tools_new_id(char id[30]);

/* Streaming constrained calls: the calls in a (possibly unfinished) output,
 * the call array (array true) or one call object. Each call found has its
 * name complete; its arguments run from args_off for args_len bytes, and
 * args_done says whether the arguments value is closed. A scan of a longer
 * prefix of the same text finds the same calls with the same offsets.
 * Returns the number of calls found, any number; the first min(that, max)
 * go to out (NULL when max is 0), so a caller whose out was too small grows
 * it to the count and scans again. */
typedef struct sv_tools_scan {
    size_t name_off, name_len;
    size_t args_off, args_len;
    bool args_done;
} sv_tools_scan_t;
size_t sv_tools_scan_calls(const char *text, size_t len, bool array, sv_tools_scan_t *out, size_t max);
/* The same for an "auto" answer (sv_tools_tagged_calls) in chat_kind's
 * format: the calls after its trigger, offsets into text. */
size_t sv_tools_scan_tagged(const char *text, size_t len, int chat_kind, sv_tools_scan_t *out, size_t max);

#endif
