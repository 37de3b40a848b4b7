/* memacct.h — the memory account of one compilation.
 *
 * A compile (a schema, a regex) opens an account on its thread with its
 * memory budget. What it keeps while it runs is charged where it is
 * allocated: arena chunks (util/arena.c) and automata (fsm/dfa.c
 * sv_dfa_charge), released when they are freed. The stages that build big
 * transient tables (the NFA, subset construction, products, minimization)
 * check their own size against what is left (sv_memacct_fits). So the
 * budget bounds the whole compile, not each structure alone: a schema
 * whose hundreds of intermediate automata each fit used to grow without
 * bound.
 *
 * An account lives on the stack of the function that opened it. Charges
 * remember the account's id, and a release counts only on the thread whose
 * current account has that id, so memory freed after the compile ended, or
 * on another thread (the result, a cache entry), releases nothing. */
#ifndef SV_UTIL_MEMACCT_H
#define SV_UTIL_MEMACCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Memory shared by every compile that runs with it (the server's compile
 * pool: all compiles in flight together). A charge must fit both the
 * compile's own limit and what the pool has left. */
typedef struct sv_memacct_pool {
    _Atomic size_t used;
    size_t limit; /* 0: no limit */
} sv_memacct_pool_t;

/* An account may be shared by threads that joined it (sv_memacct_join: a
 * compile's helpers, fsm/part_jobs.c), so what changes is atomic. */
typedef struct sv_memacct {
    uint64_t id;
    size_t limit;       /* 0: no limit */
    _Atomic size_t used, peak;
    _Atomic bool refused;    /* a charge was refused: the budget was reached */
    _Atomic bool pool_short; /* a charge or a fit failed on the shared pool, not on this limit */
    sv_memacct_pool_t *pool; /* the thread's pool when the account opened, or NULL */
    const _Atomic bool *cancel; /* the thread's cancel flag when the account opened, or NULL */
} sv_memacct_t;

/* The thread's compile settings, for the compiles it runs from now on (the
 * compile pool's workers set them per job): the shared pool (NULL: none)
 * and a cancel flag (NULL: none) that the compile's time checks also read
 * (sv_memacct_cancelled), so a compile nobody waits for any more stops
 * within the same bound as a timeout. */
void sv_memacct_thread_setup(sv_memacct_pool_t *pool, const _Atomic bool *cancel);
/* Whether the thread's cancel flag is raised. */
bool sv_memacct_cancelled(void);
/* A failed compile's final status, decided by its account (a): a budget
 * error (or a failed allocation) while the shared pool was what ran short
 * becomes SV_ERR_CAPACITY, since the server is busy rather than the
 * constraint too big; any failure after the cancel flag rose becomes
 * SV_ERR_CANCELLED. err's message says so. */
sv_status sv_memacct_outcome(sv_status st, const sv_memacct_t *a, sv_error_t *err);
/* Whether the open account was refused by the shared pool (the server is
 * busy), not by its own limit: a compile then fails at once, rather than
 * retry a narrower language that would depend on the load. */
bool sv_memacct_pool_short(void);

/* Opens a on this thread, unless an account is open already (a regex
 * compiled inside a schema compile charges the schema's): returns whether
 * it opened, and only then must sv_memacct_end be called. */
bool sv_memacct_begin(sv_memacct_t *a, size_t limit);
/* The account's limit for a compile budget of max_memory whose input is
 * input_len bytes: the budget less what the account does not see, so that
 * the process stays within the budget (the parsed input, about 16 bytes a
 * byte of JSON, and 1/32 of the budget for small scratch arrays and the
 * allocator's own overhead; tests/reliability/compile_bounds.py). */
size_t sv_memacct_limit_for(size_t max_memory, size_t input_len);
void sv_memacct_end(sv_memacct_t *a);
/* The thread's open account (NULL when none). */
sv_memacct_t *sv_memacct_open(void);
/* Makes a, opened on another thread that outlives the join, this thread's
 * open account too, with its pool and cancel flag: what this thread charges
 * counts against a's limit, at once with what its owner charges. False, and
 * nothing changes, when this thread has an account open already. Undone by
 * sv_memacct_leave. */
bool sv_memacct_join(sv_memacct_t *a);
void sv_memacct_leave(sv_memacct_t *a);

/* Charges n bytes to the thread's open account: *id gets its id (0 when no
 * account is open). False, with nothing charged, when n would take the
 * account past its limit. */
bool sv_memacct_charge(size_t n, uint64_t *id);
/* Releases n bytes charged to account id, if that is this thread's open one. */
void sv_memacct_release(uint64_t id, size_t n);
/* The id of the thread's open account (0 when none). */
uint64_t sv_memacct_current(void);
/* Whether a structure of `bytes` (not charged: transient tables that a
 * stage sizes before it builds them) fits under a limit of its own, minus
 * what the open account holds, and under what the shared pool has left. */
bool sv_memacct_fits(size_t bytes, size_t limit);
/* Whether the open account refused a charge (so an allocation that failed
 * was the budget, not the system). */
bool sv_memacct_refused(void);
/* The open account's peak, in bytes (0 when none). */
size_t sv_memacct_peak(void);

#endif
