/* compile_pool.c — constraint compile threads (see compile_pool.h). */
#include "compile_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "src/util/clock.h"

typedef struct job {
    struct job *next;
    sv_constraint_kind kind;
    char *text;
    size_t len;
    sv_schema_opts_t opts;
    const sv_token_set_t *tokens;
    uint32_t ws_cap;
    sv_cpool_cb cb;
    void *ud;
} job_t;

struct sv_cpool {
    sv_constraint_cache_t *cache;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job_t *head, *tail;
    uint32_t queued, queue_max;
    bool stop;
    uint32_t n_threads;
    pthread_t *threads;
};

static void *worker(void *arg) {
    sv_cpool_t *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->head && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        job_t *j = p->head;
        p->head = j->next;
        if (!p->head) p->tail = NULL;
        p->queued--;
        pthread_mutex_unlock(&p->mu);

        uint64_t t0 = sv_now_ns();
        sv_error_t err;
        sv_error_clear(&err);
        sv_constraint_t *c = NULL;
        bool hit = false;
        sv_status st = sv_ccache_get(p->cache, j->kind, j->text, j->len, &j->opts, j->tokens, j->ws_cap, &c, &hit, &err);
        if (st && err.code == SV_OK) err.code = st;
        uint64_t us = (sv_now_ns() - t0) / 1000;
        j->cb(j->ud, st ? NULL : c, hit, us, &err);
        free(j->text);
        free(j);
#ifdef __GLIBC__
        /* A compile that failed, or ran long, has freed what it built (its
         * arena and automata): hand the pages back to the system, so one
         * big schema does not leave the server holding gigabytes. */
        if (!hit && (st || us > 100000)) malloc_trim(0);
#endif
    }
}

sv_status sv_cpool_create(uint32_t threads, uint32_t queue, sv_constraint_cache_t *cache, sv_cpool_t **out,
                          sv_error_t *err) {
    *out = NULL;
    if (threads == 0 || threads > 64) return sv_error_set(err, SV_ERR_ARG, -1, "compile threads: 1 to 64");
    sv_cpool_t *p = calloc(1, sizeof *p);
    if (!p) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    p->cache = cache;
    p->queue_max = queue ? queue : 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = calloc(threads, sizeof *p->threads);
    if (!p->threads) goto fail;
    for (; p->n_threads < threads; p->n_threads++)
        if (pthread_create(&p->threads[p->n_threads], NULL, worker, p)) goto fail;
    *out = p;
    return SV_OK;
fail:
    sv_cpool_destroy(p);
    return sv_error_set(err, SV_ERR_NOMEM, -1, "compile pool: cannot start its threads");
}

bool sv_cpool_submit(sv_cpool_t *p, sv_constraint_kind kind, const char *text, size_t len, const sv_schema_opts_t *opts,
                     const sv_token_set_t *tokens, uint32_t ws_cap, sv_cpool_cb cb, void *ud) {
    job_t *j = calloc(1, sizeof *j);
    if (!j) return false;
    j->text = malloc(len + 1);
    if (!j->text) {
        free(j);
        return false;
    }
    memcpy(j->text, text, len);
    j->text[len] = 0;
    j->len = len;
    j->kind = kind;
    if (opts) j->opts = *opts;
    else sv_schema_opts_default(&j->opts);
    j->tokens = tokens;
    j->ws_cap = ws_cap;
    j->cb = cb;
    j->ud = ud;
    pthread_mutex_lock(&p->mu);
    if (p->stop || p->queued >= p->queue_max) {
        pthread_mutex_unlock(&p->mu);
        free(j->text);
        free(j);
        return false;
    }
    if (p->tail) p->tail->next = j;
    else p->head = j;
    p->tail = j;
    p->queued++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return true;
}

void sv_cpool_destroy(sv_cpool_t *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    for (job_t *j = p->head, *n; j; j = n) {
        n = j->next;
        free(j->text);
        free(j);
    }
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
