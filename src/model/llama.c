/* llama.c — Llama-family models: configuration, weights, the forward pass.
 *
 * The forward pass, for n rows (tokens of one or many sequences):
 *
 *   x = embed(tokens)                                   (n, dim)
 *   Gemma: x *= sqrt(dim)
 *   per layer:
 *     xb = rmsnorm(x) ; q,k,v = xb·Wqᵀ(+bq), xb·Wkᵀ(+bk), xb·Wvᵀ(+bv)
 *     Qwen3, Gemma 3: q, k = rmsnorm of each head · q_norm, k_norm
 *     rope(q), rope(k) at the rows' positions (Gemma 3: the layer's own base)
 *     cache[table_seq(r)[pos / 16]][pos % 16] = k, v    (paged: kv_write)
 *     o = attention(q, own sequence's cache) · Woᵀ      (Gemma 3's local
 *         layers: the last `window` positions only)
 *     Gemma: o = rmsnorm(o) · post_attn_norm
 *     x += o
 *     xb = rmsnorm(x) ; f = (act(xb·Wgateᵀ) * xb·Wupᵀ) · Wdownᵀ  (act: silu,
 *         Gemma gelu_tanh)
 *     Gemma: f = rmsnorm(f) · post_ffw_norm
 *     x += f
 *   logits = rmsnorm(x[wanted rows]) · Woutᵀ            (n_logits, vocab)
 *
 * Every row's keys and values are written before any row attends, so a
 * step may hold a whole prefill chunk: a row sees the rows before it in
 * its sequence. Batches longer than the cache's max_tokens (or whose block
 * tables overflow the step's table buffer) run as several steps in row
 * order, which is the same thing: a row never needs a later row. The
 * backend's batch invariance makes the grouping invisible in the results.
 * The single-sequence state is the same code with an identity table. */
#include "llama.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "src/backend/quant.h"
#include "safetensors.h"
#include "util/path.h"

#define LOGIT_ROWS 64 /* at most this many rows of logits per product (kv->logit_rows) */
#define CTX_ROUND 128 /* attention's context bound is rounded up to this (step_layers) */

/* A weight matrix, one per layer or a single one: fp32 (qt == 0), or kept
 * in its GGUF block format qt when the backend has gemm_q for it (read
 * through mat_gemm / mat_rows, with the same bits either way). */
typedef struct wmat {
    void *p;            /* backend memory */
    sv_qtype qt;        /* 0: float (layer, out, in) */
    size_t layer_bytes; /* bytes of one layer's matrix */
    /* Layers in formats that differ (llama.cpp's Q4_K_M mixes Q4_K and
     * Q6_K within one kind of matrix): layer l is in lqt[l] at byte loff[l]
     * (host arrays); NULL when every layer is in qt. */
    sv_qtype *lqt;
    size_t *loff;
} wmat_t;

struct sv_llama {
    sv_llama_config_t cfg;
    sv_backend_t *be;  /* borrowed */
    wmat_t token_embd; /* (vocab, dim) */
    float *attn_norm;  /* (layer, dim) */
    wmat_t wq;         /* (layer, n_heads * head_dim, dim) */
    wmat_t wk;         /* (layer, n_kv_heads * head_dim, dim) */
    wmat_t wv;         /* (layer, n_kv_heads * head_dim, dim) */
    float *bq;         /* (layer, n_heads * head_dim), or NULL */
    float *bk;         /* (layer, n_kv_heads * head_dim), or NULL */
    float *bv;         /* (layer, n_kv_heads * head_dim), or NULL */
    float *q_norm;     /* (layer, head_dim), or NULL: Qwen3's per-head norm of Q */
    float *k_norm;     /* (layer, head_dim), or NULL: and of K */
    wmat_t wo;         /* (layer, dim, n_heads * head_dim) */
    float *ffn_norm;   /* (layer, dim) */
    wmat_t w_gate;     /* (layer, hidden_dim, dim) */
    wmat_t w_up;       /* (layer, hidden_dim, dim) */
    wmat_t w_down;     /* (layer, dim, hidden_dim) */
    float *out_norm;   /* (dim) */
    wmat_t output;     /* (vocab, dim); the same memory as token_embd when tied */
    float *inv_freq;   /* (rot_dim / 2): RoPE frequencies, scaling applied */
    /* Gemma 3 (NULL elsewhere) */
    float *post_attn_norm; /* (layer, dim): of the attention block's output */
    float *post_ffw_norm;  /* (layer, dim): of the feed-forward's output */
    float *inv_freq_local; /* (rot_dim / 2): the sliding-window layers' RoPE frequencies */
};

/* The paged cache and the buffers of one internal step. Physical block b of
 * layer l holds positions' keys at k_cache + ((l * n_blocks + b) * 16 + slot)
 * * kv_dim, so a layer's cache is one (n_blocks * 16, kv_dim) array, which
 * is what sv_kv_view_t describes. */
struct sv_llama_kv {
    const sv_llama_t *m; /* borrowed */
    int32_t n_blocks;    /* physical blocks per layer */
    int32_t max_tokens;  /* rows per internal step */
    int32_t table_cap;   /* block-table entries per internal step */
    size_t bytes;        /* backend memory held */
    float *k_cache;      /* (layer, n_blocks * 16, kv_dim) */
    float *v_cache;      /* (layer, n_blocks * 16, kv_dim) */
    float *x;            /* (max_tokens, dim) the residual stream */
    float *xb;           /* (max_tokens, dim) normed input of a block */
    float *xb2;          /* (max_tokens, dim) output of a block */
    float *q;            /* (max_tokens, n_heads * head_dim) */
    float *k;            /* (max_tokens, kv_dim) */
    float *v;            /* (max_tokens, kv_dim) */
    float *att;          /* (max_tokens, n_heads * head_dim) */
    float *hb;           /* (max_tokens, hidden_dim) */
    float *hb2;          /* (max_tokens, hidden_dim) */
    float *logits;       /* (logit_rows, vocab) */
    int32_t logit_rows;  /* min(max_tokens, LOGIT_ROWS): a decode step's logits in one product */
    /* the step's descriptors in backend memory ... */
    int32_t *tok;        /* (max_tokens) */
    int32_t *pos;        /* (max_tokens) */
    int32_t *seq;        /* (max_tokens) the step's sequence of each row */
    int32_t *table_off;  /* (max_tokens + 1) */
    int32_t *tables;     /* (table_cap) */
    int32_t *lrows;      /* (max_tokens) rows whose logits are wanted */
    /* ... and built on the host (malloc) */
    int32_t *h_seq, *h_off, *h_tab, *h_lrows;
};

/* One sequence on the paged cache with an identity block table. */
struct sv_llama_state {
    const sv_llama_t *m; /* borrowed */
    int32_t max_ctx, max_batch;
    int32_t len;         /* positions cached */
    sv_llama_kv_t *kv;   /* ceil(max_ctx / 16) blocks, max_batch rows per step */
    uint32_t *blocks;    /* (kv->n_blocks) host: 0, 1, 2, ... */
    int32_t *zeros;      /* (max_batch) host: every row is sequence 0 */
    int32_t *iota;       /* (max_batch) host: 0, 1, 2, ... (logit rows) */
};

/* ---- tensor sources: GGUF or safetensors ------------------------------------ */

typedef struct tsrc {
    sv_gguf_t *g;
    sv_st_t *st;
    bool hf; /* HF tensor names */
} tsrc_t;

/* Finds a tensor and gives its shape in ggml order (ne[0] the contiguous
 * dimension). False when absent. */
static bool tsrc_shape(const tsrc_t *s, const char *name, uint64_t ne[4], uint32_t *nd) {
    for (int i = 0; i < 4; i++)
        ne[i] = 1;
    if (s->g) {
        const sv_gguf_tensor_t *t = sv_gguf_find_tensor(s->g, name);
        if (!t)
            return false;
        for (uint32_t i = 0; i < t->n_dims && i < 4; i++)
            ne[i] = t->ne[i];
        *nd = t->n_dims;
        return true;
    }
    const sv_st_tensor_t *t = sv_st_find(s->st, name);
    if (!t)
        return false;
    if (t->n_dims > 4) {
        *nd = t->n_dims;
        return true; /* the shape check refuses it */
    }
    for (uint32_t i = 0; i < t->n_dims; i++)
        ne[i] = t->shape[t->n_dims - 1 - i];
    *nd = t->n_dims;
    return true;
}

/* Converts a tensor (already found and shape-checked: n elements) to floats. */
static sv_status tsrc_read(const tsrc_t *s, const char *name, float *dst, uint64_t n,
                           sv_error_t *err) {
    sv_status st;
    if (s->g) {
        const sv_gguf_tensor_t *t = sv_gguf_find_tensor(s->g, name);
        st = sv_dequantize(t->type, t->data, (size_t)t->n_bytes, dst, n, err);
    } else {
        st = sv_st_to_f32(sv_st_find(s->st, name), dst, err);
    }
    if (st && err) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s", err->message);
        sv_error_set(err, st, -1, "tensor %s: %s", name, msg);
    }
    return st;
}

/* ---- configuration: GGUF metadata ------------------------------------------ */

static const char *akey(char *buf, size_t n, const char *arch, const char *suffix) {
    snprintf(buf, n, "%s.%s", arch, suffix);
    return buf;
}

/* A positive int32 from key; absent keys take def (def < 0: required). */
static sv_status gguf_int(const sv_gguf_t *g, const char *key, int64_t def, int32_t *out,
                          sv_error_t *err) {
    if (!sv_gguf_find(g, key)) {
        if (def < 0)
            return sv_error_set(err, SV_ERR_SYNTAX, -1, "GGUF: missing metadata key %s", key);
        *out = (int32_t)def;
        return SV_OK;
    }
    uint32_t v;
    if (sv_gguf_get_u32(g, key, &v, err))
        return err ? err->code : SV_ERR_SYNTAX;
    if (v == 0 || v > INT32_MAX)
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "GGUF: %s = %u is out of range", key, v);
    *out = (int32_t)v;
    return SV_OK;
}

static sv_status gguf_float(const sv_gguf_t *g, const char *key, float def, float *out,
                            sv_error_t *err) {
    if (!sv_gguf_find(g, key)) {
        *out = def;
        return SV_OK;
    }
    return sv_gguf_get_f32(g, key, out, err);
}

/* Linear RoPE scaling factor (1: none) and whether rope_freqs.weight is to
 * be applied. */
typedef struct rope_scaling {
    float linear;           /* divide frequencies by this */
    bool gguf_freq_factors; /* divide frequency i by rope_freqs.weight[i] */
    bool llama3;            /* HF "llama3" */
    float factor, low_freq_factor, high_freq_factor, original_ctx;
} rope_scaling_t;

/* ---- architectures ------------------------------------------------------------
 *
 * Each architecture is one row of ARCHS: the names it goes by (GGUF
 * general.architecture, HF model_type), its tensor names (one table per
 * naming scheme), and what its blocks hold beyond the Llama block, which
 * the config readers and the loader read from the row and nowhere else
 * (forward_layers reads the flags they set). A new architecture is a new
 * row, a tensor table when its names differ, and a flag where its forward
 * pass does. */

/* The weights by kind: the model's own, then one of each per layer. */
enum {
    W_EMBD, W_OUTPUT, W_OUT_NORM,
    W_ATTN_NORM, W_Q, W_K, W_V, W_O, W_FFN_NORM, W_GATE, W_UP, W_DOWN, W_BQ, W_BK, W_BV, W_QNORM,
    W_KNORM, W_POST_ATTN_NORM, W_POST_FFW_NORM, W_N
};

/* The tensor of each kind (layer N's: %d): llama.cpp's name and Hugging
 * Face's. */
typedef struct tname {
    const char *gguf, *hf;
} tname_t;

#define HFL "model.layers.%d."
/* The names every table shares. */
#define COMMON_NAMES                                                                        \
    [W_EMBD] = {"token_embd.weight", "model.embed_tokens.weight"},                          \
    [W_OUTPUT] = {"output.weight", "lm_head.weight"},                                       \
    [W_OUT_NORM] = {"output_norm.weight", "model.norm.weight"},                             \
    [W_ATTN_NORM] = {"blk.%d.attn_norm.weight", HFL "input_layernorm.weight"},              \
    [W_Q] = {"blk.%d.attn_q.weight", HFL "self_attn.q_proj.weight"},                        \
    [W_K] = {"blk.%d.attn_k.weight", HFL "self_attn.k_proj.weight"},                        \
    [W_V] = {"blk.%d.attn_v.weight", HFL "self_attn.v_proj.weight"},                        \
    [W_O] = {"blk.%d.attn_output.weight", HFL "self_attn.o_proj.weight"},                   \
    [W_GATE] = {"blk.%d.ffn_gate.weight", HFL "mlp.gate_proj.weight"},                      \
    [W_UP] = {"blk.%d.ffn_up.weight", HFL "mlp.up_proj.weight"},                            \
    [W_DOWN] = {"blk.%d.ffn_down.weight", HFL "mlp.down_proj.weight"},                      \
    [W_BQ] = {"blk.%d.attn_q.bias", HFL "self_attn.q_proj.bias"},                           \
    [W_BK] = {"blk.%d.attn_k.bias", HFL "self_attn.k_proj.bias"},                           \
    [W_BV] = {"blk.%d.attn_v.bias", HFL "self_attn.v_proj.bias"},                           \
    [W_QNORM] = {"blk.%d.attn_q_norm.weight", HFL "self_attn.q_norm.weight"},               \
    [W_KNORM] = {"blk.%d.attn_k_norm.weight", HFL "self_attn.k_norm.weight"}

static const tname_t LLAMA_NAMES[W_N] = {
    COMMON_NAMES,
    [W_FFN_NORM] = {"blk.%d.ffn_norm.weight", HFL "post_attention_layernorm.weight"},
};

/* Gemma 3: HF's post_attention_layernorm is the norm of the attention's
 * output (llama.cpp: post_attention_norm), and the norm before the
 * feed-forward is pre_feedforward_layernorm. */
static const tname_t GEMMA3_NAMES[W_N] = {
    COMMON_NAMES,
    [W_FFN_NORM] = {"blk.%d.ffn_norm.weight", HFL "pre_feedforward_layernorm.weight"},
    [W_POST_ATTN_NORM] = {"blk.%d.post_attention_norm.weight", HFL "post_attention_layernorm.weight"},
    [W_POST_FFW_NORM] = {"blk.%d.post_ffw_norm.weight", HFL "post_feedforward_layernorm.weight"},
};
#undef COMMON_NAMES
#undef HFL

/* Q/K/V biases: loaded when present, required, or (HF) required when
 * config.json's attention_bias says so. */
typedef enum { BIAS_OPTIONAL, BIAS_REQUIRED, BIAS_CONFIG } bias_rule;

typedef struct arch {
    const char *gguf;         /* general.architecture */
    const char *hf[2];        /* model_type values (NULL-padded) */
    const tname_t *names;     /* (W_N) */
    sv_rope_style gguf_rope;  /* HF checkpoints rotate halves; llama.cpp permutes `llama`'s Q/K rows */
    bias_rule gguf_bias, hf_bias;
    bool qk_norm;             /* an RMSNorm of each Q and K head before RoPE (Qwen3, Gemma 3) */
    /* Gemma 3's block: GeGLU, embeddings scaled by sqrt(dim), post-norms of
     * both blocks' outputs, norms that multiply by 1 + w (HF stores w;
     * llama.cpp's converter stores 1 + w), and sliding-window layers with
     * their own RoPE base (GGUF: every layer but each sixth, as llama.cpp
     * has it; HF: config.json's layer_types or sliding_window_pattern). */
    bool gemma;
} arch_t;

static const arch_t ARCHS[] = {
    {"llama", {"llama", "mistral"}, LLAMA_NAMES, SV_ROPE_NORMAL, BIAS_OPTIONAL, BIAS_CONFIG, false, false},
    {"qwen2", {"qwen2", NULL}, LLAMA_NAMES, SV_ROPE_NEOX, BIAS_REQUIRED, BIAS_REQUIRED, false, false},
    {"qwen3", {"qwen3", NULL}, LLAMA_NAMES, SV_ROPE_NEOX, BIAS_OPTIONAL, BIAS_CONFIG, true, false},
    {"gemma3", {"gemma3_text", NULL}, GEMMA3_NAMES, SV_ROPE_NEOX, BIAS_OPTIONAL, BIAS_OPTIONAL, true, true},
};
#define N_ARCHS (sizeof ARCHS / sizeof ARCHS[0])

/* The row named name (hf: a model_type), or NULL. */
static const arch_t *arch_find(const char *name, bool hf) {
    for (size_t i = 0; i < N_ARCHS; i++) {
        if (!hf && strcmp(ARCHS[i].gguf, name) == 0)
            return &ARCHS[i];
        for (int j = 0; hf && j < 2 && ARCHS[i].hf[j]; j++)
            if (strcmp(ARCHS[i].hf[j], name) == 0)
                return &ARCHS[i];
    }
    return NULL;
}

/* The names ARCHS knows, for an error message: "llama, qwen2, qwen3". */
static const char *arch_list(bool hf, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < N_ARCHS; i++)
        for (int j = 0; j < (hf ? 2 : 1); j++) {
            const char *a = hf ? ARCHS[i].hf[j] : ARCHS[i].gguf;
            if (a && o < n)
                o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? ", " : "", a);
        }
    return buf;
}

static sv_status config_from_gguf(const sv_gguf_t *g, sv_llama_config_t *c, rope_scaling_t *rs,
                                  const arch_t **row, sv_error_t *err) {
    sv_gguf_str_t a;
    char known[128];
    if (sv_gguf_get_str(g, "general.architecture", &a, err))
        return err ? err->code : SV_ERR_SYNTAX;
    if (a.n >= sizeof c->arch)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "GGUF: architecture '%.*s' is not supported (%s)",
                            (int)(a.n > 64 ? 64 : a.n), a.p, arch_list(false, known, sizeof known));
    memcpy(c->arch, a.p, a.n);
    c->arch[a.n] = 0;
    const arch_t *ar_row = arch_find(c->arch, false);
    if (!ar_row)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "GGUF: architecture '%s' is not supported (%s)", c->arch,
                            arch_list(false, known, sizeof known));
    *row = ar_row;
    c->rope_style = ar_row->gguf_rope;
    c->qkv_bias = ar_row->gguf_bias == BIAS_REQUIRED;
    c->qk_norm = ar_row->qk_norm;
    c->gelu = c->embed_scale = c->post_norms = ar_row->gemma;
    char k[128];
    const char *ar = c->arch;
    sv_status st;
    if ((st = gguf_int(g, akey(k, sizeof k, ar, "embedding_length"), -1, &c->dim, err)) ||
        (st = gguf_int(g, akey(k, sizeof k, ar, "block_count"), -1, &c->n_layers, err)) ||
        (st = gguf_int(g, akey(k, sizeof k, ar, "feed_forward_length"), -1, &c->hidden_dim, err)) ||
        (st = gguf_int(g, akey(k, sizeof k, ar, "attention.head_count"), -1, &c->n_heads, err)) ||
        (st = gguf_int(g, akey(k, sizeof k, ar, "attention.head_count_kv"), c->n_heads,
                       &c->n_kv_heads, err)) ||
        (st = gguf_int(g, akey(k, sizeof k, ar, "context_length"), -1, &c->max_ctx, err)) ||
        (st = gguf_int(g, akey(k, sizeof k, ar, "attention.key_length"),
                       c->n_heads ? c->dim / c->n_heads : 0, &c->head_dim, err)) ||
        (st = gguf_int(g, akey(k, sizeof k, ar, "rope.dimension_count"), c->head_dim,
                       &c->rot_dim, err)) ||
        (st = gguf_float(g, akey(k, sizeof k, ar, "rope.freq_base"), 10000.0f, &c->rope_theta,
                         err)))
        return st;
    int32_t vlen;
    if ((st = gguf_int(g, akey(k, sizeof k, ar, "attention.value_length"), c->head_dim, &vlen,
                       err)))
        return st;
    if (vlen != c->head_dim)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "GGUF: value_length %d != key_length %d is not supported", (int)vlen,
                            (int)c->head_dim);
    akey(k, sizeof k, ar, "attention.layer_norm_rms_epsilon");
    if (!sv_gguf_find(g, k))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "GGUF: missing metadata key %s", k);
    if ((st = sv_gguf_get_f32(g, k, &c->norm_eps, err)))
        return st;

    rs->linear = 1.0f;
    akey(k, sizeof k, ar, "rope.scaling.type");
    if (sv_gguf_find(g, k)) {
        sv_gguf_str_t t;
        if ((st = sv_gguf_get_str(g, k, &t, err)))
            return st;
        if (t.n == 6 && memcmp(t.p, "linear", 6) == 0) {
            if ((st = gguf_float(g, akey(k, sizeof k, ar, "rope.scaling.factor"), 1.0f,
                                 &rs->linear, err)))
                return st;
        } else if (!(t.n == 4 && memcmp(t.p, "none", 4) == 0)) {
            return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                                "GGUF: RoPE scaling '%.*s' is not supported (none, linear, llama3 rope_freqs)",
                                (int)(t.n > 32 ? 32 : t.n), t.p);
        }
    } else if (sv_gguf_find(g, akey(k, sizeof k, ar, "rope.scale_linear"))) {
        if ((st = sv_gguf_get_f32(g, k, &rs->linear, err)))
            return st;
    }
    if (!(rs->linear > 0.0f))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "GGUF: RoPE scaling factor %g", rs->linear);
    rs->gguf_freq_factors = sv_gguf_find_tensor(g, "rope_freqs.weight") != NULL;
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    if (!ar_row->gemma)
        return SV_OK;
    /* Gemma 3 as llama.cpp reads it: the window is stated; every sixth
     * layer is global (the others local, at RoPE base 10000 unscaled); the
     * query scale is not stored, and is 1/sqrt(head_dim) except for the
     * 27B (62 layers), whose query_pre_attn_scalar is dim / n_heads. */
    const char *caps[] = {"final_logit_softcapping", "attn_logit_softcapping"};
    for (int i = 0; i < 2; i++) {
        float cap = 0.0f;
        if ((st = gguf_float(g, akey(k, sizeof k, ar, caps[i]), 0.0f, &cap, err)))
            return st;
        if (cap != 0.0f)
            return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "GGUF: %s %g is not supported", k, cap);
    }
    if ((st = gguf_int(g, akey(k, sizeof k, ar, "attention.sliding_window"), -1, &c->window, err)))
        return st;
    for (int32_t l = 0; l < c->n_layers && l < SV_LLAMA_MAX_LAYERS; l++)
        if (l % 6 != 5)
            c->local_layers[l / 64] |= (uint64_t)1 << (l % 64);
    c->rope_theta_local = 10000.0f;
    if (c->n_layers == 62)
        c->attn_scale = 1.0f / sqrtf((float)c->dim / (float)c->n_heads);
    if (rs->gguf_freq_factors)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "GGUF: rope_freqs.weight in a gemma3 model");
    return SV_OK;
}

/* ---- configuration: HF config.json ---------------------------------------- */

static sv_status json_int(json_t *o, const char *key, int64_t def, int32_t *out, sv_error_t *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (def < 0)
            return sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: missing %s", key);
        *out = (int32_t)def;
        return SV_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > INT32_MAX)
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: %s is not a positive integer",
                            key);
    *out = (int32_t)json_integer_value(v);
    return SV_OK;
}

static sv_status json_num(json_t *o, const char *key, double def, bool required, float *out,
                          sv_error_t *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required)
            return sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: missing %s", key);
        *out = (float)def;
        return SV_OK;
    }
    if (!json_is_number(v))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: %s is not a number", key);
    *out = (float)json_number_value(v);
    return SV_OK;
}

/* Gemma 3's settings in config.json: the window, which layers are local
 * (layer_types, or the older sliding_window_pattern: every n-th layer
 * global), their RoPE base (rope_local_base_freq, or rope_local: the
 * sliding_attention entry of rope_parameters), and the query scale
 * query_pre_attn_scalar^-1/2 (defaults as Gemma3TextConfig's). */
static sv_status gemma_hf(json_t *o, json_t *rope_local, sv_llama_config_t *c, sv_error_t *err) {
    const char *caps[] = {"final_logit_softcapping", "attn_logit_softcapping"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(o, caps[i]);
        if (v && !json_is_null(v))
            return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "config.json: %s is not supported", caps[i]);
    }
    float qpas = 0.0f, local = 0.0f;
    int32_t pattern = 6;
    sv_status st;
    if ((st = json_int(o, "sliding_window", -1, &c->window, err)) ||
        (st = json_num(o, "query_pre_attn_scalar", 256.0, false, &qpas, err)) ||
        (st = json_num(rope_local ? rope_local : o, rope_local ? "rope_theta" : "rope_local_base_freq", 10000.0,
                       false, &local, err)) ||
        (st = json_int(o, "sliding_window_pattern", 6, &pattern, err)))
        return st;
    if (!(qpas > 0.0f) || !(local > 0.0f))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: query_pre_attn_scalar %g, rope_local_base_freq %g",
                            qpas, local);
    const char *lt = rope_local ? json_string_value(json_object_get(rope_local, "rope_type")) : NULL;
    if (lt && strcmp(lt, "default") != 0)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "config.json: RoPE scaling '%s' of the sliding-window layers is not supported", lt);
    c->attn_scale = 1.0f / sqrtf(qpas);
    c->rope_theta_local = local;
    json_t *types = json_object_get(o, "layer_types");
    if (types && !json_is_null(types) && (!json_is_array(types) || json_array_size(types) != (size_t)c->n_layers))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: layer_types is not a list of %d layer types",
                            (int)c->n_layers);
    for (int32_t l = 0; l < c->n_layers && l < SV_LLAMA_MAX_LAYERS; l++) {
        bool is_local = (l + 1) % pattern != 0;
        if (json_is_array(types)) {
            const char *t = json_string_value(json_array_get(types, (size_t)l));
            if (!t || (strcmp(t, "sliding_attention") != 0 && strcmp(t, "full_attention") != 0))
                return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "config.json: layer_types[%d] is '%s'", (int)l,
                                    t ? t : "(not a string)");
            is_local = strcmp(t, "sliding_attention") == 0;
        }
        if (is_local)
            c->local_layers[l / 64] |= (uint64_t)1 << (l % 64);
    }
    return SV_OK;
}

static sv_status config_from_hf(const char *dir, sv_llama_config_t *c, rope_scaling_t *rs,
                                const arch_t **row, bool *tie, sv_error_t *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o)
        return sv_error_set(err, SV_ERR_IO, -1, "%s: %s (line %d)", path, je.text, je.line);
    sv_status st = SV_OK;
    if (!json_is_object(o)) {
        st = sv_error_set(err, SV_ERR_SYNTAX, -1, "%s: not a JSON object", path);
        goto done;
    }
    const char *mt = json_string_value(json_object_get(o, "model_type"));
    if (!mt) {
        st = sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: no model_type");
        goto done;
    }
    snprintf(c->arch, sizeof c->arch, "%s", mt);
    c->rope_style = SV_ROPE_NEOX; /* HF order: rotate halves */
    const arch_t *ar_row = arch_find(mt, true);
    if (!ar_row) {
        char known[128];
        st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "config.json: model_type '%s' is not supported (%s)", mt,
                          arch_list(true, known, sizeof known));
        goto done;
    }
    *row = ar_row;
    c->qkv_bias = ar_row->hf_bias == BIAS_REQUIRED ||
                  (ar_row->hf_bias == BIAS_CONFIG && json_is_true(json_object_get(o, "attention_bias")));
    c->qk_norm = ar_row->qk_norm;
    c->gelu = c->embed_scale = c->post_norms = ar_row->gemma;
    const char *act = json_string_value(json_object_get(o, ar_row->gemma ? "hidden_activation" : "hidden_act"));
    if (ar_row->gemma && !act)
        act = json_string_value(json_object_get(o, "hidden_act"));
    const char *want_act = ar_row->gemma ? "gelu_pytorch_tanh" : "silu";
    if ((act || ar_row->gemma) && (!act || strcmp(act, want_act) != 0)) {
        st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "config.json: hidden activation '%s' (only %s for %s)",
                          act ? act : "(none)", want_act, mt);
        goto done;
    }
    if (json_is_true(json_object_get(o, "mlp_bias"))) {
        st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "config.json: mlp_bias is not supported");
        goto done;
    }
    if ((st = json_int(o, "hidden_size", -1, &c->dim, err)) ||
        (st = json_int(o, "num_hidden_layers", -1, &c->n_layers, err)) ||
        (st = json_int(o, "num_attention_heads", -1, &c->n_heads, err)) ||
        (st = json_int(o, "num_key_value_heads", c->n_heads, &c->n_kv_heads, err)) ||
        (st = json_int(o, "intermediate_size", -1, &c->hidden_dim, err)) ||
        (st = json_int(o, "max_position_embeddings", -1, &c->max_ctx, err)) ||
        (st = json_int(o, "vocab_size", -1, &c->vocab_size, err)) ||
        (st = json_int(o, "head_dim", c->dim / c->n_heads, &c->head_dim, err)) ||
        (st = json_num(o, "rms_norm_eps", 0, true, &c->norm_eps, err)))
        goto done;
    /* RoPE: rope_theta and rope_scaling (transformers 4), or rope_parameters
     * holding the base and the scaling together (transformers 5), per layer
     * type where layers differ (Gemma 3: full_attention, sliding_attention). */
    json_t *rp = json_object_get(o, "rope_parameters"), *rope_main = NULL, *rope_local = NULL;
    if (rp && !json_is_null(rp)) {
        if (!json_is_object(rp)) {
            st = sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: rope_parameters is not an object");
            goto done;
        }
        json_t *full = json_object_get(rp, "full_attention");
        rope_main = json_is_object(full) ? full : rp;
        rope_local = json_is_object(full) ? json_object_get(rp, "sliding_attention") : NULL;
        if (json_is_object(full) && !json_is_object(rope_local) && ar_row->gemma) {
            st = sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: rope_parameters has no sliding_attention");
            goto done;
        }
    }
    if ((st = json_num(rope_main ? rope_main : o, "rope_theta", 10000.0, false, &c->rope_theta, err)))
        goto done;
    float prf;
    if ((st = json_num(o, "partial_rotary_factor", 1.0, false, &prf, err)))
        goto done;
    c->rot_dim = (int32_t)(c->head_dim * prf);
    /* A sliding window no shorter than the context changes nothing; a
     * shorter one is honoured by limiting the context to it (Gemma 3's
     * windows are layers' own: gemma_hf). */
    json_t *sw = json_object_get(o, "sliding_window");
    json_t *use_sw = json_object_get(o, "use_sliding_window");
    if (!ar_row->gemma && json_is_integer(sw) && !json_is_false(use_sw) && json_integer_value(sw) > 0 &&
        json_integer_value(sw) < c->max_ctx)
        c->max_ctx = (int32_t)json_integer_value(sw);
    json_t *tw = json_object_get(o, "tie_word_embeddings");
    *tie = tw ? json_is_true(tw) : ar_row->gemma; /* Gemma3TextConfig ties by default */
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    if (ar_row->gemma && (st = gemma_hf(o, rope_local, c, err)))
        goto done;

    rs->linear = 1.0f;
    json_t *sc = rope_main ? rope_main : json_object_get(o, "rope_scaling");
    if (sc && !json_is_null(sc)) {
        const char *type = json_string_value(json_object_get(sc, "rope_type"));
        if (!type)
            type = json_string_value(json_object_get(sc, "type"));
        if (!type && rope_main)
            type = "default"; /* rope_parameters with a base only */
        if (!type) {
            st = sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: rope_scaling without a type");
            goto done;
        }
        if (strcmp(type, "linear") == 0) {
            if ((st = json_num(sc, "factor", 0, true, &rs->linear, err)))
                goto done;
        } else if (strcmp(type, "llama3") == 0) {
            rs->llama3 = true;
            if ((st = json_num(sc, "factor", 0, true, &rs->factor, err)) ||
                (st = json_num(sc, "low_freq_factor", 0, true, &rs->low_freq_factor, err)) ||
                (st = json_num(sc, "high_freq_factor", 0, true, &rs->high_freq_factor, err)) ||
                (st = json_num(sc, "original_max_position_embeddings", 0, true, &rs->original_ctx,
                               err)))
                goto done;
            if (!(rs->factor > 0 && rs->low_freq_factor > 0 &&
                  rs->high_freq_factor > rs->low_freq_factor && rs->original_ctx > 0)) {
                st = sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: bad llama3 rope_scaling");
                goto done;
            }
        } else if (strcmp(type, "default") != 0) {
            st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                              "config.json: rope_scaling type '%s' is not supported (linear, llama3)",
                              type);
            goto done;
        }
        if (!(rs->linear > 0.0f)) {
            st = sv_error_set(err, SV_ERR_SYNTAX, -1, "config.json: rope_scaling factor %g",
                              rs->linear);
            goto done;
        }
    }
done:
    json_decref(o);
    return st;
}

static sv_status config_check(const sv_llama_config_t *c, sv_error_t *err) {
    if (c->n_layers > SV_LLAMA_MAX_LAYERS || c->dim > SV_LLAMA_MAX_DIM ||
        c->hidden_dim > SV_LLAMA_MAX_DIM || c->vocab_size > SV_LLAMA_MAX_VOCAB ||
        (int64_t)c->n_heads * c->head_dim > SV_LLAMA_MAX_DIM)
        return sv_error_set(err, SV_ERR_BUDGET, -1,
                            "model: dimensions past the limits (layers %d, dim %d, ffn %d, vocab %d)",
                            (int)c->n_layers, (int)c->dim, (int)c->hidden_dim, (int)c->vocab_size);
    if (c->n_heads <= 0 || c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads)
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "model: %d heads and %d kv heads",
                            (int)c->n_heads, (int)c->n_kv_heads);
    if (c->head_dim <= 0 || c->rot_dim <= 0 || c->rot_dim % 2 || c->rot_dim > c->head_dim)
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "model: head_dim %d, rope dimensions %d",
                            (int)c->head_dim, (int)c->rot_dim);
    if (!(c->norm_eps >= 0.0f) || !(c->rope_theta > 0.0f) || !(c->attn_scale > 0.0f) || c->window < 0 ||
        (c->window > 0 && !(c->rope_theta_local > 0.0f)))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "model: rms eps %g, rope theta %g (local %g), attention scale %g",
                            c->norm_eps, c->rope_theta, c->rope_theta_local, c->attn_scale);
    return SV_OK;
}

/* What the architecture needs of the backend beyond the Llama block. */
static sv_status backend_check(const sv_llama_config_t *c, const sv_backend_t *be, sv_error_t *err) {
    const sv_backend_ops_t *op = be->ops;
    const char *lacks = c->gelu && !op->geglu             ? "GeGLU"
                        : c->embed_scale && !op->scale    ? "a scale operation"
                        : c->window && !op->attention_window ? "sliding-window attention"
                                                          : NULL;
    if (lacks)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "model: a '%s' model needs %s, which the %s backend does not have (the cpu backend does)",
                            c->arch, lacks, op->name);
    return SV_OK;
}

/* ---- weights ----------------------------------------------------------------- */

typedef struct loader {
    sv_llama_t *m;
    const arch_t *arch;
    tsrc_t src;
    float *staging; /* host floats, staging_n of them */
    size_t staging_n;
    float shift;    /* added to every value load_one reads (1 for Gemma's HF norms, else 0) */
} loader_t;

/* Checks that tensor name exists with ggml shape (in, out) (out == 0: a
 * vector of length in). */
static sv_status check_shape(const loader_t *L, const char *name, int64_t in, int64_t out,
                             sv_error_t *err) {
    uint64_t ne[4];
    uint32_t nd;
    if (!tsrc_shape(&L->src, name, ne, &nd))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "model: tensor %s is missing", name);
    uint32_t want_nd = out ? 2 : 1;
    if (nd != want_nd || ne[0] != (uint64_t)in || (out && ne[1] != (uint64_t)out)) {
        /* Say it in the file's own order. */
        if (out)
            return sv_error_set(err, SV_ERR_SYNTAX, -1,
                                "model: tensor %s has shape %s[%llu, %llu%s], expected [%lld, %lld] (out, in)",
                                name, nd != 2 ? "rank-mismatched " : "", (unsigned long long)ne[1],
                                (unsigned long long)ne[0], nd > 2 ? ", ..." : "", (long long)out,
                                (long long)in);
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "model: tensor %s has %u dimensions, first %llu; expected a vector of %lld",
                            name, nd, (unsigned long long)ne[0], (long long)in);
    }
    return SV_OK;
}

/* Reads tensor name ((out, in), or a vector when out == 0) into backend
 * memory at dst. */
static sv_status load_one(loader_t *L, const char *name, int64_t in, int64_t out, float *dst,
                          sv_error_t *err) {
    sv_status st = check_shape(L, name, in, out, err);
    if (st)
        return st;
    size_t n = (size_t)in * (size_t)(out ? out : 1);
    if (n > L->staging_n)
        return sv_error_set(err, SV_ERR_ARG, -1, "model: staging buffer too small for %s", name);
    if ((st = tsrc_read(&L->src, name, L->staging, n, err)))
        return st;
    for (size_t i = 0; L->shift != 0.0f && i < n; i++)
        L->staging[i] += L->shift;
    return L->m->be->ops->upload(L->m->be, dst, L->staging, n * sizeof(float), err);
}

static sv_status balloc(sv_llama_t *m, size_t n_floats, float **out, sv_error_t *err) {
    void *p = NULL;
    sv_status st = m->be->ops->alloc(m->be, n_floats * sizeof(float), &p, err);
    *out = p;
    return st;
}

/* One weight kind for every layer: (layer, out, in), or (layer, in) for
 * vectors. gguf_fmt / hf_fmt name layer N's tensor. optional: a missing
 * tensor leaves *dst NULL. */
static sv_status load_layers(loader_t *L, const char *gguf_fmt, const char *hf_fmt, int64_t in,
                             int64_t out, bool optional, float **dst, sv_error_t *err) {
    const sv_llama_config_t *c = &L->m->cfg;
    char name[256];
    uint64_t ne[4];
    uint32_t nd;
    snprintf(name, sizeof name, L->src.hf ? hf_fmt : gguf_fmt, 0);
    if (optional && !tsrc_shape(&L->src, name, ne, &nd)) {
        *dst = NULL;
        return SV_OK;
    }
    size_t per = (size_t)in * (size_t)(out ? out : 1);
    sv_status st = balloc(L->m, per * (size_t)c->n_layers, dst, err);
    if (st)
        return st;
    for (int32_t l = 0; l < c->n_layers; l++) {
        snprintf(name, sizeof name, L->src.hf ? hf_fmt : gguf_fmt, (int)l);
        if ((st = load_one(L, name, in, out, *dst + per * (size_t)l, err)))
            return st;
    }
    return SV_OK;
}

static sv_qtype qtype_of(sv_ggml_type t) {
    switch (t) {
    case SV_GGML_F16: return SV_QT_F16;
    case SV_GGML_BF16: return SV_QT_BF16;
    case SV_GGML_Q8_0: return SV_QT_Q8_0;
    case SV_GGML_Q4_0: return SV_QT_Q4_0;
    case SV_GGML_Q4_1: return SV_QT_Q4_1;
    case SV_GGML_Q4_K: return SV_QT_Q4_K;
    case SV_GGML_Q5_K: return SV_QT_Q5_K;
    case SV_GGML_Q6_K: return SV_QT_Q6_K;
    default: return (sv_qtype)0;
    }
}

/* load_mat for a backend that keeps float weights in bf16: each of the n
 * matrices read as fp32 (dequantized, widened: exact for bf16 files),
 * rounded to bf16 in the staging buffer, and uploaded. */
static sv_status load_mat_bf16(loader_t *L, const char *fmt, int64_t in, int64_t out, int32_t n,
                               wmat_t *dst, sv_error_t *err) {
    sv_backend_t *be = L->m->be;
    size_t per = (size_t)in * (size_t)out;
    char name[256];
    sv_status st;
    if (per > L->staging_n)
        return sv_error_set(err, SV_ERR_ARG, -1, "model: staging buffer too small for %s", fmt);
    if ((st = be->ops->alloc(be, per * (size_t)n * sizeof(uint16_t), &dst->p, err)))
        return st;
    dst->qt = SV_QT_BF16;
    dst->layer_bytes = per * sizeof(uint16_t);
    uint8_t *stage = (uint8_t *)L->staging;
    for (int32_t l = 0; l < n; l++) {
        snprintf(name, sizeof name, fmt, (int)l);
        if ((st = check_shape(L, name, in, out, err)) ||
            (st = tsrc_read(&L->src, name, L->staging, per, err)))
            return st;
        /* In place: value i's two bytes land at 2i, below the float at 4i
         * that is read before them and those read after. */
        for (size_t i = 0; i < per; i++) {
            float f;
            memcpy(&f, stage + 4 * i, sizeof f);
            uint16_t b = sv_f32_to_bf16(f);
            memcpy(stage + 2 * i, &b, sizeof b);
        }
        if ((st = be->ops->upload(be, (uint8_t *)dst->p + (size_t)l * dst->layer_bytes, stage,
                                  dst->layer_bytes, err)))
            return st;
    }
    return SV_OK;
}

/* A matrix (out, in) for each of n_layers layers (fmt names layer N's
 * tensor), or a single one (n_layers 0: fmt is the name). GGUF tensors in
 * formats that the backend's gemm_q reads are stored as they are, each
 * layer in its own format; if any layer's format is not one of those,
 * every layer is dequantized to fp32. */
static sv_status load_mat(loader_t *L, const char *gguf_fmt, const char *hf_fmt, int64_t in,
                          int64_t out, int32_t n_layers, wmat_t *dst, sv_error_t *err) {
    sv_backend_t *be = L->m->be;
    const char *fmt = L->src.hf ? hf_fmt : gguf_fmt;
    int32_t n = n_layers ? n_layers : 1;
    char name[256];
    sv_status st;
    *dst = (wmat_t){0};
    bool quant = L->src.g && be->ops->gemm_q && be->ops->get_rows_q, mixed = false;
    size_t total = 0;
    for (int32_t l = 0; quant && l < n; l++) {
        snprintf(name, sizeof name, fmt, (int)l);
        if ((st = check_shape(L, name, in, out, err)))
            return st;
        const sv_gguf_tensor_t *t = sv_gguf_find_tensor(L->src.g, name);
        sv_qtype q = qtype_of(t->type);
        int32_t blk = sv_qtype_block(q);
        if (!q || blk == 0 || in % blk != 0 ||
            (size_t)t->n_bytes != (size_t)(in / blk) * sv_qtype_block_bytes(q) * (size_t)out ||
            (be->ops->reads_q && !be->ops->reads_q(be, q)))
            quant = false;
        if (l == 0) {
            dst->qt = q;
            dst->layer_bytes = (size_t)t->n_bytes;
        } else if (q != dst->qt) {
            mixed = true;
        }
        total += (size_t)t->n_bytes;
    }
    if (quant) {
        if (mixed && (!(dst->lqt = malloc(sizeof *dst->lqt * (size_t)n)) ||
                      !(dst->loff = malloc(sizeof *dst->loff * (size_t)n))))
            return sv_error_set(err, SV_ERR_NOMEM, -1, "model: cannot allocate a layer table");
        if ((st = be->ops->alloc(be, total, &dst->p, err)))
            return st;
        size_t off = 0;
        for (int32_t l = 0; l < n; l++) {
            snprintf(name, sizeof name, fmt, (int)l);
            const sv_gguf_tensor_t *t = sv_gguf_find_tensor(L->src.g, name);
            if (mixed) {
                dst->lqt[l] = qtype_of(t->type);
                dst->loff[l] = off;
            }
            if ((st = be->ops->upload(be, (uint8_t *)dst->p + off, t->data, (size_t)t->n_bytes, err)))
                return st;
            off += (size_t)t->n_bytes;
        }
        return SV_OK;
    }
    *dst = (wmat_t){0};
    size_t per = (size_t)in * (size_t)out;
    if (be->ops->weight_qtype && be->ops->weight_qtype(be) == SV_QT_BF16)
        return load_mat_bf16(L, fmt, in, out, n, dst, err);
    float *f = NULL;
    if ((st = balloc(L->m, per * (size_t)n, &f, err)))
        return st;
    dst->p = f;
    dst->layer_bytes = per * sizeof(float);
    for (int32_t l = 0; l < n; l++) {
        snprintf(name, sizeof name, fmt, (int)l);
        if ((st = load_one(L, name, in, out, f + per * (size_t)l, err)))
            return st;
    }
    return SV_OK;
}

/* y = x · W(layer)ᵀ (+ bias) through gemm or gemm_q. */
static sv_status mat_gemm(const sv_llama_t *m, int32_t rows, int32_t in, int32_t out,
                          const float *x, const wmat_t *w, size_t layer, const float *bias,
                          float *y, sv_error_t *err) {
    sv_backend_t *be = m->be;
    if (w->lqt)
        return be->ops->gemm_q(be, rows, in, out, x, (const uint8_t *)w->p + w->loff[layer], w->lqt[layer],
                               bias, y, err);
    const uint8_t *p = (const uint8_t *)w->p + layer * w->layer_bytes;
    if (w->qt)
        return be->ops->gemm_q(be, rows, in, out, x, p, w->qt, bias, y, err);
    return be->ops->gemm(be, rows, in, out, x, (const float *)p, bias, y, err);
}

/* Layer `layer` of w, when it is in the format of the whole matrix (no
 * mixed layers) and a stored one (qt != 0): for the backend's fused
 * products; NULL otherwise. */
static const void *mat_layer_q(const wmat_t *w, size_t layer) {
    if (w->lqt || !w->qt)
        return NULL;
    return (const uint8_t *)w->p + layer * w->layer_bytes;
}

/* RoPE frequencies: inv_freq[i] = theta^(-2i / rot_dim), then scaled. */
static sv_status make_inv_freq(loader_t *L, const rope_scaling_t *rs, sv_error_t *err) {
    sv_llama_t *m = L->m;
    const sv_llama_config_t *c = &m->cfg;
    int32_t half = c->rot_dim / 2;
    float *f = L->staging;
    float *ff = L->staging + half;
    if (rs->gguf_freq_factors) {
        sv_status st = check_shape(L, "rope_freqs.weight", half, 0, err);
        if (st || (st = tsrc_read(&L->src, "rope_freqs.weight", ff, (uint64_t)half, err)))
            return st;
    }
    for (int32_t i = 0; i < half; i++) {
        double inv = pow((double)c->rope_theta, -2.0 * i / (double)c->rot_dim);
        inv /= rs->linear;
        if (rs->gguf_freq_factors) {
            if (!(ff[i] > 0.0f))
                return sv_error_set(err, SV_ERR_SYNTAX, -1, "model: rope_freqs.weight[%d] = %g",
                                    (int)i, ff[i]);
            inv /= ff[i];
        }
        if (rs->llama3) {
            /* Long wavelengths are slowed down by `factor`, short ones
             * kept, and the band between interpolated. */
            double wavelen = 6.283185307179586 / inv; /* 2π / frequency */
            double low_wl = rs->original_ctx / rs->low_freq_factor;
            double high_wl = rs->original_ctx / rs->high_freq_factor;
            if (wavelen > low_wl) {
                inv /= rs->factor;
            } else if (wavelen >= high_wl) {
                double smooth = (rs->original_ctx / wavelen - rs->low_freq_factor) /
                                (rs->high_freq_factor - rs->low_freq_factor);
                inv = (1.0 - smooth) * inv / rs->factor + smooth * inv;
            }
        }
        f[i] = (float)inv;
    }
    sv_status st = balloc(m, (size_t)half, &m->inv_freq, err);
    if (st || (st = m->be->ops->upload(m->be, m->inv_freq, f, (size_t)half * sizeof(float), err)))
        return st;
    if (c->window <= 0)
        return SV_OK;
    /* The sliding-window layers' own base, unscaled (Gemma 3). */
    for (int32_t i = 0; i < half; i++)
        f[i] = (float)pow((double)c->rope_theta_local, -2.0 * i / (double)c->rot_dim);
    if ((st = balloc(m, (size_t)half, &m->inv_freq_local, err)))
        return st;
    return m->be->ops->upload(m->be, m->inv_freq_local, f, (size_t)half * sizeof(float), err);
}

static sv_status load_weights(loader_t *L, bool hf_tie, sv_error_t *err) {
    sv_llama_t *m = L->m;
    sv_llama_config_t *c = &m->cfg;
    const bool hf = L->src.hf;
    const tname_t *nm = L->arch->names;
#define NAME(w) (hf ? nm[w].hf : nm[w].gguf)
    const char *embd = NAME(W_EMBD), *outw = NAME(W_OUTPUT);
    uint64_t ne[4];
    uint32_t nd;
    /* The vocabulary is the rows of the embedding (and output) matrix. */
    if (!tsrc_shape(&L->src, embd, ne, &nd))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "model: tensor %s is missing", embd);
    if (nd != 2 || ne[1] == 0 || ne[1] > SV_LLAMA_MAX_VOCAB)
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "model: %s is not a (vocab, %d) matrix", embd,
                            (int)c->dim);
    if (hf && (uint64_t)c->vocab_size != ne[1])
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "model: config.json vocab_size %d but %s has %llu rows",
                            (int)c->vocab_size, embd, (unsigned long long)ne[1]);
    c->vocab_size = (int32_t)ne[1];
    bool has_out = tsrc_shape(&L->src, outw, ne, &nd);
    c->tied_output = !has_out;
    if (hf && !has_out && !hf_tie)
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "model: %s is missing and tie_word_embeddings is false", outw);

    size_t q_dim = (size_t)c->n_heads * c->head_dim;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t big = (size_t)c->vocab_size * c->dim;
    size_t need = (size_t)c->hidden_dim * c->dim;
    if (q_dim * c->dim > need)
        need = q_dim * c->dim;
    if (big > need)
        need = big;
    L->staging_n = need;
    L->staging = malloc(need * sizeof(float));
    if (!L->staging)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "model: out of memory staging %zu floats", need);

    sv_status st;
    if ((st = load_mat(L, embd, embd, c->dim, c->vocab_size, 0, &m->token_embd, err)))
        return st;
    if (has_out) {
        if ((st = load_mat(L, outw, outw, c->dim, c->vocab_size, 0, &m->output, err)))
            return st;
    } else {
        m->output = m->token_embd;
    }
    const char *onorm = NAME(W_OUT_NORM);
#undef NAME

#define LAYERS(w, in, out, opt, dst) load_layers(L, nm[w].gguf, nm[w].hf, in, out, opt, dst, err)
#define MATS(w, in, out, dst) load_mat(L, nm[w].gguf, nm[w].hf, in, out, c->n_layers, dst, err)
    if ((st = MATS(W_Q, c->dim, (int64_t)q_dim, &m->wq)) || (st = MATS(W_K, c->dim, (int64_t)kv_dim, &m->wk)) ||
        (st = MATS(W_V, c->dim, (int64_t)kv_dim, &m->wv)) || (st = MATS(W_O, (int64_t)q_dim, c->dim, &m->wo)) ||
        (st = MATS(W_GATE, c->dim, c->hidden_dim, &m->w_gate)) || (st = MATS(W_UP, c->dim, c->hidden_dim, &m->w_up)) ||
        (st = MATS(W_DOWN, c->hidden_dim, c->dim, &m->w_down)))
        return st;
    /* Biases: required where the architecture (or config.json) says so,
     * loaded when present otherwise. */
    bool opt = !c->qkv_bias;
    if ((st = LAYERS(W_BQ, (int64_t)q_dim, 0, opt, &m->bq)) || (st = LAYERS(W_BK, (int64_t)kv_dim, 0, opt, &m->bk)) ||
        (st = LAYERS(W_BV, (int64_t)kv_dim, 0, opt, &m->bv)))
        return st;
    /* The norms, all here: Gemma's multiply by 1 + w (HF stores w,
     * llama.cpp's converter 1 + w), so they are read with that shift, and
     * nothing else is. Per-head norms of Q and K are required where the
     * architecture has them, refused elsewhere (a file that has them is a
     * model this code would run wrong). */
    L->shift = hf && L->arch->gemma ? 1.0f : 0.0f;
    if ((st = balloc(m, (size_t)c->dim, &m->out_norm, err)) ||
        (st = load_one(L, onorm, c->dim, 0, m->out_norm, err)) ||
        (st = LAYERS(W_ATTN_NORM, c->dim, 0, false, &m->attn_norm)) ||
        (st = LAYERS(W_FFN_NORM, c->dim, 0, false, &m->ffn_norm)) ||
        (c->post_norms && ((st = LAYERS(W_POST_ATTN_NORM, c->dim, 0, false, &m->post_attn_norm)) ||
                           (st = LAYERS(W_POST_FFW_NORM, c->dim, 0, false, &m->post_ffw_norm)))) ||
        (st = LAYERS(W_QNORM, c->head_dim, 0, !c->qk_norm, &m->q_norm)) ||
        (st = LAYERS(W_KNORM, c->head_dim, 0, !c->qk_norm, &m->k_norm)))
        return st;
    L->shift = 0.0f;
    if (!c->qk_norm && (m->q_norm || m->k_norm))
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "model: Q/K norm tensors in a '%s' model (its architecture has none)", c->arch);
#undef MATS
#undef LAYERS
    if ((m->bq != NULL) != (m->bk != NULL) || (m->bq != NULL) != (m->bv != NULL))
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "model: some but not all of the q/k/v biases are present");
    c->qkv_bias = m->bq != NULL;
    return SV_OK;
}

sv_status sv_llama_load(const char *path, sv_backend_t *be, sv_llama_t **out, sv_error_t *err) {
    if (!path || !be || !out)
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_llama_load: NULL argument");
    sv_llama_t *m = calloc(1, sizeof *m);
    if (!m)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "model: out of memory");
    m->be = be;
    loader_t L = {.m = m};
    rope_scaling_t rs = {.linear = 1.0f};
    bool hf_tie = false;
    sv_status st;
    if (sv_path_is_dir(path)) {
        L.src.hf = true;
        if ((st = config_from_hf(path, &m->cfg, &rs, &L.arch, &hf_tie, err)))
            goto fail;
        char p[4096];
        snprintf(p, sizeof p, "%s/model.safetensors", path);
        struct stat sb;
        if (stat(p, &sb) != 0) {
            snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
            st = stat(p, &sb) == 0
                     ? sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                                    "%s: sharded safetensors checkpoints are not supported yet", path)
                     : sv_error_set(err, SV_ERR_IO, -1, "%s: no model.safetensors", path);
            goto fail;
        }
        snprintf(p, sizeof p, "%s/model.safetensors", path);
        if ((st = sv_st_open(p, &L.src.st, err)))
            goto fail;
    } else {
        if ((st = sv_gguf_open(path, &L.src.g, err)) ||
            (st = config_from_gguf(L.src.g, &m->cfg, &rs, &L.arch, err)))
            goto fail;
    }
    if ((st = config_check(&m->cfg, err)) || (st = backend_check(&m->cfg, be, err)) ||
        (st = load_weights(&L, hf_tie, err)) ||
        (st = make_inv_freq(&L, &rs, err)))
        goto fail;
    free(L.staging);
    sv_gguf_destroy(L.src.g);
    sv_st_destroy(L.src.st);
    *out = m;
    return SV_OK;
fail:
    free(L.staging);
    sv_gguf_destroy(L.src.g);
    sv_st_destroy(L.src.st);
    sv_llama_destroy(m);
    return st;
}

void sv_llama_destroy(sv_llama_t *m) {
    if (!m)
        return;
    sv_backend_t *be = m->be;
    void *bufs[] = {m->token_embd.p, m->attn_norm, m->wq.p, m->wk.p, m->wv.p, m->bq, m->bk, m->bv,
                    m->q_norm, m->k_norm, m->wo.p, m->ffn_norm, m->w_gate.p, m->w_up.p, m->w_down.p, m->out_norm,
                    m->inv_freq, m->output.p != m->token_embd.p ? m->output.p : NULL, m->post_attn_norm,
                    m->post_ffw_norm, m->inv_freq_local};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i])
            be->ops->free(be, bufs[i]);
    wmat_t *mats[] = {&m->wq, &m->wk, &m->wv, &m->wo, &m->w_gate, &m->w_up, &m->w_down};
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) {
        free(mats[i]->lqt);
        free(mats[i]->loff);
    }
    free(m);
}

const sv_llama_config_t *sv_llama_config(const sv_llama_t *m) { return &m->cfg; }
sv_backend_t *sv_llama_backend(const sv_llama_t *m) { return m->be; }

/* ---- the paged KV cache ------------------------------------------------------ */

#define BS SV_LLAMA_KV_BLOCK

size_t sv_llama_kv_block_bytes(const sv_llama_t *m) {
    const sv_llama_config_t *c = &m->cfg;
    return (size_t)c->n_layers * 2 * BS * (size_t)c->n_kv_heads * c->head_dim * sizeof(float);
}

void sv_llama_kv_destroy(sv_llama_kv_t *kv) {
    if (!kv)
        return;
    sv_backend_t *be = kv->m->be;
    if (be->ops->graph_forget)
        be->ops->graph_forget(be, kv);
    void *bufs[] = {kv->k_cache, kv->v_cache, kv->x, kv->xb, kv->xb2, kv->q, kv->k, kv->v,
                    kv->att, kv->hb, kv->hb2, kv->logits, kv->tok, kv->pos, kv->seq,
                    kv->table_off, kv->tables, kv->lrows};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i])
            be->ops->free(be, bufs[i]);
    free(kv->h_seq);
    free(kv->h_off);
    free(kv->h_tab);
    free(kv->h_lrows);
    free(kv);
}

sv_status sv_llama_kv_create(const sv_llama_t *m, int32_t n_blocks, int32_t max_tokens,
                             sv_llama_kv_t **out, sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    /* A step's tables hold at least one whole sequence (ceil(max_ctx / 16)
     * entries) and, unless forks share blocks, every sequence of the pool
     * (n_blocks); a batch needing more is cut into steps. */
    int64_t ctx_blocks = ((int64_t)c->max_ctx + BS - 1) / BS;
    if (n_blocks < 1 || max_tokens < 1 || (int64_t)n_blocks * BS > INT32_MAX ||
        n_blocks + ctx_blocks > INT32_MAX)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "kv: %d blocks or %d tokens per step out of range (>= 1)",
                            (int)n_blocks, (int)max_tokens);
    sv_llama_kv_t *kv = calloc(1, sizeof *kv);
    if (!kv)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "kv: out of memory");
    kv->m = m;
    kv->n_blocks = n_blocks;
    kv->max_tokens = max_tokens;
    kv->table_cap = (int32_t)(n_blocks + ctx_blocks);
    kv->logit_rows = max_tokens < LOGIT_ROWS ? max_tokens : LOGIT_ROWS;
    sv_backend_t *be = m->be;
    size_t T = (size_t)max_tokens;
    size_t q_dim = (size_t)c->n_heads * c->head_dim;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t cache = (size_t)c->n_layers * (size_t)n_blocks * BS * kv_dim;
    struct {
        void **p;
        size_t bytes;
    } want[] = {
        {(void **)&kv->k_cache, cache * sizeof(float)},
        {(void **)&kv->v_cache, cache * sizeof(float)},
        {(void **)&kv->x, T * c->dim * sizeof(float)},
        {(void **)&kv->xb, T * c->dim * sizeof(float)},
        {(void **)&kv->xb2, T * c->dim * sizeof(float)},
        {(void **)&kv->q, T * q_dim * sizeof(float)},
        {(void **)&kv->k, T * kv_dim * sizeof(float)},
        {(void **)&kv->v, T * kv_dim * sizeof(float)},
        {(void **)&kv->att, T * q_dim * sizeof(float)},
        {(void **)&kv->hb, T * c->hidden_dim * sizeof(float)},
        {(void **)&kv->hb2, T * c->hidden_dim * sizeof(float)},
        {(void **)&kv->logits, (size_t)kv->logit_rows * c->vocab_size * sizeof(float)},
        {(void **)&kv->tok, T * sizeof(int32_t)},
        {(void **)&kv->pos, T * sizeof(int32_t)},
        {(void **)&kv->seq, T * sizeof(int32_t)},
        {(void **)&kv->table_off, (T + 1) * sizeof(int32_t)},
        {(void **)&kv->tables, (size_t)kv->table_cap * sizeof(int32_t)},
        {(void **)&kv->lrows, T * sizeof(int32_t)},
    };
    sv_status st;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        if ((st = be->ops->alloc(be, want[i].bytes, want[i].p, err)))
            goto fail;
        kv->bytes += want[i].bytes;
    }
    kv->h_seq = malloc(T * sizeof(int32_t));
    kv->h_off = malloc((T + 1) * sizeof(int32_t));
    kv->h_tab = malloc((size_t)kv->table_cap * sizeof(int32_t));
    kv->h_lrows = malloc(T * sizeof(int32_t));
    if (!kv->h_seq || !kv->h_off || !kv->h_tab || !kv->h_lrows) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "kv: out of memory");
        goto fail;
    }
    *out = kv;
    return SV_OK;
fail:
    sv_llama_kv_destroy(kv);
    return st;
}

int32_t sv_llama_kv_n_blocks(const sv_llama_kv_t *kv) { return kv->n_blocks; }
size_t sv_llama_kv_bytes(const sv_llama_kv_t *kv) { return kv->bytes; }

sv_status sv_llama_kv_copy_block(sv_llama_kv_t *kv, int32_t src, int32_t dst, sv_error_t *err) {
    if (src < 0 || src >= kv->n_blocks || dst < 0 || dst >= kv->n_blocks)
        return sv_error_set(err, SV_ERR_ARG, -1, "kv: copy of block %d to %d (0..%d)", (int)src,
                            (int)dst, (int)kv->n_blocks - 1);
    if (src == dst)
        return SV_OK;
    const sv_llama_config_t *c = &kv->m->cfg;
    sv_backend_t *be = kv->m->be;
    size_t blk = (size_t)BS * c->n_kv_heads * c->head_dim; /* floats per block and layer */
    sv_status st;
    for (size_t l = 0; l < (size_t)c->n_layers; l++) {
        size_t base = l * (size_t)kv->n_blocks * blk;
        if ((st = be->ops->copy(be, kv->k_cache + base + (size_t)dst * blk,
                                kv->k_cache + base + (size_t)src * blk, blk * sizeof(float), err)) ||
            (st = be->ops->copy(be, kv->v_cache + base + (size_t)dst * blk,
                                kv->v_cache + base + (size_t)src * blk, blk * sizeof(float), err)))
            return st;
    }
    return SV_OK;
}

/* ---- forward ----------------------------------------------------------------- */

/* The residual add of a block's output (kv->xb2) into kv->x, then the
 * next block's norm (weights w) into kv->xb: one fused operation when the
 * backend has it. */
static sv_status residual_norm(const sv_llama_t *m, int32_t n, sv_llama_kv_t *kv, const float *w,
                               sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    sv_backend_t *be = m->be;
    if (be->ops->add_rmsnorm)
        return be->ops->add_rmsnorm(be, n, c->dim, kv->x, kv->xb2, w, c->norm_eps, kv->xb, err);
    sv_status st = be->ops->add(be, (size_t)n * c->dim, kv->x, kv->xb2, err);
    return st ? st : be->ops->rmsnorm(be, n, c->dim, kv->x, w, c->norm_eps, kv->xb, err);
}

/* RoPE of kv->q and kv->k, then the write of k and v into the cache view:
 * one fused operation when the backend has it. */
static sv_status rope_kv_write(const sv_llama_t *m, const sv_kv_view_t *view,
                               const sv_attn_shape_t *shape, int32_t n, sv_llama_kv_t *kv,
                               const float *inv_freq, sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    sv_backend_t *be = m->be;
    const sv_backend_ops_t *op = be->ops;
    if (op->rope_kv_write)
        return op->rope_kv_write(be, view, shape, n, c->rot_dim, c->rope_style, kv->pos,
                                 inv_freq, kv->q, kv->k, kv->v, err);
    sv_status st;
    if ((st = op->rope(be, n, c->n_heads, c->head_dim, c->rot_dim, c->rope_style, kv->pos,
                       inv_freq, kv->q, err)) ||
        (st = op->rope(be, n, c->n_kv_heads, c->head_dim, c->rot_dim, c->rope_style, kv->pos,
                       inv_freq, kv->k, err)))
        return st;
    return op->kv_write(be, view, n, kv->pos, kv->k, kv->v, err);
}

/* The q, k and v products of layer L from kv->xb: one gemm_q_n when the
 * backend has it and the three matrices share their stored format. */
static sv_status qkv(const sv_llama_t *m, int32_t n, size_t L, sv_llama_kv_t *kv, const float *bq,
                     const float *bk, const float *bv, sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    sv_backend_t *be = m->be;
    const int32_t dim = c->dim, q_dim = c->n_heads * c->head_dim;
    const int32_t kv_dim = c->n_kv_heads * c->head_dim;
    const void *ws[3] = {mat_layer_q(&m->wq, L), mat_layer_q(&m->wk, L), mat_layer_q(&m->wv, L)};
    if (be->ops->gemm_q_n && ws[0] && ws[1] && ws[2] && m->wq.qt == m->wk.qt &&
        m->wq.qt == m->wv.qt) {
        const int32_t outs[3] = {q_dim, kv_dim, kv_dim};
        const float *bs[3] = {bq, bk, bv};
        float *ys[3] = {kv->q, kv->k, kv->v};
        return be->ops->gemm_q_n(be, n, dim, 3, outs, kv->xb, ws, m->wq.qt, bs, ys, err);
    }
    sv_status st;
    if ((st = mat_gemm(m, n, dim, q_dim, kv->xb, &m->wq, L, bq, kv->q, err)) ||
        (st = mat_gemm(m, n, dim, kv_dim, kv->xb, &m->wk, L, bk, kv->k, err)))
        return st;
    return mat_gemm(m, n, dim, kv_dim, kv->xb, &m->wv, L, bv, kv->v, err);
}

/* The feed-forward's gate and up products of layer L from kv->xb and
 * SwiGLU of the two into kv->hb (GeGLU for Gemma): one gemm_q_swiglu when
 * the backend has it and the two matrices share their stored format. */
static sv_status gate_up(const sv_llama_t *m, int32_t n, size_t L, sv_llama_kv_t *kv,
                         sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    sv_backend_t *be = m->be;
    const int32_t dim = c->dim, hid = c->hidden_dim;
    const void *wg = mat_layer_q(&m->w_gate, L), *wu = mat_layer_q(&m->w_up, L);
    if (!c->gelu && be->ops->gemm_q_swiglu && wg && wu && m->w_gate.qt == m->w_up.qt)
        return be->ops->gemm_q_swiglu(be, n, dim, hid, kv->xb, wg, wu, m->w_gate.qt, kv->hb,
                                      kv->hb2, err);
    sv_status st;
    if ((st = mat_gemm(m, n, dim, hid, kv->xb, &m->w_gate, L, NULL, kv->hb, err)) ||
        (st = mat_gemm(m, n, dim, hid, kv->xb, &m->w_up, L, NULL, kv->hb2, err)))
        return st;
    if (c->gelu)
        return be->ops->geglu(be, (size_t)n * hid, kv->hb, kv->hb2, kv->hb, err);
    return be->ops->swiglu(be, (size_t)n * hid, kv->hb, kv->hb2, kv->hb, err);
}

/* Runs the n rows whose descriptors (tokens, positions, sequences of the
 * step, n_seqs block tables) are already uploaded to kv through the layers;
 * leaves the final residual stream in kv->x. */
static sv_status forward_layers(const sv_llama_t *m, sv_llama_kv_t *kv, int32_t n, int32_t n_seqs,
                                int32_t max_ctx, const sv_llama_batch_t *b, sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    sv_backend_t *be = m->be;
    const sv_backend_ops_t *op = be->ops;
    const int32_t dim = c->dim, hid = c->hidden_dim;
    const int32_t q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    const sv_attn_shape_t global = {c->n_heads, c->n_kv_heads, c->head_dim, c->attn_scale, max_ctx, 0};
    const sv_attn_shape_t local = {c->n_heads, c->n_kv_heads, c->head_dim, c->attn_scale, max_ctx, c->window};
    const size_t rows = (size_t)kv->n_blocks * BS; /* physical rows per layer */
    sv_status st;
    if ((st = m->token_embd.qt
                  ? op->get_rows_q(be, n, dim, c->vocab_size, m->token_embd.p, m->token_embd.qt,
                                   kv->tok, kv->x, err)
                  : op->get_rows(be, n, dim, c->vocab_size, m->token_embd.p, kv->tok, kv->x, err)) ||
        (c->embed_scale && (st = op->scale(be, (size_t)n * dim, kv->x, sqrtf((float)dim), err))))
        return st;
    /* The first layer's norm; every later norm follows a residual add
     * (fused when the backend has add_rmsnorm). */
    if ((st = op->rmsnorm(be, n, dim, kv->x, m->attn_norm, c->norm_eps, kv->xb, err)))
        return st;
    for (int32_t l = 0; l < c->n_layers; l++) {
        if (b->interrupt && b->interrupt(b->interrupt_ud))
            return sv_error_set(err, SV_ERR_CANCELLED, -1, "forward: interrupted before layer %d", (int)l);
        size_t L = (size_t)l;
        sv_kv_view_t view = {
            .k = kv->k_cache + L * rows * kv_dim,
            .v = kv->v_cache + L * rows * kv_dim,
            .capacity = (int32_t)rows,
            .kv_dim = kv_dim,
            .block_size = BS,
            .n_seqs = n_seqs,
            .seq_of_row = kv->seq,
            .table_off = kv->table_off,
            .tables = kv->tables,
        };
        const float *bq = m->bq ? m->bq + L * q_dim : NULL;
        const float *bk = m->bk ? m->bk + L * kv_dim : NULL;
        const float *bv = m->bv ? m->bv + L * kv_dim : NULL;
        const bool is_local = sv_llama_layer_local(c, l);
        const sv_attn_shape_t *shape = is_local ? &local : &global;
        /* attention block (kv->xb holds the normed input) */
        if ((st = qkv(m, n, L, kv, bq, bk, bv, err)) ||
            (m->q_norm && (st = op->rmsnorm(be, n * c->n_heads, c->head_dim, kv->q, m->q_norm + L * c->head_dim,
                                            c->norm_eps, kv->q, err))) ||
            (m->k_norm && (st = op->rmsnorm(be, n * c->n_kv_heads, c->head_dim, kv->k,
                                            m->k_norm + L * c->head_dim, c->norm_eps, kv->k, err))) ||
            (st = rope_kv_write(m, &view, shape, n, kv, is_local ? m->inv_freq_local : m->inv_freq, err)) ||
            (st = op->attention(be, &view, shape, n, kv->pos, kv->q, kv->att, err)) ||
            (st = mat_gemm(m, n, q_dim, dim, kv->att, &m->wo, L, NULL, kv->xb2, err)) ||
            (m->post_attn_norm && (st = op->rmsnorm(be, n, dim, kv->xb2, m->post_attn_norm + L * dim, c->norm_eps,
                                                    kv->xb2, err))) ||
            (st = residual_norm(m, n, kv, m->ffn_norm + L * dim, err)))
            return st;
        /* feed-forward block */
        if ((st = gate_up(m, n, L, kv, err)) ||
            (st = mat_gemm(m, n, hid, dim, kv->hb, &m->w_down, L, NULL, kv->xb2, err)) ||
            (m->post_ffw_norm && (st = op->rmsnorm(be, n, dim, kv->xb2, m->post_ffw_norm + L * dim, c->norm_eps,
                                                   kv->xb2, err))))
            return st;
        if (l + 1 < c->n_layers)
            st = residual_norm(m, n, kv, m->attn_norm + (L + 1) * dim, err);
        else
            st = op->add(be, (size_t)n * dim, kv->x, kv->xb2, err);
        if (st)
            return st;
    }
    return SV_OK;
}

/* forward_layers, as a step graph (backend.h) when the backend has them
 * and the step decodes: one row per sequence, so that the number of rows
 * and the rounded context bound name the work. */
static sv_status step_layers(const sv_llama_t *m, sv_llama_kv_t *kv, int32_t n, int32_t n_seqs,
                             int32_t max_ctx, const sv_llama_batch_t *b, sv_error_t *err) {
    sv_backend_t *be = m->be;
    if (!be->ops->graph_begin || n != n_seqs)
        return forward_layers(m, kv, n, n_seqs, max_ctx, b, err);
    uint64_t key = (uint64_t)n << 32 | (uint64_t)(max_ctx / CTX_ROUND);
    sv_status st = be->ops->graph_begin(be, kv, key, err);
    if (st)
        return st;
    if ((st = forward_layers(m, kv, n, n_seqs, max_ctx, b, err))) {
        be->ops->graph_abort(be);
        return st;
    }
    return be->ops->graph_end(be, err);
}

/* Logits of the nl rows of kv->x listed in kv->lrows (uploaded) into host
 * rows dst (nl, vocab), or each product's rows to b's logits hook (entries
 * l0 .. of b->logit_rows). */
static sv_status logits_rows(const sv_llama_t *m, sv_llama_kv_t *kv, const sv_llama_batch_t *b,
                             int32_t l0, int32_t n, int32_t nl, float *dst, sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    sv_backend_t *be = m->be;
    sv_status st;
    if ((st = be->ops->get_rows(be, nl, c->dim, n, kv->x, kv->lrows, kv->xb, err)) ||
        (st = be->ops->rmsnorm(be, nl, c->dim, kv->xb, m->out_norm, c->norm_eps, kv->xb, err)))
        return st;
    for (int32_t i = 0; i < nl; i += kv->logit_rows) {
        int32_t k = nl - i < kv->logit_rows ? nl - i : kv->logit_rows;
        if ((st = mat_gemm(m, k, c->dim, c->vocab_size, kv->xb + (size_t)i * c->dim,
                           &m->output, 0, NULL, kv->logits, err)))
            return st;
        if (b->logits_hook)
            st = b->logits_hook(b->logits_ud, l0 + i, k, kv->logits, err);
        else
            st = be->ops->download(be, dst + (size_t)i * c->vocab_size, kv->logits,
                                   (size_t)k * c->vocab_size * sizeof(float), err);
        if (st)
            return st;
    }
    return SV_OK;
}

/* Everything sv_llama_forward_batch promises to refuse, before any write. */
static sv_status check_batch(const sv_llama_t *m, const sv_llama_kv_t *kv,
                             const sv_llama_batch_t *b, const float *logits, sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    if (!b || b->n_tokens < 1 || !b->tokens || !b->positions || !b->seq || b->n_seqs < 1 ||
        !b->seqs || b->n_logits < 0 || b->n_logits > b->n_tokens ||
        (b->n_logits > 0 && (!b->logit_rows || !logits)) || kv->m != m)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "forward_batch: bad arguments (%d tokens, %d sequences, %d logits)",
                            b ? (int)b->n_tokens : 0, b ? (int)b->n_seqs : 0,
                            b ? (int)b->n_logits : 0);
    for (int32_t r = 0; r < b->n_tokens; r++) {
        int32_t s = b->seq[r], p = b->positions[r];
        if (b->tokens[r] < 0 || b->tokens[r] >= c->vocab_size)
            return sv_error_set(err, SV_ERR_ARG, -1, "forward_batch: row %d: token %d outside 0..%d",
                                (int)r, (int)b->tokens[r], (int)c->vocab_size - 1);
        if (s < 0 || s >= b->n_seqs)
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "forward_batch: row %d: sequence %d outside 0..%d", (int)r, (int)s,
                                (int)b->n_seqs - 1);
        bool first = r == 0 || b->seq[r - 1] != s;
        if (!first && (int64_t)p != (int64_t)b->positions[r - 1] + 1)
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "forward_batch: row %d: position %d does not follow %d (sequence %d)",
                                (int)r, (int)p, (int)b->positions[r - 1], (int)s);
        if (first && r > 0 && s < b->seq[r - 1])
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "forward_batch: row %d: rows not grouped by increasing sequence "
                                "(%d after %d)",
                                (int)r, (int)s, (int)b->seq[r - 1]);
        if (p < 0)
            return sv_error_set(err, SV_ERR_ARG, -1, "forward_batch: row %d: position %d", (int)r,
                                (int)p);
    }
    /* Then each sequence with rows (rows are grouped now): its length and
     * block table. */
    for (int32_t r = 0, last; r < b->n_tokens; r = last + 1) {
        int32_t s = b->seq[r], p = b->positions[r];
        const sv_llama_seq_t *q = &b->seqs[s];
        if (q->len < 1 || q->len > c->max_ctx)
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "forward_batch: sequence %d: length %d outside the context (1..%d)",
                                (int)s, (int)q->len, (int)c->max_ctx);
        int32_t need = (q->len + BS - 1) / BS;
        if (!q->blocks || q->n_blocks < need)
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "forward_batch: sequence %d: %d blocks for length %d", (int)s,
                                (int)q->n_blocks, (int)q->len);
        for (int32_t i = 0; i < need; i++)
            if (q->blocks[i] >= (uint32_t)kv->n_blocks)
                return sv_error_set(err, SV_ERR_ARG, -1,
                                    "forward_batch: sequence %d: block %lu outside the cache (0..%d)",
                                    (int)s, (unsigned long)q->blocks[i], (int)kv->n_blocks - 1);
        last = r;
        while (last + 1 < b->n_tokens && b->seq[last + 1] == s)
            last++;
        if ((int64_t)p + (last - r) + 1 != q->len)
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "forward_batch: sequence %d: length %d, but its rows end at "
                                "position %lld",
                                (int)s, (int)q->len, (long long)p + (last - r));
    }
    for (int32_t i = 0; i < b->n_logits; i++) {
        int32_t r = b->logit_rows[i];
        if (r < 0 || r >= b->n_tokens || (i > 0 && r <= b->logit_rows[i - 1]))
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "forward_batch: logit row %d (%d) not increasing in 0..%d",
                                (int)i, (int)r, (int)b->n_tokens - 1);
    }
    return SV_OK;
}

sv_status sv_llama_forward_batch(sv_llama_t *m, sv_llama_kv_t *kv, const sv_llama_batch_t *b,
                                 float *logits, sv_error_t *err) {
    sv_status st;
    if (!m || !kv)
        return sv_error_set(err, SV_ERR_ARG, -1, "forward_batch: NULL model or cache");
    if ((st = check_batch(m, kv, b, logits, err)))
        return st;
    sv_backend_t *be = m->be;
    const size_t vocab = (size_t)m->cfg.vocab_size;
    int32_t li = 0; /* next entry of b->logit_rows */
    for (int32_t r0 = 0, r1; r0 < b->n_tokens; r0 = r1) {
        /* One step: rows [r0, r1), at most max_tokens of them, whose
         * sequences' tables (up to each row's block) fit table_cap. A
         * sequence's entries are contiguous because its rows are. */
        int32_t ns = 0, used = 0, have = 0; /* have: entries of the current sequence */
        for (r1 = r0; r1 < b->n_tokens && r1 - r0 < kv->max_tokens; r1++) {
            const sv_llama_seq_t *q = &b->seqs[b->seq[r1]];
            bool first = r1 == r0 || b->seq[r1] != b->seq[r1 - 1];
            int32_t need = b->positions[r1] / BS + 1;
            int32_t add = first ? need : need - have;
            if (used + add > kv->table_cap)
                break; /* never at r0: one sequence fits (kv_create) */
            if (first) {
                kv->h_off[ns++] = used;
                have = 0;
            }
            for (int32_t i = 0; i < add; i++) /* < n_blocks: checked */
                kv->h_tab[used + i] = (int32_t)q->blocks[have + i];
            used += add;
            have = need;
            kv->h_seq[r1 - r0] = ns - 1;
        }
        kv->h_off[ns] = used;
        int32_t n = r1 - r0, nl = 0, l0 = li, max_ctx = 0;
        for (int32_t r = r0; r < r1; r++)
            if (b->positions[r] + 1 > max_ctx)
                max_ctx = b->positions[r] + 1;
        /* Rounded up (still a bound) so that steps differing only in their
         * positions describe the same work: a step graph's key. */
        max_ctx = (int32_t)(((int64_t)max_ctx + CTX_ROUND - 1) / CTX_ROUND * CTX_ROUND);
        for (; li < b->n_logits && b->logit_rows[li] < r1; li++)
            kv->h_lrows[nl++] = b->logit_rows[li] - r0;
        size_t i4 = sizeof(int32_t);
        if ((st = be->ops->upload(be, kv->tok, b->tokens + r0, (size_t)n * i4, err)) ||
            (st = be->ops->upload(be, kv->pos, b->positions + r0, (size_t)n * i4, err)) ||
            (st = be->ops->upload(be, kv->seq, kv->h_seq, (size_t)n * i4, err)) ||
            (st = be->ops->upload(be, kv->table_off, kv->h_off, (size_t)(ns + 1) * i4, err)) ||
            (st = be->ops->upload(be, kv->tables, kv->h_tab, (size_t)used * i4, err)) ||
            (st = be->ops->upload(be, kv->lrows, kv->h_lrows, (size_t)nl * i4, err)) ||
            (st = step_layers(m, kv, n, ns, max_ctx, b, err)))
            return st;
        if (nl > 0 && (st = logits_rows(m, kv, b, l0, n, nl, logits + (size_t)l0 * vocab, err)))
            return st;
    }
    return SV_OK;
}

/* ---- the single-sequence state ------------------------------------------------ */

void sv_llama_state_destroy(sv_llama_state_t *s) {
    if (!s)
        return;
    sv_llama_kv_destroy(s->kv);
    free(s->blocks);
    free(s->zeros);
    free(s->iota);
    free(s);
}

sv_status sv_llama_state_create(const sv_llama_t *m, int32_t max_ctx, int32_t max_batch,
                                sv_llama_state_t **out, sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    if (max_ctx < 1 || max_ctx > c->max_ctx || max_batch < 1)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "state: max_ctx %d (1..%d) or max_batch %d (>= 1) out of range",
                            (int)max_ctx, (int)c->max_ctx, (int)max_batch);
    sv_llama_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "state: out of memory");
    s->m = m;
    s->max_ctx = max_ctx;
    s->max_batch = max_batch;
    int32_t nb = (max_ctx + BS - 1) / BS;
    sv_status st = sv_llama_kv_create(m, nb, max_batch, &s->kv, err);
    if (st) {
        sv_llama_state_destroy(s);
        return st;
    }
    s->blocks = malloc((size_t)nb * sizeof(uint32_t));
    s->zeros = calloc((size_t)max_batch, sizeof(int32_t));
    s->iota = malloc((size_t)max_batch * sizeof(int32_t));
    if (!s->blocks || !s->zeros || !s->iota) {
        sv_llama_state_destroy(s);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "state: out of memory");
    }
    for (int32_t i = 0; i < nb; i++)
        s->blocks[i] = (uint32_t)i;
    for (int32_t i = 0; i < max_batch; i++)
        s->iota[i] = i;
    *out = s;
    return SV_OK;
}

void sv_llama_state_reset(sv_llama_state_t *s) { s->len = 0; }
int32_t sv_llama_state_len(const sv_llama_state_t *s) { return s->len; }

sv_status sv_llama_forward(sv_llama_t *m, sv_llama_state_t *s, const int32_t *tokens,
                           const int32_t *positions, int32_t n, sv_llama_logits which,
                           float *logits, sv_error_t *err) {
    const sv_llama_config_t *c = &m->cfg;
    if (n < 1 || !tokens || !positions || (which != SV_LLAMA_LOGITS_NONE && !logits) ||
        s->m != m)
        return sv_error_set(err, SV_ERR_ARG, -1, "forward: bad arguments (n %d)", (int)n);
    /* Check everything before touching the cache. */
    if (positions[0] < 0 || positions[0] > s->len)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "forward: first position %d leaves a gap (%d positions cached)",
                            (int)positions[0], (int)s->len);
    if ((int64_t)positions[0] + n > s->max_ctx)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "forward: positions up to %lld exceed the context of %d",
                            (long long)positions[0] + n - 1, (int)s->max_ctx);
    for (int32_t i = 0; i < n; i++) {
        if (positions[i] != positions[0] + i)
            return sv_error_set(err, SV_ERR_ARG, -1,
                                "forward: positions must be consecutive (position[%d] = %d)",
                                (int)i, (int)positions[i]);
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return sv_error_set(err, SV_ERR_ARG, -1, "forward: token[%d] = %d outside 0..%d",
                                (int)i, (int)tokens[i], (int)c->vocab_size - 1);
    }
    /* Steps of max_batch rows, each a one-sequence batch over the identity
     * table. */
    sv_status st;
    for (int32_t r0 = 0; r0 < n; r0 += s->max_batch) {
        int32_t k = n - r0 < s->max_batch ? n - r0 : s->max_batch;
        sv_llama_seq_t seq = {s->blocks, s->kv->n_blocks, positions[r0] + k};
        sv_llama_batch_t b = {
            .n_tokens = k,
            .tokens = tokens + r0,
            .positions = positions + r0,
            .seq = s->zeros,
            .n_seqs = 1,
            .seqs = &seq,
        };
        float *dst = NULL;
        if (which == SV_LLAMA_LOGITS_ALL) {
            b.n_logits = k;
            b.logit_rows = s->iota;
            dst = logits + (size_t)r0 * c->vocab_size;
        } else if (which == SV_LLAMA_LOGITS_LAST && r0 + k == n) {
            b.n_logits = 1;
            b.logit_rows = &s->iota[k - 1];
            dst = logits;
        }
        if ((st = sv_llama_forward_batch(m, s->kv, &b, dst, err)))
            return st;
        s->len = positions[r0] + k;
    }
    return SV_OK;
}
