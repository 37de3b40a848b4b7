/* pretok.h — the pre-tokenizer: splits normalized text into the pieces that
 * BPE encodes one at a time, as Hugging Face's pre-tokenizers do.
 *
 * Every supported pre-tokenizer step is a regex split (ByteLevel's GPT-2
 * pattern, a Split's Regex or String, Digits' \p{N}), run with PCRE2 in UTF
 * mode with JIT when it is available. Patterns in tokenizer.json are written
 * for Oniguruma (Hugging Face's regex engine), whose Unicode classes differ
 * from PCRE2's; sv_pretok_translate rewrites them (see pretok.c). */
#ifndef SV_TOKENIZER_PRETOK_H
#define SV_TOKENIZER_PRETOK_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "buf.h"
#include "src/tokenizer/internal/vocab_internal.h"

typedef struct sv_pretok sv_pretok_t;

/* A piece: bytes [off, off + len) of the scratch pool. */
typedef struct sv_piece { size_t off, len; } sv_piece_t;

/* Per-thread working memory of sv_pretok_split. */
typedef struct sv_pretok_scratch {
    pcre2_match_data *md;
    sv_bytes_t pool;          /* the segment, then prefixed copies of pieces */
    sv_piece_t *pieces, *next; /* pieces: the result; next: being built (both cap long) */
    size_t n, n_next, cap;
    void *splits;             /* matches and gaps of one piece (pretok.c's split_t) */
    size_t n_splits, cap_splits;
} sv_pretok_scratch_t;

/* Compiles the vocabulary's steps. *out is freed with sv_pretok_destroy;
 * v is borrowed. */
sv_status sv_pretok_create(const sv_vocab_t *v, sv_pretok_t **out, sv_error_t *err);
void sv_pretok_destroy(sv_pretok_t *p);

sv_status sv_pretok_scratch_init(const sv_pretok_t *p, sv_pretok_scratch_t *s);
void sv_pretok_scratch_free(sv_pretok_scratch_t *s);

/* Splits text[0..n) (well-formed UTF-8, already normalized); on success
 * s->pieces[0..s->n) are the non-empty pieces in order, each in s->pool. */
sv_status sv_pretok_split(const sv_pretok_t *p, sv_pretok_scratch_t *s, const uint8_t *text,
                          size_t n, sv_error_t *err);

/* Rewrites an Oniguruma pattern into PCRE2 syntax with the same meaning for
 * the constructs tokenizers use. Returns SV_ERR_UNSUPPORTED (with the
 * offset) for constructs it cannot carry over. `out` gets a NUL-terminated
 * string. */
sv_status sv_pretok_translate(const char *pattern, sv_bytes_t *out, sv_error_t *err);

#endif
