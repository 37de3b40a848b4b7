/* cpu_int8.h — integer dot products of quantized weights with 8-bit
 * activations (the CPU backend's --cpu-kernels int8; internal to
 * src/backend/).
 *
 * An activation row is quantized in blocks of 32 (sv_q8x_t: a scale d and
 * 32 int8 values, d = max|x| / 127), and each 32-block of weights (Q8_0,
 * Q4_0, Q4_1) meets it in an exact int32 dot product. The floats that
 * follow run in one fixed order, written down once here and kept by every
 * kernel, for each output (an activation row x a weight row):
 *
 *   acc = 0, M = 0
 *   for each block b, in order:
 *     P   = sum over the 32 elements of w_i * q_i   (int32; w_i = q, q - 8 or
 *           q by format)
 *     acc = acc + (float)P * (d_w * d_x)            (multiply, multiply, add)
 *     Q4_1 only: M = M + m_w * sx                   (sx = d_x * sum of q_i)
 *   result = acc (+ M for Q4_1) (+ bias)
 *
 * The K formats (Q4_K, Q5_K, Q6_K) come in super-blocks of 256 elements,
 * eight activation blocks, with integer scales per sub-block and float
 * scales per super-block (src/backend/quant.h). The integer scales go into
 * the exact sums, so for activation block b, which is sub-block j of its
 * super-block:
 *
 *   Q4_K, Q5_K: P = sc_j * sum of q_i * x_i,  N = m_j * (sum of x_i)
 *               acc = acc + (float)P * (d * d_x)
 *               M   = M + (float)N * (dmin * d_x)
 *               result = acc - M (+ bias)
 *   Q6_K:       P = sc_2j * sum over the first 16 of (q_i - 32) * x_i
 *                 + sc_2j+1 * sum over the last 16
 *               acc = acc + (float)P * (d * d_x);  result = acc (+ bias)
 *
 * The integer parts are exact whatever instructions compute them, and the
 * float parts are the same operations in the same order (the file is
 * compiled without contraction), so the SIMD kernels equal the scalar one
 * bit for bit, and a row's result depends only on that row: batch
 * invariant by construction. It is not equal to the fp32 path (the
 * activations are rounded to 8 bits); --cpu-kernels ref keeps that one. */
#ifndef SV_BACKEND_CPU_INT8_H
#define SV_BACKEND_CPU_INT8_H

#include <stdint.h>

#include "backend.h"

/* One block of a quantized activation row. */
typedef struct sv_q8x {
    float d;       /* scale: x_i ≈ d * q[i] */
    float sx;      /* d * (sum of q), for the Q4_1 minimum term */
    int32_t qsum;  /* sum of q (the repacked kernels' offset correction) */
    int8_t q[32];  /* in -127 .. 127 */
} sv_q8x_t;

/* Which code computes the dot products. */
typedef enum {
    SV_I8_SCALAR = 0, /* plain C: the reference the others equal */
    SV_I8_AVX2,       /* maddubs + madd */
    SV_I8_VNNI,       /* AVX-512 VNNI (and BW): dpbusd on 256-bit vectors, and on 512-bit ones
                         for repacked 16-column tiles */
} sv_i8_level;

/* The best level this CPU runs (CPUID). */
sv_i8_level sv_i8_best_level(void);

/* Quantizes n (a multiple of 32) floats into n / 32 blocks, with the
 * level's code (every level gives the same bytes). */
void sv_q8x_quantize(sv_i8_level lv, const float *x, int32_t n, sv_q8x_t *out);

/* True for the weight formats the integer kernels take. */
static inline int sv_i8_qtype_ok(sv_qtype t) {
    return t == SV_QT_Q8_0 || t == SV_QT_Q4_0 || t == SV_QT_Q4_1 || t == SV_QT_Q4_K || t == SV_QT_Q5_K ||
           t == SV_QT_Q6_K;
}

/* y[c] = x · w_c for nc weight rows starting at w (row_bytes apart), of
 * nb blocks each, in the order above; bias may be NULL. */
void sv_i8_dots(sv_i8_level lv, sv_qtype t, const uint8_t *w, size_t row_bytes, int32_t nc, const sv_q8x_t *x,
                int32_t nb, const float *bias, float *y);

/* Bytes of per-thread scratch sv_i8_cols16 needs for rows of nb blocks. */
size_t sv_i8_cols16_scratch(sv_qtype t, int32_t nb);

/* Whether sv_i8_cols16 has a kernel at this level (AVX-512 VNNI). */
int sv_i8_cols16_ok(sv_i8_level lv);

/* y[r * ldy + c] for r < rows and c < 16: 16 weight rows (row_bytes apart)
 * against `rows` activation rows (x: rows of nb blocks), equal to
 * sv_i8_dots' bits. The 16 weight rows are first repacked into scratch,
 * four bytes of each column in turn, so that one vpdpbusd yields the sums
 * of all 16 columns with no horizontal add; worth it when many rows
 * share them (prefill, batches). Only where sv_i8_cols16_ok.
 * next (NULL for none): the next_bytes of weights the caller hands over
 * next, fetched into L2 while this tile's rows run, so that the next
 * repack does not wait on memory. */
void sv_i8_cols16(sv_i8_level lv, sv_qtype t, const uint8_t *w, size_t row_bytes, const sv_q8x_t *x, int32_t rows,
                  int32_t nb, const float *bias, float *y, int32_t ldy, void *scratch, const uint8_t *next,
                  size_t next_bytes);

/* The same for 4 activation rows (x: 4 rows of nb blocks) and 4 weight
 * rows: y[r * ldy + c] for r, c < 4, equal to sv_i8_dots' bits. */
void sv_i8_tile4(sv_i8_level lv, sv_qtype t, const uint8_t *w, size_t row_bytes, const sv_q8x_t *x, int32_t nb,
                 const float *bias, float *y, int32_t ldy);

#endif
