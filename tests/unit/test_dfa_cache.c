/* test_dfa_cache.c — the process-wide memo of compiled automata changes no
 * result: every schema of schemas/ and of the JSON-Schema-Test-Suite (draft
 * 2020-12), in canonical and flexible whitespace, compiles to the same DFA with the
 * memo off, cold and warm, and under a tiny budget that evicts all the time;
 * and errors stay errors. Products are memoized too: the same operands and
 * operator hit, another operator does not, and the results equal those
 * built with the memo off. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/regex.h"
#include "fsm/schema.h"

#ifndef SV_SOURCE_DIR
#define SV_SOURCE_DIR "."
#endif

static int failures;
static unsigned compared, errors_seen;

static sv_status compile(const char *t, sv_ws_mode ws, sv_dfa_t **d, sv_error_t *err) {
    sv_schema_opts_t o;
    sv_schema_opts_default(&o);
    o.ws = ws;
    o.lim.max_dfa_states = 10000;
    o.lim.max_time_us = 300000;
    return sv_schema_compile(t, strlen(t), &o, d, NULL, err);
}

static void check(const char *text, const char *name) {
    for (int ws = 0; ws < 3; ws += 2) { /* canonical and flexible */
        sv_dfa_t *d[4] = {0};
        sv_status st[4];
        sv_error_t err[4];
        size_t budgets[4] = {0, (size_t)64 << 20, (size_t)64 << 20, 4096};
        for (int i = 0; i < 4; i++) {
            sv_dfa_cache_configure(budgets[i]);
            st[i] = compile(text, (sv_ws_mode)ws, &d[i], &err[i]);
        }
        for (int i = 1; i < 4; i++) {
            /* a time budget depends on the machine, and the memo saves time */
            if (st[i] == SV_ERR_TIMEOUT || st[0] == SV_ERR_TIMEOUT) continue;
            if (st[i] != st[0]) {
                if (failures++ < 20)
                    fprintf(stderr, "FAIL %s (ws %d): status %d with the memo (run %d), %d without\n", name, ws, st[i], i,
                            st[0]);
            } else if (!st[0] && !sv_dfa_equal(d[0], d[i])) {
                if (failures++ < 20) fprintf(stderr, "FAIL %s (ws %d): another DFA with the memo (run %d)\n", name, ws, i);
            } else if (st[0] && strcmp(err[0].message, err[i].message) != 0) {
                if (failures++ < 20)
                    fprintf(stderr, "FAIL %s (ws %d): error '%s' became '%s'\n", name, ws, err[0].message, err[i].message);
            }
        }
        if (st[0]) errors_seen++;
        compared++;
        for (int i = 0; i < 4; i++) sv_dfa_destroy(d[i]);
    }
}

static void product_memo(void) {
    static const char *const pats[][2] = {
        {"[a-z]{2,40}", "(ab|cd)*x?"},
        {"\"[^\"]{0,30}\"", "\"(a|b)*\""},
        {"-?[0-9]+(\\.[0-9]+)?", "[0-9]{1,3}"},
    };
    static const sv_dfa_op ops[] = {SV_DFA_AND, SV_DFA_OR, SV_DFA_DIFF, SV_DFA_XOR};
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        sv_dfa_cache_configure((size_t)64 << 20);
        sv_dfa_t *a = NULL, *b = NULL;
        if (sv_regex_compile(pats[i][0], strlen(pats[i][0]), NULL, &a, NULL) ||
            sv_regex_compile(pats[i][1], strlen(pats[i][1]), NULL, &b, NULL)) {
            fprintf(stderr, "FAIL product_memo: %s or %s does not compile\n", pats[i][0], pats[i][1]);
            failures++;
            sv_dfa_destroy(a);
            continue;
        }
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            sv_dfa_t *p[3] = {0};
            sv_status st[3];
            uint64_t h[3];
            for (int r = 0; r < 2; r++) { /* cold, then warm */
                st[r] = sv_dfa_product(a, b, ops[o], NULL, &p[r], NULL);
                sv_dfa_cache_stats(&h[r], NULL, NULL);
            }
            sv_dfa_cache_configure(0);
            st[2] = sv_dfa_product(a, b, ops[o], NULL, &p[2], NULL);
            sv_dfa_cache_configure((size_t)64 << 20);
            if (st[0] || st[1] || st[2]) {
                /* an empty result (SV_ERR_EMPTY) is never cached: all alike */
                if (st[0] != st[2] || st[1] != st[2] || st[2] != SV_ERR_EMPTY) {
                    fprintf(stderr, "FAIL product_memo %s op %zu: status %d %d %d\n", pats[i][0], o, st[0], st[1],
                            st[2]);
                    failures++;
                }
            } else if (h[1] != h[0] + 1 || !sv_dfa_equal(p[0], p[2]) || !sv_dfa_equal(p[1], p[2])) {
                fprintf(stderr, "FAIL product_memo %s op %zu: hits %llu -> %llu, equal %d %d\n", pats[i][0], o,
                        (unsigned long long)h[0], (unsigned long long)h[1], sv_dfa_equal(p[0], p[2]),
                        sv_dfa_equal(p[1], p[2]));
                failures++;
            }
            if (o > 0 && !st[2]) { /* another operator's entry is not this one's */
                sv_dfa_t *and_ = NULL;
                if (sv_dfa_product(a, b, SV_DFA_AND, NULL, &and_, NULL) == SV_OK && sv_dfa_equal(and_, p[2]) &&
                    sv_dfa_num_states(p[2]) > 0) {
                    sv_dfa_t *plain = NULL;
                    sv_dfa_cache_configure(0);
                    bool same =
                        sv_dfa_product(a, b, SV_DFA_AND, NULL, &plain, NULL) == SV_OK && sv_dfa_equal(plain, p[2]);
                    sv_dfa_cache_configure((size_t)64 << 20);
                    if (!same) {
                        fprintf(stderr, "FAIL product_memo %s op %zu: got AND's result\n", pats[i][0], o);
                        failures++;
                    }
                    sv_dfa_destroy(plain);
                }
                sv_dfa_destroy(and_);
            }
            for (int r = 0; r < 3; r++) sv_dfa_destroy(p[r]);
            compared++;
        }
        sv_dfa_destroy(a);
        sv_dfa_destroy(b);
    }
}

int main(void) {
    product_memo();
    const char *dirs[] = {SV_SOURCE_DIR "/schemas", SV_SOURCE_DIR "/tests/data/json-schema-test-suite/draft2020-12"};
    for (int di = 0; di < 2; di++) {
        DIR *dp = opendir(dirs[di]);
        if (!dp) {
            fprintf(stderr, "FAIL cannot open %s\n", dirs[di]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(dp))) {
            if (!strstr(e->d_name, ".json")) continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dirs[di], e->d_name);
            json_t *doc = json_load_file(path, 0, NULL);
            if (!doc) continue;
            if (di == 0) {
                char *t = json_dumps(doc, JSON_COMPACT);
                if (t) check(t, e->d_name);
                free(t);
            } else {
                size_t i;
                json_t *g;
                json_array_foreach(doc, i, g) {
                    char *t = json_dumps(json_object_get(g, "schema"), JSON_ENCODE_ANY | JSON_COMPACT);
                    char name[600];
                    snprintf(name, sizeof name, "%s#%zu", e->d_name, i);
                    if (t) check(t, name);
                    free(t);
                }
            }
            json_decref(doc);
        }
        closedir(dp);
    }
    uint64_t hits, misses;
    sv_dfa_cache_stats(&hits, &misses, NULL);
    printf("test_dfa_cache: %u compilations compared (%u errors among them), memo hits %llu, misses %llu: %d failures\n",
           compared, errors_seen, (unsigned long long)hits, (unsigned long long)misses, failures);
    if (compared < 300 || hits == 0) {
        fprintf(stderr, "FAIL too few comparisons or no memo hits\n");
        return 1;
    }
    return failures ? 1 : 0;
}
