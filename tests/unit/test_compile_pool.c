/* test_compile_pool.c — the compile pool under abuse (src/server/compile_pool.h)
 * and the compile controls under it (util/memacct.h):
 *   - a compile refused by the shared memory pool, not its own budget, is
 *     SV_ERR_CAPACITY, and the pool's count returns to zero after each compile;
 *   - a raised cancel flag stops a compile with SV_ERR_CANCELLED;
 *   - a cached constraint is answered while every worker is busy with a slow
 *     compile; a full compile queue answers SV_ERR_CAPACITY; cancelling a
 *     waiting job and a running one each ends it with SV_ERR_CANCELLED, and
 *     the running compile's worker is free again at once. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsm/regex.h"
#include "src/server/compile_pool.h"
#include "util/clock.h"
#include "util/memacct.h"
#include "test.h"

/* An exponential pattern: about 8 million DFA states, tens of seconds. */
static const char *const bomb = "[ab]*a[ab]{22}";
static const char *const bomb2 = "[ab]*b[ab]{22}";
static const char *const bomb3 = "[ab]*a[ab]{21}b";

/* ---- the controls, on one thread ---- */

static void test_controls(void) {
    sv_fsm_limits_t lim;
    sv_fsm_limits_default(&lim);
    sv_error_t err;
    sv_dfa_t *d = NULL;
    const char *pat = "[ab]*a[ab]{10}"; /* 2048 states: about a megabyte while it compiles */

    sv_memacct_pool_t pool = {.limit = (size_t)1 << 30};
    sv_memacct_thread_setup(&pool, NULL);
    CHECK(sv_regex_compile(pat, strlen(pat), &lim, &d, &err) == SV_OK, "compiles within the pool: %s", err.message);
    CHECK(atomic_load(&pool.used) == 0, "the pool is back to 0 after the compile (%zu)", atomic_load(&pool.used));
    sv_dfa_destroy(d);

    /* Others hold all but 4 KiB of the pool: the server is busy. */
    atomic_store(&pool.used, pool.limit - 4096);
    CHECK(sv_regex_compile(pat, strlen(pat), &lim, &d, &err) == SV_ERR_CAPACITY && err.code == SV_ERR_CAPACITY,
          "a compile the pool cannot hold is SV_ERR_CAPACITY: %s", err.message);
    CHECK(atomic_load(&pool.used) == pool.limit - 4096, "a refused compile gives back what it took");

    /* Its own budget is still its own: a budget error, not capacity. */
    atomic_store(&pool.used, 0);
    sv_fsm_limits_t small = lim;
    small.max_memory = 4096;
    CHECK(sv_regex_compile(pat, strlen(pat), &small, &d, &err) == SV_ERR_BUDGET,
          "over its own budget: SV_ERR_BUDGET (%s)", err.message);
    CHECK(atomic_load(&pool.used) == 0, "and the pool is back to 0");

    /* A schema too: the pool short is capacity, and never a narrower
     * language (the schema compiler retries narrower ones on budgets). */
    const char *schema = "{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\",\"pattern\":\"^[ab]*a[ab]{10}$\"}}}";
    atomic_store(&pool.used, pool.limit - 4096);
    sv_schema_opts_t so;
    sv_schema_opts_default(&so);
    CHECK(sv_schema_compile(schema, strlen(schema), &so, &d, NULL, &err) == SV_ERR_CAPACITY,
          "a schema the pool cannot hold is SV_ERR_CAPACITY: %s", err.message);
    atomic_store(&pool.used, 0);
    CHECK(sv_schema_compile(schema, strlen(schema), &so, &d, NULL, &err) == SV_OK, "and compiles once it can");
    sv_dfa_destroy(d);
    CHECK(atomic_load(&pool.used) == 0, "the pool is back to 0 after the schema");

    /* A raised cancel flag. */
    _Atomic bool cancel = true;
    sv_memacct_thread_setup(NULL, &cancel);
    lim.max_dfa_states = 100000000;
    lim.max_memory = (size_t)2 << 30;
    lim.max_time_us = 60 * 1000000ull;
    uint64_t t0 = sv_now_ns();
    CHECK(sv_regex_compile(bomb, strlen(bomb), &lim, &d, &err) == SV_ERR_CANCELLED, "cancelled: %s", err.message);
    CHECK(sv_now_ns() - t0 < 5000000000ull, "a cancelled compile stops at its first check");
    sv_memacct_thread_setup(NULL, NULL);
}

/* ---- the pool ---- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done[8];
    sv_status st[8];
    bool hit[8];
    uint32_t running_at_done[8];
    sv_constraint_t *c[8];
} results_t;

static results_t R = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static sv_cpool_t *pool;

static void cb(void *ud, sv_constraint_t *c, bool hit, uint64_t us, const sv_error_t *err) {
    (void)us;
    int k = (int)(intptr_t)ud;
    sv_cpool_stats_t st;
    sv_cpool_stats(pool, &st); /* takes the pool's lock: not held during callbacks */
    pthread_mutex_lock(&R.mu);
    R.done[k]++;
    R.st[k] = c ? SV_OK : err->code;
    R.hit[k] = hit;
    R.c[k] = c;
    R.running_at_done[k] = st.running;
    pthread_cond_broadcast(&R.cv);
    pthread_mutex_unlock(&R.mu);
}

static bool wait_done(int k, double secs) {
    uint64_t until = sv_now_ns() + (uint64_t)(secs * 1e9);
    pthread_mutex_lock(&R.mu);
    while (!R.done[k] && sv_now_ns() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&R.cv, &R.mu, &ts);
    }
    bool d = R.done[k] > 0;
    pthread_mutex_unlock(&R.mu);
    return d;
}

static void wait_running(uint32_t n) {
    for (int i = 0; i < 2000; i++) {
        sv_cpool_stats_t st;
        sv_cpool_stats(pool, &st);
        if (st.running == n) return;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

static void test_pool(void) {
    uint8_t *bytes[257];
    uint32_t lens[257];
    uint8_t kinds[257];
    for (int b = 0; b < 256; b++) {
        bytes[b] = malloc(1);
        bytes[b][0] = (uint8_t)b;
        lens[b] = 1;
        kinds[b] = SV_TOKKIND_NORMAL;
    }
    bytes[256] = NULL, lens[256] = 0, kinds[256] = SV_TOKKIND_EOG;
    sv_token_set_t *ts;
    sv_error_t err;
    if (sv_token_set_create(257, 257, (const uint8_t *const *)bytes, lens, kinds, &ts, &err)) {
        CHECK(0, "token set: %s", err.message);
        return;
    }
    for (int b = 0; b < 256; b++) free(bytes[b]);
    sv_constraint_cache_t *cache;
    CHECK(sv_ccache_create((size_t)256 << 20, &cache, &err) == SV_OK, "cache");
    sv_cpool_config_t cfg = {.threads = 1, .queue = 1, .memory = (size_t)1 << 30};
    CHECK(sv_cpool_create(&cfg, cache, &pool, &err) == SV_OK, "pool: %s", err.message);

    sv_schema_opts_t slow;
    sv_schema_opts_default(&slow);
    slow.lim.max_dfa_states = 100000000;
    slow.lim.max_time_us = 120 * 1000000ull;
    const char *cached = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}";

    /* 0: a cached constraint, compiled first */
    CHECK(sv_cpool_submit(pool, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, cached, strlen(cached), NULL, ts}, cb, (void *)0), "submit 0");
    CHECK(wait_done(0, 30) && R.st[0] == SV_OK && !R.hit[0], "0 compiles");
    /* 1: a slow compile takes the only worker; 2 waits; 3 finds the queue full */
    uint64_t id1 = sv_cpool_submit(pool, &(sv_constraint_spec_t){SV_CONSTRAINT_REGEX, bomb, strlen(bomb), &slow, ts}, cb, (void *)1);
    wait_running(1);
    uint64_t id2 = sv_cpool_submit(pool, &(sv_constraint_spec_t){SV_CONSTRAINT_REGEX, bomb2, strlen(bomb2), &slow, ts}, cb, (void *)2);
    for (int i = 0; i < 400; i++) { /* 2 reaches the compile queue */
        sv_cpool_stats_t st;
        sv_cpool_stats(pool, &st);
        if (st.waiting == 1) break;
        struct timespec t = {0, 5000000};
        nanosleep(&t, NULL);
    }
    CHECK(id1 && id2, "submitted");
    CHECK(sv_cpool_submit(pool, &(sv_constraint_spec_t){SV_CONSTRAINT_REGEX, bomb3, strlen(bomb3), &slow, ts}, cb, (void *)3), "submit 3");
    CHECK(wait_done(3, 30) && R.st[3] == SV_ERR_CAPACITY, "the compile queue is full: capacity (%d)", (int)R.st[3]);
    /* 4: the cached constraint again, answered while the worker is busy */
    CHECK(sv_cpool_submit(pool, &(sv_constraint_spec_t){SV_CONSTRAINT_SCHEMA, cached, strlen(cached), NULL, ts}, cb, (void *)4), "submit 4");
    CHECK(wait_done(4, 30) && R.st[4] == SV_OK && R.hit[4] && R.c[4] == R.c[0],
          "a cached constraint is a hit (%d, %d)", (int)R.st[4], (int)R.hit[4]);
    CHECK(R.running_at_done[4] == 1 && !R.done[1], "... answered while the slow compile runs");
    /* cancels: the waiting job, then the running one */
    sv_cpool_cancel(pool, id2);
    CHECK(wait_done(2, 30) && R.st[2] == SV_ERR_CANCELLED, "a waiting job cancelled (%d)", (int)R.st[2]);
    uint64_t t0 = sv_now_ns();
    sv_cpool_cancel(pool, id1);
    CHECK(wait_done(1, 60) && R.st[1] == SV_ERR_CANCELLED, "a running compile cancelled (%d)", (int)R.st[1]);
    CHECK(sv_now_ns() - t0 < 10000000000ull, "a cancelled compile stops within its next checks");
    sv_cpool_cancel(pool, id1); /* finished: a no-op */
    sv_cpool_stats_t st;
    sv_cpool_stats(pool, &st);
    CHECK(st.cancelled == 2 && st.refused == 1 && st.running == 0 && st.waiting == 0 && st.memory_in_use == 0,
          "stats: %llu cancelled, %llu refused, %u running, %u waiting, %zu bytes",
          (unsigned long long)st.cancelled, (unsigned long long)st.refused, st.running, st.waiting, st.memory_in_use);
    /* The worker is free: a new compile runs. */
    const char *small = "[0-9]{1,4}";
    CHECK(sv_cpool_submit(pool, &(sv_constraint_spec_t){SV_CONSTRAINT_REGEX, small, strlen(small), NULL, ts}, cb, (void *)5), "submit 5");
    CHECK(wait_done(5, 30) && R.st[5] == SV_OK, "the worker compiles again");
    for (int k = 0; k < 8; k++) {
        CHECK(R.done[k] <= 1, "job %d: its callback ran %d times", k, R.done[k]);
        if (R.c[k]) sv_constraint_release(cache, R.c[k]);
    }
    sv_cpool_destroy(pool);
    sv_ccache_destroy(cache);
    sv_token_set_destroy(ts);
}

int main(void) {
    test_controls();
    test_pool();
    return test_summary("test_compile_pool: the compile pool under abuse, and its controls");
}
