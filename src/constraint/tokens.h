/* tokens.h — a loaded tokenizer as the constraint layer needs it: the
 * vocabulary as a token set (fsm/token_index.h) and an encoder behind the
 * matcher's tokenizer interface (fsm/matcher.h).
 *
 * Kinds: an id with no token, and special added tokens, are NEVER; tokens
 * that end generation (EOS, end of turn) are EOG; every other token,
 * including non-special added tokens and byte-fallback tokens, is NORMAL
 * with its exact bytes.
 *
 * An sv_tokens_t holds one encoder scratch: use it from one thread at a time
 * (the token set itself is immutable and shareable). */
#ifndef SV_ENGINE_TOKENS_H
#define SV_ENGINE_TOKENS_H

#include "fsm/matcher.h"
#include "fsm/token_index.h"
#include "src/tokenizer/buf.h"
#include "src/tokenizer/vocab.h"

typedef struct sv_tokens sv_tokens_t;

/* Loads a tokenizer.json or a GGUF file's vocabulary (and, when
 * config_path is non-NULL, a tokenizer_config.json). mask_bits: the logits row length (0: the
 * vocabulary size). */
sv_status sv_tokens_load(const char *path, const char *config_path, uint32_t mask_bits, sv_tokens_t **out,
                         sv_error_t *err);
/* The tokenizer of the model at path: a GGUF file's own vocabulary, or a
 * Hugging Face directory's tokenizer.json (with its tokenizer_config.json
 * when present), with masks n_vocab bits wide (the model's logits rows). */
sv_status sv_tokens_load_model(const char *path, int32_t n_vocab, sv_tokens_t **out, sv_error_t *err);
void sv_tokens_destroy(sv_tokens_t *t);

const sv_vocab_t *sv_tokens_vocab(const sv_tokens_t *t);
const sv_token_set_t *sv_tokens_set(const sv_tokens_t *t);
/* NULL when the vocabulary cannot be encoded (sv_vocab_encoder_support). */
const sv_tokenizer_iface_t *sv_tokens_iface(const sv_tokens_t *t);
/* Encodes text as Hugging Face's encode(text, add_special_tokens=False). */
sv_status sv_tokens_encode(sv_tokens_t *t, const char *text, size_t len, sv_ids_t *out, sv_error_t *err);

#endif
