/* cpset.h — sets of Unicode scalar values as sorted, disjoint, non-adjacent
 * ranges, and their translation to UTF-8 byte-range sequences.
 *
 * The universe is the Unicode scalar values: 0..0x10FFFF without the
 * surrogates D800..DFFF, since sieve matches UTF-8 text and UTF-8 cannot
 * encode a surrogate. Every set is kept inside that universe. */
#ifndef SV_FSM_CPSET_H
#define SV_FSM_CPSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "util/utf8.h" /* sv_utf8_encode, sv_utf8_decode */

#define SV_CP_MAX 0x10FFFFu

typedef struct sv_cprange { uint32_t lo, hi; } sv_cprange_t;

typedef struct sv_cpset {
    sv_cprange_t *r;  /* owned; sorted, disjoint, non-adjacent after normalize */
    uint32_t n, cap;
    bool sorted;      /* false after an add until the next normalize */
} sv_cpset_t;

void sv_cpset_init(sv_cpset_t *s);
void sv_cpset_free(sv_cpset_t *s);
/* Adds [lo, hi] (hi >= lo). Surrogates are dropped at normalize time. */
sv_status sv_cpset_add(sv_cpset_t *s, uint32_t lo, uint32_t hi);
sv_status sv_cpset_add_set(sv_cpset_t *s, const sv_cpset_t *t);
/* Sorts, merges, and clips to the universe. */
sv_status sv_cpset_normalize(sv_cpset_t *s);
/* Replaces s by its complement within the universe (normalizes first). */
sv_status sv_cpset_negate(sv_cpset_t *s);
bool sv_cpset_contains(const sv_cpset_t *s, uint32_t cp); /* s normalized */

/* One UTF-8 byte-range sequence: the strings b[0] b[1] ... with
 * lo[i] <= b[i] <= hi[i]. */
typedef struct sv_utf8_seq { uint8_t len, lo[4], hi[4]; } sv_utf8_seq_t;

/* Calls fn for each byte-range sequence of a normalized set; together the
 * sequences match exactly the UTF-8 encodings of the set's members, and no
 * two of them match the same string. Stops at and returns fn's first non-OK. */
typedef sv_status (*sv_utf8_seq_fn)(void *ctx, const sv_utf8_seq_t *seq);
sv_status sv_cpset_utf8_sequences(const sv_cpset_t *s, sv_utf8_seq_fn fn, void *ctx);

/* Named sets used by regexes. */
typedef enum {
    SV_CLASS_DIGIT,  /* ECMA-262 \d: [0-9] */
    SV_CLASS_WORD,   /* ECMA-262 \w: [A-Za-z0-9_] */
    SV_CLASS_SPACE,  /* ECMA-262 \s: WhiteSpace and LineTerminator */
    SV_CLASS_DOT,    /* ECMA-262 `.`: anything but \n \r U+2028 U+2029 */
} sv_class_kind;
sv_status sv_cpset_add_class(sv_cpset_t *s, sv_class_kind kind, bool negated);

/* Adds the Unicode property \p{name} (general categories, by short or long
 * name, "Any", "L&"/"LC"). Returns SV_ERR_UNSUPPORTED for an unknown name. */
sv_status sv_cpset_add_property(sv_cpset_t *s, const char *name, size_t len, bool negated);

#endif
