/* test_engine — the scheduler (issue 6) on a tiny GGUF model (tiny_model.h)
 * with a hand-made 37-token vocabulary ('a'..'z', '0'..'5', "key", ";key",
 * "=", ";", EOG).
 *
 * 1. Batch invariance: 24 mixed requests (prompt lengths 1..100, shared
 *    prefixes, greedy and seeded temperature 1, stop ids, 4 constrained)
 *    run together give, token for token, what each gives alone through the
 *    same engine.
 * 2. The same with a pool so small that requests are preempted (the counter
 *    says so), with and without the prefix cache.
 * 3. Prefix cache off gives the same outputs; with it, the second of two
 *    requests with a 64-token shared prefix computes only its 10 new tokens.
 * 4. Cancelling waiting and running requests returns every block.
 * 5. A regex constraint: output the pattern accepts, finish stop, with
 *    jump-forward and its one-token rollback (";" + forced "key=" re-encodes
 *    as ";key" "="); a max_tokens equal to the constraint's minimum still
 *    finishes complete, one less is refused at submit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsm/regex.h"
#include "src/backend/cpu.h"
#include "src/engine/engine.h"
#include "test.h"
#include "tiny_model.h"

enum { ECTX = 256, NREQ = 24, MAXOUT = 64, EOG = 36 };

/* ---- the vocabulary ---- */

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

/* Longest match first. */
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

/* ---- requests and runs ---- */

typedef struct treq {
    int32_t prompt[128];
    uint32_t n_prompt;
    sv_sample_params_t sp;
    bool constrained;
    uint32_t max_tokens;
    int32_t stop[2];
    uint32_t n_stop;
} treq_t;

typedef struct result {
    int32_t toks[ECTX];
    uint32_t n;
    sv_finish_reason finish;
    bool budget_stop;
    uint32_t n_cached;
    int n_outputs;
    bool bad; /* output stream inconsistent */
} result_t;

static sv_llama_t *model;
static sv_token_set_t *tset;
static sv_token_index_t *rx_index;
static sv_tokenizer_iface_t iface = {NULL, greedy_encode, NULL};
static uint64_t trng = 0x9e3779b97f4a7c15ull;

static int32_t rnd(int32_t n) {
    trng ^= trng << 13;
    trng ^= trng >> 7;
    trng ^= trng << 17;
    return (int32_t)((trng >> 33) % (uint64_t)n);
}

static sv_engine_t *make_engine(uint32_t blocks, uint32_t seqs, uint32_t batch, bool prefix) {
    sv_engine_config_t c;
    sv_engine_config_default(&c);
    c.kv_blocks = blocks;
    c.max_num_seqs = seqs;
    c.max_num_batched_tokens = batch;
    c.max_ctx = ECTX;
    c.max_queue = 64;
    c.prefix_cache = prefix;
    sv_engine_vocab_t v = {tset, &iface};
    sv_engine_t *e = NULL;
    sv_error_t err;
    CHECK(sv_engine_create(model, &v, &c, &e, &err) == SV_OK, "create: %s", err.message);
    return e;
}

static sv_status submit(sv_engine_t *e, const treq_t *q, uint64_t *id, sv_error_t *err) {
    sv_engine_request_t r = {.prompt = q->prompt, .n_prompt = q->n_prompt, .sampling = q->sp,
                             .constraint = q->constrained ? rx_index : NULL, .max_tokens = q->max_tokens,
                             .stop_ids = q->stop, .n_stop_ids = q->n_stop};
    return sv_engine_submit(e, &r, id, err);
}

/* Collects every queued output into res (ids[i] is request i's id). */
static void drain(sv_engine_t *e, const uint64_t *ids, int n, result_t *res) {
    sv_engine_output_t o;
    while (sv_engine_next_output(e, &o)) {
        int i = 0;
        while (i < n && ids[i] != o.id) i++;
        if (i == n) {
            CHECK(0, "output for unknown id %llu", (unsigned long long)o.id);
            continue;
        }
        result_t *r = &res[i];
        if (r->finish != SV_FINISH_NONE || r->n + o.n_tokens > ECTX || r->n + o.n_tokens != o.n_generated)
            r->bad = true;
        else {
            memcpy(r->toks + r->n, o.tokens, o.n_tokens * sizeof(int32_t));
            r->n += o.n_tokens;
        }
        r->finish = o.finish;
        r->budget_stop = o.budget_stop;
        r->n_cached = o.n_cached;
        r->n_outputs++;
    }
}

static void run_to_end(sv_engine_t *e, const uint64_t *ids, int n, result_t *res) {
    sv_error_t err;
    for (int guard = 0; sv_engine_has_work(e) && guard < 100000; guard++) {
        sv_status st = sv_engine_step(e, &err);
        CHECK(st == SV_OK, "step: %s", err.message);
        if (st) break;
        drain(e, ids, n, res);
        CHECK(sv_kv_pool_check(sv_engine_pool(e), &err) == SV_OK, "pool: %s", err.message);
    }
    drain(e, ids, n, res);
}

static void run_together(sv_engine_t *e, const treq_t *q, int n, result_t *res) {
    uint64_t ids[NREQ];
    sv_error_t err;
    memset(res, 0, sizeof *res * (size_t)n);
    for (int i = 0; i < n; i++)
        CHECK(submit(e, &q[i], &ids[i], &err) == SV_OK, "submit %d: %s", i, err.message);
    run_to_end(e, ids, n, res);
}

static void run_alone(sv_engine_t *e, const treq_t *q, int n, result_t *res) {
    memset(res, 0, sizeof *res * (size_t)n);
    for (int i = 0; i < n; i++) {
        uint64_t id;
        sv_error_t err;
        CHECK(submit(e, &q[i], &id, &err) == SV_OK, "submit %d: %s", i, err.message);
        run_to_end(e, &id, 1, &res[i]);
    }
}

static bool same(const result_t *a, const result_t *b) {
    return a->n == b->n && a->finish == b->finish && !memcmp(a->toks, b->toks, a->n * sizeof(int32_t));
}

static void compare(const char *what, const result_t *ref, const result_t *got, int n) {
    int ok = 0;
    for (int i = 0; i < n; i++) {
        bool s = same(&ref[i], &got[i]) && !got[i].bad && got[i].finish != SV_FINISH_NONE;
        if (s) ok++;
        else
            fprintf(stderr, "%s: request %d: %u tokens (finish %d) vs %u alone (finish %d)\n", what, i, got[i].n,
                    got[i].finish, ref[i].n, ref[i].finish);
    }
    CHECK(ok == n, "%s: %d of %d requests equal their run alone", what, ok, n);
}

/* The pattern (key=[0-5]{1,3};){2,4}, checked by hand. */
static bool pattern_ok(const int32_t *ids, uint32_t n) {
    char s[1024];
    size_t len = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= EOG || len + tok_len[ids[i]] >= sizeof s) return false;
        memcpy(s + len, tok_text[ids[i]], tok_len[ids[i]]);
        len += tok_len[ids[i]];
    }
    size_t p = 0;
    int reps = 0;
    while (p < len) {
        if (len - p < 4 || memcmp(s + p, "key=", 4)) return false;
        p += 4;
        int d = 0;
        while (p < len && s[p] >= '0' && s[p] <= '5') d++, p++;
        if (d < 1 || d > 3 || p == len || s[p] != ';') return false;
        p++;
        reps++;
    }
    return reps >= 2 && reps <= 4;
}

/* Runs ids[0..k) at positions *p.. on s; the last row's logits. */
static bool feed(sv_llama_state_t *s, const int32_t *ids, uint32_t k, int32_t *p, float *logits, sv_error_t *err) {
    int32_t pos[ECTX];
    for (uint32_t i = 0; i < k; i++) pos[i] = *p + (int32_t)i;
    *p += (int32_t)k;
    return sv_llama_forward(model, s, ids, pos, (int32_t)k, SV_LLAMA_LOGITS_LAST, logits, err) == SV_OK;
}

/* The sequential reference: cmd_generate.c's loop on a private
 * sv_llama_state_t, one forward per step, jump-forward with its rollback
 * rewriting positions. Stop ids end unconstrained requests only; a
 * constrained request out of budget in an accepting state is a stop (the
 * engine's finish rule; cmd_generate prints "length"). */
static void reference(const treq_t *q, result_t *res) {
    memset(res, 0, sizeof *res);
    sv_error_t err;
    sv_llama_state_t *s = NULL;
    sv_sampler_t *smp = NULL;
    sv_matcher_t *m = NULL;
    static float logits[VOCAB];
    uint32_t budget = ECTX - q->n_prompt;
    if (q->max_tokens && q->max_tokens < budget) budget = q->max_tokens;
    bool ok = sv_llama_state_create(model, ECTX, 64, &s, &err) == SV_OK &&
              sv_sampler_create(VOCAB, &q->sp, &smp, &err) == SV_OK &&
              sv_sampler_add_context(smp, q->prompt, q->n_prompt, &err) == SV_OK &&
              (!q->constrained || sv_matcher_create(rx_index, &iface, budget, &m, &err) == SV_OK);
    int32_t p = 0;
    ok = ok && feed(s, q->prompt, q->n_prompt, &p, logits, &err);
    res->finish = SV_FINISH_LENGTH;
    int32_t forced[64];
    while (ok && res->n < budget) {
        if (m) {
            if (sv_matcher_is_finished(m)) {
                res->finish = SV_FINISH_STOP;
                break;
            }
            uint32_t nf = 0, rb = 0;
            ok = sv_matcher_forced(m, forced, 64, &nf, &rb, &err) == SV_OK;
            if (ok && nf > 0 && rb <= res->n) {
                if (rb) {
                    ok = sv_matcher_rollback(m, rb, &err) == SV_OK;
                    for (uint32_t i = 0; i < rb; i++) ok = ok && sv_sampler_unaccept(smp, res->toks[--res->n], &err) == SV_OK;
                    p -= (int32_t)rb;
                }
                for (uint32_t i = 0; i < nf && ok; i++) {
                    ok = sv_matcher_accept(m, forced[i]) && sv_sampler_accept(smp, forced[i], &err) == SV_OK;
                    res->toks[res->n++] = forced[i];
                }
                ok = ok && feed(s, forced, nf, &p, logits, &err);
                continue;
            }
        }
        const uint32_t *mask = NULL;
        if (m) ok = sv_matcher_mask(m, &mask, &err) == SV_OK;
        int32_t id = -1;
        ok = ok && sv_sampler_sample(smp, logits, mask, &id, NULL, &err) == SV_OK;
        if (!ok) break;
        if (id == EOG) {
            if (m) sv_matcher_accept(m, id);
            res->finish = SV_FINISH_STOP;
            break;
        }
        if (!m && q->n_stop && q->stop[0] == id) {
            res->finish = SV_FINISH_STOP;
            break;
        }
        ok = (!m || sv_matcher_accept(m, id)) && sv_sampler_accept(smp, id, &err) == SV_OK;
        res->toks[res->n++] = id;
        if (m && sv_matcher_is_finished(m)) {
            res->finish = SV_FINISH_STOP;
            break;
        }
        if (res->n >= budget) break;
        ok = feed(s, &id, 1, &p, logits, &err);
    }
    if (m && res->finish == SV_FINISH_LENGTH && sv_matcher_is_accepting(m)) res->finish = SV_FINISH_STOP;
    CHECK(ok, "reference: %s", err.message);
    res->bad = !ok;
    sv_matcher_destroy(m);
    sv_sampler_destroy(smp);
    sv_llama_state_destroy(s);
}

static void make_requests(treq_t *q) {
    memset(q, 0, sizeof *q * NREQ);
    for (int i = 0; i < NREQ; i++) {
        treq_t *r = &q[i];
        r->n_prompt = 1 + (uint32_t)rnd(100);
        if (i % 5 == 2) r->n_prompt = 1 + (uint32_t)rnd(4);
        for (uint32_t j = 0; j < r->n_prompt; j++) r->prompt[j] = rnd(EOG);
        if (i % 3 == 1 && i > 1) { /* a shared prefix with request 0 (and each other) */
            uint32_t k = q[0].n_prompt < r->n_prompt ? q[0].n_prompt : r->n_prompt;
            memcpy(r->prompt, q[0].prompt, (k > 2 ? k - 2 : k) * sizeof(int32_t));
        }
        r->sp = sv_sample_params_default();
        r->sp.temperature = i % 2 ? 1.0f : 0.0f;
        r->sp.seed = 1000 + (uint64_t)i;
        r->max_tokens = 5 + (uint32_t)rnd(40);
        if (i % 4 == 3) {
            r->stop[0] = rnd(EOG);
            r->n_stop = 1;
        }
        r->constrained = i % 6 == 5;
        if (r->constrained) r->max_tokens = 40;
    }
}

static void test_batches(void) {
    static treq_t q[NREQ];
    static result_t ref[NREQ], got[NREQ];
    make_requests(q);
    q[0].n_prompt = 100; /* a long prefix to share */
    sv_engine_t *e = make_engine(256, 8, 48, true);
    if (!e) return;
    run_alone(e, q, NREQ, ref);
    static result_t seq[NREQ];
    for (int i = 0; i < NREQ; i++) reference(&q[i], &seq[i]);
    compare("engine alone vs the sequential reference", seq, ref, NREQ);
    int stops = 0, lengths = 0, cons = 0, n_out = 0;
    for (int i = 0; i < NREQ; i++) {
        stops += ref[i].finish == SV_FINISH_STOP;
        lengths += ref[i].finish == SV_FINISH_LENGTH;
        n_out += (int)ref[i].n;
        CHECK(!ref[i].bad && ref[i].n <= q[i].max_tokens, "request %d alone: %u tokens", i, ref[i].n);
        if (q[i].constrained) {
            cons++;
            CHECK(pattern_ok(ref[i].toks, ref[i].n) && ref[i].finish == SV_FINISH_STOP,
                  "constrained request %d: valid output, finish stop", i);
        }
    }
    printf("alone: %d stop, %d length, %d constrained, %d tokens\n", stops, lengths, cons, n_out);
    CHECK(stops > 0 && lengths > 0, "both finish reasons occur");

    run_together(e, q, NREQ, got);
    sv_engine_stats_t st;
    sv_engine_stats(e, &st);
    printf("together: %llu steps, max running %u, %llu cached tokens, %llu forced, %llu rollbacks\n",
           (unsigned long long)st.steps, st.max_running, (unsigned long long)st.cached_tokens,
           (unsigned long long)st.forced, (unsigned long long)st.rollbacks);
    CHECK(st.max_running == 8, "the batch filled up (%u running)", st.max_running);
    CHECK(st.forced > 0 && st.rollbacks > 0, "jump-forward and its rollback happened");
    compare("together", ref, got, NREQ);
    sv_engine_destroy(e);

    /* Prefix cache off. */
    e = make_engine(256, 8, 48, false);
    run_together(e, q, NREQ, got);
    sv_engine_stats(e, &st);
    CHECK(st.cached_tokens == 0, "no cached tokens without the cache");
    compare("no prefix cache", ref, got, NREQ);
    sv_engine_destroy(e);

    /* A small pool: preemption, with and without the prefix cache. */
    for (int pc = 0; pc < 2; pc++) {
        e = make_engine(20, 8, 32, pc);
        run_together(e, q, NREQ, got);
        sv_engine_stats(e, &st);
        printf("small pool (prefix cache %s): %llu preemptions, %llu steps\n", pc ? "on" : "off",
               (unsigned long long)st.preemptions, (unsigned long long)st.steps);
        CHECK(st.preemptions > 0, "requests were preempted");
        compare(pc ? "preempted, prefix cache" : "preempted", ref, got, NREQ);
        CHECK(sv_engine_free_blocks(e) == 20, "every block back (%u)", sv_engine_free_blocks(e));
        sv_engine_destroy(e);
    }
    /* One row per step: every prefill one token at a time. */
    e = make_engine(256, 4, 1, true);
    run_together(e, q, 8, got);
    compare("one row per step", ref, got, 8);
    sv_engine_destroy(e);
}

static void test_prefix_counters(void) {
    treq_t a = {0}, b;
    a.n_prompt = 80;
    for (uint32_t j = 0; j < 80; j++) a.prompt[j] = rnd(EOG);
    a.sp = sv_sample_params_default();
    a.sp.temperature = 0;
    a.max_tokens = 1;
    b = a;
    b.n_prompt = 74;
    for (uint32_t j = 64; j < 74; j++) b.prompt[j] = rnd(EOG);
    for (int pc = 0; pc < 2; pc++) {
        sv_engine_t *e = make_engine(64, 4, 256, pc);
        if (!e) return;
        result_t ra[1], rb[1];
        run_alone(e, &a, 1, ra);
        sv_engine_stats_t s0, s1;
        sv_engine_stats(e, &s0);
        run_alone(e, &b, 1, rb);
        sv_engine_stats(e, &s1);
        uint64_t rows = s1.rows - s0.rows, cached = s1.cached_tokens - s0.cached_tokens;
        printf("prefix cache %s: second request computed %llu rows, %llu cached\n", pc ? "on" : "off",
               (unsigned long long)rows, (unsigned long long)cached);
        if (pc) {
            CHECK(rows == 10 && cached == 64 && rb[0].n_cached == 64, "only the 10 new tokens are computed");
        } else {
            CHECK(rows == 74 && cached == 0, "without the cache all 74 are computed");
        }
        CHECK(rb[0].n == 1 && ra[0].n == 1, "one token each");
        sv_engine_destroy(e);
    }
}

static void test_cancel(void) {
    static treq_t q[NREQ];
    make_requests(q);
    for (int pc = 0; pc < 2; pc++) {
        sv_engine_t *e = make_engine(64, 4, 24, pc);
        if (!e) return;
        uint32_t free0 = sv_kv_pool_free_blocks(sv_engine_pool(e));
        uint64_t ids[10];
        static result_t res[10];
        memset(res, 0, sizeof res);
        sv_error_t err;
        for (int i = 0; i < 10; i++) CHECK(submit(e, &q[i], &ids[i], &err) == SV_OK, "submit: %s", err.message);
        for (int s = 0; s < 4; s++) CHECK(sv_engine_step(e, &err) == SV_OK, "step: %s", err.message);
        drain(e, ids, 10, res);
        sv_engine_stats_t st;
        sv_engine_stats(e, &st);
        CHECK(st.running >= 2 && st.waiting > 0, "some running (%u), some waiting (%u)", st.running, st.waiting);
        CHECK(sv_kv_pool_free_blocks(sv_engine_pool(e)) < free0, "blocks in use");
        int cancelled = 0;
        for (int i = 0; i < 10; i++)
            if (res[i].finish == SV_FINISH_NONE) {
                CHECK(sv_engine_cancel(e, ids[i], &err) == SV_OK, "cancel: %s", err.message);
                cancelled++;
            }
        CHECK(sv_engine_cancel(e, ids[0], &err) == SV_ERR_ARG, "a second cancel is refused");
        drain(e, ids, 10, res);
        int aborted = 0;
        for (int i = 0; i < 10; i++) aborted += res[i].finish == SV_FINISH_ABORT;
        CHECK(aborted == cancelled && cancelled > 4, "every cancelled request ends with abort (%d)", aborted);
        CHECK(!sv_engine_has_work(e), "nothing left");
        if (pc)
            CHECK(sv_engine_free_blocks(e) == free0, "free or evictable: %u of %u", sv_engine_free_blocks(e), free0);
        else
            CHECK(sv_kv_pool_free_blocks(sv_engine_pool(e)) == free0, "pool back to %u free", free0);
        CHECK(sv_kv_pool_check(sv_engine_pool(e), &err) == SV_OK, "pool: %s", err.message);
        sv_engine_destroy(e);
    }
}

static void test_constrained(void) {
    sv_engine_t *e = make_engine(64, 4, 64, true);
    if (!e) return;
    sv_error_t err;
    /* The minimum: key = d ;key = d ; -> 7 tokens. */
    sv_matcher_t *m = NULL;
    CHECK(sv_matcher_create(rx_index, &iface, 0, &m, &err) == SV_OK, "matcher: %s", err.message);
    uint32_t min = m ? sv_matcher_min_tokens(m) : 0;
    sv_matcher_destroy(m);
    CHECK(min == 7, "min tokens %u", min);
    int valid = 0, total = 0;
    for (int t = 0; t < 12; t++) {
        treq_t q = {0};
        q.n_prompt = 3 + (uint32_t)rnd(20);
        for (uint32_t j = 0; j < q.n_prompt; j++) q.prompt[j] = rnd(EOG);
        q.sp = sv_sample_params_default();
        q.sp.temperature = t % 2 ? 1.0f : 0.0f;
        q.sp.seed = (uint64_t)t;
        q.constrained = true;
        /* Half of them cannot pick ";key" themselves: they sample ";", and
         * the forced "key=" re-encodes it as ";key" "=" (rollback). */
        static const sv_logit_bias_t no_semikey[2] = {{33, -100.0f}, {35, 8.0f}};
        if (t % 4 < 2) {
            q.sp.logit_bias = no_semikey;
            q.sp.n_logit_bias = 2;
        }
        q.max_tokens = t < 6 ? min : 0; /* tight, or the context */
        uint64_t id;
        result_t r[1] = {0};
        CHECK(submit(e, &q, &id, &err) == SV_OK, "submit: %s", err.message);
        run_to_end(e, &id, 1, r);
        result_t sq[1];
        reference(&q, sq);
        CHECK(same(sq, r), "constrained %d equals the sequential reference", t);
        total++;
        if (pattern_ok(r[0].toks, r[0].n) && r[0].finish == SV_FINISH_STOP && r[0].n <= (q.max_tokens ? min : ECTX))
            valid++;
        else
            fprintf(stderr, "constrained %d: %u tokens, finish %d\n", t, r[0].n, r[0].finish);
        if (q.max_tokens) {
            q.max_tokens = min - 1;
            CHECK(submit(e, &q, &id, &err) == SV_ERR_BUDGET, "a budget below the minimum is refused");
        }
    }
    CHECK(valid == total, "%d of %d constrained outputs match and stop", valid, total);
    sv_engine_stats_t st;
    sv_engine_stats(e, &st);
    CHECK(st.forced > 0 && st.rollbacks > 0, "jump-forward (%llu) and rollback (%llu)", (unsigned long long)st.forced,
          (unsigned long long)st.rollbacks);
    sv_engine_destroy(e);
}

static void test_admission(void) {
    sv_engine_t *e = make_engine(20, 2, 16, true);
    if (!e) return;
    sv_error_t err;
    treq_t q = {0};
    q.n_prompt = 4;
    q.sp = sv_sample_params_default();
    uint64_t id;
    q.n_prompt = ECTX;
    CHECK(submit(e, &q, &id, &err) == SV_ERR_BUDGET, "a prompt as long as the context is refused");
    q.n_prompt = 4;
    q.prompt[1] = VOCAB;
    CHECK(submit(e, &q, &id, &err) == SV_ERR_ARG, "an id outside the vocabulary is refused");
    q.prompt[1] = 0;
    q.sp.temperature = 3;
    CHECK(submit(e, &q, &id, &err) == SV_ERR_ARG, "bad sampling parameters are refused");
    q.sp.temperature = 1;
    q.max_tokens = 4;
    int ok = 0;
    for (int i = 0; i < 70; i++) ok += submit(e, &q, &id, &err) == SV_OK;
    CHECK(ok == 64, "the queue holds 64 (%d)", ok);
    sv_engine_destroy(e);
}

int main(void) {
    char path[] = "/tmp/sv_test_engine_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    model_spec_t sp = {.arch = "llama", .ctx = ECTX};
    sv_error_t err;
    sv_backend_t *be = NULL;
    sv_cpu_config_t cc = {.n_threads = 1};
    CHECK(write_model(path, &sp), "write model");
    CHECK(sv_cpu_backend_create(&cc, &be, &err) == SV_OK, "backend: %s", err.message);
    CHECK(be && sv_llama_load(path, be, &model, &err) == SV_OK, "load: %s", err.message);
    unlink(path);
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
        test_admission();
        test_constrained();
        test_prefix_counters();
        test_cancel();
        test_batches();
    }
    sv_token_index_destroy(rx_index);
    sv_token_set_destroy(tset);
    sv_llama_destroy(model);
    sv_backend_destroy(be);
    return test_summary("test_engine: admission, constraints, prefix cache, cancel, batch invariance, preemption");
}
