/* cmd_maskbench.c — `sieve maskbench`: the MaskBench method on one thread.
 *
 * For each schema file ({schema, tests: [{valid, data, text?}]}): compile
 * the schema and build its token index; TTFM is compile + index + the first
 * mask. Then each test instance's text (the "text" field when present, which
 * tests/bench/maskbench_prep.py writes as Python's json.dumps does; else
 * jansson's serialization with the same separators) is tokenized without
 * special tokens and walked: before each token the mask is computed and the
 * token must be allowed; at the end one more mask, in which EOS must be
 * allowed for a valid instance. TBM samples are every mask but the schema's
 * very first (which is in TTFM): an instance's first mask alone, then for
 * each token the time to consume it plus the next mask (what a decode step
 * pays; the peers harness measures the same). A valid instance must be accepted to the
 * end; an invalid one must be rejected at some token or at the end. */
#include <dirent.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "fsm/matcher.h"
#include "fsm/schema.h"
#include "src/constraint/constraint_cache.h"
#include "src/constraint/tokens.h"
#include "util/clock.h"
#include "cli.h"
#include "verbs.h"

enum { OPT_TOKENIZER = 256, OPT_TOKCONFIG, OPT_PER_SCHEMA, OPT_TIMEOUT_S, OPT_UNKNOWN_FORMATS, OPT_ANY_DEPTH, OPT_WS, OPT_DFA_CACHE, OPT_MEMORY, OPT_SLOW, OPT_ANY_TOTAL, OPT_DEEP_LEVELS, OPT_DEEP_ARRAYS, OPT_ANY_CALLS, OPT_KEY_ORDER, OPT_EXTRA_ORDERS, OPT_COLD };

typedef struct {
    uint64_t *v;
    size_t n, cap;
} samples_t;

static int push_sample(samples_t *s, uint64_t x) {
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 4096;
        uint64_t *p = realloc(s->v, nc * sizeof *p);
        if (!p) return -1;
        s->v = p;
        s->cap = nc;
    }
    s->v[s->n++] = x;
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentiles, in microseconds. */
static json_t *percentiles(samples_t *s) {
    if (!s->n) return json_pack("{s:n, s:n, s:n, s:n}", "p50", "p90", "p99", "max");
    qsort(s->v, s->n, sizeof *s->v, cmp_u64);
    double q[3] = {0.50, 0.90, 0.99};
    double r[4];
    for (int i = 0; i < 3; i++) {
        size_t k = (size_t)(q[i] * (double)s->n + 0.999999999);
        if (k < 1) k = 1;
        if (k > s->n) k = s->n;
        r[i] = (double)s->v[k - 1] / 1000.0;
    }
    r[3] = (double)s->v[s->n - 1] / 1000.0;
    return json_pack("{s:f, s:f, s:f, s:f}", "p50", r[0], "p90", r[1], "p99", r[2], "max", r[3]);
}

typedef struct {
    char **v;
    size_t n, cap;
} paths_t;

static int add_path(paths_t *p, const char *s) {
    if (p->n == p->cap) {
        size_t nc = p->cap ? 2 * p->cap : 256;
        char **q = realloc(p->v, nc * sizeof *q);
        if (!q) return -1;
        p->v = q;
        p->cap = nc;
    }
    p->v[p->n] = strdup(s);
    return p->v[p->n++] ? 0 : -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int collect(paths_t *p, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) return add_path(p, path);
    DIR *d = opendir(path);
    if (!d) return -1;
    size_t first = p->n;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t L = strlen(e->d_name);
        if (L < 6 || strcmp(e->d_name + L - 5, ".json") != 0) continue;
        char buf[4096];
        snprintf(buf, sizeof buf, "%s/%s", path, e->d_name);
        if (add_path(p, buf)) {
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    qsort(p->v + first, p->n - first, sizeof *p->v, cmp_str);
    return 0;
}

typedef struct {
    sv_tokens_t *tok;
    sv_constraint_cache_t *cache; /* holds nothing past a schema (0 bytes) */
    sv_schema_opts_t sopts;
    uint64_t timeout_ns;
    bool per_schema;
    bool cold; /* --cold: the memo emptied before each schema */
    int32_t eos;
    samples_t tbm, ttfm;
    long counts[6];
    uint64_t slow_ns;  /* --slow-us: masks slower than this are listed on stderr */
    uint32_t words;
} bench_t;

enum { O_PASSING, O_COMPILE, O_VALIDATION, O_INVALIDATION, O_TIMEOUT, O_ERROR };
static const char *const outcome_names[] = {"passing", "compile_error", "validation_error", "invalidation_error",
                                            "timeout", "error"};

static bool bit(const uint32_t *m, int32_t id) { return (m[id >> 5] >> (id & 31)) & 1u; }

static uint32_t popcount_mask(const uint32_t *m, uint32_t words) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < words; i++)
        n += (uint32_t)__builtin_popcount(m[i]);
    return n;
}

/* Runs one file; returns the outcome and fills the per-schema record. */
static int run_file(bench_t *b, const char *path, json_t *rec) {
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    json_error_t jerr;
    json_t *doc = json_load_file(path, JSON_DECODE_ANY, &jerr);
    if (!doc && json_error_code(&jerr) == json_error_numeric_overflow) /* beyond int64: read integers as doubles */
        doc = json_load_file(path, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &jerr);
    json_t *schema = doc ? json_object_get(doc, "schema") : NULL;
    json_t *tests = doc ? json_object_get(doc, "tests") : NULL;
    if (!schema || !json_is_array(tests)) {
        json_object_set_new(rec, "error", json_string(doc ? "no schema or tests" : jerr.text));
        json_decref(doc);
        return O_ERROR;
    }
    char *stext = json_dumps(schema, JSON_ENCODE_ANY | JSON_COMPACT);
    sv_error_t err;
    sv_error_clear(&err);
    sv_schema_opts_t so = b->sopts;
    so.lim.max_time_us = b->timeout_ns / 1000;
    if (b->cold) sv_dfa_cache_empty();
    /* through a cache, as the server does (its key is part of TTFM); it
     * keeps nothing once released (src/constraint/constraint_cache.h) */
    uint64_t t0 = sv_now_ns();
    sv_constraint_t *c = NULL;
    sv_token_index_t *ix = NULL;
    sv_matcher_t *m = NULL;
    sv_constraint_spec_t spec = {.kind = SV_CONSTRAINT_SCHEMA, .text = stext, .len = stext ? strlen(stext) : 0,
                                 .opts = &so, .tokens = sv_tokens_set(b->tok)};
    sv_status st = stext ? sv_constraint_get(b->cache, &spec, &c, NULL, &err) : SV_ERR_NOMEM;
    free(stext);
    int outcome = O_PASSING;
    if (!st) ix = sv_constraint_index(c);
    const uint32_t *mask = NULL;
    if (!st) st = sv_matcher_create(ix, NULL, 0, &m, &err);
    if (!st) st = sv_matcher_mask(m, &mask, &err);
    uint64_t t1 = sv_now_ns();
    if (st) {
        outcome = st == SV_ERR_TIMEOUT ? O_TIMEOUT : O_COMPILE;
        /* a compile that runs out of time counts its time in TTFM, as
         * MaskBench and the peers harness do */
        if (outcome == O_TIMEOUT) push_sample(&b->ttfm, t1 - t0);
        json_object_set_new(rec, "error", json_string(err.message));
        json_object_set_new(rec, "error_type", json_string(sv_status_name(st)));
        goto done;
    }
    push_sample(&b->ttfm, t1 - t0);
    json_object_set_new(rec, "ttfm_us", json_real((double)(t1 - t0) / 1000.0));
    /* TTFM's parts: the compile, the token index, the first mask */
    json_object_set_new(rec, "compile_us",
                        json_real((double)(sv_constraint_compile_us(c) - sv_constraint_index_us(c))));
    json_object_set_new(rec, "index_us", json_real((double)sv_constraint_index_us(c)));
    json_object_set_new(rec, "states", json_integer(sv_dfa_num_states(sv_token_index_dfa(ix))));
    bool first = true;
    long masks = 1;
    uint64_t tbm_max = 0;
    sv_ids_t ids = {0};
    size_t idx;
    json_t *t;
    json_array_foreach(tests, idx, t) {
        bool valid = json_is_true(json_object_get(t, "valid"));
        json_t *tx = json_object_get(t, "text");
        char *owned = NULL;
        const char *text;
        size_t tlen;
        if (json_is_string(tx)) {
            text = json_string_value(tx);
            tlen = json_string_length(tx);
        } else {
            owned = json_dumps(json_object_get(t, "data"), JSON_ENCODE_ANY | JSON_INDENT(0) | JSON_REAL_PRECISION(17));
            if (!owned) continue;
            text = owned;
            tlen = strlen(owned);
        }
        ids.n = 0;
        sv_status es = sv_tokens_encode(b->tok, text, tlen, &ids, &err);
        free(owned);
        if (es) {
            json_object_set_new(rec, "error", json_string(err.message));
            outcome = O_ERROR;
            break;
        }
        sv_matcher_rollback(m, sv_matcher_num_tokens(m), NULL);
        bool ok = true;
        /* One TBM sample per mask after the schema's first: an instance's
         * first mask alone, then for each token consume + the next mask. */
        uint64_t a = sv_now_ns();
        for (size_t i = 0; i <= ids.n; i++) {
            if (!first) {
                if (sv_matcher_mask(m, &mask, &err)) {
                    ok = false;
                    break;
                }
                uint64_t dt = sv_now_ns() - a;
                push_sample(&b->tbm, dt);
                if (dt > tbm_max) tbm_max = dt;
                if (b->slow_ns && dt > b->slow_ns)
                    fprintf(stderr, "slow mask: %s token %zu of test %zu: %.1f us, state %d, %u allowed\n", name,
                            i, idx, dt / 1e3, sv_matcher_state(m), popcount_mask(mask, b->words));
                masks++;
            }
            first = false;
            if (i == ids.n) {
                ok = b->eos >= 0 && bit(mask, b->eos);
                break;
            }
            if (!bit(mask, ids.v[i])) {
                ok = false;
                break;
            }
            a = sv_now_ns();
            if (!sv_matcher_accept(m, ids.v[i])) {
                ok = false;
                break;
            }
            if (sv_now_ns() - t0 > b->timeout_ns) break;
        }
        if (sv_now_ns() - t0 > b->timeout_ns) {
            outcome = O_TIMEOUT;
            break;
        }
        if (valid && !ok) {
            if (outcome == O_PASSING) outcome = O_VALIDATION; /* an invalidation error outranks it */
            json_object_set_new(rec, "failed_test", json_integer((json_int_t)idx));
        } else if (!valid && ok) {
            outcome = O_INVALIDATION; /* every instance is still walked, as the peers do */
            json_object_set_new(rec, "failed_test", json_integer((json_int_t)idx));
        }
    }
    sv_ids_free(&ids);
    json_object_set_new(rec, "masks", json_integer(masks));
    json_object_set_new(rec, "tbm_max_us", json_real((double)tbm_max / 1000.0));
done:
    sv_matcher_destroy(m);
    sv_constraint_release(b->cache, c);
    json_decref(doc);
    return outcome;
}

int sv_cmd_maskbench(int argc, char **argv) {
    static const struct option longopts[] = {
        {"tokenizer", required_argument, 0, OPT_TOKENIZER},
        {"tokenizer-config", required_argument, 0, OPT_TOKCONFIG},
        {"per-schema", no_argument, 0, OPT_PER_SCHEMA},
        {"timeout-s", required_argument, 0, OPT_TIMEOUT_S},
        {"allow-unknown-formats", no_argument, 0, OPT_UNKNOWN_FORMATS},
        {"max-any-depth", required_argument, 0, OPT_ANY_DEPTH},
        {"any-depth-total", required_argument, 0, OPT_ANY_TOTAL},
        {"any-deep-levels", required_argument, 0, OPT_DEEP_LEVELS},
        {"any-calls", required_argument, 0, OPT_ANY_CALLS},
        {"key-order", required_argument, 0, OPT_KEY_ORDER},
        {"extra-key-orders", required_argument, 0, OPT_EXTRA_ORDERS},
        {"any-deep-arrays", required_argument, 0, OPT_DEEP_ARRAYS},
        {"ws", required_argument, 0, OPT_WS},
        {"dfa-cache-mb", required_argument, 0, OPT_DFA_CACHE},
        {"cold", no_argument, 0, OPT_COLD},
        {"memory-limit-mb", required_argument, 0, OPT_MEMORY},
        {"slow-us", required_argument, 0, OPT_SLOW},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *verb = "maskbench";
    bench_t b;
    memset(&b, 0, sizeof b);
    sv_schema_opts_default(&b.sopts);
    b.timeout_ns = 60ull * 1000000000ull;
    const char *tokpath = NULL, *tokcfg = NULL;
    unsigned long long v, memory_mb = 8192;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            printf("Usage: sieve maskbench --tokenizer tokenizer.json [--tokenizer-config FILE]\n"
                   "                       [--per-schema] [--timeout-s 60] [--allow-unknown-formats]\n"
                   "                       [--max-any-depth N|auto] [--any-depth-total N]\n"
                   "                       [--any-deep-levels N] [--any-deep-arrays N] [--any-calls true|false] [--key-order schema|any] [--extra-key-orders true|false] [--ws MODE] [--dfa-cache-mb 64] [--cold] PATH...\n\n"
                   "Runs the MaskBench method on MaskBench files (or folders of them), one\n"
                   "thread, and prints one JSON object: schemas, passing, compile_error,\n"
                   "validation_error, invalidation_error, timeout, error, and ttfm_us and tbm_us\n"
                   "percentiles (p50, p90, p99, max). --per-schema first prints one line per\n"
                   "schema (its ttfm_us split into compile_us, index_us and the first mask's\n"
                   "rest). Instance text is each test's \"text\" field when present (see\n"
                   "tests/bench/maskbench_prep.py), else jansson's serialization.\n"
                   "--dfa-cache-mb: the process-wide memo of compiled automata (0: off).\n"
                   "--cold: the memo is emptied before each schema, so that no schema reuses\n"
                   "what an earlier one compiled (a compile still shares parts within itself;\n"
                   "the automata every schema shares, built once at the start as the server\n"
                   "builds them, stay: fsm/schema_text.c, the prelude).\n"
                   "--memory-limit-mb: address-space limit of the process (default 8192, 0: none);\n"
                   "a schema that needs more is a compile error of type nomem.\n"
                   "--extra-key-orders false: objects in their definition order only, as the\n"
                   "server compiles tool calls (the call schemas of tests/bench/toolsets_ttfm.py\n"
                   "--prep-out); default true (sieve compile --help).\n"
                   "--slow-us N: list every mask slower than N microseconds on stderr (file,\n"
                   "token, state, allowed count), to see what makes the TBM tail.\n");
            return SV_EXIT_OK;
        case OPT_TOKENIZER: tokpath = optarg; break;
        case OPT_TOKCONFIG: tokcfg = optarg; break;
        case OPT_PER_SCHEMA: b.per_schema = true; break;
        case OPT_COLD: b.cold = true; break;
        case OPT_UNKNOWN_FORMATS: b.sopts.unknown_formats_ok = true; break;
        case OPT_TIMEOUT_S:
            if (sv_cli_parse_u64(optarg, 86400, &v) || !v) return sv_cli_usage_error(verb, "invalid value '%s' for --timeout-s", optarg);
            b.timeout_ns = v * 1000000000ull;
            break;
        case OPT_ANY_DEPTH:
            if (strcmp(optarg, "auto") == 0) { b.sopts.max_any_depth = SV_SCHEMA_ANY_DEPTH_AUTO; break; }
            if (sv_cli_parse_u64(optarg, 16, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --max-any-depth", optarg);
            b.sopts.max_any_depth = (uint32_t)v;
            break;
        case OPT_ANY_TOTAL:
            if (sv_cli_parse_u64(optarg, 16, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --any-depth-total", optarg);
            b.sopts.any_depth_total = (uint32_t)v;
            break;
        case OPT_ANY_CALLS:
            if (strcmp(optarg, "true") && strcmp(optarg, "false"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --any-calls (true or false)", optarg);
            b.sopts.any_calls = !strcmp(optarg, "true");
            break;
        case OPT_KEY_ORDER:
            if (strcmp(optarg, "schema") && strcmp(optarg, "any"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --key-order (schema or any)", optarg);
            b.sopts.key_order = strcmp(optarg, "any") ? SV_KEY_ORDER_SCHEMA : SV_KEY_ORDER_ANY;
            break;
        case OPT_EXTRA_ORDERS:
            if (strcmp(optarg, "true") && strcmp(optarg, "false"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --extra-key-orders (true or false)", optarg);
            b.sopts.extra_key_orders = !strcmp(optarg, "true");
            break;
        case OPT_DEEP_LEVELS:
            if (sv_cli_parse_u64(optarg, 16, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --any-deep-levels", optarg);
            b.sopts.any_deep_levels = (uint32_t)v;
            break;
        case OPT_DEEP_ARRAYS:
            if (sv_cli_parse_u64(optarg, SV_SCHEMA_ANY_DEEP_ARRAYS_MAX, &v))
                return sv_cli_usage_error(verb, "invalid value '%s' for --any-deep-arrays", optarg);
            b.sopts.any_deep_arrays = (uint32_t)v;
            break;
        case OPT_WS:
            if (strcmp(optarg, "canonical") == 0) b.sopts.ws = SV_WS_CANONICAL;
            else if (strcmp(optarg, "compact") == 0) b.sopts.ws = SV_WS_COMPACT;
            else if (strcmp(optarg, "flexible") == 0) b.sopts.ws = SV_WS_FLEXIBLE;
            else return sv_cli_usage_error(verb, "invalid value '%s' for --ws", optarg);
            break;
        case OPT_MEMORY:
            if (sv_cli_parse_u64(optarg, 1u << 30, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --memory-limit-mb", optarg);
            memory_mb = v;
            break;
        case OPT_SLOW:
            if (sv_cli_parse_u64(optarg, 1ull << 32, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --slow-us", optarg);
            b.slow_ns = v * 1000;
            break;
        case OPT_DFA_CACHE:
            if (sv_cli_parse_u64(optarg, 1u << 20, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --dfa-cache-mb", optarg);
            sv_dfa_cache_configure((size_t)v << 20);
            break;
        case ':': return sv_cli_usage_error(verb, "option '%s' needs a value", argv[optind - 1]);
        default: return sv_cli_usage_error(verb, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!tokpath) return sv_cli_usage_error(verb, "--tokenizer FILE is required");
    if (memory_mb) {
        /* Some schemas make compilation grow without bound (the per-automaton
         * budgets do not bound the sum); failed allocations end as nomem. */
        struct rlimit rl = {(rlim_t)memory_mb << 20, (rlim_t)memory_mb << 20};
        if (setrlimit(RLIMIT_AS, &rl) != 0) fprintf(stderr, "sieve maskbench: cannot set the memory limit\n");
    }
    if (optind >= argc) return sv_cli_usage_error(verb, "give at least one MaskBench file or folder");
    paths_t paths = {0};
    for (int i = optind; i < argc; i++)
        if (collect(&paths, argv[i])) {
            fprintf(stderr, "sieve maskbench: cannot read '%s'\n", argv[i]);
            return SV_EXIT_RUNTIME;
        }
    sv_error_t err;
    if (sv_tokens_load(tokpath, tokcfg, 0, &b.tok, &err)) {
        fprintf(stderr, "sieve maskbench: %s: %s\n", tokpath, err.message);
        return SV_EXIT_RUNTIME;
    }
    if (!sv_tokens_iface(b.tok)) {
        fprintf(stderr, "sieve maskbench: %s: %s\n", tokpath, sv_vocab_encoder_support(sv_tokens_vocab(b.tok)));
        sv_tokens_destroy(b.tok);
        return SV_EXIT_RUNTIME;
    }
    b.eos = sv_vocab_eos(sv_tokens_vocab(b.tok));
    b.words = sv_token_set_mask_words(sv_tokens_set(b.tok));
    /* the compiler's shared automata, as the server builds them at startup
     * (fsm/schema_text.c, the prelude; --cold keeps them) */
    if (sv_schema_prelude_warm(&b.sopts, &err) || sv_ccache_create(0, &b.cache, &err)) {
        fprintf(stderr, "sieve maskbench: %s\n", err.message);
        sv_tokens_destroy(b.tok);
        return SV_EXIT_RUNTIME;
    }
    uint64_t t0 = sv_now_ns();
    for (size_t i = 0; i < paths.n; i++) {
        json_t *rec = json_object();
        const char *base = strrchr(paths.v[i], '/');
        json_object_set_new(rec, "file", json_string(base ? base + 1 : paths.v[i]));
        int o = run_file(&b, paths.v[i], rec);
        b.counts[o]++;
        if (b.per_schema) {
            json_object_set_new(rec, "outcome", json_string(outcome_names[o]));
            char *s = json_dumps(rec, JSON_COMPACT);
            if (s) puts(s);
            free(s);
            fflush(stdout);
        }
        json_decref(rec);
        free(paths.v[i]);
    }
    free(paths.v);
    json_t *sum = json_object();
    json_object_set_new(sum, "engine", json_string("sieve"));
    json_object_set_new(sum, "schemas", json_integer((json_int_t)paths.n));
    for (int i = 0; i < 6; i++) json_object_set_new(sum, outcome_names[i], json_integer(b.counts[i]));
    json_object_set_new(sum, "ttfm_us", percentiles(&b.ttfm));
    json_object_set_new(sum, "tbm_us", percentiles(&b.tbm));
    json_object_set_new(sum, "masks", json_integer((json_int_t)b.tbm.n + (json_int_t)b.ttfm.n));
    json_object_set_new(sum, "wall_s", json_real((double)(sv_now_ns() - t0) / 1e9));
    uint64_t ch, cm;
    sv_dfa_cache_stats(&ch, &cm, NULL);
    json_object_set_new(sum, "dfa_cache", json_pack("{s:I, s:I}", "hits", (json_int_t)ch, "misses", (json_int_t)cm));
    char *s = json_dumps(sum, JSON_COMPACT);
    if (s) puts(s);
    free(s);
    json_decref(sum);
    free(b.tbm.v);
    free(b.ttfm.v);
    sv_ccache_destroy(b.cache);
    sv_tokens_destroy(b.tok);
    return SV_EXIT_OK;
}
