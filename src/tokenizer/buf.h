/* buf.h — growable arrays for the tokenizer: bytes and token ids.
 *
 * A zero-initialized buffer is empty and valid. Growth doubles the capacity,
 * so a buffer reused across calls (as encoder scratch does) stops allocating
 * once it has reached the largest size it needs. */
#ifndef SV_TOKENIZER_BUF_H
#define SV_TOKENIZER_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct sv_bytes {
    uint8_t *p;       /* owned; free with sv_bytes_free */
    size_t n, cap;
} sv_bytes_t;

typedef struct sv_ids {
    int32_t *v;       /* owned; free with sv_ids_free */
    size_t n, cap;
} sv_ids_t;

/* Makes room for `extra` more elements; SV_ERR_NOMEM on failure. */
sv_status sv_bytes_reserve(sv_bytes_t *b, size_t extra);
sv_status sv_bytes_append(sv_bytes_t *b, const void *s, size_t n);
void sv_bytes_free(sv_bytes_t *b);

sv_status sv_ids_reserve(sv_ids_t *ids, size_t extra);
sv_status sv_ids_push(sv_ids_t *ids, int32_t id);
void sv_ids_free(sv_ids_t *ids);

#endif
