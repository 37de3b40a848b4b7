/* test_llama — the forward pass's own promises, on small random models the
 * test writes as GGUF files (correctness against a NumPy reference lives in
 * tests/model/test_logits.py):
 * - a prompt in one call, in chunks of 3, and one token at a time (decode
 *   steps) give bit-identical logits;
 * - rolling a sequence back and rewriting it equals a fresh run;
 * - Qwen2-style biases change the result (they are read);
 * - bad tokens, gapped positions, a context overflow, missing or misshapen
 *   tensors and unsupported settings are errors that say what is wrong. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/backend/cpu.h"
#include "src/model/llama.h"
#include "test.h"
#include "tiny_model.h"

/* ---- the tests ---- */

static sv_backend_t *be;
static char dir[] = "/tmp/sv_test_llama_XXXXXX";

static sv_llama_t *load(const model_spec_t *sp, sv_error_t *err) { return load_tiny(dir, sp, be, err); }

enum { N = 21 };
static const int32_t toks[N] = {1, 5, 9, 36, 0, 2, 2, 7, 11, 13, 17, 19, 23, 29, 31, 3, 4, 6, 8, 10, 12};

/* Every token's logits, one forward call with max_batch `batch`. */
static void run_all(sv_llama_t *m, int32_t batch, float *out) {
    sv_error_t err;
    sv_llama_state_t *s = NULL;
    int32_t pos[N];
    for (int i = 0; i < N; i++)
        pos[i] = i;
    CHECK(sv_llama_state_create(m, CTX, batch, &s, &err) == SV_OK, "%s", err.message);
    if (!s)
        return;
    CHECK(sv_llama_forward(m, s, toks, pos, N, SV_LLAMA_LOGITS_ALL, out, &err) == SV_OK, "%s",
          err.message);
    CHECK(sv_llama_state_len(s) == N, "state length %d after %d tokens", (int)sv_llama_state_len(s), N);
    sv_llama_state_destroy(s);
}

static void test_invariance(const char *arch, bool biases) {
    sv_error_t err;
    model_spec_t sp = {.arch = arch, .biases = biases};
    sv_llama_t *m = load(&sp, &err);
    CHECK(m != NULL, "%s: %s", arch, err.message);
    if (!m)
        return;
    const sv_llama_config_t *c = sv_llama_config(m);
    CHECK(c->vocab_size == VOCAB && c->n_layers == LAYERS && c->head_dim == HD &&
              c->qkv_bias == biases && !c->tied_output,
          "%s: config read wrong (vocab %d, layers %d, head_dim %d)", arch, (int)c->vocab_size,
          (int)c->n_layers, (int)c->head_dim);
    CHECK(c->rope_style == (strcmp(arch, "qwen2") ? SV_ROPE_NORMAL : SV_ROPE_NEOX),
          "%s: wrong RoPE style", arch);
    float *once = malloc(sizeof(float) * N * VOCAB), *chunks = malloc(sizeof(float) * N * VOCAB);
    float *steps = malloc(sizeof(float) * N * VOCAB);
    run_all(m, 64, once);
    run_all(m, 3, chunks);
    CHECK(memcmp(once, chunks, sizeof(float) * N * VOCAB) == 0,
          "%s: chunks of 3 differ from one call", arch);
    bool finite = true;
    for (int i = 0; i < N * VOCAB; i++)
        finite = finite && isfinite(once[i]);
    CHECK(finite, "%s: non-finite logits", arch);

    /* Decode: the first token, then one token per call. */
    sv_llama_state_t *s = NULL;
    CHECK(sv_llama_state_create(m, CTX, 8, &s, &err) == SV_OK, "%s", err.message);
    int bad = 0;
    for (int32_t i = 0; i < N && s; i++) {
        CHECK(sv_llama_forward(m, s, &toks[i], &i, 1, SV_LLAMA_LOGITS_LAST, steps + i * VOCAB, &err) ==
                  SV_OK,
              "%s", err.message);
        bad += memcmp(steps + i * VOCAB, once + i * VOCAB, sizeof(float) * VOCAB) != 0;
    }
    CHECK(bad == 0, "%s: %d of %d decode steps differ from the one-call prompt", arch, bad, N);

    /* Roll back to position 10 and rewrite: equals a fresh run of the new text. */
    int32_t alt[N], pos[N];
    memcpy(alt, toks, sizeof alt);
    for (int i = 10; i < N; i++) {
        alt[i] = (toks[i] * 7 + 3) % VOCAB;
        pos[i] = i;
    }
    float *last = malloc(sizeof(float) * VOCAB), *fresh = malloc(sizeof(float) * N * VOCAB);
    if (s) {
        CHECK(sv_llama_forward(m, s, alt + 10, pos + 10, N - 10, SV_LLAMA_LOGITS_LAST, last, &err) ==
                  SV_OK,
              "%s", err.message);
        sv_llama_state_reset(s);
        for (int i = 0; i < N; i++)
            pos[i] = i;
        sv_llama_forward(m, s, alt, pos, N, SV_LLAMA_LOGITS_ALL, fresh, &err);
        CHECK(memcmp(last, fresh + (N - 1) * VOCAB, sizeof(float) * VOCAB) == 0,
              "%s: rollback and rewrite differ from a fresh run", arch);

        /* errors, none of which touch the state */
        int32_t t = VOCAB, p = sv_llama_state_len(s);
        CHECK(sv_llama_forward(m, s, &t, &p, 1, SV_LLAMA_LOGITS_LAST, last, &err) == SV_ERR_ARG &&
                  strstr(err.message, "token"),
              "%s: token %d accepted (%s)", arch, VOCAB, err.message);
        t = 1;
        p = sv_llama_state_len(s) + 1;
        CHECK(sv_llama_forward(m, s, &t, &p, 1, SV_LLAMA_LOGITS_LAST, last, &err) == SV_ERR_ARG &&
                  strstr(err.message, "gap"),
              "%s: a position gap accepted (%s)", arch, err.message);
        int32_t tt[2] = {1, 2}, pp[2] = {3, 5};
        CHECK(sv_llama_forward(m, s, tt, pp, 2, SV_LLAMA_LOGITS_LAST, last, &err) == SV_ERR_ARG,
              "%s: non-consecutive positions accepted", arch);
        sv_llama_state_destroy(s);
        s = NULL;
        CHECK(sv_llama_state_create(m, 4, 2, &s, &err) == SV_OK, "%s", err.message);
        int32_t p5[5] = {0, 1, 2, 3, 4};
        CHECK(sv_llama_forward(m, s, toks, p5, 5, SV_LLAMA_LOGITS_LAST, last, &err) == SV_ERR_ARG &&
                  strstr(err.message, "context"),
              "%s: 5 tokens fit a context of 4 (%s)", arch, err.message);
    }
    CHECK(sv_llama_state_create(m, CTX + 1, 1, &s, &err) == SV_ERR_ARG,
          "%s: a state longer than the model's context", arch);
    sv_llama_state_destroy(s);
    free(once), free(chunks), free(steps), free(last), free(fresh);
    sv_llama_destroy(m);
}

static void test_biases_matter(void) {
    /* Same weights, llama with and without the Qwen2-style biases. */
    sv_error_t err;
    model_spec_t a = {.arch = "llama"}, b = {.arch = "llama", .biases = true};
    sv_llama_t *ma = load(&a, &err), *mb = load(&b, &err);
    CHECK(ma && mb, "%s", err.message);
    if (ma && mb) {
        float *la = malloc(sizeof(float) * N * VOCAB), *lb = malloc(sizeof(float) * N * VOCAB);
        run_all(ma, 64, la);
        run_all(mb, 64, lb);
        CHECK(memcmp(la, lb, sizeof(float) * N * VOCAB) != 0, "attention biases are ignored");
        free(la), free(lb);
    }
    sv_llama_destroy(ma);
    sv_llama_destroy(mb);
}

static void test_load_errors(void) {
    sv_error_t err;
    struct {
        model_spec_t sp;
        sv_status code;
        const char *says;
    } cases[] = {
        {{.arch = "llama", .drop_tensor = true}, SV_ERR_SYNTAX, "blk.1.ffn_gate.weight"},
        {{.arch = "llama", .bad_shape = true}, SV_ERR_SYNTAX, "output.weight"},
        {{.arch = "qwen2"}, SV_ERR_SYNTAX, "attn_q.bias"}, /* Qwen2 needs its biases */
        {{.arch = "gpt2"}, SV_ERR_UNSUPPORTED, "gpt2"},
        {{.arch = "llama", .scaling = "yarn"}, SV_ERR_UNSUPPORTED, "yarn"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sv_error_clear(&err);
        sv_llama_t *m = load(&cases[i].sp, &err);
        CHECK(!m && err.code == cases[i].code && strstr(err.message, cases[i].says),
              "case %zu: got %s '%s', wanted %s naming %s", i, sv_status_name(err.code), err.message,
              sv_status_name(cases[i].code), cases[i].says);
        sv_llama_destroy(m);
    }
    model_spec_t lin = {.arch = "llama", .scaling = "linear"};
    sv_llama_t *m = load(&lin, &err);
    CHECK(m != NULL, "linear RoPE scaling refused: %s", err.message);
    sv_llama_destroy(m);
    CHECK(sv_llama_load("/nonexistent/model.gguf", be, &m, &err) == SV_ERR_IO, "missing file: %s",
          sv_status_name(err.code));
}

int main(void) {
    sv_error_t err;
    sv_cpu_config_t cfg = {2};
    if (!mkdtemp(dir) || sv_cpu_backend_create(&cfg, &be, &err)) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    test_invariance("llama", false);
    test_invariance("qwen2", true);
    test_biases_matter();
    test_load_errors();
    sv_backend_destroy(be);
    rmdir(dir);
    return test_summary("llama: one call == chunks == decode steps (bit for bit), rollback, "
                        "biases, load and forward errors");
}
