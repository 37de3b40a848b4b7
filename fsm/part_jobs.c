/* part_jobs.c — a schema's big parts compiled on helper threads (see
 * fsm/internal/part_jobs.h). */
#include "fsm/internal/part_jobs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsm/internal/dfa_internal.h"
#include "util/memacct.h"

enum { QUEUED, RUNNING, DONE };

struct sv_part_job {
    sv_arena_t *arena;        /* the AST's copy */
    const sv_ast_t *ast;
    sv_fsm_limits_t lim;
    sv_memacct_t *acct;       /* the compile's account, joined by a helper (NULL: none) */
    int state;                /* under pool.lock */
    sv_status st;
    sv_dfa_t *out;
    sv_error_t err;
    struct sv_part_job *next; /* the queue */
};

static struct {
    pthread_once_t once;
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    sv_part_job_t *head, *tail;
    int helpers;
} pool = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static void run(sv_part_job_t *j) {
    bool joined = j->acct && sv_memacct_join(j->acct);
    sv_error_clear(&j->err);
    j->st = sv_dfa_from_ast(j->ast, &j->lim, &j->out, &j->err);
    if (joined) sv_memacct_leave(j->acct);
}

static void job_free(sv_part_job_t *j) {
    sv_dfa_destroy(j->out);
    sv_arena_destroy(j->arena);
    free(j);
}

static void *helper(void *arg) {
    (void)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (!pool.head) pthread_cond_wait(&pool.work, &pool.lock);
        sv_part_job_t *j = pool.head;
        pool.head = j->next;
        if (!pool.head) pool.tail = NULL;
        j->state = RUNNING;
        pthread_mutex_unlock(&pool.lock);
        run(j);
        pthread_mutex_lock(&pool.lock);
        j->state = DONE;
        pthread_cond_broadcast(&pool.done);
    }
    return NULL;
}

static void start(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN) - 1;
    const char *env = getenv("SIEVE_COMPILE_HELPERS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 0) n = v;
    }
    if (n > SV_PART_JOBS_MAX_HELPERS) n = SV_PART_JOBS_MAX_HELPERS;
    int made = 0;
    for (long i = 0; i < n; i++) {
        pthread_t t;
        pthread_attr_t at;
        if (pthread_attr_init(&at)) break;
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, (size_t)8 << 20);
        bool ok = pthread_create(&t, &at, helper, NULL) == 0;
        pthread_attr_destroy(&at);
        if (!ok) break;
        made++;
    }
    pool.helpers = made;
}

bool sv_part_jobs_enabled(void) {
    pthread_once(&pool.once, start);
    return pool.helpers > 0;
}

/* ---- the copy of a job's language ------------------------------------------------ */

/* Nodes may be shared (a DAG); each is copied once, found again through an
 * open-addressing map from the original to its copy. */
typedef struct {
    sv_arena_t *a;
    const sv_ast_t **from;
    sv_ast_t **to;
    size_t cap, n;
    bool oom;
} copy_t;

static size_t slot_of(const copy_t *c, const sv_ast_t *x) {
    size_t h = ((uintptr_t)x >> 4) * 0x9e3779b97f4a7c15ull;
    size_t i = h & (c->cap - 1);
    while (c->from[i] && c->from[i] != x) i = (i + 1) & (c->cap - 1);
    return i;
}

static bool grow(copy_t *c) {
    size_t cap = c->cap ? 2 * c->cap : 256;
    const sv_ast_t **from = calloc(cap, sizeof *from);
    sv_ast_t **to = calloc(cap, sizeof *to);
    if (!from || !to) {
        free(from);
        free(to);
        return false;
    }
    copy_t n = {.from = from, .to = to, .cap = cap};
    for (size_t i = 0; i < c->cap; i++)
        if (c->from[i]) {
            size_t s = slot_of(&n, c->from[i]);
            from[s] = c->from[i], to[s] = c->to[i];
        }
    free(c->from);
    free(c->to);
    c->from = from, c->to = to, c->cap = cap;
    return true;
}

static sv_ast_t *copy(copy_t *c, const sv_ast_t *x, unsigned depth) {
    if (!x || c->oom) return NULL;
    if (depth > 10000) { /* as deep as nothing the schema compiler builds */
        c->oom = true;
        return NULL;
    }
    if (2 * (c->n + 1) > c->cap && !grow(c)) {
        c->oom = true;
        return NULL;
    }
    size_t s = slot_of(c, x);
    if (c->from[s]) return c->to[s];
    sv_ast_t *y = sv_arena_alloc(c->a, sizeof *y);
    if (!y) {
        c->oom = true;
        return NULL;
    }
    *y = *x; /* ranges and final are never changed after construction: shared */
    if (x->nkids) {
        y->kids = sv_arena_alloc(c->a, x->nkids * sizeof *y->kids);
        if (!y->kids) {
            c->oom = true;
            return NULL;
        }
    }
    if (x->kind == SV_AST_GRAPH && x->nedges) {
        y->edges = sv_arena_alloc(c->a, x->nedges * sizeof *y->edges);
        if (!y->edges) {
            c->oom = true;
            return NULL;
        }
        memcpy(y->edges, x->edges, x->nedges * sizeof *y->edges);
    }
    /* the map takes y before its kids are copied (an AST has no cycles, but
     * the slot is known now) */
    c->from[s] = x, c->to[s] = y, c->n++;
    for (uint32_t i = 0; i < x->nkids; i++)
        if (!(y->kids[i] = copy(c, x->kids[i], depth + 1))) return NULL;
    if (x->kind == SV_AST_GRAPH)
        for (uint32_t i = 0; i < x->nedges; i++)
            if (x->edges[i].label && !(y->edges[i].label = copy(c, x->edges[i].label, depth + 1))) return NULL;
    return y;
}

sv_part_job_t *sv_part_job_submit(const sv_ast_t *ast, const sv_fsm_limits_t *lim) {
    sv_part_job_t *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->arena = sv_arena_create(0);
    copy_t c = {.a = j->arena};
    j->ast = j->arena ? copy(&c, ast, 0) : NULL;
    free(c.from);
    free(c.to);
    if (!j->ast) {
        sv_arena_destroy(j->arena);
        free(j);
        return NULL;
    }
    j->lim = *lim;
    j->acct = sv_memacct_open();
    pthread_mutex_lock(&pool.lock);
    j->state = QUEUED;
    if (pool.tail) pool.tail->next = j;
    else pool.head = j;
    pool.tail = j;
    pthread_cond_signal(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    return j;
}

/* Takes j off the queue if no helper has; whether it did. Under pool.lock. */
static bool unqueue(sv_part_job_t *j) {
    if (j->state != QUEUED) return false;
    sv_part_job_t **pp = &pool.head, *prev = NULL;
    while (*pp != j) prev = *pp, pp = &(*pp)->next;
    *pp = j->next;
    if (pool.tail == j) pool.tail = prev;
    j->state = RUNNING;
    return true;
}

sv_status sv_part_job_wait(sv_part_job_t *j, sv_dfa_t **out, sv_error_t *err) {
    pthread_mutex_lock(&pool.lock);
    bool mine = unqueue(j);
    while (!mine && j->state != DONE) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    if (mine) run(j); /* here, under this thread's account (which the join then leaves as it is) */
    sv_status st = j->st;
    *out = st ? NULL : j->out;
    if (!st) j->out = NULL;
    if (st && err) *err = j->err;
    job_free(j);
    return st;
}

void sv_part_job_help(sv_part_job_t *j) {
    pthread_mutex_lock(&pool.lock);
    bool mine = unqueue(j);
    pthread_mutex_unlock(&pool.lock);
    if (!mine) return;
    run(j);
    pthread_mutex_lock(&pool.lock);
    j->state = DONE;
    pthread_cond_broadcast(&pool.done);
    pthread_mutex_unlock(&pool.lock);
}

void sv_part_job_drop(sv_part_job_t *j) {
    if (!j) return;
    pthread_mutex_lock(&pool.lock);
    bool mine = unqueue(j);
    /* one that runs is waited for: it reads DFAs the caller is about to free */
    while (!mine && j->state != DONE) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    job_free(j);
}
