/* free_text.h — free text that stops at given strings, as DFAs: what
 * structural tags (fsm/structural_tag.c) and framed schemas (fsm/schema.c,
 * sv_schema_frame_t) are built from.
 *
 *   P(S)      = Σ* \ Σ*SΣ*        text that contains none of the strings S
 *   First(k)  = P(S)·c ∩ Σ*k      text of P(S) up to and including the first
 *                                occurrence of k (c: k's last code point)
 *
 * Σ is any code point, as UTF-8. Both by product construction
 * (sv_dfa_product); the result is a new DFA the caller frees. */
#ifndef SV_FSM_FREE_TEXT_H
#define SV_FSM_FREE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "fsm/dfa.h"
#include "util/error.h"

/* P of the n strings s[i][0..len[i]) (n 0: Σ*). */
sv_status sv_text_avoiding(const char *const *s, const size_t *len, uint32_t n, const sv_fsm_limits_t *lim,
                           sv_dfa_t **out, sv_error_t *err);
/* First(k) over p, a P(S) whose S holds k. */
sv_status sv_text_until(const sv_dfa_t *p, const char *k, size_t len, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                        sv_error_t *err);

#endif
