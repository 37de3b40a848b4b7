/* test_regex.c — the regex compiler on hand-made cases: error messages and
 * offsets, forced paths, distances, minimality (checked by an independent
 * naive partition refinement), canonical equality of equivalent rewritings,
 * budgets on explosive patterns, and whole-string semantics of ^ and $. */
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/dfa_internal.h"
#include "fsm/regex.h"
#include "test.h"

static sv_dfa_t *compile(const char *p, sv_status want, sv_error_t *e) {
    sv_dfa_t *d = NULL;
    sv_error_clear(e);
    sv_status st = sv_regex_compile(p, strlen(p), NULL, &d, e);
    CHECK(st == want, "/%s/: status %s, want %s (%s)", p, sv_status_name(st), sv_status_name(want), e->message);
    return st ? NULL : d;
}

/* ---- errors ------------------------------------------------------------- */
static void test_errors(void) {
    static const struct { const char *p; sv_status st; long off; const char *needle; } cases[] = {
        {"abc(", SV_ERR_SYNTAX, 3, "missing )"},
        {"a)", SV_ERR_SYNTAX, 1, "unmatched )"},
        {"[z-a]", SV_ERR_SYNTAX, 1, "out of order"},
        {"[abc", SV_ERR_SYNTAX, 0, "unterminated"},
        {"a**", SV_ERR_SYNTAX, 2, "nothing to repeat"},
        {"a{2}{3}", SV_ERR_SYNTAX, 4, "nothing to repeat"},
        {"a?{2}", SV_ERR_SYNTAX, 2, "nothing to repeat"},
        {"*a", SV_ERR_SYNTAX, 0, "nothing to repeat"},
        {"a|?", SV_ERR_SYNTAX, 2, "nothing to repeat"},
        {"a{3,2}", SV_ERR_SYNTAX, 1, "out of order"},
        {"ab\\", SV_ERR_SYNTAX, 2, "backslash"},
        {"a\\q", SV_ERR_SYNTAX, 1, "unknown escape"},
        {"\\u12", SV_ERR_SYNTAX, 0, "4 hex digits"},
        {"\\x4", SV_ERR_SYNTAX, 0, "2 hex digits"},
        {"\\u{110000}", SV_ERR_SYNTAX, 0, "beyond"},
        {"a\xff", SV_ERR_SYNTAX, 1, "invalid UTF-8"},
        {"\xe4\xb8", SV_ERR_SYNTAX, 0, "invalid UTF-8"},
        {"(?=x)", SV_ERR_UNSUPPORTED, 0, "lookahead"},
        {"a(?!x)", SV_ERR_UNSUPPORTED, 1, "lookahead"},
        {"x(?<!y)", SV_ERR_UNSUPPORTED, 1, "lookbehind"},
        {"x(?<=y)", SV_ERR_UNSUPPORTED, 1, "lookbehind"},
        {"(a)\\1", SV_ERR_UNSUPPORTED, 3, "back-reference"},
        {"(?<n>a)\\k<n>", SV_ERR_UNSUPPORTED, 7, "back-reference"},
        {"\\bx", SV_ERR_UNSUPPORTED, 0, "word boundary"},
        {"x\\B", SV_ERR_UNSUPPORTED, 1, "word-boundary"},
        {"a*+", SV_ERR_UNSUPPORTED, 2, "possessive"},
        {"(?i)a", SV_ERR_UNSUPPORTED, 0, "inline flags"},
        {"(?>a)", SV_ERR_UNSUPPORTED, 0, "atomic"},
        {"x[[:alpha:]]", SV_ERR_UNSUPPORTED, 2, "POSIX"},
        {"\\p{Greek}", SV_ERR_UNSUPPORTED, 0, "Unicode property"},
        {"\\p{L", SV_ERR_SYNTAX, 0, "unterminated"},
        {"a\\Z", SV_ERR_UNSUPPORTED, 1, "\\Z"},
        {"\\012", SV_ERR_UNSUPPORTED, 0, "octal"},
        {"^*", SV_ERR_SYNTAX, 1, "assertion"},
        {"a{100001}", SV_ERR_BUDGET, 1, "limit"},
        {"a$b", SV_ERR_EMPTY, -1, "matches no string"},
        {"[]", SV_ERR_EMPTY, -1, "matches no string"},
        {"\\uD800", SV_ERR_EMPTY, -1, "matches no string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sv_error_t e;
        sv_dfa_t *d = compile(cases[i].p, cases[i].st, &e);
        sv_dfa_destroy(d);
        if (e.code != cases[i].st) continue;
        CHECK(e.offset == cases[i].off, "/%s/: offset %ld, want %ld", cases[i].p, e.offset, cases[i].off);
        CHECK(strstr(e.message, cases[i].needle) != NULL, "/%s/: message '%s' lacks '%s'", cases[i].p, e.message,
              cases[i].needle);
    }
    /* Deep nesting is a budget error, not a stack overflow. */
    char deep[1200];
    memset(deep, '(', 600);
    memset(deep + 600, ')', 600);
    deep[1199] = '\0';
    sv_error_t e;
    sv_dfa_t *d = NULL;
    CHECK(sv_regex_compile(deep, 1200 - 1, NULL, &d, &e) == SV_ERR_BUDGET, "600 nested groups: %s", e.message);
    printf("  errors: %zu malformed or refused patterns, each with its status, offset and message\n",
           sizeof cases / sizeof cases[0] + 1);
}

/* ---- budgets ------------------------------------------------------------ */
static void test_budgets(void) {
    sv_fsm_limits_t lim;
    sv_fsm_limits_default(&lim);
    static const struct { const char *p; sv_status st; } cases[] = {
        {"(a|b)*a(a|b){24}", SV_ERR_BUDGET},   /* 2^25 subset states */
        {"(a{1000}){1000}", SV_ERR_BUDGET},    /* 10^6 copies of a */
        {"((a{100}){100}){100}", SV_ERR_BUDGET},
        {".{1000}.{1000}", SV_OK},
        {"(a|aa){1000}", SV_OK},               /* only 2001 states */
        {"(x+x+)+y", SV_OK},                   /* catastrophic for backtrackers, 4 states here */
        {"(a*)*b", SV_OK},
        {"((a|b|c|d)*){50}", SV_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sv_error_t e;
        sv_dfa_t *d = NULL;
        sv_status st = sv_regex_compile(cases[i].p, strlen(cases[i].p), &lim, &d, &e);
        CHECK(st == cases[i].st, "/%s/: %s (%s)", cases[i].p, sv_status_name(st), st ? e.message : "ok");
        if (st == SV_ERR_BUDGET) CHECK(strstr(e.message, "budget") != NULL, "budget message: %s", e.message);
        sv_dfa_destroy(d);
    }
    /* A tight time budget stops a slow construction with SV_ERR_TIMEOUT. */
    lim.max_time_us = 1;
    lim.max_dfa_states = 10000000;
    sv_error_t e;
    sv_dfa_t *d = NULL;
    sv_status st = sv_regex_compile("(a|b)*a(a|b){20}", 16, &lim, &d, &e);
    CHECK(st == SV_ERR_TIMEOUT, "time budget: %s", sv_status_name(st));
    sv_dfa_destroy(d);
    /* A small memory budget. */
    sv_fsm_limits_default(&lim);
    lim.max_memory = 1 << 16;
    st = sv_regex_compile("[a-z]{20000}", 12, &lim, &d, &e);
    CHECK(st == SV_ERR_BUDGET && strstr(e.message, "memory"), "memory budget: %s %s", sv_status_name(st), e.message);
    printf("  budgets: exponential, huge-count and slow patterns end with budget/timeout errors\n");
}

/* ---- forced paths and distances ------------------------------------------ */
static void expect_forced(const char *p, const char *input, const char *forced, uint32_t dist) {
    sv_error_t e;
    sv_dfa_t *d = compile(p, SV_OK, &e);
    if (!d) return;
    int32_t s = 0;
    for (const char *c = input; *c && s >= 0; c++) s = sv_dfa_next(d, s, (uint8_t)*c);
    CHECK(s >= 0, "/%s/: prefix '%s' is dead", p, input);
    if (s >= 0) {
        uint32_t len;
        const uint8_t *f = sv_dfa_forced(d, s, &len);
        CHECK(len == strlen(forced) && memcmp(f, forced, len) == 0, "/%s/ after '%s': forced '%.*s', want '%s'", p,
              input, (int)len, (const char *)f, forced);
        CHECK(sv_dfa_distance(d, s) == dist, "/%s/ after '%s': distance %u, want %u", p, input,
              sv_dfa_distance(d, s), dist);
        /* Following the forced bytes lands at distance dist - len. */
        int32_t t = s;
        for (uint32_t i = 0; i < len && t >= 0; i++) t = sv_dfa_next(d, t, f[i]);
        CHECK(t >= 0 && sv_dfa_distance(d, t) == dist - len, "/%s/: forced path does not shorten the distance", p);
    }
    sv_dfa_destroy(d);
}

static void test_forced(void) {
    expect_forced("abc", "", "abc", 3);
    expect_forced("abc", "a", "bc", 2);
    expect_forced("abc", "abc", "", 0);
    expect_forced("a(b|c)d", "", "a", 3);
    expect_forced("a(b|c)d", "ab", "d", 1);
    expect_forced("abc|abd", "", "ab", 3);
    expect_forced("\\{\"name\": \"[a-z]+\"\\}", "", "{\"name\": \"", 13);
    expect_forced("\\{\"name\": \"[a-z]+\"\\}", "{\"name\": \"x", "", 2);
    expect_forced("\\{\"name\": \"[a-z]+\"\\}", "{\"name\": \"x\"", "}", 1);
    expect_forced("é", "", "\xc3\xa9", 2);
    expect_forced("😀!", "", "\xf0\x9f\x98\x80!", 5);
    expect_forced("ab?", "", "a", 1);   /* after 'a' the state accepts: not forced */
    expect_forced("ab?", "a", "", 0);
    expect_forced("a*b", "", "", 1);
    expect_forced("\\d{3}-\\d{4}", "123", "-", 5);
    expect_forced("a{3,5}", "", "aaa", 3);
    expect_forced("(abc|d)", "", "", 1);
    expect_forced("x*", "", "", 0);
    expect_forced("é{2}", "", "\xc3\xa9\xc3\xa9", 4);
    expect_forced("[\\u0100-\\u013F]", "", "\xc4", 2); /* one lead byte, a range of continuations */
    expect_forced("true|false|null", "n", "ull", 3);
    expect_forced("true|false|null", "", "", 4);
    /* min_len through the public accessor. */
    sv_error_t e;
    sv_dfa_t *d = compile("(\\d{2,4}|[a-z]{3})x?", SV_OK, &e);
    if (d) CHECK(sv_dfa_distance(d, 0) == 2, "min_len %u", sv_dfa_distance(d, 0));
    sv_dfa_destroy(d);
    printf("  forced paths and distances: 22 hand-made cases\n");
}

/* ---- minimality ----------------------------------------------------------
 * Independent check: naive Moore refinement over all 256 bytes (no classes,
 * no Hopcroft) on the output DFA plus an explicit dead state must leave every
 * state in a block of its own, and the dead state alone. */
static bool is_minimal(const sv_dfa_t *d) {
    uint32_t n = d->nstates + 1, dead = d->nstates;
    uint32_t *cls = malloc(n * sizeof *cls), *next = malloc(n * sizeof *next);
    for (uint32_t s = 0; s < n; s++) cls[s] = s == dead ? 0 : d->accept[s];
    uint32_t ncls = 0;
    for (int round = 0; round < (int)n + 1; round++) {
        /* signature: (cls, cls of each byte successor); compare pairwise. */
        uint32_t k = 0;
        for (uint32_t s = 0; s < n; s++) {
            next[s] = UINT32_MAX;
            for (uint32_t t = 0; t < s && next[s] == UINT32_MAX; t++) {
                if (cls[t] != cls[s]) continue;
                bool same = true;
                for (int b = 0; b < 256 && same; b++) {
                    int32_t x = s == dead ? -1 : sv_dfa_next(d, (int32_t)s, (uint8_t)b);
                    int32_t y = t == dead ? -1 : sv_dfa_next(d, (int32_t)t, (uint8_t)b);
                    same = cls[x < 0 ? dead : (uint32_t)x] == cls[y < 0 ? dead : (uint32_t)y];
                }
                if (same) next[s] = next[t];
            }
            if (next[s] == UINT32_MAX) next[s] = k++;
        }
        memcpy(cls, next, n * sizeof *cls);
        if (k == ncls) break;
        ncls = k;
    }
    free(cls);
    free(next);
    return ncls == n;
}

static void test_minimal(void) {
    static const char *pats[] = {
        "abc", "(a|b)*abb", "a*b*c*", "(ab|ba)*", "[0-9]{1,3}(\\.[0-9]{1,3}){3}", "\\d{4}-\\d{2}-\\d{2}",
        "(a|ab)(c|bcd)", ".", "[^a]", "\\p{Lu}\\p{Ll}*", "(true|false|null)", "[a-z]+@[a-z]+\\.(com|org)",
        "(x|y|z){2,5}", "a|^b$|c$", "(\\s*,\\s*[a-z]){0,3}", "é|è|ê|ë", "[\\u0000-\\u{10FFFF}]{2}",
    };
    int n = 0;
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        sv_error_t e;
        sv_dfa_t *d = compile(pats[i], SV_OK, &e);
        if (!d) continue;
        CHECK(is_minimal(d), "/%s/: the DFA has equivalent states", pats[i]);
        /* Classes are coarsest: no two classes have identical columns. */
        bool coarse = true;
        for (uint32_t a = 0; a < d->nclasses && coarse; a++)
            for (uint32_t b = a + 1; b < d->nclasses && coarse; b++) {
                bool same = true;
                for (uint32_t s = 0; s < d->nstates && same; s++)
                    same = d->trans[s * d->nclasses + a] == d->trans[s * d->nclasses + b];
                coarse = !same;
            }
        CHECK(coarse, "/%s/: two byte classes could merge", pats[i]);
        sv_dfa_destroy(d);
        n++;
    }
    /* Equivalent rewritings give identical canonical DFAs; different
     * languages do not. */
    static const struct { const char *a, *b; bool equal; } pairs[] = {
        {"(a|b)*", "[ab]*", true},
        {"a+", "aa*", true},
        {"(ab)*a", "a(ba)*", true},
        {"(a*b*)*", "[ab]*", true},
        {"x{2,4}", "xx(x(x)?)?", true},
        {"x{2,4}", "xx|xxx|xxxx", true},
        {"\\d", "[0-9]", true},
        {"\\w", "[A-Za-z0-9_]", true},
        {"colou?r", "color|colour", true},
        {"[^\\n]", ".|\\r|\\u2028|\\u2029", true},
        {"(a|ab)(c|bcd)", "ac|abcd|abc|abbcd", true},
        {"^abc$", "abc", true},
        {"(^a|b)c", "ac|bc", true},
        {"a{0}b", "b", true},
        {"[\\s\\S]", "[^]", true},
        {"\\uD83D\\uDE00", "😀", true},
        {"\\u{1F600}", "😀", true},
        {"\\x41\\u0042\\cJ", "AB\\n", true},
        {"a*?b+?c??", "a*b+c?", true},
        {"(?<year>\\d{4})", "(?:\\d{4})", true},
        {"[\\d-z]", "[0-9z-]", true},
        {"a{,3}", "a\\{,3\\}", true},
        {"(a|b)*", "[abc]*", false},
        {"a+", "a*", false},
        {"x{2,4}", "x{2,5}", false},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        sv_error_t e;
        sv_dfa_t *a = compile(pairs[i].a, SV_OK, &e), *b = compile(pairs[i].b, SV_OK, &e);
        if (a && b)
            CHECK(sv_dfa_equal(a, b) == pairs[i].equal, "/%s/ vs /%s/: equal=%d, want %d", pairs[i].a, pairs[i].b,
                  sv_dfa_equal(a, b), pairs[i].equal);
        sv_dfa_destroy(a);
        sv_dfa_destroy(b);
    }
    printf("  minimality: %d DFAs have no equivalent states and coarsest byte classes;\n"
           "  %zu pairs of rewritings compare as expected\n", n, sizeof pairs / sizeof pairs[0]);
}

/* ---- whole-string semantics ---------------------------------------------- */
static void test_semantics(void) {
    static const struct { const char *p, *s; bool m; } cases[] = {
        {"abc", "abc", true}, {"abc", "xabc", false}, {"abc", "abcx", false},
        {"a|^b$", "a", true}, {"a|^b$", "b", true}, {"a|^b$", "ab", false},
        {"x*^y", "y", true}, {"x*^y", "xy", false},
        {"(^|x)y", "y", true}, {"(^|x)y", "xy", true}, {"(^|x)y", "xxy", false},
        {"a(b$|c)d", "acd", true}, {"a(b$|c)d", "abd", false}, {"a(b$|c)", "ab", true},
        {"$^", "", true}, {"a?$", "", true}, {"\\Aab\\z", "ab", true},
        {".", "\n", false}, {".", "\r", false}, {".", "\xe2\x80\xa8", false}, {".", "\xc2\x85", true},
        {".", "\xf0\x9f\x98\x80", true}, {".", "\xed\xa0\x80", false}, {".*", "\xc0\x80", false},
        {"[^a]", "\xff", false}, {"[^]", "\n", true}, {"[^]*", "\xe4\xb8\xad\n", true},
        {"\\s", "\xef\xbb\xbf", true}, {"\\s", "\xe3\x80\x80", true}, {"\\s", "\xc2\x85", false},
        {"\\S", "\xc2\x85", true}, {"\\d", "\xd9\xa5", false}, {"\\w", "\xc3\xa9", false},
        {"\\p{Nd}", "\xd9\xa5", true}, {"\\P{L}", "\xc3\xa9", false}, {"\\p{L}", "\xe4\xb8\xad", true},
        {"[\\uD800-\\uDFFF]|x", "x", true}, {"[^\\uD800-\\uDFFF]", "\xf0\x9f\x98\x80", true},
        {"\\0", "\0", true}, {"a{", "a{", true}, {"a{1", "a{1", true}, {"a{1,2", "a{1,2", true},
        {"]", "]", true}, {"}", "}", true}, {"[a-]", "-", true}, {"[-a]", "-", true}, {"[\\]]", "]", true},
        {"[\\b]", "\b", true}, {"\\/", "/", true}, {"\\-", "-", true}, {"\\.", ".", true}, {"\\.", "a", false},
        {"(?P<x>a)", "a", true}, {"a|", "", true}, {"|a", "a", true}, {"()", "", true}, {"(|)", "", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sv_error_t e;
        sv_dfa_t *d = compile(cases[i].p, SV_OK, &e);
        if (!d) continue;
        size_t n = strlen(cases[i].s) + (cases[i].s[0] == '\0' && strcmp(cases[i].p, "\\0") == 0);
        CHECK(sv_dfa_matches(d, (const uint8_t *)cases[i].s, n) == cases[i].m, "/%s/ on \"%s\": want %d", cases[i].p,
              cases[i].s, cases[i].m);
        sv_dfa_destroy(d);
    }
    printf("  semantics: %zu pattern/string cases (anchors anywhere, ECMA classes, literal braces)\n",
           sizeof cases / sizeof cases[0]);
}

/* ---- sampling -------------------------------------------------------------- */
static void test_sample(void) {
    static const char *pats[] = {"[a-z]{3,8}@(ex|example)\\.(com|org)", "\\p{L}{1,5}", ".{0,20}", "(ab|cd)*e"};
    int total = 0;
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        sv_error_t e;
        sv_dfa_t *d = compile(pats[i], SV_OK, &e);
        if (!d) continue;
        sv_rng_t rng;
        sv_rng_seed(&rng, i);
        uint8_t buf[512];
        for (int k = 0; k < 500; k++, total++) {
            size_t len;
            CHECK(sv_dfa_sample(d, &rng, 16, buf, sizeof buf, &len) == SV_OK, "sample");
            CHECK(sv_dfa_matches(d, buf, len), "/%s/: sampled string is not accepted", pats[i]);
            CHECK(len >= sv_dfa_distance(d, 0), "/%s/: sample shorter than min_len", pats[i]);
        }
        sv_dfa_destroy(d);
    }
    printf("  sampling: %d samples accepted by their DFA\n", total);
}

int main(void) {
    printf("test_regex: hand-made checks of the regex compiler\n");
    test_errors();
    test_budgets();
    test_forced();
    test_minimal();
    test_semantics();
    test_sample();
    return test_summary("test_regex: errors, budgets, forced paths, distances, minimality, semantics, sampling");
}
