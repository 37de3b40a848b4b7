/* test_util.c — the shared helpers of src/util: the hash functions
 * (hash.h) against published values, strict UTF-8 (utf8.h: the lead-byte
 * table against the decoder, exhaustively over every lead and second byte),
 * and the worker threads (workers.h: every job runs once, stop leaves
 * queued jobs alone, destroy waits for a running job). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "util/hash.h"
#include "util/rng.h"
#include "util/utf8.h"
#include "util/workers.h"
#include "test.h"

/* ---- hash.h ---- */

static void test_hash(void) {
    /* FNV-1a 64 test vectors (the published ones for "", "a", "foobar") */
    CHECK(sv_hash_bytes("", 0) == 0xcbf29ce484222325ull, "fnv1a(\"\")");
    CHECK(sv_hash_bytes("a", 1) == 0xaf63dc4c8601ec8cull, "fnv1a(\"a\")");
    CHECK(sv_hash_bytes("foobar", 6) == 0x85944171f73967e8ull, "fnv1a(\"foobar\")");
    CHECK(sv_hash_str("foobar") == sv_hash_bytes("foobar", 6), "sv_hash_str differs from sv_hash_bytes");
    CHECK(sv_hash_str("\xff\x80") == sv_hash_bytes("\xff\x80", 2), "sv_hash_str sign-extends a high byte");
    uint64_t h = SV_HASH_FNV_BASIS;
    for (const char *s = "foobar"; *s; s++) h = sv_hash_step(h, (uint8_t)*s);
    CHECK(h == 0x85944171f73967e8ull, "sv_hash_step over bytes is FNV-1a");
    /* sv_hash_splitmix feeds seeds (rng.h, engine.c): splitmix64 from 0 */
    uint64_t x = 0;
    CHECK(sv_splitmix64(&x) == 0xe220a8397b1dcdafull, "splitmix64 output 1");
    CHECK(sv_splitmix64(&x) == 0x6e789e6aa1b965f4ull, "splitmix64 output 2");
    CHECK(sv_hash_u64(0) == 0 && sv_hash_u64(1) == 0xff51afd792fd5b26ull, "sv_hash_u64(1) = %llx",
          (unsigned long long)sv_hash_u64(1));
    CHECK(sv_hash_fib32(1) == 0x9e3779b9u && sv_hash_fib32(0x100000002ull) == 0xbbb96f87u, "sv_hash_fib32");
    printf("  hash: FNV-1a vectors, splitmix64 sequence, u64 and Fibonacci mixers\n");
}

/* ---- utf8.h ---- */

static void test_utf8(void) {
    /* The lead table against the decoder: for every first and second byte,
     * the lead says "a character starts here and b1 may follow" exactly
     * when some completion decodes, and the completion's length is the
     * lead's. Continuation bytes after b1 are 0x80 (always allowed). */
    int bad = 0;
    for (int b0 = 0x80; b0 < 256; b0++)
        for (int b1 = 0; b1 < 256; b1++) {
            uint32_t ncont;
            uint8_t lo, hi;
            bool lead = sv_utf8_lead((uint8_t)b0, &ncont, &lo, &hi);
            uint8_t s[4] = {(uint8_t)b0, (uint8_t)b1, 0x80, 0x80};
            uint32_t cp = 0;
            int k = sv_utf8_decode(s, 4, &cp);
            bool ok = lead && b1 >= lo && b1 <= hi;
            if (ok != (k > 0) || (ok && (uint32_t)k != ncont + 1)) bad++;
        }
    CHECK(bad == 0, "%d (lead, second byte) pairs where sv_utf8_lead and sv_utf8_decode disagree", bad);
    uint32_t n;
    uint8_t lo, hi;
    CHECK(sv_utf8_lead('A', &n, &lo, &hi) && n == 0, "ASCII lead");
    CHECK(!sv_utf8_lead(0xC1, &n, &lo, &hi) && !sv_utf8_lead(0xF5, &n, &lo, &hi), "C1 and F5 lead nothing");
    /* every scalar value round-trips; a surrogate's encoding does not decode */
    int rt = 0;
    for (uint32_t c = 0; c <= 0x10FFFF; c++) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        uint8_t b[4];
        uint32_t back = 0;
        int len = sv_utf8_encode(c, b);
        if (sv_utf8_decode(b, (size_t)len, &back) != len || back != c || sv_utf8_check(b, (size_t)len) != (size_t)len)
            rt++;
    }
    CHECK(rt == 0, "%d scalar values do not round-trip", rt);
    const uint8_t sur[] = {0xED, 0xA0, 0x80};
    uint32_t cp = 0;
    CHECK(sv_utf8_decode(sur, 3, &cp) == 0, "a surrogate decoded");
    /* sv_utf8_check: the offset of the first ill-formed sequence */
    const char *t = "ok \xC3\xA9 then \xE2\x82 cut";
    CHECK(sv_utf8_check((const uint8_t *)t, strlen(t)) == 11, "check offset %zu",
          sv_utf8_check((const uint8_t *)t, strlen(t)));
    CHECK(sv_utf8_check((const uint8_t *)t, 11) == 11 && sv_utf8_valid((const uint8_t *)t, 11), "valid prefix");
    CHECK(!sv_utf8_valid((const uint8_t *)"\xC0\x80", 2) && !sv_utf8_valid((const uint8_t *)"\xF4\x90\x80\x80", 4),
          "overlong NUL or U+110000 accepted");
    CHECK(!sv_utf8_valid((const uint8_t *)"\xF0\x9F\x98", 3), "a truncated character accepted");
    printf("  utf8: lead table = decoder over all lead/second bytes, all scalar values round-trip\n");
}

/* ---- workers.h ---- */

#define NJOBS 2000

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t done_cv;
    int queue[NJOBS];
    uint32_t head, n;       /* queued: queue[head .. head + n) */
    uint32_t ran[NJOBS];    /* times job i ran */
    uint32_t finished, bad_worker, n_workers;
    atomic_uint started;    /* start hooks called */
    int slow_ms;            /* each job sleeps this long */
    atomic_bool slow_done;
} owner_t;

static void *take(void *o, uint32_t i) {
    owner_t *w = o;
    if (i >= w->n_workers) w->bad_worker++;
    if (!w->n) return NULL;
    w->n--;
    return &w->queue[w->head++];
}

static void run(void *o, uint32_t i, void *job) {
    owner_t *w = o;
    (void)i;
    if (w->slow_ms) {
        struct timespec ts = {0, (long)w->slow_ms * 1000000L};
        nanosleep(&ts, NULL);
        atomic_store(&w->slow_done, true);
    }
    pthread_mutex_lock(&w->mu);
    w->ran[*(int *)job]++;
    if (++w->finished == NJOBS) pthread_cond_signal(&w->done_cv);
    pthread_mutex_unlock(&w->mu);
}

static void start(void *o, uint32_t i) {
    (void)i;
    atomic_fetch_add(&((owner_t *)o)->started, 1);
}

static void owner_init(owner_t *w, uint32_t n_workers) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    w->n_workers = n_workers;
    for (int i = 0; i < NJOBS; i++) w->queue[i] = i;
}

static void test_workers(void) {
    static owner_t w;
    owner_init(&w, 3);
    sv_workers_config_t cfg = {.n = 3, .lock = &w.mu, .take = take, .run = run, .start = start, .owner = &w};
    sv_workers_t *pool = NULL;
    sv_error_t err;
    CHECK(sv_workers_create(&cfg, &pool, &err) == SV_OK, "create: %s", err.message);
    /* queue the jobs in bursts, one wake per job */
    for (uint32_t i = 0; i < NJOBS; i++) {
        pthread_mutex_lock(&w.mu);
        w.n++;
        sv_workers_wake(pool);
        pthread_mutex_unlock(&w.mu);
    }
    pthread_mutex_lock(&w.mu);
    while (w.finished < NJOBS) pthread_cond_wait(&w.done_cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    sv_workers_destroy(pool);
    int twice = 0;
    for (int i = 0; i < NJOBS; i++) twice += w.ran[i] != 1;
    CHECK(twice == 0, "%d jobs did not run exactly once", twice);
    CHECK(w.bad_worker == 0, "a worker index out of range");
    CHECK(atomic_load(&w.started) == 3, "start ran %u times", atomic_load(&w.started));

    /* after stop no job is taken: the queue keeps them */
    owner_init(&w, 2);
    cfg.n = 2;
    CHECK(sv_workers_create(&cfg, &pool, &err) == SV_OK, "create: %s", err.message);
    pthread_mutex_lock(&w.mu);
    sv_workers_stop_locked(pool);
    w.n = 5;
    sv_workers_wake(pool);
    pthread_mutex_unlock(&w.mu);
    sv_workers_destroy(pool);
    CHECK(w.n == 5 && w.finished == 0, "%u jobs taken after stop", 5 - w.n);

    /* destroy waits for the job that is running */
    owner_init(&w, 1);
    w.slow_ms = 50;
    cfg.n = 1;
    CHECK(sv_workers_create(&cfg, &pool, &err) == SV_OK, "create: %s", err.message);
    pthread_mutex_lock(&w.mu);
    w.n = 1;
    sv_workers_wake(pool);
    pthread_mutex_unlock(&w.mu);
    for (int spin = 0; spin < 1000; spin++) { /* until the job is taken */
        pthread_mutex_lock(&w.mu);
        bool taken = w.n == 0;
        pthread_mutex_unlock(&w.mu);
        if (taken) break;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    sv_workers_destroy(pool);
    CHECK(atomic_load(&w.slow_done) && w.finished == 1, "destroy returned before the running job ended");

    cfg.n = 0;
    CHECK(sv_workers_create(&cfg, &pool, &err) == SV_ERR_ARG && !pool, "0 threads accepted");
    sv_workers_destroy(NULL);
    printf("  workers: %d jobs on 3 threads once each, stop leaves the queue, destroy waits\n", NJOBS);
}

int main(void) {
    test_hash();
    test_utf8();
    test_workers();
    return test_summary("test_util: src/util's hash, UTF-8 and worker helpers");
}
