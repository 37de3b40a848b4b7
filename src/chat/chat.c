/* chat.c — the ChatML, Llama 3, Mistral and Gemma chat templates (see chat.h). */
#include "chat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "src/model/gguf.h"
#include "util/path.h"

static const char *find(const char *h, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(h + i, needle, k) == 0) return h + i;
    return NULL;
}

/* A default system message is a literal in the template:
 * '<|im_start|>system\nTEXT<|im_end|>' inside one quoted string (the Jinja
 * string holds a real newline or the escape \n). Every occurrence is tried:
 * Qwen2.5's template first writes the caller's system message and has the
 * literal default further on. */
static sv_status chatml_default_system(const char *tmpl, size_t n, sv_chat_template_t *out, sv_error_t *err) {
    static const char *const heads[] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
    for (int h = 0; h < 2; h++) {
        const char *from = tmpl;
        const char *p;
        while ((p = find(from, n - (size_t)(from - tmpl), heads[h]))) {
            p += strlen(heads[h]);
            from = p;
            const char *e = find(p, n - (size_t)(p - tmpl), "<|im_end|>");
            if (!e) break;
            /* A template that writes the caller's system content here has
             * Jinja in between, not a literal. */
            if (find(p, (size_t)(e - p), "{{") || find(p, (size_t)(e - p), "{%") || find(p, (size_t)(e - p), "'") ||
                find(p, (size_t)(e - p), "\""))
                continue;
            size_t len = (size_t)(e - p);
            if (len >= sizeof out->default_system)
                return sv_error_set(err, SV_ERR_BUDGET, -1, "chat template: a default system message of %zu bytes",
                                    len);
            memcpy(out->default_system, p, len);
            out->default_system[len] = 0;
            return SV_OK;
        }
    }
    return SV_OK;
}

sv_status sv_chat_template_detect(const char *tmpl, size_t n, sv_chat_template_t *out, sv_error_t *err) {
    memset(out, 0, sizeof *out);
    if (!tmpl) return sv_error_set(err, SV_ERR_ARG, -1, "chat template: none");
    if (find(tmpl, n, "<|start_header_id|>") && find(tmpl, n, "<|eot_id|>")) {
        out->kind = SV_CHAT_LLAMA3;
        return SV_OK;
    }
    if (find(tmpl, n, "<|im_start|>") && find(tmpl, n, "<|im_end|>")) {
        out->kind = SV_CHAT_CHATML;
        return chatml_default_system(tmpl, n, out, err);
    }
    if (find(tmpl, n, "<start_of_turn>") && find(tmpl, n, "<end_of_turn>")) {
        out->kind = SV_CHAT_GEMMA;
        return SV_OK;
    }
    if (find(tmpl, n, "[INST]") && find(tmpl, n, "[/INST]")) {
        out->kind = SV_CHAT_MISTRAL;
        return SV_OK;
    }
    return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                        "chat template: not ChatML (<|im_start|>), Llama 3 (<|start_header_id|>), Mistral ([INST]) nor "
                        "Gemma (<start_of_turn>); sieve renders only those families (--chat-template NAME overrides)");
}

sv_status sv_chat_template_named(const char *name, sv_chat_template_t *out, sv_error_t *err) {
    memset(out, 0, sizeof *out);
    if (!strcmp(name, "chatml")) out->kind = SV_CHAT_CHATML;
    else if (!strcmp(name, "llama3")) out->kind = SV_CHAT_LLAMA3;
    else if (!strcmp(name, "mistral")) out->kind = SV_CHAT_MISTRAL;
    else if (!strcmp(name, "gemma")) out->kind = SV_CHAT_GEMMA;
    else return sv_error_set(err, SV_ERR_ARG, -1, "chat template '%s': must be chatml, llama3, mistral or gemma", name);
    return SV_OK;
}

static bool role_ok(const char *r) {
    return r && (!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") || !strcmp(r, "tool"));
}

static sv_status put(sv_bytes_t *out, const char *s, size_t n, sv_error_t *err) {
    if (sv_bytes_append(out, s, n)) return sv_error_set(err, SV_ERR_NOMEM, -1, "chat template: out of memory");
    return SV_OK;
}
#define PUTS(s) do { const char *s_ = (s); if ((st = put(out, s_, strlen(s_), err))) return st; } while (0)
#define PUTN(s, n) do { if ((st = put(out, (s), (n), err))) return st; } while (0)

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void strip(const char **s, size_t *n) {
    const char *p = *s;
    size_t k = *n;
    while (k && is_ws(p[0])) p++, k--;
    while (k && is_ws(p[k - 1])) k--;
    *s = p;
    *n = k;
}

static sv_status put_stripped(sv_bytes_t *out, const char *c, sv_error_t *err) {
    size_t k = strlen(c);
    strip(&c, &k);
    return put(out, c, k, err);
}

/* A message with its calls, as the renderers see it. */
typedef struct {
    const char *role, *content;
    const sv_chat_tool_call_t *tool_calls;
    size_t n_tool_calls;
} msg_t;

static const char *content_of(const msg_t *m) { return m->content ? m->content : ""; }

/* Llama 3, Mistral, Gemma: the tools section of the system text, and a
 * message's calls as a JSON list. */
static sv_status put_tools_section(sv_bytes_t *out, const char *const *tools, size_t n_tools, sv_error_t *err) {
    sv_status st;
    PUTS("You can call the following functions. To call functions, answer with a JSON list of calls, "
         "[{\"name\": function name, \"arguments\": arguments object}], and nothing else.\n");
    for (size_t i = 0; i < n_tools; i++) {
        PUTS("\n");
        PUTS(tools[i]);
    }
    return SV_OK;
}

static sv_status put_calls_json(sv_bytes_t *out, const msg_t *m, sv_error_t *err) {
    sv_status st;
    PUTS("[");
    for (size_t i = 0; i < m->n_tool_calls; i++) {
        if (i) PUTS(", ");
        PUTS("{\"name\": \"");
        PUTS(m->tool_calls[i].name);
        PUTS("\", \"arguments\": ");
        PUTS(m->tool_calls[i].arguments);
        PUTS("}");
    }
    PUTS("]");
    return SV_OK;
}

/* The system text of the generic families: the caller's system content,
 * then the tools section (a blank line between). */
static sv_status put_system_text(sv_bytes_t *out, const char *system, const char *const *tools, size_t n_tools,
                                 bool stripped, sv_error_t *err) {
    sv_status st;
    if (system) {
        if (stripped) {
            if ((st = put_stripped(out, system, err))) return st;
        } else {
            PUTS(system);
        }
        if (n_tools) PUTS("\n\n");
    }
    if (n_tools) return put_tools_section(out, tools, n_tools, err);
    return SV_OK;
}

static sv_status render_chatml(const sv_chat_template_t *t, const msg_t *msgs, size_t n,
                               const char *const *tools, size_t n_tools, sv_bytes_t *out, sv_error_t *err) {
    sv_status st;
    bool first_system = n > 0 && !strcmp(msgs[0].role, "system");
    if (n_tools) {
        PUTS("<|im_start|>system\n");
        PUTS(first_system ? content_of(&msgs[0]) : t->default_system);
        PUTS("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
             "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
        for (size_t i = 0; i < n_tools; i++) {
            PUTS("\n");
            PUTS(tools[i]);
        }
        PUTS("\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
             "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
             "<args-json-object>}\n</tool_call><|im_end|>\n");
    } else if (t->default_system[0] && !first_system) {
        PUTS("<|im_start|>system\n");
        PUTS(t->default_system);
        PUTS("<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        const msg_t *m = &msgs[i];
        if (i == 0 && first_system && n_tools) continue; /* written in the tools header */
        if (!strcmp(m->role, "tool")) {
            if (i == 0 || strcmp(msgs[i - 1].role, "tool") != 0) PUTS("<|im_start|>user");
            PUTS("\n<tool_response>\n");
            PUTS(content_of(m));
            PUTS("\n</tool_response>");
            if (i + 1 == n || strcmp(msgs[i + 1].role, "tool") != 0) PUTS("<|im_end|>\n");
            continue;
        }
        if (!strcmp(m->role, "assistant") && m->n_tool_calls) {
            PUTS("<|im_start|>assistant");
            if (m->content && m->content[0]) {
                PUTS("\n");
                PUTS(m->content);
            }
            for (size_t k = 0; k < m->n_tool_calls; k++) {
                PUTS("\n<tool_call>\n{\"name\": \"");
                PUTS(m->tool_calls[k].name);
                PUTS("\", \"arguments\": ");
                PUTS(m->tool_calls[k].arguments);
                PUTS("}\n</tool_call>");
            }
            PUTS("<|im_end|>\n");
            continue;
        }
        PUTS("<|im_start|>");
        PUTS(m->role);
        PUTS("\n");
        PUTS(content_of(m));
        PUTS("<|im_end|>\n");
    }
    PUTS("<|im_start|>assistant\n");
    return SV_OK;
}

static sv_status render_llama3(const msg_t *msgs, size_t n, const char *const *tools, size_t n_tools,
                               sv_bytes_t *out, sv_error_t *err) {
    sv_status st;
    PUTS("<|begin_of_text|>");
    size_t i = 0;
    if (n_tools) {
        bool sys = n > 0 && !strcmp(msgs[0].role, "system");
        PUTS("<|start_header_id|>system<|end_header_id|>\n\n");
        if ((st = put_system_text(out, sys ? content_of(&msgs[0]) : NULL, tools, n_tools, true, err))) return st;
        PUTS("<|eot_id|>");
        i = sys ? 1 : 0;
    }
    for (; i < n; i++) {
        const msg_t *m = &msgs[i];
        PUTS("<|start_header_id|>");
        PUTS(!strcmp(m->role, "tool") ? "ipython" : m->role);
        PUTS("<|end_header_id|>\n\n");
        if (m->n_tool_calls) {
            if (m->content && m->content[0]) {
                if ((st = put_stripped(out, m->content, err))) return st;
                PUTS("\n\n");
            }
            if ((st = put_calls_json(out, m, err))) return st;
        } else if ((st = put_stripped(out, content_of(m), err))) {
            return st;
        }
        PUTS("<|eot_id|>");
    }
    PUTS("<|start_header_id|>assistant<|end_header_id|>\n\n");
    return SV_OK;
}

/* An assistant turn's text for Mistral and Gemma: content, then calls. */
static sv_status put_assistant(sv_bytes_t *out, const msg_t *m, bool stripped, sv_error_t *err) {
    sv_status st;
    if (m->content && m->content[0]) {
        if (stripped) {
            if ((st = put_stripped(out, m->content, err))) return st;
        } else {
            PUTS(m->content);
        }
        if (m->n_tool_calls) PUTS("\n\n");
    }
    if (m->n_tool_calls) return put_calls_json(out, m, err);
    return SV_OK;
}

static sv_status render_mistral(const msg_t *msgs, size_t n, const char *const *tools, size_t n_tools,
                                sv_bytes_t *out, sv_error_t *err) {
    sv_status st;
    PUTS("<s>");
    /* System messages (and the tools section) wait for the next user turn. */
    const char *pending_system = NULL;
    bool pending_tools = n_tools > 0;
    for (size_t i = 0; i < n; i++) {
        const msg_t *m = &msgs[i];
        if (!strcmp(m->role, "system")) {
            pending_system = content_of(m);
            continue;
        }
        if (!strcmp(m->role, "assistant")) {
            if ((st = put_assistant(out, m, false, err))) return st;
            PUTS("</s>");
            continue;
        }
        PUTS("[INST] ");
        if (pending_system || pending_tools) {
            if ((st = put_system_text(out, pending_system, tools, pending_tools ? n_tools : 0, false, err))) return st;
            PUTS("\n\n");
            pending_system = NULL;
            pending_tools = false;
        }
        PUTS(content_of(m));
        PUTS(" [/INST]");
    }
    return SV_OK;
}

static sv_status render_gemma(const msg_t *msgs, size_t n, const char *const *tools, size_t n_tools,
                              sv_bytes_t *out, sv_error_t *err) {
    sv_status st;
    PUTS("<bos>");
    size_t i = 0;
    const char *system = NULL;
    if (n > 0 && !strcmp(msgs[0].role, "system")) {
        system = content_of(&msgs[0]);
        i = 1;
    }
    bool prefix = system || n_tools;
    for (; i < n; i++) {
        const msg_t *m = &msgs[i];
        PUTS("<start_of_turn>");
        PUTS(!strcmp(m->role, "assistant") ? "model" : !strcmp(m->role, "system") ? "system" : "user");
        PUTS("\n");
        if (prefix) {
            if ((st = put_system_text(out, system, tools, n_tools, false, err))) return st;
            PUTS("\n\n");
            prefix = false;
        }
        if (!strcmp(m->role, "assistant")) {
            if ((st = put_assistant(out, m, true, err))) return st;
        } else if ((st = put_stripped(out, content_of(m), err))) {
            return st;
        }
        PUTS("<end_of_turn>\n");
    }
    PUTS("<start_of_turn>model\n");
    return SV_OK;
}

sv_status sv_chat_render_tools(const sv_chat_template_t *t, const sv_chat_msg_t *in, const sv_chat_calls_t *calls,
                               size_t n, const char *const *tools, size_t n_tools, sv_bytes_t *out, sv_error_t *err) {
    if (n > SIZE_MAX / sizeof(msg_t)) return sv_error_set(err, SV_ERR_ARG, -1, "chat template: too many messages");
    for (size_t i = 0; i < n; i++) {
        size_t nc = calls ? calls[i].n : 0;
        if (!role_ok(in[i].role))
            return sv_error_set(err, SV_ERR_ARG, -1, "messages[%zu].role: must be system, user, assistant or tool", i);
        if (!in[i].content && !(nc && !strcmp(in[i].role, "assistant")))
            return sv_error_set(err, SV_ERR_ARG, -1, "messages[%zu].content: missing", i);
        if (nc && strcmp(in[i].role, "assistant") != 0)
            return sv_error_set(err, SV_ERR_ARG, -1, "messages[%zu]: only an assistant message has tool calls", i);
    }
    msg_t *msgs = malloc((n ? n : 1) * sizeof *msgs);
    if (!msgs) return sv_error_set(err, SV_ERR_NOMEM, -1, "chat template: out of memory");
    for (size_t i = 0; i < n; i++)
        msgs[i] = (msg_t){in[i].role, in[i].content, calls ? calls[i].calls : NULL, calls ? calls[i].n : 0};
    sv_status st;
    switch (t->kind) {
    case SV_CHAT_CHATML: st = render_chatml(t, msgs, n, tools, n_tools, out, err); break;
    case SV_CHAT_LLAMA3: st = render_llama3(msgs, n, tools, n_tools, out, err); break;
    case SV_CHAT_MISTRAL: st = render_mistral(msgs, n, tools, n_tools, out, err); break;
    case SV_CHAT_GEMMA: st = render_gemma(msgs, n, tools, n_tools, out, err); break;
    default: st = sv_error_set(err, SV_ERR_ARG, -1, "chat template: not initialized");
    }
    free(msgs);
    return st;
}

sv_status sv_chat_render(const sv_chat_template_t *t, const sv_chat_msg_t *msgs, size_t n, sv_bytes_t *out,
                         sv_error_t *err) {
    return sv_chat_render_tools(t, msgs, NULL, n, NULL, 0, out, err);
}

/* The model's chat template: GGUF tokenizer.chat_template, or
 * tokenizer_config.json's chat_template in an HF directory. */
sv_status sv_chat_template_load(const char *model, sv_chat_template_t *t, sv_error_t *err) {
    if (sv_path_is_dir(model)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tokenizer_config.json", model);
        json_error_t je;
        json_t *cfg = json_load_file(path, 0, &je);
        if (!cfg) return sv_error_set(err, SV_ERR_IO, -1, "%s: %s", path, je.text);
        json_t *ct = json_object_get(cfg, "chat_template");
        sv_status st = json_is_string(ct)
                           ? sv_chat_template_detect(json_string_value(ct), json_string_length(ct), t, err)
                           : sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s has no chat_template string", path);
        json_decref(cfg);
        return st;
    }
    sv_gguf_t *g;
    sv_status st = sv_gguf_open(model, &g, err);
    if (st) return st;
    sv_gguf_str_t s;
    st = sv_gguf_get_str(g, "tokenizer.chat_template", &s, err);
    if (!st) st = sv_chat_template_detect(s.p, (size_t)s.n, t, err);
    sv_gguf_destroy(g);
    return st;
}
