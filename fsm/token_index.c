/* token_index.c — vocabulary tries and memoized per-state token masks.
 *
 * The trie is stored in depth-first preorder as parallel arrays: node i has
 * the byte on its incoming edge, its depth (1 for children of the root) and
 * skip[i], the index just past its subtree. A walk from DFA state s is then
 * one forward scan: node i's parent state is stack[depth - 1]; if the DFA
 * dies on the node's byte, the scan jumps to skip[i], pruning every token
 * below it. Tokens with equal bytes hang off the same node.
 *
 * Masks are memoized per (state, whitespace bucket) in an array of atomic
 * pointers: a reader that finds a pointer uses it without locking; a miss
 * takes the lock, computes the mask into a scratch buffer, and looks it up
 * in a hash table of the distinct masks before storing a copy. */
#include "token_index.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dfa_internal.h"
#include "token_index_internal.h"

/* ---- token sets ------------------------------------------------------------ */


#define ROOT_CACHE 64
#define LOOP_CACHE 16
#define ROOT_MIN_LOOP 16   /* ASCII self-loop bytes for a root mask to pay off */

/* A root signature: from the walk's state s0, the ASCII bytes first[] lead
 * to one state c (and, with utf8_first, so does every multi-byte
 * character); at c the ASCII bytes loop[] (and, with utf8_loop, every
 * multi-byte character) lead back to c. Every token whose first character
 * is one of those and whose other characters loop is then allowed. */
typedef struct root_sig {
    uint64_t first[2], loop[2];
    uint8_t utf8_first, utf8_loop;
} root_sig_t;

/* Entries shared through an LRU of the token set (under root_lock): refs
 * counts the walks using one, so an entry evicted meanwhile is freed by its
 * last user. */
typedef struct shared {
    uint32_t refs;
    bool evicted;
} shared_t;

/* Per signature: the tokens it allows alone (a first character, then
 * looping ones; the last one may be cut short when characters loop). */
typedef struct root_entry {
    shared_t h;
    root_sig_t sig;
    uint32_t *mask;
} root_entry_t;

/* Per loop set (loop[], utf8_loop), whatever the first set: tokens merged
 * by what follows their looping characters. A token whose first character
 * is whole and whose other characters do not all loop is split after the
 * first character and the longest looping prefix of the rest; the trie
 * holds (first byte, what follows), a multi-byte first character labeled by
 * its lead byte. From a state s0 with this signature, the DFA is in c after
 * such a prefix, so each (first byte, tail) is walked once, from c, and
 * only under the first bytes that lead s0 to c. For string content, the
 * 128k tokens of Llama 3 leave about 3,300 such tokens, under 2,000 trie
 * nodes. Built only when at most TAIL_MAX_ENTRIES tokens have a tail and
 * the trie stays under TAIL_MAX_NODES; otherwise the walk uses the main
 * trie. */
typedef struct loop_entry {
    shared_t h;
    uint64_t loop[2];
    uint8_t utf8_loop;
    bool have_tails;
    tail_trie_t tails;
    /* the tokens whose first character is whole and the rest loops, with
     * an ASCII first character and with a multi-byte one (with tails) */
    uint32_t *rl_ascii, *rl_high;
    /* For chains (a string with maxLength counts its characters in states
     * that each step to the next on the same byte set): tokens merged by
     * (number of characters of their longest all-loop prefix, what
     * follows). Built on first use (chain_built, under root_lock). longs:
     * the all-loop tokens longer than CHAIN_MIN_RUN characters, longest
     * first, with their character counts. short_gt: for k below
     * CHAIN_MIN_RUN, the bitset (words each) of the all-loop tokens of more
     * than k characters, which a chain of k characters left takes out. */
    bool chain_built, have_chain;
    tail_trie_t ktails;
    int32_t *long_ids;
    uint16_t *long_chars;
    uint32_t nlongs;
    uint32_t *short_gt;
} loop_entry_t;

#define TAIL_MAX_ENTRIES 16384u
#define CHAIN_MIN_RUN 16u  /* a chain shorter than this (near its end) takes its tokens out by bitsets */
#define TAIL_MAX_NODES 32768u


#define SUMMARY_MIN 2

static bool is_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

static const sv_token_set_t *g_sort_ts; /* qsort has no context argument in C11 */

static int cmp_tok(const void *a, const void *b) {
    const sv_token_set_t *ts = g_sort_ts;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = ts->len[x], ly = ts->len[y];
    int c = memcmp(ts->buf + ts->off[x], ts->buf + ts->off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void tail_trie_free(tail_trie_t *t) {
    if (!t) return;
    free(t->nodes);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

static void root_entry_free(void *p) {
    root_entry_t *e = p;
    if (!e) return;
    free(e->mask);
    free(e);
}

static void loop_entry_free(void *p) {
    loop_entry_t *e = p;
    if (!e) return;
    tail_trie_free(&e->tails);
    tail_trie_free(&e->ktails);
    free(e->long_ids);
    free(e->long_chars);
    free(e->short_gt);
    free(e->rl_ascii);
    free(e->rl_high);
    free(e);
}

void sv_token_set_destroy(sv_token_set_t *ts) {
    if (!ts) return;
    free(ts->kind);
    free(ts->off);
    free(ts->len);
    free(ts->buf);
    free(ts->ws_lead);
    free(ts->ws_trail);
    free(ts->ws_max);
    free(ts->ws_all);
    free(ts->eog);
    free(ts->nbyte);
    free(ts->ndepth);
    free(ts->nskip);
    free(ts->ntok_lo);
    free(ts->ntok_n);
    free(ts->sorted);
    free(ts->nsum);
    free(ts->sums);
    free(ts->sorted_len);
    free(ts->nodes);
    free(ts->tok_ascii);
    free(ts->tok_first);
    free(ts->tok_root_ok);
    free(ts->tok_high);
    for (uint32_t i = 0; i < ts->nroots; i++) root_entry_free(ts->roots[i]);
    free(ts->roots);
    for (uint32_t i = 0; i < ts->nloops; i++) loop_entry_free(ts->loops[i]);
    free(ts->loops);
    tail_trie_free(ts->partial);
    free(ts->partial);
    pthread_mutex_destroy(&ts->root_lock);
    free(ts);
}

static bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }
static void build_partial(sv_token_set_t *ts);

/* A character's first byte c: how many continuation bytes follow (*n, 0
 * for ASCII) and the range [*lo, *hi] of the first of them (UTF-8's rules
 * against overlong forms, surrogates and code points past U+10FFFF). False
 * for a byte that cannot start a character. */
static bool utf8_lead(uint8_t c, uint32_t *n, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80, *hi = 0xBF;
    if (c < 0x80) *n = 0;
    else if (c >= 0xC2 && c <= 0xDF) *n = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        *n = 2;
        if (c == 0xE0) *lo = 0xA0;
        if (c == 0xED) *hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        *n = 3;
        if (c == 0xF0) *lo = 0x90;
        if (c == 0xF4) *hi = 0x8F;
    } else return false;
    return true;
}

/* Whether b[p..len) is UTF-8 starting at a character boundary; the last
 * character may be cut short. */
static bool utf8_from(const uint8_t *b, uint32_t len, uint32_t p) {
    while (p < len) {
        uint32_t n;
        uint8_t lo, hi;
        if (!utf8_lead(b[p], &n, &lo, &hi)) return false;
        p++;
        for (uint32_t k = 0; k < n && p < len; k++, p++) {
            if (k == 0 ? (b[p] < lo || b[p] > hi) : !is_cont(b[p])) return false;
        }
    }
    return true;
}

/* The smallest p from which the token is UTF-8 from a boundary (len when
 * none); from any later p at a non-continuation byte it is too. */
static uint32_t utf8_start(const uint8_t *b, uint32_t len) {
    for (uint32_t p = 0; p < len; p++)
        if (!is_cont(b[p]) && utf8_from(b, len, p)) return p;
    return len;
}

/* Subtree summaries. The first token at or below node i is the first one
 * whose node is >= i (preorder), so a subtree's tokens are the sorted range
 * [first(i), first(skip[i])). */
static sv_status build_summaries(sv_token_set_t *ts, sv_error_t *err) {
    uint32_t nn = ts->nnodes;
    uint32_t *first = malloc(((size_t)nn + 1) * sizeof *first);
    ts->nsum = malloc((nn ? nn : 1) * sizeof *ts->nsum);
    if (!first || !ts->nsum) {
        free(first);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building the vocabulary trie");
    }
    uint32_t ntok = 0;
    for (uint32_t i = 0; i < nn; i++) ntok += ts->ntok_n[i];
    first[nn] = ntok;
    for (uint32_t i = nn; i-- > 0;) first[i] = ts->ntok_n[i] ? ts->ntok_lo[i] : first[i + 1];
    uint32_t count = 0;
    for (uint32_t i = 0; i < nn; i++) {
        uint32_t k = first[ts->nskip[i]] - first[i];
        ts->nsum[i] = k >= SUMMARY_MIN && ts->nskip[i] - i > 1 ? count++ : UINT32_MAX;
    }
    ts->nsums = count;
    ts->sums = calloc(count ? count : 1, sizeof *ts->sums);
    ts->sorted_len = malloc((ntok ? ntok : 1) * sizeof *ts->sorted_len);
    if (ts->sums)
        for (uint32_t j = 0; j < count; j++) ts->sums[j].utf8 = 1;
    if (ts->sorted_len)
        for (uint32_t j = 0; j < ntok; j++) ts->sorted_len[j] = (uint16_t)ts->len[ts->sorted[j]];
    if (!ts->sums || !ts->sorted_len) {
        free(first);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building the vocabulary trie");
    }
    /* Bytes below each summarized node: walk backwards, OR-ing each node's
     * byte into every summarized ancestor. Ancestors are on a stack. */
    uint32_t *anc = malloc((ts->max_len + 1) * sizeof *anc);
    if (!anc) {
        free(first);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building the vocabulary trie");
    }
    for (uint32_t i = 0; i < nn; i++) {
        uint32_t d = ts->ndepth[i];
        anc[d] = i;
        uint8_t b = ts->nbyte[i];
        for (uint32_t a = 1; a <= d; a++) {
            uint32_t si = ts->nsum[anc[a]];
            if (si != UINT32_MAX) ts->sums[si].bytes[b >> 6] |= 1ull << (b & 63);
        }
        if (ts->nsum[i] != UINT32_MAX) {
            ts->sums[ts->nsum[i]].lo = first[i];
            ts->sums[ts->nsum[i]].hi = first[ts->nskip[i]];
            if (is_cont(b)) ts->sums[ts->nsum[i]].utf8 = 0;
        }
        for (uint32_t k = 0; k < ts->ntok_n[i]; k++) {
            int32_t id = ts->sorted[ts->ntok_lo[i] + k];
            uint32_t v = utf8_start(ts->buf + ts->off[id], ts->len[id]);
            for (uint32_t a = 1; a <= d; a++) {
                uint32_t si = ts->nsum[anc[a]];
                if (si == UINT32_MAX) continue;
                if (v > a - 1) ts->sums[si].utf8 = 0;
                if (ts->len[id] > ts->sums[si].maxlen) ts->sums[si].maxlen = (uint16_t)ts->len[id];
            }
        }
    }
    free(anc);
    free(first);
    ts->nodes = malloc((nn ? nn : 1) * sizeof *ts->nodes);
    if (!ts->nodes) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building the vocabulary trie");
    for (uint32_t i = 0; i < nn; i++)
        ts->nodes[i] = (node_t){ts->nskip[i], ts->ndepth[i], ts->nbyte[i],
                                (uint8_t)((ts->ntok_n[i] ? NODE_TOKENS : 0) | (ts->nsum[i] != UINT32_MAX ? NODE_SUMMARY : 0))};
    return SV_OK;
}

static pthread_mutex_t g_sort_lock = PTHREAD_MUTEX_INITIALIZER;

static sv_status build_trie(sv_token_set_t *ts, sv_error_t *err) {
    uint32_t nsorted = 0;
    size_t total = 0;
    for (uint32_t i = 0; i < ts->n; i++)
        if (ts->kind[i] == SV_TOKKIND_NORMAL) nsorted++, total += ts->len[i];
    ts->sorted = malloc((nsorted ? nsorted : 1) * sizeof *ts->sorted);
    /* nodes <= total bytes */
    size_t cap = total ? total : 1;
    ts->nbyte = malloc(cap);
    ts->ndepth = malloc(cap * sizeof *ts->ndepth);
    ts->nskip = malloc(cap * sizeof *ts->nskip);
    ts->ntok_lo = malloc(cap * sizeof *ts->ntok_lo);
    ts->ntok_n = calloc(cap, sizeof *ts->ntok_n);
    if (!ts->sorted || !ts->nbyte || !ts->ndepth || !ts->nskip || !ts->ntok_lo || !ts->ntok_n)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building the vocabulary trie");
    uint32_t k = 0;
    for (uint32_t i = 0; i < ts->n; i++)
        if (ts->kind[i] == SV_TOKKIND_NORMAL) ts->sorted[k++] = (int32_t)i;
    pthread_mutex_lock(&g_sort_lock);
    g_sort_ts = ts;
    qsort(ts->sorted, nsorted, sizeof *ts->sorted, cmp_tok);
    ts->nsorted = nsorted;
    g_sort_ts = NULL;
    pthread_mutex_unlock(&g_sort_lock);

    uint32_t *path = malloc((ts->max_len + 1) * sizeof *path);
    if (!path) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building the vocabulary trie");
    uint32_t nn = 0, depth = 0;
    const uint8_t *prev = NULL;
    uint32_t prevlen = 0;
    for (uint32_t j = 0; j < nsorted; j++) {
        int32_t id = ts->sorted[j];
        const uint8_t *b = ts->buf + ts->off[id];
        uint32_t L = ts->len[id];
        uint32_t lcp = 0;
        if (prev)
            while (lcp < L && lcp < prevlen && b[lcp] == prev[lcp]) lcp++;
        for (uint32_t d = depth; d > lcp; d--) ts->nskip[path[d]] = nn;
        for (uint32_t d = lcp + 1; d <= L; d++) {
            ts->nbyte[nn] = b[d - 1];
            ts->ndepth[nn] = (uint16_t)d;
            path[d] = nn++;
        }
        depth = L;
        uint32_t node = path[L];
        if (ts->ntok_n[node] == 0) ts->ntok_lo[node] = j;
        if (ts->ntok_n[node] < UINT16_MAX) ts->ntok_n[node]++;
        prev = b;
        prevlen = L;
    }
    for (uint32_t d = depth; d > 0; d--) ts->nskip[path[d]] = nn;
    free(path);
    ts->nnodes = nn;
    return build_summaries(ts, err);
}

sv_status sv_token_set_create(uint32_t n, uint32_t mask_bits, const uint8_t *const *bytes, const uint32_t *lens,
                              const uint8_t *kinds, sv_token_set_t **out, sv_error_t *err) {
    *out = NULL;
    if (n == 0 || n > SV_TOKEN_SET_MAX_IDS)
        return sv_error_set(err, SV_ERR_ARG, -1, "a token set needs 1 to %u ids, not %u", SV_TOKEN_SET_MAX_IDS, n);
    if (mask_bits < n) mask_bits = n;
    if (mask_bits > SV_TOKEN_SET_MAX_IDS)
        return sv_error_set(err, SV_ERR_ARG, -1, "a logits row of %u entries is too long", mask_bits);
    sv_token_set_t *ts = calloc(1, sizeof *ts);
    if (!ts) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    pthread_mutex_init(&ts->root_lock, NULL);
    ts->n = n;
    ts->mask_bits = mask_bits;
    ts->words = (mask_bits + 31) / 32;
    ts->kind = malloc(n);
    ts->off = malloc(n * sizeof *ts->off);
    ts->len = malloc(n * sizeof *ts->len);
    ts->ws_lead = calloc(n, sizeof *ts->ws_lead);
    ts->ws_trail = calloc(n, sizeof *ts->ws_trail);
    ts->ws_max = calloc(n, sizeof *ts->ws_max);
    ts->ws_all = calloc(n, 1);
    ts->eog = malloc(n * sizeof *ts->eog);
    if (!ts->kind || !ts->off || !ts->len || !ts->ws_lead || !ts->ws_trail || !ts->ws_max || !ts->ws_all || !ts->eog) {
        sv_token_set_destroy(ts);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t k = kinds ? kinds[i] : SV_TOKKIND_NORMAL;
        uint32_t L = bytes && bytes[i] ? lens[i] : 0;
        if (k > SV_TOKKIND_EOG) {
            sv_token_set_destroy(ts);
            return sv_error_set(err, SV_ERR_ARG, i, "token %u has an unknown kind %u", i, k);
        }
        if (L > SV_TOKEN_SET_MAX_BYTES) {
            sv_token_set_destroy(ts);
            return sv_error_set(err, SV_ERR_ARG, i, "token %u is %u bytes long (the limit is %u)", i, L,
                                SV_TOKEN_SET_MAX_BYTES);
        }
        if (k == SV_TOKKIND_NORMAL && L == 0) k = SV_TOKKIND_NEVER;
        if (k != SV_TOKKIND_NORMAL) L = 0;
        ts->kind[i] = k;
        ts->len[i] = L;
        total += L;
        if (k == SV_TOKKIND_EOG) ts->eog[ts->neog++] = (int32_t)i;
    }
    ts->buf = malloc(total ? total : 1);
    if (!ts->buf) {
        sv_token_set_destroy(ts);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    bool seen[256] = {false};
    size_t o = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t L = ts->len[i];
        ts->off[i] = (uint32_t)o;
        if (!L) continue;
        memcpy(ts->buf + o, bytes[i], L);
        const uint8_t *b = ts->buf + o;
        o += L;
        if (L > ts->max_len) ts->max_len = L;
        if (L == 1) seen[b[0]] = true;
        uint32_t lead = 0, run = 0, mx = 0;
        while (lead < L && is_ws(b[lead])) lead++;
        for (uint32_t j = 0; j < L; j++) {
            run = is_ws(b[j]) ? run + 1 : 0;
            if (run > mx) mx = run;
        }
        ts->ws_lead[i] = (uint16_t)lead;
        ts->ws_trail[i] = (uint16_t)run;
        ts->ws_max[i] = (uint16_t)mx;
        ts->ws_all[i] = lead == L;
    }
    ts->tok_ascii = calloc(n, sizeof *ts->tok_ascii);
    ts->tok_first = calloc(n, 1);
    ts->tok_root_ok = calloc(n, 1);
    ts->tok_high = calloc(n, 1);
    ts->roots = calloc(ROOT_CACHE, sizeof *ts->roots);
    ts->loops = calloc(LOOP_CACHE, sizeof *ts->loops);
    if (!ts->tok_ascii || !ts->tok_first || !ts->tok_root_ok || !ts->tok_high || !ts->roots || !ts->loops) {
        sv_token_set_destroy(ts);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *b = ts->buf + ts->off[i];
        if (!ts->len[i]) continue;
        ts->tok_first[i] = b[0];
        for (uint32_t j = 0; j < ts->len[i]; j++) {
            if (b[j] < 0x80) {
                if (j) ts->tok_ascii[i][b[j] >> 6] |= 1ull << (b[j] & 63);
            } else {
                ts->tok_high[i] = 1;
            }
        }
        ts->tok_root_ok[i] = ts->len[i] && utf8_start(b, ts->len[i]) == 0;
    }
    ts->all_bytes = true;
    for (int b = 0; b < 256; b++) {
        ts->all_bytes &= seen[b];
        if (seen[b]) ts->single[b >> 6] |= 1ull << (b & 63);
    }
    sv_status st = build_trie(ts, err);
    if (!st) build_partial(ts); /* without it, walks take the main trie there */
    if (st) {
        sv_token_set_destroy(ts);
        return st;
    }
    *out = ts;
    return SV_OK;
}

uint32_t sv_token_set_size(const sv_token_set_t *ts) { return ts->n; }
uint32_t sv_token_set_mask_bits(const sv_token_set_t *ts) { return ts->mask_bits; }
uint32_t sv_token_set_mask_words(const sv_token_set_t *ts) { return ts->words; }
bool sv_token_set_has_all_bytes(const sv_token_set_t *ts) { return ts->all_bytes; }

/* Whether every state (every state of every part, for a program) has a
 * move on a shortest way to its end whose class holds a byte that is a
 * token on its own, or a call on a shortest way: then from any
 * configuration the bytes of some shortest completion are each one token,
 * and the distance in bytes bounds the tokens still needed. A vocabulary
 * with every byte as a token passes at once; SmolLM2's lacks 21 (six
 * controls, bytes no UTF-8 text holds, and the lead bytes 0xF1 and 0xF2),
 * which a JSON constraint's shortest completions need only where a
 * constant does. */
static bool dist_bounds_tokens(const sv_token_index_t *ix) {
    const sv_token_set_t *ts = ix->ts;
    if (ts->all_bytes) return true;
    const sv_dfa_t *d = ix->dfa;
    bool class_ok[256] = {false};
    for (int b = 0; b < 256; b++)
        if ((ts->single[b >> 6] >> (b & 63)) & 1) class_ok[d->classes[b]] = true;
    for (uint32_t x = 0; x < d->nstates; x++) {
        if (d->accept[x] || d->dist[x] == UINT32_MAX) continue;
        bool ok = false;
        const int32_t *row = d->trans + (size_t)x * d->nclasses;
        for (uint32_t c = 0; c < d->nclasses && !ok; c++)
            ok = row[c] >= 0 && class_ok[c] && d->dist[row[c]] != UINT32_MAX && d->dist[row[c]] + 1 == d->dist[x];
        for (uint32_t i = d->call_off ? d->call_off[x] : 0, e = d->call_off ? d->call_off[x + 1] : 0; i < e && !ok; i++)
            ok = (uint64_t)d->dist[d->calls[i].callee] + d->dist[d->calls[i].ret] == d->dist[x];
        if (!ok) return false;
    }
    return true;
}

bool sv_token_index_bytes_bound(const sv_token_index_t *ix) {
    sv_token_index_t *m = (sv_token_index_t *)ix;
    uint8_t v = atomic_load_explicit(&m->bytes_bound, memory_order_relaxed);
    if (!v) { /* a race computes it twice, to the same answer */
        v = dist_bounds_tokens(ix) ? 1 : 2;
        atomic_store_explicit(&m->bytes_bound, v, memory_order_relaxed);
    }
    return v == 1;
}
uint32_t sv_token_set_num_nodes(const sv_token_set_t *ts) { return ts->nnodes; }

const uint8_t *sv_token_set_bytes(const sv_token_set_t *ts, int32_t id, uint32_t *len) {
    if (id < 0 || (uint32_t)id >= ts->n || ts->kind[id] != SV_TOKKIND_NORMAL) {
        *len = 0;
        return NULL;
    }
    *len = ts->len[id];
    return ts->buf + ts->off[id];
}

uint8_t sv_token_set_kind(const sv_token_set_t *ts, int32_t id) {
    if (id < 0 || (uint32_t)id >= ts->n) return SV_TOKKIND_NEVER;
    return ts->kind[id];
}

/* ---- token indexes ----------------------------------------------------------- */



static bool state_utf8(const sv_token_index_t *ix, int32_t s);

enum { ST_LOOP = 1, ST_UTF8_KNOWN = 2, ST_UTF8 = 4, ST_UNI = 8, ST_UNI8_KNOWN = 16, ST_UNI8 = 32, ST_RUN = 64, ST_LIVE = 128 };

void sv_token_index_opts_default(sv_token_index_opts_t *o) {
    o->ws_cap = 0;
    o->max_mask_bytes = (size_t)256 << 20;
}

sv_status sv_token_index_create(sv_dfa_t *dfa, const sv_token_set_t *ts, const sv_token_index_opts_t *o,
                                sv_token_index_t **out, sv_error_t *err) {
    *out = NULL;
    sv_token_index_opts_t def;
    if (!o) {
        sv_token_index_opts_default(&def);
        o = &def;
    }
    if (o->ws_cap > 4096) return sv_error_set(err, SV_ERR_ARG, -1, "a whitespace cap of %u is too large", o->ws_cap);
    sv_token_index_t *ix = calloc(1, sizeof *ix);
    if (!ix) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    static atomic_uint_fast64_t next_serial = 1;
    ix->serial = (uint64_t)atomic_fetch_add(&next_serial, 1);
    ix->ts = ts;
    ix->o = *o;
    ix->nbuckets = o->ws_cap + 1;
    ix->nentries = (size_t)dfa->nstates * ix->nbuckets;
    ix->memo = calloc(ix->nentries, sizeof *ix->memo);
    ix->maxd = calloc(ix->nentries, sizeof *ix->maxd);
    ix->scratch = malloc((size_t)ts->words * sizeof *ix->scratch);
    ix->capcons = 64;
    ix->cons = calloc(ix->capcons, sizeof *ix->cons);
    ix->st_flags = calloc(dfa->nstates, sizeof *ix->st_flags);
    ix->st_loop = calloc(dfa->nstates, sizeof *ix->st_loop);
    ix->st_uni = calloc(dfa->nstates, sizeof *ix->st_uni);
    ix->st_uniset = calloc(dfa->nstates, sizeof *ix->st_uniset);
    ix->st_run = calloc(dfa->nstates, sizeof *ix->st_run);
    ix->st_live = calloc(dfa->nstates, sizeof *ix->st_live);
    ix->st_runmaxd = calloc(dfa->nstates, sizeof *ix->st_runmaxd);
    if (!ix->memo || !ix->maxd || !ix->scratch || !ix->cons || !ix->st_flags || !ix->st_loop || !ix->st_uni ||
        !ix->st_uniset || !ix->st_run || !ix->st_runmaxd || !ix->st_live) {
        free(ix->st_live);
        free(ix->st_run);
        free(ix->st_runmaxd);
        free(ix->st_flags);
        free(ix->st_loop);
        free(ix->st_uni);
        free(ix->st_uniset);
        free(ix->memo);
        free(ix->maxd);
        free(ix->scratch);
        free(ix->cons);
        free(ix);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    pthread_mutex_init(&ix->lock, NULL);
    ix->dfa = dfa;
    if (dfa->call_off && sv_ti_cfg_create(ix)) {
        ix->dfa = NULL;
        sv_token_index_destroy(ix);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    *out = ix;
    return SV_OK;
}

void sv_token_index_destroy(sv_token_index_t *ix) {
    if (!ix) return;
    for (uint32_t i = 0; i < ix->capcons; i++) free(ix->cons[i].mask);
    free(ix->cons);
    free(ix->memo);
    free(ix->maxd);
    free(ix->scratch);
    free(ix->st_flags);
    free(ix->st_loop);
    free(ix->st_uni);
    free(ix->st_uniset);
    free(ix->st_run);
    free(ix->st_runmaxd);
    free(ix->st_live);
    pthread_mutex_destroy(&ix->lock);
    sv_ti_cfg_destroy(ix->cfg);
    sv_dfa_destroy(ix->dfa);
    free(ix);
}

const sv_dfa_t *sv_token_index_dfa(const sv_token_index_t *ix) { return ix->dfa; }
const sv_token_set_t *sv_token_index_tokens(const sv_token_index_t *ix) { return ix->ts; }
uint32_t sv_token_index_ws_cap(const sv_token_index_t *ix) { return ix->o.ws_cap; }


bool sv_token_index_ws_after(const sv_token_index_t *ix, uint32_t ws_run, int32_t id, uint32_t *ws_after) {
    const sv_token_set_t *ts = ix->ts;
    if (id < 0 || (uint32_t)id >= ts->n || ts->kind[id] != SV_TOKKIND_NORMAL) {
        *ws_after = 0;
        return ts->kind[id] == SV_TOKKIND_EOG;
    }
    *ws_after = ts->ws_all[id] ? ws_run + ts->len[id] : ts->ws_trail[id];
    return !ix->o.ws_cap || sv_ti_ws_ok(ts, ix->o.ws_cap, ws_run, id);
}

/* The bytes that lead from state s back to s. */
static void loop_set(const sv_dfa_t *d, int32_t s, uint64_t out[4]) {
    const int32_t *row = d->trans + (size_t)s * d->nclasses;
    out[0] = out[1] = out[2] = out[3] = 0;
    for (int b = 0; b < 256; b++)
        if (row[d->classes[b]] == s) out[b >> 6] |= 1ull << (b & 63);
}

/* Whether every UTF-8 character of two or more bytes leads from s back to s
 * (and so every prefix of one is live). Intermediate states are few in a
 * minimal DFA; each is checked once. */
typedef struct {
    int32_t st[16];
    uint8_t depth[16];
    int n;
} seen_t;

/* Bytes of one class move every state alike, so each check below looks at
 * one byte per class of its range. */
static bool back_to(const sv_dfa_t *d, int32_t s, int32_t t, int k, seen_t *seen) {
    /* from t, k more continuation bytes must lead to s */
    if (t < 0) return false;
    if (k == 0) return t == s;
    for (int i = 0; i < seen->n; i++)
        if (seen->st[i] == t && seen->depth[i] == k) return true;
    const int32_t *row = d->trans + (size_t)t * d->nclasses;
    uint64_t done[4] = {0, 0, 0, 0};
    for (int c = 0x80; c <= 0xBF; c++) {
        uint8_t cl = d->classes[c];
        if ((done[cl >> 6] >> (cl & 63)) & 1) continue;
        done[cl >> 6] |= 1ull << (cl & 63);
        if (!back_to(d, s, row[cl], k - 1, seen)) return false;
    }
    if (seen->n < 16) {
        seen->st[seen->n] = t;
        seen->depth[seen->n++] = (uint8_t)k;
    }
    return true;
}

/* Every multi-byte character leads from `from` to `to`. */
static bool utf8_to(const sv_dfa_t *d, int32_t from, int32_t s) {
    seen_t seen = {.n = 0};
    const int32_t *row = d->trans + (size_t)from * d->nclasses;
    /* leads that share a class and a continuation range are checked once */
    uint32_t checked[64];
    int nchecked = 0;
    for (int lead = 0xC2; lead <= 0xF4; lead++) {
        int n = lead < 0xE0 ? 1 : lead < 0xF0 ? 2 : 3;
        int lo = 0x80, hi = 0xBF;
        if (lead == 0xE0) lo = 0xA0;
        if (lead == 0xED) hi = 0x9F;
        if (lead == 0xF0) lo = 0x90;
        if (lead == 0xF4) hi = 0x8F;
        uint32_t key = (uint32_t)d->classes[lead] << 24 | (uint32_t)n << 16 | (uint32_t)lo << 8 | (uint32_t)hi;
        int j = 0;
        while (j < nchecked && checked[j] != key) j++;
        if (j < nchecked) continue;
        if (nchecked < 64) checked[nchecked++] = key;
        int32_t t = row[d->classes[lead]];
        if (t < 0) return false;
        const int32_t *r2 = d->trans + (size_t)t * d->nclasses;
        uint64_t done[4] = {0, 0, 0, 0};
        for (int c = lo; c <= hi; c++) {
            uint8_t cl = d->classes[c];
            if ((done[cl >> 6] >> (cl & 63)) & 1) continue;
            done[cl >> 6] |= 1ull << (cl & 63);
            if (!back_to(d, s, r2[cl], n - 1, &seen)) return false;
        }
    }
    return true;
}

static bool utf8_loops(const sv_dfa_t *d, int32_t s) { return utf8_to(d, s, s); }

/* The ASCII self-loop bytes of s (into out), cached in the index. */
static void state_loops(const sv_token_index_t *ix, int32_t s, uint64_t out[2]) {
    if (atomic_load_explicit(&ix->st_flags[s], memory_order_acquire) & ST_LOOP) {
        out[0] = atomic_load_explicit(&ix->st_loop[s][0], memory_order_relaxed);
        out[1] = atomic_load_explicit(&ix->st_loop[s][1], memory_order_relaxed);
        return;
    }
    uint64_t l[4];
    loop_set(ix->dfa, s, l);
    out[0] = l[0];
    out[1] = l[1];
    atomic_store_explicit(&ix->st_loop[s][0], l[0], memory_order_relaxed);
    atomic_store_explicit(&ix->st_loop[s][1], l[1], memory_order_relaxed);
    atomic_fetch_or_explicit(&ix->st_flags[s], ST_LOOP, memory_order_release);
}

/* The uniform successor of s: the live state most ASCII bytes lead to (-1
 * when none), and the set of those bytes. */
static int32_t state_uni(const sv_token_index_t *ix, int32_t s, uint64_t set[2]) {
    if (atomic_load_explicit(&ix->st_flags[s], memory_order_acquire) & ST_UNI) {
        set[0] = atomic_load_explicit(&ix->st_uniset[s][0], memory_order_relaxed);
        set[1] = atomic_load_explicit(&ix->st_uniset[s][1], memory_order_relaxed);
        return atomic_load_explicit(&ix->st_uni[s], memory_order_relaxed);
    }
    const sv_dfa_t *d = ix->dfa;
    const int32_t *row = d->trans + (size_t)s * d->nclasses;
    int32_t tgt[8];
    int cnt[8], nt = 0;
    for (int b = 0; b < 128; b++) {
        int32_t t = row[d->classes[b]];
        if (t < 0) continue;
        int k = 0;
        while (k < nt && tgt[k] != t) k++;
        if (k == nt) {
            if (nt == 8) continue;
            tgt[nt] = t, cnt[nt++] = 0;
        }
        cnt[k]++;
    }
    int32_t best = -1;
    int bestn = 0;
    for (int k = 0; k < nt; k++)
        if (cnt[k] > bestn) bestn = cnt[k], best = tgt[k];
    set[0] = set[1] = 0;
    if (best >= 0)
        for (int b = 0; b < 128; b++)
            if (row[d->classes[b]] == best) set[b >> 6] |= 1ull << (b & 63);
    atomic_store_explicit(&ix->st_uni[s], best, memory_order_relaxed);
    atomic_store_explicit(&ix->st_uniset[s][0], set[0], memory_order_relaxed);
    atomic_store_explicit(&ix->st_uniset[s][1], set[1], memory_order_relaxed);
    atomic_fetch_or_explicit(&ix->st_flags[s], ST_UNI, memory_order_release);
    return best;
}

/* Whether every multi-byte character leads from s to its uniform successor. */
static bool state_uni8(const sv_token_index_t *ix, int32_t s, int32_t uni) {
    uint8_t f = atomic_load_explicit(&ix->st_flags[s], memory_order_acquire);
    if (f & ST_UNI8_KNOWN) return f & ST_UNI8;
    bool v = uni >= 0 && utf8_to(ix->dfa, s, uni);
    atomic_fetch_or_explicit(&ix->st_flags[s], (uint8_t)(ST_UNI8_KNOWN | (v ? ST_UNI8 : 0)), memory_order_release);
    return v;
}

/* For a subtree with ASCII byte set sb (and multi-byte characters when
 * high; its tokens are then UTF-8 from a boundary) whose tokens have at
 * most h bytes from here: whether every such string stays alive from s by
 * taking, per character, the uniform successor (so each token is allowed,
 * ending on the chain within h steps, or inside a character just before).
 * A string with maxLength counts its characters that way. *maxd gets the
 * largest distance of those end states. */
/* The ASCII bytes with a live transition from s. */
static void state_live(const sv_token_index_t *ix, int32_t s, uint64_t out[2]) {
    if (atomic_load_explicit(&ix->st_flags[s], memory_order_acquire) & ST_LIVE) {
        out[0] = atomic_load_explicit(&ix->st_live[s][0], memory_order_relaxed);
        out[1] = atomic_load_explicit(&ix->st_live[s][1], memory_order_relaxed);
        return;
    }
    const sv_dfa_t *d = ix->dfa;
    const int32_t *row = d->trans + (size_t)s * d->nclasses;
    out[0] = out[1] = 0;
    for (int b = 0; b < 128; b++)
        if (row[d->classes[b]] >= 0) out[b >> 6] |= 1ull << (b & 63);
    atomic_store_explicit(&ix->st_live[s][0], out[0], memory_order_relaxed);
    atomic_store_explicit(&ix->st_live[s][1], out[1], memory_order_relaxed);
    atomic_fetch_or_explicit(&ix->st_flags[s], ST_LIVE, memory_order_release);
}

#define RUN_MAX 1024
#define RUN_INF UINT16_MAX

/* The run from s (see st_run), computed along the chain and cached for
 * every state on it. */
static uint32_t state_run(const sv_token_index_t *ix, int32_t s, uint32_t *maxd) {
    if (atomic_load_explicit(&ix->st_flags[s], memory_order_acquire) & ST_RUN) {
        *maxd = atomic_load_explicit(&ix->st_runmaxd[s], memory_order_relaxed);
        return atomic_load_explicit(&ix->st_run[s], memory_order_relaxed);
    }
    const sv_dfa_t *d = ix->dfa;
    int32_t chain[RUN_MAX + 1];
    uint64_t set0[2], set[2];
    int32_t t = state_uni(ix, s, set0);
    bool u0 = t >= 0 && state_uni8(ix, s, t);
    int n = 0;
    chain[n++] = s;
    uint32_t len = 0, md = 0;
    bool inf = false, tail_known = false;
    int32_t x = s;
    while (t >= 0 && n <= RUN_MAX) {
        /* x -> t is a uniform step with set0 */
        if (t == x) { inf = true; break; }
        int32_t t2 = state_uni(ix, t, set);
        bool u = t2 >= 0 && state_uni8(ix, t, t2);
        if (set[0] != set0[0] || set[1] != set0[1] || u != u0 || t2 < 0) break;
        if (atomic_load_explicit(&ix->st_flags[t], memory_order_acquire) & ST_RUN) { tail_known = true; break; }
        chain[n++] = t;
        x = t;
        t = t2;
    }
    /* backfill: chain[i] -> chain[i+1] -> ... ; the last one steps to t */
    if (inf) {
        len = RUN_INF;
        md = d->dist[t];
    } else if (tail_known) {
        uint32_t tm = atomic_load_explicit(&ix->st_runmaxd[t], memory_order_relaxed);
        uint32_t tl = atomic_load_explicit(&ix->st_run[t], memory_order_relaxed);
        len = tl == RUN_INF ? RUN_INF : tl + 1;
        md = tm > d->dist[t] ? tm : d->dist[t];
    } else {
        len = t >= 0 ? 1 : 0;
        md = t >= 0 ? d->dist[t] : 0;
    }
    for (int i = n - 1; i >= 0; i--) {
        if (i < n - 1) {
            int32_t nx = chain[i + 1];
            if (len != RUN_INF) len = len + 1 < RUN_INF ? len + 1 : RUN_INF - 1;
            if (d->dist[nx] > md) md = d->dist[nx];
        }
        atomic_store_explicit(&ix->st_run[chain[i]], (uint16_t)len, memory_order_relaxed);
        atomic_store_explicit(&ix->st_runmaxd[chain[i]], md, memory_order_relaxed);
        atomic_fetch_or_explicit(&ix->st_flags[chain[i]], ST_RUN, memory_order_release);
    }
    *maxd = atomic_load_explicit(&ix->st_runmaxd[s], memory_order_relaxed);
    return atomic_load_explicit(&ix->st_run[s], memory_order_relaxed);
}

bool sv_ti_chain_fits(const sv_token_index_t *ix, int32_t s, const uint64_t *sb, bool high, uint32_t h,
                      uint32_t *maxd) {
    uint64_t set[2];
    int32_t t = state_uni(ix, s, set);
    if (t < 0 || (sb[0] & ~set[0]) || (sb[1] & ~set[1]) || (high && !state_uni8(ix, s, t))) return false;
    uint32_t rm, run = state_run(ix, s, &rm);
    if (h > run) return false;
    *maxd = rm + (high ? 3 : 0);
    return true;
}

static bool chain_ok(const sv_token_index_t *ix, int32_t s, const uint64_t *sb, bool high, uint32_t h,
                     uint32_t *maxd, uint32_t *limit) {
    uint32_t md = 0;
    *limit = h;
    if (sv_ti_chain_fits(ix, s, sb, high, h, maxd)) return true; /* the whole subtree fits in s's run, in O(1) */
    for (uint32_t k = 0; k < h; k++) {
        uint64_t set[2];
        int32_t t = state_uni(ix, s, set);
        if (t < 0 || (sb[0] & ~set[0]) || (sb[1] & ~set[1]) || (high && !state_uni8(ix, s, t))) {
            /* The chain ends here. For ASCII bytes only: if every byte of
             * the subtree dies at s, exactly the tokens of at most k bytes
             * (from here) are allowed. */
            if (high || k == 0) return false;
            uint64_t live[2];
            state_live(ix, s, live);
            if ((sb[0] & live[0]) || (sb[1] & live[1])) return false;
            *limit = k;
            break;
        }
        s = t;
        if (ix->dfa->dist[s] > md) md = ix->dfa->dist[s];
    }
    *maxd = md + (high ? 3 : 0);
    return true;
}

static bool state_utf8(const sv_token_index_t *ix, int32_t s) {
    uint8_t f = atomic_load_explicit(&ix->st_flags[s], memory_order_acquire);
    if (f & ST_UTF8_KNOWN) return f & ST_UTF8;
    bool v = utf8_loops(ix->dfa, s);
    atomic_fetch_or_explicit(&ix->st_flags[s], (uint8_t)(ST_UTF8_KNOWN | (v ? ST_UTF8 : 0)), memory_order_release);
    return v;
}

static bool sig_eq(const root_sig_t *a, const root_sig_t *b) {
    return a->first[0] == b->first[0] && a->first[1] == b->first[1] && a->loop[0] == b->loop[0] &&
           a->loop[1] == b->loop[1] && a->utf8_first == b->utf8_first && a->utf8_loop == b->utf8_loop;
}

/* The length of the whole UTF-8 character at b[0..n) (2 to 4), or 0 when
 * b does not start with one. */
static uint32_t utf8_char(const uint8_t *b, uint32_t n) {
    uint8_t lo, hi;
    uint32_t k;
    if (!utf8_lead(b[0], &k, &lo, &hi) || k == 0) return 0;
    k++; /* bytes in all */
    if (n < k || b[1] < lo || b[1] > hi) return 0;
    for (uint32_t j = 2; j < k; j++)
        if (!is_cont(b[j])) return 0;
    return k;
}

typedef struct {
    const uint8_t *p;
    uint32_t n;
    int32_t id;
} tail_ent_t;

static int cmp_tail(const void *a, const void *b) {
    const tail_ent_t *x = a, *y = b;
    uint32_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static uint32_t common_prefix(const tail_ent_t *a, const tail_ent_t *b) {
    uint32_t m = a->n < b->n ? a->n : b->n, l = 0;
    while (l < m && a->p[l] == b->p[l]) l++;
    return l;
}

/* Builds the trie of the nonempty strings e[0..n) (sorted here); false when
 * it would have more than max_nodes nodes or memory runs out (t is then
 * empty). */
static bool build_tails(tail_ent_t *e, uint32_t n, uint32_t max_nodes, tail_trie_t *t) {
    memset(t, 0, sizeof *t);
    if (!n) return true;
    qsort(e, n, sizeof *e, cmp_tail);
    uint64_t nn = 0; /* one node per byte past the common prefix with the previous string */
    for (uint32_t i = 0; i < n; i++) nn += e[i].n - (i ? common_prefix(&e[i], &e[i - 1]) : 0);
    if (nn > max_nodes) return false;
    t->nodes = malloc((size_t)nn * sizeof *t->nodes);
    t->ids = malloc((size_t)n * sizeof *t->ids);
    uint32_t *open = malloc(((size_t)SV_TOKEN_SET_MAX_BYTES + 1) * sizeof *open); /* the node at each depth */
    if (!t->nodes || !t->ids || !open) {
        free(open);
        tail_trie_free(t);
        return false;
    }
    uint32_t k = 0, depth = 0; /* nodes so far; depth of the open path */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = i ? common_prefix(&e[i], &e[i - 1]) : 0;
        while (depth > l) t->nodes[open[--depth]].skip = k; /* close the nodes past the common prefix */
        for (uint32_t j = l; j < e[i].n; j++) {
            t->nodes[k] = (tail_node_t){.depth = (uint16_t)(j + 1), .byte = e[i].p[j]};
            open[depth++] = k++;
        }
        tail_node_t *nd = &t->nodes[open[depth - 1]];
        if (!nd->tok_n) nd->tok_lo = i;
        nd->tok_n++;
        t->ids[i] = e[i].id;
    }
    while (depth > 0) t->nodes[open[--depth]].skip = k;
    free(open);
    for (uint32_t i = k; i-- > 0;) { /* children come after their parent */
        tail_node_t *nd = &t->nodes[i];
        nd->quote = nd->byte == '"';
        for (uint32_t j = i + 1; j < nd->skip && !nd->quote; j = t->nodes[j].skip) nd->quote = t->nodes[j].quote;
    }
    t->nnodes = k;
    t->nids = n;
    return true;
}

/* The length of the first character of b[0..n) when it is ASCII or a whole
 * multi-byte character; 0 otherwise. */
static uint32_t first_char(const uint8_t *b, uint32_t n) { return b[0] < 0x80 ? 1 : utf8_char(b, n); }

/* The longest prefix of b[0..n) made of characters that loop: ASCII bytes
 * in loop[], and whole multi-byte characters when utf8_loop. */
static uint32_t loop_prefix_chars(const uint64_t loop[2], bool utf8_loop, const uint8_t *b, uint32_t n,
                                  uint32_t *chars) {
    uint32_t i = 0, c = 0;
    while (i < n) {
        uint8_t x = b[i];
        if (x < 0x80) {
            if (!((loop[x >> 6] >> (x & 63)) & 1)) break;
            i++, c++;
            continue;
        }
        uint32_t k = utf8_loop ? utf8_char(b + i, n - i) : 0;
        if (!k) break;
        i += k, c++;
    }
    if (chars) *chars = c;
    return i;
}

static uint32_t loop_prefix(const uint64_t loop[2], bool utf8_loop, const uint8_t *b, uint32_t n) {
    return loop_prefix_chars(loop, utf8_loop, b, n, NULL);
}

/* The partial-first-character trie of a token set and the first-byte
 * ranges of its sorted tokens (at creation). */
static void build_partial(sv_token_set_t *ts) {
    uint32_t nsorted = ts->nsorted;
    for (uint32_t x = 0, j = 0; x <= 256; x++) {
        while (j < nsorted && ts->buf[ts->off[ts->sorted[j]]] < x) j++;
        ts->first_lo[x] = j;
    }
    tail_ent_t *e = malloc((size_t)ts->n * sizeof *e);
    ts->partial = calloc(1, sizeof *ts->partial);
    if (!e || !ts->partial) {
        free(e);
        return;
    }
    uint32_t n = 0;
    for (uint32_t id = 0; id < ts->n; id++) {
        const uint8_t *b = ts->buf + ts->off[id];
        if (ts->kind[id] == SV_TOKKIND_NORMAL && !first_char(b, ts->len[id]))
            e[n++] = (tail_ent_t){b, ts->len[id], (int32_t)id};
    }
    ts->have_partial = n <= TAIL_MAX_ENTRIES && build_tails(e, n, TAIL_MAX_NODES, ts->partial);
    free(e);
}

/* A new root entry for sig (NULL when out of memory). */
static root_entry_t *root_build(const sv_token_set_t *ts, const root_sig_t *sig) {
    root_entry_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->sig = *sig;
    r->mask = calloc(ts->words, sizeof *r->mask);
    if (!r->mask) {
        root_entry_free(r);
        return NULL;
    }
    bool u8 = sig->utf8_first && sig->utf8_loop;
    bool some8 = sig->utf8_first || sig->utf8_loop;
    for (uint32_t id = 0; id < ts->n; id++) {
        if (ts->kind[id] != SV_TOKKIND_NORMAL) continue;
        bool in = false;
        if (ts->tok_root_ok[id]) {
            uint8_t f = ts->tok_first[id];
            in = f < 0x80 ? (sig->first[f >> 6] >> (f & 63)) & 1 : u8;
            in = in && !(ts->tok_ascii[id][0] & ~sig->loop[0]) && !(ts->tok_ascii[id][1] & ~sig->loop[1]) &&
                 (!ts->tok_high[id] || u8);
        }
        if (!in && ts->tok_high[id] && !u8 && some8) {
            /* whole characters, the multi-byte ones only where they move
             * like the signature says: s0 to c, c to c */
            const uint8_t *b = ts->buf + ts->off[id];
            uint32_t len = ts->len[id], k = first_char(b, len);
            uint8_t f = b[0];
            bool first_ok = k && (f < 0x80 ? (sig->first[f >> 6] >> (f & 63)) & 1 : sig->utf8_first);
            in = first_ok && k + loop_prefix(sig->loop, sig->utf8_loop, b + k, len - k) == len;
        }
        if (in) r->mask[id >> 5] |= 1u << (id & 31);
    }
    return r;
}

/* A new loop entry (NULL when out of memory). */
static loop_entry_t *loop_build(const sv_token_set_t *ts, const uint64_t loop[2], bool utf8_loop) {
    loop_entry_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->loop[0] = loop[0];
    r->loop[1] = loop[1];
    r->utf8_loop = utf8_loop;
    tail_ent_t *e = malloc((size_t)TAIL_MAX_ENTRIES * sizeof *e);
    r->rl_ascii = calloc(ts->words, sizeof *r->rl_ascii);
    r->rl_high = calloc(ts->words, sizeof *r->rl_high);
    uint8_t *arena = NULL;
    uint32_t n = 0;
    size_t bytes = 0;
    bool ok = e && r->rl_ascii && r->rl_high;
    for (uint32_t id = 0; ok && id < ts->n; id++) {
        const uint8_t *b = ts->buf + ts->off[id];
        uint32_t len = ts->len[id], k;
        if (ts->kind[id] != SV_TOKKIND_NORMAL || !(k = first_char(b, len))) continue;
        k += loop_prefix(loop, utf8_loop, b + k, len - k);
        if (k == len) {
            uint32_t *rl = b[0] < 0x80 ? r->rl_ascii : r->rl_high;
            rl[id >> 5] |= 1u << (id & 31);
            continue;
        }
        if (n == TAIL_MAX_ENTRIES) ok = false; /* too many: the main trie is as good */
        else {
            e[n++] = (tail_ent_t){b + k, len - k, (int32_t)id}; /* the label goes in front below */
            bytes += len - k + 1;
        }
    }
    if (ok && n) {
        /* (first byte, tail) strings, contiguous for the sort */
        arena = malloc(bytes);
        ok = arena != NULL;
        for (uint32_t i = 0, at = 0; ok && i < n; i++) {
            arena[at] = ts->buf[ts->off[e[i].id]];
            memcpy(arena + at + 1, e[i].p, e[i].n);
            e[i].p = arena + at;
            at += ++e[i].n;
        }
    }
    r->have_tails = ok && build_tails(e, n, TAIL_MAX_NODES, &r->tails);
    if (!r->have_tails) {
        free(r->rl_ascii);
        free(r->rl_high);
        r->rl_ascii = r->rl_high = NULL;
    }
    free(arena);
    free(e);
    return r;
}

/* The chain data of a loop entry (built once, under root_lock): for every
 * token made of loop characters from its first byte on, the number k of
 * those characters and what follows; the tokens made only of them and
 * longer than CHAIN_MIN_RUN characters, longest first; and by bitsets
 * those longer than each k below CHAIN_MIN_RUN. */
static int cmp_long(const void *a, const void *b) {
    const uint32_t *x = a, *y = b; /* (chars, id) pairs */
    if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static void loop_chain_build(const sv_token_set_t *ts, loop_entry_t *r) {
    r->chain_built = true;
    tail_ent_t *e = malloc((size_t)TAIL_MAX_ENTRIES * sizeof *e);
    uint8_t *lab = malloc(TAIL_MAX_ENTRIES);
    uint32_t (*longs)[2] = malloc((size_t)ts->n * sizeof *longs);
    const uint32_t W = ts->words;
    r->short_gt = calloc((size_t)CHAIN_MIN_RUN * W, sizeof *r->short_gt);
    uint32_t nlong = 0, n = 0;
    uint8_t *arena = NULL;
    size_t bytes = 0;
    bool ok = e && lab && longs && r->short_gt;
    for (uint32_t id = 0; ok && id < ts->n; id++) {
        if (ts->kind[id] != SV_TOKKIND_NORMAL) continue;
        const uint8_t *b = ts->buf + ts->off[id];
        uint32_t len = ts->len[id], chars;
        uint32_t k = loop_prefix_chars(r->loop, r->utf8_loop, b, len, &chars);
        if (k == 0) continue; /* the main walk's */
        if (k == len) {
            if (chars > CHAIN_MIN_RUN) longs[nlong][0] = chars, longs[nlong++][1] = id;
            for (uint32_t j = 0; j < chars && j < CHAIN_MIN_RUN; j++)
                r->short_gt[(size_t)j * W + (id >> 5)] |= 1u << (id & 31);
        } else if (n == TAIL_MAX_ENTRIES || chars > 255) {
            ok = false;
        } else {
            lab[n] = (uint8_t)chars;
            e[n++] = (tail_ent_t){b + k, len - k, (int32_t)id};
            bytes += len - k + 1;
        }
    }
    if (ok && n) {
        /* (k, tail) strings, contiguous for the sort */
        arena = malloc(bytes);
        ok = arena != NULL;
        for (uint32_t i = 0, at = 0; ok && i < n; i++) {
            arena[at] = lab[i];
            memcpy(arena + at + 1, e[i].p, e[i].n);
            e[i].p = arena + at;
            at += ++e[i].n;
        }
    }
    ok = ok && build_tails(e, n, TAIL_MAX_NODES, &r->ktails);
    if (ok) {
        qsort(longs, nlong, sizeof *longs, cmp_long);
        r->long_ids = malloc((nlong ? nlong : 1) * sizeof *r->long_ids);
        r->long_chars = malloc((nlong ? nlong : 1) * sizeof *r->long_chars);
        ok = r->long_ids && r->long_chars;
        for (uint32_t i = 0; ok && i < nlong; i++) {
            r->long_ids[i] = (int32_t)longs[i][1];
            r->long_chars[i] = (uint16_t)(longs[i][0] > UINT16_MAX ? UINT16_MAX : longs[i][0]);
        }
        r->nlongs = nlong;
    }
    if (!ok) {
        tail_trie_free(&r->ktails);
        free(r->long_ids);
        free(r->long_chars);
        free(r->short_gt);
        r->long_ids = NULL;
        r->long_chars = NULL;
        r->short_gt = NULL;
        r->nlongs = 0;
    }
    r->have_chain = ok;
    free(arena);
    free(lab);
    free(longs);
    free(e);
}

/* Whether the entry has chain data (building it on first use). */
static bool loop_chain(const sv_token_set_t *cts, loop_entry_t *r) {
    sv_token_set_t *ts = (sv_token_set_t *)cts;
    pthread_mutex_lock(&ts->root_lock);
    if (!r->chain_built) loop_chain_build(ts, r);
    bool ok = r->have_chain;
    pthread_mutex_unlock(&ts->root_lock);
    return ok;
}

/* Finds or builds a shared entry: looks key up in the LRU v (found by
 * eq), else builds one and puts it in front, evicting the least recently
 * used of cap. Takes a reference (NULL when out of memory). */
static void *lru_acquire(sv_token_set_t *ts, void **v, uint32_t *n, uint32_t cap, bool (*eq)(const void *, const void *),
                         const void *key, void *(*build)(const sv_token_set_t *, const void *), void (*free_fn)(void *)) {
    void *found = NULL;
    pthread_mutex_lock(&ts->root_lock);
    for (uint32_t i = 0; i < *n; i++) {
        if (eq(v[i], key)) {
            found = v[i];
            memmove(v + 1, v, i * sizeof *v);
            v[0] = found;
            break;
        }
    }
    if (!found && (found = build(ts, key))) {
        if (*n == cap) {
            shared_t *old = v[--*n];
            if (old->refs) old->evicted = true;
            else free_fn(old);
        }
        memmove(v + 1, v, *n * sizeof *v);
        v[0] = found;
        (*n)++;
    }
    if (found) ((shared_t *)found)->refs++;
    pthread_mutex_unlock(&ts->root_lock);
    return found;
}

static void lru_release(const sv_token_set_t *cts, void *e, void (*free_fn)(void *)) {
    sv_token_set_t *ts = (sv_token_set_t *)cts;
    shared_t *h = e;
    pthread_mutex_lock(&ts->root_lock);
    bool gone = --h->refs == 0 && h->evicted;
    pthread_mutex_unlock(&ts->root_lock);
    if (gone) free_fn(e);
}

static bool root_eq(const void *e, const void *key) { return sig_eq(&((const root_entry_t *)e)->sig, key); }
static void *root_new(const sv_token_set_t *ts, const void *key) { return root_build(ts, key); }
static bool loop_eq(const void *e, const void *key) {
    const loop_entry_t *l = e;
    const root_sig_t *sig = key;
    return l->loop[0] == sig->loop[0] && l->loop[1] == sig->loop[1] && l->utf8_loop == sig->utf8_loop;
}
static void *loop_new(const sv_token_set_t *ts, const void *key) {
    const root_sig_t *sig = key;
    return loop_build(ts, sig->loop, sig->utf8_loop);
}

static root_entry_t *root_acquire(const sv_token_set_t *cts, const root_sig_t *sig) {
    sv_token_set_t *ts = (sv_token_set_t *)cts;
    return lru_acquire(ts, ts->roots, &ts->nroots, ROOT_CACHE, root_eq, sig, root_new, root_entry_free);
}

static loop_entry_t *loop_acquire(const sv_token_set_t *cts, const root_sig_t *sig) {
    sv_token_set_t *ts = (sv_token_set_t *)cts;
    return lru_acquire(ts, ts->loops, &ts->nloops, LOOP_CACHE, loop_eq, sig, loop_new, loop_entry_free);
}

/* Sets the bits of the tokens of t that stay alive from s; raises *maxd to
 * the distance of their end states. The first byte may be a label instead
 * of a byte to walk: with sig, a first[] byte (or, with utf8_first, the lead
 * byte of a whole multi-byte character) takes the walk to s, anything else
 * is skipped; with sk, it is a character count k, which takes the walk to
 * sk[k] (skipped when k > nk or sk[k] < 0). */
static void walk_tails(const sv_dfa_t *d, const tail_trie_t *t, const root_sig_t *sig, const int32_t *sk,
                       uint32_t nk, int32_t s, uint32_t *dst, uint32_t *maxd) {
    const int32_t *trans = d->trans;
    const uint8_t *cls = d->classes;
    const size_t nc = d->nclasses;
    int32_t stack[SV_TOKEN_SET_MAX_BYTES + 1];
    stack[0] = s;
    uint32_t md = *maxd;
    for (uint32_t i = 0, n = t->nnodes; i < n;) {
        const tail_node_t nd = t->nodes[i];
        int32_t ns;
        if (sk && nd.depth == 1) {
            ns = nd.byte <= nk ? sk[nd.byte] : SV_DFA_DEAD;
        } else if (sig && nd.depth == 1) {
            uint8_t x = nd.byte;
            ns = (x < 0x80 ? (sig->first[x >> 6] >> (x & 63)) & 1 : sig->utf8_first) ? s : SV_DFA_DEAD;
        } else {
            ns = trans[(size_t)stack[nd.depth - 1] * nc + cls[nd.byte]];
        }
        if (ns < 0) {
            i = nd.skip;
            continue;
        }
        if (nd.tok_n) {
            for (uint32_t j = nd.tok_lo, e = nd.tok_lo + nd.tok_n; j < e; j++) {
                int32_t id = t->ids[j];
                dst[id >> 5] |= 1u << (id & 31);
            }
            if (d->dist[ns] > md) md = d->dist[ns];
        }
        stack[nd.depth] = ns;
        i++;
    }
    *maxd = md;
}

/* The signature of s0: c is the state most ASCII bytes lead to. False when
 * it would not pay off. */
static bool root_signature(const sv_token_index_t *ix, int32_t s0, root_sig_t *sig, int32_t *c_out) {
    const sv_dfa_t *d = ix->dfa;
    uint64_t first[2];
    int32_t best = state_uni(ix, s0, first); /* the most common live target among ASCII bytes */
    int bestn = __builtin_popcountll(first[0]) + __builtin_popcountll(first[1]);
    if (best < 0 || bestn < ROOT_MIN_LOOP) return false;
    memset(sig, 0, sizeof *sig);
    sig->first[0] = first[0];
    sig->first[1] = first[1];
    const int32_t *rc = d->trans + (size_t)best * d->nclasses;
    int nl = 0;
    for (int b = 0; b < 128; b++) {
        if (rc[d->classes[b]] == best) sig->loop[b >> 6] |= 1ull << (b & 63), nl++;
    }
    if (nl < ROOT_MIN_LOOP) return false;
    sig->utf8_first = utf8_to(d, s0, best);
    sig->utf8_loop = state_utf8(ix, best);
    *c_out = best;
    return true;
}

bool sv_ti_tails_acquire(const sv_token_index_t *ix, int32_t s0, sv_ti_tails_t *out) {
    root_sig_t sig;
    int32_t c;
    if (!root_signature(ix, s0, &sig, &c)) return false;
    loop_entry_t *le = loop_acquire(ix->ts, &sig);
    if (!le) return false;
    if (!le->have_tails) {
        lru_release(ix->ts, le, loop_entry_free);
        return false;
    }
    *out = (sv_ti_tails_t){.trie = &le->tails, .entry = le, .first = {sig.first[0], sig.first[1]},
                           .utf8_first = sig.utf8_first, .c = c};
    return true;
}

void sv_ti_tails_release(const sv_token_index_t *ix, sv_ti_tails_t *t) {
    lru_release(ix->ts, t->entry, loop_entry_free);
    t->entry = NULL;
}

/* dst = the tokens of le's loop set whose first character is a first[]
 * byte (or any whole multi-byte character, with utf8_first) and whose other
 * characters all loop. */
static void rest_loops(const sv_token_set_t *ts, const loop_entry_t *le, const uint64_t first[2], bool utf8_first,
                       uint32_t *dst) {
    const uint32_t W = ts->words;
    if (utf8_first)
        for (uint32_t w = 0; w < W; w++) dst[w] = le->rl_ascii[w] | le->rl_high[w];
    else
        memcpy(dst, le->rl_ascii, (size_t)W * sizeof *dst);
    for (uint32_t x = 0; x < 0x80; x++) {
        if ((first[x >> 6] >> (x & 63)) & 1) continue;
        for (uint32_t j = ts->first_lo[x], e = ts->first_lo[x + 1]; j < e; j++) {
            int32_t id = ts->sorted[j];
            dst[id >> 5] &= ~(1u << (id & 31));
        }
    }
}

/* A chain from s0: its uniform successors s1, s2, ... take the same ASCII
 * byte set U (at least ROOT_MIN_LOOP bytes) and treat multi-byte characters
 * alike (u) for R steps (state_run), as a string with maxLength counts its
 * characters. A token whose first k characters are in U reaches sk after
 * them, whatever they are, so the tokens are merged by (k, what follows):
 * the loop entry of (U, u) holds that trie, the tokens made only of U
 * characters (in the "rest loops" bitsets) and, by their character counts,
 * those that outrun a chain of R characters. Exact only when no token can
 * outrun the chain, or when every character of U dies at its end
 * (maxLength reached). */
bool sv_ti_chain_acquire(const sv_token_index_t *ix, int32_t s0, int32_t *sk, sv_ti_chain_t *out) {
    const sv_token_set_t *ts = ix->ts;
    const sv_dfa_t *d = ix->dfa;
    uint64_t U[2];
    int32_t s1 = state_uni(ix, s0, U);
    if (s1 < 0 || s1 == s0 || __builtin_popcountll(U[0]) + __builtin_popcountll(U[1]) < ROOT_MIN_LOOP) return false;
    bool u = state_uni8(ix, s0, s1);
    uint32_t rmd, R = state_run(ix, s0, &rmd);
    uint32_t K = ts->max_len; /* no token has more characters */
    bool finite = R != RUN_INF && R < K;
    uint32_t nk = finite ? R : K, md = 0;
    sk[0] = s0;
    for (uint32_t k = 1; k <= nk; k++) {
        uint64_t set[2];
        sk[k] = state_uni(ix, sk[k - 1], set);
        if (sk[k] < 0) return false; /* cannot happen within the run */
        if (d->dist[sk[k]] > md) md = d->dist[sk[k]];
    }
    if (finite) {
        /* every character of U must die after the R-th */
        uint64_t live[2];
        state_live(ix, sk[R], live);
        if ((live[0] & U[0]) || (live[1] & U[1])) return false;
        if (u) {
            const int32_t *row = d->trans + (size_t)sk[R] * d->nclasses;
            for (int b = 0xC2; b <= 0xF4; b++)
                if (row[d->classes[b]] >= 0) return false;
        }
    }
    root_sig_t sig = {.first = {U[0], U[1]}, .loop = {U[0], U[1]}, .utf8_first = u, .utf8_loop = u};
    loop_entry_t *le = loop_acquire(ts, &sig);
    if (!le) return false;
    if (!(le->have_tails && loop_chain(ts, le))) {
        lru_release(ts, le, loop_entry_free);
        return false;
    }
    *out = (sv_ti_chain_t){.ktails = &le->ktails, .entry = le, .first = {U[0], U[1]}, .utf8 = u, .finite = finite,
                           .nk = nk, .maxd = md, .sk = sk};
    return true;
}

void sv_ti_chain_release(const sv_token_index_t *ix, sv_ti_chain_t *ch) {
    lru_release(ix->ts, ch->entry, loop_entry_free);
    ch->entry = NULL;
}

/* The chain's tokens into dst (except for the first bytes outside U, which
 * the caller's main walk takes: skip_first); raises *maxd. */
static bool chain_walk(const sv_token_index_t *ix, int32_t s0, uint32_t *dst, uint32_t *maxd, uint64_t skip_first[4]) {
    const sv_token_set_t *ts = ix->ts;
    static _Thread_local int32_t sk[SV_TOKEN_SET_MAX_BYTES + 1];
    sv_ti_chain_t ch;
    if (!sv_ti_chain_acquire(ix, s0, sk, &ch)) return false;
    const loop_entry_t *le = ch.entry;
    uint32_t md = *maxd > ch.maxd ? *maxd : ch.maxd;
    rest_loops(ts, le, ch.first, ch.utf8, dst);
    if (ch.finite && ch.nk < CHAIN_MIN_RUN) {
        const uint32_t *gt = le->short_gt + (size_t)ch.nk * ts->words;
        for (uint32_t w = 0; w < ts->words; w++) dst[w] &= ~gt[w];
    } else if (ch.finite) {
        for (uint32_t i = 0; i < le->nlongs && le->long_chars[i] > ch.nk; i++) {
            int32_t id = le->long_ids[i];
            dst[id >> 5] &= ~(1u << (id & 31));
        }
    }
    walk_tails(ix->dfa, ch.ktails, NULL, sk, ch.nk, s0, dst, &md);
    skip_first[0] = ch.first[0];
    skip_first[1] = ch.first[1];
    if (ch.utf8 && ts->have_partial) {
        skip_first[2] = skip_first[3] = ~0ull;
        walk_tails(ix->dfa, ts->partial, NULL, NULL, 0, s0, dst, &md);
    }
    *maxd = md;
    sv_ti_chain_release(ix, &ch);
    return true;
}

#ifdef TI_STATS
uint64_t ti_visited, ti_bulk_tokens, ti_skipped_root;
#endif
static uint32_t walk(const sv_token_index_t *ix, int32_t s0, uint32_t run, sv_token_filter_fn filter, void *ctx,
                     uint32_t *dst, uint32_t *maxd_out) {
    const sv_token_set_t *ts = ix->ts;
    const sv_dfa_t *d = ix->dfa;
    const int32_t *trans = d->trans;
    const uint8_t *cls = d->classes;
    const size_t nc = d->nclasses;
    const node_t *nodes = ts->nodes;
    const uint32_t cap = ix->o.ws_cap;
    int32_t stack[SV_TOKEN_SET_MAX_BYTES + 1];
    stack[0] = s0;
    uint32_t maxd = 0;
    /* The root mask: tokens allowed from s0 by its self-loops alone. With
     * it, a bulk-allowed subtree below a pure path (only such bytes, back in
     * s0) needs no bits set: they are all in it already. */
    uint8_t pure[SV_TOKEN_SET_MAX_BYTES + 1];
    bool use_root = false, u8 = false;
    root_sig_t sig;
    int32_t c = -1;
    /* with tails: the first bytes whose subtrees the main walk skips */
    bool tails = false;
    uint64_t skip_first[4] = {0, 0, 0, 0};
    if (!filter && !cap && root_signature(ix, s0, &sig, &c)) {
        loop_entry_t *le = loop_acquire(ts, &sig);
        if (le && le->have_tails) {
            /* A token whose first character takes s0 to c is allowed when
             * the rest loops, and is in the tails otherwise. The main walk
             * takes the tokens of the other first bytes (and those cut
             * inside their first character, unless the partial trie does). */
            rest_loops(ts, le, sig.first, sig.utf8_first, dst);
            maxd = d->dist[c];
            walk_tails(d, &le->tails, &sig, NULL, 0, c, dst, &maxd);
            tails = true;
            skip_first[0] = sig.first[0];
            skip_first[1] = sig.first[1];
            if (sig.utf8_first && ts->have_partial) {
                skip_first[2] = skip_first[3] = ~0ull;
                walk_tails(d, ts->partial, NULL, NULL, 0, s0, dst, &maxd);
            }
        }
        if (le) lru_release(ts, le, loop_entry_free);
        root_entry_t *re;
        if (!tails && (re = root_acquire(ts, &sig))) {
            use_root = true;
            u8 = sig.utf8_first && sig.utf8_loop;
            memcpy(dst, re->mask, (size_t)ts->words * sizeof *dst);
            lru_release(ts, re, root_entry_free);
            pure[0] = c == s0;
            /* its tokens end in c, or cut short inside a character */
            maxd = d->dist[c] + (u8 ? 3 : 0);
        }
    } else if (!filter && !cap && chain_walk(ix, s0, dst, &maxd, skip_first)) {
        tails = true;
    }
    const uint32_t N = ts->nnodes;
    uint32_t i = 0;
    while (i < N) {
        const node_t nd = nodes[i];
#ifdef TI_STATS
        ti_visited++;
#endif
        int32_t ps = stack[nd.depth - 1];
        int32_t ns = trans[(size_t)ps * nc + cls[nd.byte]];
        if (ns < 0 || (tails && nd.depth == 1 && ((skip_first[nd.byte >> 6] >> (nd.byte & 63)) & 1))) {
            i = nd.skip;
            continue;
        }
        if (nd.flags) {
            if (nd.flags & NODE_SUMMARY) {
                uint32_t si = ts->nsum[i];
                const summary_t *sm = &ts->sums[si];
                const uint64_t *sb = sm->bytes;
                bool high = sb[2] | sb[3];
                /* cheap necessary conditions first: an ASCII edge must loop */
                bool maybe = nd.byte < 0x80 ? ns == ps : (sm->utf8 && !filter);
                uint64_t lp[2] = {0, 0};
                if (maybe) state_loops(ix, ps, lp);
                if (maybe && !(sb[0] & ~lp[0]) && !(sb[1] & ~lp[1]) && (!high || (sm->utf8 && !filter))) {
                    bool ok = !high || state_utf8(ix, ps);
                    if (ok && use_root && ps == c && pure[nd.depth - 1] && (!high || u8)) {
#ifdef TI_STATS
                        ti_skipped_root += sm->hi - sm->lo;
#endif
                        i = nd.skip; /* all in the root mask */
                        continue;
                    }
                    if (ok) {
                        /* every token below ends in ps, or (cut short inside a
                         * character) at most 3 bytes before it */
                        if (!filter || filter(ctx, ps)) {
#ifdef TI_STATS
                            ti_bulk_tokens += sm->hi - sm->lo;
#endif
                            for (uint32_t j = sm->lo, e = sm->hi; j < e; j++) {
                                int32_t id = ts->sorted[j];
                                if (cap && !sv_ti_ws_ok(ts, cap, run, id)) continue;
                                dst[id >> 5] |= 1u << (id & 31);
                            }
                            uint32_t dd = d->dist[ps] + (high ? 3 : 0);
                            if (dd > maxd) maxd = dd;
                        }
                        i = nd.skip;
                        continue;
                    }
                }
                /* a chain: strings that advance one state per byte (a
                 * string with maxLength counts its characters that way) */
                uint32_t cm, lim;
                if (!filter && (!high || sm->utf8) &&
                    chain_ok(ix, ps, sb, high, sm->maxlen - (nd.depth - 1u), &cm, &lim)) {
#ifdef TI_STATS
                    ti_bulk_tokens += sm->hi - sm->lo;
#endif
                    uint32_t maxlen = lim + (nd.depth - 1u);
                    for (uint32_t j = sm->lo, e = sm->hi; j < e; j++) {
                        int32_t id = ts->sorted[j];
                        if (ts->sorted_len[j] > maxlen || (cap && !sv_ti_ws_ok(ts, cap, run, id))) continue;
                        dst[id >> 5] |= 1u << (id & 31);
                    }
                    if (cm > maxd) maxd = cm;
                    i = nd.skip;
                    continue;
                }
            }
            if ((nd.flags & NODE_TOKENS) && (!filter || filter(ctx, ns))) {
                uint32_t lo = ts->ntok_lo[i], k = ts->ntok_n[i];
                for (uint32_t j = 0; j < k; j++) {
                    int32_t id = ts->sorted[lo + j];
                    if (cap && !sv_ti_ws_ok(ts, cap, run, id)) continue;
                    dst[id >> 5] |= 1u << (id & 31);
                }
                if (d->dist[ns] > maxd) maxd = d->dist[ns];
            }
        }
        stack[nd.depth] = ns;
        if (use_root) {
            /* pure: the path so far is a first character of the signature,
             * then looping characters */
            bool in;
            if (nd.byte >= 0x80) in = u8 && (nd.depth == 1 || pure[nd.depth - 1]);
            else if (nd.depth == 1) in = (sig.first[nd.byte >> 6] >> (nd.byte & 63)) & 1;
            else in = pure[nd.depth - 1] && ((sig.loop[nd.byte >> 6] >> (nd.byte & 63)) & 1);
            pure[nd.depth] = in;
        }
        i++;
    }
    if (d->accept[s0] && !d->call_off) /* a program's end depends on the stack (cfg_mask) */
        for (uint32_t j = 0; j < ts->neog; j++) {
            int32_t id = ts->eog[j];
            dst[id >> 5] |= 1u << (id & 31);
        }
    if (maxd_out) *maxd_out = maxd;
    return 0;
}

static uint32_t popcount_words(const uint32_t *dst, uint32_t words) {
    uint32_t count = 0;
    for (uint32_t w = 0; w < words; w++) /* without -mpopcnt the compiler writes the bit trick itself */
        count += (uint32_t)__builtin_popcount(dst[w]);
    return count;
}

uint32_t sv_token_index_fill(const sv_token_index_t *ix, int32_t state, uint32_t ws_run, sv_token_filter_fn filter,
                             void *ctx, uint32_t *dst) {
    memset(dst, 0, (size_t)ix->ts->words * sizeof *dst);
    if (ws_run > ix->o.ws_cap) ws_run = ix->o.ws_cap;
    if (ix->cfg) {
        /* The memoized mask, then the filter on each allowed token's
         * configuration (a binding budget only). */
        const uint32_t *m;
        if (sv_ti_cfg_mask((sv_token_index_t *)ix, state, ws_run, &m, NULL)) return 0;
        memcpy(dst, m, (size_t)ix->ts->words * sizeof *dst);
        if (filter)
            for (uint32_t w = 0; w < ix->ts->words; w++)
                for (uint32_t bits = dst[w]; bits; bits &= bits - 1) {
                    int32_t id = (int32_t)(w * 32 + (uint32_t)__builtin_ctz(bits));
                    if (ix->ts->kind[id] != SV_TOKKIND_NORMAL) continue;
                    int32_t nx = sv_ti_cfg_next(ix, state, id);
                    if (nx < 0 || !filter(ctx, nx)) dst[w] &= ~(1u << (id & 31));
                }
        return popcount_words(dst, ix->ts->words);
    }
    atomic_fetch_add_explicit(&((sv_token_index_t *)ix)->walks, 1, memory_order_relaxed);
    walk(ix, state, ws_run, filter, ctx, dst, NULL);
    return popcount_words(dst, ix->ts->words);
}

/* Four independent lanes of 64 bits, so that the multiplies overlap: a
 * mask of Llama 3 (16 KB) hashes in about a quarter of one chain's time. */
static uint64_t hash_words(const uint32_t *w, uint32_t n) {
    uint64_t h[4] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull, 0x27d4eb2f165667c5ull};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 4; l++) {
            uint64_t x;
            memcpy(&x, w + i + 2 * l, sizeof x);
            h[l] = (h[l] ^ x) * 0xff51afd7ed558ccdull;
            h[l] ^= h[l] >> 32;
        }
    for (; i < n; i++) h[0] = ((h[0] ^ w[i]) * 0xff51afd7ed558ccdull) ^ (h[0] >> 29);
    uint64_t r = h[0];
    for (int l = 1; l < 4; l++) r = ((r ^ h[l]) * 0xff51afd7ed558ccdull) ^ (r >> 32);
    return r ^ (r >> 29);
}

static sv_status cons_insert(sv_token_index_t *ix, const uint32_t *m, const uint32_t **out) {
    uint32_t words = ix->ts->words;
    size_t bytes = (size_t)words * sizeof *m;
    uint64_t h = hash_words(m, words);
    uint32_t mask = ix->capcons - 1;
    for (uint32_t p = (uint32_t)h & mask;; p = (p + 1) & mask) {
        cons_slot_t *sl = &ix->cons[p];
        if (!sl->mask) break;
        if (sl->hash == h && memcmp(sl->mask, m, bytes) == 0) {
            *out = sl->mask;
            return SV_OK;
        }
    }
    if (ix->mask_bytes + bytes > ix->o.max_mask_bytes) return SV_ERR_BUDGET;
    if (2 * (ix->ncons + 1) > ix->capcons) {
        uint32_t ncap = ix->capcons * 2;
        cons_slot_t *nt = calloc(ncap, sizeof *nt);
        if (!nt) return SV_ERR_NOMEM;
        for (uint32_t i = 0; i < ix->capcons; i++) {
            if (!ix->cons[i].mask) continue;
            uint32_t q = (uint32_t)ix->cons[i].hash & (ncap - 1);
            while (nt[q].mask) q = (q + 1) & (ncap - 1);
            nt[q] = ix->cons[i];
        }
        free(ix->cons);
        ix->cons = nt;
        ix->capcons = ncap;
        mask = ncap - 1;
    }
    uint32_t *copy = malloc(bytes);
    if (!copy) return SV_ERR_NOMEM;
    memcpy(copy, m, bytes);
    uint32_t p = (uint32_t)h & mask;
    while (ix->cons[p].mask) p = (p + 1) & mask;
    ix->cons[p].hash = h;
    ix->cons[p].mask = copy;
    ix->ncons++;
    ix->mask_bytes += bytes;
    *out = copy;
    return SV_OK;
}

static sv_status pure_mask(sv_token_index_t *ix, int32_t state, uint32_t ws_run, const uint32_t **mask,
                           uint32_t *max_dist);

sv_status sv_token_index_mask(sv_token_index_t *ix, int32_t state, uint32_t ws_run, const uint32_t **mask,
                              uint32_t *max_dist) {
    if (ws_run > ix->o.ws_cap) ws_run = ix->o.ws_cap;
    if (ix->cfg) return sv_ti_cfg_mask(ix, state, ws_run, mask, max_dist);
    return pure_mask(ix, state, ws_run, mask, max_dist);
}

/* The memoized walk of DFA state `state` alone (for a program: the tokens
 * that stay inside the state's part, without the end-of-generation ones). */
static sv_status pure_mask(sv_token_index_t *ix, int32_t state, uint32_t ws_run, const uint32_t **mask,
                           uint32_t *max_dist) {
    size_t key = (size_t)state * ix->nbuckets + ws_run;
    uintptr_t p = atomic_load_explicit(&ix->memo[key], memory_order_acquire);
    if (p) {
        *mask = (const uint32_t *)p;
        if (max_dist) *max_dist = ix->maxd[key];
        return SV_OK;
    }
    /* The walk runs outside the lock (as sv_token_index_fill's does), into
     * a buffer of its own: a thread walking one state does not hold up
     * another that wants a different one (the engine thread and the
     * prefetch workers share an index; src/engine/prefetch.c). Two threads
     * may walk the same state at once; the first to insert wins. */
    uint32_t *buf = calloc(ix->ts->words, sizeof *buf);
    if (!buf) return SV_ERR_NOMEM;
    uint32_t md;
    atomic_fetch_add_explicit(&ix->walks, 1, memory_order_relaxed);
    walk(ix, state, ws_run, NULL, NULL, buf, &md);
    pthread_mutex_lock(&ix->lock);
    p = atomic_load_explicit(&ix->memo[key], memory_order_relaxed);
    if (!p) {
        const uint32_t *m;
        sv_status st = cons_insert(ix, buf, &m);
        if (st) {
            pthread_mutex_unlock(&ix->lock);
            free(buf);
            return st;
        }
        ix->maxd[key] = md;
        ix->known++;
        p = (uintptr_t)m;
        atomic_store_explicit(&ix->memo[key], p, memory_order_release);
    }
    pthread_mutex_unlock(&ix->lock);
    free(buf);
    *mask = (const uint32_t *)p;
    if (max_dist) *max_dist = ix->maxd[key];
    return SV_OK;
}


bool sv_token_index_mask_known(const sv_token_index_t *ix, int32_t state, uint32_t ws_run) {
    if (ix->cfg) return sv_ti_cfg_known(ix, state, ws_run);
    if (state < 0 || (uint32_t)state >= ix->dfa->nstates) return false;
    if (ws_run > ix->o.ws_cap) ws_run = ix->o.ws_cap;
    return atomic_load_explicit(&ix->memo[(size_t)state * ix->nbuckets + ws_run], memory_order_acquire) != 0;
}

int32_t sv_token_index_next(const sv_token_index_t *ix, int32_t s, int32_t id) {
    const sv_token_set_t *ts = ix->ts;
    if (s < 0 || id < 0 || (uint32_t)id >= ts->n || ts->kind[id] != SV_TOKKIND_NORMAL) return SV_DFA_DEAD;
    if (ix->cfg) return sv_ti_cfg_next(ix, s, id);
    const sv_dfa_t *d = ix->dfa;
    const uint8_t *b = ts->buf + ts->off[id];
    for (uint32_t i = 0, L = ts->len[id]; i < L && s >= 0; i++) s = d->trans[(size_t)s * d->nclasses + d->classes[b[i]]];
    return s;
}

void sv_token_index_stats(sv_token_index_t *ix, sv_token_index_stats_t *st) {
    pthread_mutex_lock(&ix->lock);
    st->distinct_masks = ix->ncons;
    st->known_entries = ix->known;
    st->mask_bytes = ix->mask_bytes + sv_ti_cfg_bytes(ix); /* a program's configurations count too */
    st->walks = atomic_load(&ix->walks);
    pthread_mutex_unlock(&ix->lock);
}


/* ---- for token_config.c (token_index_internal.h) ---------------------------- */

void sv_ti_state_loops(const sv_token_index_t *ix, int32_t s, uint64_t out[2]) { state_loops(ix, s, out); }
bool sv_ti_state_utf8(const sv_token_index_t *ix, int32_t s) { return state_utf8(ix, s); }
sv_status sv_ti_cons_insert(sv_token_index_t *ix, const uint32_t *m, const uint32_t **out) { return cons_insert(ix, m, out); }
sv_status sv_ti_pure_mask(sv_token_index_t *ix, int32_t state, uint32_t ws_run, const uint32_t **mask, uint32_t *max_dist) {
    return pure_mask(ix, state, ws_run, mask, max_dist);
}
