/* cpu_int8.c — integer dot products for --cpu-kernels int8 (see
 * cpu_int8.h for the order of operations every kernel keeps).
 *
 * Three kernels compute the same thing: plain C (the reference), AVX2
 * (_mm256_maddubs_epi16 then _mm256_madd_epi16: 32 byte products into
 * eight int32 sums of four) and AVX-512 VNNI on 256-bit vectors
 * (_mm256_dpbusd_epi32: the same eight sums in one instruction). Both
 * SIMD forms multiply an unsigned byte by a signed one, so signed weights
 * (Q8_0, and Q4_0 after subtracting 8) go in as |w| against x with w's
 * sign, which changes no product. No sum can saturate: |w| <= 128 and
 * |q| <= 127 keep a pair of products within int16. This file is compiled
 * without multiply-add contraction (CMakeLists.txt), like cpu.c. */
#include "src/backend/cpu_int8.h"

#include <math.h>
#include <string.h>

#include "src/model/quant.h" /* sv_f16_to_f32 */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SV_I8_X86 1
#endif

void sv_q8x_quantize(const float *x, int32_t n, sv_q8x_t *out) {
    for (int32_t k = 0; k < n; k += 32, x += 32, out++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) {
            float a = fabsf(x[i]);
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int i = 0; i < 32; i++) {
            long v = lrintf(x[i] * id);
            v = v > 127 ? 127 : v < -127 ? -127 : v;
            out->q[i] = (int8_t)v;
            sum += (int32_t)v;
        }
        out->d = d;
        out->sx = d * (float)sum;
    }
}

static inline float rd_f16(const uint8_t *p) { return sv_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* A[0] after the fixed pairwise tree of cpu_int8.h. */
static inline float lanes8(float a[8]) {
    for (int h = 4; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) a[l] += a[l + h];
    return a[0];
}

/* ---- plain C: the reference ------------------------------------------------ */

static float dot_scalar(sv_qtype t, const uint8_t *w, const sv_q8x_t *x, int32_t nb) {
    float A[8] = {0}, M = 0.0f;
    size_t bb = sv_qtype_block_bytes(t);
    for (int32_t b = 0; b < nb; b++, w += bb) {
        int32_t wv[32];
        float dw = rd_f16(w), mw = 0.0f;
        if (t == SV_QT_Q8_0) {
            for (int i = 0; i < 32; i++) wv[i] = (int8_t)w[2 + i];
        } else if (t == SV_QT_Q4_0) {
            for (int i = 0; i < 16; i++) wv[i] = (w[2 + i] & 15) - 8, wv[i + 16] = (w[2 + i] >> 4) - 8;
        } else {
            mw = rd_f16(w + 2);
            for (int i = 0; i < 16; i++) wv[i] = w[4 + i] & 15, wv[i + 16] = w[4 + i] >> 4;
        }
        float s = dw * x[b].d;
        for (int j = 0; j < 8; j++) {
            int32_t p = 0;
            for (int i = 4 * j; i < 4 * j + 4; i++) p += wv[i] * x[b].q[i];
            A[j] = A[j] + (float)p * s;
        }
        if (t == SV_QT_Q4_1) M = M + mw * x[b].sx;
    }
    float r = lanes8(A);
    return t == SV_QT_Q4_1 ? r + M : r;
}

/* ---- x86 ------------------------------------------------------------------- */

#ifdef SV_I8_X86
/* The block's 32 weights as bytes in element order: unsigned nibbles for
 * Q4_1 (*sign 0), signed values for Q4_0 and Q8_0 (*sign 1). */
#define SV_I8_LOAD(t, w, wv, dw, mw, sign)                                                         \
    do {                                                                                           \
        dw = _cvtsh_ss((uint16_t)((w)[0] | (w)[1] << 8));                                          \
        if ((t) == SV_QT_Q8_0) {                                                                   \
            wv = _mm256_loadu_si256((const __m256i *)((w) + 2));                                   \
            sign = 1;                                                                              \
        } else {                                                                                   \
            const __m128i m4 = _mm_set1_epi8(0x0f);                                                \
            __m128i raw = _mm_loadu_si128((const __m128i *)((w) + ((t) == SV_QT_Q4_1 ? 4 : 2)));   \
            wv = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4)); \
            if ((t) == SV_QT_Q4_0) {                                                               \
                wv = _mm256_sub_epi8(wv, _mm256_set1_epi8(8));                                     \
                sign = 1;                                                                          \
            } else {                                                                               \
                mw = _cvtsh_ss((uint16_t)((w)[2] | (w)[3] << 8));                                  \
                sign = 0;                                                                          \
            }                                                                                      \
        }                                                                                          \
    } while (0)

__attribute__((target("avx2,f16c"))) static float dot_avx2(sv_qtype t, const uint8_t *w, const sv_q8x_t *x,
                                                             int32_t nb) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 A = _mm256_setzero_ps();
    float M = 0.0f;
    size_t bb = sv_qtype_block_bytes(t);
    for (int32_t b = 0; b < nb; b++, w += bb) {
        __m256i wv, xv = _mm256_loadu_si256((const __m256i *)x[b].q);
        float dw, mw = 0.0f;
        int sign;
        SV_I8_LOAD(t, w, wv, dw, mw, sign);
        __m256i p16 = sign ? _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv))
                           : _mm256_maddubs_epi16(wv, xv);
        __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        A = _mm256_add_ps(A, _mm256_mul_ps(p, _mm256_set1_ps(dw * x[b].d)));
        if (t == SV_QT_Q4_1) M = M + mw * x[b].sx;
    }
    float a[8];
    _mm256_storeu_ps(a, A);
    float r = lanes8(a);
    return t == SV_QT_Q4_1 ? r + M : r;
}

__attribute__((target("avx2,f16c,avx512vnni,avx512vl"))) static float dot_vnni(sv_qtype t, const uint8_t *w,
                                                                               const sv_q8x_t *x, int32_t nb) {
    __m256 A = _mm256_setzero_ps();
    float M = 0.0f;
    size_t bb = sv_qtype_block_bytes(t);
    for (int32_t b = 0; b < nb; b++, w += bb) {
        __m256i wv, xv = _mm256_loadu_si256((const __m256i *)x[b].q);
        float dw, mw = 0.0f;
        int sign;
        SV_I8_LOAD(t, w, wv, dw, mw, sign);
        __m256i z = _mm256_setzero_si256();
        __m256i p32 = sign ? _mm256_dpbusd_epi32(z, _mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv))
                           : _mm256_dpbusd_epi32(z, wv, xv);
        A = _mm256_add_ps(A, _mm256_mul_ps(_mm256_cvtepi32_ps(p32), _mm256_set1_ps(dw * x[b].d)));
        if (t == SV_QT_Q4_1) M = M + mw * x[b].sx;
    }
    float a[8];
    _mm256_storeu_ps(a, A);
    float r = lanes8(a);
    return t == SV_QT_Q4_1 ? r + M : r;
}
#endif

sv_i8_level sv_i8_best_level(void) {
#ifdef SV_I8_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl"))
        return SV_I8_VNNI;
    if (__builtin_cpu_supports("avx2")) return SV_I8_AVX2;
#endif
    return SV_I8_SCALAR;
}

void sv_i8_dots(sv_i8_level lv, sv_qtype t, const uint8_t *w, size_t row_bytes, int32_t nc, const sv_q8x_t *x,
                int32_t nb, const float *bias, float *y) {
    for (int32_t c = 0; c < nc; c++, w += row_bytes) {
        /* the weight rows four ahead, on their way from memory (a hint:
         * it changes no result) */
        for (size_t o = 0; o < row_bytes; o += 64) __builtin_prefetch(w + 4 * row_bytes + o, 0, 0);
        float r;
        switch (lv) {
#ifdef SV_I8_X86
        case SV_I8_VNNI: r = dot_vnni(t, w, x, nb); break;
        case SV_I8_AVX2: r = dot_avx2(t, w, x, nb); break;
#endif
        default: r = dot_scalar(t, w, x, nb); break;
        }
        y[c] = bias ? r + bias[c] : r;
    }
}
