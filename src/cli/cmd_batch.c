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

#include "../batch/batch_input.h"
#include "../batch/runner.h"
#include "../server/schema_check.h"
#include "../util/clock.h"
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
    sv_schema_opts_t so;
    uint32_t ws_cap;
    sv_server_compile_opts(k->sc, r->c.kind, &so, &ws_cap);
    sv_constraint_t *c = NULL;
    bool hit;
    sv_error_t err;
    sv_error_clear(&err);
    if (sv_ccache_get(k->cache, r->c.kind, r->c.text, r->c.len, &so, k->deps->set, ws_cap, &c, &hit, &err)) {
        sv_api_constraint_error(&r->c, &err, e);
        return -1;
    }
    sv_constraint_release(k->cache, c);
    return 0;
}

/* ---- output ------------------------------------------------------------------ */

typedef struct {
    int fd;           /* the output */
    int err_fd;       /* --errors, or -1: errors go to fd */
    const sv_api_limits_t *lim;
    size_t checked_valid, checked_unchecked, checked_failed; /* constrained answers */
    uint64_t rng;
    const sv_batch_cli_t *o;
    bool tty;
    uint64_t last_line_ns;
    bool progress_shown;
} out_t;

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
 * constraint describes ([{"name", "arguments"}]). */
static sv_check_outcome check_choice(const sv_api_constraint_t *c, const json_t *schema, json_t *choice,
                                     sv_check_result_t *res) {
    json_t *msg = json_object_get(choice, "message");
    json_t *calls = json_object_get(msg, "tool_calls");
    json_t *text = msg ? json_object_get(msg, "content") : json_object_get(choice, "text");
    memset(res, 0, sizeof *res);
    if (c->kind == SV_CONSTRAINT_REGEX) {
        if (!json_is_string(text)) return SV_CHECK_INVALID;
        return sv_regex_check(c->text, c->len, json_string_value(text), json_string_length(text));
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
static bool check_answer(out_t *o, const sv_batch_line_t *line, json_t *b, char *why, size_t n) {
    sv_api_request_t r;
    sv_api_error_t e;
    if (sv_api_parse(line->kind, line->body, line->body_len, o->lim, &r, &e)) return true; /* checked at the start */
    bool ok = true;
    if (r.c.on) {
        json_t *schema = r.c.kind == SV_CONSTRAINT_SCHEMA ? json_loadb(r.c.text, r.c.len, JSON_ALLOW_NUL, NULL) : NULL;
        size_t i;
        json_t *ch;
        bool unchecked = false;
        json_array_foreach(json_object_get(b, "choices"), i, ch) {
            if (r.c.kind == SV_CONSTRAINT_SCHEMA && !schema) {
                unchecked = true;
                break;
            }
            sv_check_result_t res;
            sv_check_outcome out = check_choice(&r.c, schema, ch, &res);
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

static bool on_result(void *ud, const sv_batch_line_t *line, int status, const char *body, size_t len) {
    out_t *o = ud;
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
    bool ok = write_all((status != 200 || !valid) && o->err_fd >= 0 ? o->err_fd : o->fd, text, n + 1);
    free(text);
    return ok;
}

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

static const sv_batch_input_t *g_cmp_in; /* qsort has no context argument */
static int cmp_custom_id(const void *a, const void *b) {
    return strcmp(g_cmp_in->lines[*(const size_t *)a].custom_id, g_cmp_in->lines[*(const size_t *)b].custom_id);
}

/* Marks the lines whose custom_id path already holds; drops a last line
 * without its newline (cut by a crash). *held counts the lines found. */
static sv_status read_done(const char *path, const sv_batch_input_t *in, bool *skip, size_t *held, sv_error_t *err) {
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
    out_t out = {.fd = -1, .err_fd = -1, .o = o, .tty = isatty(2) == 1};
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
    if (o->resume && (read_done(o->output, &in, skip, &held, &err) ||
                      (o->errors && read_done(o->errors, &in, skip, &held, &err))))
        goto fail;
    if (o->resume && !o->quiet) fprintf(stderr, "sieve batch: resuming: %zu of %zu requests already done\n", held, in.n);
    out.fd = open(o->output, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out.fd < 0) {
        sv_error_set(&err, SV_ERR_IO, -1, "cannot open %s: %s", o->output, strerror(errno));
        goto fail;
    }
    if (o->errors && (out.err_fd = open(o->errors, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
        sv_error_set(&err, SV_ERR_IO, -1, "cannot open %s: %s", o->errors, strerror(errno));
        goto fail;
    }
    uint64_t seed[2] = {0, 0};
    if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed[0] = sv_now_ns() ^ (uint64_t)getpid() << 32;
    out.rng = seed[0] | 1;
    out.lim = &lim;

    /* 3. The server, on loopback, with a key only this process knows. */
    char key[40];
    snprintf(key, sizeof key, "sk-batch-%016llx%08llx", (unsigned long long)next_rand(&seed[1]) ^ seed[0],
             (unsigned long long)(next_rand(&out.rng) >> 32));
    sc->api_key = key;
    sc->host = "127.0.0.1";
    sc->port = 0;
    srv_thread_t t = {.sc = sc, .deps = deps,
                      .hooks = {.ready = srv_ready, .no_signals = true, .ccache = cache, .log_name = "sieve batch"}};
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
                                           .concurrency = o->concurrency, .on_result = on_result,
                                           .on_progress = on_progress, .ud = &out, .stop = &g_stop};
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
                (unsigned long long)cs.misses, (unsigned long long)cs.hits, out.checked_valid, out.checked_failed,
                out.checked_unchecked);
    if (out.checked_failed)
        fprintf(stderr, "sieve batch: %zu answers did not match their constraint: a bug in sieve; they are error "
                        "lines (code validation_failed)\n", out.checked_failed);
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
    if (out.fd >= 0) close(out.fd);
    if (out.err_fd >= 0) close(out.err_fd);
    free(skip);
    sv_batch_input_free(&in);
    sv_ccache_destroy(cache);
    return rc;
}
