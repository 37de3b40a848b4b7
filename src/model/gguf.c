/* gguf.c — the GGUF parser (see gguf.h for the format).
 *
 * The whole header (metadata and tensor table) is parsed at open time by a
 * cursor that checks, before every read, that the bytes are there: a read
 * past the end is an error with the offset where the missing field starts.
 * Counts are checked against the bytes left before anything is allocated
 * for them (a metadata pair takes at least 13 bytes, a string 8, a tensor
 * record 24), so a file cannot make the parser allocate much more than its
 * own size; the fixed limits of gguf.h come on top.
 *
 * Memory: one arena holds everything the parse builds (the pair and tensor
 * arrays, string indexes of string arrays, nested array values, tensor
 * names); two open-addressing hash tables index keys and tensor names. */
#include "gguf.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/arena.h"
#include "util/hash.h"

struct sv_gguf {
    const uint8_t *base;
    size_t size;
    void *map;                   /* non-NULL when the file is mapped here */
    uint32_t version, alignment;
    uint64_t data_offset;
    sv_gguf_kv_t *kvs;           /* (n_kv) */
    uint64_t n_kv;
    sv_gguf_tensor_t *tensors;   /* (n_tensors) */
    uint64_t n_tensors;
    uint32_t *kv_hash, kv_mask;  /* index + 1; 0 = empty */
    uint32_t *t_hash, t_mask;
    sv_arena_t *arena;
};

/* ---- types ------------------------------------------------------------------ */

static const struct {
    const char *name;
    uint8_t size;                /* bytes of a scalar; 0 for string and array */
} VALUE_TYPES[] = {
    {"uint8", 1}, {"int8", 1}, {"uint16", 2}, {"int16", 2}, {"uint32", 4}, {"int32", 4},
    {"float32", 4}, {"bool", 1}, {"string", 0}, {"array", 0}, {"uint64", 8}, {"int64", 8},
    {"float64", 8},
};
#define N_VALUE_TYPES (sizeof VALUE_TYPES / sizeof VALUE_TYPES[0])

const char *sv_gguf_type_name(uint32_t type) {
    return type < N_VALUE_TYPES ? VALUE_TYPES[type].name : "?";
}

static bool is_unsigned(uint32_t t) {
    return t == SV_GGUF_UINT8 || t == SV_GGUF_UINT16 || t == SV_GGUF_UINT32 || t == SV_GGUF_UINT64;
}
static bool is_signed(uint32_t t) {
    return t == SV_GGUF_INT8 || t == SV_GGUF_INT16 || t == SV_GGUF_INT32 || t == SV_GGUF_INT64;
}
static bool is_float(uint32_t t) { return t == SV_GGUF_FLOAT32 || t == SV_GGUF_FLOAT64; }

/* ---- the cursor ----------------------------------------------------------- */

typedef struct {
    const uint8_t *base;
    size_t size, pos;
    sv_error_t *err;
    sv_arena_t *arena;
} cursor_t;

static uint64_t left(const cursor_t *c) { return c->size - c->pos; }

static sv_status truncated(cursor_t *c, const char *what, uint64_t need) {
    return sv_error_set(c->err, SV_ERR_SYNTAX, (long)c->pos,
                        "gguf: truncated at byte %zu: %s needs %llu bytes, %llu are left", c->pos,
                        what, (unsigned long long)need, (unsigned long long)left(c));
}

static sv_status nomem(cursor_t *c) {
    return sv_error_set(c->err, SV_ERR_NOMEM, (long)c->pos, "gguf: out of memory");
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static sv_status rd(cursor_t *c, int n, const char *what, uint64_t *out) {
    *out = 0;
    if (left(c) < (uint64_t)n)
        return truncated(c, what, (uint64_t)n);
    *out = le(c->base + c->pos, n);
    c->pos += (size_t)n;
    return SV_OK;
}

static sv_status rd_u32(cursor_t *c, const char *what, uint32_t *out) {
    uint64_t v;
    sv_status st = rd(c, 4, what, &v);
    *out = (uint32_t)v;
    return st;
}

/* A string of at most max bytes. */
static sv_status rd_str(cursor_t *c, const char *what, uint64_t max, sv_gguf_str_t *out) {
    size_t at = c->pos;
    uint64_t n;
    sv_status st = rd(c, 8, what, &n);
    if (st)
        return st;
    if (n > max)
        return sv_error_set(c->err, SV_ERR_BUDGET, (long)at,
                            "gguf: %s at byte %zu is %llu bytes long, over the limit of %llu", what,
                            at, (unsigned long long)n, (unsigned long long)max);
    if (n > left(c))
        return truncated(c, what, n);
    out->p = (const char *)c->base + c->pos;
    out->n = n;
    c->pos += (size_t)n;
    return SV_OK;
}

/* Checks that count items of at least `each` bytes can fit in what is left. */
static sv_status fits(cursor_t *c, size_t at, uint64_t count, uint64_t each, const char *what) {
    if (count > left(c) / each)
        return sv_error_set(c->err, SV_ERR_SYNTAX, (long)at,
                            "gguf: %s at byte %zu declares %llu elements, but only %llu bytes are "
                            "left (at least %llu each)", what, at, (unsigned long long)count,
                            (unsigned long long)left(c), (unsigned long long)each);
    return SV_OK;
}

/* ---- values ------------------------------------------------------------------- */

static sv_status rd_value(cursor_t *c, uint32_t type, sv_gguf_value_t *out, int depth);

static sv_status rd_array(cursor_t *c, sv_gguf_value_t *out, int depth) {
    size_t at = c->pos;
    uint32_t elem;
    uint64_t n;
    sv_status st;
    if ((st = rd_u32(c, "an array's element type", &elem)) || (st = rd(c, 8, "an array's count", &n)))
        return st;
    if (elem >= N_VALUE_TYPES)
        return sv_error_set(c->err, SV_ERR_SYNTAX, (long)at,
                            "gguf: array at byte %zu has unknown element type %u", at, elem);
    out->elem = (sv_gguf_type)elem;
    out->n = n;
    if (elem == SV_GGUF_ARRAY) {
        if (depth >= SV_GGUF_MAX_DEPTH)
            return sv_error_set(c->err, SV_ERR_BUDGET, (long)at,
                                "gguf: arrays nested deeper than %d at byte %zu", SV_GGUF_MAX_DEPTH, at);
        if ((st = fits(c, at, n, 12, "array of arrays")))
            return st;
        sv_gguf_value_t *items = n ? sv_arena_alloc(c->arena, n * sizeof *items) : NULL;
        if (n && !items)
            return nomem(c);
        for (uint64_t i = 0; i < n; i++)
            if ((st = rd_value(c, SV_GGUF_ARRAY, &items[i], depth + 1)))
                return st;
        out->v.items = items;
    } else if (elem == SV_GGUF_STRING) {
        if ((st = fits(c, at, n, 8, "array of strings")))
            return st;
        sv_gguf_str_t *strs = n ? sv_arena_alloc(c->arena, n * sizeof *strs) : NULL;
        if (n && !strs)
            return nomem(c);
        for (uint64_t i = 0; i < n; i++)
            if ((st = rd_str(c, "a string in an array", SV_GGUF_MAX_STRING, &strs[i])))
                return st;
        out->v.strs = strs;
    } else {
        uint64_t each = VALUE_TYPES[elem].size;
        if ((st = fits(c, at, n, each, "array")))
            return st;
        out->v.raw = c->base + c->pos;
        if (elem == SV_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (c->base[c->pos + i] > 1)
                    return sv_error_set(c->err, SV_ERR_SYNTAX, (long)(c->pos + i),
                                        "gguf: bool at byte %llu is %u, not 0 or 1",
                                        (unsigned long long)(c->pos + i), c->base[c->pos + i]);
        c->pos += (size_t)(n * each);
    }
    return SV_OK;
}

static sv_status rd_value(cursor_t *c, uint32_t type, sv_gguf_value_t *out, int depth) {
    size_t at = c->pos;
    out->type = (sv_gguf_type)type;
    if (type == SV_GGUF_STRING)
        return rd_str(c, "a string value", SV_GGUF_MAX_STRING, &out->v.str);
    if (type == SV_GGUF_ARRAY)
        return rd_array(c, out, depth);
    uint64_t raw;
    int n = VALUE_TYPES[type].size;
    sv_status st = rd(c, n, "a value", &raw);
    if (st)
        return st;
    switch (type) {
    case SV_GGUF_INT8: out->v.i = (int8_t)raw; break;
    case SV_GGUF_INT16: out->v.i = (int16_t)raw; break;
    case SV_GGUF_INT32: out->v.i = (int32_t)raw; break;
    case SV_GGUF_INT64: out->v.i = (int64_t)raw; break;
    case SV_GGUF_FLOAT32: {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, 4);
        out->v.f = f;
        break;
    }
    case SV_GGUF_FLOAT64: memcpy(&out->v.f, &raw, 8); break;
    case SV_GGUF_BOOL:
        if (raw > 1)
            return sv_error_set(c->err, SV_ERR_SYNTAX, (long)at,
                                "gguf: bool at byte %zu is %u, not 0 or 1", at, (unsigned)raw);
        out->v.b = raw == 1;
        break;
    default: out->v.u = raw; break;
    }
    return SV_OK;
}

static uint64_t elem_raw(const sv_gguf_value_t *v, uint64_t i) {
    int n = VALUE_TYPES[v->elem].size;
    return le(v->v.raw + i * (uint64_t)n, n);
}

uint64_t sv_gguf_array_u64(const sv_gguf_value_t *v, uint64_t i) {
    if (v->type != SV_GGUF_ARRAY || i >= v->n || v->elem == SV_GGUF_STRING || v->elem == SV_GGUF_ARRAY)
        return 0;
    if (is_signed(v->elem)) {
        int64_t s = sv_gguf_array_i64(v, i);
        return s < 0 ? 0 : (uint64_t)s;
    }
    if (is_float(v->elem)) {
        double f = sv_gguf_array_f64(v, i);
        return f <= 0 || f != f ? 0 : f >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)f;
    }
    return elem_raw(v, i);
}

int64_t sv_gguf_array_i64(const sv_gguf_value_t *v, uint64_t i) {
    if (v->type != SV_GGUF_ARRAY || i >= v->n || v->elem == SV_GGUF_STRING || v->elem == SV_GGUF_ARRAY)
        return 0;
    uint64_t r = elem_raw(v, i);
    switch (v->elem) {
    case SV_GGUF_INT8: return (int8_t)r;
    case SV_GGUF_INT16: return (int16_t)r;
    case SV_GGUF_INT32: return (int32_t)r;
    case SV_GGUF_INT64: return (int64_t)r;
    case SV_GGUF_FLOAT32:
    case SV_GGUF_FLOAT64: {
        double f = sv_gguf_array_f64(v, i);
        if (f != f)
            return 0;
        return f >= 9223372036854775807.0 ? INT64_MAX : f <= -9223372036854775808.0 ? INT64_MIN : (int64_t)f;
    }
    default: return r > INT64_MAX ? INT64_MAX : (int64_t)r;
    }
}

double sv_gguf_array_f64(const sv_gguf_value_t *v, uint64_t i) {
    if (v->type != SV_GGUF_ARRAY || i >= v->n || v->elem == SV_GGUF_STRING || v->elem == SV_GGUF_ARRAY)
        return 0;
    uint64_t r = elem_raw(v, i);
    if (v->elem == SV_GGUF_FLOAT32) {
        uint32_t bits = (uint32_t)r;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    if (v->elem == SV_GGUF_FLOAT64) {
        double d;
        memcpy(&d, &r, 8);
        return d;
    }
    if (is_signed(v->elem))
        return (double)sv_gguf_array_i64(v, i);
    return (double)r;
}

/* ---- hash tables ---------------------------------------------------------------- */

static uint32_t *table_new(sv_arena_t *a, uint64_t n, uint32_t *mask) {
    uint64_t size = 16;
    while (size < 2 * n)
        size *= 2;
    *mask = (uint32_t)(size - 1);
    return sv_arena_alloc(a, size * sizeof(uint32_t));
}

static const sv_gguf_kv_t *kv_lookup(const sv_gguf_t *g, const char *s, size_t n) {
    for (uint32_t i = (uint32_t)sv_hash_bytes(s, n) & g->kv_mask;; i = (i + 1) & g->kv_mask) {
        uint32_t k = g->kv_hash[i];
        if (!k)
            return NULL;
        const sv_gguf_kv_t *kv = &g->kvs[k - 1];
        if (kv->key.n == n && memcmp(kv->key.p, s, n) == 0)
            return kv;
    }
}

static const sv_gguf_tensor_t *tensor_lookup(const sv_gguf_t *g, const char *s, size_t n) {
    for (uint32_t i = (uint32_t)sv_hash_bytes(s, n) & g->t_mask;; i = (i + 1) & g->t_mask) {
        uint32_t k = g->t_hash[i];
        if (!k)
            return NULL;
        const sv_gguf_tensor_t *t = &g->tensors[k - 1];
        if (strlen(t->name) == n && memcmp(t->name, s, n) == 0)
            return t;
    }
}

/* ---- the header ------------------------------------------------------------------ */

static sv_status parse_kvs(sv_gguf_t *g, cursor_t *c, uint64_t n_kv) {
    sv_status st;
    g->kvs = n_kv ? sv_arena_alloc(c->arena, n_kv * sizeof *g->kvs) : NULL;
    g->kv_hash = table_new(c->arena, n_kv, &g->kv_mask);
    if ((n_kv && !g->kvs) || !g->kv_hash)
        return nomem(c);
    for (uint64_t i = 0; i < n_kv; i++) {
        sv_gguf_kv_t *kv = &g->kvs[i];
        kv->offset = c->pos;
        uint32_t type;
        if ((st = rd_str(c, "a metadata key", SV_GGUF_MAX_KEY, &kv->key)))
            return st;
        size_t type_at = c->pos;
        if ((st = rd_u32(c, "a metadata value type", &type)))
            return st;
        if (type >= N_VALUE_TYPES)
            return sv_error_set(c->err, SV_ERR_SYNTAX, (long)type_at,
                                "gguf: metadata \"%.*s\" at byte %llu has unknown value type %u",
                                (int)(kv->key.n > 80 ? 80 : kv->key.n), kv->key.p,
                                (unsigned long long)kv->offset, type);
        if (kv_lookup(g, kv->key.p, (size_t)kv->key.n))
            return sv_error_set(c->err, SV_ERR_SYNTAX, (long)kv->offset,
                                "gguf: metadata key \"%.*s\" at byte %llu appears twice",
                                (int)(kv->key.n > 80 ? 80 : kv->key.n), kv->key.p,
                                (unsigned long long)kv->offset);
        if ((st = rd_value(c, type, &kv->value, 0)))
            return st;
        uint32_t h = (uint32_t)sv_hash_bytes(kv->key.p, (size_t)kv->key.n) & g->kv_mask;
        while (g->kv_hash[h])
            h = (h + 1) & g->kv_mask;
        g->kv_hash[h] = (uint32_t)i + 1;
        g->n_kv = i + 1;
    }
    return SV_OK;
}

static sv_status parse_alignment(sv_gguf_t *g, cursor_t *c) {
    g->alignment = SV_GGUF_DEFAULT_ALIGNMENT;
    const sv_gguf_kv_t *kv = kv_lookup(g, "general.alignment", 17);
    if (!kv)
        return SV_OK;
    uint64_t a = kv->value.v.u;
    if (kv->value.type != SV_GGUF_UINT32)
        return sv_error_set(c->err, SV_ERR_SYNTAX, (long)kv->offset,
                            "gguf: general.alignment at byte %llu must be a uint32 power of two, "
                            "not a %s", (unsigned long long)kv->offset, sv_gguf_type_name(kv->value.type));
    if (a == 0 || (a & (a - 1)) || a > (1u << 30))
        return sv_error_set(c->err, SV_ERR_SYNTAX, (long)kv->offset,
                            "gguf: general.alignment at byte %llu must be a uint32 power of two "
                            "up to 2^30, not %llu", (unsigned long long)kv->offset, (unsigned long long)a);
    g->alignment = (uint32_t)a;
    return SV_OK;
}

typedef struct { uint64_t off, end; uint64_t index; } span_t;

static int span_cmp(const void *a, const void *b) {
    const span_t *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off ? 1 : (x->index > y->index) - (x->index < y->index);
}

static sv_status parse_tensors(sv_gguf_t *g, cursor_t *c, uint64_t n) {
    sv_status st;
    g->tensors = n ? sv_arena_alloc(c->arena, n * sizeof *g->tensors) : NULL;
    g->t_hash = table_new(c->arena, n, &g->t_mask);
    if ((n && !g->tensors) || !g->t_hash)
        return nomem(c);
    for (uint64_t i = 0; i < n; i++) {
        sv_gguf_tensor_t *t = &g->tensors[i];
        size_t at = c->pos;
        sv_gguf_str_t name;
        if ((st = rd_str(c, "a tensor name", SV_GGUF_MAX_NAME - 1, &name)))
            return st;
        char *copy = sv_arena_alloc(c->arena, (size_t)name.n + 1);
        if (!copy)
            return nomem(c);
        memcpy(copy, name.p, (size_t)name.n);
        if (memchr(copy, 0, (size_t)name.n))
            return sv_error_set(c->err, SV_ERR_SYNTAX, (long)at,
                                "gguf: tensor %llu at byte %zu has a NUL byte in its name",
                                (unsigned long long)i, at);
        t->name = copy;
        if (tensor_lookup(g, copy, (size_t)name.n))
            return sv_error_set(c->err, SV_ERR_SYNTAX, (long)at,
                                "gguf: tensor name \"%s\" at byte %zu appears twice", copy, at);
        size_t dims_at = c->pos;
        if ((st = rd_u32(c, "a tensor's dimension count", &t->n_dims)))
            return st;
        if (t->n_dims > SV_GGUF_MAX_DIMS)
            return sv_error_set(c->err, SV_ERR_SYNTAX, (long)dims_at,
                                "gguf: tensor \"%s\" at byte %zu has %u dimensions (at most %u)",
                                copy, at, t->n_dims, SV_GGUF_MAX_DIMS);
        uint64_t elems = 1;
        bool overflow = false;
        for (uint32_t d = 0; d < SV_GGUF_MAX_DIMS; d++) {
            t->ne[d] = 1;
            if (d < t->n_dims && (st = rd(c, 8, "a tensor dimension", &t->ne[d])))
                return st;
            if (t->ne[d] > INT64_MAX || __builtin_mul_overflow(elems, t->ne[d], &elems) ||
                elems > INT64_MAX)
                overflow = true;
        }
        if (overflow)
            return sv_error_set(c->err, SV_ERR_SYNTAX, (long)dims_at,
                                "gguf: tensor \"%s\" at byte %zu: its dimensions %llu x %llu x %llu x "
                                "%llu overflow 63 bits", copy, at, (unsigned long long)t->ne[0],
                                (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                                (unsigned long long)t->ne[3]);
        t->n_elements = elems;
        uint32_t type;
        size_t type_at = c->pos;
        if ((st = rd_u32(c, "a tensor type", &type)) || (st = rd(c, 8, "a tensor offset", &t->offset)))
            return st;
        uint32_t be, bb;
        const char *tn;
        if (!sv_ggml_type_info(type, &tn, &be, &bb))
            return sv_error_set(c->err, SV_ERR_UNSUPPORTED, (long)type_at,
                                "gguf: tensor \"%s\" at byte %zu has unknown ggml type %u", copy, at, type);
        t->type = (sv_ggml_type)type;
        if (t->ne[0] % be)
            return sv_error_set(c->err, SV_ERR_SYNTAX, (long)dims_at,
                                "gguf: tensor \"%s\" at byte %zu: a row of %llu elements is not a "
                                "whole number of %s blocks (%u elements)", copy, at,
                                (unsigned long long)t->ne[0], tn, be);
        uint64_t bytes = t->ne[0] / be;
        if (__builtin_mul_overflow(bytes, (uint64_t)bb, &bytes) ||
            __builtin_mul_overflow(bytes, t->ne[1], &bytes) ||
            __builtin_mul_overflow(bytes, t->ne[2], &bytes) ||
            __builtin_mul_overflow(bytes, t->ne[3], &bytes))
            return sv_error_set(c->err, SV_ERR_SYNTAX, (long)dims_at,
                                "gguf: tensor \"%s\" at byte %zu: its size in bytes overflows 64 bits",
                                copy, at);
        t->n_bytes = bytes;
        uint32_t h = (uint32_t)sv_hash_bytes(copy, (size_t)name.n) & g->t_mask;
        while (g->t_hash[h])
            h = (h + 1) & g->t_mask;
        g->t_hash[h] = (uint32_t)i + 1;
        g->n_tensors = i + 1;
    }
    return SV_OK;
}

/* Places the data section and checks every tensor's bytes: aligned, inside
 * the file, and not overlapping another tensor's. */
static sv_status place_data(sv_gguf_t *g, cursor_t *c) {
    uint64_t a = g->alignment;
    uint64_t start = ((uint64_t)c->pos + a - 1) / a * a;
    g->data_offset = start;
    uint64_t room = start <= c->size ? c->size - start : 0;
    span_t *spans = g->n_tensors ? malloc(g->n_tensors * sizeof *spans) : NULL;
    if (g->n_tensors && !spans)
        return nomem(c);
    sv_status st = SV_OK;
    for (uint64_t i = 0; i < g->n_tensors && !st; i++) {
        sv_gguf_tensor_t *t = &g->tensors[i];
        if (t->offset % a)
            st = sv_error_set(c->err, SV_ERR_SYNTAX, -1,
                              "gguf: tensor \"%s\" has offset %llu, not a multiple of the alignment %u",
                              t->name, (unsigned long long)t->offset, g->alignment);
        else if (start > c->size || t->offset > room || t->n_bytes > room - t->offset)
            st = sv_error_set(c->err, SV_ERR_SYNTAX, -1,
                              "gguf: tensor \"%s\" (%llu bytes at data offset %llu) ends past the "
                              "end of the file (the data section at byte %llu holds %llu bytes)",
                              t->name, (unsigned long long)t->n_bytes, (unsigned long long)t->offset,
                              (unsigned long long)start, (unsigned long long)room);
        else
            t->data = c->base + start + t->offset;
        if (!st)
            spans[i] = (span_t){t->offset, t->offset + t->n_bytes, i};
    }
    if (!st && g->n_tensors > 1) {
        qsort(spans, (size_t)g->n_tensors, sizeof *spans, span_cmp);
        for (uint64_t i = 1; i < g->n_tensors && !st; i++)
            if (spans[i].off < spans[i - 1].end)
                st = sv_error_set(c->err, SV_ERR_SYNTAX, -1,
                                  "gguf: tensors \"%s\" and \"%s\" overlap (data offsets %llu and %llu)",
                                  g->tensors[spans[i - 1].index].name, g->tensors[spans[i].index].name,
                                  (unsigned long long)spans[i - 1].off, (unsigned long long)spans[i].off);
    }
    free(spans);
    return st;
}

static sv_status parse(sv_gguf_t *g, sv_error_t *err) {
    cursor_t c = {g->base, g->size, 0, err, g->arena};
    sv_status st;
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0)
        return sv_error_set(err, SV_ERR_SYNTAX, 0, "gguf: not a GGUF file (no \"GGUF\" magic at byte 0)");
    c.pos = 4;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    if ((st = rd_u32(&c, "the version", &version)))
        return st;
    if (version == 0x02000000u || version == 0x03000000u)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, 4, "gguf: a big-endian file (version %u "
                            "byte-swapped) is not supported", version >> 24);
    if (version == 1)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, 4, "gguf: version 1 files are not supported "
                            "(convert them with a current llama.cpp)");
    if (version != 2 && version != 3)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, 4, "gguf: unknown version %u (2 and 3 are read)",
                            version);
    g->version = version;
    if ((st = rd(&c, 8, "the tensor count", &n_tensors)) || (st = rd(&c, 8, "the metadata count", &n_kv)))
        return st;
    if (n_kv > SV_GGUF_MAX_KV)
        return sv_error_set(err, SV_ERR_BUDGET, 16, "gguf: %llu metadata pairs, over the limit of %u",
                            (unsigned long long)n_kv, SV_GGUF_MAX_KV);
    if (n_tensors > SV_GGUF_MAX_TENSORS)
        return sv_error_set(err, SV_ERR_BUDGET, 8, "gguf: %llu tensors, over the limit of %u",
                            (unsigned long long)n_tensors, SV_GGUF_MAX_TENSORS);
    if ((st = fits(&c, 16, n_kv, 13, "the metadata count")) ||
        (st = fits(&c, 8, n_tensors, 24, "the tensor count")))
        return st;
    if ((st = parse_kvs(g, &c, n_kv)) || (st = parse_alignment(g, &c)))
        return st;
    if ((st = fits(&c, 8, n_tensors, 24, "the tensor count")) || (st = parse_tensors(g, &c, n_tensors)))
        return st;
    return place_data(g, &c);
}

/* ---- open / destroy ------------------------------------------------------------ */

static sv_status open_common(sv_gguf_t *g, sv_gguf_t **out, sv_error_t *err) {
    g->arena = sv_arena_create(64 * 1024);
    if (!g->arena) {
        sv_gguf_destroy(g);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "gguf: out of memory");
    }
    sv_status st = parse(g, err);
    if (st) {
        sv_gguf_destroy(g);
        return st;
    }
    *out = g;
    return SV_OK;
}

sv_status sv_gguf_open_memory(const void *data, size_t size, sv_gguf_t **out, sv_error_t *err) {
    if (!out || (!data && size))
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_gguf_open_memory: bad arguments");
    *out = NULL;
    sv_gguf_t *g = calloc(1, sizeof *g);
    if (!g)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "gguf: out of memory");
    g->base = data ? data : (const uint8_t *)"";
    g->size = size;
    return open_common(g, out, err);
}

sv_status sv_gguf_open(const char *path, sv_gguf_t **out, sv_error_t *err) {
    if (!out || !path)
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_gguf_open: bad arguments");
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return sv_error_set(err, SV_ERR_IO, -1, "%s: cannot open", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return sv_error_set(err, SV_ERR_IO, -1, "%s: not a regular file", path);
    }
    if (sb.st_size < 4) {
        close(fd);
        return sv_error_set(err, SV_ERR_SYNTAX, 0, "%s: not a GGUF file (%lld bytes)", path,
                            (long long)sb.st_size);
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return sv_error_set(err, SV_ERR_IO, -1, "%s: cannot map the file", path);
    sv_gguf_t *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(map, (size_t)sb.st_size);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "gguf: out of memory");
    }
    g->map = map;
    g->base = map;
    g->size = (size_t)sb.st_size;
    sv_status st = open_common(g, out, err);
    if (st && err) {
        /* Name the file in the message. */
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%.200s: %.300s", path, err->message);
        memcpy(err->message, msg, sizeof msg);
    }
    return st;
}

void sv_gguf_destroy(sv_gguf_t *g) {
    if (!g)
        return;
    if (g->map)
        munmap(g->map, g->size);
    sv_arena_destroy(g->arena);
    free(g);
}

/* ---- accessors ------------------------------------------------------------------ */

uint32_t sv_gguf_version(const sv_gguf_t *g) { return g->version; }
uint32_t sv_gguf_alignment(const sv_gguf_t *g) { return g->alignment; }
uint64_t sv_gguf_data_offset(const sv_gguf_t *g) { return g->data_offset; }
const uint8_t *sv_gguf_bytes(const sv_gguf_t *g, size_t *size) {
    *size = g->size;
    return g->base;
}
uint64_t sv_gguf_n_kv(const sv_gguf_t *g) { return g->n_kv; }
const sv_gguf_kv_t *sv_gguf_kv_at(const sv_gguf_t *g, uint64_t i) { return i < g->n_kv ? &g->kvs[i] : NULL; }
uint64_t sv_gguf_n_tensors(const sv_gguf_t *g) { return g->n_tensors; }
const sv_gguf_tensor_t *sv_gguf_tensor_at(const sv_gguf_t *g, uint64_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const sv_gguf_value_t *sv_gguf_find(const sv_gguf_t *g, const char *key) {
    const sv_gguf_kv_t *kv = kv_lookup(g, key, strlen(key));
    return kv ? &kv->value : NULL;
}

const sv_gguf_tensor_t *sv_gguf_find_tensor(const sv_gguf_t *g, const char *name) {
    return tensor_lookup(g, name, strlen(name));
}

/* ---- typed lookups ---------------------------------------------------------------- */

static sv_status get(const sv_gguf_t *g, const char *key, const sv_gguf_kv_t **kv, sv_error_t *err) {
    *kv = kv_lookup(g, key, strlen(key));
    if (!*kv)
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "gguf: no metadata key \"%s\"", key);
    return SV_OK;
}

static sv_status wrong(const sv_gguf_kv_t *kv, const char *key, const char *want, sv_error_t *err) {
    const sv_gguf_value_t *v = &kv->value;
    if (v->type == SV_GGUF_ARRAY)
        return sv_error_set(err, SV_ERR_SYNTAX, (long)kv->offset,
                            "gguf: \"%s\" (byte %llu) is an array of %llu %s, not %s", key,
                            (unsigned long long)kv->offset, (unsigned long long)v->n,
                            sv_gguf_type_name(v->elem), want);
    return sv_error_set(err, SV_ERR_SYNTAX, (long)kv->offset, "gguf: \"%s\" (byte %llu) is a %s, not %s",
                        key, (unsigned long long)kv->offset, sv_gguf_type_name(v->type), want);
}

/* An integer value in [lo, hi]. */
static sv_status get_int(const sv_gguf_t *g, const char *key, int64_t lo, uint64_t hi, const char *want,
                         uint64_t *u, int64_t *s, sv_error_t *err) {
    const sv_gguf_kv_t *kv;
    sv_status st = get(g, key, &kv, err);
    if (st)
        return st;
    const sv_gguf_value_t *v = &kv->value;
    if (is_unsigned(v->type) && v->v.u <= hi) {
        *u = v->v.u;
        *s = v->v.u > INT64_MAX ? INT64_MAX : (int64_t)v->v.u;
        return SV_OK;
    }
    if (is_signed(v->type) && v->v.i >= lo && (v->v.i < 0 || (uint64_t)v->v.i <= hi)) {
        *s = v->v.i;
        *u = (uint64_t)v->v.i;
        return SV_OK;
    }
    if (is_unsigned(v->type) || is_signed(v->type))
        return sv_error_set(err, SV_ERR_SYNTAX, (long)kv->offset,
                            "gguf: \"%s\" (byte %llu) does not fit in %s", key,
                            (unsigned long long)kv->offset, want);
    return wrong(kv, key, want, err);
}

sv_status sv_gguf_get_u32(const sv_gguf_t *g, const char *key, uint32_t *out, sv_error_t *err) {
    uint64_t u = 0;
    int64_t s = 0;
    sv_status st = get_int(g, key, 0, UINT32_MAX, "a uint32", &u, &s, err);
    if (!st)
        *out = (uint32_t)u;
    return st;
}

sv_status sv_gguf_get_i32(const sv_gguf_t *g, const char *key, int32_t *out, sv_error_t *err) {
    uint64_t u = 0;
    int64_t s = 0;
    sv_status st = get_int(g, key, INT32_MIN, INT32_MAX, "an int32", &u, &s, err);
    if (!st)
        *out = (int32_t)s;
    return st;
}

sv_status sv_gguf_get_u64(const sv_gguf_t *g, const char *key, uint64_t *out, sv_error_t *err) {
    uint64_t u = 0;
    int64_t s = 0;
    sv_status st = get_int(g, key, 0, UINT64_MAX, "a uint64", &u, &s, err);
    if (!st)
        *out = u;
    return st;
}

sv_status sv_gguf_get_f32(const sv_gguf_t *g, const char *key, float *out, sv_error_t *err) {
    const sv_gguf_kv_t *kv;
    sv_status st = get(g, key, &kv, err);
    if (st)
        return st;
    if (!is_float(kv->value.type))
        return wrong(kv, key, "a float", err);
    *out = (float)kv->value.v.f;
    return SV_OK;
}

sv_status sv_gguf_get_bool(const sv_gguf_t *g, const char *key, bool *out, sv_error_t *err) {
    const sv_gguf_kv_t *kv;
    sv_status st = get(g, key, &kv, err);
    if (st)
        return st;
    if (kv->value.type != SV_GGUF_BOOL)
        return wrong(kv, key, "a bool", err);
    *out = kv->value.v.b;
    return SV_OK;
}

sv_status sv_gguf_get_str(const sv_gguf_t *g, const char *key, sv_gguf_str_t *out, sv_error_t *err) {
    const sv_gguf_kv_t *kv;
    sv_status st = get(g, key, &kv, err);
    if (st)
        return st;
    if (kv->value.type != SV_GGUF_STRING)
        return wrong(kv, key, "a string", err);
    *out = kv->value.v.str;
    return SV_OK;
}

sv_status sv_gguf_get_strs(const sv_gguf_t *g, const char *key, const sv_gguf_str_t **out,
                           uint64_t *n, sv_error_t *err) {
    const sv_gguf_kv_t *kv;
    sv_status st = get(g, key, &kv, err);
    if (st)
        return st;
    if (kv->value.type != SV_GGUF_ARRAY || kv->value.elem != SV_GGUF_STRING)
        return wrong(kv, key, "an array of strings", err);
    *out = kv->value.v.strs;
    *n = kv->value.n;
    return SV_OK;
}

/* Copies a numeric array into a new array of floats or int32s. */
static sv_status get_numbers(const sv_gguf_t *g, const char *key, bool floats, void **out, uint64_t *n,
                             sv_error_t *err) {
    const sv_gguf_kv_t *kv;
    *out = NULL;
    *n = 0;
    sv_status st = get(g, key, &kv, err);
    if (st)
        return st;
    const sv_gguf_value_t *v = &kv->value;
    bool ok = v->type == SV_GGUF_ARRAY &&
              (floats ? is_float(v->elem) : is_signed(v->elem) || is_unsigned(v->elem));
    if (!ok)
        return wrong(kv, key, floats ? "an array of floats" : "an array of integers", err);
    if (v->n > SIZE_MAX / 8)
        return sv_error_set(err, SV_ERR_NOMEM, (long)kv->offset, "gguf: out of memory");
    void *a = malloc(v->n ? (size_t)v->n * 4 : 1);
    if (!a)
        return sv_error_set(err, SV_ERR_NOMEM, (long)kv->offset, "gguf: out of memory");
    for (uint64_t i = 0; i < v->n; i++) {
        if (floats) {
            ((float *)a)[i] = (float)sv_gguf_array_f64(v, i);
            continue;
        }
        int64_t x = sv_gguf_array_i64(v, i);
        bool big = is_unsigned(v->elem) && sv_gguf_array_u64(v, i) > INT32_MAX;
        if (big || x < INT32_MIN || x > INT32_MAX) {
            free(a);
            return sv_error_set(err, SV_ERR_SYNTAX, (long)kv->offset,
                                "gguf: \"%s\" (byte %llu): element %llu does not fit in an int32", key,
                                (unsigned long long)kv->offset, (unsigned long long)i);
        }
        ((int32_t *)a)[i] = (int32_t)x;
    }
    *out = a;
    *n = v->n;
    return SV_OK;
}

sv_status sv_gguf_get_i32s(const sv_gguf_t *g, const char *key, int32_t **out, uint64_t *n,
                           sv_error_t *err) {
    void *a;
    sv_status st = get_numbers(g, key, false, &a, n, err);
    *out = a;
    return st;
}

sv_status sv_gguf_get_f32s(const sv_gguf_t *g, const char *key, float **out, uint64_t *n,
                           sv_error_t *err) {
    void *a;
    sv_status st = get_numbers(g, key, true, &a, n, err);
    *out = a;
    return st;
}
