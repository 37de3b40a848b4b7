/* utf8.h — UTF-8 helpers for the tokenizer.
 *
 * fsm/cpset.h has the same encode/decode; the tokenizer keeps its own copy so
 * that libsievetok does not depend on libsievefsm (the token index in fsm/
 * is the one that consumes vocabularies, so the dependency would otherwise
 * run both ways). */
#ifndef SV_TOKENIZER_UTF8_H
#define SV_TOKENIZER_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Encodes a scalar value; returns its length (1..4). */
static inline int sv_tok_utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) { out[0] = (uint8_t)cp; return 1; }
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

/* Decodes one well-formed scalar value at s[0..n); returns its length and
 * sets *cp, or returns 0 for an ill-formed, overlong, surrogate or truncated
 * sequence. */
static inline int sv_tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    uint8_t b = s[0];
    if (b < 0x80) { *cp = b; return 1; }
    int len;
    uint32_t c, min;
    if ((b & 0xE0) == 0xC0) { len = 2; c = b & 0x1F; min = 0x80; }
    else if ((b & 0xF0) == 0xE0) { len = 3; c = b & 0x0F; min = 0x800; }
    else if ((b & 0xF8) == 0xF0) { len = 4; c = b & 0x07; min = 0x10000; }
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

/* Returns the byte offset of the first ill-formed sequence in s[0..n), or n
 * when s is all well-formed UTF-8. */
static inline size_t sv_tok_utf8_check(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        uint32_t cp;
        int k = sv_tok_utf8_decode(s + i, n - i, &cp);
        if (!k) return i;
        i += (size_t)k;
    }
    return n;
}

#endif
