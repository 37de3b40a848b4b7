/* cuda.h — the CUDA backend: backend.h's operations on one NVIDIA GPU, and
 * the device sampler (mask + sample for many rows in one launch).
 *
 * Plain C; no CUDA type appears here, so callers need no CUDA headers. The
 * backend exists only in builds configured with CUDA (CMake sets
 * SV_HAVE_CUDA and links sievebackend with kernels/ as sievekernels); src/cli/device.h picks a backend at run
 * time for builds with or without it.
 *
 * Memory from ops->alloc is device memory (cudaMalloc): the caller may not
 * dereference it, only pass it to the ops and copy with upload / download.
 * Operations are enqueued on one stream in call order; upload, download and
 * sv_cuda_sync block until the stream is idle.
 *
 * Errors. Shapes a caller should never pass are SV_ERR_ARG at the call, as
 * on the CPU backend. Indices the kernels read from device memory (token
 * ids, positions, block tables) cannot be checked when the call is made:
 * a kernel meeting a bad one skips that access (nothing out of bounds is
 * read or written) and records it, and the next download or sv_cuda_sync
 * returns SV_ERR_ARG naming the operation. A failing allocation is
 * SV_ERR_NOMEM; any other failure of the CUDA runtime or cuBLAS is
 * SV_ERR_IO with the runtime's message. Nothing aborts.
 *
 * Differences from the CPU backend, all within the tolerances tests/gpu/
 * states (for fp32 mode; bf16 mode, sv_cuda_config_t, rounds more):
 * - gemm is cuBLAS fp32 (no TF32): its reduction order is cuBLAS's and may
 *   change with the number of rows, so the CUDA backend is NOT
 *   batch-invariant bit for bit (a row's logits may differ in the last
 *   bits between batch sizes);
 * - RMSNorm and attention add in a different (still fixed) order, and
 *   expf is the device's;
 * - kv_write: when two rows of one call name the same physical row, which
 *   row's values stay is unspecified (backend.h promises the last one's;
 *   the forward pass never does this).
 *
 * Threads: one thread at a time per backend, as for the CPU backend. */
#ifndef SV_BACKEND_CUDA_H
#define SV_BACKEND_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

typedef struct sv_cuda_config {
    int device; /* CUDA device index, 0 .. sv_cuda_device_count() - 1 */
    /* Weights in bf16 (the model converts them at load: ops->weight_qtype)
     * and the products on tensor cores (cublasGemmEx, bf16 inputs, fp32
     * accumulation and output): half the bytes a decode step reads. The
     * activations are rounded to bf16 before each product, so logits
     * differ from fp32's by about bf16's precision. false: fp32 (no TF32),
     * within fp32 rounding of the CPU backend. */
    bool bf16;
} sv_cuda_config_t;

/* Number of CUDA devices this process can use: 0 when there is none, no
 * driver, or a driver too old for this build (never an error). */
int sv_cuda_device_count(void);

/* Creates a CUDA backend on cfg->device (cfg NULL: device 0): a stream, a
 * cuBLAS handle and a device word for kernel-side index errors. Errors:
 * SV_ERR_ARG (no such device), SV_ERR_NOMEM, SV_ERR_IO (the runtime or
 * cuBLAS failed to start; the message says why). On success *out is
 * destroyed with sv_backend_destroy. */
sv_status sv_cuda_backend_create(const sv_cuda_config_t *cfg, sv_backend_t **out,
                                 sv_error_t *err);

/* True when be is a CUDA backend. */
bool sv_backend_is_cuda(const sv_backend_t *be);

/* Waits for every enqueued operation and reports the first error a kernel
 * recorded since the last synchronisation (see "Errors"). */
sv_status sv_cuda_sync(sv_backend_t *be, sv_error_t *err);

/* The device's name and memory, for logs: name (at most name_len bytes,
 * NUL-terminated), free and total bytes. */
/* Step graphs so far (docs/cuda.md, "Decode steps as CUDA graphs"): steps
 * that opened one (decode steps: one row a sequence), of them replayed
 * and captured (the rest ran eagerly: met once, or graphs off). Steps of
 * other shapes (prefill chunks, jump-forward extends) open none. be must
 * be a CUDA backend. */
typedef struct sv_cuda_graph_stats {
    uint64_t opened, replayed, captured;
} sv_cuda_graph_stats_t;
void sv_cuda_graph_stats(const sv_backend_t *be, sv_cuda_graph_stats_t *st);

sv_status sv_cuda_device_info(sv_backend_t *be, char *name, size_t name_len, size_t *free_b,
                              size_t *total_b, sv_error_t *err);

/* ---- the device sampler ---------------------------------------------------------- */

#define SV_CUDA_SAMPLE_MAX_LOGPROBS 20

/* One row's sampling parameters, with src/engine/sample.h's meanings:
 * temperature 0 is greedy (argmax, lowest id on ties), else weights
 * exp((l - max) / temperature) truncated by top-k (0 off), top-p (1 off)
 * and min-p (0 off) in that order, each acting on what the previous left,
 * ties in the (logit descending, id ascending) order. Logprobs are those of
 * the masked distribution before temperature and truncation, as on the
 * CPU. Logit bias and penalties are not applied here: fold them into the
 * logits first. */
typedef struct sv_cuda_sample_params {
    float temperature;  /* [0, 2] */
    float top_p;        /* (0, 1] */
    float min_p;        /* [0, 1] */
    int32_t top_k;      /* >= 0 */
    int32_t n_logprobs; /* 0 .. SV_CUDA_SAMPLE_MAX_LOGPROBS */
    int32_t mask;       /* slot of the sampler's mask table, or -1 for no mask */
    uint64_t draw;      /* one 64-bit random draw (ignored when greedy): the
                           caller's seeded generator, e.g. sv_rng_next */
} sv_cuda_sample_params_t;

/* One row's result. */
typedef struct sv_cuda_sample_out {
    int32_t id;         /* the chosen token, or -1 when status is not SV_OK */
    int32_t status;     /* SV_OK; SV_ERR_EMPTY: no allowed token has a finite
                           logit; SV_ERR_ARG: an allowed logit is NaN or +inf,
                           or the row's mask slot is outside the table */
    float logprob;      /* the chosen token's, when n_logprobs > 0 */
    int32_t n_top;      /* entries in top_*: min(n_logprobs, allowed finite tokens) */
    int32_t top_id[SV_CUDA_SAMPLE_MAX_LOGPROBS];
    float top_logprob[SV_CUDA_SAMPLE_MAX_LOGPROBS]; /* descending, ties: lower id first */
} sv_cuda_sample_out_t;

/* The draw. Given u = (draw >> 11) * 2^-53, the token chosen is the first,
 * in id order, at which the running sum of the surviving weights passes
 * u * (their total): the CPU sampler walks its candidates in a different
 * order, so the same draw may choose a different token, but every token's
 * probability is the CPU's (tests/gpu/test_sample.c checks both). */

typedef struct sv_cuda_sampler sv_cuda_sampler_t;

/* A sampler for up to max_rows rows of vocab logits, with a device table
 * of max_masks masks ((vocab + 31) / 32 words each), allocated here. be is
 * borrowed (a CUDA backend) and must outlive the sampler. Errors:
 * SV_ERR_ARG (not a CUDA backend, sizes < 1), SV_ERR_NOMEM. On success
 * *out is freed with sv_cuda_sampler_destroy. */
sv_status sv_cuda_sampler_create(sv_backend_t *be, int32_t max_rows, int32_t vocab,
                                 int32_t max_masks, sv_cuda_sampler_t **out, sv_error_t *err);
void sv_cuda_sampler_destroy(sv_cuda_sampler_t *s);

/* Starts a step: masks looked up from here on are pinned until the next
 * call, so a step never evicts a mask one of its rows uses. */
void sv_cuda_sampler_begin_step(sv_cuda_sampler_t *s);

/* The table slot holding the mask named (key_hi, key_lo) (a caller's name
 * for a distinct mask, e.g. sv_matcher_mask_key's): found, or uploaded from
 * mask_host ((vocab + 31) / 32 words, bits past vocab ignored) into a free
 * or least recently used slot. Each distinct mask is uploaded once while
 * it stays in the table. SV_ERR_BUDGET when every slot is pinned by the
 * current step. */
sv_status sv_cuda_sampler_mask_slot(sv_cuda_sampler_t *s, uint64_t key_hi, uint64_t key_lo,
                                    const uint32_t *mask_host, int32_t *slot, sv_error_t *err);

/* Samples rows (<= max_rows) rows of logits (backend memory, (rows,
 * vocab), not modified) with params (host, rows) into out (host, rows).
 * Blocks until done. The call's status is SV_OK when the launch ran; each
 * row carries its own status. */
sv_status sv_cuda_sample(sv_cuda_sampler_t *s, int32_t rows, const float *logits,
                         const sv_cuda_sample_params_t *params, sv_cuda_sample_out_t *out,
                         sv_error_t *err);

#endif
