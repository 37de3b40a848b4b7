/* bench_regex_compile.c — how long a regex takes to become a DFA.
 *
 * A benchmark, not a test: it asserts nothing about speed. For each pattern
 * of a fixed set (the field patterns JSON Schemas use, plus a few known hard
 * shapes), it compiles the pattern with sv_regex_compile (default budgets)
 * many times and reports the DFA's size and the median and 99th-percentile
 * wall time of one compilation. For context it times PCRE2 on the same
 * pattern: pcre2_compile alone, and pcre2_compile + pcre2_jit_compile. PCRE2
 * is a backtracking matcher, so its compile does far less work than a subset
 * construction does; the column says what a regex "costs" elsewhere, not
 * what a DFA compiler should cost.
 *
 * Repetitions: with -r R every pattern runs exactly R times; by default each
 * pattern runs until it has used about -t seconds (default 1.0) or 2000
 * repetitions, with at least 10, so the whole run stays under a minute.
 *
 *   bench_regex_compile [-r REPS] [-t SECONDS] [-f SUBSTRING] [--no-pcre2]
 *   bench_regex_compile --list     # name<TAB>pattern as a JSON string, per line
 *
 * The table is markdown, ready to paste into BENCHMARKS.md. Times are in µs. */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/regex.h"
#include "util/clock.h"

/* 100 common English words for the long-alternation case: real words share
 * prefixes and suffixes the way enum values and keywords do. */
static const char *const words[100] = {
    "about", "above", "after", "again", "against", "almost", "alone", "along", "already", "also",
    "always", "among", "animal", "another", "answer", "around", "basket", "battle", "beauty", "became",
    "because", "become", "before", "begin", "behind", "being", "believe", "below", "beside", "better",
    "between", "beyond", "bottle", "bottom", "branch", "bread", "break", "bridge", "bright", "bring",
    "broken", "brother", "brought", "build", "butter", "button", "cabin", "camera", "candle", "canvas",
    "captain", "carbon", "career", "carpet", "castle", "center", "chance", "change", "charge", "cheese",
    "circle", "clever", "client", "closer", "coffee", "column", "common", "copper", "corner", "cotton",
    "county", "couple", "course", "cousin", "credit", "crisis", "damage", "danger", "debate", "decade",
    "decide", "defend", "degree", "demand", "depend", "desert", "design", "detail", "device", "dinner",
    "direct", "doctor", "dollar", "double", "dragon", "driver", "during", "eagle", "early", "earth",
};

typedef struct {
    const char *name;
    const char *pattern;  /* NULL: built at start-up (the word list) */
} bench_case_t;

static bench_case_t cases[] = {
    {"date", "^\\d{4}-\\d{2}-\\d{2}$"},
    {"time", "^([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{1,6})?$"},
    {"date-time", "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$"},
    {"email", "^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$"},
    {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
    {"ipv4", "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$"},
    {"semver", "^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(-[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?(\\+[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?$"},
    {"phone-e164", "^\\+[1-9]\\d{1,14}$"},
    {"phone-us", "^\\(?\\d{3}\\)?[-. ]?\\d{3}[-. ]?\\d{4}$"},
    {"url-ish", "^https?://[A-Za-z0-9.-]+(:\\d{1,5})?(/[^\\s]*)?$"},
    {"hostname", "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"},
    {"slug", "^[a-z0-9-]+$"},
    {"zip", "^\\d{5}(-\\d{4})?$"},
    {"hex-color", "^#([0-9a-fA-F]{3}){1,2}$"},
    {"json-number", "^-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?$"},
    {"base64", "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"},
    {"letters", "\\p{L}+"},
    {"name-unicode", "\\p{Lu}\\p{Ll}+( \\p{Lu}\\p{Ll}+)*"},
    {"json-str-body", "[^\"\\\\]*"},
    {"dot-0-100", ".{0,100}"},
    {"az-1-50", "[a-z]{1,50}"},
    {"digits-1-300", "\\d{1,300}"},
    {"exp-n5", "(a|b)*a(a|b){5}"},
    {"exp-n10", "(a|b)*a(a|b){10}"},
    {"exp-n14", "(a|b)*a(a|b){14}"},
    {"words-100", NULL},
};
#define NCASES (sizeof cases / sizeof cases[0])

static char *build_words(void) {
    size_t n = 0;
    for (int i = 0; i < 100; i++) n += strlen(words[i]) + 1;
    char *p = malloc(n + 1), *at = p;
    if (!p) return NULL;
    for (int i = 0; i < 100; i++) at += sprintf(at, "%s%s", i ? "|" : "", words[i]);
    return p;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted sample, in µs. */
static double pct_us(const uint64_t *ns, size_t n, double p) {
    size_t r = (size_t)(p * (double)n + 0.999999);
    if (r < 1) r = 1;
    if (r > n) r = n;
    return (double)ns[r - 1] / 1000.0;
}

typedef struct {
    long reps;        /* fixed repetitions, or 0 for a time budget */
    double secs;      /* per-pattern budget for each engine */
    const char *filter;
    bool pcre2;
} opts_t;

/* Runs fn(arg) the configured number of times; fills ns (cap entries) and
 * returns how many ran. fn returns false when it fails (no more runs). */
typedef bool (*run_fn)(const char *pattern, size_t len);

static size_t time_runs(const opts_t *o, run_fn fn, const char *pattern, uint64_t *ns, size_t cap) {
    size_t n = 0, max = o->reps ? (size_t)o->reps : cap, min = o->reps ? (size_t)o->reps : 10;
    if (max > cap) max = cap;
    uint64_t budget = (uint64_t)(o->secs * 1e9), t_start = sv_now_ns();
    size_t len = strlen(pattern);
    if (!fn(pattern, len)) return 0; /* warm-up, and fail early */
    while (n < max) {
        uint64_t t0 = sv_now_ns();
        if (!fn(pattern, len)) return 0;
        ns[n++] = sv_now_ns() - t0;
        if (!o->reps && n >= min && sv_now_ns() - t_start > budget) break;
    }
    qsort(ns, n, sizeof *ns, cmp_u64);
    return n;
}

static bool run_sieve(const char *pattern, size_t len) {
    sv_dfa_t *d = NULL;
    sv_status st = sv_regex_compile(pattern, len, NULL, &d, NULL);
    sv_dfa_destroy(d);
    return st == SV_OK;
}

static bool run_pcre2(const char *pattern, size_t len, bool jit) {
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF, &errcode, &erroff, NULL);
    if (!re) return false;
    bool ok = !jit || pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    pcre2_code_free(re);
    return ok;
}
static bool run_pcre2_nojit(const char *pattern, size_t len) { return run_pcre2(pattern, len, false); }
static bool run_pcre2_jit(const char *pattern, size_t len) { return run_pcre2(pattern, len, true); }

/* Writes the pattern for a markdown table cell: in a code span, `|` escaped,
 * cut to max characters with an ellipsis. */
static void print_cell_pattern(const char *p, size_t max) {
    size_t n = strlen(p);
    fputc('`', stdout);
    for (size_t i = 0; i < n && i < max; i++) {
        if (p[i] == '|') fputs("\\|", stdout);
        else fputc(p[i], stdout);
    }
    fputc('`', stdout);
    if (n > max) fputs("…", stdout);
}

static void print_json_string(const char *s) {
    fputc('"', stdout);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else fputc(c, stdout);
    }
    fputc('"', stdout);
}

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s [-r REPS] [-t SECONDS] [-f SUBSTRING] [--no-pcre2] | --list\n", argv0);
    return 64;
}

int main(int argc, char **argv) {
    opts_t o = {.reps = 0, .secs = 1.0, .filter = NULL, .pcre2 = true};
    bool list = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            o.reps = strtol(argv[++i], NULL, 10);
            if (o.reps < 1) return usage(argv[0]);
        } else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            o.secs = strtod(argv[++i], NULL);
            if (!(o.secs > 0)) return usage(argv[0]);
        } else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc) {
            o.filter = argv[++i];
        } else if (strcmp(argv[i], "--no-pcre2") == 0) {
            o.pcre2 = false;
        } else if (strcmp(argv[i], "--list") == 0) {
            list = true;
        } else {
            return usage(argv[0]);
        }
    }
    char *wordalt = build_words();
    if (!wordalt) return 1;
    for (size_t i = 0; i < NCASES; i++)
        if (!cases[i].pattern) cases[i].pattern = wordalt;

    if (list) {
        for (size_t i = 0; i < NCASES; i++) {
            printf("%s\t", cases[i].name);
            print_json_string(cases[i].pattern);
            fputc('\n', stdout);
        }
        free(wordalt);
        return 0;
    }

    size_t cap = o.reps ? (size_t)o.reps : 2000;
    uint64_t *ns = malloc(cap * sizeof *ns);
    if (!ns) return 1;
    if (o.reps) printf("Repetitions: %ld per pattern and engine.\n\n", o.reps);
    else printf("Repetitions: until %.2f s per pattern and engine (at least 10, at most 2000).\n\n", o.secs);
    printf("| name | pattern | states | byte classes | reps | sieve p50 µs | sieve p99 µs |%s\n",
           o.pcre2 ? " pcre2 p50 µs | pcre2+jit p50 µs |" : "");
    printf("|---|---|--:|--:|--:|--:|--:|%s\n", o.pcre2 ? "--:|--:|" : "");
    uint64_t t_all = sv_now_ns();
    for (size_t i = 0; i < NCASES; i++) {
        const bench_case_t *c = &cases[i];
        if (o.filter && !strstr(c->name, o.filter)) continue;
        printf("| %s | ", c->name);
        print_cell_pattern(c->pattern, 48);
        sv_dfa_t *d = NULL;
        sv_error_t err;
        sv_error_clear(&err);
        sv_status st = sv_regex_compile(c->pattern, strlen(c->pattern), NULL, &d, &err);
        if (st) {
            printf(" | %s | | | | |", sv_status_name(st));
        } else {
            printf(" | %u | %u |", sv_dfa_num_states(d), sv_dfa_num_classes(d));
            size_t n = time_runs(&o, run_sieve, c->pattern, ns, cap);
            printf(" %zu | %.1f | %.1f |", n, pct_us(ns, n, 0.50), pct_us(ns, n, 0.99));
        }
        sv_dfa_destroy(d);
        if (o.pcre2) {
            size_t n = time_runs(&o, run_pcre2_nojit, c->pattern, ns, cap);
            if (n) printf(" %.1f |", pct_us(ns, n, 0.50));
            else printf(" error |");
            n = time_runs(&o, run_pcre2_jit, c->pattern, ns, cap);
            if (n) printf(" %.1f |", pct_us(ns, n, 0.50));
            else printf(" error |");
        }
        fputc('\n', stdout);
        fflush(stdout);
    }
    printf("\nTotal wall time: %.1f s\n", (double)(sv_now_ns() - t_all) / 1e9);
    free(ns);
    free(wordalt);
    return 0;
}
