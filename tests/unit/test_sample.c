/* test_sample.c — the CPU sampler (src/engine/sample.h).
 *
 * - Parameter validation: every out-of-range value (NaN included) is
 *   SV_ERR_ARG naming the parameter, in the message and in err.keyword.
 * - Greedy: argmax, lowest id on ties, under masks (bits past the vocabulary
 *   ignored).
 * - Truncation: for hundreds of random (logits, mask, temperature, top_k,
 *   top_p, min_p) cases, sv_sampler_probs equals a reference written here
 *   the slow obvious way (full qsort, libm exp, normalized probabilities,
 *   cumulative sums); logits with many ties check the id tie-breaks.
 * - Masks: every draw of those cases lands in the reference support, hence
 *   never on a masked token; masked tokens with the highest logits and a
 *   +100 bias are never drawn either.
 * - Reproducibility: same seed, same tokens (and a golden sequence, so a
 *   platform that differs fails); another seed differs; reset replays.
 * - Penalties and logit bias: the in-place logits equal hand-worked values
 *   (order: bias, repetition, presence/frequency); context vs generated;
 *   unaccept; reset; clamping.
 * - Logprobs: match log_softmax after the mask, sum to one when the top list
 *   covers every allowed token, ordered with id tie-breaks, independent of
 *   temperature and truncation.
 * - Errors: empty mask, all allowed -inf, NaN / +inf allowed logits (a NaN
 *   under the mask is fine), the RNG does not advance on an error.
 * - A 152k-vocabulary timing line (printed, never asserted). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/engine/sample.h"
#include "util/rng.h"
#include "test.h"

/* ---- helpers ---------------------------------------------------------------- */

static sv_sampler_t *make(uint32_t vocab, const sv_sample_params_t *p) {
    sv_sampler_t *s = NULL;
    sv_error_t err;
    sv_status st = sv_sampler_create(vocab, p, &s, &err);
    CHECK(st == SV_OK && s, "create failed: %s", err.message);
    if (!s) abort();
    return s;
}

static void mask_set(uint32_t *m, uint32_t id, bool on) {
    if (on) m[id >> 5] |= 1u << (id & 31);
    else m[id >> 5] &= ~(1u << (id & 31));
}
static bool mask_get(const uint32_t *m, uint32_t id) { return !m || (m[id >> 5] >> (id & 31) & 1); }

/* Uniform in [0, 1) from the test's own RNG. */
static double unif(sv_rng_t *r) { return (double)(sv_rng_next(r) >> 11) * 0x1.0p-53; }

/* Roughly normal logits (sum of three uniforms), scale sigma. With ties > 0,
 * values are rounded to multiples of 1/ties so many are equal. */
static void random_logits(sv_rng_t *r, float *l, uint32_t n, double sigma, int ties) {
    for (uint32_t i = 0; i < n; i++) {
        double x = (unif(r) + unif(r) + unif(r) - 1.5) * 2.0 * sigma;
        if (ties) x = floor(x * ties) / ties;
        l[i] = (float)x;
    }
}

/* ---- the reference: the same semantics, the slow obvious way ---------------------- */

typedef struct {
    uint32_t id;
    float l;
} ref_t;

static int ref_cmp(const void *a, const void *b) {
    const ref_t *x = a, *y = b;
    if (x->l != y->l) return x->l > y->l ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* probs[vocab]: the distribution sample.h documents, for logits that have
 * already been biased and penalized (the sampler's in-place output). */
static void ref_probs(const float *logits, uint32_t vocab, const uint32_t *mask, const sv_sample_params_t *p,
                      double *probs) {
    ref_t *a = malloc(vocab * sizeof *a);
    double *q = malloc(vocab * sizeof *q);
    size_t n = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        probs[i] = 0.0;
        if (mask_get(mask, i) && logits[i] > -INFINITY) a[n++] = (ref_t){i, logits[i]};
    }
    qsort(a, n, sizeof *a, ref_cmp);
    if (p->temperature == 0.0f) {
        probs[a[0].id] = 1.0;
    } else {
        if (p->top_k > 0 && (size_t)p->top_k < n) n = (size_t)p->top_k;
        double z = 0.0;
        for (size_t i = 0; i < n; i++) z += exp(((double)a[i].l - a[0].l) / p->temperature);
        for (size_t i = 0; i < n; i++) q[i] = exp(((double)a[i].l - a[0].l) / p->temperature) / z;
        if (p->top_p < 1.0f) {
            double cum = 0.0;
            size_t k = 0;
            while (k < n) {
                cum += q[k++];
                if (cum >= p->top_p) break;
            }
            n = k;
        }
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (q[i] >= p->min_p * q[0]) {
                a[m] = a[i];
                q[m++] = q[i];
            }
        n = m;
        z = 0.0;
        for (size_t i = 0; i < n; i++) z += q[i];
        for (size_t i = 0; i < n; i++) probs[a[i].id] = q[i] / z;
    }
    free(a);
    free(q);
}

/* ---- validation ---------------------------------------------------------------- */

static void test_validation(void) {
    sv_sample_params_t d = sv_sample_params_default();
    sv_error_t err;
    CHECK(sv_sample_params_validate(&d, 100, &err) == SV_OK, "defaults rejected: %s", err.message);
    CHECK(d.temperature == 1.0f && d.top_p == 1.0f && d.top_k == 0 && d.min_p == 0.0f &&
              d.repetition_penalty == 1.0f && d.n_logprobs == 0,
          "defaults");

    sv_logit_bias_t bias_bad_id[] = {{5, 1.0f}, {100, 1.0f}};
    sv_logit_bias_t bias_neg_id[] = {{-1, 1.0f}};
    sv_logit_bias_t bias_nan[] = {{3, NAN}};
    sv_logit_bias_t bias_dup[] = {{3, 1.0f}, {4, 1.0f}, {3, 2.0f}};
    static sv_logit_bias_t bias_many[SV_SAMPLE_MAX_LOGIT_BIAS + 1];
    for (int i = 0; i <= SV_SAMPLE_MAX_LOGIT_BIAS; i++) bias_many[i] = (sv_logit_bias_t){i, 1.0f};
    struct {
        const char *param;
        sv_sample_params_t p;
    } bad[32];
    int nb = 0;
#define BAD(name, field, value)        \
    do {                               \
        bad[nb].param = name;          \
        bad[nb].p = d;                 \
        bad[nb].p.field = value;       \
        nb++;                          \
    } while (0)
    BAD("temperature", temperature, -0.1f);
    BAD("temperature", temperature, 2.01f);
    BAD("temperature", temperature, NAN);
    BAD("temperature", temperature, INFINITY);
    BAD("top_p", top_p, 0.0f);
    BAD("top_p", top_p, 1.0001f);
    BAD("top_p", top_p, NAN);
    BAD("top_k", top_k, -1);
    BAD("min_p", min_p, -0.01f);
    BAD("min_p", min_p, 1.5f);
    BAD("min_p", min_p, NAN);
    BAD("repetition_penalty", repetition_penalty, 0.0f);
    BAD("repetition_penalty", repetition_penalty, 10.5f);
    BAD("repetition_penalty", repetition_penalty, NAN);
    BAD("presence_penalty", presence_penalty, -2.5f);
    BAD("presence_penalty", presence_penalty, 2.01f);
    BAD("frequency_penalty", frequency_penalty, 3.0f);
    BAD("frequency_penalty", frequency_penalty, NAN);
    BAD("top_logprobs", n_logprobs, -1);
    BAD("top_logprobs", n_logprobs, 21);
    BAD("logit_bias", n_logit_bias, 1); /* NULL list */
    BAD("logit_bias", n_logit_bias, SV_SAMPLE_MAX_LOGIT_BIAS + 1);
    bad[nb - 1].p.logit_bias = bias_many;
    BAD("logit_bias", n_logit_bias, 2);
    bad[nb - 1].p.logit_bias = bias_bad_id;
    BAD("logit_bias", n_logit_bias, 1);
    bad[nb - 1].p.logit_bias = bias_neg_id;
    BAD("logit_bias", n_logit_bias, 1);
    bad[nb - 1].p.logit_bias = bias_nan;
    BAD("logit_bias", n_logit_bias, 3);
    bad[nb - 1].p.logit_bias = bias_dup;
#undef BAD
    for (int i = 0; i < nb; i++) {
        sv_error_clear(&err);
        sv_status st = sv_sample_params_validate(&bad[i].p, 100, &err);
        CHECK(st == SV_ERR_ARG && err.code == SV_ERR_ARG, "case %d (%s) accepted", i, bad[i].param);
        CHECK(strcmp(err.keyword, bad[i].param) == 0, "case %d: keyword '%s', want '%s'", i, err.keyword,
              bad[i].param);
        CHECK(strncmp(err.message, bad[i].param, strlen(bad[i].param)) == 0, "case %d: message '%s'", i,
              err.message);
        static char dummy;
        sv_sampler_t *s = (sv_sampler_t *)&dummy; /* must be overwritten with NULL */
        CHECK(sv_sampler_create(100, &bad[i].p, &s, NULL) == SV_ERR_ARG && s == NULL, "case %d: create", i);
    }
    /* Edges that are valid. */
    sv_sample_params_t ok[8];
    for (int i = 0; i < 8; i++) ok[i] = d;
    ok[0].temperature = 0.0f;
    ok[1].temperature = 2.0f;
    ok[2].top_p = 1e-6f;
    ok[3].min_p = 1.0f;
    ok[4].presence_penalty = -2.0f, ok[4].frequency_penalty = 2.0f;
    ok[5].n_logprobs = 20;
    ok[6].top_k = 1000000; /* larger than the vocabulary: no-op */
    ok[7].repetition_penalty = 10.0f;
    for (int i = 0; i < 8; i++)
        CHECK(sv_sample_params_validate(&ok[i], 100, &err) == SV_OK, "valid edge %d rejected: %s", i, err.message);
    sv_sampler_t *s = NULL;
    CHECK(sv_sampler_create(0, &d, &s, &err) == SV_ERR_ARG && !s, "vocab 0 accepted");
    sv_sampler_destroy(NULL);
}

/* ---- greedy ------------------------------------------------------------------- */

static void test_greedy(void) {
    sv_sample_params_t p = sv_sample_params_default();
    p.temperature = 0.0f;
    p.top_k = 3, p.top_p = 0.5f, p.min_p = 0.2f; /* ignored when greedy */
    sv_sampler_t *s = make(40, &p);
    float l[40];
    int32_t id = -1;
    sv_error_t err;
    for (int i = 0; i < 40; i++) l[i] = (float)(i % 7) - 3.0f; /* max 3 at ids 6, 13, 20, ... */
    CHECK(sv_sampler_sample(s, l, NULL, &id, NULL, &err) == SV_OK && id == 6, "greedy: %d", id);
    uint32_t m[2] = {~0u, ~0u};
    mask_set(m, 6, false);
    for (int i = 0; i < 40; i++) l[i] = (float)(i % 7) - 3.0f;
    CHECK(sv_sampler_sample(s, l, m, &id, NULL, &err) == SV_OK && id == 13, "greedy masked tie: %d", id);
    CHECK(l[6] == -INFINITY, "masked logit not -inf in place");
    for (int i = 0; i < 40; i++) l[i] = 0.0f;
    CHECK(sv_sampler_sample(s, l, NULL, &id, NULL, &err) == SV_OK && id == 0, "all equal: %d", id);
    /* Only id 39 allowed (bits past 40 in the last word are set, and ignored). */
    m[0] = 0, m[1] = ~0u & ~((1u << 7) - 1);
    for (int i = 0; i < 40; i++) l[i] = (float)-i;
    CHECK(sv_sampler_sample(s, l, m, &id, NULL, &err) == SV_OK && id == 39, "last only: %d", id);
    /* -inf logits are never the argmax unless nothing else is allowed. */
    for (int i = 0; i < 40; i++) l[i] = -INFINITY;
    l[17] = -1e30f;
    CHECK(sv_sampler_sample(s, l, NULL, &id, NULL, &err) == SV_OK && id == 17, "finite among -inf: %d", id);
    double probs[40];
    for (int i = 0; i < 40; i++) l[i] = (float)(i % 5);
    CHECK(sv_sampler_probs(s, l, NULL, probs, &err) == SV_OK && probs[4] == 1.0 && probs[9] == 0.0,
          "greedy probs not one-hot at 4");
    sv_sampler_destroy(s);
}

/* ---- truncation against the reference; masks on every draw -------------------------- */

static void test_against_reference(void) {
    static const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f, 2.0f};
    static const int32_t topks[] = {0, 1, 2, 5, 50, 100000};
    static const float topps[] = {1.0f, 0.3f, 0.9f, 0.99f};
    static const float minps[] = {0.0f, 0.05f, 0.1f, 0.5f};
    static const uint32_t vocabs[] = {1, 2, 7, 33, 100, 1000, 5000};
    enum { CASES = 400, DRAWS = 150 };
    sv_rng_t r;
    sv_rng_seed(&r, 1234);
    uint32_t vmax = 5000;
    float *l0 = malloc(vmax * sizeof *l0), *l = malloc(vmax * sizeof *l);
    double *got = malloc(vmax * sizeof *got), *want = malloc(vmax * sizeof *want);
    uint32_t *m = malloc((vmax / 32 + 1) * sizeof *m);
    int bad_cases = 0, draws = 0, bad_draws = 0, rng_truncations = 0;
    for (int c = 0; c < CASES; c++) {
        uint32_t v = vocabs[sv_rng_below(&r, 7)];
        sv_sample_params_t p = sv_sample_params_default();
        p.temperature = temps[sv_rng_below(&r, 6)];
        p.top_k = topks[sv_rng_below(&r, 6)];
        p.top_p = topps[sv_rng_below(&r, 4)];
        p.min_p = minps[sv_rng_below(&r, 4)];
        p.seed = c;
        int ties = sv_rng_below(&r, 3) == 0 ? 2 : 0;
        random_logits(&r, l0, v, 1.0 + 3.0 * unif(&r), ties);
        /* Mask: none, dense, or sparse; keep at least one token allowed. */
        uint32_t kind = sv_rng_below(&r, 3);
        const uint32_t *mp = NULL;
        if (kind) {
            double keep = kind == 1 ? 0.8 : 0.05;
            memset(m, 0, (v / 32 + 1) * sizeof *m);
            for (uint32_t i = 0; i < v; i++) mask_set(m, i, unif(&r) < keep);
            mask_set(m, sv_rng_below(&r, v), true);
            /* The masked tokens get the highest logits: a leak would show. */
            for (uint32_t i = 0; i < v; i++)
                if (!mask_get(m, i)) l0[i] += 50.0f;
            mp = m;
        }
        if (p.top_k || p.top_p < 1.0f || p.min_p > 0.0f) rng_truncations++;
        sv_sampler_t *s = make(v, &p);
        sv_error_t err;
        memcpy(l, l0, v * sizeof *l);
        CHECK(sv_sampler_probs(s, l, mp, got, &err) == SV_OK, "probs: %s", err.message);
        ref_probs(l0, v, mp, &p, want);
        double sum = 0.0, maxdiff = 0.0;
        bool support = true;
        for (uint32_t i = 0; i < v; i++) {
            sum += got[i];
            maxdiff = fmax(maxdiff, fabs(got[i] - want[i]));
            if ((got[i] > 0.0) != (want[i] > 0.0)) support = false;
        }
        bool ok = support && maxdiff < 1e-12 && fabs(sum - 1.0) < 1e-12;
        if (!ok) bad_cases++;
        CHECK(ok, "case %d (V=%u T=%g k=%d p=%g min_p=%g ties=%d mask=%u): support %d, max diff %g, sum %.17g", c,
              v, (double)p.temperature, (int)p.top_k, (double)p.top_p, (double)p.min_p, ties, kind, support,
              maxdiff, sum);
        /* Draws land in the support, whatever the mask hides. */
        for (int k = 0; k < DRAWS; k++) {
            int32_t id = -1;
            memcpy(l, l0, v * sizeof *l);
            if (sv_sampler_sample(s, l, mp, &id, NULL, &err) != SV_OK || id < 0 || (uint32_t)id >= v ||
                !(want[id] > 0.0) || !mask_get(mp, (uint32_t)id))
                bad_draws++;
            draws++;
        }
        sv_sampler_destroy(s);
    }
    CHECK(bad_draws == 0, "%d of %d draws outside the reference support or the mask", bad_draws, draws);
    CHECK(rng_truncations > CASES / 2, "too few truncating cases (%d)", rng_truncations);
    printf("reference: %d cases (%d with truncation), %d bad; %d draws, %d bad\n", CASES, rng_truncations,
           bad_cases, draws, bad_draws);
    free(l0), free(l), free(got), free(want), free(m);
}

/* Every setting, 2000 draws each under a fresh random mask whose forbidden
 * tokens have the highest logits (one with a +100 bias), each drawn token
 * accepted so the penalties keep changing: no draw is ever forbidden. */
static void test_mask_every_setting(void) {
    enum { V = 300, DRAWS = 2000 };
    sv_logit_bias_t bias[2] = {{7, 100.0f}, {8, -100.0f}};
    struct {
        float t, top_p, min_p, rep, pres, freq;
        int32_t top_k, lp;
        bool bias;
    } cfg[] = {
        {0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, false}, {1.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, false},
        {0.7f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, false}, {1.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 5, 0, false},
        {1.0f, 0.9f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, false}, {1.0f, 1.0f, 0.1f, 1.0f, 0.0f, 0.0f, 0, 0, false},
        {0.8f, 0.95f, 0.05f, 1.0f, 0.0f, 0.0f, 20, 0, false},
        {1.2f, 0.9f, 0.02f, 1.3f, 0.5f, 0.5f, 50, 5, true}, {0.0f, 1.0f, 0.0f, 0.5f, -2.0f, -2.0f, 0, 20, true},
    };
    sv_rng_t r;
    sv_rng_seed(&r, 77);
    float l0[V], l[V];
    random_logits(&r, l0, V, 2.0, 0);
    int bad = 0, errors = 0;
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        sv_sample_params_t p = sv_sample_params_default();
        p.temperature = cfg[c].t, p.top_p = cfg[c].top_p, p.min_p = cfg[c].min_p, p.top_k = cfg[c].top_k;
        p.repetition_penalty = cfg[c].rep, p.presence_penalty = cfg[c].pres, p.frequency_penalty = cfg[c].freq;
        p.n_logprobs = cfg[c].lp;
        p.logit_bias = cfg[c].bias ? bias : NULL;
        p.n_logit_bias = cfg[c].bias ? 2 : 0;
        p.seed = c;
        sv_sampler_t *s = make(V, &p);
        for (int k = 0; k < DRAWS; k++) {
            uint32_t m[(V + 31) / 32] = {0};
            for (uint32_t i = 0; i < V; i++) mask_set(m, i, sv_rng_below(&r, 4) == 0);
            mask_set(m, 7, false);
            mask_set(m, sv_rng_below(&r, V), true);
            for (uint32_t i = 0; i < V; i++) l[i] = mask_get(m, i) ? l0[i] : l0[i] + 30.0f;
            int32_t id = -1;
            sv_logprobs_t lp;
            sv_error_t err;
            if (sv_sampler_sample(s, l, m, &id, cfg[c].lp ? &lp : NULL, &err) != SV_OK) {
                errors++;
                continue;
            }
            if (!mask_get(m, (uint32_t)id)) bad++;
            for (int i = 0; cfg[c].lp && i < lp.n_top; i++)
                if (!mask_get(m, (uint32_t)lp.top[i].id)) bad++;
            sv_sampler_accept(s, id, &err);
        }
        sv_sampler_destroy(s);
    }
    CHECK(bad == 0 && errors == 0, "%d forbidden tokens drawn or listed, %d errors", bad, errors);
}

/* Top-k and top-p boundaries that fall inside a run of equal logits keep the lowest ids. */
static void test_tie_boundaries(void) {
    float l0[10] = {1, 2, 2, 2, 0, 2, 1, 0, 2, 1}; /* 2 at ids 1,2,3,5,8 */
    float l[10];
    double pr[10];
    sv_error_t err;
    sv_sample_params_t p = sv_sample_params_default();
    p.top_k = 3;
    sv_sampler_t *s = make(10, &p);
    memcpy(l, l0, sizeof l);
    CHECK(sv_sampler_probs(s, l, NULL, pr, &err) == SV_OK, "%s", err.message);
    CHECK(pr[1] > 0 && pr[2] > 0 && pr[3] > 0 && pr[5] == 0 && pr[8] == 0 && fabs(pr[1] - 1.0 / 3) < 1e-15,
          "top_k tie: %g %g %g %g %g", pr[1], pr[2], pr[3], pr[5], pr[8]);
    sv_sampler_destroy(s);
    /* Five equal tokens in front: top_p 0.5 of the mass needs the first k of
     * them; with all ten weights known the exact prefix is checked. */
    p = sv_sample_params_default();
    p.top_p = 0.5f;
    s = make(10, &p);
    memcpy(l, l0, sizeof l);
    CHECK(sv_sampler_probs(s, l, NULL, pr, &err) == SV_OK, "%s", err.message);
    double e = exp(-1.0), e2 = exp(-2.0), z = 5 + 3 * e + 2 * e2;
    int need = (int)ceil(0.5 * z); /* tokens of weight 1 needed to reach half the mass */
    int kept = 0;
    for (int i = 0; i < 10; i++) kept += pr[i] > 0;
    CHECK(need == 4 && kept == need && pr[1] > 0 && pr[2] > 0 && pr[3] > 0 && pr[5] > 0 && pr[8] == 0,
          "top_p tie: kept %d, want %d lowest ids", kept, need);
    sv_sampler_destroy(s);
    /* min_p 0.25 between weights e^-1.3 = 0.27 and e^-1.5 = 0.22. */
    p = sv_sample_params_default();
    p.min_p = 0.25f;
    float lm[3] = {0.0f, -1.3f, -1.5f};
    s = make(3, &p);
    CHECK(sv_sampler_probs(s, lm, NULL, pr, &err) == SV_OK, "%s", err.message);
    CHECK(pr[0] > 0 && pr[1] > 0 && pr[2] == 0, "min_p: %g %g %g", pr[0], pr[1], pr[2]);
    sv_sampler_destroy(s);
}

/* ---- reproducibility ------------------------------------------------------------- */

static void draw_seq(const sv_sample_params_t *p, const float *l0, uint32_t v, int n, int32_t *out,
                     sv_sampler_t *reuse) {
    sv_sampler_t *s = reuse ? reuse : make(v, p);
    float *l = malloc(v * sizeof *l);
    sv_error_t err;
    for (int i = 0; i < n; i++) {
        memcpy(l, l0, v * sizeof *l);
        if (sv_sampler_sample(s, l, NULL, &out[i], NULL, &err) != SV_OK) out[i] = -1;
    }
    free(l);
    if (!reuse) sv_sampler_destroy(s);
}

static void test_reproducible(void) {
    enum { V = 1000, N = 64 };
    static float l0[V];
    sv_rng_t r;
    sv_rng_seed(&r, 42);
    /* Logits that are exact in binary (k / 64), so the golden sequence does
     * not depend on how a platform rounds decimal constants. */
    for (int i = 0; i < V; i++) l0[i] = (float)((int)sv_rng_below(&r, 512) - 256) / 64.0f;
    sv_sample_params_t p = sv_sample_params_default();
    p.temperature = 0.8f;
    p.top_p = 0.95f;
    p.min_p = 0.01f;
    p.seed = 7;
    int32_t a[N], b[N], c[N], d[N];
    draw_seq(&p, l0, V, N, a, NULL);
    draw_seq(&p, l0, V, N, b, NULL);
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed, different tokens");
    p.seed = 8;
    draw_seq(&p, l0, V, N, c, NULL);
    int same = 0;
    for (int i = 0; i < N; i++) same += a[i] == c[i];
    CHECK(same < N / 2, "seeds 7 and 8 agree on %d of %d", same, N);
    p.seed = 7;
    sv_sampler_t *s = make(V, &p);
    draw_seq(&p, l0, V, N, d, s);
    sv_sampler_reset(s);
    draw_seq(&p, l0, V, N, d, s);
    CHECK(memcmp(a, d, sizeof a) == 0, "reset does not replay");
    sv_sampler_destroy(s);
    /* Golden: the first 16 tokens, the same on every platform. */
    static const int32_t golden[16] = {777, 307, 934, 371, 957, 965, 48, 145, 466, 187, 604, 819, 89, 981, 490, 616};
    bool match = memcmp(a, golden, sizeof golden) == 0;
    CHECK(match, "golden sequence differs");
    if (!match) {
        fprintf(stderr, "got:");
        for (int i = 0; i < 16; i++) fprintf(stderr, " %d,", a[i]);
        fputc('\n', stderr);
    }
}

/* ---- penalties and bias ------------------------------------------------------------ */

static void test_penalties(void) {
    sv_sample_params_t p = sv_sample_params_default();
    p.temperature = 0.0f;
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    sv_sampler_t *s = make(8, &p);
    sv_error_t err;
    const float l0[8] = {2, -2, 1, -1, 0.5f, 3, -0.5f, 0};
    float l[8];
    int32_t ctx[2] = {0, 1}, bad_ctx[2] = {0, 8}, id = -1;
    CHECK(sv_sampler_add_context(s, bad_ctx, 2, &err) == SV_ERR_ARG, "context id 8 accepted");
    CHECK(sv_sampler_add_context(s, ctx, 2, &err) == SV_OK, "%s", err.message);
    int32_t gen[4] = {2, 2, 3, 5};
    for (int i = 0; i < 4; i++) CHECK(sv_sampler_accept(s, gen[i], &err) == SV_OK, "%s", err.message);
    CHECK(sv_sampler_accept(s, 8, &err) == SV_ERR_ARG && sv_sampler_accept(s, -1, &err) == SV_ERR_ARG,
          "accept out of range");
    memcpy(l, l0, sizeof l);
    CHECK(sv_sampler_sample(s, l, NULL, &id, NULL, &err) == SV_OK, "%s", err.message);
    /* Worked by hand: context tokens get the repetition penalty only; generated
     * ones get it, then presence + frequency * count. */
    const float want[8] = {1.0f, -4.0f, 0.5f - 1.0f, -2.0f - 0.75f, 0.5f, 1.5f - 0.75f, -0.5f, 0.0f};
    for (int i = 0; i < 8; i++) CHECK(l[i] == want[i], "penalized logit %d: %g, want %g", i, l[i], want[i]);
    CHECK(id == 0, "greedy after penalties: %d", id);
    CHECK(sv_sampler_unaccept(s, 5, &err) == SV_OK, "%s", err.message);
    CHECK(sv_sampler_unaccept(s, 5, &err) == SV_ERR_ARG, "unaccept of a token no longer accepted");
    memcpy(l, l0, sizeof l);
    CHECK(sv_sampler_sample(s, l, NULL, &id, NULL, &err) == SV_OK && id == 5 && l[5] == 3.0f,
          "after unaccept: %d (%g)", id, l[5]);
    CHECK(sv_sampler_unaccept(s, 2, &err) == SV_OK, "%s", err.message);
    memcpy(l, l0, sizeof l);
    sv_sampler_sample(s, l, NULL, &id, NULL, &err);
    CHECK(l[2] == 0.5f - 0.75f, "count 1 after one unaccept: %g", l[2]);
    sv_sampler_reset(s);
    memcpy(l, l0, sizeof l);
    sv_sampler_sample(s, l, NULL, &id, NULL, &err);
    CHECK(memcmp(l, l0, sizeof l) == 0 && id == 5, "reset keeps penalties");
    sv_sampler_destroy(s);

    /* Negative presence / frequency encourage; repetition 0.5 encourages too. */
    p = sv_sample_params_default();
    p.temperature = 0.0f;
    p.presence_penalty = -1.0f;
    p.frequency_penalty = -0.5f;
    p.repetition_penalty = 0.5f;
    s = make(4, &p);
    for (int i = 0; i < 3; i++) sv_sampler_accept(s, 3, &err);
    sv_sampler_accept(s, 2, &err);
    float m[4] = {1.0f, 1.0f, -1.0f, 0.25f};
    sv_sampler_sample(s, m, NULL, &id, NULL, &err);
    CHECK(m[2] == -0.5f + 1.5f && m[3] == 0.5f + 2.5f && m[0] == 1.0f && id == 3, "encouraging: %g %g %d", m[2],
          m[3], id);
    sv_sampler_destroy(s);
}

static void test_bias(void) {
    sv_logit_bias_t b[] = {{3, 5.0f}, {4, 500.0f}, {1, -1000.0f}, {0, 2.0f}};
    sv_sample_params_t p = sv_sample_params_default();
    p.temperature = 0.0f;
    p.logit_bias = b;
    p.n_logit_bias = 4;
    p.repetition_penalty = 4.0f;
    sv_sampler_t *s = make(6, &p);
    b[3].bias = 99.0f; /* the sampler keeps its own copy */
    sv_error_t err;
    int32_t id = -1, ctx = 0;
    sv_sampler_add_context(s, &ctx, 1, &err);
    float l[6] = {-1, 0, 0, 0, 0, 0};
    CHECK(sv_sampler_sample(s, l, NULL, &id, NULL, &err) == SV_OK, "%s", err.message);
    /* Token 0: -1 + 2 = 1 (bias first), then 1 / 4 (positive: divided). */
    CHECK(l[0] == 0.25f && l[1] == -100.0f && l[3] == 5.0f && l[4] == 100.0f && l[2] == 0.0f,
          "biased logits %g %g %g %g %g", l[0], l[1], l[2], l[3], l[4]);
    CHECK(id == 4, "greedy after bias: %d", id);
    /* A +100 bias on a masked token does not get it chosen. */
    uint32_t m = ~(1u << 4);
    float l2[6] = {-1, 0, 0, 0, 0, 0};
    CHECK(sv_sampler_sample(s, l2, &m, &id, NULL, &err) == SV_OK && id == 3, "masked biased token: %d", id);
    sv_sampler_destroy(s);
    /* -100 makes a token practically impossible without a mask. */
    sv_logit_bias_t ban = {1, -100.0f};
    p = sv_sample_params_default();
    p.logit_bias = &ban;
    p.n_logit_bias = 1;
    p.seed = 3;
    s = make(2, &p);
    int hits = 0;
    for (int i = 0; i < 2000; i++) {
        float l3[2] = {0, 0};
        sv_sampler_sample(s, l3, NULL, &id, NULL, &err);
        hits += id == 1;
    }
    CHECK(hits == 0, "banned token drawn %d times", hits);
    sv_sampler_destroy(s);
}

/* ---- logprobs ---------------------------------------------------------------------- */

static void test_logprobs(void) {
    enum { V = 10 };
    const float l0[V] = {1.5f, 0.25f, 3.0f, 0.25f, -2.0f, 9.0f, 0.25f, -1.0f, 2.0f, 4.0f};
    uint32_t m = (1u << V) - 1;
    mask_set(&m, 5, false); /* the best token is masked */
    mask_set(&m, 4, false);
    mask_set(&m, 7, false);
    double z = 0.0;
    for (int i = 0; i < V; i++)
        if (mask_get(&m, i)) z += exp(l0[i]);
    sv_logprobs_t lp[3];
    int32_t ids[3];
    const float temps[3] = {0.0f, 1.0f, 1.7f};
    for (int t = 0; t < 3; t++) {
        sv_sample_params_t p = sv_sample_params_default();
        p.temperature = temps[t];
        p.top_k = t == 2 ? 1 : 0; /* truncation does not change logprobs */
        p.n_logprobs = 20;
        sv_sampler_t *s = make(V, &p);
        float l[V];
        memcpy(l, l0, sizeof l);
        sv_error_t err;
        CHECK(sv_sampler_sample(s, l, &m, &ids[t], &lp[t], &err) == SV_OK, "%s", err.message);
        sv_sampler_destroy(s);
    }
    for (int t = 0; t < 3; t++) {
        CHECK(lp[t].n_top == 7, "n_top %d, want 7 (allowed tokens)", lp[t].n_top);
        double sum = 0.0;
        for (int i = 0; i < lp[t].n_top; i++) {
            int32_t id = lp[t].top[i].id;
            CHECK(mask_get(&m, (uint32_t)id), "masked token %d in top logprobs", id);
            CHECK(fabs(lp[t].top[i].logprob - (l0[id] - log(z))) < 1e-6, "logprob of %d: %g", id,
                  (double)lp[t].top[i].logprob);
            sum += exp(lp[t].top[i].logprob);
            if (i) {
                const sv_token_logprob_t *a = &lp[t].top[i - 1], *b = &lp[t].top[i];
                CHECK(a->logprob > b->logprob || (a->logprob == b->logprob && a->id < b->id), "order at %d", i);
            }
            CHECK(lp[t].top[i].id == lp[0].top[i].id && lp[t].top[i].logprob == lp[0].top[i].logprob,
                  "logprobs depend on temperature / truncation");
            if (id == ids[t]) CHECK(lp[t].logprob == lp[t].top[i].logprob, "chosen logprob");
        }
        CHECK(fabs(sum - 1.0) < 1e-5, "logprobs sum to %.9f", sum);
    }
    CHECK(ids[0] == 9 && lp[0].top[0].id == 9 && lp[0].top[4].id == 1 && lp[0].top[5].id == 3 &&
              lp[0].top[6].id == 6,
          "order: %d, ties %d %d %d", lp[0].top[0].id, lp[0].top[4].id, lp[0].top[5].id, lp[0].top[6].id);

    /* Large vocabulary: the top 20 are the 20 largest logprobs, n_logprobs 3 gives 3. */
    enum { B = 5000 };
    float *l = malloc(B * sizeof *l), *lc = malloc(B * sizeof *lc);
    sv_rng_t r;
    sv_rng_seed(&r, 99);
    random_logits(&r, l, B, 3.0, 4);
    sv_sample_params_t p = sv_sample_params_default();
    p.n_logprobs = 20;
    sv_sampler_t *s = make(B, &p);
    memcpy(lc, l, B * sizeof *l);
    sv_logprobs_t out;
    int32_t id;
    sv_error_t err;
    CHECK(sv_sampler_sample(s, lc, NULL, &id, &out, &err) == SV_OK && out.n_top == 20, "n_top %d", out.n_top);
    float floor20 = out.top[19].logprob;
    int above = 0;
    double zb = 0.0;
    for (int i = 0; i < B; i++) zb += exp((double)l[i]);
    for (int i = 0; i < B; i++) above += (float)(l[i] - log(zb)) > floor20 + 1e-5f;
    CHECK(above < 20, "%d logprobs above the 20th reported", above);
    CHECK(fabs(out.logprob - (l[id] - log(zb))) < 1e-5, "chosen logprob %g vs %g", (double)out.logprob,
          l[id] - log(zb));
    sv_sampler_destroy(s);
    p.n_logprobs = 0;
    s = make(B, &p);
    memcpy(lc, l, B * sizeof *l);
    CHECK(sv_sampler_sample(s, lc, NULL, &id, &out, &err) == SV_OK && out.n_top == 0, "n_logprobs 0");
    sv_sampler_destroy(s);
    free(l), free(lc);
}

/* ---- errors ------------------------------------------------------------------------- */

static void test_errors(void) {
    const float temps[2] = {0.0f, 0.9f};
    for (int t = 0; t < 2; t++) {
        sv_sample_params_t p = sv_sample_params_default();
        p.temperature = temps[t];
        p.top_k = 3;
        p.seed = 11;
        sv_sampler_t *s = make(70, &p), *fresh = make(70, &p);
        float l[70];
        uint32_t m[3] = {0, 0, ~0u ^ 0x3fu}; /* bits 64..69 clear; bits past 70 set (ignored) */
        int32_t id = 12345;
        sv_error_t err;
        for (int i = 0; i < 70; i++) l[i] = 1.0f;
        CHECK(sv_sampler_sample(s, l, m, &id, NULL, &err) == SV_ERR_EMPTY && id == 12345, "empty mask: %s",
              sv_status_name(err.code));
        for (int i = 0; i < 70; i++) l[i] = -INFINITY;
        CHECK(sv_sampler_sample(s, l, NULL, &id, NULL, &err) == SV_ERR_EMPTY, "all -inf");
        for (int i = 0; i < 70; i++) l[i] = (float)i;
        l[30] = NAN;
        CHECK(sv_sampler_sample(s, l, NULL, &id, NULL, &err) == SV_ERR_ARG && strstr(err.message, "NaN"),
              "NaN allowed logit: %s", err.message);
        for (int i = 0; i < 70; i++) l[i] = (float)i;
        l[31] = INFINITY;
        CHECK(sv_sampler_sample(s, l, NULL, &id, NULL, &err) == SV_ERR_ARG, "+inf allowed logit");
        /* A NaN under the mask is never looked at; and after the errors the
         * RNG is where a fresh sampler's is. */
        uint32_t m2[3] = {~0u ^ (1u << 30), ~0u, ~0u};
        for (int k = 0; k < 20; k++) {
            int32_t a = -1, b = -2;
            for (int i = 0; i < 70; i++) l[i] = (float)(i % 9) * 0.1f;
            l[30] = NAN;
            CHECK(sv_sampler_sample(s, l, m2, &a, NULL, &err) == SV_OK, "masked NaN: %s", err.message);
            for (int i = 0; i < 70; i++) l[i] = (float)(i % 9) * 0.1f;
            sv_sampler_sample(fresh, l, m2, &b, NULL, &err);
            CHECK(a == b && a != 30, "draw %d after errors: %d vs %d", k, a, b);
        }
        sv_sampler_destroy(s);
        sv_sampler_destroy(fresh);
    }
}

/* ---- a large vocabulary (timing printed, not asserted) ---------------------------------- */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void test_large(void) {
    enum { V = 152064, ITERS = 20 };
    float *l0 = malloc(V * sizeof *l0), *l = malloc(V * sizeof *l);
    uint32_t *m = malloc((V / 32) * sizeof *m);
    sv_rng_t r;
    sv_rng_seed(&r, 5);
    random_logits(&r, l0, V, 4.0, 0);
    for (uint32_t i = 0; i < V / 32; i++) m[i] = (uint32_t)sv_rng_next(&r);
    struct {
        const char *name;
        float t, top_p, min_p;
        int32_t top_k;
        int lp;
        bool flat, mask;
    } cfg[] = {
        {"greedy", 0.0f, 1.0f, 0.0f, 0, 0, false, false},
        {"greedy+logprobs", 0.0f, 1.0f, 0.0f, 0, 5, false, false},
        {"T=1", 1.0f, 1.0f, 0.0f, 0, 0, false, false},
        {"T=0.7 top_k=40", 0.7f, 1.0f, 0.0f, 40, 0, false, false},
        {"T=0.7 top_p=0.9", 0.7f, 0.9f, 0.0f, 0, 0, false, false},
        {"T=0.7 top_p=0.9 masked", 0.7f, 0.9f, 0.0f, 0, 0, false, true},
        {"T=1 min_p=0.05", 1.0f, 1.0f, 0.05f, 0, 0, false, false},
        {"flat top_p=0.99", 1.0f, 0.99f, 0.0f, 0, 0, true, false},
        {"flat top_k=1000", 1.0f, 1.0f, 0.0f, 1000, 0, true, false},
        {"T=1.5 top_k=50000 top_p=0.99", 1.5f, 0.99f, 0.0f, 50000, 0, false, false},
    };
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        sv_sample_params_t p = sv_sample_params_default();
        p.temperature = cfg[c].t, p.top_p = cfg[c].top_p, p.min_p = cfg[c].min_p, p.top_k = cfg[c].top_k;
        p.n_logprobs = cfg[c].lp;
        sv_sampler_t *s = make(V, &p);
        sv_logprobs_t lp;
        sv_error_t err;
        double best = 1e300; /* the fastest call: the machine may be shared */
        int fails = 0;
        for (int i = 0; i < ITERS; i++) {
            if (cfg[c].flat) {
                for (int j = 0; j < V; j++) l[j] = (float)(j % 3) * 1e-3f;
            } else {
                memcpy(l, l0, V * sizeof *l);
            }
            int32_t id;
            double t0 = now_us();
            sv_status st = sv_sampler_sample(s, l, cfg[c].mask ? m : NULL, &id, cfg[c].lp ? &lp : NULL, &err);
            best = fmin(best, now_us() - t0);
            if (st || (cfg[c].mask && !mask_get(m, (uint32_t)id)) || (cfg[c].top_k && cfg[c].flat && id >= 3000))
                fails++;
        }
        CHECK(fails == 0, "%s: %d failures", cfg[c].name, fails);
        printf("V=%d %-30s %8.0f us/call (fastest of %d)\n", V, cfg[c].name, best, ITERS);
        sv_sampler_destroy(s);
    }
    free(l0), free(l), free(m);
}

int main(void) {
    test_validation();
    test_greedy();
    test_against_reference();
    test_mask_every_setting();
    test_tie_boundaries();
    test_reproducible();
    test_penalties();
    test_bias();
    test_logprobs();
    test_errors();
    test_large();
    return test_summary("sampler: validation, greedy, truncation vs reference, masks, seeds, penalties, bias, "
                        "logprobs, errors");
}
