/* engine_loop.c — the engine thread (see engine_loop.h).
 *
 * State and who touches it. One mutex (mu) guards what other threads see:
 * the inbox (a FIFO of requests not yet given to the engine), the cancel
 * list, the map from the loop's ids to requests, the live count, the
 * flags (draining, stopping, dead) and the stats snapshot. The engine
 * itself, the map from the engine's ids to requests and every callback
 * belong to the engine thread alone; callbacks run with mu released, so a
 * callback may call sv_engine_loop_cancel.
 *
 * A request (lreq_t) is one allocation holding its deep copy (prompt, stop
 * ids, stop strings, logit bias). It lives from sv_engine_loop_submit to
 * the callback call that ends it; the engine thread then unmaps and frees
 * it. Cancel needs no allocation: it flags the request and links it into
 * an intrusive list, so it cannot fail.
 *
 * The thread's round: wait (on a condition variable) until there is a
 * message or engine work; take the inbox and the cancel list; apply the
 * cancels (a request still in the taken inbox ends with ABORT without
 * reaching the engine; one in the engine is cancelled there); submit the
 * rest (a refusal is reported through the callback); deliver the outputs;
 * run one step if there is work; deliver its outputs; publish the stats. */
#include "engine_loop.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/hash.h"

typedef struct lreq {
    struct lreq *next;        /* inbox FIFO */
    struct lreq *cnext;       /* cancel list */
    uint64_t id;              /* the loop's id (what callbacks report) */
    uint64_t eid;             /* the engine's id, 0 until submitted */
    sv_engine_loop_cb cb;
    void *ud;
    sv_engine_request_t req;  /* deep copy: pointers into this allocation */
    bool cancel_pending;      /* cancelled (under mu) */
    bool in_cancel_list;      /* (under mu) */
    bool abort_now;           /* cancelled while in the taken inbox (engine thread) */
    uint32_t n_generated;     /* of the last output seen (engine thread) */
    uint32_t n_cached;
} lreq_t;

/* Open addressing from ids (> 0) to requests, backward-shift deletion. */
typedef struct idmap {
    uint64_t *keys; /* (cap), 0 = empty */
    lreq_t **vals;
    uint32_t cap, n;
} idmap_t;

struct sv_engine_loop {
    sv_engine_t *e;
    pthread_t th;
    bool started;

    pthread_mutex_t mu;
    pthread_cond_t wake;    /* the engine thread: a message, or stop */
    pthread_cond_t settled; /* drain: live reached 0 */
    lreq_t *in_head, *in_tail;
    uint32_t n_inbox;
    atomic_bool online_in_inbox; /* an online request waits in the inbox: a batch-only step
                                    gives way (sv_engine_set_interrupt) */
    lreq_t *cancels;
    idmap_t by_id;          /* loop id -> request, every live request (under mu) */
    uint64_t next_id;
    uint32_t live;          /* submitted and not ended */
    bool draining, stopping, dead;
    sv_error_t dead_err;
    uint64_t faults;        /* internal faults the loop recovered from */
    sv_engine_loop_stats_t snap;

    idmap_t by_eid;         /* engine id -> request (engine thread) */
};

/* ---- the id maps ---- */

static uint32_t slot_of(uint64_t k, uint32_t cap) { return (uint32_t)sv_hash_u64(k) & (cap - 1); }

static lreq_t *map_get(const idmap_t *m, uint64_t k) {
    if (!m->n) return NULL;
    for (uint32_t i = slot_of(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == k) return m->vals[i];
        if (!m->keys[i]) return NULL;
    }
}

static void map_place(idmap_t *m, uint64_t k, lreq_t *v) {
    uint32_t i = slot_of(k, m->cap);
    while (m->keys[i]) i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
    m->n++;
}

/* false when out of memory (nothing changed). */
static bool map_put(idmap_t *m, uint64_t k, lreq_t *v) {
    if ((m->n + 1) * 2 > m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 64;
        uint64_t *keys = calloc(cap, sizeof *keys);
        lreq_t **vals = calloc(cap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return false;
        }
        idmap_t nm = {keys, vals, cap, 0};
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->keys[i]) map_place(&nm, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = nm;
    }
    map_place(m, k, v);
    return true;
}

static void map_del(idmap_t *m, uint64_t k) {
    if (!m->n) return;
    uint32_t i = slot_of(k, m->cap);
    while (m->keys[i] != k) {
        if (!m->keys[i]) return;
        i = (i + 1) & (m->cap - 1);
    }
    /* Backward shift: move later entries of the run into the hole when
     * their home slot does not lie cyclically in (hole, j]. */
    for (uint32_t j = i;;) {
        j = (j + 1) & (m->cap - 1);
        if (!m->keys[j]) break;
        uint32_t h = slot_of(m->keys[j], m->cap);
        bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays) continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
    m->keys[i] = 0;
    m->vals[i] = NULL;
    m->n--;
}

static void map_free(idmap_t *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- requests ---- */

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static sv_status check_request(const sv_engine_request_t *q, sv_error_t *err) {
    if (!q || !q->prompt || q->n_prompt == 0) return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: empty prompt");
    if (q->n_prompt > (1u << 26))
        return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: a prompt of %u tokens", q->n_prompt);
    if (q->n > SV_ENGINE_MAX_N)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: n is %u (at most %d)", q->n, SV_ENGINE_MAX_N);
    if (q->n_stop_ids && !q->stop_ids) return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: stop ids missing");
    if (q->n_stop_ids > 1024)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: %u stop ids (at most 1024)", q->n_stop_ids);
    if (q->n_stop > SV_ENGINE_MAX_STOP)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: %u stop strings (at most %d)", q->n_stop,
                            SV_ENGINE_MAX_STOP);
    if (q->n_stop && !q->stop) return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: stop strings missing");
    for (uint32_t i = 0; i < q->n_stop; i++) {
        size_t n = q->stop[i] ? strnlen(q->stop[i], SV_ENGINE_MAX_STOP_BYTES + 1) : 0;
        if (n == 0 || n > SV_ENGINE_MAX_STOP_BYTES)
            return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: stop string %u is empty or longer than %d bytes",
                                i, SV_ENGINE_MAX_STOP_BYTES);
    }
    const sv_sample_params_t *s = &q->sampling;
    if (s->n_logit_bias > SV_SAMPLE_MAX_LOGIT_BIAS || (s->n_logit_bias && !s->logit_bias))
        return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: logit_bias: %u entries (at most %d)", s->n_logit_bias,
                            SV_SAMPLE_MAX_LOGIT_BIAS);
    return SV_OK;
}

/* One allocation: the record, then prompt, stop ids, logit bias, stop
 * pointers and stop strings. */
static lreq_t *copy_request(const sv_engine_request_t *q) {
    size_t n_prompt = align8(q->n_prompt * sizeof(int32_t)), n_ids = align8(q->n_stop_ids * sizeof(int32_t));
    size_t n_bias = align8(q->sampling.n_logit_bias * sizeof(sv_logit_bias_t));
    size_t n_ptrs = align8(q->n_stop * sizeof(char *)), n_text = 0;
    for (uint32_t i = 0; i < q->n_stop; i++) n_text += strlen(q->stop[i]) + 1;
    size_t head = align8(sizeof(lreq_t));
    char *p = malloc(head + n_prompt + n_ids + n_bias + n_ptrs + n_text);
    if (!p) return NULL;
    lreq_t *r = (lreq_t *)(void *)p;
    memset(r, 0, sizeof *r);
    r->req = *q;
    p += head;
    memcpy(p, q->prompt, q->n_prompt * sizeof(int32_t));
    r->req.prompt = (const int32_t *)(void *)p;
    p += n_prompt;
    if (q->n_stop_ids) {
        memcpy(p, q->stop_ids, q->n_stop_ids * sizeof(int32_t));
        r->req.stop_ids = (const int32_t *)(void *)p;
    } else {
        r->req.stop_ids = NULL;
    }
    p += n_ids;
    if (q->sampling.n_logit_bias) {
        memcpy(p, q->sampling.logit_bias, q->sampling.n_logit_bias * sizeof(sv_logit_bias_t));
        r->req.sampling.logit_bias = (const sv_logit_bias_t *)(void *)p;
    } else {
        r->req.sampling.logit_bias = NULL;
    }
    p += n_bias;
    char **ptrs = (char **)(void *)p;
    p += n_ptrs;
    for (uint32_t i = 0; i < q->n_stop; i++) {
        size_t n = strlen(q->stop[i]) + 1;
        memcpy(p, q->stop[i], n);
        ptrs[i] = p;
        p += n;
    }
    r->req.stop = q->n_stop ? (const char *const *)ptrs : NULL;
    return r;
}

/* ---- the engine thread ---- */

static void publish_stats(sv_engine_loop_t *l) {
    sv_engine_loop_stats_t s;
    memset(&s, 0, sizeof s);
    sv_engine_stats(l->e, &s.engine);
    const sv_kv_pool_t *pool = sv_engine_pool(l->e);
    s.kv_blocks = sv_kv_pool_n_blocks(pool);
    uint32_t free_blocks = sv_engine_free_blocks(l->e);
    s.kv_blocks_used = s.kv_blocks > free_blocks ? s.kv_blocks - free_blocks : 0;
    s.prefix_hits = s.engine.cached_tokens;
    pthread_mutex_lock(&l->mu);
    s.faults = l->faults;
    l->snap = s;
    pthread_mutex_unlock(&l->mu);
}

/* Calls back the request's last output, then forgets and frees it. */
static void end_request(sv_engine_loop_t *l, lreq_t *r, const sv_engine_output_t *out, const sv_error_t *refusal) {
    r->cb(r->ud, out, refusal);
    if (r->eid) map_del(&l->by_eid, r->eid);
    pthread_mutex_lock(&l->mu);
    map_del(&l->by_id, r->id);
    if (r->in_cancel_list) {
        lreq_t **p = &l->cancels;
        while (*p != r) p = &(*p)->cnext;
        *p = r->cnext;
    }
    if (--l->live == 0) pthread_cond_broadcast(&l->settled);
    pthread_mutex_unlock(&l->mu);
    free(r);
}

/* Ends r with a made-up ABORT output (it never reached the engine, or the
 * engine is dead), or a refusal when err is non-NULL. */
static void end_abort(sv_engine_loop_t *l, lreq_t *r, const sv_error_t *refusal) {
    static const int32_t no_tokens[1];
    sv_engine_output_t o;
    memset(&o, 0, sizeof o);
    o.id = r->id;
    o.tokens = no_tokens; /* never NULL, for a memcpy of 0 tokens */
    o.finish = SV_FINISH_ABORT;
    o.stop_index = -1;
    o.stop_id = -1;
    o.request_done = true;
    o.n_generated = r->n_generated;
    o.n_prompt = r->req.n_prompt;
    o.n_cached = r->n_cached;
    end_request(l, r, &o, refusal);
}

static void deliver(sv_engine_loop_t *l) {
    sv_engine_output_t o;
    while (sv_engine_next_output(l->e, &o)) {
        lreq_t *r = map_get(&l->by_eid, o.id);
        if (!r) continue; /* only a request that could not be mapped (out of memory) and was cancelled */
        r->n_generated = o.n_generated;
        r->n_cached = o.n_cached;
        o.id = r->id;
        /* One choice: its finish ends the request (also for an engine that
         * leaves request_done to n > 1). */
        if (o.request_done || (r->req.n <= 1 && o.finish != SV_FINISH_NONE)) {
            o.request_done = true;
            end_request(l, r, &o, NULL);
        } else {
            r->cb(r->ud, &o, NULL);
        }
    }
}

static void cancel_engine_requests(sv_engine_loop_t *l) {
    for (uint32_t i = 0; i < l->by_eid.cap; i++)
        if (l->by_eid.keys[i]) sv_engine_cancel(l->e, l->by_eid.keys[i], NULL);
}

/* Each request still mapped to the engine ends with a made-up ABORT output,
 * or with the refusal when it is non-NULL. */
static void end_mapped_requests(sv_engine_loop_t *l, const sv_error_t *refusal) {
    while (l->by_eid.n) {
        uint32_t i = 0;
        while (!l->by_eid.keys[i]) i++;
        end_abort(l, l->by_eid.vals[i], refusal);
    }
}

/* Every request in the engine ends: cancelled there when the engine still
 * works, else with made-up ABORT outputs. */
static void abort_engine_requests(sv_engine_loop_t *l, bool engine_ok) {
    if (engine_ok) {
        cancel_engine_requests(l);
        deliver(l);
    }
    end_mapped_requests(l, NULL);
}

/* A step failed on an invariant of sieve's own (SV_ERR_INTERNAL): the
 * requests in the engine end with that error (the server answers 500, or
 * ends a started stream), and if the engine is whole again without them
 * (sv_engine_check) it goes on serving. False when it is not: the loop then
 * dies as on any other failure. */
static bool recover(sv_engine_loop_t *l, const sv_error_t *fault) {
    cancel_engine_requests(l);
    sv_engine_output_t o;
    while (sv_engine_next_output(l->e, &o)) {
    } /* the cancels' ABORT outputs: the fault is what these requests end with */
    end_mapped_requests(l, fault);
    sv_error_t why;
    if (sv_engine_check(l->e, &why)) return false;
    pthread_mutex_lock(&l->mu);
    l->faults++;
    pthread_mutex_unlock(&l->mu);
    publish_stats(l);
    return true;
}

static void submit_one(sv_engine_loop_t *l, lreq_t *r, bool stopping, bool dead, const sv_error_t *dead_err) {
    if (r->abort_now || stopping) {
        end_abort(l, r, NULL);
        return;
    }
    if (dead) {
        end_abort(l, r, dead_err);
        return;
    }
    sv_error_t err;
    uint64_t eid = 0;
    if (sv_engine_submit(l->e, &r->req, &eid, &err)) {
        end_abort(l, r, &err);
        return;
    }
    if (!map_put(&l->by_eid, eid, r)) {
        sv_engine_cancel(l->e, eid, NULL); /* its ABORT output, unmapped, is skipped by deliver */
        sv_error_set(&err, SV_ERR_NOMEM, -1, "out of memory");
        end_abort(l, r, &err);
        return;
    }
    r->eid = eid;
}

static void *loop_main(void *arg) {
    sv_engine_loop_t *l = arg;
    for (;;) {
        bool work = !l->dead && sv_engine_has_work(l->e); /* dead: only this thread writes it */
        pthread_mutex_lock(&l->mu);
        while (!l->stopping && !l->in_head && !l->cancels && !work) pthread_cond_wait(&l->wake, &l->mu);
        lreq_t *inbox = l->in_head, *cancels = l->cancels;
        l->in_head = l->in_tail = NULL;
        l->n_inbox = 0;
        atomic_store_explicit(&l->online_in_inbox, false, memory_order_relaxed);
        l->cancels = NULL;
        for (lreq_t *c = cancels; c; c = c->cnext) c->in_cancel_list = false;
        bool stopping = l->stopping, dead = l->dead;
        sv_error_t dead_err = l->dead_err;
        pthread_mutex_unlock(&l->mu);

        /* Cancels of requests in the engine. One not yet submitted is in
         * the taken inbox (its submit preceded the cancel, and both lists
         * were taken at once): it ends in submit_one. A cancel arriving
         * after the take waits for the next round, and finds the request
         * in the engine or ended. */
        for (lreq_t *c = cancels; c; c = c->cnext) {
            if (!c->eid)
                c->abort_now = true;
            else if (!dead)
                sv_engine_cancel(l->e, c->eid, NULL);
        }
        while (inbox) {
            lreq_t *r = inbox;
            inbox = r->next;
            submit_one(l, r, stopping, dead, &dead_err);
        }
        if (!dead) deliver(l);
        if (stopping) {
            abort_engine_requests(l, !dead);
            break;
        }
        if (!dead && sv_engine_has_work(l->e)) {
            sv_error_t err;
            sv_status st = sv_engine_step(l->e, &err);
            if (st == SV_ERR_INTERNAL && recover(l, &err)) continue;
            if (st) {
                pthread_mutex_lock(&l->mu);
                l->dead = true;
                l->dead_err = err;
                pthread_mutex_unlock(&l->mu);
                abort_engine_requests(l, false);
                continue;
            }
            deliver(l);
        }
        if (!dead) publish_stats(l);
    }
    publish_stats(l);
    return NULL;
}

/* The engine's interrupt (engine thread, mid-forward). */
static bool online_waits(void *ud) {
    sv_engine_loop_t *l = ud;
    return atomic_load_explicit(&l->online_in_inbox, memory_order_relaxed);
}

/* ---- the API ---- */

sv_status sv_engine_loop_start(sv_engine_t *e, sv_engine_loop_t **out, sv_error_t *err) {
    *out = NULL;
    if (!e) return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: no engine");
    sv_engine_loop_t *l = calloc(1, sizeof *l);
    if (!l) {
        sv_engine_destroy(e);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    l->e = e;
    l->next_id = 1;
    atomic_init(&l->online_in_inbox, false);
    sv_engine_set_interrupt(e, online_waits, l);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->wake, NULL);
    pthread_cond_init(&l->settled, &ca);
    pthread_condattr_destroy(&ca);
    publish_stats(l);
    if (pthread_create(&l->th, NULL, loop_main, l)) {
        sv_engine_loop_stop(l);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "engine loop: cannot start the engine thread");
    }
    l->started = true;
    *out = l;
    return SV_OK;
}

sv_status sv_engine_loop_submit(sv_engine_loop_t *l, const sv_engine_request_t *req, sv_engine_loop_cb cb,
                                void *ud, uint64_t *id, sv_error_t *err) {
    if (!cb) return sv_error_set(err, SV_ERR_ARG, -1, "engine loop: no callback");
    sv_status st = check_request(req, err);
    if (st) return st;
    lreq_t *r = copy_request(req);
    if (!r) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    r->cb = cb;
    r->ud = ud;
    pthread_mutex_lock(&l->mu);
    if (l->stopping)
        st = sv_error_set(err, SV_ERR_CAPACITY, -1, "engine loop: stopping");
    else if (l->dead)
        st = sv_error_set(err, SV_ERR_IO, -1, "engine loop: the engine failed: %s", l->dead_err.message);
    else if (l->draining)
        st = sv_error_set(err, SV_ERR_CAPACITY, -1, "engine loop: draining");
    else if (l->n_inbox >= SV_ENGINE_LOOP_MAX_INBOX)
        st = sv_error_set(err, SV_ERR_CAPACITY, -1, "engine loop: the inbox is full (%u)", l->n_inbox);
    else if (!map_put(&l->by_id, l->next_id, r))
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    if (st) {
        pthread_mutex_unlock(&l->mu);
        free(r);
        return st;
    }
    r->id = l->next_id++;
    if (l->in_tail)
        l->in_tail->next = r;
    else
        l->in_head = r;
    l->in_tail = r;
    l->n_inbox++;
    if (r->req.priority != SV_PRIORITY_BATCH) atomic_store_explicit(&l->online_in_inbox, true, memory_order_relaxed);
    l->live++;
    *id = r->id;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
    return SV_OK;
}

void sv_engine_loop_cancel(sv_engine_loop_t *l, uint64_t id) {
    pthread_mutex_lock(&l->mu);
    lreq_t *r = map_get(&l->by_id, id);
    if (r && !r->cancel_pending) {
        r->cancel_pending = true;
        r->in_cancel_list = true;
        r->cnext = l->cancels;
        l->cancels = r;
        pthread_cond_signal(&l->wake);
    }
    pthread_mutex_unlock(&l->mu);
}

void sv_engine_loop_stats(sv_engine_loop_t *l, sv_engine_loop_stats_t *st) {
    pthread_mutex_lock(&l->mu);
    *st = l->snap;
    st->inbox = l->n_inbox;
    pthread_mutex_unlock(&l->mu);
}

bool sv_engine_loop_alive(sv_engine_loop_t *l) {
    pthread_mutex_lock(&l->mu);
    bool alive = !l->dead;
    pthread_mutex_unlock(&l->mu);
    return alive;
}

bool sv_engine_loop_drain(sv_engine_loop_t *l, uint32_t timeout_ms) {
    struct timespec until = sv_deadline_ms(timeout_ms);
    pthread_mutex_lock(&l->mu);
    l->draining = true;
    while (l->live > 0 && timeout_ms > 0)
        if (pthread_cond_timedwait(&l->settled, &l->mu, &until)) break;
    bool done = l->live == 0;
    pthread_mutex_unlock(&l->mu);
    return done;
}

void sv_engine_loop_stop(sv_engine_loop_t *l) {
    if (!l) return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stopping = true;
        pthread_cond_signal(&l->wake);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->th, NULL);
    }
    sv_engine_destroy(l->e);
    map_free(&l->by_id);
    map_free(&l->by_eid);
    pthread_cond_destroy(&l->wake);
    pthread_cond_destroy(&l->settled);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
