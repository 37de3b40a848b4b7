/* test_kernels.c — every operation of the CUDA backend against the CPU
 * backend (the reference), on random inputs over many shapes.
 *
 *     test_kernels [--quick]    (--quick: small gemms, short contexts: for the sanitizers)
 *
 * Each case fills the same random inputs into both backends, runs the
 * operation on each, downloads the CUDA result and compares it with the
 * CPU's under the tolerance stated at the comparison:
 * - get_rows, kv_write: bit-exact (they copy);
 * - add, swiglu, rope: within 2 ulp-scale relative error (same float
 *   operations; device expf / sin / cos may differ in the last bit);
 * - gemm: |Δ| <= 3e-5 · Σ_k |x_k w_k| + 1e-30 per element (fp32 sums of up
 *   to 2048 terms in any order: typically √n · 2⁻²⁴ ≈ 3e-6 of Σ|x·w|, a plain
 *   left-to-right sum up to ~6e-6 (seen), so a margin of 5 over that);
 * - rmsnorm: 1e-5 relative to max |y|;
 * - attention: 1e-4 · max |v| (outputs are convex combinations of values;
 *   scores differ in the last bits and the softmax passes that on).
 * It also checks the error paths: a bad id, position or block table entry
 * is SV_ERR_ARG at the next synchronisation and the backend keeps working;
 * an impossible allocation is SV_ERR_NOMEM.
 *
 * Prints one line per case group with the worst error seen, then the
 * harness's "N passed, N failed"; exits 1 on any failure, 2 when no CUDA
 * device is present (a skip that check.sh treats as a failure). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/backend/cpu.h"
#include "src/backend/cuda.h"
#include "src/backend/quant.h"
#include "util/rng.h"
#include "tests/unit/test.h"

static sv_backend_t *CPU, *GPU;
static sv_rng_t R;
static bool QUICK;

static float frand(void) { /* uniform in [-1, 1) */
    return (float)((double)(sv_rng_next(&R) >> 11) * 0x1.0p-52 - 1.0);
}
static float nrand(void) { /* roughly N(0, 1): sum of 4 uniforms, scaled */
    return (frand() + frand() + frand() + frand()) * 0.8660254f;
}
static int32_t irand(int32_t n) { return (int32_t)sv_rng_below(&R, (uint32_t)n); }

/* ---- paired buffers -------------------------------------------------------------- */

/* The same values in CPU backend memory (c, readable directly) and CUDA
 * memory (g). */
typedef struct pair {
    void *c, *g;
    size_t bytes;
} pair_t;

static bool pair_alloc(pair_t *p, size_t bytes) {
    sv_error_t err;
    p->bytes = bytes;
    p->c = p->g = NULL;
    if (CPU->ops->alloc(CPU, bytes, &p->c, &err) || GPU->ops->alloc(GPU, bytes, &p->g, &err)) {
        fprintf(stderr, "alloc %zu: %s\n", bytes, err.message);
        return false;
    }
    return true;
}

/* Uploads p->c to p->g. */
static bool pair_sync(pair_t *p) {
    sv_error_t err;
    if (GPU->ops->upload(GPU, p->g, p->c, p->bytes, &err)) {
        fprintf(stderr, "upload: %s\n", err.message);
        return false;
    }
    return true;
}

static void pair_free(pair_t *p) {
    CPU->ops->free(CPU, p->c);
    GPU->ops->free(GPU, p->g);
    p->c = p->g = NULL;
}

static pair_t floats(size_t n, float scale) {
    pair_t p;
    if (!pair_alloc(&p, n * sizeof(float) + 4))
        exit(1);
    float *f = p.c;
    for (size_t i = 0; i < n; i++)
        f[i] = nrand() * scale;
    pair_sync(&p);
    return p;
}

static pair_t ints(const int32_t *v, size_t n) {
    pair_t p;
    if (!pair_alloc(&p, n * sizeof(int32_t) + 4))
        exit(1);
    if (n)
        memcpy(p.c, v, n * sizeof(int32_t));
    pair_sync(&p);
    return p;
}

/* The CUDA side of p, downloaded into a new host array (caller frees). */
static float *fetch(const pair_t *p, sv_status *st, sv_error_t *err) {
    float *h = malloc(p->bytes);
    *st = GPU->ops->download(GPU, h, p->g, p->bytes, err);
    return h;
}

/* ---- gemm ------------------------------------------------------------------------ */

static double worst_gemm;

static void gemm_case(int32_t rows, int32_t in, int32_t out, bool bias) {
    pair_t x = floats((size_t)rows * in, 1.0f), w = floats((size_t)out * in, 0.1f);
    pair_t b = floats((size_t)out, 1.0f), y = floats((size_t)rows * out, 0.0f);
    sv_error_t err;
    sv_status s1 = CPU->ops->gemm(CPU, rows, in, out, x.c, w.c, bias ? b.c : NULL, y.c, &err);
    sv_status s2 = GPU->ops->gemm(GPU, rows, in, out, x.g, w.g, bias ? b.g : NULL, y.g, &err);
    sv_status s3;
    float *g = fetch(&y, &s3, &err);
    CHECK(!s1 && !s2 && !s3, "gemm %dx%dx%d: %s", rows, in, out, err.message);
    const float *xc = x.c, *wc = w.c, *yc = y.c;
    int bad = 0;
    for (int32_t r = 0; r < rows && !s3; r++)
        for (int32_t c = 0; c < out; c++) {
            double mag = 0.0;
            for (int32_t k = 0; k < in; k++)
                mag += fabs((double)xc[(size_t)r * in + k] * wc[(size_t)c * in + k]);
            double d = fabs((double)g[(size_t)r * out + c] - yc[(size_t)r * out + c]);
            double rel = d / (mag + 1e-30);
            if (rel > worst_gemm)
                worst_gemm = rel;
            if (d > 3e-5 * mag + 1e-30 && bad++ < 3)
                fprintf(stderr, "gemm %dx%dx%d%s [%d][%d]: cuda %.9g cpu %.9g\n", rows, in, out,
                        bias ? " +bias" : "", r, c, g[(size_t)r * out + c],
                        yc[(size_t)r * out + c]);
        }
    CHECK(bad == 0, "gemm rows %d in %d out %d bias %d: %d elements past tolerance", rows, in,
          out, bias, bad);
    free(g);
    pair_free(&x), pair_free(&w), pair_free(&b), pair_free(&y);
}

static void test_gemm(void) {
    const int32_t R_[] = {1, 2, 3, 5, 8, 17, 64, 129};
    const int32_t I_[] = {1, 3, 16, 64, 100, 576, 2048};
    const int32_t O_[] = {1, 7, 32, 257, 1024};
    for (size_t a = 0; a < sizeof R_ / sizeof *R_; a++)
        for (size_t b = 0; b < sizeof I_ / sizeof *I_; b++)
            for (size_t c = 0; c < sizeof O_ / sizeof *O_; c++) {
                if (QUICK && ((a + b + c) % 3 || I_[b] > 576 || O_[c] > 257))
                    continue;
                gemm_case(R_[a], I_[b], O_[c], (a + b + c) % 2 == 0);
            }
    printf("gemm: worst |Δ| / Σ|x·w| = %.3g (tolerance 3e-5)\n", worst_gemm);

    /* Not a check (cuda.h does not promise it): is cuBLAS batch-invariant
     * here? Row 0's outputs alone and as the first of 2 .. 256 rows. */
    const int32_t in = 2048, out = 2048, B[] = {2, 8, 64, 256};
    pair_t x = floats((size_t)256 * in, 1.0f), w = floats((size_t)out * in, 0.05f);
    pair_t y1 = floats((size_t)out, 0.0f), yn = floats((size_t)256 * out, 0.0f);
    sv_error_t err;
    sv_status st;
    GPU->ops->gemm(GPU, 1, in, out, x.g, w.g, NULL, y1.g, &err);
    float *a = fetch(&y1, &st, &err);
    printf("gemm batch invariance (not promised), %dx%d: row 0 alone vs among", in, out);
    for (size_t i = 0; i < sizeof B / sizeof *B; i++) {
        GPU->ops->gemm(GPU, B[i], in, out, x.g, w.g, NULL, yn.g, &err);
        float *b = fetch(&yn, &st, &err);
        int diff = 0;
        for (int32_t c = 0; c < out; c++)
            diff += memcmp(&a[c], &b[c], sizeof(float)) != 0;
        printf(" %d rows: %d differ;", B[i], diff);
        free(b);
    }
    printf(" of %d\n", out);
    free(a);
    pair_free(&x), pair_free(&w), pair_free(&y1), pair_free(&yn);
}

/* ---- rmsnorm, rope, swiglu, add, get_rows ------------------------------------------ */

static void test_rmsnorm(void) {
    const int32_t D[] = {1, 7, 32, 64, 576, 2048, 4097};
    double worst = 0.0;
    for (size_t i = 0; i < sizeof D / sizeof *D; i++)
        for (int32_t rows = 1; rows <= 33; rows += 16) {
            int32_t dim = D[i];
            pair_t x = floats((size_t)rows * dim, 3.0f), w = floats((size_t)dim, 1.0f);
            pair_t y = floats((size_t)rows * dim, 0.0f);
            sv_error_t err;
            sv_status s1 = CPU->ops->rmsnorm(CPU, rows, dim, x.c, w.c, 1e-5f, y.c, &err);
            sv_status s2 = GPU->ops->rmsnorm(GPU, rows, dim, x.g, w.g, 1e-5f, y.g, &err);
            /* in place, too (y == x) */
            sv_status s4 = GPU->ops->rmsnorm(GPU, rows, dim, x.g, w.g, 1e-5f, x.g, &err);
            sv_status s3, s5;
            float *g = fetch(&y, &s3, &err), *gx = fetch(&x, &s5, &err);
            CHECK(!s1 && !s2 && !s3 && !s4 && !s5, "rmsnorm: %s", err.message);
            const float *yc = y.c;
            double mx = 0.0, d = 0.0, dx = 0.0;
            for (size_t k = 0; k < (size_t)rows * dim; k++) {
                mx = fmax(mx, fabs(yc[k]));
                d = fmax(d, fabs((double)g[k] - yc[k]));
                dx = fmax(dx, fabs((double)gx[k] - yc[k]));
            }
            worst = fmax(worst, fmax(d, dx) / mx);
            CHECK(d <= 1e-5 * mx && dx <= 1e-5 * mx,
                  "rmsnorm rows %d dim %d: |Δ| %g (in place %g), max |y| %g", rows, dim, d, dx, mx);
            free(g), free(gx);
            pair_free(&x), pair_free(&w), pair_free(&y);
        }
    printf("rmsnorm: worst |Δ| / max|y| = %.3g (tolerance 1e-5)\n", worst);
}

/* The fused residual add and norm against the CPU's add then rmsnorm: x
 * bit-exact, y to the norm's tolerance; and bit for bit the GPU's own add
 * then rmsnorm (the same float operations in the same order). */
static void test_add_rmsnorm(void) {
    const int32_t D[] = {1, 7, 64, 576, 2048, 4097};
    double worst = 0.0;
    for (size_t i = 0; i < sizeof D / sizeof *D; i++)
        for (int32_t rows = 1; rows <= 33; rows += 16) {
            int32_t dim = D[i];
            size_t n = (size_t)rows * dim;
            pair_t x = floats(n, 3.0f), d = floats(n, 1.0f), w = floats((size_t)dim, 1.0f);
            pair_t y = floats(n, 0.0f), x2, y2 = floats(n, 0.0f);
            pair_alloc(&x2, x.bytes);
            memcpy(x2.c, x.c, x.bytes);
            pair_sync(&x2);
            sv_error_t err;
            sv_status s1 = CPU->ops->add(CPU, n, x.c, d.c, &err);
            sv_status s2 = CPU->ops->rmsnorm(CPU, rows, dim, x.c, w.c, 1e-5f, y.c, &err);
            sv_status s3 = GPU->ops->add_rmsnorm(GPU, rows, dim, x.g, d.g, w.g, 1e-5f, y.g, &err);
            sv_status s4 = GPU->ops->add(GPU, n, x2.g, d.g, &err);
            sv_status s5 = GPU->ops->rmsnorm(GPU, rows, dim, x2.g, w.g, 1e-5f, y2.g, &err);
            sv_status s6, s7, s8, s9;
            float *gx = fetch(&x, &s6, &err), *gy = fetch(&y, &s7, &err);
            float *gx2 = fetch(&x2, &s8, &err), *gy2 = fetch(&y2, &s9, &err);
            CHECK(!s1 && !s2 && !s3 && !s4 && !s5 && !s6 && !s7 && !s8 && !s9, "add_rmsnorm: %s",
                  err.message);
            CHECK(memcmp(gx, x.c, n * sizeof(float)) == 0, "add_rmsnorm rows %d dim %d: x differs",
                  rows, dim);
            CHECK(memcmp(gx, gx2, n * sizeof(float)) == 0 && memcmp(gy, gy2, n * sizeof(float)) == 0,
                  "add_rmsnorm rows %d dim %d: not the GPU's add then rmsnorm bit for bit", rows,
                  dim);
            const float *yc = y.c;
            double mx = 0.0, dd = 0.0;
            for (size_t k = 0; k < n; k++) {
                mx = fmax(mx, fabs(yc[k]));
                dd = fmax(dd, fabs((double)gy[k] - yc[k]));
            }
            worst = fmax(worst, dd / mx);
            CHECK(dd <= 1e-5 * mx, "add_rmsnorm rows %d dim %d: |Δ| %g, max |y| %g", rows, dim, dd,
                  mx);
            free(gx), free(gy), free(gx2), free(gy2);
            pair_free(&x), pair_free(&d), pair_free(&w), pair_free(&y), pair_free(&x2),
                pair_free(&y2);
        }
    printf("add_rmsnorm: x bit-exact, the GPU's add+rmsnorm bit for bit; worst |Δ| / max|y| "
           "against the CPU = %.3g (tolerance 1e-5)\n", worst);
}

static void test_rope(void) {
    struct { int32_t heads, hd, rot; } S[] = {{4, 16, 16}, {32, 64, 64}, {8, 128, 128},
                                              {2, 64, 32}, {3, 80, 20}, {1, 256, 2}};
    double worst = 0.0;
    for (size_t i = 0; i < sizeof S / sizeof *S; i++)
        for (int style = 0; style < 2; style++) {
            int32_t rows = 1 + irand(40), n = rows * S[i].heads * S[i].hd;
            int32_t pos[64];
            for (int32_t r = 0; r < rows; r++)
                pos[r] = r == 0 ? 0 : r == 1 ? 131071 : irand(100000);
            float inv[256];
            for (int32_t k = 0; k < S[i].rot / 2; k++)
                inv[k] = (float)pow(500000.0, -2.0 * k / S[i].rot);
            pair_t x = floats((size_t)n, 2.0f), p = ints(pos, (size_t)rows);
            pair_t f;
            pair_alloc(&f, sizeof inv);
            memcpy(f.c, inv, sizeof inv);
            pair_sync(&f);
            sv_error_t err;
            sv_status s1 = CPU->ops->rope(CPU, rows, S[i].heads, S[i].hd, S[i].rot,
                                          (sv_rope_style)style, p.c, f.c, x.c, &err);
            sv_status s2 = GPU->ops->rope(GPU, rows, S[i].heads, S[i].hd, S[i].rot,
                                          (sv_rope_style)style, p.g, f.g, x.g, &err);
            sv_status s3;
            float *g = fetch(&x, &s3, &err);
            CHECK(!s1 && !s2 && !s3, "rope: %s", err.message);
            const float *xc = x.c;
            double d = 0.0;
            for (int32_t k = 0; k < n; k++)
                d = fmax(d, fabs((double)g[k] - xc[k]) / (fabs(xc[k]) + 1.0));
            worst = fmax(worst, d);
            CHECK(d <= 1e-6, "rope heads %d hd %d rot %d style %d: relative |Δ| %g", S[i].heads,
                  S[i].hd, S[i].rot, style, d);
            free(g);
            pair_free(&x), pair_free(&p), pair_free(&f);
        }
    printf("rope: worst |Δ| / (|x| + 1) = %.3g (tolerance 1e-6)\n", worst);
}

static void test_elementwise(void) {
    const size_t N[] = {1, 31, 1000, 65537, 3000001};
    double wsw = 0.0, wadd = 0.0;
    for (size_t i = 0; i < sizeof N / sizeof *N; i++) {
        size_t n = N[i];
        pair_t a = floats(n, 4.0f), b = floats(n, 1.0f), o = floats(n, 0.0f);
        sv_error_t err;
        sv_status s1 = CPU->ops->swiglu(CPU, n, a.c, b.c, o.c, &err);
        sv_status s2 = GPU->ops->swiglu(GPU, n, a.g, b.g, o.g, &err);
        sv_status s3;
        float *g = fetch(&o, &s3, &err);
        CHECK(!s1 && !s2 && !s3, "swiglu: %s", err.message);
        const float *oc = o.c;
        double d = 0.0;
        for (size_t k = 0; k < n; k++)
            d = fmax(d, fabs((double)g[k] - oc[k]) / (fabs(oc[k]) + 1e-30));
        wsw = fmax(wsw, d);
        CHECK(d <= 1e-6, "swiglu n %zu: relative |Δ| %g", n, d);
        free(g);
        /* add, and swiglu in place (out == gate) */
        s1 = CPU->ops->add(CPU, n, a.c, b.c, &err);
        s2 = GPU->ops->add(GPU, n, a.g, b.g, &err);
        g = fetch(&a, &s3, &err);
        CHECK(!s1 && !s2 && !s3, "add: %s", err.message);
        const float *ac = a.c;
        d = 0.0;
        for (size_t k = 0; k < n; k++)
            d = fmax(d, fabs((double)g[k] - ac[k]));
        wadd = fmax(wadd, d);
        CHECK(d == 0.0, "add n %zu: |Δ| %g (expected exact)", n, d);
        free(g);
        pair_free(&a), pair_free(&b), pair_free(&o);
    }
    printf("swiglu: worst relative |Δ| = %.3g (tolerance 1e-6); add: worst |Δ| = %g (exact)\n",
           wsw, wadd);
}

static void test_get_rows(void) {
    for (int t = 0; t < 6; t++) {
        int32_t n_table = 1 + irand(300), dim = 1 + irand(3000), rows = 1 + irand(70);
        int32_t ids[128];
        for (int32_t r = 0; r < rows; r++)
            ids[r] = irand(n_table);
        ids[0] = n_table - 1;
        pair_t tab = floats((size_t)n_table * dim, 1.0f), id = ints(ids, (size_t)rows);
        pair_t o = floats((size_t)rows * dim, 0.0f);
        sv_error_t err;
        sv_status s1 = CPU->ops->get_rows(CPU, rows, dim, n_table, tab.c, id.c, o.c, &err);
        sv_status s2 = GPU->ops->get_rows(GPU, rows, dim, n_table, tab.g, id.g, o.g, &err);
        sv_status s3;
        float *g = fetch(&o, &s3, &err);
        CHECK(!s1 && !s2 && !s3, "get_rows: %s", err.message);
        CHECK(memcmp(g, o.c, (size_t)rows * dim * sizeof(float)) == 0,
              "get_rows rows %d dim %d: not bit-exact", rows, dim);
        free(g);
        /* A bad id: SV_ERR_ARG at the next synchronisation, then working again. */
        ids[rows - 1] = n_table;
        pair_t bad = ints(ids, (size_t)rows);
        s2 = GPU->ops->get_rows(GPU, rows, dim, n_table, tab.g, bad.g, o.g, &err);
        s3 = sv_cuda_sync(GPU, &err);
        CHECK(!s2 && s3 == SV_ERR_ARG && strstr(err.message, "get_rows"),
              "get_rows with id %d of %d: launch %d, sync %d (%s)", n_table, n_table, s2, s3,
              err.message);
        CHECK(sv_cuda_sync(GPU, &err) == SV_OK, "the flag is not reset: %s", err.message);
        pair_free(&tab), pair_free(&id), pair_free(&o), pair_free(&bad);
    }
    printf("get_rows: bit-exact; a bad id is SV_ERR_ARG at sync\n");
}

/* ---- bf16 products (bf16 mode) ---------------------------------------------------- */

#define GEMV_ROWS 8 /* kernels/kernels.h's SV_K_GEMV_MAX_ROWS */

/* SV_TEST_NO_BLAS_BF16=1 (check.sh, under racecheck only): the bf16
 * products keep to the matrix-vector kernel's rows, since racecheck
 * reports hazards inside cuBLAS's own bf16 kernels; the run says so. */
static bool no_blas_bf16(void) {
    const char *v = getenv("SV_TEST_NO_BLAS_BF16");
    return v && *v == '1';
}

/* Downloads n floats of device p into a new host array. */
static float *grab(sv_backend_t *B, const void *p, size_t n, sv_status *st, sv_error_t *err) {
    float *h = malloc(n * sizeof(float));
    *st = B->ops->download(B, h, p, n * sizeof(float), err);
    return h;
}

/* gemm_q_n (three products, one without bias) and gemm_q_swiglu on
 * backend B against gemm_q, gemm_q, gemm_q and gemm_q, gemm_q, swiglu; then
 * a product of the fused SwiGLU's output (its bf16 rounding kept by the
 * backend) against the same product after the rounding is recomputed. */
static void fused_checks(sv_backend_t *B, int32_t in, int32_t out, void *xg, void *wg, void *bg,
                         int *n_cases) {
    const int32_t Rw[] = {1, 4, 8, 9};
    const size_t n_rw = no_blas_bf16() ? 3 : sizeof Rw / sizeof *Rw;
    sv_error_t err;
    int32_t half = out / 2 > 0 ? out / 2 : 1;
    size_t ny = (size_t)9 * (out > in ? out : in);
    void *y[9] = {0}, *w2 = NULL, *w3 = NULL;
    uint16_t *w2h = malloc((size_t)out * in * 2), *w3h = malloc((size_t)in * out * 2);
    for (size_t i = 0; i < (size_t)out * in; i++)
        w2h[i] = sv_f32_to_bf16(nrand() * 0.05f), w3h[i] = sv_f32_to_bf16(nrand() * 0.05f);
    for (int i = 0; i < 9; i++)
        if (B->ops->alloc(B, ny * sizeof(float), &y[i], &err))
            goto out;
    if (B->ops->alloc(B, (size_t)out * in * 2, &w2, &err) ||
        B->ops->alloc(B, (size_t)in * out * 2, &w3, &err) ||
        B->ops->upload(B, w2, w2h, (size_t)out * in * 2, &err) ||
        B->ops->upload(B, w3, w3h, (size_t)in * out * 2, &err))
        goto out;
    for (size_t ri = 0; ri < n_rw; ri++) {
        int32_t rows = Rw[ri];
        const int32_t outs[3] = {out, half, out};
        const void *ws[3] = {wg, wg, w2};
        const float *bs[3] = {bg, NULL, bg};
        float *ys[3] = {y[0], y[1], y[2]};
        sv_status st = B->ops->gemm_q_n(B, rows, in, 3, outs, xg, ws, SV_QT_BF16, bs, ys, &err);
        for (int k = 0; !st && k < 3; k++)
            st = B->ops->gemm_q(B, rows, in, outs[k], xg, ws[k], SV_QT_BF16, bs[k], y[3 + k],
                                &err);
        bool same = true;
        for (int k = 0; !st && k < 3; k++) {
            sv_status s1, s2;
            size_t n = (size_t)rows * outs[k];
            float *a = grab(B, y[k], n, &s1, &err), *b = grab(B, y[3 + k], n, &s2, &err);
            st = s1 ? s1 : s2;
            same = same && !st && memcmp(a, b, n * sizeof(float)) == 0;
            free(a), free(b);
        }
        CHECK(!st && same, "gemm_q_n rows %d in %d out %d: %s", rows, in, out,
              st ? err.message : "differs from its gemm_q calls");
        /* gate = y[0], up scratch y[1]; the unfused: y[3], y[4], swiglu into y[3]. */
        st = B->ops->gemm_q_swiglu(B, rows, in, out, xg, wg, w2, SV_QT_BF16, y[0], y[1], &err);
        /* the fused output's product, its rounding as the fused kernel left it */
        if (!st)
            st = B->ops->gemm_q(B, rows, out, in, y[0], w3, SV_QT_BF16, NULL, y[6], &err);
        if (!st)
            st = B->ops->gemm_q(B, rows, in, out, xg, wg, SV_QT_BF16, NULL, y[3], &err);
        if (!st)
            st = B->ops->gemm_q(B, rows, in, out, xg, w2, SV_QT_BF16, NULL, y[4], &err);
        if (!st)
            st = B->ops->swiglu(B, (size_t)rows * out, y[3], y[4], y[3], &err);
        /* the same product with the rounding recomputed (another op ran since) */
        if (!st)
            st = B->ops->add(B, 1, y[8], y[8], &err);
        if (!st)
            st = B->ops->gemm_q(B, rows, out, in, y[0], w3, SV_QT_BF16, NULL, y[7], &err);
        sv_status s1 = SV_OK, s2 = SV_OK, s3 = SV_OK, s4 = SV_OK;
        size_t n = (size_t)rows * out, n2 = (size_t)rows * in;
        float *a = grab(B, y[0], n, &s1, &err), *b = grab(B, y[3], n, &s2, &err);
        float *c = grab(B, y[6], n2, &s3, &err), *d = grab(B, y[7], n2, &s4, &err);
        CHECK(!st && !s1 && !s2 && !s3 && !s4 && memcmp(a, b, n * sizeof(float)) == 0 &&
                  memcmp(c, d, n2 * sizeof(float)) == 0,
              "gemm_q_swiglu rows %d in %d out %d: %s", rows, in, out,
              st || s1 || s2 || s3 || s4 ? err.message
              : memcmp(a, b, n * sizeof(float)) ? "differs from gemm_q, gemm_q, swiglu"
                                                 : "its output's kept rounding differs");
        free(a), free(b), free(c), free(d);
        ++*n_cases;
    }
out:
    for (int i = 0; i < 9; i++)
        B->ops->free(B, y[i]);
    B->ops->free(B, w2), B->ops->free(B, w3);
    free(w2h), free(w3h);
}

/* gemm_q with bf16 weights on a bf16-mode backend: at most 8 rows run
 * kernels/gemv.cu, more run cuBLAS. Both against a double-precision sum
 * of the same bf16-rounded inputs; and the matrix-vector kernel's rows
 * bit for bit the same whatever rows share the call. */
static void test_gemm_bf16(void) {
    sv_cuda_config_t bc = {.device = 0, .bf16 = true};
    sv_backend_t *B = NULL;
    sv_error_t err;
    if (sv_cuda_backend_create(&bc, &B, &err)) {
        CHECK(0, "bf16 backend: %s", err.message);
        return;
    }
    /* (2048, 96): 4 warps an output (kernels/gemv.cu), in the quick run too */
    struct { int32_t in, out; } S[] = {{64, 40}, {2048, 96}, {576, 576}, {136, 1000}, {8192, 96}};
    const int32_t Rw[] = {1, 2, 3, 5, 8, 9, 17};
    const size_t n_rw = no_blas_bf16() ? 5 : sizeof Rw / sizeof *Rw;
    if (no_blas_bf16())
        printf("bf16 gemm_q: SKIPPED the cuBLAS cases (rows 9 and 17, and the fused ops' "
               "fallback at 9 rows): SV_TEST_NO_BLAS_BF16=1 (check.sh's racecheck)\n");
    double worst = 0.0;
    int cases = 0, inv = 0, fused = 0;
    for (size_t si = 0; si < sizeof S / sizeof *S; si++) {
        int32_t in = S[si].in, out = S[si].out, maxr = 17;
        size_t nw = (size_t)in * out, nx = (size_t)maxr * in;
        uint16_t *wh = malloc(nw * 2);
        float *xh = malloc(nx * 4), *bh = malloc((size_t)out * 4), *y1 = NULL;
        for (size_t i = 0; i < nw; i++)
            wh[i] = sv_f32_to_bf16(nrand() * 0.05f);
        for (size_t i = 0; i < nx; i++)
            xh[i] = nrand();
        for (int32_t i = 0; i < out; i++)
            bh[i] = nrand();
        void *wg = NULL, *xg = NULL, *bg = NULL, *yg = NULL;
        if (B->ops->alloc(B, nw * 2, &wg, &err) || B->ops->alloc(B, nx * 4, &xg, &err) ||
            B->ops->alloc(B, (size_t)out * 4, &bg, &err) ||
            B->ops->alloc(B, (size_t)maxr * out * 4, &yg, &err) ||
            B->ops->upload(B, wg, wh, nw * 2, &err) || B->ops->upload(B, xg, xh, nx * 4, &err) ||
            B->ops->upload(B, bg, bh, (size_t)out * 4, &err)) {
            CHECK(0, "bf16 gemm setup: %s", err.message);
            break;
        }
        float *y = malloc((size_t)maxr * out * 4);
        for (size_t ri = 0; ri < n_rw; ri++) {
            int32_t rows = Rw[ri];
            bool bias = ri % 2 == 1;
            sv_status st = B->ops->gemm_q(B, rows, in, out, xg, wg, SV_QT_BF16, bias ? bg : NULL,
                                          yg, &err);
            if (!st)
                st = B->ops->download(B, y, yg, (size_t)rows * out * 4, &err);
            CHECK(!st, "bf16 gemm rows %d in %d out %d: %s", rows, in, out, err.message);
            if (st)
                continue;
            double dmax = 0.0;
            for (int32_t r = 0; r < rows; r++)
                for (int32_t o = 0; o < out; o++) {
                    double sum = 0.0, mag = 0.0;
                    for (int32_t i = 0; i < in; i++) {
                        double t = (double)sv_bf16_to_f32(sv_f32_to_bf16(xh[(size_t)r * in + i])) *
                                   sv_bf16_to_f32(wh[(size_t)o * in + i]);
                        sum += t, mag += fabs(t);
                    }
                    if (bias)
                        sum += bh[o], mag += fabs(bh[o]);
                    dmax = fmax(dmax, fabs(y[(size_t)r * out + o] - sum) / (mag + 1e-3));
                }
            worst = fmax(worst, dmax);
            CHECK(dmax <= 5e-5, "bf16 gemm rows %d in %d out %d: |Δ| / Σ|x·w| = %g", rows, in,
                  out, dmax);
            cases++;
            /* Row 0 of a matrix-vector call is the one-row call's, bit for bit. */
            if (rows == 1 && !bias) {
                free(y1);
                y1 = malloc((size_t)out * 4);
                memcpy(y1, y, (size_t)out * 4);
            } else if (rows <= GEMV_ROWS && !bias && y1) {
                CHECK(memcmp(y, y1, (size_t)out * 4) == 0,
                      "gemv rows %d in %d out %d: row 0 differs from the one-row product", rows,
                      in, out);
                inv++;
            }
        }
        /* The fused products against the calls they stand for, bit for bit. */
        fused_checks(B, in, out, xg, wg, bg, &fused);
        free(y), free(y1), free(wh), free(xh), free(bh);
        B->ops->free(B, wg), B->ops->free(B, xg), B->ops->free(B, bg), B->ops->free(B, yg);
        if (QUICK && si >= 2)
            break;
    }
    sv_backend_destroy(B);
    printf("bf16 gemm_q: %d cases (matrix-vector kernel up to %d rows, cuBLAS past), worst |Δ| / "
           "Σ|x·w| = %.3g (tolerance 5e-5); %d batch-invariance checks bit-exact; gemm_q_n "
           "and gemm_q_swiglu bit for bit their unfused calls in %d cases\n",
           cases, GEMV_ROWS, worst, inv, fused);
}

/* ---- kv_write and attention over paged views ------------------------------------- */

/* One ragged batch: n_seqs sequences, sequence s with len[s] positions of
 * which the last new[s] are this call's rows, in shuffled blocks of bs. */
static double worst_attn, worst_split, worst_rkw;
static int n_split_cases, n_rkw;

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* full: a sequence's rows may be its whole prompt (else at most 9 rows). */
static void attn_case(int32_t n_seqs, int32_t max_len, int32_t bs, int32_t n_heads,
                      int32_t n_kv, int32_t hd, bool paged, bool full) {
    if (!paged)
        n_seqs = 1;
    int32_t len[64], nnew[64], rows = 0, n_tab = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        len[s] = 1 + irand(max_len);
        int32_t k = full && irand(3) == 0 ? len[s] : 1 + irand(len[s] < 9 ? len[s] : 9);
        nnew[s] = k;
        rows += k;
        n_tab += (len[s] + bs - 1) / bs;
    }
    int32_t n_blocks = n_tab + 3, capacity = paged ? n_blocks * bs : max_len;
    int32_t kv_dim = n_kv * hd, q_dim = n_heads * hd;
    /* physical blocks shuffled */
    int32_t *perm = malloc((size_t)n_blocks * sizeof *perm);
    for (int32_t i = 0; i < n_blocks; i++)
        perm[i] = i;
    for (int32_t i = n_blocks - 1; i > 0; i--) {
        int32_t j = irand(i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int32_t *tables = malloc((size_t)(n_tab + 1) * sizeof *tables);
    int32_t off[65], *seq_of = malloc((size_t)rows * sizeof *seq_of);
    int32_t *pos = malloc((size_t)rows * sizeof *pos);
    int32_t t = 0, r = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        off[s] = t;
        for (int32_t b = 0; paged && b < (len[s] + bs - 1) / bs; b++, t++)
            tables[t] = perm[t];
        for (int32_t p = len[s] - nnew[s]; p < len[s]; p++) {
            seq_of[r] = s;
            pos[r++] = p;
        }
    }
    off[n_seqs] = t;
    /* Rows in a shuffled order: attention must not care. */
    for (int32_t i = rows - 1; i > 0; i--) {
        int32_t j = irand(i + 1), a = seq_of[i], b = pos[i];
        seq_of[i] = seq_of[j], pos[i] = pos[j];
        seq_of[j] = a, pos[j] = b;
    }
    pair_t kc = floats((size_t)capacity * kv_dim, 1.0f);
    pair_t vc = floats((size_t)capacity * kv_dim, 1.0f);
    pair_t k = floats((size_t)rows * kv_dim, 1.0f), v = floats((size_t)rows * kv_dim, 1.0f);
    pair_t q = floats((size_t)rows * q_dim, 1.0f), o = floats((size_t)rows * q_dim, 0.0f);
    pair_t P = ints(pos, (size_t)rows), SQ = ints(seq_of, (size_t)rows);
    pair_t OFF = ints(off, (size_t)n_seqs + 1), TAB = ints(tables, (size_t)n_tab);
    sv_kv_view_t vcpu = {kc.c, vc.c, capacity, kv_dim, 0, 0, NULL, NULL, NULL};
    sv_kv_view_t vgpu = {kc.g, vc.g, capacity, kv_dim, 0, 0, NULL, NULL, NULL};
    if (paged) {
        vcpu = (sv_kv_view_t){kc.c, vc.c, capacity, kv_dim, bs, n_seqs, SQ.c, OFF.c, TAB.c};
        vgpu = (sv_kv_view_t){kc.g, vc.g, capacity, kv_dim, bs, n_seqs, SQ.g, OFF.g, TAB.g};
    }
    sv_attn_shape_t sh = {n_heads, n_kv, hd, 1.0f / sqrtf((float)hd), 0, 0};
    int32_t max_pos = 0;
    for (int32_t i = 0; i < rows; i++)
        max_pos = pos[i] > max_pos ? pos[i] : max_pos;
    sv_error_t err;
    sv_status s1 = CPU->ops->kv_write(CPU, &vcpu, rows, P.c, k.c, v.c, &err);
    sv_status s2 = GPU->ops->kv_write(GPU, &vgpu, rows, P.g, k.g, v.g, &err);
    sv_status s3 = CPU->ops->attention(CPU, &vcpu, &sh, rows, P.c, q.c, o.c, &err);
    sv_status s4 = GPU->ops->attention(GPU, &vgpu, &sh, rows, P.g, q.g, o.g, &err);
    sv_status s5, s6, s7;
    float *gk = fetch(&kc, &s5, &err), *gv = fetch(&vc, &s6, &err), *go = fetch(&o, &s7, &err);
    CHECK(!s1 && !s2 && !s3 && !s4 && !s5 && !s6 && !s7, "attention case: %s", err.message);
    CHECK(memcmp(gk, kc.c, kc.bytes) == 0 && memcmp(gv, vc.c, vc.bytes) == 0,
          "kv_write (%d seqs, %d rows, bs %d, paged %d): caches differ", n_seqs, rows, bs, paged);
    const float *oc = o.c, *vh = vc.c;
    double vmax = 0.0;
    for (size_t i = 0; i < (size_t)capacity * kv_dim; i++)
        vmax = fmax(vmax, fabs(vh[i]));
    double d = max_abs_diff(go, oc, (size_t)rows * q_dim);
    worst_attn = fmax(worst_attn, d / vmax);
    CHECK(d <= 1e-4 * vmax,
          "attention (%d seqs, %d rows, max len %d, bs %d, heads %d/%d, hd %d, paged %d): "
          "|Δ| %g, max |v| %g",
          n_seqs, rows, max_len, bs, n_heads, n_kv, hd, paged, d, vmax);
    free(gk), free(gv), free(go);

    /* The fused RoPE + KV write against the CPU's rope, rope and kv_write:
     * fresh q and k, the caches as they are now, half the cases rotating
     * only part of each head. */
    {
        int32_t rot = irand(2) ? hd : 2 * (1 + irand(hd / 2));
        sv_rope_style style = (sv_rope_style)irand(2);
        float inv[256]; /* head_dim <= 512 (kernels/kernels.h) */
        for (int32_t i = 0; i < rot / 2; i++)
            inv[i] = (float)pow(10000.0, -2.0 * i / rot);
        pair_t F;
        pair_alloc(&F, sizeof inv);
        memcpy(F.c, inv, sizeof inv);
        pair_sync(&F);
        pair_t q2 = floats((size_t)rows * q_dim, 1.0f), k2 = floats((size_t)rows * kv_dim, 1.0f);
        pair_t kc2, vc2;
        pair_alloc(&kc2, kc.bytes), pair_alloc(&vc2, vc.bytes);
        memcpy(kc2.c, kc.c, kc.bytes), memcpy(vc2.c, vc.c, vc.bytes);
        pair_sync(&kc2), pair_sync(&vc2);
        sv_kv_view_t wc = vcpu, wg = vgpu;
        wc.k = kc2.c, wc.v = vc2.c, wg.k = kc2.g, wg.v = vc2.g;
        s1 = CPU->ops->rope(CPU, rows, n_heads, hd, rot, style, P.c, F.c, q2.c, &err);
        s2 = CPU->ops->rope(CPU, rows, n_kv, hd, rot, style, P.c, F.c, k2.c, &err);
        s3 = CPU->ops->kv_write(CPU, &wc, rows, P.c, k2.c, v.c, &err);
        s4 = GPU->ops->rope_kv_write(GPU, &wg, &sh, rows, rot, style, P.g, F.g, q2.g, k2.g, v.g,
                                     &err);
        sv_status t1, t2, t3, t4;
        float *gq = fetch(&q2, &t1, &err), *gk2 = fetch(&k2, &t2, &err);
        float *gkc = fetch(&kc2, &t3, &err), *gvc = fetch(&vc2, &t4, &err);
        CHECK(!s1 && !s2 && !s3 && !s4 && !t1 && !t2 && !t3 && !t4, "rope_kv_write: %s",
              err.message);
        double dq = 0.0;
        const float *qc = q2.c, *kc2c = k2.c, *kcc = kc2.c;
        for (size_t i = 0; i < (size_t)rows * q_dim; i++)
            dq = fmax(dq, fabs((double)gq[i] - qc[i]) / (fabs(qc[i]) + 1.0));
        for (size_t i = 0; i < (size_t)rows * kv_dim; i++)
            dq = fmax(dq, fabs((double)gk2[i] - kc2c[i]) / (fabs(kc2c[i]) + 1.0));
        for (size_t i = 0; i < (size_t)capacity * kv_dim; i++)
            dq = fmax(dq, fabs((double)gkc[i] - kcc[i]) / (fabs(kcc[i]) + 1.0));
        worst_rkw = fmax(worst_rkw, dq);
        CHECK(dq <= 1e-6 && memcmp(gvc, vc2.c, vc2.bytes) == 0,
              "rope_kv_write (%d rows, heads %d/%d, hd %d, rot %d, style %d, paged %d): "
              "relative |Δ| %g, values %s",
              rows, n_heads, n_kv, hd, rot, (int)style, paged, dq,
              memcmp(gvc, vc2.c, vc2.bytes) ? "differ" : "equal");
        n_rkw++;
        free(gq), free(gk2), free(gkc), free(gvc);
        pair_free(&F), pair_free(&q2), pair_free(&k2), pair_free(&kc2), pair_free(&vc2);
    }

    /* Split-K: the same rows with their contexts bounded (max_ctx), exact
     * and loose; contexts past one split (kernels/attention.cu, 128
     * positions) take several blocks and the combine. */
    for (int32_t extra = 0; extra <= 200; extra += 200) {
        sv_attn_shape_t shs = sh;
        shs.max_ctx = max_pos + 1 + extra;
        s4 = GPU->ops->attention(GPU, &vgpu, &shs, rows, P.g, q.g, o.g, &err);
        go = fetch(&o, &s7, &err);
        CHECK(!s4 && !s7, "split attention: %s", err.message);
        d = max_abs_diff(go, oc, (size_t)rows * q_dim);
        worst_split = fmax(worst_split, d / vmax);
        CHECK(d <= 1e-4 * vmax,
              "split attention (%d seqs, %d rows, max pos %d, max_ctx %d, heads %d/%d, hd %d): "
              "|Δ| %g, max |v| %g",
              n_seqs, rows, max_pos, shs.max_ctx, n_heads, n_kv, hd, d, vmax);
        free(go);
        n_split_cases += max_pos >= 128;
    }
    /* A bound that leaves a row too few splits: SV_ERR_ARG at the sync. */
    if (max_pos >= 256) {
        sv_attn_shape_t shb = sh;
        shb.max_ctx = 129;
        s4 = GPU->ops->attention(GPU, &vgpu, &shb, rows, P.g, q.g, o.g, &err);
        s5 = sv_cuda_sync(GPU, &err);
        CHECK(!s4 && s5 == SV_ERR_ARG, "attention past max_ctx: %d %d", s4, s5);
        CHECK(sv_cuda_sync(GPU, &err) == SV_OK, "flag not reset: %s", err.message);
    }

    /* A position past its table: SV_ERR_ARG at the next sync, for each op. */
    if (paged) {
        int32_t s0 = seq_of[0], saved = pos[0];
        pos[0] = (off[s0 + 1] - off[s0]) * bs; /* one past the table */
        pair_t BAD = ints(pos, (size_t)rows);
        s2 = GPU->ops->kv_write(GPU, &vgpu, rows, BAD.g, k.g, v.g, &err);
        s5 = sv_cuda_sync(GPU, &err);
        CHECK(!s2 && s5 == SV_ERR_ARG, "kv_write past the table: %d %d", s2, s5);
        s2 = GPU->ops->rope_kv_write(GPU, &vgpu, &sh, rows, 0, SV_ROPE_NEOX, BAD.g, NULL, q.g,
                                     k.g, v.g, &err);
        s5 = sv_cuda_sync(GPU, &err);
        CHECK(!s2 && s5 == SV_ERR_ARG, "rope_kv_write past the table: %d %d", s2, s5);
        s4 = GPU->ops->attention(GPU, &vgpu, &sh, rows, BAD.g, q.g, o.g, &err);
        s5 = sv_cuda_sync(GPU, &err);
        CHECK(!s4 && s5 == SV_ERR_ARG, "attention past the table: %d %d", s4, s5);
        pos[0] = saved;
        pair_free(&BAD);
        /* A table entry outside the cache. */
        int32_t keep = tables[0];
        tables[0] = n_blocks;
        pair_t BT = ints(tables, (size_t)n_tab);
        sv_kv_view_t vb = vgpu;
        vb.tables = BT.g;
        s4 = GPU->ops->attention(GPU, &vb, &sh, rows, P.g, q.g, o.g, &err);
        s5 = sv_cuda_sync(GPU, &err);
        CHECK(!s4 && s5 == SV_ERR_ARG, "attention with a block outside the cache: %d %d", s4, s5);
        tables[0] = keep;
        pair_free(&BT);
        CHECK(sv_cuda_sync(GPU, &err) == SV_OK, "flag not reset: %s", err.message);
    }
    pair_free(&kc), pair_free(&vc), pair_free(&k), pair_free(&v), pair_free(&q), pair_free(&o);
    pair_free(&P), pair_free(&SQ), pair_free(&OFF), pair_free(&TAB);
    free(perm), free(tables), free(seq_of), free(pos);
}

static void test_attention(void) {
    struct { int32_t heads, kv, hd; } S[] = {{4, 2, 16}, {32, 8, 64}, {8, 8, 128}, {12, 4, 64},
                                              {16, 2, 128}, {2, 1, 256}, {4, 4, 80}, {14, 2, 64},
                                              {8, 1, 512}};
    int n = 0;
    for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
        attn_case(1, 40, 16, S[i].heads, S[i].kv, S[i].hd, false, true);
        attn_case(1 + irand(6), 100, 1 + irand(20), S[i].heads, S[i].kv, S[i].hd, true, true);
        n += 2;
        if (i == 0 || i == 3) { /* past two splits, decode-like rows */
            attn_case(2 + irand(3), 400, 1 + irand(20), S[i].heads, S[i].kv, S[i].hd, true, false);
            n++;
        }
        if (QUICK) /* short contexts only */
            continue;
        attn_case(1 + irand(12), 300, 1 + irand(20), S[i].heads, S[i].kv, S[i].hd, true, true);
        n++;
        if (S[i].hd <= 128) { /* long contexts, decode-like rows */
            attn_case(3, 4000, 16, S[i].heads, S[i].kv, S[i].hd, true, false);
            n++;
        }
    }
    printf("kv_write: bit-exact; attention: %d ragged/paged cases, worst |Δ| / max|v| = %.3g "
           "(tolerance 1e-4); split-K (max_ctx given; %d cases past one split): %.3g; "
           "rope_kv_write: %d cases, worst relative |Δ| %.3g (tolerance 1e-6), values bit-exact; "
           "bad positions, blocks and bounds are SV_ERR_ARG at sync\n",
           n, worst_attn, n_split_cases, worst_split, n_rkw, worst_rkw);
    CHECK(n_split_cases > 0, "no attention case was long enough to split");
}

static void test_errors(void) {
    void *p = NULL;
    sv_error_t err;
    sv_status st = GPU->ops->alloc(GPU, (size_t)1 << 52, &p, &err);
    CHECK(st == SV_ERR_NOMEM && p == NULL, "a 4 PB allocation: status %d (%s)", st, err.message);
    /* Still usable afterwards. */
    st = GPU->ops->alloc(GPU, 1024, &p, &err);
    CHECK(st == SV_OK, "a small allocation after the failed one: %s", err.message);
    GPU->ops->free(GPU, p);
    float dummy = 0;
    st = GPU->ops->gemm(GPU, -1, 4, 4, &dummy, &dummy, NULL, &dummy, &err);
    CHECK(st == SV_ERR_ARG, "gemm with rows -1: %d", st);
    printf("errors: SV_ERR_NOMEM for a 4 PB allocation; bad shapes SV_ERR_ARG\n");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the log even if a step is killed */
    QUICK = argc > 1 && strcmp(argv[1], "--quick") == 0;
    sv_rng_seed(&R, 12345);
    sv_error_t err;
    if (sv_cuda_device_count() < 1) {
        fprintf(stderr, "test_kernels: no CUDA device\n");
        return 2;
    }
    sv_cpu_config_t cc = {.n_threads = 4};
    if (sv_cpu_backend_create(&cc, &CPU, &err) || sv_cuda_backend_create(NULL, &GPU, &err)) {
        fprintf(stderr, "test_kernels: %s\n", err.message);
        return 1;
    }
    char name[256];
    size_t fr, tot;
    if (!sv_cuda_device_info(GPU, name, sizeof name, &fr, &tot, &err))
        printf("device: %s, %.1f of %.1f GiB free\n", name, fr / 1073741824.0, tot / 1073741824.0);
    test_errors();
    test_get_rows();
    test_elementwise();
    test_rmsnorm();
    test_add_rmsnorm();
    test_rope();
    test_gemm();
    test_gemm_bf16();
    test_attention();
    sv_backend_destroy(GPU);
    sv_backend_destroy(CPU);
    return test_summary("test_kernels: the CUDA backend against the CPU backend");
}
