/* bench_token_index.c — time of one token-mask walk per DFA state.
 *
 *   bench_token_index TOKENIZER.json SCHEMA.json|re:PATTERN|gbnf:FILE [MAX_STATES]
 *
 * Compiles the schema (or the regex, or the GBNF grammar), times the first
 * mask as a request meets it (TTFM: compile, token index, the memoized mask
 * of the start), then computes the mask of each of the first MAX_STATES
 * states (default all) uncached (sv_token_index_fill; the fastest of 3
 * runs), and prints the distribution of walk times and allowed-token
 * counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/grammar.h"
#include "fsm/regex.h"
#include "fsm/schema.h"
#include "src/cli/cli.h"
#include "src/constraint/tokens.h"
#include "util/clock.h"

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER.json SCHEMA.json [MAX_STATES]\n", argv[0]);
        return 64;
    }
    sv_error_t err;
    sv_tokens_t *tok;
    uint64_t t0 = sv_now_ns();
    if (sv_tokens_load(argv[1], NULL, 0, &tok, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    uint64_t t1 = sv_now_ns();
    size_t len;
    bool re = !strncmp(argv[2], "re:", 3); /* re:PATTERN: a regex instead of a schema file */
    bool gbnf = !strncmp(argv[2], "gbnf:", 5); /* gbnf:FILE: a GBNF grammar */
    char *text = re ? strdup(argv[2] + 3) : sv_cli_read_file(argv[2] + (gbnf ? 5 : 0), &len, &err);
    if (!text) return 1;
    if (re) len = strlen(text);
    sv_schema_opts_t so;
    sv_schema_opts_default(&so);
    sv_dfa_t *dfa;
    uint64_t t2 = sv_now_ns();
    if (re ? sv_regex_compile(text, len, NULL, &dfa, &err)
           : gbnf ? sv_grammar_compile(text, len, NULL, &dfa, &err)
                  : sv_schema_compile(text, len, &so, &dfa, NULL, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    uint64_t t3 = sv_now_ns();
    sv_token_index_t *ix;
    if (sv_token_index_create(dfa, sv_tokens_set(tok), NULL, &ix, &err)) return 1;
    const uint32_t *first;
    if (sv_token_index_mask(ix, 0, 0, &first, NULL)) return 1;
    uint64_t t4 = sv_now_ns();
    uint32_t n = sv_dfa_num_states(dfa);
    if (argc > 3 && (uint32_t)atoi(argv[3]) < n) n = (uint32_t)atoi(argv[3]);
    uint32_t words = sv_token_set_mask_words(sv_tokens_set(tok));
    uint32_t *m = malloc(words * sizeof *m);
    uint64_t *ts = malloc(n * sizeof *ts);
    uint64_t total = 0, maxallowed = 0;
    for (uint32_t s = 0; s < n; s++) {
        uint32_t k = 0;
        ts[s] = UINT64_MAX;
        for (int rep = 0, reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 3; rep < reps; rep++) { /* the fastest of 3: the machine may be busy */
            uint64_t a = sv_now_ns();
            k = sv_token_index_fill(ix, (int32_t)s, 0, NULL, NULL, m);
            uint64_t dt = sv_now_ns() - a;
            if (dt < ts[s]) ts[s] = dt;
        }
        total += ts[s];
#ifdef TI_STATS
        extern uint64_t ti_visited, ti_bulk_tokens, ti_skipped_root;
        if (getenv("BENCH_VERBOSE") && ts[s] > 100000)
            fprintf(stderr, "  visited %llu, bulk tokens %llu, root-skipped tokens %llu (3 runs)\n", (unsigned long long)ti_visited,
                    (unsigned long long)ti_bulk_tokens, (unsigned long long)ti_skipped_root);
        ti_visited = ti_bulk_tokens = ti_skipped_root = 0;
        if (getenv("BENCH_VERBOSE") && ts[s] > 100000) {
            int loops = 0;
            for (int b = 0; b < 128; b++) loops += sv_dfa_next(dfa, (int32_t)s, (uint8_t)b) == (int32_t)s;
            fprintf(stderr, "  ascii self-loops %d\n", loops);
        }
#endif
        if (getenv("BENCH_VERBOSE") && ts[s] > 100000)
            fprintf(stderr, "state %u: %.1f us, %u allowed, forced %u, accepting %d, dist %u\n", s, ts[s] / 1e3, k,
                    (unsigned)(sv_dfa_forced(dfa, (int32_t)s, &(uint32_t){0}) != NULL), sv_dfa_is_accepting(dfa, (int32_t)s),
                    sv_dfa_distance(dfa, (int32_t)s));
        if (k > maxallowed) maxallowed = k;
    }
    qsort(ts, n, sizeof *ts, cmp);
    printf("tokenizer load %.1f ms, trie nodes %u; compile %.2f ms, %u states (%u timed)\n", (t1 - t0) / 1e6,
           sv_token_set_num_nodes(sv_tokens_set(tok)), (t3 - t2) / 1e6, sv_dfa_num_states(dfa), n);
    printf("ttfm %.3f ms (compile, index and the start's mask)\n", (t4 - t2) / 1e6);
    printf("walk us: p50 %.1f p90 %.1f p99 %.1f max %.1f mean %.1f; most allowed %llu\n", ts[n / 2] / 1e3,
           ts[n * 9 / 10] / 1e3, ts[n * 99 / 100] / 1e3, ts[n - 1] / 1e3, total / 1e3 / n,
           (unsigned long long)maxallowed);
    free(m);
    free(ts);
    free(text);
    sv_token_index_destroy(ix);
    sv_tokens_destroy(tok);
    return 0;
}
