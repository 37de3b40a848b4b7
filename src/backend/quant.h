/* quant.h — dequantizing ggml tensor data to float32.
 *
 * The CPU forward pass (issue 5) reads weights as float32 rows; this module
 * turns the bytes of a GGUF tensor (sv_gguf_tensor_t.data, n_bytes) into
 * those floats. Block layouts are ggml's, little-endian, unaligned:
 *
 *   F32   4 bytes / element          F16, BF16  2 bytes / element
 *   Q8_0  {f16 d; i8 qs[32]}                    x = qs[i] * d
 *   Q4_0  {f16 d; u8 qs[16]}                    x = (q - 8) * d
 *   Q4_1  {f16 d; f16 m; u8 qs[16]}             x = q * d + m
 *         (Q4_0/Q4_1: element i < 16 is the low nibble of qs[i],
 *          element 16 + i the high nibble)
 *   Q4_K  256 elements: {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]},
 *         8 sub-blocks of 32 with 6-bit scales and mins
 *   Q5_K  256 elements: {f16 d; f16 dmin; u8 scales[12]; u8 qh[32];
 *         u8 qs[128]}, Q4_K with a fifth bit per element from qh
 *   Q6_K  256 elements: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d},
 *         16 sub-blocks of 16, 6-bit quants centred on 32
 *
 * The arithmetic is float32 in the order ggml's reference (and the gguf
 * Python package) uses, so results agree with them to the last bit on
 * compilers that do not contract a*b-c into an FMA.
 *
 * Functions here are pure and thread-safe. */
#ifndef SV_BACKEND_QUANT_H
#define SV_BACKEND_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/error.h"

/* ggml tensor types (the values in the file). Types that ggml removed (4,
 * 5, 31-33, 36-38) and ones newer than NVFP4 are refused. */
typedef enum {
    SV_GGML_F32 = 0, SV_GGML_F16 = 1, SV_GGML_Q4_0 = 2, SV_GGML_Q4_1 = 3,
    SV_GGML_Q5_0 = 6, SV_GGML_Q5_1 = 7, SV_GGML_Q8_0 = 8, SV_GGML_Q8_1 = 9,
    SV_GGML_Q2_K = 10, SV_GGML_Q3_K = 11, SV_GGML_Q4_K = 12, SV_GGML_Q5_K = 13,
    SV_GGML_Q6_K = 14, SV_GGML_Q8_K = 15, SV_GGML_IQ2_XXS = 16, SV_GGML_IQ2_XS = 17,
    SV_GGML_IQ3_XXS = 18, SV_GGML_IQ1_S = 19, SV_GGML_IQ4_NL = 20, SV_GGML_IQ3_S = 21,
    SV_GGML_IQ2_S = 22, SV_GGML_IQ4_XS = 23, SV_GGML_I8 = 24, SV_GGML_I16 = 25,
    SV_GGML_I32 = 26, SV_GGML_I64 = 27, SV_GGML_F64 = 28, SV_GGML_IQ1_M = 29,
    SV_GGML_BF16 = 30, SV_GGML_TQ1_0 = 34, SV_GGML_TQ2_0 = 35, SV_GGML_MXFP4 = 39,
    SV_GGML_NVFP4 = 40,
    SV_GGML_TYPE_END = 41,       /* one past the largest known value */
} sv_ggml_type;

/* A ggml type's name ("Q4_K") and block: block_elems elements stored in
 * block_bytes bytes (1 and 4 for F32, 32 and 18 for Q4_0, 256 and 144 for
 * Q4_K). False for an unknown type. Any pointer may be NULL. */
bool sv_ggml_type_info(uint32_t type, const char **name, uint32_t *block_elems,
                       uint32_t *block_bytes);

/* Whether sv_dequantize handles type t: F32, F16, BF16, Q8_0, Q4_0, Q4_1,
 * Q4_K, Q5_K, Q6_K. */
bool sv_dequant_supported(sv_ggml_type t);

/* Dequantizes n elements of type t stored in src (src_bytes bytes, borrowed,
 * any alignment) into dst (n floats, caller-owned; must not overlap src).
 * n must be a multiple of the type's block size and src_bytes exactly the
 * bytes n elements take; otherwise SV_ERR_ARG (also for a NULL src or dst
 * with n > 0). An unsupported type is SV_ERR_UNSUPPORTED naming the type.
 * Nothing is written to dst on error. */
sv_status sv_dequantize(sv_ggml_type t, const void *src, size_t src_bytes, float *dst, uint64_t n,
                        sv_error_t *err);

/* Sub-block j's (0..7) 6-bit scale and minimum of a Q4_K or Q5_K
 * super-block, from its 12 packed bytes (bytes 0-3: the scales of 0..3 in
 * their low 6 bits, 4-7: the minimums of 0..3; sub-blocks 4..7 take their
 * low 4 bits from the nibbles of bytes 8-11 and their top 2 bits from the
 * top bits of bytes 0-7). */
static inline void sv_kquant_scale_min(const uint8_t *sc, int j, uint8_t *s, uint8_t *m) {
    if (j < 4) {
        *s = sc[j] & 63;
        *m = sc[j + 4] & 63;
    } else {
        *s = (uint8_t)((sc[j + 4] & 0x0f) | ((sc[j - 4] >> 6) << 4));
        *m = (uint8_t)((sc[j + 4] >> 4) | ((sc[j] >> 6) << 4));
    }
}

/* f16 / bf16 scalar conversions (exact, including subnormals, inf and NaN;
 * a NaN keeps its sign and payload). */
float sv_f16_to_f32(uint16_t h);
/* The same, inline (for kernels that read a scale per block). */
static inline float sv_f16_to_f32_inline(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu, u;
    float f;
    if (exp == 0x1f) /* inf, or NaN with its payload */
        u = sign | 0x7f800000u | mant << 13;
    else if (exp != 0) /* normal: rebias 15 -> 127 */
        u = sign | (exp + 112) << 23 | mant << 13;
    else { /* zero or subnormal: mant * 2^-24, exact in float32 */
        f = (float)mant * 0x1p-24f;
        return sign ? -f : f;
    }
    memcpy(&f, &u, sizeof f);
    return f;
}
float sv_bf16_to_f32(uint16_t h);
/* float to bf16, rounded to nearest, ties to even; a NaN stays a (quiet)
 * NaN. */
uint16_t sv_f32_to_bf16(float f);

#endif
