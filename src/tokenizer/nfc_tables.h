/* nfc_tables.h — the Unicode tables behind nfc.c (generated into
 * nfc_tables.c by gen_nfc_tables.py). Every array is sorted by code point
 * (pairs by first, then second) for binary search. */
#ifndef SV_TOKENIZER_NFC_TABLES_H
#define SV_TOKENIZER_NFC_TABLES_H

#include <stdint.h>

typedef struct { uint32_t lo, hi; } sv_nfc_range_t;
typedef struct { uint32_t lo, hi; uint8_t ccc; } sv_nfc_ccc_t;
typedef struct { uint32_t cp; uint16_t off, len; } sv_nfc_decomp_t;  /* into sv_nfc_decomp_pool */
typedef struct { uint32_t first, second, composite; } sv_nfc_pair_t;

extern const char sv_nfc_unicode_version[];
/* Code points that can make a string differ from its NFC: a decomposition,
 * a non-zero combining class, or combining with the previous character. */
extern const sv_nfc_range_t sv_nfc_unstable[];
extern const unsigned sv_nfc_unstable_n;
extern const sv_nfc_ccc_t sv_nfc_ccc_runs[];          /* canonical combining class runs */
extern const unsigned sv_nfc_ccc_runs_n;
extern const sv_nfc_decomp_t sv_nfc_decomp[];    /* full canonical decompositions */
extern const unsigned sv_nfc_decomp_n;
extern const uint32_t sv_nfc_decomp_pool[];
extern const sv_nfc_pair_t sv_nfc_pairs[];       /* primary composites, Hangul apart */
extern const unsigned sv_nfc_pairs_n;

#endif
