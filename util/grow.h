/* grow.h — the growable array: make room for `need` elements of `elem`
 * bytes in *p, whose capacity is *cap, doubling from 64. False (and *p
 * unchanged) when out of memory or past 2^31 elements. */
#ifndef SV_UTIL_GROW_H
#define SV_UTIL_GROW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static inline bool sv_grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return true;
    if (need > (1u << 31)) return false;
    uint32_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

#endif
