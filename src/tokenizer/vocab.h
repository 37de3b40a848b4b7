/* vocab.h — a tokenizer's vocabulary, loaded from a Hugging Face
 * tokenizer.json or from a GGUF file's tokenizer.ggml.* metadata
 * (vocab_gguf.c, which says how GGUF's fields map onto this).
 *
 * A vocabulary maps each token id to the exact bytes the token stands for
 * (what the DFA walks and what decoding emits) and says which ids are
 * special, which end generation (EOS, end of turn), and which is BOS. It also
 * keeps what an encoder needs (merges, added tokens, normalizer,
 * pre-tokenizer); bpe.h builds the encoder from it.
 *
 * What tokenizer.json parts are understood:
 * - model: BPE ("type": "BPE", or no type with "merges"): vocab, merges in
 *   both spellings ("a b" strings and [a, b] arrays), byte_fallback,
 *   ignore_merges, unk_token, fuse_unk. Other model types are refused.
 * - added_tokens: content, id, special, normalized, lstrip, rstrip,
 *   single_word.
 * - normalizer: null, NFC, Llama 2's Prepend("▁") + Replace(" ", "▁"),
 *   or a Sequence of those.
 * - pre_tokenizer: ByteLevel (add_prefix_space, use_regex with GPT-2's
 *   pattern), Split (Regex or String pattern, any behavior, invert), Digits,
 *   Metaspace ("▁", prepend_scheme always/first/never, split) as the first
 *   step, and a Sequence of those.
 * - post_processor: only whether a TemplateProcessing starts with BOS
 *   (sv_vocab_add_bos).
 * - decoder: ByteLevel; for other decoders, ByteFallback's <0xNN> tokens and
 *   Replace("▁", " ") are honoured when computing token bytes.
 * A file whose normalizer or pre-tokenizer is outside that set still loads
 * (the token bytes are all the token index needs); sv_vocab_encoder_support
 * says why it cannot be encoded, and bpe.h refuses it with that message.
 *
 * Token bytes follow Hugging Face's decoders: with a ByteLevel decoder a
 * token whose characters are all in the byte alphabet maps back byte by
 * byte, and any other token (an added token such as "<|im_end|>" with a
 * character outside the alphabet) stands for its UTF-8 text.
 *
 * A vocabulary is immutable after loading and safe to share between
 * threads. */
#ifndef SV_TOKENIZER_VOCAB_H
#define SV_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "util/error.h"

typedef struct sv_vocab sv_vocab_t;

/* Per-token flags (sv_vocab_flags). */
enum {
    SV_TOKEN_UNUSED = 1u << 0,  /* no token has this id (a hole in the id range) */
    SV_TOKEN_ADDED = 1u << 1,   /* from added_tokens */
    SV_TOKEN_SPECIAL = 1u << 2, /* an added token marked special (skipped by decode on request) */
    SV_TOKEN_BYTE = 1u << 3,    /* a byte-fallback token <0xNN> */
    SV_TOKEN_EOG = 1u << 4,     /* ends generation: EOS or an end-of-turn token */
    SV_TOKEN_BOS = 1u << 5,
};

/* Size limits on the input (a tokenizer.json is a few MB). */
#define SV_VOCAB_MAX_IDS (1u << 24)       /* ids must be below this */
#define SV_VOCAB_MAX_TOKEN_BYTES 4096u    /* longest token string */

/* Loads a tokenizer.json file. On success *out is a new vocabulary that the
 * caller frees with sv_vocab_destroy. */
sv_status sv_vocab_load_hf_json(const char *path, sv_vocab_t **out, sv_error_t *err);
/* The same from text in memory (len bytes; need not be NUL-terminated). */
sv_status sv_vocab_from_hf_json(const char *text, size_t len, sv_vocab_t **out, sv_error_t *err);
void sv_vocab_destroy(sv_vocab_t *v);

struct sv_gguf;

/* Loads the vocabulary of a GGUF file (its tokenizer.ggml.* metadata; see
 * vocab_gguf.c). On success *out is a new vocabulary that the caller frees
 * with sv_vocab_destroy; it does not refer to the file afterwards. */
sv_status sv_vocab_load_gguf(const char *path, sv_vocab_t **out, sv_error_t *err);
/* The same from an open GGUF file (borrowed; only read during the call). */
sv_status sv_vocab_from_gguf(const struct sv_gguf *g, sv_vocab_t **out, sv_error_t *err);
/* Loads either kind of file: a GGUF file when it starts with the "GGUF"
 * magic, otherwise a tokenizer.json. */
sv_status sv_vocab_load(const char *path, sv_vocab_t **out, sv_error_t *err);

/* Applies a tokenizer_config.json (file path): its bos_token and eos_token
 * (a string or {"content": ...}) name the BOS and EOS tokens, overriding
 * the guesses from token names. Unknown names are an error. */
sv_status sv_vocab_apply_hf_config(sv_vocab_t *v, const char *path, sv_error_t *err);

/* The number of ids: one more than the largest id. */
uint32_t sv_vocab_size(const sv_vocab_t *v);
/* The token's bytes (borrowed, valid for the vocabulary's lifetime) and
 * their length; NULL with *len = 0 for an unused id or one out of range. */
const uint8_t *sv_vocab_bytes(const sv_vocab_t *v, int32_t id, size_t *len);
/* The token as tokenizer.json spells it (borrowed, NUL-terminated), or NULL. */
const char *sv_vocab_text(const sv_vocab_t *v, int32_t id);
/* SV_TOKEN_* flags; SV_TOKEN_UNUSED for ids out of range. */
uint32_t sv_vocab_flags(const sv_vocab_t *v, int32_t id);
/* The id of a model-vocabulary token by its tokenizer.json spelling, or of
 * an added token by its content; -1 when there is none. */
int32_t sv_vocab_find(const sv_vocab_t *v, const char *text, size_t len);
/* The longest token, in bytes. */
size_t sv_vocab_max_token_bytes(const sv_vocab_t *v);

/* BOS, EOS and end-of-turn ids, or -1 when unknown. They are guessed from
 * added-token names (<|begin_of_text|>, <s>, <|end_of_text|>,
 * <|endoftext|>, </s>, <|eot_id|>, <|im_end|>, <end_of_turn>, ...) and
 * overridden by sv_vocab_apply_hf_config. Every EOS and end-of-turn token
 * found carries SV_TOKEN_EOG. */
int32_t sv_vocab_bos(const sv_vocab_t *v);
int32_t sv_vocab_eos(const sv_vocab_t *v);
int32_t sv_vocab_eot(const sv_vocab_t *v);
/* Whether prompts start with BOS: GGUF's tokenizer.ggml.add_bos_token (or
 * the model type's default), or a tokenizer.json post-processor template
 * that starts with the BOS token. Encoding never adds it: callers do. */
bool sv_vocab_add_bos(const sv_vocab_t *v);

/* NULL when bpe.h can encode with this vocabulary; otherwise a sentence
 * saying which part of the tokenizer.json it does not implement. */
const char *sv_vocab_encoder_support(const sv_vocab_t *v);

/* Appends the bytes of ids[0..n) to out: the exact concatenation of token
 * bytes, which may end inside a UTF-8 character (see detok.h for text).
 * With skip_special, special tokens contribute nothing. Ids out of range or
 * unused are an error (SV_ERR_ARG, offset = index into ids). */
sv_status sv_vocab_decode(const sv_vocab_t *v, const int32_t *ids, size_t n, bool skip_special,
                          sv_bytes_t *out, sv_error_t *err);

#endif
