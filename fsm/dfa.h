/* dfa.h — minimized, compressed DFAs over bytes: the form every constraint
 * takes before the token index sees it.
 *
 * A DFA here is always minimal, trimmed (every state can reach acceptance,
 * so "dead" is implicit: SV_DFA_DEAD) and numbered in breadth-first order
 * from the start state (state 0), which makes two DFAs of the same language
 * identical field by field. Bytes are grouped into classes: two bytes share a
 * class iff every state sends them to the same place.
 *
 * Compression (SGLang's compressed FSM): a non-accepting state with exactly
 * one live outgoing byte is "forced"; sv_dfa_forced returns the whole chain of
 * bytes that must follow a state, so jump-forward decoding can append them
 * without sampling. sv_dfa_distance is the fewest bytes from a state to
 * acceptance, for budget-aware completion. */
#ifndef SV_FSM_DFA_H
#define SV_FSM_DFA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "util/rng.h"

#define SV_DFA_DEAD (-1)

/* Budgets for everything a user's constraint can make grow. */
typedef struct sv_fsm_limits {
    uint32_t max_nfa_states;  /* Thompson NFA states */
    uint32_t max_dfa_states;  /* states during subset construction */
    size_t max_memory;        /* bytes held by the construction at once */
    uint64_t max_time_us;     /* wall time for one compilation; 0 = none */
    uint64_t time_budget_us;  /* for messages: the whole compilation's budget when
                                 max_time_us is what is left of it (0: max_time_us) */
} sv_fsm_limits_t;

/* Defaults: 2M NFA states, 200k DFA states, 256 MiB, 10 s. */
void sv_fsm_limits_default(sv_fsm_limits_t *lim);

typedef struct sv_dfa sv_dfa_t;

void sv_dfa_destroy(sv_dfa_t *d);

uint32_t sv_dfa_num_states(const sv_dfa_t *d);
/* Bytes the DFA holds (approximately: its tables). */
size_t sv_dfa_memory(const sv_dfa_t *d);
uint32_t sv_dfa_num_classes(const sv_dfa_t *d);
/* Byte -> class map (256 entries), borrowed from d. */
const uint8_t *sv_dfa_byte_classes(const sv_dfa_t *d);
static inline int32_t sv_dfa_start(const sv_dfa_t *d) { (void)d; return 0; }
/* Next state after byte b from state s (s != SV_DFA_DEAD), or SV_DFA_DEAD. */
int32_t sv_dfa_next(const sv_dfa_t *d, int32_t s, uint8_t b);
bool sv_dfa_is_accepting(const sv_dfa_t *d, int32_t s);
/* Runs the whole string from the start; true iff it is accepted. */
bool sv_dfa_matches(const sv_dfa_t *d, const uint8_t *s, size_t n);
/* The length of the longest prefix of s that some accepted string starts
 * with: n when the whole of s is such a prefix (accepted or not). */
size_t sv_dfa_viable_prefix(const sv_dfa_t *d, const uint8_t *s, size_t n);

/* The forced bytes after state s (length 0 when s is not forced); the
 * returned pointer is borrowed from d. */
const uint8_t *sv_dfa_forced(const sv_dfa_t *d, int32_t s, uint32_t *len);
uint32_t sv_dfa_num_forced_states(const sv_dfa_t *d);
/* Parts of a program (fsm/program.c); 1 for a DFA without calls. */
uint32_t sv_dfa_num_parts(const sv_dfa_t *d);
/* Fewest bytes from s to an accepting state. */
uint32_t sv_dfa_distance(const sv_dfa_t *d, int32_t s);

/* Writes a random accepted string into buf (cap bytes) and its length into
 * *len. Transitions are chosen uniformly among live byte classes, then a
 * byte within the class; at an accepting state the walk stops with
 * probability 1/4; past soft_len bytes it only takes transitions that bring
 * acceptance nearer, so the result is at most soft_len + max distance long.
 * SV_ERR_BUDGET if the string would not fit in cap. */
sv_status sv_dfa_sample(const sv_dfa_t *d, sv_rng_t *rng, uint32_t soft_len, uint8_t *buf, size_t cap,
                        size_t *len);

/* Boolean operations by product construction; the result is canonical.
 * SV_ERR_EMPTY when the result matches no string. lim may be NULL. */
typedef enum {
    SV_DFA_AND,   /* L(a) ∩ L(b) */
    SV_DFA_OR,    /* L(a) ∪ L(b) */
    SV_DFA_DIFF,  /* L(a) \ L(b): complement of b within the universe a */
    SV_DFA_XOR,   /* in exactly one of them */
} sv_dfa_op;
sv_status sv_dfa_product(const sv_dfa_t *a, const sv_dfa_t *b, sv_dfa_op op, const sv_fsm_limits_t *lim,
                         sv_dfa_t **out, sv_error_t *err);

/* The process-wide memo of compiled ASTs (dfa_cache.c): a byte budget
 * (default 64 MiB; 0 turns it off and empties it), and its counters. */
void sv_dfa_cache_configure(size_t max_bytes);
void sv_dfa_cache_stats(uint64_t *hits, uint64_t *misses, size_t *bytes);
/* Drops every entry, keeping the size (a benchmark's cold compiles). */
void sv_dfa_cache_empty(void);

/* Structural equality (same language, since both are minimal and BFS-numbered). */
bool sv_dfa_equal(const sv_dfa_t *a, const sv_dfa_t *b);

/* A 64-bit hash of the tables, computed once and kept in the DFA: equal
 * DFAs (sv_dfa_equal) have equal fingerprints, so unequal fingerprints
 * prove unequal DFAs without comparing them (dfa_cache.c). */
uint64_t sv_dfa_fingerprint(const sv_dfa_t *d);

#endif
