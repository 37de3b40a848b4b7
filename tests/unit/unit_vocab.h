/* unit_vocab.h — what the token-level unit tests share: the CHECK macro
 * (count failures, print the first 20, go on) and a growable vocabulary of
 * byte strings with kinds, fed to sv_token_set_create. Header-only: each
 * test is one translation unit. */
#ifndef SV_TESTS_UNIT_VOCAB_H
#define SV_TESTS_UNIT_VOCAB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/token_index.h"

static int failures;
#define CHECK(c, ...)                                                      \
    do {                                                                   \
        if (!(c)) {                                                        \
            if (failures++ < 20) {                                         \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);       \
                fprintf(stderr, __VA_ARGS__);                              \
                fputc('\n', stderr);                                       \
            }                                                              \
        }                                                                  \
    } while (0)

typedef struct {
    uint32_t n;
    uint8_t **bytes;
    uint32_t *lens;
    uint8_t *kinds;
} vocab_t;

static inline void add(vocab_t *v, const void *b, uint32_t len, uint8_t kind) {
    v->bytes = realloc(v->bytes, (v->n + 1) * sizeof *v->bytes);
    v->lens = realloc(v->lens, (v->n + 1) * sizeof *v->lens);
    v->kinds = realloc(v->kinds, v->n + 1);
    v->bytes[v->n] = malloc(len ? len : 1);
    if (len) memcpy(v->bytes[v->n], b, len);
    v->lens[v->n] = len;
    v->kinds[v->n] = kind;
    v->n++;
}

static inline void adds(vocab_t *v, const char *s) { add(v, s, (uint32_t)strlen(s), SV_TOKKIND_NORMAL); }

#endif
