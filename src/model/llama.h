/* llama.h — the Llama-family forward pass (Llama 2/3, SmolLM2, TinyLlama,
 * Mistral, Qwen2 with QKV bias), written against backend.h.
 *
 * A model is loaded from
 * - a GGUF file (architectures `llama` and `qwen2`; weights in any type
 *   quant.h dequantizes), tensors named as llama.cpp names them
 *   (token_embd.weight, blk.N.attn_q.weight, ...); or
 * - a Hugging Face directory holding config.json and model.safetensors
 *   (F32/F16/BF16; LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM).
 * Weights are converted to float32 at load and copied into backend memory.
 *
 * RoPE pairing. llama.cpp's converter permutes the rows of Q and K in
 * `llama` GGUF files so that RoPE rotates adjacent pairs (x[2i], x[2i+1]);
 * `qwen2` GGUF files and every HF checkpoint keep HF's order, which rotates
 * halves (x[i], x[i + d/2]). The loader picks SV_ROPE_NORMAL or
 * SV_ROPE_NEOX accordingly, so both give the same logits.
 *
 * RoPE scaling: plain, linear (positions divided by a factor), Llama 3's
 * frequency-dependent scaling (GGUF: the rope_freqs.weight tensor; HF:
 * rope_scaling.rope_type "llama3"). YaRN, LongRoPE, dynamic NTK and
 * anything else are refused with SV_ERR_UNSUPPORTED, never ignored.
 *
 * Per-sequence state: an sv_llama_state_t holds one sequence's KV cache
 * (contiguous, max_ctx positions; the paged pool replaces it later) and the
 * activation buffers for up to max_batch tokens per internal step, all
 * allocated at create time: sv_llama_forward allocates nothing.
 *
 * Determinism: the backend is batch-invariant and attention depends only on
 * the cache, so processing a prompt in one call, in chunks, or one token at
 * a time gives bit-identical logits on the CPU backend.
 *
 * Threads: a model is read-only after load and may be shared by states used
 * from one thread at a time (the backend is single-threaded from the
 * caller's side). */
#ifndef SV_MODEL_LLAMA_H
#define SV_MODEL_LLAMA_H

#include <stdbool.h>
#include <stdint.h>

#include "src/backend/backend.h"
#include "src/util/error.h"

#define SV_LLAMA_MAX_LAYERS 512
#define SV_LLAMA_MAX_DIM 65536
#define SV_LLAMA_MAX_VOCAB (1 << 22)

typedef struct sv_llama_config {
    char arch[32];          /* "llama", "qwen2" (GGUF general.architecture or HF model_type) */
    int32_t dim;            /* hidden size */
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;       /* usually dim / n_heads */
    int32_t hidden_dim;     /* feed-forward size */
    int32_t vocab_size;     /* rows of the output matrix */
    int32_t max_ctx;        /* context length the model was trained for */
    int32_t rot_dim;        /* dimensions RoPE rotates (head_dim unless partial) */
    float norm_eps;
    float rope_theta;
    sv_rope_style rope_style;
    bool qkv_bias;          /* Qwen2 */
    bool tied_output;       /* output matrix == token embeddings */
} sv_llama_config_t;

typedef struct sv_llama sv_llama_t;
typedef struct sv_llama_state sv_llama_state_t;

/* Loads the model at path (a GGUF file, or a directory with config.json and
 * model.safetensors) into backend memory of be, which is borrowed and must
 * outlive the model. Errors: SV_ERR_IO (files), SV_ERR_SYNTAX (a malformed
 * file or config, a tensor missing or of the wrong shape: the message
 * names it), SV_ERR_UNSUPPORTED (an architecture, weight type or RoPE
 * scaling this code does not implement), SV_ERR_NOMEM. On success *out is
 * freed with sv_llama_destroy. */
sv_status sv_llama_load(const char *path, sv_backend_t *be, sv_llama_t **out, sv_error_t *err);
void sv_llama_destroy(sv_llama_t *m);

/* Borrowed, valid until sv_llama_destroy. */
const sv_llama_config_t *sv_llama_config(const sv_llama_t *m);

/* A sequence's state: a KV cache for positions 0 .. max_ctx-1 (1 <= max_ctx
 * <= config max_ctx) and buffers for max_batch tokens per internal step
 * (>= 1; longer inputs are processed in steps of max_batch, which changes no
 * result). Memory: n_layers * max_ctx * kv_dim * 8 bytes of cache plus
 * activations. m is borrowed and must outlive the state. On success *out is
 * freed with sv_llama_state_destroy. */
sv_status sv_llama_state_create(const sv_llama_t *m, int32_t max_ctx, int32_t max_batch,
                                sv_llama_state_t **out, sv_error_t *err);
void sv_llama_state_destroy(sv_llama_state_t *s);
/* Forgets the cached positions (the next forward must start at 0). */
void sv_llama_state_reset(sv_llama_state_t *s);
/* Number of positions cached so far (one past the largest written). */
int32_t sv_llama_state_len(const sv_llama_state_t *s);

/* Which logits sv_llama_forward writes. */
typedef enum {
    SV_LLAMA_LOGITS_NONE = 0, /* none (prefill only) */
    SV_LLAMA_LOGITS_LAST = 1, /* the last token's: (1, vocab) */
    SV_LLAMA_LOGITS_ALL = 2,  /* every token's: (n, vocab), row i for tokens[i] */
} sv_llama_logits;

/* Runs n tokens (tokens[i] at position positions[i]) through the model,
 * writing their keys and values into s's cache, and writes the requested
 * logits into the host array `logits` (caller-owned, sized as above; may be
 * NULL with SV_LLAMA_LOGITS_NONE). Positions must not leave a gap: each
 * positions[i] is at most the number of positions cached before it (so a
 * prompt is 0, 1, 2, ... and a decode step is sv_llama_state_len(s));
 * rewriting earlier positions rolls the sequence back to them. Token ids
 * must be in [0, vocab_size). Errors are SV_ERR_ARG (bad ids, positions, n)
 * and whatever the backend reports; after an error the state's cache
 * contents are unspecified (reset it). Allocates nothing. */
sv_status sv_llama_forward(sv_llama_t *m, sv_llama_state_t *s, const int32_t *tokens,
                           const int32_t *positions, int32_t n, sv_llama_logits which,
                           float *logits, sv_error_t *err);

#endif
