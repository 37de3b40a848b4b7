/* render.c — OpenAI response shapes (see render.h). */
#include "render.h"

#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/detok.h"

json_t *sv_render_head(const sv_render_head_t *h, bool chunk) {
    const char *object = h->kind == SV_API_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    return json_pack("{s:s, s:s, s:I, s:s, s:[]}", "id", h->id, "object", object, "created", (json_int_t)h->created,
                     "model", h->model, "choices");
}

json_t *sv_render_usage(uint32_t prompt, uint32_t completion, uint32_t cached) {
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", (int)prompt, "completion_tokens", (int)completion,
                     "total_tokens", (int)(prompt + completion), "prompt_tokens_details", "cached_tokens",
                     (int)(cached < prompt ? cached : prompt));
}

json_t *sv_render_logprobs_new(sv_api_kind kind) {
    if (kind == SV_API_CHAT) return json_array();
    return json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
}

/* The token's text (lossy UTF-8) and, for chat, its bytes. */
static json_t *token_text(const sv_vocab_t *v, int32_t id, size_t *text_len) {
    size_t n = 0;
    const uint8_t *b = sv_vocab_bytes(v, id, &n);
    if (!b) n = 0;
    uint8_t buf[3 * 256 + 4];
    uint8_t *out = n <= 256 ? buf : malloc(3 * n + 4);
    if (!out) return NULL;
    size_t k = sv_utf8_lossy(b, n, out, NULL);
    json_t *s = json_stringn((const char *)out, k);
    if (out != buf) free(out);
    *text_len = k;
    return s;
}

static json_t *token_bytes(const sv_vocab_t *v, int32_t id) {
    size_t n = 0;
    const uint8_t *b = sv_vocab_bytes(v, id, &n);
    json_t *a = json_array();
    for (size_t i = 0; b && i < n; i++) json_array_append_new(a, json_integer(b[i]));
    return a;
}

int sv_render_logprobs(sv_api_kind kind, const sv_vocab_t *v, const int32_t *tokens, const sv_logprobs_t *lps,
                       uint32_t n, bool top, json_t *acc, size_t *text_offset) {
    size_t tl;
    for (uint32_t i = 0; i < n; i++) {
        const sv_logprobs_t *lp = &lps[i];
        if (kind == SV_API_CHAT) {
            json_t *tops = json_array();
            for (int32_t k = 0; top && k < lp->n_top; k++)
                json_array_append_new(tops, json_pack("{s:o, s:f, s:o}", "token", token_text(v, lp->top[k].id, &tl),
                                                      "logprob", (double)lp->top[k].logprob, "bytes",
                                                      token_bytes(v, lp->top[k].id)));
            json_t *e = json_pack("{s:o, s:f, s:o, s:o}", "token", token_text(v, tokens[i], &tl), "logprob",
                                  (double)lp->logprob, "bytes", token_bytes(v, tokens[i]), "top_logprobs", tops);
            if (!e || json_array_append_new(acc, e)) return -1;
        } else {
            json_t *t = token_text(v, tokens[i], &tl);
            if (!t) return -1;
            json_array_append_new(json_object_get(acc, "tokens"), t);
            json_array_append_new(json_object_get(acc, "token_logprobs"), json_real(lp->logprob));
            json_t *tops = json_object();
            for (int32_t k = 0; top && k < lp->n_top; k++) {
                size_t l2;
                json_t *s = token_text(v, lp->top[k].id, &l2);
                if (s) json_object_set_new(tops, json_string_value(s), json_real(lp->top[k].logprob));
                json_decref(s);
            }
            json_array_append_new(json_object_get(acc, "top_logprobs"), tops);
            json_array_append_new(json_object_get(acc, "text_offset"), json_integer((json_int_t)*text_offset));
            *text_offset += tl;
        }
    }
    return 0;
}

const char *sv_render_finish(sv_finish_reason f, bool tool_calls) {
    switch (f) {
    case SV_FINISH_STOP: return tool_calls ? "tool_calls" : "stop";
    case SV_FINISH_LENGTH: return "length";
    case SV_FINISH_ABORT: return "abort";
    case SV_FINISH_NONE: break;
    }
    return NULL;
}

char *sv_render_sse(json_t *chunk, size_t *len) {
    char *j = json_dumps(chunk, JSON_COMPACT);
    if (!j) return NULL;
    size_t n = strlen(j);
    char *s = malloc(n + 9);
    if (s) {
        memcpy(s, "data: ", 6);
        memcpy(s + 6, j, n);
        memcpy(s + 6 + n, "\n\n", 3);
        *len = n + 8;
    }
    free(j);
    return s;
}
