/* bench_schema_compile.c — how long JSON Schemas take to compile, in process.
 *
 * A benchmark, not a test: it asserts nothing about speed. Each schema (a
 * JSON Schema file, or a MaskBench-style file whose "schema" member is one)
 * is compiled with sv_schema_compile R times in this process, the DFA memo
 * (fsm/dfa_cache.c) emptied before each compile, so that every compile is a
 * cold one, as for a schema the server has never seen, and still finds
 * within itself what it built earlier (as `sieve compile` and the server
 * do: a schema whose objects repeat one value compiles it once); the
 * process start, the file read and the
 * JSON parse of the wrapper are outside the timing. Per schema it keeps the
 * minimum and the median of the R compiles; the summary is the distribution
 * of the per-schema medians and their sum. Between two builds, the sum of
 * medians over a few hundred files moves by a few percent at most from run
 * to run on an idle machine, where one-process-per-compile timings (`sieve
 * compile`) move by 10 to 20%.
 *
 *   bench_schema_compile [-r REPS] [--allow-unknown-formats] [--per-schema] FILE|DIR...
 *
 * Directories are read one level deep (*.json). With --per-schema, one line
 * per schema: name, states, min and median µs (tab-separated). Times in µs. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/dfa.h"
#include "fsm/schema.h"
#include "util/clock.h"

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    char **v;
    size_t n, cap;
} list_t;

static void add(list_t *l, const char *p) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v) { perror("realloc"); exit(1); }
    }
    l->v[l->n++] = strdup(p);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void collect(list_t *l, const char *path) {
    DIR *d = opendir(path);
    if (!d) { add(l, path); return; }
    struct dirent *e;
    size_t first = l->n;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        char buf[4096];
        snprintf(buf, sizeof buf, "%s/%s", path, e->d_name);
        add(l, buf);
    }
    closedir(d);
    qsort(l->v + first, l->n - first, sizeof *l->v, cmp_str);
}

int main(int argc, char **argv) {
    int reps = 15;
    bool per_schema = false;
    sv_schema_opts_t o;
    sv_schema_opts_default(&o);
    list_t files = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--allow-unknown-formats")) o.unknown_formats_ok = true;
        else if (!strcmp(argv[i], "--per-schema")) per_schema = true;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_schema_compile [-r REPS] [--allow-unknown-formats] [--per-schema] FILE|DIR...\n");
            return 64;
        } else collect(&files, argv[i]);
    }
    if (reps < 1 || !files.n) {
        fprintf(stderr, "bench_schema_compile: nothing to do\n");
        return 64;
    }
    uint64_t *t = malloc((size_t)reps * sizeof *t), *med = malloc(files.n * sizeof *med);
    size_t nmed = 0, failed = 0;
    for (size_t f = 0; f < files.n; f++) {
        json_error_t je;
        json_t *doc = json_load_file(files.v[f], 0, &je);
        json_t *s = json_is_object(doc) && json_object_get(doc, "schema") ? json_object_get(doc, "schema") : doc;
        char *text = s ? json_dumps(s, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER) : NULL;
        uint32_t states = 0;
        bool ok = text != NULL;
        for (int r = 0; r < reps && ok; r++) {
            sv_dfa_t *d = NULL;
            sv_error_t err;
            sv_dfa_cache_empty();
            uint64_t t0 = sv_now_ns();
            ok = sv_schema_compile(text, strlen(text), &o, &d, NULL, &err) == SV_OK;
            t[r] = sv_now_ns() - t0;
            if (ok) states = sv_dfa_num_states(d);
            sv_dfa_destroy(d);
        }
        free(text);
        json_decref(doc);
        if (!ok) {
            failed++;
            continue;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_u64);
        med[nmed++] = t[reps / 2];
        if (per_schema)
            printf("%s\t%u\t%.1f\t%.1f\n", strrchr(files.v[f], '/') ? strrchr(files.v[f], '/') + 1 : files.v[f], states,
                   t[0] / 1e3, t[reps / 2] / 1e3);
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < nmed; i++) sum += med[i];
    qsort(med, nmed, sizeof *med, cmp_u64);
    if (nmed)
        printf("schemas %zu (failed %zu), reps %d: median compile p50 %.1f p90 %.1f p99 %.1f max %.1f µs, sum %.1f ms\n",
               nmed, failed, reps, med[nmed / 2] / 1e3, med[nmed * 9 / 10] / 1e3, med[nmed * 99 / 100] / 1e3,
               med[nmed - 1] / 1e3, sum / 1e6);
    for (size_t i = 0; i < files.n; i++) free(files.v[i]);
    free(files.v);
    free(t);
    free(med);
    return 0;
}
