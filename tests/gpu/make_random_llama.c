/* make_random_llama.c — writes a randomly initialised Llama-family model as
 * a Hugging Face directory (config.json + model.safetensors, BF16), for the
 * end-to-end CUDA checks on a machine without network or Python packages.
 *
 *     make_random_llama OUTDIR [--shape llama-3.2-1b|smollm2-135m|small|tiny|tiny-llama3] [--arch llama|qwen2]
 *                       [--seed N]
 *
 * Shapes:
 *   llama-3.2-1b  hidden 2048, 16 layers, 32 heads / 8 KV heads, head_dim 64,
 *                 FFN 8192, vocabulary 128256, tied output, RoPE theta 5e5
 *                 with Llama 3 scaling: Llama-3.2-1B's config (2.5 GB in BF16)
 *   smollm2-135m  hidden 576, 30 layers, 9 heads / 3 KV heads, head_dim 64,
 *                 FFN 1536, vocabulary 49152, tied output, RoPE theta 1e5:
 *                 SmolLM2-135M's config (270 MB in BF16)
 *   small         hidden 512, 4 layers, 8 / 2 heads, head_dim 64, FFN 1536,
 *                 vocabulary 32000, untied
 *   tiny          hidden 64, 2 layers, 4 / 2 heads, head_dim 16, FFN 128,
 *                 vocabulary 261, untied (make_tiny_llama.py's shape)
 *   tiny-llama3   tiny's layers with Llama 3's vocabulary (128256, tied): with
 *                 its tokenizer, the engine's host work at a real vocabulary
 *                 on the CPU (BENCHMARKS.md, "The engine on the device")
 * --arch qwen2 adds Q/K/V biases (the bias path) and rotates halves as every
 * HF checkpoint does.
 *
 * Weights are BF16, so the CPU and CUDA backends, which both widen them to
 * float32 at load, compute with the same bf16-rounded values. Each tensor
 * is uniform with a chosen standard deviation from xorshift64* seeded by
 * (seed, tensor index): embeddings and output 2/sqrt(dim) (logits of std
 * ~2), Q/K 1.2/sqrt(dim) (attention scores of std ~1.5, far from uniform),
 * other matrices 1/sqrt(fan_in), norms 1 ± 0.1, biases sd 0.2. Same
 * arguments, same bytes. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct shape {
    const char *name;
    int dim, layers, heads, kv_heads, head_dim, ffn, vocab, ctx;
    double theta;
    int tied, llama3;
} shape_t;

static const shape_t SHAPES[] = {
    {"llama-3.2-1b", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 500000.0, 1, 1},
    {"smollm2-135m", 576, 30, 9, 3, 64, 1536, 49152, 8192, 100000.0, 1, 0},
    {"small", 512, 4, 8, 2, 64, 1536, 32000, 4096, 10000.0, 0, 0},
    {"tiny", 64, 2, 4, 2, 16, 128, 261, 256, 10000.0, 0, 0},
    {"tiny-llama3", 64, 2, 4, 2, 16, 128, 128256, 4096, 10000.0, 1, 0},
};

typedef struct tensor {
    char name[96];
    int64_t rows, cols; /* cols 0: a vector of rows */
    double sd, mean;    /* values uniform with this sd around mean */
} tensor_t;

static tensor_t T[2048];
static int NT;

static void add(const char *name, int64_t rows, int64_t cols, double sd, double mean) {
    tensor_t *t = &T[NT++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows, t->cols = cols, t->sd = sd, t->mean = mean;
}

static int64_t numel(const tensor_t *t) { return t->rows * (t->cols ? t->cols : 1); }

static uint16_t to_bf16(float f) { /* round to nearest even; values here are finite */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static int usage(void) {
    fprintf(stderr, "usage: make_random_llama OUTDIR [--shape llama-3.2-1b|smollm2-135m|small|tiny|tiny-llama3] "
                    "[--arch llama|qwen2] [--seed N]\n");
    return 64;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return usage();
    const char *out = argv[1], *shape_name = "llama-3.2-1b", *arch = "llama";
    uint64_t seed = 1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc)
            shape_name = argv[++i];
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else
            return usage();
    }
    const shape_t *s = NULL;
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++)
        if (!strcmp(SHAPES[i].name, shape_name))
            s = &SHAPES[i];
    int qwen = !strcmp(arch, "qwen2");
    if (!s || (!qwen && strcmp(arch, "llama")))
        return usage();
    if (mkdir(out, 0755) && errno != EEXIST) {
        fprintf(stderr, "make_random_llama: %s: %s\n", out, strerror(errno));
        return 1;
    }

    /* The tensors, in file order. */
    int64_t q_dim = (int64_t)s->heads * s->head_dim, kv_dim = (int64_t)s->kv_heads * s->head_dim;
    char nm[96];
    add("model.embed_tokens.weight", s->vocab, s->dim, 2.0 / sqrt(s->dim), 0);
    if (!s->tied)
        add("lm_head.weight", s->vocab, s->dim, 2.0 / sqrt(s->dim), 0);
    add("model.norm.weight", s->dim, 0, 0.1 / sqrt(3.0), 1.0);
    for (int l = 0; l < s->layers; l++) {
#define L(x) (snprintf(nm, sizeof nm, "model.layers.%d." x, l), nm)
        add(L("input_layernorm.weight"), s->dim, 0, 0.1 / sqrt(3.0), 1.0);
        add(L("post_attention_layernorm.weight"), s->dim, 0, 0.1 / sqrt(3.0), 1.0);
        add(L("self_attn.q_proj.weight"), q_dim, s->dim, 1.2 / sqrt(s->dim), 0);
        add(L("self_attn.k_proj.weight"), kv_dim, s->dim, 1.2 / sqrt(s->dim), 0);
        add(L("self_attn.v_proj.weight"), kv_dim, s->dim, 1.0 / sqrt(s->dim), 0);
        add(L("self_attn.o_proj.weight"), s->dim, q_dim, 1.0 / sqrt((double)q_dim), 0);
        if (qwen) {
            add(L("self_attn.q_proj.bias"), q_dim, 0, 0.2, 0);
            add(L("self_attn.k_proj.bias"), kv_dim, 0, 0.2, 0);
            add(L("self_attn.v_proj.bias"), kv_dim, 0, 0.2, 0);
        }
        add(L("mlp.gate_proj.weight"), s->ffn, s->dim, 1.0 / sqrt(s->dim), 0);
        add(L("mlp.up_proj.weight"), s->ffn, s->dim, 1.0 / sqrt(s->dim), 0);
        add(L("mlp.down_proj.weight"), s->dim, s->ffn, 1.0 / sqrt(s->ffn), 0);
#undef L
    }

    /* The safetensors header: JSON, padded with spaces to 8 bytes. */
    size_t cap = (size_t)NT * 256 + 256, hn = 0;
    char *hdr = malloc(cap);
    hn += (size_t)snprintf(hdr + hn, cap - hn, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < NT; i++) {
        uint64_t bytes = (uint64_t)numel(&T[i]) * 2;
        if (T[i].cols)
            hn += (size_t)snprintf(hdr + hn, cap - hn,
                                   ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld,%lld],"
                                   "\"data_offsets\":[%llu,%llu]}",
                                   T[i].name, (long long)T[i].rows, (long long)T[i].cols,
                                   (unsigned long long)off, (unsigned long long)(off + bytes));
        else
            hn += (size_t)snprintf(hdr + hn, cap - hn,
                                   ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld],"
                                   "\"data_offsets\":[%llu,%llu]}",
                                   T[i].name, (long long)T[i].rows, (unsigned long long)off,
                                   (unsigned long long)(off + bytes));
        off += bytes;
    }
    hn += (size_t)snprintf(hdr + hn, cap - hn, "}");
    while (hn % 8)
        hdr[hn++] = ' ';

    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "make_random_llama: %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint64_t hlen = hn;
    fwrite(&hlen, 8, 1, f); /* little-endian hosts only, as the reader */
    fwrite(hdr, 1, hn, f);
    enum { CHUNK = 1 << 20 };
    uint16_t *buf = malloc(CHUNK * sizeof *buf);
    for (int i = 0; i < NT; i++) {
        uint64_t x = seed * 0x9e3779b97f4a7c15ull + (uint64_t)(i + 1) * 0xbf58476d1ce4e5b9ull;
        if (!x)
            x = 1;
        double a = T[i].sd * sqrt(3.0); /* uniform on [-a, a] has sd a / sqrt 3 */
        int64_t n = numel(&T[i]);
        for (int64_t done = 0; done < n; done += CHUNK) {
            int64_t k = n - done < CHUNK ? n - done : CHUNK;
            for (int64_t j = 0; j < k; j++) {
                x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
                uint64_t r = x * 0x2545f4914f6cdd1dull;
                double u = (double)(r >> 11) * 0x1.0p-53 * 2.0 - 1.0;
                buf[j] = to_bf16((float)(T[i].mean + a * u));
            }
            if (fwrite(buf, 2, (size_t)k, f) != (size_t)k) {
                fprintf(stderr, "make_random_llama: writing %s failed\n", path);
                return 1;
            }
        }
    }
    if (fclose(f)) {
        fprintf(stderr, "make_random_llama: closing %s failed\n", path);
        return 1;
    }

    snprintf(path, sizeof path, "%s/config.json", out);
    f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "make_random_llama: %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(f,
            "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n"
            "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
            "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
            "  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n  \"vocab_size\": %d,\n"
            "  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": 1e-05,\n"
            "  \"rope_theta\": %.1f,\n  \"hidden_act\": \"silu\",\n"
            "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"bfloat16\"",
            qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM", qwen ? "qwen2" : "llama", s->dim,
            s->ffn, s->layers, s->heads, s->kv_heads, s->head_dim, s->vocab, s->ctx, s->theta,
            s->tied ? "true" : "false");
    if (s->llama3)
        fprintf(f, ",\n  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32.0, "
                   "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                   "\"original_max_position_embeddings\": 8192}");
    fprintf(f, "\n}\n");
    if (fclose(f))
        return 1;
    printf("make_random_llama: %s: %s %s, %d tensors, %.2f GB of BF16\n", out, s->name, arch, NT,
           (double)off / 1e9);
    free(buf);
    free(hdr);
    return 0;
}
