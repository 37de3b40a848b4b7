/* batch_input.c — reading and checking a batch's input lines (see batch_input.h). */
#define _GNU_SOURCE /* getline */
#include "batch_input.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

/* ---- custom_id set: open addressing over FNV-1a --------------------------- */

typedef struct {
    const char **keys;
    size_t cap, n;
} idset_t;

/* 1: added; 0: already there; -1: out of memory. */
static int idset_add(idset_t *t, const char *key) {
    if ((t->n + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        const char **keys = calloc(cap, sizeof *keys);
        if (!keys) return -1;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->keys[i]) continue;
            size_t j = sv_hash_str(t->keys[i]) & (cap - 1);
            while (keys[j]) j = (j + 1) & (cap - 1);
            keys[j] = t->keys[i];
        }
        free(t->keys);
        t->keys = keys;
        t->cap = cap;
    }
    size_t j = sv_hash_str(key) & (t->cap - 1);
    for (; t->keys[j]; j = (j + 1) & (t->cap - 1))
        if (!strcmp(t->keys[j], key)) return 0;
    t->keys[j] = key;
    t->n++;
    return 1;
}

/* ---- errors ---------------------------------------------------------------- */

static sv_status line_error(sv_batch_input_t *in, uint32_t lineno, const char *code, const char *param,
                            const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static sv_status line_error(sv_batch_input_t *in, uint32_t lineno, const char *code, const char *param,
                            const char *fmt, ...) {
    in->n_errors++;
    if (json_array_size(in->errors) >= SV_BATCH_MAX_ERRORS) return SV_OK;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:I, s:s, s:s, s:s?}", "line", (json_int_t)lineno, "code", code, "message", msg, "param",
                          param && *param ? param : NULL);
    if (!e || json_array_append_new(in->errors, e)) return SV_ERR_NOMEM;
    return SV_OK;
}

/* ---- one line ---------------------------------------------------------------- */

/* Checks one non-blank line; a good one is appended to in->lines. */
static sv_status read_line(sv_batch_input_t *in, const sv_batch_input_config_t *cfg, idset_t *ids, size_t *cap,
                           const char *text, size_t len, uint32_t lineno) {
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_ALLOW_NUL, &je);
    sv_status st = SV_OK;
    char *body = NULL, *cid = NULL;
    if (!json_is_object(j)) {
        st = line_error(in, lineno, "invalid_json", NULL, "the line is not a JSON object");
        goto done;
    }
    json_t *jid = json_object_get(j, "custom_id");
    if (!json_is_string(jid) || !json_string_length(jid) || json_string_length(jid) > SV_BATCH_MAX_CUSTOM_ID ||
        strlen(json_string_value(jid)) != json_string_length(jid)) {
        st = line_error(in, lineno, "missing_custom_id", "custom_id",
                        "custom_id must be a string of 1 to %d bytes without NUL", SV_BATCH_MAX_CUSTOM_ID);
        goto done;
    }
    if (!(cid = strdup(json_string_value(jid)))) {
        st = SV_ERR_NOMEM;
        goto done;
    }
    json_t *method = json_object_get(j, "method"), *url = json_object_get(j, "url"), *jb = json_object_get(j, "body");
    if (!json_is_string(method) || strcmp(json_string_value(method), "POST")) {
        st = line_error(in, lineno, "invalid_method", "method", "method must be \"POST\"");
        goto done;
    }
    sv_api_kind kind;
    if (json_is_string(url) && !strcmp(json_string_value(url), "/v1/chat/completions")) kind = SV_API_CHAT;
    else if (json_is_string(url) && !strcmp(json_string_value(url), "/v1/completions")) kind = SV_API_COMPLETION;
    else {
        st = line_error(in, lineno, "invalid_url", "url", "url must be \"/v1/chat/completions\" or \"/v1/completions\"");
        goto done;
    }
    if (cfg->endpoint && (int)kind != cfg->endpoint) {
        st = line_error(in, lineno, "invalid_url", "url", "url must be the batch's endpoint, %s",
                        cfg->endpoint == SV_API_CHAT ? "/v1/chat/completions" : "/v1/completions");
        goto done;
    }
    if (!json_is_object(jb)) {
        st = line_error(in, lineno, "invalid_body", "body", "body must be a JSON object");
        goto done;
    }
    /* Compact, in the body's own key order (order is meaningful in schemas). */
    if (!(body = json_dumps(jb, JSON_COMPACT | JSON_PRESERVE_ORDER))) {
        st = SV_ERR_NOMEM;
        goto done;
    }
    size_t blen = strlen(body);
    if (blen > cfg->max_body_bytes) {
        st = line_error(in, lineno, "invalid_body", "body", "body is %zu bytes; the limit is %zu", blen,
                        cfg->max_body_bytes);
        goto done;
    }
    json_t *model = json_object_get(jb, "model");
    if (json_is_string(model)) {
        if (!in->model && !(in->model = strdup(json_string_value(model)))) {
            st = SV_ERR_NOMEM;
            goto done;
        }
        if (strcmp(in->model, json_string_value(model))) {
            st = line_error(in, lineno, "mismatched_model", "body.model",
                            "body.model is \"%s\", but an earlier line names \"%s\": a batch uses one model",
                            json_string_value(model), in->model);
            goto done;
        }
    }
    sv_api_request_t r;
    sv_api_error_t e;
    if (sv_api_parse(kind, body, blen, cfg->lim, &r, &e)) {
        st = line_error(in, lineno, e.status == 400 || e.status == 413 ? "invalid_request" : "internal_error", e.param,
                        "%s", e.message);
        goto done;
    }
    if (r.stream) {
        sv_api_request_free(&r);
        st = line_error(in, lineno, "invalid_request", "stream", "stream is not supported in a batch");
        goto done;
    }
    int bad = cfg->check && r.c.on ? cfg->check(cfg->ud, &r, &e) : 0;
    sv_api_request_free(&r);
    if (bad) {
        st = line_error(in, lineno, e.status == 400 ? "invalid_constraint" : "internal_error", e.param, "%s",
                        e.message);
        goto done;
    }
    int added = idset_add(ids, cid);
    if (added < 0) {
        st = SV_ERR_NOMEM;
        goto done;
    }
    if (!added) {
        st = line_error(in, lineno, "duplicate_custom_id", "custom_id",
                        "custom_id \"%s\" is used by an earlier line", cid);
        goto done;
    }
    if (in->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        sv_batch_line_t *nl = realloc(in->lines, nc * sizeof *nl);
        if (!nl) {
            st = SV_ERR_NOMEM;
            goto done;
        }
        in->lines = nl;
        *cap = nc;
    }
    in->lines[in->n++] = (sv_batch_line_t){.custom_id = cid, .kind = kind, .body = body, .body_len = blen,
                                           .lineno = lineno};
    cid = body = NULL; /* the line owns them (the id set points at its custom_id) */
done:
    free(cid);
    free(body);
    json_decref(j);
    return st;
}

sv_status sv_batch_input_read(const char *path, const sv_batch_input_config_t *cfg, sv_batch_input_t *in,
                              sv_error_t *err) {
    memset(in, 0, sizeof *in);
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return sv_error_set(err, SV_ERR_IO, -1, "cannot open %s: %s", path, strerror(errno));
    sv_status st = sv_batch_input_read_stream(f, path, cfg, in, err);
    if (f != stdin) fclose(f);
    return st;
}

sv_status sv_batch_input_read_stream(FILE *f, const char *name, const sv_batch_input_config_t *cfg,
                                     sv_batch_input_t *in, sv_error_t *err) {
    memset(in, 0, sizeof *in);
    if (!(in->errors = json_array())) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    idset_t ids = {0};
    size_t cap = 0;
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t k;
    uint32_t lineno = 0;
    sv_status st = SV_OK;
    while ((k = getline(&buf, &bufcap, f)) >= 0) {
        lineno++;
        size_t n = (size_t)k;
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
        size_t i = 0;
        while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r')) i++;
        if (i == n) continue; /* blank: spaces, tabs and CRs only */
        if (in->n >= cfg->max_lines) {
            st = line_error(in, lineno, "too_many_lines", NULL, "a batch holds at most %zu requests", cfg->max_lines);
            break;
        }
        if ((st = read_line(in, cfg, &ids, &cap, buf, n, lineno))) break;
    }
    if (!st && ferror(f)) st = sv_error_set(err, SV_ERR_IO, -1, "cannot read %s: %s", name, strerror(errno));
    else if (st == SV_ERR_NOMEM) sv_error_set(err, st, -1, "out of memory");
    free(buf);
    free(ids.keys);
    return st;
}

void sv_batch_input_free(sv_batch_input_t *in) {
    for (size_t i = 0; i < in->n; i++) {
        free(in->lines[i].custom_id);
        free(in->lines[i].body);
    }
    free(in->lines);
    free(in->model);
    json_decref(in->errors);
    memset(in, 0, sizeof *in);
}
