/* memacct.h — the memory account of one compilation.
 *
 * A compile (a schema, a regex) opens an account on its thread with its
 * memory budget. What it keeps while it runs is charged where it is
 * allocated: arena chunks (src/util/arena.c) and automata (fsm/dfa.c
 * sv_dfa_charge), released when they are freed. The stages that build big
 * transient tables (the NFA, subset construction, products, minimization)
 * check their own size against what is left (sv_memacct_room). So the
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

typedef struct sv_memacct {
    uint64_t id;
    size_t limit;       /* 0: no limit */
    size_t used, peak;
    bool refused;       /* a charge was refused: the budget was reached */
} sv_memacct_t;

/* Opens a on this thread, unless an account is open already (a regex
 * compiled inside a schema compile charges the schema's): returns whether
 * it opened, and only then must sv_memacct_end be called. */
bool sv_memacct_begin(sv_memacct_t *a, size_t limit);
void sv_memacct_end(sv_memacct_t *a);

/* Charges n bytes to the thread's open account: *id gets its id (0 when no
 * account is open). False, with nothing charged, when n would take the
 * account past its limit. */
bool sv_memacct_charge(size_t n, uint64_t *id);
/* Releases n bytes charged to account id, if that is this thread's open one. */
void sv_memacct_release(uint64_t id, size_t n);
/* What a structure may still take under a limit of its own: limit minus
 * what the open account holds (limit itself when none is open). */
size_t sv_memacct_room(size_t limit);
/* Whether the open account refused a charge (so an allocation that failed
 * was the budget, not the system). */
bool sv_memacct_refused(void);
/* The open account's peak, in bytes (0 when none). */
size_t sv_memacct_peak(void);

#endif
