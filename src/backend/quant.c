/* quant.c — ggml block formats to float32 (see quant.h for the layouts).
 *
 * One function per block format decodes one block; sv_dequantize checks the
 * sizes once and walks the blocks. Bytes are read one at a time (little-endian,
 * no alignment assumed), so the code is the same on any host. */
#include "quant.h"

#include <string.h>

/* ggml's type traits: block elements and bytes per block (ggml-common.h). */
static const struct {
    const char *name;
    uint16_t block_elems, block_bytes;
} GGML_TYPES[SV_GGML_TYPE_END] = {
    [SV_GGML_F32] = {"F32", 1, 4},          [SV_GGML_F16] = {"F16", 1, 2},
    [SV_GGML_Q4_0] = {"Q4_0", 32, 18},      [SV_GGML_Q4_1] = {"Q4_1", 32, 20},
    [SV_GGML_Q5_0] = {"Q5_0", 32, 22},      [SV_GGML_Q5_1] = {"Q5_1", 32, 24},
    [SV_GGML_Q8_0] = {"Q8_0", 32, 34},      [SV_GGML_Q8_1] = {"Q8_1", 32, 36},
    [SV_GGML_Q2_K] = {"Q2_K", 256, 84},     [SV_GGML_Q3_K] = {"Q3_K", 256, 110},
    [SV_GGML_Q4_K] = {"Q4_K", 256, 144},    [SV_GGML_Q5_K] = {"Q5_K", 256, 176},
    [SV_GGML_Q6_K] = {"Q6_K", 256, 210},    [SV_GGML_Q8_K] = {"Q8_K", 256, 292},
    [SV_GGML_IQ2_XXS] = {"IQ2_XXS", 256, 66}, [SV_GGML_IQ2_XS] = {"IQ2_XS", 256, 74},
    [SV_GGML_IQ3_XXS] = {"IQ3_XXS", 256, 98}, [SV_GGML_IQ1_S] = {"IQ1_S", 256, 50},
    [SV_GGML_IQ4_NL] = {"IQ4_NL", 32, 18},  [SV_GGML_IQ3_S] = {"IQ3_S", 256, 110},
    [SV_GGML_IQ2_S] = {"IQ2_S", 256, 82},   [SV_GGML_IQ4_XS] = {"IQ4_XS", 256, 136},
    [SV_GGML_I8] = {"I8", 1, 1},            [SV_GGML_I16] = {"I16", 1, 2},
    [SV_GGML_I32] = {"I32", 1, 4},          [SV_GGML_I64] = {"I64", 1, 8},
    [SV_GGML_F64] = {"F64", 1, 8},          [SV_GGML_IQ1_M] = {"IQ1_M", 256, 56},
    [SV_GGML_BF16] = {"BF16", 1, 2},        [SV_GGML_TQ1_0] = {"TQ1_0", 256, 54},
    [SV_GGML_TQ2_0] = {"TQ2_0", 256, 66},   [SV_GGML_MXFP4] = {"MXFP4", 32, 17},
    [SV_GGML_NVFP4] = {"NVFP4", 64, 36},
};

bool sv_ggml_type_info(uint32_t type, const char **name, uint32_t *block_elems,
                       uint32_t *block_bytes) {
    if (type >= SV_GGML_TYPE_END || !GGML_TYPES[type].name)
        return false;
    if (name)
        *name = GGML_TYPES[type].name;
    if (block_elems)
        *block_elems = GGML_TYPES[type].block_elems;
    if (block_bytes)
        *block_bytes = GGML_TYPES[type].block_bytes;
    return true;
}

/* ---- scalars --------------------------------------------------------------- */

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float sv_f16_to_f32(uint16_t h) { return sv_f16_to_f32_inline(h); }

float sv_bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

uint16_t sv_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* ---- blocks ---------------------------------------------------------------- */

/* Each decodes one block at b into the block's elements at y. */
typedef void (*block_fn)(const uint8_t *b, float *y);

static void blk_f32(const uint8_t *b, float *y) {
    *y = f32_from_bits((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                       (uint32_t)b[3] << 24);
}

static void blk_f16(const uint8_t *b, float *y) { *y = sv_f16_to_f32(rd16(b)); }

static void blk_bf16(const uint8_t *b, float *y) { *y = sv_bf16_to_f32(rd16(b)); }

/* Q8_0: {f16 d; int8 qs[32]} */
static void blk_q8_0(const uint8_t *b, float *y) {
    float d = sv_f16_to_f32(rd16(b));
    for (int i = 0; i < 32; i++)
        y[i] = (float)(int8_t)b[2 + i] * d;
}

/* Q4_0: {f16 d; uint8 qs[16]}; low nibbles are elements 0..15. */
static void blk_q4_0(const uint8_t *b, float *y) {
    float d = sv_f16_to_f32(rd16(b));
    const uint8_t *qs = b + 2;
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)((qs[i] & 0x0f) - 8);
        y[i + 16] = d * (float)((qs[i] >> 4) - 8);
    }
}

/* Q4_1: {f16 d; f16 m; uint8 qs[16]} */
static void blk_q4_1(const uint8_t *b, float *y) {
    float d = sv_f16_to_f32(rd16(b));
    float m = sv_f16_to_f32(rd16(b + 2));
    const uint8_t *qs = b + 4;
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)(qs[i] & 0x0f) + m;
        y[i + 16] = d * (float)(qs[i] >> 4) + m;
    }
}

/* Q4_K: {f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]}.
 *
 * Eight sub-blocks j of 32 elements: x = d*sc[j] * q - dmin*mn[j]. The 6-bit
 * sc and mn are packed in scales[12] (sv_kquant_scale_min, quant.h).
 * Sub-blocks 2g and 2g+1 share qs[32g .. 32g+31]: low nibbles, then high. */
/* Q4_K, and Q5_K when qh is its fifth-bit array (below). */
static void blk_k45(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y) {
    float d = sv_f16_to_f32(rd16(b));
    float dmin = sv_f16_to_f32(rd16(b + 2));
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        sv_kquant_scale_min(b + 4, j, &s, &m);
        float dl = d * (float)s, ml = dmin * (float)m;
        const uint8_t *q = qs + 32 * (j / 2);
        int shift = 4 * (j % 2);
        for (int l = 0; l < 32; l++)
            y[32 * j + l] = dl * (float)(((q[l] >> shift) & 0x0f) | (qh ? ((qh[l] >> j) & 1) << 4 : 0)) - ml;
    }
}

static void blk_q4_k(const uint8_t *b, float *y) { blk_k45(b, NULL, b + 16, y); }

/* Q5_K: {f16 d; f16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]}.
 * Q4_K's layout with a fifth bit: element l of sub-block j adds 16 when
 * bit j of qh[l] is set. */
static void blk_q5_k(const uint8_t *b, float *y) { blk_k45(b, b + 16, b + 48, y); }

/* Q6_K: {uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d}.
 *
 * Two halves of 128 elements; in half h, element 32k + l (k < 4, l < 32) has
 * its low 4 bits in ql[64h + l + 32(k%2)] (low nibble for k < 2, high for
 * k >= 2) and its top 2 bits in qh[32h + l] at bit 2k. q - 32 is scaled by
 * d * scales[e / 16] for element e of the block. */
static void blk_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    float d = sv_f16_to_f32(rd16(b + 208));
    for (int e = 0; e < 256; e++) {
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        int lo = (ql[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
        int hi = (qh[32 * h + l] >> (2 * k)) & 3;
        float ds = d * (float)scales[e / 16];
        y[e] = ds * (float)((lo | hi << 4) - 32);
    }
}

static block_fn block_decoder(sv_ggml_type t) {
    switch (t) {
    case SV_GGML_F32: return blk_f32;
    case SV_GGML_F16: return blk_f16;
    case SV_GGML_BF16: return blk_bf16;
    case SV_GGML_Q8_0: return blk_q8_0;
    case SV_GGML_Q4_0: return blk_q4_0;
    case SV_GGML_Q4_1: return blk_q4_1;
    case SV_GGML_Q4_K: return blk_q4_k;
    case SV_GGML_Q5_K: return blk_q5_k;
    case SV_GGML_Q6_K: return blk_q6_k;
    default: return NULL;
    }
}

bool sv_dequant_supported(sv_ggml_type t) { return block_decoder(t) != NULL; }

sv_status sv_dequantize(sv_ggml_type t, const void *src, size_t src_bytes, float *dst, uint64_t n,
                        sv_error_t *err) {
    const char *name = "?";
    uint32_t be = 1, bb = 1;
    block_fn fn = block_decoder(t);
    if (!fn) {
        if (!sv_ggml_type_info((uint32_t)t, &name, NULL, NULL))
            return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                                "dequantize: unknown ggml type %u", (unsigned)t);
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "dequantize: ggml type %s is not supported", name);
    }
    sv_ggml_type_info((uint32_t)t, &name, &be, &bb);
    if (n % be)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "dequantize: %llu elements are not a whole number of %s blocks (%u)",
                            (unsigned long long)n, name, be);
    uint64_t n_blocks = n / be, need;
    if (__builtin_mul_overflow(n_blocks, (uint64_t)bb, &need) || need != (uint64_t)src_bytes)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "dequantize: %llu %s elements take %llu x %u bytes, got %zu",
                            (unsigned long long)n, name, (unsigned long long)n_blocks, bb,
                            src_bytes);
    if (n && (!src || !dst))
        return sv_error_set(err, SV_ERR_ARG, -1, "dequantize: NULL %s", src ? "dst" : "src");
    const uint8_t *p = src;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (t == SV_GGML_F32) { /* the bytes already are the floats */
        if (n)
            memcpy(dst, src, src_bytes);
        return SV_OK;
    }
#endif
    for (uint64_t i = 0; i < n_blocks; i++)
        fn(p + i * bb, dst + i * be);
    return SV_OK;
}
