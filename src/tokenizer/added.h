/* added.h — finding added tokens (<|eot_id|>, <tool_call>, ...) in text.
 *
 * Hugging Face splits added tokens out of the text before anything else
 * runs: leftmost-longest matching (an Aho-Corasick automaton there, a byte
 * trie walked from each position here), then the tokens' single_word,
 * lstrip and rstrip options. Tokens marked "normalized" are matched on the
 * normalized text, the others on the raw text, so an encoder keeps two
 * matchers. */
#ifndef SV_TOKENIZER_ADDED_H
#define SV_TOKENIZER_ADDED_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "src/tokenizer/internal/vocab_internal.h"

typedef struct sv_added sv_added_t;

/* Builds a matcher over the added tokens whose `normalized` flag equals
 * `normalized`. v is borrowed. */
sv_status sv_added_create(const sv_vocab_t *v, bool normalized, sv_added_t **out, sv_error_t *err);
void sv_added_destroy(sv_added_t *a);
/* True when the matcher has no tokens at all. */
bool sv_added_empty(const sv_added_t *a);

/* Finds the next added token in s[from..n): on success returns true and
 * sets [*start, *end) (whitespace taken by lstrip/rstrip included; *start
 * never goes below `floor`, the end of the previous token) and *id.
 * With skip_special, special tokens are not matched (Hugging Face's
 * encode_special_tokens). md is the caller's (per-thread) match data, used
 * for single_word checks; the matcher itself is read-only. */
bool sv_added_next(const sv_added_t *a, pcre2_match_data *md, const uint8_t *s, size_t n,
                   size_t from, size_t floor, bool skip_special, size_t *start, size_t *end,
                   int32_t *id);

#endif
