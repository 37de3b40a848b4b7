/* tokens.c — tokenizer.json vocabularies as token sets and matcher encoders. */
#include "tokens.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "src/tokenizer/bpe.h"
#include "src/tokenizer/pretok.h"
#include "util/path.h"

struct sv_tokens {
    sv_vocab_t *vocab;
    sv_bpe_t *bpe;
    sv_bpe_scratch_t *scratch;
    sv_pretok_t *pretok;
    sv_pretok_scratch_t pts;
    bool pts_ok;
    sv_token_set_t *set;
    sv_tokenizer_iface_t iface;
    sv_ids_t ids;
};

static int iface_encode(void *ctx, const uint8_t *s, size_t n, int32_t *ids, int cap) {
    sv_tokens_t *t = ctx;
    t->ids.n = 0;
    if (sv_bpe_encode(t->bpe, t->scratch, (const char *)s, n, SV_BPE_SPECIAL_AS_TEXT, &t->ids, NULL)) return -1;
    if (t->ids.n > (size_t)cap) return -1;
    memcpy(ids, t->ids.v, t->ids.n * sizeof *ids);
    return (int)t->ids.n;
}

/* Where the last pre-tokenizer piece of s begins: the pieces partition the
 * text, so it is n minus the last piece's length (when they do not add up,
 * as with an added prefix space, the whole text counts as one piece). */
static size_t iface_last_piece(void *ctx, const uint8_t *s, size_t n) {
    sv_tokens_t *t = ctx;
    if (!t->pts_ok || !n) return 0;
    if (sv_pretok_split(t->pretok, &t->pts, s, n, NULL) || !t->pts.n) return 0;
    size_t sum = 0;
    for (size_t i = 0; i < t->pts.n; i++) sum += t->pts.pieces[i].len;
    if (sum != n) return 0;
    return n - t->pts.pieces[t->pts.n - 1].len;
}

void sv_tokens_destroy(sv_tokens_t *t) {
    if (!t) return;
    sv_token_set_destroy(t->set);
    if (t->pts_ok) sv_pretok_scratch_free(&t->pts);
    sv_pretok_destroy(t->pretok);
    sv_bpe_scratch_destroy(t->scratch);
    sv_bpe_destroy(t->bpe);
    sv_vocab_destroy(t->vocab);
    sv_ids_free(&t->ids);
    free(t);
}

sv_status sv_tokens_load(const char *path, const char *config_path, uint32_t mask_bits, sv_tokens_t **out,
                         sv_error_t *err) {
    *out = NULL;
    sv_tokens_t *t = calloc(1, sizeof *t);
    if (!t) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_status st = sv_vocab_load(path, &t->vocab, err);
    if (!st && config_path) st = sv_vocab_apply_hf_config(t->vocab, config_path, err);
    if (st) {
        sv_tokens_destroy(t);
        return st;
    }
    uint32_t n = sv_vocab_size(t->vocab);
    const uint8_t **bytes = malloc(n * sizeof *bytes);
    uint32_t *lens = malloc(n * sizeof *lens);
    uint8_t *kinds = malloc(n);
    if (!bytes || !lens || !kinds) {
        free(bytes), free(lens), free(kinds);
        sv_tokens_destroy(t);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t len;
        uint32_t fl = sv_vocab_flags(t->vocab, (int32_t)i);
        bytes[i] = sv_vocab_bytes(t->vocab, (int32_t)i, &len);
        lens[i] = (uint32_t)len;
        if (fl & SV_TOKEN_EOG) kinds[i] = SV_TOKKIND_EOG;
        else if (fl & (SV_TOKEN_UNUSED | SV_TOKEN_SPECIAL)) kinds[i] = SV_TOKKIND_NEVER;
        else kinds[i] = SV_TOKKIND_NORMAL;
    }
    st = sv_token_set_create(n, mask_bits, bytes, lens, kinds, &t->set, err);
    free(bytes), free(lens), free(kinds);
    if (st) {
        sv_tokens_destroy(t);
        return st;
    }
    if (!sv_vocab_encoder_support(t->vocab)) {
        if ((st = sv_bpe_create(t->vocab, &t->bpe, err)) || (st = sv_bpe_scratch_create(t->bpe, &t->scratch, err))) {
            sv_tokens_destroy(t);
            return st;
        }
        if (!sv_pretok_create(t->vocab, &t->pretok, NULL) && !sv_pretok_scratch_init(t->pretok, &t->pts))
            t->pts_ok = true;
        t->iface.ctx = t;
        t->iface.encode = iface_encode;
        t->iface.last_piece = t->pts_ok ? iface_last_piece : NULL;
    }
    *out = t;
    return SV_OK;
}

const sv_vocab_t *sv_tokens_vocab(const sv_tokens_t *t) { return t->vocab; }
const sv_token_set_t *sv_tokens_set(const sv_tokens_t *t) { return t->set; }
const sv_tokenizer_iface_t *sv_tokens_iface(const sv_tokens_t *t) { return t->iface.encode ? &t->iface : NULL; }

sv_status sv_tokens_encode(sv_tokens_t *t, const char *text, size_t len, sv_ids_t *out, sv_error_t *err) {
    if (!t->bpe)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", sv_vocab_encoder_support(t->vocab));
    return sv_bpe_encode(t->bpe, t->scratch, text, len, 0, out, err);
}

/* The tokenizer: the GGUF's own, or the directory's tokenizer.json (with
 * tokenizer_config.json when present). *out: caller frees with
 * sv_tokens_destroy. */
sv_status sv_tokens_load_model(const char *model, int32_t n_vocab, sv_tokens_t **out, sv_error_t *err) {
    char tpath[4096], cpath[4096];
    const char *tp = model, *cp = NULL;
    if (sv_path_is_dir(model)) {
        snprintf(tpath, sizeof tpath, "%s/tokenizer.json", model);
        snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", model);
        tp = tpath;
        if (sv_path_exists(cpath)) cp = cpath;
    }
    return sv_tokens_load(tp, cp, (uint32_t)n_vocab, out, err);
}
