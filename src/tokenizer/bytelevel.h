/* bytelevel.h — GPT-2's byte-to-unicode alphabet.
 *
 * Byte-level BPE vocabularies (GPT-2, Llama 3, Qwen, SmolLM2) spell every
 * byte as one printable character so that token strings are readable text:
 * bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand for themselves, and the
 * other 68 bytes (controls, space, 0x7F..0xA0, the soft hyphen 0xAD) map in
 * ascending order to U+0100..U+0143. A token's bytes are its characters
 * mapped back. */
#ifndef SV_TOKENIZER_BYTELEVEL_H
#define SV_TOKENIZER_BYTELEVEL_H

#include <stdint.h>

/* The character that spells byte b. */
static inline uint32_t sv_bytelevel_char(uint8_t b) {
    if (b <= 0x20) return 0x100u + b;
    if (b >= 0x7F && b <= 0xA0) return (uint32_t)b + 0xA2u;
    if (b == 0xAD) return 0x143u;
    return b;
}

/* The byte that character cp spells, or -1 when cp is not in the alphabet. */
static inline int sv_bytelevel_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(cp - 0xA2);
    if (cp == 0x143) return 0xAD;
    return -1;
}

#endif
