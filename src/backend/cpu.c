/* cpu.c — the CPU backend: fp32 operations with a fixed reduction order.
 *
 * Why not cblas_sgemm. The CPU backend must be batch-invariant: a row's
 * logits may not depend on how many rows share the step, or the same
 * request gives different text under different load. OpenBLAS does not give
 * that. Measured on this project's build machine (OpenBLAS 0.3.21,
 * DYNAMIC_ARCH, Cooperlake kernels, AMD EPYC), computing each row alone
 * (M = 1) and then inside a product of M rows, y = x · Wᵀ:
 *
 *   in=576  out=576    M=1 vs M=136: 514 of 576 outputs differ in the last bits
 *   in=576  out=576    M=2 vs M=136: 1029 of 1152 differ; M >= 3 agree with M=136
 *   in=576  out=192    M=1..5 differ from M=136
 *   in=64   out=32     M=1..33 differ from M=136
 *   cblas_sgemv vs cblas_sgemm with M=1: 3860 of 4608 differ
 *
 * OpenBLAS switches kernels (its small-matrix path, gemv forwarding, edge
 * kernels) on M·N·K, so the result of a row depends on the batch it is in,
 * at a threshold that moves with the shape, the CPU and the version. Padding
 * every product to a fixed M would hide that on one machine only.
 *
 * So the products here use our own kernel, whose reduction order is fixed by
 * the C source: the dot product of a row x and a weight row w keeps
 * GEMM_LANES partial sums, lane l adding x[k]·w[k] for k ≡ l (mod
 * GEMM_LANES) in increasing k (a tail shorter than GEMM_LANES goes into
 * lanes 0..), and the lanes are then added by a fixed pairwise tree. Tiles
 * of up to GEMM_RB rows × GEMM_CB columns share loads, but every element of
 * every tile shape runs exactly that sequence of float operations, and
 * threads split the output columns, never the sum. This file is compiled
 * with -ffp-contract=off (CMakeLists.txt) so that the compiler cannot fuse a
 * multiply and an add in one tile shape and not in another; vectorising
 * across lanes does not change IEEE results. The outcome is bit-identical
 * rows whatever the number of rows, tile position or thread count, which
 * tests/unit/test_backend.c checks.
 *
 * Quantized weights (gemm_q: Q8_0, Q4_0, Q4_1, F16, BF16 in their GGUF
 * blocks) go through the same sums: the weights are dequantized to exactly
 * the floats src/backend/quant.c gives, either a block at a time in registers
 * (few rows) or a column tile's rows at a time into per-thread scratch, and
 * added in gemm_tile's order, so gemm_q's bits are gemm's on the
 * dequantized matrix while reading 4-7x fewer weight bytes.
 *
 * Attention is a streaming ("flash") softmax over tiles of ATTN_TILE keys
 * with a running maximum, per (row, head): no score buffer, and a row's
 * result depends only on its query and the cache, so prefill and one-token
 * decode give the same bits. A prefill chunk's rows of one sequence go
 * through a head two or four at a time, sharing each cache row's loads,
 * each row still running its own operations in its own order. The paged
 * cache changes only where a position's key and value are read from (a
 * block-table lookup per position, done once per tile), never the order
 * of the sums, so a sequence gives the same bits in a contiguous cache, in
 * shuffled blocks,
 * and in a ragged batch next to other sequences.
 *
 * With --cpu-kernels int8 (sv_cpu_config_t.kernels), products on Q8_0,
 * Q4_0 and Q4_1 weights quantize each activation row to 8-bit blocks and
 * take exact integer dot products instead (src/backend/cpu_int8.h): not
 * the fp32 path's bits, but the same fixed order for every row count,
 * tile and thread, so just as batch-invariant.
 *
 * Threads: a small persistent pool; the calling thread takes part. Work is
 * split in contiguous, equal ranges of independent items (column tiles,
 * (row group, head) pairs, rows, chunks of elements), so the split changes
 * who computes an element, never how. Waiting threads spin briefly before
 * they sleep (POOL_SPIN_NS). */
#include "cpu.h"

#include "cpu_int8.h"
#include "quant.h" /* sv_f16_to_f32, sv_dequantize */
#include "util/clock.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define GEMM_LANES 16 /* partial sums per dot product */
#define GEMM_RB 4     /* rows per tile */
#define GEMM_CB 4     /* output columns per tile */
#define ATTN_TILE 32  /* keys per softmax tile */
#define ATTN_AHEAD 4  /* cache rows fetched ahead (attn_rows_v) */
#define ATTN_GROUP_MAX 4 /* query rows attn_rows_v takes at once, at most */

#if defined(__GNUC__)
#define SV_INLINE static inline __attribute__((always_inline))
#else
#define SV_INLINE static inline
#endif

/* Wider vector code where the CPU has it, chosen once at load time. The
 * arithmetic is the same in every clone (see above), so results agree. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define SV_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef SV_CLONES
#define SV_CLONES
#endif

/* ---- thread pool ----------------------------------------------------------- */

/* Runs items [begin, end) of a job on thread tid (0 .. n_threads-1; the
 * caller is 0), which lets a job use per-thread scratch. */
typedef void (*job_fn)(void *ctx, int tid, int64_t begin, int64_t end);

typedef struct pool {
    int n_threads; /* including the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    _Atomic uint64_t gen; /* bumped for every job (written under mu, read by spinners without) */
    _Atomic int pending;  /* workers still running the current job */
    _Atomic bool stop;
    job_fn fn;
    void *ctx;
    int64_t n_items;
} pool_t;

typedef struct worker_arg {
    pool_t *pool;
    int index; /* 1 .. n_threads-1; the caller is 0 */
} worker_arg_t;

static void part(int64_t n, int t, int nt, int64_t *b, int64_t *e) {
    *b = n * t / nt;
    *e = n * (t + 1) / nt;
}

/* Hand-offs. A decode step runs a few hundred short jobs, tens of
 * microseconds apart, and a futex wake-up per job costs about as much as
 * the job (BENCHMARKS.md, "CPU model"). So a waiting thread first spins
 * for up to POOL_SPIN_NS, watching the counter it waits on, and only then
 * sleeps on the condition variable: on a quiet machine the hand-off is a
 * cache line; on a busy one a thread gives its core back within that
 * bound. Spinning changes who waits how, never what a job computes. */
#define POOL_SPIN_NS 50000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until pred(pl, arg) holds or POOL_SPIN_NS pass; true if it holds. */
static bool spin_until(pool_t *pl, bool (*pred)(pool_t *, uint64_t), uint64_t arg) {
    uint64_t t0 = 0;
    for (uint32_t i = 1;; i++) {
        if (pred(pl, arg)) return true;
        cpu_relax();
        if ((i & 63) == 0) {
            uint64_t t = sv_now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > POOL_SPIN_NS) return false;
        }
    }
}

static bool new_job(pool_t *pl, uint64_t seen) {
    return atomic_load_explicit(&pl->gen, memory_order_acquire) != seen ||
           atomic_load_explicit(&pl->stop, memory_order_relaxed);
}

static bool all_done(pool_t *pl, uint64_t unused) {
    (void)unused;
    return atomic_load_explicit(&pl->pending, memory_order_acquire) == 0;
}

static void *worker_main(void *p) {
    worker_arg_t *a = p;
    pool_t *pl = a->pool;
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until(pl, new_job, seen)) {
            pthread_mutex_lock(&pl->mu);
            while (atomic_load(&pl->gen) == seen && !atomic_load(&pl->stop))
                pthread_cond_wait(&pl->go, &pl->mu);
            pthread_mutex_unlock(&pl->mu);
        }
        if (atomic_load(&pl->stop))
            break;
        seen = atomic_load_explicit(&pl->gen, memory_order_acquire); /* fn, ctx, n_items: written before */
        int64_t b, e;
        part(pl->n_items, a->index, pl->n_threads, &b, &e);
        if (b < e)
            pl->fn(pl->ctx, a->index, b, e);
        if (atomic_fetch_sub_explicit(&pl->pending, 1, memory_order_acq_rel) == 1) {
            /* the last one: the caller may be asleep (it checks pending under mu) */
            pthread_mutex_lock(&pl->mu);
            pthread_cond_signal(&pl->done);
            pthread_mutex_unlock(&pl->mu);
        }
    }
    return NULL;
}

/* Runs fn over n items on all threads and returns when every part is done.
 * Jobs with fewer than min_per_thread items per thread run on the caller. */
static void pool_run(pool_t *pl, int64_t n, int64_t min_per_thread, job_fn fn, void *ctx) {
    if (n <= 0)
        return;
    if (pl->n_threads == 1 || n < min_per_thread * 2) {
        fn(ctx, 0, 0, n);
        return;
    }
    pthread_mutex_lock(&pl->mu);
    pl->fn = fn;
    pl->ctx = ctx;
    pl->n_items = n;
    atomic_store_explicit(&pl->pending, pl->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&pl->gen, 1, memory_order_release);
    pthread_cond_broadcast(&pl->go);
    pthread_mutex_unlock(&pl->mu);
    int64_t b, e;
    part(n, 0, pl->n_threads, &b, &e);
    if (b < e)
        fn(ctx, 0, b, e);
    if (!spin_until(pl, all_done, 0)) {
        pthread_mutex_lock(&pl->mu);
        while (atomic_load(&pl->pending) > 0)
            pthread_cond_wait(&pl->done, &pl->mu);
        pthread_mutex_unlock(&pl->mu);
    }
}

/* ---- the backend ------------------------------------------------------------ */

typedef struct cpu_backend {
    sv_backend_t base; /* must be first */
    pool_t pool;
    worker_arg_t *args;
    int n_started;     /* workers actually running */
    float *scratch;    /* gemm_q: GEMM_CB dequantized weight rows per thread */
    size_t scratch_n;  /* floats scratch holds */
    bool int8;         /* SV_CPU_KERNELS_INT8*: integer products for the 32-block formats */
    sv_i8_level i8;    /* and the code that computes them */
    sv_q8x_t *qx;      /* gemm_q with int8: the quantized activation rows */
    size_t qx_n;       /* blocks qx holds */
    uint8_t *rp;       /* and the threads' repacked 16-column tiles (many rows) */
    size_t rp_n;       /* bytes rp holds */
} cpu_backend_t;

static pool_t *pool_of(sv_backend_t *be) { return &((cpu_backend_t *)be)->pool; }

static sv_status cpu_alloc(sv_backend_t *be, size_t bytes, void **out, sv_error_t *err) {
    (void)be;
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "cpu backend: cannot allocate %zu bytes", bytes);
    *out = p;
    return SV_OK;
}

static void cpu_free(sv_backend_t *be, void *p) {
    (void)be;
    free(p);
}

static sv_status cpu_copy(sv_backend_t *be, void *dst, const void *src, size_t bytes,
                          sv_error_t *err) {
    (void)be;
    (void)err;
    if (bytes)
        memmove(dst, src, bytes);
    return SV_OK;
}

/* ---- gemm ------------------------------------------------------------------- */

/* GEMM_LANES floats as one value: GCC/Clang vector extensions, lowered to
 * whatever the target has (one zmm, two ymm, four xmm). Each lane is plain
 * IEEE float arithmetic, so the width changes speed, not results. Written
 * with explicit vectors because the compiler keeps an accumulator array in
 * memory when it is left to vectorise scalar loops itself. */
typedef float vfloat __attribute__((vector_size(GEMM_LANES * sizeof(float))));

/* The lanes of one accumulator summed pairwise, halves first: the one order
 * gemm_tile and gemm_tile_q share (their bits must match). */
SV_INLINE float lanes_sum(float a[GEMM_LANES]) {
    for (int h = GEMM_LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++)
            a[l] += a[l + h];
    return a[0];
}

/* y[r][c] = x[r] · w[c] (+ bias[c]) for r < nr, c < nc; x (nr, in), w (nc,
 * in); nr <= GEMM_RB, nc <= GEMM_CB, both compile-time constants at every
 * call site so the loops unroll and the accumulators live in registers. */
SV_INLINE void gemm_tile(int nr, int nc, int32_t in, const float *x, const float *w,
                         const float *bias, float *y, int32_t ldy) {
    vfloat acc[GEMM_RB][GEMM_CB];
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++)
            acc[r][c] = (vfloat){0};
    int32_t kmain = in - in % GEMM_LANES;
    for (int32_t k = 0; k < kmain; k += GEMM_LANES) {
        vfloat xv[GEMM_RB], wv[GEMM_CB];
        for (int r = 0; r < nr; r++)
            memcpy(&xv[r], x + (size_t)r * in + k, sizeof xv[r]);
        for (int c = 0; c < nc; c++)
            memcpy(&wv[c], w + (size_t)c * in + k, sizeof wv[c]);
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < nc; c++)
                acc[r][c] += xv[r] * wv[c];
    }
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) {
            float a[GEMM_LANES];
            memcpy(a, &acc[r][c], sizeof a);
            for (int32_t k = kmain; k < in; k++) /* the tail goes into lanes 0.. */
                a[k - kmain] += x[(size_t)r * in + k] * w[(size_t)c * in + k];
            float sum = lanes_sum(a);
            y[(size_t)r * ldy + c] = bias ? sum + bias[c] : sum;
        }
}

typedef struct gemm_job {
    int32_t rows, in, out;
    const float *x, *w, *bias;
    float *y;
    /* gemm_q: w is NULL, wq the rows in format qt, row_bytes apart, and
     * scratch GEMM_CB * in floats per thread */
    const uint8_t *wq;
    sv_qtype qt;
    size_t row_bytes;
    float *scratch;
} gemm_job_t;

/* Column tile c0 .. c0 + GEMM_CB - 1 (fewer at the end), every row; w holds
 * the tile's weight rows, in floats apart. */
SV_INLINE void gemm_coltile(const gemm_job_t *j, int32_t c0, const float *w) {
    int32_t rfull = j->rows - j->rows % GEMM_RB;
    const float *bias = j->bias ? j->bias + c0 : NULL;
    bool full = c0 + GEMM_CB <= j->out;
    for (int32_t r = 0; r < j->rows;) {
        const float *x = j->x + (size_t)r * j->in;
        float *y = j->y + (size_t)r * j->out + c0;
        int nr = r < rfull ? GEMM_RB : 1;
        if (full) {
            if (nr == GEMM_RB)
                gemm_tile(GEMM_RB, GEMM_CB, j->in, x, w, bias, y, j->out);
            else
                gemm_tile(1, GEMM_CB, j->in, x, w, bias, y, j->out);
        } else {
            for (int32_t c = 0; c0 + c < j->out; c++) {
                if (nr == GEMM_RB)
                    gemm_tile(GEMM_RB, 1, j->in, x, w + (size_t)c * j->in,
                              bias ? bias + c : NULL, y + c, j->out);
                else
                    gemm_tile(1, 1, j->in, x, w + (size_t)c * j->in, bias ? bias + c : NULL,
                              y + c, j->out);
            }
        }
        r += nr;
    }
}

/* Work items (column tiles of `width` columns) a thread should get at
 * least: under ~64k multiply-adds per thread the hand-off costs more than
 * it saves. */
static int64_t min_tiles(int32_t rows, int32_t in, int32_t width) {
    int64_t per_tile = (int64_t)rows * in * width;
    return per_tile >= 65536 ? 1 : 65536 / per_tile;
}

/* Column tiles [b, e) of the product, every row. */
SV_CLONES static void gemm_cols(void *p, int tid, int64_t b, int64_t e) {
    (void)tid;
    const gemm_job_t *j = p;
    for (int64_t t = b; t < e; t++) {
        int32_t c0 = (int32_t)t * GEMM_CB;
        gemm_coltile(j, c0, j->w + (size_t)c0 * j->in);
    }
}

/* ---- gemm on quantized weights ----------------------------------------------- */

/* The weights stay in their GGUF blocks; a column tile's GEMM_CB rows are
 * dequantized into the thread's scratch (in L1/L2) and go through the very
 * gemm_tile code above, so the bits are those of ops->gemm on the fp32
 * matrix. Each decoder does src/backend/quant.c's float operations in its
 * order (one rounding per multiply and per add; this file is compiled
 * without contraction), so the floats equal sv_dequantize's. */

/* f16 -> f32 for every f16 bit pattern, filled once by sv_f16_to_f32
 * (src/backend/quant.c), so a scale costs one load and is the same float. */
static float f16_table[1 << 16];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_fill(void) {
    for (uint32_t h = 0; h < (1u << 16); h++)
        f16_table[h] = sv_f16_to_f32((uint16_t)h);
}

SV_INLINE float rd_f16(const uint8_t *p) { return f16_table[p[0] | p[1] << 8]; }

/* 16 bytes as one value, for the nibble and byte unpacking. */
typedef uint8_t vu8 __attribute__((vector_size(GEMM_LANES)));
typedef int8_t vi8 __attribute__((vector_size(GEMM_LANES)));
/* vi8 at any address, e.g. inside a block (GCC otherwise builds a memcpy
 * of one from scalar pieces) */
typedef int8_t vi8_u __attribute__((vector_size(GEMM_LANES), aligned(1), may_alias));
typedef int32_t vi32 __attribute__((vector_size(GEMM_LANES * 4)));

/* 16 small integers to floats (exact), through int32 so that the compiler
 * emits vector widenings and conversions rather than one lane at a time. */
#define TO_F(v) __builtin_convertvector(__builtin_convertvector((v), vi32), vfloat)

/* One 32-element block of format t (Q8_0, Q4_0, Q4_1) at b to floats:
 * elements 0..15 in *lo, 16..31 in *hi. Element for element the operations
 * of quant.c's blk_* functions: an exact integer-to-float conversion, then
 * one multiply (and one add). */
SV_INLINE void decode_block(sv_qtype t, const uint8_t *b, vfloat *lo, vfloat *hi) {
    switch (t) {
    case SV_QT_Q8_0: { /* q * d */
        float d = rd_f16(b);
        vi8 q0 = *(const vi8_u *)(b + 2), q1 = *(const vi8_u *)(b + 18);
        *lo = TO_F(q0) * d;
        *hi = TO_F(q1) * d;
        break;
    }
    case SV_QT_Q4_0: { /* d * (q - 8) */
        float d = rd_f16(b);
        vu8 q;
        memcpy(&q, b + 2, 16);
        vi8 l = (vi8)(q & 0x0f) - 8, h = (vi8)(q >> 4) - 8;
        *lo = d * TO_F(l);
        *hi = d * TO_F(h);
        break;
    }
    case SV_QT_Q4_1: { /* d * q + m */
        float d = rd_f16(b), m = rd_f16(b + 2);
        vu8 q;
        memcpy(&q, b + 4, 16);
        *lo = d * TO_F(q & 0x0f) + m;
        *hi = d * TO_F(q >> 4) + m;
        break;
    }
    default: /* not a 32-block format; never called with one */
        *lo = *hi = (vfloat){0};
        break;
    }
}

/* n elements (a multiple of the block) of a row in format t to floats. */
SV_INLINE void decode_row(sv_qtype t, const uint8_t *b, int32_t n, float *y) {
    switch (t) {
    case SV_QT_F16:
        for (int32_t i = 0; i < n; i++)
            y[i] = rd_f16(b + 2 * (size_t)i);
        break;
    case SV_QT_BF16:
        for (int32_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)(b[2 * i] | b[2 * i + 1] << 8) << 16;
            memcpy(&y[i], &u, sizeof u);
        }
        break;
    case SV_QT_Q4_K: case SV_QT_Q5_K: case SV_QT_Q6_K: { /* quant.c's own decoders */
        sv_ggml_type g = t == SV_QT_Q4_K ? SV_GGML_Q4_K : t == SV_QT_Q5_K ? SV_GGML_Q5_K : SV_GGML_Q6_K;
        sv_error_t e;
        sv_dequantize(g, b, (size_t)(n / 256) * sv_qtype_block_bytes(t), y, (uint64_t)n, &e); /* cannot fail: n checked */
        break;
    }
    default: {
        size_t bb = sv_qtype_block_bytes(t);
        for (int32_t k = 0; k < n; k += 32, b += bb, y += 32) {
            vfloat lo, hi;
            decode_block(t, b, &lo, &hi);
            memcpy(y, &lo, sizeof lo);
            memcpy(y + 16, &hi, sizeof hi);
        }
        break;
    }
    }
}

/* gemm_tile with the weights dequantized in registers, for a 32-block
 * format t (in a multiple of 32, so gemm_tile has no tail): every
 * accumulator gets x[k..k+15]·w[k..k+15] for k = 0, 16, 32, ... in that
 * order, then the same pairwise sum, so the bits are gemm_tile's on the
 * dequantized rows. w: the tile's first weight row, row_bytes apart. */
SV_INLINE void gemm_tile_q(int nr, int nc, sv_qtype t, int32_t in, const float *x,
                           const uint8_t *w, size_t row_bytes, const float *bias, float *y,
                           int32_t ldy) {
    vfloat acc[GEMM_RB][GEMM_CB];
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++)
            acc[r][c] = (vfloat){0};
    size_t bb = sv_qtype_block_bytes(t);
    for (int32_t k = 0; k < in; k += 32, w += bb) {
        vfloat xl[GEMM_RB], xh[GEMM_RB], wl[GEMM_CB], wh[GEMM_CB];
        for (int c = 0; c < nc; c++)
            decode_block(t, w + (size_t)c * row_bytes, &wl[c], &wh[c]);
        for (int r = 0; r < nr; r++) {
            memcpy(&xl[r], x + (size_t)r * in + k, sizeof xl[r]);
            memcpy(&xh[r], x + (size_t)r * in + k + 16, sizeof xh[r]);
        }
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < nc; c++)
                acc[r][c] += xl[r] * wl[c];
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < nc; c++)
                acc[r][c] += xh[r] * wh[c];
    }
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) {
            float a[GEMM_LANES];
            memcpy(a, &acc[r][c], sizeof a);
            float sum = lanes_sum(a);
            y[(size_t)r * ldy + c] = bias ? sum + bias[c] : sum;
        }
}

/* Column tile c0 of a 32-block format, every row, decoding in registers. */
SV_INLINE void gemm_coltile_q(const gemm_job_t *j, int32_t c0, sv_qtype t) {
    int32_t rfull = j->rows - j->rows % GEMM_RB;
    const float *bias = j->bias ? j->bias + c0 : NULL;
    const uint8_t *w = j->wq + (size_t)c0 * j->row_bytes;
    size_t rb = j->row_bytes;
    bool full = c0 + GEMM_CB <= j->out;
    for (int32_t r = 0; r < j->rows;) {
        const float *x = j->x + (size_t)r * j->in;
        float *y = j->y + (size_t)r * j->out + c0;
        int nr = r < rfull ? GEMM_RB : 1;
        if (full) {
            if (nr == GEMM_RB)
                gemm_tile_q(GEMM_RB, GEMM_CB, t, j->in, x, w, rb, bias, y, j->out);
            else
                gemm_tile_q(1, GEMM_CB, t, j->in, x, w, rb, bias, y, j->out);
        } else {
            for (int32_t c = 0; c0 + c < j->out; c++) {
                const float *bc = bias ? bias + c : NULL;
                if (nr == GEMM_RB)
                    gemm_tile_q(GEMM_RB, 1, t, j->in, x, w + (size_t)c * rb, rb, bc, y + c,
                                j->out);
                else
                    gemm_tile_q(1, 1, t, j->in, x, w + (size_t)c * rb, rb, bc, y + c, j->out);
            }
        }
        r += nr;
    }
}

/* Few rows: the 32-block formats are decoded in registers, once per row
 * tile. Otherwise (and for F16/BF16) a column tile's rows are decoded once
 * into the thread's scratch and every row tile reads them from there. */
#define GEMM_Q_REG_ROWS 8

SV_CLONES static void gemm_q_cols(void *p, int tid, int64_t b, int64_t e) {
    const gemm_job_t *j = p;
    bool reg = j->rows < GEMM_Q_REG_ROWS && sv_qtype_block(j->qt) == 32;
    float *w = j->scratch + (size_t)tid * GEMM_CB * j->in;
    for (int64_t t = b; t < e; t++) {
        int32_t c0 = (int32_t)t * GEMM_CB;
        if (reg) {
            switch (j->qt) { /* constant formats, so that each inlines its own decoder */
            case SV_QT_Q8_0: gemm_coltile_q(j, c0, SV_QT_Q8_0); break;
            case SV_QT_Q4_0: gemm_coltile_q(j, c0, SV_QT_Q4_0); break;
            default: gemm_coltile_q(j, c0, SV_QT_Q4_1); break;
            }
            continue;
        }
        int32_t nc = j->out - c0 < GEMM_CB ? j->out - c0 : GEMM_CB;
        for (int32_t c = 0; c < nc; c++)
            decode_row(j->qt, j->wq + (size_t)(c0 + c) * j->row_bytes, j->in,
                       w + (size_t)c * j->in);
        gemm_coltile(j, c0, w);
    }
}

/* ---- gemm on quantized weights, integer products (--cpu-kernels int8) ----- */

/* From this many rows, int8 products repack each 16-column tile once and
 * run every row through it (sv_i8_cols16); fewer rows read the blocks as
 * they are. */
#define GEMM_I8_WIDE_ROWS 4

typedef struct gemm_i8_job {
    int32_t rows, out, nb; /* nb: blocks of 32 per row */
    const sv_q8x_t *qx;    /* (rows, nb) */
    const uint8_t *wq;
    sv_qtype qt;
    size_t row_bytes;
    const float *bias;
    float *y;
    sv_i8_level lv;
    int32_t tile;    /* columns a work item covers: GEMM_CB, or 16 with rp */
    uint8_t *rp;     /* cols16: per-thread scratch for repacked weights, rp_bytes each, or NULL */
    size_t rp_bytes;
} gemm_i8_job_t;

/* Columns [c0, c0 + nc), every row: a tile's weight rows stay in L1 while
 * each activation row meets them. */
static void gemm_i8_span(const gemm_i8_job_t *j, int32_t c0, int32_t nc) {
    for (int32_t c = c0; c < c0 + nc; c += GEMM_CB) {
        int32_t n = c0 + nc - c < GEMM_CB ? c0 + nc - c : GEMM_CB;
        const uint8_t *w = j->wq + (size_t)c * j->row_bytes;
        const float *bias = j->bias ? j->bias + c : NULL;
        int32_t r = 0;
        if (n == 4)
            for (; r + 4 <= j->rows; r += 4)
                sv_i8_tile4(j->lv, j->qt, w, j->row_bytes, j->qx + (size_t)r * j->nb, j->nb, bias,
                            j->y + (size_t)r * j->out + c, j->out);
        for (; r < j->rows; r++)
            sv_i8_dots(j->lv, j->qt, w, j->row_bytes, n, j->qx + (size_t)r * j->nb, j->nb, bias,
                       j->y + (size_t)r * j->out + c);
    }
}

/* Column tiles [b, e) of j->tile columns, every row. Tiles of 16 go
 * through the repacked kernel (many rows; j->rp set), the others, and a
 * narrower last one, through gemm_i8_span: the same bits either way. */
static void gemm_i8_cols(void *p, int tid, int64_t b, int64_t e) {
    const gemm_i8_job_t *j = p;
    for (int64_t t = b; t < e; t++) {
        int32_t c0 = (int32_t)t * j->tile, nc = j->out - c0 < j->tile ? j->out - c0 : j->tile;
        if (j->rp && nc == 16) {
            /* the next tile of this range, fetched while this one runs */
            int32_t nn = t + 1 < e ? (j->out - c0 - 16 < 16 ? j->out - c0 - 16 : 16) : 0;
            sv_i8_cols16(j->lv, j->qt, j->wq + (size_t)c0 * j->row_bytes, j->row_bytes, j->qx, j->rows, j->nb,
                         j->bias ? j->bias + c0 : NULL, j->y + c0, j->out, j->rp + (size_t)tid * j->rp_bytes,
                         nn > 0 ? j->wq + (size_t)(c0 + 16) * j->row_bytes : NULL, (size_t)(nn > 0 ? nn : 0) * j->row_bytes);
        } else
            gemm_i8_span(j, c0, nc);
    }
}

typedef struct quant_job {
    const float *x;
    int32_t in;
    sv_q8x_t *qx;
    sv_i8_level lv;
} quant_job_t;

static void quant_rows(void *p, int tid, int64_t b, int64_t e) {
    (void)tid;
    const quant_job_t *j = p;
    int32_t nb = j->in / 32;
    for (int64_t r = b; r < e; r++)
        sv_q8x_quantize(j->lv, j->x + (size_t)r * j->in, j->in, j->qx + (size_t)r * nb);
}

static sv_status gemm_q_int8(cpu_backend_t *cb, int32_t rows, int32_t in, int32_t out, const float *x,
                             const void *w, sv_qtype t, const float *bias, float *y, sv_error_t *err) {
    int32_t nb = in / 32;
    size_t need = (size_t)rows * (size_t)nb;
    if (need > cb->qx_n) {
        sv_q8x_t *q = realloc(cb->qx, need * sizeof *q);
        if (!q) return sv_error_set(err, SV_ERR_NOMEM, -1, "gemm_q: cannot allocate %zu activation blocks", need);
        cb->qx = q;
        cb->qx_n = need;
    }
    quant_job_t qj = {x, in, cb->qx, cb->i8};
    pool_run(&cb->pool, rows, (65536 + in - 1) / in, quant_rows, &qj);
    gemm_i8_job_t j = {rows, out, nb, cb->qx, w, t, (size_t)(in / sv_qtype_block(t)) * sv_qtype_block_bytes(t),
                       bias, y, cb->i8, GEMM_CB, NULL, 0};
    if (rows >= GEMM_I8_WIDE_ROWS && sv_i8_cols16_ok(cb->i8)) {
        /* many rows: 16-column tiles, repacked once per tile into the thread's scratch */
        size_t per = sv_i8_cols16_scratch(t, nb), bytes = per * (size_t)cb->pool.n_threads;
        if (bytes > cb->rp_n) {
            uint8_t *r = realloc(cb->rp, bytes);
            if (!r) return sv_error_set(err, SV_ERR_NOMEM, -1, "gemm_q: cannot allocate %zu bytes of repacked weights", bytes);
            cb->rp = r;
            cb->rp_n = bytes;
        }
        j.tile = 16;
        j.rp = cb->rp;
        j.rp_bytes = per;
    }
    pool_run(&cb->pool, (out + j.tile - 1) / j.tile, min_tiles(rows, in, j.tile), gemm_i8_cols, &j);
    return SV_OK;
}

static bool qtype_ok(sv_qtype t, int32_t in) {
    int32_t blk = sv_qtype_block(t);
    return blk > 0 && in % blk == 0;
}

static sv_status cpu_gemm_q(sv_backend_t *be, int32_t rows, int32_t in, int32_t out,
                            const float *x, const void *w, sv_qtype t, const float *bias, float *y,
                            sv_error_t *err) {
    if (rows < 0 || in <= 0 || out <= 0 || !x || !w || !y || !qtype_ok(t, in))
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "gemm_q: bad arguments (rows %d, in %d, out %d, type %d)", (int)rows,
                            (int)in, (int)out, (int)t);
    if (rows == 0) return SV_OK;
    cpu_backend_t *cb = (cpu_backend_t *)be;
    if (cb->int8 && sv_i8_qtype_ok(t)) return gemm_q_int8(cb, rows, in, out, x, w, t, bias, y, err);
    size_t need = (size_t)cb->pool.n_threads * GEMM_CB * (size_t)in;
    if (need > cb->scratch_n) {
        float *s = aligned_alloc(64, (need * sizeof(float) + 63) / 64 * 64);
        if (!s)
            return sv_error_set(err, SV_ERR_NOMEM, -1, "gemm_q: cannot allocate %zu floats", need);
        free(cb->scratch);
        cb->scratch = s;
        cb->scratch_n = need;
    }
    gemm_job_t j = {rows, in, out, x, NULL, bias, y, w, t,
                    (size_t)(in / sv_qtype_block(t)) * sv_qtype_block_bytes(t), cb->scratch};
    pool_run(pool_of(be), (out + GEMM_CB - 1) / GEMM_CB, min_tiles(rows, in, GEMM_CB), gemm_q_cols, &j);
    return SV_OK;
}

SV_CLONES static sv_status cpu_get_rows_q(sv_backend_t *be, int32_t rows, int32_t dim,
                                          int32_t n_table, const void *table, sv_qtype t,
                                          const int32_t *ids, float *out, sv_error_t *err) {
    (void)be;
    if (rows < 0 || dim <= 0 || !qtype_ok(t, dim))
        return sv_error_set(err, SV_ERR_ARG, -1, "get_rows_q: bad arguments");
    size_t row_bytes = (size_t)(dim / sv_qtype_block(t)) * sv_qtype_block_bytes(t);
    for (int32_t r = 0; r < rows; r++) {
        if (ids[r] < 0 || ids[r] >= n_table)
            return sv_error_set(err, SV_ERR_ARG, -1, "get_rows_q: id %d outside 0..%d",
                                (int)ids[r], (int)n_table - 1);
        decode_row(t, (const uint8_t *)table + (size_t)ids[r] * row_bytes, dim,
                   out + (size_t)r * dim);
    }
    return SV_OK;
}

static sv_status cpu_gemm(sv_backend_t *be, int32_t rows, int32_t in, int32_t out, const float *x,
                          const float *w, const float *bias, float *y, sv_error_t *err) {
    if (rows < 0 || in <= 0 || out <= 0 || !x || !w || !y)
        return sv_error_set(err, SV_ERR_ARG, -1, "gemm: bad arguments (rows %d, in %d, out %d)",
                            (int)rows, (int)in, (int)out);
    if (rows == 0) return SV_OK;
    gemm_job_t j = {rows, in, out, x, w, bias, y, NULL, 0, 0, NULL};
    pool_run(pool_of(be), (out + GEMM_CB - 1) / GEMM_CB, min_tiles(rows, in, GEMM_CB), gemm_cols, &j);
    return SV_OK;
}

/* ---- small ops ------------------------------------------------------------- */

/* x · y over n floats, in the gemm kernel's order. */
SV_INLINE float dot(const float *x, const float *y, int32_t n) {
    float r;
    gemm_tile(1, 1, n, x, y, NULL, &r, 1);
    return r;
}

/* Row-wise operations run their rows over the pool from this many rows per
 * thread (fewer stay on the caller: a decode step's few rows are cheaper
 * than a wake-up). Each row's arithmetic is its own, so any split gives
 * the same bits. */
#define ROWS_PER_THREAD 8

typedef struct rmsnorm_job {
    int32_t dim;
    const float *x, *w;
    float eps;
    float *y;
} rmsnorm_job_t;

static void rmsnorm_rows(void *p, int tid, int64_t b, int64_t e) {
    (void)tid;
    const rmsnorm_job_t *j = p;
    for (int64_t r = b; r < e; r++) {
        const float *xr = j->x + (size_t)r * j->dim;
        float *yr = j->y + (size_t)r * j->dim;
        float ss = dot(xr, xr, j->dim);
        float scale = 1.0f / sqrtf(ss / (float)j->dim + j->eps);
        for (int32_t i = 0; i < j->dim; i++)
            yr[i] = (xr[i] * scale) * j->w[i];
    }
}

static sv_status cpu_rmsnorm(sv_backend_t *be, int32_t rows, int32_t dim, const float *x,
                             const float *w, float eps, float *y, sv_error_t *err) {
    if (rows < 0 || dim <= 0 || !(eps >= 0.0f))
        return sv_error_set(err, SV_ERR_ARG, -1, "rmsnorm: bad arguments (rows %d, dim %d)",
                            (int)rows, (int)dim);
    rmsnorm_job_t j = {dim, x, w, eps, y};
    pool_run(pool_of(be), rows, ROWS_PER_THREAD, rmsnorm_rows, &j);
    return SV_OK;
}

typedef struct rope_job {
    int32_t n_heads, head_dim, half;
    sv_rope_style style;
    const int32_t *pos;
    const float *inv_freq;
    float *x;
} rope_job_t;

static void rope_rows(void *p, int tid, int64_t b, int64_t e) {
    (void)tid;
    const rope_job_t *j = p;
    float cs[SV_CPU_MAX_HEAD_DIM / 2], sn[SV_CPU_MAX_HEAD_DIM / 2];
    for (int64_t r = b; r < e; r++) {
        /* The angle in double: pos * inv_freq loses ~pos·2⁻²⁴ rad in float. */
        for (int32_t i = 0; i < j->half; i++) {
            double a = (double)j->pos[r] * (double)j->inv_freq[i];
            cs[i] = (float)cos(a);
            sn[i] = (float)sin(a);
        }
        for (int32_t h = 0; h < j->n_heads; h++) {
            float *v = j->x + ((size_t)r * j->n_heads + h) * j->head_dim;
            for (int32_t i = 0; i < j->half; i++) {
                int32_t i0 = j->style == SV_ROPE_NORMAL ? 2 * i : i;
                int32_t i1 = j->style == SV_ROPE_NORMAL ? 2 * i + 1 : i + j->half;
                float a = v[i0], c = v[i1];
                v[i0] = a * cs[i] - c * sn[i];
                v[i1] = a * sn[i] + c * cs[i];
            }
        }
    }
}

static sv_status cpu_rope(sv_backend_t *be, int32_t rows, int32_t n_heads, int32_t head_dim,
                          int32_t rot_dim, sv_rope_style style, const int32_t *pos,
                          const float *inv_freq, float *x, sv_error_t *err) {
    if (rows < 0 || n_heads <= 0 || head_dim <= 0 || rot_dim < 0 || rot_dim % 2 ||
        rot_dim > head_dim || head_dim > SV_CPU_MAX_HEAD_DIM ||
        (style != SV_ROPE_NORMAL && style != SV_ROPE_NEOX))
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "rope: bad arguments (heads %d, head_dim %d, rot_dim %d)",
                            (int)n_heads, (int)head_dim, (int)rot_dim);
    rope_job_t j = {n_heads, head_dim, rot_dim / 2, style, pos, inv_freq, x};
    pool_run(pool_of(be), rows, ROWS_PER_THREAD, rope_rows, &j);
    return SV_OK;
}

/* ---- the KV cache: kv_write and attention ----------------------------------- */

/* Where one sequence keeps its positions: a block table, or NULL for a
 * contiguous cache (position p is physical row p). */
typedef struct seq_map {
    const int32_t *table; /* block ids, or NULL */
    int32_t n_blocks;     /* entries in table */
    int32_t bs;           /* rows per block */
} seq_map_t;

SV_INLINE seq_map_t seq_map_of(const sv_kv_view_t *kv, int64_t r) {
    if (!kv->tables)
        return (seq_map_t){NULL, 0, 1};
    int32_t s = kv->seq_of_row[r];
    return (seq_map_t){kv->tables + kv->table_off[s], kv->table_off[s + 1] - kv->table_off[s],
                       kv->block_size};
}

SV_INLINE size_t phys_row(seq_map_t m, int32_t p) {
    return m.table ? (size_t)m.table[p / m.bs] * (size_t)m.bs + (size_t)(p % m.bs) : (size_t)p;
}

/* Checks the view's tables and that every row's position has a physical
 * row, before anything is read or written. */
static sv_status check_pos(const char *op, const sv_kv_view_t *kv, int32_t rows, const int32_t *pos,
                           sv_error_t *err) {
    if (!kv->tables) {
        for (int32_t r = 0; r < rows; r++)
            if (pos[r] < 0 || pos[r] >= kv->capacity)
                return sv_error_set(err, SV_ERR_ARG, -1,
                                    "%s: position %d outside the cache (0..%d)", op, (int)pos[r],
                                    (int)kv->capacity - 1);
        return SV_OK;
    }
    int32_t bs = kv->block_size;
    if (bs <= 0 || kv->capacity % bs || kv->n_seqs < 1 || !kv->seq_of_row || !kv->table_off)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "%s: bad paged view (block size %d, capacity %d, %d sequences)", op,
                            (int)bs, (int)kv->capacity, (int)kv->n_seqs);
    int32_t n_phys = kv->capacity / bs;
    for (int32_t s = 0; s < kv->n_seqs; s++) {
        if (kv->table_off[s] < 0 || kv->table_off[s + 1] < kv->table_off[s])
            return sv_error_set(err, SV_ERR_ARG, -1, "%s: sequence %d: bad table offsets", op,
                                (int)s);
        for (int32_t i = kv->table_off[s]; i < kv->table_off[s + 1]; i++)
            if (kv->tables[i] < 0 || kv->tables[i] >= n_phys)
                return sv_error_set(err, SV_ERR_ARG, -1,
                                    "%s: sequence %d: block %d outside the cache (0..%d)", op,
                                    (int)s, (int)kv->tables[i], (int)n_phys - 1);
    }
    for (int32_t r = 0; r < rows; r++) {
        int32_t s = kv->seq_of_row[r];
        if (s < 0 || s >= kv->n_seqs)
            return sv_error_set(err, SV_ERR_ARG, -1, "%s: row %d: sequence %d outside 0..%d", op,
                                (int)r, (int)s, (int)kv->n_seqs - 1);
        int32_t nb = kv->table_off[s + 1] - kv->table_off[s];
        if (pos[r] < 0 || pos[r] / bs >= nb)
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "%s: row %d: position %d outside its block table (0..%lld)", op,
                                (int)r, (int)pos[r], (long long)nb * bs - 1);
    }
    return SV_OK;
}

static sv_status cpu_kv_write(sv_backend_t *be, const sv_kv_view_t *kv, int32_t rows,
                              const int32_t *pos, const float *k, const float *v,
                              sv_error_t *err) {
    (void)be;
    if (rows < 0 || !kv || kv->kv_dim <= 0)
        return sv_error_set(err, SV_ERR_ARG, -1, "kv_write: bad arguments");
    if (check_pos("kv_write", kv, rows, pos, err))
        return err ? err->code : SV_ERR_ARG;
    size_t d = (size_t)kv->kv_dim;
    for (int32_t r = 0; r < rows; r++) {
        size_t row = phys_row(seq_map_of(kv, r), pos[r]);
        memcpy(kv->k + row * d, k + (size_t)r * d, d * sizeof(float));
        memcpy(kv->v + row * d, v + (size_t)r * d, d * sizeof(float));
    }
    return SV_OK;
}

typedef struct attn_job {
    const sv_kv_view_t *kv;
    const sv_attn_shape_t *sh;
    const int32_t *pos;
    const float *q;
    float *out;
    int32_t rows;
} attn_job_t;

/* The float offsets of the nt cache rows of positions t0 .. t0 + nt - 1,
 * walking the block table without a division per position. */
SV_INLINE void tile_offsets(seq_map_t map, int32_t t0, int32_t nt, size_t ld, size_t *off) {
    int32_t blk = t0 / map.bs, slot = t0 % map.bs;
    for (int32_t j = 0; j < nt; j++) {
        size_t row = map.table ? (size_t)map.table[blk] * (size_t)map.bs + (size_t)slot : (size_t)(t0 + j);
        off[j] = row * ld;
        if (++slot == map.bs)
            slot = 0, blk++;
    }
}

/* One query head against positions t_begin .. n_ctx-1 of a sequence (rows
 * of k and v found through map, ld floats apart; t_begin > 0 in a
 * sliding-window layer): a streaming softmax over tiles of ATTN_TILE
 * positions from t_begin, rescaling the accumulator when the maximum
 * grows. Only the addresses depend on the map, so a paged cache gives the
 * bits of a contiguous one. */
SV_INLINE void attn_head(const float *q, const float *k, const float *v, size_t ld, int32_t hd,
                         int32_t t_begin, int32_t n_ctx, float scale, seq_map_t map, float *out) {
    float acc[SV_CPU_MAX_HEAD_DIM], s[ATTN_TILE];
    size_t off[ATTN_TILE]; /* float offsets of the tile's rows */
    float m = -INFINITY, l = 0.0f;
    for (int32_t d = 0; d < hd; d++)
        acc[d] = 0.0f;
    for (int32_t t0 = t_begin; t0 < n_ctx; t0 += ATTN_TILE) {
        int32_t nt = n_ctx - t0 < ATTN_TILE ? n_ctx - t0 : ATTN_TILE;
        tile_offsets(map, t0, nt, ld, off);
        float tm = -INFINITY;
        for (int32_t j = 0; j < nt; j++) {
            s[j] = dot(q, k + off[j], hd) * scale;
            tm = s[j] > tm ? s[j] : tm;
        }
        float mn = tm > m ? tm : m;
        float corr = expf(m - mn); /* 0 on the first tile */
        l *= corr;
        for (int32_t d = 0; d < hd; d++)
            acc[d] *= corr;
        for (int32_t j = 0; j < nt; j++) {
            float p = expf(s[j] - mn);
            const float *vj = v + off[j];
            l += p;
            for (int32_t d = 0; d < hd; d++)
                acc[d] += p * vj[d];
        }
        m = mn;
    }
    float inv = 1.0f / l;
    for (int32_t d = 0; d < hd; d++)
        out[d] = acc[d] * inv;
}

/* lanes_sum on a vector value, in its order (lane l takes lane l + h, for
 * h = 8, 4, 2, 1), through shuffles instead of a round trip through memory. */
#if GEMM_LANES == 16
SV_INLINE float vlanes_sum(vfloat v) {
#ifdef __clang__
    v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3);
    v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1);
    v += __builtin_shufflevector(v, v, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
#else
    typedef int32_t vidx __attribute__((vector_size(GEMM_LANES * sizeof(int32_t))));
    v += __builtin_shuffle(v, (vidx){8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
    v += __builtin_shuffle(v, (vidx){4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3});
    v += __builtin_shuffle(v, (vidx){2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1});
    v += __builtin_shuffle(v, (vidx){1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0});
#endif
    return v[0];
}

/* attn_head for nr <= RMAX query rows of one sequence and one head at
 * once, for a head_dim HD that is a multiple of GEMM_LANES (HD and RMAX
 * constants at each call site: the accumulators stay in registers). Rows
 * q[r] (r < nr) have their own ends n_ctx[r] and a common t_begin; each
 * key and value row read from the cache serves every row while it is in
 * registers (a prefill chunk's rows would each stream the whole cache
 * otherwise, and with a row stride of a power of two, such as 8 kv heads
 * of 128, the rows of a tile also meet in a few L1 sets). Every row runs
 * attn_head's operations on each element in its order (dot's lanes and
 * order, a tile's keys up to its own end, the same rescales and sums), so
 * its bits are attn_head's, alone or in a group. */
SV_INLINE void attn_rows_v(const float *const *q, const float *k, const float *v, size_t ld, const int32_t HD,
                           const int RMAX, int nr, int32_t t_begin, const int32_t *n_ctx, float scale, seq_map_t map,
                           float *const *out) {
    enum { NV_MAX = SV_CPU_MAX_HEAD_DIM / GEMM_LANES, R_MAX = ATTN_GROUP_MAX };
    const int nv = HD / GEMM_LANES;
    vfloat acc[R_MAX][NV_MAX];
    float s[R_MAX][ATTN_TILE], m[R_MAX], l[R_MAX], mn[R_MAX];
    size_t off[ATTN_TILE];
    int32_t end = t_begin;
    for (int r = 0; r < RMAX; r++) {
        m[r] = mn[r] = -INFINITY;
        l[r] = 0.0f;
        for (int i = 0; i < nv; i++) acc[r][i] = (vfloat){0};
        if (r < nr && n_ctx[r] > end) end = n_ctx[r];
    }
    for (int32_t t0 = t_begin; t0 < end; t0 += ATTN_TILE) {
        int32_t nt = end - t0 < ATTN_TILE ? end - t0 : ATTN_TILE, ntr[R_MAX];
        for (int r = 0; r < RMAX; r++) {
            int32_t left = r < nr ? n_ctx[r] - t0 : 0;
            ntr[r] = left < 0 ? 0 : left < ATTN_TILE ? left : ATTN_TILE;
        }
        tile_offsets(map, t0, nt, ld, off);
        for (int32_t j = 0; j < nt; j++) {
            vfloat kv[NV_MAX];
            if (j + ATTN_AHEAD < nt) /* rows a power of two apart defeat the hardware's prefetch */
                for (int i = 0; i < nv; i++) __builtin_prefetch(k + off[j + ATTN_AHEAD] + i * GEMM_LANES);
            for (int i = 0; i < nv; i++) memcpy(&kv[i], k + off[j] + i * GEMM_LANES, sizeof kv[i]);
            for (int r = 0; r < RMAX; r++) {
                if (j >= ntr[r]) continue;
                vfloat a = (vfloat){0};
                for (int i = 0; i < nv; i++) {
                    vfloat qv;
                    memcpy(&qv, q[r] + i * GEMM_LANES, sizeof qv);
                    a += qv * kv[i];
                }
                s[r][j] = vlanes_sum(a) * scale;
            }
        }
        for (int r = 0; r < RMAX; r++) {
            if (!ntr[r]) continue;
            float tm = -INFINITY;
            for (int32_t j = 0; j < ntr[r]; j++) tm = s[r][j] > tm ? s[r][j] : tm;
            mn[r] = tm > m[r] ? tm : m[r];
            float corr = expf(m[r] - mn[r]);
            l[r] *= corr;
            for (int i = 0; i < nv; i++) acc[r][i] *= corr;
        }
        for (int32_t j = 0; j < nt; j++) {
            vfloat vv[NV_MAX];
            if (j + ATTN_AHEAD < nt)
                for (int i = 0; i < nv; i++) __builtin_prefetch(v + off[j + ATTN_AHEAD] + i * GEMM_LANES);
            for (int i = 0; i < nv; i++) memcpy(&vv[i], v + off[j] + i * GEMM_LANES, sizeof vv[i]);
            for (int r = 0; r < RMAX; r++) {
                if (j >= ntr[r]) continue;
                float p = expf(s[r][j] - mn[r]);
                l[r] += p;
                for (int i = 0; i < nv; i++) acc[r][i] += p * vv[i];
            }
        }
        for (int r = 0; r < RMAX; r++)
            if (ntr[r]) m[r] = mn[r];
    }
    for (int r = 0; r < nr; r++) {
        float inv = 1.0f / l[r];
        for (int i = 0; i < nv; i++) {
            vfloat o = acc[r][i] * inv;
            memcpy(out[r] + i * GEMM_LANES, &o, sizeof o);
        }
    }
}
#endif

/* Query rows attention takes together (attn_rows_v) for a head width. */
static int attn_group(int32_t hd) {
#if GEMM_LANES == 16
    return hd == 64 ? 4 : hd == 128 ? 2 : 1;
#else
    (void)hd;
    return 1;
#endif
}

/* The first window position of row r (0 outside sliding-window layers). */
SV_INLINE int32_t attn_begin(const attn_job_t *j, int64_t r) {
    int32_t w = j->sh->window;
    return w > 0 && j->pos[r] >= w ? j->pos[r] - w + 1 : 0;
}

/* n rows (n <= attn_group(hd)) of one sequence and one head with a common
 * t_begin: attn_rows_v where the width is one of the common ones (one row
 * alone, as a decode step has them, with RMAX 1), else attn_head. */
SV_INLINE void attn_run(const float *const *q, const float *k, const float *v, size_t ld, int32_t hd, int n,
                        int32_t t_begin, const int32_t *n_ctx, float scale, seq_map_t map, float *const *out) {
#if GEMM_LANES == 16
    switch (hd) {
    case 64:
        if (n == 1) attn_rows_v(q, k, v, ld, 64, 1, 1, t_begin, n_ctx, scale, map, out);
        else attn_rows_v(q, k, v, ld, 64, 4, n, t_begin, n_ctx, scale, map, out);
        return;
    case 128:
        if (n == 1) attn_rows_v(q, k, v, ld, 128, 1, 1, t_begin, n_ctx, scale, map, out);
        else attn_rows_v(q, k, v, ld, 128, 2, n, t_begin, n_ctx, scale, map, out);
        return;
    case 256: attn_rows_v(q, k, v, ld, 256, 1, 1, t_begin, n_ctx, scale, map, out); return;
    default: break;
    }
#endif
    attn_head(q[0], k, v, ld, hd, t_begin, n_ctx[0], scale, map, out[0]); /* attn_group gives n = 1 here */
}

/* Items are (block of attn_group rows, head) pairs, block-major. A block's
 * rows go through attn_run in runs of one sequence and one window start
 * (a decode step's rows are runs of one). */
SV_CLONES static void attn_items(void *p, int tid, int64_t b, int64_t e) {
    (void)tid;
    const attn_job_t *j = p;
    const sv_attn_shape_t *sh = j->sh;
    int32_t hd = sh->head_dim, group = sh->n_heads / sh->n_kv_heads, rows = j->rows;
    int g = attn_group(hd);
    size_t ld = (size_t)j->kv->kv_dim;
    const sv_kv_view_t *kv = j->kv;
    for (int64_t it = b; it < e; it++) {
        int64_t r0 = it / sh->n_heads * g, rend = r0 + g < rows ? r0 + g : rows;
        int32_t h = (int32_t)(it % sh->n_heads);
        size_t koff = (size_t)(h / group) * hd;
        for (int64_t r = r0; r < rend;) {
            int32_t begin = attn_begin(j, r);
            int n = 1; /* the run: same sequence, same window start */
            while (r + n < rend && attn_begin(j, r + n) == begin &&
                   (!kv->tables || kv->seq_of_row[r + n] == kv->seq_of_row[r]))
                n++;
            const float *qs[ATTN_GROUP_MAX];
            float *os[ATTN_GROUP_MAX];
            int32_t ends[ATTN_GROUP_MAX];
            for (int i = 0; i < n; i++) {
                size_t off = ((size_t)(r + i) * sh->n_heads + h) * hd;
                qs[i] = j->q + off;
                os[i] = j->out + off;
                ends[i] = j->pos[r + i] + 1;
            }
            attn_run(qs, kv->k + koff, kv->v + koff, ld, hd, n, begin, ends, sh->scale, seq_map_of(kv, r), os);
            r += n;
        }
    }
}

static sv_status cpu_attention(sv_backend_t *be, const sv_kv_view_t *kv,
                               const sv_attn_shape_t *sh, int32_t rows, const int32_t *pos,
                               const float *q, float *out, sv_error_t *err) {
    if (rows < 0 || !kv || !sh || sh->n_heads <= 0 || sh->n_kv_heads <= 0 ||
        sh->n_heads % sh->n_kv_heads || sh->head_dim <= 0 ||
        sh->head_dim > SV_CPU_MAX_HEAD_DIM || kv->kv_dim != sh->n_kv_heads * sh->head_dim ||
        sh->window < 0)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "attention: bad shape (heads %d, kv heads %d, head_dim %d, kv_dim %d)",
                            sh ? (int)sh->n_heads : 0, sh ? (int)sh->n_kv_heads : 0,
                            sh ? (int)sh->head_dim : 0, kv ? (int)kv->kv_dim : 0);
    if (check_pos("attention", kv, rows, pos, err))
        return err ? err->code : SV_ERR_ARG;
    for (int32_t r = 0; sh->max_ctx > 0 && r < rows; r++)
        if (pos[r] >= sh->max_ctx)
            return sv_error_set(err, SV_ERR_ARG, -1, "attention: position %d past max_ctx %d",
                                (int)pos[r], (int)sh->max_ctx);
    attn_job_t j = {kv, sh, pos, q, out, rows};
    int64_t g = attn_group(sh->head_dim);
    pool_run(pool_of(be), (rows + g - 1) / g * sh->n_heads, 1, attn_items, &j);
    return SV_OK;
}

/* The gated activations, element by element (so any split gives the same
 * bits), in chunks of GLU_CHUNK elements over the pool: a batch's rows of
 * the FFN width are tens of thousands of expf or tanhf, which the model's
 * other thread would otherwise wait through. */
#define GLU_CHUNK 4096

typedef struct glu_job {
    size_t n;
    const float *gate, *up;
    float *out;
    bool gelu; /* GeGLU (tanh-approximated GELU), else SwiGLU */
} glu_job_t;

static void glu_items(void *p, int tid, int64_t b, int64_t e) {
    (void)tid;
    const glu_job_t *j = p;
    const float c = 0.7978845608028654f; /* sqrt(2/π) */
    size_t end = (size_t)e * GLU_CHUNK < j->n ? (size_t)e * GLU_CHUNK : j->n;
    for (size_t i = (size_t)b * GLU_CHUNK; i < end; i++) {
        float g = j->gate[i];
        j->out[i] = (j->gelu ? 0.5f * g * (1.0f + tanhf(c * (g + 0.044715f * g * g * g))) : g / (1.0f + expf(-g))) *
                    j->up[i];
    }
}

static void glu_run(sv_backend_t *be, size_t n, const float *gate, const float *up, float *out, bool gelu) {
    glu_job_t j = {n, gate, up, out, gelu};
    pool_run(pool_of(be), (int64_t)((n + GLU_CHUNK - 1) / GLU_CHUNK), 1, glu_items, &j);
}

static sv_status cpu_swiglu(sv_backend_t *be, size_t n, const float *gate, const float *up,
                            float *out, sv_error_t *err) {
    (void)err;
    glu_run(be, n, gate, up, out, false);
    return SV_OK;
}

static sv_status cpu_geglu(sv_backend_t *be, size_t n, const float *gate, const float *up,
                           float *out, sv_error_t *err) {
    (void)err;
    glu_run(be, n, gate, up, out, true);
    return SV_OK;
}

static sv_status cpu_scale(sv_backend_t *be, size_t n, float *x, float s, sv_error_t *err) {
    (void)be;
    (void)err;
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
    return SV_OK;
}

static sv_status cpu_add(sv_backend_t *be, size_t n, float *y, const float *x, sv_error_t *err) {
    (void)be;
    (void)err;
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
    return SV_OK;
}

static sv_status cpu_get_rows(sv_backend_t *be, int32_t rows, int32_t dim, int32_t n_table,
                              const float *table, const int32_t *ids, float *out,
                              sv_error_t *err) {
    (void)be;
    if (rows < 0 || dim <= 0)
        return sv_error_set(err, SV_ERR_ARG, -1, "get_rows: bad arguments");
    for (int32_t r = 0; r < rows; r++) {
        if (ids[r] < 0 || ids[r] >= n_table)
            return sv_error_set(err, SV_ERR_ARG, -1, "get_rows: id %d outside 0..%d",
                                (int)ids[r], (int)n_table - 1);
        memcpy(out + (size_t)r * dim, table + (size_t)ids[r] * dim, (size_t)dim * sizeof(float));
    }
    return SV_OK;
}

static void cpu_destroy(sv_backend_t *be) {
    cpu_backend_t *c = (cpu_backend_t *)be;
    pool_t *pl = &c->pool;
    if (c->n_started > 0) {
        pthread_mutex_lock(&pl->mu);
        atomic_store(&pl->stop, true);
        pthread_cond_broadcast(&pl->go);
        pthread_mutex_unlock(&pl->mu);
        for (int i = 0; i < c->n_started; i++)
            pthread_join(pl->threads[i], NULL);
    }
    pthread_cond_destroy(&pl->go);
    pthread_cond_destroy(&pl->done);
    pthread_mutex_destroy(&pl->mu);
    free(pl->threads);
    free(c->args);
    free(c->scratch);
    free(c->qx);
    free(c->rp);
    free(c);
}

static const sv_backend_ops_t cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .gemm = cpu_gemm,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .kv_write = cpu_kv_write,
    .attention = cpu_attention,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
    .geglu = cpu_geglu,
    .scale = cpu_scale,
    .attention_window = true,
    .get_rows = cpu_get_rows,
    .gemm_q = cpu_gemm_q,
    .get_rows_q = cpu_get_rows_q,
    .destroy = cpu_destroy,
};

sv_status sv_cpu_backend_create(const sv_cpu_config_t *cfg, sv_backend_t **out, sv_error_t *err) {
    int nt = cfg && cfg->n_threads > 0 ? cfg->n_threads : 1;
    pthread_once(&f16_once, f16_fill);
    if (nt > SV_CPU_MAX_THREADS)
        return sv_error_set(err, SV_ERR_ARG, -1, "cpu backend: %d threads (at most %d)", nt,
                            SV_CPU_MAX_THREADS);
    cpu_backend_t *c = calloc(1, sizeof *c);
    if (!c)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "cpu backend: out of memory");
    c->base.ops = &cpu_ops;
    sv_cpu_kernels k = cfg ? cfg->kernels : SV_CPU_KERNELS_REF;
    c->int8 = k != SV_CPU_KERNELS_REF;
    c->i8 = k == SV_CPU_KERNELS_INT8_SCALAR ? SV_I8_SCALAR : sv_i8_best_level();
    if (k == SV_CPU_KERNELS_INT8_AVX2 && c->i8 > SV_I8_AVX2) c->i8 = SV_I8_AVX2;
    pool_t *pl = &c->pool;
    pl->n_threads = nt;
    pthread_mutex_init(&pl->mu, NULL);
    pthread_cond_init(&pl->go, NULL);
    pthread_cond_init(&pl->done, NULL);
    if (nt > 1) {
        pl->threads = calloc((size_t)nt - 1, sizeof *pl->threads);
        c->args = calloc((size_t)nt - 1, sizeof *c->args);
        if (!pl->threads || !c->args) {
            sv_error_set(err, SV_ERR_NOMEM, -1, "cpu backend: out of memory");
            goto fail;
        }
        for (int i = 0; i < nt - 1; i++) {
            c->args[i] = (worker_arg_t){pl, i + 1};
            if (pthread_create(&pl->threads[i], NULL, worker_main, &c->args[i]) != 0) {
                sv_error_set(err, SV_ERR_NOMEM, -1, "cpu backend: cannot start thread %d", i + 1);
                goto fail;
            }
            c->n_started++;
        }
    }
    *out = &c->base;
    return SV_OK;
fail:
    cpu_destroy(&c->base);
    return err ? err->code : SV_ERR_NOMEM;
}
