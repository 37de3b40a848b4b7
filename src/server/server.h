/* server.h — the OpenAI-compatible HTTP server on libevent (`sieve serve`).
 *
 * Threads (docs/architecture.md, "Threads and ownership"): one libevent thread runs
 * evhttp and everything per request except compilation and decoding; a
 * compile pool (compile_pool.h) compiles constraints through the shared
 * compiled-constraint cache; the engine thread (engine_loop.h) decodes.
 *
 * One request: the body is read (at most max_body_bytes: a larger one is a
 * 413), authenticated, parsed and validated (src/api/api.h), rendered (src/api/prompt.h) and
 * encoded on the HTTP thread. A constraint goes to the compile pool; its
 * result comes back to the HTTP thread, which submits to the engine. Every
 * error up to the engine's first answer, a constraint that does not compile
 * or an engine refusal included, is an OpenAI-shaped error with its status:
 * a streaming response sends its 200 headers only with the first output.
 *
 * The handoff: each request has a mutex-guarded queue and a libevent event
 * (created on the server's base, made thread-safe with
 * evthread_use_pthreads). The engine callback (on the engine thread) and the
 * compile callback (on a pool thread) copy their result into the queue and
 * call event_active while holding the queue's mutex; the HTTP thread's
 * handler pops the queue under the same mutex. A request is freed on the
 * HTTP thread once the engine has sent its last output (after which it
 * never calls back), no compilation is pending, and the response is sent
 * or the client gone; because the callbacks signal under the mutex, the
 * HTTP thread cannot free the request between a callback's push and its
 * event_active.
 *
 * Disconnects: libevent reports a closed connection for streams (a write
 * fails); while a request produces nothing to write, a periodic probe
 * (a non-blocking MSG_PEEK read on the socket) notices a client that has
 * closed. Either way the engine request is cancelled and its KV blocks
 * return at once.
 *
 * SIGTERM / SIGINT: the listening socket closes, new requests on open
 * connections get 503, running ones finish until drain_timeout_s, then the
 * rest are cancelled and the loop ends; the engine loop is stopped last. */
#ifndef SV_SERVER_SERVER_H
#define SV_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsm/schema.h"
#include "src/chat/chat.h"
#include "src/api/api.h"
#include "src/engine/engine_loop.h"
#include "src/constraint/tokens.h"

typedef struct sv_server_config {
    const char *host;          /* default 127.0.0.1 */
    uint16_t port;             /* default 8000; 0: any free port (printed) */
    const char *api_key;       /* NULL: no authentication */
    const char *model_name;    /* the served model name (/v1/models, "model" in responses) */
    const char *model_path;    /* also accepted as a request's "model" */
    size_t max_body_bytes;     /* default 8 MiB */
    uint32_t compile_threads;  /* default 2 */
    uint32_t compile_queue;    /* constraints waiting to compile before 429 (default 64) */
    size_t compile_memory;     /* bytes for all compiles in flight together (default
                                  1 GiB); past it: 429 */
    size_t compile_memory_each; /* one compile's memory budget (default 256 MiB; at most
                                  compile_memory); past it: 400, type "budget" */
    uint32_t compile_timeout_ms; /* one compile's time budget (default 10000) */
    uint32_t compile_max_states; /* one compile's DFA state budget (0: the default, 200000) */
    size_t ccache_bytes;       /* compiled-constraint cache budget (default 512 MiB) */
    size_t dfa_memo_bytes;     /* the compiler's process-wide memo of sub-automata
                                  (fsm/dfa_cache.c; default 64 MiB, 0: off) */
    sv_ws_mode ws;             /* whitespace of JSON outputs (default canonical) */
    bool unknown_formats;      /* unknown "format" values are annotations */
    uint32_t any_deep_levels;  /* free-form nesting beyond depth 3 (schema.h; default 3, 0 = off) */
    bool any_calls;            /* constraints composed from parts (schema.h any_calls; default true) */
    sv_key_order key_order;    /* object keys in schema order (default) or any order (schema.h) */
    bool discriminator_annotation; /* OpenAPI's discriminator ignored (schema.h; default: required) */
    bool metrics_vllm;         /* /metrics also under vLLM's names (--metrics-compat vllm) */
    uint32_t max_ctx;          /* tokens per request, prompt + output (the engine's) */
    uint32_t max_queue;        /* waiting requests before 429 (the engine's) */
    uint32_t max_n;            /* choices per request (default SV_ENGINE_MAX_N) */
    size_t max_constraint_bytes; /* default 1 MiB */
    double request_timeout_s;  /* 0: none; else a request running longer is cancelled */
    double drain_timeout_s;    /* SIGTERM: how long running requests may finish (default 30) */
    const char *data_dir;      /* uploaded files (src/batch/store.h; default "./sieve-data",
                                  made on the first Files API request) */
    size_t max_file_bytes;     /* one upload (default 100 MiB) */
    int reasoning_parser;      /* sv_reasoning_parser (src/api/reasoning.h); 0: none (default) */
    uint32_t max_reasoning_tokens; /* a chat request's reasoning budget when it names none
                                  (UINT32_MAX, the default: only what max_tokens leaves) */
} sv_server_config_t;

void sv_server_config_default(sv_server_config_t *c);

typedef struct sv_server_deps {
    sv_engine_loop_t *loop;        /* taken: stopped by sv_server_run before it returns */
    sv_tokens_t *tok;              /* borrowed, the HTTP thread's own (encoding is single-threaded) */
    const sv_token_set_t *set;     /* borrowed: the token set the engine's constraints use */
    uint32_t vocab_rows;           /* logits row length (logit_bias, prompt ids) */
    const sv_chat_template_t *tmpl;/* NULL: chat requests get 400 with tmpl_error */
    const char *tmpl_error;
} sv_server_deps_t;

/* Binds, serves until SIGTERM/SIGINT (then drains), stops the engine loop.
 * ready (may be NULL) is called once listening, with the bound port.
 * SV_ERR_IO when the address cannot be bound; the loop is stopped on every
 * path. */
sv_status sv_server_run(const sv_server_config_t *cfg, const sv_server_deps_t *deps, void (*ready)(uint16_t port),
                        sv_error_t *err);

/* The server inside another program (`sieve batch`: src/cli/cmd_batch.c),
 * which sends it requests over loopback and stops it when done. */
typedef struct srv sv_server_t;
typedef struct sv_server_hooks {
    void (*ready)(void *ud, sv_server_t *s, uint16_t port); /* once listening; may be NULL */
    void *ud;
    bool no_signals;               /* SIGINT and SIGTERM are the caller's: it stops the
                                      server with sv_server_shutdown */
    sv_constraint_cache_t *ccache; /* borrowed, NULL: the server's own (cfg->ccache_bytes) */
    const char *log_name;          /* prefix of the server's messages (default "sieve serve") */
    bool no_batch_worker;          /* no /v1/batches worker (`sieve batch` runs its own) */
} sv_server_hooks_t;
sv_status sv_server_run_hooked(const sv_server_config_t *cfg, const sv_server_deps_t *deps,
                               const sv_server_hooks_t *hooks, sv_error_t *err);
/* From any thread, once ready has been called: stop accepting connections
 * and drain, as on SIGTERM; sv_server_run_hooked returns when the requests
 * in flight have finished (or the drain timeout has passed). */
void sv_server_shutdown(sv_server_t *s);

/* What requests are checked against and how their constraints compile
 * under cfg: the same for the server and for a caller that checks requests
 * ahead of it (a batch's input). */
void sv_server_api_limits(const sv_server_config_t *cfg, uint32_t vocab_rows, sv_api_limits_t *lim);
void sv_server_compile_opts(const sv_server_config_t *cfg, sv_schema_opts_t *so);
/* Whether request constraint c compiles under cfg (into cache, where the
 * run then finds it; tokens: the model's token set): 0, or -1 with e as the
 * API reports the error. A batch checks its lines with it. */
int sv_server_check_constraint(const sv_server_config_t *cfg, sv_constraint_cache_t *cache,
                               const sv_token_set_t *tokens, const sv_api_constraint_t *c, sv_api_error_t *e);

#endif
