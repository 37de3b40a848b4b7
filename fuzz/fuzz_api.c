/* fuzz_api.c — libFuzzer target for the server's request layer: an HTTP
 * body to the internal request (src/api/api.h), then everything the
 * server does with a parsed request before the engine: the chat prompt in
 * each template family (src/api/prompt.h, src/chat/chat.h), the
 * tool-call schema, reading tool calls back out of text, and the scanner
 * that streams calls as they are generated.
 *
 * Input: the first byte picks the endpoint (even: chat, odd: completions);
 * the rest is the body. Properties checked: no crash, no leak, no
 * sanitizer report; a failed parse always names a 4xx/5xx status and a
 * message; a parsed request's constraint text is non-empty and within the
 * limit; a tool-call schema is JSON. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/api/api.h"
#include "src/api/prompt.h"
#include "src/api/tools.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

/* The calls in data as scanner form reads them: 0 one call object, 1 the
 * call list, 2 and 3 an "auto" answer of ChatML and of the other families. */
static size_t scan(int form, const uint8_t *data, size_t size, sv_tools_scan_t *out, size_t max) {
    if (form < 2) return sv_tools_scan_calls((const char *)data, size, form == 1, out, max);
    return sv_tools_scan_tagged((const char *)data, size, form == 2 ? SV_CHAT_CHATML : SV_CHAT_LLAMA3, out, max);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    /* The streaming call scanners on the raw bytes, every form (one call
     * object, the call list, an "auto" answer in ChatML's and in the other
     * families' format): offsets stay inside the text, and a call's
     * arguments end where the text does or before. */
    for (int form = 0; form < 4; form++) {

        /* Any number of calls: a scan into a small buffer counts them, a
         * second one into a buffer that size reads them all, the same. */
        sv_tools_scan_t few[2];
        size_t k = scan(form, data, size, few, 2);
        sv_tools_scan_t *sc = malloc((k ? k : 1) * sizeof *sc);
        CHECK(sc);
        CHECK(scan(form, data, size, sc, k) == k);
        for (size_t i = 0; i < k; i++) {
            CHECK(i >= 2 || (few[i].name_off == sc[i].name_off && few[i].name_len == sc[i].name_len &&
                             few[i].args_off == sc[i].args_off && few[i].args_len == sc[i].args_len &&
                             few[i].args_done == sc[i].args_done));
            CHECK(sc[i].name_off + sc[i].name_len <= size && sc[i].args_off + sc[i].args_len <= size);
            CHECK(sc[i].args_off >= sc[i].name_off + sc[i].name_len);
            CHECK(i + 1 == k || sc[i].args_done);
        }
        free(sc);
    }
    sv_api_kind kind = (data[0] & 1) ? SV_API_COMPLETION : SV_API_CHAT;
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    sv_api_limits_t lim = {.vocab_size = 1000, .max_ctx = 4096, .max_n = 16, .max_constraint_bytes = 1 << 16};
    sv_api_request_t r;
    sv_api_error_t e;
    if (sv_api_parse(kind, body, n, &lim, &r, &e)) {
        CHECK(e.status >= 400 && e.status < 600 && e.message[0]);
        json_t *j = sv_api_error_json(&e);
        CHECK(j);
        json_decref(j);
    } else {
        CHECK(r.n >= 1 && r.n <= 16 && r.n_stop <= SV_ENGINE_MAX_STOP);
        if (r.c.on) CHECK(r.c.text && r.c.len > 0 && r.c.len <= lim.max_constraint_bytes);
        if (r.c.tool_calls) {
            json_t *s = json_loadb(r.c.text, r.c.len, JSON_ALLOW_NUL, NULL); /* \u0000 is data in a schema */
            CHECK(json_is_object(s));
            json_decref(s);
        }
        if (kind == SV_API_CHAT) {
            static const char *const names[] = {"chatml", "llama3", "mistral", "gemma"};
            for (int k = 0; k < 4; k++) {
                sv_chat_template_t t;
                CHECK(sv_chat_template_named(names[k], &t, NULL) == SV_OK);
                if (k == 0) strcpy(t.default_system, "You are a helpful assistant.");
                sv_bytes_t out = {0};
                sv_api_error_t pe;
                if (sv_prompt_render_chat(&t, &r, &out, &pe)) CHECK(pe.status >= 400);
                else CHECK(out.n > 0);
                sv_bytes_free(&out);
            }
            if (r.tools) {
                /* The body's own text as a model's answer, both ways. */
                size_t content_len = 0;
                json_t *c = sv_tools_calls_from_text(body, n, r.tools, &content_len);
                CHECK(content_len <= n);
                json_decref(c);
                json_decref(sv_tools_calls_from_array(body, n));
                for (int k = SV_CHAT_CHATML; k <= SV_CHAT_GEMMA; k++) {
                    content_len = 0;
                    c = sv_tools_calls_tagged(body, n, k, r.tools, &content_len);
                    CHECK(content_len <= n);
                    json_decref(c);
                    /* "auto"'s constraint: a framed call schema */
                    char *text = NULL;
                    sv_api_error_t te;
                    if (r.tool_choice == SV_TOOLS_AUTO && !sv_tools_tagged_calls(&r, k, &text, &te)) {
                        json_t *j = json_loads(text, 0, NULL);
                        CHECK(json_is_object(json_object_get(j, "frame")) && json_is_object(json_object_get(j, "schema")));
                        json_decref(j);
                    }
                    free(text);
                }
            }
        }
        sv_api_request_free(&r);
    }
    return 0;
}
