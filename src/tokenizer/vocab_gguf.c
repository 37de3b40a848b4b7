/* vocab_gguf.c — a vocabulary from a GGUF file's tokenizer.ggml.* metadata.
 *
 * The result is the same sv_vocab_t that vocab.c builds from a
 * tokenizer.json, so bpe.c encodes with it and the token index reads its
 * bytes. What GGUF stores and how it maps:
 *
 * - tokenizer.ggml.model: "gpt2" is byte-level BPE (GPT-2, Llama 3, Qwen2/3,
 *   SmolLM2): tokens are spelled in GPT-2's byte alphabet and merge by rank
 *   (tokenizer.ggml.merges, "left right" spellings, best first). "llama" is
 *   SentencePiece BPE (Llama 2, TinyLlama, Mistral): tokens are spelled with
 *   U+2581 for spaces, bytes without a token fall back to <0xNN> tokens, and
 *   there are no merges but a score per token: the adjacent pair whose
 *   concatenation is the token with the highest score merges first (the
 *   leftmost of equal scores). We turn that into the merge table bpe.c
 *   uses: every split of every normal token into two normal tokens is a
 *   merge, ranked by the token's score (equal scores, equal rank). Before
 *   BPE, spaces become U+2581 and, with tokenizer.ggml.add_space_prefix
 *   (default true), a U+2581 is prepended to every stretch of text between
 *   special tokens, as llama.cpp does and as Llama 2's tokenizer.json does
 *   with its Prepend normalizer. Other models (bert, t5, rwkv, ...) are
 *   refused.
 * - tokenizer.ggml.token_type: 1 normal and 6 byte tokens are the model's
 *   vocabulary (what BPE looks up); 3 control tokens are special added
 *   tokens, 4 user-defined ones non-special added tokens (both matched in
 *   the raw text before BPE, the control ones unless special tokens are
 *   read as text), 2 unknown is both (Llama 2's tokenizer.json lists <unk>
 *   in both places), 5 unused ids are holes (SV_TOKEN_UNUSED). Without the
 *   array every token is normal.
 * - tokenizer.ggml.pre names the byte-level pre-tokenizer instead of
 *   storing its regexes: PRETOKENIZERS below lists the names we know with
 *   the split patterns of the Hugging Face tokenizer they stand for (each a
 *   Split with Isolated behavior, in order, then byte-level BPE), whether
 *   whole pieces that are tokens skip merging (ignore_merges), whether the
 *   text is NFC-normalized first (Qwen2's), and whether BOS is expected.
 *   An unknown name is an error; a missing one means "default", as in
 *   llama.cpp.
 * - BOS, EOS, end-of-turn and end-of-message come from the *_token_id keys
 *   (a negative id means none); EOS, EOT and EOM are SV_TOKEN_EOG, and
 *   well-known names (<|im_end|>, <|eot_id|>, ...) fill in and flag the
 *   rest, as for tokenizer.json. tokenizer.ggml.add_bos_token says whether
 *   prompts start with BOS (default: true for "llama" and for the names
 *   that llama.cpp gives BOS to).
 *
 * Token bytes are spelled the way a Hugging Face decoder would: byte-level
 * characters mapped back (a token with a character outside the alphabet is
 * its UTF-8 text), or, for "llama", U+2581 as a space and <0xNN> as its
 * byte. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/gguf.h"
#include "util/utf8.h"
#include "src/tokenizer/internal/vocab_internal.h"

/* GGUF token types. */
enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_UNUSED = 5, T_BYTE = 6 };

/* ---- the pre-tokenizer table ------------------------------------------------ */

#define GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define LLAMA3                                                                                     \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"   \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2                                                                                      \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"       \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define TEKKEN                                                                                     \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER "*|\\p{N}"   \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GPT4O                                                                                      \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+"   \
    LOWER "*" CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)" \
    "|\\s+"
#define BLOOM " ?[^(\\s|.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C)]+"
#define CJK "[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF]+"

typedef struct {
    const char *names;            /* '|'-separated */
    const char *patterns[5];      /* Isolated splits, in order; NULL-terminated */
    bool ignore_merges, nfc, add_bos;
} pretok_entry_t;

/* Names as llama.cpp's converter writes them; patterns from the
 * tokenizer.json files of those models (Oniguruma syntax, which pretok.c
 * translates). tests/tokenizer/test_gguf_parity.py checks llama-bpe,
 * qwen2 and smollm against Hugging Face; the other rows are transcribed
 * from the models' tokenizer.json files and not checked here. */
static const pretok_entry_t PRETOKENIZERS[] = {
    {"llama3|llama-v3|llama-bpe|falcon3|pixtral|lfm2|midm-2.0", {LLAMA3}, true, false, true},
    {"qwen2|deepseek-r1-qwen", {QWEN2}, false, true, false},
    {"smollm|starcoder|refact|command-r|codeshell|exaone|minerva-7b", {"\\p{N}", GPT2}, false, false, false},
    {"gpt2|gpt-2|phi-2|olmo|mpt|jais|exaone4|jina-es|jina-de|jina-v2-es|jina-v2-de|"
     "jina-v1-en|jina-v2-code|roberta-bpe|gigachat|mellum", {GPT2}, false, false, false},
    {"tekken", {TEKKEN}, true, false, true},
    {"dbrx|smaug-bpe|chatglm-bpe|glm4", {LLAMA3}, false, false, false},
    {"stablelm2|megrez|hunyuan", {QWEN2}, false, false, false},
    {"gpt-4o|llama4", {GPT4O}, false, false, false},
    {"bloom|poro-chat|gpt3-finnish", {BLOOM}, false, false, false},
    {"viking", {BLOOM, "\\p{N}"}, false, false, false},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false, false},
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false, false},
    {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK, "\\p{N}"}, false, false, false},
};

static const pretok_entry_t *find_pretok(const char *name, size_t n) {
    for (size_t i = 0; i < sizeof PRETOKENIZERS / sizeof PRETOKENIZERS[0]; i++) {
        const char *p = PRETOKENIZERS[i].names;
        while (*p) {
            const char *bar = strchr(p, '|');
            size_t len = bar ? (size_t)(bar - p) : strlen(p);
            if (len == n && memcmp(p, name, n) == 0)
                return &PRETOKENIZERS[i];
            p += len + (bar ? 1 : 0);
        }
    }
    return NULL;
}

/* ---- loading ---------------------------------------------------------------- */

typedef struct {
    const sv_gguf_t *g;
    sv_error_t *err;
    sv_vocab_t *v;
    const sv_gguf_str_t *tokens;
    uint32_t n;
    int32_t *types;      /* (n) */
    bool have_types;     /* tokenizer.ggml.token_type was there */
    float *scores;       /* (n) or NULL */
    bool spm;
} load_t;

static sv_status oom(load_t *l) { return sv_error_set(l->err, SV_ERR_NOMEM, -1, "gguf vocabulary: out of memory"); }

/* Reads an optional *_token_id key into *out (-1 when absent or negative). */
static sv_status special_id(load_t *l, const char *key, int32_t *out) {
    *out = -1;
    if (!sv_gguf_find(l->g, key))
        return SV_OK;
    int32_t id;
    sv_status st = sv_gguf_get_i32(l->g, key, &id, l->err);
    if (st)
        return st;
    if (id >= 0 && (uint32_t)id >= l->n)
        return sv_error_set(l->err, SV_ERR_SYNTAX, -1, "gguf vocabulary: %s is %d, but there are %u tokens",
                            key, id, l->n);
    if (id >= 0 && l->types[id] == T_UNUSED)
        return sv_error_set(l->err, SV_ERR_SYNTAX, -1, "gguf vocabulary: %s is %d, an unused token", key, id);
    *out = id < 0 ? -1 : id;
    return SV_OK;
}

static sv_status optional_bool(load_t *l, const char *key, bool dflt, bool *out) {
    *out = dflt;
    return sv_gguf_find(l->g, key) ? sv_gguf_get_bool(l->g, key, out, l->err) : SV_OK;
}

/* Spellings, token types, flags, the model-vocabulary hash and the added
 * tokens. */
static sv_status load_tokens(load_t *l) {
    sv_vocab_t *v = l->v;
    sv_bytes_t strs = {0};
    int32_t *model = NULL;
    size_t n_model = 0;
    uint32_t n = l->n;
    sv_status st = SV_OK;
    v->n_ids = n;
    v->str_off = calloc(n, sizeof *v->str_off);
    v->str_len = calloc(n, sizeof *v->str_len);
    v->byte_off = calloc(n, sizeof *v->byte_off);
    v->byte_len = calloc(n, sizeof *v->byte_len);
    v->flags = calloc(n, 1);
    v->added = calloc(n, sizeof *v->added);
    model = malloc(n * sizeof *model);
    if (!v->str_off || !v->str_len || !v->byte_off || !v->byte_len || !v->flags || !v->added || !model ||
        sv_bytes_append(&strs, "", 1))
        goto nomem;
    for (uint32_t id = 0; id < n; id++) {
        const sv_gguf_str_t *t = &l->tokens[id];
        int32_t type = l->types[id];
        if (t->n > SV_VOCAB_MAX_TOKEN_BYTES) {
            st = sv_error_set(l->err, SV_ERR_BUDGET, -1,
                              "gguf vocabulary: token %u is %llu bytes long (the limit is %u)", id,
                              (unsigned long long)t->n, SV_VOCAB_MAX_TOKEN_BYTES);
            goto done;
        }
        if (type < T_NORMAL || type > T_BYTE) {
            st = sv_error_set(l->err, SV_ERR_SYNTAX, -1, "gguf vocabulary: token %u has unknown type %d",
                              id, type);
            goto done;
        }
        if (type == T_UNUSED) {
            v->flags[id] = SV_TOKEN_UNUSED;
            continue;
        }
        if (strs.n + t->n + 1 > UINT32_MAX)
            goto nomem;
        v->str_off[id] = (uint32_t)strs.n;
        v->str_len[id] = (uint32_t)t->n;
        if (sv_bytes_append(&strs, t->p, (size_t)t->n) || sv_bytes_append(&strs, "", 1))
            goto nomem;
        bool byte = sv_vocab_byte_token(t->p, (size_t)t->n) >= 0;
        if (type == T_BYTE && l->spm && !byte) {
            st = sv_error_set(l->err, SV_ERR_SYNTAX, -1, "gguf vocabulary: byte token %u is not spelled <0xNN>",
                              id);
            goto done;
        }
        if (type == T_NORMAL || type == T_BYTE || type == T_UNKNOWN)
            model[n_model++] = (int32_t)id;
        if (byte && l->spm && (type == T_BYTE || !l->have_types))
            v->flags[id] |= SV_TOKEN_BYTE;
        /* Added tokens are matched in the text before the pre-tokenizer; one
         * that is not UTF-8 could match inside a character and hand the
         * pre-tokenizer a broken piece, and never matches text a
         * Hugging Face tokenizer would split there. */
        if ((type == T_CONTROL || type == T_USER || type == T_UNKNOWN) && t->n > 0 &&
            sv_utf8_valid((const uint8_t *)t->p, (size_t)t->n)) {
            sv_added_token_t *a = &v->added[v->n_added++];
            a->id = (int32_t)id;
            a->off = v->str_off[id];
            a->len = v->str_len[id];
            a->special = type != T_USER;
            v->flags[id] |= SV_TOKEN_ADDED;
        }
        if (type == T_CONTROL || type == T_UNKNOWN)
            v->flags[id] |= SV_TOKEN_SPECIAL;
    }
    v->strs = (char *)strs.p;
    v->strs_n = strs.n;
    strs.p = NULL;
    if (sv_vocab_index(v, model, n_model))
        goto nomem;
    goto done;
nomem:
    st = oom(l);
done:
    sv_bytes_free(&strs);
    free(model);
    return st;
}

/* GPT-2 style: "left right" spellings in rank order. */
static sv_status load_merges(load_t *l) {
    sv_vocab_t *v = l->v;
    const sv_gguf_str_t *m;
    uint64_t nm;
    sv_status st = sv_gguf_get_strs(l->g, "tokenizer.ggml.merges", &m, &nm, l->err);
    if (st)
        return st;
    if (nm > UINT32_MAX / 2)
        return sv_error_set(l->err, SV_ERR_BUDGET, -1, "gguf vocabulary: %llu merges", (unsigned long long)nm);
    v->merges = malloc((nm + 1) * sizeof *v->merges);
    char *joined = malloc(2 * SV_VOCAB_MAX_TOKEN_BYTES + 1);
    if (!v->merges || !joined) {
        free(joined);
        return oom(l);
    }
    for (uint64_t i = 0; i < nm; i++) {
        const char *s = m[i].p;
        size_t n = (size_t)m[i].n;
        /* The first space after the first byte separates the two sides (a
         * side may itself start with a space, as in llama.cpp). */
        const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
        int32_t a = -1, b = -1, ab = -1;
        if (sp) {
            size_t an = (size_t)(sp - s), bn = n - an - 1;
            a = sv_vocab_lookup(v, s, an);
            b = sv_vocab_lookup(v, sp + 1, bn);
            if (a >= 0 && b >= 0 && an + bn <= 2 * SV_VOCAB_MAX_TOKEN_BYTES) {
                memcpy(joined, s, an);
                memcpy(joined + an, sp + 1, bn);
                ab = sv_vocab_lookup(v, joined, an + bn);
            }
        }
        if (ab < 0) {
            free(joined);
            return sv_error_set(l->err, SV_ERR_SYNTAX, (long)i,
                                "gguf vocabulary: merge %llu (\"%.*s\") is not two tokens that join "
                                "into a token", (unsigned long long)i, (int)(n > 80 ? 80 : n), s);
        }
        v->merges[i][0] = a;
        v->merges[i][1] = b;
    }
    free(joined);
    v->n_merges = (uint32_t)nm;
    return SV_OK;
}

typedef struct {
    float score;
    int32_t left, right;
} spm_merge_t;

static int spm_cmp(const void *x, const void *y) {
    const spm_merge_t *a = x, *b = y;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    if (a->left != b->left)
        return a->left < b->left ? -1 : 1;
    return (a->right > b->right) - (a->right < b->right);
}

/* A normal token: the only kind that merging starts from or produces. */
static bool mergeable(const load_t *l, int32_t id) {
    return id >= 0 && l->types[id] == T_NORMAL && !(l->v->flags[id] & SV_TOKEN_BYTE);
}

/* SentencePiece style: every split of a normal token into two normal
 * tokens, ranked by the token's score, best first. */
static sv_status spm_merges(load_t *l) {
    sv_vocab_t *v = l->v;
    spm_merge_t *ms = NULL;
    size_t n = 0, cap = 0;
    for (uint32_t id = 0; id < l->n; id++) {
        if (!mergeable(l, (int32_t)id))
            continue;
        const char *s = v->strs + v->str_off[id];
        size_t len = v->str_len[id];
        float score = isnan(l->scores[id]) ? -INFINITY : l->scores[id];
        /* Split at each character boundary. */
        for (size_t k = 1; k < len; k++) {
            if (((uint8_t)s[k] & 0xC0) == 0x80)
                continue;
            int32_t a = sv_vocab_lookup(v, s, k), b = sv_vocab_lookup(v, s + k, len - k);
            if (!mergeable(l, a) || !mergeable(l, b))
                continue;
            if (n == cap) {
                size_t c = cap ? 2 * cap : 1024;
                spm_merge_t *p = realloc(ms, c * sizeof *p);
                if (!p) {
                    free(ms);
                    return oom(l);
                }
                ms = p;
                cap = c;
            }
            ms[n++] = (spm_merge_t){score, a, b};
        }
    }
    if (n > UINT32_MAX / 2) {
        free(ms);
        return sv_error_set(l->err, SV_ERR_BUDGET, -1, "gguf vocabulary: too many merges");
    }
    if (n)
        qsort(ms, n, sizeof *ms, spm_cmp);
    v->merges = malloc((n + 1) * sizeof *v->merges);
    v->merge_ranks = malloc((n + 1) * sizeof *v->merge_ranks);
    if (!v->merges || !v->merge_ranks) {
        free(ms);
        return oom(l);
    }
    uint32_t rank = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && ms[i].score != ms[i - 1].score)
            rank++;
        v->merges[i][0] = ms[i].left;
        v->merges[i][1] = ms[i].right;
        v->merge_ranks[i] = rank;
    }
    v->n_merges = (uint32_t)n;
    free(ms);
    return SV_OK;
}

static sv_status load_pretok(load_t *l) {
    sv_vocab_t *v = l->v;
    const char *name = "default";
    size_t len = 7;
    sv_gguf_str_t pre;
    if (sv_gguf_find(l->g, "tokenizer.ggml.pre")) {
        sv_status st = sv_gguf_get_str(l->g, "tokenizer.ggml.pre", &pre, l->err);
        if (st)
            return st;
        name = pre.p;
        len = (size_t)pre.n;
    }
    const pretok_entry_t *e = find_pretok(name, len);
    if (!e)
        return sv_error_set(l->err, SV_ERR_UNSUPPORTED, -1,
                            "gguf vocabulary: unknown pre-tokenizer tokenizer.ggml.pre = \"%.*s\" (known: "
                            "llama-bpe, qwen2, smollm, gpt2, tekken, default, falcon, deepseek-coder, "
                            "... see vocab_gguf.c)", (int)(len > 64 ? 64 : len), name);
    for (int i = 0; i < 5 && e->patterns[i]; i++) {
        sv_status st = sv_vocab_add_step(v, e->patterns[i], false, SV_SPLIT_ISOLATED, false, false, l->err);
        if (st)
            return st;
    }
    v->ignore_merges = e->ignore_merges;
    v->nfc = e->nfc;
    v->add_bos = e->add_bos;
    return SV_OK;
}

static sv_status load(load_t *l) {
    const sv_gguf_t *g = l->g;
    sv_vocab_t *v = l->v;
    sv_status st;
    sv_gguf_str_t model;
    uint64_t n;
    if ((st = sv_gguf_get_str(g, "tokenizer.ggml.model", &model, l->err)))
        return st;
    bool gpt2 = model.n == 4 && memcmp(model.p, "gpt2", 4) == 0;
    l->spm = model.n == 5 && memcmp(model.p, "llama", 5) == 0;
    if (!gpt2 && !l->spm)
        return sv_error_set(l->err, SV_ERR_UNSUPPORTED, -1,
                            "gguf vocabulary: tokenizer.ggml.model \"%.*s\" is not supported (gpt2 and "
                            "llama are)", (int)(model.n > 32 ? 32 : model.n), model.p);
    if ((st = sv_gguf_get_strs(g, "tokenizer.ggml.tokens", &l->tokens, &n, l->err)))
        return st;
    if (n == 0 || n > SV_VOCAB_MAX_IDS)
        return sv_error_set(l->err, n ? SV_ERR_BUDGET : SV_ERR_SYNTAX, -1,
                            "gguf vocabulary: %llu tokens (1 to %u are accepted)", (unsigned long long)n,
                            SV_VOCAB_MAX_IDS);
    l->n = (uint32_t)n;
    uint64_t k;
    l->have_types = sv_gguf_find(g, "tokenizer.ggml.token_type") != NULL;
    if (l->have_types) {
        if ((st = sv_gguf_get_i32s(g, "tokenizer.ggml.token_type", &l->types, &k, l->err)))
            return st;
        if (k != n)
            return sv_error_set(l->err, SV_ERR_SYNTAX, -1,
                                "gguf vocabulary: %llu token types for %llu tokens", (unsigned long long)k,
                                (unsigned long long)n);
    } else {
        l->types = malloc(n * sizeof *l->types);
        if (!l->types)
            return oom(l);
        for (uint64_t i = 0; i < n; i++)
            l->types[i] = T_NORMAL;
    }
    if (l->spm) {
        if ((st = sv_gguf_get_f32s(g, "tokenizer.ggml.scores", &l->scores, &k, l->err)))
            return st;
        if (k != n)
            return sv_error_set(l->err, SV_ERR_SYNTAX, -1, "gguf vocabulary: %llu scores for %llu tokens",
                                (unsigned long long)k, (unsigned long long)n);
    }
    if ((st = load_tokens(l)))
        return st;

    /* The model: merges, pre-tokenizer, spelling. */
    sv_spelling_t spelling = {0};
    if (gpt2) {
        v->byte_level = spelling.byte_level = true;
        if ((st = load_merges(l)) || (st = load_pretok(l)))
            return st;
    } else {
        v->byte_fallback = v->fuse_unk = true;
        spelling.byte_fallback = spelling.replace_meta = true;
        bool prefix, squash;
        if ((st = optional_bool(l, "tokenizer.ggml.add_space_prefix", true, &prefix)) ||
            (st = optional_bool(l, "tokenizer.ggml.remove_extra_whitespaces", false, &squash)))
            return st;
        v->meta_escape = true;
        v->meta_prefix = prefix ? SV_META_PREFIX_EACH : SV_META_PREFIX_NONE;
        if (squash)
            snprintf(v->unsupported, sizeof v->unsupported,
                     "gguf vocabulary: tokenizer.ggml.remove_extra_whitespaces is not implemented by "
                     "the encoder");
        v->add_bos = true;
        if ((st = spm_merges(l)))
            return st;
    }

    /* Token bytes. */
    sv_bytes_t bytes = {0};
    for (uint32_t id = 0; id < l->n; id++) {
        if (v->flags[id] & SV_TOKEN_UNUSED)
            continue;
        size_t len = v->str_len[id];
        if (bytes.n > UINT32_MAX - 4 * len) {
            sv_bytes_free(&bytes);
            return oom(l);
        }
        v->byte_off[id] = (uint32_t)bytes.n;
        if (sv_vocab_spell_bytes(&spelling, v->strs + v->str_off[id], len, &bytes)) {
            sv_bytes_free(&bytes);
            return oom(l);
        }
        v->byte_len[id] = (uint32_t)(bytes.n - v->byte_off[id]);
        if (v->byte_len[id] > v->max_token_bytes)
            v->max_token_bytes = v->byte_len[id];
    }
    v->bytes = bytes.p;
    v->bytes_n = bytes.n;

    /* Special ids. */
    int32_t eom, unk, pad;
    if ((st = special_id(l, "tokenizer.ggml.bos_token_id", &v->bos)) ||
        (st = special_id(l, "tokenizer.ggml.eos_token_id", &v->eos)) ||
        (st = special_id(l, "tokenizer.ggml.eot_token_id", &v->eot)) ||
        (st = special_id(l, "tokenizer.ggml.eom_token_id", &eom)) ||
        (st = special_id(l, "tokenizer.ggml.unknown_token_id", &unk)) ||
        (st = special_id(l, "tokenizer.ggml.padding_token_id", &pad)))
        return st;
    const int32_t eog[] = {v->eos, v->eot, eom};
    for (int i = 0; i < 3; i++)
        if (eog[i] >= 0)
            v->flags[eog[i]] |= SV_TOKEN_EOG;
    if (v->bos >= 0)
        v->flags[v->bos] |= SV_TOKEN_BOS;
    sv_vocab_guess_specials(v);
    if (l->spm) {
        v->unk_id = unk;
        for (uint32_t id = 0; id < l->n && v->unk_id < 0; id++)
            if (l->types[id] == T_UNKNOWN)
                v->unk_id = (int32_t)id;
    }
    if ((st = optional_bool(l, "tokenizer.ggml.add_bos_token", v->add_bos, &v->add_bos)))
        return st;
    if (v->add_bos && v->bos < 0)
        v->add_bos = false;  /* nothing to add */
    return SV_OK;
}

sv_status sv_vocab_from_gguf(const sv_gguf_t *g, sv_vocab_t **out, sv_error_t *err) {
    if (!g || !out)
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_vocab_from_gguf: bad arguments");
    *out = NULL;
    load_t l = {.g = g, .err = err};
    l.v = sv_vocab_new();
    if (!l.v)
        return oom(&l);
    sv_status st = load(&l);
    free(l.types);
    free(l.scores);
    if (st) {
        sv_vocab_destroy(l.v);
        return st;
    }
    *out = l.v;
    return SV_OK;
}

sv_status sv_vocab_load_gguf(const char *path, sv_vocab_t **out, sv_error_t *err) {
    if (!out || !path)
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_vocab_load_gguf: bad arguments");
    *out = NULL;
    sv_gguf_t *g;
    sv_status st = sv_gguf_open(path, &g, err);
    if (st)
        return st;
    st = sv_vocab_from_gguf(g, out, err);
    if (st && err) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%.200s: %.300s", path, err->message);
        memcpy(err->message, msg, sizeof msg);
    }
    sv_gguf_destroy(g);
    return st;
}

sv_status sv_vocab_load(const char *path, sv_vocab_t **out, sv_error_t *err) {
    if (!out || !path)
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_vocab_load: bad arguments");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return sv_error_set(err, SV_ERR_IO, -1, "%s: cannot open", path);
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    if (got == 4 && memcmp(magic, "GGUF", 4) == 0)
        return sv_vocab_load_gguf(path, out, err);
    return sv_vocab_load_hf_json(path, out, err);
}
