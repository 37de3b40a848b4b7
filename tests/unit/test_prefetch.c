/* test_prefetch — the mask prefetch workers (src/engine/prefetch.h) on a
 * regex DFA with a whitespace cap and a synthetic vocabulary of ~2000
 * tokens.
 *
 * 1. After one post and wait, the index knows exactly the state's mask and
 *    its successors' (computed here independently: each allowed token's
 *    bytes walked with sv_dfa_next, the whitespace run counted by hand),
 *    the workers say they computed exactly those, and every mask is bit for
 *    bit the one a fresh index computes synchronously.
 * 2. max_states bounds a job; a completed state is not expanded again; the
 *    counters add up.
 * 3. A memo budget that the first mask exceeds stops prefetching for that
 *    index.
 * 4. Stress: every (state, run) posted while two other threads read masks
 *    of the same index; afterwards every mask known equals the fresh
 *    index's.
 * 5. forget() while workers run on indexes that are freed right after
 *    (ASan/TSan builds catch a worker touching a freed index). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsm/regex.h"
#include "src/engine/prefetch.h"
#include "test.h"

enum { CAP = 2, EOG_TOK = 0 };

static sv_token_set_t *ts;
static uint32_t n_tok;
static uint8_t *tok_bytes[4096];
static uint32_t tok_len[4096];

static const char pattern[] =
    "\\{ ?\"name\": ?\"[a-z ]{1,12}\", ?\"age\": ?[0-9]{1,3}, ?\"tags\": ?\\[(\"[a-z]{1,6}\", ?){0,3}\"[a-z]{1,6}\"\\] ?\\}";

static uint64_t trng = 0x243f6a8885a308d3ull;
static uint32_t rnd(uint32_t n) {
    trng ^= trng << 13;
    trng ^= trng >> 7;
    trng ^= trng << 17;
    return (uint32_t)((trng >> 33) % n);
}

static void make_vocab(void) {
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789 \"{}[]:,";
    uint8_t kinds[4096];
    n_tok = 0;
    tok_bytes[n_tok] = NULL, tok_len[n_tok] = 0, kinds[n_tok++] = SV_TOKKIND_EOG;
    for (int b = 1; b < 256; b++) { /* every byte on its own */
        tok_bytes[n_tok] = malloc(1);
        tok_bytes[n_tok][0] = (uint8_t)b;
        tok_len[n_tok] = 1;
        kinds[n_tok++] = SV_TOKKIND_NORMAL;
    }
    while (n_tok < 2000) { /* random words, some with spaces, some glued to JSON punctuation */
        uint32_t len = 2 + rnd(6);
        uint8_t *p = malloc(len);
        for (uint32_t i = 0; i < len; i++) p[i] = (uint8_t)alpha[i == 0 && rnd(3) == 0 ? 36 + rnd(8) : rnd(sizeof alpha - 1)];
        bool dup = false;
        for (uint32_t t = 256; t < n_tok && !dup; t++) dup = tok_len[t] == len && !memcmp(tok_bytes[t], p, len);
        if (dup) {
            free(p);
            continue;
        }
        tok_bytes[n_tok] = p;
        tok_len[n_tok] = len;
        kinds[n_tok++] = SV_TOKKIND_NORMAL;
    }
    sv_error_t err;
    CHECK(sv_token_set_create(n_tok, n_tok + 24, (const uint8_t *const *)tok_bytes, tok_len, kinds, &ts, &err) ==
              SV_OK,
          "token set: %s", err.message);
}

static sv_token_index_t *make_index(size_t max_mask_bytes) {
    sv_error_t err;
    sv_dfa_t *dfa = NULL;
    if (sv_regex_compile(pattern, strlen(pattern), NULL, &dfa, &err)) {
        CHECK(0, "regex: %s", err.message);
        return NULL;
    }
    sv_token_index_opts_t o;
    sv_token_index_opts_default(&o);
    o.ws_cap = CAP;
    if (max_mask_bytes) o.max_mask_bytes = max_mask_bytes;
    sv_token_index_t *ix = NULL;
    if (sv_token_index_create(dfa, ts, &o, &ix, &err)) {
        CHECK(0, "index: %s", err.message);
        sv_dfa_destroy(dfa);
    }
    return ix;
}

static void sleep_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static bool is_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

/* The successors of (s, w) computed without the token index's walks: the
 * tokens the reference index allows, each walked with sv_dfa_next, the
 * run counted here. keys: state * (CAP + 1) + run. Returns the count. */
static uint32_t successors(sv_token_index_t *ref, int32_t s, uint32_t w, uint32_t *keys, uint32_t cap_keys) {
    const sv_dfa_t *d = sv_token_index_dfa(ref);
    uint32_t words = sv_token_set_mask_words(ts);
    uint32_t *m = calloc(words, sizeof *m);
    sv_token_index_fill(ref, s, w, NULL, NULL, m);
    uint32_t n = 0;
    for (uint32_t id = 0; id < n_tok; id++) {
        if (!(m[id >> 5] >> (id & 31) & 1) || sv_token_set_kind(ts, (int32_t)id) != SV_TOKKIND_NORMAL) continue;
        int32_t x = s;
        uint32_t run = w;
        bool over = false;
        for (uint32_t i = 0; i < tok_len[id] && x >= 0; i++) {
            x = sv_dfa_next(d, x, tok_bytes[id][i]);
            run = is_ws(tok_bytes[id][i]) ? run + 1 : 0;
            over |= run > CAP;
        }
        CHECK(x >= 0 && !over, "allowed token %u walks (state %d) within the cap", id, x);
        if (x < 0 || over) continue;
        uint32_t k = (uint32_t)x * (CAP + 1) + run, j = 0;
        while (j < n && keys[j] != k) j++;
        if (j == n && n < cap_keys) keys[n++] = k;
    }
    free(m);
    return n;
}

/* Every known mask of ix equals ref's fill; returns how many are known. */
static uint32_t compare_known(sv_token_index_t *ix, sv_token_index_t *ref, int *bad) {
    uint32_t words = sv_token_set_mask_words(ts), known = 0;
    uint32_t *m = calloc(words, sizeof *m);
    uint32_t ns = sv_dfa_num_states(sv_token_index_dfa(ix));
    for (uint32_t s = 0; s < ns; s++)
        for (uint32_t w = 0; w <= CAP; w++) {
            if (!sv_token_index_mask_known(ix, (int32_t)s, w)) continue;
            known++;
            const uint32_t *got;
            memset(m, 0, words * sizeof *m);
            sv_token_index_fill(ref, (int32_t)s, w, NULL, NULL, m);
            if (sv_token_index_mask(ix, (int32_t)s, w, &got, NULL) || memcmp(got, m, words * sizeof *m)) (*bad)++;
        }
    free(m);
    return known;
}

/* A state with many successors, reached by a prefix of an accepted string. */
static int32_t walk(sv_token_index_t *ix, const char *prefix, uint32_t *ws) {
    int32_t s = 0;
    *ws = 0;
    for (const char *p = prefix; *p && s >= 0; p++) {
        s = sv_dfa_next(sv_token_index_dfa(ix), s, (uint8_t)*p);
        *ws = is_ws((uint8_t)*p) ? *ws + 1 : 0;
    }
    return s;
}

static void test_one_post(void) {
    sv_token_index_t *a = make_index(0), *ref = make_index(0);
    sv_prefetch_t *pf = NULL;
    sv_error_t err;
    sv_prefetch_limits_t lim;
    sv_prefetch_limits_default(&lim);
    lim.max_states = 4096;
    CHECK(sv_prefetch_create(2, &lim, &pf, &err) == SV_OK, "create: %s", err.message);
    if (!a || !ref || !pf) goto out;
    static const char *prefixes[] = {"{\"name\": \"ab ", "{ \"name\":\"x\", \"age\":1", "{\"name\":\"q\",\"age\":12,\"tags\":[\"a\", ",
                                     ""};
    uint32_t expect_known = 0;
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
        uint32_t w;
        int32_t s = walk(a, prefixes[p], &w);
        CHECK(s >= 0, "prefix %zu is live", p);
        if (s < 0) continue;
        static uint32_t keys[8192];
        uint32_t n = successors(ref, s, w, keys, 8192);
        keys[n++] = (uint32_t)s * (CAP + 1) + w;
        uint32_t fresh = 0;
        for (uint32_t i = 0; i < n; i++)
            fresh += !sv_token_index_mask_known(a, (int32_t)(keys[i] / (CAP + 1)), keys[i] % (CAP + 1));
        sv_prefetch_post(pf, a, s, w);
        CHECK(sv_prefetch_wait_idle(pf, 30000), "idle");
        uint32_t missing = 0;
        for (uint32_t i = 0; i < n; i++)
            missing += !sv_token_index_mask_known(a, (int32_t)(keys[i] / (CAP + 1)), keys[i] % (CAP + 1));
        expect_known += fresh;
        sv_token_index_stats_t st;
        sv_token_index_stats(a, &st);
        sv_prefetch_stats_t ps;
        sv_prefetch_stats(pf, &ps);
        printf("prefix %zu: state %d run %u: %u successors (%u new); index knows %u; workers computed %llu\n", p, s,
               w, n - 1, fresh, st.known_entries, (unsigned long long)ps.computed);
        CHECK(missing == 0, "every successor's mask is known (%u missing)", missing);
        CHECK(st.known_entries == expect_known, "the index knows exactly the state and its successors (%u vs %u)",
              st.known_entries, expect_known);
        CHECK(ps.computed == expect_known, "the workers computed them all (%llu)", (unsigned long long)ps.computed);
        if (p == 0) CHECK(n - 1 >= 5, "a state with several successors (%u)", n - 1);
    }
    int bad = 0;
    uint32_t known = compare_known(a, ref, &bad);
    CHECK(bad == 0 && known == expect_known, "%d of %u masks differ from the fresh index's", bad, known);

    /* Posting a completed state again does nothing. */
    sv_prefetch_stats_t s0, s1;
    sv_prefetch_stats(pf, &s0);
    uint32_t w;
    int32_t s = walk(a, prefixes[0], &w);
    sv_prefetch_post(pf, a, s, w);
    sv_prefetch_wait_idle(pf, 30000);
    sv_prefetch_stats(pf, &s1);
    CHECK(s1.skipped == s0.skipped + 1 && s1.jobs == s0.jobs, "a completed state is skipped");
    CHECK(s1.posted == s1.jobs + s1.dropped, "posted %llu = jobs %llu + dropped %llu", (unsigned long long)s1.posted,
          (unsigned long long)s1.jobs, (unsigned long long)s1.dropped);
    sv_prefetch_forget(pf, a);
out:
    sv_prefetch_destroy(pf);
    sv_token_index_destroy(a);
    sv_token_index_destroy(ref);
}

static void test_bounds(void) {
    sv_error_t err;
    sv_prefetch_t *pf = NULL;
    sv_prefetch_limits_t lim = {.queue_cap = 8, .max_states = 4};
    CHECK(sv_prefetch_create(0, NULL, &pf, &err) == SV_ERR_ARG, "0 threads refused");
    CHECK(sv_prefetch_create(1, &(sv_prefetch_limits_t){0, 4}, &pf, &err) == SV_ERR_ARG, "queue_cap 0 refused");
    CHECK(sv_prefetch_create(1, &lim, &pf, &err) == SV_OK, "create: %s", err.message);
    sv_token_index_t *a = make_index(0);
    if (!pf || !a) goto out;
    uint32_t w;
    int32_t s = walk(a, "{\"name\": \"ab ", &w);
    sv_prefetch_post(pf, a, s, w);
    sv_prefetch_wait_idle(pf, 30000);
    sv_token_index_stats_t st;
    sv_token_index_stats(a, &st);
    CHECK(st.known_entries == 4, "max_states 4: the state and 3 successors (%u)", st.known_entries);
    /* Not complete: a second post runs again (and finds nothing new). */
    sv_prefetch_post(pf, a, s, w);
    sv_prefetch_wait_idle(pf, 30000);
    sv_prefetch_stats_t ps;
    sv_prefetch_stats(pf, &ps);
    CHECK(ps.jobs == 2 && ps.computed == 4, "an incomplete state runs again (%llu jobs, %llu computed)",
          (unsigned long long)ps.jobs, (unsigned long long)ps.computed);
    /* Many posts at once: the counters add up. */
    uint32_t ns = sv_dfa_num_states(sv_token_index_dfa(a));
    for (uint32_t i = 0; i < ns; i++) sv_prefetch_post(pf, a, (int32_t)i, 0);
    sv_prefetch_post(pf, a, -1, 0);          /* dead: ignored */
    sv_prefetch_post(pf, a, (int32_t)ns, 0); /* out of range: ignored */
    CHECK(sv_prefetch_wait_idle(pf, 30000), "idle");
    sv_prefetch_stats(pf, &ps);
    printf("bounds: %u states posted to a queue of 8: %llu jobs, %llu dropped, %llu skipped\n", ns,
           (unsigned long long)ps.jobs, (unsigned long long)ps.dropped, (unsigned long long)ps.skipped);
    CHECK(ps.posted == ps.jobs + ps.dropped, "posted = jobs + dropped");
    CHECK(ps.posted + ps.skipped == ns + 2, "every post counted once");
    sv_prefetch_forget(pf, a);
    sv_prefetch_forget(pf, a); /* twice: harmless */

    /* A memo budget the first mask exceeds: prefetching for it stops. */
    sv_token_index_t *tiny = make_index(1);
    if (tiny) {
        sv_prefetch_stats_t p0, p1;
        sv_prefetch_stats(pf, &p0);
        sv_prefetch_post(pf, tiny, 0, 0);
        sv_prefetch_wait_idle(pf, 30000);
        sv_prefetch_post(pf, tiny, 1, 0);
        sv_prefetch_wait_idle(pf, 30000);
        sv_prefetch_stats(pf, &p1);
        CHECK(p1.budget_stops == p0.budget_stops + 1 && p1.jobs == p0.jobs + 1 && p1.dropped == p0.dropped + 1,
              "budget: one stop, one job, the next post dropped");
        sv_prefetch_forget(pf, tiny);
        sv_token_index_destroy(tiny);
    }
out:
    sv_prefetch_destroy(pf);
    sv_token_index_destroy(a);
}

/* ---- stress: posts while other threads read masks ---- */

typedef struct reader {
    sv_token_index_t *ix;
    uint64_t seed;
    int errors;
} reader_t;

static void *read_masks(void *arg) {
    reader_t *r = arg;
    uint32_t ns = sv_dfa_num_states(sv_token_index_dfa(r->ix));
    for (int i = 0; i < 300; i++) {
        sleep_us(40);
        r->seed = r->seed * 6364136223846793005ull + 1442695040888963407ull;
        const uint32_t *m;
        if (sv_token_index_mask(r->ix, (int32_t)((r->seed >> 33) % ns), (uint32_t)(r->seed >> 20) % (CAP + 1), &m,
                                NULL))
            r->errors++;
    }
    return NULL;
}

static void test_stress(void) {
    sv_error_t err;
    sv_prefetch_t *pf = NULL;
    sv_token_index_t *a = make_index(0), *ref = make_index(0);
    sv_prefetch_limits_t lim = {.queue_cap = 32, .max_states = 16};
    CHECK(sv_prefetch_create(3, &lim, &pf, &err) == SV_OK, "create: %s", err.message);
    if (!pf || !a || !ref) goto out;
    reader_t rd[2] = {{a, 1, 0}, {a, 2, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, read_masks, &rd[i]);
    uint32_t ns = sv_dfa_num_states(sv_token_index_dfa(a));
    for (int round = 0; round < 3; round++)
        for (uint32_t s = 0; s < ns; s++) {
            for (uint32_t w = 0; w <= CAP; w++) sv_prefetch_post(pf, a, (int32_t)s, w);
            sleep_us(50); /* let the workers keep up, alongside the readers */
        }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(sv_prefetch_wait_idle(pf, 60000), "idle");
    int bad = 0;
    uint32_t known = compare_known(a, ref, &bad);
    sv_prefetch_stats_t ps;
    sv_prefetch_stats(pf, &ps);
    printf("stress: %u states x %d runs; %u masks known, %llu computed by workers, %llu jobs\n", ns, CAP + 1, known,
           (unsigned long long)ps.computed, (unsigned long long)ps.jobs);
    CHECK(rd[0].errors == 0 && rd[1].errors == 0, "readers got their masks");
    CHECK(bad == 0, "%d of %u masks differ from the fresh index's", bad, known);
    CHECK(ps.computed > 0 && known > 100, "work was done alongside the readers");
out:
    sv_prefetch_destroy(pf);
    sv_token_index_destroy(a);
    sv_token_index_destroy(ref);
}

/* ---- forget while the workers run ---- */

static void test_forget(void) {
    sv_error_t err;
    sv_prefetch_t *pf = NULL;
    sv_prefetch_limits_t lim = {.queue_cap = 64, .max_states = 64};
    CHECK(sv_prefetch_create(4, &lim, &pf, &err) == SV_OK, "create: %s", err.message);
    if (!pf) return;
    sv_token_index_t *keep = make_index(0);
    int ok = 0;
    for (int round = 0; round < 30; round++) {
        sv_token_index_t *ix = make_index(0);
        if (!ix) break;
        uint32_t ns = sv_dfa_num_states(sv_token_index_dfa(ix));
        for (uint32_t s = 0; s < ns; s++) {
            sv_prefetch_post(pf, ix, (int32_t)s, s % (CAP + 1));
            if (keep && s % 7 == 0) sv_prefetch_post(pf, keep, (int32_t)s, 0);
        }
        sleep_us(round * 20); /* from at once to when jobs are mid-way */
        sv_prefetch_forget(pf, ix);
        sv_token_index_destroy(ix); /* a worker touching it now is a use after free */
        ok++;
    }
    CHECK(ok == 30, "30 rounds of post, forget, free");
    CHECK(sv_prefetch_wait_idle(pf, 60000), "idle");
    sv_prefetch_stats_t ps;
    sv_prefetch_stats(pf, &ps);
    printf("forget: %llu jobs, %llu dropped\n", (unsigned long long)ps.jobs, (unsigned long long)ps.dropped);
    CHECK(ps.dropped > 0 && ps.jobs > 0, "forget removed queued jobs; workers ran (%llu jobs)",
          (unsigned long long)ps.jobs);
    /* Destroy with jobs queued. */
    if (keep)
        for (uint32_t s = 0; s < sv_dfa_num_states(sv_token_index_dfa(keep)); s++) sv_prefetch_post(pf, keep, (int32_t)s, 1);
    sv_prefetch_destroy(pf);
    sv_token_index_destroy(keep);
}

int main(void) {
    make_vocab();
    if (ts) {
        test_one_post();
        test_bounds();
        test_stress();
        test_forget();
    }
    sv_token_set_destroy(ts);
    for (uint32_t i = 0; i < n_tok; i++) free(tok_bytes[i]);
    return test_summary("test_prefetch: successor masks, bounds, budget, concurrent readers, forget");
}
