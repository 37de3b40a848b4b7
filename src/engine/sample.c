/* sample.c — the CPU sampler (see sample.h for the order of operations).
 *
 * Costs, for a vocabulary of V tokens and n allowed ones:
 *
 * - Bias and penalties touch only the biased, seen and generated tokens (the
 *   seen / generated sets are bitsets, scanned a word at a time).
 * - One pass over the row applies the mask, checks that allowed logits are
 *   finite, finds the argmax, keeps the top n_logprobs in a small sorted
 *   array, and copies the allowed (logit, id) pairs into the candidate
 *   scratch when anything but plain greedy is asked for. Greedy without
 *   logprobs stops there: no exp at all.
 * - Logprobs: one exp per allowed token for log Z, in id order.
 * - Weights: one exp per candidate left after top-k (at temperature 1 the
 *   logprob terms are reused), kept with the candidate.
 * - top-k: for k <= n/4, one read of the candidates against a k-heap
 *   (O(n + k log k log(n/k)) on typical rows, O(n log k) at worst); for
 *   larger k, quickselect (median of three) in expected O(n), falling back to
 *   heapsort after 2 log2 n rounds. No full sort.
 * - top-p: a histogram of weight by log-weight bucket drops every candidate
 *   that lies past a prefix already holding the mass (one pass), then a
 *   quickselect on mass finds the exact nucleus boundary in expected O(n)
 *   without sorting the nucleus. Even a flat 152k row costs a few passes.
 * - min-p: one filtering pass; the draw: at most one pass, stopping at the
 *   chosen token.
 *
 * At V = 152k, unmasked, on one shared 2-core x86-64 box (test_sample prints
 * its own): greedy 0.23 ms, temperature only 1.0 ms (mostly exp), top_k 40
 * 0.4 ms, top_p 0.9 1.3 ms, a flat row with top_p 0.99 2.1 ms.
 *
 * Determinism: every decision (which candidates survive, which one the draw
 * lands on) is made on values computed with IEEE basic operations in a fixed
 * order, so it is the same on every conforming platform. exp is the one
 * transcendental function on that path, so it is written here (det_exp)
 * instead of taken from libm; floating-point contraction (FMA) would change
 * results between targets, so it is switched off for clang (GCC in ISO C
 * mode, which the build uses, does not contract). The order of candidates
 * after selection depends only on the input, never on memory addresses. */
#include "sample.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

typedef struct {
    float logit;
    uint32_t id;
    double w; /* step 4's weight, once computed */
} cand_t;

struct sv_sampler {
    uint32_t vocab;
    uint32_t words;         /* (vocab + 31) / 32 */
    sv_sample_params_t p;   /* p.logit_bias points at bias */
    sv_logit_bias_t *bias;  /* (p.n_logit_bias) own copy, biases clamped */
    uint32_t *count;        /* (vocab) times each token was generated */
    uint32_t *gen_bits;     /* (words) count[id] > 0 */
    uint32_t *ctx_bits;     /* (words) seen in the context */
    cand_t *cand;           /* (vocab) scratch: allowed tokens with a finite logit */
    sv_rng_t rng;
};

/* ---- parameters --------------------------------------------------------- */

sv_sample_params_t sv_sample_params_default(void) {
    sv_sample_params_t p;
    memset(&p, 0, sizeof p);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repetition_penalty = 1.0f;
    return p;
}

__attribute__((format(printf, 3, 4))) static sv_status bad_param(sv_error_t *err, const char *param,
                                                                 const char *fmt, ...) {
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    sv_error_set(err, SV_ERR_ARG, -1, "%s: %s", param, what);
    if (err) snprintf(err->keyword, sizeof err->keyword, "%s", param);
    return SV_ERR_ARG;
}

/* Written so that NaN fails every range check. */
static bool in_range(float x, float lo, float hi) { return x >= lo && x <= hi; }

sv_status sv_sample_params_validate(const sv_sample_params_t *p, uint32_t vocab_size, sv_error_t *err) {
    if (!p) return sv_error_set(err, SV_ERR_ARG, -1, "sampling parameters: NULL");
    if (vocab_size == 0 || vocab_size > SV_SAMPLE_MAX_VOCAB)
        return sv_error_set(err, SV_ERR_ARG, -1, "sampling: vocabulary size %u is out of range", vocab_size);
    if (!in_range(p->temperature, 0.0f, 2.0f))
        return bad_param(err, "temperature", "must be between 0 and 2, got %g", (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return bad_param(err, "top_p", "must be greater than 0 and at most 1, got %g", (double)p->top_p);
    if (p->top_k < 0)
        return bad_param(err, "top_k", "must be 0 (off) or a positive count, got %d", (int)p->top_k);
    if (!in_range(p->min_p, 0.0f, 1.0f))
        return bad_param(err, "min_p", "must be between 0 and 1, got %g", (double)p->min_p);
    if (!(p->repetition_penalty > 0.0f && p->repetition_penalty <= 10.0f))
        return bad_param(err, "repetition_penalty", "must be greater than 0 and at most 10, got %g",
                         (double)p->repetition_penalty);
    if (!in_range(p->presence_penalty, -2.0f, 2.0f))
        return bad_param(err, "presence_penalty", "must be between -2 and 2, got %g", (double)p->presence_penalty);
    if (!in_range(p->frequency_penalty, -2.0f, 2.0f))
        return bad_param(err, "frequency_penalty", "must be between -2 and 2, got %g",
                         (double)p->frequency_penalty);
    if (p->n_logprobs < 0 || p->n_logprobs > SV_SAMPLE_MAX_LOGPROBS)
        return bad_param(err, "top_logprobs", "must be between 0 and %d, got %d", SV_SAMPLE_MAX_LOGPROBS,
                         (int)p->n_logprobs);
    if (p->n_logit_bias > SV_SAMPLE_MAX_LOGIT_BIAS)
        return bad_param(err, "logit_bias", "at most %d entries, got %u", SV_SAMPLE_MAX_LOGIT_BIAS,
                         p->n_logit_bias);
    if (p->n_logit_bias && !p->logit_bias)
        return bad_param(err, "logit_bias", "NULL with %u entries", p->n_logit_bias);
    for (uint32_t i = 0; i < p->n_logit_bias; i++) {
        const sv_logit_bias_t *b = &p->logit_bias[i];
        if (b->id < 0 || (uint32_t)b->id >= vocab_size)
            return bad_param(err, "logit_bias", "token id %d is out of range (vocabulary size %u)", (int)b->id,
                             vocab_size);
        if (isnan(b->bias)) return bad_param(err, "logit_bias", "the bias for token %d is NaN", (int)b->id);
        /* At most 1024 entries: the quadratic check costs well under a millisecond. */
        for (uint32_t j = 0; j < i; j++)
            if (p->logit_bias[j].id == b->id)
                return bad_param(err, "logit_bias", "token id %d appears twice", (int)b->id);
    }
    return SV_OK;
}

/* ---- create / state ----------------------------------------------------- */

sv_status sv_sampler_create(uint32_t vocab_size, const sv_sample_params_t *params, sv_sampler_t **out,
                            sv_error_t *err) {
    if (!out) return sv_error_set(err, SV_ERR_ARG, -1, "sv_sampler_create: out is NULL");
    *out = NULL;
    sv_status st = sv_sample_params_validate(params, vocab_size, err);
    if (st) return st;
    sv_sampler_t *s = calloc(1, sizeof *s);
    if (!s) goto fail;
    s->vocab = vocab_size;
    s->words = (uint32_t)(((uint64_t)vocab_size + 31) / 32);
    s->p = *params;
    if (params->n_logit_bias) {
        s->bias = malloc(params->n_logit_bias * sizeof *s->bias);
        if (!s->bias) goto fail;
        for (uint32_t i = 0; i < params->n_logit_bias; i++) {
            s->bias[i] = params->logit_bias[i];
            s->bias[i].bias = fminf(100.0f, fmaxf(-100.0f, s->bias[i].bias)); /* as OpenAI */
        }
    }
    s->p.logit_bias = s->bias;
    s->count = calloc(vocab_size, sizeof *s->count);
    s->gen_bits = calloc(s->words, sizeof *s->gen_bits);
    s->ctx_bits = calloc(s->words, sizeof *s->ctx_bits);
    s->cand = malloc((size_t)vocab_size * sizeof *s->cand);
    if (!s->count || !s->gen_bits || !s->ctx_bits || !s->cand) goto fail;
    sv_rng_seed(&s->rng, params->seed);
    *out = s;
    return SV_OK;
fail:
    sv_sampler_destroy(s);
    return sv_error_set(err, SV_ERR_NOMEM, -1, "sampler: out of memory (vocabulary of %u)", vocab_size);
}

void sv_sampler_destroy(sv_sampler_t *s) {
    if (!s) return;
    free(s->bias);
    free(s->count);
    free(s->gen_bits);
    free(s->ctx_bits);
    free(s->cand);
    free(s);
}

void sv_sampler_reset(sv_sampler_t *s) {
    memset(s->count, 0, (size_t)s->vocab * sizeof *s->count);
    memset(s->gen_bits, 0, (size_t)s->words * sizeof *s->gen_bits);
    memset(s->ctx_bits, 0, (size_t)s->words * sizeof *s->ctx_bits);
    sv_rng_seed(&s->rng, s->p.seed);
}

static sv_status bad_id(const sv_sampler_t *s, int32_t id, const char *what, sv_error_t *err) {
    return sv_error_set(err, SV_ERR_ARG, -1, "%s: token id %d is out of range (vocabulary size %u)", what, (int)id,
                        s->vocab);
}

sv_status sv_sampler_add_context(sv_sampler_t *s, const int32_t *ids, uint32_t n, sv_error_t *err) {
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= s->vocab) return bad_id(s, ids[i], "sampler context", err);
    for (uint32_t i = 0; i < n; i++)
        s->ctx_bits[(uint32_t)ids[i] >> 5] |= 1u << ((uint32_t)ids[i] & 31);
    return SV_OK;
}

sv_status sv_sampler_accept(sv_sampler_t *s, int32_t id, sv_error_t *err) {
    if (id < 0 || (uint32_t)id >= s->vocab) return bad_id(s, id, "sampler accept", err);
    uint32_t u = (uint32_t)id;
    if (s->count[u] < UINT32_MAX) s->count[u]++;
    s->gen_bits[u >> 5] |= 1u << (u & 31);
    return SV_OK;
}

bool sv_sampler_plain(const sv_sampler_t *s, float *t, int32_t *k, float *p, float *mp) {
    const sv_sample_params_t *q = &s->p;
    if (q->n_logit_bias || q->repetition_penalty != 1.0f || q->presence_penalty != 0.0f ||
        q->frequency_penalty != 0.0f || q->n_logprobs)
        return false;
    *t = q->temperature;
    *k = q->top_k;
    *p = q->top_p;
    *mp = q->min_p;
    return true;
}

uint64_t sv_sampler_peek_draw(const sv_sampler_t *s) {
    sv_rng_t r = s->rng;
    return sv_rng_next(&r);
}

void sv_sampler_take_draw(sv_sampler_t *s) {
    if (s->p.temperature != 0.0f) (void)sv_rng_next(&s->rng);
}

sv_status sv_sampler_unaccept(sv_sampler_t *s, int32_t id, sv_error_t *err) {
    if (id < 0 || (uint32_t)id >= s->vocab) return bad_id(s, id, "sampler unaccept", err);
    uint32_t u = (uint32_t)id;
    if (s->count[u] == 0)
        return sv_error_set(err, SV_ERR_ARG, -1, "sampler unaccept: token %d was not accepted", (int)id);
    if (--s->count[u] == 0) s->gen_bits[u >> 5] &= ~(1u << (u & 31));
    return SV_OK;
}

/* ---- a deterministic exp -------------------------------------------------- */

/* e^x for x <= 0, to about 1e-15 relative, from + - * and exact scaling by
 * powers of two only, so every platform gets the same bits (libm's exp is
 * not correctly rounded and differs between C libraries).
 *
 * x = (64 e + j) ln2/64 + r with 0 <= j < 64 and |r| <= ln2/128, so
 * e^x = 2^e * 2^(j/64) * e^r: 2^(j/64) from the table (correctly rounded,
 * generated with 80-digit decimal arithmetic), e^r from its Taylor series to
 * r^5 (truncation error below 4e-17). ln2/64 is split into a high part with
 * 32 significant bits (k * LN2_64_HI is exact for |k| < 2^21) and the rest.
 * Results below e^-707 (and -inf) are 0, which keeps 2^e normal. */
#define INV_LN2_64 0x1.71547652b82fep+6 /* 64 / ln2 */
#define LN2_64_HI 0x1.62e42fee00000p-7
#define LN2_64_LO 0x1.a39ef35793c76p-39
static const double EXP2_64[64] = {
    0x1.0000000000000p+0, 0x1.02c9a3e778061p+0, 0x1.059b0d3158574p+0, 0x1.0874518759bc8p+0,
    0x1.0b5586cf9890fp+0, 0x1.0e3ec32d3d1a2p+0, 0x1.11301d0125b51p+0, 0x1.1429aaea92de0p+0,
    0x1.172b83c7d517bp+0, 0x1.1a35beb6fcb75p+0, 0x1.1d4873168b9aap+0, 0x1.2063b88628cd6p+0,
    0x1.2387a6e756238p+0, 0x1.26b4565e27cddp+0, 0x1.29e9df51fdee1p+0, 0x1.2d285a6e4030bp+0,
    0x1.306fe0a31b715p+0, 0x1.33c08b26416ffp+0, 0x1.371a7373aa9cbp+0, 0x1.3a7db34e59ff7p+0,
    0x1.3dea64c123422p+0, 0x1.4160a21f72e2ap+0, 0x1.44e086061892dp+0, 0x1.486a2b5c13cd0p+0,
    0x1.4bfdad5362a27p+0, 0x1.4f9b2769d2ca7p+0, 0x1.5342b569d4f82p+0, 0x1.56f4736b527dap+0,
    0x1.5ab07dd485429p+0, 0x1.5e76f15ad2148p+0, 0x1.6247eb03a5585p+0, 0x1.6623882552225p+0,
    0x1.6a09e667f3bcdp+0, 0x1.6dfb23c651a2fp+0, 0x1.71f75e8ec5f74p+0, 0x1.75feb564267c9p+0,
    0x1.7a11473eb0187p+0, 0x1.7e2f336cf4e62p+0, 0x1.82589994cce13p+0, 0x1.868d99b4492edp+0,
    0x1.8ace5422aa0dbp+0, 0x1.8f1ae99157736p+0, 0x1.93737b0cdc5e5p+0, 0x1.97d829fde4e50p+0,
    0x1.9c49182a3f090p+0, 0x1.a0c667b5de565p+0, 0x1.a5503b23e255dp+0, 0x1.a9e6b5579fdbfp+0,
    0x1.ae89f995ad3adp+0, 0x1.b33a2b84f15fbp+0, 0x1.b7f76f2fb5e47p+0, 0x1.bcc1e904bc1d2p+0,
    0x1.c199bdd85529cp+0, 0x1.c67f12e57d14bp+0, 0x1.cb720dcef9069p+0, 0x1.d072d4a07897cp+0,
    0x1.d5818dcfba487p+0, 0x1.da9e603db3285p+0, 0x1.dfc97337b9b5fp+0, 0x1.e502ee78b3ff6p+0,
    0x1.ea4afa2a490dap+0, 0x1.efa1bee615a27p+0, 0x1.f50765b6e4540p+0, 0x1.fa7c1819e90d8p+0,
};

static inline double det_exp(double x) {
    if (!(x >= -707.0)) return 0.0;
    /* m = round(-x * 64 / ln2) >= 0 (truncating a positive value floors it);
     * k = -m = 64 e + j with e = -ceil(m / 64) and j = 64 ceil(m / 64) - m. */
    uint64_t m = (uint64_t)(0.5 - x * INV_LN2_64);
    uint64_t q = (m + 63) >> 6;
    double k = -(double)m;
    double r = (x - k * LN2_64_HI) - k * LN2_64_LO;
    double p = 1.0 / 120;
    p = 1.0 / 24 + r * p;
    p = 1.0 / 6 + r * p;
    p = 0.5 + r * p;
    p = 1.0 + r * p;
    p = 1.0 + r * p;
    uint64_t bits = (uint64_t)(1023 - q) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return EXP2_64[(q << 6) - m] * p * scale;
}

/* ---- selection: "a before b" is a total order (logit descending, then id) */

static inline bool before(cand_t a, cand_t b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

static inline void swap_c(cand_t *a, cand_t *b) {
    cand_t t = *a;
    *a = *b;
    *b = t;
}

static void insertion_sort(cand_t *a, size_t n) {
    for (size_t i = 1; i < n; i++) {
        cand_t x = a[i];
        size_t j = i;
        for (; j > 0 && before(x, a[j - 1]); j--) a[j] = a[j - 1];
        a[j] = x;
    }
}

/* Heap whose root is the element that comes last; heap_sort leaves a[] in
 * "before" order (best first). */
static void sift_down(cand_t *a, size_t root, size_t n) {
    for (;;) {
        size_t c = 2 * root + 1;
        if (c >= n) return;
        if (c + 1 < n && before(a[c], a[c + 1])) c++;
        if (!before(a[root], a[c])) return;
        swap_c(&a[root], &a[c]);
        root = c;
    }
}

static void heap_sort(cand_t *a, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift_down(a, i, n);
    for (size_t end = n; end > 1; end--) {
        swap_c(&a[0], &a[end - 1]);
        sift_down(a, 0, end - 1);
    }
}

/* Moves the k best of a[0..n) to a[0..k) (1 <= k <= n), for small k: a[0..k)
 * is kept as a heap rooted at its worst element, and each later element
 * better than the root replaces it. On logits in no particular order few
 * elements get past the root, so this is one read of a[k..n); the worst case
 * (ascending input) is O(n log k). */
static void heap_top(cand_t *a, size_t n, size_t k) {
    for (size_t i = k / 2; i-- > 0;) sift_down(a, i, k);
    for (size_t i = k; i < n; i++)
        if (before(a[i], a[0])) {
            a[0] = a[i];
            sift_down(a, 0, k);
        }
}

/* Partitions a[0..n) (n >= 3) around the median of a[0], a[n/2], a[n-1];
 * returns q with a[0..q) before a[q] and a[q] before a(q..n). */
static size_t partition(cand_t *a, size_t n) {
    size_t mid = n / 2;
    if (before(a[mid], a[0])) swap_c(&a[mid], &a[0]);
    if (before(a[n - 1], a[0])) swap_c(&a[n - 1], &a[0]);
    if (before(a[n - 1], a[mid])) swap_c(&a[n - 1], &a[mid]);
    swap_c(&a[mid], &a[n - 1]);
    cand_t pivot = a[n - 1];
    size_t store = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (before(a[i], pivot)) swap_c(&a[i], &a[store++]);
    swap_c(&a[store], &a[n - 1]);
    return store;
}

static int depth_limit(size_t n) {
    int d = 0;
    while (n > 1) {
        n >>= 1;
        d += 2;
    }
    return d + 2;
}

/* Moves the k best of a[0..n) to a[0..k), in no particular order (0 <= k <= n). */
static void select_top(cand_t *a, size_t n, size_t k) {
    int depth = depth_limit(n);
    while (k > 0 && k < n) {
        if (n <= 16) {
            insertion_sort(a, n);
            return;
        }
        if (depth-- == 0) {
            heap_sort(a, n);
            return;
        }
        size_t q = partition(a, n);
        if (k == q || k == q + 1) return;
        if (k < q) {
            n = q;
        } else {
            a += q + 1;
            n -= q + 1;
            k -= q + 1;
        }
    }
}

static void sort_range(cand_t *a, size_t n, int depth) {
    while (n > 16) {
        if (depth-- == 0) {
            heap_sort(a, n);
            return;
        }
        size_t q = partition(a, n);
        if (q < n - q - 1) { /* recurse into the smaller side: stack depth O(log n) */
            sort_range(a, q, depth);
            a += q + 1;
            n -= q + 1;
        } else {
            sort_range(a + q + 1, n - q - 1, depth);
            n = q;
        }
    }
    insertion_sort(a, n);
}

/* ---- sampling ------------------------------------------------------------ */

/* Bias, then penalties, in place (steps 1 and 2). */
static void bias_and_penalize(const sv_sampler_t *s, float *logits) {
    const sv_sample_params_t *p = &s->p;
    for (uint32_t i = 0; i < p->n_logit_bias; i++) logits[s->bias[i].id] += s->bias[i].bias;
    bool rep = p->repetition_penalty != 1.0f;
    bool pf = p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
    if (!rep && !pf) return;
    float r = p->repetition_penalty;
    for (uint32_t w = 0; w < s->words; w++) {
        uint32_t gen = s->gen_bits[w];
        uint32_t seen = rep ? gen | s->ctx_bits[w] : gen;
        while (seen) {
            uint32_t b = (uint32_t)__builtin_ctz(seen);
            seen &= seen - 1;
            uint32_t id = w * 32 + b;
            float l = logits[id];
            if (rep) l = l > 0.0f ? l / r : l * r;
            if (pf && (gen >> b & 1))
                l -= p->presence_penalty + p->frequency_penalty * (float)s->count[id];
            logits[id] = l;
        }
    }
}

/* Inserts c into top[0..*n), kept sorted best first, capacity cap. */
static void top_insert(cand_t *top, int *n, int cap, cand_t c) {
    if (*n == cap && !before(c, top[cap - 1])) return;
    int i = *n < cap ? (*n)++ : cap - 1;
    for (; i > 0 && before(c, top[i - 1]); i--) top[i] = top[i - 1];
    top[i] = c;
}

/* Steps 1-3 and the scan: applies bias, penalties and mask to logits; finds
 * the best allowed logit (*maxl) and its lowest id (*arg); when want_cand,
 * copies the allowed finite (logit, id) pairs to s->cand[0..*n) in id order;
 * keeps the n_top best in top[0..*top_n). */
static sv_status scan(sv_sampler_t *s, float *logits, const uint32_t *allow_mask, bool want_cand, int n_top,
                      cand_t *top, int *top_n, float *maxl_out, uint32_t *arg_out, size_t *n_out, sv_error_t *err) {
    bias_and_penalize(s, logits);
    float maxl = -INFINITY;
    uint32_t arg = UINT32_MAX;
    size_t n = 0;
    *top_n = 0;
    for (uint32_t w = 0; w < s->words; w++) {
        uint32_t bits = allow_mask ? allow_mask[w] : ~0u;
        uint32_t base = w * 32, end = s->vocab - base < 32 ? s->vocab : base + 32;
        for (uint32_t id = base; id < end; id++) {
            if (!(bits >> (id - base) & 1)) {
                logits[id] = -INFINITY;
                continue;
            }
            float l = logits[id];
            if (isnan(l) || l == INFINITY)
                return sv_error_set(err, SV_ERR_ARG, -1, "sampler: the logit of allowed token %u is %s", id,
                                    isnan(l) ? "NaN" : "+inf");
            if (l == -INFINITY) continue;
            if (l > maxl) {
                maxl = l;
                arg = id;
            }
            cand_t c = {l, id, 0.0};
            if (want_cand) s->cand[n++] = c;
            if (n_top) top_insert(top, top_n, n_top, c);
        }
    }
    if (arg == UINT32_MAX)
        return sv_error_set(err, SV_ERR_EMPTY, -1,
                            "sampler: no token is allowed (the mask is empty or every allowed logit is -inf)");
    *maxl_out = maxl;
    *arg_out = arg;
    *n_out = n;
    return SV_OK;
}

/* Step 4's weight: w in [0, 1], exactly 1 for the best token. */
static inline double weight(float logit, float maxl, double inv_t) {
    return det_exp(((double)logit - (double)maxl) * inv_t);
}

/* Top-p on many candidates: bucket them by (max - logit) / temperature
 * (quarter units of log-weight; past 64, one last bucket), add up each
 * bucket's weight, and keep only the buckets up to the first where the
 * running mass reaches target. The bucket is a monotone function of the
 * logit, so every kept token comes before every dropped one in the
 * (logit descending, id) order, and the dropped ones lie past a prefix whose
 * mass is already >= target: none of them can be in the nucleus. What is left
 * is usually the nucleus and part of one bucket, which the exact
 * select-and-sort then walks. Order of the kept candidates is preserved. */
#define NUCLEUS_SCAN_MIN 512
#define NUCLEUS_BUCKETS 256

static inline size_t nucleus_bucket(float logit, float maxl, double scale) {
    double x = ((double)maxl - (double)logit) * scale;
    return x < (double)(NUCLEUS_BUCKETS - 1) ? (size_t)x : NUCLEUS_BUCKETS - 1;
}

static size_t nucleus_prefilter(cand_t *c, size_t n, float maxl, float temperature, double target) {
    const double scale = 4.0 / (double)temperature;
    double hist[NUCLEUS_BUCKETS] = {0};
    for (size_t i = 0; i < n; i++) hist[nucleus_bucket(c[i].logit, maxl, scale)] += c[i].w;
    double cum = 0.0;
    size_t last = NUCLEUS_BUCKETS - 1;
    for (size_t b = 0; b < NUCLEUS_BUCKETS; b++) {
        cum += hist[b];
        if (cum >= target) {
            last = b;
            break;
        }
    }
    if (last == NUCLEUS_BUCKETS - 1) return n;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (nucleus_bucket(c[i].logit, maxl, scale) <= last) c[kept++] = c[i];
    return kept;
}

/* The nucleus: moves the shortest prefix of the (logit descending, id) order
 * whose weight reaches target to c[0..keep) and returns keep. Quickselect
 * on mass: partition, add up the weight in front of the pivot, and go
 * left (the prefix ends in front) or right (the front and the pivot are all
 * in), so the nucleus is found in expected O(n) without sorting it. Sums of
 * whole parts replace a running sum in sorted order; they differ from it only
 * by rounding. Small ranges, and ranges past the depth limit, are sorted and
 * walked. */
static size_t nucleus_select(cand_t *c, size_t n, double target) {
    size_t lo = 0, hi = n;
    double acc = 0.0; /* weight of c[0..lo), all in the nucleus */
    int depth = depth_limit(n);
    while (hi - lo > 16 && depth-- > 0) {
        size_t q = lo + partition(c + lo, hi - lo);
        double front = 0.0;
        for (size_t i = lo; i < q; i++) front += c[i].w;
        if (acc + front >= target) {
            hi = q;
        } else if (acc + front + c[q].w >= target) {
            return q + 1;
        } else {
            acc += front + c[q].w;
            lo = q + 1;
        }
    }
    sort_range(c + lo, hi - lo, depth_limit(hi - lo));
    for (size_t i = lo; i < hi; i++) {
        acc += c[i].w;
        if (acc >= target) return i + 1;
    }
    return hi; /* rounding left the sum just short: all of [0, hi) */
}

/* Steps 4-7 on s->cand[0..n) (temperature > 0; weights_ready: c[i].w is
 * already set): returns the survivors' count, leaves them first with their
 * weights, and sets *mass_out to the sum of those weights added in order. */
static size_t truncate(sv_sampler_t *s, size_t n, float maxl, bool weights_ready, double *mass_out) {
    const sv_sample_params_t *p = &s->p;
    cand_t *c = s->cand;

    if (p->top_k > 0 && (size_t)p->top_k < n) { /* step 5 (order-only: before the weights) */
        size_t k = (size_t)p->top_k;
        if (k <= n / 4) heap_top(c, n, k);
        else select_top(c, n, k);
        n = k;
    }
    double mass = 0.0;
    if (weights_ready) {
        for (size_t i = 0; i < n; i++) mass += c[i].w;
    } else {
        const double inv_t = 1.0 / (double)p->temperature;
        for (size_t i = 0; i < n; i++) {
            c[i].w = weight(c[i].logit, maxl, inv_t);
            mass += c[i].w;
        }
    }
    if (p->top_p < 1.0f) { /* step 6 */
        const double target = (double)p->top_p * mass;
        if (n > NUCLEUS_SCAN_MIN) n = nucleus_prefilter(c, n, maxl, p->temperature, target);
        n = nucleus_select(c, n, target);
        mass = 0.0;
        for (size_t i = 0; i < n; i++) mass += c[i].w;
    }
    if (p->min_p > 0.0f) { /* step 7 */
        size_t kept = 0;
        mass = 0.0;
        for (size_t i = 0; i < n; i++)
            if (c[i].w >= (double)p->min_p) {
                c[kept++] = c[i];
                mass += c[i].w;
            }
        n = kept;
    }
    *mass_out = mass;
    return n;
}

/* log Z over the candidates s->cand[0..n) (in id order), whose weights it
 * sets to exp(logit - maxl). */
static double log_partition(sv_sampler_t *s, size_t n, float maxl) {
    double z = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = det_exp((double)s->cand[i].logit - (double)maxl);
        s->cand[i].w = e;
        z += e;
    }
    return (double)maxl + log(z);
}

static void fill_logprobs(const float *logits, uint32_t chosen, const cand_t *top, int top_n, double log_z,
                          sv_logprobs_t *out_lp) {
    out_lp->logprob = (float)((double)logits[chosen] - log_z);
    out_lp->n_top = top_n;
    for (int i = 0; i < top_n; i++) {
        out_lp->top[i].id = (int32_t)top[i].id;
        out_lp->top[i].logprob = (float)((double)top[i].logit - log_z);
    }
}

sv_status sv_sampler_sample(sv_sampler_t *s, float *logits, const uint32_t *allow_mask, int32_t *out_id,
                            sv_logprobs_t *out_lp, sv_error_t *err) {
    const bool greedy = s->p.temperature == 0.0f;
    cand_t top[SV_SAMPLE_MAX_LOGPROBS];
    int top_n;
    float maxl;
    uint32_t arg;
    size_t n;
    sv_status st = scan(s, logits, allow_mask, !greedy || out_lp, out_lp ? s->p.n_logprobs : 0, top, &top_n, &maxl,
                        &arg, &n, err);
    if (st) return st;

    /* log Z of the logprob distribution, summed in id order (before
     * truncation reorders the candidates). At temperature 1 its terms are
     * the sampling weights, kept for step 4. */
    double log_z = 0.0;
    const bool t1 = s->p.temperature == 1.0f;
    if (out_lp) log_z = log_partition(s, n, maxl);

    uint32_t chosen = arg;
    if (!greedy) {
        double mass;
        n = truncate(s, n, maxl, out_lp && t1, &mass);
        const cand_t *c = s->cand;
        /* Step 8: u in [0, 1) with 53 random bits; the first candidate whose
         * running sum passes u * mass. The sum repeats mass's own order, so
         * it can only miss when u * mass rounds up to mass: then the last
         * candidate with a weight takes it. */
        const double target = (double)(sv_rng_next(&s->rng) >> 11) * 0x1.0p-53 * mass;
        double cum = 0.0;
        for (size_t i = 0; i < n; i++) {
            if (c[i].w > 0.0) chosen = c[i].id;
            cum += c[i].w;
            if (cum > target) break;
        }
    }

    *out_id = (int32_t)chosen;
    if (out_lp) fill_logprobs(logits, chosen, top, top_n, log_z, out_lp);
    return SV_OK;
}

sv_status sv_sampler_logprobs(sv_sampler_t *s, float *logits, const uint32_t *allow_mask, int32_t id,
                              sv_logprobs_t *out_lp, sv_error_t *err) {
    if (id < 0 || (uint32_t)id >= s->vocab) return bad_id(s, id, "sampler logprobs", err);
    cand_t top[SV_SAMPLE_MAX_LOGPROBS];
    int top_n;
    float maxl;
    uint32_t arg;
    size_t n;
    /* The same scan and the same log Z as sv_sampler_sample with out_lp. */
    sv_status st = scan(s, logits, allow_mask, true, s->p.n_logprobs, top, &top_n, &maxl, &arg, &n, err);
    if (st) return st;
    fill_logprobs(logits, (uint32_t)id, top, top_n, log_partition(s, n, maxl), out_lp);
    return SV_OK;
}

sv_status sv_sampler_probs(sv_sampler_t *s, float *logits, const uint32_t *allow_mask, double *probs,
                           sv_error_t *err) {
    const bool greedy = s->p.temperature == 0.0f;
    cand_t top[1];
    int top_n;
    float maxl;
    uint32_t arg;
    size_t n;
    sv_status st = scan(s, logits, allow_mask, !greedy, 0, top, &top_n, &maxl, &arg, &n, err);
    if (st) return st;
    memset(probs, 0, (size_t)s->vocab * sizeof *probs);
    if (greedy) {
        probs[arg] = 1.0;
        return SV_OK;
    }
    double mass;
    n = truncate(s, n, maxl, false, &mass);
    for (size_t i = 0; i < n; i++) probs[s->cand[i].id] = s->cand[i].w / mass;
    return SV_OK;
}
