/* added.c — the added-token matcher (see added.h).
 *
 * A byte trie of the token contents: node 0 is the root, whose children are
 * found through a 256-entry table; deeper nodes keep a sibling list. From
 * each position the walk follows the text as far as the trie goes and
 * remembers the last node that ends a token, which gives leftmost-longest
 * matches. The first bytes of added tokens are few ('<' mostly), so most
 * positions cost one table look-up. */
#include "added.h"

#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

typedef struct {
    int32_t child;     /* first child, or -1 */
    int32_t sibling;   /* next sibling, or -1 */
    int32_t token;     /* index into v->added of the token ending here, or -1 */
    uint8_t byte;
} node_t;

struct sv_added {
    const sv_vocab_t *v;
    node_t *nodes;
    uint32_t n_nodes, cap;
    int32_t root[256];
    uint32_t n_tokens;
    pcre2_code *word;  /* one word character, for single_word; NULL when unused */
};

static int32_t new_node(sv_added_t *a, uint8_t byte) {
    if (a->n_nodes == a->cap) {
        uint32_t cap = a->cap ? 2 * a->cap : 256;
        node_t *p = realloc(a->nodes, cap * sizeof *p);
        if (!p)
            return -1;
        a->nodes = p;
        a->cap = cap;
    }
    node_t *n = &a->nodes[a->n_nodes];
    n->child = n->sibling = n->token = -1;
    n->byte = byte;
    return (int32_t)a->n_nodes++;
}

static int32_t child(const sv_added_t *a, int32_t node, uint8_t b) {
    if (node < 0)
        return a->root[b];
    for (int32_t c = a->nodes[node].child; c >= 0; c = a->nodes[c].sibling)
        if (a->nodes[c].byte == b)
            return c;
    return -1;
}

sv_status sv_added_create(const sv_vocab_t *v, bool normalized, sv_added_t **out, sv_error_t *err) {
    sv_added_t *a = calloc(1, sizeof *a);
    if (!a)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "added tokens: out of memory");
    a->v = v;
    for (int i = 0; i < 256; i++)
        a->root[i] = -1;
    bool single_word = false;
    for (uint32_t t = 0; t < v->n_added; t++) {
        const sv_added_token_t *tok = &v->added[t];
        if (tok->normalized != normalized)
            continue;
        const uint8_t *s = (const uint8_t *)v->strs + tok->off;
        int32_t node = -1;
        for (uint32_t i = 0; i < tok->len; i++) {
            int32_t c = child(a, node, s[i]);
            if (c < 0) {
                c = new_node(a, s[i]);
                if (c < 0)
                    goto oom;
                if (node < 0) {
                    a->root[s[i]] = c;
                } else {
                    a->nodes[c].sibling = a->nodes[node].child;
                    a->nodes[node].child = c;
                }
            }
            node = c;
        }
        /* Two added tokens with the same content: the later one wins, as
         * in tokenizers' content-to-id map. */
        a->nodes[node].token = (int32_t)t;
        a->n_tokens++;
        single_word |= tok->single_word;
    }
    if (single_word) {
        /* The regex crate's \w (tokenizers checks word boundaries with it):
         * alphabetic, marks, decimal digits, connector punctuation, joiners. */
        int code;
        PCRE2_SIZE off;
        a->word = pcre2_compile((PCRE2_SPTR) "[\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{200C}\\x{200D}]",
                                PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
        if (!a->word)
            goto oom;
    }
    *out = a;
    return SV_OK;
oom:
    sv_added_destroy(a);
    return sv_error_set(err, SV_ERR_NOMEM, -1, "added tokens: out of memory");
}

void sv_added_destroy(sv_added_t *a) {
    if (!a)
        return;
    free(a->nodes);
    pcre2_code_free(a->word);
    free(a);
}

bool sv_added_empty(const sv_added_t *a) { return a->n_tokens == 0; }

/* The regex crate's \s: the White_Space property. */
static bool is_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

/* Whether the character at s[i] is a word character. */
static bool word_at(const sv_added_t *a, pcre2_match_data *md, const uint8_t *s, size_t n, size_t i) {
    uint32_t cp;
    int k = sv_utf8_decode(s + i, n - i, &cp);
    if (!k)
        return false;
    return pcre2_match(a->word, s + i, (size_t)k, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md,
                       NULL) >= 0;
}

static size_t char_before(const uint8_t *s, size_t i) {
    do
        i--;
    while (i > 0 && (s[i] & 0xC0) == 0x80);
    return i;
}

bool sv_added_next(const sv_added_t *a, pcre2_match_data *md, const uint8_t *s, size_t n,
                   size_t from, size_t floor, bool skip_special, size_t *start, size_t *end,
                   int32_t *id) {
    const sv_vocab_t *v = a->v;
    size_t i = from;
    while (i < n) {
        int32_t node = a->root[s[i]];
        if (node < 0) {
            i++;
            continue;
        }
        int32_t best = -1;
        size_t best_end = 0;
        for (size_t j = i + 1;; j++) {
            if (a->nodes[node].token >= 0) {
                best = a->nodes[node].token;
                best_end = j;
            }
            if (j == n || (node = child(a, node, s[j])) < 0)
                break;
        }
        if (best < 0) {
            i++;
            continue;
        }
        const sv_added_token_t *t = &v->added[best];
        size_t ms = i, me = best_end;
        /* The automaton goes on after the match whether or not the match
         * is kept (tokenizers' leftmost_find_iter). */
        i = best_end;
        if (skip_special && t->special)
            continue;
        if (t->single_word) {
            bool left_ok = ms == 0 || !word_at(a, md, s, n, char_before(s, ms));
            bool right_ok = me == n || !word_at(a, md, s, n, me);
            if (!left_ok || !right_ok)
                continue;
        }
        if (t->lstrip) {
            size_t k = ms;
            while (k > 0) {
                size_t p = char_before(s, k);
                uint32_t cp;
                if (!sv_utf8_decode(s + p, n - p, &cp) || !is_space(cp))
                    break;
                k = p;
            }
            ms = k > floor ? k : floor;
        }
        if (t->rstrip) {
            uint32_t cp;
            int k;
            while (me < n && (k = sv_utf8_decode(s + me, n - me, &cp)) && is_space(cp))
                me += (size_t)k;
        }
        *start = ms;
        *end = me;
        *id = t->id;
        return true;
    }
    return false;
}
