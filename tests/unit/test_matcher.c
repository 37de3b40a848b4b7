/* test_matcher.c — the matcher: mask, accept, rollback, clone, EOG,
 * jump-forward and budget-aware completion.
 *
 *   test_matcher [--tokenizer tokenizer.json] [--walks N]
 *
 * Unit checks on a small hand-made vocabulary with a greedy longest-match
 * encoder, then, on every schema of a suite (schemas/ plus schemas with long
 * keys written here), random walks:
 *   - jump-forward: whenever the state is forced, the forced tokens are
 *     taken; their bytes must be exactly the forced bytes (with the previous
 *     token's bytes in front when it is rolled back), and they must equal the
 *     tokenizer's own encoding of that text (no non-canonical split);
 *   - budget: with the shortest instance taking L tokens (sv_matcher_min_tokens),
 *     walks that pick uniformly among the allowed tokens, for every budget
 *     from L to L + 50, always end accepting within the budget;
 *   - shared notes: 8 matchers of one index stepped in turn (as an engine's
 *     batch steps them), sharing the tokens-to-end and filtered masks the
 *     index notes (fsm/token_memo.c), end accepting within their budgets;
 *     and so do 8 on an index whose memo budget is spent (no note kept, no
 *     mask memoized: every mask computed afresh).
 * The notes' own API (set once, per owner, filtered masks by limit) first.
 * With --tokenizer the walks use a real tokenizer (make test-extended: Llama 3). */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/matcher.h"
#include "fsm/regex.h"
#include "fsm/schema.h"
#include "src/constraint/tokens.h"
#include "util/rng.h"

#ifndef SV_SOURCE_DIR
#define SV_SOURCE_DIR "."
#endif

#include "unit_vocab.h"

/* ---- a small vocabulary with a greedy encoder ------------------------------- */

typedef struct {
    uint32_t n;
    char **tok;
    uint32_t *len;
    uint8_t *kind;
} small_t;

static void sadd(small_t *v, const char *s, uint32_t len, uint8_t kind) {
    v->tok = realloc(v->tok, (v->n + 1) * sizeof *v->tok);
    v->len = realloc(v->len, (v->n + 1) * sizeof *v->len);
    v->kind = realloc(v->kind, v->n + 1);
    v->tok[v->n] = malloc(len + 1);
    memcpy(v->tok[v->n], s, len);
    v->len[v->n] = len;
    v->kind[v->n] = kind;
    v->n++;
}

/* Longest match at each position. */
static int greedy_encode(void *ctx, const uint8_t *s, size_t n, int32_t *ids, int cap) {
    small_t *v = ctx;
    int k = 0;
    size_t i = 0;
    while (i < n) {
        int32_t best = -1;
        uint32_t bl = 0;
        for (uint32_t t = 0; t < v->n; t++)
            if (v->kind[t] == SV_TOKKIND_NORMAL && v->len[t] > bl && v->len[t] <= n - i &&
                memcmp(v->tok[t], s + i, v->len[t]) == 0)
                best = (int32_t)t, bl = v->len[t];
        if (best < 0 || k >= cap) return -1;
        ids[k++] = best;
        i += bl;
    }
    return k;
}

static int32_t find(const small_t *v, const char *s) {
    for (uint32_t t = 0; t < v->n; t++)
        if (v->len[t] == strlen(s) && memcmp(v->tok[t], s, v->len[t]) == 0) return (int32_t)t;
    return -1;
}

static bool allowed(const uint32_t *m, int32_t id) { return (m[id >> 5] >> (id & 31)) & 1u; }

static sv_dfa_t *compile_schema(const char *text) {
    sv_schema_opts_t o;
    sv_schema_opts_default(&o);
    sv_dfa_t *d = NULL;
    sv_error_t err;
    if (sv_schema_compile(text, strlen(text), &o, &d, NULL, &err)) {
        fprintf(stderr, "schema does not compile: %s\n", err.message);
        return NULL;
    }
    return d;
}

static void unit_tests(void) {
    small_t v = {0};
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        sadd(&v, &c, 1, SV_TOKKIND_NORMAL);
    }
    static const char *const words[] = {"{\"", "\"name", "name", "\": ", "\": \"", "\"}", "\", \"", "age", "\"age",
                                        "ab", "abc", "12", "true", "}", "\", "};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) sadd(&v, words[i], (uint32_t)strlen(words[i]), 0);
    int32_t eos = (int32_t)v.n;
    sadd(&v, "<eos>", 5, SV_TOKKIND_EOG);
    int32_t never = (int32_t)v.n;
    sadd(&v, "<x>", 3, SV_TOKKIND_NEVER);
    sv_token_set_t *ts;
    sv_error_t err;
    CHECK(sv_token_set_create(v.n, v.n, (const uint8_t *const *)v.tok, v.len, v.kind, &ts, &err) == SV_OK, "set");
    CHECK(sv_token_set_has_all_bytes(ts), "every byte is a token");
    sv_tokenizer_iface_t iface = {&v, greedy_encode, NULL};

    sv_dfa_t *d = compile_schema(
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":3},\"age\":{\"type\":\"integer\","
        "\"minimum\":0,\"maximum\":99}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}");
    if (!d) {
        failures++;
        return;
    }
    sv_token_index_t *ix;
    CHECK(sv_token_index_create(d, ts, NULL, &ix, &err) == SV_OK, "index");
    sv_matcher_t *m;
    CHECK(sv_matcher_create(ix, &iface, 0, &m, &err) == SV_OK, "matcher");
    const uint32_t *mask;
    /* mask at the start: only tokens that are prefixes of {"name": " */
    CHECK(sv_matcher_mask(m, &mask, &err) == SV_OK, "mask");
    CHECK(allowed(mask, find(&v, "{\"")) && allowed(mask, '{') && !allowed(mask, find(&v, "}")) && !allowed(mask, eos) &&
              !allowed(mask, never),
          "start mask");
    /* forced: the whole key; the greedy encoder gives {" + "name + ": " */
    int32_t ids[16];
    uint32_t n, rb;
    CHECK(sv_matcher_forced(m, ids, 16, &n, &rb, &err) == SV_OK, "forced");
    /* greedy: {" name ": " ; free text follows and there is no pre-tokenizer
     * splitter, so the last token is held back */
    CHECK(n == 2 && rb == 0 && ids[0] == find(&v, "{\"") && ids[1] == find(&v, "name"), "forced tokens: n=%u", n);
    for (uint32_t i = 0; i < n; i++) CHECK(sv_matcher_accept(m, ids[i]), "accept forced %u", i);
    CHECK(!sv_matcher_accept(m, find(&v, "}")), "a disallowed token is refused");
    CHECK(sv_matcher_num_tokens(m) == 2, "refusal changes nothing");
    CHECK(sv_matcher_accept(m, find(&v, "\": \"")), "accept \": \"");
    CHECK(sv_matcher_accept(m, find(&v, "abc")), "accept abc");
    /* maxLength 3: another letter is refused, the closing quote allowed */
    CHECK(sv_matcher_mask(m, &mask, &err) == SV_OK && !allowed(mask, 'a') && allowed(mask, '"'), "maxLength mask");
    CHECK(!sv_matcher_accept(m, 'a'), "fourth letter refused");
    /* rollback two tokens and take another way */
    CHECK(sv_matcher_rollback(m, 2, &err) == SV_OK && sv_matcher_num_tokens(m) == 2, "rollback");
    CHECK(sv_matcher_rollback(m, 3, &err) == SV_ERR_ARG, "rollback past the start is refused");
    CHECK(sv_matcher_accept(m, find(&v, "\": \"")) && sv_matcher_accept(m, find(&v, "ab")), "after rollback");
    sv_matcher_t *c;
    CHECK(sv_matcher_clone(m, &c, &err) == SV_OK, "clone");
    CHECK(sv_matcher_accept(m, '"'), "close the string");
    CHECK(sv_matcher_state(c) != sv_matcher_state(m), "the clone is independent");
    CHECK(sv_matcher_forced(m, ids, 16, &n, &rb, &err) == SV_OK && n >= 1, "forced after the string");
    /* the forced text is , "age": ; merged with the previous token '"' the
     * greedy encoding is '", "' 'age' '": ' and the last one is held back */
    CHECK(rb == 1 && n == 2 && ids[0] == find(&v, "\", \"") && ids[1] == find(&v, "age"), "merged forced tokens");
    for (uint32_t i = 0; i < rb; i++) CHECK(sv_matcher_rollback(m, 1, &err) == SV_OK, "forced rollback");
    for (uint32_t i = 0; i < n; i++) CHECK(sv_matcher_accept(m, ids[i]), "accept forced");
    CHECK(sv_matcher_accept(m, find(&v, "\": ")), "the held-back piece");
    CHECK(sv_matcher_accept(m, find(&v, "12")), "age 12");
    CHECK(!sv_matcher_is_accepting(m), "not accepting before }");
    CHECK(sv_matcher_accept(m, find(&v, "}")), "close");
    CHECK(sv_matcher_is_accepting(m), "accepting after }");
    CHECK(sv_matcher_is_finished(m), "nothing can follow the object");
    CHECK(sv_matcher_mask(m, &mask, &err) == SV_OK && allowed(mask, eos) && !allowed(mask, '}'), "EOS only at the end");
    CHECK(sv_matcher_accept(m, eos) && sv_matcher_is_finished(m), "EOS ends the walk");
    CHECK(!sv_matcher_accept(m, eos), "nothing after EOS");
    CHECK(sv_matcher_rollback(m, 1, &err) == SV_OK && !sv_matcher_accept(m, never), "NEVER tokens are refused");
    sv_matcher_destroy(c);
    sv_matcher_destroy(m);

    /* budget: {"name": "", "age": 0} is the shortest instance */
    uint32_t shortest = (uint32_t)strlen("{\"name\": \"\", \"age\": 0}");
    CHECK(sv_matcher_create(ix, NULL, 5, &m, &err) == SV_ERR_BUDGET, "a budget below the shortest instance is refused");
    CHECK(strstr(err.message, "at least"), "the refusal says how many tokens: %s", err.message);
    CHECK(sv_matcher_create(ix, NULL, shortest, &m, &err) == SV_OK, "byte budget: %s", err.message);
    CHECK(sv_matcher_min_tokens(m) == shortest, "byte distance %u", sv_matcher_min_tokens(m));
    sv_matcher_destroy(m);
    CHECK(sv_matcher_create(ix, &iface, 8, &m, &err) == SV_OK, "token budget 8: %s", err.message);
    uint32_t need = sv_matcher_min_tokens(m);
    CHECK(need <= 8 && need < shortest, "tokens needed %u", need);
    sv_matcher_destroy(m);
    sv_token_index_destroy(ix);
    sv_token_set_destroy(ts);

    /* A vocabulary without some bytes as tokens of their own (SmolLM2 lacks
     * 21: a few controls and bytes no UTF-8 text holds). The distance in
     * bytes still bounds the tokens needed where no shortest completion
     * takes a missing byte, and not where one must. */
    small_t w = {0};
    for (int b = 0; b < 256; b++) {
        if (b == 4 || b == 0xC0 || b == 0xC1 || b >= 0xF5) continue;
        char ch = (char)b;
        sadd(&w, &ch, 1, SV_TOKKIND_NORMAL);
    }
    sv_token_set_t *ts2;
    CHECK(sv_token_set_create(w.n, w.n, (const uint8_t *const *)w.tok, w.len, w.kind, &ts2, &err) == SV_OK, "set 2");
    CHECK(!sv_token_set_has_all_bytes(ts2), "bytes are missing");
    sv_dfa_t *d2 = compile_schema(
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":3},\"age\":{\"type\":\"integer\","
        "\"minimum\":0,\"maximum\":99}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}");
    sv_dfa_t *d3 = NULL;
    const char *rx = "a\\x04|b\\x04c";
    CHECK(sv_regex_compile(rx, strlen(rx), NULL, &d3, &err) == SV_OK, "regex: %s", err.message);
    sv_token_index_t *ix2 = NULL, *ix3 = NULL;
    CHECK(d2 && sv_token_index_create(d2, ts2, NULL, &ix2, &err) == SV_OK, "index 2");
    CHECK(d3 && sv_token_index_create(d3, ts2, NULL, &ix3, &err) == SV_OK, "index 3");
    CHECK(ix2 && sv_token_index_bytes_bound(ix2), "no shortest completion of the schema takes a missing byte");
    CHECK(ix3 && !sv_token_index_bytes_bound(ix3), "the regex's completions take \\x04");
    CHECK(ix2 && sv_matcher_create(ix2, NULL, shortest, &m, &err) == SV_OK, "byte budget without every byte: %s",
          err.message);
    if (ix2 && m) {
        CHECK(sv_matcher_min_tokens(m) == shortest, "byte distance %u", sv_matcher_min_tokens(m));
        /* the budget binds at once: every mask keeps the shortest instance's next byte and drops a longer way */
        const char *inst = "{\"name\": \"\", \"age\": 0}";
        for (uint32_t i = 0; inst[i]; i++) {
            CHECK(sv_matcher_mask(m, &mask, &err) == SV_OK && mask && allowed(mask, find(&w, (char[]){inst[i], 0})),
                  "budget mask keeps byte %u", i);
            if (i == 10) CHECK(!allowed(mask, find(&w, "a")), "no letter fits the budget in the name");
            CHECK(sv_matcher_accept(m, find(&w, (char[]){inst[i], 0})), "accept byte %u", i);
        }
        CHECK(sv_matcher_is_accepting(m), "the shortest instance within its budget");
        sv_matcher_destroy(m);
    }
    CHECK(ix3 && sv_matcher_create(ix3, NULL, 4, &m, &err) == SV_ERR_ARG, "a budget the bytes cannot bound is refused");
    sv_token_index_destroy(ix2);
    sv_token_index_destroy(ix3);
    sv_token_set_destroy(ts2);
    for (uint32_t i = 0; i < w.n; i++) free(w.tok[i]);
    free(w.tok);
    free(w.len);
    free(w.kind);
    for (uint32_t i = 0; i < v.n; i++) free(v.tok[i]);
    free(v.tok);
    free(v.len);
    free(v.kind);
}

/* ---- random walks ----------------------------------------------------------------------- */

typedef struct {
    const sv_token_set_t *ts;
    const sv_tokenizer_iface_t *tok;
    sv_rng_t rng;
    uint64_t walks, forced_steps, forced_tokens, merges, budget_walks;
} walker_t;

static int32_t pick(walker_t *w, const uint32_t *mask, uint32_t *count) {
    uint32_t words = sv_token_set_mask_words(w->ts), k = 0;
    for (uint32_t i = 0; i < words; i++) k += (uint32_t)__builtin_popcount(mask[i]);
    *count = k;
    if (!k) return -1;
    uint32_t r = sv_rng_below(&w->rng, k);
    for (uint32_t i = 0; i < words; i++) {
        uint32_t c = (uint32_t)__builtin_popcount(mask[i]);
        if (r < c) {
            uint32_t x = mask[i];
            while (r--) x &= x - 1;
            return (int32_t)(i * 32 + (uint32_t)__builtin_ctz(x));
        }
        r -= c;
    }
    return -1;
}

/* One walk; returns false on a failure (already reported). */
static bool walk(walker_t *w, sv_token_index_t *ix, const char *name, int64_t budget, bool jump) {
    sv_error_t err;
    sv_matcher_t *m;
    if (sv_matcher_create(ix, w->tok, budget, &m, &err)) {
        CHECK(0, "%s: matcher with budget %lld: %s", name, (long long)budget, err.message);
        return false;
    }
    const sv_dfa_t *d = sv_token_index_dfa(ix);
    uint8_t *text = malloc(1 << 16);
    int32_t *hist = malloc(sizeof *hist * 8192);
    size_t tlen = 0, nh = 0;
    bool ok = true;
    int32_t ids[4096];
    int32_t enc[4096];
    for (int step = 0; step < 4000 && ok; step++) {
        if (sv_matcher_is_finished(m)) break;
        if (jump) {
            uint32_t n, rb;
            if (sv_matcher_forced(m, ids, 4096, &n, &rb, &err)) {
                CHECK(0, "%s: forced: %s", name, err.message);
                ok = false;
                break;
            }
            if (n) {
                /* the expected text: forced bytes, after the rolled-back token */
                static uint8_t f[8192];
                bool ends;
                uint32_t flen = sv_token_index_forced(ix, sv_matcher_state(m), f, sizeof f, &ends);
                uint8_t expect[8192];
                size_t el = 0;
                if (rb) {
                    CHECK(rb == 1 && nh > 0, "%s: rollback %u", name, rb);
                    uint32_t pl;
                    const uint8_t *pb = sv_token_set_bytes(w->ts, hist[nh - 1], &pl);
                    memcpy(expect, pb, pl);
                    el = pl;
                    tlen -= pl;
                    nh--;
                    sv_matcher_rollback(m, 1, NULL);
                    w->merges++;
                }
                memcpy(expect + el, f, flen);
                el += flen;
                size_t got = 0;
                for (uint32_t i = 0; i < n; i++) {
                    uint32_t L;
                    const uint8_t *b = sv_token_set_bytes(w->ts, ids[i], &L);
                    CHECK(b && got + L <= el && memcmp(expect + got, b, L) == 0,
                          "%s: forced token %u ('%.*s') is not the forced text '%.*s' (rollback %u, forced '%.*s')", name, i,
                          (int)L, b ? (const char *)b : "", (int)el, (const char *)expect, rb, (int)flen, (const char *)f);
                    if (!(b && got + L <= el)) {
                        ok = false;
                        break;
                    }
                    memcpy(text + tlen, b, L);
                    tlen += L;
                    got += L;
                    hist[nh++] = ids[i];
                    CHECK(sv_matcher_accept(m, ids[i]), "%s: forced token %u refused", name, i);
                }
                if (!ok) break;
                CHECK(got > (rb ? el - flen : 0), "%s: forced tokens add nothing", name);
                /* canonical: the tokenizer's own encoding of exactly that text */
                int ne = w->tok->encode(w->tok->ctx, expect, got, enc, 4096);
                CHECK(ne == (int)n && memcmp(enc, ids, n * sizeof *ids) == 0,
                      "%s: forced tokens are not the tokenizer's encoding of '%.*s' (%d vs %u tokens)", name, (int)got,
                      (const char *)expect, ne, n);
                w->forced_steps++;
                w->forced_tokens += n;
                continue;
            }
        }
        const uint32_t *mask;
        if (sv_matcher_mask(m, &mask, &err)) {
            CHECK(0, "%s: mask: %s", name, err.message);
            ok = false;
            break;
        }
        uint32_t count;
        int32_t id = pick(w, mask, &count);
        if (id < 0) {
            CHECK(sv_matcher_is_accepting(m), "%s: budget %lld: dead end after %zu tokens, not accepting", name,
                  (long long)budget, nh);
            break;
        }
        if (sv_token_set_kind(w->ts, id) == SV_TOKKIND_EOG) {
            CHECK(sv_matcher_is_accepting(m), "%s: EOG allowed while not accepting", name);
            CHECK(sv_matcher_accept(m, id), "%s: EOG refused", name);
            break;
        }
        CHECK(sv_matcher_accept(m, id), "%s: an allowed token is refused", name);
        uint32_t L;
        const uint8_t *b = sv_token_set_bytes(w->ts, id, &L);
        if (tlen + L > (1 << 16) - 1 || nh >= 8190) break;
        memcpy(text + tlen, b, L);
        tlen += L;
        hist[nh++] = id;
    }
    if (budget > 0 && ok) {
        CHECK((int64_t)sv_matcher_num_tokens(m) <= budget, "%s: %u tokens over a budget of %lld", name,
              sv_matcher_num_tokens(m), (long long)budget);
        CHECK(sv_matcher_is_accepting(m), "%s: budget %lld: ended without accepting", name, (long long)budget);
        CHECK(sv_dfa_matches(d, text, tlen), "%s: budget %lld: the text is not accepted", name, (long long)budget);
        w->budget_walks++;
    }
    w->walks++;
    free(text);
    free(hist);
    sv_matcher_destroy(m);
    return ok;
}

static const char *const long_keys[] = {
    "{\"type\":\"object\",\"properties\":{\"customer_full_name\":{\"type\":\"string\"},\"customer_email_address\":"
    "{\"type\":\"string\",\"format\":\"email\"},\"number_of_items_ordered\":{\"type\":\"integer\"},"
    "\"is_priority_shipping_requested\":{\"type\":\"boolean\"}},\"required\":[\"customer_full_name\","
    "\"customer_email_address\",\"number_of_items_ordered\",\"is_priority_shipping_requested\"],"
    "\"additionalProperties\":false}",
    "{\"type\":\"object\",\"properties\":{\"internationalization_settings\":{\"type\":\"object\",\"properties\":"
    "{\"default_language_code\":{\"enum\":[\"en-US\",\"fr-FR\",\"de-DE\"]},\"fallback_language_codes\":{\"type\":"
    "\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^[a-z]{2}$\"},\"maxItems\":3}},\"required\":"
    "[\"default_language_code\"]}},\"required\":[\"internationalization_settings\"]}",
    "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"$schema_version_identifier\":{\"const\":"
    "\"2024-01-01\"},\"\\\"quoted key\\\"\":{\"type\":\"number\"}},\"required\":[\"$schema_version_identifier\"]},"
    "\"minItems\":1,\"maxItems\":3}",
    "{\"enum\":[\"The quick brown fox jumps over the lazy dog\",\"Lorem ipsum dolor sit amet, consectetur\","
    "\"日本語のテキストです\"]}",
};

/* ---- notes: the index's memo the matchers of a constraint share ------------------------ */

static void notes_api(sv_token_index_t *ix, const sv_token_set_t *ts) {
    int a = 1, b = 2; /* two owners */
    uint32_t v = 0;
    CHECK(!sv_token_index_note_get(ix, &a, SV_NOTE_U, 3, 0, &v), "no note before one is set");
    CHECK(sv_token_index_note_set(ix, &a, SV_NOTE_U, 3, 0, 5, &v) && v == 5, "a note is set");
    CHECK(sv_token_index_note_set(ix, &a, SV_NOTE_U, 3, 0, 7, &v) && v == 5, "a note is set once (got %u)", v);
    CHECK(sv_token_index_note_get(ix, &a, SV_NOTE_U, 3, 0, &v) && v == 5, "the first value stands");
    CHECK(!sv_token_index_note_get(ix, &a, SV_NOTE_MAX_U, 3, 0, &v), "kinds are apart");
    CHECK(!sv_token_index_note_get(ix, &b, SV_NOTE_U, 3, 0, &v), "another owner sees no note");
    CHECK(!sv_token_index_note_set(ix, &b, SV_NOTE_U, 4, 0, 1, &v), "another owner keeps none");
    uint32_t words = sv_token_set_mask_words(ts);
    uint32_t *m1 = calloc(words, sizeof *m1), *m2 = calloc(words, sizeof *m2);
    m1[0] = 0x5;
    CHECK(!sv_token_index_filtered_get(ix, &a, 3, 0, 9, m2), "no filtered mask before one is put");
    sv_token_index_filtered_put(ix, &a, 3, 0, 9, m1);
    CHECK(sv_token_index_filtered_get(ix, &a, 3, 0, 9, m2) && !memcmp(m1, m2, words * sizeof *m1),
          "a filtered mask comes back");
    CHECK(!sv_token_index_filtered_get(ix, &a, 3, 0, 8, m2), "filtered masks are by limit");
    m1[0] = 0x7;
    sv_token_index_filtered_put(ix, &a, 3, 0, 9, m1);
    CHECK(sv_token_index_filtered_get(ix, &a, 3, 0, 9, m2) && m2[0] == 0x5, "a filtered mask is set once");
    /* many notes: the table grows and keeps them all */
    for (int32_t st = 0; st < 5000; st++) sv_token_index_note_set(ix, &a, SV_NOTE_MAX_U, st, 0, (uint32_t)st * 3, &v);
    int bad = 0;
    for (int32_t st = 0; st < 5000; st++)
        bad += !sv_token_index_note_get(ix, &a, SV_NOTE_MAX_U, st, 0, &v) || v != (uint32_t)st * 3;
    CHECK(bad == 0, "%d of 5000 notes lost as the table grew", bad);
    free(m1);
    free(m2);
}

/* k matchers of one index, with budgets from `from` up, stepped in turn
 * as an engine's batch steps them: each takes a random allowed token, and
 * each must end accepting within its budget, whatever notes the others
 * left in the index. */
static void walk_many(walker_t *w, sv_token_index_t *ix, const char *name, int64_t from, int k) {
    enum { K = 8 };
    sv_matcher_t *m[K];
    sv_error_t err;
    bool done[K] = {0};
    if (k > K) k = K;
    for (int i = 0; i < k; i++)
        if (sv_matcher_create(ix, w->tok, from + i, &m[i], &err)) {
            CHECK(0, "%s: matcher with budget %lld: %s", name, (long long)(from + i), err.message);
            for (int j = 0; j < i; j++) sv_matcher_destroy(m[j]);
            return;
        }
    for (int left = k, step = 0; left > 0 && step < 4000; step++)
        for (int i = 0; i < k; i++) {
            if (done[i]) continue;
            const uint32_t *mask;
            uint32_t count;
            int32_t id = -1;
            if (!sv_matcher_is_finished(m[i]) && sv_matcher_mask(m[i], &mask, &err) == SV_OK)
                id = pick(w, mask, &count);
            if (id < 0 || sv_token_set_kind(w->ts, id) == SV_TOKKIND_EOG) {
                CHECK(sv_matcher_is_accepting(m[i]), "%s: matcher %d of %d (budget %lld): dead end after %u tokens",
                      name, i, k, (long long)(from + i), sv_matcher_num_tokens(m[i]));
                CHECK((int64_t)sv_matcher_num_tokens(m[i]) <= from + i, "%s: %u tokens over a budget of %lld", name,
                      sv_matcher_num_tokens(m[i]), (long long)(from + i));
                done[i] = true;
                left--;
                w->budget_walks++;
                continue;
            }
            int32_t st = sv_matcher_state(m[i]);
            CHECK(sv_matcher_accept(m[i], id), "%s: matcher %d (budget %lld): token %d allowed in state %d is refused",
                  name, i, (long long)(from + i), id, st);
        }
    for (int i = 0; i < k; i++) {
        CHECK(done[i], "%s: matcher %d never ended", name, i);
        sv_matcher_destroy(m[i]);
    }
    w->walks += (uint64_t)k;
}

int main(int argc, char **argv) {
    const char *tokpath = NULL;
    uint32_t nwalks = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tokpath = argv[++i];
        else if (!strcmp(argv[i], "--walks") && i + 1 < argc) nwalks = (uint32_t)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--tokenizer FILE] [--walks N]\n", argv[0]);
            return 64;
        }
    }
    unit_tests();
    int unit_failures = failures;

    walker_t w = {0};
    sv_rng_seed(&w.rng, 7);
    sv_error_t err;
    sv_tokens_t *tok = NULL;
    small_t v = {0};
    sv_token_set_t *own = NULL;
    sv_tokenizer_iface_t small_iface;
    if (tokpath) {
        if (sv_tokens_load(tokpath, NULL, 0, &tok, &err)) {
            fprintf(stderr, "%s: %s\n", tokpath, err.message);
            return 1;
        }
        w.ts = sv_tokens_set(tok);
        w.tok = sv_tokens_iface(tok);
    } else {
        /* every byte, plus common JSON pieces and words, greedily encoded */
        for (int b = 0; b < 256; b++) {
            char c = (char)b;
            sadd(&v, &c, 1, SV_TOKKIND_NORMAL);
        }
        static const char *const pieces[] = {
            "{\"", "\"}", "\": ", "\": \"", "\", \"", ", \"", "\", ", "customer", "_full", "_name", "email", "_address",
            "number", "_of", "_items", "ordered", "is", "_priority", "shipping", "requested", "true", "false", "null",
            "settings", "language", "code", "en", "-US", "fr", "de", "The", " quick", " brown", " fox", "日本", "語",
            "schema", "version", "\\\"", "2024", "-01", "\": [", "], \"", "\"]", "}]", "[{", "}, {", "12", "345",
        };
        for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
            sadd(&v, pieces[i], (uint32_t)strlen(pieces[i]), SV_TOKKIND_NORMAL);
        sadd(&v, "</s>", 4, SV_TOKKIND_EOG);
        if (sv_token_set_create(v.n, v.n, (const uint8_t *const *)v.tok, v.len, v.kind, &own, &err)) return 1;
        w.ts = own;
        small_iface = (sv_tokenizer_iface_t){&v, greedy_encode, NULL};
        w.tok = &small_iface;
    }

    {
        sv_dfa_t *d = compile_schema("{\"type\":\"array\",\"items\":{\"type\":\"string\"}}");
        sv_token_index_t *ix;
        if (d && sv_token_index_create(d, w.ts, NULL, &ix, &err) == SV_OK) {
            notes_api(ix, w.ts);
            sv_token_index_destroy(ix);
        } else
            CHECK(0, "the notes' index");
    }

    /* the suite: long-key schemas, then schemas/ */
    char **texts = NULL, **names = NULL;
    size_t nt = 0;
    for (size_t i = 0; i < sizeof long_keys / sizeof long_keys[0]; i++) {
        texts = realloc(texts, (nt + 1) * sizeof *texts);
        names = realloc(names, (nt + 1) * sizeof *names);
        texts[nt] = strdup(long_keys[i]);
        char nm[32];
        snprintf(nm, sizeof nm, "long_keys[%zu]", i);
        names[nt++] = strdup(nm);
    }
    DIR *dp = opendir(SV_SOURCE_DIR "/schemas");
    struct dirent *e;
    while (dp && (e = readdir(dp))) {
        if (!strstr(e->d_name, ".json")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/schemas/%s", SV_SOURCE_DIR, e->d_name);
        json_t *doc = json_load_file(path, 0, NULL);
        char *t = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!t) continue;
        texts = realloc(texts, (nt + 1) * sizeof *texts);
        names = realloc(names, (nt + 1) * sizeof *names);
        texts[nt] = t;
        names[nt++] = strdup(e->d_name);
    }
    if (dp) closedir(dp);

    uint32_t nschemas = 0;
    for (size_t i = 0; i < nt; i++) {
        sv_dfa_t *d = compile_schema(texts[i]);
        if (!d) {
            CHECK(0, "%s does not compile", names[i]);
            continue;
        }
        sv_token_index_t *ix;
        if (sv_token_index_create(d, w.ts, NULL, &ix, &err)) {
            sv_dfa_destroy(d);
            continue;
        }
        nschemas++;
        for (uint32_t k = 0; k < nwalks; k++) walk(&w, ix, names[i], 0, true);
        sv_matcher_t *m;
        uint32_t L = 0;
        if (sv_matcher_create(ix, w.tok, 0, &m, &err) == SV_OK) {
            L = sv_matcher_min_tokens(m);
            sv_matcher_destroy(m);
            for (uint32_t b = L; b <= L + 50; b++) walk(&w, ix, names[i], b, (b & 1) != 0);
            /* matchers stepped in turn, sharing the index's notes; then on
             * an index whose memo budget keeps no note, each on its own */
            for (uint32_t b = L; b <= L + 24; b += 8) walk_many(&w, ix, names[i], b, 8);
        }
        sv_token_index_destroy(ix);
        sv_token_index_opts_t small;
        sv_token_index_opts_default(&small);
        small.max_mask_bytes = 1;
        sv_dfa_t *d2 = L ? compile_schema(texts[i]) : NULL;
        if (d2 && sv_token_index_create(d2, w.ts, &small, &ix, &err) == SV_OK) {
            walk_many(&w, ix, names[i], L, 8);
            sv_token_index_destroy(ix);
        } else
            sv_dfa_destroy(d2);
        free(texts[i]);
        free(names[i]);
    }
    free(texts);
    free(names);
    printf("test_matcher: unit checks %s; %u schemas, %llu walks (%llu under a budget), %llu jump-forwards "
           "(%llu tokens, %llu merged with the previous token), %s tokenizer: %d failures\n",
           unit_failures ? "FAILED" : "passed", nschemas, (unsigned long long)w.walks,
           (unsigned long long)w.budget_walks, (unsigned long long)w.forced_steps, (unsigned long long)w.forced_tokens,
           (unsigned long long)w.merges, tokpath ? tokpath : "greedy synthetic", failures);
    sv_token_set_destroy(own);
    for (uint32_t i = 0; i < v.n; i++) free(v.tok[i]);
    free(v.tok);
    free(v.len);
    free(v.kind);
    sv_tokens_destroy(tok);
    return failures ? 1 : 0;
}
