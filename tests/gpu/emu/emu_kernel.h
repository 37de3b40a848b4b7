// emu_kernel.h — the subset of CUDA C++ that kernels/*.cu use, on the CPU, so that the CUDA
// backend's code runs (slowly) on a machine without a GPU (tests/gpu/emu/run.sh).
//
// Blocks run one after another; a block's threads are cooperative fibers on the calling thread
// (emu_kernel.cpp). __syncthreads and each half of a warp shuffle are scheduling points with
// CUDA's rules: a barrier opens when every thread of the block that has not exited waits at it, a
// warp point when every live lane of the warp does; anything else is reported as a deadlock.
// __shared__ variables become function statics, shared by a block's fibers (blocks never overlap).
// What this cannot show: timing, races between blocks, the memory model, register or shared
// memory limits, launch limits; cuBLAS is a plain loop (emu_runtime.cpp).
#pragma once
#include <cuda_runtime_api.h>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <functional>
#include <math.h>
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

extern thread_local uint3 threadIdx; // one OS thread runs every fiber
extern uint3 blockIdx_g;
#define blockIdx blockIdx_g
extern dim3 blockDim, gridDim;

extern unsigned long long emu_warp_slot[32][32];
void emu_syncthreads();
void emu_warp_sync();
inline void __syncthreads() { emu_syncthreads(); }

template <typename T> inline T __shfl_xor_sync(unsigned, T v, int o) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    unsigned long long bits = 0; std::memcpy(&bits, &v, sizeof v);
    emu_warp_slot[w][lane] = bits;
    emu_warp_sync();
    unsigned long long b = emu_warp_slot[w][lane ^ o];
    emu_warp_sync();
    T r; std::memcpy(&r, &b, sizeof r); return r;
}
inline int atomicCAS(int *p, int cmp, int val) {
    __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
// Blocks run one after another: every write is visible to the next block already.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
// A load that bypasses L1 on a GPU; a plain load here.
template <typename T> inline T __ldcg(const T *p) { return *p; }
template <typename T> inline void __stcg(T *p, T v) { *p = v; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
using std::isnan;

void emu_launch(dim3 grid, dim3 block, std::function<void()> body);
