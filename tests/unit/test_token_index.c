/* test_token_index.c — token masks against brute force.
 *
 *   test_token_index [--tokenizer tokenizer.json] [--states N] [--min-constraints N]
 *
 * For every constraint (the schemas of schemas/, the JSON-Schema-Test-Suite
 * draft 2020-12 groups that compile, and a list of regexes; schemas in both
 * canonical and flexible whitespace), it takes the start state and N random
 * states (default 12) and checks the token index's mask bit by bit against a
 * brute-force check of every token: run the DFA over the token's bytes, apply
 * the whitespace cap (flexible mode, every run length 0..cap), allow EOG
 * exactly in accepting states, never allow NEVER tokens or padding rows. It
 * also checks the memoized mask equals the uncached fill, that equal masks
 * share storage (hash-consing), and sv_token_index_next against the walk.
 *
 * Without --tokenizer the vocabulary is synthetic (every byte, JSON
 * punctuation runs, words, digits, whitespace runs, valid and broken UTF-8,
 * duplicates, special and EOG tokens, padding); with it, a real
 * tokenizer.json (make test-extended uses Llama 3). */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/regex.h"
#include "fsm/schema.h"
#include "fsm/token_index.h"
#include "src/constraint/tokens.h"
#include "util/rng.h"

#ifndef SV_SOURCE_DIR
#define SV_SOURCE_DIR "."
#endif

#include "unit_vocab.h"

static void synthetic(vocab_t *v, sv_rng_t *rng) {
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        add(v, &c, 1, SV_TOKKIND_NORMAL);
    }
    static const char *const fixed[] = {
        "{\"", "\"}", "\": ", "\": \"", "\", \"", ", ", ": ", "\"", "[{", "}]", "}, {", "null", "true", "false",
        "\\\"", "\\n", "\\u00", "\\\\", "  ", "    ", "\n", "\n  ", " \n", "\t", "\r\n", " \"", "\":", "0", "00", "10",
        "-1", "1.5", "e+", "E-", "123", "2024-", "-01-", "T12:", ":00Z", "http", "://", "www.", ".com", "@",
        "name", "_name", "id", "\"id", "type", "\"type\": \"", "é", "日本", "\xf0\x9f\x98\x80", "\xe2\x82",
        "\xac", "\x80\x80", "\xc3", "\xff", "a\xe2\x82\xac", "<|eot|>", "\"\n", "  \"", "    \"", "\": {",
        "\": [", "\": null", "],", "]}", "1,", "\", ", "abc", "ABC", "xyz\"", "a b", " a", "é\"", "\\u",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) adds(v, fixed[i]);
    adds(v, "name");                                    /* a duplicate */
    add(v, "<|endoftext|>", 13, SV_TOKKIND_EOG);
    add(v, "<|eot|>", 7, SV_TOKKIND_EOG);
    add(v, "<|special|>", 11, SV_TOKKIND_NEVER);
    add(v, NULL, 0, SV_TOKKIND_NORMAL);                 /* an empty token becomes NEVER */
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \"\\:,{}[]-_.@/\n\t";
    static const char *const utf8[] = {"é", "ü", "ß", "日", "本", "語", "€", "\xf0\x9f\x98\x80", "\xd0\x96"};
    for (int i = 0; i < 3000; i++) {
        char buf[64];
        uint32_t L = 0, want = 1 + (uint32_t)sv_rng_below(rng, 12);
        while (L < want) {
            uint64_t r = sv_rng_below(rng, 20);
            if (r == 0) {
                const char *u = utf8[sv_rng_below(rng, sizeof utf8 / sizeof utf8[0])];
                size_t ul = strlen(u);
                if (L + ul > sizeof buf) break;
                memcpy(buf + L, u, ul);
                L += (uint32_t)ul;
            } else if (r == 1) {
                buf[L++] = (char)(0x80 + sv_rng_below(rng, 128)); /* any high byte, valid or not */
            } else {
                buf[L++] = alpha[sv_rng_below(rng, sizeof alpha - 1)];
            }
        }
        add(v, buf, L, SV_TOKKIND_NORMAL);
    }
    /* families sharing a prefix, so that the trie has large subtrees (the
     * walk allows some subtrees whole) */
    for (int i = 0; i < 200; i++) {
        char buf[32];
        uint32_t P = 1 + (uint32_t)sv_rng_below(rng, 3);
        for (uint32_t k = 0; k < P; k++) buf[k] = alpha[sv_rng_below(rng, 52)];
        for (int j = 0; j < 12; j++) {
            uint32_t L = P + 1 + (uint32_t)sv_rng_below(rng, 5);
            for (uint32_t k = P; k < L; k++) {
                uint64_t r = sv_rng_below(rng, 30);
                buf[k] = r == 0 ? '"' : r == 1 ? '\\' : r == 2 ? (char)0xc3 : r == 3 ? (char)0xa9 : alpha[sv_rng_below(rng, 52)];
            }
            add(v, buf, L, SV_TOKKIND_NORMAL);
        }
    }
}

/* ---- constraints --------------------------------------------------------------- */

typedef struct {
    sv_dfa_t **dfa;
    char **name;
    bool *flexible;
    bool *every;              /* every state checked, not a sample */
    uint32_t n;
} set_t;

static void keep(set_t *s, sv_dfa_t *d, const char *name, bool flexible) {
    s->dfa = realloc(s->dfa, (s->n + 1) * sizeof *s->dfa);
    s->name = realloc(s->name, (s->n + 1) * sizeof *s->name);
    s->flexible = realloc(s->flexible, (s->n + 1) * sizeof *s->flexible);
    s->every = realloc(s->every, (s->n + 1) * sizeof *s->every);
    s->every[s->n] = false;
    s->dfa[s->n] = d;
    s->name[s->n] = strdup(name);
    s->flexible[s->n] = flexible;
    s->n++;
}

static void schema(set_t *s, const char *text, const char *name) {
    for (int ws = 0; ws < 2; ws++) {
        sv_schema_opts_t o;
        sv_schema_opts_default(&o);
        o.ws = ws ? SV_WS_FLEXIBLE : SV_WS_CANONICAL;
        o.any_calls = false; /* DFA states here; programs' configurations: test_program */
        o.lim.max_dfa_states = 20000;
        o.lim.max_time_us = 2000000;
        sv_dfa_t *d;
        if (sv_schema_compile(text, strlen(text), &o, &d, NULL, NULL) == SV_OK) keep(s, d, name, ws == 1);
    }
}

static void load_suite(set_t *s, const char *dir, uint32_t max_groups) {
    DIR *dp = opendir(dir);
    if (!dp) return;
    struct dirent *e;
    char **files = NULL;
    size_t nf = 0;
    while ((e = readdir(dp))) {
        if (!strstr(e->d_name, ".json")) continue;
        files = realloc(files, (nf + 1) * sizeof *files);
        files[nf++] = strdup(e->d_name);
    }
    closedir(dp);
    qsort(files, nf, sizeof *files, (int (*)(const void *, const void *))strcmp);
    uint32_t taken = 0;
    for (size_t i = 0; i < nf; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        json_t *doc = json_load_file(path, 0, NULL);
        size_t gi;
        json_t *g;
        json_array_foreach(doc, gi, g) {
            if (taken >= max_groups) break;
            char *t = json_dumps(json_object_get(g, "schema"), JSON_ENCODE_ANY | JSON_COMPACT);
            char name[512];
            snprintf(name, sizeof name, "%s#%zu", files[i], gi);
            uint32_t before = s->n;
            if (t) schema(s, t, name);
            if (s->n > before) taken++;
            free(t);
        }
        json_decref(doc);
        free(files[i]);
    }
    free(files);
}

/* ---- the brute-force check ----------------------------------------------------------- */

static bool is_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

static bool brute(const sv_dfa_t *d, int32_t s, const uint8_t *b, uint32_t len, uint32_t cap, uint32_t run) {
    for (uint32_t i = 0; i < len; i++) {
        if (cap) {
            run = is_ws(b[i]) ? run + 1 : 0;
            if (run > cap) return false;
        }
        s = sv_dfa_next(d, s, b[i]);
        if (s < 0) return false;
    }
    return true;
}

static void check_state(sv_token_index_t *ix, const vocab_t *v, int32_t s, uint32_t run, const char *name) {
    const sv_dfa_t *d = sv_token_index_dfa(ix);
    const sv_token_set_t *ts = sv_token_index_tokens(ix);
    uint32_t words = sv_token_set_mask_words(ts), cap = sv_token_index_ws_cap(ix);
    const uint32_t *m;
    uint32_t maxd;
    CHECK(sv_token_index_mask(ix, s, run, &m, &maxd) == SV_OK, "%s: mask failed", name);
    uint32_t *f = malloc(words * sizeof *f);
    uint32_t fcount = sv_token_index_fill(ix, s, run, NULL, NULL, f);
    CHECK(memcmp(f, m, words * sizeof *f) == 0, "%s: state %d: memoized mask differs from fill", name, s);
    uint32_t bad = 0, realmax = 0, nwant = 0;
    for (uint32_t id = 0; id < sv_token_set_mask_bits(ts); id++) {
        bool got = (m[id >> 5] >> (id & 31)) & 1u, want;
        if (id >= v->n) want = false;
        else if (sv_token_set_kind(ts, (int32_t)id) == SV_TOKKIND_EOG) want = sv_dfa_is_accepting(d, s);
        else if (sv_token_set_kind(ts, (int32_t)id) == SV_TOKKIND_NEVER) want = false;
        else {
            want = brute(d, s, v->bytes[id], v->lens[id], cap, run);
            int32_t nx = sv_token_index_next(ix, s, (int32_t)id);
            int32_t bx = s;
            for (uint32_t i = 0; i < v->lens[id] && bx >= 0; i++) bx = sv_dfa_next(d, bx, v->bytes[id][i]);
            CHECK(nx == bx, "%s: state %d token %u: next %d, walk %d", name, s, id, nx, bx);
            if (want && sv_dfa_distance(d, nx) > realmax) realmax = sv_dfa_distance(d, nx);
        }
        nwant += want;
        if (got != want && bad++ < 3)
            CHECK(0, "%s: state %d run %u token %u (%u bytes): index %d, brute force %d", name, s, run, id,
                  id < v->n ? v->lens[id] : 0, got, want);
    }
    CHECK(fcount == nwant, "%s: state %d: fill counts %u tokens, brute force %u", name, s, fcount, nwant);
    CHECK(maxd >= realmax, "%s: state %d: max_dist %u below the true %u", name, s, maxd, realmax);
    free(f);
}

int main(int argc, char **argv) {
    const char *tokpath = NULL;
    uint32_t nstates = 12, min_constraints = 100;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tokpath = argv[++i];
        else if (!strcmp(argv[i], "--states") && i + 1 < argc) nstates = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-constraints") && i + 1 < argc) min_constraints = (uint32_t)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--tokenizer FILE] [--states N] [--min-constraints N]\n", argv[0]);
            return 64;
        }
    }
    sv_rng_t rng;
    sv_rng_seed(&rng, 42);
    vocab_t v = {0};
    sv_tokens_t *tok = NULL;
    const sv_token_set_t *ts;
    sv_token_set_t *own = NULL;
    sv_error_t err;
    if (tokpath) {
        if (sv_tokens_load(tokpath, NULL, 0, &tok, &err)) {
            fprintf(stderr, "%s: %s\n", tokpath, err.message);
            return 1;
        }
        ts = sv_tokens_set(tok);
        v.n = sv_token_set_size(ts);
        v.bytes = calloc(v.n, sizeof *v.bytes);
        v.lens = calloc(v.n, sizeof *v.lens);
        for (uint32_t i = 0; i < v.n; i++) {
            uint32_t L;
            const uint8_t *b = sv_token_set_bytes(ts, (int32_t)i, &L);
            v.bytes[i] = malloc(L ? L : 1);
            if (L) memcpy(v.bytes[i], b, L);
            v.lens[i] = L;
        }
    } else {
        synthetic(&v, &rng);
        if (sv_token_set_create(v.n, v.n + 77, (const uint8_t *const *)v.bytes, v.lens, v.kinds, &own, &err)) {
            fprintf(stderr, "token set: %s\n", err.message);
            return 1;
        }
        ts = own;
    }

    set_t cs = {0};
    DIR *dp = opendir(SV_SOURCE_DIR "/schemas");
    struct dirent *e;
    while (dp && (e = readdir(dp))) {
        if (!strstr(e->d_name, ".json")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/schemas/%s", SV_SOURCE_DIR, e->d_name);
        json_t *doc = json_load_file(path, 0, NULL);
        char *t = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        if (t) schema(&cs, t, e->d_name);
        free(t);
        json_decref(doc);
    }
    if (dp) closedir(dp);
    load_suite(&cs, SV_SOURCE_DIR "/tests/data/json-schema-test-suite/draft2020-12", 60);
    static const char *const regexes[] = {
        "[a-z]+", "\\d{3}-\\d{4}", "(foo|bar)*baz", ".*", "[^\"\\\\]*", "\\p{L}+ \\p{N}*", "(ab|a)(bc|c)?",
        "[0-9a-f]{8}-[0-9a-f]{4}", "\\s*x\\s*", "é+|日本", "(\\{\"a\": (true|false)\\})", "[\\u0080-\\uffff]{1,3}",
        "a{0,20}", "(x|y|z){2,5}end", "[ \\t\\n]*(null|[1-9][0-9]*)", "(yes|no|maybe)", "https?://[a-z.]+/?",
        "[A-Z][a-z]+( [A-Z][a-z]+)*", "\"([^\"\\\\]|\\\\.)*\"", "-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?",
        /* first characters that loop differently from the rest (the token
         * index's tails and partial-character tries) */
        "[^\"][a-zA-Z0-9_ ]*", "[^\"][ -~]*", "[a-zA-Z0-9_ ][^\"]*", "[^\"]\\w{0,30}\"",
        /* chains: a bounded count of one byte set (the index's chain merge),
         * the count's lower bound inside it, a run that ends alive */
        "\"[a-z ]{3,40}\"", "[a-z ]{2,30}x", "[a-z ]{17}[a-z0-9 ]*", "[^\"~]{17}[^\"]*",
    };
    for (size_t i = 0; i < sizeof regexes / sizeof regexes[0]; i++) {
        sv_dfa_t *d;
        if (sv_regex_compile(regexes[i], strlen(regexes[i]), NULL, &d, NULL) == SV_OK) keep(&cs, d, regexes[i], false);
        else CHECK(0, "regex %s does not compile", regexes[i]);
    }
    /* Chains checked at every state, so that each count left (below and
     * above the index's CHAIN_MIN_RUN of 16) is seen: string content with
     * maxLength, a run that ends alive, multi-byte characters counted. */
    static const char *const chains[] = {
        "\"[^\"\\\\]{0,20}\"", "\"[a-z ]{1,18}\",", "[ -~]{5,19}x", "\"[^\"]{0,17}\"}",
    };
    for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++) {
        sv_dfa_t *d;
        if (sv_regex_compile(chains[i], strlen(chains[i]), NULL, &d, NULL) == SV_OK) {
            keep(&cs, d, chains[i], false);
            cs.every[cs.n - 1] = true;
        } else {
            CHECK(0, "regex %s does not compile", chains[i]);
        }
    }
    CHECK(cs.n >= min_constraints, "only %u constraints compiled (want %u)", cs.n, min_constraints);

    uint64_t checked = 0, states = 0;
    for (uint32_t c = 0; c < cs.n; c++) {
        sv_token_index_opts_t io;
        sv_token_index_opts_default(&io);
        io.ws_cap = cs.flexible[c] ? 3 : 0;
        sv_token_index_t *ix;
        if (sv_token_index_create(cs.dfa[c], ts, &io, &ix, &err)) {
            CHECK(0, "%s: index: %s", cs.name[c], err.message);
            sv_dfa_destroy(cs.dfa[c]);
            continue;
        }
        uint32_t n = sv_dfa_num_states(cs.dfa[c]);
        for (uint32_t k = 0; cs.every[c] ? k < n : (k <= nstates && k < n + 1); k++) {
            int32_t s = cs.every[c] ? (int32_t)k : k == 0 ? 0 : (int32_t)sv_rng_below(&rng, n);
            uint32_t run = io.ws_cap ? (uint32_t)sv_rng_below(&rng, io.ws_cap + 1) : 0;
            check_state(ix, &v, s, run, cs.name[c]);
            states++;
            checked += sv_token_set_mask_bits(ts);
        }
        /* hash-consing: masks with equal bits share storage */
        const uint32_t *a, *b;
        if (n > 1 && sv_token_index_mask(ix, 0, 0, &a, NULL) == SV_OK) {
            sv_token_index_stats_t st;
            sv_token_index_stats(ix, &st);
            CHECK(st.distinct_masks <= st.known_entries, "%s: more distinct masks than entries", cs.name[c]);
            for (uint32_t s = 1; s < n && s < 64; s++)
                if (sv_token_index_mask(ix, (int32_t)s, 0, &b, NULL) == SV_OK &&
                    memcmp(a, b, sv_token_set_mask_words(ts) * 4) == 0)
                    CHECK(a == b, "%s: equal masks of states 0 and %u are stored twice", cs.name[c], s);
        }
        sv_token_index_destroy(ix);
        free(cs.name[c]);
    }
    printf("test_token_index: %u constraints, %llu states, %llu token checks (%s vocabulary, %u tokens, %u trie nodes): "
           "%d failures\n",
           cs.n, (unsigned long long)states, (unsigned long long)checked, tokpath ? tokpath : "synthetic", v.n,
           sv_token_set_num_nodes(ts), failures);
    for (uint32_t i = 0; i < v.n; i++) free(v.bytes[i]);
    free(v.bytes);
    free(v.lens);
    free(v.kinds);
    free(cs.dfa);
    free(cs.name);
    free(cs.flexible);
    free(cs.every);
    sv_token_set_destroy(own);
    sv_tokens_destroy(tok);
    return failures ? 1 : 0;
}
