/* gemv.cu — the bf16 products of a decode step: y = x · Wᵀ (+ bias) for a
 * few rows (at most SV_K_GEMV_MAX_ROWS), x and W bf16, y fp32.
 *
 * Why it exists: a decode step's products have one row per sequence, so
 * they are matrix-vector products that only stream the weights. cuBLAS's
 * tensor-core kernels for them take 4 to 5 µs even for a 576×576 matrix
 * (BENCHMARKS.md, "The CUDA backend on an H200"), and a step has seven a
 * layer. Here a warp computes one output for every row: its lanes read
 * the weight row 8 values (16 bytes) at a time, four loads in flight, and
 * each lane keeps one fp32 sum per row; a shuffle tree adds the lanes.
 * When the outputs are few for the GPU and the rows long (a down
 * projection: 2048 outputs of 8192 values), 2, 4 or 8 warps share an
 * output, each taking every W-th chunk, and their sums are added in a
 * fixed order (gemv_parts picks W from the shape alone).
 * One launch serves several products of one input (a layer's q, k and v),
 * and gate and up with SwiGLU applied (the feed-forward's first half), so
 * a layer's seven products are four launches.
 *
 * The arithmetic: each product of two bf16 values is exact in fp32, the
 * sums are fp32 in a fixed order (lane i of part p takes the 8-value
 * chunks 32p + i, 32p + i + 32W, ...; within a chunk in index order; then
 * the tree, then the parts in order), so a row's
 * result does not depend on the other rows of the call. It differs from
 * cuBLAS's (another order), which src/backend/cuda.c uses for more rows:
 * a row's bits may change when the batch passes SV_K_GEMV_MAX_ROWS. */
#include "kernels/common.cuh"

#define GEMV_WARPS 8 /* outputs per block */

/* The 8 bf16 values of a 16-byte chunk, widened (exactly). */
static __device__ __forceinline__ void unpack8(const uint16_t *p, float f[8]) {
    float4 t = *reinterpret_cast<const float4 *>(p);
    uint32_t u[4] = {__float_as_uint(t.x), __float_as_uint(t.y), __float_as_uint(t.z),
                     __float_as_uint(t.w)};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        f[2 * k] = __uint_as_float(u[k] << 16);
        f[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u);
    }
}

/* The partial sums of one weight row wr (in values) against the R rows of
 * x over the chunks c0, c0 + step, c0 + 2·step, ... (8 values each, in
 * index order within a chunk), four loads in flight. */
template <int R>
static __device__ __forceinline__ void lane_dots(const uint16_t *wr, const uint16_t *x,
                                                 int32_t in, int32_t c0, int32_t step,
                                                 float acc[R]) {
    const int32_t n8 = in / 8;
    int32_t c = c0;
    for (; c + 3 * step < n8; c += 4 * step) {
        float wf[4][8];
#pragma unroll
        for (int u = 0; u < 4; u++)
            unpack8(wr + (size_t)(c + step * u) * 8, wf[u]);
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                float xf[8];
                unpack8(x + (size_t)r * in + (size_t)(c + step * u) * 8, xf);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    acc[r] += wf[u][k] * xf[k];
            }
    }
    for (; c < n8; c += step) {
        float wf[8];
        unpack8(wr + (size_t)c * 8, wf);
#pragma unroll
        for (int r = 0; r < R; r++) {
            float xf[8];
            unpack8(x + (size_t)r * in + (size_t)c * 8, xf);
#pragma unroll
            for (int k = 0; k < 8; k++)
                acc[r] += wf[k] * xf[k];
        }
    }
}

/* The warp's sums (every lane gets them): a fixed shuffle tree. */
template <int R>
static __device__ __forceinline__ void warp_sums(float acc[R]) {
#pragma unroll
    for (int r = 0; r < R; r++)
        for (int sh = 16; sh > 0; sh >>= 1)
            acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], sh);
}

/* Up to GEMV_MAX_SEGS products of one x, their outputs laid end to end
 * over the grid: segment k owns blocks block0[k] .. block0[k + 1] - 1. */
#define GEMV_MAX_SEGS 4
typedef struct gemv_segs {
    sv_k_gemv_seg_t s[GEMV_MAX_SEGS];
    int32_t block0[GEMV_MAX_SEGS + 1];
    int32_t n;
} gemv_segs_t;

/* The W warps of an output (W = 1, 2, 4 or 8, a power of two dividing
 * GEMV_WARPS) split its chunks: warp part p of W takes chunks p·32 + lane,
 * stepping 32·W; their sums are added in part order through shared
 * memory. W depends on the shape only (gemv_parts), never on the rows. */
template <int R>
static __device__ __forceinline__ bool parts_sum(float acc[R], int32_t W, int warp, int lane,
                                                 float (*part)[SV_K_GEMV_MAX_ROWS]) {
    if (W == 1)
        return lane == 0;
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; r++)
            part[warp][r] = acc[r];
    __syncthreads();
    if (lane != 0 || warp % W != 0)
        return false;
#pragma unroll
    for (int r = 0; r < R; r++)
        for (int32_t j = 1; j < W; j++)
            acc[r] += part[warp + j][r];
    return true;
}

/* Block b: GEMV_WARPS / W outputs of segment k, (b - block0[k]) · that
 * onward; warp w works on output w / W, part w % W; for all R rows. */
template <int R>
static __global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_bf16_kernel(int32_t in, const uint16_t *x, gemv_segs_t S, int32_t W) {
    __shared__ float part[GEMV_WARPS][SV_K_GEMV_MAX_ROWS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int32_t b = (int32_t)blockIdx.x;
    int k = 0;
    while (k + 1 < S.n && b >= S.block0[k + 1])
        k++;
    const sv_k_gemv_seg_t sg = S.s[k];
    const int32_t o = (b - S.block0[k]) * (GEMV_WARPS / W) + warp / W;
    const bool live = o < sg.out; /* no return: parts_sum may wait at a barrier */
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        acc[r] = 0.0f;
    if (live)
        lane_dots<R>(sg.w + (size_t)o * in, x, in, (warp % W) * 32 + lane, 32 * W, acc);
    warp_sums<R>(acc);
    if (parts_sum<R>(acc, W, warp, lane, part) && live) {
        const float bb = sg.bias ? sg.bias[o] : 0.0f;
#pragma unroll
        for (int r = 0; r < R; r++)
            sg.y[(size_t)r * sg.out + o] = sg.bias ? acc[r] + bb : acc[r];
    }
}

/* The gate and up products of output o and SwiGLU of the two, as
 * elementwise.cu's swiglu_kernel computes it; ybf: NULL or the bf16
 * rounding of y (which must not be x). Warps as in gemv_bf16_kernel. */
template <int R>
static __global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_swiglu_kernel(int32_t in, int32_t out, const uint16_t *x, const uint16_t *wg,
                   const uint16_t *wu, float *y, uint16_t *ybf, int32_t W) {
    __shared__ float part[GEMV_WARPS][SV_K_GEMV_MAX_ROWS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int32_t o = (int32_t)blockIdx.x * (GEMV_WARPS / W) + warp / W;
    const bool live = o < out;
    float ag[R], au[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        ag[r] = au[r] = 0.0f;
    const int32_t c0 = (warp % W) * 32 + lane;
    if (live) {
        lane_dots<R>(wg + (size_t)o * in, x, in, c0, 32 * W, ag);
        lane_dots<R>(wu + (size_t)o * in, x, in, c0, 32 * W, au);
    }
    warp_sums<R>(ag);
    warp_sums<R>(au);
    bool mine = parts_sum<R>(ag, W, warp, lane, part);
    if (W > 1)
        __syncthreads(); /* part is read before it is rewritten (W is uniform) */
    mine = parts_sum<R>(au, W, warp, lane, part) && mine;
    if (mine && live) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            float g = ag[r];
            float v = g / (1.0f + expf(-g)) * au[r];
            y[(size_t)r * out + o] = v;
            if (ybf)
                ybf[(size_t)r * out + o] = sv_k_bf16(v);
        }
    }
}

/* Warps per output: enough warps in all (about 16384) to keep the memory
 * busy, while each still reads at least 2 chunks per lane. */
static int32_t gemv_parts(int32_t in, int64_t outs) {
    int32_t W = 1;
    while (W < GEMV_WARPS && outs * W < 16384 && in >= 512 * 2 * W)
        W *= 2;
    return W;
}

static bool gemv_args_ok(int32_t rows, int32_t in, const uint16_t *x) {
    return rows >= 0 && rows <= SV_K_GEMV_MAX_ROWS && in > 0 && in % 8 == 0 && x &&
           ((uintptr_t)x & 15) == 0;
}

extern "C" sv_status sv_k_gemv_bf16_n(cudaStream_t stream, int32_t rows, int32_t in, int32_t n,
                                      const sv_k_gemv_seg_t *segs, const uint16_t *x,
                                      sv_error_t *err) {
    gemv_segs_t S;
    bool ok = gemv_args_ok(rows, in, x) && n >= 1 && n <= GEMV_MAX_SEGS && segs;
    int64_t blocks = 0, outs = 0;
    for (int32_t k = 0; ok && k < n; k++) {
        ok = segs[k].out > 0 && segs[k].w && segs[k].y && ((uintptr_t)segs[k].w & 15) == 0;
        outs += ok ? segs[k].out : 0;
    }
    const int32_t W = ok ? gemv_parts(in, outs) : 1, per = GEMV_WARPS / W;
    for (int32_t k = 0; ok && k < n; k++) {
        S.s[k] = segs[k];
        S.block0[k] = (int32_t)blocks;
        blocks += (segs[k].out + per - 1) / per;
        ok = blocks <= 0x7fffffff;
    }
    if (!ok)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "gemv (bf16): bad arguments (rows %d, in %d, %d products)", (int)rows,
                            (int)in, (int)n);
    if (rows == 0)
        return SV_OK;
    S.block0[n] = (int32_t)blocks;
    S.n = n;
    switch (rows) {
#define GEMV_CASE(R)                                                                            \
    case R:                                                                                     \
        gemv_bf16_kernel<R><<<(unsigned)blocks, GEMV_WARPS * 32, 0, stream>>>(in, x, S, W);    \
        break;
        GEMV_CASE(1)
        GEMV_CASE(2)
        GEMV_CASE(3)
        GEMV_CASE(4)
        GEMV_CASE(5)
        GEMV_CASE(6)
        GEMV_CASE(7)
        GEMV_CASE(8)
#undef GEMV_CASE
    }
    return sv_k_check_launch("gemv (bf16)", err);
}

extern "C" sv_status sv_k_gemv_swiglu_bf16(cudaStream_t stream, int32_t rows, int32_t in,
                                           int32_t out, const uint16_t *x, const uint16_t *wg,
                                           const uint16_t *wu, float *y, uint16_t *ybf,
                                           sv_error_t *err) {
    if (!gemv_args_ok(rows, in, x) || out <= 0 || !wg || !wu || !y ||
        ((uintptr_t)wg & 15) || ((uintptr_t)wu & 15) || (ybf && ybf == x))
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "gemv swiglu (bf16): bad arguments (rows %d, in %d, out %d)",
                            (int)rows, (int)in, (int)out);
    if (rows == 0)
        return SV_OK;
    const int32_t W = gemv_parts(in, out);
    unsigned blocks = sv_k_blocks((size_t)out, (unsigned)(GEMV_WARPS / W));
    switch (rows) {
#define GEMV_CASE(R)                                                                            \
    case R:                                                                                     \
        gemv_swiglu_kernel<R><<<blocks, GEMV_WARPS * 32, 0, stream>>>(in, out, x, wg, wu, y,   \
                                                                       ybf, W);                 \
        break;
        GEMV_CASE(1)
        GEMV_CASE(2)
        GEMV_CASE(3)
        GEMV_CASE(4)
        GEMV_CASE(5)
        GEMV_CASE(6)
        GEMV_CASE(7)
        GEMV_CASE(8)
#undef GEMV_CASE
    }
    return sv_k_check_launch("gemv swiglu (bf16)", err);
}
