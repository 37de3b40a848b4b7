/* bpe.c — the BPE encoder: the pipeline of bpe.h and the merge loop.
 *
 * Merging. A piece of n bytes starts as n symbols (one per byte-level
 * character), kept in a doubly linked list. Every adjacent pair that has a
 * merge goes into a binary min-heap ordered by (rank, position). Popping
 * the best pair merges it if it is still current (both symbols alive and
 * the pair still merges into the same token), then pushes the new pairs it
 * forms with its neighbours. That is O(n log n) per piece and reproduces
 * tokenizers' Word::merge_all exactly, including which of two equal-rank
 * pairs goes first (the leftmost) and its staleness test (same new id).
 *
 * The merge table is an open-addressing hash from the pair of ids to (rank,
 * new id); a merge listed twice keeps its later rank, as tokenizers'
 * HashMap does. Pieces of up to CACHE_KEY bytes are cached per scratch in a
 * direct-mapped table (a collision overwrites), which skips the merge loop
 * for the words and punctuation that text repeats. */
#include "bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "added.h"
#include "bytelevel.h"
#include "nfc.h"
#include "pretok.h"
#include "src/tokenizer/internal/vocab_internal.h"
#include "util/hash.h"
#include "util/utf8.h"

#define CACHE_SLOTS 4096
#define CACHE_KEY 24
#define CACHE_IDS 12

typedef struct {
    uint64_t key;      /* left id << 32 | right id; UINT64_MAX = empty */
    uint32_t rank;
    int32_t id;
} merge_t;

struct sv_bpe {
    const sv_vocab_t *v;
    sv_pretok_t *pretok;
    sv_added_t *added_raw, *added_norm;
    merge_t *merges;
    uint64_t merge_mask;
    int32_t byte_id[256];      /* byte-level: the id of the character spelling each byte */
    int32_t fallback_id[256];  /* byte_fallback: the id of <0xNN>, else -1 */
};

typedef struct {
    uint64_t hash;
    uint8_t key_len, n_ids;    /* key_len 0: empty */
    uint8_t key[CACHE_KEY];
    int32_t ids[CACHE_IDS];
} cache_slot_t;

typedef struct {
    uint32_t rank, pos;
    int32_t id;
} heap_t;

struct sv_bpe_scratch {
    const sv_bpe_t *b;
    sv_pretok_scratch_t pt;
    sv_bytes_t norm, nfc_work, word;
    sv_bytes_t meta;                                  /* text with spaces spelled U+2581 */
    int32_t *sym_id, *sym_prev, *sym_next, *sym_len;  /* (cap) the symbol list */
    heap_t *heap;                                     /* (cap) */
    size_t cap;
    cache_slot_t *cache;                              /* (CACHE_SLOTS) */
};

/* ---- the merge table ---------------------------------------------------- */

static const merge_t *find_merge(const sv_bpe_t *b, int32_t left, int32_t right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint64_t i = sv_hash_u64(key) & b->merge_mask;; i = (i + 1) & b->merge_mask) {
        const merge_t *m = &b->merges[i];
        if (m->key == key)
            return m;
        if (m->key == UINT64_MAX)
            return NULL;
    }
}

static sv_status build_merges(sv_bpe_t *b, sv_error_t *err) {
    const sv_vocab_t *v = b->v;
    uint64_t size = 16;
    while (size < 2 * (uint64_t)v->n_merges + 2)
        size *= 2;
    b->merges = malloc(size * sizeof *b->merges);
    if (!b->merges)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "bpe: out of memory");
    for (uint64_t i = 0; i < size; i++)
        b->merges[i].key = UINT64_MAX;
    b->merge_mask = size - 1;
    char buf[2 * SV_VOCAB_MAX_TOKEN_BYTES];
    for (uint32_t r = 0; r < v->n_merges; r++) {
        int32_t l = v->merges[r][0], rt = v->merges[r][1];
        uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)rt;
        uint64_t i = sv_hash_u64(key) & b->merge_mask;
        while (b->merges[i].key != UINT64_MAX && b->merges[i].key != key)
            i = (i + 1) & b->merge_mask;
        /* The merged token: vocab.c checked that it exists. */
        uint32_t ln = v->str_len[l], rn = v->str_len[rt];
        memcpy(buf, v->strs + v->str_off[l], ln);
        memcpy(buf + ln, v->strs + v->str_off[rt], rn);
        b->merges[i].key = key;
        b->merges[i].rank = v->merge_ranks ? v->merge_ranks[r] : r;
        b->merges[i].id = sv_vocab_lookup(v, buf, ln + rn);
    }
    return SV_OK;
}

/* ---- create / destroy --------------------------------------------------- */

sv_status sv_bpe_create(const sv_vocab_t *v, sv_bpe_t **out, sv_error_t *err) {
    *out = NULL;
    const char *why = sv_vocab_encoder_support(v);
    if (why)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "%s", why);
    sv_bpe_t *b = calloc(1, sizeof *b);
    if (!b)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "bpe: out of memory");
    b->v = v;
    sv_status st;
    if ((st = sv_pretok_create(v, &b->pretok, err)) ||
        (st = sv_added_create(v, false, &b->added_raw, err)) ||
        (st = sv_added_create(v, true, &b->added_norm, err)) || (st = build_merges(b, err)))
        goto fail;
    for (int c = 0; c < 256; c++) {
        uint8_t u[4];
        int k = sv_utf8_encode(sv_bytelevel_char((uint8_t)c), u);
        b->byte_id[c] = sv_vocab_lookup(v, (const char *)u, (size_t)k);
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", c);
        b->fallback_id[c] = v->byte_fallback ? sv_vocab_lookup(v, name, 6) : -1;
    }
    *out = b;
    return SV_OK;
fail:
    sv_bpe_destroy(b);
    return st;
}

void sv_bpe_destroy(sv_bpe_t *b) {
    if (!b)
        return;
    sv_pretok_destroy(b->pretok);
    sv_added_destroy(b->added_raw);
    sv_added_destroy(b->added_norm);
    free(b->merges);
    free(b);
}

const sv_vocab_t *sv_bpe_vocab(const sv_bpe_t *b) { return b->v; }

sv_status sv_bpe_scratch_create(const sv_bpe_t *b, sv_bpe_scratch_t **out, sv_error_t *err) {
    *out = NULL;
    sv_bpe_scratch_t *s = calloc(1, sizeof *s);
    if (!s)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "bpe: out of memory");
    s->b = b;
    s->cache = calloc(CACHE_SLOTS, sizeof *s->cache);
    if (!s->cache || sv_pretok_scratch_init(b->pretok, &s->pt)) {
        sv_bpe_scratch_destroy(s);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "bpe: out of memory");
    }
    *out = s;
    return SV_OK;
}

void sv_bpe_scratch_destroy(sv_bpe_scratch_t *s) {
    if (!s)
        return;
    sv_pretok_scratch_free(&s->pt);
    sv_bytes_free(&s->norm);
    sv_bytes_free(&s->nfc_work);
    sv_bytes_free(&s->word);
    sv_bytes_free(&s->meta);
    free(s->sym_id);
    free(s->sym_prev);
    free(s->sym_next);
    free(s->sym_len);
    free(s->heap);
    free(s->cache);
    free(s);
}

/* ---- one piece ---------------------------------------------------------- */

static sv_status reserve_symbols(sv_bpe_scratch_t *s, size_t n) {
    if (n <= s->cap)
        return SV_OK;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n)
        cap *= 2;
    int32_t *a = realloc(s->sym_id, cap * sizeof *a);
    if (!a) return SV_ERR_NOMEM;
    s->sym_id = a;
    if (!(a = realloc(s->sym_prev, cap * sizeof *a))) return SV_ERR_NOMEM;
    s->sym_prev = a;
    if (!(a = realloc(s->sym_next, cap * sizeof *a))) return SV_ERR_NOMEM;
    s->sym_next = a;
    if (!(a = realloc(s->sym_len, cap * sizeof *a))) return SV_ERR_NOMEM;
    s->sym_len = a;
    /* Each merge pushes at most two pairs: the heap holds fewer than 3n. */
    heap_t *h = realloc(s->heap, 3 * cap * sizeof *h);
    if (!h) return SV_ERR_NOMEM;
    s->heap = h;
    s->cap = cap;
    return SV_OK;
}

static bool heap_less(const heap_t *a, const heap_t *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(heap_t *h, size_t *n, heap_t e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static heap_t heap_pop(heap_t *h, size_t *n) {
    heap_t top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c]))
            c++;
        if (!heap_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

static void push_pair(const sv_bpe_t *b, sv_bpe_scratch_t *s, size_t *hn, int32_t pos) {
    int32_t next = s->sym_next[pos];
    if (next < 0)
        return;
    const merge_t *m = find_merge(b, s->sym_id[pos], s->sym_id[next]);
    if (m)
        heap_push(s->heap, hn, (heap_t){m->rank, (uint32_t)pos, m->id});
}

/* Adds one initial symbol. */
static void add_symbol(sv_bpe_scratch_t *s, size_t *n, int32_t id, int32_t len) {
    size_t i = (*n)++;
    s->sym_id[i] = id;
    s->sym_len[i] = len;
    s->sym_prev[i] = (int32_t)i - 1;
    s->sym_next[i] = -1;
    if (i > 0)
        s->sym_next[i - 1] = (int32_t)i;
}

/* Tokenizes one word into ids appended to out: w[0..wn) is the word in the
 * model's spelling (the byte-level alphabet, or the text itself), raw the
 * bytes it spells (byte-level only). */
static sv_status encode_word(const sv_bpe_t *b, sv_bpe_scratch_t *s, const uint8_t *w, size_t wn,
                             const uint8_t *raw, sv_ids_t *out) {
    const sv_vocab_t *v = b->v;
    if (v->ignore_merges) {
        int32_t id = sv_vocab_lookup(v, (const char *)w, wn);
        if (id >= 0)
            return sv_ids_push(out, id);
    }
    /* At most one symbol per byte of the word (byte fallback: per byte of a
     * character's spelling). */
    if (reserve_symbols(s, wn + 1))
        return SV_ERR_NOMEM;
    size_t n = 0;
    int32_t unk = -1, unk_len = 0;
    for (size_t i = 0, j = 0; i < wn; j++) {
        uint32_t cp;
        int k = sv_utf8_decode(w + i, wn - i, &cp);
        if (!k)
            k = 1;
        /* Byte-level words spell raw byte j with character j. */
        int32_t id = v->byte_level ? b->byte_id[raw[j]] : sv_vocab_lookup(v, (const char *)w + i, (size_t)k);
        if (id >= 0) {
            if (unk >= 0) {
                add_symbol(s, &n, unk, unk_len);
                unk = -1;
            }
            add_symbol(s, &n, id, k);
        } else {
            bool done = false;
            if (v->byte_fallback) {
                /* <0xNN> for each byte of the character's spelling. As in
                 * tokenizers, a pending unknown is not flushed first. */
                done = true;
                for (int q = 0; q < k; q++)
                    done &= b->fallback_id[w[i + q]] >= 0;
                for (int q = 0; done && q < k; q++)
                    add_symbol(s, &n, b->fallback_id[w[i + q]], 1);
            }
            if (!done && v->unk_id >= 0) {
                if (unk >= 0 && v->fuse_unk) {
                    unk_len += k;
                } else {
                    if (unk >= 0)
                        add_symbol(s, &n, unk, unk_len);
                    unk = v->unk_id;
                    unk_len = k;
                }
            }
            /* Neither: tokenizers drops the character. */
        }
        i += (size_t)k;
    }
    if (unk >= 0)
        add_symbol(s, &n, unk, unk_len);

    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(b, s, &hn, (int32_t)i);
    while (hn) {
        heap_t top = heap_pop(s->heap, &hn);
        int32_t pos = (int32_t)top.pos;
        if (s->sym_len[pos] == 0)
            continue;
        int32_t next = s->sym_next[pos];
        if (next < 0)
            continue;
        const merge_t *m = find_merge(b, s->sym_id[pos], s->sym_id[next]);
        if (!m || m->id != top.id)
            continue;  /* stale: the pair changed since it was pushed */
        s->sym_id[pos] = top.id;
        s->sym_len[pos] += s->sym_len[next];
        s->sym_len[next] = 0;
        s->sym_next[pos] = s->sym_next[next];
        if (s->sym_next[next] >= 0)
            s->sym_prev[s->sym_next[next]] = pos;
        if (s->sym_prev[pos] >= 0)
            push_pair(b, s, &hn, s->sym_prev[pos]);
        push_pair(b, s, &hn, pos);
    }
    if (sv_ids_reserve(out, n))
        return SV_ERR_NOMEM;
    for (int32_t i = n ? 0 : -1; i >= 0; i = s->sym_next[i])
        out->v[out->n++] = s->sym_id[i];
    return SV_OK;
}

/* Encodes one pre-tokenizer piece (raw bytes), through the cache. */
static sv_status encode_piece(const sv_bpe_t *b, sv_bpe_scratch_t *s, const uint8_t *p, size_t n,
                              sv_ids_t *out) {
    const sv_vocab_t *v = b->v;
    cache_slot_t *slot = NULL;
    uint64_t h = 0;
    if (n <= CACHE_KEY) {
        h = sv_hash_bytes(p, n);
        slot = &s->cache[h & (CACHE_SLOTS - 1)];
        if (slot->key_len == n && slot->hash == h && memcmp(slot->key, p, n) == 0) {
            if (sv_ids_reserve(out, slot->n_ids))
                return SV_ERR_NOMEM;
            if (slot->n_ids)
                memcpy(out->v + out->n, slot->ids, slot->n_ids * sizeof(int32_t));
            out->n += slot->n_ids;
            return SV_OK;
        }
    }
    const uint8_t *w = p;
    size_t wn = n;
    if (v->byte_level) {
        s->word.n = 0;
        if (sv_bytes_reserve(&s->word, 2 * n))
            return SV_ERR_NOMEM;
        for (size_t i = 0; i < n; i++)
            s->word.n += (size_t)sv_utf8_encode(sv_bytelevel_char(p[i]), s->word.p + s->word.n);
        w = s->word.p;
        wn = s->word.n;
    }
    size_t before = out->n;
    sv_status st = encode_word(b, s, w, wn, p, out);
    if (st || !slot)
        return st;
    size_t k = out->n - before;
    if (k <= CACHE_IDS) {
        slot->hash = h;
        slot->key_len = (uint8_t)n;
        slot->n_ids = (uint8_t)k;
        memcpy(slot->key, p, n);
        if (k) /* a word may give no ids (a vocabulary without its bytes): out->v may be NULL */
            memcpy(slot->ids, out->v + before, k * sizeof(int32_t));
    }
    return SV_OK;
}

/* ---- the pipeline ------------------------------------------------------- */

typedef struct {
    const sv_bpe_t *b;
    sv_bpe_scratch_t *s;
    bool skip_special;
    sv_ids_t *ids;     /* encode: the output; NULL when normalizing */
    sv_bytes_t *text;  /* normalize: the output */
    sv_error_t *err;
    const uint8_t *start;     /* the input text */
    const uint8_t *seg_base;  /* the current (normalized) segment */
    bool seg_first;           /* it starts at the start of the input */
} run_t;

static sv_status oom(run_t *r) { return sv_error_set(r->err, SV_ERR_NOMEM, -1, "bpe: out of memory"); }

#define META "\xE2\x96\x81" /* U+2581 */

/* Writes t[0..n) to s->meta with spaces spelled U+2581, after a U+2581
 * when the vocabulary's prefix rule asks for one (vocab_internal.h). */
static sv_status meta_escape(run_t *r, const uint8_t *t, size_t n, bool first) {
    const sv_vocab_t *v = r->b->v;
    sv_bytes_t *m = &r->s->meta;
    bool spaced = n && (t[0] == ' ' || (n >= 3 && memcmp(t, META, 3) == 0));
    bool prefix = n && (v->meta_prefix == SV_META_PREFIX_EACH ||
                        (v->meta_prefix == SV_META_PREFIX_EACH_UNLESS_SPACE && !spaced) ||
                        (v->meta_prefix == SV_META_PREFIX_FIRST_UNLESS_SPACE && first && !spaced));
    m->n = 0;
    if (n > (SIZE_MAX - 3) / 3 || sv_bytes_reserve(m, 3 * n + 3))
        return oom(r);
    if (prefix) {
        memcpy(m->p, META, 3);
        m->n = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i] == ' ') {
            memcpy(m->p + m->n, META, 3);
            m->n += 3;
        } else {
            m->p[m->n++] = t[i];
        }
    }
    return SV_OK;
}

/* Appends t[0..n) to the normalize output, U+2581 written as the space it
 * decodes to when the vocabulary spells spaces that way. */
static sv_status put_text(run_t *r, const uint8_t *t, size_t n) {
    if (!r->b->v->meta_escape)
        return sv_bytes_append(r->text, t, n) ? oom(r) : SV_OK;
    for (size_t i = 0; i < n;) {
        bool meta = i + 3 <= n && memcmp(t + i, META, 3) == 0;
        if (sv_bytes_append(r->text, meta ? (const uint8_t *)" " : t + i, 1))
            return oom(r);
        i += meta ? 3 : 1;
    }
    return SV_OK;
}

/* Step 3 and 4 on a normalized stretch without added tokens. */
static sv_status encode_plain(run_t *r, const uint8_t *t, size_t n) {
    if (n == 0)
        return SV_OK;
    if (r->b->v->meta_escape && r->b->v->meta_at_pretok) {
        /* Metaspace: the pre-tokenizer spells spaces (and the prefix). */
        if (meta_escape(r, t, n, r->seg_first && t == r->seg_base))
            return oom(r);
        t = r->s->meta.p;
        n = r->s->meta.n;
    }
    if (!r->ids)
        return put_text(r, t, n);
    sv_status st = sv_pretok_split(r->b->pretok, &r->s->pt, t, n, r->err);
    if (st)
        return st;
    const sv_pretok_scratch_t *pt = &r->s->pt;
    for (size_t i = 0; i < pt->n; i++)
        if (encode_piece(r->b, r->s, pt->pool.p + pt->pieces[i].off, pt->pieces[i].len, r->ids))
            return oom(r);
    return SV_OK;
}

/* Splits t by the added tokens of `a`, calling `plain` on the stretches
 * between them and emitting the tokens. */
static sv_status split_added(run_t *r, const sv_added_t *a, const uint8_t *t, size_t n,
                             sv_status (*plain)(run_t *, const uint8_t *, size_t)) {
    size_t floor = 0;
    for (;;) {
        size_t ms, me;
        int32_t id;
        bool found = !sv_added_empty(a) &&
                     sv_added_next(a, r->s->pt.md, t, n, floor, floor, r->skip_special, &ms, &me, &id);
        size_t gap_end = found ? ms : n;
        if (gap_end > floor) {
            sv_status st = plain(r, t + floor, gap_end - floor);
            if (st)
                return st;
        }
        if (!found)
            return SV_OK;
        if (r->ids ? sv_ids_push(r->ids, id) : sv_bytes_append(r->text, t + ms, me - ms))
            return oom(r);
        floor = me;
    }
}

/* Step 2 on a raw stretch without (non-normalized) added tokens. */
static sv_status encode_segment(run_t *r, const uint8_t *t, size_t n) {
    sv_bpe_scratch_t *s = r->s;
    bool first = t == r->start;
    if (r->b->v->nfc && !sv_nfc_quick_check(t, n)) {
        s->norm.n = 0;
        if (sv_nfc_append(t, n, &s->norm, &s->nfc_work))
            return oom(r);
        t = s->norm.p;
        n = s->norm.n;
    }
    if (r->b->v->meta_escape && !r->b->v->meta_at_pretok) {
        /* Prepend("▁") + Replace(" ", "▁") normalizers. */
        if (meta_escape(r, t, n, first))
            return oom(r);
        t = s->meta.p;
        n = s->meta.n;
    }
    r->seg_base = t;
    r->seg_first = first;
    return split_added(r, r->b->added_norm, t, n, encode_plain);
}

static sv_status run(run_t *r, const char *text, size_t len) {
    if (len > SV_BPE_MAX_INPUT)
        return sv_error_set(r->err, SV_ERR_BUDGET, -1, "encode: input of %zu bytes is over the limit (%u)",
                            len, SV_BPE_MAX_INPUT);
    const uint8_t *t = (const uint8_t *)text;
    r->start = t;
    size_t bad = sv_utf8_check(t, len);
    if (bad != len)
        return sv_error_set(r->err, SV_ERR_ARG, (long)bad, "encode: invalid UTF-8 at byte %zu", bad);
    return split_added(r, r->b->added_raw, t, len, encode_segment);
}

sv_status sv_bpe_encode(const sv_bpe_t *b, sv_bpe_scratch_t *s, const char *text, size_t len,
                        uint32_t flags, sv_ids_t *out, sv_error_t *err) {
    run_t r = {b, s, (flags & SV_BPE_SPECIAL_AS_TEXT) != 0, out, NULL, err, NULL, NULL, false};
    return run(&r, text, len);
}

sv_status sv_bpe_normalize(const sv_bpe_t *b, sv_bpe_scratch_t *s, const char *text, size_t len,
                           uint32_t flags, sv_bytes_t *out, sv_error_t *err) {
    run_t r = {b, s, (flags & SV_BPE_SPECIAL_AS_TEXT) != 0, NULL, out, err, NULL, NULL, false};
    return run(&r, text, len);
}
