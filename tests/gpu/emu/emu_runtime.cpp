// emu_runtime.cpp — the CUDA runtime and cuBLAS calls src/backend/cuda.c makes, on the CPU:
// device memory is host memory (filled with garbage when allocated, as device memory is not
// initialised), copies are memmove, streams are synchronous, and cublasSgemm is BLAS's definition
// as a plain loop (cublasGemmEx too, for bf16 inputs widened exactly and fp32 output). Stream
// capture is refused (cudaErrorNotSupported), so step graphs run eagerly here. One emulated device; allocations past 1 TB fail as cudaErrorMemoryAllocation.
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <cstdlib>
#include <cstring>
#include <cstdio>
static int dummy_stream;
static cudaError_t last = cudaSuccess;
extern "C" {
cudaError_t cudaGetLastError(void) { cudaError_t e = last; last = cudaSuccess; return e; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : e == cudaErrorMemoryAllocation ? "out of memory" : "emulated error"; }
cudaError_t cudaMalloc(void **p, size_t n) {
    if (n > ((size_t)1 << 40)) { *p = NULL; return cudaErrorMemoryAllocation; }
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xA5, n); // garbage, like device memory
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMallocHost(void **p, size_t n) { *p = malloc(n); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int) { memset(p, 0, sizeof *p); strcpy(p->name, "CPU emulation"); p->major = 9; p->multiProcessorCount = 1; return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = (size_t)768 << 20; *t = (size_t)1 << 30; return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind, cudaStream_t) { memmove(d, s, n); return cudaSuccess; }
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t) { memset(d, v, n); return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = (cudaStream_t)&dummy_stream; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamBeginCapture(cudaStream_t, enum cudaStreamCaptureMode) { return cudaErrorNotSupported; }
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) { *g = NULL; return cudaErrorInvalidValue; }
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t, unsigned long long) { *e = NULL; return cudaErrorInvalidValue; }
cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) { return cudaErrorInvalidValue; }
cudaError_t cudaGraphDestroy(cudaGraph_t) { return cudaSuccess; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) { return cudaSuccess; }
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasCreate_v2(cublasHandle_t *h) { *h = (cublasHandle_t)&dummy_stream; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy_v2(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSgemm_v2(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc) {
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0.0f;
            for (int l = 0; l < k; l++) {
                float a = ta == CUBLAS_OP_N ? A[i + (size_t)l * lda] : A[l + (size_t)i * lda];
                float b = tb == CUBLAS_OP_N ? B[l + (size_t)j * ldb] : B[j + (size_t)l * ldb];
                s += a * b;
            }
            C[i + (size_t)j * ldc] = *alpha * s + (*beta == 0.0f ? 0.0f : *beta * C[i + (size_t)j * ldc]);
        }
    return CUBLAS_STATUS_SUCCESS;
}
static float bf16(const void *p, size_t i) {
    unsigned u = (unsigned)((const unsigned short *)p)[i] << 16;
    float f; memcpy(&f, &u, 4); return f;
}
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (Atype != CUDA_R_16BF || Btype != CUDA_R_16BF || Ctype != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    float al = *(const float *)alpha, be = *(const float *)beta;
    float *Cf = (float *)C;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0.0f;
            for (int l = 0; l < k; l++) {
                float a = ta == CUBLAS_OP_N ? bf16(A, i + (size_t)l * lda) : bf16(A, l + (size_t)i * lda);
                float b = tb == CUBLAS_OP_N ? bf16(B, l + (size_t)j * ldb) : bf16(B, j + (size_t)l * ldb);
                s += a * b;
            }
            Cf[i + (size_t)j * ldc] = al * s + (be == 0.0f ? 0.0f : be * Cf[i + (size_t)j * ldc]);
        }
    return CUBLAS_STATUS_SUCCESS;
}
}
