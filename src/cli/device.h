/* device.h — the compute backend a verb runs on: --device cpu|cuda|auto.
 *
 * Every verb that loads a model takes --device and calls
 * sv_cli_backend_create with its value. "auto" (the default) is CUDA when
 * this build has the CUDA backend and a device is present (asked through
 * cudaGetDeviceCount, which answers 0 without a driver: nothing aborts),
 * else the CPU. "cuda" or "cuda:N" insists on device N (default 0), and is
 * an error, not a silent fallback, when there is none. */
#ifndef SV_CLI_DEVICE_H
#define SV_CLI_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "src/backend/backend.h"
#include "src/backend/cpu.h"
#include "src/engine/engine.h"
#include "util/error.h"

/* The help line every verb prints for --device. */
#define SV_CLI_DEVICE_HELP                                                              \
    "  --device D        cpu, cuda (cuda:N for device N) or auto (default): CUDA when\n" \
    "                    this build has it and a GPU is present, else the CPU.\n"       \
    "  --cuda-fp32       on CUDA, fp32 weights and products instead of bf16 on the\n"   \
    "                    tensor cores (the default; slower, closer to the CPU).\n"

/* True for a value --device accepts: "cpu", "cuda", "cuda:N", "auto". */
bool sv_cli_device_valid(const char *device);

/* The help lines every verb that loads a model prints for --cpu-kernels. */
#define SV_CLI_CPU_KERNELS_HELP                                                          \
    "  --cpu-kernels K   int8 (default): 8-bit activations and exact integer products\n"  \
    "                    for Q8_0/Q4_0/Q4_1/Q4_K/Q5_K/Q6_K weights, batch-invariant;\n"   \
    "                    ref: fp32 sums on the dequantized weights, bit-identical\n"    \
    "                    to fp32 weights (slower). CPU only.\n"

/* --cpu-kernels: "ref" or "int8". False for anything else. */
bool sv_cli_parse_cpu_kernels(const char *s, sv_cpu_kernels *out);

/* Creates the backend device names (NULL: "auto"); threads is the CPU
 * backend's thread count (1 .. SV_CPU_MAX_THREADS; unused on CUDA) and
 * kernels its products (unused on CUDA).
 * Errors: SV_ERR_ARG for a bad name, SV_ERR_UNSUPPORTED for "cuda" in a
 * build without CUDA or on a machine without a device, and whatever the
 * backend's create returns. On success *out is destroyed with
 * sv_backend_destroy. */
/* The mask prefetch workers a verb runs when --prefetch-threads is not
 * given: 1 on a GPU, whose forward leaves the CPU idle; 0 on the CPU,
 * where the model's threads (which spin between jobs) would share the
 * cores with it: measured faster without it, constrained or not
 * (BENCHMARKS.md, "Integer kernels"). */
uint32_t sv_cli_default_prefetch_threads(const sv_backend_t *be);

/* cuda_fp32: a CUDA backend keeps fp32 weights and products (--cuda-fp32)
 * instead of bf16 on the tensor cores (the default; src/backend/cuda.h). */
sv_status sv_cli_backend_create(const char *device, int threads, sv_cpu_kernels kernels, bool cuda_fp32,
                                sv_backend_t **out, sv_error_t *err);

/* The KV pool's bytes for --kv-memory-mb kv_mb and --gpu-memory-utilization
 * gpu_util (each 0 when not given), the model loaded on be. With gpu_util,
 * or on CUDA with neither (SV_CLI_GPU_UTILIZATION), that fraction of the
 * device's memory less what is in use now (the weights, the backend's
 * scratch, any other process) and less SV_CLI_GPU_RESERVE_MB for the
 * engine's other device buffers; else kv_mb MiB (SV_CLI_KV_MB by default).
 * Errors: SV_ERR_ARG for both given, SV_ERR_UNSUPPORTED for gpu_util off
 * CUDA, SV_ERR_BUDGET (naming the figures) when nothing would be left. */
#define SV_CLI_KV_MB 512
#define SV_CLI_GPU_RESERVE_MB 256
#define SV_CLI_GPU_UTILIZATION 0.9
sv_status sv_cli_kv_bytes(sv_backend_t *be, uint64_t kv_mb, double gpu_util, uint64_t *kv_bytes,
                          sv_error_t *err);

/* The engine's device sampler (src/engine/engine.h, sv_engine_dsampler_t)
 * for a CUDA backend: *out is NULL (and the status SV_OK) on any other
 * backend. vocab is the model's logits row length. Create it before
 * sv_cli_kv_bytes (its mask table is device memory) and destroy it after
 * the engine, before the backend. --host-sampling leaves it out. */
#define SV_CLI_DSAMPLER_MASKS 512 /* the device's mask table: 8 MB at a 128k vocabulary */
sv_status sv_cli_dsampler_create(sv_backend_t *be, int32_t vocab, sv_engine_dsampler_t **out, sv_error_t *err);
void sv_cli_dsampler_destroy(sv_engine_dsampler_t *d);
#define SV_CLI_HOST_SAMPLING_HELP                                                           \
    "  --host-sampling   on CUDA, sample every row on the host (the logits come back\n"   \
    "                    each step) instead of on the device.\n"

/* On a CUDA backend, its step graph counts (sv_cuda_graph_stats: steps
 * that opened a graph, replayed, captured) and true; false elsewhere. */
bool sv_cli_graph_stats(const sv_backend_t *be, uint64_t *opened, uint64_t *replayed, uint64_t *captured);

/* Parses --gpu-memory-utilization: a number in (0, 1]. */
bool sv_cli_parse_utilization(const char *s, double *out);

#define SV_CLI_GPU_MEMORY_HELP                                                              \
    "  --gpu-memory-utilization F  on CUDA, the fraction of the GPU's memory sieve may\n"   \
    "                    take: the KV cache gets what the weights leave (default 0.9\n"   \
    "                    on CUDA unless --kv-memory-mb is given).\n"

#endif
