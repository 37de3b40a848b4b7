/* runner.c — a batch's requests to a server over HTTP (see runner.h). */
#include "runner.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

#define TICK_MS 100

typedef struct runner runner_t;

typedef struct {
    runner_t *R;
    struct evhttp_connection *conn;
    struct evhttp_request *req; /* in flight, or NULL */
    struct event *retry;        /* a 429's wait */
    size_t line;                /* the line it sends, while busy */
    bool busy;                  /* a line in flight or waiting to go again */
} slot_t;

struct runner {
    const sv_batch_input_t *in;
    const bool *skip;
    const sv_batch_runner_config_t *cfg;
    struct event_base *base;
    struct event *tick;
    slot_t *slots;
    size_t next; /* the first line not yet sent */
    uint32_t ticks;
    uint64_t t0;
    bool stopping;
    sv_status st;
    sv_error_t *err;
    sv_batch_progress_t *prog;
    char auth[300];
    char host[300];
};

static void send_line(slot_t *s);
static void send_next(slot_t *s);

static void progress(runner_t *R) {
    R->prog->elapsed_s = (double)(sv_now_ns() - R->t0) / 1e9;
    uint32_t n = 0;
    for (uint32_t i = 0; i < R->cfg->concurrency; i++) n += R->slots[i].busy;
    R->prog->in_flight = n;
    if (R->cfg->on_progress) R->cfg->on_progress(R->cfg->ud, R->prog);
}

/* Ends the run: the requests in flight are cancelled (they stay undone). */
static void stop(runner_t *R, sv_status st) {
    if (R->stopping) return;
    R->stopping = true;
    R->st = st;
    for (uint32_t i = 0; i < R->cfg->concurrency; i++) {
        slot_t *s = &R->slots[i];
        if (s->req) evhttp_cancel_request(s->req);
        s->req = NULL;
        if (s->retry) event_del(s->retry);
        s->busy = false;
    }
    event_base_loopexit(R->base, NULL);
}

static void fail(runner_t *R, sv_status st, const char *fmt, const char *arg) {
    if (R->stopping) return;
    sv_error_set(R->err, st, -1, fmt, arg);
    stop(R, st);
}

static void count_usage(runner_t *R, const char *body, size_t len) {
    json_t *j = json_loadb(body, len, 0, NULL);
    json_t *u = json_object_get(j, "usage");
    json_t *c = json_object_get(u, "completion_tokens"), *p = json_object_get(u, "prompt_tokens");
    if (json_is_integer(c) && json_integer_value(c) > 0) R->prog->completion_tokens += (uint64_t)json_integer_value(c);
    if (json_is_integer(p) && json_integer_value(p) > 0) R->prog->prompt_tokens += (uint64_t)json_integer_value(p);
    json_decref(j);
}

static void on_retry(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    slot_t *s = arg;
    if (!s->R->stopping) send_line(s);
}

static void on_response(struct evhttp_request *req, void *arg) {
    slot_t *s = arg;
    runner_t *R = s->R;
    s->req = NULL; /* libevent frees req after this callback */
    if (R->stopping) return;
    int code = req ? evhttp_request_get_response_code(req) : 0;
    if (code == 0) {
        fail(R, SV_ERR_IO, "the server closed the connection%s", "");
        return;
    }
    struct evbuffer *b = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(b);
    const char *body = len ? (const char *)evbuffer_pullup(b, -1) : "";
    if (code == 429) {
        const char *ra = evhttp_find_header(evhttp_request_get_input_headers(req), "Retry-After");
        double wait = ra ? atof(ra) : 0;
        if (wait < 0.1) wait = 0.1;
        if (wait > 60) wait = 60;
        struct timeval tv = {(time_t)wait, (suseconds_t)((wait - (double)(time_t)wait) * 1e6)};
        event_add(s->retry, &tv);
        return;
    }
    if (code == 503) {
        /* The server is stopping (or its engine is down): not the line's fault. */
        char msg[256];
        snprintf(msg, sizeof msg, "%.*s", (int)(len < 200 ? len : 200), body);
        fail(R, SV_ERR_IO, "the server is unavailable (503): %s", msg);
        return;
    }
    if (!R->cfg->on_result(R->cfg->ud, &R->in->lines[s->line], code, body, len)) {
        fail(R, SV_ERR_IO, "cannot keep the result of custom_id \"%s\"", R->in->lines[s->line].custom_id);
        return;
    }
    R->prog->done++;
    if (code != 200) R->prog->failed++;
    else count_usage(R, body, len);
    s->busy = false;
    send_next(s);
}

static void send_line(slot_t *s) {
    runner_t *R = s->R;
    const sv_batch_line_t *l = &R->in->lines[s->line];
    struct evhttp_request *req = evhttp_request_new(on_response, s);
    if (!req) {
        fail(R, SV_ERR_NOMEM, "out of memory%s", "");
        return;
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", R->host);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "X-Sieve-Priority", "batch");
    if (R->auth[0]) evhttp_add_header(h, "Authorization", R->auth);
    evbuffer_add(evhttp_request_get_output_buffer(req), l->body, l->body_len);
    const char *path = l->kind == SV_API_CHAT ? "/v1/chat/completions" : "/v1/completions";
    s->req = req;
    if (evhttp_make_request(s->conn, req, EVHTTP_REQ_POST, path)) {
        s->req = NULL; /* freed by libevent */
        fail(R, SV_ERR_IO, "cannot send a request to the server%s", "");
    }
}

/* The slot's next line, or idle; the run ends when every slot is idle. */
static void send_next(slot_t *s) {
    runner_t *R = s->R;
    while (R->next < R->in->n && R->skip && R->skip[R->next]) R->next++;
    if (R->next < R->in->n) {
        s->line = R->next++;
        s->busy = true;
        send_line(s);
        return;
    }
    for (uint32_t i = 0; i < R->cfg->concurrency; i++)
        if (R->slots[i].busy) return;
    event_base_loopexit(R->base, NULL);
}

static void on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    runner_t *R = arg;
    if (R->cfg->stop && *R->cfg->stop) {
        stop(R, SV_ERR_CANCELLED);
        sv_error_set(R->err, SV_ERR_CANCELLED, -1, "interrupted");
        return;
    }
    if (++R->ticks % 2 == 0) progress(R);
}

sv_status sv_batch_run(const sv_batch_input_t *in, const bool *skip, const sv_batch_runner_config_t *cfg,
                       sv_batch_progress_t *prog, sv_error_t *err) {
    memset(prog, 0, sizeof *prog);
    for (size_t i = 0; i < in->n; i++) prog->total += !(skip && skip[i]);
    runner_t R = {.in = in, .skip = skip, .cfg = cfg, .err = err, .prog = prog, .t0 = sv_now_ns()};
    if (cfg->api_key) snprintf(R.auth, sizeof R.auth, "Bearer %s", cfg->api_key);
    snprintf(R.host, sizeof R.host, "%s:%u", cfg->host, (unsigned)cfg->port);
    sv_status st = SV_OK;
    if (!(R.base = event_base_new()) || !(R.slots = calloc(cfg->concurrency, sizeof *R.slots)) ||
        !(R.tick = event_new(R.base, -1, EV_PERSIST, on_tick, &R))) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < cfg->concurrency; i++) {
        slot_t *s = &R.slots[i];
        s->R = &R;
        s->conn = evhttp_connection_base_new(R.base, NULL, cfg->host, cfg->port);
        s->retry = evtimer_new(R.base, on_retry, s);
        if (!s->conn || !s->retry) {
            st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
            goto done;
        }
        if (cfg->timeout_s > 0) evhttp_connection_set_timeout(s->conn, (int)(cfg->timeout_s + 0.999));
        else evhttp_connection_set_timeout(s->conn, 365 * 86400); /* libevent's default is 50 s */
    }
    struct timeval tv = {0, TICK_MS * 1000};
    event_add(R.tick, &tv);
    if (prog->total) {
        for (uint32_t i = 0; i < cfg->concurrency && !R.stopping; i++) send_next(&R.slots[i]);
        event_base_dispatch(R.base);
    }
    st = R.st;
    progress(&R);
done:
    if (R.slots)
        for (uint32_t i = 0; i < cfg->concurrency; i++) {
            if (R.slots[i].req) evhttp_cancel_request(R.slots[i].req);
            if (R.slots[i].conn) evhttp_connection_free(R.slots[i].conn);
            if (R.slots[i].retry) event_free(R.slots[i].retry);
        }
    free(R.slots);
    if (R.tick) event_free(R.tick);
    if (R.base) event_base_free(R.base);
    return st;
}
