/* fuzz_structural_tag.c — libFuzzer target for structural tags
 * (fsm/structural_tag.h).
 *
 * The input is a structural tag's JSON text: arbitrary bytes. It is
 * compiled under tight budgets, and then what structural_tag.h promises is
 * checked; a broken promise is a __builtin_trap(), which libFuzzer reports
 * as a crash with the input saved.
 *
 *   errors      the status is err's; the message is set; the offset is -1
 *               or inside [0, len]; the pointer is empty or starts with
 *               '/'; *out is NULL; SV_ERR_INTERNAL never.
 *   samples     a string sampled from the DFA is accepted by it, is valid
 *               UTF-8 (a structural tag denotes text), and every prefix of
 *               it is viable.
 *   determinism the same text compiles to an equal DFA twice (or, the
 *               second time, runs out of time).
 *
 * Seeds: fuzz/corpus/structural_tag (the current format's every type, the
 * legacy form, nesting, and refusals). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fsm/structural_tag.h"
#include "util/utf8.h"

#define CHECK(cond)                    \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = sv_utf8_decode(s + i, n - i, &cp);
        if (k == 0) return false;
        i += (size_t)k;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sv_schema_opts_t o;
    sv_schema_opts_default(&o);
    o.lim.max_nfa_states = 20000;
    o.lim.max_dfa_states = 4000;
    o.lim.max_memory = (size_t)64 << 20;
    o.lim.max_time_us = 300 * 1000;
    sv_dfa_t *d = (sv_dfa_t *)(uintptr_t)1;
    sv_error_t err;
    memset(&err, 0x5a, sizeof err);
    sv_status st = sv_structural_tag_compile((const char *)data, size, &o, &d, &err);
    if (st != SV_OK) {
        CHECK(err.code == st && st != SV_ERR_INTERNAL);
        CHECK(memchr(err.message, 0, sizeof err.message) && err.message[0]);
        CHECK(memchr(err.pointer, 0, sizeof err.pointer) && (err.pointer[0] == 0 || err.pointer[0] == '/'));
        CHECK(err.offset >= -1 && err.offset <= (long)size);
        CHECK(d == NULL);
        return 0;
    }
    CHECK(d != NULL);
    sv_rng_t rng;
    sv_rng_seed(&rng, size);
    static uint8_t buf[1 << 14];
    for (int i = 0; i < 4; i++) {
        size_t n;
        if (sv_dfa_sample(d, &rng, 32, buf, sizeof buf, &n) != SV_OK) continue;
        if (!sv_dfa_matches(d, buf, n)) {
            fprintf(stderr, "fuzz_structural_tag: a sample is not accepted: %.*s\n", (int)n, (const char *)buf);
            __builtin_trap();
        }
        CHECK(valid_utf8(buf, n));
        for (size_t k = 0; k <= n; k += 1 + n / 8) CHECK(sv_dfa_viable_prefix(d, buf, k) == k);
    }
    sv_dfa_t *again = NULL;
    st = sv_structural_tag_compile((const char *)data, size, &o, &again, &err);
    if (st == SV_OK) CHECK(sv_dfa_equal(d, again));
    else CHECK(st == SV_ERR_TIMEOUT); /* the budget is time, the same work can miss it once */
    sv_dfa_destroy(again);
    sv_dfa_destroy(d);
    return 0;
}
