/* vocab.c — loading a Hugging Face tokenizer.json into an sv_vocab_t.
 *
 * The file is parsed with jansson, then flattened into per-id arrays (the
 * tokenizer.json spelling and the exact bytes of every token) plus the
 * encoder's inputs: merges as id pairs in rank order, added tokens, the
 * normalizer and the pre-tokenizer steps. See vocab.h for what is
 * understood. */
#include "src/tokenizer/internal/vocab_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bytelevel.h"
#include "util/hash.h"
#include "util/utf8.h"

/* GPT-2's split pattern, which ByteLevel uses when use_regex is true. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ---- small helpers ------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t n;
    int64_t id;
} entry_t;

static sv_status nomem(sv_error_t *err) {
    return sv_error_set(err, SV_ERR_NOMEM, -1, "tokenizer.json: out of memory");
}

static void unsupported(sv_vocab_t *v, const char *what, const char *name) {
    if (!v->unsupported[0])
        snprintf(v->unsupported, sizeof v->unsupported,
                 "tokenizer.json: %s \"%s\" is not implemented by the encoder", what,
                 name ? name : "?");
}

static const char *type_of(json_t *o) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

static bool get_bool(json_t *o, const char *key, bool dflt) {
    json_t *b = json_object_get(o, key);
    return json_is_boolean(b) ? json_is_true(b) : dflt;
}

static int32_t hash_find(const sv_vocab_t *v, const char *s, size_t n) {
    uint64_t h = sv_hash_bytes(s, n);
    for (uint32_t i = (uint32_t)h & v->hash_mask;; i = (i + 1) & v->hash_mask) {
        const struct sv_vocab_slot *e = &v->hash[i];
        if (e->id < 0)
            return -1;
        if (e->len == n && memcmp(v->strs + e->off, s, n) == 0)
            return e->id;
    }
}

int32_t sv_vocab_lookup(const sv_vocab_t *v, const char *s, size_t n) {
    return v->hash ? hash_find(v, s, n) : -1;
}

sv_vocab_t *sv_vocab_new(void) {
    sv_vocab_t *v = calloc(1, sizeof *v);
    if (v)
        v->bos = v->eos = v->eot = v->unk_id = -1;
    return v;
}

sv_status sv_vocab_index(sv_vocab_t *v, const int32_t *ids, size_t n) {
    uint32_t hsize = 16;
    while (hsize < 2 * n + 2)
        hsize *= 2;
    free(v->hash);
    v->hash = malloc(hsize * sizeof *v->hash);
    if (!v->hash)
        return SV_ERR_NOMEM;
    for (uint32_t i = 0; i < hsize; i++)
        v->hash[i].id = -1;
    v->hash_mask = hsize - 1;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        const char *s = v->strs + v->str_off[id];
        uint32_t len = v->str_len[id];
        uint32_t h = (uint32_t)sv_hash_bytes(s, len) & v->hash_mask;
        while (v->hash[h].id >= 0 &&
               !(v->hash[h].len == len && memcmp(v->strs + v->hash[h].off, s, len) == 0))
            h = (h + 1) & v->hash_mask;
        v->hash[h].off = v->str_off[id];
        v->hash[h].len = len;
        v->hash[h].id = id;
    }
    return SV_OK;
}

/* Appends s (plus a NUL) to the spelling pool; returns its offset. */
static sv_status add_str(sv_bytes_t *pool, const char *s, size_t n, uint32_t *off) {
    if (pool->n + n + 1 > UINT32_MAX)
        return SV_ERR_NOMEM;
    *off = (uint32_t)pool->n;
    sv_status st = sv_bytes_append(pool, s, n);
    if (!st)
        st = sv_bytes_append(pool, "", 1);
    return st;
}

/* ---- the parts of tokenizer.json ----------------------------------------- */

#define META "\xE2\x96\x81" /* U+2581, SentencePiece's space */

static bool is_str(json_t *j, const char *s) {
    return json_is_string(j) && strcmp(json_string_value(j), s) == 0;
}

static sv_status parse_normalizer(sv_vocab_t *v, json_t *n, int depth, sv_error_t *err) {
    if (!n || json_is_null(n))
        return SV_OK;
    const char *t = type_of(n);
    if (!t)
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "tokenizer.json: normalizer without a type");
    if (strcmp(t, "NFC") == 0) {
        v->nfc = true;
    } else if (strcmp(t, "Prepend") == 0 && is_str(json_object_get(n, "prepend"), META)) {
        v->meta_prefix = SV_META_PREFIX_EACH;  /* Llama 2: Prepend("▁") + Replace(" ", "▁") */
    } else if (strcmp(t, "Replace") == 0 &&
               is_str(json_object_get(json_object_get(n, "pattern"), "String"), " ") &&
               is_str(json_object_get(n, "content"), META)) {
        v->meta_escape = true;
    } else if (strcmp(t, "Sequence") == 0 && depth < 4) {
        json_t *list = json_object_get(n, "normalizers");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            sv_status st = parse_normalizer(v, e, depth + 1, err);
            if (st)
                return st;
        }
    } else {
        unsupported(v, "normalizer", t);
    }
    return SV_OK;
}

sv_status sv_vocab_add_step(sv_vocab_t *v, const char *pattern, bool literal, sv_split_behavior b,
                            bool invert, bool prefix, sv_error_t *err) {
    if (v->n_steps == SV_PRETOK_MAX_STEPS)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "vocabulary: more than %d pre-tokenizer steps",
                            SV_PRETOK_MAX_STEPS);
    sv_pretok_step_t *s = &v->steps[v->n_steps];
    memset(s, 0, sizeof *s);
    if (pattern) {
        s->pattern = strdup(pattern);
        if (!s->pattern)
            return sv_error_set(err, SV_ERR_NOMEM, -1, "vocabulary: out of memory");
    }
    s->literal = literal;
    s->behavior = b;
    s->invert = invert;
    s->add_prefix_space = prefix;
    v->n_steps++;
    return SV_OK;
}

static sv_status parse_pretok(sv_vocab_t *v, json_t *p, int depth, sv_error_t *err) {
    if (!p || json_is_null(p))
        return SV_OK;
    const char *t = type_of(p);
    if (!t)
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "tokenizer.json: pre_tokenizer without a type");
    if (strcmp(t, "Sequence") == 0 && depth < 4) {
        json_t *list = json_object_get(p, "pretokenizers");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            sv_status st = parse_pretok(v, e, depth + 1, err);
            if (st)
                return st;
        }
        return SV_OK;
    }
    if (strcmp(t, "ByteLevel") == 0) {
        v->byte_level = true;
        bool regex = get_bool(p, "use_regex", true);
        bool prefix = get_bool(p, "add_prefix_space", true);
        if (!regex && !prefix)
            return SV_OK;
        return sv_vocab_add_step(v, regex ? GPT2_PATTERN : NULL, false, SV_SPLIT_ISOLATED, false, prefix, err);
    }
    if (strcmp(t, "Metaspace") == 0) {
        /* Spaces become ▁ in each stretch of text, a ▁ is prepended per the
         * scheme, and (split) each ▁ starts a new piece. */
        json_t *scheme = json_object_get(p, "prepend_scheme");
        if (!is_str(json_object_get(p, "replacement"), META) || v->n_steps > 0) {
            unsupported(v, "pre_tokenizer", "Metaspace (other than a first step with \"▁\")");
            return SV_OK;
        }
        v->meta_escape = v->meta_at_pretok = true;
        if (json_is_string(scheme))
            v->meta_prefix = is_str(scheme, "always") ? SV_META_PREFIX_EACH_UNLESS_SPACE
                             : is_str(scheme, "first") ? SV_META_PREFIX_FIRST_UNLESS_SPACE
                                                       : SV_META_PREFIX_NONE;
        else  /* before tokenizers 0.19: add_prefix_space */
            v->meta_prefix = get_bool(p, "add_prefix_space", true) ? SV_META_PREFIX_EACH_UNLESS_SPACE
                                                                   : SV_META_PREFIX_NONE;
        if (json_is_string(scheme) && !is_str(scheme, "always") && !is_str(scheme, "first") &&
            !is_str(scheme, "never"))
            unsupported(v, "Metaspace prepend_scheme", json_string_value(scheme));
        if (!get_bool(p, "split", true))
            return SV_OK;
        return sv_vocab_add_step(v, META, true, SV_SPLIT_MERGED_WITH_NEXT, false, false, err);
    }
    if (strcmp(t, "Digits") == 0) {
        bool each = get_bool(p, "individual_digits", false);
        return sv_vocab_add_step(v, each ? "\\p{N}" : "\\p{N}+", false, SV_SPLIT_ISOLATED, false, false, err);
    }
    if (strcmp(t, "Split") == 0) {
        json_t *pat = json_object_get(p, "pattern");
        json_t *re = json_object_get(pat, "Regex");
        json_t *lit = json_object_get(pat, "String");
        if (!json_is_string(re) && !json_is_string(lit))
            return sv_error_set(err, SV_ERR_SYNTAX, -1,
                                "tokenizer.json: Split pre-tokenizer without a Regex or String pattern");
        static const struct { const char *name; sv_split_behavior b; } behaviors[] = {
            {"Isolated", SV_SPLIT_ISOLATED},
            {"Removed", SV_SPLIT_REMOVED},
            {"MergedWithPrevious", SV_SPLIT_MERGED_WITH_PREVIOUS},
            {"MergedWithNext", SV_SPLIT_MERGED_WITH_NEXT},
            {"Contiguous", SV_SPLIT_CONTIGUOUS},
        };
        json_t *bj = json_object_get(p, "behavior");
        const char *bn = json_is_string(bj) ? json_string_value(bj) : "";
        int b = -1;
        for (size_t i = 0; i < sizeof behaviors / sizeof behaviors[0]; i++)
            if (strcmp(bn, behaviors[i].name) == 0)
                b = (int)behaviors[i].b;
        if (b < 0)
            return sv_error_set(err, SV_ERR_SYNTAX, -1,
                                "tokenizer.json: unknown Split behavior \"%s\"", bn);
        json_t *s = json_is_string(re) ? re : lit;
        if (strlen(json_string_value(s)) != json_string_length(s))
            return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                                "tokenizer.json: a Split pattern with a NUL character");
        return sv_vocab_add_step(v, json_string_value(s), !json_is_string(re), (sv_split_behavior)b,
                        get_bool(p, "invert", false), false, err);
    }
    unsupported(v, "pre_tokenizer", t);
    return SV_OK;
}

/* What the decoder says about token bytes. */
static void parse_decoder(json_t *d, sv_spelling_t *info, int depth) {
    const char *t = d ? type_of(d) : NULL;
    if (!t)
        return;
    if (strcmp(t, "ByteLevel") == 0) {
        info->byte_level = true;
    } else if (strcmp(t, "ByteFallback") == 0) {
        info->byte_fallback = true;
    } else if (strcmp(t, "Replace") == 0) {
        json_t *pat = json_object_get(json_object_get(d, "pattern"), "String");
        json_t *content = json_object_get(d, "content");
        if (json_is_string(pat) && json_is_string(content) &&
            strcmp(json_string_value(pat), "\xE2\x96\x81") == 0 &&
            strcmp(json_string_value(content), " ") == 0)
            info->replace_meta = true;
    } else if (strcmp(t, "Metaspace") == 0) {
        info->replace_meta = true;
    } else if (strcmp(t, "Sequence") == 0 && depth < 4) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(d, "decoders"), i, e)
            parse_decoder(e, info, depth + 1);
    }
}

int sv_vocab_byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

sv_status sv_vocab_spell_bytes(const sv_spelling_t *dec, const char *s, size_t n, sv_bytes_t *out) {
    const uint8_t *u = (const uint8_t *)s;
    if (dec->byte_level) {
        size_t start = out->n;
        size_t i = 0;
        while (i < n) {
            uint32_t cp;
            int k = sv_utf8_decode(u + i, n - i, &cp);
            int b = k ? sv_bytelevel_byte(cp) : -1;
            if (b < 0)
                break;
            uint8_t byte = (uint8_t)b;
            sv_status st = sv_bytes_append(out, &byte, 1);
            if (st)
                return st;
            i += (size_t)k;
        }
        if (i == n)
            return SV_OK;
        out->n = start;  /* a character outside the alphabet: the token is its text */
        return sv_bytes_append(out, s, n);
    }
    if (dec->byte_fallback) {
        int b = sv_vocab_byte_token(s, n);
        if (b >= 0) {
            uint8_t byte = (uint8_t)b;
            return sv_bytes_append(out, &byte, 1);
        }
    }
    if (dec->replace_meta) {
        for (size_t i = 0; i < n; i++) {
            sv_status st;
            if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                st = sv_bytes_append(out, " ", 1);
                i += 2;
            } else {
                st = sv_bytes_append(out, s + i, 1);
            }
            if (st)
                return st;
        }
        return SV_OK;
    }
    return sv_bytes_append(out, s, n);
}

static int32_t find_added(const sv_vocab_t *v, const char *s, size_t n) {
    for (uint32_t i = 0; i < v->n_added; i++) {
        const sv_added_token_t *a = &v->added[i];
        if (a->len == n && memcmp(v->strs + a->off, s, n) == 0)
            return a->id;
    }
    return -1;
}

void sv_vocab_guess_specials(sv_vocab_t *v) {
    static const char *const bos[] = {"<|begin_of_text|>", "<s>", "<|startoftext|>", "<bos>", NULL};
    static const char *const eos[] = {"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>", NULL};
    static const char *const eot[] = {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>",
                                      "<|eom_id|>", NULL};
    for (int i = 0; bos[i] && v->bos < 0; i++)
        v->bos = find_added(v, bos[i], strlen(bos[i]));
    for (int i = 0; eos[i]; i++) {
        int32_t id = find_added(v, eos[i], strlen(eos[i]));
        if (id < 0)
            continue;
        if (v->eos < 0)
            v->eos = id;
        v->flags[id] |= SV_TOKEN_EOG;
    }
    for (int i = 0; eot[i]; i++) {
        int32_t id = find_added(v, eot[i], strlen(eot[i]));
        if (id < 0)
            continue;
        if (v->eot < 0)
            v->eot = id;
        v->flags[id] |= SV_TOKEN_EOG;
    }
    if (v->bos >= 0)
        v->flags[v->bos] |= SV_TOKEN_BOS;
}

/* ---- loading ---------------------------------------------------------------- */

/* True when the post-processor's single-sequence template starts with
 * the BOS token (Llama 3's TemplateProcessing, possibly in a Sequence). */
static bool template_starts_with(const sv_vocab_t *v, json_t *p, int depth) {
    const char *t = p ? type_of(p) : NULL;
    if (!t)
        return false;
    if (strcmp(t, "Sequence") == 0 && depth < 4) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(p, "processors"), i, e)
            if (template_starts_with(v, e, depth + 1))
                return true;
        return false;
    }
    if (strcmp(t, "TemplateProcessing") != 0)
        return false;
    json_t *id = json_object_get(json_object_get(json_array_get(json_object_get(p, "single"), 0),
                                                 "SpecialToken"), "id");
    return json_is_string(id) &&
           sv_vocab_find(v, json_string_value(id), json_string_length(id)) == v->bos;
}

static sv_status parse_id(json_t *j, int64_t *id, const char *what, sv_error_t *err) {
    if (!json_is_integer(j) || json_integer_value(j) < 0 ||
        json_integer_value(j) >= (json_int_t)SV_VOCAB_MAX_IDS)
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "tokenizer.json: %s has an id that is not an integer in [0, %u)", what,
                            SV_VOCAB_MAX_IDS);
    *id = json_integer_value(j);
    return SV_OK;
}

/* Splits a merge into its two sides: "a b" or ["a", "b"]. */
static bool merge_parts(json_t *m, const char **a, size_t *an, const char **b, size_t *bn) {
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m);
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)))
            return false;
        *a = s;
        *an = (size_t)(sp - s);
        *b = sp + 1;
        *bn = n - *an - 1;
        return true;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *an = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *bn = json_string_length(json_array_get(m, 1));
        return true;
    }
    return false;
}

static sv_status load_model(sv_vocab_t *v, json_t *root, sv_error_t *err) {
    sv_status st = SV_OK;
    entry_t *ents = NULL;
    sv_bytes_t strs = {0}, bytes = {0};
    char *joined = NULL;

    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "tokenizer.json: no \"model\" object");
    const char *mt = type_of(model);
    json_t *vocab = json_object_get(model, "vocab");
    json_t *merges = json_object_get(model, "merges");
    if (mt ? strcmp(mt, "BPE") != 0 : !json_is_array(merges))
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "tokenizer.json: model type \"%s\" is not supported (BPE only)",
                            mt ? mt : "?");
    if (!json_is_object(vocab) || !json_is_array(merges))
        return sv_error_set(err, SV_ERR_SYNTAX, -1,
                            "tokenizer.json: a BPE model needs a vocab object and a merges array");

    /* Collect the vocabulary and the added tokens; find the id range. */
    size_t nv = json_object_size(vocab);
    json_t *added = json_object_get(root, "added_tokens");
    size_t na = json_is_array(added) ? json_array_size(added) : 0;
    ents = calloc(nv + 1, sizeof *ents);
    v->added = calloc(na + 1, sizeof *v->added);
    if (!ents || !v->added)
        goto oom;
    int64_t max_id = -1;
    size_t k = 0;
    for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
        entry_t *e = &ents[k++];
        e->s = json_object_iter_key(it);
        e->n = json_object_iter_key_len(it);
        if ((st = parse_id(json_object_iter_value(it), &e->id, "a vocab entry", err)))
            goto done;
        if (e->n > SV_VOCAB_MAX_TOKEN_BYTES) {
            st = sv_error_set(err, SV_ERR_BUDGET, -1, "tokenizer.json: token %lld is longer than %u bytes",
                              (long long)e->id, SV_VOCAB_MAX_TOKEN_BYTES);
            goto done;
        }
        if (e->id > max_id)
            max_id = e->id;
    }
    for (size_t i = 0; i < na; i++) {
        json_t *a = json_array_get(added, i);
        json_t *c = json_object_get(a, "content");
        int64_t id = 0;
        if ((st = parse_id(json_object_get(a, "id"), &id, "an added token", err)))
            goto done;
        if (!json_is_string(c) || json_string_length(c) == 0 ||
            json_string_length(c) > SV_VOCAB_MAX_TOKEN_BYTES) {
            st = sv_error_set(err, SV_ERR_SYNTAX, -1,
                              "tokenizer.json: added token %lld has no content (or too long)",
                              (long long)id);
            goto done;
        }
        if (id > max_id)
            max_id = id;
    }
    v->n_ids = (uint32_t)(max_id + 1);
    v->str_off = calloc(v->n_ids ? v->n_ids : 1, sizeof *v->str_off);
    v->str_len = calloc(v->n_ids ? v->n_ids : 1, sizeof *v->str_len);
    v->byte_off = calloc(v->n_ids ? v->n_ids : 1, sizeof *v->byte_off);
    v->byte_len = calloc(v->n_ids ? v->n_ids : 1, sizeof *v->byte_len);
    v->flags = malloc(v->n_ids ? v->n_ids : 1);
    if (!v->str_off || !v->str_len || !v->byte_off || !v->byte_len || !v->flags)
        goto oom;
    memset(v->flags, SV_TOKEN_UNUSED, v->n_ids);
    if (sv_bytes_append(&strs, "", 1))  /* offset 0: the empty spelling of unused ids */
        goto oom;

    /* Spellings and the lookup hash of the model vocabulary. */
    uint32_t hsize = 16;
    while (hsize < 2 * nv + 2)
        hsize *= 2;
    v->hash = malloc(hsize * sizeof *v->hash);
    if (!v->hash)
        goto oom;
    for (uint32_t i = 0; i < hsize; i++)
        v->hash[i].id = -1;
    v->hash_mask = hsize - 1;
    for (size_t i = 0; i < nv; i++) {
        entry_t *e = &ents[i];
        if (!(v->flags[e->id] & SV_TOKEN_UNUSED)) {
            st = sv_error_set(err, SV_ERR_SYNTAX, -1, "tokenizer.json: two vocab tokens have id %lld",
                              (long long)e->id);
            goto done;
        }
        if (add_str(&strs, e->s, e->n, &v->str_off[e->id]))
            goto oom;
        v->str_len[e->id] = (uint32_t)e->n;
        v->flags[e->id] = 0;
    }
    v->strs = (char *)strs.p;  /* hash_find reads spellings through v->strs */
    for (size_t i = 0; i < nv; i++) {
        entry_t *e = &ents[i];
        uint32_t h = (uint32_t)sv_hash_bytes(e->s, e->n) & v->hash_mask;
        while (v->hash[h].id >= 0)
            h = (h + 1) & v->hash_mask;
        v->hash[h].off = v->str_off[e->id];
        v->hash[h].len = (uint32_t)e->n;
        v->hash[h].id = (int32_t)e->id;
    }

    /* Added tokens: their content is their spelling (it wins over a model
     * token with the same id, as in Hugging Face's decode). */
    for (size_t i = 0; i < na; i++) {
        json_t *a = json_array_get(added, i);
        json_t *c = json_object_get(a, "content");
        sv_added_token_t *t = &v->added[v->n_added++];
        t->id = (int32_t)json_integer_value(json_object_get(a, "id"));
        t->special = get_bool(a, "special", false);
        t->normalized = get_bool(a, "normalized", !t->special);
        t->lstrip = get_bool(a, "lstrip", false);
        t->rstrip = get_bool(a, "rstrip", false);
        t->single_word = get_bool(a, "single_word", false);
        t->len = (uint32_t)json_string_length(c);
        if (add_str(&strs, json_string_value(c), t->len, &t->off))
            goto oom;
        v->str_off[t->id] = t->off;
        v->str_len[t->id] = t->len;
        v->flags[t->id] = (uint8_t)(SV_TOKEN_ADDED | (t->special ? SV_TOKEN_SPECIAL : 0));
    }
    v->strs = (char *)strs.p;
    v->strs_n = strs.n;
    strs.p = NULL;

    /* Model options. */
    v->ignore_merges = get_bool(model, "ignore_merges", false);
    v->byte_fallback = get_bool(model, "byte_fallback", false);
    v->fuse_unk = get_bool(model, "fuse_unk", false);
    v->unk_id = -1;
    json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk))
        v->unk_id = sv_vocab_lookup(v, json_string_value(unk), json_string_length(unk));
    json_t *dropout = json_object_get(model, "dropout");
    if (json_is_number(dropout) && json_number_value(dropout) > 0)
        unsupported(v, "BPE option", "dropout");
    json_t *prefix = json_object_get(model, "continuing_subword_prefix");
    json_t *suffix = json_object_get(model, "end_of_word_suffix");
    if (json_is_string(prefix) && json_string_length(prefix))
        unsupported(v, "BPE option", "continuing_subword_prefix");
    if (json_is_string(suffix) && json_string_length(suffix))
        unsupported(v, "BPE option", "end_of_word_suffix");
    if (json_is_string(unk) && v->unk_id < 0)
        unsupported(v, "unk_token (not in the vocabulary)", json_string_value(unk));

    /* Merges, as id pairs in rank order. */
    const char *prefix_s = json_is_string(prefix) ? json_string_value(prefix) : "";
    size_t prefix_n = json_is_string(prefix) ? json_string_length(prefix) : 0;
    size_t nm = json_array_size(merges);
    v->merges = malloc((nm + 1) * sizeof *v->merges);
    joined = malloc(2 * SV_VOCAB_MAX_TOKEN_BYTES + 1);
    if (!v->merges || !joined)
        goto oom;
    for (size_t i = 0; i < nm; i++) {
        const char *a, *b;
        size_t an, bn;
        if (!merge_parts(json_array_get(merges, i), &a, &an, &b, &bn)) {
            st = sv_error_set(err, SV_ERR_SYNTAX, (long)i,
                              "tokenizer.json: merge %zu is neither \"a b\" nor [a, b]", i);
            goto done;
        }
        int32_t ia = sv_vocab_lookup(v, a, an), ib = sv_vocab_lookup(v, b, bn);
        int32_t ij = -1;
        /* The merged token is a + b, less b's continuing_subword_prefix. */
        size_t cut = prefix_n <= bn && memcmp(b, prefix_s, prefix_n) == 0 ? prefix_n : 0;
        if (ia >= 0 && ib >= 0 && an + bn <= 2 * SV_VOCAB_MAX_TOKEN_BYTES) {
            memcpy(joined, a, an);
            memcpy(joined + an, b + cut, bn - cut);
            ij = sv_vocab_lookup(v, joined, an + bn - cut);
        }
        if (ij < 0) {
            st = sv_error_set(err, SV_ERR_SYNTAX, (long)i,
                              "tokenizer.json: merge %zu (\"%.*s\" \"%.*s\") names a token that is "
                              "not in the vocabulary",
                              i, (int)(an > 64 ? 64 : an), a, (int)(bn > 64 ? 64 : bn), b);
            goto done;
        }
        v->merges[i][0] = ia;
        v->merges[i][1] = ib;
    }
    v->n_merges = (uint32_t)nm;

    /* Normalizer, pre-tokenizer, decoder. */
    if ((st = parse_normalizer(v, json_object_get(root, "normalizer"), 0, err)))
        goto done;
    if ((st = parse_pretok(v, json_object_get(root, "pre_tokenizer"), 0, err)))
        goto done;
    if (v->meta_prefix != SV_META_PREFIX_NONE && !v->meta_escape)
        unsupported(v, "normalizer", "Prepend without Replace(\" \", \"▁\")");
    sv_spelling_t dec = {0};
    json_t *dj = json_object_get(root, "decoder");
    parse_decoder(dj, &dec, 0);
    if ((!dj || json_is_null(dj)) && v->byte_level)
        dec.byte_level = true;

    /* Token bytes. */
    for (uint32_t id = 0; id < v->n_ids; id++) {
        if (v->flags[id] & SV_TOKEN_UNUSED)
            continue;
        const char *s = v->strs + v->str_off[id];
        size_t n = v->str_len[id];
        if (bytes.n > UINT32_MAX - 4 * n)
            goto oom;
        v->byte_off[id] = (uint32_t)bytes.n;
        if (sv_vocab_spell_bytes(&dec, s, n, &bytes))
            goto oom;
        v->byte_len[id] = (uint32_t)(bytes.n - v->byte_off[id]);
        if (v->byte_len[id] > v->max_token_bytes)
            v->max_token_bytes = v->byte_len[id];
        if (v->byte_fallback && !(v->flags[id] & SV_TOKEN_ADDED) && sv_vocab_byte_token(s, n) >= 0)
            v->flags[id] |= SV_TOKEN_BYTE;
    }
    v->bytes = bytes.p;
    v->bytes_n = bytes.n;
    bytes.p = NULL;

    sv_vocab_guess_specials(v);
    v->add_bos = v->bos >= 0 && template_starts_with(v, json_object_get(root, "post_processor"), 0);
    st = SV_OK;
    goto done;
oom:
    st = nomem(err);
done:
    free(ents);
    free(joined);
    sv_bytes_free(&strs);
    sv_bytes_free(&bytes);
    return st;
}

static sv_status finish(json_t *root, json_error_t *jerr, sv_vocab_t **out, sv_error_t *err) {
    *out = NULL;
    if (!root)
        return sv_error_set(err, SV_ERR_SYNTAX, (long)jerr->position, "tokenizer.json: %s (line %d)",
                            jerr->text, jerr->line);
    sv_vocab_t *v = sv_vocab_new();
    if (!v) {
        json_decref(root);
        return nomem(err);
    }
    sv_status st = json_is_object(root)
                       ? load_model(v, root, err)
                       : sv_error_set(err, SV_ERR_SYNTAX, -1, "tokenizer.json: not a JSON object");
    json_decref(root);
    if (st) {
        sv_vocab_destroy(v);
        return st;
    }
    *out = v;
    return SV_OK;
}

sv_status sv_vocab_load_hf_json(const char *path, sv_vocab_t **out, sv_error_t *err) {
    if (!out || !path)
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_vocab_load_hf_json: bad arguments");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return sv_error_set(err, SV_ERR_IO, -1, "%s: cannot open", path);
    json_error_t jerr;
    json_t *root = json_loadf(f, JSON_ALLOW_NUL, &jerr);
    fclose(f);
    return finish(root, &jerr, out, err);
}

sv_status sv_vocab_from_hf_json(const char *text, size_t len, sv_vocab_t **out, sv_error_t *err) {
    if (!out || (!text && len))
        return sv_error_set(err, SV_ERR_ARG, -1, "sv_vocab_from_hf_json: bad arguments");
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
    return finish(root, &jerr, out, err);
}

void sv_vocab_destroy(sv_vocab_t *v) {
    if (!v)
        return;
    free(v->str_off);
    free(v->str_len);
    free(v->byte_off);
    free(v->byte_len);
    free(v->flags);
    free(v->strs);
    free(v->bytes);
    free(v->hash);
    free(v->merges);
    free(v->merge_ranks);
    free(v->added);
    for (uint32_t i = 0; i < v->n_steps; i++)
        free(v->steps[i].pattern);
    free(v);
}

/* Reads a special-token name from tokenizer_config.json: a string or an
 * object with "content". */
static const char *config_token(json_t *root, const char *key) {
    json_t *t = json_object_get(root, key);
    if (json_is_object(t))
        t = json_object_get(t, "content");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

sv_status sv_vocab_apply_hf_config(sv_vocab_t *v, const char *path, sv_error_t *err) {
    json_error_t jerr;
    /* model_max_length is often 1e30 written as an integer */
    json_t *root = json_load_file(path, JSON_DECODE_INT_AS_REAL, &jerr);
    if (!root)
        return sv_error_set(err, SV_ERR_IO, (long)jerr.position, "%s: %s", path, jerr.text);
    sv_status st = SV_OK;
    const char *keys[2] = {"bos_token", "eos_token"};
    for (int k = 0; k < 2 && !st; k++) {
        const char *name = config_token(root, keys[k]);
        if (!name)
            continue;
        int32_t id = sv_vocab_find(v, name, strlen(name));
        if (id < 0) {
            st = sv_error_set(err, SV_ERR_SYNTAX, -1, "%s: %s \"%s\" is not a token", path, keys[k], name);
        } else if (k == 0) {
            if (v->bos >= 0)
                v->flags[v->bos] &= (uint8_t)~SV_TOKEN_BOS;
            v->bos = id;
            v->flags[id] |= SV_TOKEN_BOS;
        } else {
            v->eos = id;
            v->flags[id] |= SV_TOKEN_EOG;
        }
    }
    json_decref(root);
    return st;
}

/* ---- accessors ------------------------------------------------------------------ */

uint32_t sv_vocab_size(const sv_vocab_t *v) { return v->n_ids; }

const uint8_t *sv_vocab_bytes(const sv_vocab_t *v, int32_t id, size_t *len) {
    if (id < 0 || (uint32_t)id >= v->n_ids || (v->flags[id] & SV_TOKEN_UNUSED)) {
        *len = 0;
        return NULL;
    }
    *len = v->byte_len[id];
    return v->bytes + v->byte_off[id];
}

const char *sv_vocab_text(const sv_vocab_t *v, int32_t id) {
    if (id < 0 || (uint32_t)id >= v->n_ids || (v->flags[id] & SV_TOKEN_UNUSED))
        return NULL;
    return v->strs + v->str_off[id];
}

uint32_t sv_vocab_flags(const sv_vocab_t *v, int32_t id) {
    if (id < 0 || (uint32_t)id >= v->n_ids)
        return SV_TOKEN_UNUSED;
    return v->flags[id];
}

int32_t sv_vocab_find(const sv_vocab_t *v, const char *text, size_t len) {
    int32_t id = find_added(v, text, len);
    return id >= 0 ? id : sv_vocab_lookup(v, text, len);
}

size_t sv_vocab_max_token_bytes(const sv_vocab_t *v) { return v->max_token_bytes; }
int32_t sv_vocab_bos(const sv_vocab_t *v) { return v->bos; }
int32_t sv_vocab_eos(const sv_vocab_t *v) { return v->eos; }
int32_t sv_vocab_eot(const sv_vocab_t *v) { return v->eot; }
bool sv_vocab_add_bos(const sv_vocab_t *v) { return v->add_bos; }

const char *sv_vocab_encoder_support(const sv_vocab_t *v) {
    return v->unsupported[0] ? v->unsupported : NULL;
}

sv_status sv_vocab_decode(const sv_vocab_t *v, const int32_t *ids, size_t n, bool skip_special,
                          sv_bytes_t *out, sv_error_t *err) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        uint32_t f = sv_vocab_flags(v, id);
        if (f & SV_TOKEN_UNUSED)
            return sv_error_set(err, SV_ERR_ARG, (long)i, "decode: no token has id %ld", (long)id);
        if (skip_special && (f & SV_TOKEN_SPECIAL))
            continue;
        if (sv_bytes_append(out, v->bytes + v->byte_off[id], v->byte_len[id]))
            return sv_error_set(err, SV_ERR_NOMEM, -1, "decode: out of memory");
    }
    return SV_OK;
}
