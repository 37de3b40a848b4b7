/* vocab_internal.h — the vocabulary's layout, shared by vocab.c and the
 * encoder (bpe.c, pretok.c). Not part of the public API. */
#ifndef SV_TOKENIZER_VOCAB_INTERNAL_H
#define SV_TOKENIZER_VOCAB_INTERNAL_H

#include "src/tokenizer/vocab.h"

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

/* SentencePiece-style text (Llama 2, Mistral, TinyLlama; GGUF model
 * "llama"): spaces are spelled U+2581 ("▁") and a ▁ may be prepended. When
 * the prefix is added, per stretch of text between added tokens:
 * - EACH: every non-empty stretch (Hugging Face's Prepend normalizer, and
 *   llama.cpp's add_space_prefix, which adds it after every special token);
 * - EACH_UNLESS_SPACE: every stretch that does not already start with a
 *   space (Metaspace with prepend_scheme "always");
 * - FIRST_UNLESS_SPACE: only a stretch at the very start of the text
 *   (Metaspace "first"). */
typedef enum {
    SV_META_PREFIX_NONE,
    SV_META_PREFIX_EACH,
    SV_META_PREFIX_EACH_UNLESS_SPACE,
    SV_META_PREFIX_FIRST_UNLESS_SPACE,
} sv_meta_prefix;

/* How token spellings map to bytes (from tokenizer.json's decoder, or the
 * GGUF model type). See vocab.h. */
typedef struct sv_spelling {
    bool byte_level;           /* GPT-2's byte alphabet */
    bool byte_fallback;        /* <0xNN> is byte NN */
    bool replace_meta;         /* U+2581 is a space */
} sv_spelling_t;

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
    /* SentencePiece-style spaces: with meta_escape, ' ' becomes U+2581
     * before BPE, in the normalizer (Prepend + Replace) or, with
     * meta_at_pretok, in the pre-tokenizer (Metaspace). */
    bool meta_escape, meta_at_pretok;
    sv_meta_prefix meta_prefix;
    /* (n_merges) each merge's priority, lowest first, or NULL when it is
     * the merge's index. SentencePiece vocabularies (GGUF "llama") merge by
     * the score of the merged token: equal scores share a rank, and the
     * leftmost pair goes first. */
    uint32_t *merge_ranks;

    int32_t bos, eos, eot;
    bool add_bos;              /* the model expects BOS before a prompt */
    char unsupported[256];     /* "" when bpe.h can encode */
};

/* The model-vocabulary id of spelling s[0..n), or -1. */
int32_t sv_vocab_lookup(const sv_vocab_t *v, const char *s, size_t n);

/* ---- shared by the loaders (vocab.c, vocab_gguf.c) ---- */

/* An empty vocabulary (every id -1). NULL when out of memory. */
sv_vocab_t *sv_vocab_new(void);
/* Appends the bytes that spelling s[0..n) stands for to out. */
sv_status sv_vocab_spell_bytes(const sv_spelling_t *sp, const char *s, size_t n, sv_bytes_t *out);
/* The value of a byte-fallback spelling "<0xNN>", or -1. */
int sv_vocab_byte_token(const char *s, size_t n);
/* Builds v->hash over the spellings of ids[0..n) (v->strs, str_off and
 * str_len must be set). A spelling listed twice keeps the later id. */
sv_status sv_vocab_index(sv_vocab_t *v, const int32_t *ids, size_t n);
/* Appends a pre-tokenizer step (pattern copied; NULL for none). */
sv_status sv_vocab_add_step(sv_vocab_t *v, const char *pattern, bool literal, sv_split_behavior b,
                            bool invert, bool prefix, sv_error_t *err);
/* Fills BOS, EOS and EOT from well-known added-token names where they are
 * still -1, and flags every EOS/EOT name found as SV_TOKEN_EOG. */
void sv_vocab_guess_specials(sv_vocab_t *v);

#endif
