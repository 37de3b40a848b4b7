/* test_gguf.c — the GGUF reader and vocabularies from GGUF metadata, on
 * files this test writes itself.
 *
 * Reader: a file with every metadata type (scalars, strings, arrays of
 * each, arrays of arrays), general.alignment and three tensors reads back
 * exactly, from memory and through mmap; every truncation of it is an
 * error at or before the cut; and each malformation (bad magic, versions,
 * absurd counts and lengths, unknown types, deep nesting, bad bools,
 * duplicate keys and names, bad alignment, too many dimensions, overflowing
 * shapes, unknown ggml types, partial blocks, misaligned, out-of-range and
 * overlapping tensors) is the expected error at the expected byte.
 *
 * Vocabularies: a byte-level ("gpt2") vocabulary with merges, control,
 * user-defined and unused tokens and special ids; and a hand-made
 * SentencePiece ("llama") vocabulary whose encodings are worked out by hand
 * in the comments (merges by score, equal scores leftmost first, the ▁
 * prefix after special tokens, byte fallback, unknown tokens fused).
 *
 * `test_gguf --dump FILE` prints what the reader makes of a real file (one
 * line per key and per tensor) for tests/tokenizer/test_gguf_parity.py,
 * which compares it with an independent Python reader. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/model/gguf.h"
#include "src/tokenizer/bpe.h"
#include "src/tokenizer/buf.h"
#include "src/tokenizer/bytelevel.h"
#include "util/utf8.h"
#include "src/tokenizer/vocab.h"
#include "test.h"

/* ---- a GGUF writer ------------------------------------------------------------ */

typedef sv_bytes_t buf_t;

static void put(buf_t *b, const void *p, size_t n) {
    if (sv_bytes_append(b, p, n))
        abort();
}
static void u8(buf_t *b, uint8_t v) { put(b, &v, 1); }
static void u32(buf_t *b, uint32_t v) {
    for (int i = 0; i < 4; i++)
        u8(b, (uint8_t)(v >> (8 * i)));
}
static void u64(buf_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++)
        u8(b, (uint8_t)(v >> (8 * i)));
}
static void str(buf_t *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(buf_t *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void key(buf_t *b, const char *k, uint32_t type) {
    str(b, k);
    u32(b, type);
}
static void kv_str(buf_t *b, const char *k, const char *v) {
    key(b, k, SV_GGUF_STRING);
    str(b, v);
}
static void kv_u32(buf_t *b, const char *k, uint32_t v) {
    key(b, k, SV_GGUF_UINT32);
    u32(b, v);
}
static void kv_bool(buf_t *b, const char *k, bool v) {
    key(b, k, SV_GGUF_BOOL);
    u8(b, v);
}
static void kv_strs(buf_t *b, const char *k, const char *const *v, size_t n) {
    key(b, k, SV_GGUF_ARRAY);
    u32(b, SV_GGUF_STRING);
    u64(b, n);
    for (size_t i = 0; i < n; i++)
        str(b, v[i]);
}
static void kv_i32s(buf_t *b, const char *k, const int32_t *v, size_t n) {
    key(b, k, SV_GGUF_ARRAY);
    u32(b, SV_GGUF_INT32);
    u64(b, n);
    for (size_t i = 0; i < n; i++)
        u32(b, (uint32_t)v[i]);
}
static void kv_f32s(buf_t *b, const char *k, const float *v, size_t n) {
    key(b, k, SV_GGUF_ARRAY);
    u32(b, SV_GGUF_FLOAT32);
    u64(b, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        u32(b, bits);
    }
}
static void tensor(buf_t *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                   uint64_t offset) {
    str(b, name);
    u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        u64(b, ne[i]);
    u32(b, type);
    u64(b, offset);
}
static void pad(buf_t *b, size_t align) {
    while (b->n % align)
        u8(b, 0);
}

static sv_status parse(const buf_t *b, sv_gguf_t **g, sv_error_t *err) {
    sv_error_clear(err);
    return sv_gguf_open_memory(b->p, b->n, g, err);
}

/* ---- the reader on a good file ---------------------------------------------- */

/* Tensor data offsets in the full file: t0 F32 [4, 2] (32 bytes) at 0,
 * t1 Q4_0 [64] (2 blocks: 36 bytes) at 64, t2 Q8_0 [32, 3] (102 bytes) at
 * 128 (alignment 64). The last tensor ends the file. */
static void full_file(buf_t *b) {
    header(b, 3, 3, 17);
    key(b, "u8", SV_GGUF_UINT8); u8(b, 200);
    key(b, "i8", SV_GGUF_INT8); u8(b, 0x80);                 /* -128 */
    key(b, "u16", SV_GGUF_UINT16); u8(b, 0x34); u8(b, 0x12);
    key(b, "i16", SV_GGUF_INT16); u8(b, 0xFE); u8(b, 0xFF);  /* -2 */
    kv_u32(b, "u32", 4000000000u);
    key(b, "i32", SV_GGUF_INT32); u32(b, (uint32_t)-7);
    key(b, "f32", SV_GGUF_FLOAT32); u32(b, 0x3FC00000);      /* 1.5 */
    kv_bool(b, "yes", true);
    kv_str(b, "name", "tiny \xE2\x96\x81 model");
    key(b, "u64", SV_GGUF_UINT64); u64(b, UINT64_MAX);
    key(b, "i64", SV_GGUF_INT64); u64(b, (uint64_t)INT64_MIN);
    key(b, "f64", SV_GGUF_FLOAT64); u64(b, 0x400921FB54442D18ull); /* pi */
    const char *words[] = {"a", "", "\xC3\xA9t\xC3\xA9"};
    kv_strs(b, "words", words, 3);
    const int32_t ints[] = {-1, 0, 2147483647};
    kv_i32s(b, "ints", ints, 3);
    key(b, "u16s", SV_GGUF_ARRAY); u32(b, SV_GGUF_UINT16); u64(b, 2); u8(b, 1); u8(b, 0); u8(b, 0xFF); u8(b, 0xFF);
    /* [[1, 2], ["x"], []] */
    key(b, "nested", SV_GGUF_ARRAY); u32(b, SV_GGUF_ARRAY); u64(b, 3);
    u32(b, SV_GGUF_INT8); u64(b, 2); u8(b, 1); u8(b, 2);
    u32(b, SV_GGUF_STRING); u64(b, 1); str(b, "x");
    u32(b, SV_GGUF_BOOL); u64(b, 0);
    kv_u32(b, "general.alignment", 64);
    const uint64_t ne0[] = {4, 2}, ne1[] = {64}, ne2[] = {32, 3};
    tensor(b, "t0", 2, ne0, SV_GGML_F32, 0);
    tensor(b, "blk.1.weight", 1, ne1, SV_GGML_Q4_0, 64);
    tensor(b, "t2", 2, ne2, SV_GGML_Q8_0, 128);
    pad(b, 64);
    size_t data = b->n;
    for (int i = 0; i < 8; i++) {
        float f = (float)i + 0.25f;
        put(b, &f, 4);
    }
    while (b->n < data + 64)
        u8(b, 0xAA);
    for (int i = 0; i < 36; i++)
        u8(b, (uint8_t)i);
    while (b->n < data + 128)
        u8(b, 0xAA);
    for (int i = 0; i < 102; i++)
        u8(b, (uint8_t)(255 - i));
}

static void check_full(const sv_gguf_t *g, const uint8_t *file) {
    sv_error_t err;
    CHECK(sv_gguf_version(g) == 3 && sv_gguf_n_kv(g) == 17 && sv_gguf_n_tensors(g) == 3, "counts");
    CHECK(sv_gguf_alignment(g) == 64 && sv_gguf_data_offset(g) % 64 == 0, "alignment %u, data at %llu",
          sv_gguf_alignment(g), (unsigned long long)sv_gguf_data_offset(g));
    const sv_gguf_value_t *v = sv_gguf_find(g, "u8");
    CHECK(v && v->type == SV_GGUF_UINT8 && v->v.u == 200, "u8");
    CHECK((v = sv_gguf_find(g, "i8")) && v->v.i == -128, "i8");
    CHECK((v = sv_gguf_find(g, "u16")) && v->v.u == 0x1234, "u16");
    CHECK((v = sv_gguf_find(g, "i16")) && v->v.i == -2, "i16");
    CHECK((v = sv_gguf_find(g, "u64")) && v->v.u == UINT64_MAX, "u64");
    CHECK((v = sv_gguf_find(g, "i64")) && v->v.i == INT64_MIN, "i64");
    CHECK((v = sv_gguf_find(g, "f64")) && fabs(v->v.f - 3.141592653589793) < 1e-15, "f64");
    CHECK(sv_gguf_find(g, "nope") == NULL && sv_gguf_find(g, "") == NULL, "missing keys");
    CHECK(sv_gguf_kv_at(g, 4)->key.n == 3 && memcmp(sv_gguf_kv_at(g, 4)->key.p, "u32", 3) == 0 &&
              sv_gguf_kv_at(g, 17) == NULL, "kv_at");

    /* Typed lookups, with conversions and their limits. */
    uint32_t x32;
    int32_t i32;
    uint64_t x64;
    float f;
    bool b;
    sv_gguf_str_t s;
    CHECK(sv_gguf_get_u32(g, "u8", &x32, &err) == SV_OK && x32 == 200, "u32 from u8");
    CHECK(sv_gguf_get_u32(g, "u32", &x32, &err) == SV_OK && x32 == 4000000000u, "u32");
    CHECK(sv_gguf_get_i32(g, "i16", &i32, &err) == SV_OK && i32 == -2, "i32 from i16");
    CHECK(sv_gguf_get_i32(g, "u32", &i32, &err) == SV_ERR_SYNTAX && strstr(err.message, "fit"),
          "4e9 is not an int32: %s", err.message);
    CHECK(sv_gguf_get_u32(g, "i8", &x32, &err) == SV_ERR_SYNTAX, "-128 is not a uint32");
    CHECK(sv_gguf_get_u64(g, "u64", &x64, &err) == SV_OK && x64 == UINT64_MAX, "u64");
    CHECK(sv_gguf_get_u32(g, "name", &x32, &err) == SV_ERR_SYNTAX && strstr(err.message, "string"),
          "a string is not a uint32: %s", err.message);
    CHECK(sv_gguf_get_u32(g, "nope", &x32, &err) == SV_ERR_SYNTAX && strstr(err.message, "nope"),
          "missing key: %s", err.message);
    CHECK(sv_gguf_get_f32(g, "f32", &f, &err) == SV_OK && f == 1.5f, "f32");
    CHECK(sv_gguf_get_bool(g, "yes", &b, &err) == SV_OK && b, "bool");
    CHECK(sv_gguf_get_bool(g, "u8", &b, &err) == SV_ERR_SYNTAX, "u8 is not a bool");
    CHECK(sv_gguf_get_str(g, "name", &s, &err) == SV_OK && s.n == 14 && memcmp(s.p, "tiny \xE2\x96\x81 model", 14) == 0,
          "string");
    const sv_gguf_str_t *strs;
    uint64_t n;
    CHECK(sv_gguf_get_strs(g, "words", &strs, &n, &err) == SV_OK && n == 3 && strs[0].n == 1 &&
              strs[1].n == 0 && strs[2].n == 5 && memcmp(strs[2].p, "\xC3\xA9t\xC3\xA9", 5) == 0,
          "array of strings");
    CHECK(sv_gguf_get_strs(g, "ints", &strs, &n, &err) == SV_ERR_SYNTAX && strstr(err.message, "int32"),
          "ints are not strings: %s", err.message);
    int32_t *iv;
    float *fv;
    CHECK(sv_gguf_get_i32s(g, "ints", &iv, &n, &err) == SV_OK && n == 3 && iv[0] == -1 &&
              iv[2] == 2147483647, "array of int32");
    free(iv);
    CHECK(sv_gguf_get_i32s(g, "u16s", &iv, &n, &err) == SV_OK && n == 2 && iv[0] == 1 && iv[1] == 65535,
          "int32s from uint16s");
    free(iv);
    CHECK(sv_gguf_get_f32s(g, "ints", &fv, &n, &err) == SV_ERR_SYNTAX && fv == NULL, "ints are not floats");
    v = sv_gguf_find(g, "nested");
    CHECK(v && v->elem == SV_GGUF_ARRAY && v->n == 3 && v->v.items[0].elem == SV_GGUF_INT8 &&
              sv_gguf_array_i64(&v->v.items[0], 1) == 2 && v->v.items[1].v.strs[0].n == 1 &&
              v->v.items[2].n == 0, "nested arrays");
    CHECK(v && sv_gguf_array_i64(&v->v.items[0], 2) == 0 && sv_gguf_array_u64(v, 0) == 0,
          "out-of-range and non-numeric elements read 0");
    v = sv_gguf_find(g, "u16s");
    CHECK(v && sv_gguf_array_f64(v, 1) == 65535.0 && sv_gguf_array_u64(v, 0) == 1, "widening");

    /* Tensors. */
    const sv_gguf_tensor_t *t = sv_gguf_find_tensor(g, "t0");
    uint64_t data = sv_gguf_data_offset(g);
    CHECK(t && t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 2 && t->ne[2] == 1 && t->type == SV_GGML_F32 &&
              t->n_elements == 8 && t->n_bytes == 32 && t->data == file + data, "t0");
    float f5;
    if (t) {
        memcpy(&f5, (const uint8_t *)t->data + 20, 4);
        CHECK(f5 == 5.25f, "t0 data");
    }
    t = sv_gguf_find_tensor(g, "blk.1.weight");
    CHECK(t && t->n_bytes == 36 && t->offset == 64 && ((const uint8_t *)t->data)[35] == 35, "t1 (Q4_0)");
    t = sv_gguf_tensor_at(g, 2);
    CHECK(t && strcmp(t->name, "t2") == 0 && t->n_bytes == 102 && t->data == file + data + 128, "t2 (Q8_0)");
    CHECK(sv_gguf_find_tensor(g, "t3") == NULL && sv_gguf_tensor_at(g, 3) == NULL, "no t3");
    const char *name;
    uint32_t be, bb;
    CHECK(sv_ggml_type_info(SV_GGML_Q4_K, &name, &be, &bb) && strcmp(name, "Q4_K") == 0 && be == 256 &&
              bb == 144, "Q4_K traits");
    CHECK(sv_ggml_type_info(SV_GGML_Q6_K, NULL, &be, &bb) && be == 256 && bb == 210, "Q6_K traits");
    CHECK(!sv_ggml_type_info(4, NULL, NULL, NULL) && !sv_ggml_type_info(99, NULL, NULL, NULL),
          "removed and unknown types");
}

static void test_reader(void) {
    buf_t b = {0};
    full_file(&b);
    sv_gguf_t *g;
    sv_error_t err;
    CHECK(parse(&b, &g, &err) == SV_OK, "full file parses: %s", err.message);
    if (g)
        check_full(g, b.p);
    sv_gguf_destroy(g);

    /* The same through a file and mmap. */
    char path[] = "/tmp/sv_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, b.p, b.n) == (ssize_t)b.n, "temp file");
    close(fd);
    CHECK(sv_gguf_open(path, &g, &err) == SV_OK, "open file: %s", err.message);
    if (g) {
        size_t size;
        const uint8_t *bytes = sv_gguf_bytes(g, &size);
        CHECK(size == b.n, "mapped size");
        check_full(g, bytes);
    }
    sv_gguf_destroy(g);
    /* A truncated file on disk names the file. */
    CHECK(truncate(path, 100) == 0, "truncate");
    CHECK(sv_gguf_open(path, &g, &err) == SV_ERR_SYNTAX && strstr(err.message, path) && g == NULL,
          "truncated file: %s", err.message);
    unlink(path);
    CHECK(sv_gguf_open("/nonexistent.gguf", &g, &err) == SV_ERR_IO, "missing file");
    CHECK(sv_gguf_open("/tmp", &g, &err) == SV_ERR_IO, "a directory");
    sv_gguf_destroy(NULL);

    /* Every truncation fails, at or before the cut. */
    int bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        buf_t cut = {b.p, n, n};
        sv_status st = parse(&cut, &g, &err);
        if (st == SV_OK || g != NULL || err.offset > (long)n)
            bad++;
        sv_gguf_destroy(g);
    }
    CHECK(bad == 0, "%d of %zu truncations not refused cleanly", bad, b.n);
    sv_bytes_free(&b);
}

/* ---- malformed files ---------------------------------------------------------- */

typedef void (*build_fn)(buf_t *b);

static void expect_bad(const char *what, build_fn build, sv_status want, long offset, const char *needle) {
    buf_t b = {0};
    build(&b);
    sv_gguf_t *g = NULL;
    sv_error_t err;
    sv_status st = parse(&b, &g, &err);
    CHECK(st == want && g == NULL && (offset == -2 || err.offset == offset) &&
              (!needle || strstr(err.message, needle)),
          "%s: got %s at %ld: %s", what, sv_status_name(st), err.offset, err.message);
    sv_gguf_destroy(g);
    sv_bytes_free(&b);
}

static void bad_magic(buf_t *b) { put(b, "GGUG\3\0\0\0", 8); }
static void v1(buf_t *b) { header(b, 1, 0, 0); }
static void big_endian(buf_t *b) { header(b, 0x03000000u, 0, 0); }
static void v9(buf_t *b) { header(b, 9, 0, 0); }
static void short_header(buf_t *b) { put(b, "GGUF\3\0\0\0\0\0", 10); }
static void many_kv(buf_t *b) { header(b, 3, 0, 1ull << 40); }
static void kv_past_end(buf_t *b) { header(b, 3, 0, 1000); kv_u32(b, "a", 1); }
static void many_tensors(buf_t *b) { header(b, 3, 1ull << 40, 0); }
static void huge_key(buf_t *b) { header(b, 3, 0, 1); u64(b, 1ull << 62); put(b, "abcdefghijklm", 13); }
static void key_past_end(buf_t *b) { header(b, 3, 0, 1); u64(b, 100); put(b, "abcdefghijklm", 13); }
static void bad_type(buf_t *b) { header(b, 3, 0, 1); key(b, "k", 13); u32(b, 0); u32(b, 0); u32(b, 0); }
static void bad_elem(buf_t *b) { header(b, 3, 0, 1); key(b, "k", SV_GGUF_ARRAY); u32(b, 77); u64(b, 0); }
static void big_array(buf_t *b) {
    header(b, 3, 0, 1);
    key(b, "k", SV_GGUF_ARRAY);
    u32(b, SV_GGUF_UINT64);
    u64(b, 1ull << 61);  /* 2^61 x 8 bytes would overflow 64 bits */
    u64(b, 0);
}
static void big_string_array(buf_t *b) {
    header(b, 3, 0, 1);
    key(b, "k", SV_GGUF_ARRAY);
    u32(b, SV_GGUF_STRING);
    u64(b, 3);
    str(b, "a");
    str(b, "bbbbbbbbbbbbbbbbbbbb");
}
static void deep(buf_t *b) {
    header(b, 3, 0, 1);
    key(b, "k", SV_GGUF_ARRAY);
    for (int i = 0; i < 10; i++) {
        u32(b, SV_GGUF_ARRAY);
        u64(b, 1);
    }
    u32(b, SV_GGUF_UINT8);
    u64(b, 0);
}
static void bad_bool(buf_t *b) { header(b, 3, 0, 1); key(b, "k", SV_GGUF_BOOL); u8(b, 2); }
static void bad_bools(buf_t *b) {
    header(b, 3, 0, 1);
    key(b, "k", SV_GGUF_ARRAY);
    u32(b, SV_GGUF_BOOL);
    u64(b, 3);
    u8(b, 0);
    u8(b, 1);
    u8(b, 7);
}
static void dup_key(buf_t *b) { header(b, 3, 0, 2); kv_u32(b, "k", 1); kv_u32(b, "k", 2); }
static void align_type(buf_t *b) { header(b, 3, 0, 1); key(b, "general.alignment", SV_GGUF_UINT64); u64(b, 32); }
static void align_48(buf_t *b) { header(b, 3, 0, 1); kv_u32(b, "general.alignment", 48); }
static void align_0(buf_t *b) { header(b, 3, 0, 1); kv_u32(b, "general.alignment", 0); }

/* One tensor record after a header with no metadata, then its data. */
static void one_tensor(buf_t *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t offset, size_t data) {
    header(b, 3, 1, 0);
    tensor(b, name, n_dims, ne, type, offset);
    pad(b, 32);
    for (size_t i = 0; i < data; i++)
        u8(b, 0);
}
static const uint64_t NE16[] = {16, 1, 1, 1, 1};
static void five_dims(buf_t *b) { one_tensor(b, "t", 5, NE16, SV_GGML_F32, 0, 64); }
static void dims_overflow(buf_t *b) {
    const uint64_t ne[] = {1ull << 40, 1ull << 40};
    one_tensor(b, "t", 2, ne, SV_GGML_F32, 0, 0);
}
static void dim_negative(buf_t *b) {
    const uint64_t ne[] = {1ull << 63};
    one_tensor(b, "t", 1, ne, SV_GGML_I8, 0, 0);
}
static void bytes_overflow(buf_t *b) {
    const uint64_t ne[] = {1ull << 62};
    one_tensor(b, "t", 1, ne, SV_GGML_F64, 0, 0);
}
static void removed_type(buf_t *b) { one_tensor(b, "t", 1, NE16, 4, 0, 64); }
static void unknown_type(buf_t *b) { one_tensor(b, "t", 1, NE16, 1000, 0, 64); }
static void partial_block(buf_t *b) {
    const uint64_t ne[] = {33};
    one_tensor(b, "t", 1, ne, SV_GGML_Q4_0, 0, 64);
}
static void misaligned(buf_t *b) { one_tensor(b, "t", 1, NE16, SV_GGML_F32, 8, 128); }
static void past_end(buf_t *b) { one_tensor(b, "t", 1, NE16, SV_GGML_F32, 0, 63); }
static void offset_huge(buf_t *b) { one_tensor(b, "t", 1, NE16, SV_GGML_F32, UINT64_MAX - 31, 64); }
static void long_name(buf_t *b) {
    one_tensor(b, "a.very.long.tensor.name.that.goes.on.and.on.past.sixty.three.bytes", 1, NE16,
               SV_GGML_F32, 0, 64);
}
static void nul_name(buf_t *b) {
    header(b, 3, 1, 0);
    u64(b, 3);
    put(b, "a\0b", 3);
    u32(b, 1);
    u64(b, 16);
    u32(b, SV_GGML_F32);
    u64(b, 0);
    pad(b, 32);
    for (int i = 0; i < 64; i++)
        u8(b, 0);
}
static void two(buf_t *b, const char *n1, uint64_t off1, const char *n2, uint64_t off2) {
    header(b, 3, 2, 0);
    tensor(b, n1, 1, NE16, SV_GGML_F32, off1);
    tensor(b, n2, 1, NE16, SV_GGML_F32, off2);
    pad(b, 32);
    for (int i = 0; i < 256; i++)
        u8(b, 0);
}
static void overlap(buf_t *b) { two(b, "a", 32, "b", 64); }
static void dup_name(buf_t *b) { two(b, "a", 0, "a", 64); }
static void ok_two(buf_t *b) { two(b, "a", 64, "b", 0); }
static void zero_dims(buf_t *b) { one_tensor(b, "scalar", 0, NULL, SV_GGML_F32, 0, 4); }

static void test_malformed(void) {
    expect_bad("bad magic", bad_magic, SV_ERR_SYNTAX, 0, "magic");
    expect_bad("version 1", v1, SV_ERR_UNSUPPORTED, 4, "version 1");
    expect_bad("big-endian", big_endian, SV_ERR_UNSUPPORTED, 4, "big-endian");
    expect_bad("version 9", v9, SV_ERR_UNSUPPORTED, 4, "version 9");
    expect_bad("short header", short_header, SV_ERR_SYNTAX, 8, "tensor count");
    expect_bad("2^40 pairs", many_kv, SV_ERR_BUDGET, 16, "limit");
    expect_bad("1000 pairs in 20 bytes", kv_past_end, SV_ERR_SYNTAX, 16, "declares 1000");
    expect_bad("2^40 tensors", many_tensors, SV_ERR_BUDGET, 8, "limit");
    expect_bad("2^62-byte key", huge_key, SV_ERR_BUDGET, 24, "over the limit");
    expect_bad("key past the end", key_past_end, SV_ERR_SYNTAX, 32, "truncated");
    expect_bad("value type 13", bad_type, SV_ERR_SYNTAX, 33, "unknown value type 13");
    expect_bad("element type 77", bad_elem, SV_ERR_SYNTAX, 37, "unknown element type 77");
    expect_bad("2^61 uint64s", big_array, SV_ERR_SYNTAX, 37, "declares");
    expect_bad("3 strings, 2 there", big_string_array, SV_ERR_SYNTAX, 86, "truncated");
    expect_bad("arrays 11 deep", deep, SV_ERR_BUDGET, -2, "nested");
    expect_bad("bool 2", bad_bool, SV_ERR_SYNTAX, 37, "not 0 or 1");
    expect_bad("bool array with 7", bad_bools, SV_ERR_SYNTAX, 51, "not 0 or 1");
    expect_bad("duplicate key", dup_key, SV_ERR_SYNTAX, 41, "twice");
    expect_bad("alignment as uint64", align_type, SV_ERR_SYNTAX, 24, "power of two");
    expect_bad("alignment 48", align_48, SV_ERR_SYNTAX, 24, "power of two");
    expect_bad("alignment 0", align_0, SV_ERR_SYNTAX, 24, "power of two");
    expect_bad("5 dimensions", five_dims, SV_ERR_SYNTAX, 33, "5 dimensions");
    expect_bad("2^80 elements", dims_overflow, SV_ERR_SYNTAX, 33, "overflow");
    expect_bad("a dimension of 2^63", dim_negative, SV_ERR_SYNTAX, 33, "overflow");
    expect_bad("2^65 bytes", bytes_overflow, SV_ERR_SYNTAX, 33, "overflows");
    expect_bad("removed type 4", removed_type, SV_ERR_UNSUPPORTED, 45, "ggml type 4");
    expect_bad("type 1000", unknown_type, SV_ERR_UNSUPPORTED, 45, "ggml type 1000");
    expect_bad("33 Q4_0 elements", partial_block, SV_ERR_SYNTAX, 33, "Q4_0 blocks");
    expect_bad("misaligned offset", misaligned, SV_ERR_SYNTAX, -1, "alignment");
    expect_bad("data past the end", past_end, SV_ERR_SYNTAX, -1, "past the end");
    expect_bad("offset near 2^64", offset_huge, SV_ERR_SYNTAX, -1, "past the end");
    expect_bad("64-byte name", long_name, SV_ERR_BUDGET, 24, "limit");
    expect_bad("NUL in a name", nul_name, SV_ERR_SYNTAX, 24, "NUL");
    expect_bad("overlapping tensors", overlap, SV_ERR_SYNTAX, -1, "overlap");
    expect_bad("duplicate tensor", dup_name, SV_ERR_SYNTAX, 57, "twice");

    /* Tensors out of file order, and a 0-dimensional one, are fine. */
    buf_t b = {0};
    sv_gguf_t *g;
    sv_error_t err;
    ok_two(&b);
    CHECK(parse(&b, &g, &err) == SV_OK && sv_gguf_find_tensor(g, "a")->offset == 64, "two tensors: %s",
          err.message);
    sv_gguf_destroy(g);
    b.n = 0;
    zero_dims(&b);
    CHECK(parse(&b, &g, &err) == SV_OK && sv_gguf_tensor_at(g, 0)->n_elements == 1, "a scalar: %s",
          err.message);
    sv_gguf_destroy(g);
    /* An empty file with no tensors needs no data section. */
    b.n = 0;
    header(&b, 2, 0, 0);
    CHECK(parse(&b, &g, &err) == SV_OK && sv_gguf_version(g) == 2 && sv_gguf_alignment(g) == 32,
          "empty v2 file: %s", err.message);
    sv_gguf_destroy(g);
    CHECK(sv_gguf_open_memory(NULL, 0, &g, &err) == SV_ERR_SYNTAX, "no bytes at all");
    sv_bytes_free(&b);
}

/* ---- vocabularies --------------------------------------------------------------- */

typedef struct {
    sv_vocab_t *v;
    sv_bpe_t *b;
    sv_bpe_scratch_t *s;
} tok_t;

static sv_status open_vocab(const buf_t *file, tok_t *t, sv_error_t *err) {
    memset(t, 0, sizeof *t);
    sv_gguf_t *g;
    sv_status st = parse(file, &g, err);
    if (st)
        return st;
    st = sv_vocab_from_gguf(g, &t->v, err);
    sv_gguf_destroy(g);  /* the vocabulary does not refer to the file */
    if (!st)
        st = sv_bpe_create(t->v, &t->b, err);
    if (!st)
        st = sv_bpe_scratch_create(t->b, &t->s, err);
    return st;
}

static void close_vocab(tok_t *t) {
    sv_bpe_scratch_destroy(t->s);
    sv_bpe_destroy(t->b);
    sv_vocab_destroy(t->v);
}

static void expect_ids(tok_t *t, const char *text, uint32_t flags, const int32_t *want, size_t n) {
    sv_ids_t ids = {0};
    sv_error_t err;
    sv_status st = sv_bpe_encode(t->b, t->s, text, strlen(text), flags, &ids, &err);
    char got[512] = "";
    for (size_t i = 0; i < ids.n && strlen(got) < 480; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids.v[i]);
    CHECK(st == SV_OK && ids.n == n && (n == 0 || memcmp(ids.v, want, n * sizeof *want) == 0),
          "encode \"%s\": got%s (status %d)", text, got, st);
    /* decode(encode(x)) is the normalized text (with a special token read
     * as text, the round trip is exact too). */
    sv_bytes_t dec = {0}, norm = {0};
    CHECK(sv_vocab_decode(t->v, ids.v, ids.n, false, &dec, &err) == SV_OK, "decode");
    CHECK(sv_bpe_normalize(t->b, t->s, text, strlen(text), flags, &norm, &err) == SV_OK, "normalize");
    CHECK(dec.n == norm.n && (dec.n == 0 || memcmp(dec.p, norm.p, dec.n) == 0), "round trip of \"%s\"",
          text);
    sv_bytes_free(&dec);
    sv_bytes_free(&norm);
    sv_ids_free(&ids);
}

#define EXPECT(t, text, flags, ...)                                                               \
    do {                                                                                          \
        const int32_t want_[] = {__VA_ARGS__};                                                    \
        expect_ids((t), (text), (flags), want_, sizeof want_ / sizeof want_[0]);                  \
    } while (0)

/* The byte-level vocabulary: ids 0..255 spell the bytes, then merges make
 * 256 "Ġt", 257 "he", 258 "Ġthe", 259 "ll", 260 "ell", 261 "hell", 262
 * "hello"; 263 "<|eot|>" (control), 264 "<tool>" (user-defined), 265
 * unused, 266 "<|bos|>" (control). */
static const char *const BL_MERGES[] = {"Ġ t", "h e", "Ġt he", "l l", "e ll", "h ell", "hell o"};
enum { BL_EOT = 263, BL_TOOL = 264, BL_UNUSED = 265, BL_BOS = 266, BL_N = 267 };

static void byte_level_file(buf_t *b, const char *pre, int n_types, int bos, bool extra_kv) {
    static char spell[256][5];
    const char *tokens[BL_N];
    int32_t types[BL_N];
    for (int i = 0; i < 256; i++) {
        memset(spell[i], 0, 5);
        sv_utf8_encode(sv_bytelevel_char((uint8_t)i), (uint8_t *)spell[i]);
        tokens[i] = spell[i];
        types[i] = 1;
    }
    const char *merged[] = {"Ġt", "he", "Ġthe", "ll", "ell", "hell", "hello"};
    for (int i = 0; i < 7; i++) {
        tokens[256 + i] = merged[i];
        types[256 + i] = 1;
    }
    tokens[BL_EOT] = "<|eot|>";
    types[BL_EOT] = 3;
    tokens[BL_TOOL] = "<tool>";
    types[BL_TOOL] = 4;
    tokens[BL_UNUSED] = "<unused>";
    types[BL_UNUSED] = 5;
    tokens[BL_BOS] = "<|bos|>";
    types[BL_BOS] = 3;
    header(b, 3, 0, 6 + (pre != NULL) + (extra_kv ? 1 : 0));
    kv_str(b, "tokenizer.ggml.model", "gpt2");
    kv_strs(b, "tokenizer.ggml.tokens", tokens, BL_N);
    kv_i32s(b, "tokenizer.ggml.token_type", types, (size_t)n_types);
    kv_strs(b, "tokenizer.ggml.merges", BL_MERGES, 7);
    kv_u32(b, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    kv_u32(b, "tokenizer.ggml.eos_token_id", BL_EOT);
    if (pre)
        kv_str(b, "tokenizer.ggml.pre", pre);
    if (extra_kv)
        kv_bool(b, "tokenizer.ggml.add_bos_token", false);
}

static void test_byte_level(void) {
    buf_t b = {0};
    tok_t t;
    sv_error_t err;
    byte_level_file(&b, "smollm", BL_N, BL_BOS, false);
    CHECK(open_vocab(&b, &t, &err) == SV_OK, "byte-level vocabulary: %s", err.message);
    if (t.s) {
        CHECK(sv_vocab_size(t.v) == BL_N, "size");
        /* "h e" (rank 1) before "l l" (rank 3), which blocks "e ll". */
        EXPECT(&t, "hello", 0, 257, 259, 'o');
        EXPECT(&t, " the hello", 0, 258, 0x20, 257, 259, 'o');
        /* smollm: each digit is a piece of its own. */
        EXPECT(&t, "a12", 0, 'a', '1', '2');
        EXPECT(&t, "x<|eot|>y<tool>", 0, 'x', BL_EOT, 'y', BL_TOOL);
        /* Special tokens as text; user-defined ones still match. */
        EXPECT(&t, "<|eot|><tool>", SV_BPE_SPECIAL_AS_TEXT, '<', '|', 'e', 'o', 't', '|', '>', BL_TOOL);
        size_t n;
        const uint8_t *p = sv_vocab_bytes(t.v, 258, &n);
        CHECK(n == 4 && memcmp(p, " the", 4) == 0, "bytes of Ġthe");
        p = sv_vocab_bytes(t.v, 0x0A, &n);
        CHECK(n == 1 && p[0] == '\n', "bytes of Ċ");
        CHECK(sv_vocab_bytes(t.v, BL_UNUSED, &n) == NULL && sv_vocab_flags(t.v, BL_UNUSED) == SV_TOKEN_UNUSED,
              "unused ids are holes");
        CHECK(sv_vocab_flags(t.v, BL_EOT) == (SV_TOKEN_ADDED | SV_TOKEN_SPECIAL | SV_TOKEN_EOG), "eot flags %u",
              sv_vocab_flags(t.v, BL_EOT));
        CHECK(sv_vocab_flags(t.v, BL_TOOL) == SV_TOKEN_ADDED, "user-defined flags");
        CHECK(sv_vocab_flags(t.v, BL_BOS) == (SV_TOKEN_ADDED | SV_TOKEN_SPECIAL | SV_TOKEN_BOS), "bos flags");
        CHECK(sv_vocab_bos(t.v) == BL_BOS && sv_vocab_eos(t.v) == BL_EOT && !sv_vocab_add_bos(t.v),
              "special ids; smollm adds no BOS");
        CHECK(sv_vocab_find(t.v, "<tool>", 6) == BL_TOOL && sv_vocab_find(t.v, "Ġthe", 5) == 258, "find");
    }
    close_vocab(&t);

    /* llama-bpe: ignore_merges (a piece that is a token is taken whole),
     * digits in threes, BOS expected unless the file says otherwise. */
    b.n = 0;
    byte_level_file(&b, "llama-bpe", BL_N, BL_BOS, false);
    CHECK(open_vocab(&b, &t, &err) == SV_OK, "llama-bpe: %s", err.message);
    if (t.s) {
        EXPECT(&t, "hello", 0, 262);
        EXPECT(&t, "a12", 0, 'a', '1', '2');
        CHECK(sv_vocab_add_bos(t.v), "llama-bpe adds BOS");
    }
    close_vocab(&t);
    b.n = 0;
    byte_level_file(&b, "llama-bpe", BL_N, BL_BOS, true);
    CHECK(open_vocab(&b, &t, &err) == SV_OK && !sv_vocab_add_bos(t.v), "add_bos_token false wins");
    close_vocab(&t);

    /* Errors. */
    b.n = 0;
    byte_level_file(&b, "no-such-pre", BL_N, BL_BOS, false);
    CHECK(open_vocab(&b, &t, &err) == SV_ERR_UNSUPPORTED && strstr(err.message, "no-such-pre") && !t.v,
          "unknown pre-tokenizer: %s", err.message);
    close_vocab(&t);
    b.n = 0;
    byte_level_file(&b, NULL, BL_N, BL_BOS, false);
    CHECK(open_vocab(&b, &t, &err) == SV_OK, "no pre-tokenizer: llama.cpp's default: %s", err.message);
    if (t.s)
        EXPECT(&t, "a1234", 0, 'a', '1', '2', '3', '4');
    close_vocab(&t);
    b.n = 0;
    byte_level_file(&b, "gpt2", BL_N - 1, BL_BOS, false);
    CHECK(open_vocab(&b, &t, &err) == SV_ERR_SYNTAX && strstr(err.message, "token types"),
          "a short token_type array: %s", err.message);
    close_vocab(&t);
    b.n = 0;
    byte_level_file(&b, "gpt2", BL_N, 5000, false);
    CHECK(open_vocab(&b, &t, &err) == SV_ERR_SYNTAX && strstr(err.message, "bos_token_id"),
          "BOS out of range: %s", err.message);
    close_vocab(&t);
    b.n = 0;
    byte_level_file(&b, "llama-bpe", BL_N, BL_UNUSED, false);
    CHECK(open_vocab(&b, &t, &err) == SV_ERR_SYNTAX && strstr(err.message, "unused token"),
          "BOS names an unused id (the encoder would emit it): %s", err.message);
    close_vocab(&t);

    /* A merge naming a missing token, and a file without a model. */
    b.n = 0;
    const char *toks[] = {"a", "b"};
    const char *merges[] = {"a b"};
    header(&b, 3, 0, 3);
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
    kv_strs(&b, "tokenizer.ggml.merges", merges, 1);
    CHECK(open_vocab(&b, &t, &err) == SV_ERR_SYNTAX && strstr(err.message, "merge 0"), "bad merge: %s",
          err.message);
    close_vocab(&t);
    b.n = 0;
    header(&b, 3, 0, 1);
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
    CHECK(open_vocab(&b, &t, &err) == SV_ERR_SYNTAX && strstr(err.message, "tokenizer.ggml.model"),
          "no model: %s", err.message);
    close_vocab(&t);
    b.n = 0;
    header(&b, 3, 0, 2);
    kv_str(&b, "tokenizer.ggml.model", "bert");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
    CHECK(open_vocab(&b, &t, &err) == SV_ERR_UNSUPPORTED && strstr(err.message, "bert"), "bert: %s",
          err.message);
    close_vocab(&t);
    sv_bytes_free(&b);
}

/* The SentencePiece vocabulary (scores in brackets; characters score -100
 * and are never produced by a merge):
 *    0 <unk>  1 <s>  2 </s>  3..258 <0x00>..<0xFF>
 *  259 ▁  260 a  261 b  262 c  263 d  264 e  265 h  266 l  267 o  268 r  269 w
 *  270 ll [-1]  271 he [-2]  272 ▁h [-3]  273 ▁he [-4]  274 llo [-5]
 *  275 hello [-6]  276 ▁hello [-7]  277 ▁w [-8]  278 or [-9]  279 ▁wor [-10]
 *  280 ld [-11]  281 ▁world [-12]  282 ab [-13]  283 bc [-13]  284 abc [-14]
 *  285 dc [-15]  286 cb [-15]  287 <tool> (user-defined)
 *  288 <0x41 (a normal token that only looks like a byte) */
enum { SP_UNK, SP_BOS, SP_EOS, SP_BYTE0, SP_META = 259, SP_A, SP_B, SP_C, SP_D, SP_E, SP_H, SP_L, SP_O,
       SP_R, SP_W, SP_LL, SP_HE, SP_MH, SP_MHE, SP_LLO, SP_HELLO, SP_MHELLO, SP_MW, SP_OR, SP_MWOR, SP_LD,
       SP_MWORLD, SP_AB, SP_BC, SP_ABC, SP_DC, SP_CB, SP_TOOL, SP_FAKE, SP_N };

static void spm_file(buf_t *b, bool bytes, int prefix, bool squash) {
    static char names[256][8];
    const char *tokens[SP_N];
    float scores[SP_N];
    int32_t types[SP_N];
    tokens[SP_UNK] = "<unk>";
    tokens[SP_BOS] = "<s>";
    tokens[SP_EOS] = "</s>";
    types[SP_UNK] = 2;
    types[SP_BOS] = types[SP_EOS] = 3;
    for (int i = 0; i < 256; i++) {
        snprintf(names[i], sizeof names[i], bytes ? "<0x%02X>" : "<x%02X>", i);
        tokens[SP_BYTE0 + i] = names[i];
        types[SP_BYTE0 + i] = bytes ? 6 : 5;
    }
    const char *pieces[] = {"\xE2\x96\x81", "a", "b", "c", "d", "e", "h", "l", "o", "r", "w",
                            "ll", "he", "\xE2\x96\x81h", "\xE2\x96\x81he", "llo", "hello",
                            "\xE2\x96\x81hello", "\xE2\x96\x81w", "or", "\xE2\x96\x81wor", "ld",
                            "\xE2\x96\x81world", "ab", "bc", "abc", "dc", "cb", "<tool>", "<0x41"};
    const float piece_scores[] = {-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -13, -13, -14, -15, -15};
    for (int i = 0; i < SP_N - SP_META; i++) {
        tokens[SP_META + i] = pieces[i];
        types[SP_META + i] = 1;
    }
    types[SP_TOOL] = 4;
    for (int i = 0; i < SP_N; i++)
        scores[i] = i >= SP_LL && i <= SP_CB ? piece_scores[i - SP_LL] : i >= SP_META ? -100.0f : 0.0f;
    header(b, 3, 0, 7 + (prefix >= 0) + squash);
    kv_str(b, "tokenizer.ggml.model", "llama");
    kv_strs(b, "tokenizer.ggml.tokens", tokens, SP_N);
    kv_f32s(b, "tokenizer.ggml.scores", scores, SP_N);
    kv_i32s(b, "tokenizer.ggml.token_type", types, SP_N);
    kv_u32(b, "tokenizer.ggml.bos_token_id", SP_BOS);
    kv_u32(b, "tokenizer.ggml.eos_token_id", SP_EOS);
    kv_u32(b, "tokenizer.ggml.unknown_token_id", SP_UNK);
    if (prefix >= 0)
        kv_bool(b, "tokenizer.ggml.add_space_prefix", prefix);
    if (squash)
        kv_bool(b, "tokenizer.ggml.remove_extra_whitespaces", true);
}

#define BYTE(c) (SP_BYTE0 + (c))

static void test_spm(void) {
    buf_t b = {0};
    tok_t t;
    sv_error_t err;
    spm_file(&b, true, -1, false);
    CHECK(open_vocab(&b, &t, &err) == SV_OK, "SentencePiece vocabulary: %s", err.message);
    if (t.s) {
        /* "▁hello▁world": ll (-1), he (-2); ▁h is stale (h is in he);
         * ▁he (-4), llo (-5), ▁he+llo = ▁hello (-7); ▁w (-8), or (-9), ▁wor
         * (-10), ld (-11), ▁wor+ld = ▁world (-12). "hello" (-6) never forms:
         * the symbol left of llo is ▁he by then. */
        EXPECT(&t, "hello world", 0, SP_MHELLO, SP_MWORLD);
        /* "▁abc": ab and bc tie at -13: the leftmost (ab) first, then
         * ab+c = abc; ▁abc is no token. */
        EXPECT(&t, "abc", 0, SP_META, SP_ABC);
        /* "▁cab": only ab merges; cab is no token. */
        EXPECT(&t, "cab", 0, SP_META, SP_C, SP_AB);
        /* "▁dcb": dc and cb tie at -15: the leftmost pair wins although the
         * pair (c, b) starts with the lower id. */
        EXPECT(&t, "dcb", 0, SP_META, SP_DC, SP_B);
        /* Bytes without a token fall back to <0xNN>, per byte. */
        EXPECT(&t, "a \xC3\xA9", 0, SP_META, SP_A, SP_META, BYTE(0xC3), BYTE(0xA9));
        /* The prefix comes back after each special token, even before a
         * space ("▁▁a"), and a leading space is kept ("▁▁he" -> ▁ ▁he). */
        EXPECT(&t, "<s>hello</s> a", 0, SP_BOS, SP_MHELLO, SP_EOS, SP_META, SP_META, SP_A);
        EXPECT(&t, " he", 0, SP_META, SP_MHE);
        /* A user-defined token splits the text like a special one. */
        EXPECT(&t, "ab<tool>ab", 0, SP_META, SP_AB, SP_TOOL, SP_META, SP_AB);
        /* Read as text, "<s>" is bytes: < s > have no piece. */
        EXPECT(&t, "<s>he", SV_BPE_SPECIAL_AS_TEXT, SP_META, BYTE('<'), BYTE('s'), BYTE('>'), SP_HE);
        EXPECT(&t, "", 0);
        /* A literal ▁ in the text is a space to the model. */
        EXPECT(&t, "\xE2\x96\x81w", 0, SP_META, SP_MW);
        size_t n;
        const uint8_t *p = sv_vocab_bytes(t.v, SP_MHELLO, &n);
        CHECK(n == 6 && memcmp(p, " hello", 6) == 0, "bytes of ▁hello");
        p = sv_vocab_bytes(t.v, BYTE(0xC3), &n);
        CHECK(n == 1 && p[0] == 0xC3 && (sv_vocab_flags(t.v, BYTE(0xC3)) & SV_TOKEN_BYTE), "byte token");
        p = sv_vocab_bytes(t.v, SP_BOS, &n);
        CHECK(n == 3 && memcmp(p, "<s>", 3) == 0, "bytes of <s>");
        p = sv_vocab_bytes(t.v, SP_FAKE, &n);
        CHECK(n == 5 && memcmp(p, "<0x41", 5) == 0 && !(sv_vocab_flags(t.v, SP_FAKE) & SV_TOKEN_BYTE),
              "a piece that only looks like a byte");
        CHECK(sv_vocab_bos(t.v) == SP_BOS && sv_vocab_eos(t.v) == SP_EOS && sv_vocab_add_bos(t.v),
              "llama vocabularies add BOS by default");
        CHECK(sv_vocab_flags(t.v, SP_UNK) == (SV_TOKEN_ADDED | SV_TOKEN_SPECIAL), "<unk> flags");
        /* Decoding: ▁ is a space, bytes join into characters. */
        const int32_t ids[] = {SP_MHELLO, SP_META, BYTE(0xC3), BYTE(0xA9)};
        sv_bytes_t out = {0};
        CHECK(sv_vocab_decode(t.v, ids, 4, false, &out, &err) == SV_OK && out.n == 9 &&
                  memcmp(out.p, " hello \xC3\xA9", 9) == 0, "decode");
        sv_bytes_free(&out);
    }
    close_vocab(&t);

    /* add_space_prefix false: no ▁ in front; "hello" (he+llo) forms. */
    b.n = 0;
    spm_file(&b, true, 0, false);
    CHECK(open_vocab(&b, &t, &err) == SV_OK, "no prefix: %s", err.message);
    if (t.s) {
        EXPECT(&t, "hello", 0, SP_HELLO);
        EXPECT(&t, "hello world", 0, SP_HELLO, SP_MWORLD);
    }
    close_vocab(&t);

    /* Without byte tokens, unknown characters are <unk>, runs fused. */
    b.n = 0;
    spm_file(&b, false, -1, false);
    CHECK(open_vocab(&b, &t, &err) == SV_OK, "no byte tokens: %s", err.message);
    if (t.s) {
        sv_ids_t ids = {0};
        const char *text = "a\xC3\xA9\xC3\xA8z b";
        CHECK(sv_bpe_encode(t.b, t.s, text, strlen(text), 0, &ids, &err) == SV_OK && ids.n == 5 &&
                  ids.v[0] == SP_META && ids.v[1] == SP_A && ids.v[2] == SP_UNK && ids.v[3] == SP_META &&
                  ids.v[4] == SP_B, "é è z fused into one <unk>");
        sv_ids_free(&ids);
    }
    close_vocab(&t);

    /* remove_extra_whitespaces: loads, but the encoder refuses it. */
    b.n = 0;
    spm_file(&b, true, -1, true);
    CHECK(open_vocab(&b, &t, &err) == SV_ERR_UNSUPPORTED && t.v && strstr(err.message, "remove_extra"),
          "remove_extra_whitespaces: %s", err.message);
    close_vocab(&t);

    /* Scores are required. */
    b.n = 0;
    const char *toks[] = {"a"};
    header(&b, 3, 0, 2);
    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 1);
    CHECK(open_vocab(&b, &t, &err) == SV_ERR_SYNTAX && strstr(err.message, "scores"), "no scores: %s",
          err.message);
    close_vocab(&t);
    sv_bytes_free(&b);
}

/* sv_vocab_load tells a GGUF file from a tokenizer.json. */
static void test_load_any(void) {
    char dir[] = "/tmp/sv_gguf_vocab_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(false, "mkdtemp");
        return;
    }
    char gpath[64], jpath[64];
    snprintf(gpath, sizeof gpath, "%s/model.bin", dir);
    snprintf(jpath, sizeof jpath, "%s/tokenizer.json", dir);
    buf_t b = {0};
    spm_file(&b, true, -1, false);
    FILE *f = fopen(gpath, "wb");
    fwrite(b.p, 1, b.n, f);
    fclose(f);
    f = fopen(jpath, "w");
    fputs("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": []}}", f);
    fclose(f);
    sv_vocab_t *v;
    sv_error_t err;
    CHECK(sv_vocab_load(gpath, &v, &err) == SV_OK && sv_vocab_size(v) == SP_N, "GGUF by magic: %s",
          err.message);
    sv_vocab_destroy(v);
    CHECK(sv_vocab_load(jpath, &v, &err) == SV_OK && sv_vocab_size(v) == 2, "tokenizer.json: %s", err.message);
    sv_vocab_destroy(v);
    CHECK(sv_vocab_load_gguf(jpath, &v, &err) == SV_ERR_SYNTAX && strstr(err.message, jpath),
          "a tokenizer.json is no GGUF: %s", err.message);
    CHECK(sv_vocab_load("/nonexistent", &v, &err) == SV_ERR_IO, "missing file");
    unlink(gpath);
    unlink(jpath);
    rmdir(dir);
    sv_bytes_free(&b);
}

/* One line per metadata pair ("kv KEY TYPE COUNT-or-VALUE"), per tensor
 * ("tensor NAME TYPE NE0,NE1,.. OFFSET N_BYTES") and the data section. */
static int dump(const char *path) {
    sv_gguf_t *g;
    sv_error_t err;
    if (sv_gguf_open(path, &g, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    for (uint64_t i = 0; i < sv_gguf_n_kv(g); i++) {
        const sv_gguf_kv_t *kv = sv_gguf_kv_at(g, i);
        const sv_gguf_value_t *v = &kv->value;
        printf("kv %.*s %s ", (int)kv->key.n, kv->key.p, sv_gguf_type_name(v->type));
        switch (v->type) {
        case SV_GGUF_ARRAY: printf("%s %llu\n", sv_gguf_type_name(v->elem), (unsigned long long)v->n); break;
        case SV_GGUF_STRING: printf("%llu\n", (unsigned long long)v->v.str.n); break;
        case SV_GGUF_FLOAT32:
        case SV_GGUF_FLOAT64: printf("%.9g\n", v->v.f); break;
        case SV_GGUF_BOOL: printf("%d\n", v->v.b); break;
        case SV_GGUF_INT8:
        case SV_GGUF_INT16:
        case SV_GGUF_INT32:
        case SV_GGUF_INT64: printf("%lld\n", (long long)v->v.i); break;
        default: printf("%llu\n", (unsigned long long)v->v.u); break;
        }
    }
    for (uint64_t i = 0; i < sv_gguf_n_tensors(g); i++) {
        const sv_gguf_tensor_t *t = sv_gguf_tensor_at(g, i);
        const char *type;
        sv_ggml_type_info(t->type, &type, NULL, NULL);
        printf("tensor %s %s ", t->name, type);
        for (uint32_t d = 0; d < t->n_dims; d++)
            printf(d ? ",%llu" : "%llu", (unsigned long long)t->ne[d]);
        printf(" %llu %llu\n", (unsigned long long)t->offset, (unsigned long long)t->n_bytes);
    }
    printf("data %llu %u\n", (unsigned long long)sv_gguf_data_offset(g), sv_gguf_alignment(g));
    sv_gguf_destroy(g);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--dump") == 0)
        return dump(argv[2]);
    test_reader();
    test_malformed();
    test_byte_level();
    test_spm();
    test_load_any();
    return test_summary("gguf: reader, malformed files, byte-level and SentencePiece vocabularies");
}
