/* cuda.c — the CUDA backend: backend.h's vtable over one stream, cuBLAS for
 * the products and kernels/ for everything else; and the device sampler.
 *
 * The products. y = x · Wᵀ with x (rows, in) and W (out, in) row-major is,
 * read column-major, Yᵀ (out, rows) = W' · X' where W' is W seen as an
 * (in, out) column-major matrix, transposed (CUBLAS_OP_T), and X' is x
 * seen as (in, rows) column-major: one cublasSgemm with m = out, n = rows,
 * k = in and leading dimensions in, in, out. The handle's math mode is
 * CUBLAS_DEFAULT_MATH, so fp32 stays fp32 (no TF32 rounding of the inputs)
 * and the results compare with the CPU backend's to fp32 rounding.
 *
 * bf16 mode (sv_cuda_config_t.bf16). Weights are bf16 in device memory
 * (ops->weight_qtype asks the model to convert them at load) and read by
 * gemm_q: the activations are rounded to bf16 into a scratch buffer
 * (XBF_ELEMS values, so a product of more rows runs in row groups), then
 * one cublasGemmEx with bf16 inputs, fp32 accumulation (CUBLAS_COMPUTE_32F)
 * and fp32 output runs on the tensor cores. The embedding table is read by
 * get_rows_q, widened exactly. Products of at most SV_K_GEMV_MAX_ROWS rows
 * (a decode step's) run kernels/gemv.cu's matrix-vector kernel instead of
 * cuBLAS, on the same bf16 inputs.
 *
 * Step graphs (backend.h's graph_begin). The first step of an (owner, key)
 * runs eagerly and is remembered; the second is captured from the stream
 * (cudaStreamBeginCapture, thread-local mode) into a CUDA graph,
 * instantiated and launched; a later step of the same
 * (owner, key) runs no operation (each returns after its argument checks)
 * and graph_end launches the graph instead: one launch for the hundreds of
 * kernels and products of a decode step. MAX_GRAPHS are kept, the least
 * recently used replaced. Where capture is refused (the CPU emulation), or
 * SV_CUDA_GRAPHS=0 is in the environment (to measure or rule them out), the
 * step runs eagerly. cuBLAS gets a fixed workspace (cublasSetWorkspace) so
 * that a captured product never allocates.
 *
 * Scratch. Besides the activation buffer, ATT_PART_FLOATS floats hold the
 * partial results of split-K attention and ATT_COUNTS its counters
 * (kernels/attention.cu). All are allocated with the backend, so no
 * operation allocates.
 *
 * Errors from kernels. A kernel that meets a bad index (backend.h's
 * promises that the CPU backend checks before it runs) writes a code into
 * the device word `flag` and skips the access. The host reads the word at
 * every synchronisation (download, sv_cuda_sync), resets it, and reports
 * the first code as SV_ERR_ARG. An error is therefore reported at the next
 * synchronisation after the operation, not by the operation's own call;
 * the forward pass downloads its logits at the end of each step, so a step
 * with a bad index fails as a whole.
 *
 * Nothing here aborts: every runtime and cuBLAS call's result becomes a
 * status (cuda_status / blas_status) whose message names the call. */
#include "cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

#define XBF_ELEMS ((size_t)16 << 20)       /* bf16 activations: 32 MB */
#define ATT_PART_FLOATS ((size_t)16 << 20) /* split-K partials: 64 MB */
#define ATT_COUNTS ((size_t)1 << 20)       /* split-K counters, one per (row, head): 4 MB */
#define BLAS_WORKSPACE ((size_t)32 << 20)  /* cuBLAS's, fixed for capture */
#define MAX_GRAPHS 64
#define MAX_SEEN 256 /* keys met once, not yet captured (a ring) */

typedef struct seen_ent {
    const void *owner;
    uint64_t key;
} seen_ent_t;

typedef enum { STEP_EAGER = 0, STEP_CAPTURE, STEP_REPLAY } step_mode;

typedef struct graph_ent {
    const void *owner; /* NULL: free */
    uint64_t key;
    cudaGraphExec_t exec;
    uint64_t used; /* the step count at its last use */
} graph_ent_t;

typedef struct cuda_backend {
    sv_backend_t base; /* must be first */
    int device;
    bool bf16;
    cudaStream_t stream;
    cublasHandle_t blas;
    int32_t *flag;     /* device word: the first kernel-side index error (SV_KFLAG_*) */
    uint16_t *xbf;     /* device (XBF_ELEMS): activations rounded to bf16; bf16 mode only */
    uint16_t *xbf_alt; /* device (XBF_ELEMS): the other buffer, for an operation that reads
                        * xbf and writes its output's rounding (cu_gemm_q_swiglu), after
                        * which the two swap */
    /* xbf holds x's first xbf_n values, rounded, while xbf_src == x: no
     * operation other than gemm_q has run since (bind() clears it), so q,
     * k and v (gate and up) round their shared input once. */
    const float *xbf_src;
    size_t xbf_n;
    float *att_part;   /* device (ATT_PART_FLOATS): split-K attention partials */
    int32_t *att_count; /* device (ATT_COUNTS): split-K counters, zero between launches */
    void *blas_ws;     /* device (BLAS_WORKSPACE) */
    /* step graphs */
    step_mode mode;
    bool no_graphs;    /* SV_CUDA_GRAPHS=0 in the environment: every step eager */
    int32_t gemv_rows; /* SV_CUDA_GEMV_ROWS (0 .. SV_K_GEMV_MAX_ROWS): the matrix-vector
                          kernel's row limit for every product; -1: gemv_fits's rule */
    bool in_step;      /* between graph_begin and graph_end / graph_abort */
    int32_t cur;       /* STEP_REPLAY: the graph being replayed */
    const void *cap_owner;
    uint64_t cap_key, steps;
    uint64_t n_replayed, n_captured; /* sv_cuda_graph_stats */
    graph_ent_t graphs[MAX_GRAPHS];
    seen_ent_t seen[MAX_SEEN];
    int32_t seen_next;
} cuda_backend_t;

static cuda_backend_t *cb(sv_backend_t *be) { return (cuda_backend_t *)be; }

/* SV_ERR_NOMEM for an allocation failure, SV_ERR_IO for anything else. */
static sv_status cuda_status(cudaError_t e, const char *what, sv_error_t *err) {
    if (e == cudaSuccess)
        return SV_OK;
    /* Clear a sticky-free error so the next call does not see it again. */
    (void)cudaGetLastError();
    return sv_error_set(err, e == cudaErrorMemoryAllocation ? SV_ERR_NOMEM : SV_ERR_IO, -1,
                        "cuda: %s: %s", what, cudaGetErrorString(e));
}

static const char *blas_name(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "unknown status";
    }
}

static sv_status blas_status(cublasStatus_t s, const char *what, sv_error_t *err) {
    if (s == CUBLAS_STATUS_SUCCESS)
        return SV_OK;
    return sv_error_set(err, s == CUBLAS_STATUS_ALLOC_FAILED ? SV_ERR_NOMEM : SV_ERR_IO, -1,
                        "cublas: %s: %s (%d)", what, blas_name(s), (int)s);
}

static const char *flag_text(int32_t code) {
    switch (code) {
    case SV_KFLAG_GET_ROWS_ID: return "get_rows: an id outside the table";
    case SV_KFLAG_KV_POS: return "kv_write: a position outside the cache or its block table";
    case SV_KFLAG_KV_SEQ: return "kv_write/attention: a bad sequence index or table offsets";
    case SV_KFLAG_KV_BLOCK: return "kv_write/attention: a block table entry outside the cache";
    case SV_KFLAG_ATTN_POS: return "attention: a position outside the cache or its block table";
    default: return "an unknown kernel error";
    }
}

/* Makes c's device the calling thread's current one: a backend created on
 * one thread may be used from another (the engine thread), whose current
 * device is 0 until set. Cheap when it already is. */
static sv_status bind(cuda_backend_t *c, sv_error_t *err) {
    int cur = -1;
    c->xbf_src = NULL; /* an operation is about to run: the rounded copy may go stale */
    if (cudaGetDevice(&cur) == cudaSuccess && cur == c->device)
        return SV_OK;
    return cuda_status(cudaSetDevice(c->device), "set device", err);
}

/* Records that xbf holds p's first n values rounded to bf16 (bind() forgets it). */
static void xbf_holds(cuda_backend_t *c, const float *p, size_t n) {
    c->xbf_src = p;
    c->xbf_n = n;
}

/* True when a step graph is being replayed: operations have nothing to do. */
static bool replaying(const cuda_backend_t *c) { return c->mode == STEP_REPLAY; }

/* Transfers cannot be part of a step graph. */
static sv_status no_step(const cuda_backend_t *c, const char *what, sv_error_t *err) {
    if (!c->in_step)
        return SV_OK;
    return sv_error_set(err, SV_ERR_ARG, -1, "cuda backend: %s inside a graph step", what);
}

/* Waits for the stream, then reads and resets the flag. */
static sv_status sync_and_check(cuda_backend_t *c, sv_error_t *err) {
    int32_t code = 0;
    sv_status st;
    if ((st = cuda_status(cudaMemcpyAsync(&code, c->flag, sizeof code, cudaMemcpyDeviceToHost,
                                          c->stream),
                          "reading the error flag", err)) ||
        (st = cuda_status(cudaStreamSynchronize(c->stream), "stream synchronize", err)))
        return st;
    if (code == 0)
        return SV_OK;
    if ((st = cuda_status(cudaMemsetAsync(c->flag, 0, sizeof(int32_t), c->stream),
                          "resetting the error flag", err)))
        return st;
    return sv_error_set(err, SV_ERR_ARG, -1, "cuda backend: %s (found at synchronisation)",
                        flag_text(code));
}

/* ---- memory ------------------------------------------------------------------- */

static sv_status cu_alloc(sv_backend_t *be, size_t bytes, void **out, sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st)
        return st;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 64); /* 256-byte aligned */
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return sv_error_set(err, e == cudaErrorMemoryAllocation ? SV_ERR_NOMEM : SV_ERR_IO, -1,
                            "cuda backend: cannot allocate %zu bytes: %s", bytes,
                            cudaGetErrorString(e));
    }
    *out = p;
    return SV_OK;
}

static void cu_free(sv_backend_t *be, void *p) {
    if (p && bind(cb(be), NULL) == SV_OK)
        (void)cudaFree(p); /* an error here has no caller to go to; cudaFree syncs */
}

static sv_status cu_upload(sv_backend_t *be, void *dst, const void *src_host, size_t bytes,
                           sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    if (!bytes)
        return SV_OK;
    sv_status st = no_step(c, "upload", err);
    if (st || (st = bind(c, err)))
        return st;
    st = cuda_status(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, c->stream),
                     "upload", err);
    if (st)
        return st;
    return cuda_status(cudaStreamSynchronize(c->stream), "upload (synchronize)", err);
}

static sv_status cu_download(sv_backend_t *be, void *dst_host, const void *src, size_t bytes,
                             sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    sv_status st = no_step(c, "download", err);
    if (st || (st = bind(c, err)))
        return st;
    if (bytes) {
        st = cuda_status(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, c->stream),
                         "download", err);
        if (st)
            return st;
    }
    return sync_and_check(c, err);
}

static sv_status cu_copy(sv_backend_t *be, void *dst, const void *src, size_t bytes,
                         sv_error_t *err) {
    if (!bytes)
        return SV_OK;
    sv_status st = no_step(cb(be), "copy", err);
    if (st || (st = bind(cb(be), err)))
        return st;
    return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cb(be)->stream),
                       "copy", err);
}

/* ---- operations --------------------------------------------------------------- */

static sv_status cu_gemm(sv_backend_t *be, int32_t rows, int32_t in, int32_t out, const float *x,
                         const float *w, const float *bias, float *y, sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    if (rows < 0 || in <= 0 || out <= 0 || !x || !w || !y)
        return sv_error_set(err, SV_ERR_ARG, -1, "gemm: bad arguments (rows %d, in %d, out %d)",
                            (int)rows, (int)in, (int)out);
    if (rows == 0)
        return SV_OK;
    const float one = 1.0f, zero = 0.0f;
    sv_status st = bind(c, err);
    if (st || replaying(c))
        return st;
    st = blas_status(cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one, w, in, x,
                                 in, &zero, y, out),
                     "sgemm", err);
    if (st || !bias)
        return st;
    return sv_k_add_bias(c->stream, rows, out, y, bias, err);
}

/* Whether a bf16 product of rows rows runs kernels/gemv.cu: a decode
 * step's few rows, in a multiple of 8, 16-byte aligned weights. The row
 * limit is where cuBLAS overtook the kernel on an H200 (BENCHMARKS.md,
 * "gemv crossover"): at 4 rows on the 1B shape (matrices of 1M to 16M
 * weights), past 8 on the 135M shape (at most 0.9M): 8 rows for matrices
 * of at most GEMV_SMALL weights, else 2. SV_CUDA_GEMV_ROWS sets one limit
 * for every matrix instead (to measure). */
#define GEMV_SMALL (1 << 21)
static bool gemv_fits(const cuda_backend_t *c, int32_t rows, int32_t in, int32_t out,
                      const void *w) {
    int32_t lim = c->gemv_rows >= 0                       ? c->gemv_rows
                  : (int64_t)in * out <= GEMV_SMALL ? SV_K_GEMV_MAX_ROWS
                                                          : 2;
    return rows <= lim && in % 8 == 0 && ((uintptr_t)w & 15) == 0;
}

/* Makes xbf hold x (rows, in) rounded, unless it already does (`held`,
 * decided before bind() forgot it). */
static sv_status xbf_load(cuda_backend_t *c, bool held, int32_t rows, int32_t in, const float *x,
                          sv_error_t *err) {
    size_t n = (size_t)rows * (size_t)in;
    if (held)
        return SV_OK;
    return sv_k_to_bf16(c->stream, n, x, c->xbf, err);
}

/* Whether xbf holds x's n values: read before bind(). */
static bool xbf_has(const cuda_backend_t *c, const float *x, size_t n) {
    return c->xbf_src == x && c->xbf_n == n && n <= XBF_ELEMS;
}

/* After a product of x (n values) into y (m values): xbf still holds x
 * unless y overlapped it. */
static void xbf_keep(cuda_backend_t *c, const float *x, size_t n, const float *y, size_t m) {
    const char *xb = (const char *)x, *yb = (const char *)y;
    if (n <= XBF_ELEMS && !(yb < xb + n * sizeof(float) && xb < yb + m * sizeof(float)))
        xbf_holds(c, x, n);
}

static sv_status gemm_q_check(const cuda_backend_t *c, int32_t rows, int32_t in, int32_t out,
                              const float *x, const void *w, sv_qtype t, float *y,
                              sv_error_t *err) {
    if (rows < 0 || in <= 0 || out <= 0 || !x || !w || !y)
        return sv_error_set(err, SV_ERR_ARG, -1, "gemm_q: bad arguments (rows %d, in %d, out %d)",
                            (int)rows, (int)in, (int)out);
    if (t != SV_QT_BF16 || !c->xbf)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "gemm_q: the CUDA backend reads bf16 weights only, in bf16 mode");
    if ((size_t)in > XBF_ELEMS)
        return sv_error_set(err, SV_ERR_ARG, -1, "gemm_q: in %d is too large", (int)in);
    return SV_OK;
}

/* gemm with w in bf16 (bf16 mode): x rounded to bf16 (in row groups of
 * the scratch), then cublasGemmEx as in cu_gemm; at most
 * SV_K_GEMV_MAX_ROWS rows: kernels/gemv.cu. */
static sv_status cu_gemm_q(sv_backend_t *be, int32_t rows, int32_t in, int32_t out,
                           const float *x, const void *w, sv_qtype t, const float *bias, float *y,
                           sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    sv_status st = gemm_q_check(c, rows, in, out, x, w, t, y, err);
    if (st || rows == 0)
        return st;
    const float one = 1.0f, zero = 0.0f;
    size_t n_in = (size_t)rows * (size_t)in;
    bool have = xbf_has(c, x, n_in);
    if ((st = bind(c, err)) || replaying(c))
        return st;
    if (gemv_fits(c, rows, in, out, w)) {
        const sv_k_gemv_seg_t seg = {(const uint16_t *)w, bias, y, out};
        if ((st = xbf_load(c, have, rows, in, x, err)) ||
            (st = sv_k_gemv_bf16_n(c->stream, rows, in, 1, &seg, c->xbf, err)))
            return st;
        xbf_keep(c, x, n_in, y, (size_t)rows * out);
        return SV_OK;
    }
    size_t group = XBF_ELEMS / (size_t)in; /* >= 1 (gemm_q_check) */
    have = have && (size_t)rows <= group;
    for (int32_t r0 = 0; r0 < rows; r0 += (int32_t)group) {
        int32_t n = (size_t)(rows - r0) < group ? rows - r0 : (int32_t)group;
        if ((!have && (st = sv_k_to_bf16(c->stream, (size_t)n * (size_t)in,
                                         x + (size_t)r0 * in, c->xbf, err))) ||
            (st = blas_status(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one,
                                           w, CUDA_R_16BF, in, c->xbf, CUDA_R_16BF, in, &zero,
                                           y + (size_t)r0 * out, CUDA_R_32F, out,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                              "gemm (bf16)", err)))
            return st;
    }
    if ((size_t)rows <= group)
        xbf_keep(c, x, n_in, y, (size_t)rows * out);
    if (!bias)
        return SV_OK;
    return sv_k_add_bias(c->stream, rows, out, y, bias, err);
}

/* backend.h's gemm_q_n: one launch of kernels/gemv.cu when every product
 * fits it, else gemm_q after gemm_q. */
static sv_status cu_gemm_q_n(sv_backend_t *be, int32_t rows, int32_t in, int32_t n,
                             const int32_t *outs, const float *x, const void *const *ws,
                             sv_qtype t, const float *const *biases, float *const *ys,
                             sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    if (n < 1 || n > 4 || !outs || !ws || !ys)
        return sv_error_set(err, SV_ERR_ARG, -1, "gemm_q_n: bad arguments (%d products)", (int)n);
    bool fits = true;
    sv_k_gemv_seg_t seg[4];
    sv_status st;
    for (int32_t k = 0; k < n; k++) {
        if ((st = gemm_q_check(c, rows, in, outs[k], x, ws[k], t, ys[k], err)))
            return st;
        fits = fits && gemv_fits(c, rows, in, outs[k], ws[k]);
        seg[k] = (sv_k_gemv_seg_t){(const uint16_t *)ws[k], biases ? biases[k] : NULL, ys[k],
                                   outs[k]};
    }
    if (!fits) {
        for (int32_t k = 0; k < n; k++)
            if ((st = cu_gemm_q(be, rows, in, outs[k], x, ws[k], t, biases ? biases[k] : NULL,
                                ys[k], err)))
                return st;
        return SV_OK;
    }
    if (rows == 0)
        return SV_OK;
    size_t n_in = (size_t)rows * (size_t)in;
    bool have = xbf_has(c, x, n_in);
    if ((st = bind(c, err)) || replaying(c))
        return st;
    if ((st = xbf_load(c, have, rows, in, x, err)) ||
        (st = sv_k_gemv_bf16_n(c->stream, rows, in, n, seg, c->xbf, err)))
        return st;
    bool keep = true;
    for (int32_t k = 0; k < n; k++) {
        const char *xb = (const char *)x, *yb = (const char *)ys[k];
        keep = keep && !(yb < xb + n_in * sizeof(float) &&
                         xb < yb + (size_t)rows * outs[k] * sizeof(float));
    }
    if (keep)
        xbf_holds(c, x, n_in);
    return SV_OK;
}

/* backend.h's gemm_q_swiglu: kernels/gemv.cu's fused kernel when the
 * products fit it, its bf16 output written into the other activation
 * buffer (the kernel reads x's rounding from xbf), which then becomes
 * xbf; else gemm_q, gemm_q, swiglu. */
static sv_status cu_swiglu(sv_backend_t *be, size_t n, const float *gate, const float *up,
                           float *out, sv_error_t *err);
static sv_status cu_gemm_q_swiglu(sv_backend_t *be, int32_t rows, int32_t in, int32_t out,
                                  const float *x, const void *wg, const void *wu, sv_qtype t,
                                  float *gate, float *up, sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    sv_status st;
    if ((st = gemm_q_check(c, rows, in, out, x, wg, t, gate, err)) ||
        (st = gemm_q_check(c, rows, in, out, x, wu, t, up, err)))
        return st;
    if (!gemv_fits(c, rows, in, out, wg) || !gemv_fits(c, rows, in, out, wu)) {
        if ((st = cu_gemm_q(be, rows, in, out, x, wg, t, NULL, gate, err)) ||
            (st = cu_gemm_q(be, rows, in, out, x, wu, t, NULL, up, err)))
            return st;
        return cu_swiglu(be, (size_t)rows * (size_t)out, gate, up, gate, err);
    }
    if (rows == 0)
        return SV_OK;
    size_t n_in = (size_t)rows * (size_t)in, n_out = (size_t)rows * (size_t)out;
    bool have = xbf_has(c, x, n_in);
    if ((st = bind(c, err)) || replaying(c))
        return st;
    uint16_t *obf = n_out <= XBF_ELEMS ? c->xbf_alt : NULL;
    if ((st = xbf_load(c, have, rows, in, x, err)) ||
        (st = sv_k_gemv_swiglu_bf16(c->stream, rows, in, out, c->xbf, (const uint16_t *)wg,
                                    (const uint16_t *)wu, gate, obf, err)))
        return st;
    if (obf) {
        c->xbf_alt = c->xbf;
        c->xbf = obf;
        xbf_holds(c, gate, n_out);
    }
    return SV_OK;
}

static sv_status cu_get_rows_q(sv_backend_t *be, int32_t rows, int32_t dim, int32_t n_table,
                               const void *table, sv_qtype t, const int32_t *ids, float *out,
                               sv_error_t *err) {
    if (t != SV_QT_BF16)
        return sv_error_set(err, SV_ERR_ARG, -1, "get_rows_q: the CUDA backend reads bf16 only");
    sv_status st = bind(cb(be), err);
    if (st || replaying(cb(be)))
        return st;
    return sv_k_get_rows_bf16(cb(be)->stream, rows, dim, n_table, (const uint16_t *)table, ids,
                              out, cb(be)->flag, err);
}

static bool cu_reads_q(sv_backend_t *be, sv_qtype t) { return cb(be)->bf16 && t == SV_QT_BF16; }

static sv_qtype cu_weight_qtype(sv_backend_t *be) {
    return cb(be)->bf16 ? SV_QT_BF16 : (sv_qtype)0;
}

/* In bf16 mode an operation whose output feeds products (RMSNorm, SwiGLU)
 * writes its bf16 rounding into xbf as well, and gemm_q finds it there:
 * the product's input needs no conversion of its own. */
static uint16_t *xbf_for(cuda_backend_t *c, size_t n) {
    return c->bf16 && n <= XBF_ELEMS ? c->xbf : NULL;
}

static sv_status cu_rmsnorm(sv_backend_t *be, int32_t rows, int32_t dim, const float *x,
                            const float *w, float eps, float *y, sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    sv_status st = bind(c, err);
    if (st || replaying(c))
        return st;
    size_t n = rows > 0 && dim > 0 ? (size_t)rows * (size_t)dim : 0;
    uint16_t *ybf = xbf_for(c, n);
    if ((st = sv_k_rmsnorm(c->stream, rows, dim, x, w, eps, y, ybf, err)))
        return st;
    if (ybf && n)
        xbf_holds(c, y, n);
    return SV_OK;
}

static sv_status cu_rope(sv_backend_t *be, int32_t rows, int32_t n_heads, int32_t head_dim,
                         int32_t rot_dim, sv_rope_style style, const int32_t *pos,
                         const float *inv_freq, float *x, sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st || replaying(cb(be)))
        return st;
    return sv_k_rope(cb(be)->stream, rows, n_heads, head_dim, rot_dim, style, pos, inv_freq, x,
                     err);
}

static sv_status cu_kv_write(sv_backend_t *be, const sv_kv_view_t *kv, int32_t rows,
                             const int32_t *pos, const float *k, const float *v, sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st || replaying(cb(be)))
        return st;
    return sv_k_kv_write(cb(be)->stream, kv, rows, pos, k, v, cb(be)->flag, err);
}

/* The attention output is the wo product's input: in bf16 mode it is
 * written rounded into xbf too. */
static sv_status cu_attention(sv_backend_t *be, const sv_kv_view_t *kv, const sv_attn_shape_t *sh,
                              int32_t rows, const int32_t *pos, const float *q, float *out,
                              sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    if (sh && sh->window)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "cuda attention: sliding-window layers are not implemented (the CPU backend has them)");
    sv_status st = bind(c, err);
    if (st || replaying(c))
        return st;
    size_t n = rows > 0 && sh && sh->n_heads > 0 && sh->head_dim > 0
                   ? (size_t)rows * (size_t)sh->n_heads * (size_t)sh->head_dim
                   : 0;
    uint16_t *obf = xbf_for(c, n);
    const sv_k_attn_scratch_t scratch = {c->att_part, ATT_PART_FLOATS, c->att_count, ATT_COUNTS};
    if ((st = sv_k_attention(c->stream, kv, sh, rows, pos, q, out, obf, &scratch, c->flag, err)))
        return st;
    if (obf && n)
        xbf_holds(c, out, n);
    return SV_OK;
}

static sv_status cu_add_rmsnorm(sv_backend_t *be, int32_t rows, int32_t dim, float *x,
                                const float *d, const float *w, float eps, float *y,
                                sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    sv_status st = bind(c, err);
    if (st || replaying(c))
        return st;
    size_t n = rows > 0 && dim > 0 ? (size_t)rows * (size_t)dim : 0;
    uint16_t *ybf = xbf_for(c, n);
    if ((st = sv_k_add_rmsnorm(c->stream, rows, dim, x, d, w, eps, y, ybf, err)))
        return st;
    if (ybf && n)
        xbf_holds(c, y, n);
    return SV_OK;
}

static sv_status cu_rope_kv_write(sv_backend_t *be, const sv_kv_view_t *kv,
                                  const sv_attn_shape_t *sh, int32_t rows, int32_t rot_dim,
                                  sv_rope_style style, const int32_t *pos, const float *inv_freq,
                                  float *q, float *k, const float *v, sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    sv_status st = bind(c, err);
    if (st || replaying(c))
        return st;
    return sv_k_rope_kv_write(c->stream, kv, sh, rows, rot_dim, style, pos, inv_freq, q, k, v,
                              c->flag, err);
}

static sv_status cu_swiglu(sv_backend_t *be, size_t n, const float *gate, const float *up,
                           float *out, sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    sv_status st = bind(c, err);
    if (st || replaying(c))
        return st;
    uint16_t *obf = xbf_for(c, n);
    if ((st = sv_k_swiglu(c->stream, n, gate, up, out, obf, err)))
        return st;
    if (obf && n)
        xbf_holds(c, out, n);
    return SV_OK;
}

static sv_status cu_add(sv_backend_t *be, size_t n, float *y, const float *x, sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st || replaying(cb(be)))
        return st;
    return sv_k_add(cb(be)->stream, n, y, x, err);
}

static sv_status cu_get_rows(sv_backend_t *be, int32_t rows, int32_t dim, int32_t n_table,
                             const float *table, const int32_t *ids, float *out,
                             sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st || replaying(cb(be)))
        return st;
    return sv_k_get_rows(cb(be)->stream, rows, dim, n_table, table, ids, out, cb(be)->flag, err);
}

/* ---- step graphs -------------------------------------------------------------- */

static void graph_drop(graph_ent_t *g) {
    if (g->owner)
        (void)cudaGraphExecDestroy(g->exec);
    *g = (graph_ent_t){0};
}

static sv_status cu_graph_begin(sv_backend_t *be, const void *owner, uint64_t key,
                                sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    if (c->in_step || !owner)
        return sv_error_set(err, SV_ERR_ARG, -1, "graph_begin: %s",
                            c->in_step ? "a step is already open" : "no owner");
    sv_status st = bind(c, err);
    if (st)
        return st;
    c->steps++;
    c->in_step = true;
    if (c->no_graphs) {
        c->mode = STEP_EAGER;
        return SV_OK;
    }
    for (int32_t i = 0; i < MAX_GRAPHS; i++)
        if (c->graphs[i].owner == owner && c->graphs[i].key == key) {
            c->graphs[i].used = c->steps;
            c->mode = STEP_REPLAY;
            c->cur = i;
            return SV_OK;
        }
    /* A key met for the first time runs eagerly and is remembered; it is
     * captured when met again. A step whose batch changes every time (a
     * busy server's churn) then never pays for a capture it cannot reuse. */
    bool again = false;
    for (int32_t i = 0; i < MAX_SEEN && !again; i++)
        again = c->seen[i].owner == owner && c->seen[i].key == key;
    if (!again) {
        c->seen[c->seen_next] = (seen_ent_t){owner, key};
        c->seen_next = (c->seen_next + 1) % MAX_SEEN;
        c->mode = STEP_EAGER;
        return SV_OK;
    }
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) { /* no capture here: run the step as it comes */
        (void)cudaGetLastError();
        c->mode = STEP_EAGER;
        return SV_OK;
    }
    c->mode = STEP_CAPTURE;
    c->cap_owner = owner;
    c->cap_key = key;
    return SV_OK;
}

static void cu_graph_abort(sv_backend_t *be) {
    cuda_backend_t *c = cb(be);
    if (c->mode == STEP_CAPTURE && bind(c, NULL) == SV_OK) {
        cudaGraph_t g = NULL;
        if (cudaStreamEndCapture(c->stream, &g) == cudaSuccess && g)
            (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
    }
    c->mode = STEP_EAGER;
    c->in_step = false;
}

static sv_status cu_graph_end(sv_backend_t *be, sv_error_t *err) {
    cuda_backend_t *c = cb(be);
    if (!c->in_step)
        return sv_error_set(err, SV_ERR_ARG, -1, "graph_end: no step is open");
    step_mode mode = c->mode;
    c->mode = STEP_EAGER;
    c->in_step = false;
    sv_status st = bind(c, err);
    if (st)
        return st;
    if (mode == STEP_EAGER)
        return SV_OK;
    if (mode == STEP_REPLAY) {
        c->n_replayed++;
        return cuda_status(cudaGraphLaunch(c->graphs[c->cur].exec, c->stream), "graph launch",
                           err);
    }
    c->n_captured++;
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    if ((st = cuda_status(cudaStreamEndCapture(c->stream, &g), "end of capture", err)))
        return st;
    st = cuda_status(cudaGraphInstantiate(&exec, g, 0), "graph instantiate", err);
    (void)cudaGraphDestroy(g);
    if (st)
        return st;
    int32_t v = 0; /* a free entry, else the least recently used */
    for (int32_t i = 0; i < MAX_GRAPHS; i++) {
        if (!c->graphs[i].owner) {
            v = i;
            break;
        }
        if (c->graphs[i].used < c->graphs[v].used)
            v = i;
    }
    graph_drop(&c->graphs[v]);
    c->graphs[v] = (graph_ent_t){c->cap_owner, c->cap_key, exec, c->steps};
    return cuda_status(cudaGraphLaunch(exec, c->stream), "graph launch", err);
}

static void cu_graph_forget(sv_backend_t *be, const void *owner) {
    cuda_backend_t *c = cb(be);
    if (bind(c, NULL) != SV_OK)
        return;
    (void)cudaStreamSynchronize(c->stream); /* a launched graph may still run */
    for (int32_t i = 0; i < MAX_GRAPHS; i++)
        if (c->graphs[i].owner == owner)
            graph_drop(&c->graphs[i]);
    for (int32_t i = 0; i < MAX_SEEN; i++)
        if (c->seen[i].owner == owner)
            c->seen[i] = (seen_ent_t){0};
}

static void cu_destroy(sv_backend_t *be) {
    cuda_backend_t *c = cb(be);
    if (!c)
        return;
    (void)bind(c, NULL);
    if (c->in_step)
        cu_graph_abort(be);
    if (c->stream)
        (void)cudaStreamSynchronize(c->stream);
    for (int32_t i = 0; i < MAX_GRAPHS; i++)
        graph_drop(&c->graphs[i]);
    if (c->blas)
        (void)cublasDestroy(c->blas);
    if (c->flag)
        (void)cudaFree(c->flag);
    (void)cudaFree(c->xbf);
    (void)cudaFree(c->xbf_alt);
    (void)cudaFree(c->att_part);
    (void)cudaFree(c->att_count);
    (void)cudaFree(c->blas_ws);
    if (c->stream)
        (void)cudaStreamDestroy(c->stream);
    free(c);
}

static const sv_backend_ops_t cuda_ops = {
    .name = "cuda",
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .copy = cu_copy,
    .gemm = cu_gemm,
    .gemm_q = cu_gemm_q,
    .gemm_q_n = cu_gemm_q_n,
    .gemm_q_swiglu = cu_gemm_q_swiglu,
    .rmsnorm = cu_rmsnorm,
    .rope = cu_rope,
    .kv_write = cu_kv_write,
    .attention = cu_attention,
    .swiglu = cu_swiglu,
    .add = cu_add,
    .get_rows = cu_get_rows,
    .get_rows_q = cu_get_rows_q,
    .reads_q = cu_reads_q,
    .weight_qtype = cu_weight_qtype,
    .graph_begin = cu_graph_begin,
    .graph_end = cu_graph_end,
    .graph_abort = cu_graph_abort,
    .graph_forget = cu_graph_forget,
    .add_rmsnorm = cu_add_rmsnorm,
    .rope_kv_write = cu_rope_kv_write,
    .destroy = cu_destroy,
};

/* ---- the public functions ------------------------------------------------------- */

int sv_cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver, no device: not an error here */
        return 0;
    }
    return n;
}

bool sv_backend_is_cuda(const sv_backend_t *be) { return be && be->ops == &cuda_ops; }

sv_status sv_cuda_backend_create(const sv_cuda_config_t *cfg, sv_backend_t **out,
                                 sv_error_t *err) {
    int dev = cfg ? cfg->device : 0;
    int n = sv_cuda_device_count();
    if (dev < 0 || dev >= n)
        return sv_error_set(err, SV_ERR_ARG, -1, "cuda backend: device %d not found (%d present)",
                            dev, n);
    /* SV_CUDA_GEMV_ROWS: the matrix-vector kernel's row limit, lowered to
     * measure its crossover with cuBLAS (tests/gpu/check.sh). */
    const char *gr = getenv("SV_CUDA_GEMV_ROWS");
    int32_t gemv_rows = -1; /* gemv_fits's rule */
    if (gr && *gr) {
        char *end;
        long v = strtol(gr, &end, 10);
        if (*end || v < 0 || v > SV_K_GEMV_MAX_ROWS)
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "cuda backend: SV_CUDA_GEMV_ROWS=%s is not 0..%d", gr,
                                SV_K_GEMV_MAX_ROWS);
        gemv_rows = (int32_t)v;
    }
    cuda_backend_t *c = calloc(1, sizeof *c);
    if (!c)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "cuda backend: out of memory");
    c->base.ops = &cuda_ops;
    c->device = dev;
    c->bf16 = cfg && cfg->bf16;
    const char *g = getenv("SV_CUDA_GRAPHS");
    c->no_graphs = g && !strcmp(g, "0");
    c->gemv_rows = gemv_rows;
    sv_status st;
    if ((st = cuda_status(cudaSetDevice(dev), "set device", err)) ||
        (st = cuda_status(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                          "stream create", err)) ||
        (st = cuda_status(cudaMalloc((void **)&c->flag, sizeof(int32_t)), "error flag", err)) ||
        (st = cuda_status(cudaMalloc((void **)&c->att_part, ATT_PART_FLOATS * sizeof(float)),
                          "attention scratch", err)) ||
        (st = cuda_status(cudaMalloc((void **)&c->att_count, ATT_COUNTS * sizeof(int32_t)),
                          "attention counters", err)) ||
        (st = cuda_status(cudaMemsetAsync(c->att_count, 0, ATT_COUNTS * sizeof(int32_t),
                                          c->stream),
                          "attention counters reset", err)) ||
        (c->bf16 && (st = cuda_status(cudaMalloc((void **)&c->xbf, XBF_ELEMS * sizeof(uint16_t)),
                                      "bf16 activation scratch", err))) ||
        (c->bf16 &&
         (st = cuda_status(cudaMalloc((void **)&c->xbf_alt, XBF_ELEMS * sizeof(uint16_t)),
                           "bf16 activation scratch", err))) ||
        (st = cuda_status(cudaMemsetAsync(c->flag, 0, sizeof(int32_t), c->stream),
                          "error flag reset", err)) ||
        (st = blas_status(cublasCreate(&c->blas), "create", err)) ||
        (st = blas_status(cublasSetStream(c->blas, c->stream), "set stream", err)) ||
        (st = cuda_status(cudaMalloc(&c->blas_ws, BLAS_WORKSPACE), "cublas workspace", err)) ||
        (st = blas_status(cublasSetWorkspace(c->blas, c->blas_ws, BLAS_WORKSPACE),
                          "set workspace", err)) ||
        (st = blas_status(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH), "set math mode", err)) ||
        (st = cuda_status(cudaStreamSynchronize(c->stream), "stream synchronize", err))) {
        cu_destroy(&c->base);
        return st;
    }
    *out = &c->base;
    return SV_OK;
}

sv_status sv_cuda_sync(sv_backend_t *be, sv_error_t *err) {
    if (!sv_backend_is_cuda(be))
        return sv_error_set(err, SV_ERR_ARG, -1, "cuda sync: not a CUDA backend");
    sv_status st = no_step(cb(be), "sync", err);
    if (st)
        return st;
    st = bind(cb(be), err);
    return st ? st : sync_and_check(cb(be), err);
}

void sv_cuda_graph_stats(const sv_backend_t *be, sv_cuda_graph_stats_t *st) {
    const cuda_backend_t *c = (const cuda_backend_t *)be;
    *st = (sv_cuda_graph_stats_t){.opened = c->steps, .replayed = c->n_replayed,
                                  .captured = c->n_captured};
}

sv_status sv_cuda_device_info(sv_backend_t *be, char *name, size_t name_len, size_t *free_b,
                              size_t *total_b, sv_error_t *err) {
    if (!sv_backend_is_cuda(be))
        return sv_error_set(err, SV_ERR_ARG, -1, "cuda device info: not a CUDA backend");
    struct cudaDeviceProp prop;
    sv_status st = bind(cb(be), err);
    if (st)
        return st;
    st = cuda_status(cudaGetDeviceProperties(&prop, cb(be)->device), "device properties", err);
    if (st)
        return st;
    if (name && name_len)
        snprintf(name, name_len, "%s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor,
                 prop.multiProcessorCount);
    size_t f = 0, t = 0;
    if ((st = cuda_status(cudaMemGetInfo(&f, &t), "memory info", err)))
        return st;
    if (free_b)
        *free_b = f;
    if (total_b)
        *total_b = t;
    return SV_OK;
}

/* ---- the device sampler ------------------------------------------------------------ */

struct sv_cuda_sampler {
    cuda_backend_t *be;         /* borrowed */
    int32_t max_rows, vocab, max_masks, words;
    uint32_t *masks;            /* device (max_masks, words) */
    sv_cuda_sample_params_t *d_params; /* device (max_rows) */
    sv_cuda_sample_out_t *d_out;       /* device (max_rows) */
    sv_cuda_sample_params_t *h_params; /* pinned host (max_rows) */
    sv_cuda_sample_out_t *h_out;       /* pinned host (max_rows) */
    uint32_t *h_stage;          /* pinned host (max_rows, words): masks on their way up, so
                                   that an upload neither waits for the stream nor makes it wait */
    int32_t n_staged;           /* of them, used since begin_step */
    bool staged;                /* uploads from h_stage may be in flight (no sync since) */
    /* the mask table's directory */
    uint64_t *key;              /* (max_masks, 2) */
    uint64_t *last_step;        /* (max_masks) step of the last lookup; 0: slot empty */
    uint64_t step;              /* the current step, from 1 */
};

void sv_cuda_sampler_destroy(sv_cuda_sampler_t *s) {
    if (!s)
        return;
    if (s->be && bind(s->be, NULL) == SV_OK)
        (void)cudaStreamSynchronize(s->be->stream);
    (void)cudaFree(s->masks);
    (void)cudaFree(s->d_params);
    (void)cudaFree(s->d_out);
    (void)cudaFreeHost(s->h_params);
    (void)cudaFreeHost(s->h_out);
    (void)cudaFreeHost(s->h_stage);
    free(s->key);
    free(s->last_step);
    free(s);
}

sv_status sv_cuda_sampler_create(sv_backend_t *be, int32_t max_rows, int32_t vocab,
                                 int32_t max_masks, sv_cuda_sampler_t **out, sv_error_t *err) {
    if (!sv_backend_is_cuda(be) || max_rows < 1 || vocab < 1 || max_masks < 1)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "cuda sampler: bad arguments (rows %d, vocab %d, masks %d)",
                            (int)max_rows, (int)vocab, (int)max_masks);
    sv_cuda_sampler_t *s = calloc(1, sizeof *s);
    if (!s)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "cuda sampler: out of memory");
    s->be = cb(be);
    s->max_rows = max_rows;
    s->vocab = vocab;
    s->max_masks = max_masks;
    s->words = (int32_t)(((int64_t)vocab + 31) / 32);
    s->step = 1;
    size_t nr = (size_t)max_rows;
    sv_status st;
    if ((st = cuda_status(cudaMalloc((void **)&s->masks,
                                     (size_t)max_masks * (size_t)s->words * sizeof(uint32_t)),
                          "sampler mask table", err)) ||
        (st = cuda_status(cudaMalloc((void **)&s->d_params, nr * sizeof *s->d_params),
                          "sampler params", err)) ||
        (st = cuda_status(cudaMalloc((void **)&s->d_out, nr * sizeof *s->d_out), "sampler output",
                          err)) ||
        (st = cuda_status(cudaMallocHost((void **)&s->h_params, nr * sizeof *s->h_params),
                          "sampler pinned params", err)) ||
        (st = cuda_status(cudaMallocHost((void **)&s->h_out, nr * sizeof *s->h_out),
                          "sampler pinned output", err)) ||
        (st = cuda_status(cudaMallocHost((void **)&s->h_stage,
                                         nr * (size_t)s->words * sizeof(uint32_t)),
                          "sampler pinned mask staging", err)))
        goto fail;
    s->key = calloc(2 * (size_t)max_masks, sizeof *s->key);
    s->last_step = calloc((size_t)max_masks, sizeof *s->last_step);
    if (!s->key || !s->last_step) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "cuda sampler: out of memory");
        goto fail;
    }
    *out = s;
    return SV_OK;
fail:
    sv_cuda_sampler_destroy(s);
    return st;
}

void sv_cuda_sampler_begin_step(sv_cuda_sampler_t *s) {
    s->step++;
    /* The staging rows are reused from the first: uploads from them since
     * the last sample call (which synchronises) must be done first. Not
     * the engine's order (it samples after its uploads); an error shows at
     * the next call that synchronises. */
    if (s->staged && bind(s->be, NULL) == SV_OK)
        (void)cudaStreamSynchronize(s->be->stream);
    s->staged = false;
    s->n_staged = 0;
}

sv_status sv_cuda_sampler_mask_slot(sv_cuda_sampler_t *s, uint64_t key_hi, uint64_t key_lo,
                                    const uint32_t *mask_host, int32_t *slot, sv_error_t *err) {
    int32_t victim = -1;
    for (int32_t i = 0; i < s->max_masks; i++) {
        if (s->last_step[i] && s->key[2 * i] == key_hi && s->key[2 * i + 1] == key_lo) {
            s->last_step[i] = s->step;
            *slot = i;
            return SV_OK;
        }
        /* The empty slot, or the least recently used one outside this step. */
        if (s->last_step[i] < s->step &&
            (victim < 0 || s->last_step[i] < s->last_step[victim]))
            victim = i;
    }
    if (victim < 0)
        return sv_error_set(err, SV_ERR_BUDGET, -1,
                            "cuda sampler: all %d mask slots are used by this step",
                            (int)s->max_masks);
    if (!mask_host)
        return sv_error_set(err, SV_ERR_ARG, -1, "cuda sampler: a new mask without its bits");
    /* Through a pinned staging row the copy is asynchronous: the host goes
     * on (computing the next rows' masks) while the stream runs. Past
     * max_rows uploads in a step, from mask_host itself: from pageable
     * memory cudaMemcpyAsync returns once the bits are staged (it may wait
     * for the stream first). Either way mask_host may change after the
     * call. */
    sv_status st = bind(s->be, err);
    if (st)
        return st;
    const size_t wb = (size_t)s->words * sizeof(uint32_t);
    const uint32_t *src = mask_host;
    if (s->n_staged < s->max_rows) {
        uint32_t *row = s->h_stage + (size_t)s->n_staged++ * (size_t)s->words;
        memcpy(row, mask_host, wb);
        src = row;
        s->staged = true;
    }
    st = cuda_status(cudaMemcpyAsync(s->masks + (size_t)victim * (size_t)s->words, src, wb,
                                     cudaMemcpyHostToDevice, s->be->stream),
                     "mask upload", err);
    if (st) {
        s->last_step[victim] = 0; /* the slot's old contents may be gone */
        return st;
    }
    s->key[2 * victim] = key_hi;
    s->key[2 * victim + 1] = key_lo;
    s->last_step[victim] = s->step;
    *slot = victim;
    return SV_OK;
}

sv_status sv_cuda_sample(sv_cuda_sampler_t *s, int32_t rows, const float *logits,
                         const sv_cuda_sample_params_t *params, sv_cuda_sample_out_t *out,
                         sv_error_t *err) {
    if (rows < 0 || rows > s->max_rows || (rows > 0 && (!logits || !params || !out)))
        return sv_error_set(err, SV_ERR_ARG, -1, "cuda sample: %d rows (at most %d)", (int)rows,
                            (int)s->max_rows);
    if (rows == 0)
        return SV_OK;
    for (int32_t r = 0; r < rows; r++) {
        const sv_cuda_sample_params_t *p = &params[r];
        if (!(p->temperature >= 0.0f && p->temperature <= 2.0f) ||
            !(p->top_p > 0.0f && p->top_p <= 1.0f) || !(p->min_p >= 0.0f && p->min_p <= 1.0f) ||
            p->top_k < 0 || p->n_logprobs < 0 || p->n_logprobs > SV_CUDA_SAMPLE_MAX_LOGPROBS ||
            p->mask < -1 || p->mask >= s->max_masks)
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "cuda sample: row %d: parameters out of range (temperature %g, "
                                "top_p %g, min_p %g, top_k %d, logprobs %d, mask slot %d of %d)",
                                (int)r, p->temperature, p->top_p, p->min_p, (int)p->top_k,
                                (int)p->n_logprobs, (int)p->mask, (int)s->max_masks);
    }
    cudaStream_t stream = s->be->stream;
    size_t pb = (size_t)rows * sizeof *params, ob = (size_t)rows * sizeof *out;
    memcpy(s->h_params, params, pb);
    sv_status st;
    if ((st = bind(s->be, err)) ||
        (st = cuda_status(cudaMemcpyAsync(s->d_params, s->h_params, pb, cudaMemcpyHostToDevice,
                                          stream),
                          "sample params upload", err)) ||
        (st = sv_k_sample(stream, rows, s->vocab, logits, s->masks, s->max_masks, s->d_params,
                          s->d_out, err)) ||
        (st = cuda_status(cudaMemcpyAsync(s->h_out, s->d_out, ob, cudaMemcpyDeviceToHost, stream),
                          "sample output download", err)) ||
        (st = sync_and_check(s->be, err)))
        return st;
    s->staged = false;
    memcpy(out, s->h_out, ob);
    return SV_OK;
}
