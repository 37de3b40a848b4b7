/* bpe.h — byte-level BPE encoding, as Hugging Face tokenizers does it.
 *
 * Encoding runs the tokenizer.json pipeline:
 *  1. added tokens (special or not) are split out of the raw text first,
 *     leftmost-longest (added.h);
 *  2. each remaining segment is normalized (NFC when the tokenizer says so,
 *     nfc.h), and added tokens marked "normalized" are split out of it;
 *  3. the pre-tokenizer splits it into pieces (pretok.h);
 *  4. each piece's bytes are spelled in the byte-level alphabet and BPE
 *     merges them by rank (bpe.c), or, with ignore_merges (Llama 3), a piece
 *     that is itself a vocabulary token is emitted whole.
 * The ids equal tokenizers' `encode(text, add_special_tokens=False).ids`;
 * no BOS is added (callers that want one prepend sv_vocab_bos).
 *
 * SentencePiece-style vocabularies (Llama 2, Mistral; GGUF model "llama")
 * run the same pipeline without the byte-level alphabet: step 2 (Prepend +
 * Replace normalizers) or step 3 (Metaspace) spells spaces U+2581 and
 * prepends one per the vocabulary's rule (vocab_internal.h), each
 * character is a symbol, characters without a token become <0xNN> byte
 * tokens (or <unk>), and merges rank by the merged token's score when the
 * vocabulary came from GGUF scores (vocab_gguf.c).
 *
 * An sv_bpe_t is immutable once built and may be shared between threads;
 * each thread encodes with its own sv_bpe_scratch_t, which holds the
 * growable buffers and a small cache of recent pieces, so that repeated
 * encodes stop allocating once the buffers have grown. */
#ifndef SV_TOKENIZER_BPE_H
#define SV_TOKENIZER_BPE_H

#include <stdint.h>

#include "buf.h"
#include "vocab.h"

typedef struct sv_bpe sv_bpe_t;
typedef struct sv_bpe_scratch sv_bpe_scratch_t;

/* Encode flags. */
enum {
    /* Treat special added tokens as plain text (Hugging Face's
     * encode_special_tokens=True): user text that spells "<|eot_id|>" then
     * cannot inject a control token. Non-special added tokens still match. */
    SV_BPE_SPECIAL_AS_TEXT = 1u << 0,
};

/* Largest input one encode call accepts. */
#define SV_BPE_MAX_INPUT (1u << 30)

/* Builds an encoder for v, which is borrowed and must outlive it. Fails with
 * SV_ERR_UNSUPPORTED (and sv_vocab_encoder_support's message) when the
 * tokenizer uses a part this encoder does not implement. Free with
 * sv_bpe_destroy. */
sv_status sv_bpe_create(const sv_vocab_t *v, sv_bpe_t **out, sv_error_t *err);
void sv_bpe_destroy(sv_bpe_t *b);
const sv_vocab_t *sv_bpe_vocab(const sv_bpe_t *b);

/* Per-thread working memory; b is borrowed. Free with
 * sv_bpe_scratch_destroy. */
sv_status sv_bpe_scratch_create(const sv_bpe_t *b, sv_bpe_scratch_t **out, sv_error_t *err);
void sv_bpe_scratch_destroy(sv_bpe_scratch_t *s);

/* Appends the ids of text[0..len) to out. text must be well-formed UTF-8:
 * otherwise SV_ERR_ARG with the offset of the first bad byte. */
sv_status sv_bpe_encode(const sv_bpe_t *b, sv_bpe_scratch_t *s, const char *text, size_t len,
                        uint32_t flags, sv_ids_t *out, sv_error_t *err);

/* Appends text as the encoder sees it after normalization (segments between
 * added tokens normalized, added tokens verbatim): what decoding the ids of
 * sv_bpe_encode gives back. */
sv_status sv_bpe_normalize(const sv_bpe_t *b, sv_bpe_scratch_t *s, const char *text, size_t len,
                           uint32_t flags, sv_bytes_t *out, sv_error_t *err);

#endif
