/* bench.c — decode, prefill and sampling times of the CUDA backend.
 *
 *     bench MODEL [--ctx 512] [--steps 20] [--batches 1,8,64,256] [--prefill 2048]
 *                 [--dtype fp32|bf16]
 *
 * --dtype bf16 runs the backend in bf16 mode (sv_cuda_config_t): weights
 * read as bf16, products on the tensor cores.
 *
 * Decode: for each batch size B, B sequences at context --ctx, each step one
 * row per sequence through sv_llama_forward_batch. The keys and values are
 * whatever the cache holds (not a prefilled prompt): the time of a step
 * does not depend on their values. Two times per step: the layers alone
 * (no logits; then sv_cuda_sync) and the full step with every row's logits
 * copied to the host (what sv_llama_forward_batch does today). The floor
 * is the bytes a step must read, weights (as stored: fp32 today) plus the
 * keys and values of B * ctx positions, over 4.3 TB/s (an H200's copy
 * bandwidth; the datasheet says 4.8).
 *
 * Prefill: --prefill tokens in sequences of 512, logits for each
 * sequence's last row; tokens/s and TFLOP/s (2 * parameters * tokens)
 * against the fp32 and bf16 dense peaks (67 and 990 TFLOP/s).
 *
 * Sampling at batch 64: the mask+sample kernel on (64, vocab) device
 * logits, greedy and at temperature 1 with top_p 0.95, without masks and
 * with 64 distinct masks (uploaded into the mask table every step: the
 * worst case, and again when the table already holds them). The matcher's
 * host work is not part of this number (the engine overlaps it).
 * Prints a table; exits 1 if anything fails. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/backend/cuda.h"
#include "src/model/llama.h"
#include "util/clock.h"
#include "util/rng.h"

static double now_s(void) { return (double)sv_now_ns() * 1e-9; }

#define BW 4.3e12

static int fail(const char *what, const sv_error_t *err) {
    fprintf(stderr, "bench: %s: %s\n", what, err->message);
    return 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the log even if a step is killed */
    if (argc < 2) {
        fprintf(stderr, "usage: bench MODEL [--ctx N] [--steps N] [--batches 1,8,64,256] "
                        "[--prefill N]\n");
        return 64;
    }
    const char *model = argv[1];
    int32_t ctx = 512, steps = 20, prefill = 2048;
    bool bf16 = false;
    int32_t batches[16] = {1, 8, 64, 256}, nb = 4;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ctx"))
            ctx = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefill"))
            prefill = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dtype") &&
                 (!strcmp(argv[i + 1], "bf16") || !strcmp(argv[i + 1], "fp32")))
            bf16 = !strcmp(argv[i + 1], "bf16");
        else if (!strcmp(argv[i], "--batches")) {
            nb = 0;
            for (char *p = argv[i + 1]; *p && nb < 16;) {
                batches[nb++] = (int32_t)strtol(p, &p, 10);
                if (*p == ',')
                    p++;
            }
        } else {
            fprintf(stderr, "bench: unknown option %s\n", argv[i]);
            return 64;
        }
    }
    int32_t maxb = 1;
    for (int i = 0; i < nb; i++) {
        if (batches[i] < 1 || batches[i] > 4096)
            return 64;
        maxb = batches[i] > maxb ? batches[i] : maxb;
    }
    if (ctx < 2 || steps < 1 || prefill < 0)
        return 64;
    sv_error_t err;
    sv_backend_t *be = NULL;
    sv_llama_t *m = NULL;
    sv_cuda_config_t cfg = {.device = 0, .bf16 = bf16};
    if (sv_cuda_backend_create(&cfg, &be, &err))
        return fail("backend", &err);
    if (sv_llama_load(model, be, &m, &err))
        return fail("load", &err);
    const sv_llama_config_t *c = sv_llama_config(m);
    const int32_t V = c->vocab_size, BS = SV_LLAMA_KV_BLOCK;
    /* Parameters of the layers (what a token's products multiply through)
     * and of the whole model (what a decode step reads). */
    double layer_params = (double)c->n_layers *
                          ((double)c->dim * c->n_heads * c->head_dim * 2 +
                           (double)c->dim * c->n_kv_heads * c->head_dim * 2 +
                           3.0 * c->dim * c->hidden_dim);
    double params = layer_params + (double)V * c->dim * (c->tied_output ? 1 : 2);
    double wbytes = params * (bf16 ? 2.0 : 4.0);
    size_t kv_block = sv_llama_kv_block_bytes(m);
    char name[256];
    size_t fr = 0, tot = 0;
    sv_cuda_device_info(be, name, sizeof name, &fr, &tot, &err);
    const char *graphs = getenv("SV_CUDA_GRAPHS");
    printf("bench: %s on %s; decode steps as CUDA graphs: %s\n", model, name,
           graphs && !strcmp(graphs, "0") ? "no (SV_CUDA_GRAPHS=0)" : "yes");
    printf("  %.3g parameters, %s weights %.2f GB; KV %.1f kB per position\n", params,
           bf16 ? "bf16" : "fp32", wbytes / 1e9, (double)kv_block / BS / 1e3);

    int32_t per = (ctx + BS - 1) / BS, need_tok = maxb > prefill ? maxb : prefill;
    int32_t n_blocks = maxb * per + 8;
    int32_t pf_seqs = (prefill + 511) / 512;
    if (pf_seqs * ((512 + BS - 1) / BS) + 8 > n_blocks)
        n_blocks = pf_seqs * ((512 + BS - 1) / BS) + 8;
    sv_llama_kv_t *kv = NULL;
    if (sv_llama_kv_create(m, n_blocks, need_tok, &kv, &err))
        return fail("kv cache", &err);
    printf("  KV cache: %d blocks (%.2f GB)\n", n_blocks, (double)n_blocks * kv_block / 1e9);
    /* The cache is not initialised: steps read whatever it holds, which
     * changes no time. */
    uint32_t *blocks = malloc((size_t)n_blocks * sizeof *blocks);
    for (int32_t i = 0; i < n_blocks; i++)
        blocks[i] = (uint32_t)i;
    int32_t *tok = calloc((size_t)need_tok, sizeof *tok), *pos = calloc((size_t)need_tok, 4);
    int32_t *seq = calloc((size_t)need_tok, 4), *lr = calloc((size_t)need_tok, 4);
    sv_llama_seq_t *seqs = calloc((size_t)(maxb > pf_seqs ? maxb : pf_seqs), sizeof *seqs);
    float *logits = malloc((size_t)(maxb > pf_seqs ? maxb : pf_seqs) * V * sizeof(float));
    sv_rng_t rng;
    sv_rng_seed(&rng, 1);

    printf("\n  decode (context %d):\n  %6s %12s %12s %12s %10s\n", ctx, "batch",
           "layers ms", "+logits ms", "floor ms", "of floor");
    for (int bi = 0; bi < nb; bi++) {
        int32_t B = batches[bi];
        for (int32_t s = 0; s < B; s++) {
            seqs[s] = (sv_llama_seq_t){blocks + (size_t)s * per, per, ctx};
            tok[s] = (int32_t)sv_rng_below(&rng, (uint32_t)V);
            pos[s] = ctx - 1;
            seq[s] = s;
            lr[s] = s;
        }
        sv_llama_batch_t b = {B, tok, pos, seq, B, seqs, 0, lr, NULL, NULL, NULL, NULL};
        double t_layers = 0, t_full = 0;
        for (int pass = 0; pass < 2; pass++) {
            b.n_logits = pass ? B : 0;
            for (int i = 0; i < 3; i++) /* warm-up */
                if (sv_llama_forward_batch(m, kv, &b, logits, &err) || sv_cuda_sync(be, &err))
                    return fail("decode", &err);
            double t0 = now_s();
            for (int i = 0; i < steps; i++)
                if (sv_llama_forward_batch(m, kv, &b, logits, &err))
                    return fail("decode", &err);
            if (sv_cuda_sync(be, &err))
                return fail("decode", &err);
            double t = (now_s() - t0) / steps;
            if (pass)
                t_full = t;
            else
                t_layers = t;
        }
        double floor = (wbytes + (double)B * ctx * kv_block / BS) / BW;
        printf("  %6d %12.3f %12.3f %12.3f %9.0f%%\n", B, t_layers * 1e3, t_full * 1e3,
               floor * 1e3, 100.0 * floor / t_full);
    }
    printf("  (floor: %s weights + KV read once at %.1f TB/s)\n", bf16 ? "bf16" : "fp32",
           BW / 1e12);

    if (prefill > 0) {
        int32_t n = 0;
        for (int32_t s = 0; s < pf_seqs; s++) {
            int32_t L = prefill - n < 512 ? prefill - n : 512;
            seqs[s] = (sv_llama_seq_t){blocks + (size_t)s * ((512 + BS - 1) / BS),
                                       (512 + BS - 1) / BS, L};
            for (int32_t i = 0; i < L; i++, n++) {
                tok[n] = (int32_t)sv_rng_below(&rng, (uint32_t)V);
                pos[n] = i;
                seq[n] = s;
            }
            lr[s] = n - 1;
        }
        sv_llama_batch_t b = {n, tok, pos, seq, pf_seqs, seqs, pf_seqs, lr, NULL, NULL, NULL, NULL};
        if (sv_llama_forward_batch(m, kv, &b, logits, &err))
            return fail("prefill", &err);
        int reps = 3;
        double t0 = now_s();
        for (int i = 0; i < reps; i++)
            if (sv_llama_forward_batch(m, kv, &b, logits, &err))
                return fail("prefill", &err);
        double t = (now_s() - t0) / reps;
        double tf = 2.0 * layer_params * n / t / 1e12; /* + attention, logits: not counted */
        printf("\n  prefill: %d tokens in %d sequences: %.1f ms, %.0f tokens/s, %.1f TFLOP/s "
               "(fp32 peak ~67, bf16 peak ~990)\n",
               n, pf_seqs, t * 1e3, n / t, tf);
    }

    /* The sampler at batch 64. */
    int32_t SB = 64, words = (V + 31) / 32;
    sv_cuda_sampler_t *smp = NULL;
    float *d_logits = NULL;
    if (sv_cuda_sampler_create(be, SB, V, 2 * SB, &smp, &err) ||
        be->ops->alloc(be, (size_t)SB * V * sizeof(float), (void **)&d_logits, &err))
        return fail("sampler", &err);
    float *h = malloc((size_t)SB * V * sizeof(float));
    for (size_t i = 0; i < (size_t)SB * V; i++)
        h[i] = (float)((double)(sv_rng_next(&rng) >> 11) * 0x1.0p-53 * 8.0 - 4.0);
    if (be->ops->upload(be, d_logits, h, (size_t)SB * V * sizeof(float), &err))
        return fail("upload", &err);
    uint32_t *masks = malloc((size_t)SB * words * 4);
    for (size_t i = 0; i < (size_t)SB * words; i++)
        masks[i] = (uint32_t)sv_rng_next(&rng) & (uint32_t)sv_rng_next(&rng); /* ~25% allowed */
    sv_cuda_sample_params_t p[64];
    sv_cuda_sample_out_t o[64];
    printf("\n  mask+sample, batch %d, vocab %d (ms per step):\n  %-28s %10s %10s %10s\n", SB, V,
           "", "no mask", "new masks", "cached");
    for (int mode = 0; mode < 2; mode++) {
        double t[3];
        for (int variant = 0; variant < 3; variant++) {
            double t0 = 0;
            for (int i = -2; i < steps; i++) {
                if (i == 0)
                    t0 = now_s();
                sv_cuda_sampler_begin_step(smp);
                for (int32_t r = 0; r < SB; r++) {
                    int32_t slot = -1;
                    if (variant > 0) {
                        uint64_t key = variant == 1 ? (uint64_t)(i + 3) * 1000 + r : (uint64_t)r;
                        if (sv_cuda_sampler_mask_slot(smp, 0, key, masks + (size_t)r * words, &slot,
                                                      &err))
                            return fail("mask slot", &err);
                    }
                    p[r] = (sv_cuda_sample_params_t){mode ? 1.0f : 0.0f, mode ? 0.95f : 1.0f,
                                                     0.0f, 0, 0, slot, sv_rng_next(&rng)};
                }
                if (sv_cuda_sample(smp, SB, d_logits, p, o, &err))
                    return fail("sample", &err);
            }
            t[variant] = (now_s() - t0) / steps;
        }
        printf("  %-28s %10.3f %10.3f %10.3f\n", mode ? "temperature 1, top_p 0.95" : "greedy",
               t[0] * 1e3, t[1] * 1e3, t[2] * 1e3);
    }
    free(h), free(masks), free(blocks), free(tok), free(pos), free(seq), free(lr), free(seqs);
    free(logits);
    be->ops->free(be, d_logits);
    sv_cuda_sampler_destroy(smp);
    sv_llama_kv_destroy(kv);
    sv_llama_destroy(m);
    sv_backend_destroy(be);
    return 0;
}
