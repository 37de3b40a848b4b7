/* token_index.h — from DFA states to vocabulary masks.
 *
 * The DFA speaks bytes, the model speaks tokens. A token set is a
 * vocabulary as the index sees it: each id's exact bytes and its kind. It is
 * built once per tokenizer (a trie of the token byte strings laid out in
 * depth-first order, so a walk is a linear scan that skips dead subtrees)
 * and is immutable and shareable between threads.
 *
 * A token index pairs one DFA with one token set. The allowed set of a state
 * is every normal token whose bytes the DFA walks from that state without
 * dying, plus the end-of-generation tokens when the state accepts. Masks are
 * computed lazily on first request and memoized per (state, whitespace
 * bucket); equal masks are stored once (hash-consed). A mask is a bitset of
 * sv_token_set_mask_words() 32-bit words, bit (id & 31) of word (id >> 5);
 * ids at or beyond the token set's size (padding rows of the logits) are
 * always 0.
 *
 * Whitespace cap: with ws_cap > 0 (for DFAs built in `flexible` whitespace
 * mode), no run of JSON whitespace bytes (space, tab, LF, CR) in the output
 * may exceed ws_cap bytes. The cap is a runtime counter, not DFA states: the
 * matcher tracks the current trailing run, and masks are keyed by (state,
 * run). Runs inside string content count too.
 *
 * Thread safety: sv_token_index_mask may be called from several threads at
 * once (reads are lock-free once a mask is known; computing one takes the
 * index's lock). */
#ifndef SV_FSM_TOKEN_INDEX_H
#define SV_FSM_TOKEN_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfa.h"

/* Token kinds. */
enum {
    SV_TOKKIND_NORMAL = 0, /* text: allowed wherever the DFA walks its bytes */
    SV_TOKKIND_NEVER = 1,  /* special/control/unused/empty: never in constrained text */
    SV_TOKKIND_EOG = 2,    /* ends generation (EOS, end of turn): allowed exactly in accepting states */
};

#define SV_TOKEN_SET_MAX_IDS (1u << 24)
#define SV_TOKEN_SET_MAX_BYTES 4096u

typedef struct sv_token_set sv_token_set_t;

/* Builds a token set of n ids. bytes[i]/lens[i] are token i's bytes (copied;
 * NULL or length 0 makes the token NEVER); kinds[i] is an SV_TOKKIND_*.
 * mask_bits is the logits row length (>= n; padded vocabularies have more
 * rows than tokens). */
sv_status sv_token_set_create(uint32_t n, uint32_t mask_bits, const uint8_t *const *bytes, const uint32_t *lens,
                              const uint8_t *kinds, sv_token_set_t **out, sv_error_t *err);
void sv_token_set_destroy(sv_token_set_t *ts);

uint32_t sv_token_set_size(const sv_token_set_t *ts);
uint32_t sv_token_set_mask_bits(const sv_token_set_t *ts);
uint32_t sv_token_set_mask_words(const sv_token_set_t *ts);
/* Token bytes (borrowed) or NULL with *len = 0 for a NEVER/EOG token. */
const uint8_t *sv_token_set_bytes(const sv_token_set_t *ts, int32_t id, uint32_t *len);
uint8_t sv_token_set_kind(const sv_token_set_t *ts, int32_t id);
/* True when every one of the 256 bytes is a NORMAL token of its own: then
 * any byte string can be emitted, one token per byte, and a distance in
 * bytes bounds a distance in tokens. */
bool sv_token_set_has_all_bytes(const sv_token_set_t *ts);
/* Trie nodes (for statistics). */
uint32_t sv_token_set_num_nodes(const sv_token_set_t *ts);

typedef struct sv_token_index sv_token_index_t;

typedef struct sv_token_index_opts {
    uint32_t ws_cap;          /* 0: no cap; else the longest whitespace run (flexible mode) */
    size_t max_mask_bytes;    /* memory for memoized masks (default 256 MiB); beyond it,
                                 sv_token_index_mask answers SV_ERR_BUDGET and callers
                                 compute with sv_token_index_fill */
} sv_token_index_opts_t;

void sv_token_index_opts_default(sv_token_index_opts_t *o);

/* Pairs dfa with ts. On success the index owns dfa (freed by
 * sv_token_index_destroy); ts is borrowed and must outlive it. */
sv_status sv_token_index_create(sv_dfa_t *dfa, const sv_token_set_t *ts, const sv_token_index_opts_t *o,
                                sv_token_index_t **out, sv_error_t *err);
void sv_token_index_destroy(sv_token_index_t *ix);

const sv_dfa_t *sv_token_index_dfa(const sv_token_index_t *ix);
const sv_token_set_t *sv_token_index_tokens(const sv_token_index_t *ix);
uint32_t sv_token_index_ws_cap(const sv_token_index_t *ix);

/* The memoized mask of (state, ws_run) (ws_run is clamped to ws_cap; pass 0
 * without a cap). *mask is borrowed for the index's lifetime. *max_dist, if
 * non-NULL, gets the largest DFA distance (bytes to acceptance) among the
 * states the allowed normal tokens lead to (0 when none). SV_ERR_BUDGET when
 * the memo is full and the mask is new. state must be live. */
sv_status sv_token_index_mask(sv_token_index_t *ix, int32_t state, uint32_t ws_run, const uint32_t **mask,
                              uint32_t *max_dist);

/* True when the mask of (state, ws_run) is memoized, so that
 * sv_token_index_mask answers it without a walk. Lock-free; thread-safe. */
bool sv_token_index_mask_known(const sv_token_index_t *ix, int32_t state, uint32_t ws_run);

/* Computes the mask of (state, ws_run) into dst (mask_words words) without
 * memoizing it. With a filter, a normal token is kept only when
 * filter(ctx, next_state) is true (the matcher's budget rule). Returns the
 * number of allowed tokens. */
typedef bool (*sv_token_filter_fn)(void *ctx, int32_t next_state);
uint32_t sv_token_index_fill(const sv_token_index_t *ix, int32_t state, uint32_t ws_run, sv_token_filter_fn filter,
                             void *ctx, uint32_t *dst);

/* The state after token id from state s: SV_DFA_DEAD when the token's bytes
 * do not walk (and for NEVER/EOG tokens). Ignores the whitespace cap. */
int32_t sv_token_index_next(const sv_token_index_t *ix, int32_t s, int32_t id);

/* The whitespace run after emitting token id with run ws_run before it, and
 * whether the token respects the cap. */
bool sv_token_index_ws_after(const sv_token_index_t *ix, uint32_t ws_run, int32_t id, uint32_t *ws_after);

/* States. For a plain DFA they are its states. For a program (a DFA with
 * call edges, fsm/program.c) they are configurations: a DFA state and a
 * stack of return states, numbered as sv_token_index_next meets them
 * (state 0 is the start), so the count grows; every function here and
 * above takes them. */
uint32_t sv_token_index_num_states(const sv_token_index_t *ix);
/* A number no other index of this process has had or will have (from 1):
 * with a state and a whitespace run it names a mask for good, e.g. in a
 * device's mask table (src/engine/engine.c). */
uint64_t sv_token_index_serial(const sv_token_index_t *ix);
/* The whole output may end in state v (EOG tokens are allowed). */
bool sv_token_index_accepting(const sv_token_index_t *ix, int32_t v);
/* Accepting, and nothing may follow. */
bool sv_token_index_final(const sv_token_index_t *ix, int32_t v);
/* Fewest bytes from v to the end. */
uint32_t sv_token_index_distance(const sv_token_index_t *ix, int32_t v);
/* Whether sv_token_index_distance bounds the tokens still needed, from any
 * configuration: every byte of some shortest completion is a token of its
 * own (always so with sv_token_set_has_all_bytes; otherwise checked over
 * the automaton once, on first call). */
bool sv_token_index_bytes_bound(const sv_token_index_t *ix);
/* A shortest completion of v (sv_token_index_distance bytes) into buf;
 * returns its length, or UINT32_MAX when it does not fit in cap. */
uint32_t sv_token_index_completion(const sv_token_index_t *ix, int32_t v, uint8_t *buf, uint32_t cap);
/* The bytes forced after v (across part boundaries for a program), at most
 * cap, into buf; returns how many. *ends: they lead to the end of the
 * output (accepting, nothing may follow). */
uint32_t sv_token_index_forced(const sv_token_index_t *ix, int32_t v, uint8_t *buf, uint32_t cap, bool *ends);

/* Notes: 32-bit values, one per (kind, state, ws_run), that callers derive
 * from the index and something of their own named by owner, kept here so
 * that every caller of the index with that owner shares them (fsm/matcher.c
 * keeps its tokens-to-end per state, kind SV_NOTE_U, and the largest of
 * them among a mask's successors, kind SV_NOTE_MAX_U, for its tokenizer).
 * A note is set once: sv_token_index_note_set stores val only where no
 * note is, and returns the note that is there in *stored. False from
 * either: no note (get), or none could be kept (set: another owner has the
 * table, memory, or the index's max_mask_bytes, since a note is only a
 * memo). Thread-safe. */
enum { SV_NOTE_U = 0, SV_NOTE_MAX_U = 1 };
bool sv_token_index_note_get(const sv_token_index_t *ix, const void *owner, int kind, int32_t state,
                             uint32_t ws_run, uint32_t *val);
bool sv_token_index_note_set(sv_token_index_t *ix, const void *owner, int kind, int32_t state, uint32_t ws_run,
                             uint32_t val, uint32_t *stored);

/* A filtered mask of (state, ws_run), as a caller's filter with parameter
 * `limit` left it (the matcher's budget rule: tokens whose successors need
 * at most limit more tokens), noted the same way: set once, for one owner,
 * the mask itself kept in the set of distinct masks (max_mask_bytes bounds
 * it). get copies it into dst (mask words) and returns false when there is
 * none. Thread-safe. */
bool sv_token_index_filtered_get(const sv_token_index_t *ix, const void *owner, int32_t state, uint32_t ws_run,
                                 uint32_t limit, uint32_t *dst);
void sv_token_index_filtered_put(sv_token_index_t *ix, const void *owner, int32_t state, uint32_t ws_run,
                                 uint32_t limit, const uint32_t *mask);

/* Statistics: distinct masks stored, (state, bucket) masks known, bytes held. */
typedef struct sv_token_index_stats {
    uint32_t distinct_masks;
    uint32_t known_entries;
    size_t mask_bytes;
    uint64_t walks;           /* trie walks done (memo misses + fills) */
} sv_token_index_stats_t;
void sv_token_index_stats(sv_token_index_t *ix, sv_token_index_stats_t *st);

#endif
