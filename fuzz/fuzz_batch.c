/* fuzz_batch.c — libFuzzer target for what a batch's client uploads: the
 * input file (src/batch/batch_input.h: JSON Lines of OpenAI batch requests,
 * each body checked by the server's request parser) and the multipart form
 * that carries it to POST /v1/files (src/api/multipart.h).
 *
 * Input: a first byte that picks the parser (even: the batch file; odd: a
 * multipart body, whose Content-Type is the rest up to the first newline).
 * Properties checked: no crash, no leak, no sanitizer report. The batch
 * file: every non-blank line is either accepted or reported (line numbers in
 * order, each within the file, with a code and a message); accepted lines
 * have distinct custom_ids, a known endpoint, and a body that parses back to
 * a JSON object. The multipart body: every part lies inside the body, in
 * order, with a name; a refusal says why. */
#define _GNU_SOURCE /* fmemopen */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/batch/batch_input.h"
#include "src/api/multipart.h"

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static void multipart(const uint8_t *data, size_t size) {
    const uint8_t *nl = memchr(data, '\n', size);
    size_t cn = nl ? (size_t)(nl - data) : size;
    if (cn > 512) return;
    char ctype[513];
    memcpy(ctype, data, cn);
    ctype[cn] = 0;
    const char *body = (const char *)data + (nl ? cn + 1 : cn);
    size_t len = size - (nl ? cn + 1 : cn);
    sv_mpart_t parts[8];
    char why[128] = "";
    int n = sv_multipart_parse(ctype, body, len, parts, 8, why, sizeof why);
    if (n < 0) {
        CHECK(why[0]);
        return;
    }
    CHECK(n <= 8);
    const char *last = body;
    for (int i = 0; i < n; i++) {
        CHECK(parts[i].name && parts[i].name >= body && parts[i].name + parts[i].name_len <= body + len);
        CHECK(!parts[i].filename ||
              (parts[i].filename >= body && parts[i].filename + parts[i].filename_len <= body + len));
        CHECK(parts[i].data >= last && parts[i].data + parts[i].len <= body + len);
        last = parts[i].data + parts[i].len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || size > (1u << 20)) return 0;
    if (data[0] & 1) {
        multipart(data + 1, size - 1);
        return 0;
    }
    /* Lines the reader will see: getline splits on '\n'; a line of spaces,
     * tabs and CR only is blank. */
    size_t nonblank = 0, lines = 0;
    for (size_t i = 0; i < size;) {
        size_t j = i;
        bool blank = true;
        while (j < size && data[j] != '\n') {
            if (data[j] != ' ' && data[j] != '\t' && data[j] != '\r') blank = false;
            j++;
        }
        lines++;
        nonblank += !blank;
        i = j + 1;
    }
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return 0;
    sv_api_limits_t lim = {.vocab_size = 50000, .max_ctx = 4096, .max_n = 4, .max_constraint_bytes = 1u << 16,
                           .ws = SV_WS_CANONICAL};
    sv_batch_input_config_t cfg = {.lim = &lim, .max_body_bytes = 1u << 16, .max_lines = 64};
    sv_batch_input_t in;
    sv_error_t err;
    sv_error_clear(&err);
    sv_status st = sv_batch_input_read_stream(f, "fuzz", &cfg, &in, &err);
    fclose(f);
    if (st == SV_OK) {
        size_t k;
        json_t *e;
        json_int_t last = 0;
        bool capped = false;
        json_array_foreach(in.errors, k, e) {
            json_int_t line = json_integer_value(json_object_get(e, "line"));
            CHECK(line > last && (size_t)line <= lines);
            last = line;
            CHECK(json_string_length(json_object_get(e, "code")) > 0);
            CHECK(json_string_length(json_object_get(e, "message")) > 0);
            capped |= !strcmp(json_string_value(json_object_get(e, "code")), "too_many_lines");
        }
        CHECK(json_array_size(in.errors) == in.n_errors);
        CHECK(capped ? in.n == cfg.max_lines : in.n + in.n_errors == nonblank);
        for (size_t i = 0; i < in.n; i++) {
            const sv_batch_line_t *l = &in.lines[i];
            CHECK(l->kind == SV_API_CHAT || l->kind == SV_API_COMPLETION);
            CHECK(l->custom_id[0] && strlen(l->custom_id) <= SV_BATCH_MAX_CUSTOM_ID);
            CHECK(i == 0 || l->lineno > in.lines[i - 1].lineno);
            for (size_t j = 0; j < i; j++) CHECK(strcmp(l->custom_id, in.lines[j].custom_id));
            json_t *b = json_loadb(l->body, l->body_len, JSON_ALLOW_NUL, NULL);
            CHECK(json_is_object(b));
            json_decref(b);
        }
    }
    sv_batch_input_free(&in);
    return 0;
}
