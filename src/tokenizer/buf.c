/* buf.c — growable arrays (see buf.h). */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

static sv_status grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return SV_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return SV_ERR_NOMEM;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q)
        return SV_ERR_NOMEM;
    *p = q;
    *cap = c;
    return SV_OK;
}

sv_status sv_bytes_reserve(sv_bytes_t *b, size_t extra) {
    if (extra > SIZE_MAX - b->n)
        return SV_ERR_NOMEM;
    void *p = b->p;
    sv_status st = grow(&p, &b->cap, b->n + extra, 1);
    b->p = p;
    return st;
}

sv_status sv_bytes_append(sv_bytes_t *b, const void *s, size_t n) {
    sv_status st = sv_bytes_reserve(b, n);
    if (st)
        return st;
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    return SV_OK;
}

void sv_bytes_free(sv_bytes_t *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

sv_status sv_ids_reserve(sv_ids_t *ids, size_t extra) {
    if (extra > SIZE_MAX - ids->n)
        return SV_ERR_NOMEM;
    void *p = ids->v;
    sv_status st = grow(&p, &ids->cap, ids->n + extra, sizeof(int32_t));
    ids->v = p;
    return st;
}

sv_status sv_ids_push(sv_ids_t *ids, int32_t id) {
    if (ids->n == ids->cap) {
        sv_status st = sv_ids_reserve(ids, 1);
        if (st)
            return st;
    }
    ids->v[ids->n++] = id;
    return SV_OK;
}

void sv_ids_free(sv_ids_t *ids) {
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}
