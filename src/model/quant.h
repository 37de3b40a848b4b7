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
#ifndef SV_MODEL_QUANT_H
#define SV_MODEL_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/model/gguf.h"   /* sv_ggml_type, sv_ggml_type_info */
#include "src/util/error.h"

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
float sv_bf16_to_f32(uint16_t h);
/* float to bf16, rounded to nearest, ties to even; a NaN stays a (quiet)
 * NaN. */
uint16_t sv_f32_to_bf16(float f);

#endif
