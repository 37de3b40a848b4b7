/* fuzz_regex.c — libFuzzer target for the regex → byte-DFA compiler.
 *
 * The input is a pattern: arbitrary bytes, NULs and invalid UTF-8 included.
 * It is compiled under tight budgets (so one run stays in the milliseconds
 * and the fuzzer explores instead of waiting), and then every property the
 * headers promise is checked against the result. A broken property is a
 * __builtin_trap(), which libFuzzer reports as a crash with the input saved.
 *
 * What is checked, and where the promise comes from:
 *   errors (error.h, regex.h)  the returned status is the one in err; the
 *                              offset is -1 or inside [0, len]; the message
 *                              is set; *out is untouched; SYNTAX and
 *                              UNSUPPORTED come from the parser alone, with
 *                              the same code and offset as sv_regex_parse.
 *   structure (dfa.h)          every transition is DEAD or a state; every
 *                              state is reachable (BFS numbering by byte
 *                              order reproduces the identity) and can reach
 *                              acceptance (trimmed); two bytes share a class
 *                              iff no state tells them apart; the DFA is
 *                              minimal (Moore refinement finds no two
 *                              equivalent states).
 *   distance                   0 exactly at accepting states, otherwise one
 *                              more than the nearest successor's.
 *   forced chains              a forced state is non-accepting with exactly
 *                              one live byte, the chain is that byte followed
 *                              by the successor's chain, it ends at a state
 *                              that is not forced, and distance drops by the
 *                              chain length.
 *   sampling                   a sample is accepted, is valid UTF-8 (every
 *                              regex here denotes text), is at least
 *                              distance(start) long, is at most soft_len +
 *                              max distance long, and with soft_len 0 is a
 *                              shortest accepted string: exactly
 *                              distance(start) bytes.
 *   canonical form             sv_dfa_equal(d, d), and `(?:P)|(?:P)` compiles
 *                              to a DFA equal to P's: a different NFA for the
 *                              same language must give the same table.
 *   language (PCRE2 oracle)    on the samples, their one-byte neighbours, the
 *                              empty string and the pattern's own bytes, the
 *                              DFA agrees with PCRE2 wherever the two dialects
 *                              mean the same thing (see oracle_open), and
 *                              never accepts invalid UTF-8.
 * Every pass is O(states * 256) or close to it, with at most 2000 states. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/regex.h"

#define CHECK(cond)                       \
    do {                                  \
        if (!(cond)) __builtin_trap();    \
    } while (0)

static void limits(sv_fsm_limits_t *lim) {
    lim->max_nfa_states = 20000;
    lim->max_dfa_states = 2000;
    lim->max_memory = (size_t)64 << 20;
    lim->max_time_us = 200 * 1000;
}

/* Strict UTF-8: no overlongs, no surrogates, nothing above U+10FFFF. Written
 * here rather than borrowed from fsm/ so that it checks fsm/ independently. */
static bool valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        size_t len;
        uint32_t cp, min;
        if (b < 0x80) { i++; continue; }
        if (b >= 0xC2 && b <= 0xDF) len = 2, cp = b & 0x1F, min = 0x80;
        else if (b >= 0xE0 && b <= 0xEF) len = 3, cp = b & 0x0F, min = 0x800;
        else if (b >= 0xF0 && b <= 0xF4) len = 4, cp = b & 0x07, min = 0x10000;
        else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

/* Error reporting, for a compile (or parse) that failed with st. */
static void check_error(sv_status st, const sv_error_t *err, size_t len) {
    CHECK(st > SV_OK && st <= SV_ERR_ARG);
    CHECK(err->code == st);
    CHECK(err->offset == -1 || (err->offset >= 0 && (size_t)err->offset <= len));
    CHECK(memchr(err->message, '\0', sizeof err->message) != NULL);
    CHECK(err->message[0] != '\0');
    /* Nothing in a regex compile under these budgets should run the process
     * out of memory, and the arguments are valid. */
    CHECK(st != SV_ERR_NOMEM && st != SV_ERR_ARG && st != SV_ERR_IO);
}

/* Whole-DFA checks; n = states, k = classes. Scratch is malloc'd per call:
 * the fuzzer's leak check would catch a missing free. */
static uint32_t check_structure(const sv_dfa_t *d) {
    uint32_t n = sv_dfa_num_states(d), k = sv_dfa_num_classes(d);
    const uint8_t *cls = sv_dfa_byte_classes(d);
    CHECK(n >= 1 && k >= 1 && k <= 256);

    /* Classes: every class is used, and the class of b decides every
     * transition on b. */
    int first_byte[256];
    for (int c = 0; c < 256; c++) first_byte[c] = -1;
    uint32_t used = 0;
    for (int b = 0; b < 256; b++) {
        CHECK(cls[b] < k);
        if (first_byte[cls[b]] < 0) first_byte[cls[b]] = b, used++;
    }
    CHECK(used == k);
    for (uint32_t s = 0; s < n; s++)
        for (int b = 0; b < 256; b++) {
            int32_t t = sv_dfa_next(d, (int32_t)s, (uint8_t)b);
            CHECK(t == SV_DFA_DEAD || (t >= 0 && (uint32_t)t < n));
            CHECK(t == sv_dfa_next(d, (int32_t)s, (uint8_t)first_byte[cls[b]]));
        }

    /* Distinct classes have distinct columns: hash each column, compare on
     * equal hashes. */
    uint64_t h[256];
    for (uint32_t c = 0; c < k; c++) {
        h[c] = 1469598103934665603ull;
        for (uint32_t s = 0; s < n; s++)
            h[c] = (h[c] ^ (uint32_t)sv_dfa_next(d, (int32_t)s, (uint8_t)first_byte[c])) * 1099511628211ull;
    }
    for (uint32_t a = 0; a < k; a++)
        for (uint32_t c = a + 1; c < k; c++) {
            if (h[a] != h[c]) continue;
            uint32_t s = 0;
            while (s < n && sv_dfa_next(d, (int32_t)s, (uint8_t)first_byte[a]) ==
                                sv_dfa_next(d, (int32_t)s, (uint8_t)first_byte[c]))
                s++;
            CHECK(s < n); /* two classes no state tells apart */
        }

    /* BFS numbering: a breadth-first walk from 0, bytes in increasing order,
     * meets the states as 0, 1, 2, ... and reaches all of them. */
    uint32_t seen = 1;
    for (uint32_t q = 0; q < seen; q++)
        for (int b = 0; b < 256; b++) {
            int32_t t = sv_dfa_next(d, (int32_t)q, (uint8_t)b);
            if (t < 0) continue;
            CHECK((uint32_t)t <= seen);
            if ((uint32_t)t == seen) seen++;
        }
    CHECK(seen == n);

    /* Distances: finite everywhere (trimmed), 0 exactly at acceptance, and
     * the Bellman equation elsewhere. */
    uint32_t maxdist = 0;
    for (uint32_t s = 0; s < n; s++) {
        uint32_t ds = sv_dfa_distance(d, (int32_t)s);
        CHECK(ds < n);
        if (ds > maxdist) maxdist = ds;
        if (sv_dfa_is_accepting(d, (int32_t)s)) {
            CHECK(ds == 0);
            continue;
        }
        uint32_t best = UINT32_MAX;
        for (uint32_t c = 0; c < k; c++) {
            int32_t t = sv_dfa_next(d, (int32_t)s, (uint8_t)first_byte[c]);
            if (t >= 0 && sv_dfa_distance(d, t) < best) best = sv_dfa_distance(d, t);
        }
        CHECK(best != UINT32_MAX && ds == best + 1);
    }

    /* Forced chains. */
    uint32_t nforced = 0;
    for (uint32_t s = 0; s < n; s++) {
        int live = 0, only = -1;
        for (int b = 0; b < 256; b++)
            if (sv_dfa_next(d, (int32_t)s, (uint8_t)b) >= 0) live++, only = b;
        bool forced = !sv_dfa_is_accepting(d, (int32_t)s) && live == 1;
        uint32_t len;
        const uint8_t *fb = sv_dfa_forced(d, (int32_t)s, &len);
        CHECK(forced == (len > 0));
        if (!forced) continue;
        nforced++;
        CHECK(fb != NULL && fb[0] == (uint8_t)only);
        int32_t t = sv_dfa_next(d, (int32_t)s, fb[0]);
        uint32_t tlen;
        const uint8_t *tb = sv_dfa_forced(d, t, &tlen);
        CHECK(tlen == len - 1);
        CHECK(tlen == 0 || memcmp(tb, fb + 1, tlen) == 0);
        /* Walking the whole chain lowers the distance by its length. */
        int32_t q = (int32_t)s;
        for (uint32_t i = 0; i < len; i++) {
            q = sv_dfa_next(d, q, fb[i]);
            CHECK(q >= 0);
        }
        uint32_t qlen;
        (void)sv_dfa_forced(d, q, &qlen);
        CHECK(qlen == 0);
        CHECK(sv_dfa_distance(d, q) + len == sv_dfa_distance(d, (int32_t)s));
    }
    CHECK(nforced == sv_dfa_num_forced_states(d));

    /* Minimality: Moore refinement from {accepting, not}; a minimal DFA ends
     * with one block per state. Its rounds can number n, each O(n k): past
     * 2^22 steps it is left to the unit tests, which check minimality on
     * their own automata, so that one input cannot stall the fuzzer (a
     * chain such as \p{L&}d{1550} took seconds at 2^26 and more; a chain of
     * 1,620 states over 9 classes, 2^24.5 steps, took 9 s a run under the
     * sanitizers and failed the CI smoke run as a slow unit). Each round maps (block, successor blocks) to
     * a new block id through a hash table; rounds stop when no block splits.
     * The dead state is block n (successors are DEAD → n). */
    if ((uint64_t)n * n * k > (1ull << 22)) return maxdist;
    uint32_t *blk = malloc((n + 1) * sizeof *blk), *nblk = malloc((n + 1) * sizeof *nblk);
    uint32_t tcap = 1;
    while (tcap < 2 * (n + 1)) tcap <<= 1;
    uint32_t *table = malloc(tcap * sizeof *table); /* state + 1, 0 = empty */
    CHECK(blk && nblk && table);
    for (uint32_t s = 0; s < n; s++) blk[s] = sv_dfa_is_accepting(d, (int32_t)s) ? 1 : 0;
    blk[n] = 2;
    uint32_t nblocks = 0;
    for (;;) {
        memset(table, 0, tcap * sizeof *table);
        uint32_t count = 0;
        for (uint32_t s = 0; s <= n; s++) {
            uint64_t hh = 0x9e3779b97f4a7c15ull ^ blk[s];
            for (uint32_t c = 0; c < k && s < n; c++) {
                int32_t t = sv_dfa_next(d, (int32_t)s, (uint8_t)first_byte[c]);
                hh = (hh ^ blk[t < 0 ? n : (uint32_t)t]) * 0x100000001b3ull;
            }
            uint32_t i = (uint32_t)(hh ^ (hh >> 31)) & (tcap - 1);
            for (;; i = (i + 1) & (tcap - 1)) {
                if (!table[i]) {
                    table[i] = s + 1;
                    nblk[s] = count++;
                    break;
                }
                uint32_t r = table[i] - 1; /* same signature as s? */
                bool same = blk[r] == blk[s] && (r < n) == (s < n);
                for (uint32_t c = 0; same && c < k && s < n; c++) {
                    int32_t a = sv_dfa_next(d, (int32_t)s, (uint8_t)first_byte[c]);
                    int32_t b = sv_dfa_next(d, (int32_t)r, (uint8_t)first_byte[c]);
                    same = blk[a < 0 ? n : (uint32_t)a] == blk[b < 0 ? n : (uint32_t)b];
                }
                if (same) {
                    nblk[s] = nblk[r];
                    break;
                }
            }
        }
        memcpy(blk, nblk, (n + 1) * sizeof *blk);
        if (count == nblocks) break;
        nblocks = count;
    }
    CHECK(nblocks == n + 1); /* every state, and the dead state, alone */
    free(blk);
    free(nblk);
    free(table);
    return maxdist;
}

/* Returns the sample (caller frees) and its length in *out_len. */
static uint8_t *check_sample(const sv_dfa_t *d, uint64_t seed, uint32_t soft_len, uint32_t maxdist,
                             size_t *out_len) {
    size_t cap = (size_t)soft_len + maxdist + 1;
    uint8_t *buf = malloc(cap);
    CHECK(buf);
    sv_rng_t rng;
    sv_rng_seed(&rng, seed);
    size_t len = (size_t)-1;
    sv_status st = sv_dfa_sample(d, &rng, soft_len, buf, cap, &len);
    CHECK(st == SV_OK);                     /* dfa.h bounds the length */
    CHECK(len <= (size_t)soft_len + maxdist);
    CHECK(sv_dfa_matches(d, buf, len));
    CHECK(valid_utf8(buf, len));
    CHECK(len >= sv_dfa_distance(d, 0));
    if (soft_len == 0) CHECK(len == sv_dfa_distance(d, 0));
    *out_len = len;
    return buf;
}

/* The same walk as sv_dfa_matches, through the public step function. */
static bool walk(const sv_dfa_t *d, const uint8_t *s, size_t n) {
    int32_t q = sv_dfa_start(d);
    for (size_t i = 0; i < n && q >= 0; i++) q = sv_dfa_next(d, q, s[i]);
    return q >= 0 && sv_dfa_is_accepting(d, q);
}

/* `(?:P)|(?:P)` denotes P's language, so its canonical DFA must be P's. */
static void check_doubled(const uint8_t *data, size_t size, const sv_dfa_t *d) {
    static const char open[] = "(?:", mid[] = ")|(?:", close[] = ")";
    size_t n = 2 * size + 3 + 5 + 1;
    char *p = malloc(n);
    CHECK(p);
    size_t at = 0;
    memcpy(p + at, open, 3), at += 3;
    memcpy(p + at, data, size), at += size;
    memcpy(p + at, mid, 5), at += 5;
    memcpy(p + at, data, size), at += size;
    memcpy(p + at, close, 1), at += 1;
    sv_fsm_limits_t lim;
    limits(&lim);
    sv_dfa_t *d2 = NULL;
    sv_error_t err;
    sv_error_clear(&err);
    sv_status st = sv_regex_compile(p, at, &lim, &d2, &err);
    /* The doubled NFA is bigger and may run past a budget (or, one group
     * deeper, the nesting limit); anything else must agree with P. */
    if (st == SV_OK) {
        CHECK(sv_dfa_equal(d, d2));
        CHECK(sv_dfa_equal(d2, d));
    } else {
        check_error(st, &err, at);
        CHECK(st == SV_ERR_BUDGET || st == SV_ERR_TIMEOUT);
    }
    sv_dfa_destroy(d2);
    free(p);
}

/* ---- PCRE2 as an oracle --------------------------------------------------
 * PCRE2 (UTF mode, anchored at both ends, `$` only at the very end) accepts
 * the same language as this dialect wherever the two define a pattern the
 * same way. Where they do not, the comparison is skipped, conservatively:
 *   - a pattern either engine refuses;
 *   - `[]` and `[^]` (ECMA: empty / any; PCRE: `]` is a literal) and `\v`
 *     (ECMA: VT; PCRE: any vertical space), anywhere in the pattern text;
 *   - subjects holding CR, U+2028 or U+2029, which ECMA's `.` excludes and
 *     PCRE's (newline = LF) does not;
 *   - non-ASCII subjects when the pattern mentions \s \S \p \P: ECMA's \s is
 *     Unicode while PCRE's is ASCII without UCP, and the two may be built
 *     on different Unicode versions;
 *   - a subject on which PCRE2 hits its backtracking limits.
 * Everything else must agree byte for byte. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

typedef struct {
    pcre2_code *re;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    bool unicode_sets;  /* the pattern mentions \s \S \p \P */
} oracle_t;

static bool mentions(const uint8_t *p, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(p + i, needle, k) == 0) return true;
    return false;
}

static bool oracle_open(oracle_t *o, const uint8_t *p, size_t n) {
    memset(o, 0, sizeof *o);
    if (mentions(p, n, "[]") || mentions(p, n, "[^]") || mentions(p, n, "\\v")) return false;
    o->unicode_sets = mentions(p, n, "\\s") || mentions(p, n, "\\S") || mentions(p, n, "\\p") ||
                      mentions(p, n, "\\P");
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    CHECK(cc);
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    int code;
    PCRE2_SIZE off;
    o->re = pcre2_compile((PCRE2_SPTR)p, n, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C, &code,
                          &off, cc);
    pcre2_compile_context_free(cc);
    if (!o->re) return false;
    o->md = pcre2_match_data_create_from_pattern(o->re, NULL);
    o->mc = pcre2_match_context_create(NULL);
    CHECK(o->md && o->mc);
    pcre2_set_match_limit(o->mc, 20000);
    pcre2_set_depth_limit(o->mc, 2000);
    return true;
}

static void oracle_close(oracle_t *o) {
    pcre2_match_data_free(o->md);
    pcre2_match_context_free(o->mc);
    pcre2_code_free(o->re);
}

/* Compares the two engines on s (when the comparison is meaningful). */
static void oracle_check(const oracle_t *o, const sv_dfa_t *d, const uint8_t *s, size_t n) {
    bool ours = sv_dfa_matches(d, s, n);
    if (!valid_utf8(s, n)) {
        CHECK(!ours); /* every language here is a set of UTF-8 strings */
        return;
    }
    if (!o->re) return;
    bool ascii = true;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\r') return;
        if (s[i] >= 0x80) ascii = false;
        if (i + 2 < n && s[i] == 0xE2 && s[i + 1] == 0x80 && (s[i + 2] == 0xA8 || s[i + 2] == 0xA9)) return;
    }
    if (!ascii && o->unicode_sets) return;
    int rc = pcre2_match(o->re, (PCRE2_SPTR)s, n, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, o->md, o->mc);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) return; /* a limit, not an answer */
    CHECK(ours == (rc >= 0));
}

/* Subjects near a sample: each single-byte deletion, and a few replaced or
 * inserted bytes drawn from the pattern itself and a small alphabet. */
static void oracle_neighbours(const oracle_t *o, const sv_dfa_t *d, const uint8_t *s, size_t n,
                              const uint8_t *pat, size_t np, uint64_t seed) {
    static const uint8_t alpha[] = {'a', 'b', '0', '9', '-', '.', ' ', '\n', '_', 'Z', 0x00, 0xC3, 0xA9, 0xFF};
    uint8_t *t = malloc(n + 2);
    CHECK(t);
    for (size_t i = 0; i < n && i < 32; i++) {
        memcpy(t, s, i), memcpy(t + i, s + i + 1, n - i - 1);
        oracle_check(o, d, t, n - 1);
    }
    sv_rng_t rng;
    sv_rng_seed(&rng, seed);
    for (int k = 0; k < 16; k++) {
        uint8_t b = np && sv_rng_below(&rng, 2) ? pat[sv_rng_below(&rng, (uint32_t)np)]
                                                : alpha[sv_rng_below(&rng, sizeof alpha)];
        size_t i = sv_rng_below(&rng, (uint32_t)n + 1);
        if (k & 1) { /* insert b at i */
            memcpy(t, s, i), t[i] = b, memcpy(t + i + 1, s + i, n - i);
            oracle_check(o, d, t, n + 1);
        } else if (i < n) { /* replace byte i by b */
            memcpy(t, s, n), t[i] = b;
            oracle_check(o, d, t, n);
        }
    }
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *pattern = (const char *)data;
    sv_fsm_limits_t lim;
    limits(&lim);

    /* The parser alone, for the error-source check below. */
    sv_arena_t *arena = sv_arena_create(0);
    CHECK(arena);
    sv_ast_t *ast = NULL;
    sv_error_t perr;
    sv_error_clear(&perr);
    sv_status pst = sv_regex_parse(pattern, size, arena, &ast, &perr);
    if (pst) check_error(pst, &perr, size);
    else CHECK(ast != NULL);
    sv_arena_destroy(arena);

    sv_dfa_t *const untouched = (sv_dfa_t *)(uintptr_t)0x5e5e5e5e;
    sv_dfa_t *d = untouched;
    sv_error_t err;
    sv_error_clear(&err);
    sv_status st = sv_regex_compile(pattern, size, &lim, &d, &err);
    if (st != SV_OK) {
        check_error(st, &err, size);
        CHECK(d == untouched);
        if (pst) {
            CHECK(st == pst && err.offset == perr.offset);
        } else {
            CHECK(st != SV_ERR_SYNTAX && st != SV_ERR_UNSUPPORTED);
        }
        return 0;
    }
    CHECK(pst == SV_OK);
    CHECK(d != NULL && d != untouched);

    uint32_t maxdist = check_structure(d);

    /* A few fixed strings, through both matchers. */
    CHECK(sv_dfa_matches(d, (const uint8_t *)"", 0) == walk(d, (const uint8_t *)"", 0));
    CHECK(sv_dfa_matches(d, (const uint8_t *)"", 0) == sv_dfa_is_accepting(d, 0));
    CHECK(sv_dfa_matches(d, data, size) == walk(d, data, size));
    if (sv_dfa_distance(d, 0) == 0) CHECK(sv_dfa_matches(d, (const uint8_t *)"", 0));

    /* Samples with fixed seeds: soft_len 0 gives a shortest string. Each is
     * then compared with PCRE2, with its neighbours. */
    oracle_t o;
    if (!oracle_open(&o, data, size)) oracle_close(&o), memset(&o, 0, sizeof o);
    oracle_check(&o, d, (const uint8_t *)"", 0);
    oracle_check(&o, d, data, size);
    static const uint32_t soft[] = {0, 8, 64};
    for (uint32_t i = 0; i < 3; i++) {
        size_t n;
        uint8_t *smp = check_sample(d, 1 + i, soft[i], maxdist, &n);
        oracle_check(&o, d, smp, n);
        oracle_neighbours(&o, d, smp, n, data, size, 100 + i);
        free(smp);
    }
    oracle_close(&o);

    CHECK(sv_dfa_equal(d, d));
    check_doubled(data, size, d);

    sv_dfa_destroy(d);
    return 0;
}
