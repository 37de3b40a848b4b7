/* detok.c — streaming detokenizer (see detok.h). */
#include "detok.h"

#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

struct sv_detok {
    const sv_vocab_t *v;
    uint32_t flags;
    uint8_t held[4];
    size_t n_held;
    uint8_t *in;     /* (3 + max token) held tail + the new token's bytes */
    uint8_t *out;    /* (3 * that) the converted text */
    size_t cap;      /* capacity of `in` */
};

static const uint8_t FFFD[3] = {0xEF, 0xBF, 0xBD};

/* The length of the well-formed sequence or maximal subpart at s[0..n):
 * sets *complete when it is a whole character, *prefix when it is a valid
 * but truncated start (the input ended inside it). */
static size_t scan_one(const uint8_t *s, size_t n, bool *complete, bool *prefix) {
    *complete = *prefix = false;
    uint32_t ncont;
    uint8_t lo, hi;  /* the range of the second byte (Table 3-7) */
    if (!sv_utf8_lead(s[0], &ncont, &lo, &hi))
        return 1;  /* C0, C1, F5..FF, or a stray continuation byte */
    size_t need = (size_t)ncont + 1, i = 1;
    for (; i < need; i++) {
        if (i == n) {
            *prefix = true;
            return i;
        }
        uint8_t c = s[i];
        if (i == 1 ? c < lo || c > hi : (c & 0xC0) != 0x80)
            return i;  /* the maximal subpart ends before c */
    }
    *complete = true;
    return need;
}

size_t sv_utf8_lossy(const uint8_t *s, size_t n, uint8_t *out, size_t *hold) {
    size_t w = 0, i = 0;
    if (hold)
        *hold = 0;
    while (i < n) {
        bool complete, prefix;
        size_t k = scan_one(s + i, n - i, &complete, &prefix);
        if (complete) {
            memcpy(out + w, s + i, k);
            w += k;
        } else if (prefix && hold) {
            *hold = k;
            return w;
        } else {
            memcpy(out + w, FFFD, 3);
            w += 3;
        }
        i += k;
    }
    return w;
}

sv_status sv_detok_create(const sv_vocab_t *v, uint32_t flags, sv_detok_t **out, sv_error_t *err) {
    *out = NULL;
    sv_detok_t *d = calloc(1, sizeof *d);
    if (!d)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "detok: out of memory");
    d->v = v;
    d->flags = flags;
    d->cap = sv_vocab_max_token_bytes(v) + 4;
    d->in = malloc(d->cap);
    d->out = malloc(3 * d->cap);
    if (!d->in || !d->out) {
        sv_detok_destroy(d);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "detok: out of memory");
    }
    *out = d;
    return SV_OK;
}

void sv_detok_destroy(sv_detok_t *d) {
    if (!d)
        return;
    free(d->in);
    free(d->out);
    free(d);
}

void sv_detok_reset(sv_detok_t *d) { d->n_held = 0; }

size_t sv_detok_pending(const sv_detok_t *d) { return d->n_held; }

sv_status sv_detok_push_bytes(sv_detok_t *d, const uint8_t *bytes, size_t n, const char **text,
                              size_t *len, sv_error_t *err) {
    if (n + d->n_held > d->cap)
        return sv_error_set(err, SV_ERR_ARG, -1, "detok: %zu bytes is more than one token", n);
    memcpy(d->in, d->held, d->n_held);
    if (n)
        memcpy(d->in + d->n_held, bytes, n);
    size_t total = d->n_held + n, hold;
    size_t w = sv_utf8_lossy(d->in, total, d->out, &hold);
    memcpy(d->held, d->in + total - hold, hold);
    d->n_held = hold;
    *text = (const char *)d->out;
    *len = w;
    return SV_OK;
}

sv_status sv_detok_push(sv_detok_t *d, int32_t id, const char **text, size_t *len, sv_error_t *err) {
    uint32_t f = sv_vocab_flags(d->v, id);
    if (f & SV_TOKEN_UNUSED)
        return sv_error_set(err, SV_ERR_ARG, -1, "detok: no token has id %ld", (long)id);
    size_t n = 0;
    const uint8_t *b = sv_vocab_bytes(d->v, id, &n);
    if ((d->flags & SV_DETOK_SKIP_SPECIAL) && (f & SV_TOKEN_SPECIAL))
        n = 0;
    return sv_detok_push_bytes(d, b, n, text, len, err);
}

void sv_detok_flush(sv_detok_t *d, const char **text, size_t *len) {
    *text = (const char *)d->out;
    *len = 0;
    if (d->n_held) {
        memcpy(d->out, FFFD, 3);
        *len = 3;
    }
    d->n_held = 0;
}
