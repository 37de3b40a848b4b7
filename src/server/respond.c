/* respond.c — what goes back to the client: error replies, OpenAI
 * responses and SSE chunks assembled from a request's outputs (shapes in
 * render.h), tool calls read from the text (tools.h), and the GET
 * endpoints (/v1/models, /health, /metrics). HTTP thread only. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compile_pool.h"
#include "fsm/dfa.h"
#include "src/api/render.h"
#include "src/server/internal/server_internal.h"
#include "src/chat/chat.h"
#include "util/clock.h"
#include "src/api/tools.h"

/* text[from..to) as a JSON string; "" for an empty slice (text.p may be
 * NULL then, which json_stringn refuses). */
/* Whether the text, whitespace skipped, starts a JSON list. */
static bool starts_array(const sv_bytes_t *t) {
    size_t i = 0;
    while (i < t->n && (t->p[i] == ' ' || t->p[i] == '\n' || t->p[i] == '\t' || t->p[i] == '\r')) i++;
    return i < t->n && t->p[i] == '[';
}

static json_t *text_slice(const sv_bytes_t *t, size_t from, size_t to) {
    return to > from ? json_stringn((const char *)t->p + from, to - from) : json_string("");
}

/* ---- replies ------------------------------------------------------------ */

static const char *reason_phrase(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

void sv_server_send_body(struct evhttp_request *http, int status, const char *ctype, const char *body, size_t n,
                      int retry_after) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(http);
    evhttp_add_header(h, "Content-Type", ctype);
    if (retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", retry_after);
        evhttp_add_header(h, "Retry-After", ra);
    }
    struct evbuffer *b = evbuffer_new();
    if (b) evbuffer_add(b, body, n);
    evhttp_send_reply(http, status, reason_phrase(status), b);
    if (b) evbuffer_free(b);
}

void sv_server_send_json(struct evhttp_request *http, int status, json_t *j, int retry_after) {
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (s) sv_server_send_body(http, status, "application/json", s, strlen(s), retry_after);
    else {
        static const char nomem[] =
            "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        sv_server_send_body(http, 500, "application/json", nomem, sizeof nomem - 1, 0);
    }
    free(s);
}

void sv_server_send_error(srv_t *s, struct evhttp_request *http, const sv_api_error_t *e) {
    s->m.errors++;
    json_t *j = sv_api_error_json(e);
    sv_server_send_json(http, e->status, j, e->retry_after);
    json_decref(j);
}

/* ---- responses --------------------------------------------------------------- */

bool sv_server_is_chat(const req_t *r) { return r->api.kind == SV_API_CHAT; }

static void head_of(const req_t *r, sv_render_head_t *h) {
    h->id = r->id;
    h->model = r->s->cfg.model_name;
    h->created = r->created;
    h->kind = r->api.kind;
}

static void write_chunk(req_t *r, json_t *chunk) {
    if (!r->http || !chunk) return;
    if (r->api.include_usage && !json_object_get(chunk, "usage")) json_object_set_new(chunk, "usage", json_null());
    size_t n;
    char *sse = sv_render_sse(chunk, &n);
    if (sse) {
        struct evbuffer *b = evbuffer_new();
        if (b) {
            evbuffer_add(b, sse, n);
            evhttp_send_reply_chunk(r->http, b);
            evbuffer_free(b);
        }
        free(sse);
    }
}

void sv_server_start_stream(req_t *r) {
    if (r->headers_sent || !r->http) return;
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->http);
    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply_start(r->http, 200, "OK");
    r->headers_sent = true;
}

/* Where the text before a call ends: the first trigger (tools.h,
 * sv_tools_trigger) at or after from, or a start of one at the very end,
 * with the whitespace before it (which the content leaves out,
 * sv_tools_calls_tagged). The text before from (what was streamed) holds
 * none, so each new output scans only what is new. */
static size_t before_trigger(const char *t, size_t n, size_t from, const char *trigger) {
    const size_t k = strlen(trigger);
    size_t end = n;
    for (size_t i = from; i < n; i++) {
        size_t m = n - i < k ? n - i : k;
        if (t[i] == trigger[0] && !memcmp(t + i, trigger, m)) {
            end = i;
            break;
        }
    }
    while (end && (t[end - 1] == ' ' || t[end - 1] == '\n' || t[end - 1] == '\t' || t[end - 1] == '\r')) end--;
    return end;
}

/* Whether choice c's text is held back whole (a call list, or what may be one). */
static bool holding(const req_t *r, const choice_t *c) {
    if (r->api.c.tool_calls) return true;
    /* A call list starts with '['; the answer usually with '{' and streams. */
    if (r->api.c.calls_or_answer) return c->text.n == 0 || starts_array(&c->text);
    return false;
}

size_t sv_server_stream_to(const req_t *r, const choice_t *c) {
    if (r->api.c.tagged_calls) {
        size_t end = before_trigger((const char *)c->text.p, c->text.n, c->sent,
                                    sv_tools_trigger(r->s->deps.tmpl->kind));
        return end > c->sent ? end : c->sent;
    }
    return holding(r, c) ? c->sent : c->text.n;
}

/* A constrained choice that the budget rule closed at max_tokens ends with
 * finish_reason "stop" (its output is complete and valid) and, so that a
 * client can tell it from a natural stop, "stop_reason": "max_tokens". */
static void budget_mark(json_t *ch, const choice_t *c, const char *finish) {
    if (finish && c->budget_stop && !strcmp(finish, "stop"))
        json_object_set_new(ch, "stop_reason", json_string("max_tokens"));
}

/* A streamed chunk for choice i with delta content text[from..to) (or the
 * role only), the pending logprobs, and finish (NULL: none). */
void sv_server_stream_delta(req_t *r, uint32_t i, size_t from, size_t to, json_t *tool_calls, const char *finish) {
    choice_t *c = &r->ch[i];
    sv_render_head_t hd;
    head_of(r, &hd);
    json_t *chunk = sv_render_head(&hd, true);
    json_t *ch;
    json_t *lp = c->lp && json_array_size(sv_server_is_chat(r) ? c->lp : json_object_get(c->lp, "tokens")) ? c->lp : NULL;
    if (sv_server_is_chat(r)) {
        json_t *delta = json_object();
        if (!c->role_sent) {
            json_object_set_new(delta, "role", json_string("assistant"));
            c->role_sent = true;
        }
        if (to > from || (!tool_calls && !finish))
            json_object_set_new(delta, "content", text_slice(&c->text, from, to));
        if (tool_calls) json_object_set(delta, "tool_calls", tool_calls);
        ch = json_pack("{s:i, s:o, s:o, s:o}", "index", (int)i, "delta", delta, "logprobs",
                       lp ? json_pack("{s:O}", "content", lp) : json_null(), "finish_reason",
                       finish ? json_string(finish) : json_null());
    } else {
        ch = json_pack("{s:i, s:s%, s:O, s:o}", "index", (int)i, "text", to > from ? (const char *)c->text.p + from : "",
                       to - from, "logprobs", lp ? lp : json_null(), "finish_reason",
                       finish ? json_string(finish) : json_null());
    }
    if (lp) {
        json_decref(c->lp);
        c->lp = sv_render_logprobs_new(r->api.kind);
    }
    budget_mark(ch, c, finish);
    json_array_append_new(json_object_get(chunk, "choices"), ch);
    write_chunk(r, chunk);
    json_decref(chunk);
    c->sent = to;
}

void sv_server_stream_reasoning(req_t *r, uint32_t i) {
    choice_t *c = &r->ch[i];
    sv_render_head_t hd;
    head_of(r, &hd);
    json_t *chunk = sv_render_head(&hd, true);
    json_t *delta = json_object();
    if (!c->role_sent) {
        json_object_set_new(delta, "role", json_string("assistant"));
        c->role_sent = true;
    }
    json_object_set_new(delta, "reasoning_content", text_slice(&c->reasoning, c->r_sent, c->reasoning.n));
    json_t *ch = json_pack("{s:i, s:o, s:n, s:n}", "index", (int)i, "delta", delta, "logprobs", "finish_reason");
    json_array_append_new(json_object_get(chunk, "choices"), ch);
    write_chunk(r, chunk);
    json_decref(chunk);
    c->r_sent = c->reasoning.n;
}

/* usage, with completion_tokens_details.reasoning_tokens when the request
 * reasons. */
static json_t *usage_of(req_t *r, uint32_t completion) {
    json_t *u = sv_render_usage(r->n_prompt, completion, r->n_cached);
    if (u && r->reasons) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < r->n_choices; i++) n += r->ch[i].n_reasoning_tokens;
        json_object_set_new(u, "completion_tokens_details", json_pack("{s:i}", "reasoning_tokens", (int)n));
    }
    return u;
}

/* Tool calls of a finished choice (NULL: none), and where its content ends. */
static json_t *choice_calls(req_t *r, choice_t *c, size_t *content_len) {
    *content_len = c->text.n;
    if (c->finish == SV_FINISH_ABORT || c->finish == SV_FINISH_LENGTH) return NULL;
    if (r->api.c.calls_or_answer) {
        /* A call list, or the answer response_format describes. */
        json_t *calls = starts_array(&c->text) ? sv_tools_calls_from_array((const char *)c->text.p, c->text.n) : NULL;
        if (calls) *content_len = 0;
        return calls;
    }
    if (r->api.c.tool_calls) {
        json_t *calls = sv_tools_calls_from_array((const char *)c->text.p, c->text.n);
        if (calls) *content_len = 0;
        return calls;
    }
    if (r->api.c.tagged_calls)
        return sv_tools_calls_tagged((const char *)c->text.p, c->text.n, r->s->deps.tmpl->kind, r->api.tools,
                                     content_len);
    return NULL;
}

static const char *finish_name(req_t *r, sv_finish_reason f, bool calls) {
    if (f == SV_FINISH_ABORT && r->deadline_hit) return "length";
    return sv_render_finish(f, calls);
}

static void count_finish(req_t *r, const char *name) {
    int k = !strcmp(name, "stop") ? SV_METRIC_STOP
            : !strcmp(name, "length") ? SV_METRIC_LENGTH
            : !strcmp(name, "tool_calls") ? SV_METRIC_TOOL_CALLS
                                          : SV_METRIC_ABORT;
    r->s->m.success[k]++;
}

/* Where a choice's constrained calls start in its text, and their form:
 * the call array (tool_choice required or named), or the calls of an
 * "auto" answer after its trigger (tagged). False when the choice's text
 * is no constrained call. */
static bool call_region(const req_t *r, const choice_t *c, size_t *from, bool *array, bool *tagged) {
    *tagged = false;
    if (r->api.c.tagged_calls) {
        /* The <tool_call> blocks of the free text, wherever they are. */
        *from = 0;
        *array = false;
        *tagged = true;
        return true;
    }
    if (r->api.c.tool_calls || (r->api.c.calls_or_answer && starts_array(&c->text))) {
        *from = 0;
        *array = true;
        return true;
    }
    return false;
}

/* Room for n calls in choice c's streaming arrays (doubling); false when
 * out of memory, c keeping what it had. */
static bool reserve_calls(choice_t *c, size_t n) {
    if (n <= c->cap_calls) return true;
    size_t cap = c->cap_calls ? c->cap_calls : 8;
    while (cap < n) cap *= 2;
    if (cap > UINT32_MAX) return false;
    streamed_call_t *calls = realloc(c->calls, cap * sizeof *calls);
    if (!calls) return false;
    c->calls = calls; /* larger than cap_calls says until both have grown */
    sv_tools_scan_t *scan = realloc(c->scan, cap * sizeof *scan);
    if (!scan) return false;
    c->scan = scan;
    c->cap_calls = (uint32_t)cap;
    return true;
}

static size_t scan_calls(const req_t *r, const char *t, size_t len, bool array, bool tagged, choice_t *c) {
    return tagged ? sv_tools_scan_tagged(t, len, r->s->deps.tmpl->kind, c->scan, c->cap_calls)
                  : sv_tools_scan_calls(t, len, array, c->scan, c->cap_calls);
}

void sv_server_stream_calls(req_t *r, uint32_t i) {
    choice_t *c = &r->ch[i];
    size_t from;
    bool array, tagged;
    if (c->calls_failed || !call_region(r, c, &from, &array, &tagged) || c->text.n == from) return;
    const char *t = (const char *)c->text.p + from;
    size_t len = c->text.n - from;
    size_t n = scan_calls(r, t, len, array, tagged, c);
    if (n > c->cap_calls) {
        if (!reserve_calls(c, n)) {
            /* The calls cannot all be sent: stop the request rather than
             * send a partial list; the choice ends "abort"
             * (stream_finish_choice). */
            c->calls_failed = true;
            sv_server_cancel(r);
            return;
        }
        n = scan_calls(r, t, len, array, tagged, c);
    }
    const sv_tools_scan_t *sc = c->scan;
    json_t *deltas = json_array();
    for (size_t k = 0; k < n && deltas; k++) {
        streamed_call_t *call = &c->calls[k];
        json_t *d = NULL;
        if (k >= c->n_calls) {
            /* The call's header: index, id, type, name, and no arguments yet. */
            sv_tools_new_id(call->id);
            d = json_pack("{s:i, s:s, s:s, s:{s:s%, s:s}}", "index", (int)k, "id", call->id, "type", "function",
                          "function", "name", t + sc[k].name_off, sc[k].name_len, "arguments", "");
            c->n_calls = (uint32_t)k + 1;
            call->args_sent = 0;
            if (d) json_array_append_new(deltas, d);
        }
        if (sc[k].args_len > call->args_sent) {
            d = json_pack("{s:i, s:{s:s%}}", "index", (int)k, "function", "arguments",
                          t + sc[k].args_off + call->args_sent, sc[k].args_len - call->args_sent);
            call->args_sent = sc[k].args_len;
            if (d) json_array_append_new(deltas, d);
        }
    }
    if (deltas && json_array_size(deltas)) sv_server_stream_delta(r, i, c->sent, c->sent, deltas, NULL);
    json_decref(deltas);
}

static void stream_finish_choice(req_t *r, uint32_t i) {
    choice_t *c = &r->ch[i];
    size_t content_len;
    if (c->reasoning.n > c->r_sent) sv_server_stream_reasoning(r, i);
    if (c->n_calls || c->calls_failed) {
        /* The calls went out as they were generated: the rest of their
         * arguments, then the finish reason (tool_calls when they parse;
         * abort when they could not all be sent). */
        sv_server_stream_calls(r, i);
        json_t *calls = c->calls_failed ? NULL : choice_calls(r, c, &content_len);
        const char *fin =
            c->calls_failed ? sv_render_finish(SV_FINISH_ABORT, false) : finish_name(r, c->finish, calls != NULL);
        json_decref(calls);
        count_finish(r, fin);
        sv_server_stream_delta(r, i, c->sent, c->sent, NULL, fin);
        return;
    }
    json_t *calls = sv_server_is_chat(r) ? choice_calls(r, c, &content_len) : NULL;
    const char *fin = finish_name(r, c->finish, calls != NULL);
    count_finish(r, fin);
    if (calls) {
        /* Streamed calls: each with its index, id, type, name and whole
         * arguments (a client concatenates argument fragments; one is a
         * valid split). Any content before the calls goes first. */
        if (content_len > c->sent) sv_server_stream_delta(r, i, c->sent, content_len, NULL, NULL);
        size_t k;
        json_t *call;
        json_array_foreach(calls, k, call) json_object_set_new(call, "index", json_integer((json_int_t)k));
        c->sent = c->text.n;
        sv_server_stream_delta(r, i, c->text.n, c->text.n, calls, NULL);
        sv_server_stream_delta(r, i, c->text.n, c->text.n, NULL, fin);
        json_decref(calls);
        return;
    }
    if (c->text.n > c->sent) sv_server_stream_delta(r, i, c->sent, c->text.n, NULL, NULL);
    sv_server_stream_delta(r, i, c->text.n, c->text.n, NULL, fin);
}

void sv_server_finish_response(req_t *r) {
    srv_t *s = r->s;
    uint32_t completion = 0;
    for (uint32_t i = 0; i < r->n_choices; i++) completion += r->ch[i].n_generated;
    s->m.prompt_tokens += r->n_prompt;
    s->m.generation_tokens += completion;
    uint64_t now = sv_now_ns();
    sv_histogram_observe(r->batch ? &s->m.batch_e2e : &s->m.e2e, (double)(now - r->t0) / 1e9);
    if (!r->http) return;
    sv_server_detach_conn(r);
    if (r->api.stream) {
        sv_server_start_stream(r);
        for (uint32_t i = 0; i < r->n_choices; i++) stream_finish_choice(r, i);
        if (r->api.include_usage) {
            sv_render_head_t hd;
            head_of(r, &hd);
            json_t *chunk = sv_render_head(&hd, true);
            json_object_set_new(chunk, "usage", usage_of(r, completion));
            write_chunk(r, chunk);
            json_decref(chunk);
        }
        struct evbuffer *b = evbuffer_new();
        if (b) {
            evbuffer_add(b, "data: [DONE]\n\n", 14);
            evhttp_send_reply_chunk(r->http, b);
            evbuffer_free(b);
        }
        evhttp_send_reply_end(r->http);
        r->http = NULL;
        return;
    }
    sv_render_head_t hd;
    head_of(r, &hd);
    json_t *resp = sv_render_head(&hd, false);
    json_t *choices = json_object_get(resp, "choices");
    for (uint32_t i = 0; i < r->n_choices; i++) {
        choice_t *c = &r->ch[i];
        json_t *ch;
        if (sv_server_is_chat(r)) {
            size_t content_len;
            json_t *calls = choice_calls(r, c, &content_len);
            const char *fin = finish_name(r, c->finish, calls != NULL);
            count_finish(r, fin);
            json_t *msg = json_pack("{s:s, s:o, s:n}", "role", "assistant", "content",
                                    calls && content_len == 0 ? json_null()
                                                              : text_slice(&c->text, 0, content_len),
                                    "refusal");
            if (calls) json_object_set_new(msg, "tool_calls", calls);
            if (r->reasons) json_object_set_new(msg, "reasoning_content", text_slice(&c->reasoning, 0, c->reasoning.n));
            ch = json_pack("{s:i, s:o, s:o, s:s}", "index", (int)i, "message", msg, "logprobs",
                           r->api.logprobs ? json_pack("{s:O}", "content", c->lp) : json_null(), "finish_reason", fin);
            budget_mark(ch, c, fin);
        } else {
            const char *fin = finish_name(r, c->finish, false);
            count_finish(r, fin);
            ch = json_pack("{s:i, s:s%, s:O, s:s}", "index", (int)i, "text", c->text.n ? (const char *)c->text.p : "",
                           c->text.n, "logprobs", r->api.logprobs ? c->lp : json_null(), "finish_reason", fin);
            budget_mark(ch, c, fin);
        }
        json_array_append_new(choices, ch);
    }
    json_object_set_new(resp, "usage", usage_of(r, completion));
    sv_server_send_json(r->http, 200, resp, 0);
    json_decref(resp);
    r->http = NULL;
}

/* ---- the GET endpoints --------------------------------------------------------- */

void sv_server_models(srv_t *s, struct evhttp_request *http) {
    json_t *j = json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:i}]}", "object", "list", "data", "id", s->cfg.model_name,
                          "object", "model", "created", (json_int_t)s->started, "owned_by", "sieve", "max_model_len",
                          (int)s->cfg.max_ctx);
    sv_server_send_json(http, 200, j, 0);
    json_decref(j);
}

void sv_server_health(srv_t *s, struct evhttp_request *http) {
    bool alive = sv_engine_loop_alive(s->deps.loop);
    const char *status = !alive ? "engine stopped" : s->draining ? "draining" : "ok";
    json_t *j = json_pack("{s:s}", "status", status);
    sv_server_send_json(http, alive && !s->draining ? 200 : 503, j, 0);
    json_decref(j);
}

void sv_server_metrics(srv_t *s, struct evhttp_request *http) {
    sv_engine_loop_stats_t st;
    sv_engine_loop_stats(s->deps.loop, &st);
    sv_ccache_stats_t cs;
    sv_ccache_stats(s->ccache, &cs);
    sv_cpool_stats_t ps;
    sv_cpool_stats(s->cpool, &ps);
    uint64_t batches[SV_METRIC_N_BATCH_STATUS] = {0};
    sv_error_t berr;
    if (s->store) sv_store_batch_counts(s->store, sv_metric_batch_status, SV_METRIC_N_BATCH_STATUS, batches, &berr);
    size_t memo_bytes = 0;
    sv_dfa_cache_stats(NULL, NULL, &memo_bytes);
    sv_metrics_snapshot_t snap = {
        .running = st.engine.running - st.engine.running_batch,
        .waiting = st.engine.waiting - st.engine.waiting_batch + st.inbox,
        .batch_running = st.engine.running_batch,
        .batch_waiting = st.engine.waiting_batch,
        .kv_usage = st.kv_blocks ? (double)st.kv_blocks_used / st.kv_blocks : 0,
        .prefix_queries = st.engine.prefix_queries,
        .prefix_hits = st.prefix_hits,
        .preemptions = st.engine.preemptions,
        .batch_steps_interrupted = st.engine.interrupted_steps,
        .jump_forward_tokens = st.engine.forced,
        .ccache_hits = cs.hits,
        .ccache_misses = cs.misses,
        .ccache_bytes = (double)cs.bytes,
        .dfa_memo_bytes = (double)memo_bytes,
        .compiles_waiting = ps.waiting,
        .compiles_running = ps.running,
        .compile_memory_bytes = (double)ps.memory_in_use,
        .compiles_refused = ps.refused,
        .compiles_cancelled = ps.cancelled,
        .engine_faults = st.faults,
        .alive = sv_engine_loop_alive(s->deps.loop),
        .batch_lines_ok = atomic_load(&s->bw_lines_ok),
        .batch_lines_failed = atomic_load(&s->bw_lines_failed),
        .batch_validation_failed = atomic_load(&s->bw_validation_failed),
        .block_size = SV_LLAMA_KV_BLOCK,
        .num_blocks = (uint32_t)st.kv_blocks,
    };
    memcpy(snap.batches, batches, sizeof batches);
    sv_bytes_t out = {0};
    if (sv_metrics_format(&s->m, &snap, s->cfg.model_name, s->cfg.metrics_vllm, &out)) {
        sv_bytes_free(&out);
        sv_server_send_body(http, 500, "text/plain", "out of memory\n", 14, 0);
        return;
    }
    sv_server_send_body(http, 200, "text/plain; version=0.0.4; charset=utf-8", (const char *)out.p, out.n, 0);
    sv_bytes_free(&out);
}

