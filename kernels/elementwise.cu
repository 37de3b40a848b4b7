/* elementwise.cu — the small operations of the forward pass on the device:
 * RMSNorm, RoPE, SwiGLU, the residual add, a gemm's bias, the row gather
 * (embeddings, selected rows) and the KV-cache write through block tables.
 *
 * Why they exist: the forward pass (src/model/llama.c) is written against
 * backend.h, so the CUDA backend needs each of these operations with the
 * CPU backend's meaning. They are memory-bound and simple; each is written
 * for clarity first (one thread per output element or one block per row,
 * bounds checked), with the same float operations as the CPU backend where
 * that is cheap: RoPE's angles in double, the files compiled without
 * multiply-add contraction (CMakeLists.txt: -fmad=false), so most outputs
 * agree with the CPU's bit for bit and the rest (RMSNorm's sum order, expf)
 * within a few ulp. Fusing them (norm with the residual add, RoPE with the
 * KV write) is the next step once these are verified on a GPU. */
#include "kernels/common.cuh"

#define EW_THREADS 256


/* ---- rmsnorm ------------------------------------------------------------------ */

/* ybf, when not NULL, gets y rounded to bf16 too (the next product's input
 * in the CUDA backend's bf16 mode). */
static __global__ void rmsnorm_kernel(int32_t dim, const float *x, const float *w, float eps,
                                      float *y, uint16_t *ybf) {
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *yr = y + (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x)
        ss += xr[i] * xr[i];
    ss = sv_k_block_sum(ss, red);
    float scale = 1.0f / sqrtf(ss / (float)dim + eps);
    /* Each thread reads x[i] before writing y[i]: y may be x. */
    uint16_t *br = ybf ? ybf + (size_t)blockIdx.x * dim : NULL;
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = (xr[i] * scale) * w[i];
        yr[i] = v;
        if (br)
            br[i] = sv_k_bf16(v);
    }
}

/* Threads of a row's block in the norms: one a value up to 1024 (a row's
 * loads then all in flight at once); a function of dim alone, so a row's
 * sum order never depends on the number of rows. */
static unsigned norm_threads(int32_t dim) {
    int32_t t = (dim + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t > 1024 ? 1024 : t);
}

extern "C" sv_status sv_k_rmsnorm(cudaStream_t stream, int32_t rows, int32_t dim, const float *x,
                                  const float *w, float eps, float *y, uint16_t *ybf,
                                  sv_error_t *err) {
    if (rows < 0 || dim <= 0 || !(eps >= 0.0f) || (rows > 0 && (!x || !w || !y)))
        return sv_error_set(err, SV_ERR_ARG, -1, "rmsnorm: bad arguments (rows %d, dim %d)",
                            (int)rows, (int)dim);
    if (rows == 0)
        return SV_OK;
    rmsnorm_kernel<<<(unsigned)rows, norm_threads(dim), 0, stream>>>(dim, x, w, eps, y, ybf);
    return sv_k_check_launch("rmsnorm", err);
}

/* x += d, then rmsnorm_kernel's y (and ybf) of the new x: the same float
 * operations in the same order as add_kernel then rmsnorm_kernel. */
static __global__ void add_rmsnorm_kernel(int32_t dim, float *x, const float *d, const float *w,
                                          float eps, float *y, uint16_t *ybf) {
    __shared__ float red[32];
    float *xr = x + (size_t)blockIdx.x * dim;
    const float *dr = d + (size_t)blockIdx.x * dim;
    float *yr = y + (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = xr[i] + dr[i];
        xr[i] = v;
        ss += v * v;
    }
    ss = sv_k_block_sum(ss, red);
    float scale = 1.0f / sqrtf(ss / (float)dim + eps);
    uint16_t *br = ybf ? ybf + (size_t)blockIdx.x * dim : NULL;
    for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = (xr[i] * scale) * w[i]; /* this thread's own x[i]: written above */
        yr[i] = v;
        if (br)
            br[i] = sv_k_bf16(v);
    }
}

extern "C" sv_status sv_k_add_rmsnorm(cudaStream_t stream, int32_t rows, int32_t dim, float *x,
                                      const float *d, const float *w, float eps, float *y,
                                      uint16_t *ybf, sv_error_t *err) {
    if (rows < 0 || dim <= 0 || !(eps >= 0.0f) || (rows > 0 && (!x || !d || !w || !y)))
        return sv_error_set(err, SV_ERR_ARG, -1, "add_rmsnorm: bad arguments (rows %d, dim %d)",
                            (int)rows, (int)dim);
    if (rows == 0)
        return SV_OK;
    add_rmsnorm_kernel<<<(unsigned)rows, norm_threads(dim), 0, stream>>>(dim, x, d, w, eps, y,
                                                                           ybf);
    return sv_k_check_launch("add_rmsnorm", err);
}

/* ---- rope ---------------------------------------------------------------------- */

/* One thread per (row, head, pair). */
static __global__ void rope_kernel(int64_t n, int32_t n_heads, int32_t head_dim, int32_t half,
                                   int32_t neox, const int32_t *pos, const float *inv_freq,
                                   float *x) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n)
        return;
    int32_t i = (int32_t)(t % half);
    int64_t rh = t / half; /* row * n_heads + head */
    int64_t r = rh / n_heads;
    double a = (double)pos[r] * (double)inv_freq[i];
    float cs = (float)cos(a), sn = (float)sin(a);
    float *v = x + rh * head_dim;
    int32_t i0 = neox ? i : 2 * i;
    int32_t i1 = neox ? i + half : 2 * i + 1;
    float p = v[i0], q = v[i1];
    v[i0] = p * cs - q * sn;
    v[i1] = p * sn + q * cs;
}

extern "C" sv_status sv_k_rope(cudaStream_t stream, int32_t rows, int32_t n_heads,
                               int32_t head_dim, int32_t rot_dim, sv_rope_style style,
                               const int32_t *pos, const float *inv_freq, float *x,
                               sv_error_t *err) {
    if (rows < 0 || n_heads <= 0 || head_dim <= 0 || rot_dim < 0 || rot_dim % 2 ||
        rot_dim > head_dim || (style != SV_ROPE_NORMAL && style != SV_ROPE_NEOX))
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "rope: bad arguments (heads %d, head_dim %d, rot_dim %d)",
                            (int)n_heads, (int)head_dim, (int)rot_dim);
    int32_t half = rot_dim / 2;
    int64_t n = (int64_t)rows * n_heads * half;
    if (n == 0)
        return SV_OK;
    if (!pos || !inv_freq || !x)
        return sv_error_set(err, SV_ERR_ARG, -1, "rope: NULL pointer");
    unsigned blocks = sv_k_blocks((size_t)n, EW_THREADS);
    if (!blocks)
        return sv_error_set(err, SV_ERR_ARG, -1, "rope: %lld pairs is too many", (long long)n);
    rope_kernel<<<blocks, EW_THREADS, 0, stream>>>(n, n_heads, head_dim, half,
                                                    style == SV_ROPE_NEOX, pos, inv_freq, x);
    return sv_k_check_launch("rope", err);
}

/* ---- swiglu, add, bias ----------------------------------------------------------- */

static __global__ void swiglu_kernel(size_t n, const float *gate, const float *up, float *out,
                                     uint16_t *obf) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = gate[i];
        float v = g / (1.0f + expf(-g)) * up[i];
        out[i] = v;
        if (obf)
            obf[i] = sv_k_bf16(v);
    }
}

static __global__ void add_kernel(size_t n, float *y, const float *x) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

static __global__ void add_bias_kernel(size_t n, int32_t cols, float *y, const float *bias) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += bias[i % (size_t)cols];
}

/* A grid-stride grid for n elements: enough blocks to fill the GPU, capped
 * so the count fits. */
static unsigned stride_blocks(size_t n) {
    size_t b = (n + EW_THREADS - 1) / EW_THREADS;
    return b > 65535 ? 65535u : (unsigned)b;
}

extern "C" sv_status sv_k_swiglu(cudaStream_t stream, size_t n, const float *gate,
                                 const float *up, float *out, uint16_t *obf, sv_error_t *err) {
    if (n == 0)
        return SV_OK;
    if (!gate || !up || !out)
        return sv_error_set(err, SV_ERR_ARG, -1, "swiglu: NULL pointer");
    swiglu_kernel<<<stride_blocks(n), EW_THREADS, 0, stream>>>(n, gate, up, out, obf);
    return sv_k_check_launch("swiglu", err);
}

extern "C" sv_status sv_k_add(cudaStream_t stream, size_t n, float *y, const float *x,
                              sv_error_t *err) {
    if (n == 0)
        return SV_OK;
    if (!y || !x)
        return sv_error_set(err, SV_ERR_ARG, -1, "add: NULL pointer");
    add_kernel<<<stride_blocks(n), EW_THREADS, 0, stream>>>(n, y, x);
    return sv_k_check_launch("add", err);
}

extern "C" sv_status sv_k_add_bias(cudaStream_t stream, int32_t rows, int32_t cols, float *y,
                                   const float *bias, sv_error_t *err) {
    if (rows < 0 || cols <= 0 || !bias || (rows > 0 && !y))
        return sv_error_set(err, SV_ERR_ARG, -1, "gemm bias: bad arguments (rows %d, cols %d)",
                            (int)rows, (int)cols);
    size_t n = (size_t)rows * (size_t)cols;
    if (n == 0)
        return SV_OK;
    add_bias_kernel<<<stride_blocks(n), EW_THREADS, 0, stream>>>(n, cols, y, bias);
    return sv_k_check_launch("gemm bias", err);
}

/* ---- get_rows -------------------------------------------------------------------- */

/* A bf16 value (its 16 bits) widened to float: exact. */
static __device__ __forceinline__ float bf16_to_f32(uint16_t b) {
    return __uint_as_float((uint32_t)b << 16);
}
static __device__ __forceinline__ float load_f(const float *t, size_t i) { return t[i]; }
static __device__ __forceinline__ float load_f(const uint16_t *t, size_t i) {
    return bf16_to_f32(t[i]);
}

/* grid (rows, column chunks); T float, or uint16_t for a bf16 table. */
template <typename T>
static __global__ void get_rows_kernel(int32_t dim, int32_t n_table, const T *table,
                                       const int32_t *ids, float *out, int32_t *flag) {
    int32_t r = blockIdx.x;
    int32_t c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= dim)
        return;
    int32_t id = ids[r];
    if (id < 0 || id >= n_table) {
        if (c == 0)
            sv_k_flag(flag, SV_KFLAG_GET_ROWS_ID);
        return;
    }
    out[(size_t)r * dim + c] = load_f(table, (size_t)id * dim + c);
}

template <typename T>
static sv_status get_rows(cudaStream_t stream, int32_t rows, int32_t dim, int32_t n_table,
                          const T *table, const int32_t *ids, float *out, int32_t *flag,
                          sv_error_t *err) {
    if (rows < 0 || dim <= 0 || n_table < 0 || (rows > 0 && (!table || !ids || !out)))
        return sv_error_set(err, SV_ERR_ARG, -1, "get_rows: bad arguments (rows %d, dim %d)",
                            (int)rows, (int)dim);
    if (rows == 0)
        return SV_OK;
    unsigned chunks = sv_k_blocks((size_t)dim, EW_THREADS);
    if (chunks > 65535)
        return sv_error_set(err, SV_ERR_ARG, -1, "get_rows: dim %d is too large", (int)dim);
    dim3 grid((unsigned)rows, chunks);
    get_rows_kernel<T><<<grid, EW_THREADS, 0, stream>>>(dim, n_table, table, ids, out, flag);
    return sv_k_check_launch("get_rows", err);
}

extern "C" sv_status sv_k_get_rows(cudaStream_t stream, int32_t rows, int32_t dim,
                                   int32_t n_table, const float *table, const int32_t *ids,
                                   float *out, int32_t *flag, sv_error_t *err) {
    return get_rows<float>(stream, rows, dim, n_table, table, ids, out, flag, err);
}

extern "C" sv_status sv_k_get_rows_bf16(cudaStream_t stream, int32_t rows, int32_t dim,
                                        int32_t n_table, const uint16_t *table,
                                        const int32_t *ids, float *out, int32_t *flag,
                                        sv_error_t *err) {
    return get_rows<uint16_t>(stream, rows, dim, n_table, table, ids, out, flag, err);
}

/* ---- float to bf16 ------------------------------------------------------------------ */

static __global__ void to_bf16_kernel(size_t n, const float *x, uint16_t *y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = sv_k_bf16(x[i]);
}

extern "C" sv_status sv_k_to_bf16(cudaStream_t stream, size_t n, const float *x, uint16_t *y,
                                  sv_error_t *err) {
    if (n == 0)
        return SV_OK;
    unsigned blocks = sv_k_blocks(n, EW_THREADS);
    if (!x || !y || !blocks)
        return sv_error_set(err, SV_ERR_ARG, -1, "to_bf16: bad arguments (%zu values)", n);
    to_bf16_kernel<<<blocks, EW_THREADS, 0, stream>>>(n, x, y);
    return sv_k_check_launch("to_bf16", err);
}

/* ---- kv_write ---------------------------------------------------------------------- */

/* The physical row of position p of row r's sequence, or -1 (flag set) when
 * the view says it has none: the rule of the CPU backend's check_pos and
 * phys_row. attention.cu resolves a row's table once and walks it. */
static __device__ int64_t kv_phys_row(const sv_kv_view_t kv, int32_t r, int32_t p,
                                      int32_t *flag) {
    if (!kv.tables) {
        if (p < 0 || p >= kv.capacity) {
            sv_k_flag(flag, SV_KFLAG_KV_POS);
            return -1;
        }
        return p;
    }
    int32_t s = kv.seq_of_row[r];
    if (s < 0 || s >= kv.n_seqs) {
        sv_k_flag(flag, SV_KFLAG_KV_SEQ);
        return -1;
    }
    int32_t off = kv.table_off[s], end = kv.table_off[s + 1];
    if (off < 0 || end < off) {
        sv_k_flag(flag, SV_KFLAG_KV_SEQ);
        return -1;
    }
    if (p < 0 || p / kv.block_size >= end - off) {
        sv_k_flag(flag, SV_KFLAG_KV_POS);
        return -1;
    }
    int32_t b = kv.tables[off + p / kv.block_size];
    if (b < 0 || b >= kv.capacity / kv.block_size) {
        sv_k_flag(flag, SV_KFLAG_KV_BLOCK);
        return -1;
    }
    return (int64_t)b * kv.block_size + p % kv.block_size;
}

/* grid (rows, column chunks). */
static __global__ void kv_write_kernel(sv_kv_view_t kv, int32_t row0, const int32_t *pos,
                                       const float *k, const float *v, int32_t *flag) {
    int32_t r = row0 + blockIdx.x;
    int32_t c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= kv.kv_dim)
        return;
    int64_t phys = kv_phys_row(kv, r, pos[r], c == 0 ? flag : NULL);
    if (phys < 0)
        return;
    size_t d = (size_t)kv.kv_dim;
    kv.k[(size_t)phys * d + c] = k[(size_t)r * d + c];
    kv.v[(size_t)phys * d + c] = v[(size_t)r * d + c];
}

extern "C" sv_status sv_k_kv_write(cudaStream_t stream, const sv_kv_view_t *kv, int32_t rows,
                                   const int32_t *pos, const float *k, const float *v,
                                   int32_t *flag, sv_error_t *err) {
    if (rows < 0 || !kv || kv->kv_dim <= 0 || kv->capacity < 0 || !kv->k || !kv->v ||
        (rows > 0 && (!pos || !k || !v)))
        return sv_error_set(err, SV_ERR_ARG, -1, "kv_write: bad arguments");
    if (kv->tables && (kv->block_size <= 0 || kv->capacity % kv->block_size ||
                       kv->n_seqs < 1 || !kv->seq_of_row || !kv->table_off))
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "kv_write: bad paged view (block size %d, capacity %d, %d sequences)",
                            (int)kv->block_size, (int)kv->capacity, (int)kv->n_seqs);
    if (rows == 0)
        return SV_OK;
    unsigned chunks = sv_k_blocks((size_t)kv->kv_dim, EW_THREADS);
    if (chunks > 65535)
        return sv_error_set(err, SV_ERR_ARG, -1, "kv_write: kv_dim %d is too large",
                            (int)kv->kv_dim);
    /* All rows in one launch: blocks of different rows run in any order,
     * so where two rows name one physical row either's values may stay
     * (backend.h promises the last row's; cuda.h states this exception).
     * The forward pass never does that within a call: a sequence's rows
     * have distinct positions, and sequences do not share a block either
     * writes (llama.h). */
    dim3 grid((unsigned)rows, chunks);
    kv_write_kernel<<<grid, EW_THREADS, 0, stream>>>(*kv, 0, pos, k, v, flag);
    return sv_k_check_launch("kv_write", err);
}

/* ---- rope_kv_write: RoPE of q and k, then the KV write, one block per row ---------- */

/* The rotation of one pair (i0, i1) of v by (cs, sn), as rope_kernel. */
static __device__ __forceinline__ void rot_pair(float *v, int32_t i0, int32_t i1, float cs,
                                                float sn, float *a, float *b) {
    float p = v[i0], q = v[i1];
    *a = p * cs - q * sn;
    *b = p * sn + q * cs;
}

/* Block r: the row's angles once (as rope_kernel computes them), its
 * physical row once (kv_phys_row), then q's pairs, k's pairs (written back
 * and to the cache), k's unrotated tail and v. */
static __global__ void rope_kv_write_kernel(sv_kv_view_t kv, int32_t n_heads, int32_t n_kv,
                                            int32_t hd, int32_t half, int32_t neox,
                                            const int32_t *pos, const float *inv_freq, float *q,
                                            float *k, const float *v, int32_t *flag) {
    __shared__ float cs[SV_K_MAX_HEAD_DIM / 2], sn[SV_K_MAX_HEAD_DIM / 2];
    __shared__ long long phys_s;
    const int32_t r = blockIdx.x;
    const int32_t p = pos[r];
    for (int32_t i = threadIdx.x; i < half; i += blockDim.x) {
        double a = (double)p * (double)inv_freq[i];
        cs[i] = (float)cos(a), sn[i] = (float)sin(a);
    }
    /* The last thread (another warp than the angles' first) follows the
     * table while the angles are computed. */
    if (threadIdx.x == blockDim.x - 1)
        phys_s = kv_phys_row(kv, r, p, flag);
    __syncthreads();
    const long long phys = phys_s;
    const size_t d = (size_t)kv.kv_dim;
    float *qr = q + (size_t)r * n_heads * hd;
    float *kr = k + (size_t)r * d;
    const float *vr = v + (size_t)r * d;
    float *kc = phys >= 0 ? kv.k + (size_t)phys * d : NULL;
    float *vc = phys >= 0 ? kv.v + (size_t)phys * d : NULL;
    for (int32_t t = threadIdx.x; t < n_heads * half; t += blockDim.x) {
        int32_t hh = t / half, i = t % half;
        float *x = qr + (size_t)hh * hd;
        int32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        float a, b;
        rot_pair(x, i0, i1, cs[i], sn[i], &a, &b);
        x[i0] = a, x[i1] = b;
    }
    for (int32_t t = threadIdx.x; t < n_kv * half; t += blockDim.x) {
        int32_t hh = t / half, i = t % half;
        float *x = kr + (size_t)hh * hd;
        int32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        float a, b;
        rot_pair(x, i0, i1, cs[i], sn[i], &a, &b);
        x[i0] = a, x[i1] = b;
        if (kc)
            kc[(size_t)hh * hd + i0] = a, kc[(size_t)hh * hd + i1] = b;
    }
    if (!kc)
        return;
    const int32_t tail = hd - 2 * half; /* elements past rot_dim, per head */
    for (int32_t t = threadIdx.x; t < n_kv * tail; t += blockDim.x) {
        size_t e = (size_t)(t / tail) * hd + 2 * half + t % tail;
        kc[e] = kr[e];
    }
    for (int32_t c = threadIdx.x; c < kv.kv_dim; c += blockDim.x)
        vc[c] = vr[c];
}

extern "C" sv_status sv_k_rope_kv_write(cudaStream_t stream, const sv_kv_view_t *kv,
                                        const sv_attn_shape_t *sh, int32_t rows, int32_t rot_dim,
                                        sv_rope_style style, const int32_t *pos,
                                        const float *inv_freq, float *q, float *k,
                                        const float *v, int32_t *flag, sv_error_t *err) {
    if (rows < 0 || !kv || !sh || sh->n_heads <= 0 || sh->n_kv_heads <= 0 ||
        sh->head_dim <= 0 || sh->head_dim > SV_K_MAX_HEAD_DIM ||
        kv->kv_dim != sh->n_kv_heads * sh->head_dim || kv->capacity < 0 || !kv->k || !kv->v ||
        rot_dim < 0 || rot_dim % 2 || rot_dim > sh->head_dim ||
        (style != SV_ROPE_NORMAL && style != SV_ROPE_NEOX) ||
        (rows > 0 && (!pos || !q || !k || !v || (rot_dim > 0 && !inv_freq))))
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "rope_kv_write: bad arguments (rows %d, heads %d/%d, head_dim %d, "
                            "rot_dim %d)",
                            (int)rows, sh ? (int)sh->n_heads : 0, sh ? (int)sh->n_kv_heads : 0,
                            sh ? (int)sh->head_dim : 0, (int)rot_dim);
    if (kv->tables && (kv->block_size <= 0 || kv->capacity % kv->block_size ||
                       kv->n_seqs < 1 || !kv->seq_of_row || !kv->table_off))
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "rope_kv_write: bad paged view (block size %d, capacity %d, %d "
                            "sequences)",
                            (int)kv->block_size, (int)kv->capacity, (int)kv->n_seqs);
    if (rows == 0)
        return SV_OK;
    /* As kv_write: blocks of rows naming one physical row race (cuda.h). */
    rope_kv_write_kernel<<<(unsigned)rows, EW_THREADS, 0, stream>>>(
        *kv, sh->n_heads, sh->n_kv_heads, sh->head_dim, rot_dim / 2, style == SV_ROPE_NEOX, pos,
        inv_freq, q, k, v, flag);
    return sv_k_check_launch("rope_kv_write", err);
}
