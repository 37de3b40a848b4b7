/* api_cli.c — the server's request layer without a server, for
 * tests/server/test_api.py and tests/model/test_chat_template.py.
 *
 *   api_cli parse chat|completion     body on stdin -> the internal request
 *                                      as JSON, or {"status", "error": {...}}
 *   api_cli render NAME|@FILE          chat body on stdin -> the prompt text
 *                                      (template by name, or detected from the
 *                                      Jinja text in FILE)
 *   api_cli pyjson                     JSON on stdin -> Python's json.dumps
 *   api_cli calls array|text           tools body on stdin as {"text", "tools"}
 *                                      -> the tool_calls found, or null
 *   api_cli errors                     every status code: its HTTP status and
 *                                      a constraint compile error of that code
 *   api_cli scan array|object          text on stdin -> the calls a stream
 *                                      would have sent so far, as
 *                                      [{"name", "args", "done"}]
 *
 * Limits for parse: vocabulary 1000, context 4096, n <= 16. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/api/api.h"
#include "src/api/prompt.h"
#include "src/api/tools.h"

static char *read_all(size_t *n) {
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    size_t k;
    while (b && (k = fread(b + len, 1, cap - len, stdin)) > 0) {
        len += k;
        if (len == cap) b = realloc(b, cap *= 2);
    }
    if (b) b[len] = 0; /* cap > len always */
    *n = len;
    return b;
}

static int print(json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    puts(s ? s : "null");
    free(s);
    json_decref(j);
    return 0;
}

static int parse(const char *kind, const char *body, size_t n) {
    sv_api_limits_t lim = {.vocab_size = 1000, .max_ctx = 4096, .max_n = 16, .max_constraint_bytes = 1 << 20};
    sv_api_request_t r;
    sv_api_error_t e;
    if (sv_api_parse(!strcmp(kind, "chat") ? SV_API_CHAT : SV_API_COMPLETION, body, n, &lim, &r, &e)) {
        json_t *j = sv_api_error_json(&e);
        json_object_set_new(j, "status", json_integer(e.status));
        return print(j);
    }
    json_t *stop = json_array();
    for (uint32_t i = 0; i < r.n_stop; i++) json_array_append_new(stop, json_string(r.stop[i]));
    json_t *bias = json_object();
    for (uint32_t i = 0; i < r.sp.n_logit_bias; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", r.sp.logit_bias[i].id);
        json_object_set_new(bias, k, json_real(r.sp.logit_bias[i].bias));
    }
    static const char *const choices[] = {"none", "auto", "required", "named"};
    json_t *j = json_pack(
        "{s:i, s:i, s:b, s:b, s:b, s:i, s:o, s:{s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:o, s:o}, s:s, s:o, s:b}",
        "n", (int)r.n, "max_tokens", (int)r.max_tokens, "stream", r.stream, "include_usage", r.include_usage,
        "logprobs", r.logprobs, "top_logprobs", (int)r.top_logprobs, "stop", stop, "sampling", "temperature",
        (double)r.sp.temperature, "top_p", (double)r.sp.top_p, "top_k", (int)r.sp.top_k, "min_p",
        (double)r.sp.min_p, "presence_penalty", (double)r.sp.presence_penalty, "frequency_penalty",
        (double)r.sp.frequency_penalty, "repetition_penalty", (double)r.sp.repetition_penalty, "seed",
        r.seed_given ? json_integer((json_int_t)r.sp.seed) : json_null(), "logit_bias", bias, "tool_choice",
        choices[r.tool_choice], "tool_name", r.tool_name ? json_string(r.tool_name) : json_null(),
        "parallel_tool_calls", r.parallel_tool_calls);
    if (r.c.on)
        json_object_set_new(j, "constraint",
                            json_pack("{s:s, s:s, s:s, s:b}", "kind", r.c.kind == SV_CONSTRAINT_SCHEMA ? "schema" : "regex",
                                      "text", r.c.text, "param", r.c.param, "tool_calls", r.c.tool_calls));
    else json_object_set_new(j, "constraint", json_null());
    if (r.prompt) json_object_set_new(j, "prompt", json_string(r.prompt));
    if (r.prompt_ids) {
        json_t *ids = json_array();
        for (uint32_t i = 0; i < r.n_prompt_ids; i++) json_array_append_new(ids, json_integer(r.prompt_ids[i]));
        json_object_set_new(j, "prompt_ids", ids);
    }
    sv_api_request_free(&r);
    return print(j);
}

static int render(const char *which, const char *body, size_t n) {
    sv_chat_template_t t;
    sv_error_t err;
    sv_error_clear(&err);
    if (which[0] == '@') {
        FILE *f = fopen(which + 1, "rb");
        if (!f) return fprintf(stderr, "cannot open %s\n", which + 1), 1;
        static char tmpl[1 << 20];
        size_t k = fread(tmpl, 1, sizeof tmpl, f);
        fclose(f);
        if (sv_chat_template_detect(tmpl, k, &t, &err)) return fprintf(stderr, "%s\n", err.message), 1;
    } else if (sv_chat_template_named(which, &t, &err)) {
        return fprintf(stderr, "%s\n", err.message), 1;
    }
    sv_api_limits_t lim = {.vocab_size = 1000, .max_ctx = 4096, .max_n = 16, .max_constraint_bytes = 1 << 20};
    sv_api_request_t r;
    sv_api_error_t e;
    if (sv_api_parse(SV_API_CHAT, body, n, &lim, &r, &e)) return fprintf(stderr, "%d %s\n", e.status, e.message), 1;
    sv_bytes_t out = {0};
    int rc = sv_prompt_render_chat(&t, &r, &out, &e);
    if (rc) fprintf(stderr, "%d %s\n", e.status, e.message);
    else fwrite(out.p, 1, out.n, stdout);
    sv_bytes_free(&out);
    sv_api_request_free(&r);
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: api_cli parse|render|pyjson|calls ...\n"), 64;
    size_t n;
    char *body = read_all(&n);
    if (!body) return 1;
    int rc = 64;
    if (!strcmp(argv[1], "errors")) {
        /* Every status code: its HTTP status, and a schema compile error of
         * that code as the client would see it. */
        json_t *all = json_array();
        for (int code = SV_OK; code <= SV_ERR_NOT_FOUND; code++) {
            sv_api_constraint_t c = {.on = true, .kind = SV_CONSTRAINT_SCHEMA, .param = "response_format"};
            sv_error_t err;
            sv_error_set(&err, (sv_status)code, -1, "a %s error", sv_status_name((sv_status)code));
            sv_api_error_t e;
            sv_api_constraint_error(&c, &err, &e);
            json_array_append_new(all, json_pack("{s:s, s:i, s:i, s:o}", "name", sv_status_name((sv_status)code), "http",
                                                 sv_api_http_status((sv_status)code), "compile_status", e.status,
                                                 "compile_error", sv_api_error_json(&e)));
        }
        rc = print(all);
    } else if (!strcmp(argv[1], "parse") && argc == 3) rc = parse(argv[2], body, n);
    else if (!strcmp(argv[1], "render") && argc == 3) rc = render(argv[2], body, n);
    else if (!strcmp(argv[1], "pyjson")) {
        json_t *j = json_loadb(body, n, JSON_DECODE_ANY, NULL);
        sv_bytes_t out = {0};
        if (j && !sv_pyjson_dumps(j, &out)) {
            fwrite(out.p, 1, out.n, stdout);
            rc = 0;
        } else rc = 1;
        json_decref(j);
        sv_bytes_free(&out);
    } else if (!strcmp(argv[1], "scan") && argc == 3) {
        /* As the server does: a scan into a small buffer counts the
         * calls, a second one into a buffer of that size reads them. */
        bool array = !strcmp(argv[2], "array");
        sv_tools_scan_t first[2];
        size_t k = sv_tools_scan_calls(body, n, array, first, 2);
        sv_tools_scan_t *sc = malloc((k ? k : 1) * sizeof *sc);
        if (!sc || sv_tools_scan_calls(body, n, array, sc, k) != k) {
            free(sc);
            free(body);
            return 1;
        }
        for (size_t i = 0; i < k && i < 2; i++)
            if (first[i].name_off != sc[i].name_off || first[i].name_len != sc[i].name_len ||
                first[i].args_off != sc[i].args_off || first[i].args_len != sc[i].args_len ||
                first[i].args_done != sc[i].args_done) {
                fprintf(stderr, "scan: call %zu differs between the two scans\n", i);
                free(sc);
                free(body);
                return 1;
            }
        json_t *a = json_array();
        for (size_t i = 0; i < k; i++)
            json_array_append_new(a, json_pack("{s:s%, s:s%, s:b}", "name", body + sc[i].name_off, sc[i].name_len,
                                               "args", body + sc[i].args_off, sc[i].args_len, "done", sc[i].args_done));
        free(sc);
        rc = print(a);
    } else if (!strcmp(argv[1], "calls") && argc == 3) {
        json_t *j = json_loadb(body, n, 0, NULL);
        const char *text = json_string_value(json_object_get(j, "text"));
        if (!text) rc = 1;
        else {
            size_t content_len = 0;
            json_t *calls = !strcmp(argv[2], "array")
                                ? sv_tools_calls_from_array(text, strlen(text))
                                : sv_tools_calls_from_text(text, strlen(text), json_object_get(j, "tools"), &content_len);
            json_t *o = json_pack("{s:o, s:i}", "calls", calls ? calls : json_null(), "content_len", (int)content_len);
            rc = print(o);
        }
        json_decref(j);
    }
    free(body);
    return rc;
}
