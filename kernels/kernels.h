/* kernels.h — the CUDA kernels' launchers, callable from C.
 *
 * Each launcher checks its shape preconditions on the host, enqueues one or
 * a few kernels on `stream`, checks the launch, and returns SV_OK or an
 * error (SV_ERR_ARG for shapes a caller should never pass, SV_ERR_IO for a
 * failure of the CUDA runtime, the message naming the call). Nothing here
 * synchronises or allocates.
 *
 * Pointers are device memory unless a parameter says "host". Kernels that
 * follow indices read from device memory (token ids, positions, block
 * tables) cannot report a bad index to the host when they meet it: they
 * skip the access (never reading or writing out of bounds) and record a
 * code in the device word `flag` (the first code wins, SV_KFLAG_*); the
 * backend reads the flag at its next synchronisation and turns it into an
 * SV_ERR_ARG for the caller (src/backend/cuda.c).
 *
 * The CPU references are the CPU backend's operations (src/backend/cpu.c)
 * and the CPU sampler (src/engine/sample.c); tests/gpu/ compares them. */
#ifndef SV_KERNELS_KERNELS_H
#define SV_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "src/backend/backend.h"
#include "src/backend/cuda.h"

/* Codes a kernel writes into the device flag (0: nothing wrong). */
enum {
    SV_KFLAG_OK = 0,
    SV_KFLAG_GET_ROWS_ID = 1,   /* get_rows: an id outside [0, n_table) */
    SV_KFLAG_KV_POS = 2,        /* kv_write: a position outside the cache or its block table */
    SV_KFLAG_KV_SEQ = 3,        /* kv_write / attention: a bad sequence index or table offsets */
    SV_KFLAG_KV_BLOCK = 4,      /* kv_write / attention: a table entry outside the cache */
    SV_KFLAG_ATTN_POS = 5,      /* attention: a position outside the cache or its block table */
};

/* The largest head_dim the attention kernel takes (its per-thread
 * accumulators are sized for it). */
#define SV_K_MAX_HEAD_DIM 512

/* ---- elementwise.cu: the small operations of backend.h --------------------- */

/* backend.h's rmsnorm: one block per row. y may equal x. ybf: NULL, or
 * (rows, dim) bf16 that gets y rounded too. */
sv_status sv_k_rmsnorm(cudaStream_t stream, int32_t rows, int32_t dim, const float *x,
                       const float *w, float eps, float *y, uint16_t *ybf, sv_error_t *err);

/* backend.h's add_rmsnorm: x += d, then sv_k_rmsnorm of x into y (ybf). */
sv_status sv_k_add_rmsnorm(cudaStream_t stream, int32_t rows, int32_t dim, float *x,
                           const float *d, const float *w, float eps, float *y, uint16_t *ybf,
                           sv_error_t *err);

/* backend.h's rope, angles computed in double as the CPU backend does. */
sv_status sv_k_rope(cudaStream_t stream, int32_t rows, int32_t n_heads, int32_t head_dim,
                    int32_t rot_dim, sv_rope_style style, const int32_t *pos,
                    const float *inv_freq, float *x, sv_error_t *err);

/* backend.h's swiglu and add, over n values; swiglu's obf: NULL, or n
 * bf16 that get out rounded too. */
sv_status sv_k_swiglu(cudaStream_t stream, size_t n, const float *gate, const float *up,
                      float *out, uint16_t *obf, sv_error_t *err);
sv_status sv_k_add(cudaStream_t stream, size_t n, float *y, const float *x, sv_error_t *err);

/* y[r][c] += bias[c] for y (rows, cols): the bias of a gemm. */
sv_status sv_k_add_bias(cudaStream_t stream, int32_t rows, int32_t cols, float *y,
                        const float *bias, sv_error_t *err);

/* backend.h's get_rows; an id outside [0, n_table) leaves its output row
 * untouched and sets SV_KFLAG_GET_ROWS_ID. */
sv_status sv_k_get_rows(cudaStream_t stream, int32_t rows, int32_t dim, int32_t n_table,
                        const float *table, const int32_t *ids, float *out, int32_t *flag,
                        sv_error_t *err);

/* get_rows from a bf16 table (each uint16_t the high half of a float):
 * rows widened to fp32 exactly. */
sv_status sv_k_get_rows_bf16(cudaStream_t stream, int32_t rows, int32_t dim, int32_t n_table,
                             const uint16_t *table, const int32_t *ids, float *out,
                             int32_t *flag, sv_error_t *err);

/* y[i] = x[i] rounded to bf16 (nearest, ties to even), n values: the
 * activations of a bf16 product. */
sv_status sv_k_to_bf16(cudaStream_t stream, size_t n, const float *x, uint16_t *y,
                       sv_error_t *err);

/* backend.h's kv_write (kv holds device pointers; the struct itself is
 * host memory, passed by value to the kernel). A row whose position or
 * table is bad writes nothing and sets a flag. */
sv_status sv_k_kv_write(cudaStream_t stream, const sv_kv_view_t *kv, int32_t rows,
                        const int32_t *pos, const float *k, const float *v, int32_t *flag,
                        sv_error_t *err);

/* backend.h's rope_kv_write: sv_k_rope of q and of k, then sv_k_kv_write of
 * k and v, in one launch (one block per row). */
sv_status sv_k_rope_kv_write(cudaStream_t stream, const sv_kv_view_t *kv,
                             const sv_attn_shape_t *shape, int32_t rows, int32_t rot_dim,
                             sv_rope_style style, const int32_t *pos, const float *inv_freq,
                             float *q, float *k, const float *v, int32_t *flag, sv_error_t *err);

/* ---- gemv.cu: the bf16 products of a few rows --------------------------------- */

/* The most rows sv_k_gemv_bf16 takes. */
#define SV_K_GEMV_MAX_ROWS 8

/* One product of sv_k_gemv_bf16_n: y (rows, out) = x · wᵀ (+ bias (out)),
 * w (out, in) bf16, 16-byte aligned. */
typedef struct sv_k_gemv_seg {
    const uint16_t *w;
    const float *bias; /* or NULL */
    float *y;
    int32_t out;
} sv_k_gemv_seg_t;

/* n (1 to 4) products of one bf16 input x (rows, in), in one launch; rows
 * <= SV_K_GEMV_MAX_ROWS, in a multiple of 8, x 16-byte aligned (SV_ERR_ARG
 * otherwise). A row's results do not depend on the other rows. */
sv_status sv_k_gemv_bf16_n(cudaStream_t stream, int32_t rows, int32_t in, int32_t n,
                           const sv_k_gemv_seg_t *segs, const uint16_t *x, sv_error_t *err);

/* y (rows, out) = silu(x · wgᵀ) * (x · wuᵀ), as sv_k_swiglu computes it from
 * the two products of sv_k_gemv_bf16_n; ybf: NULL, or (rows, out) bf16 that
 * get y rounded too (not x). The same limits as sv_k_gemv_bf16_n. */
sv_status sv_k_gemv_swiglu_bf16(cudaStream_t stream, int32_t rows, int32_t in, int32_t out,
                                const uint16_t *x, const uint16_t *wg, const uint16_t *wu,
                                float *y, uint16_t *ybf, sv_error_t *err);

/* ---- attention.cu: paged attention over a ragged batch ---------------------- */

/* Device scratch of split-K attention (attention.cu): part_floats floats
 * of partial results and n_count counters, zero before the first launch
 * (every launch leaves them zero). NULL, or part or count NULL: one pass
 * per row. */
typedef struct sv_k_attn_scratch {
    float *part;
    size_t part_floats;
    int32_t *count;
    size_t n_count;
} sv_k_attn_scratch_t;

/* backend.h's attention. head_dim <= SV_K_MAX_HEAD_DIM. A row whose
 * position or table is bad writes zeros and sets a flag. obf: NULL, or
 * (rows, n_heads * head_dim) bf16 that get out rounded too. */
sv_status sv_k_attention(cudaStream_t stream, const sv_kv_view_t *kv,
                         const sv_attn_shape_t *shape, int32_t rows, const int32_t *pos,
                         const float *q, float *out, uint16_t *obf,
                         const sv_k_attn_scratch_t *scratch, int32_t *flag, sv_error_t *err);

/* ---- sample.cu: the mask+sample kernel ---------------------------------------- */

/* Parameters and results are src/backend/cuda.h's sv_cuda_sample_params_t
 * and sv_cuda_sample_out_t (device arrays, one per row). */
/* Samples one token per row of logits (rows, vocab), masking with
 * mask_table (n_masks, (vocab + 31) / 32) words, bit (id & 31) of word
 * id >> 5 set for an allowed token; may be NULL when n_masks is 0). The
 * logits are not modified. One block per row; each row's status is in its
 * output (a mask slot outside [0, n_masks) is SV_ERR_ARG there). */
sv_status sv_k_sample(cudaStream_t stream, int32_t rows, int32_t vocab, const float *logits,
                      const uint32_t *mask_table, int32_t n_masks,
                      const sv_cuda_sample_params_t *params, sv_cuda_sample_out_t *out,
                      sv_error_t *err);

#ifdef __cplusplus
}
#endif

#endif
