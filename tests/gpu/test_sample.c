/* test_sample.c — the mask+sample kernel against the CPU sampler.
 *
 *     test_sample [--quick]     (--quick: vocabularies up to 1000, 1024 draws)
 *
 * The reference is src/engine/sample.c: sv_sampler_sample for greedy rows
 * and logprobs, sv_sampler_probs for the distribution a sampling row draws
 * from. Checks:
 * - greedy (temperature 0): the same id as the CPU, exactly, on random,
 *   tied (quantised) and masked rows; the same top-logprob ids in the same
 *   order, logprobs within 1e-5;
 * - errors per row: a mask allowing nothing (or only -inf logits) is
 *   SV_ERR_EMPTY, an allowed NaN or +inf is SV_ERR_ARG, a NaN the mask
 *   forbids is harmless, a mask slot outside the table is SV_ERR_ARG;
 * - sampling, for each parameter set (temperature, top-k, top-p, min-p and
 *   their combinations, on rows with ties and masks), over N draws:
 *   (a) support: at most 0.2% of draws (rounding at a truncation
 *       boundary) land on a token the CPU gives probability 0;
 *   (b) per draw: the kernel's token is the first id at which the CPU's
 *       cumulative probability (id order) passes u, for at least 99.5% of
 *       draws (they differ only where rounding moves a boundary);
 *   (c) frequencies: Pearson's chi-square over the tokens with expected
 *       count >= 5 (the rest pooled) below df + 6 sqrt(2 df);
 * - the mask table: rows naming different slots in one launch each get
 *   their own mask; a key already in the table gets its slot back; when
 *   every slot is used by the current step a new key is SV_ERR_BUDGET.
 * Exits 1 on any failure, 2 when no CUDA device is present. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/backend/cuda.h"
#include "src/engine/sample.h"
#include "util/rng.h"
#include "tests/unit/test.h"

static sv_backend_t *GPU;
static sv_rng_t R;
static bool QUICK;

#define COPIES 256 /* rows of one launch in the sampling tests */

static double urand(void) { return (double)(sv_rng_next(&R) >> 11) * 0x1.0p-53; }
static float nrand(void) {
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += urand() * 2.0 - 1.0;
    return (float)(s * 0.8660254);
}

/* A row of logits: N(0, sd), rounded to multiples of q when q > 0 (ties),
 * with a fraction ninf of -inf. */
static void make_row(float *l, int32_t V, float sd, float q, double ninf) {
    for (int32_t i = 0; i < V; i++) {
        float x = nrand() * sd;
        if (q > 0)
            x = roundf(x / q) * q;
        l[i] = urand() < ninf ? -INFINITY : x;
    }
}

/* A mask allowing each token with probability density (at least one). */
static void make_mask(uint32_t *m, int32_t V, double density) {
    int32_t words = (V + 31) / 32;
    memset(m, 0, (size_t)words * 4);
    for (int32_t i = 0; i < V; i++)
        if (urand() < density)
            m[i >> 5] |= 1u << (i & 31);
    int32_t one = (int32_t)(urand() * V);
    m[one >> 5] |= 1u << (one & 31);
}

typedef struct ctx {
    int32_t V;
    sv_cuda_sampler_t *smp;
    float *d_logits; /* device (COPIES, V) */
    float *h_rows;   /* host (COPIES, V) */
} ctx_t;

static bool ctx_init(ctx_t *c, int32_t V) {
    sv_error_t err;
    c->V = V;
    c->h_rows = malloc((size_t)COPIES * V * sizeof(float));
    if (sv_cuda_sampler_create(GPU, COPIES, V, 8, &c->smp, &err) ||
        GPU->ops->alloc(GPU, (size_t)COPIES * V * sizeof(float), (void **)&c->d_logits, &err)) {
        fprintf(stderr, "sampler for vocab %d: %s\n", V, err.message);
        return false;
    }
    return true;
}

static void ctx_free(ctx_t *c) {
    sv_cuda_sampler_destroy(c->smp);
    GPU->ops->free(GPU, c->d_logits);
    free(c->h_rows);
}

/* Uploads rows (n, V) of host logits. */
static bool put_rows(ctx_t *c, const float *rows, int32_t n) {
    sv_error_t err;
    if (GPU->ops->upload(GPU, c->d_logits, rows, (size_t)n * c->V * sizeof(float), &err)) {
        fprintf(stderr, "upload: %s\n", err.message);
        return false;
    }
    return true;
}

static sv_cuda_sample_params_t gparams(const sv_sample_params_t *p, int32_t mask, uint64_t draw) {
    sv_cuda_sample_params_t g = {p->temperature, p->top_p, p->min_p, p->top_k, p->n_logprobs,
                                 mask, draw};
    return g;
}

/* ---- greedy and logprobs ------------------------------------------------------------ */

static void test_greedy(ctx_t *c, float sd, float q, double ninf, double density) {
    int32_t V = c->V, words = (V + 31) / 32, n = QUICK ? 16 : 64;
    uint32_t *mask = malloc((size_t)words * 4);
    int32_t slot = -1;
    sv_error_t err;
    bool masked = density < 1.0;
    if (masked) {
        make_mask(mask, V, density);
        sv_cuda_sampler_begin_step(c->smp);
        CHECK(!sv_cuda_sampler_mask_slot(c->smp, 0, sv_rng_next(&R), mask, &slot, &err), "slot: %s",
              err.message);
    }
    for (int32_t r = 0; r < n; r++) {
        make_row(c->h_rows + (size_t)r * V, V, sd, q, ninf);
        /* at least one allowed finite logit, so the row has an answer */
        for (int32_t i = 0; i < V; i++)
            if (!masked || (mask[i >> 5] >> (i & 31) & 1)) {
                c->h_rows[(size_t)r * V + i] = 0.5f;
                break;
            }
    }
    if (!put_rows(c, c->h_rows, n))
        return;
    sv_sample_params_t p = sv_sample_params_default();
    p.temperature = 0.0f;
    p.n_logprobs = 20;
    sv_cuda_sample_params_t gp[COPIES];
    sv_cuda_sample_out_t go[COPIES];
    for (int32_t r = 0; r < n; r++)
        gp[r] = gparams(&p, slot, 0);
    sv_status st = sv_cuda_sample(c->smp, n, c->d_logits, gp, go, &err);
    CHECK(!st, "greedy launch: %s", err.message);
    sv_sampler_t *cs;
    if (st || sv_sampler_create((uint32_t)V, &p, &cs, &err)) {
        free(mask);
        return;
    }
    float *tmp = malloc((size_t)V * sizeof(float));
    int bad = 0;
    for (int32_t r = 0; r < n; r++) {
        memcpy(tmp, c->h_rows + (size_t)r * V, (size_t)V * sizeof(float));
        int32_t id;
        sv_logprobs_t lp;
        st = sv_sampler_sample(cs, tmp, masked ? mask : NULL, &id, &lp, &err);
        bool ok = !st && go[r].status == SV_OK && go[r].id == id && go[r].n_top == lp.n_top &&
                  fabsf(go[r].logprob - lp.logprob) <= 1e-5f;
        for (int t = 0; ok && t < lp.n_top; t++)
            ok = go[r].top_id[t] == lp.top[t].id &&
                 fabsf(go[r].top_logprob[t] - lp.top[t].logprob) <= 1e-5f;
        if (!ok && bad++ < 3)
            fprintf(stderr,
                    "greedy V %d row %d: cuda id %d (status %d, lp %g, %d top) cpu id %d (lp %g, "
                    "%d top)\n",
                    V, r, go[r].id, go[r].status, go[r].logprob, go[r].n_top, id, lp.logprob,
                    lp.n_top);
    }
    CHECK(bad == 0, "greedy V %d sd %g q %g masked %d: %d of %d rows differ", V, sd, q, masked,
          bad, n);
    free(tmp);
    free(mask);
    sv_sampler_destroy(cs);
}

static void test_row_errors(ctx_t *c) {
    int32_t V = c->V, words = (V + 31) / 32;
    uint32_t *none = calloc((size_t)words, 4), *one = calloc((size_t)words, 4);
    int32_t forbidden = V > 1 ? 1 : 0;
    one[0] = 1u; /* only token 0 */
    sv_error_t err;
    int32_t s_none, s_one;
    sv_cuda_sampler_begin_step(c->smp);
    CHECK(!sv_cuda_sampler_mask_slot(c->smp, 0, 1001, none, &s_none, &err) &&
              !sv_cuda_sampler_mask_slot(c->smp, 0, 1002, one, &s_one, &err),
          "slots: %s", err.message);
    for (int r = 0; r < 5; r++)
        make_row(c->h_rows + (size_t)r * V, V, 1.0f, 0, 0);
    c->h_rows[(size_t)1 * V + 0] = -INFINITY; /* row 1: its only allowed token is -inf */
    c->h_rows[(size_t)2 * V + 0] = NAN;       /* row 2: allowed NaN */
    c->h_rows[(size_t)3 * V + forbidden] = NAN; /* row 3: forbidden NaN: fine */
    c->h_rows[(size_t)4 * V + V - 1] = INFINITY; /* row 4: unmasked +inf */
    put_rows(c, c->h_rows, 5);
    sv_sample_params_t p = sv_sample_params_default();
    sv_cuda_sample_params_t gp[6] = {gparams(&p, s_none, 1), gparams(&p, s_one, 2),
                                     gparams(&p, -1, 3),     gparams(&p, s_one, 4),
                                     gparams(&p, -1, 5)};
    sv_cuda_sample_out_t go[6];
    sv_status st = sv_cuda_sample(c->smp, 5, c->d_logits, gp, go, &err);
    CHECK(!st, "launch: %s", err.message);
    CHECK(go[0].status == SV_ERR_EMPTY && go[0].id == -1, "empty mask: status %d id %d",
          go[0].status, go[0].id);
    CHECK(go[1].status == SV_ERR_EMPTY, "only -inf allowed: status %d", go[1].status);
    CHECK(go[2].status == SV_ERR_ARG, "allowed NaN: status %d", go[2].status);
    CHECK(V == 1 || (go[3].status == SV_OK && go[3].id == 0),
          "forbidden NaN, one token allowed: status %d id %d", go[3].status, go[3].id);
    CHECK(go[4].status == SV_ERR_ARG, "+inf: status %d", go[4].status);
    /* A slot outside the table. */
    gp[0] = gparams(&p, 8, 1);
    st = sv_cuda_sample(c->smp, 1, c->d_logits, gp, go, &err);
    CHECK(st == SV_ERR_ARG || (st == SV_OK && go[0].status == SV_ERR_ARG),
          "mask slot 8 of 8: call %d row %d", st, go[0].status);
    free(none);
    free(one);
}

/* ---- the distribution ------------------------------------------------------------------- */

typedef struct dist_case {
    const char *name;
    float temperature, top_p, min_p;
    int32_t top_k;
    float sd, q;    /* logits: N(0, sd), quantised to q (ties) */
    double density; /* mask density; 1: no mask */
} dist_case_t;

static void test_dist(ctx_t *c, const dist_case_t *dc, int32_t n_draws) {
    int32_t V = c->V, words = (V + 31) / 32;
    float *row = malloc((size_t)V * sizeof(float)), *tmp = malloc((size_t)V * sizeof(float));
    uint32_t *mask = malloc((size_t)words * 4);
    double *probs = malloc((size_t)V * sizeof(double));
    long *count = calloc((size_t)V, sizeof(long));
    double *cum = NULL;
    sv_error_t err;
    make_row(row, V, dc->sd, dc->q, 0.001);
    row[V / 2] = 3.0f * dc->sd; /* a finite maximum */
    bool masked = dc->density < 1.0;
    int32_t slot = -1;
    if (masked) {
        make_mask(mask, V, dc->density);
        mask[(V / 2) >> 5] |= 1u << ((V / 2) & 31);
    }
    sv_sample_params_t p = sv_sample_params_default();
    p.temperature = dc->temperature;
    p.top_p = dc->top_p;
    p.min_p = dc->min_p;
    p.top_k = dc->top_k;
    sv_sampler_t *cs;
    if (sv_sampler_create((uint32_t)V, &p, &cs, &err)) {
        CHECK(0, "cpu sampler: %s", err.message);
        goto done;
    }
    memcpy(tmp, row, (size_t)V * sizeof(float));
    if (sv_sampler_probs(cs, tmp, masked ? mask : NULL, probs, &err)) {
        CHECK(0, "cpu probs: %s", err.message);
        sv_sampler_destroy(cs);
        goto done;
    }
    sv_sampler_destroy(cs);
    for (int32_t r = 0; r < COPIES; r++)
        memcpy(c->h_rows + (size_t)r * V, row, (size_t)V * sizeof(float));
    if (!put_rows(c, c->h_rows, COPIES))
        goto done;
    static uint64_t next_key = 100000;
    const uint64_t key = next_key++; /* this case's mask, new to the table */
    int outside = 0, disagree = 0, kept = 0;
    /* The CPU's cumulative probabilities in id order, for the inverse CDF:
     * the token for u is the first positive-probability id whose running
     * sum passes u (the last positive one if rounding leaves none). */
    cum = malloc((size_t)V * sizeof(double));
    int32_t last_pos = -1;
    for (int32_t i = 0; i < V; i++) {
        kept += probs[i] > 0;
        cum[i] = (i ? cum[i - 1] : 0.0) + probs[i];
        if (probs[i] > 0)
            last_pos = i;
    }
    sv_cuda_sample_params_t gp[COPIES];
    sv_cuda_sample_out_t go[COPIES];
    for (int32_t done_n = 0; done_n < n_draws; done_n += COPIES) {
        int32_t n = n_draws - done_n < COPIES ? n_draws - done_n : COPIES;
        sv_cuda_sampler_begin_step(c->smp);
        if (masked && sv_cuda_sampler_mask_slot(c->smp, 0, key, mask, &slot, &err)) {
            CHECK(0, "slot: %s", err.message);
            goto done;
        }
        for (int32_t r = 0; r < n; r++)
            gp[r] = gparams(&p, slot, sv_rng_next(&R));
        if (sv_cuda_sample(c->smp, n, c->d_logits, gp, go, &err)) {
            CHECK(0, "launch: %s", err.message);
            goto done;
        }
        for (int32_t r = 0; r < n; r++) {
            if (go[r].status != SV_OK || go[r].id < 0 || go[r].id >= V) {
                outside++;
                continue;
            }
            count[go[r].id]++;
            if (probs[go[r].id] == 0.0)
                outside++;
            double u = (double)(gp[r].draw >> 11) * 0x1.0p-53;
            int32_t lo = 0, hi = V; /* first i with cum[i] > u */
            while (lo < hi) {
                int32_t mid = lo + (hi - lo) / 2;
                if (cum[mid] > u)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            while (lo < V && probs[lo] == 0.0)
                lo++;
            int32_t want = lo < V ? lo : last_pos;
            disagree += want != go[r].id;
        }
    }
    /* chi-square over tokens expecting >= 5 draws, the rest pooled */
    double chi2 = 0.0, pool_e = 0.0, pool_o = 0.0;
    int df = -1;
    for (int32_t i = 0; i < V; i++) {
        double e = probs[i] * n_draws;
        if (e >= 5.0) {
            chi2 += (count[i] - e) * (count[i] - e) / e;
            df++;
        } else {
            pool_e += e;
            pool_o += (double)count[i];
        }
    }
    if (pool_e >= 5.0) {
        chi2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        df++;
    }
    double limit = df > 0 ? df + 6.0 * sqrt(2.0 * df) : 1e300;
    printf("  %-34s V %6d: %5d tokens kept, %d draws: outside %d, disagree %d, chi2 %.1f (df %d, "
           "limit %.1f)\n",
           dc->name, V, kept, n_draws, outside, disagree, chi2, df, df > 0 ? limit : 0.0);
    CHECK(outside <= n_draws / 500, "%s V %d: %d of %d draws outside the CPU's support", dc->name,
          V, outside, n_draws);
    CHECK(disagree <= n_draws / 200, "%s V %d: %d of %d draws differ from the inverse CDF",
          dc->name, V, disagree, n_draws);
    CHECK(chi2 <= limit, "%s V %d: chi2 %.1f over %d df", dc->name, V, chi2, df);
done:
    free(row), free(tmp), free(mask), free(probs), free(count), free(cum);
}

/* Rows with different masks in one launch; the table's slots. */
static void test_mask_table(ctx_t *c) {
    int32_t V = c->V, words = (V + 31) / 32, n = 48;
    uint32_t *masks = malloc((size_t)3 * words * 4);
    for (int k = 0; k < 3; k++)
        make_mask(masks + (size_t)k * words, V, k == 0 ? 0.5 : k == 1 ? 0.01 : 0.0);
    sv_error_t err;
    int32_t slots[3], again;
    sv_cuda_sampler_begin_step(c->smp);
    for (int k = 0; k < 3; k++)
        CHECK(!sv_cuda_sampler_mask_slot(c->smp, 0, 500 + k, masks + (size_t)k * words, &slots[k],
                                         &err),
              "slot %d: %s", k, err.message);
    CHECK(!sv_cuda_sampler_mask_slot(c->smp, 0, 501, NULL, &again, &err) && again == slots[1],
          "key 501 again: slot %d, first %d", again, slots[1]);
    for (int32_t r = 0; r < n; r++)
        make_row(c->h_rows + (size_t)r * V, V, 2.0f, 0, 0);
    put_rows(c, c->h_rows, n);
    sv_sample_params_t p = sv_sample_params_default();
    p.temperature = 0;
    sv_cuda_sample_params_t gp[48];
    sv_cuda_sample_out_t go[48];
    for (int32_t r = 0; r < n; r++)
        gp[r] = gparams(&p, slots[r % 3], 0);
    CHECK(!sv_cuda_sample(c->smp, n, c->d_logits, gp, go, &err), "launch: %s", err.message);
    sv_sampler_t *cs;
    sv_sampler_create((uint32_t)V, &p, &cs, &err);
    float *tmp = malloc((size_t)V * sizeof(float));
    int bad = 0;
    for (int32_t r = 0; r < n; r++) {
        memcpy(tmp, c->h_rows + (size_t)r * V, (size_t)V * sizeof(float));
        int32_t id = -1;
        sv_sampler_sample(cs, tmp, masks + (size_t)(r % 3) * words, &id, NULL, &err);
        bad += go[r].id != id;
    }
    CHECK(bad == 0, "mixed masks V %d: %d of %d rows differ from the CPU", V, bad, n);
    /* Fill the table within one step: the 9th new key cannot be placed. */
    sv_cuda_sampler_begin_step(c->smp);
    int32_t s;
    sv_status st = SV_OK;
    for (int k = 0; k < 9 && !st; k++)
        st = sv_cuda_sampler_mask_slot(c->smp, 0, 9000 + k, masks, &s, &err);
    CHECK(st == SV_ERR_BUDGET, "9 masks in one step of an 8-slot table: %d", st);
    sv_sampler_destroy(cs);
    free(tmp);
    free(masks);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the log even if a step is killed */
    QUICK = argc > 1 && strcmp(argv[1], "--quick") == 0;
    sv_rng_seed(&R, 777);
    sv_error_t err;
    if (sv_cuda_device_count() < 1) {
        fprintf(stderr, "test_sample: no CUDA device\n");
        return 2;
    }
    if (sv_cuda_backend_create(NULL, &GPU, &err)) {
        fprintf(stderr, "test_sample: %s\n", err.message);
        return 1;
    }
    static const dist_case_t cases[] = {
        {"temperature 1", 1.0f, 1.0f, 0.0f, 0, 1.0f, 0, 1.0},
        {"temperature 0.7, top_k 50", 0.7f, 1.0f, 0.0f, 50, 1.5f, 0, 1.0},
        {"top_p 0.9", 1.0f, 0.9f, 0.0f, 0, 2.0f, 0, 1.0},
        {"temperature 1.3, min_p 0.05", 1.3f, 1.0f, 0.05f, 0, 2.0f, 0, 1.0},
        {"top_k 40, top_p 0.8, min_p 0.02", 1.0f, 0.8f, 0.02f, 40, 1.5f, 0, 1.0},
        {"ties: top_k 7 (q 0.5)", 1.0f, 1.0f, 0.0f, 7, 2.0f, 0.5f, 1.0},
        {"ties: top_p 0.5 (q 0.25)", 0.8f, 0.5f, 0.0f, 0, 2.0f, 0.25f, 1.0},
        {"masked 30%, top_p 0.95", 1.0f, 0.95f, 0.0f, 0, 2.0f, 0, 0.3},
        {"masked 1%, temperature 2", 2.0f, 1.0f, 0.0f, 0, 1.0f, 0, 0.01},
        {"masked 30%, top_k 3", 1.0f, 1.0f, 0.0f, 3, 1.0f, 0, 0.3},
    };
    const int32_t vocabs[] = {1, 33, 1000, 32000, 128256, 151936};
    for (size_t v = 0; v < sizeof vocabs / sizeof *vocabs; v++) {
        int32_t V = vocabs[v];
        if (QUICK && V > 1000) /* --quick: small vocabularies (for the sanitizers) */
            break;
        ctx_t c;
        if (!ctx_init(&c, V)) {
            CHECK(0, "context for V %d", V);
            continue;
        }
        test_greedy(&c, 1.0f, 0, 0.0, 1.0);
        test_greedy(&c, 2.0f, 0.5f, 0.01, 1.0);
        test_greedy(&c, 2.0f, 0, 0.0, 0.2);
        test_greedy(&c, 1.0f, 0.25f, 0.0, 0.001);
        test_row_errors(&c);
        if (V >= 33)
            test_mask_table(&c);
        int32_t draws = QUICK ? 1024 : V <= 1000 ? 40000 : V <= 32000 ? 12000 : 4096;
        printf("vocab %d: greedy, logprobs, row errors and the mask table checked; "
               "distributions:\n",
               V);
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
            if (V > 1 || k == 0)
                test_dist(&c, &cases[k], draws);
        ctx_free(&c);
    }
    sv_backend_destroy(GPU);
    return test_summary("test_sample: the mask+sample kernel against the CPU sampler");
}
