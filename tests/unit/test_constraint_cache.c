/* test_constraint_cache.c — the compiled-constraint cache: keys, sharing
 * between threads, one compile per key under contention, eviction by bytes
 * that never frees an entry in use, failures not cached. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/constraint/constraint_cache.h"
#include "util/rng.h"

static int failures;
#define CHECK(c, ...)                                                \
    do {                                                             \
        if (!(c)) {                                                  \
            failures++;                                              \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);     \
            fprintf(stderr, __VA_ARGS__);                            \
            fputc('\n', stderr);                                     \
        }                                                            \
    } while (0)

static const char *const schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
    "{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"string\"},\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}",
    "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\",\"z\"]},\"maxItems\":4}",
    "{\"type\":\"string\",\"format\":\"date\"}",
    "{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"number\",\"minimum\":-5,\"maximum\":5}]}",
    "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"boolean\"},\"maxProperties\":3}",
    "{\"type\":\"string\",\"pattern\":\"^[a-z]{2,6}$\"}",
    "{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":3}]}",
};
#define NS (sizeof schemas / sizeof schemas[0])

typedef struct {
    sv_constraint_cache_t *c;
    const sv_token_set_t *ts;
    uint64_t seed;
    int errors;
    sv_constraint_t *seen[NS];
} worker_t;

static void *run(void *arg) {
    worker_t *w = arg;
    sv_rng_t rng;
    sv_rng_seed(&rng, w->seed);
    for (int i = 0; i < 300; i++) {
        uint32_t k = sv_rng_below(&rng, NS);
        sv_constraint_t *e;
        bool hit;
        sv_error_t err;
        if (sv_constraint_get(w->c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, schemas[k], strlen(schemas[k]), NULL, w->ts}, &e, &hit, &err)) {
            w->errors++;
            continue;
        }
        const uint32_t *m;
        if (sv_token_index_mask(sv_constraint_index(e), 0, 0, &m, NULL) != SV_OK || !m) w->errors++;
        if (!w->seen[k]) w->seen[k] = e;
        else if (w->seen[k] != e) w->errors += 1000; /* the big budget never evicts: always the same entry */
        sv_constraint_release(w->c, e);
    }
    return NULL;
}

int main(void) {
    /* a byte-level token set plus a few longer tokens */
    uint8_t *bytes[300];
    uint32_t lens[300];
    uint8_t kinds[300];
    uint32_t n = 0;
    for (int b = 0; b < 256; b++, n++) {
        bytes[n] = malloc(1);
        bytes[n][0] = (uint8_t)b;
        lens[n] = 1;
        kinds[n] = SV_TOKKIND_NORMAL;
    }
    const char *more[] = {"{\"", "\": ", "true", "false", "null", "\"}"};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++, n++) {
        lens[n] = (uint32_t)strlen(more[i]);
        bytes[n] = malloc(lens[n]);
        memcpy(bytes[n], more[i], lens[n]);
        kinds[n] = SV_TOKKIND_NORMAL;
    }
    bytes[n] = NULL, lens[n] = 0, kinds[n++] = SV_TOKKIND_EOG;
    sv_token_set_t *ts;
    sv_error_t err;
    if (sv_token_set_create(n, n, (const uint8_t *const *)bytes, lens, kinds, &ts, &err)) return 1;

    /* keys */
    sv_constraint_cache_t *c;
    CHECK(sv_ccache_create((size_t)1 << 30, &c, &err) == SV_OK, "create");
    sv_constraint_t *a, *b;
    bool hit;
    const char *spaced = "{ \"type\" : \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": "
                         "\"string\"}}, \"required\": [\"a\"] }";
    CHECK(sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, schemas[0], strlen(schemas[0]), NULL, ts}, &a, &hit, &err) == SV_OK && !hit,
          "first get compiles");
    CHECK(sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, spaced, strlen(spaced), NULL, ts}, &b, &hit, &err) == SV_OK && hit && a == b,
          "the same schema spaced differently is a hit");
    sv_constraint_release(c, b);
    CHECK(sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, schemas[1], strlen(schemas[1]), NULL, ts}, &b, &hit, &err) == SV_OK && !hit &&
              a != b,
          "another property order is another constraint");
    sv_constraint_release(c, b);
    {   /* The key drops spacing only: spaces inside strings count, two numbers
         * apart stay apart (the text does not parse), and a key given twice
         * is the compile's error, not the entry of the schema that jansson
         * would read it as (the key was the parsed document once). */
        static const struct { const char *first, *then; bool same; sv_status st; } k[] = {
            {"{\"type\":\"string\",\"maxLength\":10}", "{\"type\": \"string\", \"maxLength\": 1 0}", false, SV_ERR_SYNTAX},
            {"{\"const\":\"ab\"}", "{\"const\":\"a b\"}", false, SV_OK},
            {"{\"const\":\"a\\\" b\"}", "{ \"const\" :\n\"a\\\" b\" }", true, SV_OK},
            {"{\"type\":\"integer\"}", "{\"type\":\"string\",\"type\":\"integer\"}", false, SV_ERR_SYNTAX},
        };
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            sv_constraint_t *x = NULL, *y = NULL;
            CHECK(sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, k[i].first, strlen(k[i].first), NULL, ts},
                                    &x, &hit, &err) == SV_OK, "key %zu: %s", i, err.message);
            sv_status st = sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, k[i].then, strlen(k[i].then), NULL, ts},
                                             &y, &hit, &err);
            CHECK(st == k[i].st, "key %zu: %s, want %s (%s)", i, sv_status_name(st), sv_status_name(k[i].st), err.message);
            CHECK(st || (x == y) == k[i].same, "key %zu: the same entry: %d", i, (int)(x == y));
            if (y) sv_constraint_release(c, y);
            if (x) sv_constraint_release(c, x);
        }
    }
    sv_schema_opts_t o;
    sv_schema_opts_default(&o);
    o.ws = SV_WS_COMPACT;
    CHECK(sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, schemas[0], strlen(schemas[0]), &o, ts}, &b, &hit, &err) == SV_OK && !hit &&
              a != b,
          "another whitespace mode is another constraint");
    sv_constraint_release(c, b);
    CHECK(sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_REGEX, schemas[0], strlen(schemas[0]), NULL, ts}, &b, &hit, &err) != SV_OK ||
              (!hit && a != b),
          "a regex with the schema's text is another constraint");
    if (b) sv_constraint_release(c, b);
    sv_constraint_release(c, a);
    /* failures are reported each time and not cached */
    sv_ccache_stats_t st0, st1;
    sv_ccache_stats(c, &st0);
    const char *bad = "{\"type\":\"string\",\"format\":\"no-such-format\"}";
    for (int i = 0; i < 2; i++) {
        CHECK(sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, bad, strlen(bad), NULL, ts}, &a, &hit, &err) == SV_ERR_UNSUPPORTED,
              "an unknown format fails");
        CHECK(strstr(err.message, "no-such-format"), "the error names it: %s", err.message);
    }
    sv_ccache_stats(c, &st1);
    CHECK(st1.entries == st0.entries && st1.misses == st0.misses + 2, "failures are not cached");
    sv_ccache_destroy(c);

    /* threads: one compile per key, everyone shares it */
    CHECK(sv_ccache_create((size_t)1 << 30, &c, &err) == SV_OK, "create");
    pthread_t th[4];
    worker_t w[4];
    for (int i = 0; i < 4; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].c = c;
        w[i].ts = ts;
        w[i].seed = 100 + (uint64_t)i;
        pthread_create(&th[i], NULL, run, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    sv_ccache_stats_t st;
    sv_ccache_stats(c, &st);
    for (int i = 0; i < 4; i++) CHECK(w[i].errors == 0, "worker %d: %d errors", i, w[i].errors);
    for (size_t k = 0; k < NS; k++)
        for (int i = 1; i < 4; i++)
            CHECK(!w[i].seen[k] || !w[0].seen[k] || w[i].seen[k] == w[0].seen[k], "threads got different entries for %zu", k);
    CHECK(st.misses == NS && st.hits == 4 * 300 - NS && st.entries == NS && st.evictions == 0,
          "contended: %llu misses, %llu hits, %u entries, %llu evictions", (unsigned long long)st.misses,
          (unsigned long long)st.hits, st.entries, (unsigned long long)st.evictions);
    sv_ccache_destroy(c);

    /* a tiny budget: unheld entries go, a held one stays usable */
    CHECK(sv_ccache_create(1, &c, &err) == SV_OK, "create");
    sv_constraint_t *held;
    CHECK(sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, schemas[2], strlen(schemas[2]), NULL, ts}, &held, &hit, &err) == SV_OK,
          "held");
    for (size_t k = 3; k < NS; k++) {
        CHECK(sv_constraint_get(c, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, schemas[k], strlen(schemas[k]), NULL, ts}, &a, &hit, &err) == SV_OK,
              "get %zu", k);
        sv_constraint_release(c, a);
    }
    const uint32_t *m;
    CHECK(sv_token_index_mask(sv_constraint_index(held), 0, 0, &m, NULL) == SV_OK && ((m['[' >> 5] >> ('[' & 31)) & 1),
          "the held entry still works after evictions");
    sv_ccache_stats(c, &st);
    CHECK(st.entries == 1 && st.evictions == NS - 3, "evicted all but the held one: %u entries, %llu evictions", st.entries,
          (unsigned long long)st.evictions);
    sv_constraint_release(c, held);
    sv_ccache_stats(c, &st);
    CHECK(st.entries == 0, "released and over budget: evicted");
    sv_ccache_destroy(c);

    printf("test_constraint_cache: %d failures\n", failures);
    sv_token_set_destroy(ts);
    for (uint32_t i = 0; i < n; i++) free(bytes[i]);
    return failures ? 1 : 0;
}
