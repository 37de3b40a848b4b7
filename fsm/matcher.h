/* matcher.h — one sequence's walk through a constraint, token by token.
 *
 * A matcher holds the DFA state, the trailing whitespace run (for the cap of
 * flexible mode), the token budget and the history that rollback needs. It
 * answers the vocabulary mask of its state, advances by a token, rolls back,
 * and proposes jump-forward tokens for forced paths. It is small and
 * copyable (sv_matcher_clone) for n > 1 and preemption. One matcher is used
 * by one thread at a time; the token index behind it may be shared.
 *
 * Budget-aware completion (docs/architecture.md): with r tokens left, a token is
 * allowed only if the state it leads to can still reach acceptance in r - 1
 * tokens. The distance used is U(x), an upper bound on the tokens needed
 * from x that is consistent (from any non-accepting x some allowed token
 * leads to a state y with U(y) <= U(x) - 1), so a walk that obeys the rule
 * always ends accepting within its budget:
 *   - without a tokenizer, U(x) is the DFA distance in bytes (needs every
 *     byte to be a token of its own: sv_token_set_has_all_bytes);
 *   - with one, U(x) = min(bytes(x), 1 + U(δ(x, e))), where e is the first
 *     token of the tokenizer's encoding of x's shortest completion (the
 *     completion is the same string along its own path, so the plan it gives
 *     is followed token by token); this is the token count of that encoding
 *     in the usual case and never more than the byte distance.
 * The up-front fit check is sv_matcher_min_tokens() <= max_tokens.
 *
 * Jump-forward: when the state has a forced path, sv_matcher_forced returns
 * its tokens: the forced bytes encoded together with the previous token's
 * bytes (when the tokenizer would merge across the boundary, the previous
 * token is rolled back and re-emitted as part of the forced tokens), with the
 * last pre-tokenizer piece of the forced text held back when free text
 * follows, so that the model can glue it to what comes next as the
 * tokenizer would. */
#ifndef SV_FSM_MATCHER_H
#define SV_FSM_MATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "token_index.h"

/* The tokenizer, as the matcher needs it. encode writes the ids of s[0..n)
 * (no special tokens, no BOS) into ids (at most cap) and returns how many, or
 * -1 on failure (cap too small, text it refuses). last_piece, optional,
 * returns the byte offset where the last pre-tokenizer piece of s begins. */
typedef struct sv_tokenizer_iface {
    void *ctx;
    int (*encode)(void *ctx, const uint8_t *s, size_t n, int32_t *ids, int cap);
    size_t (*last_piece)(void *ctx, const uint8_t *s, size_t n);
} sv_tokenizer_iface_t;

typedef struct sv_matcher sv_matcher_t;

/* ix and tok (which may be NULL: no jump-forward, byte distances) are
 * borrowed and must outlive the matcher. max_tokens <= 0 means no budget.
 * SV_ERR_BUDGET when the constraint cannot fit in max_tokens (the message
 * says how many it needs); SV_ERR_ARG when a budget is asked for but neither
 * a tokenizer nor single-byte tokens can bound the distance. */
sv_status sv_matcher_create(sv_token_index_t *ix, const sv_tokenizer_iface_t *tok, int64_t max_tokens,
                            sv_matcher_t **out, sv_error_t *err);
void sv_matcher_destroy(sv_matcher_t *m);
sv_status sv_matcher_clone(const sv_matcher_t *m, sv_matcher_t **out, sv_error_t *err);

/* The mask of the current state under the budget, borrowed until the next
 * call on m (or from the index's memo). */
sv_status sv_matcher_mask(sv_matcher_t *m, const uint32_t **mask, sv_error_t *err);
/* Whether mask, from the last sv_matcher_mask call, is the index's memo for
 * the current state (no budget cut); then key gets a name for it that no
 * other mask of the process has: the index's serial, the state and the
 * whitespace run. False for a mask the matcher computed for this call. */
bool sv_matcher_mask_key(const sv_matcher_t *m, const uint32_t *mask, uint64_t key[2]);
/* Advances by token id if it is allowed (by the same rule as the mask);
 * false leaves the matcher unchanged. An EOG token is allowed in accepting
 * states and ends the walk (sv_matcher_is_finished). */
bool sv_matcher_accept(sv_matcher_t *m, int32_t id);
/* Undoes the last n accepted tokens (n <= sv_matcher_num_tokens). */
sv_status sv_matcher_rollback(sv_matcher_t *m, uint32_t n, sv_error_t *err);

bool sv_matcher_is_accepting(const sv_matcher_t *m);
/* True after an EOG token, or when the state accepts and has no way on. */
bool sv_matcher_is_finished(const sv_matcher_t *m);
int32_t sv_matcher_state(const sv_matcher_t *m);
/* The trailing whitespace run (0 without a cap): with sv_matcher_state, the
 * key of the current mask (for mask prefetch, src/engine/prefetch.h). */
uint32_t sv_matcher_ws_run(const sv_matcher_t *m);
uint32_t sv_matcher_num_tokens(const sv_matcher_t *m);
/* Tokens left in the budget (INT64_MAX without one). */
int64_t sv_matcher_tokens_left(const sv_matcher_t *m);
/* U(start): the fewest tokens the budget rule needs (0 when the empty
 * string is accepted). */
uint32_t sv_matcher_min_tokens(sv_matcher_t *m);

/* Jump-forward tokens for the current state: *n tokens in ids (cap at
 * least 1), to be accepted in order after rolling back *rollback (0 or 1)
 * tokens. *n == 0 when the state is not forced, when nothing is left after
 * holding back the last piece, or when the budget is too tight to take the
 * tokenizer's encoding of the forced text. Needs a tokenizer. */
sv_status sv_matcher_forced(sv_matcher_t *m, int32_t *ids, uint32_t cap, uint32_t *n, uint32_t *rollback,
                            sv_error_t *err);

#endif
