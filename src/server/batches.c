/* batches.c — the OpenAI Batch API: a batch of requests from an uploaded
 * file (files.c), run by a worker thread inside the server.
 *
 *   POST /v1/batches               {input_file_id, endpoint, completion_window, metadata}
 *   GET  /v1/batches               ?after=&limit= (newest first)
 *   GET  /v1/batches/{id}
 *   POST /v1/batches/{id}/cancel
 *
 * The batch object is OpenAI's (status, request_counts, usage, errors with
 * line numbers, output_file_id, error_file_id, every timestamp), kept in
 * the store (src/batch/store.h) and written by the worker only; a cancel is
 * a separate column the HTTP thread writes. The worker takes the oldest
 * unfinished batch:
 *   validating   the input file checked whole (src/batch/batch_input.h:
 *                every bad line, with its number; every line's url must be
 *                the batch's endpoint; each distinct constraint compiled
 *                into the server's cache): any bad line fails the batch;
 *   in_progress  its lines sent to this server over loopback at batch
 *                priority by the runner (src/batch/runner.h), each answer
 *                made durable in DIR/batches/ID/ (src/batch/output.h) before
 *                it counts; request_counts and usage written every second;
 *   finalizing   the output and error files become files of the store
 *                (purpose batch_output), then completed.
 * completion_window: at expires_at the requests not yet answered go to the
 * error file as batch_expired, and the batch ends expired. A cancel ends it
 * cancelled (cancelling while the requests in flight stop), with what was
 * answered. A restart resumes an unfinished batch where its output stops
 * (each line exactly once). An output that cannot be written (disk full, an
 * unwritable directory) fails the batch with the reason; the server goes on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/server/internal/server_internal.h"
#include "src/batch/batch_input.h"
#include "src/batch/output.h"
#include "src/batch/runner.h"
#include "util/clock.h"

/* Sends j and drops it (sv_server_send_json borrows). */
static void send_owned(struct evhttp_request *http, int status, json_t *j, int retry_after) {
    sv_server_send_json(http, status, j, retry_after);
    json_decref(j);
}

#define MAX_WINDOW_S (7 * 24 * 3600)
#define BATCH_MAX_LINES 50000

/* ---- the batch object ---------------------------------------------------------- */

static json_t *load_obj(const char *text) { return json_loads(text, 0, NULL); }

/* The object as clients see it: a cancel asked and not yet done shows as
 * cancelling. */
static json_t *visible(const char *text, int64_t cancel_at) {
    json_t *o = load_obj(text);
    const char *st = json_string_value(json_object_get(o, "status"));
    if (o && cancel_at && st && (!strcmp(st, "validating") || !strcmp(st, "in_progress"))) {
        json_object_set_new(o, "status", json_string("cancelling"));
        json_object_set_new(o, "cancelling_at", json_integer(cancel_at));
    }
    return o;
}

static sv_status save(sv_store_t *st, json_t *o, sv_error_t *err) {
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_status rc = sv_store_batch_put(st, json_string_value(json_object_get(o, "id")),
                                      json_string_value(json_object_get(o, "status")), text, err);
    free(text);
    return rc;
}

static void set_status(json_t *o, const char *status, const char *at_field) {
    json_object_set_new(o, "status", json_string(status));
    if (at_field) json_object_set_new(o, at_field, json_integer((json_int_t)time(NULL)));
}

static void fail_obj(json_t *o, const char *code, const char *message) {
    json_t *data = json_pack("[{s:s, s:s, s:n, s:n}]", "code", code, "message", message, "param", "line");
    json_object_set_new(o, "errors", json_pack("{s:s, s:o}", "object", "list", "data", data));
    set_status(o, "failed", "failed_at");
}

/* ---- the worker ------------------------------------------------------------------ */

typedef struct {
    sv_batch_output_t out;         /* first: the runner's one ud is both R and its output */
    srv_t *s;
    sv_store_t *st;
    json_t *obj;
    size_t held_ok, held_failed;   /* lines done in earlier runs */
    uint64_t base_in, base_out;    /* usage before this run */
    int64_t expires_at;
    volatile sig_atomic_t stop;
    int why;                       /* what stopped the run: 0 none, 1 cancel, 2 expiry, 3 the server */
    uint64_t last_save_ns;
} run_t;

static int check_constraint(void *ud, const sv_api_request_t *r, sv_api_error_t *e) {
    srv_t *s = ud;
    return sv_server_check_constraint(&s->cfg, s->ccache, s->deps.set, &r->c, e);
}

static void counts(run_t *R, const sv_batch_progress_t *p) {
    json_t *rc = json_object_get(R->obj, "request_counts");
    json_object_set_new(rc, "completed", json_integer((json_int_t)(R->held_ok + R->out.n_ok)));
    json_object_set_new(rc, "failed", json_integer((json_int_t)(R->held_failed + R->out.n_failed)));
    if (p) {
        uint64_t in = R->base_in + p->prompt_tokens, out = R->base_out + p->completion_tokens;
        json_t *u = json_object_get(R->obj, "usage");
        json_object_set_new(u, "input_tokens", json_integer((json_int_t)in));
        json_object_set_new(u, "output_tokens", json_integer((json_int_t)out));
        json_object_set_new(u, "total_tokens", json_integer((json_int_t)(in + out)));
    }
}

static void on_progress(void *ud, const sv_batch_progress_t *p) {
    run_t *R = ud;
    srv_t *s = R->s;
    /* What stops the run: the server stopping, a cancel, the window. */
    pthread_mutex_lock(&s->bw_mu);
    bool cancel = s->bw_cancel, stopping = s->bw_stop;
    pthread_mutex_unlock(&s->bw_mu);
    if (!R->why && stopping) R->why = 3;
    else if (!R->why && cancel) R->why = 1;
    else if (!R->why && (int64_t)time(NULL) >= R->expires_at) R->why = 2;
    if (R->why) R->stop = 1;
    uint64_t now = sv_now_ns();
    if (now - R->last_save_ns >= 1000000000ull) {
        R->last_save_ns = now;
        counts(R, p);
        sv_error_t err;
        save(R->st, R->obj, &err); /* progress only: a failed write is retried next second */
    }
}

/* Registers DIR/batches/ID/NAME as a store file; its id in *field (or null
 * when the file is empty or missing). */
static sv_status adopt(run_t *R, const char *dir, const char *name, const char *field, sv_error_t *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) || sb.st_size == 0) {
        unlink(path);
        json_object_set_new(R->obj, field, json_null());
        return SV_OK;
    }
    char fname[128];
    snprintf(fname, sizeof fname, "%s_%s", json_string_value(json_object_get(R->obj, "id")), name);
    sv_file_t f;
    sv_status st = sv_store_file_adopt(R->st, "batch_output", fname, path, &f, err);
    if (!st) json_object_set_new(R->obj, field, json_string(f.id));
    return st;
}

/* The batch's files, then its final status. */
static void finish(run_t *R, const char *dir, const char *status, const char *at_field) {
    sv_error_t err;
    sv_error_clear(&err);
    if (strcmp(status, "completed") == 0) {
        set_status(R->obj, "finalizing", "finalizing_at");
        save(R->st, R->obj, &err);
    }
    if (adopt(R, dir, "output.jsonl", "output_file_id", &err) || adopt(R, dir, "errors.jsonl", "error_file_id", &err)) {
        fail_obj(R->obj, "output_failed", err.message);
        save(R->st, R->obj, &err);
        return;
    }
    rmdir(dir);
    set_status(R->obj, status, at_field);
    save(R->st, R->obj, &err);
}

static void work(srv_t *s, sv_store_t *st, const char *id) {
    char *text = NULL;
    int64_t cancel_at = 0;
    sv_error_t err;
    sv_error_clear(&err);
    if (sv_store_batch_get(st, id, &text, &cancel_at, &err)) return;
    run_t R = {.out = {.fd = -1, .err_fd = -1}, .s = s, .st = st, .obj = load_obj(text)};
    free(text);
    if (!R.obj) return;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/batches/%s", sv_store_dir(st), id);
    char status[24]; /* a copy: set_status replaces the object's string */
    snprintf(status, sizeof status, "%s", json_string_value(json_object_get(R.obj, "status")) ? json_string_value(json_object_get(R.obj, "status")) : "");
    const char *endpoint = json_string_value(json_object_get(R.obj, "endpoint"));
    R.expires_at = (int64_t)json_integer_value(json_object_get(R.obj, "expires_at"));
    sv_batch_input_t in = {0};
    bool *skip = NULL;
    if (cancel_at && !strcmp(status, "validating")) {
        set_status(R.obj, "cancelled", "cancelled_at");
        json_object_set_new(R.obj, "cancelling_at", json_integer(cancel_at));
        save(st, R.obj, &err);
        goto done;
    }
    /* The input, checked whole (again, after a restart: the cache makes
     * that cheap). */
    char path[4096];
    if (sv_store_file_path(st, json_string_value(json_object_get(R.obj, "input_file_id")), path, sizeof path, &err)) {
        fail_obj(R.obj, "invalid_file", "the input file is gone");
        save(st, R.obj, &err);
        goto done;
    }
    sv_batch_input_config_t icfg = {.lim = &s->lim, .max_body_bytes = s->cfg.max_body_bytes,
                                    .max_lines = BATCH_MAX_LINES,
                                    .endpoint = !strcmp(endpoint, "/v1/chat/completions") ? SV_API_CHAT
                                                                                           : SV_API_COMPLETION,
                                    .check = !strcmp(status, "validating") ? check_constraint : NULL, .ud = s};
    if (sv_batch_input_read(path, &icfg, &in, &err)) {
        fail_obj(R.obj, "invalid_file", err.message);
        save(st, R.obj, &err);
        goto done;
    }
    if (!strcmp(status, "validating")) {
        if (in.n_errors || !in.n ||
            (in.model && strcmp(in.model, s->cfg.model_name) && !(s->cfg.model_path && !strcmp(in.model, s->cfg.model_path)))) {
            json_t *data = json_array();
            size_t i;
            json_t *e;
            json_array_foreach(in.errors, i, e) {
                json_t *d = json_pack("{s:O, s:O, s:O, s:O}", "code", json_object_get(e, "code"), "message",
                                      json_object_get(e, "message"), "param", json_object_get(e, "param"), "line",
                                      json_object_get(e, "line"));
                json_array_append_new(data, d);
            }
            if (!in.n_errors && !in.n)
                json_array_append_new(data, json_pack("{s:s, s:s, s:n, s:n}", "code", "empty_file", "message",
                                                      "the input file holds no request", "param", "line"));
            else if (!in.n_errors)
                json_array_append_new(data, json_pack("{s:s, s:s, s:s, s:n}", "code", "model_not_found", "message",
                                                      "the lines ask for a model this server does not serve", "param",
                                                      "body.model", "line"));
            json_object_set_new(R.obj, "errors", json_pack("{s:s, s:o}", "object", "list", "data", data));
            set_status(R.obj, "failed", "failed_at");
            save(st, R.obj, &err);
            goto done;
        }
        json_object_set_new(json_object_get(R.obj, "request_counts"), "total", json_integer((json_int_t)in.n));
        set_status(R.obj, "in_progress", "in_progress_at");
        if (save(st, R.obj, &err)) goto done;
    }
    if (!strcmp(status, "finalizing")) { /* a crash while finalizing */
        finish(&R, dir, "completed", "completed_at");
        goto done;
    }

    /* in_progress: the lines not answered yet. */
    char out_path[4200], err_path[4200];
    snprintf(out_path, sizeof out_path, "%s/output.jsonl", dir);
    snprintf(err_path, sizeof err_path, "%s/errors.jsonl", dir);
    char bdir[4096];
    snprintf(bdir, sizeof bdir, "%s/batches", sv_store_dir(st));
    mkdir(bdir, 0755);
    if (mkdir(dir, 0755) && errno != EEXIST) {
        char msg[4400];
        snprintf(msg, sizeof msg, "cannot create %s: %s", dir, strerror(errno));
        fail_obj(R.obj, "output_failed", msg);
        save(st, R.obj, &err);
        goto done;
    }
    if (!(skip = calloc(in.n, sizeof *skip))) goto done;
    if (sv_batch_output_done(out_path, &in, skip, &R.held_ok, &err) ||
        sv_batch_output_done(err_path, &in, skip, &R.held_failed, &err) ||
        sv_batch_output_open(&R.out, out_path, err_path, &s->lim, &err)) {
        fail_obj(R.obj, "output_failed", err.message);
        save(st, R.obj, &err);
        goto done;
    }
    json_t *u = json_object_get(R.obj, "usage");
    R.base_in = (uint64_t)json_integer_value(json_object_get(u, "input_tokens"));
    R.base_out = (uint64_t)json_integer_value(json_object_get(u, "output_tokens"));
    pthread_mutex_lock(&s->bw_mu);
    snprintf(s->bw_current, sizeof s->bw_current, "%s", id);
    s->bw_cancel = cancel_at != 0;
    pthread_mutex_unlock(&s->bw_mu);
    const char *host = s->cfg.host;
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !*host) host = "127.0.0.1";
    sv_batch_runner_config_t rc = {.host = host, .port = s->port, .api_key = s->cfg.api_key,
                                   .concurrency = 32, .on_result = sv_batch_output_result,
                                   .on_progress = on_progress, .ud = &R, .stop = &R.stop};
    sv_batch_progress_t prog;
    sv_error_t rerr;
    sv_error_clear(&rerr);
    bool expired_already = (int64_t)time(NULL) >= R.expires_at;
    sv_status rs = expired_already ? SV_ERR_CANCELLED : sv_batch_run(&in, skip, &rc, &prog, &rerr);
    if (expired_already) R.why = 2;
    pthread_mutex_lock(&s->bw_mu);
    s->bw_current[0] = 0;
    pthread_mutex_unlock(&s->bw_mu);
    counts(&R, expired_already ? NULL : &prog);
    pthread_mutex_lock(&s->bw_mu);
    bool stopping = s->bw_stop;
    pthread_mutex_unlock(&s->bw_mu);
    atomic_fetch_add(&s->bw_lines_ok, R.out.n_ok);
    atomic_fetch_add(&s->bw_lines_failed, R.out.n_failed);
    atomic_fetch_add(&s->bw_validation_failed, R.out.checked_failed);
    if (R.why == 3 || (rs == SV_ERR_IO && stopping)) {
        save(st, R.obj, &err); /* the server stops: resumed at the next start */
    } else if (rs == SV_OK) {
        finish(&R, dir, "completed", "completed_at");
    } else if (R.why == 1) {
        json_object_set_new(R.obj, "cancelling_at", json_integer(cancel_at ? cancel_at : (json_int_t)time(NULL)));
        finish(&R, dir, "cancelled", "cancelled_at");
    } else if (R.why == 2) {
        /* The window is over: what was not answered goes to the error file. */
        bool *done2 = calloc(in.n, sizeof *done2);
        size_t h = 0;
        bool ok = done2 && !sv_batch_output_done(out_path, &in, done2, &h, &err) &&
                  !sv_batch_output_done(err_path, &in, done2, &h, &err);
        for (size_t i = 0; ok && i < in.n; i++)
            if (!done2[i])
                ok = sv_batch_output_error(&R.out, &in.lines[i], "batch_expired",
                                           "This request could not be executed before the completion window expired.");
        free(done2);
        counts(&R, NULL);
        if (!ok) {
            fail_obj(R.obj, "output_failed", "cannot write the error file");
            save(st, R.obj, &err);
        } else {
            finish(&R, dir, "expired", "expired_at");
        }
    } else {
        fail_obj(R.obj, "output_failed", rerr.message[0] ? rerr.message : "the batch could not run");
        save(st, R.obj, &err);
    }
done:
    sv_batch_output_close(&R.out);
    free(skip);
    sv_batch_input_free(&in);
    json_decref(R.obj);
}

static void *worker_main(void *arg) {
    srv_t *s = arg;
    sv_store_t *st = NULL;
    for (;;) {
        pthread_mutex_lock(&s->bw_mu);
        while (!s->bw_stop && !s->bw_wake) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            if (pthread_cond_timedwait(&s->bw_cv, &s->bw_mu, &ts)) break; /* timeout: look again */
        }
        bool stop = s->bw_stop;
        s->bw_wake = false;
        pthread_mutex_unlock(&s->bw_mu);
        if (stop) break;
        if (!st) {
            /* Only a data directory that exists already: a server that never
             * saw a Files request makes none. */
            char db[4096];
            snprintf(db, sizeof db, "%s/sieve.db", s->cfg.data_dir);
            struct stat sb;
            sv_error_t err;
            if (stat(db, &sb) || sv_store_open(s->cfg.data_dir, &st, &err)) continue;
        }
        char id[64];
        sv_error_t err;
        for (;;) {
            pthread_mutex_lock(&s->bw_mu);
            stop = s->bw_stop;
            pthread_mutex_unlock(&s->bw_mu);
            if (stop || sv_store_batch_next(st, id, &err) || !id[0]) break;
            work(s, st, id);
        }
    }
    sv_store_close(st);
    return NULL;
}

void sv_server_batches_start(srv_t *s) {
    s->bw_started = pthread_create(&s->bw_thread, NULL, worker_main, s) == 0;
}

void sv_server_batches_stop(srv_t *s) {
    if (!s->bw_started) return;
    pthread_mutex_lock(&s->bw_mu);
    s->bw_stop = true;
    pthread_cond_signal(&s->bw_cv);
    pthread_mutex_unlock(&s->bw_mu);
}

void sv_server_batches_join(srv_t *s) {
    if (!s->bw_started) return;
    sv_server_batches_stop(s);
    pthread_join(s->bw_thread, NULL);
    s->bw_started = false;
}

static void wake(srv_t *s) {
    pthread_mutex_lock(&s->bw_mu);
    s->bw_wake = true;
    pthread_cond_signal(&s->bw_cv);
    pthread_mutex_unlock(&s->bw_mu);
}

/* ---- HTTP ------------------------------------------------------------------------ */

static void send_err(srv_t *s, struct evhttp_request *http, int status, const char *param, const char *msg) {
    sv_api_error_t e;
    sv_api_fail(&e, status, param, "%s", msg);
    if (status == 404) snprintf(e.code, sizeof e.code, "not_found");
    sv_server_send_error(s, http, &e);
}

static void send_status_error(srv_t *s, struct evhttp_request *http, const sv_error_t *err) {
    send_err(s, http, sv_api_http_status(err->code), NULL, err->message[0] ? err->message : sv_status_name(err->code));
}

/* "24h", "90m", "30s": seconds, or -1. */
static long window_seconds(const char *w) {
    char *end;
    long v = strtol(w, &end, 10);
    if (end == w || v <= 0 || end[0] == 0 || end[1] != 0) return -1;
    long mul = end[0] == 'h' ? 3600 : end[0] == 'm' ? 60 : end[0] == 's' ? 1 : 0;
    if (!mul || v > MAX_WINDOW_S / mul) return -1;
    return v * mul;
}

static void create(srv_t *s, struct evhttp_request *http, sv_store_t *st) {
    struct evbuffer *in = evhttp_request_get_input_buffer(http);
    size_t len = evbuffer_get_length(in);
    if (len > 1u << 20) {
        send_err(s, http, 413, NULL, "the body is over 1 MiB");
        return;
    }
    json_t *b = json_loadb(len ? (const char *)evbuffer_pullup(in, -1) : "", len, 0, NULL);
    const char *fid = json_string_value(json_object_get(b, "input_file_id"));
    const char *ep = json_string_value(json_object_get(b, "endpoint"));
    const char *win = json_string_value(json_object_get(b, "completion_window"));
    json_t *meta = json_object_get(b, "metadata");
    if (!json_is_object(b)) send_err(s, http, 400, NULL, "the body must be a JSON object");
    else if (!fid) send_err(s, http, 400, "input_file_id", "input_file_id is required");
    else if (!ep || (strcmp(ep, "/v1/chat/completions") && strcmp(ep, "/v1/completions")))
        send_err(s, http, 400, "endpoint", "endpoint must be \"/v1/chat/completions\" or \"/v1/completions\"");
    else if (!win || window_seconds(win) < 0)
        send_err(s, http, 400, "completion_window",
                 "completion_window must be a duration such as \"24h\" (s, m or h; at most 7 days)");
    else if (meta && !json_is_null(meta) && (!json_is_object(meta) || json_object_size(meta) > 16))
        send_err(s, http, 400, "metadata", "metadata must be an object of at most 16 string values");
    else {
        bool meta_ok = true;
        const char *k;
        json_t *v;
        if (json_is_object(meta))
            json_object_foreach(meta, k, v) meta_ok &= json_is_string(v) && strlen(k) <= 64 && json_string_length(v) <= 512;
        sv_file_t f;
        sv_error_t err;
        sv_error_clear(&err);
        if (!meta_ok) {
            send_err(s, http, 400, "metadata", "metadata must be an object of at most 16 string values");
        } else if (sv_store_file_get(st, fid, &f, &err)) {
            send_err(s, http, err.code == SV_ERR_NOT_FOUND ? 400 : 500, "input_file_id",
                     err.code == SV_ERR_NOT_FOUND ? "input_file_id names no file" : err.message);
        } else if (strcmp(f.purpose, "batch")) {
            send_err(s, http, 400, "input_file_id", "the input file's purpose must be \"batch\"");
        } else {
            uint8_t r[12];
            if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) memset(r, 0x5a, sizeof r);
            char id[40] = "batch_";
            for (size_t i = 0; i < sizeof r; i++) snprintf(id + 6 + 2 * i, 3, "%02x", r[i]);
            json_int_t now = (json_int_t)time(NULL);
            json_t *o = json_pack(
                "{s:s, s:s, s:s, s:n, s:s, s:s, s:s, s:n, s:n, s:I, s:n, s:I, s:n, s:n, s:n, s:n, s:n, s:n,"
                " s:{s:i, s:i, s:i}, s:{s:i, s:i, s:i, s:{s:i}, s:{s:i}}, s:O?}",
                "id", id, "object", "batch", "endpoint", ep, "errors", "input_file_id", fid, "completion_window", win,
                "status", "validating", "output_file_id", "error_file_id", "created_at", now, "in_progress_at",
                "expires_at", now + (json_int_t)window_seconds(win), "finalizing_at", "completed_at", "failed_at",
                "expired_at", "cancelling_at", "cancelled_at", "request_counts", "total", 0, "completed", 0, "failed",
                0, "usage", "input_tokens", 0, "output_tokens", 0, "total_tokens", 0, "input_tokens_details",
                "cached_tokens", 0, "output_tokens_details", "reasoning_tokens", 0, "metadata",
                json_is_object(meta) ? meta : NULL);
            if (!o || save(st, o, &err)) send_status_error(s, http, &err);
            else {
                wake(s);
                sv_server_send_json(http, 200, o, 0);
            }
            json_decref(o);
        }
    }
    json_decref(b);
}

static void list(srv_t *s, struct evhttp_request *http, sv_store_t *st) {
    struct evkeyvalq q;
    const char *qs = strchr(evhttp_request_get_uri(http), '?');
    if (evhttp_parse_query_str(qs ? qs + 1 : "", &q)) {
        send_err(s, http, 400, NULL, "the query string does not parse");
        return;
    }
    const char *after = evhttp_find_header(&q, "after"), *lim = evhttp_find_header(&q, "limit");
    long limit = 20;
    if (lim) {
        char *end;
        limit = strtol(lim, &end, 10);
        if (!*lim || *end || limit < 1 || limit > 100) {
            evhttp_clear_headers(&q);
            send_err(s, http, 400, "limit", "limit must be an integer from 1 to 100");
            return;
        }
    }
    char **objs = NULL;
    int64_t *cancel = NULL;
    size_t n = 0;
    bool more = false;
    sv_error_t err;
    sv_error_clear(&err);
    sv_status rc = sv_store_batch_list(st, after, (uint32_t)limit, &objs, &cancel, &n, &more, &err);
    evhttp_clear_headers(&q);
    if (rc) {
        send_status_error(s, http, &err);
        return;
    }
    json_t *data = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(data, visible(objs[i], cancel[i]));
        free(objs[i]);
    }
    free(objs);
    free(cancel);
    json_t *first = json_array_get(data, 0), *last = json_array_get(data, n ? n - 1 : 0);
    json_t *j = json_pack("{s:s, s:o, s:O?, s:O?, s:b}", "object", "list", "data", data, "first_id",
                          n ? json_object_get(first, "id") : NULL, "last_id", n ? json_object_get(last, "id") : NULL,
                          "has_more", more);
    send_owned(http, 200, j, 0);
}

void sv_server_batches(srv_t *s, struct evhttp_request *http, const char *path, sv_store_t *st) {
    enum evhttp_cmd_type cmd = evhttp_request_get_command(http);
    const char *rest = path + strlen("/v1/batches");
    if (!*rest) {
        if (cmd == EVHTTP_REQ_POST) create(s, http, st);
        else if (cmd == EVHTTP_REQ_GET) list(s, http, st);
        else send_err(s, http, 405, NULL, "/v1/batches takes GET or POST");
        return;
    }
    char id[64];
    const char *slash = strchr(rest + 1, '/');
    size_t idn = slash ? (size_t)(slash - rest - 1) : strlen(rest + 1);
    if (idn == 0 || idn >= sizeof id || (slash && strcmp(slash, "/cancel"))) {
        send_err(s, http, 404, NULL, "no such route");
        return;
    }
    memcpy(id, rest + 1, idn);
    id[idn] = 0;
    char *text = NULL;
    int64_t cancel_at = 0;
    sv_error_t err;
    sv_error_clear(&err);
    if (sv_store_batch_get(st, id, &text, &cancel_at, &err)) {
        send_status_error(s, http, &err);
        return;
    }
    if (!slash) {
        if (cmd != EVHTTP_REQ_GET) send_err(s, http, 405, NULL, "a batch takes GET");
        else send_owned(http, 200, visible(text, cancel_at), 0);
        free(text);
        return;
    }
    if (cmd != EVHTTP_REQ_POST) {
        free(text);
        send_err(s, http, 405, NULL, "cancel takes POST");
        return;
    }
    json_t *o = load_obj(text);
    free(text);
    const char *status = json_string_value(json_object_get(o, "status"));
    if (!status || (strcmp(status, "validating") && strcmp(status, "in_progress"))) {
        char msg[128];
        snprintf(msg, sizeof msg, "a batch that is %s cannot be cancelled", status ? status : "?");
        json_decref(o);
        send_err(s, http, 400, NULL, msg);
        return;
    }
    json_decref(o);
    int64_t now = (int64_t)time(NULL);
    if (sv_store_batch_cancel(st, id, now, &err)) {
        send_status_error(s, http, &err);
        return;
    }
    pthread_mutex_lock(&s->bw_mu);
    if (!strcmp(s->bw_current, id)) s->bw_cancel = true;
    s->bw_wake = true;
    pthread_cond_signal(&s->bw_cv);
    pthread_mutex_unlock(&s->bw_mu);
    if (sv_store_batch_get(st, id, &text, &cancel_at, &err)) {
        send_status_error(s, http, &err);
        return;
    }
    send_owned(http, 200, visible(text, cancel_at), 0);
    free(text);
}
