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

enum { DIM = 32, LAYERS = 2, HEADS = 4, KVH = 2, HD = 8, FFN = 48, VOCAB = 37, CTX = 64 };

/* ---- a minimal GGUF writer (F32 tensors only) ---- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf_t;

static void put(buf_t *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void put_u32(buf_t *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf_t *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf_t *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

typedef struct tensor {
    char name[64];
    uint32_t nd;
    uint64_t ne[2];
    float *data;
} tensor_t;

typedef struct model_spec {
    const char *arch;
    bool biases, drop_tensor, bad_shape;
    const char *scaling; /* rope.scaling.type, or NULL */
} model_spec_t;

static uint64_t rng;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) / 8388608.0 - 1.0);
}

static int n_t;
static tensor_t ts[64];

static void add_tensor(const char *name, uint64_t ne0, uint64_t ne1, float scale, float base) {
    tensor_t *t = &ts[n_t++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->nd = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    t->data = malloc(sizeof(float) * ne0 * t->ne[1]);
    for (uint64_t i = 0; i < ne0 * t->ne[1]; i++)
        t->data[i] = base + scale * frand();
}

/* Writes a model to path; returns false if the file cannot be written. */
static bool write_model(const char *path, const model_spec_t *sp) {
    rng = 0x1234567887654321ull;
    n_t = 0;
    char nm[64];
    add_tensor("token_embd.weight", DIM, VOCAB, 1.0f, 0);
    add_tensor("output_norm.weight", DIM, 0, 0.1f, 1);
    add_tensor("output.weight", DIM, sp->bad_shape ? VOCAB + 1 : VOCAB, 0.5f, 0);
    for (int l = 0; l < LAYERS; l++) {
#define T(suffix, a, b, s, base)                           \
    snprintf(nm, sizeof nm, "blk.%d." suffix, l);          \
    add_tensor(nm, a, b, s, base)
        T("attn_norm.weight", DIM, 0, 0.1f, 1);
        T("attn_q.weight", DIM, HEADS * HD, 0.5f, 0);
        T("attn_k.weight", DIM, KVH * HD, 0.5f, 0);
        T("attn_v.weight", DIM, KVH * HD, 0.2f, 0);
        T("attn_output.weight", HEADS * HD, DIM, 0.2f, 0);
        T("ffn_norm.weight", DIM, 0, 0.1f, 1);
        if (!(sp->drop_tensor && l == 1)) {
            T("ffn_gate.weight", DIM, FFN, 0.2f, 0);
        }
        T("ffn_up.weight", DIM, FFN, 0.2f, 0);
        T("ffn_down.weight", FFN, DIM, 0.15f, 0);
        if (sp->biases) {
            T("attn_q.bias", HEADS * HD, 0, 0.3f, 0);
            T("attn_k.bias", KVH * HD, 0, 0.3f, 0);
            T("attn_v.bias", KVH * HD, 0, 0.3f, 0);
        }
#undef T
    }
    buf_t b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, (uint64_t)n_t);
    int n_kv = 10 + (sp->scaling ? 1 : 0);
    put_u64(&b, (uint64_t)n_kv);
    char k[96];
    put_str(&b, "general.architecture");
    put_u32(&b, 8);
    put_str(&b, sp->arch);
    struct {
        const char *key;
        uint32_t v;
    } ints[] = {{"embedding_length", DIM}, {"block_count", LAYERS}, {"feed_forward_length", FFN},
                {"attention.head_count", HEADS}, {"attention.head_count_kv", KVH},
                {"context_length", CTX}, {"rope.dimension_count", HD}};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        snprintf(k, sizeof k, "%s.%s", sp->arch, ints[i].key);
        put_str(&b, k);
        put_u32(&b, 4);
        put_u32(&b, ints[i].v);
    }
    float eps = 1e-5f, theta = 10000.0f;
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", sp->arch);
    put_str(&b, k);
    put_u32(&b, 6);
    put(&b, &eps, 4);
    snprintf(k, sizeof k, "%s.rope.freq_base", sp->arch);
    put_str(&b, k);
    put_u32(&b, 6);
    put(&b, &theta, 4);
    if (sp->scaling) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", sp->arch);
        put_str(&b, k);
        put_u32(&b, 8);
        put_str(&b, sp->scaling);
    }
    uint64_t off = 0;
    for (int i = 0; i < n_t; i++) {
        put_str(&b, ts[i].name);
        put_u32(&b, ts[i].nd);
        for (uint32_t d = 0; d < ts[i].nd; d++)
            put_u64(&b, ts[i].ne[d]);
        put_u32(&b, 0); /* F32 */
        put_u64(&b, off);
        off += (ts[i].ne[0] * ts[i].ne[1] * 4 + 31) / 32 * 32;
    }
    static const uint8_t zeros[32];
    put(&b, zeros, (32 - b.n % 32) % 32);
    for (int i = 0; i < n_t; i++) {
        size_t bytes = ts[i].ne[0] * ts[i].ne[1] * 4;
        put(&b, ts[i].data, bytes);
        put(&b, zeros, (32 - bytes % 32) % 32);
        free(ts[i].data);
    }
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(b.p, 1, b.n, f) == b.n;
    if (f)
        ok = (fclose(f) == 0) && ok;
    free(b.p);
    return ok;
}

/* ---- the tests ---- */

static sv_backend_t *be;
static char dir[] = "/tmp/sv_test_llama_XXXXXX";

static sv_llama_t *load(const model_spec_t *sp, sv_error_t *err) {
    char path[128];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    if (!write_model(path, sp)) {
        CHECK(0, "cannot write %s", path);
        return NULL;
    }
    sv_llama_t *m = NULL;
    sv_llama_load(path, be, &m, err);
    unlink(path);
    return m;
}

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
