/* chat.c — the ChatML and Llama 3 chat templates (see chat.h). */
#include "chat.h"

#include <string.h>

static const char *find(const char *h, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(h + i, needle, k) == 0) return h + i;
    return NULL;
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
        /* A default system message is a literal in the template:
         * '<|im_start|>system\nTEXT<|im_end|>' inside one quoted string
         * (the Jinja string holds a real newline or the escape \n). */
        static const char *const heads[] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
        for (int h = 0; h < 2; h++) {
            const char *p = find(tmpl, n, heads[h]);
            if (!p) continue;
            p += strlen(heads[h]);
            const char *e = find(p, n - (size_t)(p - tmpl), "<|im_end|>");
            if (!e) break;
            /* A template that writes the caller's system content here has
             * Jinja in between, not a literal. */
            if (find(p, (size_t)(e - p), "{{") || find(p, (size_t)(e - p), "{%") || find(p, (size_t)(e - p), "'"))
                break;
            size_t len = (size_t)(e - p);
            if (len >= sizeof out->default_system)
                return sv_error_set(err, SV_ERR_BUDGET, -1, "chat template: a default system message of %zu bytes",
                                    len);
            memcpy(out->default_system, p, len);
            break;
        }
        return SV_OK;
    }
    return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                        "chat template: not ChatML (<|im_start|>) nor Llama 3 (<|start_header_id|>); sieve renders "
                        "only those two families");
}

static bool role_ok(const char *r) {
    return r && (!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") || !strcmp(r, "tool"));
}

static sv_status put(sv_bytes_t *out, const char *s, size_t n, sv_error_t *err) {
    if (sv_bytes_append(out, s, n)) return sv_error_set(err, SV_ERR_NOMEM, -1, "chat template: out of memory");
    return SV_OK;
}
#define PUTS(s) do { if ((st = put(out, (s), strlen(s), err))) return st; } while (0)

static void strip(const char **s, size_t *n) {
    const char *p = *s;
    size_t k = *n;
    while (k && (p[0] == ' ' || p[0] == '\t' || p[0] == '\n' || p[0] == '\r')) p++, k--;
    while (k && (p[k - 1] == ' ' || p[k - 1] == '\t' || p[k - 1] == '\n' || p[k - 1] == '\r')) k--;
    *s = p;
    *n = k;
}

sv_status sv_chat_render(const sv_chat_template_t *t, const sv_chat_msg_t *msgs, size_t n, sv_bytes_t *out,
                         sv_error_t *err) {
    sv_status st;
    for (size_t i = 0; i < n; i++) {
        if (!role_ok(msgs[i].role))
            return sv_error_set(err, SV_ERR_ARG, -1, "messages[%zu].role: must be system, user, assistant or tool", i);
        if (!msgs[i].content) return sv_error_set(err, SV_ERR_ARG, -1, "messages[%zu].content: missing", i);
    }
    if (t->kind == SV_CHAT_CHATML) {
        if (t->default_system[0] && (n == 0 || strcmp(msgs[0].role, "system") != 0)) {
            PUTS("<|im_start|>system\n");
            PUTS(t->default_system);
            PUTS("<|im_end|>\n");
        }
        for (size_t i = 0; i < n; i++) {
            PUTS("<|im_start|>");
            PUTS(msgs[i].role);
            PUTS("\n");
            PUTS(msgs[i].content);
            PUTS("<|im_end|>\n");
        }
        PUTS("<|im_start|>assistant\n");
        return SV_OK;
    }
    if (t->kind == SV_CHAT_LLAMA3) {
        PUTS("<|begin_of_text|>");
        for (size_t i = 0; i < n; i++) {
            PUTS("<|start_header_id|>");
            PUTS(msgs[i].role);
            PUTS("<|end_header_id|>\n\n");
            const char *c = msgs[i].content;
            size_t k = strlen(c);
            strip(&c, &k);
            if ((st = put(out, c, k, err))) return st;
            PUTS("<|eot_id|>");
        }
        PUTS("<|start_header_id|>assistant<|end_header_id|>\n\n");
        return SV_OK;
    }
    return sv_error_set(err, SV_ERR_ARG, -1, "chat template: not initialized");
}
