/* fuzz_model.c — libFuzzer target for the model loader (src/model/llama.c)
 * on GGUF files.
 *
 * The input is a GGUF file. sv_llama_load must refuse it with an error or
 * load it; a loaded model must then run: a state of 8 positions, a forward
 * pass of two tokens with every position's logits, all finite or not (a
 * random model may overflow) but written without a sanitizer report, and
 * the state and model freed. The architectures' configuration readers
 * (llama, qwen2, qwen3, gemma3: windows, layer patterns, RoPE scaling,
 * soft-capping keys) and the shape checks of every tensor are what this
 * reaches that fuzz_gguf (the reader itself) does not.
 *
 * The file goes through a memfd (/proc/self/fd/N), since the loader opens a
 * path. Seeds: fuzz/corpus/model, written by fuzz/model_seeds.py (tiny
 * llama, qwen2, qwen3 and gemma3 models, F32, and a gemma3 with linear RoPE
 * scaling). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/backend/cpu.h"
#include "src/model/llama.h"

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static sv_backend_t *be;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!be) {
        sv_cpu_config_t cfg = {.n_threads = 1};
        sv_error_t err;
        CHECK(sv_cpu_backend_create(&cfg, &be, &err) == SV_OK);
    }
    int fd = memfd_create("fuzz_model", 0);
    CHECK(fd >= 0);
    CHECK(size == 0 || write(fd, data, size) == (ssize_t)size);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    sv_llama_t *m = NULL;
    sv_error_t err;
    sv_status st = sv_llama_load(path, be, &m, &err);
    CHECK((st == SV_OK) == (m != NULL));
    if (m) {
        const sv_llama_config_t *c = sv_llama_config(m);
        CHECK(c->vocab_size > 0 && c->dim > 0 && c->n_layers > 0 && c->head_dim > 0);
        /* Keep a run cheap: the input bounds the weights, not the work. */
        if ((int64_t)c->dim * c->n_layers * (c->hidden_dim + c->dim) < (int64_t)1 << 24 &&
            (int64_t)c->vocab_size * c->dim < (int64_t)1 << 24) {
            sv_llama_state_t *s = NULL;
            int32_t ctx = c->max_ctx < 8 ? c->max_ctx : 8;
            if (sv_llama_state_create(m, ctx, 2, &s, &err) == SV_OK) {
                int32_t toks[2] = {0, c->vocab_size - 1}, pos[2] = {0, 1};
                int32_t n = ctx >= 2 ? 2 : 1;
                float *logits = malloc(sizeof(float) * (size_t)n * (size_t)c->vocab_size);
                CHECK(logits);
                st = sv_llama_forward(m, s, toks, pos, n, SV_LLAMA_LOGITS_ALL, logits, &err);
                CHECK(st == SV_OK);
                free(logits);
                sv_llama_state_destroy(s);
            }
        }
        sv_llama_destroy(m);
    }
    close(fd);
    return 0;
}
