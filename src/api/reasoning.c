/* reasoning.c — reasoning parsers, their constraint and their prompts
 * (reasoning.h). */
#include "reasoning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPEN_TAG "<think>"
#define END_TAG "</think>"

sv_status sv_reasoning_parser_named(const char *name, sv_reasoning_parser *out, sv_error_t *err) {
    if (name && !strcmp(name, "qwen3")) *out = SV_REASONING_QWEN3;
    else if (name && !strcmp(name, "deepseek_r1")) *out = SV_REASONING_DEEPSEEK_R1;
    else return sv_error_set(err, SV_ERR_ARG, -1, "reasoning parser must be qwen3 or deepseek_r1, got \"%s\"",
                             name ? name : "");
    return SV_OK;
}

/* One byte as a regex escape (\xHH), so no character is special. */
static int put_byte(char *p, unsigned char c) { return sprintf(p, "\\x%02x", c); }

/* X_j of the essay below: after '<' and tag[1 .. j), the rest of a piece
 * that does not complete the tag. */
static char *piece_rest(char *p, const char *tag, size_t j, size_t k) {
    p += sprintf(p, "(?:[^");
    p += put_byte(p, (unsigned char)tag[0]);
    p += put_byte(p, (unsigned char)tag[j]);
    p += sprintf(p, "][^");
    p += put_byte(p, (unsigned char)tag[0]);
    p += sprintf(p, "]*");
    if (j + 1 < k) {
        *p++ = '|';
        p += put_byte(p, (unsigned char)tag[j]);
        p = piece_rest(p, tag, j + 1, k);
    }
    p += sprintf(p, ")?");
    return p;
}

/* The text splits at each occurrence of the tag's first character c (which
 * occurs in the tag only first, so an occurrence of the tag lies within
 * one piece, at its start): [^c]* then pieces c X, where X holds no c and
 * does not begin with the rest of the tag. X_j (tag[1 .. j) matched) is
 * empty, or a character other than c and tag[j] then anything but c, or
 * tag[j] then X_{j+1}; the last one may not take tag[k-1]. */
char *sv_reasoning_think_regex(const char *end_tag) {
    size_t k = end_tag ? strlen(end_tag) : 0;
    if (k < 2 || k > SV_ENGINE_MAX_TAG) return NULL;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)end_tag[i];
        if (c < 0x21 || c > 0x7e || (i > 0 && c == (unsigned char)end_tag[0])) return NULL;
    }
    /* each level: about 40 bytes of escapes and groups; the tag: 4 a byte */
    char *re = malloc(64 + k * 64);
    if (!re) return NULL;
    char *p = re;
    p += sprintf(p, "[^");
    p += put_byte(p, (unsigned char)end_tag[0]);
    p += sprintf(p, "]*(?:");
    p += put_byte(p, (unsigned char)end_tag[0]);
    p = piece_rest(p, end_tag, 1, k);
    p += sprintf(p, ")*");
    for (size_t i = 0; i < k; i++) p += put_byte(p, (unsigned char)end_tag[i]);
    *p = 0;
    return re;
}

const char *sv_reasoning_prompt_suffix(sv_reasoning_parser p, bool enable_thinking, bool *reasons) {
    *reasons = false;
    switch (p) {
    case SV_REASONING_QWEN3:
        if (!enable_thinking) return OPEN_TAG "\n\n" END_TAG "\n\n";
        *reasons = true;
        return "";
    case SV_REASONING_DEEPSEEK_R1:
        *reasons = true;
        return OPEN_TAG "\n";
    default:
        return "";
    }
}

sv_status sv_reasoning_init(sv_reasoning_parser p, sv_constraint_cache_t *cache, sv_tokens_t *tok, sv_reasoning_t *out,
                            sv_error_t *err) {
    memset(out, 0, sizeof *out);
    out->parser = p;
    if (p == SV_REASONING_NONE) return SV_OK;
    char *re = sv_reasoning_think_regex(END_TAG);
    if (!re) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_constraint_spec_t spec = {.kind = SV_CONSTRAINT_REGEX, .text = re, .len = strlen(re),
                                 .tokens = sv_tokens_set(tok)};
    sv_status st = sv_constraint_get(cache, &spec, &out->think, NULL, err);
    free(re);
    if (st) return st;
    sv_ids_t ids = {0};
    sv_matcher_t *m = NULL;
    if ((st = sv_tokens_encode(tok, END_TAG, strlen(END_TAG), &ids, err))) goto fail;
    if (ids.n == 0 || ids.n > SV_ENGINE_MAX_END) {
        st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "reasoning: \"%s\" encodes to %zu tokens (1..%d)", END_TAG,
                          ids.n, SV_ENGINE_MAX_END);
        goto fail;
    }
    if ((st = sv_matcher_create(sv_constraint_index(out->think), sv_tokens_iface(tok), 0, &m, err))) goto fail;
    for (size_t i = 0; i < ids.n; i++) {
        if (!sv_matcher_accept(m, ids.v[i])) {
            st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "reasoning: the tokenizer spells \"%s\" with token %d, "
                              "which constrained output may not hold (a special token)", END_TAG, ids.v[i]);
            goto fail;
        }
        out->end[i] = ids.v[i];
    }
    if (!sv_matcher_is_finished(m)) {
        st = sv_error_set(err, SV_ERR_INTERNAL, -1, "reasoning: internal: the end tag does not end the reasoning");
        goto fail;
    }
    out->n_end = (uint32_t)ids.n;
    sv_matcher_destroy(m);
    sv_ids_free(&ids);
    return SV_OK;
fail:
    sv_matcher_destroy(m);
    sv_ids_free(&ids);
    sv_constraint_release(cache, out->think);
    out->think = NULL;
    return st;
}

void sv_reasoning_release(sv_reasoning_t *rs, sv_constraint_cache_t *cache) {
    if (rs->think) sv_constraint_release(cache, rs->think);
    rs->think = NULL;
}

void sv_reasoning_engine(const sv_reasoning_t *rs, uint32_t max_tokens, sv_engine_reasoning_t *out) {
    *out = (sv_engine_reasoning_t){.think = sv_constraint_index(rs->think), .end = rs->end, .n_end = rs->n_end,
                                   .open_tag = rs->parser == SV_REASONING_QWEN3 ? OPEN_TAG : NULL,
                                   .end_tag = END_TAG, .max_tokens = max_tokens};
}
