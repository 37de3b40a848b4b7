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
#include "src/backend/cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

typedef struct cuda_backend {
    sv_backend_t base; /* must be first */
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    int32_t *flag; /* device word: the first kernel-side index error (SV_KFLAG_*) */
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
    if (cudaGetDevice(&cur) == cudaSuccess && cur == c->device)
        return SV_OK;
    return cuda_status(cudaSetDevice(c->device), "set device", err);
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
    sv_status st = bind(c, err);
    if (st)
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
    sv_status st = bind(c, err);
    if (st)
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
    sv_status st = bind(cb(be), err);
    if (st)
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
    if (st)
        return st;
    st = blas_status(cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one, w, in, x,
                                 in, &zero, y, out),
                     "sgemm", err);
    if (st || !bias)
        return st;
    return sv_k_add_bias(c->stream, rows, out, y, bias, err);
}

static sv_status cu_rmsnorm(sv_backend_t *be, int32_t rows, int32_t dim, const float *x,
                            const float *w, float eps, float *y, sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st)
        return st;
    return sv_k_rmsnorm(cb(be)->stream, rows, dim, x, w, eps, y, err);
}

static sv_status cu_rope(sv_backend_t *be, int32_t rows, int32_t n_heads, int32_t head_dim,
                         int32_t rot_dim, sv_rope_style style, const int32_t *pos,
                         const float *inv_freq, float *x, sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st)
        return st;
    return sv_k_rope(cb(be)->stream, rows, n_heads, head_dim, rot_dim, style, pos, inv_freq, x,
                     err);
}

static sv_status cu_kv_write(sv_backend_t *be, const sv_kv_view_t *kv, int32_t rows,
                             const int32_t *pos, const float *k, const float *v, sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st)
        return st;
    return sv_k_kv_write(cb(be)->stream, kv, rows, pos, k, v, cb(be)->flag, err);
}

static sv_status cu_attention(sv_backend_t *be, const sv_kv_view_t *kv, const sv_attn_shape_t *sh,
                              int32_t rows, const int32_t *pos, const float *q, float *out,
                              sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st)
        return st;
    return sv_k_attention(cb(be)->stream, kv, sh, rows, pos, q, out, cb(be)->flag, err);
}

static sv_status cu_swiglu(sv_backend_t *be, size_t n, const float *gate, const float *up,
                           float *out, sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st)
        return st;
    return sv_k_swiglu(cb(be)->stream, n, gate, up, out, err);
}

static sv_status cu_add(sv_backend_t *be, size_t n, float *y, const float *x, sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st)
        return st;
    return sv_k_add(cb(be)->stream, n, y, x, err);
}

static sv_status cu_get_rows(sv_backend_t *be, int32_t rows, int32_t dim, int32_t n_table,
                             const float *table, const int32_t *ids, float *out,
                             sv_error_t *err) {
    sv_status st = bind(cb(be), err);
    if (st)
        return st;
    return sv_k_get_rows(cb(be)->stream, rows, dim, n_table, table, ids, out, cb(be)->flag, err);
}

static void cu_destroy(sv_backend_t *be) {
    cuda_backend_t *c = cb(be);
    if (!c)
        return;
    (void)bind(c, NULL);
    if (c->stream)
        (void)cudaStreamSynchronize(c->stream);
    if (c->blas)
        (void)cublasDestroy(c->blas);
    if (c->flag)
        (void)cudaFree(c->flag);
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
    .rmsnorm = cu_rmsnorm,
    .rope = cu_rope,
    .kv_write = cu_kv_write,
    .attention = cu_attention,
    .swiglu = cu_swiglu,
    .add = cu_add,
    .get_rows = cu_get_rows,
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
    cuda_backend_t *c = calloc(1, sizeof *c);
    if (!c)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "cuda backend: out of memory");
    c->base.ops = &cuda_ops;
    c->device = dev;
    sv_status st;
    if ((st = cuda_status(cudaSetDevice(dev), "set device", err)) ||
        (st = cuda_status(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                          "stream create", err)) ||
        (st = cuda_status(cudaMalloc((void **)&c->flag, sizeof(int32_t)), "error flag", err)) ||
        (st = cuda_status(cudaMemsetAsync(c->flag, 0, sizeof(int32_t), c->stream),
                          "error flag reset", err)) ||
        (st = blas_status(cublasCreate(&c->blas), "create", err)) ||
        (st = blas_status(cublasSetStream(c->blas, c->stream), "set stream", err)) ||
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
    sv_status st = bind(cb(be), err);
    return st ? st : sync_and_check(cb(be), err);
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
    /* the mask table's directory */
    uint64_t *key;              /* (max_masks) */
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
                          "sampler pinned output", err)))
        goto fail;
    s->key = calloc((size_t)max_masks, sizeof *s->key);
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

void sv_cuda_sampler_begin_step(sv_cuda_sampler_t *s) { s->step++; }

sv_status sv_cuda_sampler_mask_slot(sv_cuda_sampler_t *s, uint64_t key, const uint32_t *mask_host,
                                    int32_t *slot, sv_error_t *err) {
    int32_t victim = -1;
    for (int32_t i = 0; i < s->max_masks; i++) {
        if (s->last_step[i] && s->key[i] == key) {
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
    /* From pageable memory cudaMemcpyAsync returns once the bits are
     * staged, so mask_host may change after the call. */
    sv_status st = bind(s->be, err);
    if (st)
        return st;
    st = cuda_status(
        cudaMemcpyAsync(s->masks + (size_t)victim * (size_t)s->words, mask_host,
                        (size_t)s->words * sizeof(uint32_t), cudaMemcpyHostToDevice,
                        s->be->stream),
        "mask upload", err);
    if (st) {
        s->last_step[victim] = 0; /* the slot's old contents may be gone */
        return st;
    }
    s->key[victim] = key;
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
    memcpy(out, s->h_out, ob);
    return SV_OK;
}
