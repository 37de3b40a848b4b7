/* unicode_tables.h — general-category tables (generated, see
 * scripts/gen_unicode_tables.py). */
#ifndef SV_FSM_UNICODE_TABLES_H
#define SV_FSM_UNICODE_TABLES_H

#include <stdint.h>

typedef struct sv_unicode_category {
    const char *short_name;   /* "Lu" */
    const char *long_name;    /* "Uppercase_Letter" */
    const uint32_t *ranges;   /* lo0, hi0, lo1, hi1, ... sorted */
    int n;                    /* number of ranges */
} sv_unicode_category_t;

extern const sv_unicode_category_t sv_unicode_categories[];
extern const int sv_unicode_num_categories;
extern const char sv_unicode_version[];

#endif
