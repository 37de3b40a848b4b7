/* test_safetensors.c — the safetensors reader on files this test builds.
 *
 * A valid file (F32, F16, BF16, a scalar, an empty I32 tensor, metadata, a
 * header padded with spaces) reads back exactly, from memory and through
 * mmap; every truncation of it is an error, not a crash; and each crafted
 * bad file (short, header past the file, header budget, bad JSON, missing
 * and ill-typed fields, unknown dtypes, negative, fractional and
 * overflowing dimensions, too many dimensions, sizes that disagree with
 * their byte range, ranges out of the buffer, overlapping, with gaps or
 * leaving bytes over, duplicate names, bad metadata, long names) gives the
 * expected status and a message naming the problem.
 *
 * Also sv_dequantize's argument checks (sizes, unsupported types), which
 * sv_st_to_f32 relies on; its values are checked against the gguf Python
 * package by tests/model/test_dequant.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/backend/quant.h"
#include "src/model/safetensors.h"
#include "test.h"

/* A file: u64 header length, the header, the data. Caller frees. */
static uint8_t *build(const char *header, const void *data, size_t data_len, size_t *size) {
    size_t n = strlen(header);
    *size = 8 + n + data_len;
    uint8_t *b = malloc(*size ? *size : 1);
    if (!b)
        abort();
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(b + 8, header, n);
    if (data_len)
        memcpy(b + 8 + n, data, data_len);
    return b;
}

static const char VALID_HEADER[] =
    "{\"__metadata__\": {\"format\": \"pt\", \"note\": \"hi\"},"
    " \"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
    " \"b.weight\": {\"dtype\": \"F16\", \"shape\": [4], \"data_offsets\": [24, 32]},"
    " \"c\": {\"dtype\": \"BF16\", \"shape\": [], \"data_offsets\": [32, 34]},"
    " \"e\": {\"dtype\": \"I32\", \"shape\": [0, 5], \"data_offsets\": [34, 34]},"
    " \"z\": {\"dtype\": \"U8\", \"shape\": [1, 1, 2], \"data_offsets\": [34, 36]}}    ";

/* The data of VALID_HEADER: a = 0.5, -1, 2, 3.25, 1e-3, -0; b = f16 1, -2,
 * 65504, smallest subnormal; c = bf16 1.5; z = 7, 9. */
static void valid_data(uint8_t data[36]) {
    const float a[6] = {0.5f, -1.0f, 2.0f, 3.25f, 1e-3f, -0.0f};
    memcpy(data, a, sizeof a);
    const uint16_t b[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};
    for (int i = 0; i < 4; i++) {
        data[24 + 2 * i] = (uint8_t)b[i];
        data[25 + 2 * i] = (uint8_t)(b[i] >> 8);
    }
    data[32] = 0xc0; /* bf16 0x3fc0 = 1.5 */
    data[33] = 0x3f;
    data[34] = 7;
    data[35] = 9;
}

static void check_valid(const sv_st_t *st, const char *how) {
    CHECK(sv_st_n_tensors(st) == 5, "%s: %llu tensors", how,
          (unsigned long long)sv_st_n_tensors(st));
    if (sv_st_n_tensors(st) != 5)
        return;
    const char *names[5] = {"a", "b.weight", "c", "e", "z"};
    for (int i = 0; i < 5; i++) {
        const sv_st_tensor_t *t = sv_st_tensor_at(st, (uint64_t)i);
        CHECK(strcmp(t->name, names[i]) == 0, "%s: tensor %d is %s", how, i, t->name);
        CHECK(sv_st_find(st, names[i]) == t, "%s: find %s", how, names[i]);
    }
    CHECK(sv_st_find(st, "nope") == NULL && sv_st_find(st, "") == NULL, "%s: find missing", how);
    CHECK(sv_st_find(st, "__metadata__") == NULL, "%s: metadata is no tensor", how);
    CHECK(sv_st_data_offset(st) == 8 + strlen(VALID_HEADER), "%s: data offset", how);

    sv_error_t err;
    float y[6];
    const sv_st_tensor_t *a = sv_st_find(st, "a");
    CHECK(a->dtype == SV_ST_F32 && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 3 &&
          a->shape[2] == 1 && a->n_elems == 6 && a->n_bytes == 24 && a->offset == 0,
          "%s: a's fields", how);
    CHECK(sv_st_to_f32(a, y, &err) == SV_OK && y[0] == 0.5f && y[1] == -1.0f && y[3] == 3.25f &&
          y[4] == 1e-3f && y[5] == 0.0f && signbit(y[5]), "%s: a's values", how);
    const sv_st_tensor_t *b = sv_st_find(st, "b.weight");
    CHECK(b->dtype == SV_ST_F16 && b->n_dims == 1 && b->n_elems == 4 && b->offset == 24,
          "%s: b's fields", how);
    CHECK(sv_st_to_f32(b, y, &err) == SV_OK && y[0] == 1.0f && y[1] == -2.0f && y[2] == 65504.0f &&
          y[3] == 0x1p-24f, "%s: b's values %g %g %g %g", how, y[0], y[1], y[2], y[3]);
    const sv_st_tensor_t *c = sv_st_find(st, "c");
    CHECK(c->dtype == SV_ST_BF16 && c->n_dims == 0 && c->n_elems == 1 && c->n_bytes == 2,
          "%s: c is a scalar", how);
    CHECK(sv_st_to_f32(c, y, &err) == SV_OK && y[0] == 1.5f, "%s: c's value", how);
    const sv_st_tensor_t *e = sv_st_find(st, "e");
    CHECK(e->dtype == SV_ST_I32 && e->n_elems == 0 && e->n_bytes == 0 && e->shape[1] == 5,
          "%s: e is empty", how);
    const sv_st_tensor_t *z = sv_st_find(st, "z");
    CHECK(z->n_dims == 3 && z->n_elems == 2 && ((const uint8_t *)z->data)[0] == 7 &&
          ((const uint8_t *)z->data)[1] == 9, "%s: z's bytes", how);
    CHECK(sv_st_to_f32(z, y, &err) == SV_ERR_UNSUPPORTED && strstr(err.message, "U8") &&
          strstr(err.message, "\"z\""), "%s: U8 does not convert: %s", how, err.message);

    CHECK(sv_st_n_metadata(st) == 2, "%s: metadata count", how);
    const char *k, *v;
    sv_st_metadata_at(st, 1, &k, &v);
    CHECK(k && v && strcmp(k, "note") == 0 && strcmp(v, "hi") == 0, "%s: metadata 1", how);
    CHECK(sv_st_metadata(st, "format") && strcmp(sv_st_metadata(st, "format"), "pt") == 0 &&
          sv_st_metadata(st, "a") == NULL, "%s: metadata lookup", how);
}

static void test_valid(void) {
    uint8_t data[36];
    valid_data(data);
    size_t n;
    uint8_t *file = build(VALID_HEADER, data, sizeof data, &n);
    sv_error_t err;
    sv_error_clear(&err);
    sv_st_t *st = NULL;
    CHECK(sv_st_open_memory(file, n, &st, &err) == SV_OK, "valid file: %s", err.message);
    if (st)
        check_valid(st, "memory");
    sv_st_destroy(st);

    /* Through mmap. */
    char path[] = "/tmp/test_safetensors_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, file, n) == (ssize_t)n && close(fd) == 0, "temp file");
    st = NULL;
    CHECK(sv_st_open(path, &st, &err) == SV_OK, "valid file on disk: %s", err.message);
    if (st)
        check_valid(st, "mmap");
    sv_st_destroy(st);
    CHECK(truncate(path, (off_t)n - 1) == 0, "truncate");
    CHECK(sv_st_open(path, &st, &err) == SV_ERR_SYNTAX && st == NULL && strstr(err.message, path),
          "truncated file names the path: %s", err.message);
    CHECK(truncate(path, 3) == 0, "truncate");
    CHECK(sv_st_open(path, &st, &err) == SV_ERR_SYNTAX && st == NULL, "3-byte file");
    unlink(path);
    CHECK(sv_st_open("/nonexistent.safetensors", &st, &err) == SV_ERR_IO, "missing file");
    CHECK(sv_st_open("/tmp", &st, &err) == SV_ERR_IO, "a directory");
    CHECK(sv_st_open_memory(NULL, 5, &st, &err) == SV_ERR_ARG, "NULL data");
    CHECK(sv_st_to_f32(NULL, NULL, &err) == SV_ERR_ARG, "NULL tensor");
    sv_st_destroy(NULL);

    /* Every truncation is an error, not a crash (each copied to a buffer of
     * its own size, so that ASan sees a read past the cut). */
    int bad = 0;
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, file, cut);
        st = NULL;
        sv_status s = sv_st_open_memory(p, cut, &st, &err);
        if (s != SV_ERR_SYNTAX || st != NULL)
            bad++;
        sv_st_destroy(st);
        free(p);
    }
    CHECK(bad == 0, "%d of %zu truncations not refused cleanly", bad, n);

    /* An empty header and no data is a valid, empty file. */
    free(file);
    file = build("{}", NULL, 0, &n);
    CHECK(sv_st_open_memory(file, n, &st, &err) == SV_OK && sv_st_n_tensors(st) == 0 &&
          sv_st_find(st, "a") == NULL && sv_st_n_metadata(st) == 0, "empty file: %s",
          err.message);
    sv_st_destroy(st);
    free(file);
}

/* ---- malformed files ------------------------------------------------------- */

/* Opens header + data_len zero bytes and checks the status and that the
 * message contains want (and want2 when given). */
static void expect(const char *what, const char *header, size_t data_len, sv_status code,
                   const char *want, const char *want2) {
    uint8_t *data = calloc(data_len ? data_len : 1, 1);
    size_t n;
    uint8_t *file = build(header, data, data_len, &n);
    sv_error_t err;
    sv_error_clear(&err);
    sv_st_t *st = (sv_st_t *)1;
    sv_status s = sv_st_open_memory(file, n, &st, &err);
    CHECK(s == code && (code == SV_OK ? st != NULL : st == NULL) && strstr(err.message, want) &&
          (!want2 || strstr(err.message, want2)),
          "%s: got %s \"%s\", want %s with \"%s\"", what, sv_status_name(s), err.message,
          sv_status_name(code), want);
    if (s == SV_OK)
        sv_st_destroy(st);
    free(file);
    free(data);
}

#define T(name, dtype, shape, b, e) \
    "\"" name "\": {\"dtype\": \"" dtype "\", \"shape\": " shape ", \"data_offsets\": [" b ", " e "]}"

static void test_malformed(void) {
    sv_error_t err;
    sv_st_t *st;
    const uint8_t short_file[5] = {1, 0, 0, 0, 0};
    CHECK(sv_st_open_memory(short_file, 5, &st, &err) == SV_ERR_SYNTAX && st == NULL &&
          strstr(err.message, "too short"), "5 bytes: %s", err.message);
    CHECK(sv_st_open_memory(short_file, 0, &st, &err) == SV_ERR_SYNTAX, "0 bytes");

    /* The header length runs past the file. */
    uint8_t past[12] = {5, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    CHECK(sv_st_open_memory(past, sizeof past, &st, &err) == SV_ERR_SYNTAX &&
          strstr(err.message, "past the end"), "header past the file: %s", err.message);
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    CHECK(sv_st_open_memory(huge, sizeof huge, &st, &err) == SV_ERR_SYNTAX, "u64 max header");

    /* A header past the budget (in a file that holds it: calloc'd pages are
     * never touched, so this costs no memory). */
    size_t big = 8 + (size_t)SV_ST_MAX_HEADER + 1;
    uint8_t *b = calloc(big, 1);
    if (b) {
        uint64_t hn = SV_ST_MAX_HEADER + 1;
        for (int i = 0; i < 8; i++)
            b[i] = (uint8_t)(hn >> (8 * i));
        CHECK(sv_st_open_memory(b, big, &st, &err) == SV_ERR_BUDGET && st == NULL &&
              strstr(err.message, "limit"), "header budget: %s", err.message);
        free(b);
    }

    expect("bad JSON", "{", 0, SV_ERR_SYNTAX, "not valid JSON", NULL);
    expect("trailing junk", "{} x", 0, SV_ERR_SYNTAX, "not valid JSON", NULL);
    expect("NUL in a name", "{\"a\\u0000\": 1}", 0, SV_ERR_SYNTAX, "not valid JSON", NULL);
    expect("an array", "[]", 0, SV_ERR_SYNTAX, "not a JSON object", NULL);
    expect("entry not an object", "{\"w\": 3}", 0, SV_ERR_SYNTAX, "not an object", "\"w\"");
    expect("no dtype", "{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, SV_ERR_SYNTAX,
           "missing field \"dtype\"", "\"w\"");
    expect("no shape", "{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4,
           SV_ERR_SYNTAX, "missing field \"shape\"", NULL);
    expect("no offsets", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, SV_ERR_SYNTAX,
           "missing field \"data_offsets\"", NULL);
    expect("dtype not a string", "{\"w\": {\"dtype\": 3, \"shape\": [1], \"data_offsets\": [0, 4]}}",
           4, SV_ERR_SYNTAX, "\"dtype\" is not a string", NULL);
    expect("unknown dtype", "{" T("w", "F33", "[1]", "0", "4") "}", 4, SV_ERR_SYNTAX,
           "unknown dtype \"F33\"", "\"w\"");
    expect("shape not an array", "{" T("w", "F32", "1", "0", "4") "}", 4, SV_ERR_SYNTAX,
           "\"shape\" is not an array", NULL);
    expect("negative dim", "{" T("w", "F32", "[-1]", "0", "4") "}", 4, SV_ERR_SYNTAX,
           "dimension is not an integer >= 0", "\"w\"");
    expect("fractional dim", "{" T("w", "F32", "[1.0]", "0", "4") "}", 4, SV_ERR_SYNTAX,
           "dimension is not an integer >= 0", NULL);
    expect("string dim", "{" T("w", "F32", "[\"1\"]", "0", "4") "}", 4, SV_ERR_SYNTAX,
           "dimension", NULL);
    expect("too many dims", "{" T("w", "F32", "[1,1,1,1,1,1,1,1,1]", "0", "4") "}", 4,
           SV_ERR_BUDGET, "9 dimensions", "\"w\"");
    expect("eight dims are fine", "{" T("w", "F32", "[1,1,1,1,1,1,1,1]", "0", "4") "}", 4, SV_OK,
           "", NULL);
    expect("element overflow", "{" T("w", "U8", "[4294967296, 4294967296]", "0", "4") "}", 4,
           SV_ERR_SYNTAX, "element count overflows", NULL);
    expect("byte overflow", "{" T("w", "F64", "[4611686018427387904]", "0", "4") "}", 4,
           SV_ERR_SYNTAX, "size in bytes overflows", NULL);
    expect("too big integer", "{" T("w", "F32", "[1]", "0", "18446744073709551620") "}", 4,
           SV_ERR_SYNTAX, "not valid JSON", NULL);
    expect("offsets not a pair", "{" T("w", "F32", "[1]", "0", "4, 8") "}", 4, SV_ERR_SYNTAX,
           "\"data_offsets\" is not [begin, end]", NULL);
    expect("negative offset", "{" T("w", "F32", "[1]", "-4", "0") "}", 4, SV_ERR_SYNTAX,
           "\"data_offsets\" is not [begin, end]", NULL);
    expect("end before begin", "{" T("w", "F32", "[1]", "4", "0") "}", 4, SV_ERR_SYNTAX,
           "end before", NULL);
    expect("size mismatch", "{" T("w", "F32", "[2]", "0", "4") "}", 4, SV_ERR_SYNTAX,
           "take 8 bytes", "\"w\"");
    expect("past the data", "{" T("w", "F32", "[2]", "0", "8") "}", 4, SV_ERR_SYNTAX,
           "run past the data buffer", "\"w\"");
    expect("overlap", "{" T("a", "F32", "[1]", "0", "4") ", " T("b", "F16", "[2]", "2", "6") "}",
           6, SV_ERR_SYNTAX, "overlaps", "\"b\"");
    expect("same range twice", "{" T("a", "F32", "[1]", "0", "4") ", " T("b", "F32", "[1]", "0", "4") "}",
           4, SV_ERR_SYNTAX, "overlaps", NULL);
    expect("gap", "{" T("a", "F32", "[1]", "0", "4") ", " T("b", "F16", "[1]", "6", "8") "}", 8,
           SV_ERR_SYNTAX, "gap", "\"b\"");
    expect("gap at the start", "{" T("a", "F32", "[1]", "2", "6") "}", 6, SV_ERR_SYNTAX, "gap",
           NULL);
    expect("bytes left over", "{" T("a", "F32", "[1]", "0", "4") "}", 6, SV_ERR_SYNTAX,
           "end at byte 4", NULL);
    expect("no tensors but data", "{}", 3, SV_ERR_SYNTAX, "no tensors", NULL);
    expect("unsorted is fine",
           "{" T("b", "F32", "[1]", "4", "8") ", " T("a", "F32", "[1]", "0", "4") "}", 8, SV_OK,
           "", NULL);
    expect("duplicate names",
           "{" T("a", "F32", "[1]", "0", "4") ", " T("a", "F32", "[1]", "4", "8") "}", 8,
           SV_ERR_SYNTAX, "not valid JSON", NULL);
    expect("metadata not an object", "{\"__metadata__\": [1]}", 0, SV_ERR_SYNTAX,
           "\"__metadata__\" is not an object", NULL);
    expect("metadata value not a string", "{\"__metadata__\": {\"k\": 1}}", 0, SV_ERR_SYNTAX,
           "value of \"k\" is not a string", NULL);

    /* A name past SV_ST_MAX_NAME. */
    size_t ln = SV_ST_MAX_NAME + 1;
    char *hdr = malloc(ln + 100);
    hdr[0] = '{';
    hdr[1] = '"';
    memset(hdr + 2, 'x', ln);
    strcpy(hdr + 2 + ln, "\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}");
    expect("long name", hdr, 4, SV_ERR_BUDGET, "past the limit", NULL);
    free(hdr);
}

/* ---- sv_dequantize's arguments --------------------------------------------- */

static void test_dequant_args(void) {
    sv_error_t err;
    uint8_t src[2 * 34] = {0};
    float dst[64];
    const sv_ggml_type yes[] = {SV_GGML_F32, SV_GGML_F16, SV_GGML_BF16, SV_GGML_Q8_0,
                                SV_GGML_Q4_0, SV_GGML_Q4_1, SV_GGML_Q4_K, SV_GGML_Q6_K};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECK(sv_dequant_supported(yes[i]), "type %d supported", (int)yes[i]);
    CHECK(!sv_dequant_supported(SV_GGML_Q5_0) && !sv_dequant_supported(SV_GGML_I32) &&
          !sv_dequant_supported((sv_ggml_type)99), "others unsupported");

    CHECK(sv_dequantize(SV_GGML_Q8_0, src, sizeof src, dst, 64, &err) == SV_OK, "2 Q8_0 blocks");
    dst[0] = 42.0f;
    CHECK(sv_dequantize(SV_GGML_Q8_0, src, sizeof src, dst, 48, &err) == SV_ERR_ARG &&
          strstr(err.message, "Q8_0") && dst[0] == 42.0f, "partial block: %s", err.message);
    CHECK(sv_dequantize(SV_GGML_Q8_0, src, sizeof src - 1, dst, 64, &err) == SV_ERR_ARG &&
          strstr(err.message, "got 67"), "short source: %s", err.message);
    CHECK(sv_dequantize(SV_GGML_Q8_0, src, sizeof src, dst, 32, &err) == SV_ERR_ARG,
          "long source");
    CHECK(sv_dequantize(SV_GGML_F32, src, 4, dst, (uint64_t)1 << 62, &err) == SV_ERR_ARG,
          "byte count overflows");
    CHECK(sv_dequantize(SV_GGML_Q5_0, src, 22, dst, 32, &err) == SV_ERR_UNSUPPORTED &&
          strstr(err.message, "Q5_0"), "Q5_0: %s", err.message);
    CHECK(sv_dequantize((sv_ggml_type)99, src, 4, dst, 1, &err) == SV_ERR_UNSUPPORTED &&
          strstr(err.message, "99"), "unknown type: %s", err.message);
    CHECK(sv_dequantize(SV_GGML_F16, NULL, 2, dst, 1, &err) == SV_ERR_ARG, "NULL source");
    CHECK(sv_dequantize(SV_GGML_Q4_K, NULL, 0, NULL, 0, &err) == SV_OK, "nothing to do");

    /* f16 specials, exactly. */
    CHECK(sv_f16_to_f32(0x0001) == 0x1p-24f && sv_f16_to_f32(0x03ff) == 0x3ffp-24f &&
          sv_f16_to_f32(0x0400) == 0x1p-14f && sv_f16_to_f32(0x7bff) == 65504.0f &&
          sv_f16_to_f32(0xfc00) == -INFINITY && isnan(sv_f16_to_f32(0x7e00)) &&
          signbit(sv_f16_to_f32(0x8000)) && sv_bf16_to_f32(0xbf80) == -1.0f,
          "f16/bf16 specials");
}

int main(void) {
    test_valid();
    test_dequant_args();
    test_malformed();
    return test_summary("safetensors: valid file, truncations, malformed headers; dequantize arguments");
}
