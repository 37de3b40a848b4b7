/* tools.c — OpenAI tools (see tools.h). */
#include "tools.h"

#include "src/chat/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return false;
    }
    return true;
}

int sv_tools_check_calls(json_t *calls, size_t i, sv_api_error_t *e) {
    if (!json_is_array(calls)) return sv_api_fail(e, 400, "messages", "messages[%zu].tool_calls: must be a list", i);
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        json_t *f = json_object_get(c, "function");
        json_t *name = json_object_get(f, "name"), *args = json_object_get(f, "arguments");
        if (!json_is_object(c) || !json_is_object(f) || !json_is_string(name))
            return sv_api_fail(e, 400, "messages", "messages[%zu].tool_calls[%zu]: must have function.name", i, k);
        if (!json_is_string(args))
            return sv_api_fail(e, 400, "messages", "messages[%zu].tool_calls[%zu].function.arguments: must be a JSON string", i, k);
        json_t *a = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        bool ok = json_is_object(a);
        json_decref(a);
        if (!ok)
            return sv_api_fail(e, 400, "messages",
                               "messages[%zu].tool_calls[%zu].function.arguments: must be a JSON object in a string", i, k);
    }
    return 0;
}

int sv_tools_parse(sv_api_request_t *r, json_t *tools, json_t *tool_choice, sv_api_error_t *e) {
    r->tool_choice = SV_TOOLS_NONE;
    if (tools) {
        if (!json_is_array(tools)) return sv_api_fail(e, 400, "tools", "tools: must be a list");
        if (json_array_size(tools) > SV_API_MAX_TOOLS)
            return sv_api_fail(e, 400, "tools", "tools: at most %d tools", SV_API_MAX_TOOLS);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            json_t *type = json_object_get(t, "type"), *f = json_object_get(t, "function");
            if (!json_is_object(t) || !json_is_string(type) || strcmp(json_string_value(type), "function") != 0)
                return sv_api_fail(e, 400, "tools", "tools[%zu]: must be {\"type\": \"function\", \"function\": {...}}", i);
            json_t *name = json_object_get(f, "name");
            if (!json_is_object(f) || !json_is_string(name) || !name_ok(json_string_value(name)))
                return sv_api_fail(e, 400, "tools",
                                   "tools[%zu].function.name: must be 1 to 64 letters, digits, '_', '-' or '.'", i);
            for (size_t j = 0; j < i; j++)
                if (!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(tools, j), "function"), "name")),
                            json_string_value(name)))
                    return sv_api_fail(e, 400, "tools", "tools[%zu].function.name: '%s' is defined twice", i,
                                       json_string_value(name));
            json_t *p = json_object_get(f, "parameters");
            if (p && !json_is_null(p) && !json_is_object(p))
                return sv_api_fail(e, 400, "tools", "tools[%zu].function.parameters: must be a JSON Schema object", i);
            json_t *d = json_object_get(f, "description");
            if (d && !json_is_null(d) && !json_is_string(d))
                return sv_api_fail(e, 400, "tools", "tools[%zu].function.description: must be a string", i);
        }
        if (json_array_size(tools)) {
            r->tools = tools;
            r->tool_choice = SV_TOOLS_AUTO;
        }
    }
    if (!tool_choice) return 0;
    if (json_is_string(tool_choice)) {
        const char *s = json_string_value(tool_choice);
        if (!strcmp(s, "none")) r->tool_choice = SV_TOOLS_NONE;
        else if (!strcmp(s, "auto")) r->tool_choice = r->tools ? SV_TOOLS_AUTO : SV_TOOLS_NONE;
        else if (!strcmp(s, "required")) {
            if (!r->tools) return sv_api_fail(e, 400, "tool_choice", "tool_choice: 'required' needs tools");
            r->tool_choice = SV_TOOLS_REQUIRED;
        } else {
            return sv_api_fail(e, 400, "tool_choice", "tool_choice: must be none, auto, required or a function, got '%s'", s);
        }
        return 0;
    }
    json_t *f = json_object_get(tool_choice, "function");
    json_t *name = json_object_get(f, "name");
    if (!json_is_object(tool_choice) || !json_is_string(name))
        return sv_api_fail(e, 400, "tool_choice", "tool_choice: must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    if (!r->tools) return sv_api_fail(e, 400, "tool_choice", "tool_choice: names a function but there are no tools");
    size_t i;
    json_t *t;
    json_array_foreach(r->tools, i, t) {
        if (!strcmp(json_string_value(json_object_get(json_object_get(t, "function"), "name")), json_string_value(name))) {
            r->tool_choice = SV_TOOLS_NAMED;
            r->tool_name = json_string_value(name);
            return 0;
        }
    }
    return sv_api_fail(e, 400, "tool_choice", "tool_choice: function '%s' is not one of the tools", json_string_value(name));
}

/* Rewrites the local JSON-pointer $refs of a tool's parameters ("#" and
 * "#/...", which point into the parameters document) to point at where the
 * parameters now live, base ("#/$defs/NAME"). false when out of memory. */
static bool rebase_refs(json_t *v, const char *base) {
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) if (!rebase_refs(x, base)) return false;
        return true;
    }
    if (!json_is_object(v)) return true;
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
        if (!strcmp(k, "$ref") && json_is_string(x)) {
            const char *r = json_string_value(x);
            if (r[0] != '#' || (r[1] != '\0' && r[1] != '/')) continue; /* an anchor or a remote ref: as written */
            size_t n = strlen(base) + strlen(r);
            char *nr = malloc(n + 1);
            if (!nr) return false;
            snprintf(nr, n + 1, "%s%s", base, r + 1);
            int rc = json_string_set(x, nr);
            free(nr);
            if (rc) return false;
        } else if (!rebase_refs(x, base)) {
            return false;
        }
    }
    return true;
}

/* The schema of one call to tool t: {"name": const, "arguments": params}.
 * The parameters go to defs under "sv_args_NAME" and "arguments" refers to
 * them, with their own $refs rebased, so that a $ref into the parameters'
 * $defs (as Pydantic writes them) resolves inside the call schema. */
static json_t *call_schema(json_t *t, json_t *defs) {
    json_t *f = json_object_get(t, "function");
    json_t *p = json_object_get(f, "parameters");
    const char *name = json_string_value(json_object_get(f, "name"));
    json_t *params = p && json_is_object(p) ? json_deep_copy(p)
                                             : json_pack("{s:s, s:{}, s:b}", "type", "object", "properties",
                                                         "additionalProperties", 0);
    char key[96], base[128];
    snprintf(key, sizeof key, "sv_args_%s", name); /* names are [A-Za-z0-9_.-]{1,64} (name_ok): pointer-safe */
    snprintf(base, sizeof base, "#/$defs/%s", key);
    if (!params || !rebase_refs(params, base) || json_object_set_new(defs, key, params)) return NULL;
    return json_pack("{s:s, s:{s:{s:O}, s:{s:s}}, s:[s,s], s:b}", "type", "object", "properties", "name", "const",
                     json_object_get(f, "name"), "arguments", "$ref", base, "required", "name", "arguments",
                     "additionalProperties", 0);
}

int sv_tools_tagged_calls(const sv_api_request_t *r, int chat_kind, char **out, sv_api_error_t *e) {
    bool chatml = chat_kind == SV_CHAT_CHATML;
    char *text;
    *out = NULL;
    /* ChatML: one call object a block; the others: the call list. */
    if (sv_tools_call_schema(r, !chatml, &text, e)) return -1;
    json_t *schema = json_loads(text, 0, NULL);
    free(text);
    json_t *root = schema ? json_pack("{s:{s:s, s:s, s:s, s:b, s:b}, s:o}", "frame", "trigger",
                                      sv_tools_trigger(chat_kind), "open", chatml ? "\n" : "", "close",
                                      chatml ? "\n</tool_call>" : "", "blocks", chatml, "repeat",
                                      chatml && r->parallel_tool_calls, "schema", schema)
                          : NULL;
    *out = root ? json_dumps(root, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    json_decref(root);
    if (!*out) return sv_api_fail(e, 500, NULL, "out of memory");
    return 0;
}

const char *sv_tools_trigger(int chat_kind) {
    return chat_kind == SV_CHAT_CHATML ? "<tool_call>" : "[{\"name\"";
}

int sv_tools_call_schema(const sv_api_request_t *r, bool array, char **out, sv_api_error_t *e) {
    json_t *alts = json_array(), *defs = json_object();
    size_t i;
    json_t *t;
    json_array_foreach(r->tools, i, t) {
        if (r->tool_choice == SV_TOOLS_NAMED &&
            strcmp(json_string_value(json_object_get(json_object_get(t, "function"), "name")), r->tool_name) != 0)
            continue;
        json_t *c = call_schema(t, defs);
        if (!c || json_array_append_new(alts, c)) {
            json_decref(alts);
            json_decref(defs);
            return sv_api_fail(e, 500, NULL, "out of memory");
        }
    }
    json_t *items = json_array_size(alts) == 1 ? json_incref(json_array_get(alts, 0)) : json_pack("{s:O}", "anyOf", alts);
    /* Parallel calls: no maxItems, so that the DFA is a loop over one copy
     * of the calls' union rather than k copies of it (tools.h). */
    bool one = !r->parallel_tool_calls || r->tool_choice == SV_TOOLS_NAMED;
    json_t *s = !array ? items
                : one  ? json_pack("{s:s, s:o, s:i, s:i}", "type", "array", "items", items, "minItems", 1, "maxItems", 1)
                       : json_pack("{s:s, s:o, s:i}", "type", "array", "items", items, "minItems", 1);
    json_decref(alts);
    if (s && json_object_set(s, "$defs", defs)) json_decref(s), s = NULL;
    json_decref(defs);
    *out = s ? json_dumps(s, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    json_decref(s);
    if (!*out) return sv_api_fail(e, 500, NULL, "out of memory");
    return 0;
}

void sv_tools_new_id(char id[30]) {
    static const char hex[] = "0123456789abcdef";
    memcpy(id, "call_", 5);
    for (int i = 0; i < 24; i++) id[5 + i] = hex[rand() & 15];
    id[29] = 0;
}

static json_t *make_call(const char *name, json_t *args) {
    char id[30];
    sv_tools_new_id(id);
    char *a = json_dumps(args, JSON_PRESERVE_ORDER | JSON_COMPACT);
    if (!a) return NULL;
    json_t *c = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function", "function", "name", name,
                          "arguments", a);
    free(a);
    return c;
}

json_t *sv_tools_calls_from_array(const char *text, size_t len) {
    json_t *arr = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        json_decref(arr);
        return NULL;
    }
    json_t *calls = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(arr, i, c) {
        json_t *name = json_object_get(c, "name"), *args = json_object_get(c, "arguments");
        json_t *call = json_is_string(name) && json_is_object(args) ? make_call(json_string_value(name), args) : NULL;
        if (!call) {
            json_decref(calls);
            json_decref(arr);
            return NULL;
        }
        json_array_append_new(calls, call);
    }
    json_decref(arr);
    return calls;
}

static bool is_tool(json_t *tools, const char *name) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
        if (!strcmp(json_string_value(json_object_get(json_object_get(t, "function"), "name")), name)) return true;
    return false;
}

/* One call object {"name", "arguments" | "parameters"} naming a tool. */
static json_t *call_from_object(json_t *o, json_t *tools) {
    json_t *name = json_object_get(o, "name");
    json_t *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    if (!json_is_string(name) || !json_is_object(args) || !is_tool(tools, json_string_value(name))) return NULL;
    return make_call(json_string_value(name), args);
}

static const char *find(const char *h, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(h + i, needle, k)) return h + i;
    return NULL;
}

json_t *sv_tools_calls_from_text(const char *text, size_t len, json_t *tools, size_t *content_len) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    const char *first = find(text, len, open);
    json_t *calls = json_array();
    if (!calls) return NULL;
    if (first) {
        const char *p = first, *end = text + len;
        while (p && p < end) {
            const char *b = p + strlen(open);
            const char *q = find(b, (size_t)(end - b), close);
            size_t n = q ? (size_t)(q - b) : (size_t)(end - b); /* a last call may lack its closing tag */
            json_t *o = json_loadb(b, n, JSON_ALLOW_NUL, NULL);
            json_t *c = o ? call_from_object(o, tools) : NULL;
            json_decref(o);
            if (!c) break;
            json_array_append_new(calls, c);
            if (!q) break;
            p = find(q, (size_t)(end - q), open);
        }
        if (json_array_size(calls)) {
            size_t k = (size_t)(first - text);
            while (k && (text[k - 1] == ' ' || text[k - 1] == '\n' || text[k - 1] == '\t' || text[k - 1] == '\r')) k--;
            *content_len = k;
            return calls;
        }
    } else {
        /* A bare JSON object (or a list of them) as the whole answer. */
        json_t *o = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (json_is_object(o)) {
            json_t *c = call_from_object(o, tools);
            if (c) json_array_append_new(calls, c);
        } else if (json_is_array(o)) {
            size_t i;
            json_t *x;
            json_array_foreach(o, i, x) {
                json_t *c = call_from_object(x, tools);
                if (!c) {
                    json_array_clear(calls);
                    break;
                }
                json_array_append_new(calls, c);
            }
        }
        json_decref(o);
        if (json_array_size(calls)) {
            *content_len = 0;
            return calls;
        }
    }
    json_decref(calls);
    return NULL;
}

/* ---- scanning a call list as it is generated ------------------------------ */

static void skip_ws(const char *t, size_t n, size_t *i) {
    while (*i < n && (t[*i] == ' ' || t[*i] == '\n' || t[*i] == '\t' || t[*i] == '\r')) (*i)++;
}

/* Consumes lit at *i; false when the text differs or ends first. */
static bool eat(const char *t, size_t n, size_t *i, const char *lit) {
    size_t k = strlen(lit);
    if (*i + k > n || memcmp(t + *i, lit, k) != 0) return false;
    *i += k;
    return true;
}

size_t sv_tools_scan_calls(const char *t, size_t n, bool array, sv_tools_scan_t *out, size_t max) {
    size_t i = 0, k = 0;
    skip_ws(t, n, &i);
    if (array && !eat(t, n, &i, "[")) return 0;
    for (;;) {
        skip_ws(t, n, &i);
        if (k > 0) {
            if (!eat(t, n, &i, ",")) break;
            skip_ws(t, n, &i);
        }
        if (!eat(t, n, &i, "{")) break;
        skip_ws(t, n, &i);
        if (!eat(t, n, &i, "\"name\"")) break;
        skip_ws(t, n, &i);
        if (!eat(t, n, &i, ":")) break;
        skip_ws(t, n, &i);
        if (!eat(t, n, &i, "\"")) break;
        size_t name_off = i;
        while (i < n && t[i] != '"') i++; /* tool names have no escapes (tools.c name_ok) */
        if (i >= n) break;
        size_t name_len = i - name_off;
        i++;
        skip_ws(t, n, &i);
        if (!eat(t, n, &i, ",")) break;
        skip_ws(t, n, &i);
        if (!eat(t, n, &i, "\"arguments\"")) break;
        skip_ws(t, n, &i);
        if (!eat(t, n, &i, ":")) break;
        skip_ws(t, n, &i);
        if (i >= n) break;
        size_t start = i;
        int depth = 0;
        bool in_str = false, esc = false, done = false;
        for (; i < n; i++) {
            char c = t[i];
            if (in_str) {
                if (esc) esc = false;
                else if (c == '\\') esc = true;
                else if (c == '"') in_str = false;
            } else if (c == '"') {
                in_str = true;
            } else if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) {
                    i++;
                    done = true;
                    break;
                }
            }
        }
        if (k < max) out[k] = (sv_tools_scan_t){name_off, name_len, start, i - start, done};
        k++;
        if (!done) break;
        skip_ws(t, n, &i);
        if (!eat(t, n, &i, "}")) break;
    }
    return k;
}

size_t sv_tools_scan_tagged(const char *t, size_t n, int chat_kind, sv_tools_scan_t *out, size_t max) {
    const char *trigger = sv_tools_trigger(chat_kind);
    const char *p = find(t, n, trigger);
    if (!p) return 0;
    if (chat_kind != SV_CHAT_CHATML) {
        size_t from = (size_t)(p - t);
        size_t k = sv_tools_scan_calls(p, n - from, true, out, max);
        for (size_t i = 0; i < k && i < max; i++) out[i].name_off += from, out[i].args_off += from;
        return k;
    }
    size_t k = 0;
    while (p) {
        size_t from = (size_t)(p - t) + strlen(trigger);
        sv_tools_scan_t one;
        if (sv_tools_scan_calls(t + from, n - from, false, &one, 1) == 0) break;
        one.name_off += from;
        one.args_off += from;
        if (k < max) out[k] = one;
        k++;
        if (!one.args_done) break;
        size_t at = one.args_off + one.args_len;
        p = find(t + at, n - at, trigger);
    }
    return k;
}

json_t *sv_tools_calls_tagged(const char *text, size_t len, int chat_kind, json_t *tools, size_t *content_len) {
    if (chat_kind == SV_CHAT_CHATML) return sv_tools_calls_from_text(text, len, tools, content_len);
    const char *p = find(text, len, sv_tools_trigger(chat_kind));
    if (!p) return NULL;
    /* The list, and no more: the constraint ends the answer with it. */
    json_t *calls = sv_tools_calls_from_array(p, len - (size_t)(p - text));
    if (calls) {
        size_t k = (size_t)(p - text);
        while (k && (text[k - 1] == ' ' || text[k - 1] == '\n' || text[k - 1] == '\t' || text[k - 1] == '\r')) k--;
        *content_len = k;
    }
    return calls;
}
