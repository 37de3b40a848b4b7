/* test_e2e.c — the same model through the forward pass on the CPU and CUDA
 * backends: logits within a stated tolerance, and the same greedy token
 * wherever the CPU's top-two margin exceeds that tolerance.
 *
 *     test_e2e MODEL [--prompt 61] [--decode 12] [--seqs 6] [--tol 0.01] [--threads N]
 *              [--bf16]
 *
 * --bf16 runs the CUDA backend in bf16 mode (weights and activations
 * rounded to bf16 for the tensor-core products, sv_cuda_config_t): the
 * tolerance must then allow for bf16's precision (about 3 significant
 * digits per product).
 * MODEL is a GGUF file or an HF directory (make_random_llama writes BF16
 * ones, so both backends widen the same bf16-rounded weights to float32).
 * Two parts:
 * 1. One sequence (sv_llama_forward): a random prompt of --prompt tokens
 *    with every row's logits, then --decode one-token steps, each fed the
 *    CPU's greedy token (so both backends see the same inputs).
 * 2. A ragged batch on CUDA (sv_llama_forward_batch on a paged cache with
 *    shuffled block tables): --seqs sequences of different prompt lengths
 *    prefilled in one call, then batched decode steps; each sequence's
 *    logits are compared with the CPU's single-sequence run of the same
 *    tokens.
 * Tolerance: |logit_cuda - logit_cpu| <= tol for every logit (absolute;
 * the models' logits have a standard deviation of a few units). Prints the
 * worst difference and the greedy agreement; exits 1 on failure, 2 when no
 * CUDA device is present. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/backend/cpu.h"
#include "src/backend/cuda.h"
#include "src/model/llama.h"
#include "util/clock.h"
#include "util/rng.h"
#include "tests/unit/test.h"

static double sv_now_s(void) { return (double)sv_now_ns() * 1e-9; }

static double TOL = 0.01;
static double worst, logit_sd;
static int margin_checked, margin_wrong, argmax_same, argmax_rows;

static int32_t argmax2(const float *l, int32_t V, float *margin) {
    int32_t a = 0;
    for (int32_t i = 1; i < V; i++)
        if (l[i] > l[a])
            a = i;
    float second = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (i != a && l[i] > second)
            second = l[i];
    *margin = l[a] - second;
    return a;
}

/* Compares one row of logits; returns the CPU's greedy token. */
static int32_t compare_row(const char *what, int row, const float *cpu, const float *gpu,
                           int32_t V) {
    double d = 0.0, s2 = 0.0;
    int32_t at = 0;
    for (int32_t i = 0; i < V; i++) {
        double e = fabs((double)cpu[i] - gpu[i]);
        if (!(e <= d)) { /* NaN counts as the worst */
            d = e;
            at = i;
        }
        s2 += (double)cpu[i] * cpu[i];
    }
    logit_sd = fmax(logit_sd, sqrt(s2 / V));
    if (!(d <= worst))
        worst = d;
    CHECK(d <= TOL, "%s row %d: |Δ| %g at token %d (cpu %g, cuda %g) > tolerance %g", what, row,
          d, at, cpu[at], gpu[at], TOL);
    float m, mg;
    int32_t a = argmax2(cpu, V, &m), b = argmax2(gpu, V, &mg);
    argmax_rows++;
    argmax_same += a == b;
    if (m > TOL) {
        margin_checked++;
        if (a != b) {
            margin_wrong++;
            CHECK(0, "%s row %d: greedy token cpu %d cuda %d with a top-two margin of %g", what,
                  row, a, b, m);
        }
    }
    return a;
}

typedef struct run {
    sv_llama_t *cpu, *gpu;
    int32_t V;
    sv_rng_t rng;
} run_t;

/* Part 1: one sequence. */
static void single(run_t *r, int32_t P, int32_t G) {
    const int32_t V = r->V, ctx = P + G + 1;
    sv_error_t err;
    sv_llama_state_t *sc = NULL, *sg = NULL;
    if (sv_llama_state_create(r->cpu, ctx, 64, &sc, &err) ||
        sv_llama_state_create(r->gpu, ctx, 64, &sg, &err)) {
        CHECK(0, "state: %s", err.message);
        return;
    }
    int32_t *tok = malloc((size_t)ctx * sizeof *tok), *pos = malloc((size_t)ctx * sizeof *pos);
    for (int32_t i = 0; i < ctx; i++) {
        tok[i] = (int32_t)sv_rng_below(&r->rng, (uint32_t)V);
        pos[i] = i;
    }
    float *lc = malloc((size_t)P * V * sizeof(float)), *lg = malloc((size_t)P * V * sizeof(float));
    double t0 = sv_now_s();
    sv_status s1 = sv_llama_forward(r->cpu, sc, tok, pos, P, SV_LLAMA_LOGITS_ALL, lc, &err);
    double t1 = sv_now_s();
    sv_status s2 =
        s1 ? s1 : sv_llama_forward(r->gpu, sg, tok, pos, P, SV_LLAMA_LOGITS_ALL, lg, &err);
    double t2 = sv_now_s();
    CHECK(!s1 && !s2, "prompt: %s", err.message);
    if (!s1 && !s2) {
        printf("  prompt of %d tokens, all logits: cpu %.2f s, cuda %.3f s\n", P, t1 - t0, t2 - t1);
        for (int32_t i = 0; i < P; i++)
            compare_row("prompt", i, lc + (size_t)i * V, lg + (size_t)i * V, V);
        int32_t next = compare_row("prompt (last)", P - 1, lc + (size_t)(P - 1) * V,
                                   lg + (size_t)(P - 1) * V, V);
        for (int32_t g = 0; g < G; g++) {
            int32_t p = P + g;
            tok[p] = next;
            if ((s1 = sv_llama_forward(r->cpu, sc, &tok[p], &pos[p], 1, SV_LLAMA_LOGITS_LAST, lc,
                                       &err)) ||
                (s2 = sv_llama_forward(r->gpu, sg, &tok[p], &pos[p], 1, SV_LLAMA_LOGITS_LAST, lg,
                                       &err))) {
                CHECK(0, "decode step %d: %s", g, err.message);
                break;
            }
            next = compare_row("decode", p, lc, lg, V);
        }
    }
    free(lc), free(lg), free(tok), free(pos);
    sv_llama_state_destroy(sc);
    sv_llama_state_destroy(sg);
}

/* Part 2: a ragged batch on CUDA against single sequences on the CPU. */
static void ragged(run_t *r, int32_t S, int32_t P, int32_t D) {
    const int32_t V = r->V, BS = SV_LLAMA_KV_BLOCK;
    sv_error_t err;
    int32_t len[64], total = 0;
    for (int32_t s = 0; s < S; s++) {
        len[s] = 1 + (int32_t)sv_rng_below(&r->rng, (uint32_t)P);
        total += len[s];
    }
    int32_t per = (P + D + BS - 1) / BS, n_blocks = S * per + 5;
    sv_llama_kv_t *kv = NULL;
    if (sv_llama_kv_create(r->gpu, n_blocks, total, &kv, &err)) {
        CHECK(0, "kv: %s", err.message);
        return;
    }
    /* shuffled physical blocks */
    uint32_t *perm = malloc((size_t)n_blocks * sizeof *perm);
    for (int32_t i = 0; i < n_blocks; i++)
        perm[i] = (uint32_t)i;
    for (int32_t i = n_blocks - 1; i > 0; i--) {
        int32_t j = (int32_t)sv_rng_below(&r->rng, (uint32_t)i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    sv_llama_seq_t seqs[64];
    int32_t (*toks)[1024] = calloc((size_t)S, sizeof *toks);
    for (int32_t s = 0; s < S; s++) {
        seqs[s].blocks = perm + (size_t)s * per;
        seqs[s].n_blocks = per;
        for (int32_t i = 0; i < len[s]; i++)
            toks[s][i] = (int32_t)sv_rng_below(&r->rng, (uint32_t)V);
    }
    /* The CPU's references: each sequence alone, prompt then D decode steps
     * fed its own greedy tokens. ref[s][d]: logits before decode token d. */
    float *ref = malloc((size_t)S * (D + 1) * V * sizeof(float));
    int32_t pos[1024];
    for (int32_t i = 0; i < 1024; i++)
        pos[i] = i;
    for (int32_t s = 0; s < S; s++) {
        sv_llama_state_t *st = NULL;
        if (sv_llama_state_create(r->cpu, len[s] + D + 1, 64, &st, &err)) {
            CHECK(0, "cpu state: %s", err.message);
            goto out;
        }
        float *row = ref + (size_t)s * (D + 1) * V;
        sv_status e = sv_llama_forward(r->cpu, st, toks[s], pos, len[s], SV_LLAMA_LOGITS_LAST,
                                       row, &err);
        for (int32_t d = 0; !e && d < D; d++) {
            float m;
            int32_t p = len[s] + d;
            toks[s][p] = argmax2(row + (size_t)d * V, V, &m);
            e = sv_llama_forward(r->cpu, st, &toks[s][p], &pos[p], 1, SV_LLAMA_LOGITS_LAST,
                                 row + (size_t)(d + 1) * V, &err);
        }
        sv_llama_state_destroy(st);
        if (e) {
            CHECK(0, "cpu reference: %s", err.message);
            goto out;
        }
    }
    /* CUDA: every prompt in one call, then S-row decode steps. */
    int32_t *bt = malloc((size_t)total * sizeof *bt), *bp = malloc((size_t)total * sizeof *bp);
    int32_t *bs = malloc((size_t)total * sizeof *bs), *lr = malloc((size_t)S * sizeof *lr);
    float *lg = malloc((size_t)S * V * sizeof(float));
    int32_t n = 0;
    for (int32_t s = 0; s < S; s++) {
        for (int32_t i = 0; i < len[s]; i++) {
            bt[n] = toks[s][i], bp[n] = i, bs[n] = s;
            n++;
        }
        lr[s] = n - 1;
        seqs[s].len = len[s];
    }
    sv_llama_batch_t b = {n, bt, bp, bs, S, seqs, S, lr, NULL, NULL, NULL, NULL};
    sv_status e = sv_llama_forward_batch(r->gpu, kv, &b, lg, &err);
    CHECK(!e, "cuda prefill batch: %s", err.message);
    for (int32_t d = 0; !e && d <= D; d++) {
        for (int32_t s = 0; s < S; s++) {
            char what[64];
            snprintf(what, sizeof what, "ragged seq %d step %d", s, d);
            compare_row(what, len[s] + d - 1, ref + ((size_t)s * (D + 1) + d) * V,
                        lg + (size_t)s * V, V);
        }
        if (d == D)
            break;
        for (int32_t s = 0; s < S; s++) { /* the CPU's tokens, one row per sequence */
            int32_t p = len[s] + d;
            bt[s] = toks[s][p], bp[s] = p, bs[s] = s, lr[s] = s;
            seqs[s].len = p + 1;
        }
        b = (sv_llama_batch_t){S, bt, bp, bs, S, seqs, S, lr, NULL, NULL, NULL, NULL};
        e = sv_llama_forward_batch(r->gpu, kv, &b, lg, &err);
        CHECK(!e, "cuda decode batch %d: %s", d, err.message);
    }
    printf("  ragged batch: %d sequences (%d prompt rows in one call), %d batched decode steps\n",
           S, n, D);
    free(bt), free(bp), free(bs), free(lr), free(lg);
out:
    free(ref), free(toks), free(perm);
    sv_llama_kv_destroy(kv);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the log even if a step is killed */
    if (argc < 2) {
        fprintf(stderr, "usage: test_e2e MODEL [--prompt N] [--decode N] [--seqs N] [--tol X] "
                        "[--threads N] [--bf16]\n");
        return 64;
    }
    const char *model = argv[1];
    int32_t P = 61, G = 12, S = 6;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    bool bf16 = false;
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--bf16"))
            bf16 = true;
        else if (v && !strcmp(argv[i], "--prompt") && ++i)
            P = atoi(v);
        else if (v && !strcmp(argv[i], "--decode") && ++i)
            G = atoi(v);
        else if (v && !strcmp(argv[i], "--seqs") && ++i)
            S = atoi(v);
        else if (v && !strcmp(argv[i], "--tol") && ++i)
            TOL = atof(v);
        else if (v && !strcmp(argv[i], "--threads") && ++i)
            threads = atoi(v);
        else {
            fprintf(stderr, "test_e2e: unknown option %s\n", argv[i]);
            return 64;
        }
    }
    if (P < 1 || P > 900 || G < 0 || G > 100 || S < 1 || S > 64 || threads < 1) {
        fprintf(stderr, "test_e2e: options out of range\n");
        return 64;
    }
    if (threads > SV_CPU_MAX_THREADS)
        threads = SV_CPU_MAX_THREADS;
    if (sv_cuda_device_count() < 1) {
        fprintf(stderr, "test_e2e: no CUDA device\n");
        return 2;
    }
    sv_error_t err;
    sv_backend_t *cpu = NULL, *gpu = NULL;
    run_t r = {0};
    sv_cpu_config_t cc = {.n_threads = threads};
    double t0 = sv_now_s();
    sv_cuda_config_t gc = {.device = 0, .bf16 = bf16};
    if (sv_cpu_backend_create(&cc, &cpu, &err) || sv_cuda_backend_create(&gc, &gpu, &err) ||
        sv_llama_load(model, cpu, &r.cpu, &err) || sv_llama_load(model, gpu, &r.gpu, &err)) {
        fprintf(stderr, "test_e2e: %s: %s\n", model, err.message);
        return 1;
    }
    const sv_llama_config_t *c = sv_llama_config(r.cpu);
    r.V = c->vocab_size;
    sv_rng_seed(&r.rng, 4242);
    printf("test_e2e: %s%s: dim %d, %d layers, %d/%d heads, head_dim %d, ffn %d, vocab %d "
           "(loaded twice in %.1f s)\n",
           model, bf16 ? " (CUDA in bf16 mode)" : "", c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->hidden_dim,
           c->vocab_size, sv_now_s() - t0);
    single(&r, P < c->max_ctx - G - 1 ? P : c->max_ctx / 2, G);
    ragged(&r, S, P < 200 ? P : 200, 3);
    printf("  worst |Δ logit| %.3g (tolerance %g; logit rms up to %.2f); greedy: %d of %d rows "
           "agree, %d rows with margin > tolerance, %d of them differ\n",
           worst, TOL, logit_sd, argmax_same, argmax_rows, margin_checked, margin_wrong);
    sv_llama_destroy(r.gpu);
    sv_llama_destroy(r.cpu);
    sv_backend_destroy(gpu);
    sv_backend_destroy(cpu);
    return test_summary("test_e2e: CUDA against CPU through the forward pass");
}
