/* nfc.h — Unicode Normalization Form C, as Hugging Face tokenizers' "NFC"
 * normalizer applies it (Qwen2/3 use it).
 *
 * The tables are generated from Python's unicodedata (Unicode 14.0 with
 * Python 3.11; see gen_nfc_tables.py). On every scalar value, alone and after
 * a base or a combining mark, they agree with tokenizers 0.23.3's NFC except
 * for U+1DF6 (a combining class that changed between versions); characters
 * assigned after Unicode 14 are treated as unassigned (combining class 0, no
 * decomposition), so text using them may normalize differently. */
#ifndef SV_TOKENIZER_NFC_H
#define SV_TOKENIZER_NFC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* True when s (well-formed UTF-8) contains no character that NFC could
 * change, so NFC(s) == s. Cheap: one pass, table look-ups only above
 * U+02FF. */
bool sv_nfc_quick_check(const uint8_t *s, size_t n);

/* Appends NFC(s) to out. s must be well-formed UTF-8 (SV_ERR_ARG otherwise).
 * `scratch` is caller-owned working memory (reused across calls; free with
 * sv_bytes_free). */
sv_status sv_nfc_append(const uint8_t *s, size_t n, sv_bytes_t *out, sv_bytes_t *scratch);

/* Canonical combining class of cp (0 for starters and unassigned). */
uint8_t sv_nfc_ccc(uint32_t cp);

#endif
