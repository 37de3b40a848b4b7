/* llama.h — the Llama-family forward pass (Llama 2/3, SmolLM2, TinyLlama,
 * Mistral, Qwen2 with QKV bias), written against backend.h.
 *
 * A model is loaded from
 * - a GGUF file (architectures `llama`, `qwen2`, `qwen3` and `gemma3`; weights in any
 *   type quant.h dequantizes), tensors named as llama.cpp names them
 *   (token_embd.weight, blk.N.attn_q.weight, ...); or
 * - a Hugging Face directory holding config.json and model.safetensors
 *   (F32/F16/BF16; LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
 *   Qwen3ForCausalLM, Gemma3ForCausalLM: model_type gemma3_text).
 * Each architecture is one row of llama.c's ARCHS: its names, its tensor
 * names, and the flags its forward pass reads.
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
 * The paged KV cache. An sv_llama_kv_t holds, per layer, keys and values
 * for n_blocks physical blocks of SV_LLAMA_KV_BLOCK positions, allocated
 * once in backend memory, plus the activation buffers for up to max_tokens
 * rows per internal step. It does not know which blocks belong to whom: a
 * block allocator (src/engine/kv_pool.h) decides that, and each
 * sv_llama_forward_batch call describes every sequence in it by its block
 * table (position p lives in block table[p / 16], slot p % 16). One call
 * runs a RAGGED batch: decode rows, prefill chunks and jump-forward extends
 * of many sequences together.
 *
 * The single-sequence state (sv_llama_state_t) is a client of the same
 * code: a private paged cache of ceil(max_ctx / 16) blocks with an
 * identity block table. Both allocate everything at create time; a forward
 * call allocates nothing.
 *
 * Determinism: the backend is batch-invariant and attention depends only on
 * the keys and values of the row's own sequence, so a sequence's logits are
 * bit-identical on the CPU backend whether its prompt runs in one call, in
 * chunks or one token at a time, alone or in any ragged batch, in a
 * contiguous or a shuffled block table.
 *
 * Threads: a model is read-only after load and may be shared by states used
 * from one thread at a time (the backend is single-threaded from the
 * caller's side). */
#ifndef SV_MODEL_LLAMA_H
#define SV_MODEL_LLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/backend/backend.h"
#include "util/error.h"

#define SV_LLAMA_MAX_LAYERS 512
#define SV_LLAMA_MAX_DIM 65536
#define SV_LLAMA_MAX_VOCAB (1 << 22)

typedef struct sv_llama_config {
    char arch[32];          /* "llama", "qwen2", "qwen3", "gemma3" (GGUF general.architecture or HF model_type) */
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
    bool qk_norm;           /* Qwen3: an RMSNorm of each Q and K head before RoPE */
    bool tied_output;       /* output matrix == token embeddings */
    float attn_scale;       /* the query scale (1/sqrt(head_dim) unless the model says otherwise) */
    /* Gemma 3 (false and 0 for the others) */
    bool gelu;              /* a GeGLU feed-forward (gelu_tanh) instead of SwiGLU */
    bool embed_scale;       /* embeddings times sqrt(dim) */
    bool post_norms;        /* an RMSNorm of each block's output before its residual add */
    int32_t window;         /* > 0: the sliding-window layers attend to this many positions */
    float rope_theta_local; /* the RoPE base of the sliding-window layers (no scaling) */
    uint64_t local_layers[SV_LLAMA_MAX_LAYERS / 64]; /* bit l: layer l is a sliding-window layer */
} sv_llama_config_t;

/* Whether layer l of c is a sliding-window layer. */
static inline bool sv_llama_layer_local(const sv_llama_config_t *c, int32_t l) {
    return c->window > 0 && (c->local_layers[l / 64] >> (l % 64) & 1);
}

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
/* The backend the model runs on (borrowed). */
sv_backend_t *sv_llama_backend(const sv_llama_t *m);

/* A sequence's state: a KV cache for positions 0 .. max_ctx-1 (1 <= max_ctx
 * <= config max_ctx) and buffers for max_batch tokens per internal step
 * (>= 1; longer inputs are processed in steps of max_batch, which changes no
 * result). Memory: a private sv_llama_kv_t of ceil(max_ctx / 16) blocks
 * (n_layers * max_ctx * kv_dim * 8 bytes, max_ctx rounded up to 16) plus
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

/* ---- the paged KV cache and ragged batches --------------------------------- */

#define SV_LLAMA_KV_BLOCK 16 /* positions per KV block */

typedef struct sv_llama_kv sv_llama_kv_t;

/* Bytes of KV storage one block takes over all layers:
 * n_layers * 2 (K and V) * SV_LLAMA_KV_BLOCK * kv_dim * 4. Size a pool
 * from a memory budget with this. */
size_t sv_llama_kv_block_bytes(const sv_llama_t *m);

/* Creates a paged KV cache of n_blocks blocks (n_blocks *
 * sv_llama_kv_block_bytes(m) bytes of backend memory, not initialised) and
 * buffers for up to max_tokens batch rows per internal step (a larger
 * batch runs as several steps, which changes no result; activations take
 * about max_tokens * (4 dim + 3 q_dim + 2 kv_dim + 2 hidden_dim) floats,
 * plus min(max_tokens, 64) rows of vocab floats (the logits of one product)
 * and n_blocks + ctx/16 + 4 max_tokens
 * int32 of tables). m is borrowed and must outlive the cache. Errors:
 * SV_ERR_ARG (n_blocks or max_tokens < 1), SV_ERR_NOMEM. On success *out
 * is freed with sv_llama_kv_destroy. */
sv_status sv_llama_kv_create(const sv_llama_t *m, int32_t n_blocks, int32_t max_tokens,
                             sv_llama_kv_t **out, sv_error_t *err);
void sv_llama_kv_destroy(sv_llama_kv_t *kv);
int32_t sv_llama_kv_n_blocks(const sv_llama_kv_t *kv);
/* Backend memory held: the KV storage plus the step buffers. */
size_t sv_llama_kv_bytes(const sv_llama_kv_t *kv);

/* Copies block src's keys and values (all layers, all 16 slots) to block
 * dst: the copy-on-write of a block that a forked sequence shares before
 * it writes into it. src == dst is a no-op. SV_ERR_ARG for a block outside
 * the cache. */
sv_status sv_llama_kv_copy_block(sv_llama_kv_t *kv, int32_t src, int32_t dst, sv_error_t *err);

/* One sequence of a ragged batch. */
typedef struct sv_llama_seq {
    const uint32_t *blocks; /* (n_blocks) physical block ids (kv_pool.h's type): position p in
                               blocks[p / 16], slot p % 16 */
    int32_t n_blocks;      /* entries in blocks (at least ceil(len / 16)) */
    int32_t len;           /* positions cached after this step: one past its last row's position */
} sv_llama_seq_t;

/* A ragged batch: n_tokens rows, each a token of one sequence at one
 * position. All arrays are host memory, borrowed for the call.
 * - Rows are grouped by sequence in increasing sequence index (seq[] is
 *   non-decreasing; a sequence without rows is ignored), and a sequence's
 *   rows have consecutive positions:
 *   one token (decode), a chunk of a prompt (chunked prefill) or several
 *   tokens (jump-forward extend). Its first position must be at most the
 *   number of positions it had cached (no gaps; the caller, which owns
 *   sequence lengths, guarantees this); starting earlier rewrites the
 *   positions from there (rollback).
 * - Every row's K and V is written to its slot before any row attends,
 *   and a row attends to positions 0 .. its own of its own sequence.
 * - Two sequences may share blocks (a fork), but not a block either of
 *   them writes in this call: copy it first (sv_llama_kv_copy_block).
 * - logit_rows: the rows whose logits are wanted (the rows that sample:
 *   the last of a prefill chunk, each decode row, the last of an extend),
 *   strictly increasing; n_logits may be 0. */
typedef struct sv_llama_batch {
    int32_t n_tokens;
    const int32_t *tokens;    /* (n_tokens) token ids */
    const int32_t *positions; /* (n_tokens) */
    const int32_t *seq;       /* (n_tokens) index into seqs */
    int32_t n_seqs;
    const sv_llama_seq_t *seqs; /* (n_seqs) */
    int32_t n_logits;
    const int32_t *logit_rows; /* (n_logits) */
    /* Optional (NULL: never): asked before each layer; when it returns
     * true the call gives up with SV_ERR_CANCELLED, leaving the blocks of
     * the batch's rows unspecified, for the caller to compute again (the
     * engine gives up a batch-priority step this way when an online
     * request arrives: src/engine/engine.c). */
    bool (*interrupt)(void *ud);
    void *interrupt_ud;
    /* Optional (NULL: every row is downloaded into `logits`): called for
     * each product of logits rows instead of its download, with entries
     * [first, first + k) of logit_rows in dev (backend memory, (k, vocab),
     * valid during the call only). It downloads into `logits` the rows it
     * wants on the host (sv_llama_backend's download op) and may use the
     * others where they are (the engine samples them on the device:
     * src/engine/engine.c). An error it returns ends the call. */
    sv_status (*logits_hook)(void *ud, int32_t first, int32_t k, const float *dev, sv_error_t *err);
    void *logits_ud;
} sv_llama_batch_t;

/* Runs batch b through the model, writing its keys and values into kv
 * through the block tables, and writes the logits of b->logit_rows, in
 * that order, densely into the host array logits (n_logits, vocab;
 * caller-owned; may be NULL when n_logits is 0). The batch is checked
 * before anything is written: SV_ERR_ARG names the row or sequence (a
 * token id out of range, rows not grouped by sequence, positions not
 * consecutive, a length that disagrees with the last row, a position
 * past the table or the model's context, a block outside the cache, bad
 * logit rows). Backend errors, and an interrupt (SV_ERR_CANCELLED), leave
 * the written blocks unspecified. Allocates nothing. */
sv_status sv_llama_forward_batch(sv_llama_t *m, sv_llama_kv_t *kv, const sv_llama_batch_t *b,
                                 float *logits, sv_error_t *err);

#endif
