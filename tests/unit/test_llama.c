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
#include "src/model/gguf.h"
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
    CHECK(c->rope_style == (strcmp(arch, "llama") == 0 ? SV_ROPE_NORMAL : SV_ROPE_NEOX),
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

/* ---- weights kept quantized (ops->gemm_q) ---- */

static uint16_t f16_bits(float f) { /* round toward zero; |f| in f16's normal range or 0 */
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xff;
    if (exp < 113)
        return (uint16_t)sign;
    return (uint16_t)(sign | (exp - 112) << 10 | ((u >> 13) & 0x3ff));
}

static void put_f16(buf_t *b, float f) {
    uint16_t h = f16_bits(f);
    put(b, &h, 2);
}

/* Appends n floats of x as format t (a plain quantizer: any valid blocks do). */
static void put_quant(buf_t *b, sv_ggml_type t, const float *x, uint64_t n) {
    if (t == SV_GGML_F16 || t == SV_GGML_BF16) {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            uint16_t h = t == SV_GGML_F16 ? f16_bits(x[i]) : (uint16_t)(u >> 16);
            put(b, &h, 2);
        }
        return;
    }
    for (uint64_t k = 0; k < n; k += 32, x += 32) {
        float lo = x[0], hi = x[0], amax = 0;
        for (int i = 0; i < 32; i++) {
            lo = x[i] < lo ? x[i] : lo;
            hi = x[i] > hi ? x[i] : hi;
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        }
        uint8_t q[32];
        if (t == SV_GGML_Q8_0) {
            float d = amax / 127;
            put_f16(b, d);
            for (int i = 0; i < 32; i++)
                q[i] = (uint8_t)(int8_t)lrintf(d > 0 ? x[i] / d : 0);
            put(b, q, 32);
        } else {
            float d = t == SV_GGML_Q4_0 ? amax / 7 : (hi - lo) / 15, m = t == SV_GGML_Q4_0 ? 0 : lo;
            put_f16(b, d);
            if (t == SV_GGML_Q4_1)
                put_f16(b, m);
            for (int i = 0; i < 32; i++) {
                long v = lrintf(d > 0 ? (x[i] - m) / d : 0) + (t == SV_GGML_Q4_0 ? 8 : 0);
                q[i] = (uint8_t)(v < 0 ? 0 : v > 15 ? 15 : v);
            }
            for (int i = 0; i < 16; i++) {
                uint8_t byte = (uint8_t)(q[i] | q[i + 16] << 4);
                put(b, &byte, 1);
            }
        }
    }
}

/* The format each matrix is stored in: every sv_qtype somewhere. FFN = 48
 * is no whole number of 32-blocks, so ffn_down is F16. */
static sv_ggml_type quant_of(const char *name) {
    static const struct {
        const char *suffix;
        sv_ggml_type t;
    } kinds[] = {{"token_embd.weight", SV_GGML_Q8_0}, {"output.weight", SV_GGML_Q4_1},
                 {"attn_q.weight", SV_GGML_Q4_1},     {"attn_k.weight", SV_GGML_Q4_0},
                 {"attn_v.weight", SV_GGML_Q8_0},     {"attn_output.weight", SV_GGML_BF16},
                 {"ffn_gate.weight", SV_GGML_Q4_0},   {"ffn_up.weight", SV_GGML_Q4_1},
                 {"ffn_down.weight", SV_GGML_F16}};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        size_t k = strlen(kinds[i].suffix);
        if (n >= k && strcmp(name + n - k, kinds[i].suffix) == 0)
            return kinds[i].t;
    }
    return SV_GGML_F32;
}

/* Writes the tiny llama with its matrices quantized (quant_of) to path,
 * without output.weight when tied. False when it cannot. */
static bool write_quant_model(const char *path, bool tied) {
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s/f32.gguf", dir);
    model_spec_t sp = {.arch = "llama"};
    if (!write_model(tmp, &sp))
        return false;
    FILE *f = fopen(tmp, "rb");
    static uint8_t raw[1 << 20];
    size_t size = f ? fread(raw, 1, sizeof raw, f) : 0;
    if (f)
        fclose(f);
    unlink(tmp);
    sv_gguf_t *g = NULL;
    sv_error_t err;
    if (!size || sv_gguf_open_memory(raw, size, &g, &err))
        return false;
    /* The tensor infos start at the first tensor's name (length, then bytes). */
    const sv_gguf_tensor_t *t0 = sv_gguf_tensor_at(g, 0);
    uint64_t len = strlen(t0->name);
    size_t info = 0;
    for (size_t i = 24; i + 8 + len <= size && !info; i++)
        if (memcmp(raw + i, &len, 8) == 0 && memcmp(raw + i + 8, t0->name, len) == 0)
            info = i;
    buf_t b = {0};
    put(&b, raw, info);
    uint64_t nt = sv_gguf_n_tensors(g) - (tied ? 1 : 0);
    memcpy(b.p + 8, &nt, 8); /* the tensor count */
    buf_t data = {0};
    static const uint8_t zeros[32];
    for (uint64_t i = 0; i < sv_gguf_n_tensors(g); i++) {
        const sv_gguf_tensor_t *t = sv_gguf_tensor_at(g, i);
        if (tied && strcmp(t->name, "output.weight") == 0)
            continue;
        sv_ggml_type q = t->n_dims == 2 ? quant_of(t->name) : SV_GGML_F32;
        put_str(&b, t->name);
        put_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(&b, t->ne[d]);
        put_u32(&b, (uint32_t)q);
        put_u64(&b, data.n);
        if (q == SV_GGML_F32)
            put(&data, t->data, t->n_bytes);
        else
            put_quant(&data, q, t->data, t->n_elements);
        put(&data, zeros, (32 - data.n % 32) % 32);
    }
    sv_gguf_destroy(g);
    put(&b, zeros, (32 - b.n % 32) % 32);
    put(&b, data.p, data.n);
    f = fopen(path, "wb");
    bool ok = f && fwrite(b.p, 1, b.n, f) == b.n;
    if (f)
        ok = (fclose(f) == 0) && ok;
    free(b.p), free(data.p);
    return ok;
}

static const sv_backend_ops_t *cpu_ops_saved;
static int gemm_q_calls;

static sv_status counting_gemm_q(sv_backend_t *b, int32_t rows, int32_t in, int32_t out,
                                 const float *x, const void *w, sv_qtype t, const float *bias,
                                 float *y, sv_error_t *err) {
    gemm_q_calls++;
    return cpu_ops_saved->gemm_q(b, rows, in, out, x, w, t, bias, y, err);
}

/* A model whose matrices are Q8_0, Q4_0, Q4_1, F16 and BF16, kept in their
 * blocks (gemm_q, get_rows_q), gives the same logits bit for bit as the
 * same file dequantized to fp32 at load (a backend without gemm_q), in one
 * call and in decode steps, tied and untied. */
static void test_quantized(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/q.gguf", dir);
    cpu_ops_saved = be->ops;
    sv_backend_ops_t counting = *be->ops, plain = *be->ops;
    counting.gemm_q = counting_gemm_q;
    plain.gemm_q = NULL;
    plain.get_rows_q = NULL;
    for (int tied = 0; tied < 2; tied++) {
        CHECK(write_quant_model(path, tied), "cannot write %s", path);
        sv_error_t err;
        sv_llama_t *mq = NULL, *mf = NULL;
        be->ops = &counting;
        CHECK(sv_llama_load(path, be, &mq, &err) == SV_OK, "quantized: %s", err.message);
        be->ops = &plain;
        CHECK(sv_llama_load(path, be, &mf, &err) == SV_OK, "dequantized: %s", err.message);
        unlink(path);
        if (mq && mf) {
            CHECK(sv_llama_config(mq)->tied_output == (bool)tied, "tied %d read wrong", tied);
            float *lq = malloc(sizeof(float) * N * VOCAB), *lf = malloc(sizeof(float) * N * VOCAB);
            float *ls = malloc(sizeof(float) * N * VOCAB);
            be->ops = &plain;
            gemm_q_calls = 0;
            run_all(mf, 64, lf);
            CHECK(gemm_q_calls == 0, "the fp32 model called gemm_q");
            be->ops = &counting;
            run_all(mq, 64, lq);
            /* 7 matrices a layer, and the output for every 64 rows of logits
             * (src/model/llama.c, LOGIT_ROWS) */
            int want = 7 * LAYERS + (N + 63) / 64;
            CHECK(gemm_q_calls == want, "gemm_q called %d times, wanted %d", gemm_q_calls, want);
            run_all(mq, 1, ls); /* decode steps, one token a call */
            CHECK(memcmp(lq, lf, sizeof(float) * N * VOCAB) == 0,
                  "tied %d: quantized weights differ from their fp32 dequantization", tied);
            CHECK(memcmp(ls, lf, sizeof(float) * N * VOCAB) == 0,
                  "tied %d: quantized decode steps differ from fp32", tied);
            int finite = 1;
            for (int i = 0; i < N * VOCAB; i++)
                finite &= isfinite(lq[i]) && lq[i] != 0;
            CHECK(finite, "tied %d: logits not finite and non-zero", tied);
            free(lq), free(lf), free(ls);
        }
        be->ops = cpu_ops_saved;
        sv_llama_destroy(mq);
        sv_llama_destroy(mf);
    }
    be->ops = cpu_ops_saved;
}

/* Gemma 3 needs GeGLU, a scale and sliding-window attention of the
 * backend: one that lacks any of them (the CUDA backend today) is refused
 * at load with SV_ERR_UNSUPPORTED naming what is missing, before any
 * weight is read. */
static void test_gemma_needs(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/g.gguf", dir);
    model_spec_t sp = {.arch = "gemma3"};
    CHECK(write_model(path, &sp), "cannot write %s", path);
    const sv_backend_ops_t *saved = be->ops;
    for (int i = 0; i < 3; i++) {
        sv_backend_ops_t ops = *saved;
        const char *want = i == 0 ? "GeGLU" : i == 1 ? "a scale operation" : "sliding-window attention";
        if (i == 0)
            ops.geglu = NULL;
        else if (i == 1)
            ops.scale = NULL;
        else
            ops.attention_window = false;
        be->ops = &ops;
        sv_error_t err;
        sv_llama_t *m = NULL;
        CHECK(sv_llama_load(path, be, &m, &err) == SV_ERR_UNSUPPORTED && !m && strstr(err.message, want),
              "a backend without %s: %s", want, err.message);
        be->ops = saved;
    }
    sv_error_t err;
    sv_llama_t *m = NULL;
    CHECK(sv_llama_load(path, be, &m, &err) == SV_OK, "gemma3 on the cpu backend: %s", err.message);
    if (m) {
        const sv_llama_config_t *c = sv_llama_config(m);
        CHECK(c->window == 5 && c->gelu && c->embed_scale && c->post_norms && c->qk_norm,
              "gemma3 config read wrong (window %d)", (int)c->window);
        CHECK(sv_llama_layer_local(c, 0) && sv_llama_layer_local(c, 1), "gemma3: layers 0 and 1 are local");
    }
    sv_llama_destroy(m);
    unlink(path);
}

int main(void) {
    sv_error_t err;
    sv_cpu_config_t cfg = {.n_threads = 2};
    if (!mkdtemp(dir) || sv_cpu_backend_create(&cfg, &be, &err)) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    test_invariance("llama", false);
    test_invariance("qwen2", true);
    test_invariance("gemma3", false);
    test_gemma_needs();
    test_biases_matter();
    test_load_errors();
    test_quantized();
    sv_backend_destroy(be);
    rmdir(dir);
    return test_summary("llama: one call == chunks == decode steps (bit for bit), rollback, "
                        "biases, load and forward errors, quantized weights (gemm_q) == their fp32 "
                        "dequantization (bit for bit); gemma3, and its refusal on a backend without its operations");
}
