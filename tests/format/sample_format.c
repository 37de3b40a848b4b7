/* sample_format.c — a test helper for tests/format/check_formats.py: compiles
 * one JSON Schema format language (fsm/internal/json_format.h) and either samples it
 * or matches strings against it. Python's jsonschema is the judge; this
 * program only exposes our DFA.
 *
 *   sample_format FORMAT N [SEED [SOFT_LEN]]
 *       prints N seeded samples (sv_dfa_sample), one JSON string literal a line
 *   sample_format FORMAT --match
 *       reads JSON string literals, one a line, from stdin and prints 1 or 0
 *       for each (whether the DFA accepts the decoded string)
 *   sample_format FORMAT --states
 *       prints the number of states of the minimal DFA
 *
 * Exit status: 0 ok, 1 a runtime failure, 2 the format does not compile
 * (message on stderr), 64 a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fsm/internal/dfa_internal.h"
#include "fsm/internal/json_format.h"

static int usage(void) {
    fprintf(stderr, "usage: sample_format FORMAT N [SEED [SOFT_LEN]] | FORMAT --match | FORMAT --states\n");
    return 64;
}

static int do_sample(const sv_dfa_t *dfa, unsigned long n, unsigned long long seed, unsigned soft_len) {
    sv_rng_t rng;
    sv_rng_seed(&rng, seed);
    /* Past soft_len each step brings acceptance nearer: at most soft_len plus
     * the longest distance, which is below the state count. */
    size_t cap = (size_t)soft_len + sv_dfa_num_states(dfa) + 16;
    uint8_t *buf = malloc(cap);
    if (!buf) return 1;
    int rc = 0;
    for (unsigned long i = 0; i < n && !rc; i++) {
        size_t len;
        if (sv_dfa_sample(dfa, &rng, soft_len, buf, cap, &len)) { rc = 1; break; }
        json_t *s = json_stringn_nocheck((const char *)buf, len);
        char *txt = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
        if (!txt) rc = 1;
        else puts(txt);
        free(txt);
        json_decref(s);
    }
    free(buf);
    return rc;
}

static int do_match(const sv_dfa_t *dfa) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        json_error_t je;
        json_t *v = json_loadb(line, (size_t)n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!v || !json_is_string(v)) {
            fprintf(stderr, "sample_format: not a JSON string literal: %s", line);
            json_decref(v);
            rc = 1;
            break;
        }
        bool ok = sv_dfa_matches(dfa, (const uint8_t *)json_string_value(v), json_string_length(v));
        puts(ok ? "1" : "0");
        json_decref(v);
    }
    free(line);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    const char *format = argv[1];
    sv_arena_t *arena = sv_arena_create(0);
    if (!arena) return 1;
    sv_ast_t *ast;
    sv_dfa_t *dfa = NULL;
    sv_error_t err;
    sv_status st = sv_json_format(arena, format, &ast, &err);
    if (!st) st = sv_dfa_from_ast(ast, NULL, &dfa, &err);
    sv_arena_destroy(arena);
    if (st) {
        fprintf(stderr, "sample_format: %s: %s\n", sv_status_name(st), err.message);
        return 2;
    }
    int rc;
    if (strcmp(argv[2], "--match") == 0) {
        rc = do_match(dfa);
    } else if (strcmp(argv[2], "--states") == 0) {
        printf("%u\n", sv_dfa_num_states(dfa));
        rc = 0;
    } else {
        char *end;
        unsigned long n = strtoul(argv[2], &end, 10);
        unsigned long long seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
        unsigned long soft = argc > 4 ? strtoul(argv[4], NULL, 10) : 64;
        rc = *end || soft > 100000 ? usage() : do_sample(dfa, n, seed, (unsigned)soft);
    }
    sv_dfa_destroy(dfa);
    return rc;
}
