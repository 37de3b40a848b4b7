/* test_backend — every CPU backend operation against a naive double-precision
 * reference on random data, and the batch invariance the backend promises:
 * a row's output bits do not depend on the other rows in the call, on its
 * place among them, or on the number of threads. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/backend/cpu.h"
#include "src/backend/cpu_int8.h"
#include "src/backend/quant.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) / 8388608.0 - 1.0);
}

static float *rnd(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

static double max_rel(const float *a, const double *ref, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (!(d <= worst))
            worst = d; /* NaN sticks */
    }
    return worst;
}

static sv_backend_t *be1, *be3; /* one thread, three threads */
static sv_error_t err;

static void test_gemm(void) {
    const int32_t ins[] = {1, 7, 16, 17, 64, 200};
    const int32_t outs[] = {1, 3, 4, 5, 64, 67};
    const int32_t max_rows = 13;
    for (size_t a = 0; a < sizeof ins / sizeof *ins; a++)
        for (size_t b = 0; b < sizeof outs / sizeof *outs; b++) {
            int32_t in = ins[a], out = outs[b];
            float *x = rnd((size_t)max_rows * in), *w = rnd((size_t)out * in), *bias = rnd(out);
            float *y = malloc(sizeof(float) * max_rows * out);
            float *y1 = malloc(sizeof(float) * max_rows * out);
            double *ref = malloc(sizeof(double) * max_rows * out);
            for (int use_bias = 0; use_bias < 2; use_bias++) {
                const float *bb = use_bias ? bias : NULL;
                CHECK(be3->ops->gemm(be3, max_rows, in, out, x, w, bb, y, &err) == SV_OK, "%s",
                      err.message);
                for (int32_t r = 0; r < max_rows; r++)
                    for (int32_t o = 0; o < out; o++) {
                        double s = bb ? bb[o] : 0;
                        for (int32_t k = 0; k < in; k++)
                            s += (double)x[(size_t)r * in + k] * w[(size_t)o * in + k];
                        ref[(size_t)r * out + o] = s;
                    }
                double e = max_rel(y, ref, (size_t)max_rows * out);
                CHECK(e < 1e-5, "gemm in %d out %d bias %d: error %g", in, out, use_bias, e);
                /* Each row alone, on one thread: the same bits. */
                for (int32_t r = 0; r < max_rows; r++)
                    be1->ops->gemm(be1, 1, in, out, x + (size_t)r * in, w, bb, y1 + (size_t)r * out,
                                   &err);
                CHECK(memcmp(y, y1, sizeof(float) * max_rows * out) == 0,
                      "gemm in %d out %d: rows alone differ from 13 rows together", in, out);
                /* Every run of rows r0 .. r0+m-1, at every offset. */
                int bad = 0;
                for (int32_t m = 2; m < max_rows; m++)
                    for (int32_t r0 = 0; r0 + m <= max_rows; r0 += 3) {
                        be1->ops->gemm(be1, m, in, out, x + (size_t)r0 * in, w, bb, y1, &err);
                        bad += memcmp(y1, y + (size_t)r0 * out, sizeof(float) * m * out) != 0;
                    }
                CHECK(bad == 0, "gemm in %d out %d: %d sub-batches differ", in, out, bad);
            }
            free(x), free(w), free(bias), free(y), free(y1), free(ref);
        }
    /* A product large enough to use every thread: 3 threads == 1 thread,
     * and 1 row == 40 rows. */
    int32_t rows = 40, in = 576, out = 1536;
    float *x = rnd((size_t)rows * in), *w = rnd((size_t)out * in);
    float *y = malloc(sizeof(float) * rows * out), *y1 = malloc(sizeof(float) * rows * out);
    be3->ops->gemm(be3, rows, in, out, x, w, NULL, y, &err);
    be1->ops->gemm(be1, rows, in, out, x, w, NULL, y1, &err);
    CHECK(memcmp(y, y1, sizeof(float) * rows * out) == 0, "gemm: 3 threads differ from 1");
    be3->ops->gemm(be3, 1, in, out, x + (size_t)37 * in, w, NULL, y1, &err);
    CHECK(memcmp(y + (size_t)37 * out, y1, sizeof(float) * out) == 0,
          "gemm 576x1536: row 37 alone differs from 40 rows");
    free(x), free(w), free(y), free(y1);

    CHECK(be1->ops->gemm(be1, 1, 0, 4, NULL, NULL, NULL, NULL, &err) == SV_ERR_ARG,
          "gemm accepts in = 0");
    float one = 1.0f, none = 7.0f;
    CHECK(be3->ops->gemm(be3, 0, 1, 1, &one, &one, NULL, &none, &err) == SV_OK && none == 7.0f,
          "gemm of 0 rows: not a no-op");
}

static void test_rmsnorm(void) {
    int32_t rows = 5, dim = 100;
    float *x = rnd((size_t)rows * dim), *w = rnd(dim), *y = malloc(sizeof(float) * rows * dim);
    double *ref = malloc(sizeof(double) * rows * dim);
    CHECK(be1->ops->rmsnorm(be1, rows, dim, x, w, 1e-5f, y, &err) == SV_OK, "%s", err.message);
    for (int32_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int32_t i = 0; i < dim; i++)
            ss += (double)x[r * dim + i] * x[r * dim + i];
        double sc = 1.0 / sqrt(ss / dim + 1e-5);
        for (int32_t i = 0; i < dim; i++)
            ref[r * dim + i] = x[r * dim + i] * sc * w[i];
    }
    CHECK(max_rel(y, ref, (size_t)rows * dim) < 1e-5, "rmsnorm error %g",
          max_rel(y, ref, (size_t)rows * dim));
    /* in place */
    be1->ops->rmsnorm(be1, rows, dim, x, w, 1e-5f, x, &err);
    CHECK(memcmp(x, y, sizeof(float) * rows * dim) == 0, "rmsnorm in place differs");
    free(x), free(w), free(y), free(ref);
}

static void test_rope(void) {
    int32_t rows = 3, heads = 2, hd = 16;
    int32_t pos[3] = {0, 5, 1000};
    for (int style = 0; style < 2; style++)
        for (int32_t rot = 8; rot <= hd; rot += 8) {
            float *x = rnd((size_t)rows * heads * hd);
            float *y = malloc(sizeof(float) * rows * heads * hd);
            memcpy(y, x, sizeof(float) * rows * heads * hd);
            double *ref = malloc(sizeof(double) * rows * heads * hd);
            float inv[8];
            for (int i = 0; i < rot / 2; i++)
                inv[i] = (float)pow(10000.0, -2.0 * i / rot);
            CHECK(be1->ops->rope(be1, rows, heads, hd, rot, (sv_rope_style)style, pos, inv, y,
                                 &err) == SV_OK,
                  "%s", err.message);
            for (int32_t r = 0; r < rows; r++)
                for (int32_t h = 0; h < heads; h++) {
                    const float *v = x + (r * heads + h) * hd;
                    double *o = ref + (r * heads + h) * hd;
                    for (int32_t d = 0; d < hd; d++)
                        o[d] = v[d];
                    for (int32_t i = 0; i < rot / 2; i++) {
                        int32_t i0 = style == SV_ROPE_NORMAL ? 2 * i : i;
                        int32_t i1 = style == SV_ROPE_NORMAL ? 2 * i + 1 : i + rot / 2;
                        double a = (double)pos[r] * inv[i];
                        o[i0] = v[i0] * cos(a) - v[i1] * sin(a);
                        o[i1] = v[i0] * sin(a) + v[i1] * cos(a);
                    }
                }
            double e = max_rel(y, ref, (size_t)rows * heads * hd);
            CHECK(e < 1e-6, "rope style %d rot %d: error %g", style, rot, e);
            free(x), free(y), free(ref);
        }
    float x[4] = {1, 2, 3, 4}, inv[1] = {1};
    int32_t p = 0;
    CHECK(be1->ops->rope(be1, 1, 1, 4, 3, SV_ROPE_NORMAL, &p, inv, x, &err) == SV_ERR_ARG,
          "rope accepts an odd rot_dim");
}

/* Head widths of 64, 128 and 256 take the register kernels (attn_rows_v,
 * query rows in groups), 40 the generic one. */
static void test_attention(int32_t hd) {
    const int32_t heads = 6, kvh = 2, cap = 80, n = 70;
    const int32_t kv_dim = kvh * hd, q_dim = heads * hd;
    float *kc = malloc(sizeof(float) * cap * kv_dim), *vc = malloc(sizeof(float) * cap * kv_dim);
    float *k = rnd((size_t)n * kv_dim), *v = rnd((size_t)n * kv_dim);
    float *q = rnd((size_t)n * q_dim);
    for (size_t i = 0; i < (size_t)n * q_dim; i++)
        q[i] *= 3; /* peakier softmax */
    float *out = malloc(sizeof(float) * n * q_dim), *out1 = malloc(sizeof(float) * q_dim);
    double *ref = malloc(sizeof(double) * n * q_dim);
    int32_t *pos = malloc(sizeof(int32_t) * n);
    for (int32_t i = 0; i < n; i++)
        pos[i] = i;
    sv_kv_view_t kv = {.k = kc, .v = vc, .capacity = cap, .kv_dim = kv_dim};
    CHECK(be3->ops->kv_write(be3, &kv, n, pos, k, v, &err) == SV_OK, "%s", err.message);
    double *sc = malloc(sizeof(double) * n);
    /* every position, then sliding windows (Gemma 3's local layers): one
     * position, shorter than a tile, across tiles, and wider than the rows */
    const int32_t windows[] = {0, 1, 5, 37, 100};
    for (size_t wi = 0; wi < sizeof windows / sizeof *windows; wi++) {
        const int32_t win = windows[wi];
        sv_attn_shape_t sh = {heads, kvh, hd, 1.0f / sqrtf((float)hd), n, win};
        CHECK(be3->ops->attention(be3, &kv, &sh, n, pos, q, out, &err) == SV_OK, "%s", err.message);
        for (int32_t r = 0; r < n; r++)
            for (int32_t h = 0; h < heads; h++) {
                int32_t g = h / (heads / kvh);
                double mx = -INFINITY, sum = 0;
                const int32_t j0 = win && r >= win ? r - win + 1 : 0;
                for (int32_t j = 0; j < j0; j++)
                    sc[j] = 0; /* outside the window: no weight */
                for (int32_t j = j0; j <= r; j++) {
                    double s = 0;
                    for (int32_t d = 0; d < hd; d++)
                        s += (double)q[r * q_dim + h * hd + d] * k[j * kv_dim + g * hd + d];
                    sc[j] = s / sqrt((double)hd);
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int32_t j = j0; j <= r; j++)
                    sum += sc[j] = exp(sc[j] - mx);
                for (int32_t d = 0; d < hd; d++) {
                    double o = 0;
                    for (int32_t j = 0; j <= r; j++)
                        o += sc[j] * v[j * kv_dim + g * hd + d];
                    ref[r * q_dim + h * hd + d] = o / sum;
                }
            }
        double e = max_rel(out, ref, (size_t)n * q_dim);
        CHECK(e < 1e-5, "attention (head_dim %d, window %d) error %g", (int)hd, (int)win, e);
        /* decode-style: one row at a time gives the same bits */
        int bad = 0;
        for (int32_t r = 0; r < n; r++) {
            be1->ops->attention(be1, &kv, &sh, 1, &pos[r], q + (size_t)r * q_dim, out1, &err);
            bad += memcmp(out1, out + (size_t)r * q_dim, sizeof(float) * q_dim) != 0;
        }
        CHECK(bad == 0, "attention (head_dim %d, window %d): %d rows differ when run alone", (int)hd, (int)win, bad);
    }
    sv_attn_shape_t sh = {heads, kvh, hd, 1.0f / sqrtf((float)hd), n, -1};
    CHECK(be1->ops->attention(be1, &kv, &sh, 1, pos, q, out1, &err) == SV_ERR_ARG,
          "attention accepts a negative window");
    sh.window = 0;
    int32_t far = cap;
    CHECK(be1->ops->attention(be1, &kv, &sh, 1, &far, q, out1, &err) == SV_ERR_ARG,
          "attention accepts a position past the cache");
    CHECK(be1->ops->kv_write(be1, &kv, 1, &far, k, v, &err) == SV_ERR_ARG,
          "kv_write accepts a position past the cache");
    free(kc), free(vc), free(k), free(v), free(q), free(out), free(out1), free(ref), free(pos),
        free(sc);
}

static void test_small_ops(void) {
    size_t n = 1000;
    float *g = rnd(n), *u = rnd(n), *o = malloc(sizeof(float) * n);
    double *ref = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++)
        g[i] *= 8;
    be1->ops->swiglu(be1, n, g, u, o, &err);
    for (size_t i = 0; i < n; i++)
        ref[i] = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
    CHECK(max_rel(o, ref, n) < 1e-6, "swiglu error %g", max_rel(o, ref, n));
    be1->ops->geglu(be1, n, g, u, o, &err);
    for (size_t i = 0; i < n; i++) {
        double x = g[i];
        ref[i] = 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))) * u[i];
    }
    CHECK(max_rel(o, ref, n) < 1e-5, "geglu error %g", max_rel(o, ref, n));
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)o[i] * 8.0;
    be1->ops->scale(be1, n, o, 8.0f, &err);
    CHECK(max_rel(o, ref, n) < 1e-7, "scale error %g", max_rel(o, ref, n));
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)o[i] + g[i];
    be1->ops->add(be1, n, o, g, &err);
    CHECK(max_rel(o, ref, n) < 1e-7, "add error %g", max_rel(o, ref, n));

    float *table = rnd(10 * 7), out[3 * 7];
    int32_t ids[3] = {9, 0, 4};
    CHECK(be1->ops->get_rows(be1, 3, 7, 10, table, ids, out, &err) == SV_OK, "%s", err.message);
    CHECK(memcmp(out, table + 9 * 7, 7 * sizeof(float)) == 0 &&
              memcmp(out + 7, table, 7 * sizeof(float)) == 0 &&
              memcmp(out + 14, table + 4 * 7, 7 * sizeof(float)) == 0,
          "get_rows copies the wrong rows");
    int32_t badid = 10;
    CHECK(be1->ops->get_rows(be1, 1, 7, 10, table, &badid, out, &err) == SV_ERR_ARG,
          "get_rows accepts id 10 of 10");
    free(g), free(u), free(o), free(ref), free(table);

    void *p = NULL;
    CHECK(be1->ops->alloc(be1, 100, &p, &err) == SV_OK && ((uintptr_t)p % 64) == 0,
          "alloc is not 64-byte aligned");
    be1->ops->free(be1, p);
}

/* Random bytes of a weight in format t, with every f16/bf16 scale, offset
 * or element finite (a random exponent in a moderate range). */
static uint16_t rnd_half(bool bf16) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    uint16_t sign = (uint16_t)((rng >> 20) & 1) << 15;
    if (!bf16 && (rng >> 50) % 8 == 0) /* zero or subnormal */
        return (uint16_t)(sign | ((rng >> 32) & 0x3ff));
    if (bf16) /* exponent 118 .. 133 */
        return (uint16_t)(sign | (118 + (rng >> 24) % 16) << 7 | ((rng >> 32) & 0x7f));
    return (uint16_t)(sign | (8 + (rng >> 24) % 10) << 10 | ((rng >> 32) & 0x3ff)); /* 2^-7 .. 2^2 */
}

static void rnd_qbytes(sv_qtype t, uint8_t *b, size_t n_blocks) {
    size_t bb = sv_qtype_block_bytes(t);
    for (size_t i = 0; i < n_blocks; i++, b += bb) {
        for (size_t k = 0; k < bb; k++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            b[k] = (uint8_t)(rng >> 33);
        }
        uint16_t h0 = rnd_half(t == SV_QT_BF16), h1 = rnd_half(false);
        uint8_t *d = t == SV_QT_Q6_K ? b + 208 : b; /* Q6_K's scale is its last field */
        d[0] = (uint8_t)h0, d[1] = (uint8_t)(h0 >> 8);
        if (t == SV_QT_Q4_1 || t == SV_QT_Q4_K || t == SV_QT_Q5_K) /* the offset m, or dmin */
            b[2] = (uint8_t)h1, b[3] = (uint8_t)(h1 >> 8);
    }
}

/* gemm_q against the reference path: sv_dequantize to fp32, then gemm.
 * Bit for bit, for every row count 1..40, with and without bias, on one
 * and three threads; get_rows_q against get_rows of the dequantized table. */
static void test_gemm_q(void) {
    const struct {
        sv_qtype t;
        sv_ggml_type g;
        const char *name;
    } types[] = {{SV_QT_F16, SV_GGML_F16, "F16"},    {SV_QT_BF16, SV_GGML_BF16, "BF16"},
                 {SV_QT_Q8_0, SV_GGML_Q8_0, "Q8_0"}, {SV_QT_Q4_0, SV_GGML_Q4_0, "Q4_0"},
                 {SV_QT_Q4_1, SV_GGML_Q4_1, "Q4_1"}, {SV_QT_Q4_K, SV_GGML_Q4_K, "Q4_K"},
                 {SV_QT_Q5_K, SV_GGML_Q5_K, "Q5_K"}, {SV_QT_Q6_K, SV_GGML_Q6_K, "Q6_K"}};
    const int32_t ins[] = {32, 64, 96, 160, 256, 576, 768}; /* the K formats take the multiples of 256 */
    const int32_t outs[] = {1, 3, 4, 5, 17, 64};
    const int32_t max_rows = 40;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        sv_qtype t = types[ti].t;
        int bad = 0, checked = 0;
        for (size_t a = 0; a < sizeof ins / sizeof *ins; a++)
            for (size_t o = 0; o < sizeof outs / sizeof *outs; o++) {
                int32_t in = ins[a], out = outs[o];
                if (in % sv_qtype_block(t)) continue;
                size_t nb = (size_t)out * in / sv_qtype_block(t);
                size_t bytes = nb * sv_qtype_block_bytes(t);
                uint8_t *wq = malloc(bytes);
                rnd_qbytes(t, wq, nb);
                float *wf = malloc(sizeof(float) * out * in);
                CHECK(sv_dequantize(types[ti].g, wq, bytes, wf, (uint64_t)out * in, &err) == SV_OK,
                      "%s", err.message);
                float *x = rnd((size_t)max_rows * in), *bias = rnd(out);
                float *yr = malloc(sizeof(float) * max_rows * out);
                float *y1 = malloc(sizeof(float) * max_rows * out);
                float *y3 = malloc(sizeof(float) * max_rows * out);
                for (int use_bias = 0; use_bias < 2; use_bias++) {
                    const float *bb = use_bias ? bias : NULL;
                    for (int32_t rows = 1; rows <= max_rows; rows += (rows < 9 ? 1 : 7)) {
                        size_t ny = sizeof(float) * rows * out;
                        CHECK(be1->ops->gemm(be1, rows, in, out, x, wf, bb, yr, &err) == SV_OK,
                              "%s", err.message);
                        CHECK(be1->ops->gemm_q(be1, rows, in, out, x, wq, t, bb, y1, &err) ==
                                  SV_OK,
                              "%s", err.message);
                        CHECK(be3->ops->gemm_q(be3, rows, in, out, x, wq, t, bb, y3, &err) ==
                                  SV_OK,
                              "%s", err.message);
                        bad += memcmp(yr, y1, ny) != 0;
                        bad += memcmp(yr, y3, ny) != 0;
                        checked += 2;
                    }
                    /* 40 rows: the last tile shapes too. */
                    be3->ops->gemm(be3, max_rows, in, out, x, wf, bb, yr, &err);
                    be3->ops->gemm_q(be3, max_rows, in, out, x, wq, t, bb, y3, &err);
                    bad += memcmp(yr, y3, sizeof(float) * max_rows * out) != 0;
                    checked++;
                }
                /* get_rows_q */
                int32_t ids[5] = {out - 1, 0, out / 2, 0, out - 1};
                float *gr = malloc(sizeof(float) * 5 * in), *gq = malloc(sizeof(float) * 5 * in);
                CHECK(be1->ops->get_rows(be1, 5, in, out, wf, ids, gr, &err) == SV_OK, "%s",
                      err.message);
                CHECK(be1->ops->get_rows_q(be1, 5, in, out, wq, t, ids, gq, &err) == SV_OK, "%s",
                      err.message);
                CHECK(memcmp(gr, gq, sizeof(float) * 5 * in) == 0,
                      "get_rows_q %s in %d: rows differ from the dequantized table",
                      types[ti].name, in);
                int32_t badid = out;
                CHECK(be1->ops->get_rows_q(be1, 1, in, out, wq, t, &badid, gq, &err) ==
                          SV_ERR_ARG,
                      "get_rows_q accepts id %d of %d", out, out);
                free(gr), free(gq);
                free(wq), free(wf), free(x), free(bias), free(yr), free(y1), free(y3);
            }
        CHECK(bad == 0, "gemm_q %s: %d of %d products differ from dequantize + gemm",
              types[ti].name, bad, checked);
    }
    /* A row length that is no whole number of blocks, and no format. */
    float x[40] = {0}, y[4];
    uint8_t w[200] = {0};
    CHECK(be1->ops->gemm_q(be1, 1, 40, 1, x, w, SV_QT_Q8_0, NULL, y, &err) == SV_ERR_ARG,
          "gemm_q accepts in = 40 for Q8_0");
    CHECK(be1->ops->gemm_q(be1, 1, 32, 1, x, w, (sv_qtype)99, NULL, y, &err) == SV_ERR_ARG,
          "gemm_q accepts type 99");
}

/* Activation quantization: the SIMD code gives the reference's bytes on
 * blocks built to tell rounding modes apart (exact halves at scale 1),
 * zeros, tiny and huge values, and random ones. */
static void test_q8x_quantize(void) {
    enum { NB = 6 };
    float x[NB * 32];
    for (int i = 0; i < 32; i++) {
        x[i] = (float)(i - 16) + 0.5f; /* halves */
        x[32 + i] = 0.0f;
        x[64 + i] = (i % 3 - 1) * 1e-30f;
        x[96 + i] = (i % 5 - 2) * 3e37f;
    }
    x[31] = 127.0f; /* scale exactly 1: the halves stay halves */
    for (int i = 128; i < NB * 32; i++) x[i] = frand() * (i % 7 ? 1.0f : 50.0f);
    sv_q8x_t a[NB], b[NB];
    sv_q8x_quantize(SV_I8_SCALAR, x, NB * 32, a);
    sv_q8x_quantize(sv_i8_best_level(), x, NB * 32, b);
    CHECK(memcmp(a, b, sizeof a) == 0, "q8x_quantize: the SIMD bytes differ from the reference's");
    CHECK(a[0].q[0] == -16 && a[0].q[1] == -14 && a[0].q[3] == -12, "q8x_quantize: halves are not rounded to even "
          "(%d %d %d)", a[0].q[0], a[0].q[1], a[0].q[3]);
    CHECK(a[1].d == 0.0f && a[1].sx == 0.0f, "q8x_quantize: a zero block has scale %g", (double)a[1].d);
}

/* --cpu-kernels int8: the SIMD kernel this CPU runs equals the plain C one
 * bit for bit (on one and three threads); a row's outputs are the same
 * alone and among 1..64 other rows; and every output is within the error
 * that 8-bit activations allow of an fp64 product on the dequantized
 * weights: sum over i of |w_i| * d_i / 2 (d_i the activation scale of
 * element i's block), plus float rounding. */
static void test_gemm_q_int8(void) {
    sv_cpu_config_t cs = {.n_threads = 1, .kernels = SV_CPU_KERNELS_INT8_SCALAR},
                    c1 = {.n_threads = 1, .kernels = SV_CPU_KERNELS_INT8},
                    c3 = {.n_threads = 3, .kernels = SV_CPU_KERNELS_INT8},
                    c2 = {.n_threads = 2, .kernels = SV_CPU_KERNELS_INT8_AVX2};
    sv_backend_t *bs = NULL, *bi1 = NULL, *bi3 = NULL, *bav = NULL;
    if (sv_cpu_backend_create(&cs, &bs, &err) || sv_cpu_backend_create(&c1, &bi1, &err) ||
        sv_cpu_backend_create(&c3, &bi3, &err) || sv_cpu_backend_create(&c2, &bav, &err)) {
        CHECK(0, "backend: %s", err.message);
        goto out;
    }
    printf("int8 kernels: level %d (0 plain C, 1 AVX2, 2 AVX-512 VNNI)\n", (int)sv_i8_best_level());
    const struct {
        sv_qtype t;
        sv_ggml_type g;
        const char *name;
    } types[] = {{SV_QT_Q8_0, SV_GGML_Q8_0, "Q8_0"}, {SV_QT_Q4_0, SV_GGML_Q4_0, "Q4_0"}, {SV_QT_Q4_1, SV_GGML_Q4_1, "Q4_1"},
                 {SV_QT_Q4_K, SV_GGML_Q4_K, "Q4_K"}, {SV_QT_Q5_K, SV_GGML_Q5_K, "Q5_K"}, {SV_QT_Q6_K, SV_GGML_Q6_K, "Q6_K"}};
    const int32_t ins[] = {32, 96, 256, 576, 768}; /* the K formats take the multiples of 256 */
    const int32_t outs[] = {1, 5, 17, 64};
    enum { R = 65 };
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        sv_qtype t = types[ti].t;
        int simd_bad = 0, inv_bad = 0, acc_bad = 0, checked = 0;
        double worst = 0;
        for (size_t a = 0; a < sizeof ins / sizeof *ins; a++)
            for (size_t o = 0; o < sizeof outs / sizeof *outs; o++) {
                int32_t in = ins[a], out = outs[o];
                if (in % sv_qtype_block(t)) continue;
                size_t nb = (size_t)out * in / sv_qtype_block(t), bytes = nb * sv_qtype_block_bytes(t);
                uint8_t *wq = malloc(bytes);
                rnd_qbytes(t, wq, nb);
                float *wf = malloc(sizeof(float) * out * in);
                CHECK(sv_dequantize(types[ti].g, wq, bytes, wf, (uint64_t)out * in, &err) == SV_OK, "%s", err.message);
                float *x = rnd((size_t)R * in), *bias = rnd(out);
                for (int32_t i = 0; i < R * in; i += 7) x[i] *= 20.0f; /* uneven magnitudes within blocks */
                float *ys = malloc(sizeof(float) * R * out), *y1 = malloc(sizeof(float) * R * out);
                float *y3 = malloc(sizeof(float) * R * out), *yk = malloc(sizeof(float) * R * out);
                for (int use_bias = 0; use_bias < 2; use_bias++) {
                    const float *bb = use_bias ? bias : NULL;
                    size_t ny = sizeof(float) * R * out;
                    CHECK(bs->ops->gemm_q(bs, R, in, out, x, wq, t, bb, ys, &err) == SV_OK, "%s", err.message);
                    CHECK(bi1->ops->gemm_q(bi1, R, in, out, x, wq, t, bb, y1, &err) == SV_OK, "%s", err.message);
                    CHECK(bi3->ops->gemm_q(bi3, R, in, out, x, wq, t, bb, y3, &err) == SV_OK, "%s", err.message);
                    simd_bad += (memcmp(ys, y1, ny) != 0) + (memcmp(ys, y3, ny) != 0);
                    CHECK(bav->ops->gemm_q(bav, R, in, out, x, wq, t, bb, yk, &err) == SV_OK, "%s", err.message);
                    simd_bad += memcmp(ys, yk, ny) != 0; /* the AVX2 kernel too, where VNNI is best */
                    /* the first k rows alone, k = 1..64, against the 65-row product */
                    for (int32_t k = 1; k < R; k += k < 8 ? 1 : 9) {
                        bi3->ops->gemm_q(bi3, k, in, out, x, wq, t, bb, yk, &err);
                        inv_bad += memcmp(yk, y3, sizeof(float) * k * out) != 0;
                    }
                    /* each row alone */
                    for (int32_t r = 0; r < R; r += 8) {
                        bi1->ops->gemm_q(bi1, 1, in, out, x + (size_t)r * in, wq, t, bb, yk, &err);
                        inv_bad += memcmp(yk, y3 + (size_t)r * out, sizeof(float) * out) != 0;
                    }
                    checked++;
                }
                /* accuracy (with the bias of the last pass) */
                for (int32_t r = 0; r < R; r++)
                    for (int32_t c = 0; c < out; c++) {
                        double ref = bias[c], bound = 0, mag = fabs(bias[c]);
                        for (int32_t k0 = 0; k0 < in; k0 += 32) {
                            double amax = 0;
                            for (int i = 0; i < 32; i++) amax = fmax(amax, fabs(x[(size_t)r * in + k0 + i]));
                            for (int i = 0; i < 32; i++) {
                                double w = wf[(size_t)c * in + k0 + i], xv = x[(size_t)r * in + k0 + i];
                                ref += w * xv;
                                mag += fabs(w * xv);
                                bound += fabs(w) * amax / 127.0 / 2.0;
                            }
                        }
                        double e = fabs(y3[(size_t)r * out + c] - ref);
                        double lim = bound * 1.001 + 1e-5 * mag + 1e-6;
                        if (e > lim) acc_bad++;
                        if (lim > 0 && e / lim > worst) worst = e / lim;
                    }
                free(wq), free(wf), free(x), free(bias), free(ys), free(y1), free(y3), free(yk);
            }
        CHECK(simd_bad == 0, "int8 %s: %d products differ between the SIMD and the plain C kernel", types[ti].name, simd_bad);
        CHECK(inv_bad == 0, "int8 %s: %d row sets differ alone and in a bigger batch", types[ti].name, inv_bad);
        CHECK(acc_bad == 0, "int8 %s: %d outputs beyond the 8-bit activation error bound", types[ti].name, acc_bad);
        printf("int8 %s: %d shapes, worst error %.2f of its bound\n", types[ti].name, checked, worst);
    }
out:
    sv_backend_destroy(bs);
    sv_backend_destroy(bi1);
    sv_backend_destroy(bi3);
    sv_backend_destroy(bav);
}

int main(void) {
    sv_cpu_config_t one = {.n_threads = 1}, three = {.n_threads = 3};
    if (sv_cpu_backend_create(&one, &be1, &err) || sv_cpu_backend_create(&three, &be3, &err)) {
        fprintf(stderr, "backend: %s\n", err.message);
        return 1;
    }
    test_gemm();
    test_gemm_q();
    test_q8x_quantize();
    test_gemm_q_int8();
    test_rmsnorm();
    test_rope();
    for (int32_t hd = 40; hd <= 256; hd = hd == 40 ? 64 : 2 * hd) test_attention(hd);
    test_small_ops();
    sv_backend_destroy(be1);
    sv_backend_destroy(be3);
    return test_summary("backend: gemm (reference, batch and thread invariance), rmsnorm, rope, "
                        "kv_write + attention, swiglu, add, get_rows, gemm_q and get_rows_q "
                        "(bit for bit as dequantize + gemm), int8 kernels (SIMD = plain C, batch invariance, error bound)");
}
