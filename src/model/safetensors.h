/* safetensors.h — reading safetensors files (Hugging Face's weight format).
 *
 * A safetensors file is
 *
 *   u64 N (little-endian), N bytes of JSON header, the data buffer
 *
 * where the header is one JSON object mapping each tensor name to
 *
 *   {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
 *
 * (begin and end relative to the start of the data buffer, end exclusive;
 * the shape row-major, d0 slowest) plus an optional "__metadata__" object
 * whose values are strings.
 *
 * The file is mapped read-only (or, for sv_st_open_memory, read from the
 * caller's buffer) and the header parsed and checked once, up front: every
 * tensor's dtype, shape and byte range must agree (elements x dtype size ==
 * end - begin, with no overflow), every range must lie inside the data
 * buffer, and the ranges, sorted, must tile the data buffer exactly: no
 * overlap, no gap, nothing after the last tensor (as the format's
 * specification requires). A malformed file is SV_ERR_SYNTAX naming the
 * problem and the tensor; a header, tensor count or rank past the limits
 * below is SV_ERR_BUDGET. After a successful open nothing read through this
 * API can leave the file.
 *
 * Tensors are kept in the header's order (jansson keeps object keys in
 * insertion order). Names and metadata are copied; tensor data is not
 * touched at open time: each tensor points at its bytes in the mapping,
 * which sv_st_to_f32 converts.
 *
 * An sv_st_t is immutable once open and safe to share between threads. */
#ifndef SV_MODEL_SAFETENSORS_H
#define SV_MODEL_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct sv_st sv_st_t;

/* Limits on what a file may declare. */
#define SV_ST_MAX_HEADER (100u << 20)   /* bytes of JSON header */
#define SV_ST_MAX_TENSORS (1u << 20)
#define SV_ST_MAX_DIMS 8u
#define SV_ST_MAX_NAME 1024u            /* bytes in a tensor name */

/* The dtypes of the format. All are recognised (their sizes are checked);
 * sv_st_to_f32 converts F32, F16 and BF16 and refuses the others with
 * SV_ERR_UNSUPPORTED. */
typedef enum {
    SV_ST_BOOL, SV_ST_U8, SV_ST_I8, SV_ST_F8_E5M2, SV_ST_F8_E4M3,
    SV_ST_I16, SV_ST_U16, SV_ST_F16, SV_ST_BF16,
    SV_ST_I32, SV_ST_U32, SV_ST_F32,
    SV_ST_I64, SV_ST_U64, SV_ST_F64,
    SV_ST_DTYPE_END,
} sv_st_dtype;

/* A dtype's name as spelled in the file ("F32"), or "?" when out of range. */
const char *sv_st_dtype_name(sv_st_dtype d);
/* Bytes per element (1 to 8), or 0 when out of range. */
uint32_t sv_st_dtype_size(sv_st_dtype d);

/* One tensor. shape[] is row-major as in the file (shape[n_dims - 1] is the
 * contiguous dimension); entries past n_dims are 1, and a scalar has n_dims
 * 0 and one element. n_bytes == n_elems * sv_st_dtype_size(dtype). data
 * points at the tensor's bytes in the mapping (borrowed; unaligned in
 * general; never NULL, but not to be dereferenced when n_bytes is 0). */
typedef struct sv_st_tensor {
    const char *name;            /* NUL-terminated copy (owned by the sv_st_t) */
    sv_st_dtype dtype;
    uint32_t n_dims;
    uint64_t shape[SV_ST_MAX_DIMS];
    uint64_t n_elems;
    uint64_t offset;             /* from the start of the data buffer */
    uint64_t n_bytes;
    const void *data;
} sv_st_tensor_t;

/* Maps and parses the file at path. On success *out is freed with
 * sv_st_destroy (which unmaps the file). */
sv_status sv_st_open(const char *path, sv_st_t **out, sv_error_t *err);
/* Parses size bytes at data, which are borrowed and must outlive *out. */
sv_status sv_st_open_memory(const void *data, size_t size, sv_st_t **out, sv_error_t *err);
/* Frees st and everything it returned; NULL is a no-op. */
void sv_st_destroy(sv_st_t *st);

/* Tensors, in header order. i must be < sv_st_n_tensors. */
uint64_t sv_st_n_tensors(const sv_st_t *st);
const sv_st_tensor_t *sv_st_tensor_at(const sv_st_t *st, uint64_t i);
/* The tensor named name, or NULL. */
const sv_st_tensor_t *sv_st_find(const sv_st_t *st, const char *name);

/* The "__metadata__" entries, in header order (strings owned by st). i must
 * be < sv_st_n_metadata. sv_st_metadata returns key's value or NULL. */
uint64_t sv_st_n_metadata(const sv_st_t *st);
void sv_st_metadata_at(const sv_st_t *st, uint64_t i, const char **key, const char **value);
const char *sv_st_metadata(const sv_st_t *st, const char *key);

/* The byte offset of the data buffer in the file (8 + N). */
uint64_t sv_st_data_offset(const sv_st_t *st);

/* Converts t's n_elems elements into dst (n_elems floats, caller-owned):
 * exactly for F32, F16 and BF16; any other dtype is SV_ERR_UNSUPPORTED
 * naming the dtype and the tensor. */
sv_status sv_st_to_f32(const sv_st_tensor_t *t, float *dst, sv_error_t *err);

#endif
