/* bench_grammar_masks.c — TTFM and time between masks of a constraint, on
 * random walks through its language with a real tokenizer.
 *
 *   bench_grammar_masks TOKENIZER.json gbnf:FILE|schema:FILE|re:PATTERN [WALKS] [STEPS]
 *
 * TTFM: compile, token index and the start's mask, as a request meets them
 * in a process that has compiled another constraint before (a warm-up).
 * Then WALKS (default 20) walks of up to STEPS (default 200) tokens: at each
 * step the matcher's mask is timed (sv_matcher_mask: memoized where seen
 * before, computed where not, as in decoding) and a random allowed token is
 * taken (EOS only when nothing else is allowed). Prints one JSON object:
 * ttfm_ms, compile_ms (the compile alone), masks, tbm_us {p50, p90, p99, max}. For programs (grammars with
 * recursive rules, schemas with parts) this is the honest measure: their
 * masks depend on the stack, which bench_token_index's per-state walk does
 * not see. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/grammar.h"
#include "fsm/matcher.h"
#include "fsm/regex.h"
#include "fsm/schema.h"
#include "src/cli/cli.h"
#include "src/constraint/tokens.h"
#include "util/clock.h"
#include "util/rng.h"

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER.json gbnf:FILE|schema:FILE|re:PATTERN [WALKS] [STEPS]\n", argv[0]);
        return 64;
    }
    sv_error_t err;
    sv_tokens_t *tok;
    if (sv_tokens_load(argv[1], NULL, 0, &tok, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    const char *c = argv[2];
    bool re = !strncmp(c, "re:", 3), gbnf = !strncmp(c, "gbnf:", 5), schema = !strncmp(c, "schema:", 7);
    if (!re && !gbnf && !schema) {
        fprintf(stderr, "the constraint is gbnf:FILE, schema:FILE or re:PATTERN\n");
        return 64;
    }
    size_t len;
    char *text = re ? strdup(c + 3) : sv_cli_read_file(c + (gbnf ? 5 : 7), &len, &err);
    if (!text) return 1;
    if (re) len = strlen(text);
    uint32_t walks = argc > 3 ? (uint32_t)atoi(argv[3]) : 20, steps = argc > 4 ? (uint32_t)atoi(argv[4]) : 200;
    sv_schema_opts_t so;
    sv_schema_opts_default(&so);
    if (schema) (void)sv_schema_prelude_warm(&so, &err); /* as the server does at startup */
    {
        /* A process that has served before: one unrelated grammar compiled
         * and indexed (sharing no rule with a measured one), so the timing
         * below is of this constraint and not of the allocator's and the
         * tokenizer's first touches. */
        static const char warm[] = "root ::= \"<\" (root | [a-c\\u0100-\\uffff]{1,40} | \"x\"{2,5})* \">\"";
        sv_dfa_t *w;
        sv_token_index_t *wi;
        if (sv_grammar_compile(warm, sizeof warm - 1, NULL, &w, &err) == SV_OK) {
            if (sv_token_index_create(w, sv_tokens_set(tok), NULL, &wi, &err) == SV_OK) sv_token_index_destroy(wi);
        }
    }
    uint64_t t0 = sv_now_ns();
    sv_dfa_t *dfa;
    sv_status st = re ? sv_regex_compile(text, len, NULL, &dfa, &err)
                   : gbnf ? sv_grammar_compile(text, len, NULL, &dfa, &err)
                          : sv_schema_compile(text, len, &so, &dfa, NULL, &err);
    if (st) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    uint64_t t_compiled = sv_now_ns();
    sv_token_index_t *ix;
    sv_matcher_t *m;
    const uint32_t *mask;
    if (sv_token_index_create(dfa, sv_tokens_set(tok), NULL, &ix, &err) ||
        sv_matcher_create(ix, NULL, 0, &m, &err) || sv_matcher_mask(m, &mask, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    uint64_t ttfm = sv_now_ns() - t0;
    sv_matcher_destroy(m);
    uint32_t words = sv_token_set_mask_words(sv_tokens_set(tok)), nv = words * 32;
    int32_t eos = sv_vocab_eos(sv_tokens_vocab(tok));
    int32_t *allowed = malloc(nv * sizeof *allowed);
    uint64_t *ts = malloc((size_t)walks * steps * sizeof *ts);
    size_t nt = 0;
    sv_rng_t rng;
    sv_rng_seed(&rng, 42);
    for (uint32_t w = 0; w < walks; w++) {
        if (sv_matcher_create(ix, NULL, 0, &m, &err)) return 1;
        for (uint32_t s = 0; s < steps && !sv_matcher_is_finished(m); s++) {
            uint64_t a = sv_now_ns();
            if (sv_matcher_mask(m, &mask, &err)) {
                fprintf(stderr, "%s\n", err.message);
                return 1;
            }
            ts[nt++] = sv_now_ns() - a;
            uint32_t na = 0;
            for (uint32_t id = 0; id < nv; id++)
                if ((mask[id >> 5] >> (id & 31)) & 1 && (int32_t)id != eos) allowed[na++] = (int32_t)id;
            if (!na) break; /* only the end is left */
            if (!sv_matcher_accept(m, allowed[sv_rng_below(&rng, na)])) {
                fprintf(stderr, "an allowed token was refused\n");
                return 1;
            }
        }
        sv_matcher_destroy(m);
    }
    qsort(ts, nt, sizeof *ts, cmp);
    printf("{\"ttfm_ms\": %.3f, \"compile_ms\": %.3f, \"masks\": %zu, \"tbm_us\": {\"p50\": %.2f, \"p90\": %.2f, \"p99\": %.2f, \"max\": %.2f}}\n",
           ttfm / 1e6, (t_compiled - t0) / 1e6, nt, nt ? ts[nt / 2] / 1e3 : 0, nt ? ts[nt * 9 / 10] / 1e3 : 0, nt ? ts[nt * 99 / 100] / 1e3 : 0,
           nt ? ts[nt - 1] / 1e3 : 0);
    free(allowed);
    free(ts);
    free(text);
    sv_token_index_destroy(ix);
    sv_tokens_destroy(tok);
    return 0;
}
