/* test_engine_loop — the engine thread (src/engine/engine_loop.h) on the
 * tiny GGUF model of test_engine (tiny_model.h, the same 37-token
 * vocabulary: 'a'..'z', '0'..'5', "key", ";key", "=", ";", EOG).
 *
 * The reference for every output is the same request run alone,
 * synchronously, through sv_engine_* (test_engine shows that equals the
 * sequential generate loop).
 *
 * 1. Concurrency: 6 threads submit 48 mixed requests (greedy and seeded,
 *    stop ids, constrained) at random moments; each request's callback
 *    stream equals its reference, token for token; ids are what submit
 *    returned.
 * 2. Cancels from another thread at random times (and right after submit,
 *    twice, for unknown ids, and from inside a callback): every request
 *    ends exactly once, a cancelled one with a prefix of its reference, a
 *    finished one with all of it; the pool is back to all free.
 * 3. With the engine thread held inside a callback: the inbox counts what
 *    waits, cancels there end with ABORT and no tokens, the inbox fills up
 *    (SV_ERR_CAPACITY), the engine's own refusals (its queue full) come
 *    through the callback, drain times out and then refuses submits, and
 *    after the release drain finishes.
 * 4. Refusals: bad requests are SV_ERR_ARG at submit with no callback; a
 *    prompt too long, an id outside the vocabulary and a constraint that
 *    cannot fit are refused through the callback with the engine's error.
 * 5. Stop with requests in flight: each ends exactly once.
 * 6. Idle: no steps and (almost) no CPU time while nothing is asked; a
 *    later submit still wakes the thread.
 * 7. A step that fails (a model with NaN logits): every request ends once
 *    with ABORT (or, still in the inbox, a refusal with the step's error),
 *    the loop is dead and refuses submits with that error. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsm/regex.h"
#include "src/backend/cpu.h"
#include "src/engine/engine_loop.h"
#include "test.h"
#include "tiny_model.h"

enum { ECTX = 256, MAXREQ = 48, EOG = 36 };

/* ---- the vocabulary (as test_engine) ---- */

static const char *tok_text[VOCAB];
static uint32_t tok_len[VOCAB];
static uint8_t tok_kind[VOCAB];

static void vocab_init(void) {
    static char singles[32][2];
    for (int i = 0; i < 32; i++) {
        singles[i][0] = (char)(i < 26 ? 'a' + i : '0' + (i - 26));
        tok_text[i] = singles[i];
    }
    tok_text[32] = "key";
    tok_text[33] = ";key";
    tok_text[34] = "=";
    tok_text[35] = ";";
    tok_text[36] = "";
    for (int i = 0; i < VOCAB; i++) {
        tok_len[i] = (uint32_t)strlen(tok_text[i]);
        tok_kind[i] = i == EOG ? SV_TOKKIND_EOG : SV_TOKKIND_NORMAL;
    }
}

static int greedy_encode(void *ctx, const uint8_t *s, size_t n, int32_t *ids, int cap) {
    (void)ctx;
    int k = 0;
    for (size_t i = 0; i < n;) {
        int best = -1;
        for (int t = 0; t < EOG; t++)
            if (tok_len[t] <= n - i && (best < 0 || tok_len[t] > tok_len[best]) &&
                !memcmp(s + i, tok_text[t], tok_len[t]))
                best = t;
        if (best < 0 || k == cap) return -1;
        ids[k++] = best;
        i += tok_len[best];
    }
    return k;
}

static sv_llama_t *model;
static sv_token_set_t *tset;
static sv_token_index_t *rx_index;
static sv_tokenizer_iface_t iface = {NULL, greedy_encode, NULL};

/* ---- requests, results ---- */

typedef struct treq {
    int32_t prompt[ECTX + 8];
    uint32_t n_prompt;
    sv_sample_params_t sp;
    bool constrained;
    uint32_t max_tokens;
    int32_t stop[1];
    uint32_t n_stop;
} treq_t;

/* Written by the engine thread (the callback); read after drain/stop. */
typedef struct result {
    int32_t toks[ECTX];
    uint32_t n;
    sv_finish_reason finish;
    int calls, finals, after_final;
    bool bad;                  /* n_generated or n_prompt inconsistent */
    bool refused;
    sv_error_t refusal;
    uint64_t cb_id;            /* out->id of the calls (0 when they disagree) */
    uint64_t id;               /* what submit returned (the submitting thread) */
    bool cancel_in_callback;   /* the callback cancels its own request on its first call */
    sv_engine_loop_t *loop;
    _Atomic int progressed;    /* calls so far, for other threads */
} result_t;

static uint64_t trng = 0x9e3779b97f4a7c15ull;
static int32_t rnd(int32_t n) {
    trng ^= trng << 13;
    trng ^= trng >> 7;
    trng ^= trng << 17;
    return (int32_t)((trng >> 33) % (uint64_t)n);
}

static sv_engine_config_t engine_config(void) {
    sv_engine_config_t c;
    sv_engine_config_default(&c);
    c.kv_blocks = 256;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 48;
    c.max_ctx = ECTX;
    c.max_queue = 64;
    c.prefetch_threads = 0;
    return c;
}

static sv_engine_t *make_engine(void) {
    sv_engine_config_t c = engine_config();
    sv_engine_vocab_t v = {tset, &iface, NULL};
    sv_engine_t *e = NULL;
    sv_error_t err;
    CHECK(sv_engine_create(model, &v, &c, &e, &err) == SV_OK, "create: %s", err.message);
    return e;
}

static sv_engine_loop_t *make_loop(void) {
    sv_engine_t *e = make_engine();
    sv_engine_loop_t *l = NULL;
    sv_error_t err;
    if (e) CHECK(sv_engine_loop_start(e, &l, &err) == SV_OK, "loop: %s", err.message);
    return l;
}

static sv_engine_request_t as_request(const treq_t *q) {
    sv_engine_request_t r = {.prompt = q->prompt, .n_prompt = q->n_prompt, .sampling = q->sp,
                             .constraint = q->constrained ? rx_index : NULL, .max_tokens = q->max_tokens,
                             .stop_ids = q->stop, .n_stop_ids = q->n_stop};
    return r;
}

static void make_requests(treq_t *q, int n, uint32_t min_out, uint32_t spread) {
    memset(q, 0, sizeof *q * (size_t)n);
    for (int i = 0; i < n; i++) {
        treq_t *r = &q[i];
        r->n_prompt = 1 + (uint32_t)rnd(60);
        for (uint32_t j = 0; j < r->n_prompt; j++) r->prompt[j] = rnd(EOG);
        if (i % 3 == 1 && i > 1) /* a shared prefix with request 0 */
            memcpy(r->prompt, q[0].prompt, (q[0].n_prompt < r->n_prompt ? q[0].n_prompt : r->n_prompt) * 4);
        r->sp = sv_sample_params_default();
        r->sp.temperature = i % 2 ? 1.0f : 0.0f;
        r->sp.seed = 77 + (uint64_t)i;
        r->max_tokens = min_out + (uint32_t)rnd((int32_t)spread);
        if (i % 4 == 3) {
            r->stop[0] = rnd(EOG);
            r->n_stop = 1;
        }
        r->constrained = i % 6 == 5;
        if (r->constrained) r->max_tokens = 40;
    }
}

/* The reference: each request alone through a synchronous engine. */
static void reference(const treq_t *q, int n, result_t *ref) {
    sv_engine_t *e = make_engine();
    memset(ref, 0, sizeof *ref * (size_t)n);
    for (int i = 0; i < n && e; i++) {
        sv_engine_request_t r = as_request(&q[i]);
        uint64_t id;
        sv_error_t err;
        CHECK(sv_engine_submit(e, &r, &id, &err) == SV_OK, "reference submit %d: %s", i, err.message);
        while (sv_engine_has_work(e)) {
            if (sv_engine_step(e, &err)) {
                CHECK(0, "reference step: %s", err.message);
                break;
            }
            sv_engine_output_t o;
            while (sv_engine_next_output(e, &o)) {
                if (ref[i].n + o.n_tokens <= ECTX) memcpy(ref[i].toks + ref[i].n, o.tokens, o.n_tokens * 4);
                ref[i].n += o.n_tokens;
                ref[i].finish = o.finish;
            }
        }
    }
    sv_engine_destroy(e);
}

static void on_output(void *ud, const sv_engine_output_t *o, const sv_error_t *refusal) {
    result_t *r = ud;
    r->calls++;
    if (r->finals) r->after_final++;
    if (r->calls == 1)
        r->cb_id = o->id;
    else if (r->cb_id != o->id)
        r->cb_id = 0;
    if (refusal) {
        r->refused = true;
        r->refusal = *refusal;
        if (o->finish != SV_FINISH_ABORT || !o->request_done) r->bad = true;
    }
    if (r->n + o->n_tokens > ECTX || r->n + o->n_tokens != o->n_generated)
        r->bad = true;
    else {
        if (o->n_tokens) memcpy(r->toks + r->n, o->tokens, o->n_tokens * sizeof(int32_t));
        r->n += o->n_tokens;
    }
    r->finish = o->finish;
    if (o->request_done) r->finals++;
    else if (o->finish != SV_FINISH_NONE) r->bad = true; /* one choice: its finish is the end */
    if (r->cancel_in_callback && r->calls == 1) sv_engine_loop_cancel(r->loop, o->id);
    atomic_fetch_add(&r->progressed, 1);
}

static bool same(const result_t *a, const result_t *b) {
    return a->n == b->n && a->finish == b->finish && !memcmp(a->toks, b->toks, a->n * sizeof(int32_t));
}

static bool is_prefix(const result_t *part, const result_t *whole) {
    return part->n <= whole->n && !memcmp(part->toks, whole->toks, part->n * sizeof(int32_t));
}

static void sleep_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

/* ---- 1. concurrent submits ---- */

typedef struct submitter {
    sv_engine_loop_t *l;
    const treq_t *q;
    result_t *res;
    int first, count;
    uint64_t seed;
    int failures;
    _Atomic uint64_t *published; /* ids for a canceller, or NULL */
    bool cancel_some_now;        /* cancel every 5th request right after submitting it */
} submitter_t;

static void *submit_thread(void *arg) {
    submitter_t *s = arg;
    for (int i = s->first; i < s->first + s->count; i++) {
        s->seed = s->seed * 6364136223846793005ull + 1442695040888963407ull;
        sleep_us((long)((s->seed >> 40) % 3000));
        sv_engine_request_t r = as_request(&s->q[i]);
        sv_error_t err;
        uint64_t id = 0;
        if (sv_engine_loop_submit(s->l, &r, on_output, &s->res[i], &id, &err)) {
            s->failures++;
            continue;
        }
        s->res[i].id = id;
        if (s->published) atomic_store(&s->published[i], id);
        if (s->cancel_some_now && i % 5 == 0) sv_engine_loop_cancel(s->l, id);
    }
    return NULL;
}

static void test_concurrent(void) {
    static treq_t q[MAXREQ];
    static result_t ref[MAXREQ], got[MAXREQ];
    make_requests(q, MAXREQ, 5, 40);
    reference(q, MAXREQ, ref);
    memset(got, 0, sizeof got);
    sv_engine_loop_t *l = make_loop();
    if (!l) return;
    /* Three refusals first: the loop's ids and the engine's part ways. */
    static treq_t too_long;
    static result_t refused[3];
    memset(refused, 0, sizeof refused);
    too_long = q[0];
    too_long.n_prompt = ECTX;
    for (int i = 0; i < 3; i++) {
        sv_engine_request_t r = as_request(&too_long);
        uint64_t id;
        sv_error_t err;
        CHECK(sv_engine_loop_submit(l, &r, on_output, &refused[i], &id, &err) == SV_OK, "submit: %s", err.message);
    }
    submitter_t s[6];
    pthread_t th[6];
    for (int t = 0; t < 6; t++) {
        s[t] = (submitter_t){l, q, got, t * 8, 8, 1000 + (uint64_t)t, 0, NULL, false};
        pthread_create(&th[t], NULL, submit_thread, &s[t]);
    }
    int failures = 0;
    for (int t = 0; t < 6; t++) {
        pthread_join(th[t], NULL);
        failures += s[t].failures;
    }
    CHECK(failures == 0, "every submit accepted (%d failed)", failures);
    CHECK(sv_engine_loop_drain(l, 120000), "drained");
    sv_engine_loop_stats_t st;
    sv_engine_loop_stats(l, &st);
    int equal = 0, once = 0, ids_ok = 0;
    for (int i = 0; i < MAXREQ; i++) {
        equal += same(&ref[i], &got[i]) && !got[i].bad && !got[i].refused;
        once += got[i].finals == 1 && got[i].after_final == 0;
        ids_ok += got[i].cb_id == got[i].id && got[i].id != 0;
        for (int j = 0; j < i; j++)
            if (got[i].id == got[j].id) ids_ok--;
        if (!same(&ref[i], &got[i]))
            fprintf(stderr, "request %d: %u tokens finish %d vs reference %u finish %d\n", i, got[i].n, got[i].finish,
                    ref[i].n, ref[i].finish);
    }
    printf("concurrent: 48 requests from 6 threads, %llu steps, max running %u, %llu forced\n",
           (unsigned long long)st.engine.steps, st.engine.max_running, (unsigned long long)st.engine.forced);
    CHECK(equal == MAXREQ, "%d of %d requests equal their synchronous run", equal, MAXREQ);
    CHECK(once == MAXREQ, "%d of %d end exactly once", once, MAXREQ);
    CHECK(ids_ok == MAXREQ, "callbacks report the ids submit returned, all distinct (%d)", ids_ok);
    CHECK(st.engine.max_running > 1, "requests ran together (%u)", st.engine.max_running);
    CHECK(refused[0].refused && refused[1].refused && refused[2].refused, "the long prompts were refused");
    CHECK(sv_engine_loop_alive(l), "alive");
    uint64_t id;
    sv_error_t err;
    sv_engine_request_t r = as_request(&q[0]);
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[0], &id, &err) == SV_ERR_CAPACITY, "after drain: refused");
    sv_engine_loop_stop(l);
}

/* ---- 2. cancels at random times ---- */

typedef struct canceller {
    sv_engine_loop_t *l;
    _Atomic uint64_t *ids;
    int n;
    _Atomic bool *stop;
    int cancels;
} canceller_t;

static void *cancel_thread(void *arg) {
    canceller_t *c = arg;
    uint64_t seed = 99;
    while (!atomic_load(c->stop)) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        sleep_us((long)((seed >> 40) % 4000));
        int i = (int)((seed >> 20) % (uint64_t)c->n);
        uint64_t id = atomic_load(&c->ids[i]);
        if (id && i % 3 != 0) { /* a third are left alone */
            sv_engine_loop_cancel(c->l, id);
            if (seed & 1) sv_engine_loop_cancel(c->l, id); /* twice */
            c->cancels++;
        }
        sv_engine_loop_cancel(c->l, 1000000 + (seed >> 50)); /* unknown */
    }
    return NULL;
}

static void test_cancel(void) {
    static treq_t q[MAXREQ];
    static result_t ref[MAXREQ], got[MAXREQ];
    static _Atomic uint64_t ids[MAXREQ];
    make_requests(q, MAXREQ, 20, 60);
    reference(q, MAXREQ, ref);
    memset(got, 0, sizeof got);
    for (int i = 0; i < MAXREQ; i++) atomic_store(&ids[i], 0);
    sv_engine_loop_t *l = make_loop();
    if (!l) return;
    sv_engine_loop_stats_t st0;
    sv_engine_loop_stats(l, &st0);
    got[7].cancel_in_callback = got[13].cancel_in_callback = true;
    got[7].loop = got[13].loop = l;
    _Atomic bool stop = false;
    canceller_t c = {l, ids, MAXREQ, &stop, 0};
    pthread_t ct, th[3];
    pthread_create(&ct, NULL, cancel_thread, &c);
    submitter_t s[3];
    for (int t = 0; t < 3; t++) {
        s[t] = (submitter_t){l, q, got, t * 16, 16, 2000 + (uint64_t)t, 0, ids, true};
        pthread_create(&th[t], NULL, submit_thread, &s[t]);
    }
    for (int t = 0; t < 3; t++) pthread_join(th[t], NULL);
    sleep_us(50000);
    atomic_store(&stop, true);
    pthread_join(ct, NULL);
    CHECK(sv_engine_loop_drain(l, 120000), "drained");
    int once = 0, aborted = 0, finished = 0, consistent = 0, empty_aborts = 0;
    for (int i = 0; i < MAXREQ; i++) {
        once += got[i].finals == 1 && got[i].after_final == 0 && !got[i].refused && !got[i].bad;
        if (got[i].finish == SV_FINISH_ABORT) {
            aborted++;
            empty_aborts += got[i].n == 0;
            consistent += is_prefix(&got[i], &ref[i]);
        } else {
            finished++;
            consistent += same(&got[i], &ref[i]);
        }
    }
    /* The pool: the last stats are published just after the last callback. */
    sv_engine_loop_stats_t st;
    for (int w = 0; w < 200; w++) {
        sv_engine_loop_stats(l, &st);
        if (st.kv_blocks_used == 0 && st.engine.running + st.engine.waiting == 0) break;
        sleep_us(10000);
    }
    printf("cancel: %d cancels sent, %d aborted (%d before any token), %d finished\n", c.cancels, aborted,
           empty_aborts, finished);
    CHECK(once == MAXREQ, "%d of %d requests end exactly once", once, MAXREQ);
    CHECK(consistent == MAXREQ, "%d of %d: an aborted output is a prefix of the reference, a finished one all of it",
          consistent, MAXREQ);
    CHECK(aborted >= 5 && finished >= 5, "both outcomes occur (%d aborted, %d finished)", aborted, finished);
    CHECK(got[7].finish == SV_FINISH_ABORT && got[13].finish == SV_FINISH_ABORT,
          "a cancel from inside a callback ends the request");
    CHECK(st.kv_blocks_used == 0 && st.kv_blocks == st0.kv_blocks && st0.kv_blocks_used == 0,
          "every block back (%u of %u used)", st.kv_blocks_used, st.kv_blocks);
    sv_engine_loop_stop(l);
}

/* ---- 3. the engine thread held in a callback ---- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_open, gate_entered;

static void gate_output(void *ud, const sv_engine_output_t *o, const sv_error_t *refusal) {
    on_output(ud, o, refusal);
    pthread_mutex_lock(&gate_mu);
    gate_entered = true;
    pthread_cond_broadcast(&gate_cv);
    while (!gate_open) pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
}

static void test_held(void) {
    enum { K = 10 };
    static treq_t q[K + 1];
    static result_t ref[K + 1], got[K + 1];
    make_requests(q, K + 1, 5, 10);
    for (int i = 0; i <= K; i++) q[i].constrained = false, q[i].max_tokens = 5 + (uint32_t)i;
    reference(q, K + 1, ref);
    memset(got, 0, sizeof got);
    sv_engine_loop_t *l = make_loop();
    if (!l) return;
    sv_error_t err;
    sv_engine_request_t r = as_request(&q[K]);
    CHECK(sv_engine_loop_submit(l, &r, gate_output, &got[K], &got[K].id, &err) == SV_OK, "gate: %s", err.message);
    pthread_mutex_lock(&gate_mu);
    while (!gate_entered) pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    for (int i = 0; i < K; i++) {
        r = as_request(&q[i]);
        CHECK(sv_engine_loop_submit(l, &r, on_output, &got[i], &got[i].id, &err) == SV_OK, "submit: %s", err.message);
    }
    sv_engine_loop_stats_t st;
    sv_engine_loop_stats(l, &st);
    CHECK(st.inbox == K, "the inbox holds %u", st.inbox);
    for (int i = 0; i < K; i += 3) sv_engine_loop_cancel(l, got[i].id); /* 0, 3, 6, 9 */
    /* Fill the inbox: small requests the engine's queue (64) mostly refuses. */
    static result_t fill[SV_ENGINE_LOOP_MAX_INBOX];
    memset(fill, 0, sizeof fill);
    treq_t small = q[1];
    small.max_tokens = 1;
    r = as_request(&small);
    int accepted = 0;
    sv_status last = SV_OK;
    for (int i = 0; i < SV_ENGINE_LOOP_MAX_INBOX; i++) {
        uint64_t id;
        last = sv_engine_loop_submit(l, &r, on_output, &fill[accepted], &id, &err);
        if (last) break;
        accepted++;
    }
    CHECK(last == SV_ERR_CAPACITY && accepted == SV_ENGINE_LOOP_MAX_INBOX - K,
          "the inbox fills up at %d (%d accepted, then %s)", SV_ENGINE_LOOP_MAX_INBOX, accepted, sv_status_name(last));
    CHECK(!sv_engine_loop_drain(l, 20), "drain times out while the thread is held");
    CHECK(sv_engine_loop_submit(l, &r, on_output, &fill[0], &got[0].id, &err) == SV_ERR_CAPACITY, "draining refuses");
    pthread_mutex_lock(&gate_mu);
    gate_open = true;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    CHECK(sv_engine_loop_drain(l, 120000), "drained after the release");
    int ok = 0;
    for (int i = 0; i <= K; i++) {
        bool one = got[i].finals == 1 && got[i].after_final == 0 && !got[i].bad && !got[i].refused;
        if (i < K && i % 3 == 0)
            ok += one && got[i].finish == SV_FINISH_ABORT && got[i].n == 0 && got[i].calls == 1;
        else
            ok += one && same(&got[i], &ref[i]);
    }
    CHECK(ok == K + 1, "%d of %d: cancelled in the inbox -> one ABORT, no tokens; the rest equal the reference", ok,
          K + 1);
    int refused = 0, done = 0, good = 0;
    for (int i = 0; i < accepted; i++) {
        good += fill[i].finals == 1 && fill[i].after_final == 0 && !fill[i].bad;
        if (fill[i].refused) refused += fill[i].refusal.code == SV_ERR_CAPACITY && fill[i].n == 0;
        else done += fill[i].finish == SV_FINISH_LENGTH || fill[i].finish == SV_FINISH_STOP;
    }
    printf("held: %d filled the inbox: %d refused by the engine (queue full), %d ran\n", accepted, refused, done);
    CHECK(good == accepted && refused + done == accepted, "every fill request ended once (%d)", good);
    CHECK(refused > 0 && done >= 50, "the engine's queue refused some through the callback (%d) and ran %d", refused,
          done);
    sv_engine_loop_stop(l);
}

/* ---- 4. refusals ---- */

static void test_refusals(void) {
    sv_engine_loop_t *l = make_loop();
    if (!l) return;
    static treq_t q;
    static result_t got[4];
    memset(got, 0, sizeof got);
    memset(&q, 0, sizeof q);
    q.sp = sv_sample_params_default();
    q.n_prompt = 4;
    sv_engine_request_t r = as_request(&q);
    sv_error_t err;
    uint64_t id;
    CHECK(sv_engine_loop_submit(l, &r, NULL, &got[3], &id, &err) == SV_ERR_ARG, "no callback");
    r.n_prompt = 0;
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[3], &id, &err) == SV_ERR_ARG, "empty prompt");
    r.n_prompt = 4;
    r.n = SV_ENGINE_MAX_N + 1;
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[3], &id, &err) == SV_ERR_ARG, "n too large");
    r.n = 1;
    const char *stops[SV_ENGINE_MAX_STOP + 1] = {"ab", ""};
    r.stop = stops;
    r.n_stop = 2;
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[3], &id, &err) == SV_ERR_ARG, "an empty stop string");
    for (int i = 0; i <= SV_ENGINE_MAX_STOP; i++) stops[i] = "x";
    r.n_stop = SV_ENGINE_MAX_STOP + 1;
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[3], &id, &err) == SV_ERR_ARG, "too many stop strings");
    r.n_stop = 0;
    r.stop = NULL;
    r.sampling.n_logit_bias = 3;
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[3], &id, &err) == SV_ERR_ARG, "logit bias without entries");
    r.sampling.n_logit_bias = 0;

    q.n_prompt = ECTX; /* as long as the context */
    r = as_request(&q);
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[0], &id, &err) == SV_OK, "submit: %s", err.message);
    q.n_prompt = 4;
    q.prompt[2] = VOCAB; /* outside the vocabulary */
    r = as_request(&q);
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[1], &id, &err) == SV_OK, "submit: %s", err.message);
    q.prompt[2] = 0;
    q.constrained = true;
    q.max_tokens = 6; /* the pattern needs 7 */
    r = as_request(&q);
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[2], &id, &err) == SV_OK, "submit: %s", err.message);
    CHECK(sv_engine_loop_drain(l, 60000), "drained");
    sv_status want[3] = {SV_ERR_BUDGET, SV_ERR_ARG, SV_ERR_BUDGET};
    for (int i = 0; i < 3; i++)
        CHECK(got[i].refused && got[i].refusal.code == want[i] && got[i].calls == 1 && got[i].finals == 1 &&
                  got[i].finish == SV_FINISH_ABORT,
              "refusal %d through the callback: %s (%s)", i, sv_status_name(got[i].refusal.code),
              got[i].refusal.message);
    CHECK(got[3].calls == 0, "no callback for a request refused at submit");
    sv_engine_loop_stop(l);
}

/* ---- 5. stop with requests in flight ---- */

static void test_stop(void) {
    static treq_t q[20];
    static result_t got[20];
    make_requests(q, 20, 150, 50);
    for (int i = 0; i < 20; i++) q[i].constrained = false, q[i].n_stop = 0;
    memset(got, 0, sizeof got);
    sv_engine_loop_t *l = make_loop();
    if (!l) return;
    submitter_t s[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        s[t] = (submitter_t){l, q, got, t * 10, 10, 3000 + (uint64_t)t, 0, NULL, false};
        pthread_create(&th[t], NULL, submit_thread, &s[t]);
    }
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int w = 0; w < 500 && atomic_load(&got[0].progressed) < 3; w++) sleep_us(2000);
    sv_engine_loop_stop(l);
    int once = 0, aborted = 0;
    for (int i = 0; i < 20; i++) {
        once += got[i].finals == 1 && got[i].after_final == 0 && !got[i].bad;
        aborted += got[i].finish == SV_FINISH_ABORT;
    }
    printf("stop: %d of 20 aborted by stop\n", aborted);
    CHECK(once == 20, "%d of 20 end exactly once", once);
    CHECK(aborted > 0, "stop aborted the requests in flight (%d)", aborted);
}

/* ---- 6. idle ---- */

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void test_idle(void) {
    static treq_t q[2];
    static result_t ref[2], got[2];
    make_requests(q, 2, 10, 5);
    q[0].constrained = q[1].constrained = false;
    reference(q, 2, ref);
    memset(got, 0, sizeof got);
    sv_engine_loop_t *l = make_loop();
    if (!l) return;
    sv_error_t err;
    sv_engine_request_t r = as_request(&q[0]);
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[0], &got[0].id, &err) == SV_OK, "submit");
    sv_engine_loop_stats_t a, b;
    for (int w = 0; w < 5000; w++) { /* until it has finished */
        sv_engine_loop_stats(l, &a);
        if (atomic_load(&got[0].progressed) && a.inbox + a.engine.running + a.engine.waiting == 0) break;
        sleep_us(1000);
    }
    sleep_us(20000);
    sv_engine_loop_stats(l, &a);
    double c0 = cpu_seconds();
    sleep_us(400000);
    double used = cpu_seconds() - c0;
    sv_engine_loop_stats(l, &b);
    printf("idle: %.1f ms of CPU in 400 ms, %llu steps\n", used * 1e3, (unsigned long long)(b.engine.steps - a.engine.steps));
    CHECK(used < 0.02, "no busy wait (%.1f ms of CPU while idle)", used * 1e3);
    CHECK(b.engine.steps == a.engine.steps && b.engine.running + b.engine.waiting == 0, "no steps while idle");
    r = as_request(&q[1]); /* the sleeping thread still wakes */
    CHECK(sv_engine_loop_submit(l, &r, on_output, &got[1], &got[1].id, &err) == SV_OK, "submit");
    CHECK(sv_engine_loop_drain(l, 60000), "drained");
    CHECK(same(&got[0], &ref[0]) && same(&got[1], &ref[1]), "both equal their reference");
    sv_engine_loop_stop(l);
    sv_engine_loop_stop(NULL);
}

/* ---- 7. a step that fails ---- */

/* The tiny model with token 5's output row NaN: every logits row has a NaN
 * at 5, so the first sampling step fails (the sampler refuses a NaN logit)
 * while prefill steps succeed. The tensors' data close the file in the
 * order tiny_model.h writes them, each padded to 32 bytes. */
static sv_llama_t *load_nan_model(const char *dir, sv_backend_t *be) {
    char path[256];
    snprintf(path, sizeof path, "%s/nan.gguf", dir);
    model_spec_t sp = {.arch = "llama", .ctx = ECTX};
    if (!write_model(path, &sp)) return NULL;
    uint64_t data = 0;
    for (int i = 0; i < n_t; i++) data += (ts[i].ne[0] * ts[i].ne[1] * 4 + 31) / 32 * 32;
    FILE *f = fopen(path, "r+b");
    bool ok = f && fseek(f, 0, SEEK_END) == 0;
    long size = ok ? ftell(f) : -1;
    /* output.weight is the third tensor, after token_embd and output_norm */
    long off = size - (long)data + (long)((DIM * VOCAB * 4 + 31) / 32 * 32 + (DIM * 4 + 31) / 32 * 32) +
               5L * DIM * 4;
    float nan[DIM];
    for (int i = 0; i < DIM; i++) nan[i] = NAN;
    ok = ok && size > 0 && fseek(f, off, SEEK_SET) == 0 && fwrite(nan, sizeof nan, 1, f) == 1;
    if (f) ok = fclose(f) == 0 && ok;
    sv_llama_t *m = NULL;
    sv_error_t err;
    if (ok) CHECK(sv_llama_load(path, be, &m, &err) == SV_OK, "nan model: %s", err.message);
    unlink(path);
    return m;
}

typedef struct flood {
    sv_engine_loop_t *l;
    treq_t *q;
    result_t *res;
    int cap, n;
    sv_status last;
    sv_error_t err;
} flood_t;

/* Submits until refused: some requests are still in the inbox when the step
 * fails. */
static void *flood_thread(void *arg) {
    flood_t *f = arg;
    for (f->n = 0; f->n < f->cap; f->n++) {
        sv_engine_request_t r = as_request(&f->q[f->n % 12]);
        if ((f->last = sv_engine_loop_submit(f->l, &r, on_output, &f->res[f->n], &f->res[f->n].id, &f->err))) break;
        if (f->n % 16 == 15) sleep_us(200);
    }
    return NULL;
}

static void test_dead(sv_llama_t *bad) {
    sv_engine_config_t c = engine_config();
    c.max_queue = 256;
    sv_engine_vocab_t v = {tset, &iface, NULL};
    sv_engine_t *e = NULL;
    sv_engine_loop_t *l = NULL;
    sv_error_t err;
    CHECK(sv_engine_create(bad, &v, &c, &e, &err) == SV_OK, "create: %s", err.message);
    if (!e || sv_engine_loop_start(e, &l, &err)) {
        CHECK(0, "start: %s", err.message);
        return;
    }
    static treq_t q[12];
    static result_t got[2000];
    make_requests(q, 12, 5, 10);
    for (int i = 0; i < 12; i++) q[i].constrained = false;
    memset(got, 0, sizeof got);
    flood_t f = {l, q, got, 2000, 0, SV_OK, {0}};
    pthread_t th;
    pthread_create(&th, NULL, flood_thread, &f);
    pthread_join(th, NULL);
    CHECK(f.last == SV_ERR_IO && strstr(f.err.message, "NaN"), "submits are refused with the step's error (%s: %s)",
          sv_status_name(f.last), f.err.message);
    CHECK(!sv_engine_loop_alive(l), "a failed step marks the loop dead");
    CHECK(sv_engine_loop_drain(l, 60000), "nothing left");
    int once = 0, aborted = 0, refused = 0, in_inbox = 0;
    for (int i = 0; i < f.n; i++) {
        once += got[i].finals == 1 && got[i].after_final == 0 && got[i].n == 0 && got[i].finish == SV_FINISH_ABORT;
        if (got[i].refused) {
            in_inbox += strstr(got[i].refusal.message, "NaN") != NULL;
            refused += strstr(got[i].refusal.message, "NaN") != NULL || got[i].refusal.code == SV_ERR_CAPACITY;
        } else {
            aborted++;
        }
    }
    printf("dead: %d submitted, %d aborted in the engine, %d refused (%d in the inbox at the failure)\n", f.n,
           aborted, refused, in_inbox);
    CHECK(f.n > 0 && once == f.n, "%d of %d end once with ABORT and no tokens", once, f.n);
    CHECK(aborted > 0 && aborted + refused == f.n, "aborted in the engine, or refused");
    sv_engine_loop_stop(l);
}

int main(void) {
    char dir[] = "/tmp/sv_test_engine_loop_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    model_spec_t sp = {.arch = "llama", .ctx = ECTX};
    sv_error_t err;
    sv_backend_t *be = NULL;
    sv_cpu_config_t cc = {.n_threads = 1};
    CHECK(sv_cpu_backend_create(&cc, &be, &err) == SV_OK, "backend: %s", err.message);
    if (be) model = load_tiny(dir, &sp, be, &err);
    CHECK(model != NULL, "model: %s", err.message);
    rmdir(dir);
    vocab_init();
    const uint8_t *bytes[VOCAB];
    for (int i = 0; i < VOCAB; i++) bytes[i] = (const uint8_t *)tok_text[i];
    CHECK(sv_token_set_create(VOCAB, VOCAB, bytes, tok_len, tok_kind, &tset, &err) == SV_OK, "set: %s", err.message);
    static const char pat[] = "(key=[0-5]{1,3};){2,4}";
    sv_dfa_t *dfa = NULL;
    CHECK(sv_regex_compile(pat, strlen(pat), NULL, &dfa, &err) == SV_OK, "regex: %s", err.message);
    if (dfa && tset && sv_token_index_create(dfa, tset, NULL, &rx_index, &err)) {
        CHECK(0, "index: %s", err.message);
        sv_dfa_destroy(dfa);
    }
    if (model && rx_index) {
        test_refusals();
        test_concurrent();
        test_cancel();
        test_held();
        test_stop();
        test_idle();
        char dir2[] = "/tmp/sv_test_engine_loop_XXXXXX";
        sv_llama_t *bad = mkdtemp(dir2) ? load_nan_model(dir2, be) : NULL;
        rmdir(dir2);
        if (bad) test_dead(bad);
        sv_llama_destroy(bad);
    }
    sv_token_index_destroy(rx_index);
    sv_token_set_destroy(tset);
    sv_llama_destroy(model);
    sv_backend_destroy(be);
    return test_summary("test_engine_loop: concurrent submits, random cancels, inbox, refusals, drain, stop, idle");
}
