/* utf8.h — strict UTF-8: encode, decode, validate, one copy for the whole
 * tree (fsm/, the tokenizer, the engine).
 *
 * Strict means the well-formed sequences of Unicode's Table 3-7: no
 * overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
 * Here rather than in fsm/cpset.c or src/tokenizer/ so that neither
 * library depends on the other for it. The lossy decoder that replaces
 * ill-formed bytes with U+FFFD is src/tokenizer/detok.h's sv_utf8_lossy. */
#ifndef SV_UTIL_UTF8_H
#define SV_UTIL_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Encodes the scalar value cp into out (4 bytes of room); returns its
 * length (1..4). cp must be a scalar value (not checked). */
static inline int sv_utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes one scalar value at s[0..n); returns its length (1..4) and sets
 * *cp, or returns 0 (and leaves *cp alone) for an ill-formed, overlong,
 * surrogate or truncated sequence, or n == 0. */
static inline int sv_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    int len;
    uint32_t c, min;
    if ((b & 0xE0) == 0xC0) len = 2, c = b & 0x1F, min = 0x80;
    else if ((b & 0xF0) == 0xE0) len = 3, c = b & 0x0F, min = 0x800;
    else if ((b & 0xF8) == 0xF0) len = 4, c = b & 0x07, min = 0x10000;
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

/* The byte offset of the first ill-formed sequence in s[0..n), or n when
 * all of it is well-formed UTF-8. */
static inline size_t sv_utf8_check(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = sv_utf8_decode(s + i, n - i, &cp);
        if (!k) return i;
        i += (size_t)k;
    }
    return n;
}

/* Whether s[0..n) is well-formed UTF-8. */
static inline bool sv_utf8_valid(const uint8_t *s, size_t n) { return sv_utf8_check(s, n) == n; }

/* A character's first byte b, by Table 3-7: how many continuation bytes
 * follow it (*ncont, 0 for ASCII) and the range [*lo, *hi] the first of
 * them must lie in (narrower than 80..BF after E0, ED, F0 and F4, which is
 * what excludes overlongs, surrogates and values past U+10FFFF). False for
 * a byte no character starts with: 80..C1 and F5..FF. For scanners that
 * must tell a cut-off character from an ill-formed one. */
static inline bool sv_utf8_lead(uint8_t b, uint32_t *ncont, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80, *hi = 0xBF;
    if (b < 0x80) *ncont = 0;
    else if (b >= 0xC2 && b <= 0xDF) *ncont = 1;
    else if (b >= 0xE0 && b <= 0xEF) {
        *ncont = 2;
        if (b == 0xE0) *lo = 0xA0;
        if (b == 0xED) *hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        *ncont = 3;
        if (b == 0xF0) *lo = 0x90;
        if (b == 0xF4) *hi = 0x8F;
    } else return false;
    return true;
}

#endif
