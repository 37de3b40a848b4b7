/* detok.h — the streaming detokenizer: token ids in, complete UTF-8 out.
 *
 * Byte-level tokens often end inside a character (an emoji is four bytes,
 * and a token may hold two of them and half of a third). The detokenizer
 * keeps the incomplete tail of the bytes it has seen and emits only whole
 * characters, so every chunk it hands out is valid UTF-8 on its own (an SSE
 * delta, a JSON string).
 *
 * Ill-formed bytes (a model can sample a lone continuation byte) become
 * U+FFFD, one per maximal ill-formed subpart (Unicode 3.9, U+FFFD
 * substitution; what Rust's from_utf8_lossy and so Hugging Face's decode
 * do), so the concatenation of all chunks equals a lossy decode of all the
 * bytes at once. A tail that is still incomplete at the end of the stream
 * becomes one U+FFFD in sv_detok_flush.
 *
 * A detokenizer is per stream (one sequence); it does not allocate after
 * creation. */
#ifndef SV_TOKENIZER_DETOK_H
#define SV_TOKENIZER_DETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vocab.h"

typedef struct sv_detok sv_detok_t;

enum {
    SV_DETOK_SKIP_SPECIAL = 1u << 0,  /* special tokens emit nothing */
};

/* v is borrowed and must outlive the detokenizer. Free with
 * sv_detok_destroy. */
sv_status sv_detok_create(const sv_vocab_t *v, uint32_t flags, sv_detok_t **out, sv_error_t *err);
void sv_detok_destroy(sv_detok_t *d);
/* Forgets the held tail, for a new stream. */
void sv_detok_reset(sv_detok_t *d);

/* Feeds one token. *text / *len are the newly complete text (possibly
 * empty), borrowed until the next call on d. An unknown id is SV_ERR_ARG
 * and changes nothing. */
sv_status sv_detok_push(sv_detok_t *d, int32_t id, const char **text, size_t *len, sv_error_t *err);
/* Feeds raw bytes (for text that did not come from tokens, such as forced
 * bytes); n is at most sv_vocab_max_token_bytes, or SV_ERR_ARG. */
sv_status sv_detok_push_bytes(sv_detok_t *d, const uint8_t *bytes, size_t n, const char **text,
                              size_t *len, sv_error_t *err);
/* Ends the stream: emits U+FFFD for a held incomplete tail, then resets. */
void sv_detok_flush(sv_detok_t *d, const char **text, size_t *len);
/* Bytes held back (0..3). */
size_t sv_detok_pending(const sv_detok_t *d);

/* The lossy conversion on its own: appends s[0..n) to out with each maximal
 * ill-formed subpart replaced by U+FFFD. If `hold` is non-NULL, a final
 * incomplete-but-valid prefix (1..3 bytes) is not converted: its length
 * goes to *hold and the caller keeps those bytes. Returns the bytes written;
 * out needs room for 3 * n bytes. */
size_t sv_utf8_lossy(const uint8_t *s, size_t n, uint8_t *out, size_t *hold);

#endif
