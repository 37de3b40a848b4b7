/* test_engine — the scheduler (issue 6) on a tiny GGUF model (tiny_model.h)
 * with a hand-made 37-token vocabulary ('a'..'z', '0'..'5', "key", ";key",
 * "=", ";", EOG), where 'q' is the byte C3, 'x' the byte A9 (so "qx" is
 * "é" split over two tokens) and 'z' is "€", so that text deltas must hold
 * incomplete characters back.
 *
 * The independent reference is the sequential loop of cmd_generate.c on a
 * private sv_llama_state_t, one forward per token (forced tokens too),
 * with logprobs from sv_sampler_sample and, for forced tokens, the row
 * before each one under the matcher state it was forced from; text is a
 * lossy UTF-8 decode of all the output bytes at once, cut at the first
 * stop-string occurrence found by brute force.
 *
 * 1. Batch invariance: 32 mixed requests (prompt lengths 1..100, shared
 *    prefixes, greedy and seeded temperature 1, stop ids, stop strings,
 *    n = 2 and 3, logprobs, constrained and not) equal the reference, and
 *    run together they give, bit for bit (tokens, text, logprobs), what
 *    each gives alone; also with a pool so small that choices are
 *    preempted (asserted), with the prefix cache on and off, and one row
 *    per step.
 * 2. n = 4 shares the prompt's blocks: fewer blocks at the high-water mark
 *    than 4 separate requests; greedy choices are identical.
 * 3. Stop strings: held-back text, overlapping candidates, split
 *    characters; refusals at submit.
 * 4. Forced-token logprobs equal the values jump-forward off reports for
 *    the same token at the same position.
 * 5. Jump-forward off: more steps, valid outputs.
 * 6. Cancelling waiting and running requests (n = 3 among them) returns
 *    every block; the prefix cache's counters; a regex constraint with
 *    jump-forward and its one-token rollback; admission. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsm/regex.h"
#include "src/backend/cpu.h"
#include "src/engine/engine.h"
#include "src/tokenizer/detok.h"
#include "test.h"
#include "tiny_model.h"

enum { ECTX = 256, NREQ = 32, TN = 4, EOG = 36, TXT = 4096 };

/* ---- the vocabulary ---- */

static const char *tok_text[VOCAB];
static uint32_t tok_len[VOCAB];
static uint8_t tok_kind[VOCAB];
static sv_vocab_t *vocab;

static void vocab_init(void) {
    static char singles[32][2];
    for (int i = 0; i < 32; i++) {
        singles[i][0] = (char)(i < 26 ? 'a' + i : '0' + (i - 26));
        tok_text[i] = singles[i];
    }
    tok_text['q' - 'a'] = "\xc3";
    tok_text['x' - 'a'] = "\xa9";
    tok_text['z' - 'a'] = "\xe2\x82\xac";
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

/* The same vocabulary as a tokenizer.json (byte-fallback tokens for the
 * two lone bytes), for text. */
static void vocab_load(void) {
    char json[2048];
    size_t n = (size_t)snprintf(json, sizeof json, "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, "
                                                   "\"merges\": [], \"vocab\": {");
    for (int i = 0; i < EOG; i++) {
        const char *t = i == 'q' - 'a' ? "<0xC3>" : i == 'x' - 'a' ? "<0xA9>" : tok_text[i];
        n += (size_t)snprintf(json + n, sizeof json - n, "%s\"%s\": %d", i ? ", " : "", t, i);
    }
    n += (size_t)snprintf(json + n, sizeof json - n,
                          "}}, \"decoder\": {\"type\": \"ByteFallback\"}, \"added_tokens\": [{\"id\": 36, "
                          "\"content\": \"<eog>\", \"special\": true}]}");
    sv_error_t err;
    CHECK(sv_vocab_from_hf_json(json, n, &vocab, &err) == SV_OK, "vocab: %s", err.message);
    for (int i = 0; vocab && i < EOG; i++) {
        size_t len;
        const uint8_t *b = sv_vocab_bytes(vocab, i, &len);
        CHECK(b && len == tok_len[i] && !memcmp(b, tok_text[i], len), "vocab bytes of %d", i);
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

/* The lossy UTF-8 text of ids (what the detokenizer's chunks add up to). */
static size_t text_of(const int32_t *ids, uint32_t n, char *out) {
    sv_bytes_t b = {0};
    sv_error_t err;
    size_t len = 0;
    if (sv_vocab_decode(vocab, ids, n, true, &b, &err) == SV_OK && b.n * 3 < TXT)
        len = sv_utf8_lossy(b.p, b.n, (uint8_t *)out, NULL);
    sv_bytes_free(&b);
    return len;
}

/* Brute force: the earliest occurrence of any stop string, lowest index on
 * a tie. */
static bool first_stop(const char *t, size_t len, const char *const *stop, uint32_t n_stop, size_t *at,
                       int32_t *which) {
    for (size_t p = 0; p < len; p++)
        for (uint32_t i = 0; i < n_stop; i++) {
            size_t sl = strlen(stop[i]);
            if (sl <= len - p && !memcmp(t + p, stop[i], sl)) {
                *at = p;
                *which = (int32_t)i;
                return true;
            }
        }
    return false;
}

/* ---- requests and results ---- */

typedef struct treq {
    int32_t prompt[128];
    uint32_t n_prompt;
    sv_sample_params_t sp;
    bool constrained;
    uint32_t max_tokens;
    int32_t stop[2];
    uint32_t n_stop;
    char stop_text[3][16];
    const char *stops[3];
    uint32_t n_stops;
    uint32_t n;
    bool logprobs;
    bool batch; /* priority batch */
} treq_t;

typedef struct cres {
    int32_t toks[ECTX];
    uint32_t n;
    sv_logprobs_t lp[ECTX];
    uint32_t n_lp;
    char text[TXT];
    size_t n_text;
    sv_finish_reason finish;
    bool budget_stop;
    int32_t stop_index, stop_id;
    uint32_t n_cached;
    int n_outputs;
} cres_t;

typedef struct result {
    cres_t c[TN];
    bool done, bad;
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

static sv_engine_t *make_engine_jf(uint32_t blocks, uint32_t seqs, uint32_t batch, bool prefix, bool jf) {
    sv_engine_config_t c;
    sv_engine_config_default(&c);
    c.kv_blocks = blocks;
    c.max_num_seqs = seqs;
    c.max_num_batched_tokens = batch;
    c.max_ctx = ECTX;
    c.max_queue = 64;
    c.prefix_cache = prefix;
    c.jump_forward = jf;
    sv_engine_vocab_t v = {tset, &iface, vocab};
    sv_engine_t *e = NULL;
    sv_error_t err;
    CHECK(sv_engine_create(model, &v, &c, &e, &err) == SV_OK, "create: %s", err.message);
    return e;
}

static sv_engine_t *make_engine(uint32_t blocks, uint32_t seqs, uint32_t batch, bool prefix) {
    return make_engine_jf(blocks, seqs, batch, prefix, true);
}

static uint32_t nch(const treq_t *q) { return q->n ? q->n : 1; }

static sv_status submit(sv_engine_t *e, const treq_t *q, uint64_t *id, sv_error_t *err) {
    sv_engine_request_t r = {.prompt = q->prompt, .n_prompt = q->n_prompt, .sampling = q->sp,
                             .constraint = q->constrained ? rx_index : NULL, .max_tokens = q->max_tokens,
                             .stop_ids = q->stop, .n_stop_ids = q->n_stop, .stop = q->stops,
                             .n_stop = q->n_stops, .n = q->n, .logprobs = q->logprobs,
                             .priority = q->batch ? SV_PRIORITY_BATCH : SV_PRIORITY_ONLINE};
    return sv_engine_submit(e, &r, id, err);
}

/* Collects every queued output into res (ids[i] is request i's id),
 * checking the stream: counts add up, nothing after a choice's finish or
 * after request_done, logprobs exactly when asked, text always. */
static void drain(sv_engine_t *e, const uint64_t *ids, const treq_t *q, int n, result_t *res) {
    sv_engine_output_t o;
    while (sv_engine_next_output(e, &o)) {
        int i = 0;
        while (i < n && ids[i] != o.id) i++;
        if (i == n) {
            CHECK(0, "output for unknown id %llu", (unsigned long long)o.id);
            continue;
        }
        result_t *R = &res[i];
        if (o.index >= nch(&q[i]) || R->done) {
            R->bad = true;
            continue;
        }
        cres_t *c = &R->c[o.index];
        if (c->finish != SV_FINISH_NONE || c->n + o.n_tokens > ECTX || c->n + o.n_tokens != o.n_generated ||
            (o.logprobs != NULL) != q[i].logprobs || !o.text || c->n_text + o.n_text > TXT ||
            o.n_prompt != q[i].n_prompt)
            R->bad = true;
        else {
            memcpy(c->toks + c->n, o.tokens, o.n_tokens * sizeof(int32_t));
            if (o.logprobs) memcpy(c->lp + c->n, o.logprobs, o.n_tokens * sizeof *o.logprobs);
            c->n += o.n_tokens;
            c->n_lp = o.logprobs ? c->n : 0;
            memcpy(c->text + c->n_text, o.text, o.n_text);
            c->n_text += o.n_text;
        }
        c->finish = o.finish;
        c->budget_stop = o.budget_stop;
        c->stop_index = o.stop_index;
        c->stop_id = o.stop_id;
        c->n_cached = o.n_cached;
        c->n_outputs++;
        if (o.request_done) {
            R->done = true;
            for (uint32_t k = 0; k < nch(&q[i]); k++)
                if (R->c[k].finish == SV_FINISH_NONE) R->bad = true;
        }
    }
}

static void run_to_end(sv_engine_t *e, const uint64_t *ids, const treq_t *q, int n, result_t *res) {
    sv_error_t err;
    for (int guard = 0; sv_engine_has_work(e) && guard < 100000; guard++) {
        sv_status st = sv_engine_step(e, &err);
        CHECK(st == SV_OK, "step: %s", err.message);
        if (st) break;
        drain(e, ids, q, n, res);
        CHECK(sv_kv_pool_check(sv_engine_pool(e), &err) == SV_OK, "pool: %s", err.message);
    }
    drain(e, ids, q, n, res);
}

static void run_together(sv_engine_t *e, const treq_t *q, int n, result_t *res) {
    uint64_t ids[NREQ];
    sv_error_t err;
    memset(res, 0, sizeof *res * (size_t)n);
    for (int i = 0; i < n; i++)
        CHECK(submit(e, &q[i], &ids[i], &err) == SV_OK, "submit %d: %s", i, err.message);
    run_to_end(e, ids, q, n, res);
}

static void run_alone(sv_engine_t *e, const treq_t *q, int n, result_t *res) {
    memset(res, 0, sizeof *res * (size_t)n);
    for (int i = 0; i < n; i++) {
        uint64_t id;
        sv_error_t err;
        CHECK(submit(e, &q[i], &id, &err) == SV_OK, "submit %d: %s", i, err.message);
        run_to_end(e, &id, &q[i], 1, &res[i]);
    }
}

static bool same_lp(const sv_logprobs_t *a, const sv_logprobs_t *b) {
    if (memcmp(&a->logprob, &b->logprob, sizeof a->logprob) || a->n_top != b->n_top) return false;
    return !memcmp(a->top, b->top, (size_t)a->n_top * sizeof *a->top);
}

/* Bit for bit. */
static bool same_choice(const cres_t *a, const cres_t *b) {
    if (a->n != b->n || a->finish != b->finish || a->budget_stop != b->budget_stop || a->stop_index != b->stop_index ||
        a->stop_id != b->stop_id || a->n_text != b->n_text || a->n_lp != b->n_lp)
        return false;
    if (memcmp(a->toks, b->toks, a->n * sizeof(int32_t)) || memcmp(a->text, b->text, a->n_text)) return false;
    for (uint32_t i = 0; i < a->n_lp; i++)
        if (!same_lp(&a->lp[i], &b->lp[i])) return false;
    return true;
}

static void compare(const char *what, const treq_t *q, const result_t *ref, const result_t *got, int n) {
    int ok = 0;
    for (int i = 0; i < n; i++) {
        bool s = got[i].done && !got[i].bad;
        for (uint32_t k = 0; s && k < nch(&q[i]); k++) s = same_choice(&ref[i].c[k], &got[i].c[k]);
        if (s) ok++;
        else
            fprintf(stderr, "%s: request %d (n %u): %u tokens (finish %d) vs %u alone (finish %d)%s\n", what, i,
                    nch(&q[i]), got[i].c[0].n, got[i].c[0].finish, ref[i].c[0].n, ref[i].c[0].finish,
                    got[i].bad ? ", bad stream" : "");
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

/* ---- the sequential reference ---- */

/* Feeds one token at position *p; the row's logits. */
static bool feed1(sv_llama_state_t *s, int32_t id, int32_t *p, float *logits, sv_error_t *err) {
    int32_t pos = (*p)++;
    return sv_llama_forward(model, s, &id, &pos, 1, SV_LLAMA_LOGITS_LAST, logits, err) == SV_OK;
}

/* The documented seed of choice i. */
static uint64_t choice_seed(uint64_t seed, uint32_t i) {
    if (i == 0) return seed;
    uint64_t z = seed + (uint64_t)i * 0xd1b54a32d192ed03ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* cmd_generate.c's loop for choice k of q, without stop strings: one
 * forward per token, jump-forward (when jf) with its rollback rewriting
 * positions. Stop ids end unconstrained requests only; a constrained
 * request out of budget in an accepting state is a stop. Logprobs: the
 * sampler's for sampled tokens; a forced token is scored on the row before
 * it under the matcher state before it (the row a rolled-back token was
 * sampled from, kept, for the token that replaces it). */
static void reference(const treq_t *q, uint32_t k, bool jf, cres_t *res) {
    memset(res, 0, sizeof *res);
    res->stop_index = res->stop_id = -1;
    sv_error_t err;
    sv_llama_state_t *s = NULL;
    sv_sampler_t *smp = NULL;
    sv_matcher_t *m = NULL;
    static float logits[VOCAB], raw[VOCAB], tmp[VOCAB];
    uint32_t budget = ECTX - q->n_prompt;
    if (q->max_tokens && q->max_tokens < budget) budget = q->max_tokens;
    sv_sample_params_t sp = q->sp;
    sp.seed = choice_seed(q->sp.seed, k);
    bool ok = sv_llama_state_create(model, ECTX, 64, &s, &err) == SV_OK &&
              sv_sampler_create(VOCAB, &sp, &smp, &err) == SV_OK &&
              sv_sampler_add_context(smp, q->prompt, q->n_prompt, &err) == SV_OK &&
              (!q->constrained || sv_matcher_create(rx_index, &iface, budget, &m, &err) == SV_OK);
    int32_t p = 0;
    for (uint32_t i = 0; ok && i < q->n_prompt; i++) ok = feed1(s, q->prompt[i], &p, logits, &err);
    res->finish = SV_FINISH_LENGTH;
    int32_t forced[64];
    bool raw_ok = false; /* raw holds the row the last token was sampled from */
    while (ok && res->n < budget) {
        if (m) {
            if (sv_matcher_is_finished(m)) {
                res->finish = SV_FINISH_STOP;
                break;
            }
            uint32_t nf = 0, rb = 0;
            ok = jf && sv_matcher_forced(m, forced, 64, &nf, &rb, &err) == SV_OK;
            if (!jf) ok = true;
            if (ok && nf > 0 && rb <= res->n) {
                if (rb) {
                    ok = rb == 1 && raw_ok && sv_matcher_rollback(m, rb, &err) == SV_OK;
                    ok = ok && sv_sampler_unaccept(smp, res->toks[--res->n], &err) == SV_OK;
                    p -= (int32_t)rb;
                    memcpy(logits, raw, sizeof logits);
                }
                for (uint32_t i = 0; i < nf && ok; i++) {
                    if (q->logprobs) {
                        const uint32_t *mask;
                        ok = sv_matcher_mask(m, &mask, &err) == SV_OK;
                        memcpy(tmp, logits, sizeof tmp);
                        ok = ok && sv_sampler_logprobs(smp, tmp, mask, forced[i], &res->lp[res->n], &err) == SV_OK;
                    }
                    ok = ok && sv_matcher_accept(m, forced[i]) && sv_sampler_accept(smp, forced[i], &err) == SV_OK;
                    res->toks[res->n++] = forced[i];
                    ok = ok && feed1(s, forced[i], &p, logits, &err);
                }
                raw_ok = false;
                continue;
            }
        }
        const uint32_t *mask = NULL;
        if (m) ok = sv_matcher_mask(m, &mask, &err) == SV_OK;
        memcpy(raw, logits, sizeof raw);
        raw_ok = true;
        int32_t id = -1;
        sv_logprobs_t lp;
        ok = ok && sv_sampler_sample(smp, logits, mask, &id, q->logprobs ? &lp : NULL, &err) == SV_OK;
        if (!ok) break;
        if (id == EOG) {
            if (m) sv_matcher_accept(m, id);
            res->finish = SV_FINISH_STOP;
            res->stop_id = id;
            break;
        }
        if (!m && q->n_stop && q->stop[0] == id) {
            res->finish = SV_FINISH_STOP;
            res->stop_id = id;
            break;
        }
        ok = (!m || sv_matcher_accept(m, id)) && sv_sampler_accept(smp, id, &err) == SV_OK;
        if (q->logprobs) res->lp[res->n] = lp;
        res->toks[res->n++] = id;
        if (m && sv_matcher_is_finished(m)) {
            res->finish = SV_FINISH_STOP;
            break;
        }
        if (res->n >= budget) break;
        ok = feed1(s, id, &p, logits, &err);
    }
    if (m && res->finish == SV_FINISH_LENGTH && sv_matcher_is_accepting(m)) {
        res->finish = SV_FINISH_STOP;
        res->budget_stop = true;
    }
    res->n_lp = q->logprobs ? res->n : 0;
    res->n_text = text_of(res->toks, res->n, res->text);
    CHECK(ok, "reference: %s", err.message);
    sv_matcher_destroy(m);
    sv_sampler_destroy(smp);
    sv_llama_state_destroy(s);
}

/* The engine's choice against the reference's: equal, except that an
 * unconstrained choice with stop strings ends at the first occurrence in
 * the reference's text (the text cut there, finish stop, stop_index), its
 * tokens a prefix of the reference's that covers the occurrence. */
static bool matches_reference(const treq_t *q, const cres_t *ref, const cres_t *got) {
    size_t at;
    int32_t which;
    if (q->constrained || !q->n_stops || !first_stop(ref->text, ref->n_text, q->stops, q->n_stops, &at, &which))
        return same_choice(ref, got);
    if (got->finish != SV_FINISH_STOP || got->stop_index != which || got->stop_id != -1 || got->n > ref->n ||
        got->n_text != at || memcmp(got->text, ref->text, at) || memcmp(got->toks, ref->toks, got->n * sizeof(int32_t)))
        return false;
    if (got->n_lp != (q->logprobs ? got->n : 0)) return false;
    for (uint32_t i = 0; i < got->n_lp; i++)
        if (!same_lp(&got->lp[i], &ref->lp[i])) return false;
    static char t[TXT];
    return text_of(got->toks, got->n, t) >= at + strlen(q->stops[which]);
}

static int check_reference(const char *what, const treq_t *q, const result_t *got, int n) {
    int ok = 0, cut = 0;
    static cres_t ref;
    for (int i = 0; i < n; i++) {
        bool s = got[i].done && !got[i].bad;
        for (uint32_t k = 0; s && k < nch(&q[i]); k++) {
            reference(&q[i], k, true, &ref);
            s = matches_reference(&q[i], &ref, &got[i].c[k]);
            cut += got[i].c[k].stop_index >= 0;
            if (!s)
                fprintf(stderr,
                        "%s: request %d choice %u: %u tokens (finish %d, stop %d) text '%.*s' vs reference %u "
                        "(finish %d) '%.*s'\n",
                        what, i, k, got[i].c[k].n, got[i].c[k].finish, got[i].c[k].stop_index, (int)got[i].c[k].n_text,
                        got[i].c[k].text, ref.n, ref.finish, (int)ref.n_text, ref.text);
        }
        ok += s;
    }
    CHECK(ok == n, "%s: %d of %d requests equal the sequential reference", what, ok, n);
    return cut;
}

/* ---- the tests ---- */

static bool utf8_valid(const char *s, size_t n) {
    static uint8_t out[3 * 64];
    size_t hold = 0;
    if (n > 64) return false;
    size_t w = sv_utf8_lossy((const uint8_t *)s, n, out, &hold);
    return hold == 0 && w == n && !memcmp(out, s, n);
}

/* Stop strings taken from the reference's own text for choice 0: a piece
 * that occurs, the same piece one byte longer with a byte that may not
 * follow (held back until it fails or completes), and one that never
 * occurs. */
static void pick_stops(treq_t *r) {
    static cres_t ref;
    reference(r, 0, true, &ref);
    r->n_stops = 0;
    for (size_t mid = ref.n_text / 2; mid + 3 <= ref.n_text; mid++) {
        if (!utf8_valid(ref.text + mid, 2) || !utf8_valid(ref.text + mid, 3)) continue;
        memcpy(r->stop_text[0], ref.text + mid, 2);
        r->stop_text[0][2] = '5';
        memcpy(r->stop_text[1], ref.text + mid + 1, 2);
        break;
    }
    if (!r->stop_text[0][0]) snprintf(r->stop_text[0], sizeof r->stop_text[0], "ab");
    if (!r->stop_text[1][0]) snprintf(r->stop_text[1], sizeof r->stop_text[1], "cd");
    snprintf(r->stop_text[2], sizeof r->stop_text[2], "never;");
    for (int i = 0; i < 3; i++) r->stops[i] = r->stop_text[i];
    r->n_stops = 3;
}

static void make_requests(treq_t *q, int n) {
    memset(q, 0, sizeof *q * (size_t)n);
    for (int i = 0; i < n; i++) {
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
        r->n = i % 7 == 3 ? 3 : i % 5 == 1 ? 2 : 1;
        r->logprobs = i % 3 == 0 || r->constrained;
        r->sp.n_logprobs = r->logprobs ? (i % 4 == 0 ? 20 : i % 4) : 0;
    }
}

static void test_batches(void) {
    static treq_t q[NREQ];
    static result_t ref[NREQ], got[NREQ];
    make_requests(q, NREQ);
    q[0].n_prompt = 100; /* a long prefix to share */
    for (int i = 0; i < NREQ; i++)
        if (!q[i].constrained && i % 4 == 1) pick_stops(&q[i]);
    /* and stop strings on a constrained request, which must not cut it */
    snprintf(q[5].stop_text[0], sizeof q[5].stop_text[0], "=");
    q[5].stops[0] = q[5].stop_text[0];
    q[5].n_stops = 1;
    sv_engine_t *e = make_engine(256, 8, 48, true);
    if (!e) return;
    run_alone(e, q, NREQ, ref);
    int cut = check_reference("engine alone vs the sequential reference", q, ref, NREQ);
    int stops = 0, lengths = 0, cons = 0, n_out = 0, choices = 0, lps = 0;
    for (int i = 0; i < NREQ; i++)
        for (uint32_t k = 0; k < nch(&q[i]); k++) {
            const cres_t *c = &ref[i].c[k];
            choices++;
            stops += c->finish == SV_FINISH_STOP;
            lengths += c->finish == SV_FINISH_LENGTH;
            n_out += (int)c->n;
            lps += (int)c->n_lp;
            CHECK(c->n <= q[i].max_tokens, "request %d alone: %u tokens", i, c->n);
            if (q[i].constrained) {
                cons++;
                CHECK(pattern_ok(c->toks, c->n) && c->finish == SV_FINISH_STOP,
                      "constrained request %d: valid output, finish stop", i);
                CHECK(c->n_text == 0 || c->text[c->n_text - 1] == ';', "constrained text is not cut");
            }
        }
    printf("alone: %d requests, %d choices: %d stop (%d by a stop string), %d length, %d constrained, %d tokens, "
           "%d logprobs\n", NREQ, choices, stops, cut, lengths, cons, n_out, lps);
    CHECK(stops > 0 && lengths > 0 && cut >= 3, "every finish reason occurs (%d stop strings)", cut);

    run_together(e, q, NREQ, got);
    sv_engine_stats_t st;
    sv_engine_stats(e, &st);
    printf("together: %llu steps, max running %u, %llu cached tokens, %llu forced, %llu rollbacks\n",
           (unsigned long long)st.steps, st.max_running, (unsigned long long)st.cached_tokens,
           (unsigned long long)st.forced, (unsigned long long)st.rollbacks);
    CHECK(st.max_running == 8, "the batch filled up (%u running)", st.max_running);
    CHECK(st.forced > 0 && st.rollbacks > 0, "jump-forward and its rollback happened");
    compare("together", q, ref, got, NREQ);
    sv_engine_destroy(e);

    /* Prefix cache off. */
    e = make_engine(256, 8, 48, false);
    run_together(e, q, NREQ, got);
    sv_engine_stats(e, &st);
    CHECK(st.cached_tokens == 0, "no cached tokens without the cache");
    compare("no prefix cache", q, ref, got, NREQ);
    sv_engine_destroy(e);

    /* A small pool: preemption, with and without the prefix cache. */
    for (int pc = 0; pc < 2; pc++) {
        e = make_engine(20, 8, 32, pc);
        run_together(e, q, NREQ, got);
        sv_engine_stats(e, &st);
        printf("small pool (prefix cache %s): %llu preemptions, %llu steps\n", pc ? "on" : "off",
               (unsigned long long)st.preemptions, (unsigned long long)st.steps);
        CHECK(st.preemptions > 0, "requests were preempted");
        compare(pc ? "preempted, prefix cache" : "preempted", q, ref, got, NREQ);
        CHECK(sv_engine_free_blocks(e) == 20, "every block back (%u)", sv_engine_free_blocks(e));
        sv_engine_destroy(e);
    }
    /* Two running slots: forked choices overflow to the waiting queue. */
    e = make_engine(256, 2, 64, true);
    run_together(e, q, NREQ, got);
    compare("two slots", q, ref, got, NREQ);
    sv_engine_destroy(e);
    /* One row per step: every prefill one token at a time. */
    e = make_engine(256, 4, 1, true);
    run_together(e, q, 8, got);
    compare("one row per step", q, ref, got, 8);
    sv_engine_destroy(e);
}

/* 7. Priorities: with half the requests at batch priority, every output is
 * still bit for bit the reference's (small pool and few slots: preemption
 * and recompute); and an online request that arrives while batch requests
 * fill every slot runs at once (a batch choice makes room) and gets its first
 * token in its first step, where without priorities it waits for a slot. */
/* NREQ requests made and each run alone on a roomy engine: the reference
 * the runs together are compared with. */
static bool alone_reference(treq_t *q, result_t *ref) {
    make_requests(q, NREQ);
    sv_engine_t *e = make_engine(256, 8, 48, true);
    if (!e) return false;
    run_alone(e, q, NREQ, ref);
    sv_engine_destroy(e);
    return true;
}

static void test_priorities(void) {
    static treq_t q[NREQ];
    static result_t ref[NREQ], got[NREQ];
    if (!alone_reference(q, ref)) return;
    sv_engine_t *e;
    for (int i = 0; i < NREQ; i++) q[i].batch = i % 2 == 0;
    for (int pc = 0; pc < 2; pc++) {
        e = make_engine(pc ? 20 : 256, pc ? 8 : 3, 32, pc);
        run_together(e, q, NREQ, got);
        compare(pc ? "priorities, small pool" : "priorities, three slots", q, ref, got, NREQ);
        sv_engine_destroy(e);
    }

    /* Four slots full of batch requests, then one online request. */
    treq_t b[5];
    memset(b, 0, sizeof b);
    static const sv_logit_bias_t no_eog = {.id = EOG, .bias = -100.0f}; /* run to max_tokens */
    for (int i = 0; i < 5; i++) {
        b[i].n_prompt = 6;
        for (uint32_t j = 0; j < 6; j++) b[i].prompt[j] = (int32_t)(i * 3 + j) % EOG;
        b[i].sp = sv_sample_params_default();
        b[i].sp.temperature = 0.0f;
        b[i].sp.logit_bias = &no_eog;
        b[i].sp.n_logit_bias = 1;
        b[i].max_tokens = 60;
        b[i].batch = i < 4;
    }
    result_t alone[5], mixed[5];
    e = make_engine(256, 4, 64, true);
    run_alone(e, b, 5, alone);
    for (int prio = 0; prio < 2; prio++) {
        for (int i = 0; i < 4; i++) b[i].batch = prio;
        uint64_t ids[5];
        sv_error_t err;
        memset(mixed, 0, sizeof mixed);
        for (int i = 0; i < 4; i++) CHECK(submit(e, &b[i], &ids[i], &err) == SV_OK, "submit: %s", err.message);
        for (int s = 0; s < 3; s++) {
            CHECK(sv_engine_step(e, &err) == SV_OK, "step: %s", err.message);
            drain(e, ids, b, 4, mixed);
        }
        CHECK(submit(e, &b[4], &ids[4], &err) == SV_OK, "submit online: %s", err.message);
        int steps = 0;
        while (sv_engine_has_work(e) && mixed[4].c[0].n == 0 && !mixed[4].done && steps < 1000) {
            CHECK(sv_engine_step(e, &err) == SV_OK, "step: %s", err.message);
            drain(e, ids, b, 5, mixed);
            steps++;
        }
        if (prio) CHECK(steps == 1, "online behind batch: first token after %d steps", steps);
        else CHECK(steps > 10, "online behind online: waits for a slot (%d steps)", steps);
        run_to_end(e, ids, b, 5, mixed);
        compare(prio ? "online among batch" : "online among online", b, alone, mixed, 5);
        sv_engine_stats_t st;
        sv_engine_stats(e, &st);
        printf("online request behind 4 %s requests: first token after %d step(s); %llu preemptions so far\n",
               prio ? "batch" : "online", steps, (unsigned long long)st.preemptions);
    }
    sv_engine_destroy(e);
}

/* Interrupts on a fixed pattern of the layer checks (a batch step given
 * up at varied layers, some steps more than once). */
static int interrupt_calls;
static bool interrupt_pattern(void *ud) {
    (void)ud;
    return interrupt_calls++ % 5 == 2;
}
static bool interrupt_always(void *ud) {
    (void)ud;
    interrupt_calls++;
    return true;
}

/* Batch-only steps given up part way leave every output as it was:
 * equal to each request run alone, bit for bit, with prefix sharing and a
 * pool small enough to preempt. Steps with online rows are never given up. */
static void test_interrupted_steps(void) {
    static treq_t q[NREQ];
    static result_t ref[NREQ], got[NREQ];
    if (!alone_reference(q, ref)) return;
    sv_engine_t *e;
    for (int i = 0; i < NREQ; i++) q[i].batch = true;
    for (int pc = 0; pc < 2; pc++) {
        e = make_engine(pc ? 20 : 256, pc ? 8 : 3, 32, pc);
        interrupt_calls = 0;
        sv_engine_set_interrupt(e, interrupt_pattern, NULL);
        run_together(e, q, NREQ, got);
        compare(pc ? "interrupted batch steps, small pool" : "interrupted batch steps, three slots", q, ref, got, NREQ);
        sv_engine_stats_t st;
        sv_engine_stats(e, &st);
        CHECK(st.interrupted_steps > 0, "no step was interrupted (%d checks)", interrupt_calls);
        printf("interrupted batch steps: %llu given up, %llu run\n", (unsigned long long)st.interrupted_steps,
               (unsigned long long)st.steps);
        sv_engine_destroy(e);
    }
    for (int i = 0; i < NREQ; i++) q[i].batch = false;
    e = make_engine(256, 3, 32, true);
    interrupt_calls = 0;
    sv_engine_set_interrupt(e, interrupt_always, NULL);
    run_together(e, q, NREQ, got);
    compare("online steps with an interrupt that always asks", q, ref, got, NREQ);
    sv_engine_stats_t st;
    sv_engine_stats(e, &st);
    CHECK(st.interrupted_steps == 0 && interrupt_calls == 0, "an online step was asked (%d) or given up (%llu)",
          interrupt_calls, (unsigned long long)st.interrupted_steps);
    sv_engine_destroy(e);
}

static void test_n_sharing(void) {
    treq_t one = {0};
    one.n_prompt = 40;
    for (uint32_t j = 0; j < 40; j++) one.prompt[j] = rnd(EOG);
    one.sp = sv_sample_params_default();
    one.sp.temperature = 0;
    one.max_tokens = 24;
    one.n = 4;
    one.logprobs = true;
    one.sp.n_logprobs = 3;
    static treq_t sep[4];
    for (int i = 0; i < 4; i++) {
        sep[i] = one;
        sep[i].n = 1;
    }
    static result_t r1[1], r4[4];
    sv_engine_t *e = make_engine(64, 8, 256, false);
    if (!e) return;
    run_together(e, &one, 1, r1);
    sv_kv_pool_stats_t ps1, ps4;
    sv_kv_pool_stats(sv_engine_pool(e), &ps1);
    sv_engine_destroy(e);
    e = make_engine(64, 8, 256, false);
    run_together(e, sep, 4, r4);
    sv_kv_pool_stats(sv_engine_pool(e), &ps4);
    sv_engine_destroy(e);
    printf("n = 4: %u blocks at most (%llu copy-on-write), 4 requests: %u\n", ps1.high_water,
           (unsigned long long)ps1.cow_copies, ps4.high_water);
    CHECK(ps1.high_water < ps4.high_water && ps1.cow_copies > 0, "n = 4 shares the prompt's blocks (%u vs %u)",
          ps1.high_water, ps4.high_water);
    /* 40 + 24 tokens: 4 blocks each alone; shared: 2 full prompt blocks + 4 x 2. */
    CHECK(ps1.high_water <= 2 + 4 * 2 && ps4.high_water == 16, "block counts %u, %u", ps1.high_water, ps4.high_water);
    bool ok = r1[0].done && !r1[0].bad;
    for (int k = 0; ok && k < 4; k++) ok = same_choice(&r1[0].c[k], &r4[k].c[0]);
    CHECK(ok, "greedy choices are identical, and equal to separate requests");
    CHECK(check_reference("n = 4", &one, r1, 1) == 0, "no stop strings");

    /* Sampled: choice 0 is the n = 1 request with the same seed; the
     * others differ from it. */
    one.sp.temperature = 1;
    one.sp.seed = 77;
    one.max_tokens = 30;
    e = make_engine(64, 8, 256, true);
    run_together(e, &one, 1, r1);
    sep[0] = one;
    sep[0].n = 1;
    run_alone(e, sep, 1, r4);
    sv_engine_destroy(e);
    CHECK(same_choice(&r1[0].c[0], &r4[0].c[0]), "choice 0 equals n = 1 with the same seed");
    int differ = 0;
    for (int k = 1; k < 4; k++) differ += !same_choice(&r1[0].c[0], &r1[0].c[k]);
    CHECK(differ == 3, "sampled choices differ (%d of 3)", differ);
    check_reference("n = 4 sampled", &one, r1, 1);

    /* n = 16 (the limit) on a pool that holds few, with 4 running slots. */
    one.n = SV_ENGINE_MAX_N;
    one.max_tokens = 8;
    e = make_engine(20, 4, 64, true);
    uint64_t id;
    sv_error_t err;
    CHECK(submit(e, &one, &id, &err) == SV_OK, "n = 16: %s", err.message);
    one.n = SV_ENGINE_MAX_N + 1;
    CHECK(submit(e, &one, &id, &err) == SV_ERR_ARG, "n = 17 is refused");
    int fin[SV_ENGINE_MAX_N] = {0}, done = 0, after = 0;
    while (sv_engine_has_work(e)) {
        CHECK(sv_engine_step(e, &err) == SV_OK, "step: %s", err.message);
        sv_engine_output_t o;
        while (sv_engine_next_output(e, &o)) {
            after += done > 0;
            if (o.index < SV_ENGINE_MAX_N && o.finish != SV_FINISH_NONE) fin[o.index]++;
            done += o.request_done;
        }
    }
    int ended = 0;
    for (int k = 0; k < SV_ENGINE_MAX_N; k++) ended += fin[k] == 1;
    CHECK(ended == SV_ENGINE_MAX_N && done == 1 && after == 0 && sv_engine_free_blocks(e) == 20,
          "n = 16: every choice ends once, request_done last, blocks back");
    sv_engine_destroy(e);
}

static void stop_case(sv_engine_t *e, const char *what, const treq_t *q) {
    static result_t r[1];
    run_together(e, q, 1, r);
    check_reference(what, q, r, 1);
}

static void test_stop_strings(void) {
    sv_engine_t *e = make_engine(64, 4, 64, true);
    if (!e) return;
    treq_t q = {0};
    q.n_prompt = 9;
    for (uint32_t j = 0; j < 9; j++) q.prompt[j] = rnd(EOG);
    q.sp = sv_sample_params_default();
    q.sp.seed = 3;
    q.max_tokens = 60;
    q.n = 3;
    /* 'q' then 'x' spell "é" in two tokens; 'z' is "€" */
    static const sv_logit_bias_t fav[3] = {{16, 3.0f}, {23, 3.0f}, {25, 2.0f}};
    q.sp.logit_bias = fav;
    q.sp.n_logit_bias = 3;
    static cres_t full;
    reference(&q, 0, true, &full);
    printf("stop strings: choice 0's full text '%.*s'\n", (int)full.n_text, full.text);
    const char *sets[][3] = {{"\xc3\xa9", NULL}, {"\xe2\x82\xac", "a"}, {"b", "c", "d"}, {"\xef\xbf\xbd", NULL},
                             {"zzzzzz", NULL}};
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        q.n_stops = 0;
        for (int i = 0; i < 3 && sets[s][i]; i++) q.stops[q.n_stops++] = sets[s][i];
        stop_case(e, "stop strings", &q);
    }
    /* From the text itself: a piece of it, and overlapping candidates. */
    if (full.n_text >= 8) {
        for (size_t at = 2; at + 4 < full.n_text; at += 3) {
            if (!utf8_valid(full.text + at, 3)) continue;
            char a[8] = {0}, b[8] = {0}, c[8] = {0};
            memcpy(a, full.text + at, 3);         /* occurs */
            memcpy(b, full.text + at - 1, 2);     /* occurs earlier, overlapping */
            memcpy(c, full.text + at, 2);
            c[2] = '#';                           /* a longer candidate that fails */
            if (!utf8_valid(b, 2)) continue;
            const char *s1[3] = {c, a, b};
            memcpy(q.stops, s1, sizeof s1);
            q.n_stops = 3;
            stop_case(e, "overlapping stop strings", &q);
            const char *s2[2] = {a, c};
            memcpy(q.stops, s2, sizeof s2);
            q.n_stops = 2;
            stop_case(e, "held-back stop strings", &q);
        }
    }
    /* Refusals. */
    uint64_t id;
    sv_error_t err;
    static char longs[SV_ENGINE_MAX_STOP_BYTES + 2];
    memset(longs, 'a', sizeof longs - 1);
    const char *bad[][2] = {{"", NULL}, {longs, NULL}, {"\xc3", NULL}, {"ok", NULL}};
    for (int i = 0; i < 4; i++) {
        q.stops[0] = bad[i][0];
        q.n_stops = 1;
        if (i == 3) q.n_stops = SV_ENGINE_MAX_STOP + 1;
        const char *many[SV_ENGINE_MAX_STOP + 1];
        for (int k = 0; k <= SV_ENGINE_MAX_STOP; k++) many[k] = "x";
        sv_engine_request_t r = {.prompt = q.prompt, .n_prompt = q.n_prompt, .sampling = q.sp,
                                 .stop = i == 3 ? many : q.stops,
                                 .n_stop = q.n_stops};
        CHECK(sv_engine_submit(e, &r, &id, &err) == SV_ERR_ARG, "bad stop strings %d are refused", i);
    }
    sv_engine_destroy(e);
    /* Without a vocabulary: no text, and stop strings are refused. */
    sv_engine_config_t c;
    sv_engine_config_default(&c);
    c.kv_blocks = 64;
    c.max_ctx = ECTX;
    sv_engine_vocab_t v = {tset, &iface, NULL};
    CHECK(sv_engine_create(model, &v, &c, &e, &err) == SV_OK, "create: %s", err.message);
    const char *one[1] = {"a"};
    sv_engine_request_t r = {.prompt = q.prompt, .n_prompt = q.n_prompt, .sampling = q.sp, .stop = one, .n_stop = 1,
                             .max_tokens = 3};
    CHECK(sv_engine_submit(e, &r, &id, &err) == SV_ERR_ARG, "stop strings without a vocabulary are refused");
    r.n_stop = 0;
    CHECK(sv_engine_submit(e, &r, &id, &err) == SV_OK, "submit: %s", err.message);
    bool texts = false;
    while (sv_engine_has_work(e)) {
        CHECK(sv_engine_step(e, &err) == SV_OK, "step");
        sv_engine_output_t o;
        while (sv_engine_next_output(e, &o)) texts |= o.text != NULL;
    }
    CHECK(!texts, "no text without a vocabulary");
    sv_engine_destroy(e);
}

/* Forced-token logprobs against jump-forward off: at every position where
 * the two runs agree so far, the token jump-forward produced has the
 * logprob the other run reports for it there (its own, or in its top
 * list). Logit biases steer both runs to the same splits, so most forced
 * tokens are compared; the rollback case (";" sampled, ";key" forced in its
 * place) is compared through the top list. */
static void test_forced_logprobs(void) {
    sv_engine_t *on = make_engine_jf(64, 4, 64, true, true), *off = make_engine_jf(64, 4, 64, true, false);
    if (!on || !off) return;
    int compared = 0, forced_cmp = 0, bad = 0;
    uint64_t forced_total = 0;
    for (int t = 0; t < 16; t++) {
        treq_t q = {0};
        q.n_prompt = 3 + (uint32_t)rnd(20);
        for (uint32_t j = 0; j < q.n_prompt; j++) q.prompt[j] = rnd(EOG);
        q.sp = sv_sample_params_default();
        q.sp.temperature = 0;
        q.sp.n_logprobs = 20;
        q.constrained = true;
        q.logprobs = true;
        q.max_tokens = t % 3 ? 0 : 9;
        /* no single letters: "key" is sampled where it would be forced */
        static const sv_logit_bias_t steer[4] = {{10, -3.0f}, {4, -3.0f}, {24, -3.0f}, {35, 1.0f}};
        static const sv_logit_bias_t roll[2] = {{33, -4.0f}, {35, 4.0f}};
        q.sp.logit_bias = t % 2 ? roll : steer;
        q.sp.n_logit_bias = t % 2 ? 2 : 4;
        static result_t a[1], b[1];
        sv_engine_stats_t s0, s1;
        sv_engine_stats(on, &s0);
        run_together(on, &q, 1, a);
        sv_engine_stats(on, &s1);
        forced_total += s1.forced - s0.forced;
        run_together(off, &q, 1, b);
        const cres_t *x = &a[0].c[0], *y = &b[0].c[0];
        CHECK(x->n_lp == x->n && y->n_lp == y->n, "logprobs for every token");
        CHECK(pattern_ok(y->toks, y->n) && y->finish == SV_FINISH_STOP, "jump-forward off: valid output");
        static cres_t ref;
        reference(&q, 0, true, &ref);
        CHECK(same_choice(&ref, x), "jump-forward on equals the reference");
        reference(&q, 0, false, &ref);
        CHECK(same_choice(&ref, y), "jump-forward off equals the reference");
        for (uint32_t k = 0; k < x->n && k < y->n; k++) {
            const sv_logprobs_t *want = NULL;
            static sv_logprobs_t tmp;
            if (x->toks[k] == y->toks[k]) {
                want = &y->lp[k];
            } else {
                for (int i = 0; i < y->lp[k].n_top; i++)
                    if (y->lp[k].top[i].id == x->toks[k]) {
                        tmp = y->lp[k];
                        tmp.logprob = y->lp[k].top[i].logprob;
                        want = &tmp;
                    }
            }
            compared++;
            if (!want || !same_lp(want, &x->lp[k])) bad++;
            /* a token the off run did not take itself, or one the biases
             * made it sample where the on run forced it */
            forced_cmp += x->toks[k] != y->toks[k] || x->toks[k] == 32 || x->toks[k] == 34;
            if (x->toks[k] != y->toks[k]) break;
        }
    }
    printf("forced logprobs: %d positions compared (%d at forced-like tokens), %llu tokens forced\n", compared,
           forced_cmp, (unsigned long long)forced_total);
    CHECK(bad == 0 && compared > 100 && forced_cmp > 30 && forced_total > 30,
          "forced-token logprobs equal jump-forward off's (%d bad)", bad);
    sv_engine_destroy(on);
    sv_engine_destroy(off);
}

static void test_jump_forward_off(void) {
    static treq_t q[12];
    static result_t a[12], b[12];
    for (int t = 0; t < 12; t++) {
        memset(&q[t], 0, sizeof q[t]);
        q[t].n_prompt = 3 + (uint32_t)rnd(20);
        for (uint32_t j = 0; j < q[t].n_prompt; j++) q[t].prompt[j] = rnd(EOG);
        q[t].sp = sv_sample_params_default();
        q[t].sp.temperature = t % 2 ? 1.0f : 0.0f;
        q[t].sp.seed = (uint64_t)t;
        q[t].constrained = true;
        q[t].n = t % 3 == 0 ? 2 : 1;
    }
    sv_engine_stats_t s_on, s_off;
    sv_engine_t *e = make_engine_jf(64, 8, 64, true, true);
    run_together(e, q, 12, a);
    sv_engine_stats(e, &s_on);
    sv_engine_destroy(e);
    e = make_engine_jf(64, 8, 64, true, false);
    run_together(e, q, 12, b);
    sv_engine_stats(e, &s_off);
    sv_engine_destroy(e);
    int valid = 0, equal = 0, total = 0;
    for (int t = 0; t < 12; t++)
        for (uint32_t k = 0; k < nch(&q[t]); k++) {
            const cres_t *y = &b[t].c[k];
            total++;
            valid += pattern_ok(y->toks, y->n) && y->finish == SV_FINISH_STOP && !b[t].bad && b[t].done;
            equal += !memcmp(a[t].c[k].text, y->text, y->n_text) && a[t].c[k].n_text == y->n_text;
        }
    printf("jump-forward off: %llu steps, %llu sampled, %llu forced (on: %llu steps, %llu sampled, %llu forced); "
           "%d of %d texts equal, %d valid\n",
           (unsigned long long)s_off.steps, (unsigned long long)s_off.sampled, (unsigned long long)s_off.forced,
           (unsigned long long)s_on.steps, (unsigned long long)s_on.sampled, (unsigned long long)s_on.forced, equal,
           total, valid);
    CHECK(s_off.forced == 0 && s_off.rollbacks == 0 && s_on.forced > 0, "no forced tokens with jump-forward off");
    CHECK(s_off.steps > s_on.steps && s_off.sampled > s_on.sampled, "jump-forward off takes more steps");
    CHECK(valid == total, "%d of %d valid with jump-forward off", valid, total);
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
        static result_t ra[1], rb[1];
        run_alone(e, &a, 1, ra);
        sv_engine_stats_t s0, s1;
        sv_engine_stats(e, &s0);
        run_alone(e, &b, 1, rb);
        sv_engine_stats(e, &s1);
        uint64_t rows = s1.rows - s0.rows, cached = s1.cached_tokens - s0.cached_tokens;
        printf("prefix cache %s: second request computed %llu rows, %llu cached, %llu looked up\n", pc ? "on" : "off",
               (unsigned long long)rows, (unsigned long long)cached,
               (unsigned long long)(s1.prefix_queries - s0.prefix_queries));
        if (pc) {
            CHECK(rows == 10 && cached == 64 && rb[0].c[0].n_cached == 64, "only the 10 new tokens are computed");
            CHECK(s1.prefix_queries - s0.prefix_queries == 73, "73 tokens looked up");
        } else {
            CHECK(rows == 74 && cached == 0, "without the cache all 74 are computed");
        }
        CHECK(rb[0].c[0].n == 1 && ra[0].c[0].n == 1, "one token each");
        sv_engine_destroy(e);
    }
}

static void test_cancel(void) {
    static treq_t q[NREQ];
    make_requests(q, NREQ);
    for (int pc = 0; pc < 2; pc++) {
        sv_engine_t *e = make_engine(64, 4, 24, pc);
        if (!e) return;
        uint32_t free0 = sv_kv_pool_free_blocks(sv_engine_pool(e));
        uint64_t ids[10];
        static result_t res[10];
        memset(res, 0, sizeof res);
        sv_error_t err;
        q[1].n = 3;
        q[1].max_tokens = 40;
        q[1].sp.temperature = 1;
        q[1].n_prompt = 40;
        for (int i = 0; i < 10; i++) CHECK(submit(e, &q[i], &ids[i], &err) == SV_OK, "submit: %s", err.message);
        for (int s = 0; s < 4; s++) CHECK(sv_engine_step(e, &err) == SV_OK, "step: %s", err.message);
        drain(e, ids, q, 10, res);
        sv_engine_stats_t st;
        sv_engine_stats(e, &st);
        CHECK(st.running >= 2 && st.waiting > 0, "some running (%u), some waiting (%u)", st.running, st.waiting);
        CHECK(sv_kv_pool_free_blocks(sv_engine_pool(e)) < free0, "blocks in use");
        CHECK(!res[1].done && res[1].c[1].finish == SV_FINISH_NONE, "the n = 3 request runs");
        int cancelled = 0;
        for (int i = 0; i < 10; i++)
            if (!res[i].done) {
                CHECK(sv_engine_cancel(e, ids[i], &err) == SV_OK, "cancel: %s", err.message);
                cancelled++;
            }
        CHECK(sv_engine_cancel(e, ids[0], &err) == SV_ERR_ARG, "a second cancel is refused");
        drain(e, ids, q, 10, res);
        int aborted = 0;
        for (int i = 0; i < 10; i++) {
            aborted += res[i].c[0].finish == SV_FINISH_ABORT;
            CHECK(res[i].done && !res[i].bad, "request %d (n %u) ends, request_done last", i, nch(&q[i]));
        }
        for (int k = 0; k < 3; k++) CHECK(res[1].c[k].finish == SV_FINISH_ABORT, "choice %d of n = 3 aborted", k);
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
        q.logprobs = t % 3 == 0;
        /* Half of them cannot pick ";key" themselves: they sample ";", and
         * the forced "key=" re-encodes it as ";key" "=" (rollback). */
        static const sv_logit_bias_t no_semikey[2] = {{33, -100.0f}, {35, 8.0f}};
        if (t % 4 < 2) {
            q.sp.logit_bias = no_semikey;
            q.sp.n_logit_bias = 2;
        }
        q.max_tokens = t < 6 ? min : 0; /* tight, or the context */
        uint64_t id;
        static result_t r[1];
        memset(r, 0, sizeof r);
        CHECK(submit(e, &q, &id, &err) == SV_OK, "submit: %s", err.message);
        run_to_end(e, &id, &q, 1, r);
        static cres_t sq;
        reference(&q, 0, true, &sq);
        CHECK(same_choice(&sq, &r[0].c[0]), "constrained %d equals the sequential reference", t);
        total++;
        const cres_t *c = &r[0].c[0];
        if (pattern_ok(c->toks, c->n) && c->finish == SV_FINISH_STOP && c->n <= (q.max_tokens ? min : ECTX))
            valid++;
        else
            fprintf(stderr, "constrained %d: %u tokens, finish %d\n", t, c->n, c->finish);
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
    CHECK(st.mask_waits > 0, "first visits counted (%llu)", (unsigned long long)st.mask_waits);
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

/* Prefetch workers: masks computed off the engine thread are the same
 * masks (outputs equal with and without workers, each on a fresh index),
 * and the workers do compute them (the start state's job is posted at
 * submit, before any step). */
static sv_token_index_t *fresh_index(void) {
    static const char pat[] = "(key=[0-5]{1,3};){2,4}";
    sv_dfa_t *dfa = NULL;
    sv_token_index_t *ix = NULL;
    sv_error_t err;
    CHECK(sv_regex_compile(pat, strlen(pat), NULL, &dfa, &err) == SV_OK, "regex: %s", err.message);
    if (dfa && sv_token_index_create(dfa, tset, NULL, &ix, &err)) {
        CHECK(0, "index: %s", err.message);
        sv_dfa_destroy(dfa);
    }
    return ix;
}

static void test_prefetch_workers(void) {
    int32_t out[2][8][ECTX];
    uint32_t n_out[2][8] = {{0}};
    sv_engine_stats_t s[2];
    for (int w = 0; w < 2; w++) {
        sv_token_index_t *ix = fresh_index();
        if (!ix) return;
        sv_engine_config_t c;
        sv_engine_config_default(&c);
        c.kv_blocks = 64;
        c.max_num_seqs = 8;
        c.max_num_batched_tokens = 64;
        c.max_ctx = ECTX;
        c.prefetch_threads = w ? 2 : 0;
        sv_engine_vocab_t v = {tset, &iface, vocab};
        sv_engine_t *e = NULL;
        sv_error_t err;
        CHECK(sv_engine_create(model, &v, &c, &e, &err) == SV_OK, "create: %s", err.message);
        if (!e) {
            sv_token_index_destroy(ix);
            return;
        }
        uint64_t ids[8];
        for (int t = 0; t < 8; t++) {
            int32_t prompt[8];
            for (int j = 0; j < 8; j++) prompt[j] = (t * 7 + j * 3) % EOG;
            sv_engine_request_t r = {.prompt = prompt, .n_prompt = 8, .sampling = sv_sample_params_default(),
                                     .constraint = ix};
            r.sampling.temperature = t % 2 ? 1.0f : 0.0f;
            r.sampling.seed = (uint64_t)t;
            CHECK(sv_engine_submit(e, &r, &ids[t], &err) == SV_OK, "submit: %s", err.message);
        }
        if (w) {
            /* The workers run the start state's job while nothing steps. */
            for (int k = 0; k < 5000; k++) {
                sv_engine_stats(e, &s[w]);
                if (s[w].prefetched) break;
                struct timespec pause = {0, 1000000};
                nanosleep(&pause, NULL);
            }
            CHECK(s[w].prefetched > 0, "the prefetch workers computed no mask before the first step");
        }
        while (sv_engine_has_work(e)) CHECK(sv_engine_step(e, &err) == SV_OK, "step: %s", err.message);
        sv_engine_output_t o;
        while (sv_engine_next_output(e, &o))
            for (int t = 0; t < 8; t++)
                if (ids[t] == o.id && n_out[w][t] + o.n_tokens <= ECTX) {
                    memcpy(out[w][t] + n_out[w][t], o.tokens, o.n_tokens * sizeof(int32_t));
                    n_out[w][t] += o.n_tokens;
                }
        sv_engine_stats(e, &s[w]);
        sv_engine_destroy(e);
        sv_token_index_destroy(ix);
    }
    for (int t = 0; t < 8; t++)
        CHECK(n_out[0][t] == n_out[1][t] && !memcmp(out[0][t], out[1][t], n_out[0][t] * sizeof(int32_t)),
              "request %d differs with prefetch workers", t);
    CHECK(s[0].prefetched == 0 && s[0].mask_waits > 0, "no workers: every first visit is the engine's");
    printf("prefetch: %llu masks by the workers; first visits on the engine thread %llu (without workers %llu)\n",
           (unsigned long long)s[1].prefetched, (unsigned long long)s[1].mask_waits,
           (unsigned long long)s[0].mask_waits);
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
    vocab_load();
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
    if (model && rx_index && vocab) {
        test_admission();
        test_constrained();
        test_prefix_counters();
        test_cancel();
        test_n_sharing();
        test_priorities();
        test_interrupted_steps();
        test_stop_strings();
        test_forced_logprobs();
        test_jump_forward_off();
        test_batches();
        test_prefetch_workers();
    }
    sv_token_index_destroy(rx_index);
    sv_token_set_destroy(tset);
    sv_vocab_destroy(vocab);
    sv_llama_destroy(model);
    sv_backend_destroy(be);
    return test_summary("test_engine: admission, constraints, prefix cache, cancel, n choices, stop strings, "
                        "logprobs, jump-forward off, batch invariance, preemption, interrupted batch steps");
}
