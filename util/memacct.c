#include "memacct.h"

#include <stdatomic.h>

static _Thread_local sv_memacct_t *cur;
static _Thread_local sv_memacct_pool_t *thread_pool;
static _Thread_local const _Atomic bool *thread_cancel;
static _Atomic uint64_t next_id = 1;

void sv_memacct_thread_setup(sv_memacct_pool_t *pool, const _Atomic bool *cancel) {
    thread_pool = pool;
    thread_cancel = cancel;
}

bool sv_memacct_cancelled(void) { return thread_cancel && atomic_load_explicit(thread_cancel, memory_order_relaxed); }

bool sv_memacct_pool_short(void) { return cur && cur->pool_short; }

bool sv_memacct_begin(sv_memacct_t *a, size_t limit) {
    if (cur) return false;
    a->id = atomic_fetch_add(&next_id, 1);
    a->limit = limit;
    atomic_init(&a->used, 0);
    atomic_init(&a->peak, 0);
    atomic_init(&a->refused, false);
    atomic_init(&a->pool_short, false);
    a->pool = thread_pool;
    a->cancel = thread_cancel;
    cur = a;
    return true;
}

void sv_memacct_end(sv_memacct_t *a) {
    if (cur != a) return;
    /* What is still charged (the result, memory freed after the end) leaves
     * the shared pool with the account. */
    size_t used = atomic_load(&a->used);
    if (a->pool && used) atomic_fetch_sub(&a->pool->used, used);
    cur = NULL;
}

sv_memacct_t *sv_memacct_open(void) { return cur; }

bool sv_memacct_join(sv_memacct_t *a) {
    if (cur) return false;
    cur = a;
    thread_pool = a->pool;
    thread_cancel = a->cancel;
    return true;
}

void sv_memacct_leave(sv_memacct_t *a) {
    if (cur != a) return;
    cur = NULL;
    thread_pool = NULL;
    thread_cancel = NULL;
}

uint64_t sv_memacct_current(void) { return cur ? cur->id : 0; }

bool sv_memacct_charge(size_t n, uint64_t *id) {
    *id = 0;
    if (!cur) return true;
    /* reserve n against the limit first (threads that joined the account
     * charge at once with its owner) */
    size_t was = atomic_load_explicit(&cur->used, memory_order_relaxed);
    do {
        if (cur->limit && (n > cur->limit || was > cur->limit - n)) {
            cur->refused = true;
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(&cur->used, &was, was + n, memory_order_relaxed,
                                                    memory_order_relaxed));
    sv_memacct_pool_t *p = cur->pool;
    if (p && p->limit) {
        size_t pw = atomic_fetch_add(&p->used, n);
        if (pw + n > p->limit || pw + n < pw) {
            atomic_fetch_sub(&p->used, n);
            atomic_fetch_sub_explicit(&cur->used, n, memory_order_relaxed);
            cur->refused = cur->pool_short = true;
            return false;
        }
    } else if (p) {
        atomic_fetch_add(&p->used, n);
    }
    size_t now = was + n, pk = atomic_load_explicit(&cur->peak, memory_order_relaxed);
    while (now > pk && !atomic_compare_exchange_weak_explicit(&cur->peak, &pk, now, memory_order_relaxed,
                                                              memory_order_relaxed)) {
    }
    *id = cur->id;
    return true;
}

void sv_memacct_release(uint64_t id, size_t n) {
    if (!id || !cur || cur->id != id) return;
    size_t was = atomic_load_explicit(&cur->used, memory_order_relaxed);
    size_t take;
    do take = n > was ? was : n;
    while (!atomic_compare_exchange_weak_explicit(&cur->used, &was, was - take, memory_order_relaxed,
                                                  memory_order_relaxed));
    if (cur->pool) atomic_fetch_sub(&cur->pool->used, take);
}

bool sv_memacct_fits(size_t bytes, size_t limit) {
    if (!cur) return bytes <= limit;
    if (cur->limit && cur->limit < limit) limit = cur->limit; /* the account keeps its reserve */
    size_t used = atomic_load_explicit(&cur->used, memory_order_relaxed);
    if (used > limit || bytes > limit - used) return false;
    sv_memacct_pool_t *p = cur->pool;
    if (p && p->limit) {
        size_t pused = atomic_load(&p->used);
        if (pused > p->limit || bytes > p->limit - pused) {
            cur->pool_short = true; /* it fits its own budget: the pool is what is short */
            return false;
        }
    }
    return true;
}

bool sv_memacct_refused(void) { return cur && cur->refused; }

size_t sv_memacct_peak(void) { return cur ? cur->peak : 0; }

sv_status sv_memacct_outcome(sv_status st, const sv_memacct_t *a, sv_error_t *err) {
    if (st == SV_OK) return st;
    if (sv_memacct_cancelled()) return sv_error_set(err, SV_ERR_CANCELLED, -1, "the compile was cancelled");
    if ((st == SV_ERR_BUDGET || st == SV_ERR_NOMEM) && a->pool_short && a->pool)
        return sv_error_set(err, SV_ERR_CAPACITY, -1,
                            "the memory for compiles in flight (%zu bytes, shared by all of them) is in use; retry later",
                            a->pool->limit);
    return st;
}

size_t sv_memacct_limit_for(size_t max_memory, size_t input_len) {
    size_t reserve = max_memory / 32 + (input_len < SIZE_MAX / 16 ? input_len * 16 : SIZE_MAX / 2);
    return reserve < max_memory / 2 ? max_memory - reserve : max_memory / 2;
}
