/* server.c — the libevent HTTP server (see server.h for the design): requests'
 * lifetime, the handoff from the engine and compile threads, submitting,
 * routing, disconnects and drain. What is sent back is respond.c's. */
#include "server.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "src/api/api.h"
#include "compile_pool.h"
#include "fsm/dfa.h"
#include "src/api/metrics.h"
#include "src/api/prompt.h"
#include "src/api/render.h"
#include "src/server/internal/server_internal.h"
#include "util/clock.h"
#include "src/api/tools.h"

#define PROBE_MS 200 /* how often idle requests check that their client is still there */

void sv_server_config_default(sv_server_config_t *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8000;
    c->model_name = "sieve";
    c->max_body_bytes = 8u << 20;
    c->compile_threads = 2;
    c->compile_queue = 64;
    c->compile_memory = (size_t)1 << 30;
    c->compile_memory_each = (size_t)256 << 20;
    c->compile_timeout_ms = 10000;
    c->ccache_bytes = (size_t)512 << 20;
    c->dfa_memo_bytes = (size_t)64 << 20;
    c->ws = SV_WS_CANONICAL;
    c->max_ctx = 4096;
    c->max_queue = 256;
    c->max_n = SV_ENGINE_MAX_N;
    c->max_constraint_bytes = 1u << 20;
    c->drain_timeout_s = 30;
    c->data_dir = "./sieve-data";
    c->max_file_bytes = (size_t)100 << 20;
    c->max_reasoning_tokens = UINT32_MAX;
    sv_schema_opts_t so;
    sv_schema_opts_default(&so);
    c->any_deep_levels = so.any_deep_levels;
    c->any_calls = so.any_calls;
}

static uint64_t next_rand(srv_t *s) {
    /* xorshift64*: request ids and default seeds (not security). */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 0x2545F4914F6CDD1Dull;
}

/* ---- request lifetime --------------------------------------------------- */

static void on_wake(evutil_socket_t fd, short what, void *arg);
static void on_deadline(evutil_socket_t fd, short what, void *arg);

static void on_close(struct evhttp_connection *conn, void *arg) {
    req_t *r = arg;
    r->gone = true;
    r->conn = NULL;
    r->closecb_set = false;
    sv_server_cancel(r);
}

static req_t *req_new(srv_t *s, struct evhttp_request *http) {
    req_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->s = s;
    r->http = http;
    pthread_mutex_init(&r->mu, NULL);
    r->wake = event_new(s->base, -1, 0, on_wake, r);
    if (!r->wake) {
        pthread_mutex_destroy(&r->mu);
        free(r);
        return NULL;
    }
    r->conn = evhttp_request_get_connection(http);
    if (r->conn) {
        evhttp_connection_set_closecb(r->conn, on_close, r);
        r->closecb_set = true;
    }
    r->t0 = sv_now_ns();
    r->created = (int64_t)time(NULL);
    r->next = s->live;
    if (s->live) s->live->prev = r;
    s->live = r;
    s->n_live++;
    return r;
}

/* The reply is about to be sent: the connection may outlive this request
 * (keep-alive), so its close callback must forget it. */
void sv_server_detach_conn(req_t *r) {
    if (r->closecb_set && r->conn) evhttp_connection_set_closecb(r->conn, NULL, NULL);
    r->closecb_set = false;
}

void sv_server_cancel(req_t *r) {
    if (r->compiling && r->cjob) sv_cpool_cancel(r->s->cpool, r->cjob);
    if (r->submitted && !r->engine_done && !r->cancelled) {
        r->cancelled = true;
        sv_engine_loop_cancel(r->s->deps.loop, r->eid);
    }
}

static void req_free(req_t *r) {
    srv_t *s = r->s;
    if (r->prev) r->prev->next = r->next;
    else s->live = r->next;
    if (r->next) r->next->prev = r->prev;
    s->n_live--;
    sv_server_detach_conn(r);
    if (r->constraint) sv_constraint_release(s->ccache, r->constraint);
    for (out_ev_t *e = r->qh, *n; e; e = n) {
        n = e->next;
        free(e);
    }
    for (uint32_t i = 0; i < SV_ENGINE_MAX_N; i++) {
        sv_bytes_free(&r->ch[i].text);
        sv_bytes_free(&r->ch[i].reasoning);
        json_decref(r->ch[i].lp);
        free(r->ch[i].calls);
        free(r->ch[i].scan);
    }
    if (r->wake) event_free(r->wake);
    if (r->deadline) event_free(r->deadline);
    sv_api_request_free(&r->api);
    sv_ids_free(&r->prompt);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Frees r when nothing refers to it any more. */
static void maybe_free(req_t *r) {
    if (r->compiling) return;
    if (r->submitted && !r->engine_done) return;
    if (r->http) return;
    req_free(r);
}

/* An error before any output: the reply (r stays). */
static void reply_error(req_t *r, const sv_api_error_t *e) {
    if (r->http) {
        sv_server_detach_conn(r);
        if (r->headers_sent) {
            /* Cannot happen by construction (headers wait for the first
             * output), but a stream must still end. */
            evhttp_send_reply_end(r->http);
        } else {
            sv_server_send_error(r->s, r->http, e);
        }
        r->http = NULL;
    }
}

/* An error before any output: the reply, then r may go. */
static void fail_req(req_t *r, const sv_api_error_t *e) {
    reply_error(r, e);
    maybe_free(r);
}

/* ---- the engine and compile callbacks (other threads) -------------------- */

static void engine_cb(void *ud, const sv_engine_output_t *out, const sv_error_t *refusal) {
    req_t *r = ud;
    size_t nt = out->n_tokens;
    size_t sz = sizeof(out_ev_t) + nt * sizeof(int32_t) + (out->logprobs ? nt * sizeof(sv_logprobs_t) : 0) +
                out->n_text + out->n_reasoning + 2 + 16;
    out_ev_t *e = calloc(1, sz);
    pthread_mutex_lock(&r->mu);
    if (!e) {
        /* Out of memory on the engine thread: the request cannot continue
         * normally; its last output still has to arrive, so only a final
         * one is kept (allocated again below, small). */
        pthread_mutex_unlock(&r->mu);
        if (!out->request_done) return;
        e = calloc(1, sizeof *e);
        if (!e) return; /* nothing left to do: the request leaks */
        pthread_mutex_lock(&r->mu);
        nt = 0;
    } else {
        char *p = (char *)(e + 1);
        p = (char *)(((uintptr_t)p + 7) & ~(uintptr_t)7);
        e->lps = out->logprobs && nt ? (sv_logprobs_t *)p : NULL;
        if (e->lps) {
            memcpy(e->lps, out->logprobs, nt * sizeof(sv_logprobs_t));
            p += nt * sizeof(sv_logprobs_t);
        }
        e->tokens = (int32_t *)p;
        if (nt) memcpy(e->tokens, out->tokens, nt * sizeof(int32_t));
        p += nt * sizeof(int32_t);
        e->text = p;
        if (out->n_text) memcpy(e->text, out->text, out->n_text);
        e->n_text = out->n_text;
        p += out->n_text + 1;
        e->reasoning = p;
        if (out->n_reasoning) memcpy(e->reasoning, out->reasoning, out->n_reasoning);
        e->n_reasoning = out->n_reasoning;
    }
    e->n_reasoning_tokens = out->n_reasoning_tokens;
    e->index = out->index;
    e->n_tokens = (uint32_t)nt;
    e->finish = out->finish;
    e->budget_stop = out->budget_stop;
    e->stop_index = out->stop_index;
    e->request_done = out->request_done;
    e->n_prompt = out->n_prompt;
    e->n_cached = out->n_cached;
    e->n_generated = out->n_generated;
    if (refusal) {
        e->refused = true;
        e->refusal = *refusal;
    }
    if (r->qt) r->qt->next = e;
    else r->qh = e;
    r->qt = e;
    event_active(r->wake, 0, 0);
    pthread_mutex_unlock(&r->mu);
}

static void compile_cb(void *ud, sv_constraint_t *c, bool hit, uint64_t us, const sv_error_t *err) {
    req_t *r = ud;
    pthread_mutex_lock(&r->mu);
    r->c_ready = true;
    r->c_result = c;
    r->c_hit = hit;
    r->c_us = us;
    if (!c) r->c_err = *err;
    event_active(r->wake, 0, 0);
    pthread_mutex_unlock(&r->mu);
}

/* ---- submitting ------------------------------------------------------------ */

/* r's constraint (r->api.c) to the compile pool, with the server's options
 * and budgets; false when the pool takes no more jobs. */
void sv_server_compile_opts(const sv_server_config_t *cfg, sv_schema_opts_t *so) {
    sv_schema_opts_default(so);
    so->ws = cfg->ws;
    so->unknown_formats_ok = cfg->unknown_formats;
    so->any_deep_levels = cfg->any_deep_levels;
    so->any_calls = cfg->any_calls;
    so->key_order = cfg->key_order;
    so->discriminator_annotation = cfg->discriminator_annotation;
    if (cfg->compile_memory_each) so->lim.max_memory = cfg->compile_memory_each;
    if (cfg->compile_memory && cfg->compile_memory < so->lim.max_memory) so->lim.max_memory = cfg->compile_memory;
    if (cfg->compile_timeout_ms) so->lim.max_time_us = (uint64_t)cfg->compile_timeout_ms * 1000;
    if (cfg->compile_max_states) so->lim.max_dfa_states = cfg->compile_max_states;
}

/* The options constraint c compiles with: the server's, and for a request
 * with tools, the definition order of keys alone (fsm/schema.h,
 * extra_key_orders): its constraint is only ever generated, and the extra
 * orders cost about a third of a big tool set's compile (BENCHMARKS.md). */
static void constraint_opts(const sv_server_config_t *cfg, const sv_api_constraint_t *c, sv_schema_opts_t *so) {
    sv_server_compile_opts(cfg, so);
    if (c->tool_calls || c->calls_or_answer || c->tagged_calls) so->extra_key_orders = false;
}

int sv_server_check_constraint(const sv_server_config_t *cfg, sv_constraint_cache_t *cache,
                               const sv_token_set_t *tokens, const sv_api_constraint_t *c, sv_api_error_t *e) {
    sv_schema_opts_t so;
    constraint_opts(cfg, c, &so);
    sv_constraint_spec_t spec = {.kind = c->kind, .text = c->text, .len = c->len, .opts = &so, .tokens = tokens};
    sv_constraint_t *got = NULL;
    sv_error_t err;
    sv_error_clear(&err);
    if (sv_constraint_get(cache, &spec, &got, NULL, &err)) {
        sv_api_constraint_error(c, &err, e);
        return -1;
    }
    sv_constraint_release(cache, got);
    return 0;
}

void sv_server_api_limits(const sv_server_config_t *cfg, uint32_t vocab_rows, sv_api_limits_t *lim) {
    *lim = (sv_api_limits_t){.vocab_size = vocab_rows, .max_ctx = cfg->max_ctx,
                             .max_n = cfg->max_n ? cfg->max_n : 1, .max_constraint_bytes = cfg->max_constraint_bytes,
                             .ws = cfg->ws, .reasoning = cfg->reasoning_parser != SV_REASONING_NONE};
    if (lim->max_n > SV_ENGINE_MAX_N) lim->max_n = SV_ENGINE_MAX_N;
}

static bool start_compile(req_t *r) {
    srv_t *s = r->s;
    sv_schema_opts_t so;
    constraint_opts(&s->cfg, &r->api.c, &so);
    sv_constraint_spec_t spec = {.kind = r->api.c.kind, .text = r->api.c.text, .len = r->api.c.len, .opts = &so,
                                 .tokens = s->deps.set};
    r->compiling = true;
    r->cjob = sv_cpool_submit(s->cpool, &spec, compile_cb, r);
    if (!r->cjob) r->compiling = false;
    return r->cjob != 0;
}


static void submit(req_t *r) {
    srv_t *s = r->s;
    sv_api_error_t e;
    if (r->gone) {
        /* Nobody reads this; the reply only lets libevent free its request. */
        sv_api_fail(&e, 400, NULL, "the client closed the connection");
        fail_req(r, &e);
        return;
    }
    if (s->draining) {
        sv_api_fail(&e, 503, NULL, "the server is shutting down");
        e.retry_after = 1;
        fail_req(r, &e);
        return;
    }
    sv_engine_loop_stats_t st;
    sv_engine_loop_stats(s->deps.loop, &st);
    /* Batch-priority requests fill at most half the queue: the rest is
     * online requests' (X-Sieve-Priority). */
    uint32_t queue_cap = r->batch ? (s->cfg.max_queue + 1) / 2 : s->cfg.max_queue;
    if (st.engine.waiting + st.inbox >= queue_cap) {
        sv_api_fail(&e, 429, NULL, "the server is busy: %u requests are waiting; retry later",
                    st.engine.waiting + st.inbox);
        snprintf(e.code, sizeof e.code, "queue_full");
        e.retry_after = 1;
        fail_req(r, &e);
        return;
    }
    uint32_t budget = r->api.max_tokens ? r->api.max_tokens : s->cfg.max_ctx - (uint32_t)r->prompt.n;
    sv_engine_request_t rq = {
        .prompt = r->prompt.v,
        .n_prompt = (uint32_t)r->prompt.n,
        .sampling = r->api.sp,
        .constraint = r->constraint ? sv_constraint_index(r->constraint) : NULL,
        .max_tokens = budget,
        .stop = r->api.n_stop ? r->api.stop : NULL,
        .n_stop = r->api.n_stop,
        .n = r->api.n,
        .logprobs = r->api.logprobs,
        .priority = r->batch ? SV_PRIORITY_BATCH : SV_PRIORITY_ONLINE,
    };
    /* A reasoning section before the answer. */
    sv_engine_reasoning_t ers;
    if (r->reasons) {
        sv_reasoning_engine(&s->rs, r->api.max_reasoning_given ? r->api.max_reasoning_tokens
                                                                 : s->cfg.max_reasoning_tokens, &ers);
        rq.reasoning = &ers;
    }
    sv_error_t err;
    sv_error_clear(&err);
    if (sv_engine_loop_submit(s->deps.loop, &rq, engine_cb, r, &r->eid, &err)) {
        int status = sv_api_http_status(err.code);
        if (status == 429 && s->draining) status = 503;
        if (status == 429 || status == 503) {
            sv_api_fail(&e, status, NULL, "the server cannot take the request now: %s", err.message);
            e.retry_after = 1;
        } else {
            sv_api_fail(&e, status, status == 400 && err.keyword[0] ? err.keyword : NULL, "%s", err.message);
        }
        fail_req(r, &e);
        return;
    }
    r->submitted = true;
    if (s->cfg.request_timeout_s > 0 && !r->deadline) {
        r->deadline = evtimer_new(s->base, on_deadline, r);
        if (r->deadline) {
            double t = s->cfg.request_timeout_s;
            struct timeval tv = {(long)t, (long)((t - (double)(long)t) * 1e6)};
            evtimer_add(r->deadline, &tv);
        }
    }
}

static void on_deadline(evutil_socket_t fd, short what, void *arg) {
    req_t *r = arg;
    r->deadline_hit = true;
    sv_server_cancel(r);
}

static void refused(req_t *r, const sv_error_t *err) {
    sv_api_error_t e;
    if (r->s->draining || !sv_engine_loop_alive(r->s->deps.loop)) {
        sv_api_fail(&e, 503, NULL, "the server cannot take the request: %s", err->message);
        e.retry_after = 1;
    } else if (sv_api_http_status(err->code) == 429) {
        sv_api_fail(&e, 429, NULL, "the server is busy: %s", err->message);
        snprintf(e.code, sizeof e.code, "queue_full");
        e.retry_after = 1;
    } else {
        /* The engine's admission checks (prompt + max_tokens over the KV
         * pool: the keyword names the parameter), or a fault of sieve's. */
        int status = sv_api_http_status(err->code);
        sv_api_fail(&e, status, status == 400 && err->keyword[0] ? err->keyword : NULL, "%s", err->message);
        if (status == 500) snprintf(e.code, sizeof e.code, "internal_error");
    }
    r->engine_done = true;
    reply_error(r, &e); /* on_wake frees r after this last output */
}

static void handle_output(req_t *r, out_ev_t *e) {
    srv_t *s = r->s;
    if (e->refused) {
        refused(r, &e->refusal);
        return;
    }
    uint64_t now = sv_now_ns();
    if (e->n_tokens) {
        if (!r->t_first) {
            r->t_first = now;
            sv_histogram_observe(r->batch ? &s->m.batch_ttft : &s->m.ttft, (double)(now - r->t0) / 1e9);
        } else {
            double per = (double)(now - r->t_last) / 1e9 / e->n_tokens;
            for (uint32_t k = 0; k < e->n_tokens; k++) sv_histogram_observe(r->batch ? &s->m.batch_itl : &s->m.itl, per);
        }
        r->t_last = now;
    }
    r->n_prompt = e->n_prompt;
    if (e->n_cached > r->n_cached) r->n_cached = e->n_cached;
    if (e->index < r->n_choices) {
        choice_t *c = &r->ch[e->index];
        if (e->n_reasoning) sv_bytes_append(&c->reasoning, e->reasoning, e->n_reasoning);
        c->n_reasoning_tokens = e->n_reasoning_tokens;
        if (e->n_text) sv_bytes_append(&c->text, e->text, e->n_text);
        if (e->lps && c->lp)
            sv_render_logprobs(r->api.kind, sv_tokens_vocab(s->deps.tok), e->tokens, e->lps, e->n_tokens,
                               r->api.top_logprobs > 0, c->lp, &c->text_offset);
        c->n_generated = e->n_generated;
        if (e->finish != SV_FINISH_NONE && !c->done) {
            c->done = true;
            c->finish = e->finish;
            c->budget_stop = e->budget_stop;
            r->n_done++;
        }
        if (r->api.stream && r->http && !r->gone) {
            sv_server_start_stream(r);
            if (c->reasoning.n > c->r_sent) sv_server_stream_reasoning(r, e->index);
            if (!c->role_sent && sv_server_is_chat(r)) sv_server_stream_delta(r, e->index, c->sent, c->sent, NULL, NULL);
            size_t to = c->done ? c->sent : sv_server_stream_to(r, c);
            if (to > c->sent)
                sv_server_stream_delta(r, e->index, c->sent, to, NULL, NULL);
            else if (!c->done && sv_server_is_chat(r)) sv_server_stream_calls(r, e->index);
        }
    }
    if (e->request_done) {
        r->engine_done = true;
        /* Aborted without a cancel of ours: the engine failed (the loop is
         * dead). A response not yet started says so. */
        if (!r->cancelled && !r->headers_sent && e->finish == SV_FINISH_ABORT && !sv_engine_loop_alive(s->deps.loop)) {
            sv_api_error_t err;
            sv_api_fail(&err, 503, NULL, "the engine failed while running the request; see the server's log");
            reply_error(r, &err);
            return;
        }
        sv_server_finish_response(r);
    }
}

/* The reply to a failed compile of constraint c: the constraint's error,
 * or 503 when the drain (not the client) cancelled it. */
static void compile_failure(const req_t *r, const sv_api_constraint_t *c, sv_api_error_t *e) {
    if (r->c_err.code == SV_ERR_CANCELLED && !r->gone) {
        sv_api_fail(e, 503, NULL, "the server is shutting down");
        e->retry_after = 1;
    } else {
        sv_api_constraint_error(c, &r->c_err, e);
    }
}

static void on_wake(evutil_socket_t fd, short what, void *arg) {
    req_t *r = arg;
    pthread_mutex_lock(&r->mu);
    out_ev_t *q = r->qh;
    r->qh = r->qt = NULL;
    bool c_ready = r->c_ready;
    r->c_ready = false;
    pthread_mutex_unlock(&r->mu);

    if (c_ready) {
        r->compiling = false;
        r->cjob = 0;
        if (!r->c_hit && r->c_result) sv_histogram_observe(&r->s->m.compile, (double)r->c_us / 1e6);
        if (!r->c_result) {
            sv_api_error_t e;
            compile_failure(r, &r->api.c, &e);
            fail_req(r, &e);
        } else {
            r->constraint = r->c_result;
            submit(r);
        }
    }
    /* Outputs: after the last one (request_done) r may be freed. */
    while (q) {
        out_ev_t *n = q->next;
        bool last = q->request_done;
        handle_output(r, q);
        free(q);
        q = n;
        if (last) {
            for (; q; q = n) {
                n = q->next;
                free(q);
            }
            maybe_free(r);
            return;
        }
    }
}

/* ---- /v1/chat/completions and /v1/completions ---------------------------------- */

static void handle_generate(srv_t *s, struct evhttp_request *http, sv_api_kind kind) {
    sv_api_error_t e;
    struct evbuffer *in = evhttp_request_get_input_buffer(http);
    size_t len = evbuffer_get_length(in);
    if (len > s->cfg.max_body_bytes) {
        sv_api_fail(&e, 413, NULL, "the body has %zu bytes; the limit is %zu", len, s->cfg.max_body_bytes);
        snprintf(e.code, sizeof e.code, "request_too_large");
        sv_server_send_error(s, http, &e);
        return;
    }
    if (s->draining) {
        sv_api_fail(&e, 503, NULL, "the server is shutting down");
        e.retry_after = 1;
        sv_server_send_error(s, http, &e);
        return;
    }
    if (!sv_engine_loop_alive(s->deps.loop)) {
        sv_api_fail(&e, 503, NULL, "the engine has stopped after an error; see the server's log");
        sv_server_send_error(s, http, &e);
        return;
    }
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    req_t *r = req_new(s, http);
    if (!r) {
        sv_api_fail(&e, 500, NULL, "out of memory");
        sv_server_send_error(s, http, &e);
        return;
    }
    if (sv_api_parse(kind, body, len, &s->lim, &r->api, &e)) {
        fail_req(r, &e);
        return;
    }
    /* X-Sieve-Priority: batch yields to online requests (src/engine/engine.h, "Priorities"). */
    const char *prio = evhttp_find_header(evhttp_request_get_input_headers(http), "X-Sieve-Priority");
    if (prio && strcmp(prio, "online") && strcmp(prio, "batch")) {
        sv_api_fail(&e, 400, NULL, "X-Sieve-Priority must be \"online\" or \"batch\"");
        fail_req(r, &e);
        return;
    }
    r->batch = prio && !strcmp(prio, "batch");
    if (r->api.model && strcmp(r->api.model, s->cfg.model_name) != 0 &&
        !(s->cfg.model_path && !strcmp(r->api.model, s->cfg.model_path))) {
        sv_api_fail(&e, 404, "model", "The model '%s' does not exist; this server serves '%s'", r->api.model,
                    s->cfg.model_name);
        snprintf(e.code, sizeof e.code, "model_not_found");
        fail_req(r, &e);
        return;
    }
    if (!r->api.seed_given) r->api.sp.seed = next_rand(s);
    snprintf(r->id, sizeof r->id, "%s%016llx%08llx", kind == SV_API_CHAT ? "chatcmpl-" : "cmpl-",
             (unsigned long long)next_rand(s), (unsigned long long)(next_rand(s) & 0xffffffffu));
    r->n_choices = r->api.n;
    for (uint32_t i = 0; i < r->n_choices; i++)
        if (r->api.logprobs && !(r->ch[i].lp = sv_render_logprobs_new(kind))) {
            sv_api_fail(&e, 500, NULL, "out of memory");
            fail_req(r, &e);
            return;
        }

    /* The prompt. */
    const sv_vocab_t *v = sv_tokens_vocab(s->deps.tok);
    sv_error_t err;
    sv_error_clear(&err);
    const char *pparam = kind == SV_API_CHAT ? "messages" : "prompt";
    if (kind == SV_API_CHAT) {
        if (!s->deps.tmpl) {
            sv_api_fail(&e, 400, "messages", "this model has no chat template sieve can render (%s); use "
                        "/v1/completions or start the server with --chat-template NAME",
                        s->deps.tmpl_error ? s->deps.tmpl_error : "none");
            fail_req(r, &e);
            return;
        }
        sv_bytes_t text = {0};
        if (sv_prompt_render_chat(s->deps.tmpl, &r->api, &text, &e)) {
            sv_bytes_free(&text);
            fail_req(r, &e);
            return;
        }
        const char *suffix = sv_reasoning_prompt_suffix(s->rs.parser, r->api.enable_thinking, &r->reasons);
        if (sv_bytes_append(&text, suffix, strlen(suffix))) {
            sv_bytes_free(&text);
            sv_api_fail(&e, 500, NULL, "out of memory");
            fail_req(r, &e);
            return;
        }
        sv_status st = sv_tokens_encode(s->deps.tok, (const char *)text.p, text.n, &r->prompt, &err);
        sv_bytes_free(&text);
        if (st) {
            sv_api_fail(&e, sv_api_http_status(st), pparam, "the prompt does not encode: %s", err.message);
            fail_req(r, &e);
            return;
        }
    } else if (r->api.prompt_ids) {
        for (uint32_t i = 0; i < r->api.n_prompt_ids; i++)
            if (sv_ids_push(&r->prompt, r->api.prompt_ids[i])) {
                sv_api_fail(&e, 500, NULL, "out of memory");
                fail_req(r, &e);
                return;
            }
    } else {
        if (sv_vocab_add_bos(v) && sv_vocab_bos(v) >= 0 && sv_ids_push(&r->prompt, sv_vocab_bos(v))) {
            sv_api_fail(&e, 500, NULL, "out of memory");
            fail_req(r, &e);
            return;
        }
        sv_status st = sv_tokens_encode(s->deps.tok, r->api.prompt, strlen(r->api.prompt), &r->prompt, &err);
        if (st) {
            sv_api_fail(&e, sv_api_http_status(st), pparam, "the prompt does not encode: %s", err.message);
            fail_req(r, &e);
            return;
        }
    }
    if (r->prompt.n == 0) {
        sv_api_fail(&e, 400, pparam, "%s: the prompt is empty (it encodes to no tokens)", pparam);
        fail_req(r, &e);
        return;
    }
    if (r->prompt.n >= s->cfg.max_ctx) {
        sv_api_fail(&e, 400, pparam, "This model's maximum context length is %u tokens; the prompt has %zu tokens",
                    s->cfg.max_ctx, r->prompt.n);
        snprintf(e.code, sizeof e.code, "context_length_exceeded");
        fail_req(r, &e);
        return;
    }
    if (r->api.max_tokens && r->prompt.n + r->api.max_tokens > s->cfg.max_ctx) {
        sv_api_fail(&e, 400, "max_tokens",
                    "This model's maximum context length is %u tokens; the prompt has %zu tokens and max_tokens is %u",
                    s->cfg.max_ctx, r->prompt.n, r->api.max_tokens);
        snprintf(e.code, sizeof e.code, "context_length_exceeded");
        fail_req(r, &e);
        return;
    }

    /* tool_choice "auto": one constraint, free text whose calls in the
     * family's format are enforced from their trigger on (tools.h). */
    if (kind == SV_API_CHAT && r->api.tool_choice == SV_TOOLS_AUTO && !r->api.c.on) {
        char *tag;
        if (sv_tools_tagged_calls(&r->api, s->deps.tmpl->kind, &tag, &e)) {
            fail_req(r, &e);
            return;
        }
        r->api.c = (sv_api_constraint_t){.on = true, .kind = SV_CONSTRAINT_FRAMED_SCHEMA, .text = tag,
                                         .len = strlen(tag), .tagged_calls = true, .tools = r->api.tools};
        snprintf(r->api.c.param, sizeof r->api.c.param, "tools");
    }

    /* The constraint, on the compile pool; or straight to the engine. */
    if (r->api.c.on) {
        if (!start_compile(r)) {
            sv_api_fail(&e, 429, NULL, "the server is busy compiling constraints; retry later");
            e.retry_after = 1;
            fail_req(r, &e);
        }
        return;
    }
    submit(r);
}

/* ---- the other endpoints ------------------------------------------------------ */

static bool authorized(srv_t *s, struct evhttp_request *http) {
    if (!s->cfg.api_key) return true;
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(http), "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) return false;
    const char *k = h + 7, *want = s->cfg.api_key;
    size_t n = strlen(want);
    if (strlen(k) != n) return false;
    unsigned char d = 0; /* constant time in the key's length */
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(k[i] ^ want[i]);
    return d == 0;
}

static void handle(struct evhttp_request *http, void *arg) {
    srv_t *s = arg;
    sv_api_error_t e;
    const char *uri = evhttp_request_get_uri(http);
    char path[256];
    size_t n = strcspn(uri, "?#");
    if (n >= sizeof path) n = sizeof path - 1;
    memcpy(path, uri, n);
    path[n] = 0;
    while (n > 1 && path[n - 1] == '/') path[--n] = 0;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(http);

    if (!strcmp(path, "/health")) {
        sv_server_health(s, http);
        return;
    }
    if (!strcmp(path, "/metrics")) {
        sv_server_metrics(s, http);
        return;
    }
    bool chat = !strcmp(path, "/v1/chat/completions"), comp = !strcmp(path, "/v1/completions"),
         models = !strcmp(path, "/v1/models");
    bool files = !strcmp(path, "/v1/files") || !strncmp(path, "/v1/files/", 10);
    bool batches = !strcmp(path, "/v1/batches") || !strncmp(path, "/v1/batches/", 12);
    if (!chat && !comp && !models && !files && !batches) {
        sv_api_fail(&e, 404, NULL, "no route for %s", path);
        snprintf(e.code, sizeof e.code, "unknown_url");
        sv_server_send_error(s, http, &e);
        return;
    }
    if (!authorized(s, http)) {
        sv_api_fail(&e, 401, NULL, "a valid API key is required: Authorization: Bearer KEY");
        snprintf(e.code, sizeof e.code, "invalid_api_key");
        sv_server_send_error(s, http, &e);
        return;
    }
    if (files) {
        sv_server_files(s, http, path);
        return;
    }
    if (batches) {
        sv_store_t *st = sv_server_store(s, http);
        if (st) sv_server_batches(s, http, path, st);
        return;
    }
    if (models) {
        if (cmd != EVHTTP_REQ_GET) {
            sv_api_fail(&e, 405, NULL, "%s takes GET", path);
            sv_server_send_error(s, http, &e);
            return;
        }
        sv_server_models(s, http);
        return;
    }
    if (cmd != EVHTTP_REQ_POST) {
        sv_api_fail(&e, 405, NULL, "%s takes POST", path);
        sv_server_send_error(s, http, &e);
        return;
    }
    handle_generate(s, http, chat ? SV_API_CHAT : SV_API_COMPLETION);
}

/* ---- disconnect probe, signals, drain -------------------------------------------- */

/* A request that has nothing to write does not learn from libevent that its
 * client closed; peek at the socket instead. */
static void on_probe(evutil_socket_t fd_, short what, void *arg) {
    srv_t *s = arg;
    for (req_t *r = s->live; r; r = r->next) {
        if (r->gone || !r->conn || !r->http) continue;
        struct bufferevent *bev = evhttp_connection_get_bufferevent(r->conn);
        evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
        if (fd < 0) continue;
        char c;
        ssize_t k = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            r->gone = true;
            sv_server_cancel(r);
        }
    }
}

static void on_drain_tick(evutil_socket_t fd, short what, void *arg) {
    srv_t *s = arg;
    uint64_t now = sv_now_ns();
    if (s->n_live == 0) {
        /* The last replies may still sit in their connections' output
         * buffers: keep the loop running a little so that libevent writes
         * them before evhttp_free closes the connections. */
        if (!s->idle_since_ns) s->idle_since_ns = now;
        if (now - s->idle_since_ns >= 300000000ull) event_base_loopexit(s->base, NULL);
        return;
    }
    s->idle_since_ns = 0;
    if (now >= s->drain_deadline_ns && !s->drain_cancelled) {
        fprintf(stderr, "%s: drain timeout; cancelling %u requests\n", s->log_name, s->n_live);
        s->drain_cancelled = true;
        for (req_t *r = s->live; r; r = r->next) sv_server_cancel(r);
    }
    /* Requests still compiling, or a client that never reads: give up 5 s
     * after the deadline. */
    if (now >= s->drain_deadline_ns + 5000000000ull) event_base_loopexit(s->base, NULL);
}

static void start_drain(srv_t *s) {
    sv_server_batches_stop(s); /* the batch in progress stops; it resumes at the next start */
    if (s->sock) {
        evhttp_del_accept_socket(s->http, s->sock);
        s->sock = NULL;
    }
    s->drain_deadline_ns = sv_now_ns() + (uint64_t)(s->cfg.drain_timeout_s * 1e9);
    s->drain_timer = event_new(s->base, -1, EV_PERSIST, on_drain_tick, s);
    struct timeval tv = {0, 20000};
    if (s->drain_timer) event_add(s->drain_timer, &tv);
    else event_base_loopexit(s->base, NULL);
}

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    srv_t *s = arg;
    if (s->draining) {
        fprintf(stderr, "%s: second signal; exiting now\n", s->log_name);
        event_base_loopexit(s->base, NULL);
        return;
    }
    s->draining = true;
    fprintf(stderr, "%s: signal %d; draining %u requests (at most %.0f s)\n", s->log_name, (int)sig, s->n_live,
            s->cfg.drain_timeout_s);
    start_drain(s);
}

static void on_shutdown(evutil_socket_t fd, short what, void *arg) {
    srv_t *s = arg;
    if (s->draining) return;
    s->draining = true;
    start_drain(s);
}

void sv_server_shutdown(sv_server_t *s) { event_active(s->shutdown, 0, 0); }

static void plain_ready(void *ud, sv_server_t *s, uint16_t port) {
    (void)s;
    void (*ready)(uint16_t) = *(void (**)(uint16_t))ud;
    if (ready) ready(port);
}

sv_status sv_server_run(const sv_server_config_t *cfg, const sv_server_deps_t *deps, void (*ready)(uint16_t port),
                        sv_error_t *err) {
    sv_server_hooks_t h = {.ready = plain_ready, .ud = &ready};
    return sv_server_run_hooked(cfg, deps, &h, err);
}

sv_status sv_server_run_hooked(const sv_server_config_t *cfg, const sv_server_deps_t *deps,
                               const sv_server_hooks_t *hooks, sv_error_t *err) {
    sv_status st = SV_OK;
    srv_t *s = calloc(1, sizeof *s);
    if (!s) {
        sv_engine_loop_stop(deps->loop);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    s->cfg = *cfg;
    s->deps = *deps;
    pthread_mutex_init(&s->bw_mu, NULL);
    pthread_cond_init(&s->bw_cv, NULL);
    sv_server_api_limits(cfg, deps->vocab_rows, &s->lim);
    s->log_name = hooks->log_name ? hooks->log_name : "sieve serve";
    s->started = (int64_t)time(NULL);
    s->rng = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() ^ sv_now_ns();
    if (!s->rng) s->rng = 1;
    srand((unsigned)next_rand(s)); /* tool call ids */
    sv_metrics_init(&s->m);
    {
        /* the automata every schema shares, built before the first request
         * rather than by it (fsm/schema_text.c, the prelude) */
        sv_schema_opts_t so;
        sv_error_t e;
        sv_error_clear(&e);
        sv_server_compile_opts(cfg, &so);
        if (sv_schema_prelude_warm(&so, &e))
            fprintf(stderr, "%s: warning: the shared automata were not built ahead (%s); the first schema builds them\n",
                    s->log_name, e.message);
    }

    if (evthread_use_pthreads() != 0) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "libevent: no thread support");
        goto done;
    }
    if (hooks->ccache) s->ccache = hooks->ccache;
    else if ((st = sv_ccache_create(cfg->ccache_bytes, &s->ccache, err))) goto done;
    else s->own_ccache = true;
    sv_dfa_cache_configure(cfg->dfa_memo_bytes);
    sv_cpool_config_t pc = {.threads = cfg->compile_threads ? cfg->compile_threads : 1,
                            .queue = cfg->compile_queue ? cfg->compile_queue : 64,
                            .memory = cfg->compile_memory};
    if ((st = sv_cpool_create(&pc, s->ccache, &s->cpool, err))) goto done;
    if ((st = sv_reasoning_init((sv_reasoning_parser)cfg->reasoning_parser, s->ccache, deps->tok, &s->rs, err)))
        goto done;
    s->base = event_base_new();
    s->http = s->base ? evhttp_new(s->base) : NULL;
    if (!s->http) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "libevent: cannot create the HTTP server");
        goto done;
    }
    /* The body limit that sends OpenAI's 413 is checked in the handler;
     * libevent's own limit (a bare 413) only stops bodies far past it. */
    size_t hard = cfg->max_body_bytes * 4 + (1u << 20);
    if (hard < cfg->max_file_bytes + (2u << 20)) hard = cfg->max_file_bytes + (2u << 20); /* uploads */
    evhttp_set_max_body_size(s->http, (ev_ssize_t)hard);
    evhttp_set_max_headers_size(s->http, 64 * 1024);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(s->http, handle, s);
    s->sock = evhttp_bind_socket_with_handle(s->http, cfg->host, cfg->port);
    if (!s->sock) {
        st = sv_error_set(err, SV_ERR_IO, -1, "cannot listen on %s:%u: %s", cfg->host, (unsigned)cfg->port,
                          strerror(errno));
        goto done;
    }
    uint16_t port = cfg->port;
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(evhttp_bound_socket_get_fd(s->sock), (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET) port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
            else if (ss.ss_family == AF_INET6) port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    s->port = port;
    if (!hooks->no_batch_worker) sv_server_batches_start(s);
    signal(SIGPIPE, SIG_IGN);
    if (!hooks->no_signals) {
        s->sig_term = evsignal_new(s->base, SIGTERM, on_signal, s);
        s->sig_int = evsignal_new(s->base, SIGINT, on_signal, s);
    }
    s->probe = event_new(s->base, -1, EV_PERSIST, on_probe, s);
    s->shutdown = event_new(s->base, -1, 0, on_shutdown, s);
    if ((!hooks->no_signals && (!s->sig_term || !s->sig_int)) || !s->probe || !s->shutdown) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "libevent: out of memory");
        goto done;
    }
    if (s->sig_term) evsignal_add(s->sig_term, NULL);
    if (s->sig_int) evsignal_add(s->sig_int, NULL);
    struct timeval ptv = {0, PROBE_MS * 1000};
    event_add(s->probe, &ptv);
    if (hooks->ready) hooks->ready(hooks->ud, s, port);
    event_base_dispatch(s->base);

done:
    /* The batch worker first (its runner talks to this server), then the
     * engine (its last callbacks still wake requests on the base), then the
     * compile pool, then libevent. */
    sv_server_batches_join(s);
    sv_engine_loop_stop(deps->loop);
    sv_cpool_destroy(s->cpool);
    while (s->live) {
        req_t *r = s->live;
        r->compiling = false;
        r->engine_done = true;
        if (r->http) {
            sv_server_detach_conn(r);
            if (r->headers_sent) evhttp_send_reply_end(r->http);
            else {
                sv_api_error_t e;
                sv_api_fail(&e, 503, NULL, "the server is shutting down");
                sv_server_send_error(s, r->http, &e);
            }
            r->http = NULL;
        }
        req_free(r);
    }
    if (s->sig_term) event_free(s->sig_term);
    if (s->sig_int) event_free(s->sig_int);
    if (s->probe) event_free(s->probe);
    if (s->shutdown) event_free(s->shutdown);
    if (s->drain_timer) event_free(s->drain_timer);
    if (s->http) evhttp_free(s->http);
    if (s->base) event_base_free(s->base);
    if (s->ccache) sv_reasoning_release(&s->rs, s->ccache);
    if (s->own_ccache) sv_ccache_destroy(s->ccache);
    sv_store_close(s->store);
    pthread_mutex_destroy(&s->bw_mu);
    pthread_cond_destroy(&s->bw_cv);
    free(s);
    return st;
}
