/* cmd_batch.c — `sieve batch`: a file of OpenAI batch request lines through
 * the model, each answer written durably, resumable after any stop.
 *
 * `sieve batch` is `sieve serve` with an input and an output: it takes
 * every serve option (src/cli/cmd_serve.c parses them), runs the server in
 * this process on a loopback port with a random API key, and sends it the
 * lines with src/batch/runner.h. So a line gets exactly what the same
 * request gets online: the same parsing, prompts, tools, constraint cache
 * (one compile per distinct constraint) and response body.
 *
 * Before anything runs, the whole input is checked (src/batch/batch_input.h),
 * each distinct constraint compiled into the cache the run then uses; any
 * bad line stops the batch with every bad line reported (exit 65).
 *
 * Output: one line per request, OpenAI's batch output shape, in the order
 * the answers come (match them by custom_id):
 *     {"id": "batch_req_...", "custom_id": "...",
 *      "response": {"status_code": 200, "request_id": "chatcmpl-...", "body": {...}},
 *      "error": null}
 * A request the server answered with an error has that status and the
 * error body; with --errors FILE those lines go there instead, as OpenAI's
 * error file. Each line is written and fdatasync'ed before it counts as
 * done, so a crash loses no finished line.
 *
 * --resume continues an output: the custom_ids it (and the errors file)
 * already hold are skipped, and a last line cut by a crash is dropped, so a
 * run stopped any way finishes with each line exactly once. Without it, an
 * output that is not empty is refused.
 *
 * SIGINT or SIGTERM: the requests in flight are cancelled (a resumed run
 * sends them again), the output is already durable, exit 130. A second
 * signal exits at once. */
#define _GNU_SOURCE
#include "cmd_batch.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/batch/batch_input.h"
#include "src/batch/output.h"
#include "src/batch/runner.h"
#include "util/clock.h"
#include "fsm/dfa.h"

#define BATCH_MAX_LINES 100000

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    (void)sig;
    if (g_stop) _exit(SV_EXIT_INTERRUPTED);
    g_stop = 1;
}

/* ---- constraints compile once, into the run's cache ------------------------ */

typedef struct {
    const sv_server_config_t *sc;
    const sv_server_deps_t *deps;
    sv_constraint_cache_t *cache;
} check_t;

static int check_constraint(void *ud, const sv_api_request_t *r, sv_api_error_t *e) {
    check_t *k = ud;
    return sv_server_check_constraint(k->sc, k->cache, k->deps->set, &r->c, e);
}

/* ---- output and progress ----------------------------------------------------- */

typedef struct {
    sv_batch_output_t out;
    const sv_batch_cli_t *o;
    bool tty;
    uint64_t last_line_ns;
    bool progress_shown;
} out_t;

static void fmt_eta(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 99 * 3600) {
        snprintf(buf, n, "--:--");
        return;
    }
    unsigned t = (unsigned)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%u:%02u", t / 60, t % 60);
}

static void on_progress(void *ud, const sv_batch_progress_t *p) {
    out_t *o = ud;
    if (o->o->quiet) return;
    uint64_t now = sv_now_ns();
    bool last = p->done == p->total && p->in_flight == 0;
    /* On a pipe, a line every 10 s (and the last); on a terminal, redrawn. */
    if (!o->tty && !last && now - o->last_line_ns < 10000000000ull) return;
    o->last_line_ns = now;
    double tps = p->elapsed_s > 0 ? (double)p->completion_tokens / p->elapsed_s : 0;
    double eta = p->done ? p->elapsed_s / (double)p->done * (double)(p->total - p->done) : -1;
    char etas[32];
    fmt_eta(eta, etas, sizeof etas);
    if (o->tty) {
        char bar[31];
        size_t fill = p->total ? (size_t)(30.0 * (double)p->done / (double)p->total) : 30;
        for (size_t i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r\033[K[%s] %zu/%zu  %.1f tok/s  ETA %s  errors %zu", bar, p->done, p->total, tps, etas,
                p->failed);
        o->progress_shown = true;
    } else {
        fprintf(stderr, "sieve batch: %zu/%zu done, %.1f tok/s, ETA %s, errors %zu\n", p->done, p->total, tps, etas,
                p->failed);
    }
    fflush(stderr);
}

/* ---- resume ------------------------------------------------------------------ */

/* ---- the server's thread ---------------------------------------------------- */

typedef struct {
    const sv_server_config_t *sc;
    const sv_server_deps_t *deps;
    sv_server_hooks_t hooks;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sv_server_t *srv;
    uint16_t port;
    bool ended;
    sv_status st;
    sv_error_t err;
} srv_thread_t;

static void srv_ready(void *ud, sv_server_t *s, uint16_t port) {
    srv_thread_t *t = ud;
    pthread_mutex_lock(&t->mu);
    t->srv = s;
    t->port = port;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void *srv_main(void *arg) {
    srv_thread_t *t = arg;
    sv_error_clear(&t->err);
    sv_status st = sv_server_run_hooked(t->sc, t->deps, &t->hooks, &t->err);
    pthread_mutex_lock(&t->mu);
    t->st = st;
    t->ended = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int sv_batch_main(const sv_batch_cli_t *o, sv_server_config_t *sc, sv_server_deps_t *deps, bool *loop_taken) {
    int rc = SV_EXIT_RUNTIME;
    sv_error_t err;
    sv_error_clear(&err);
    sv_constraint_cache_t *cache = NULL;
    sv_batch_input_t in = {0};
    bool *skip = NULL;
    out_t out = {.out = {.fd = -1, .err_fd = -1}, .o = o, .tty = isatty(2) == 1};
    *loop_taken = false;

    if (sv_ccache_create(sc->ccache_bytes, &cache, &err)) goto fail;
    sv_dfa_cache_configure(sc->dfa_memo_bytes);

    /* 1. The whole input, checked; each distinct constraint compiled once. */
    sv_api_limits_t lim;
    sv_server_api_limits(sc, deps->vocab_rows, &lim);
    check_t ck = {sc, deps, cache};
    sv_batch_input_config_t icfg = {.lim = &lim, .max_body_bytes = sc->max_body_bytes, .max_lines = BATCH_MAX_LINES,
                                    .check = check_constraint, .ud = &ck};
    uint64_t t0 = sv_now_ns();
    if (sv_batch_input_read(o->input, &icfg, &in, &err)) goto fail;
    if (in.n_errors) {
        fprintf(stderr, "sieve batch: %s: %zu bad line%s; nothing was run\n", o->input, in.n_errors,
                in.n_errors == 1 ? "" : "s");
        size_t i;
        json_t *e;
        json_array_foreach(in.errors, i, e) {
            if (i == 20) {
                fprintf(stderr, "  ... (%zu more)\n", in.n_errors - 20);
                break;
            }
            const char *param = json_string_value(json_object_get(e, "param"));
            fprintf(stderr, "  line %lld: %s%s%s%s: %s\n", (long long)json_integer_value(json_object_get(e, "line")),
                    json_string_value(json_object_get(e, "code")), param ? " (" : "", param ? param : "",
                    param ? ")" : "", json_string_value(json_object_get(e, "message")));
        }
        if (o->errors_json && json_dump_file(in.errors, o->errors_json, JSON_INDENT(1)))
            fprintf(stderr, "sieve batch: cannot write %s\n", o->errors_json);
        rc = SV_EXIT_DATA;
        goto done;
    }
    if (!in.n) {
        fprintf(stderr, "sieve batch: %s holds no request\n", o->input);
        rc = SV_EXIT_DATA;
        goto done;
    }
    if (in.model) {
        if (!o->name_given) sc->model_name = in.model; /* the file's model is the one served */
        else if (strcmp(in.model, sc->model_name) && !(sc->model_path && !strcmp(in.model, sc->model_path))) {
            fprintf(stderr, "sieve batch: the input asks for model \"%s\"; --served-model-name is \"%s\"\n", in.model,
                    sc->model_name);
            rc = SV_EXIT_DATA;
            goto done;
        }
    }
    if (!o->quiet)
        fprintf(stderr, "sieve batch: %zu requests checked in %.2f s\n", in.n, (double)(sv_now_ns() - t0) / 1e9);

    /* 2. The output: new, or resumed. */
    if (!(skip = calloc(in.n, sizeof *skip))) {
        sv_error_set(&err, SV_ERR_NOMEM, -1, "out of memory");
        goto fail;
    }
    size_t held = 0;
    struct stat sb;
    bool nonempty = stat(o->output, &sb) == 0 && sb.st_size > 0;
    bool err_nonempty = o->errors && stat(o->errors, &sb) == 0 && sb.st_size > 0;
    if ((nonempty || err_nonempty) && !o->resume) {
        fprintf(stderr, "sieve batch: %s is not empty; pass --resume to continue it, or remove it\n",
                nonempty ? o->output : o->errors);
        rc = SV_EXIT_USAGE;
        goto done;
    }
    if (o->resume && (sv_batch_output_done(o->output, &in, skip, &held, &err) ||
                      (o->errors && sv_batch_output_done(o->errors, &in, skip, &held, &err))))
        goto fail;
    if (o->resume && !o->quiet) fprintf(stderr, "sieve batch: resuming: %zu of %zu requests already done\n", held, in.n);
    if (sv_batch_output_open(&out.out, o->output, o->errors, &lim, &err)) goto fail;

    /* 3. The server, on loopback, with a key only this process knows. */
    uint64_t seed[2];
    if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed) {
        sv_error_set(&err, SV_ERR_IO, -1, "no random bytes for the server's key");
        goto fail;
    }
    char key[48];
    snprintf(key, sizeof key, "sk-batch-%016llx%016llx", (unsigned long long)seed[0], (unsigned long long)seed[1]);
    sc->api_key = key;
    sc->host = "127.0.0.1";
    sc->port = 0;
    srv_thread_t t = {.sc = sc, .deps = deps,
                      .hooks = {.ready = srv_ready, .no_signals = true, .ccache = cache, .log_name = "sieve batch",
                                .no_batch_worker = true}};
    t.hooks.ud = &t;
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    pthread_t th;
    *loop_taken = true; /* the server stops the engine loop on every path */
    if (pthread_create(&th, NULL, srv_main, &t)) {
        *loop_taken = false;
        sv_error_set(&err, SV_ERR_NOMEM, -1, "cannot start the server's thread");
        goto fail;
    }
    pthread_mutex_lock(&t.mu);
    while (!t.srv && !t.ended) pthread_cond_wait(&t.cv, &t.mu);
    pthread_mutex_unlock(&t.mu);

    /* 4. The lines. */
    sv_batch_progress_t prog = {0};
    sv_status st = SV_OK;
    sv_error_t rerr;
    sv_error_clear(&rerr);
    if (t.srv) {
        struct sigaction sa = {0};
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sv_batch_runner_config_t rc_cfg = {.host = "127.0.0.1", .port = t.port, .api_key = key,
                                           .concurrency = o->concurrency, .on_result = sv_batch_output_result,
                                           .on_progress = on_progress, .ud = &out, .stop = &g_stop};
        /* on_result gets the output (the first member), on_progress all of out */
        st = sv_batch_run(&in, skip, &rc_cfg, &prog, &rerr);
        if (out.progress_shown) fputc('\n', stderr);
        sv_server_shutdown(t.srv);
    }
    pthread_join(th, NULL);
    pthread_mutex_destroy(&t.mu);
    pthread_cond_destroy(&t.cv);
    if (!t.srv || t.st) {
        err = t.err;
        goto fail;
    }
    size_t left = prog.total - prog.done;
    if (!o->quiet || st)
        fprintf(stderr,
                "sieve batch: %zu of %zu requests done this run (%zu with an error status), %llu prompt and %llu "
                "completion tokens in %.1f s (%.1f tok/s)\n",
                prog.done, prog.total, prog.failed, (unsigned long long)prog.prompt_tokens,
                (unsigned long long)prog.completion_tokens, prog.elapsed_s,
                prog.elapsed_s > 0 ? (double)prog.completion_tokens / prog.elapsed_s : 0.0);
    sv_ccache_stats_t cs;
    sv_ccache_stats(cache, &cs);
    if (!o->quiet)
        fprintf(stderr,
                "sieve batch: constraints: %llu compiled, %llu found compiled; constrained answers checked again: %zu "
                "valid, %zu failed, %zu unchecked\n",
                (unsigned long long)cs.misses, (unsigned long long)cs.hits, out.out.checked_valid,
                out.out.checked_failed, out.out.checked_unchecked);
    if (out.out.checked_failed)
        fprintf(stderr, "sieve batch: %zu answers did not match their constraint: a bug in sieve; they are error "
                        "lines (code validation_failed)\n", out.out.checked_failed);
    if (st == SV_ERR_CANCELLED) {
        fprintf(stderr, "sieve batch: interrupted; %zu requests left: run again with --resume to finish\n", left);
        rc = SV_EXIT_INTERRUPTED;
    } else if (st) {
        fprintf(stderr, "sieve batch: %s; %zu requests left: run again with --resume to finish\n", rerr.message, left);
        rc = SV_EXIT_RUNTIME;
    } else {
        rc = SV_EXIT_OK;
    }
    goto done;
fail:
    fprintf(stderr, "sieve batch: %s\n", err.message[0] ? err.message : sv_status_name(err.code));
    rc = SV_EXIT_RUNTIME;
done:
    sv_batch_output_close(&out.out);
    free(skip);
    sv_batch_input_free(&in);
    sv_ccache_destroy(cache);
    return rc;
}
