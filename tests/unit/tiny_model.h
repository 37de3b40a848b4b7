/* tiny_model.h — small random Llama/Qwen2/Gemma 3 models written as GGUF files, for
 * the forward-pass tests (test_llama.c, test_llama_batch.c). Header-only:
 * each test includes it once. The weights are a fixed function of the spec,
 * so two writes of one spec give the same model. */
#ifndef SV_TESTS_TINY_MODEL_H
#define SV_TESTS_TINY_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shape of every tiny model; CTX is the default context length. */
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
    uint32_t ctx;        /* context_length; 0: CTX */
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
    const bool gemma = strcmp(sp->arch, "gemma3") == 0;
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
        if (gemma) { /* Gemma 3: per-head Q/K norms, post-norms, sliding-window layers */
            T("attn_q_norm.weight", HD, 0, 0.1f, 1);
            T("attn_k_norm.weight", HD, 0, 0.1f, 1);
            T("post_attention_norm.weight", DIM, 0, 0.1f, 1);
            T("post_ffw_norm.weight", DIM, 0, 0.1f, 1);
        }
#undef T
    }
    buf_t b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, (uint64_t)n_t);
    int n_kv = 10 + (sp->scaling ? 1 : 0) + (gemma ? 1 : 0);
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
                {"context_length", sp->ctx ? sp->ctx : CTX}, {"rope.dimension_count", HD},
                {"attention.sliding_window", 5}};
    for (size_t i = 0; i < sizeof ints / sizeof *ints - (gemma ? 0 : 1); i++) {
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

/* Writes the model sp into dir/m.gguf, loads it on be and removes the
 * file. NULL on failure, with err set (an I/O error when the file cannot be
 * written). Needs src/model/llama.h and <unistd.h> included first. */
static inline sv_llama_t *load_tiny(const char *dir, const model_spec_t *sp, sv_backend_t *be, sv_error_t *err) {
    char path[256];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    if (!write_model(path, sp)) {
        sv_error_set(err, SV_ERR_IO, -1, "cannot write %s", path);
        return NULL;
    }
    sv_llama_t *m = NULL;
    sv_llama_load(path, be, &m, err);
    unlink(path);
    return m;
}

#endif
