/* output.c — a batch's answers, written durably and checked again (see output.h). */
#define _GNU_SOURCE
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "src/api/schema_check.h"
#include "src/api/tools.h"

/* ---- output ------------------------------------------------------------------ */


static uint64_t next_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static bool write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return fdatasync(fd) == 0 || errno == EINVAL; /* EINVAL: a pipe or terminal */
}

/* ---- every constrained answer, checked again ------------------------------- */

/* One choice's output against the request's constraint c: the text (content,
 * or a completion's text), or the tool calls rebuilt as the call array the
 * constraint describes ([{"name", "arguments"}]). ws: the whitespace mode
 * of the schemas inside a structural tag. */
static sv_check_outcome check_choice(const sv_api_constraint_t *c, const json_t *schema, json_t *choice,
                                     sv_ws_mode ws, sv_check_result_t *res) {
    json_t *msg = json_object_get(choice, "message");
    json_t *calls = json_object_get(msg, "tool_calls");
    json_t *text = msg ? json_object_get(msg, "content") : json_object_get(choice, "text");
    memset(res, 0, sizeof *res);
    if (c->kind == SV_CONSTRAINT_REGEX) {
        if (!json_is_string(text)) return SV_CHECK_INVALID;
        return sv_regex_check(c->text, c->len, json_string_value(text), json_string_length(text));
    }
    if (c->kind == SV_CONSTRAINT_GRAMMAR) {
        if (!json_is_string(text)) return SV_CHECK_INVALID;
        return sv_grammar_check(c->text, c->len, json_string_value(text), json_string_length(text));
    }
    if (c->kind == SV_CONSTRAINT_STRUCTURAL_TAG) {
        /* No independent engine: the text (tags included, as the response
         * carries it) against sieve's own DFA of the structural tag. */
        if (!json_is_string(text)) return SV_CHECK_INVALID;
        return sv_structural_tag_check(c->text, c->len, (int)ws, json_string_value(text), json_string_length(text));
    }
    json_t *inst = NULL;
    if (json_array_size(calls) && (c->tool_calls || c->calls_or_answer)) {
        inst = json_array();
        size_t i;
        json_t *call;
        json_array_foreach(calls, i, call) {
            json_t *f = json_object_get(call, "function");
            json_t *args = json_is_string(json_object_get(f, "arguments"))
                               ? json_loadb(json_string_value(json_object_get(f, "arguments")),
                                            json_string_length(json_object_get(f, "arguments")), JSON_ALLOW_NUL, NULL)
                               : NULL;
            json_array_append_new(inst, json_pack("{s:O?, s:o?}", "name", json_object_get(f, "name"), "arguments", args));
        }
    } else if (json_is_string(text)) {
        inst = json_loadb(json_string_value(text), json_string_length(text), JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL);
    }
    if (!inst) {
        snprintf(res->keyword, sizeof res->keyword, "json");
        return SV_CHECK_INVALID; /* not JSON at all */
    }
    sv_check_outcome out = sv_schema_check(schema, inst, res);
    json_decref(inst);
    return out;
}

/* Checks a 200 answer b of line with a JSON Schema, regex or tool-call
 * constraint. A failure fills why and returns false. */
static bool check_answer(sv_batch_output_t *o, const sv_batch_line_t *line, json_t *b, char *why, size_t n) {
    sv_api_request_t r;
    sv_api_error_t e;
    if (sv_api_parse(line->kind, line->body, line->body_len, o->lim, &r, &e)) return true; /* checked at the start */
    bool ok = true;
    /* tool_choice "auto": a choice's calls, when it made any, against the
     * call list they were constrained to (src/api/tools.h); a text answer
     * is free. */
    bool auto_calls = !r.c.on && r.tools && r.tool_choice == SV_TOOLS_AUTO;
    char *calls_text = NULL;
    if (auto_calls && !sv_tools_call_schema(&r, true, &calls_text, &e)) {
        r.c = (sv_api_constraint_t){.on = true, .kind = SV_CONSTRAINT_SCHEMA, .text = calls_text,
                                    .len = strlen(calls_text), .tool_calls = true};
        snprintf(r.c.param, sizeof r.c.param, "tools");
    }
    if (r.c.on) {
        json_t *schema = r.c.kind == SV_CONSTRAINT_SCHEMA ? json_loadb(r.c.text, r.c.len, JSON_ALLOW_NUL, NULL) : NULL;
        size_t i;
        json_t *ch;
        bool unchecked = false;
        json_array_foreach(json_object_get(b, "choices"), i, ch) {
            if (auto_calls && !json_array_size(json_object_get(json_object_get(ch, "message"), "tool_calls")))
                continue;
            if (r.c.kind == SV_CONSTRAINT_SCHEMA && !schema) {
                unchecked = true;
                break;
            }
            sv_check_result_t res;
            sv_check_outcome out = check_choice(&r.c, schema, ch, o->lim->ws, &res);
            if (out == SV_CHECK_UNCHECKED) unchecked = true;
            if (out == SV_CHECK_INVALID && ok) {
                ok = false;
                snprintf(why, n, "choice %zu does not match its %s (keyword %s at '%s')", i, r.c.param,
                         res.keyword[0] ? res.keyword : "pattern", res.pointer);
            }
        }
        json_decref(schema);
        if (!ok) o->checked_failed++;
        else if (unchecked) o->checked_unchecked++;
        else o->checked_valid++;
    }
    sv_api_request_free(&r);
    return ok;
}

bool sv_batch_output_result(void *ud, const sv_batch_line_t *line, int status, const char *body, size_t len) {
    sv_batch_output_t *o = ud;
    json_t *b = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
    /* A test hook (tests/server/test_batch.py): the answer of this custom_id
     * is spoiled as a compiler bug would, to show the check catches it. */
    const char *spoil = getenv("SIEVE_TEST_BATCH_SPOIL");
    if (spoil && !strcmp(spoil, line->custom_id)) {
        json_t *msg = json_object_get(json_array_get(json_object_get(b, "choices"), 0), "message");
        json_object_set_new(msg, "content", json_string("{\"spoiled\": true"));
        json_object_set_new(msg, "tool_calls", json_pack("[{s:s, s:s, s:{s:s, s:s}}]", "id", "call_x", "type",
                                                         "function", "function", "name", "nope", "arguments", "{}"));
    }
    char why[512];
    bool valid = status != 200 || !b || check_answer(o, line, b, why, sizeof why);
    if (!b) b = json_stringn(body, len);
    char id[48], rid[48];
    snprintf(id, sizeof id, "batch_req_%016llx%08llx", (unsigned long long)next_rand(&o->rng),
             (unsigned long long)(next_rand(&o->rng) >> 32));
    json_t *bid = json_object_get(b, "id");
    if (json_is_string(bid)) snprintf(rid, sizeof rid, "%s", json_string_value(bid));
    else snprintf(rid, sizeof rid, "req_%016llx", (unsigned long long)next_rand(&o->rng));
    /* An answer that does not match its constraint (it never should: this is
     * the check that proves it) keeps its response and gets an error. */
    json_t *error = valid ? json_null() : json_pack("{s:s, s:s}", "code", "validation_failed", "message", why);
    json_t *j = json_pack("{s:s, s:s, s:{s:i, s:s, s:o}, s:o}", "id", id, "custom_id", line->custom_id, "response",
                          "status_code", status, "request_id", rid, "body", b, "error", error);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text) return false;
    size_t n = strlen(text);
    text[n] = '\n'; /* replaces the NUL: written with its length */
    bool to_err = status != 200 || !valid;
    bool ok = write_all(to_err && o->err_fd >= 0 ? o->err_fd : o->fd, text, n + 1);
    free(text);
    if (ok) {
        if (to_err) o->n_failed++;
        else o->n_ok++;
    }
    return ok;
}

static const sv_batch_input_t *g_cmp_in; /* qsort has no context argument */
static int cmp_custom_id(const void *a, const void *b) {
    return strcmp(g_cmp_in->lines[*(const size_t *)a].custom_id, g_cmp_in->lines[*(const size_t *)b].custom_id);
}

/* Marks the lines whose custom_id path already holds; drops a last line
 * without its newline (cut by a crash). *held counts the lines found. */
sv_status sv_batch_output_done(const char *path, const sv_batch_input_t *in, bool *skip, size_t *held, sv_error_t *err) {
    int fd = open(path, O_RDWR);
    if (fd < 0) {
        if (errno == ENOENT) return SV_OK;
        return sv_error_set(err, SV_ERR_IO, -1, "cannot open %s: %s", path, strerror(errno));
    }
    FILE *f = fdopen(fd, "r+");
    if (!f) {
        close(fd);
        return sv_error_set(err, SV_ERR_IO, -1, "cannot read %s", path);
    }
    /* custom_id -> line index, by a sorted array (binary search). */
    size_t n = in->n;
    size_t *ord = malloc((n ? n : 1) * sizeof *ord);
    if (!ord) {
        fclose(f);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    for (size_t i = 0; i < n; i++) ord[i] = i;
    g_cmp_in = in;
    qsort(ord, n, sizeof *ord, cmp_custom_id);
    char *buf = NULL;
    size_t cap = 0;
    ssize_t k;
    off_t good = 0;
    sv_status st = SV_OK;
    while ((k = getline(&buf, &cap, f)) >= 0) {
        if (buf[k - 1] != '\n') break; /* cut by a crash: dropped below */
        good += k;
        json_t *j = json_loadb(buf, (size_t)k, JSON_ALLOW_NUL, NULL);
        json_t *cid = json_object_get(j, "custom_id");
        if (json_is_string(cid)) {
            const char *id = json_string_value(cid);
            size_t lo = 0, hi = n;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strcmp(in->lines[ord[mid]].custom_id, id);
                if (c < 0) lo = mid + 1;
                else hi = mid;
            }
            if (lo < n && !strcmp(in->lines[ord[lo]].custom_id, id) && !skip[ord[lo]]) {
                skip[ord[lo]] = true;
                (*held)++;
            }
        }
        json_decref(j);
    }
    if (ferror(f)) st = sv_error_set(err, SV_ERR_IO, -1, "cannot read %s", path);
    else if (ftruncate(fd, good)) st = sv_error_set(err, SV_ERR_IO, -1, "cannot truncate %s: %s", path, strerror(errno));
    free(buf);
    free(ord);
    fclose(f);
    return st;
}


sv_status sv_batch_output_open(sv_batch_output_t *o, const char *path, const char *err_path,
                               const sv_api_limits_t *lim, sv_error_t *err) {
    memset(o, 0, sizeof *o);
    o->fd = o->err_fd = -1;
    o->lim = lim;
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
    o->rng = seed | 1;
    o->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (o->fd < 0) return sv_error_set(err, SV_ERR_IO, -1, "cannot open %s: %s", path, strerror(errno));
    if (err_path && (o->err_fd = open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
        sv_status st = sv_error_set(err, SV_ERR_IO, -1, "cannot open %s: %s", err_path, strerror(errno));
        close(o->fd);
        o->fd = -1;
        return st;
    }
    return SV_OK;
}

void sv_batch_output_close(sv_batch_output_t *o) {
    if (o->fd >= 0) close(o->fd);
    if (o->err_fd >= 0) close(o->err_fd);
    o->fd = o->err_fd = -1;
}

bool sv_batch_output_error(sv_batch_output_t *o, const sv_batch_line_t *line, const char *code, const char *message) {
    char id[48];
    snprintf(id, sizeof id, "batch_req_%016llx%08llx", (unsigned long long)next_rand(&o->rng),
             (unsigned long long)(next_rand(&o->rng) >> 32));
    json_t *j = json_pack("{s:s, s:s, s:n, s:{s:s, s:s}}", "id", id, "custom_id", line->custom_id, "response", "error",
                          "code", code, "message", message);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text) return false;
    size_t n = strlen(text);
    text[n] = '\n';
    bool ok = write_all(o->err_fd >= 0 ? o->err_fd : o->fd, text, n + 1);
    free(text);
    if (ok) o->n_failed++;
    return ok;
}
