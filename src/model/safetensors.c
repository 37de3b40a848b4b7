/* safetensors.c — the safetensors reader (see safetensors.h for the format).
 *
 * Opening runs in three steps: frame (the u64 header length against the
 * bytes there and the budget), parse (jansson, duplicates refused, and each
 * entry's fields typed and checked against each other), and tile (the byte
 * ranges, sorted, must cover the data buffer exactly). Names and metadata
 * are copied into one block owned by the sv_st_t, so the JSON tree is freed
 * before open returns; lookups by name go through an open-addressing table. */
#include "safetensors.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/backend/quant.h"
#include "util/hash.h"

struct sv_st {
    void *map;                   /* the mapping (sv_st_open), or NULL */
    const uint8_t *base;         /* the file's bytes */
    size_t size;
    uint64_t data_off;           /* 8 + header length */
    uint64_t n_tensors;
    sv_st_tensor_t *tensors;
    uint64_t n_meta;
    const char **meta;           /* n_meta (key, value) pairs */
    char *strings;               /* names, metadata keys and values */
    uint32_t *t_hash, t_mask;    /* tensor index + 1, 0 = empty */
};

static const struct {
    const char *name;
    uint32_t size;
} DTYPES[SV_ST_DTYPE_END] = {
    [SV_ST_BOOL] = {"BOOL", 1},       [SV_ST_U8] = {"U8", 1},
    [SV_ST_I8] = {"I8", 1},           [SV_ST_F8_E5M2] = {"F8_E5M2", 1},
    [SV_ST_F8_E4M3] = {"F8_E4M3", 1}, [SV_ST_I16] = {"I16", 2},
    [SV_ST_U16] = {"U16", 2},         [SV_ST_F16] = {"F16", 2},
    [SV_ST_BF16] = {"BF16", 2},       [SV_ST_I32] = {"I32", 4},
    [SV_ST_U32] = {"U32", 4},         [SV_ST_F32] = {"F32", 4},
    [SV_ST_I64] = {"I64", 8},         [SV_ST_U64] = {"U64", 8},
    [SV_ST_F64] = {"F64", 8},
};

const char *sv_st_dtype_name(sv_st_dtype d) {
    return (unsigned)d < SV_ST_DTYPE_END ? DTYPES[d].name : "?";
}

uint32_t sv_st_dtype_size(sv_st_dtype d) {
    return (unsigned)d < SV_ST_DTYPE_END ? DTYPES[d].size : 0;
}

/* ---- parsing --------------------------------------------------------------- */

static sv_status bad(sv_error_t *err, const char *tensor, const char *fmt, const char *what) {
    return sv_error_set(err, SV_ERR_SYNTAX, -1, "safetensors: tensor \"%.200s\": %s%s", tensor,
                        fmt, what);
}

/* A JSON integer >= 0 (jansson parses integers into int64 and refuses larger
 * ones as a JSON error). */
static bool get_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* Checks one tensor entry and fills t (all but name and data). */
static sv_status parse_tensor(const char *name, const json_t *v, uint64_t data_size,
                              sv_st_tensor_t *t, sv_error_t *err) {
    if (strlen(name) > SV_ST_MAX_NAME)
        return sv_error_set(err, SV_ERR_BUDGET, -1,
                            "safetensors: a tensor name of %zu bytes is past the limit of %u",
                            strlen(name), SV_ST_MAX_NAME);
    if (!json_is_object(v))
        return bad(err, name, "its entry is not an object", "");
    const json_t *dtype = json_object_get(v, "dtype");
    const json_t *shape = json_object_get(v, "shape");
    const json_t *offs = json_object_get(v, "data_offsets");
    if (!dtype || !shape || !offs)
        return bad(err, name, "missing field ",
                   !dtype ? "\"dtype\"" : !shape ? "\"shape\"" : "\"data_offsets\"");
    if (!json_is_string(dtype))
        return bad(err, name, "\"dtype\" is not a string", "");
    const char *dn = json_string_value(dtype);
    t->dtype = SV_ST_DTYPE_END;
    for (int d = 0; d < SV_ST_DTYPE_END; d++)
        if (strcmp(dn, DTYPES[d].name) == 0)
            t->dtype = (sv_st_dtype)d;
    if (t->dtype == SV_ST_DTYPE_END)
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "safetensors: tensor \"%.200s\": unknown dtype \"%.40s\"", name, dn);

    if (!json_is_array(shape))
        return bad(err, name, "\"shape\" is not an array", "");
    size_t nd = json_array_size(shape);
    if (nd > SV_ST_MAX_DIMS)
        return sv_error_set(err, SV_ERR_BUDGET, -1,
                            "safetensors: tensor \"%.200s\" has %zu dimensions, the limit is %u",
                            name, nd, SV_ST_MAX_DIMS);
    t->n_dims = (uint32_t)nd;
    t->n_elems = 1;
    for (uint32_t i = 0; i < SV_ST_MAX_DIMS; i++) {
        t->shape[i] = 1;
        if (i >= nd)
            continue;
        if (!get_u64(json_array_get(shape, i), &t->shape[i]))
            return bad(err, name, "a dimension is not an integer >= 0", "");
        if (__builtin_mul_overflow(t->n_elems, t->shape[i], &t->n_elems))
            return bad(err, name, "its element count overflows 64 bits", "");
    }
    if (__builtin_mul_overflow(t->n_elems, (uint64_t)DTYPES[t->dtype].size, &t->n_bytes))
        return bad(err, name, "its size in bytes overflows 64 bits", "");

    uint64_t begin, end;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !get_u64(json_array_get(offs, 0), &begin) || !get_u64(json_array_get(offs, 1), &end))
        return bad(err, name, "\"data_offsets\" is not [begin, end] with integers >= 0", "");
    if (end < begin)
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "safetensors: tensor \"%.200s\": data_offsets [%llu, %llu] end before "
                            "they begin", name, (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "safetensors: tensor \"%.200s\": data_offsets [%llu, %llu] run past the "
                            "data buffer (%llu bytes)", name, (unsigned long long)begin,
                            (unsigned long long)end, (unsigned long long)data_size);
    if (end - begin != t->n_bytes)
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "safetensors: tensor \"%.200s\": %llu %s elements take %llu bytes but "
                            "data_offsets [%llu, %llu] hold %llu", name,
                            (unsigned long long)t->n_elems, DTYPES[t->dtype].name,
                            (unsigned long long)t->n_bytes, (unsigned long long)begin,
                            (unsigned long long)end, (unsigned long long)(end - begin));
    t->offset = begin;
    return SV_OK;
}

static int by_range(const void *a, const void *b) {
    const sv_st_tensor_t *x = *(const sv_st_tensor_t *const *)a;
    const sv_st_tensor_t *y = *(const sv_st_tensor_t *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->n_bytes != y->n_bytes)
        return x->n_bytes < y->n_bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The ranges, sorted, must tile [0, data_size): each begins where the last
 * ended (empty tensors anywhere in between) and the last ends at the end. */
static sv_status check_tiling(sv_st_t *st, uint64_t data_size, sv_error_t *err) {
    sv_status s = SV_OK;
    if (st->n_tensors == 0) {
        if (data_size)
            return sv_error_set(err, SV_ERR_SYNTAX, (long)st->data_off,
                                "safetensors: no tensors but %llu bytes of data",
                                (unsigned long long)data_size);
        return SV_OK;
    }
    const sv_st_tensor_t **order = malloc(st->n_tensors * sizeof *order);
    if (!order)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "safetensors: out of memory");
    for (uint64_t i = 0; i < st->n_tensors; i++)
        order[i] = &st->tensors[i];
    qsort(order, st->n_tensors, sizeof *order, by_range);
    uint64_t at = 0;
    const char *prev = NULL;
    for (uint64_t i = 0; i < st->n_tensors && !s; i++) {
        const sv_st_tensor_t *t = order[i];
        if (t->offset < at)
            s = sv_error_set(err, SV_ERR_SYNTAX, -1,
                             "safetensors: tensor \"%.200s\" (bytes %llu..%llu) overlaps tensor "
                             "\"%.200s\" (ending at %llu)", t->name, (unsigned long long)t->offset,
                             (unsigned long long)(t->offset + t->n_bytes), prev,
                             (unsigned long long)at);
        else if (t->offset > at)
            s = sv_error_set(err, SV_ERR_SYNTAX, -1,
                             "safetensors: a gap in the data buffer: bytes %llu..%llu before "
                             "tensor \"%.200s\" belong to no tensor", (unsigned long long)at,
                             (unsigned long long)t->offset, t->name);
        at = t->offset + t->n_bytes;
        prev = t->name;
    }
    if (!s && at != data_size)
        s = sv_error_set(err, SV_ERR_SYNTAX, -1,
                         "safetensors: the tensors end at byte %llu of the data buffer, which "
                         "has %llu", (unsigned long long)at, (unsigned long long)data_size);
    free(order);
    return s;
}

static sv_status check_metadata(const json_t *meta, size_t *bytes, sv_error_t *err) {
    if (!json_is_object(meta))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "safetensors: \"__metadata__\" is not an object");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)meta, k, v) {
        if (!json_is_string(v))
            return sv_error_set(err, SV_ERR_SYNTAX, -1,
                                "safetensors: \"__metadata__\" value of \"%.200s\" is not a string",
                                k);
        *bytes += strlen(k) + 1 + json_string_length(v) + 1;
    }
    return SV_OK;
}

static char *copy_str(char **at, const char *s) {
    size_t n = strlen(s) + 1;
    char *r = memcpy(*at, s, n);
    *at += n;
    return r;
}

/* Parses and checks the header; fills st's tensors, metadata and table. */
static sv_status parse_header(sv_st_t *st, const char *json, size_t n, uint64_t data_size,
                              sv_error_t *err) {
    json_error_t jerr;
    json_t *root = json_loadb(json, n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return sv_error_set(err, SV_ERR_SYNTAX, (long)(8 + (jerr.position > 0 ? jerr.position : 0)),
                            "safetensors: the header is not valid JSON: %s (header byte %d)",
                            jerr.text, jerr.position);
    sv_status s = SV_OK;
    if (!json_is_object(root)) {
        s = sv_error_set(err, SV_ERR_SYNTAX, 8, "safetensors: the header is not a JSON object");
        goto done;
    }
    /* Count, budget and size the strings before allocating anything. */
    const json_t *meta = json_object_get(root, "__metadata__");
    size_t n_entries = json_object_size(root), str_bytes = 1;
    uint64_t n_tensors = n_entries - (meta ? 1 : 0);
    if (n_tensors > SV_ST_MAX_TENSORS) {
        s = sv_error_set(err, SV_ERR_BUDGET, 8,
                         "safetensors: %llu tensors, past the limit of %u",
                         (unsigned long long)n_tensors, SV_ST_MAX_TENSORS);
        goto done;
    }
    if (meta && (s = check_metadata(meta, &str_bytes, err)))
        goto done;
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
        str_bytes += strlen(k) + 1;

    uint32_t cap = 1;
    while (cap < 2 * n_tensors)
        cap <<= 1;
    st->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *st->tensors);
    st->strings = malloc(str_bytes);
    st->t_hash = calloc(cap, sizeof *st->t_hash);
    st->t_mask = cap - 1;
    st->n_meta = meta ? json_object_size(meta) : 0;
    st->meta = calloc(2 * st->n_meta + 1, sizeof *st->meta);
    if (!st->tensors || !st->strings || !st->t_hash || !st->meta) {
        s = sv_error_set(err, SV_ERR_NOMEM, -1, "safetensors: out of memory");
        goto done;
    }
    char *at = st->strings;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0)
            continue;
        sv_st_tensor_t *t = &st->tensors[st->n_tensors];
        if ((s = parse_tensor(k, v, data_size, t, err)))
            goto done;
        t->name = copy_str(&at, k);
        t->data = st->base + st->data_off + t->offset;
        uint32_t h = (uint32_t)sv_hash_str(t->name) & st->t_mask;
        while (st->t_hash[h])
            h = (h + 1) & st->t_mask;
        st->t_hash[h] = (uint32_t)st->n_tensors + 1;
        st->n_tensors++;
    }
    if (meta) {
        uint64_t i = 0;
        json_object_foreach((json_t *)meta, k, v) {
            st->meta[2 * i] = copy_str(&at, k);
            st->meta[2 * i + 1] = copy_str(&at, json_string_value(v));
            i++;
        }
    }
    s = check_tiling(st, data_size, err);
done:
    json_decref(root);
    return s;
}

static sv_status open_common(sv_st_t *st, sv_st_t **out, sv_error_t *err) {
    sv_status s;
    if (st->size < 8) {
        s = sv_error_set(err, SV_ERR_SYNTAX, 0,
                         "safetensors: %zu bytes is too short for the header length (8 bytes)",
                         st->size);
        goto fail;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | st->base[i];
    if (n > st->size - 8) {
        s = sv_error_set(err, SV_ERR_SYNTAX, 0,
                         "safetensors: the header length %llu runs past the end of the file "
                         "(%zu bytes)", (unsigned long long)n, st->size);
        goto fail;
    }
    if (n > SV_ST_MAX_HEADER) {
        s = sv_error_set(err, SV_ERR_BUDGET, 0,
                         "safetensors: a header of %llu bytes is past the limit of %u",
                         (unsigned long long)n, SV_ST_MAX_HEADER);
        goto fail;
    }
    st->data_off = 8 + n;
    if ((s = parse_header(st, (const char *)st->base + 8, (size_t)n, st->size - st->data_off, err)))
        goto fail;
    *out = st;
    return SV_OK;
fail:
    sv_st_destroy(st);
    return s;
}

sv_status sv_st_open_memory(const void *data, size_t size, sv_st_t **out, sv_error_t *err) {
    if (!out || (!data && size))
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_st_open_memory: bad arguments");
    *out = NULL;
    sv_st_t *st = calloc(1, sizeof *st);
    if (!st)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "safetensors: out of memory");
    static const uint8_t empty[1];
    st->base = data ? data : empty;
    st->size = size;
    return open_common(st, out, err);
}

sv_status sv_st_open(const char *path, sv_st_t **out, sv_error_t *err) {
    if (!out || !path)
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_st_open: bad arguments");
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return sv_error_set(err, SV_ERR_IO, -1, "%.200s: cannot open", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return sv_error_set(err, SV_ERR_IO, -1, "%.200s: not a regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return sv_error_set(err, SV_ERR_SYNTAX, 0, "%.200s: not a safetensors file (%lld bytes)",
                            path, (long long)sb.st_size);
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return sv_error_set(err, SV_ERR_IO, -1, "%.200s: cannot map the file", path);
    sv_st_t *st = calloc(1, sizeof *st);
    if (!st) {
        munmap(map, (size_t)sb.st_size);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "safetensors: out of memory");
    }
    st->map = map;
    st->base = map;
    st->size = (size_t)sb.st_size;
    sv_status s = open_common(st, out, err);
    if (s && err) {
        /* Name the file in the message. */
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%.200s: %.300s", path, err->message);
        memcpy(err->message, msg, sizeof msg);
    }
    return s;
}

void sv_st_destroy(sv_st_t *st) {
    if (!st)
        return;
    if (st->map)
        munmap(st->map, st->size);
    free(st->tensors);
    free(st->strings);
    free(st->t_hash);
    free(st->meta);
    free(st);
}

/* ---- accessors ------------------------------------------------------------- */

uint64_t sv_st_n_tensors(const sv_st_t *st) { return st->n_tensors; }

const sv_st_tensor_t *sv_st_tensor_at(const sv_st_t *st, uint64_t i) {
    return i < st->n_tensors ? &st->tensors[i] : NULL;
}

const sv_st_tensor_t *sv_st_find(const sv_st_t *st, const char *name) {
    if (!name || st->n_tensors == 0)
        return NULL;
    for (uint32_t h = (uint32_t)sv_hash_str(name) & st->t_mask;; h = (h + 1) & st->t_mask) {
        uint32_t k = st->t_hash[h];
        if (!k)
            return NULL;
        if (strcmp(st->tensors[k - 1].name, name) == 0)
            return &st->tensors[k - 1];
    }
}

uint64_t sv_st_n_metadata(const sv_st_t *st) { return st->n_meta; }

void sv_st_metadata_at(const sv_st_t *st, uint64_t i, const char **key, const char **value) {
    const char *k = NULL, *v = NULL;
    if (i < st->n_meta) {
        k = st->meta[2 * i];
        v = st->meta[2 * i + 1];
    }
    if (key)
        *key = k;
    if (value)
        *value = v;
}

const char *sv_st_metadata(const sv_st_t *st, const char *key) {
    for (uint64_t i = 0; key && i < st->n_meta; i++)
        if (strcmp(st->meta[2 * i], key) == 0)
            return st->meta[2 * i + 1];
    return NULL;
}

uint64_t sv_st_data_offset(const sv_st_t *st) { return st->data_off; }

sv_status sv_st_to_f32(const sv_st_tensor_t *t, float *dst, sv_error_t *err) {
    if (!t)
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_st_to_f32: NULL tensor");
    sv_ggml_type g;
    switch (t->dtype) {
    case SV_ST_F32: g = SV_GGML_F32; break;
    case SV_ST_F16: g = SV_GGML_F16; break;
    case SV_ST_BF16: g = SV_GGML_BF16; break;
    default:
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "safetensors: tensor \"%.200s\" has dtype %s, which does not convert "
                            "to float32", t->name, sv_st_dtype_name(t->dtype));
    }
    return sv_dequantize(g, t->data, (size_t)t->n_bytes, dst, t->n_elems, err);
}
