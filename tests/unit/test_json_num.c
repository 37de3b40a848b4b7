/* test_json_num.c — numeric languages (json_num.h) against an independent
 * reference written here with exact arithmetic:
 *
 *  (a) every number spelling up to 6 bytes over "-0123456789." (trailing
 *      zeros, "-0", "-0.0" included) against many specs: integer/number ×
 *      bounds {0, -0, 7, -7, 1.5, -1.5, 0.25, 100, 99.99, -1000, 1e20} ×
 *      inclusive/exclusive × multipleOf {1, 2, 3, 7, 10, 0.5, 0.25, 0.01, 1.5};
 *      values are compared as integers scaled by 10^6 (exact for these);
 *  (b) random spellings near huge or tiny bounds (30 digits each side),
 *      compared by a string-based big-decimal comparison, multiples by
 *      Horner's rule;
 *  (c) sv_json_number_value against hand-written regexes and exhaustively;
 *  (d) sv_decimal_from_double on known values;
 *  and the budget, empty and argument errors.
 * Each produced language must also lie inside its universe (the number or
 * integer grammar as a regex DFA): checked exactly by DFA difference. */
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/dfa_internal.h"
#include "fsm/json_num.h"
#include "fsm/regex.h"
#include "util/clock.h"
#include "util/rng.h"
#include "test.h"

__extension__ typedef __int128 i128;

#define SCALE 1000000 /* reference values are value * 10^6 */
#define SCALE_DIGITS 6

static bool dig(char c) { return c >= '0' && c <= '9'; }

/* ---- reference grammar and values --------------------------------------- */

static bool ref_is_number(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i >= n || !dig(s[i])) return false;
    if (s[i] == '0') i++;
    else
        while (i < n && dig(s[i])) i++;
    if (i < n && s[i] == '.') {
        size_t k = ++i;
        while (i < n && dig(s[i])) i++;
        if (i == k) return false;
    }
    return i == n;
}

static bool ref_is_integer(const char *s, size_t n) {
    if (!ref_is_number(s, n) || memchr(s, '.', n)) return false;
    return !(n == 2 && s[0] == '-' && s[1] == '0');
}

/* value * 10^6 of a plain decimal with at most 6 fraction digits. */
static i128 ref_scaled(const char *s, size_t n) {
    size_t i = 0;
    bool neg = n > 0 && s[0] == '-';
    if (neg) i++;
    i128 v = 0;
    while (i < n && dig(s[i])) v = v * 10 + (s[i++] - '0');
    int f = 0;
    if (i < n && s[i] == '.')
        for (i++; i < n; i++, f++) v = v * 10 + (s[i] - '0');
    if (f > SCALE_DIGITS) abort(); /* a test-table mistake */
    for (; f < SCALE_DIGITS; f++) v *= 10;
    return neg ? -v : v;
}

/* Compares two plain decimals of any length by value: pads the integer parts
 * on the left and the fractions on the right to equal lengths, then compares
 * characters; -1, 0, 1. */
static int ref_cmp(const char *x, const char *y) {
    const char *s[2] = {x, y};
    bool neg[2], zero[2];
    const char *ip[2], *fp[2];
    size_t il[2], fl[2];
    for (int k = 0; k < 2; k++) {
        const char *p = s[k];
        neg[k] = *p == '-';
        if (neg[k]) p++;
        while (*p == '0' && dig(p[1])) p++;
        ip[k] = p;
        while (dig(*p)) p++;
        il[k] = (size_t)(p - ip[k]);
        fp[k] = *p == '.' ? p + 1 : p;
        fl[k] = strlen(fp[k]);
        zero[k] = true;
        for (const char *q = ip[k]; *q; q++)
            if (*q >= '1' && *q <= '9') zero[k] = false;
        if (zero[k]) neg[k] = false;
    }
    if (neg[0] != neg[1]) return neg[0] ? -1 : 1;
    int sign = neg[0] ? -1 : 1;
    size_t L = il[0] > il[1] ? il[0] : il[1], F = fl[0] > fl[1] ? fl[0] : fl[1];
    for (size_t i = 0; i < L + F; i++) {
        char c[2];
        for (int k = 0; k < 2; k++) {
            if (i < L) c[k] = i < L - il[k] ? '0' : ip[k][i - (L - il[k])];
            else c[k] = i - L < fl[k] ? fp[k][i - L] : '0';
        }
        if (c[0] != c[1]) return c[0] < c[1] ? -sign : sign;
    }
    return 0;
}

/* Whether plain decimal x is an integer multiple of plain decimal m > 0:
 * x = I.F (F without trailing zeros), m = P / 10^q; x * 10^q must be an
 * integer (|F| <= q) and that integer's digits mod P (Horner) must be 0. */
static bool ref_multiple(const char *x, const char *m) {
    uint64_t P = 0;
    int q = -1;
    for (const char *p = m; *p; p++) {
        if (*p == '.') q = 0;
        else P = P * 10 + (uint64_t)(*p - '0'), q += q >= 0;
    }
    if (q < 0) q = 0;
    const char *p = x + (*x == '-');
    const char *dot = strchr(p, '.');
    size_t il = dot ? (size_t)(dot - p) : strlen(p), fl = dot ? strlen(dot + 1) : 0;
    while (fl > 0 && dot[fl] == '0') fl--;
    if ((int)fl > q) return false;
    unsigned __int128 r = 0;
    for (size_t i = 0; i < il; i++) r = (r * 10 + (unsigned)(p[i] - '0')) % P;
    for (int i = 0; i < q; i++) r = (r * 10 + (unsigned)(i < (int)fl ? dot[1 + i] - '0' : 0)) % P;
    return r == 0;
}

/* ---- compiling specs ---------------------------------------------------- */

static sv_dfa_t *universe_number, *universe_integer;

static sv_dfa_t *rx(const char *p) {
    sv_dfa_t *d = NULL;
    sv_error_t e;
    sv_status st = sv_regex_compile(p, strlen(p), NULL, &d, &e);
    CHECK(st == SV_OK, "/%s/: %s", p, e.message);
    return d;
}

static void spec_text(const sv_num_spec_t *s, char *buf, size_t cap) {
    snprintf(buf, cap, "%s min%s=%s max%s=%s multipleOf=%s", s->integer ? "integer" : "number",
             s->min.exclusive ? "(excl)" : "", s->min.set ? s->min.value : "-", s->max.exclusive ? "(excl)" : "",
             s->max.set ? s->max.value : "-", s->multiple_of ? s->multiple_of : "-");
}

static long universe_checks;

/* Compiles a spec to a DFA (through the AST, as the schema compiler will);
 * NULL with *st set when it does not compile. Checks the language lies in
 * the spec's universe. Caller frees with sv_dfa_destroy. */
static sv_dfa_t *compile_spec(const sv_num_spec_t *spec, const sv_fsm_limits_t *lim, sv_status *st, sv_error_t *e) {
    sv_arena_t *a = sv_arena_create(0);
    sv_ast_t *ast = NULL;
    sv_dfa_t *d = NULL;
    *st = sv_json_number(a, spec, lim, &ast, e);
    if (!*st) *st = sv_dfa_from_ast(ast, NULL, &d, e);
    sv_arena_destroy(a);
    if (*st) return NULL;
    sv_dfa_t *diff = NULL;
    sv_error_t e2;
    sv_status s2 = sv_dfa_product(d, spec->integer ? universe_integer : universe_number, SV_DFA_DIFF, NULL, &diff, &e2);
    char what[300];
    spec_text(spec, what, sizeof what);
    CHECK(s2 == SV_ERR_EMPTY, "%s: the language leaves its universe", what);
    universe_checks++;
    sv_dfa_destroy(diff);
    return d;
}

/* ---- (a) exhaustive small spellings ------------------------------------- */

typedef struct {
    char s[7];
    uint8_t n, shared; /* shared: prefix length in common with the previous entry */
    bool integer;
    int64_t v;         /* value * 10^6 */
} spelling_t;

#define MAX_SMALL 1600000
static spelling_t *small;
static size_t nsmall;

static const char alpha[] = "-0123456789.";

/* Appends every number spelling of length 1..maxlen over alpha, in
 * depth-first order. */
static void enum_rec(char *buf, size_t len, size_t maxlen) {
    if (len > 0 && ref_is_number(buf, len)) {
        if (nsmall == MAX_SMALL) abort(); /* 1530000 expected */
        spelling_t *x = &small[nsmall++];
        memcpy(x->s, buf, len);
        x->n = (uint8_t)len;
        x->integer = ref_is_integer(buf, len);
        x->v = (int64_t)ref_scaled(buf, len);
    }
    if (len == maxlen) return;
    for (int i = 0; alpha[i]; i++) {
        buf[len] = alpha[i];
        enum_rec(buf, len + 1, maxlen);
    }
}

static const char *bound_vals[] = {"0", "-0", "7", "-7", "1.5", "-1.5", "0.25", "100", "99.99", "-1000",
                                   "100000000000000000000"};
#define NBOUNDS 11
static const char *mult_vals[] = {"1", "2", "3", "7", "10", "0.5", "0.25", "0.01", "1.5"};
#define NMULTS 9

typedef struct {
    sv_num_spec_t spec;
    i128 min, max, mul; /* scaled */
} small_spec_t;

static void small_spec_init(small_spec_t *t, bool integer, int mi, bool mx, int ai, bool ax, int ui) {
    memset(t, 0, sizeof *t);
    t->spec.integer = integer;
    if (mi >= 0) {
        t->spec.min = (sv_num_bound_t){true, mx, bound_vals[mi]};
        t->min = ref_scaled(bound_vals[mi], strlen(bound_vals[mi]));
    }
    if (ai >= 0) {
        t->spec.max = (sv_num_bound_t){true, ax, bound_vals[ai]};
        t->max = ref_scaled(bound_vals[ai], strlen(bound_vals[ai]));
    }
    if (ui >= 0) {
        t->spec.multiple_of = mult_vals[ui];
        t->mul = ref_scaled(mult_vals[ui], strlen(mult_vals[ui]));
    }
}

static bool small_ref(const small_spec_t *t, const spelling_t *x) {
    if (t->spec.integer && !x->integer) return false;
    i128 v = x->v;
    if (t->spec.min.set && (t->spec.min.exclusive ? !(v > t->min) : !(v >= t->min))) return false;
    if (t->spec.max.set && (t->spec.max.exclusive ? !(v < t->max) : !(v <= t->max))) return false;
    if (t->spec.multiple_of && v % t->mul != 0) return false;
    return true;
}

/* Walks every small spelling through d (sharing prefixes) and compares with
 * the reference; returns the number of disagreements, reporting the first. */
static long small_check(const sv_dfa_t *d, const small_spec_t *t, size_t limit, long *accepted) {
    int32_t st[8] = {0};
    long bad = 0;
    for (size_t i = 0; i < limit; i++) {
        const spelling_t *x = &small[i];
        for (size_t j = x->shared; j < x->n; j++)
            st[j + 1] = st[j] < 0 || !d ? SV_DFA_DEAD : sv_dfa_next(d, st[j], (uint8_t)x->s[j]);
        bool got = d && st[x->n] >= 0 && sv_dfa_is_accepting(d, st[x->n]);
        bool want = small_ref(t, x);
        *accepted += want;
        if (got != want && bad++ == 0) {
            char what[300];
            spec_text(&t->spec, what, sizeof what);
            fprintf(stderr, "  %s: \"%.*s\" got %d want %d\n", what, x->n, x->s, got, want);
        }
    }
    return bad;
}

static size_t nsmall5; /* the entries up to 5 bytes, which come first */

/* Runs one small spec over the first `limit` spellings. */
static void small_run(const small_spec_t *t, size_t limit, long *specs, long *checks, long *empties) {
    sv_status st;
    sv_error_t e;
    sv_dfa_t *d = compile_spec(&t->spec, NULL, &st, &e);
    char what[300];
    spec_text(&t->spec, what, sizeof what);
    CHECK(st == SV_OK || st == SV_ERR_EMPTY, "%s: %s", what, e.message);
    long acc = 0;
    long bad = small_check(d, t, limit, &acc);
    CHECK(bad == 0, "%s: %ld spellings disagree", what, bad);
    if (st == SV_ERR_EMPTY) {
        (*empties)++;
        CHECK(acc == 0, "%s: SV_ERR_EMPTY but the reference accepts %ld spellings", what, acc);
    }
    (*specs)++;
    *checks += (long)limit;
    sv_dfa_destroy(d);
}

static void test_small(void) {
    uint64_t t0 = sv_now_ns();
    /* Spellings up to 6 bytes, those up to 5 first (the combined specs run
     * over that prefix of the array); shared prefixes with the previous entry
     * let the walk step the DFA once per entry. */
    small = malloc(MAX_SMALL * sizeof *small);
    spelling_t *six = malloc(MAX_SMALL * sizeof *six);
    char buf[8];
    enum_rec(buf, 0, 6);
    size_t w = 0, n6 = 0;
    for (size_t i = 0; i < nsmall; i++) {
        if (small[i].n <= 5) small[w++] = small[i];
        else six[n6++] = small[i];
    }
    nsmall5 = w;
    memcpy(small + w, six, n6 * sizeof *six);
    free(six);
    for (size_t i = 0; i < nsmall; i++) {
        size_t sh = 0;
        while (i > 0 && sh < small[i].n && sh < small[i - 1].n && small[i - 1].s[sh] == small[i].s[sh]) sh++;
        small[i].shared = (uint8_t)sh;
    }
    long nint = 0;
    for (size_t i = 0; i < nsmall; i++) nint += small[i].integer;
    printf("  %zu number spellings up to 6 bytes (%zu up to 5; %ld integers)\n", nsmall, nsmall5, nint);

    long specs = 0, checks = 0, empties = 0;
    small_spec_t t;
    /* Single constraints over all spellings up to 6 bytes. */
    for (int integer = 0; integer < 2; integer++) {
        small_spec_init(&t, integer, -1, false, -1, false, -1);
        small_run(&t, nsmall, &specs, &checks, &empties);
        for (int b = 0; b < NBOUNDS; b++)
            for (int x = 0; x < 2; x++) {
                small_spec_init(&t, integer, b, x, -1, false, -1);
                small_run(&t, nsmall, &specs, &checks, &empties);
                small_spec_init(&t, integer, -1, false, b, x, -1);
                small_run(&t, nsmall, &specs, &checks, &empties);
            }
        for (int u = 0; u < NMULTS; u++) {
            small_spec_init(&t, integer, -1, false, -1, false, u);
            small_run(&t, nsmall, &specs, &checks, &empties);
        }
    }
    long single = specs;
    /* Every pair of bounds (with both inclusive/exclusive choices) with
     * every multipleOf would be 11520 specs; take each (min, max) pair with
     * all four exclusivities once and a rotating multipleOf, over spellings
     * up to 5 bytes. */
    int rot = 0;
    for (int integer = 0; integer < 2; integer++)
        for (int mi = -1; mi < NBOUNDS; mi++)
            for (int ai = -1; ai < NBOUNDS; ai++)
                for (int x = 0; x < 4; x++) {
                    if ((mi < 0 && (x & 1)) || (ai < 0 && (x & 2))) continue;
                    int u = rot++ % (NMULTS + 1) - 1;
                    small_spec_init(&t, integer, mi, x & 1, ai, x & 2, u);
                    small_run(&t, nsmall5, &specs, &checks, &empties);
                }
    /* And every bound with every multipleOf, over spellings up to 5 bytes. */
    for (int integer = 0; integer < 2; integer++)
        for (int b = 0; b < NBOUNDS; b++)
            for (int u = 0; u < NMULTS; u++) {
                small_spec_init(&t, integer, b, u & 1, -1, false, u);
                small_run(&t, nsmall5, &specs, &checks, &empties);
                small_spec_init(&t, integer, -1, false, b, !(u & 1), u);
                small_run(&t, nsmall5, &specs, &checks, &empties);
            }
    printf("  (a) %ld specs (%ld single-constraint over all %zu spellings, the rest combined over %zu), %ld empty: "
           "%ld membership checks agree with the reference (%.2f s)\n",
           specs, single, nsmall, nsmall5, empties, checks, (double)(sv_now_ns() - t0) / 1e9);
}

/* ---- (b) huge bounds, random spellings ---------------------------------- */

static const char *big_vals[] = {
    "123456789012345678901234567890", "-123456789012345678901234567890", "123456789012345678901234567890.123456789",
    "-0.000000000000000000000000000001", "99999999999999999999999999999.99", "-5000000000000000000000.5", "0.1",
    "100000000000000000000",
};
#define NBIG 8
static const char *big_mults[] = {"3", "7", "0.01", "1.5", "25", "0.000000000000000000000000000001"};
#define NBIGMULT 6

/* A random number spelling near the plain decimal b (often sharing a prefix
 * of its digits, sometimes equal in value, sometimes with trailing zeros). */
static void gen_near(sv_rng_t *r, const char *b, bool integer, char *out) {
    const char *p = b + (*b == '-');
    const char *dot = strchr(p, '.');
    size_t il = dot ? (size_t)(dot - p) : strlen(p), fl = dot ? strlen(dot + 1) : 0;
    char *o = out;
    bool neg = (*b == '-') != (sv_rng_below(r, 4) == 0);
    if (neg) *o++ = '-';
    char ib[64];
    size_t n;
    switch (sv_rng_below(r, 4)) {
    case 0: /* the bound's integer part, perhaps with a few digits changed */
    case 1:
        memcpy(ib, p, il), n = il;
        for (uint32_t k = sv_rng_below(r, 2) ? 0 : 1 + sv_rng_below(r, 3); k > 0; k--) {
            size_t at = sv_rng_below(r, (uint32_t)n);
            int dd = ib[at] - '0' + (sv_rng_below(r, 2) ? 1 : -1);
            ib[at] = (char)('0' + (dd + 10) % 10);
        }
        break;
    case 2: /* one digit shorter or longer */
        memcpy(ib, p, il), n = il;
        if (sv_rng_below(r, 2) && n > 1) n--;
        else ib[n++] = (char)('0' + sv_rng_below(r, 10));
        break;
    default: /* small */
        n = 1 + sv_rng_below(r, 3);
        for (size_t i = 0; i < n; i++) ib[i] = (char)('0' + sv_rng_below(r, 10));
    }
    size_t lead = 0;
    while (lead + 1 < n && ib[lead] == '0') lead++;
    memcpy(o, ib + lead, n - lead), o += n - lead;
    if (integer && sv_rng_below(r, 8)) {
        *o = 0;
        if (!strcmp(out, "-0")) strcpy(out, "0");
        return;
    }
    uint32_t mode = sv_rng_below(r, 4);
    if (mode == 0) {
        *o = 0;
        return;
    }
    *o++ = '.';
    size_t f = 0;
    if (mode <= 2 && fl > 0) { /* the bound's fraction, perhaps altered */
        size_t keep = sv_rng_below(r, (uint32_t)fl + 1);
        if (sv_rng_below(r, 2)) keep = fl;
        memcpy(o, dot + 1, keep), o += keep, f = keep;
        if (keep > 0 && sv_rng_below(r, 3) == 0) {
            int dd = o[-1] - '0' + (sv_rng_below(r, 2) ? 1 : -1);
            o[-1] = (char)('0' + (dd + 10) % 10);
        }
    }
    for (uint32_t k = sv_rng_below(r, 3); k > 0; k--, f++) *o++ = (char)('0' + sv_rng_below(r, 10));
    if (sv_rng_below(r, 3) == 0)
        for (uint32_t k = 1 + sv_rng_below(r, 3); k > 0; k--, f++) *o++ = '0';
    if (f == 0) *o++ = '0';
    *o = 0;
}

static void test_big(void) {
    uint64_t t0 = sv_now_ns();
    sv_rng_t r;
    sv_rng_seed(&r, 12345);
    long specs = 0, checks = 0, accepted = 0, empties = 0;
    for (int it = 0; it < 300; it++) {
        sv_num_spec_t s = {0};
        s.integer = sv_rng_below(&r, 3) == 0;
        int mi = (int)sv_rng_below(&r, NBIG + 1) - 1, ai = (int)sv_rng_below(&r, NBIG + 1) - 1;
        if (mi >= 0) s.min = (sv_num_bound_t){true, sv_rng_below(&r, 2), big_vals[mi]};
        if (ai >= 0) s.max = (sv_num_bound_t){true, sv_rng_below(&r, 2), big_vals[ai]};
        int ui = (int)sv_rng_below(&r, NBIGMULT + 2) - 2;
        if (ui >= 0) s.multiple_of = big_mults[ui];
        char what[300];
        spec_text(&s, what, sizeof what);
        sv_status st;
        sv_error_t e;
        sv_dfa_t *d = compile_spec(&s, NULL, &st, &e);
        CHECK(st == SV_OK || st == SV_ERR_EMPTY, "%s: %s", what, e.message);
        if (st == SV_ERR_EMPTY) {
            empties++;
            /* Without multipleOf, empty exactly when min > max, or min = max with an exclusive bound. */
            if (mi >= 0 && ai >= 0 && !s.multiple_of && !s.integer) {
                int c = ref_cmp(s.min.value, s.max.value);
                CHECK(c > 0 || (c == 0 && (s.min.exclusive || s.max.exclusive)), "%s: empty, but min <= max", what);
            }
        }
        long bad = 0;
        for (int k = 0; k < 3000; k++) {
            char x[128];
            const char *near = k % 2 == 0 && mi >= 0 ? big_vals[mi] : ai >= 0 ? big_vals[ai] : big_vals[k % NBIG];
            gen_near(&r, near, s.integer && k % 4 != 0, x);
            size_t n = strlen(x);
            bool want = s.integer ? ref_is_integer(x, n) : ref_is_number(x, n);
            if (want && s.min.set) {
                int c = ref_cmp(x, s.min.value);
                want = s.min.exclusive ? c > 0 : c >= 0;
            }
            if (want && s.max.set) {
                int c = ref_cmp(x, s.max.value);
                want = s.max.exclusive ? c < 0 : c <= 0;
            }
            if (want && s.multiple_of) want = ref_multiple(x, s.multiple_of);
            bool got = d && sv_dfa_matches(d, (const uint8_t *)x, n);
            accepted += want;
            checks++;
            if (got != want && bad++ == 0) fprintf(stderr, "  %s: \"%s\" got %d want %d\n", what, x, got, want);
        }
        CHECK(bad == 0, "%s: %ld random spellings disagree", what, bad);
        specs++;
        sv_dfa_destroy(d);
    }
    printf("  (b) %ld random specs with 30-digit bounds (%ld empty): %ld random spellings near the bounds agree with "
           "the big-decimal reference (%ld accepted) (%.2f s)\n",
           specs, empties, checks, accepted, (double)(sv_now_ns() - t0) / 1e9);
}

/* ---- exact combinations as languages ------------------------------------- */

static bool spec_equals_regex(const sv_num_spec_t *s, const char *pattern) {
    sv_status st;
    sv_error_t e;
    sv_dfa_t *d = compile_spec(s, NULL, &st, &e);
    sv_dfa_t *want = rx(pattern);
    bool eq = d && want && sv_dfa_equal(d, want);
    sv_dfa_destroy(d);
    sv_dfa_destroy(want);
    return eq;
}

static void test_languages(void) {
    int n = 0;
    sv_num_spec_t s = {.integer = true, .min = {true, false, "1.5"}, .max = {true, true, "10"}, .multiple_of = "3"};
    CHECK(spec_equals_regex(&s, "3|6|9"), "integer, minimum 1.5, exclusiveMaximum 10, multipleOf 3 is {3, 6, 9}");
    n++;
    s = (sv_num_spec_t){.integer = true, .min = {true, true, "-1.5"}, .max = {true, false, "2"}};
    CHECK(spec_equals_regex(&s, "-1|0|1|2"), "integer in (-1.5, 2]");
    n++;
    s = (sv_num_spec_t){.integer = true, .min = {true, false, "-0"}};
    CHECK(spec_equals_regex(&s, "0|[1-9][0-9]*"), "integer >= -0");
    n++;
    s = (sv_num_spec_t){.integer = false, .min = {true, false, "2"}, .max = {true, false, "2"}};
    CHECK(spec_equals_regex(&s, "2(\\.0+)?"), "number in [2, 2]");
    n++;
    s = (sv_num_spec_t){.integer = false, .min = {true, false, "-0"}, .max = {true, false, "0"}};
    CHECK(spec_equals_regex(&s, "-?0(\\.0+)?"), "number in [-0, 0]");
    n++;
    s = (sv_num_spec_t){.integer = false, .multiple_of = "0.01"};
    CHECK(spec_equals_regex(&s, "-?(0|[1-9][0-9]*)(\\.[0-9]{1,2}0*)?"), "number multipleOf 0.01");
    n++;
    s = (sv_num_spec_t){.integer = false, .multiple_of = "1"};
    CHECK(spec_equals_regex(&s, "-?(0|[1-9][0-9]*)(\\.0+)?"), "number multipleOf 1");
    n++;
    s = (sv_num_spec_t){.integer = true, .multiple_of = "2.5"};
    CHECK(spec_equals_regex(&s, "0|-?([1-9][0-9]*[05]|5)"), "integer multipleOf 2.5 = multiples of 5");
    n++;
    /* Integers >= N for big N, against the classic range regex written
     * out here: N itself, or N's first i digits then a greater digit then
     * any L-1-i digits, or more than L digits. */
    static const char *ns[] = {"123456789012345678901234567890", "0", "9", "1000", "99999", "10203040506070809"};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const char *N = ns[k];
        size_t L = strlen(N);
        char *re = malloc(64 * L + 64), *o = re;
        o += sprintf(o, "%s|[1-9][0-9]{%zu,}", N, L);
        for (size_t i = 0; i < L; i++)
            if (N[i] != '9') o += sprintf(o, "|%.*s[%c-9][0-9]{%zu}", (int)i, N, N[i] + 1, L - 1 - i);
        s = (sv_num_spec_t){.integer = true, .min = {true, false, N}};
        CHECK(spec_equals_regex(&s, re), "integer >= %s is /%s/", N, re);
        /* And exclusive: > N is the same without N itself. */
        s = (sv_num_spec_t){.integer = true, .min = {true, true, N}};
        CHECK(spec_equals_regex(&s, re + L + 1), "integer > %s is /%s/", N, re + L + 1);
        n += 2;
        free(re);
    }
    printf("  %d specs equal hand-written regexes as DFAs\n", n);
}

/* ---- (c) sv_json_number_value ------------------------------------------- */

static sv_dfa_t *value_dfa(const char *v) {
    sv_arena_t *a = sv_arena_create(0);
    sv_ast_t *ast = NULL;
    sv_dfa_t *d = NULL;
    sv_error_t e;
    sv_status st = sv_json_number_value(a, v, &ast, &e);
    CHECK(st == SV_OK, "value %s: %s", v, e.message);
    if (!st) st = sv_dfa_from_ast(ast, NULL, &d, &e);
    CHECK(st == SV_OK, "value %s: %s", v, e.message);
    sv_arena_destroy(a);
    return d;
}

static void test_values(void) {
    static const struct { const char *v, *rx; } cases[] = {
        {"10", "10(\\.0+)?"},       {"0", "-?0(\\.0+)?"},         {"-0", "-?0(\\.0+)?"},
        {"-0.000", "-?0(\\.0+)?"},  {"2.50", "2\\.50*"},          {"-2.5", "-2\\.50*"},
        {"007.50", "7\\.50*"},      {"0.001", "0\\.0010*"},       {"-100", "-100(\\.0+)?"},
        {"-0.25", "-0\\.250*"},     {"123456789012345678901234567890", "123456789012345678901234567890(\\.0+)?"},
    };
    int n = 0, same = 0;
    long checks = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sv_dfa_t *d = value_dfa(cases[i].v), *want = rx(cases[i].rx);
        CHECK(d && want && sv_dfa_equal(d, want), "value %s is /%s/", cases[i].v, cases[i].rx);
        /* The value language is the number language of [v, v]. */
        sv_num_spec_t s = {.min = {true, false, cases[i].v}, .max = {true, false, cases[i].v}};
        sv_status st;
        sv_error_t e;
        sv_dfa_t *r = compile_spec(&s, NULL, &st, &e);
        CHECK(r && d && sv_dfa_equal(d, r), "value %s equals the number range [%s, %s]", cases[i].v, cases[i].v, cases[i].v);
        same++;
        /* Exhaustively over small spellings, where the value is small. */
        if (strlen(cases[i].v) <= 7) {
            i128 v = ref_scaled(cases[i].v, strlen(cases[i].v));
            long bad = 0;
            for (size_t k = 0; k < nsmall; k++) {
                bool want_in = small[k].v == v;
                bool got = d && sv_dfa_matches(d, (const uint8_t *)small[k].s, small[k].n);
                bad += got != want_in;
            }
            CHECK(bad == 0, "value %s: %ld small spellings disagree", cases[i].v, bad);
            checks += (long)nsmall;
        }
        sv_dfa_destroy(r);
        sv_dfa_destroy(d);
        sv_dfa_destroy(want);
        n++;
    }
    sv_arena_t *a = sv_arena_create(0);
    sv_ast_t *ast;
    sv_error_t e;
    static const char *badv[] = {"", "-", "1e5", "+1", ".5", "5.", "1.2.3", "0x10", "1 "};
    for (size_t i = 0; i < sizeof badv / sizeof badv[0]; i++)
        CHECK(sv_json_number_value(a, badv[i], &ast, &e) == SV_ERR_ARG, "value \"%s\" is refused", badv[i]);
    sv_arena_destroy(a);
    printf("  (c) %d values equal their regexes and their [v, v] ranges (%d), %ld exhaustive checks; %zu malformed "
           "values refused\n",
           n, same, checks, sizeof badv / sizeof badv[0]);
}

/* ---- (d) sv_decimal_from_double ----------------------------------------- */

static void test_doubles(void) {
    static const struct { double x; const char *s; } cases[] = {
        {0.1, "0.1"},
        {1e21, "1000000000000000000000"},
        {5e-7, "0.0000005"},
        {-0.0, "0"}, /* the value zero: no sign */
        {0.0, "0"},
        {123.456, "123.456"},
        {-2.5, "-2.5"},
        {100.0, "100"},
        {0.30000000000000004, "0.30000000000000004"},
        {1.7976931348623157e308, NULL},
        {5e-324, NULL},
        {1e-300, NULL},
    };
    char buf[400];
    int n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool ok = sv_decimal_from_double(cases[i].x, buf, sizeof buf);
        CHECK(ok, "sv_decimal_from_double(%.17g)", cases[i].x);
        if (!ok) continue;
        if (cases[i].s) {
            CHECK(!strcmp(buf, cases[i].s), "%.17g -> \"%s\", want \"%s\"", cases[i].x, buf, cases[i].s);
        } else {
            /* The largest double is 17976931348623157 then 292 zeros; 1e-300 is
             * "0." then 299 zeros then "1"; 5e-324 is "0." then 323 zeros then
             * "5" (the shortest round trip, as repr gives 5e-324). */
            const char *head = cases[i].x > 1 ? "17976931348623157" : "0.";
            size_t zeros = cases[i].x > 1 ? 292 : cases[i].x < 1e-310 ? 323 : 299;
            const char *tail = cases[i].x > 1 ? "" : cases[i].x < 1e-310 ? "5" : "1";
            size_t hl = strlen(head);
            bool shape = strlen(buf) == hl + zeros + strlen(tail) && !strncmp(buf, head, hl) && !strcmp(buf + hl + zeros, tail);
            for (size_t k = 0; k < zeros; k++) shape = shape && buf[hl + k] == '0';
            CHECK(shape, "%.17g -> \"%s\"", cases[i].x, buf);
        }
        /* It reads back as the same double. */
        CHECK(strtod(buf, NULL) == cases[i].x, "\"%s\" round-trips", buf);
        n++;
    }
    CHECK(!sv_decimal_from_double(1e21, buf, 22), "a 22-byte buffer is too small for 1e21");
    CHECK(sv_decimal_from_double(1e21, buf, 23), "a 23-byte buffer is enough for 1e21");
    CHECK(!sv_decimal_from_double(1.0 / 0.0, buf, sizeof buf), "infinity is refused");
    CHECK(!sv_decimal_from_double(0.0 / 0.0, buf, sizeof buf), "NaN is refused");
    /* Random doubles round-trip and are plain decimals. */
    sv_rng_t r;
    sv_rng_seed(&r, 99);
    long rt = 0;
    for (int i = 0; i < 20000; i++) {
        uint64_t bits = sv_rng_next(&r);
        double x;
        memcpy(&x, &bits, sizeof x);
        if (x != x || x - x != 0) continue;
        bool ok = sv_decimal_from_double(x, buf, sizeof buf);
        size_t len = ok ? strlen(buf) : 0;
        bool good = ok && ref_is_number(buf, len) && strtod(buf, NULL) == x;
        CHECK(good, "random %.17g -> \"%s\"", x, ok ? buf : "(failed)");
        rt++;
    }
    printf("  (d) %d doubles written as expected, %ld random doubles round-trip as plain decimals\n", n, rt);
}

/* ---- errors ------------------------------------------------------------- */

static void test_errors(void) {
    int n = 0;
    sv_fsm_limits_t small_lim;
    sv_fsm_limits_default(&small_lim);
    small_lim.max_dfa_states = 1000;
    sv_status st;
    sv_error_t e;
    sv_num_spec_t s = {.multiple_of = "0.123457"};
    sv_dfa_t *d = compile_spec(&s, &small_lim, &st, &e);
    CHECK(st == SV_ERR_BUDGET && strstr(e.message, "multipleOf"), "multipleOf 0.123457 over 1000 states: %s", e.message);
    sv_dfa_destroy(d), n++;
    s = (sv_num_spec_t){.integer = true, .multiple_of = "1234567890123"};
    d = compile_spec(&s, NULL, &st, &e);
    CHECK(st == SV_ERR_BUDGET && strstr(e.message, "multipleOf"), "multipleOf 1234567890123: %s", e.message);
    sv_dfa_destroy(d), n++;
    s = (sv_num_spec_t){.integer = true, .multiple_of = "997"};
    d = compile_spec(&s, &small_lim, &st, &e);
    CHECK(st == SV_OK, "integer multipleOf 997 fits in 1000 states (%s)", e.message);
    sv_dfa_destroy(d), n++;
    s = (sv_num_spec_t){.multiple_of = "0.997"};
    d = compile_spec(&s, &small_lim, &st, &e);
    CHECK(st == SV_ERR_BUDGET, "number multipleOf 0.997 needs about 997 * 5 states, over 1000 (%s)", e.message);
    sv_dfa_destroy(d), n++;
    char *huge = malloc(5002);
    memset(huge, '9', 5000);
    huge[5000] = 0;
    s = (sv_num_spec_t){.min = {true, false, huge}};
    d = compile_spec(&s, &small_lim, &st, &e);
    CHECK(st == SV_ERR_BUDGET, "a 5000-digit bound over 1000 states: %s", e.message);
    sv_dfa_destroy(d), n++;
    d = compile_spec(&s, NULL, &st, &e);
    CHECK(st == SV_OK && d && sv_dfa_matches(d, (const uint8_t *)huge, 5000), "a 5000-digit bound with defaults: %s", e.message);
    sv_dfa_destroy(d), n++;
    free(huge);

    static const sv_num_spec_t empty[] = {
        {.min = {true, false, "5"}, .max = {true, false, "3"}},
        {.min = {true, true, "2"}, .max = {true, false, "2"}},
        {.min = {true, false, "2"}, .max = {true, true, "2.000"}},
        {.min = {true, false, "0"}, .max = {true, true, "-0"}},
        {.integer = true, .min = {true, false, "1.2"}, .max = {true, false, "1.8"}},
        {.integer = true, .min = {true, true, "1"}, .max = {true, true, "2"}},
        {.integer = true, .min = {true, false, "3"}, .max = {true, false, "3"}, .multiple_of = "2"},
        {.min = {true, false, "0.1"}, .max = {true, false, "0.4"}, .multiple_of = "0.5"},
        {.min = {true, false, "-123456789012345678901234567890"}, .max = {true, false, "-123456789012345678901234567891"}},
    };
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        char what[300];
        spec_text(&empty[i], what, sizeof what);
        d = compile_spec(&empty[i], NULL, &st, &e);
        CHECK(st == SV_ERR_EMPTY && strstr(e.message, "satisfies"), "%s is empty: %s", what, e.message);
        sv_dfa_destroy(d), n++;
    }
    static const sv_num_spec_t bad[] = {
        {.multiple_of = "0"},        {.multiple_of = "-2"},         {.multiple_of = "0.000"},
        {.multiple_of = "1e3"},      {.min = {true, false, "1e3"}}, {.max = {true, false, "+4"}},
        {.min = {true, false, NULL}}, {.max = {true, false, ".5"}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d = compile_spec(&bad[i], NULL, &st, &e);
        CHECK(st == SV_ERR_ARG, "bad spec %zu refused as an argument error (%d: %s)", i, (int)st, e.message);
        sv_dfa_destroy(d), n++;
    }
    printf("  %d budget, empty and argument errors as expected\n", n);
}

int main(void) {
    printf("test_json_num: numeric languages against exact decimal references\n");
    uint64_t t0 = sv_now_ns();
    universe_number = rx("-?(0|[1-9][0-9]*)(\\.[0-9]+)?");
    universe_integer = rx("0|-?[1-9][0-9]*");
    test_small();
    test_big();
    test_languages();
    test_values();
    test_doubles();
    test_errors();
    printf("  %ld languages checked to lie in their universe (number or integer grammar)\n", universe_checks);
    printf("  total %.2f s\n", (double)(sv_now_ns() - t0) / 1e9);
    sv_dfa_destroy(universe_number);
    sv_dfa_destroy(universe_integer);
    free(small);
    return test_summary("test_json_num");
}
