/* fuzz_safetensors.c — libFuzzer target for the safetensors reader.
 *
 * The input is a safetensors file. The reader must refuse it with an error
 * or accept it; when it accepts, this target reads everything the API hands
 * out and checks it: every tensor's bytes lie inside the input's data
 * buffer, its sizes agree (shape product, dtype size, byte count), the
 * ranges tile the data buffer exactly, lookups by name find each tensor,
 * metadata strings are readable, and sv_st_to_f32 converts F32/F16/BF16
 * exactly (compared with sv_f16_to_f32 / sv_bf16_to_f32 and the raw bits)
 * and refuses every other dtype.
 *
 * Seeds: fuzz/corpus/safetensors (small valid files with every float dtype,
 * metadata, empty and scalar tensors, and a few near-misses). */
#include <stdlib.h>
#include <string.h>

#include "src/backend/quant.h"
#include "src/model/safetensors.h"

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static const uint8_t *lo, *hi;  /* the input */
static volatile uint64_t sink;  /* keeps the reads */

static void inside(const void *p, uint64_t n) {
    const uint8_t *b = p;
    CHECK(n == 0 || (b >= lo && b <= hi && n <= (uint64_t)(hi - b)));
    for (uint64_t i = 0; i < n; i++)
        sink += b[i];
}

static void read_str(const char *s) {
    CHECK(s != NULL);
    sink += strlen(s);
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static void check_convert(const sv_st_tensor_t *t) {
    sv_error_t err;
    float *y = malloc(t->n_elems ? t->n_elems * sizeof *y : 1);
    CHECK(y != NULL);
    sv_status s = sv_st_to_f32(t, y, &err);
    const uint8_t *b = t->data;
    switch (t->dtype) {
    case SV_ST_F32:
        CHECK(s == SV_OK);
        CHECK(t->n_elems == 0 || memcmp(y, b, t->n_bytes) == 0);
        break;
    case SV_ST_F16:
    case SV_ST_BF16:
        CHECK(s == SV_OK);
        for (uint64_t i = 0; i < t->n_elems; i++) {
            uint16_t h = rd16(b + 2 * i);
            float want = t->dtype == SV_ST_F16 ? sv_f16_to_f32(h) : sv_bf16_to_f32(h);
            CHECK(memcmp(&y[i], &want, sizeof want) == 0);
        }
        break;
    default:
        CHECK(s == SV_ERR_UNSUPPORTED && err.code == s);
    }
    free(y);
}

static void check_reader(const sv_st_t *st) {
    uint64_t n = sv_st_n_tensors(st), data_off = sv_st_data_offset(st);
    size_t size = (size_t)(hi - lo);
    CHECK(data_off >= 8 && data_off <= size);
    uint64_t covered = 0;
    for (uint64_t i = 0; i < n; i++) {
        const sv_st_tensor_t *t = sv_st_tensor_at(st, i);
        read_str(t->name);
        CHECK(sv_st_find(st, t->name) == t);
        CHECK((unsigned)t->dtype < SV_ST_DTYPE_END && t->n_dims <= SV_ST_MAX_DIMS);
        uint64_t e = 1;
        for (uint32_t d = 0; d < SV_ST_MAX_DIMS; d++) {
            CHECK(d < t->n_dims || t->shape[d] == 1);
            CHECK(!__builtin_mul_overflow(e, t->shape[d], &e));
        }
        CHECK(e == t->n_elems && t->n_elems * sv_st_dtype_size(t->dtype) == t->n_bytes);
        CHECK(t->offset + t->n_bytes <= size - data_off);
        CHECK((const uint8_t *)t->data == lo + data_off + t->offset);
        inside(t->data, t->n_bytes);
        covered += t->n_bytes;
        check_convert(t);
    }
    /* The ranges tile the data buffer: no overlap (so the sizes add up to
     * the buffer) and nothing left over. */
    CHECK(covered == size - data_off);
    for (uint64_t i = 0; i < sv_st_n_metadata(st); i++) {
        const char *k, *v;
        sv_st_metadata_at(st, i, &k, &v);
        read_str(k);
        read_str(v);
        CHECK(sv_st_metadata(st, k) != NULL);
    }
    CHECK(sv_st_find(st, "\xff not a name") == NULL || n > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16)
        return 0;
    lo = data;
    hi = data + size;
    sv_st_t *st;
    sv_error_t err;
    sv_status s = sv_st_open_memory(data, size, &st, &err);
    if (s != SV_OK) {
        CHECK(st == NULL && err.code == s && err.offset <= (long)size);
        CHECK(s == SV_ERR_SYNTAX || s == SV_ERR_BUDGET);
        return 0;
    }
    check_reader(st);
    sv_st_destroy(st);
    return 0;
}
