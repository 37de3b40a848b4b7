/* cpu.h — the CPU backend: the reference implementation of backend.h.
 *
 * Backend memory is host memory, so pointers from ops->alloc can be read and
 * written directly by the caller (tests do). Every operation is
 * batch-invariant and deterministic for a given build and machine: each
 * output element is computed by one fixed sequence of float operations,
 * whatever the number of rows and threads (cpu.c explains how).
 *
 * Threads: a pool of n_threads - 1 workers (plus the calling thread) splits
 * the matrix products (by output columns) and attention (by row and head).
 * An sv_backend_t from here is used by one thread at a time. */
#ifndef SV_BACKEND_CPU_H
#define SV_BACKEND_CPU_H

#include "backend.h"

#define SV_CPU_MAX_THREADS 256
#define SV_CPU_MAX_HEAD_DIM 512 /* attention keeps one head's accumulator on the stack */

/* How matrix products on Q8_0, Q4_0 and Q4_1 weights are computed. */
typedef enum {
    SV_CPU_KERNELS_REF = 0,     /* fp32 sums on the dequantized weights: bit-identical to the fp32
                                   path (the default) */
    SV_CPU_KERNELS_INT8,        /* activations quantized to 8 bits per block of 32, exact integer
                                   dot products (src/backend/cpu_int8.h), the best SIMD the CPU has */
    SV_CPU_KERNELS_INT8_SCALAR, /* the same in plain C: the reference INT8 equals bit for bit */
    SV_CPU_KERNELS_INT8_AVX2,   /* tests: the AVX2 kernel even where a better one exists (plain C
                                   where the CPU has no AVX2) */
} sv_cpu_kernels;

typedef struct sv_cpu_config {
    int n_threads; /* 1 .. SV_CPU_MAX_THREADS; 0 means 1 */
    sv_cpu_kernels kernels;
} sv_cpu_config_t;

/* Creates a CPU backend. cfg may be NULL (one thread). On success *out is
 * destroyed with sv_backend_destroy. */
sv_status sv_cpu_backend_create(const sv_cpu_config_t *cfg, sv_backend_t **out, sv_error_t *err);

#endif
