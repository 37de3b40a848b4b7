/* logits_cli — runs the forward pass from the command line, for the NumPy
 * reference test (tests/model/) and for timing.
 *
 *   logits_cli MODEL --ids 1,2,3 --out OUT.f32
 *       one forward call over the prompt; writes the logits of EVERY
 *       position as raw little-endian float32, shape (n_ids, vocab),
 *       row-major, and prints {"vocab": V, "n": N} on stdout.
 *   logits_cli MODEL --ids 1,2,3 --greedy K
 *       the prompt, then K greedy decode steps one token at a time (argmax,
 *       lowest id on ties); prints the K generated ids comma-separated.
 *
 * MODEL is a GGUF file or a directory with config.json + model.safetensors.
 * Options: --threads N (default 1), --batch N (tokens per internal step,
 * default 64), --cpu-kernels ref|int8|int8-scalar (default ref; see
 * src/backend/cpu.h), --time (timings as a JSON line on stderr).
 * Errors: exit code 2 with the message on stderr. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/backend/cpu.h"
#include "src/model/llama.h"

static int die(const char *what, const char *msg) {
    fprintf(stderr, "logits_cli: %s: %s\n", what, msg);
    return 2;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Parses "1,2,3" into a malloc'd array; -1 on a malformed list. */
static int parse_ids(const char *s, int32_t **out, int32_t *n) {
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return -1;
    int32_t k = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end != ',' && *end != 0)) {
            free(ids);
            return -1;
        }
        ids[k++] = (int32_t)v;
        if (*end == 0)
            break;
        p = end + 1;
    }
    *out = ids;
    *n = k;
    return 0;
}

static int parse_pos(const char *s, long lo, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > INT32_MAX)
        return -1;
    *out = v;
    return 0;
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

int main(int argc, char **argv) {
    const char *model = NULL, *ids_arg = NULL, *out_path = NULL;
    long greedy = -1, threads = 1, batch = 64;
    sv_cpu_kernels kernels = SV_CPU_KERNELS_REF;
    int timing = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--ids") && val) {
            ids_arg = val;
            i++;
        } else if (!strcmp(a, "--out") && val) {
            out_path = val;
            i++;
        } else if (!strcmp(a, "--greedy") && val) {
            if (parse_pos(val, 0, &greedy))
                return die("usage", "--greedy wants a count >= 0");
            i++;
        } else if (!strcmp(a, "--threads") && val) {
            if (parse_pos(val, 1, &threads) || threads > SV_CPU_MAX_THREADS)
                return die("usage", "--threads wants 1..256");
            i++;
        } else if (!strcmp(a, "--cpu-kernels") && val) {
            if (!strcmp(val, "ref")) kernels = SV_CPU_KERNELS_REF;
            else if (!strcmp(val, "int8")) kernels = SV_CPU_KERNELS_INT8;
            else if (!strcmp(val, "int8-scalar")) kernels = SV_CPU_KERNELS_INT8_SCALAR;
            else return die("usage", "--cpu-kernels wants ref, int8 or int8-scalar");
            i++;
        } else if (!strcmp(a, "--batch") && val) {
            if (parse_pos(val, 1, &batch))
                return die("usage", "--batch wants a count >= 1");
            i++;
        } else if (!strcmp(a, "--time")) {
            timing = 1;
        } else if (a[0] != '-' && !model) {
            model = a;
        } else {
            return die("usage", "logits_cli MODEL --ids 1,2,3 (--out OUT.f32 | --greedy K) "
                                "[--threads N] [--batch N] [--time]");
        }
    }
    if (!model || !ids_arg || (!out_path) == (greedy < 0))
        return die("usage", "logits_cli MODEL --ids 1,2,3 (--out OUT.f32 | --greedy K) "
                            "[--threads N] [--batch N] [--time]");
    int32_t *ids = NULL, n_ids = 0;
    if (parse_ids(ids_arg, &ids, &n_ids))
        return die("usage", "--ids wants comma-separated non-negative integers");

    sv_error_t err;
    sv_error_clear(&err);
    sv_backend_t *be = NULL;
    sv_llama_t *m = NULL;
    sv_llama_state_t *s = NULL;
    float *logits = NULL;
    int32_t *pos = NULL, *gen = NULL;
    int rc = 2;
    sv_cpu_config_t cfg = {.n_threads = (int)threads, .kernels = kernels};
    double t0 = now_s();
    if (sv_cpu_backend_create(&cfg, &be, &err) || sv_llama_load(model, be, &m, &err)) {
        rc = die(model, err.message);
        goto done;
    }
    double t_load = now_s() - t0;
    const sv_llama_config_t *c = sv_llama_config(m);
    int64_t need_ctx = (int64_t)n_ids + (greedy > 0 ? greedy : 0);
    if (need_ctx > c->max_ctx) {
        rc = die("usage", "prompt plus generated tokens exceed the model's context");
        goto done;
    }
    size_t vocab = (size_t)c->vocab_size;
    pos = malloc(sizeof *pos * (size_t)n_ids);
    logits = malloc(sizeof *logits * vocab * (out_path ? (size_t)n_ids : 1));
    gen = malloc(sizeof *gen * (size_t)(greedy > 0 ? greedy : 1));
    if (!pos || !logits || !gen) {
        rc = die("memory", "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n_ids; i++)
        pos[i] = i;
    if (sv_llama_state_create(m, (int32_t)need_ctx, (int32_t)batch, &s, &err)) {
        rc = die("state", err.message);
        goto done;
    }
    t0 = now_s();
    if (sv_llama_forward(m, s, ids, pos, n_ids, out_path ? SV_LLAMA_LOGITS_ALL : SV_LLAMA_LOGITS_LAST,
                         logits, &err)) {
        rc = die("forward", err.message);
        goto done;
    }
    double t_prompt = now_s() - t0;
    double t_decode = 0;
    if (out_path) {
        FILE *f = fopen(out_path, "wb");
        size_t total = vocab * (size_t)n_ids;
        if (!f || fwrite(logits, sizeof(float), total, f) != total) {
            if (f)
                fclose(f);
            rc = die(out_path, strerror(errno));
            goto done;
        }
        if (fclose(f)) {
            rc = die(out_path, strerror(errno));
            goto done;
        }
        printf("{\"vocab\": %d, \"n\": %d}\n", (int)c->vocab_size, (int)n_ids);
    } else {
        t0 = now_s();
        for (long k = 0; k < greedy; k++) {
            gen[k] = argmax(logits, c->vocab_size);
            if (k + 1 == greedy)
                break;
            int32_t p = n_ids + (int32_t)k;
            if (sv_llama_forward(m, s, &gen[k], &p, 1, SV_LLAMA_LOGITS_LAST, logits, &err)) {
                rc = die("forward", err.message);
                goto done;
            }
        }
        t_decode = now_s() - t0;
        for (long k = 0; k < greedy; k++)
            printf("%s%d", k ? "," : "", (int)gen[k]);
        printf("\n");
    }
    if (timing)
        fprintf(stderr,
                "{\"threads\": %ld, \"load_s\": %.3f, \"prompt_tokens\": %d, \"prompt_s\": %.4f, "
                "\"prompt_tok_s\": %.1f, \"decode_steps\": %ld, \"decode_s\": %.4f, "
                "\"decode_tok_s\": %.1f}\n",
                threads, t_load, (int)n_ids, t_prompt, n_ids / t_prompt,
                greedy > 1 ? greedy - 1 : 0, t_decode,
                greedy > 1 ? (double)(greedy - 1) / t_decode : 0.0);
    rc = 0;
done:
    free(ids);
    free(pos);
    free(logits);
    free(gen);
    sv_llama_state_destroy(s);
    sv_llama_destroy(m);
    sv_backend_destroy(be);
    return rc;
}
