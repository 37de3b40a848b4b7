/* backend.h — the compute interface the forward pass is written against.
 *
 * A backend owns memory (host memory for the CPU backend, device memory for
 * CUDA) and runs a small set of fp32 operations on it. The model code
 * (src/model/llama.c) only ever holds pointers the backend allocated and
 * calls the operations through the vtable, so the same forward pass runs on
 * every backend.
 *
 * Conventions shared by every operation:
 * - every pointer argument is backend memory (from ops->alloc), except the
 *   host side of upload/download and the small descriptor structs;
 * - matrices are row-major; "rows" are tokens (one row per new token in the
 *   step), so a row's result is a function of that row alone: a backend is
 *   BATCH-INVARIANT, a row's output bits never depend on how many other rows
 *   share the call (docs/architecture.md, "Backends");
 * - operations run in call order (a CUDA backend puts them on one stream)
 *   and return SV_OK, or SV_ERR_ARG for arguments a caller should never pass
 *   (the message names the operation);
 * - no operation allocates: everything it needs is allocated up front.
 *
 * The KV cache is described by an sv_kv_view_t: per layer, one array of
 * physical rows for keys and one for values, (capacity, kv_dim) each. With
 * no block tables in the view, row p holds position p of the one sequence
 * the rows belong to (a contiguous cache). With block tables (the paged
 * KV pool, docs/architecture.md "KV cache"), the rows are grouped into blocks of
 * block_size physical rows, the operation's rows may belong to different
 * sequences (a ragged batch: seq_of_row), and position p of sequence s is
 * physical row table_s[p / block_size] * block_size + p % block_size,
 * table_s being tables[table_off[s] .. table_off[s + 1]). The contiguous
 * cache is the paged one with an identity table; both run the same code. */
#ifndef SV_BACKEND_BACKEND_H
#define SV_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct sv_backend sv_backend_t;

/* Which elements RoPE rotates together (see ops->rope). */
typedef enum {
    SV_ROPE_NORMAL = 0, /* adjacent pairs (x[2i], x[2i+1]): llama.cpp's `llama` GGUF files */
    SV_ROPE_NEOX = 1,   /* halves (x[i], x[i + rot_dim/2]): HF checkpoints, `qwen2` GGUF */
} sv_rope_style;

/* One layer's key/value storage, and how an operation's rows find their
 * sequence's positions in it. The first four fields alone (the rest zero)
 * describe a contiguous cache of one sequence, positions 0 .. capacity-1.
 * Setting `tables` makes it paged: then block_size > 0, capacity is a
 * multiple of it, and seq_of_row, table_off and tables are backend memory
 * (uploaded by the caller; they are read by the operation, so a CUDA
 * backend reads them on the device). */
typedef struct sv_kv_view {
    float *k;         /* (capacity, kv_dim) physical rows */
    float *v;         /* (capacity, kv_dim) */
    int32_t capacity; /* physical rows k and v hold */
    int32_t kv_dim;   /* n_kv_heads * head_dim */
    /* paging; all zero / NULL for a contiguous cache */
    int32_t block_size;        /* physical rows per block */
    int32_t n_seqs;            /* sequences among the operation's rows */
    const int32_t *seq_of_row; /* (rows) sequence of each row, 0 .. n_seqs-1 */
    const int32_t *table_off;  /* (n_seqs + 1) start of each sequence's table in tables */
    const int32_t *tables;     /* (table_off[n_seqs]) physical block ids, 0 .. capacity/block_size-1 */
} sv_kv_view_t;

/* Attention geometry: grouped-query attention, n_heads query heads sharing
 * n_kv_heads key/value heads (n_heads % n_kv_heads == 0); query head h reads
 * kv head h / (n_heads / n_kv_heads). scale multiplies q·k (usually
 * 1/sqrt(head_dim)). */
typedef struct sv_attn_shape {
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;
    float scale;
    /* Optional: an upper bound of pos[r] + 1 over the call's rows, or 0
     * when unknown. A backend may use it to split long contexts across
     * its threads (the CUDA backend's split-K). A row past it is
     * SV_ERR_ARG on the CPU backend; on CUDA it is SV_ERR_ARG at the next
     * synchronisation when it needs more splits than the bound gives, and
     * otherwise computed as if the bound were right. */
    int32_t max_ctx;
    /* > 0: a sliding-window layer, row r attending only to positions
     * pos[r] - window + 1 .. pos[r] (Gemma 3's local layers); 0: all. A
     * backend whose ops->attention_window is false refuses a window. */
    int32_t window;
} sv_attn_shape_t;

/* Weight formats an optional ops->gemm_q reads as they are stored in GGUF
 * (ggml block layouts, little-endian; src/backend/quant.h): a weight row of
 * `in` elements is in / sv_qtype_block(t) blocks of sv_qtype_block_bytes(t)
 * bytes, rows packed back to back. */
typedef enum {
    SV_QT_F16 = 1,
    SV_QT_BF16,
    SV_QT_Q8_0,
    SV_QT_Q4_0,
    SV_QT_Q4_1,
    SV_QT_Q4_K, /* 256-element super-blocks (src/backend/quant.h) */
    SV_QT_Q5_K,
    SV_QT_Q6_K,
} sv_qtype;

/* Elements per block; 0 for a value that is no sv_qtype. */
static inline int32_t sv_qtype_block(sv_qtype t) {
    return t == SV_QT_F16 || t == SV_QT_BF16 ? 1
           : t == SV_QT_Q8_0 || t == SV_QT_Q4_0 || t == SV_QT_Q4_1 ? 32
           : t == SV_QT_Q4_K || t == SV_QT_Q5_K || t == SV_QT_Q6_K ? 256
                                                                     : 0;
}
/* Bytes per block; 0 for a value that is no sv_qtype. */
static inline size_t sv_qtype_block_bytes(sv_qtype t) {
    switch (t) {
    case SV_QT_F16: case SV_QT_BF16: return 2;
    case SV_QT_Q8_0: return 34;
    case SV_QT_Q4_0: return 18;
    case SV_QT_Q4_1: return 20;
    case SV_QT_Q4_K: return 144;
    case SV_QT_Q5_K: return 176;
    case SV_QT_Q6_K: return 210;
    }
    return 0;
}

typedef struct sv_backend_ops {
    const char *name; /* "cpu", "cuda" */

    /* Backend memory: `bytes` bytes, 64-byte aligned, uninitialised. Free
     * with ops->free (NULL is a no-op). SV_ERR_NOMEM when it cannot. */
    sv_status (*alloc)(sv_backend_t *be, size_t bytes, void **out, sv_error_t *err);
    void (*free)(sv_backend_t *be, void *p);
    /* Copies between host memory and backend memory (blocking). */
    sv_status (*upload)(sv_backend_t *be, void *dst, const void *src_host, size_t bytes,
                        sv_error_t *err);
    sv_status (*download)(sv_backend_t *be, void *dst_host, const void *src, size_t bytes,
                          sv_error_t *err);
    /* Copies between two non-overlapping ranges of backend memory (the
     * copy-on-write of a KV block). */
    sv_status (*copy)(sv_backend_t *be, void *dst, const void *src, size_t bytes,
                      sv_error_t *err);

    /* y = x · Wᵀ (+ bias): x (rows, in), w (out, in), bias (out) or NULL,
     * y (rows, out); y must not overlap x or w. */
    sv_status (*gemm)(sv_backend_t *be, int32_t rows, int32_t in, int32_t out, const float *x,
                      const float *w, const float *bias, float *y, sv_error_t *err);

    /* Optional (NULL when the backend has none): ops->gemm with w (out,
     * in) stored in format t, in a multiple of sv_qtype_block(t). The
     * result is bit for bit ops->gemm's with w dequantized to fp32 as
     * src/backend/quant.c does; no fp32 copy of w is made. */
    sv_status (*gemm_q)(sv_backend_t *be, int32_t rows, int32_t in, int32_t out, const float *x,
                        const void *w, sv_qtype t, const float *bias, float *y, sv_error_t *err);

    /* Optional, with gemm_q: n (1 to 4) products of one input, ys[k] = x ·
     * ws[k]ᵀ (+ biases[k] when biases and biases[k]), ws[k] (outs[k], in)
     * in format t: the n gemm_q calls it stands for (a layer's q, k and
     * v), with their results. */
    sv_status (*gemm_q_n)(sv_backend_t *be, int32_t rows, int32_t in, int32_t n,
                          const int32_t *outs, const float *x, const void *const *ws, sv_qtype t,
                          const float *const *biases, float *const *ys, sv_error_t *err);
    /* Optional, with gemm_q: gate (rows, out) = silu(x · wgᵀ) * (x · wuᵀ),
     * wg and wu (out, in) in format t: gemm_q into gate, gemm_q into up,
     * then swiglu into gate, with their result; up (rows, out) is scratch
     * whose contents afterwards are unspecified. */
    sv_status (*gemm_q_swiglu)(sv_backend_t *be, int32_t rows, int32_t in, int32_t out,
                               const float *x, const void *wg, const void *wu, sv_qtype t,
                               float *gate, float *up, sv_error_t *err);

    /* y[r] = x[r] / sqrt(mean(x[r]²) + eps) * w: x, y (rows, dim), w (dim).
     * y may equal x. */
    sv_status (*rmsnorm)(sv_backend_t *be, int32_t rows, int32_t dim, const float *x,
                         const float *w, float eps, float *y, sv_error_t *err);

    /* Rotates x (rows, n_heads * head_dim) in place: in every head of row r
     * the first rot_dim elements are rotated by the angles pos[r] *
     * inv_freq[i], i < rot_dim / 2 (inv_freq (rot_dim / 2), carrying any
     * frequency scaling), pairing elements as `style` says; elements past
     * rot_dim are left alone. rot_dim is even and <= head_dim; pos (rows). */
    sv_status (*rope)(sv_backend_t *be, int32_t rows, int32_t n_heads, int32_t head_dim,
                      int32_t rot_dim, sv_rope_style style, const int32_t *pos,
                      const float *inv_freq, float *x, sv_error_t *err);

    /* Stores row r of k and v (rows, kv->kv_dim) as position pos[r] of row
     * r's sequence. Every pos[r] must be in [0, kv->capacity) (contiguous)
     * or covered by its sequence's block table (paged), and every table
     * entry must name a block of the cache. Rows writing the same physical
     * row leave the last one's values. */
    sv_status (*kv_write)(sv_backend_t *be, const sv_kv_view_t *kv, int32_t rows,
                          const int32_t *pos, const float *k, const float *v, sv_error_t *err);

    /* Causal attention: row r of q (rows, n_heads * head_dim) attends to
     * positions 0 .. pos[r] (inclusive) of its own sequence, which must
     * already be written; out (rows, n_heads * head_dim), not overlapping q.
     * Positions are checked as for kv_write. A row's result depends only on
     * its query and the keys and values those positions hold, not on where
     * they are stored or on the other rows (a fixed reduction order). */
    sv_status (*attention)(sv_backend_t *be, const sv_kv_view_t *kv, const sv_attn_shape_t *shape,
                           int32_t rows, const int32_t *pos, const float *q, float *out,
                           sv_error_t *err);

    /* out = silu(gate) * up, elementwise over n values; out may equal gate
     * or up. silu(g) = g / (1 + exp(-g)). */
    sv_status (*swiglu)(sv_backend_t *be, size_t n, const float *gate, const float *up, float *out,
                        sv_error_t *err);

    /* y += x over n values (the residual stream). */
    sv_status (*add)(sv_backend_t *be, size_t n, float *y, const float *x, sv_error_t *err);

    /* Optional (a model that needs one does not load without it): out =
     * gelu_tanh(gate) * up over n values, gelu_tanh(g) = g/2 (1 + tanh(
     * sqrt(2/π) (g + 0.044715 g³))) (GeGLU: Gemma); out may equal gate or
     * up. And x *= s over n values (Gemma's embedding scale). */
    sv_status (*geglu)(sv_backend_t *be, size_t n, const float *gate, const float *up, float *out,
                       sv_error_t *err);
    sv_status (*scale)(sv_backend_t *be, size_t n, float *x, float s, sv_error_t *err);
    /* Whether ops->attention honours sv_attn_shape_t.window. */
    bool attention_window;

    /* out[r] = table[ids[r]]: table (n_table, dim), ids (rows), out (rows,
     * dim). The embedding lookup, and the selection of the rows whose logits
     * are wanted. Every id must be in [0, n_table). */
    sv_status (*get_rows)(sv_backend_t *be, int32_t rows, int32_t dim, int32_t n_table,
                          const float *table, const int32_t *ids, float *out, sv_error_t *err);

    /* Optional, with gemm_q: get_rows from a table stored in format t,
     * each looked-up row dequantized to fp32 (the same values as quant.c). */
    sv_status (*get_rows_q)(sv_backend_t *be, int32_t rows, int32_t dim, int32_t n_table,
                            const void *table, sv_qtype t, const int32_t *ids, float *out,
                            sv_error_t *err);

    /* Optional: whether gemm_q and get_rows_q read format t (NULL: every
     * sv_qtype). */
    bool (*reads_q)(sv_backend_t *be, sv_qtype t);
    /* Optional: the format this backend keeps float weights in, one that
     * reads_q accepts (the model converts fp32 and unreadable formats to
     * it at load), or 0 (NULL too) for fp32. The CUDA backend in bf16
     * mode says SV_QT_BF16; its gemm_q then rounds the activations to
     * bf16 as well (tensor cores), so it is not ops->gemm's bit for bit. */
    sv_qtype (*weight_qtype)(sv_backend_t *be);

    /* Optional (all four or none): step graphs. graph_begin(owner, key)
     * opens a step that is the same every time (owner, key) is given: the
     * same operations with the same arguments, only the contents of backend
     * memory differing. The backend may record the step the first time and
     * replay the record after (the CUDA backend: a CUDA graph, so a step is
     * one launch instead of hundreds). Until graph_end, operations are only
     * enqueued: upload, download and copy are SV_ERR_ARG, and the step's
     * effects are there once graph_end returns SV_OK. graph_abort closes a
     * step that failed midway without running the rest; graph_forget drops
     * every record of owner (before its memory is freed). */
    sv_status (*graph_begin)(sv_backend_t *be, const void *owner, uint64_t key, sv_error_t *err);
    sv_status (*graph_end)(sv_backend_t *be, sv_error_t *err);
    void (*graph_abort)(sv_backend_t *be);
    void (*graph_forget)(sv_backend_t *be, const void *owner);

    /* Optional fusions (NULL when the backend has none; the model then runs
     * the operations each stands for, with the same result). */
    /* ops->add(rows * dim, x, d), then ops->rmsnorm(rows, dim, x, w, eps,
     * y): the residual add and the next block's norm. y must not overlap
     * x or d. */
    sv_status (*add_rmsnorm)(sv_backend_t *be, int32_t rows, int32_t dim, float *x,
                             const float *d, const float *w, float eps, float *y,
                             sv_error_t *err);
    /* ops->rope of q (rows, shape->n_heads heads) and of k (rows,
     * shape->n_kv_heads heads), both with rot_dim, style, pos and
     * inv_freq, then ops->kv_write(kv, rows, pos, k, v). */
    sv_status (*rope_kv_write)(sv_backend_t *be, const sv_kv_view_t *kv,
                               const sv_attn_shape_t *shape, int32_t rows, int32_t rot_dim,
                               sv_rope_style style, const int32_t *pos, const float *inv_freq,
                               float *q, float *k, const float *v, sv_error_t *err);

    /* The final logits are ops->gemm of the final-normed rows with the
     * output matrix (vocab, dim), then ops->download. */

    void (*destroy)(sv_backend_t *be);
} sv_backend_ops_t;

/* Every backend struct starts with this header, so an sv_backend_t * can
 * be passed to its own ops. Callers use be->ops->gemm(be, ...). */
struct sv_backend {
    const sv_backend_ops_t *ops;
};

/* Destroys be (created by a backend's own create function); NULL is a
 * no-op. Free everything allocated from it first. */
static inline void sv_backend_destroy(sv_backend_t *be) {
    if (be)
        be->ops->destroy(be);
}

#endif
