/* vocab_internal.h — the vocabulary's layout, shared by vocab.c and the
 * encoder (bpe.c, pretok.c). Not part of the public API. */
#ifndef SV_TOKENIZER_VOCAB_INTERNAL_H
#define SV_TOKENIZER_VOCAB_INTERNAL_H

#include "vocab.h"

/* How a Split step turns matches into pieces (Hugging Face's
 * SplitDelimiterBehavior). */
typedef enum {
    SV_SPLIT_ISOLATED,
    SV_SPLIT_REMOVED,
    SV_SPLIT_MERGED_WITH_PREVIOUS,
    SV_SPLIT_MERGED_WITH_NEXT,
    SV_SPLIT_CONTIGUOUS,
} sv_split_behavior;

/* One pre-tokenizer step. Every supported pre-tokenizer is a regex split,
 * optionally preceded by ByteLevel's prefix space. */
typedef struct sv_pretok_step {
    char *pattern;             /* owned; in the regex dialect of `literal`/onig below */
    bool literal;              /* a Split with a String pattern: match it verbatim */
    sv_split_behavior behavior;
    bool invert;
    bool add_prefix_space;     /* ByteLevel: prepend ' ' to a piece not starting with one */
} sv_pretok_step_t;

#define SV_PRETOK_MAX_STEPS 8

typedef struct sv_added_token {
    int32_t id;
    uint32_t off, len;         /* content, in v->strs */
    bool special, normalized, lstrip, rstrip, single_word;
} sv_added_token_t;

struct sv_vocab {
    uint32_t n_ids;            /* max id + 1 */
    uint32_t *str_off;         /* (n_ids) tokenizer.json spelling, in strs (NUL-terminated) */
    uint32_t *str_len;         /* (n_ids) its length in bytes */
    uint32_t *byte_off;        /* (n_ids) token bytes, in bytes */
    uint32_t *byte_len;        /* (n_ids) */
    uint8_t *flags;            /* (n_ids) SV_TOKEN_* */
    char *strs;                /* all spellings; strs[0] = "" for unused ids */
    size_t strs_n;
    uint8_t *bytes;            /* all token bytes */
    size_t bytes_n;
    size_t max_token_bytes;

    /* The model vocabulary by spelling (its own copy of each spelling: an
     * added token may reuse a model id under another name). Open
     * addressing; id -1 marks an empty slot. */
    struct sv_vocab_slot { uint32_t off, len; int32_t id; } *hash;
    uint32_t hash_mask;

    int32_t (*merges)[2];      /* (n_merges) left and right ids, in rank order */
    uint32_t n_merges;

    sv_added_token_t *added;   /* (n_added) in file order */
    uint32_t n_added;

    bool nfc;                  /* the normalizer is NFC */
    bool byte_level;           /* ByteLevel pre-tokenizer or decoder */
    sv_pretok_step_t steps[SV_PRETOK_MAX_STEPS];
    uint32_t n_steps;
    bool ignore_merges, byte_fallback, fuse_unk;
    int32_t unk_id;            /* -1: unknown characters are dropped, as HF does */

    int32_t bos, eos, eot;
    char unsupported[256];     /* "" when bpe.h can encode */
};

/* The model-vocabulary id of spelling s[0..n), or -1. */
int32_t sv_vocab_lookup(const sv_vocab_t *v, const char *s, size_t n);

#endif
