/* fuzz_gguf.c — libFuzzer target for the GGUF reader and GGUF vocabularies.
 *
 * The input is a GGUF file. The reader must refuse it with an error or
 * accept it; when it accepts, this target reads everything the API hands
 * out and checks that it stays inside the input: every key, string and
 * scalar array element (through the widening accessors), nested arrays,
 * every tensor's bytes; that lookups by key and by tensor name find each
 * entry; and that the typed lookups agree with the values. Then, when the
 * file has tokenizer.ggml.* metadata that loads, the vocabulary encodes a
 * few fixed texts to ids in range that decode without error.
 *
 * Seeds: fuzz/corpus/gguf, written by tests/tokenizer/gguf_seeds.py (a tiny
 * byte-level vocabulary, a tiny SentencePiece one, every metadata type,
 * tensors); fuzz/gguf.dict has the format's key names. */
#include <stdlib.h>
#include <string.h>

#include "src/model/gguf.h"
#include "src/tokenizer/bpe.h"
#include "src/tokenizer/vocab.h"

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static const uint8_t *lo, *hi;  /* the input */
static volatile uint64_t sink;  /* keeps the reads */

static void inside(const void *p, uint64_t n) {
    const uint8_t *b = p;
    CHECK(n == 0 || (b >= lo && b <= hi && n <= (uint64_t)(hi - b)));
    for (uint64_t i = 0; i < n; i++)
        sink += b[i];
}

static void walk(const sv_gguf_value_t *v, int depth) {
    CHECK(depth <= SV_GGUF_MAX_DEPTH + 1);
    switch (v->type) {
    case SV_GGUF_STRING:
        inside(v->v.str.p, v->v.str.n);
        break;
    case SV_GGUF_ARRAY:
        if (v->elem == SV_GGUF_STRING) {
            for (uint64_t i = 0; i < v->n; i++)
                inside(v->v.strs[i].p, v->v.strs[i].n);
        } else if (v->elem == SV_GGUF_ARRAY) {
            for (uint64_t i = 0; i < v->n; i++) {
                CHECK(v->v.items[i].type == SV_GGUF_ARRAY);
                walk(&v->v.items[i], depth + 1);
            }
        } else {
            for (uint64_t i = 0; i < v->n; i++)
                sink += sv_gguf_array_u64(v, i) + (uint64_t)sv_gguf_array_i64(v, i) +
                        (uint64_t)(sv_gguf_array_f64(v, i) != 0);
        }
        break;
    case SV_GGUF_BOOL:
        CHECK(v->v.b == 0 || v->v.b == 1);
        break;
    default:
        CHECK(v->type <= SV_GGUF_FLOAT64);
    }
}

static void check_reader(const sv_gguf_t *g) {
    sv_error_t err;
    uint32_t align = sv_gguf_alignment(g);
    CHECK(align && !(align & (align - 1)));
    char key[64];
    for (uint64_t i = 0; i < sv_gguf_n_kv(g); i++) {
        const sv_gguf_kv_t *kv = sv_gguf_kv_at(g, i);
        inside(kv->key.p, kv->key.n);
        walk(&kv->value, 0);
        /* Keys without NUL bytes can be looked up by C string. */
        if (kv->key.n < sizeof key && !memchr(kv->key.p, 0, (size_t)kv->key.n)) {
            memcpy(key, kv->key.p, (size_t)kv->key.n);
            key[kv->key.n] = 0;
            CHECK(sv_gguf_find(g, key) == &kv->value);
            uint32_t u;
            int32_t s;
            sv_gguf_type t = kv->value.type;
            bool is_signed = t == SV_GGUF_INT8 || t == SV_GGUF_INT16 || t == SV_GGUF_INT32 || t == SV_GGUF_INT64;
            if (sv_gguf_get_u32(g, key, &u, &err) == SV_OK)
                CHECK(is_signed ? kv->value.v.i == (int64_t)u : kv->value.v.u == u);
            if (sv_gguf_get_i32(g, key, &s, &err) == SV_OK && sv_gguf_get_u32(g, key, &u, &err) == SV_OK)
                CHECK((int64_t)s == (int64_t)u);
            int32_t *iv;
            float *fv;
            uint64_t n;
            if (sv_gguf_get_i32s(g, key, &iv, &n, &err) == SV_OK) {
                CHECK(n == kv->value.n);
                for (uint64_t k = 0; k < n; k++)
                    CHECK(iv[k] == sv_gguf_array_i64(&kv->value, k));
                free(iv);
            }
            if (sv_gguf_get_f32s(g, key, &fv, &n, &err) == SV_OK)
                free(fv);
        }
    }
    for (uint64_t i = 0; i < sv_gguf_n_tensors(g); i++) {
        const sv_gguf_tensor_t *t = sv_gguf_tensor_at(g, i);
        CHECK(sv_gguf_find_tensor(g, t->name) == t);
        CHECK(t->n_dims <= SV_GGUF_MAX_DIMS && t->offset % align == 0);
        uint32_t be, bb;
        CHECK(sv_ggml_type_info(t->type, NULL, &be, &bb) && t->ne[0] % be == 0);
        inside(t->data, t->n_bytes);
    }
}

static void check_vocab(const sv_gguf_t *g) {
    sv_error_t err;
    sv_vocab_t *v;
    if (sv_vocab_from_gguf(g, &v, &err) != SV_OK)
        return;
    for (uint32_t id = 0; id < sv_vocab_size(v); id++) {
        size_t n;
        const uint8_t *b = sv_vocab_bytes(v, (int32_t)id, &n);
        CHECK(b || n == 0);
        for (size_t i = 0; i < n; i++)
            sink += b[i];
    }
    sv_bpe_t *bpe;
    sv_bpe_scratch_t *s;
    if (sv_bpe_create(v, &bpe, &err) == SV_OK) {
        if (sv_bpe_scratch_create(bpe, &s, &err) == SV_OK) {
            static const char *const texts[] = {
                "hello world", " a  b\n\n12345", "caf\xC3\xA9 \xE4\xB8\xAD\xF0\x9F\xA4\x96",
                "<s>x</s><|eot|>", "", "\xE2\x96\x81 x",
            };
            sv_ids_t ids = {0};
            sv_bytes_t out = {0};
            for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
                for (uint32_t flags = 0; flags <= SV_BPE_SPECIAL_AS_TEXT; flags += SV_BPE_SPECIAL_AS_TEXT) {
                    ids.n = out.n = 0;
                    if (sv_bpe_encode(bpe, s, texts[k], strlen(texts[k]), flags, &ids, &err) != SV_OK)
                        continue;  /* a pathological split pattern may hit PCRE2's limits */
                    for (size_t i = 0; i < ids.n; i++)
                        CHECK(!(sv_vocab_flags(v, ids.v[i]) & SV_TOKEN_UNUSED));
                    CHECK(sv_vocab_decode(v, ids.v, ids.n, false, &out, &err) == SV_OK);
                }
            }
            sv_ids_free(&ids);
            sv_bytes_free(&out);
            sv_bpe_scratch_destroy(s);
        }
        sv_bpe_destroy(bpe);
    }
    sv_vocab_destroy(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16)
        return 0;
    lo = data;
    hi = data + size;
    sv_gguf_t *g;
    sv_error_t err;
    sv_status st = sv_gguf_open_memory(data, size, &g, &err);
    if (st != SV_OK) {
        CHECK(g == NULL && err.code == st && err.offset <= (long)size);
        return 0;
    }
    check_reader(g);
    check_vocab(g);
    sv_gguf_destroy(g);
    return 0;
}
