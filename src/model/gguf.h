/* gguf.h — reading GGUF files (llama.cpp's model format), versions 2 and 3.
 *
 * A GGUF file is a header, metadata (typed key/value pairs), a table of
 * tensors and the tensor data:
 *
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *   n_kv x   { string key, u32 type, value }
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
 *   padding to general.alignment (default 32), then the data section;
 *   each tensor's offset is relative to the data section's start
 *
 * (all integers little-endian; a string is a u64 length and that many
 * bytes, no NUL; an array is a u32 element type, a u64 count and the
 * elements, which may be strings or arrays themselves).
 *
 * The file is mapped read-only (or, for sv_gguf_open_memory, read from the
 * caller's buffer) and parsed once, up front: every length, count, type and
 * offset is checked against the bytes actually there, so that nothing read
 * later through this API can leave the file. A malformed file is an
 * sv_error naming the problem and its byte offset (SV_ERR_SYNTAX for a file
 * that is truncated or inconsistent, SV_ERR_UNSUPPORTED for a valid file
 * this reader does not handle: a big-endian file, version 1, a tensor type
 * it does not know, SV_ERR_BUDGET for counts past the limits below).
 *
 * Strings and scalar arrays are not copied: values point into the mapping
 * and stay valid until sv_gguf_destroy. Tensor data is not touched at open
 * time; sv_gguf_tensor_t gives each tensor's shape, ggml type, byte size and
 * a pointer to its bytes, which a dequantizer (issue 5) reads.
 *
 * An sv_gguf_t is immutable once open and safe to share between threads. */
#ifndef SV_MODEL_GGUF_H
#define SV_MODEL_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/backend/quant.h" /* sv_ggml_type, sv_ggml_type_info */
#include "util/error.h"

typedef struct sv_gguf sv_gguf_t;

/* Metadata value types, as numbered in the file. */
typedef enum {
    SV_GGUF_UINT8 = 0,
    SV_GGUF_INT8 = 1,
    SV_GGUF_UINT16 = 2,
    SV_GGUF_INT16 = 3,
    SV_GGUF_UINT32 = 4,
    SV_GGUF_INT32 = 5,
    SV_GGUF_FLOAT32 = 6,
    SV_GGUF_BOOL = 7,
    SV_GGUF_STRING = 8,
    SV_GGUF_ARRAY = 9,
    SV_GGUF_UINT64 = 10,
    SV_GGUF_INT64 = 11,
    SV_GGUF_FLOAT64 = 12,
} sv_gguf_type;

/* Limits on what a file may declare. Every count is also checked against
 * the bytes left in the file before anything is allocated for it, so memory
 * stays proportional to the file's size. */
#define SV_GGUF_MAX_KV (1u << 16)          /* metadata pairs */
#define SV_GGUF_MAX_TENSORS (1u << 20)
#define SV_GGUF_MAX_KEY 65535u             /* bytes in a key */
#define SV_GGUF_MAX_STRING (64u << 20)     /* bytes in one string value */
#define SV_GGUF_MAX_DEPTH 8                /* arrays of arrays of ... */
#define SV_GGUF_MAX_NAME 64u               /* tensor names are shorter (ggml's GGML_MAX_NAME) */
#define SV_GGUF_MAX_DIMS 4u
#define SV_GGUF_DEFAULT_ALIGNMENT 32u

/* A string in the file: n bytes at p, not NUL-terminated (borrowed). */
typedef struct sv_gguf_str {
    const char *p;
    uint64_t n;
} sv_gguf_str_t;

/* One metadata value. Scalars are widened: u holds the unsigned types, i
 * the signed ones, f both float types, b a bool (use the typed lookups
 * below to read a number whatever its width). Arrays keep their element type and count: numbers
 * and bools stay in the file (raw: `n` little-endian elements, unaligned;
 * read them with sv_gguf_array_u64/i64/f64), strings get an index (strs),
 * arrays of arrays a nested value per element (items). */
typedef struct sv_gguf_value {
    sv_gguf_type type;
    sv_gguf_type elem;           /* arrays: the element type */
    uint64_t n;                  /* arrays: the element count */
    union {
        uint64_t u;
        int64_t i;
        double f;
        bool b;
        sv_gguf_str_t str;
        const uint8_t *raw;                 /* arrays of numbers or bools */
        const sv_gguf_str_t *strs;          /* arrays of strings */
        const struct sv_gguf_value *items;  /* arrays of arrays */
    } v;
} sv_gguf_value_t;

typedef struct sv_gguf_kv {
    sv_gguf_str_t key;
    sv_gguf_value_t value;
    uint64_t offset;             /* of the key in the file, for messages */
} sv_gguf_kv_t;

/* One tensor. ne[] is in ggml's order (ne[0] is the contiguous, fastest
 * varying dimension: a row); dimensions past n_dims are 1. n_bytes is
 * ne[0] / block_elems * block_bytes * ne[1] * ne[2] * ne[3]; ne[0] is a
 * multiple of the type's block. data points at the tensor's bytes in the
 * mapping (borrowed; only as aligned as general.alignment and the mapping
 * make it). */
typedef struct sv_gguf_tensor {
    const char *name;            /* NUL-terminated copy (owned by the sv_gguf_t) */
    uint32_t n_dims;
    uint64_t ne[SV_GGUF_MAX_DIMS];
    sv_ggml_type type;
    uint64_t offset;             /* from the start of the data section */
    uint64_t n_elements;
    uint64_t n_bytes;
    const void *data;
} sv_gguf_tensor_t;

/* Maps and parses the file at path. On success *out is freed with
 * sv_gguf_destroy (which unmaps the file). */
sv_status sv_gguf_open(const char *path, sv_gguf_t **out, sv_error_t *err);
/* Parses size bytes at data, which are borrowed and must outlive *out. */
sv_status sv_gguf_open_memory(const void *data, size_t size, sv_gguf_t **out, sv_error_t *err);
void sv_gguf_destroy(sv_gguf_t *g);

uint32_t sv_gguf_version(const sv_gguf_t *g);
uint32_t sv_gguf_alignment(const sv_gguf_t *g);
/* Byte offset of the data section in the file. */
uint64_t sv_gguf_data_offset(const sv_gguf_t *g);
/* The file's bytes (borrowed) and size. */
const uint8_t *sv_gguf_bytes(const sv_gguf_t *g, size_t *size);

/* Metadata, in file order. i must be < sv_gguf_n_kv. */
uint64_t sv_gguf_n_kv(const sv_gguf_t *g);
const sv_gguf_kv_t *sv_gguf_kv_at(const sv_gguf_t *g, uint64_t i);
/* The value of key (a C string), or NULL when the file has no such key. */
const sv_gguf_value_t *sv_gguf_find(const sv_gguf_t *g, const char *key);

/* Typed lookups. Each returns SV_OK and sets *out, or SV_ERR_SYNTAX when
 * the key is missing or its value has another type or does not fit (the
 * message names the key); callers with optional keys test sv_gguf_find
 * first.
 * - u32 / i32 / u64: any integer type whose value fits;
 * - f32: float32 or float64;
 * - bool: bool;
 * - str: a string (borrowed, not NUL-terminated);
 * - strs: an array of strings (borrowed index of *n strings);
 * - i32s / f32s: an array of integers that fit in int32 / of floats,
 *   copied into *out, which the caller frees with free(). */
sv_status sv_gguf_get_u32(const sv_gguf_t *g, const char *key, uint32_t *out, sv_error_t *err);
sv_status sv_gguf_get_i32(const sv_gguf_t *g, const char *key, int32_t *out, sv_error_t *err);
sv_status sv_gguf_get_u64(const sv_gguf_t *g, const char *key, uint64_t *out, sv_error_t *err);
sv_status sv_gguf_get_f32(const sv_gguf_t *g, const char *key, float *out, sv_error_t *err);
sv_status sv_gguf_get_bool(const sv_gguf_t *g, const char *key, bool *out, sv_error_t *err);
sv_status sv_gguf_get_str(const sv_gguf_t *g, const char *key, sv_gguf_str_t *out, sv_error_t *err);
sv_status sv_gguf_get_strs(const sv_gguf_t *g, const char *key, const sv_gguf_str_t **out,
                           uint64_t *n, sv_error_t *err);
sv_status sv_gguf_get_i32s(const sv_gguf_t *g, const char *key, int32_t **out, uint64_t *n,
                           sv_error_t *err);
sv_status sv_gguf_get_f32s(const sv_gguf_t *g, const char *key, float **out, uint64_t *n,
                           sv_error_t *err);

/* Element i of an array of numbers or bools (v->type == SV_GGUF_ARRAY, i <
 * v->n), widened: u64 for unsigned types and bools, i64 for signed ones,
 * f64 for floats; each also converts from the other kinds (an unsigned
 * value above INT64_MAX reads as INT64_MAX from i64). 0 for an array of
 * strings or arrays. */
uint64_t sv_gguf_array_u64(const sv_gguf_value_t *v, uint64_t i);
int64_t sv_gguf_array_i64(const sv_gguf_value_t *v, uint64_t i);
double sv_gguf_array_f64(const sv_gguf_value_t *v, uint64_t i);

/* A type's name ("uint32", "array", ...), or "?" for an unknown value. */
const char *sv_gguf_type_name(uint32_t type);

/* Tensors, in file order. i must be < sv_gguf_n_tensors. */
uint64_t sv_gguf_n_tensors(const sv_gguf_t *g);
const sv_gguf_tensor_t *sv_gguf_tensor_at(const sv_gguf_t *g, uint64_t i);
/* The tensor named name, or NULL. */
const sv_gguf_tensor_t *sv_gguf_find_tensor(const sv_gguf_t *g, const char *name);

#endif
