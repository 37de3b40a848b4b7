/* workers.c — a fixed set of threads taking jobs from their owner's queue
 * (see workers.h). */
#include "workers.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct {
    sv_workers_t *w;
    uint32_t i;
} slot_t;

struct sv_workers {
    sv_workers_config_t cfg;
    pthread_cond_t work; /* a job was queued, or stop (waited on with cfg.lock) */
    bool stop;           /* under cfg.lock */
    pthread_t *threads;  /* (cfg.n) */
    slot_t *slots;       /* (cfg.n) each thread's argument */
    uint32_t started;
};

static void *worker_main(void *arg) {
    const slot_t *s = arg;
    sv_workers_t *w = s->w;
    const sv_workers_config_t *c = &w->cfg;
    if (c->start) c->start(c->owner, s->i);
    pthread_mutex_lock(c->lock);
    for (;;) {
        void *job = NULL;
        while (!w->stop && !(job = c->take(c->owner, s->i))) pthread_cond_wait(&w->work, c->lock);
        if (!job) break; /* stop */
        pthread_mutex_unlock(c->lock);
        c->run(c->owner, s->i, job);
        pthread_mutex_lock(c->lock);
    }
    pthread_mutex_unlock(c->lock);
    return NULL;
}

sv_status sv_workers_create(const sv_workers_config_t *cfg, sv_workers_t **out, sv_error_t *err) {
    *out = NULL;
    if (cfg->n == 0 || !cfg->lock || !cfg->take || !cfg->run)
        return sv_error_set(err, SV_ERR_ARG, -1, "workers: need at least one thread, a lock, take and run");
    sv_workers_t *w = calloc(1, sizeof *w);
    if (!w) return sv_error_set(err, SV_ERR_NOMEM, -1, "workers: out of memory");
    w->cfg = *cfg;
    pthread_cond_init(&w->work, NULL);
    w->threads = calloc(cfg->n, sizeof *w->threads);
    w->slots = calloc(cfg->n, sizeof *w->slots);
    if (!w->threads || !w->slots) {
        sv_workers_destroy(w);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "workers: out of memory");
    }
    for (; w->started < cfg->n; w->started++) {
        w->slots[w->started] = (slot_t){w, w->started};
        if (pthread_create(&w->threads[w->started], NULL, worker_main, &w->slots[w->started])) {
            uint32_t failed = w->started + 1;
            sv_workers_destroy(w);
            return sv_error_set(err, SV_ERR_NOMEM, -1, "workers: cannot start thread %u of %u", failed, cfg->n);
        }
    }
    *out = w;
    return SV_OK;
}

void sv_workers_wake(sv_workers_t *w) { pthread_cond_signal(&w->work); }

void sv_workers_stop_locked(sv_workers_t *w) {
    w->stop = true;
    pthread_cond_broadcast(&w->work);
}

void sv_workers_destroy(sv_workers_t *w) {
    if (!w) return;
    pthread_mutex_lock(w->cfg.lock);
    sv_workers_stop_locked(w);
    pthread_mutex_unlock(w->cfg.lock);
    for (uint32_t i = 0; i < w->started; i++) pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->work);
    free(w->threads);
    free(w->slots);
    free(w);
}
