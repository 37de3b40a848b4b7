/* common.cuh — what every kernel file shares: the launch check, the device
 * flag, block reductions. Included by the .cu files only. */
#ifndef SV_KERNELS_COMMON_CUH
#define SV_KERNELS_COMMON_CUH

#include <cuda_runtime.h>

#include "kernels/kernels.h"

/* Turns the state after a launch into a status naming `what`. */
static inline sv_status sv_k_check_launch(const char *what, sv_error_t *err) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return SV_OK;
    return sv_error_set(err, SV_ERR_IO, -1, "cuda: %s: launch failed: %s", what,
                        cudaGetErrorString(e));
}

/* Records code in *flag unless an earlier code is there. */
static __device__ __forceinline__ void sv_k_flag(int32_t *flag, int32_t code) {
    if (flag)
        atomicCAS(flag, 0, code);
}

/* Blocks for n items at `per` items per block, or 0 when that passes the
 * grid limit (the caller reports it). */
static inline unsigned sv_k_blocks(size_t n, unsigned per) {
    size_t b = (n + per - 1) / per;
    return b > 0x7fffffffu ? 0u : (unsigned)b;
}

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. shared: 32 floats. The order of the additions is
 * fixed by the block size, so a row's result does not depend on the grid. */
template <typename T>
static __device__ __forceinline__ T sv_k_block_sum(T v, T *shared) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads(); /* shared may still be read from a previous call */
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    T r = 0;
    for (int i = 0; i < nw; i++)
        r += shared[i];
    return r;
}

/* Maximum of v over the block, under the same rules as sv_k_block_sum. */
static __device__ __forceinline__ float sv_k_block_max(float v, float *shared) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    float r = shared[0];
    for (int i = 1; i < nw; i++)
        r = fmaxf(r, shared[i]);
    return r;
}

/* f rounded to bf16 (nearest, ties to even; a NaN stays a quiet NaN): the
 * input of a bf16 product (src/backend/cuda.c). */
static __device__ __forceinline__ uint16_t sv_k_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif
