/* gemv.cu — the bf16 products of a decode step: y = x · Wᵀ (+ bias) for a
 * few rows (at most SV_K_GEMV_MAX_ROWS), x and W bf16, y fp32.
 *
 * Why it exists: a decode step's products have one row per sequence, so
 * they are matrix-vector products that only stream the weights. cuBLAS's
 * tensor-core kernels for them take 4 to 5 µs even for a 576×576 matrix
 * (BENCHMARKS.md, "The CUDA backend on an H200"), and a step has seven a
 * layer. Here one warp computes one output for every row: its lanes read
 * the weight row 8 values (16 bytes) at a time, four loads in flight, and
 * each lane keeps one fp32 sum per row; a shuffle tree adds the lanes.
 * One launch serves several products of one input (a layer's q, k and v),
 * and gate and up with SwiGLU applied (the feed-forward's first half), so
 * a layer's seven products are four launches.
 *
 * The arithmetic: each product of two bf16 values is exact in fp32, the
 * sums are fp32 in a fixed order (lane i takes the 8-value chunks i, i +
 * 32, ...; within a chunk in index order; then the tree), so a row's
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

/* The lane's partial sums of one weight row wr (in values) against the R
 * rows of x: chunks lane, lane + 32, ..., each in index order. */
template <int R>
static __device__ __forceinline__ void lane_dots(const uint16_t *wr, const uint16_t *x,
                                                 int32_t in, int lane, float acc[R]) {
    const int32_t n8 = in / 8;
    int32_t c = lane;
    for (; c + 96 < n8; c += 128) { /* four chunks in flight */
        float wf[4][8];
#pragma unroll
        for (int u = 0; u < 4; u++)
            unpack8(wr + (size_t)(c + 32 * u) * 8, wf[u]);
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                float xf[8];
                unpack8(x + (size_t)r * in + (size_t)(c + 32 * u) * 8, xf);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    acc[r] += wf[u][k] * xf[k];
            }
    }
    for (; c < n8; c += 32) {
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

/* Block b, warp w: output (b - block0[k]) * GEMV_WARPS + w of segment k, for
 * all R rows. */
template <int R>
static __global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_bf16_kernel(int32_t in, const uint16_t *x, gemv_segs_t S) {
    const int lane = threadIdx.x & 31;
    const int32_t b = (int32_t)blockIdx.x;
    int k = 0;
    while (k + 1 < S.n && b >= S.block0[k + 1])
        k++;
    const sv_k_gemv_seg_t sg = S.s[k];
    const int32_t o = (b - S.block0[k]) * GEMV_WARPS + (int32_t)(threadIdx.x >> 5);
    if (o >= sg.out)
        return; /* a whole warp: no barrier below */
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        acc[r] = 0.0f;
    lane_dots<R>(sg.w + (size_t)o * in, x, in, lane, acc);
    warp_sums<R>(acc);
    if (lane == 0) {
        const float bb = sg.bias ? sg.bias[o] : 0.0f;
#pragma unroll
        for (int r = 0; r < R; r++)
            sg.y[(size_t)r * sg.out + o] = sg.bias ? acc[r] + bb : acc[r];
    }
}

/* The gate and up products of output o and SwiGLU of the two, as
 * elementwise.cu's swiglu_kernel computes it; ybf: NULL or the bf16
 * rounding of y (which must not be x). */
template <int R>
static __global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_swiglu_kernel(int32_t in, int32_t out, const uint16_t *x, const uint16_t *wg,
                   const uint16_t *wu, float *y, uint16_t *ybf) {
    const int lane = threadIdx.x & 31;
    const int32_t o = (int32_t)blockIdx.x * GEMV_WARPS + (int32_t)(threadIdx.x >> 5);
    if (o >= out)
        return;
    float ag[R], au[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        ag[r] = au[r] = 0.0f;
    lane_dots<R>(wg + (size_t)o * in, x, in, lane, ag);
    lane_dots<R>(wu + (size_t)o * in, x, in, lane, au);
    warp_sums<R>(ag);
    warp_sums<R>(au);
    if (lane == 0) {
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

static bool gemv_args_ok(int32_t rows, int32_t in, const uint16_t *x) {
    return rows >= 0 && rows <= SV_K_GEMV_MAX_ROWS && in > 0 && in % 8 == 0 && x &&
           ((uintptr_t)x & 15) == 0;
}

extern "C" sv_status sv_k_gemv_bf16_n(cudaStream_t stream, int32_t rows, int32_t in, int32_t n,
                                      const sv_k_gemv_seg_t *segs, const uint16_t *x,
                                      sv_error_t *err) {
    gemv_segs_t S;
    bool ok = gemv_args_ok(rows, in, x) && n >= 1 && n <= GEMV_MAX_SEGS && segs;
    int64_t blocks = 0;
    for (int32_t k = 0; ok && k < n; k++) {
        S.s[k] = segs[k];
        S.block0[k] = (int32_t)blocks;
        ok = segs[k].out > 0 && segs[k].w && segs[k].y && ((uintptr_t)segs[k].w & 15) == 0;
        blocks += (segs[k].out + GEMV_WARPS - 1) / GEMV_WARPS;
        ok = ok && blocks <= 0x7fffffff;
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
        gemv_bf16_kernel<R><<<(unsigned)blocks, GEMV_WARPS * 32, 0, stream>>>(in, x, S);       \
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
    unsigned blocks = sv_k_blocks((size_t)out, GEMV_WARPS);
    switch (rows) {
#define GEMV_CASE(R)                                                                            \
    case R:                                                                                     \
        gemv_swiglu_kernel<R><<<blocks, GEMV_WARPS * 32, 0, stream>>>(in, out, x, wg, wu, y,   \
                                                                       ybf);                    \
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
