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
 * |q| <= 127 keep a pair of products within int16.
 *
 * With many activation rows (prefill, batches) and AVX-512 VNNI, 16
 * weight rows at a time are repacked into scratch, four bytes of each
 * column in turn (sv_i8_cols16): one 512-bit dpbusd against four broadcast
 * activation bytes then gives all 16 columns' sums, with no horizontal
 * add. There weights enter as unsigned bytes (Q4 nibbles as they are, Q8_0
 * plus 128) and the offset comes off with the block's integer sum of
 * activations: the same exact P.
 *
 * The K formats (Q4_K, Q5_K, Q6_K) have kernels of their own of both
 * kinds: each sub-block of 32 is unpacked to bytes in registers (4 and 5
 * bits unsigned, Q6_K's 6 bits less 32 signed), or repacked as unsigned
 * bytes with its integer scales beside it; the horizontal sums or the two
 * halves of the chunks keep each 16 elements' sum apart for Q6_K's two
 * scales per sub-block. This file is compiled without multiply-add
 * contraction (CMakeLists.txt), like cpu.c. */
#include "cpu_int8.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant.h" /* sv_f16_to_f32 */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SV_I8_X86 1
#endif

/* One block in plain C: the reference. */
static void quant_block_scalar(const float *x, sv_q8x_t *out) {
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
    out->qsum = sum;
}

#ifdef SV_I8_X86
/* The same with AVX2: the same maximum, the same two float divisions, the
 * same products rounded to nearest-even (cvtps2dq in the default rounding
 * mode, as lrintf), the same clamp; the integer sum in any order. */
__attribute__((target("avx2"))) static void quant_block_avx2(const float *x, sv_q8x_t *out) {
    const __m256 nosign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v[4], m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        m = _mm256_max_ps(m, _mm256_and_ps(v[k], nosign));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float amax = _mm_cvtss_f32(h);
    float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    __m256i q[4], sum = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) {
        q[k] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[k], idv)), lo), hi);
        sum = _mm256_add_epi32(sum, q[k]);
    }
    /* int32 -> int8 in element order: the packs work within 128-bit lanes */
    __m256i p16 = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
    __m256i p8 = _mm256_packs_epi16(p16, p16b);
    p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)out->q, p8);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    out->d = d;
    out->qsum = _mm_cvtsi128_si32(s4);
    out->sx = d * (float)out->qsum;
}
#endif

void sv_q8x_quantize(sv_i8_level lv, const float *x, int32_t n, sv_q8x_t *out) {
    for (int32_t k = 0; k < n; k += 32, x += 32, out++) {
#ifdef SV_I8_X86
        if (lv != SV_I8_SCALAR) {
            quant_block_avx2(x, out);
            continue;
        }
#endif
        quant_block_scalar(x, out);
    }
}

static inline float rd_f16(const uint8_t *p) { return sv_f16_to_f32_inline((uint16_t)(p[0] | p[1] << 8)); }

/* ---- plain C: the reference ------------------------------------------------ */

static int is_kquant(sv_qtype t) { return t == SV_QT_Q4_K || t == SV_QT_Q5_K || t == SV_QT_Q6_K; }

/* The integer scales of sub-block j (0..7) of the K-format super-block at
 * w: of its first and last 16 elements (equal but for Q6_K), and its
 * minimum (Q4_K, Q5_K; 0 for Q6_K). src/backend/quant.c's layouts. */
static inline void kscales(sv_qtype t, const uint8_t *w, int j, int32_t *slo, int32_t *shi, int32_t *m) {
    if (t == SV_QT_Q6_K) {
        *slo = (int8_t)w[192 + 2 * j];
        *shi = (int8_t)w[193 + 2 * j];
        *m = 0;
        return;
    }
    uint8_t s, mn;
    sv_kquant_scale_min(w + 4, j, &s, &mn);
    *slo = *shi = s;
    *m = mn;
}

/* A K-format super-block's float scales d and dmin (0 for Q6_K). */
static inline void kfloats(sv_qtype t, const uint8_t *w, float *d, float *dmin) {
    *d = rd_f16(t == SV_QT_Q6_K ? w + 208 : w);
    *dmin = t == SV_QT_Q6_K ? 0.0f : rd_f16(w + 2);
}

/* Sub-block j of the K-format super-block at w: its 32 weights as integers
 * in element order (Q4_K 0..15, Q5_K 0..31, Q6_K q - 32). */
static void kblock_scalar(sv_qtype t, const uint8_t *w, int j, int8_t *q) {
    if (t == SV_QT_Q6_K) {
        int h = j / 4, k = j % 4;
        const uint8_t *ql = w + 64 * h + 32 * (k % 2), *qh = w + 128 + 32 * h;
        for (int l = 0; l < 32; l++)
            q[l] = (int8_t)((((ql[l] >> (4 * (k / 2))) & 15) | ((qh[l] >> (2 * k)) & 3) << 4) - 32);
        return;
    }
    const uint8_t *qs = w + (t == SV_QT_Q5_K ? 48 : 16) + 32 * (j / 2);
    for (int l = 0; l < 32; l++)
        q[l] = (int8_t)(((qs[l] >> (4 * (j % 2))) & 15) | (t == SV_QT_Q5_K ? ((w[16 + l] >> j) & 1) << 4 : 0));
}

/* The K formats in plain C: the reference (cpu_int8.h's order). */
static float dot_scalar_k(sv_qtype t, const uint8_t *w, const sv_q8x_t *x, int32_t nb) {
    float acc = 0.0f, M = 0.0f;
    size_t bb = sv_qtype_block_bytes(t);
    for (int32_t b = 0; b < nb; b++) {
        const uint8_t *sb = w + (size_t)(b / 8) * bb;
        int8_t q[32];
        int32_t slo, shi, m, plo = 0, phi = 0;
        float d, dmin;
        kblock_scalar(t, sb, b % 8, q);
        kscales(t, sb, b % 8, &slo, &shi, &m);
        kfloats(t, sb, &d, &dmin);
        for (int i = 0; i < 16; i++) {
            plo += q[i] * x[b].q[i];
            phi += q[16 + i] * x[b].q[16 + i];
        }
        int32_t P = slo * plo + shi * phi;
        acc = acc + (float)P * (d * x[b].d);
        if (t != SV_QT_Q6_K) M = M + (float)(m * x[b].qsum) * (dmin * x[b].d);
    }
    return t == SV_QT_Q6_K ? acc : acc - M;
}

static float dot_scalar(sv_qtype t, const uint8_t *w, const sv_q8x_t *x, int32_t nb) {
    if (is_kquant(t)) return dot_scalar_k(t, w, x, nb);
    float acc = 0.0f, M = 0.0f;
    size_t bb = sv_qtype_block_bytes(t);
    for (int32_t b = 0; b < nb; b++, w += bb) {
        int32_t p = 0;
        float dw = rd_f16(w), mw = 0.0f;
        if (t == SV_QT_Q8_0) {
            for (int i = 0; i < 32; i++) p += (int8_t)w[2 + i] * x[b].q[i];
        } else if (t == SV_QT_Q4_0) {
            for (int i = 0; i < 16; i++) p += ((w[2 + i] & 15) - 8) * x[b].q[i] + ((w[2 + i] >> 4) - 8) * x[b].q[i + 16];
        } else {
            mw = rd_f16(w + 2);
            for (int i = 0; i < 16; i++) p += (w[4 + i] & 15) * x[b].q[i] + (w[4 + i] >> 4) * x[b].q[i + 16];
        }
        acc = acc + (float)p * (dw * x[b].d);
        if (t == SV_QT_Q4_1) M = M + mw * x[b].sx;
    }
    return t == SV_QT_Q4_1 ? acc + M : acc;
}

/* ---- x86 ------------------------------------------------------------------- */

#ifdef SV_I8_X86
/* The block's 32 weights as bytes in element order: unsigned nibbles for
 * Q4_1 (sign 0), signed values for Q4_0 and Q8_0 (sign 1). */
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

/* NAME##_body for a constant format T and row count R (4 or 1), so that
 * the branches on them fold away. */
#define SV_I8_ROWS(NAME, T) \
    do {                                                                        \
        if (R == 4) NAME##_body(T, 4, w, rb, x, nb, bias, y, ldy);              \
        else NAME##_body(T, 1, w, rb, x, nb, bias, y, ldy);                     \
    } while (0)

/* R activation rows (1 or 4) x 4 weight rows. Each weight block is
 * unpacked once for the R rows and each activation block loaded once for
 * the 4 columns; the four int32 block sums of a row come out of one
 * horizontal-add tree as a vector, and the float steps of the reference
 * run on that vector, one lane per column, in the reference's order (the
 * integer sums are exact, and every float lane is the scalar operation).
 * DOTU(u, s): the eight int32 sums of four u8 x s8 products. */
#define SV_I8_KERNEL(NAME, TARGET, DOTU)                                                                     \
    static inline __attribute__((always_inline, target(TARGET))) void NAME##_body(                           \
        const sv_qtype t, const int R, const uint8_t *w, size_t rb, const sv_q8x_t *x, int32_t nb,           \
        const float *bias, float *y, int32_t ldy) {                                                          \
        __m128 acc[4], M[4];                                                                                 \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r] = M[r] = _mm_setzero_ps();               \
        size_t bb = sv_qtype_block_bytes(t);                                                                 \
        for (int32_t b = 0; b < nb; b++) {                                                                   \
            __m256i wv[4], aw[4];                                                                            \
            float dw[4], mw[4] = {0};                                                                        \
            int sign = 0;                                                                                    \
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {                                            \
                const uint8_t *wb = w + (size_t)c * rb + (size_t)b * bb;                                     \
                SV_I8_LOAD(t, wb, wv[c], dw[c], mw[c], sign);                                                \
                aw[c] = _mm256_sign_epi8(wv[c], wv[c]);                                                      \
            }                                                                                                \
            __m128 dw4 = _mm_setr_ps(dw[0], dw[1], dw[2], dw[3]);                                            \
            __m128 mw4 = _mm_setr_ps(mw[0], mw[1], mw[2], mw[3]);                                            \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                            \
                const sv_q8x_t *xb = x + (size_t)r * nb + b;                                                 \
                __m256i xv = _mm256_loadu_si256((const __m256i *)xb->q), p[4];                               \
                _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)                                          \
                    p[c] = sign ? DOTU(aw[c], _mm256_sign_epi8(xv, wv[c])) : DOTU(wv[c], xv);                \
                __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3])); \
                __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));       \
                acc[r] = _mm_add_ps(acc[r], _mm_mul_ps(_mm_cvtepi32_ps(s4), _mm_mul_ps(dw4, _mm_set1_ps(xb->d)))); \
                if (t == SV_QT_Q4_1) M[r] = _mm_add_ps(M[r], _mm_mul_ps(mw4, _mm_set1_ps(xb->sx)));          \
            }                                                                                                \
        }                                                                                                    \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                                \
            __m128 v = t == SV_QT_Q4_1 ? _mm_add_ps(acc[r], M[r]) : acc[r];                                  \
            if (bias) v = _mm_add_ps(v, _mm_loadu_ps(bias));                                                 \
            _mm_storeu_ps(y + (size_t)r * ldy, v);                                                           \
        }                                                                                                    \
    }                                                                                                        \
    __attribute__((target(TARGET))) static void NAME(sv_qtype t, int R, const uint8_t *w, size_t rb,          \
                                                     const sv_q8x_t *x, int32_t nb, const float *bias,        \
                                                     float *y, int32_t ldy) {                                 \
        switch (t) {                                                                                         \
        case SV_QT_Q8_0: SV_I8_ROWS(NAME, SV_QT_Q8_0); break;                                                \
        case SV_QT_Q4_0: SV_I8_ROWS(NAME, SV_QT_Q4_0); break;                                                \
        default: SV_I8_ROWS(NAME, SV_QT_Q4_1); break;                                                        \
        }                                                                                                    \
    }

#define SV_DOTU_AVX2(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1))
#define SV_DOTU_VNNI(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (s))
SV_I8_KERNEL(kern_avx2, "avx2,f16c", SV_DOTU_AVX2)
SV_I8_KERNEL(kern_vnni, "avx2,f16c,avx512vnni,avx512vl", SV_DOTU_VNNI)

/* Sub-block j of a K-format super-block at w as 32 bytes in element order
 * (kblock_scalar's integers): unsigned for Q4_K and Q5_K, signed for Q6_K.
 * Shifts run on 16-bit lanes; each mask keeps only bits that stayed within
 * their byte. */
#define SV_I8_KLOAD(t, w, j, wv)                                                                      \
    do {                                                                                              \
        const __m256i m4_ = _mm256_set1_epi8(0x0f);                                                   \
        if ((t) == SV_QT_Q6_K) {                                                                      \
            int h_ = (j) / 4, k_ = (j) % 4;                                                           \
            __m256i ql_ = _mm256_loadu_si256((const __m256i *)((w) + 64 * h_ + 32 * (k_ % 2)));       \
            __m256i qh_ = _mm256_loadu_si256((const __m256i *)((w) + 128 + 32 * h_));                 \
            __m256i lo_ = _mm256_and_si256(k_ >= 2 ? _mm256_srli_epi16(ql_, 4) : ql_, m4_);            \
            __m256i hi_ = _mm256_and_si256(_mm256_srli_epi16(qh_, 2 * k_), _mm256_set1_epi8(3));       \
            wv = _mm256_sub_epi8(_mm256_or_si256(lo_, _mm256_slli_epi16(hi_, 4)), _mm256_set1_epi8(32)); \
        } else {                                                                                      \
            __m256i qs_ = _mm256_loadu_si256(                                                         \
                (const __m256i *)((w) + ((t) == SV_QT_Q5_K ? 48 : 16) + 32 * ((j) / 2)));             \
            wv = _mm256_and_si256((j) % 2 ? _mm256_srli_epi16(qs_, 4) : qs_, m4_);                     \
            if ((t) == SV_QT_Q5_K) {                                                                  \
                const __m256i bit_ = _mm256_set1_epi8((char)(1 << (j)));                              \
                __m256i qh_ = _mm256_loadu_si256((const __m256i *)((w) + 16));                        \
                __m256i set_ = _mm256_cmpeq_epi8(_mm256_and_si256(qh_, bit_), bit_);                  \
                wv = _mm256_or_si256(wv, _mm256_and_si256(set_, _mm256_set1_epi8(16)));               \
            }                                                                                         \
        }                                                                                             \
    } while (0)

/* R activation rows (1 or 4) x 4 weight rows of a K format. For each
 * super-block, the four columns' float scales and integer sub-block scales
 * are read once; for each sub-block, its weights are unpacked once for
 * the R rows. The horizontal-add tree leaves each column's sum of the
 * first 16 products in the low 128 bits and of the last 16 in the high
 * ones, so Q6_K's two scales apply there; then the float steps of
 * dot_scalar_k, one lane per column. */
#define SV_I8_KKERNEL(NAME, TARGET, DOTU)                                                                    \
    static inline __attribute__((always_inline, target(TARGET))) void NAME##_body(                           \
        const sv_qtype t, const int R, const uint8_t *w, size_t rb, const sv_q8x_t *x, int32_t nb,           \
        const float *bias, float *y, int32_t ldy) {                                                          \
        __m128 acc[4], M[4];                                                                                 \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r] = M[r] = _mm_setzero_ps();               \
        size_t bb = sv_qtype_block_bytes(t);                                                                 \
        for (int32_t s = 0; s < nb / 8; s++) {                                                               \
            const uint8_t *sb[4];                                                                            \
            int32_t slo[8][4], shi[8][4], mn[8][4];                                                          \
            float dw[4], dm[4];                                                                              \
            for (int c = 0; c < 4; c++) {                                                                    \
                sb[c] = w + (size_t)c * rb + (size_t)s * bb;                                                 \
                kfloats(t, sb[c], &dw[c], &dm[c]);                                                           \
                for (int j = 0; j < 8; j++) kscales(t, sb[c], j, &slo[j][c], &shi[j][c], &mn[j][c]);         \
            }                                                                                                \
            __m128 dw4 = _mm_loadu_ps(dw), dm4 = _mm_loadu_ps(dm);                                           \
            for (int j = 0; j < 8; j++) {                                                                    \
                __m256i wv[4], aw[4];                                                                        \
                _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {                                        \
                    SV_I8_KLOAD(t, sb[c], j, wv[c]);                                                         \
                    aw[c] = _mm256_sign_epi8(wv[c], wv[c]);                                                  \
                }                                                                                            \
                __m128i slo4 = _mm_loadu_si128((const __m128i *)slo[j]);                                     \
                __m128i shi4 = _mm_loadu_si128((const __m128i *)shi[j]);                                     \
                __m128i mn4 = _mm_loadu_si128((const __m128i *)mn[j]);                                       \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                        \
                    const sv_q8x_t *xb = x + (size_t)r * nb + 8 * s + j;                                     \
                    __m256i xv = _mm256_loadu_si256((const __m256i *)xb->q), p[4];                           \
                    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)                                      \
                        p[c] = t == SV_QT_Q6_K ? DOTU(aw[c], _mm256_sign_epi8(xv, wv[c])) : DOTU(wv[c], xv); \
                    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3])); \
                    __m128i lo = _mm256_castsi256_si128(h), hi = _mm256_extracti128_si256(h, 1), P;          \
                    if (t == SV_QT_Q6_K)                                                                     \
                        P = _mm_add_epi32(_mm_mullo_epi32(lo, slo4), _mm_mullo_epi32(hi, shi4));             \
                    else                                                                                     \
                        P = _mm_mullo_epi32(_mm_add_epi32(lo, hi), slo4);                                    \
                    __m128 dx = _mm_set1_ps(xb->d);                                                          \
                    acc[r] = _mm_add_ps(acc[r], _mm_mul_ps(_mm_cvtepi32_ps(P), _mm_mul_ps(dw4, dx)));       \
                    if (t != SV_QT_Q6_K) {                                                                   \
                        __m128i N = _mm_mullo_epi32(mn4, _mm_set1_epi32(xb->qsum));                          \
                        M[r] = _mm_add_ps(M[r], _mm_mul_ps(_mm_cvtepi32_ps(N), _mm_mul_ps(dm4, dx)));        \
                    }                                                                                        \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                                \
            __m128 v = t == SV_QT_Q6_K ? acc[r] : _mm_sub_ps(acc[r], M[r]);                                  \
            if (bias) v = _mm_add_ps(v, _mm_loadu_ps(bias));                                                 \
            _mm_storeu_ps(y + (size_t)r * ldy, v);                                                           \
        }                                                                                                    \
    }                                                                                                        \
    __attribute__((target(TARGET))) static void NAME(sv_qtype t, int R, const uint8_t *w, size_t rb,          \
                                                     const sv_q8x_t *x, int32_t nb, const float *bias,        \
                                                     float *y, int32_t ldy) {                                 \
        switch (t) {                                                                                         \
        case SV_QT_Q4_K: SV_I8_ROWS(NAME, SV_QT_Q4_K); break;                                                \
        case SV_QT_Q5_K: SV_I8_ROWS(NAME, SV_QT_Q5_K); break;                                                \
        default: SV_I8_ROWS(NAME, SV_QT_Q6_K); break;                                                        \
        }                                                                                                    \
    }

SV_I8_KKERNEL(kkern_avx2, "avx2,f16c,sse4.1", SV_DOTU_AVX2)
SV_I8_KKERNEL(kkern_vnni, "avx2,f16c,sse4.1,avx512vnni,avx512vl", SV_DOTU_VNNI)
#endif

/* R rows x 4 columns through the level's kernel. */
static void cols4(sv_i8_level lv, sv_qtype t, int R, const uint8_t *w, size_t rb, const sv_q8x_t *x, int32_t nb,
                  const float *bias, float *y, int32_t ldy) {
    switch (lv) {
#ifdef SV_I8_X86
    case SV_I8_VNNI:
        if (is_kquant(t)) kkern_vnni(t, R, w, rb, x, nb, bias, y, ldy);
        else kern_vnni(t, R, w, rb, x, nb, bias, y, ldy);
        return;
    case SV_I8_AVX2:
        if (is_kquant(t)) kkern_avx2(t, R, w, rb, x, nb, bias, y, ldy);
        else kern_avx2(t, R, w, rb, x, nb, bias, y, ldy);
        return;
#endif
    default:
        for (int r = 0; r < R; r++)
            for (int c = 0; c < 4; c++) {
                float v = dot_scalar(t, w + (size_t)c * rb, x + (size_t)r * nb, nb);
                y[(size_t)r * ldy + c] = bias ? v + bias[c] : v;
            }
        return;
    }
}

void sv_i8_tile4(sv_i8_level lv, sv_qtype t, const uint8_t *w, size_t row_bytes, const sv_q8x_t *x, int32_t nb,
                 const float *bias, float *y, int32_t ldy) {
    cols4(lv, t, 4, w, row_bytes, x, nb, bias, y, ldy);
}

/* ---- repacked 16-column kernels (AVX-512 VNNI, 512-bit) -------------------- */

/* A repacked block of 16 columns: the weight bytes in chunks of four per
 * column (chunk j of column c at j * 64 + c * 4; Q4 formats: the 16 bytes
 * of nibbles, 4 chunks; Q8_0: the 32 signed bytes with the sign bit
 * flipped, i.e. w + 128 as unsigned, 8 chunks), then the 16 scales and the
 * 16 minimums (Q4_1) as floats (an exact conversion of the f16s). */
/* The K formats' repacked block (one per activation block, i.e. per
 * sub-block): the 32 weights of each column as unsigned bytes in 8 chunks
 * as above (Q6_K's q before the - 32), then five vectors of 16: the int32
 * scales of the first and last 16 elements and the minimums, and the
 * float scales d and dmin of the super-block. */
#define RPK_BYTES (512 + 5 * 64)

static size_t rp_block_bytes(sv_qtype t) {
    return is_kquant(t) ? RPK_BYTES : (t == SV_QT_Q8_0 ? 512 : 256) + 2 * 16 * sizeof(float);
}

size_t sv_i8_cols16_scratch(sv_qtype t, int32_t nb) { return (size_t)nb * rp_block_bytes(t) + 64; }

int sv_i8_cols16_ok(sv_i8_level lv) { return lv == SV_I8_VNNI; }

#ifdef SV_I8_X86
/* Block by block: each chunk of 16 columns' four bytes is one gather and
 * one 64-byte store, the 16 scales one gather and one conversion (Q8_0's
 * quants with the sign bit flipped: unsigned, as vpdpbusd takes them). */
__attribute__((target("avx512f,avx512bw"))) static void repack16(sv_qtype t, const uint8_t *w, size_t rb,
                                                               int32_t nb, uint8_t *dst) {
    size_t bb = sv_qtype_block_bytes(t), rpb = rp_block_bytes(t);
    int chunks = t == SV_QT_Q8_0 ? 8 : 4, qoff = t == SV_QT_Q4_1 ? 4 : 2;
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int32_t)rb));
    const __m512i flip = _mm512_set1_epi32(t == SV_QT_Q8_0 ? (int32_t)0x80808080u : 0);
    for (int32_t b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * bb;
        uint8_t *o = dst + (size_t)b * rpb;
        __m512i sc = _mm512_i32gather_epi32(idx, (const void *)blk, 1); /* d, and Q4_1's m above it */
        _mm512_storeu_ps(o + chunks * 64, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(sc)));
        _mm512_storeu_ps(o + chunks * 64 + 64, t == SV_QT_Q4_1
                                                   ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(sc, 16)))
                                                   : _mm512_setzero_ps());
        for (int j = 0; j < chunks; j++) {
            __m512i q = _mm512_i32gather_epi32(idx, (const void *)(blk + qoff + 4 * j), 1);
            _mm512_storeu_si512(o + j * 64, _mm512_xor_si512(q, flip));
        }
    }
}

static inline int32_t ld32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* R rows (1..4) of one repacked 16-column tile. */
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vnni"))) void
rp_rows(const sv_qtype t, const int R, const uint8_t *rp, const sv_q8x_t *x, int32_t nb, const float *bias, float *y,
        int32_t ldy) {
    __m512 acc[4], M[4];
    for (int r = 0; r < R; r++) acc[r] = M[r] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    size_t rpb = rp_block_bytes(t);
    const int chunks = t == SV_QT_Q8_0 ? 8 : 4;
    for (int32_t b = 0; b < nb; b++, rp += rpb) {
        __m512i wv[8];
        if (t == SV_QT_Q8_0) {
            for (int j = 0; j < 8; j++) wv[j] = _mm512_loadu_si512(rp + 64 * j);
        } else {
            for (int j = 0; j < 4; j++) {
                __m512i raw = _mm512_loadu_si512(rp + 64 * j);
                wv[j] = _mm512_and_si512(raw, m4);                         /* elements 4j .. 4j+3 */
                wv[4 + j] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4); /* elements 16+4j .. */
            }
        }
        const float *dwp = (const float *)(rp + chunks * 64);
        __m512 dw = _mm512_loadu_ps(dwp), mw = _mm512_loadu_ps(dwp + 16);
        for (int r = 0; r < R; r++) {
            const sv_q8x_t *xb = x + (size_t)r * nb + b;
            __m512i P = _mm512_setzero_si512();
            for (int j = 0; j < 8; j++) {
                /* the activation bytes that meet chunk j: 4j.. (Q8_0, and the Q4 low nibbles), 16+4(j-4).. */
                int e = t == SV_QT_Q8_0 ? 4 * j : j < 4 ? 4 * j : 16 + 4 * (j - 4);
                P = _mm512_dpbusd_epi32(P, wv[j], _mm512_set1_epi32(ld32(xb->q + e)));
            }
            if (t == SV_QT_Q4_0) P = _mm512_sub_epi32(P, _mm512_set1_epi32(8 * xb->qsum));
            if (t == SV_QT_Q8_0) P = _mm512_sub_epi32(P, _mm512_set1_epi32(128 * xb->qsum));
            acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(_mm512_cvtepi32_ps(P), _mm512_mul_ps(dw, _mm512_set1_ps(xb->d))));
            if (t == SV_QT_Q4_1) M[r] = _mm512_add_ps(M[r], _mm512_mul_ps(mw, _mm512_set1_ps(xb->sx)));
        }
    }
    for (int r = 0; r < R; r++) {
        __m512 v = t == SV_QT_Q4_1 ? _mm512_add_ps(acc[r], M[r]) : acc[r];
        if (bias) v = _mm512_add_ps(v, _mm512_loadu_ps(bias));
        _mm512_storeu_ps(y + (size_t)r * ldy, v);
    }
}

/* Super-block by super-block and column by column: each sub-block's 32
 * weights are unpacked in registers (SV_I8_KLOAD, the kernels' own code)
 * and stored four bytes at a time into their chunks. */
__attribute__((target("avx2,f16c"))) static void repack16_k(sv_qtype t, const uint8_t *w, size_t rb, int32_t nb,
                                                           uint8_t *dst) {
    size_t bb = sv_qtype_block_bytes(t);
    for (int32_t s = 0; s < nb / 8; s++)
        for (int c = 0; c < 16; c++) {
            const uint8_t *sb = w + (size_t)c * rb + (size_t)s * bb;
            float d, dmin;
            kfloats(t, sb, &d, &dmin);
            for (int j = 0; j < 8; j++) {
                uint8_t *o = dst + (size_t)(8 * s + j) * RPK_BYTES;
                int32_t *slo = (int32_t *)(o + 512), *shi = slo + 16, *mn = shi + 16;
                float *dv = (float *)(mn + 16), *dminv = dv + 16;
                kscales(t, sb, j, &slo[c], &shi[c], &mn[c]);
                dv[c] = d;
                dminv[c] = dmin;
                __m256i wv;
                SV_I8_KLOAD(t, sb, j, wv);
                if (t == SV_QT_Q6_K) wv = _mm256_add_epi8(wv, _mm256_set1_epi8(32)); /* unsigned, as stored */
                uint32_t q[8];
                _mm256_storeu_si256((__m256i *)q, wv);
                for (int k = 0; k < 8; k++) memcpy(o + k * 64 + c * 4, &q[k], 4);
            }
        }
}

/* R rows (1..4) of one repacked 16-column tile of a K format: chunks 0..3
 * give each column's sum over the first 16 elements, 4..7 over the last
 * 16; Q6_K's offset of 32 comes off each with the activations' sum over
 * those 16; then the scales, and the float steps of dot_scalar_k, one lane
 * per column. */
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vnni"))) void
rpk_rows(const sv_qtype t, const int R, const uint8_t *rp, const sv_q8x_t *x, int32_t nb, const float *bias, float *y,
         int32_t ldy) {
    __m512 acc[4], M[4];
    for (int r = 0; r < R; r++) acc[r] = M[r] = _mm512_setzero_ps();
    for (int32_t b = 0; b < nb; b++, rp += RPK_BYTES) {
        __m512i wv[8];
        for (int j = 0; j < 8; j++) wv[j] = _mm512_loadu_si512(rp + 64 * j);
        __m512i slo = _mm512_loadu_si512(rp + 512), shi = _mm512_loadu_si512(rp + 576);
        __m512i mn = _mm512_loadu_si512(rp + 640);
        __m512 d = _mm512_loadu_ps(rp + 704), dmin = _mm512_loadu_ps(rp + 768);
        for (int r = 0; r < R; r++) {
            const sv_q8x_t *xb = x + (size_t)r * nb + b;
            __m512i Plo = _mm512_setzero_si512(), Phi = _mm512_setzero_si512(), P;
            for (int j = 0; j < 4; j++) Plo = _mm512_dpbusd_epi32(Plo, wv[j], _mm512_set1_epi32(ld32(xb->q + 4 * j)));
            for (int j = 4; j < 8; j++) Phi = _mm512_dpbusd_epi32(Phi, wv[j], _mm512_set1_epi32(ld32(xb->q + 4 * j)));
            __m512 dx = _mm512_set1_ps(xb->d);
            if (t == SV_QT_Q6_K) {
                int32_t slo_x = 0, shi_x = 0;
                for (int i = 0; i < 16; i++) {
                    slo_x += xb->q[i];
                    shi_x += xb->q[16 + i];
                }
                Plo = _mm512_sub_epi32(Plo, _mm512_set1_epi32(32 * slo_x));
                Phi = _mm512_sub_epi32(Phi, _mm512_set1_epi32(32 * shi_x));
                P = _mm512_add_epi32(_mm512_mullo_epi32(Plo, slo), _mm512_mullo_epi32(Phi, shi));
            } else {
                P = _mm512_mullo_epi32(_mm512_add_epi32(Plo, Phi), slo);
                __m512i N = _mm512_mullo_epi32(mn, _mm512_set1_epi32(xb->qsum));
                M[r] = _mm512_add_ps(M[r], _mm512_mul_ps(_mm512_cvtepi32_ps(N), _mm512_mul_ps(dmin, dx)));
            }
            acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(_mm512_cvtepi32_ps(P), _mm512_mul_ps(d, dx)));
        }
    }
    for (int r = 0; r < R; r++) {
        __m512 v = t == SV_QT_Q6_K ? acc[r] : _mm512_sub_ps(acc[r], M[r]);
        if (bias) v = _mm512_add_ps(v, _mm512_loadu_ps(bias));
        _mm512_storeu_ps(y + (size_t)r * ldy, v);
    }
}

/* Every row of a repacked tile through FN (rp_rows or rpk_rows) for the
 * constant format T: four rows at a time, then one. */
#define SV_RP_FORMAT(FN, T)                                                               \
    do {                                                                                  \
        int32_t r = 0;                                                                    \
        for (; r + 4 <= rows; r += 4) {                                                   \
            FN(T, 4, rp, x + (size_t)r * nb, nb, bias, y + (size_t)r * ldy, ldy);         \
            for (int k = 0; k < pf_step && pf < pf_end; k++, pf += 64)                    \
                _mm_prefetch((const char *)pf, _MM_HINT_T1);                              \
        }                                                                                 \
        for (; r < rows; r++) FN(T, 1, rp, x + (size_t)r * nb, nb, bias, y + (size_t)r * ldy, ldy); \
    } while (0)

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static void rp_tile(sv_qtype t, const uint8_t *rp,
                                                                           const sv_q8x_t *x, int32_t rows,
                                                                           int32_t nb, const float *bias,
                                                                           float *y, int32_t ldy,
                                                                           const uint8_t *next, size_t next_bytes) {
    /* The next tile's lines, spread over the groups of four rows: a
     * rounded-up share after each group, so that they are all issued by
     * the last group. */
    const uint8_t *pf = next, *pf_end = next ? next + next_bytes : NULL;
    int32_t groups = rows / 4;
    int pf_step = next ? (int)((next_bytes / 64 + 1) / (size_t)(groups > 0 ? groups : 1) + 1) : 0;
    switch (t) { /* constant formats, so that the branches fold away */
    case SV_QT_Q8_0: SV_RP_FORMAT(rp_rows, SV_QT_Q8_0); break;
    case SV_QT_Q4_0: SV_RP_FORMAT(rp_rows, SV_QT_Q4_0); break;
    case SV_QT_Q4_K: SV_RP_FORMAT(rpk_rows, SV_QT_Q4_K); break;
    case SV_QT_Q5_K: SV_RP_FORMAT(rpk_rows, SV_QT_Q5_K); break;
    case SV_QT_Q6_K: SV_RP_FORMAT(rpk_rows, SV_QT_Q6_K); break;
    default: SV_RP_FORMAT(rp_rows, SV_QT_Q4_1); break;
    }
}
#endif

void sv_i8_cols16(sv_i8_level lv, sv_qtype t, const uint8_t *w, size_t row_bytes, const sv_q8x_t *x, int32_t rows,
                  int32_t nb, const float *bias, float *y, int32_t ldy, void *scratch, const uint8_t *next,
                  size_t next_bytes) {
#ifdef SV_I8_X86
    if (sv_i8_cols16_ok(lv)) {
        uint8_t *rp = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
        if (is_kquant(t)) repack16_k(t, w, row_bytes, nb, rp);
        else repack16(t, w, row_bytes, nb, rp);
        rp_tile(t, rp, x, rows, nb, bias, y, ldy, next, next_bytes);
        return;
    }
#endif
    (void)scratch; /* no repacked kernel here (callers ask sv_i8_cols16_ok first) */
    (void)next;
    (void)next_bytes;
    for (int32_t r = 0; r < rows; r++)
        sv_i8_dots(lv, t, w, row_bytes, 16, x + (size_t)r * nb, nb, bias, y + (size_t)r * ldy);
}

sv_i8_level sv_i8_best_level(void) {
#ifdef SV_I8_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw"))
        return SV_I8_VNNI;
    if (__builtin_cpu_supports("avx2")) return SV_I8_AVX2;
#endif
    return SV_I8_SCALAR;
}

void sv_i8_dots(sv_i8_level lv, sv_qtype t, const uint8_t *w, size_t row_bytes, int32_t nc, const sv_q8x_t *x,
                int32_t nb, const float *bias, float *y) {
    int32_t c = 0;
    for (; c + 4 <= nc; c += 4, w += 4 * row_bytes) {
        /* the next four weight rows, on their way into L1 (a hint: it
         * changes no result; a non-temporal hint halves the speed here) */
        for (size_t o = 0; o < 4 * row_bytes; o += 64) __builtin_prefetch(w + 4 * row_bytes + o, 0, 3);
        cols4(lv, t, 1, w, row_bytes, x, nb, bias ? bias + c : NULL, y + c, 0);
    }
    for (; c < nc; c++, w += row_bytes) { /* the last columns: the reference, the same bits */
        float v = dot_scalar(t, w, x, nb);
        y[c] = bias ? v + bias[c] : v;
    }
}
