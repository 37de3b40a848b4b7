/* server_internal.h — what server.c (requests, threads, libevent) and
 * respond.c (what goes back to the client) share: the request and server
 * structs and the functions one calls in the other. Not a public header:
 * only src/server/ includes it. Everything here runs on the HTTP thread
 * except where a comment says otherwise. */
#ifndef SV_SERVER_INTERNAL_H
#define SV_SERVER_INTERNAL_H

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "src/api/api.h"
#include "src/api/reasoning.h"
#include "src/server/compile_pool.h"
#include "src/api/metrics.h"
#include "src/server/server.h"
#include "src/batch/store.h"
#include "src/api/tools.h"

typedef struct srv srv_t;
typedef struct req req_t;

/* One engine output, copied off the engine thread. */
typedef struct out_ev {
    struct out_ev *next;
    uint32_t index;
    uint32_t n_tokens;
    int32_t *tokens;     /* (n_tokens) */
    sv_logprobs_t *lps;  /* (n_tokens) or NULL */
    char *text;          /* (n_text) */
    size_t n_text;
    char *reasoning;     /* (n_reasoning) the reasoning's text delta, before text */
    size_t n_reasoning;
    uint32_t n_reasoning_tokens;
    sv_finish_reason finish;
    bool budget_stop;    /* STOP because the constraint's budget closed it at max_tokens */
    int32_t stop_index;
    bool request_done;
    uint32_t n_prompt, n_cached, n_generated;
    bool refused;
    sv_error_t refusal;
} out_ev_t;

/* One constrained call a stream has started sending (respond.c). */
typedef struct streamed_call {
    char id[30];        /* "call_" and 24 hex digits */
    size_t args_sent;   /* argument bytes sent */
} streamed_call_t;

typedef struct choice {
    sv_bytes_t text;    /* every byte of text so far (the answer's, with a reasoning) */
    size_t sent;        /* bytes of text streamed as content */
    sv_bytes_t reasoning; /* the reasoning's text (req.reasons) */
    size_t r_sent;      /* bytes of it streamed as reasoning_content */
    uint32_t n_reasoning_tokens;
    json_t *lp;         /* logprobs: all (non-streaming) or not yet sent (streaming) */
    size_t text_offset;
    uint32_t n_generated;
    sv_finish_reason finish;
    bool budget_stop;   /* its STOP came from the budget rule (max_tokens): "stop_reason": "max_tokens" */
    bool done, role_sent;
    /* Constrained calls streamed as they are generated (respond.c), any
     * number of them: both arrays grow as calls appear, and go with the
     * request (server.c req_free). */
    uint32_t n_calls;          /* calls whose header was sent */
    uint32_t cap_calls;        /* entries in calls and scan */
    streamed_call_t *calls;    /* (cap_calls) the first n_calls in use */
    sv_tools_scan_t *scan;     /* (cap_calls) the last scan of the text */
    bool calls_failed;         /* out of memory growing them: the request
                                  was cancelled, the choice ends "abort" */
} choice_t;

struct req {
    req_t *prev, *next; /* the server's live list */
    srv_t *s;
    struct evhttp_request *http; /* NULL once the reply is sent */
    struct evhttp_connection *conn;
    bool gone;                   /* the client went away */
    bool closecb_set;
    sv_api_request_t api;
    bool batch;                  /* X-Sieve-Priority: batch */
    sv_ids_t prompt;
    char id[48];
    int64_t created;
    uint64_t t0, t_first, t_last;

    bool compiling;
    uint64_t cjob;               /* the compile pool's job while compiling */
    sv_constraint_t *constraint; /* held while the engine may use it */
    bool submitted, engine_done, cancelled, deadline_hit;
    uint64_t eid;

    /* The handoff, guarded by mu. */
    pthread_mutex_t mu;
    out_ev_t *qh, *qt;
    bool c_ready;
    sv_constraint_t *c_result;
    bool c_hit;
    uint64_t c_us;
    sv_error_t c_err;
    struct event *wake, *deadline;

    bool reasons;                /* a chat request with a reasoning section (src/api/reasoning.h) */

    bool headers_sent;
    uint32_t n_choices, n_done;
    choice_t ch[SV_ENGINE_MAX_N];
    uint32_t n_prompt, n_cached;
};

struct srv {
    sv_server_config_t cfg;
    sv_server_deps_t deps;
    sv_api_limits_t lim;
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    sv_constraint_cache_t *ccache;
    bool own_ccache;        /* else borrowed (sv_server_hooks_t) */
    sv_store_t *store;      /* the Files API's (files.c), opened on first use */
    uint16_t port;          /* bound */
    /* The batch worker (batches.c): its thread, what stops it, the batch
     * it runs and whether that one is cancelled. */
    pthread_t bw_thread;
    bool bw_started;
    pthread_mutex_t bw_mu;
    pthread_cond_t bw_cv;
    bool bw_stop, bw_wake, bw_cancel;
    char bw_current[64];
    _Atomic uint64_t bw_lines_ok, bw_lines_failed; /* batch output lines written, for /metrics */
    _Atomic uint64_t bw_validation_failed;         /* answers the independent check refused */
    sv_cpool_t *cpool;
    sv_metrics_t m;
    req_t *live;
    uint32_t n_live;
    bool draining, drain_cancelled;
    uint64_t drain_deadline_ns;
    uint64_t idle_since_ns; /* draining: when the last request went (0: some are left) */
    struct event *sig_term, *sig_int, *probe, *drain_timer;
    struct event *shutdown; /* sv_server_shutdown */
    sv_reasoning_t rs;      /* cfg.reasoning_parser's constraint and end tag (held until the end) */
    const char *log_name;
    uint64_t rng;
    int64_t started;
};

/* ---- files.c ------------------------------------------------------------- */

/* /v1/files and below (authorized already). */
void sv_server_files(srv_t *s, struct evhttp_request *http, const char *path);
/* The HTTP thread's store, opened on first use; NULL (a 503 sent) when it cannot open. */
sv_store_t *sv_server_store(srv_t *s, struct evhttp_request *http);

/* ---- batches.c ----------------------------------------------------------- */

/* /v1/batches and below (authorized already). */
void sv_server_batches(srv_t *s, struct evhttp_request *http, const char *path, sv_store_t *st);
/* The worker thread: started once listening, told to stop at the drain,
 * joined before the engine stops. */
void sv_server_batches_start(srv_t *s);
void sv_server_batches_stop(srv_t *s);
void sv_server_batches_join(srv_t *s);

/* ---- respond.c ---------------------------------------------------------- */

void sv_server_send_body(struct evhttp_request *http, int status, const char *ctype, const char *body, size_t n,
                         int retry_after);
/* j may be NULL (out of memory): a 500 then. */
void sv_server_send_json(struct evhttp_request *http, int status, json_t *j, int retry_after);
/* Counts the error in the metrics. */
void sv_server_send_error(srv_t *s, struct evhttp_request *http, const sv_api_error_t *e);

bool sv_server_is_chat(const req_t *r);
/* Sends the 200 headers of an SSE stream (once). */
void sv_server_start_stream(req_t *r);
/* How far choice c's text may be streamed now (c->sent when none of what
 * is new): all of it, or up to where it may become a call. */
size_t sv_server_stream_to(const req_t *r, const choice_t *c);
/* One chunk for choice i: its delta content text[from..to) (the role with the
 * first chunk), tool_calls (borrowed, may be NULL), the logprobs not yet
 * sent, and finish (NULL: none). */
void sv_server_stream_delta(req_t *r, uint32_t i, size_t from, size_t to, json_t *tool_calls, const char *finish);
/* One chunk for choice i with the reasoning not yet sent (the role with the
 * first chunk). */
void sv_server_stream_reasoning(req_t *r, uint32_t i);
/* Streams what is new in a choice's constrained tool calls. */
void sv_server_stream_calls(req_t *r, uint32_t i);
/* Every choice has finished: the response (or the stream's end), usage,
 * metrics. r->http is NULL afterwards. */
void sv_server_finish_response(req_t *r);

void sv_server_models(srv_t *s, struct evhttp_request *http);
void sv_server_health(srv_t *s, struct evhttp_request *http);
void sv_server_metrics(srv_t *s, struct evhttp_request *http);

/* ---- server.c ------------------------------------------------------------ */

/* The reply is about to be sent: forget the connection's close callback. */
void sv_server_detach_conn(req_t *r);
/* Stops the request's engine run, if it is running and not cancelled yet;
 * its last output (finish "abort") still arrives. */
void sv_server_cancel(req_t *r);

#endif
