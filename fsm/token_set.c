/* token_set.c — a vocabulary as the token index sees it, and its trie.
 *
 * A token set holds each id's bytes and kind (NORMAL, EOG, NEVER), the
 * whitespace shape of each token (leading and trailing run, longest run,
 * whitespace only) for the whitespace cap, and the few facts per token that
 * root masks test (token_shortcut.c): its first byte, the ASCII bytes after
 * its first character, whether it has a byte >= 0x80, whether it is UTF-8
 * from byte 0.
 *
 * The trie of the NORMAL tokens is built from their ids sorted by bytes:
 * each token adds one node per byte past its common prefix with the one
 * before, so the nodes come out in depth-first preorder, as parallel
 * arrays: node i has the byte on its incoming edge, its depth (1 for
 * children of the root) and skip[i], the index just past its subtree.
 * Tokens with equal bytes hang off the same node, as a range of the sorted
 * ids. A walk from a DFA state is then one forward scan (token_index.c).
 *
 * A node with children and at least SUMMARY_MIN tokens at or below it gets
 * a summary: every byte on an edge of its subtree, the subtree's range of
 * sorted ids, its longest token, and whether every token is UTF-8 from a
 * character boundary from that node on. The walk allows such a subtree
 * whole when its bytes loop on the state or step along a chain of states
 * (docs/token_index.md, shortcuts 1 and 2).
 * For the scan, the nodes are packed again into one 8-byte record each.
 *
 * Costs: building is a sort of the ids by bytes, then passes over the
 * nodes (each node's byte and tokens go to its summarized ancestors), once
 * per tokenizer (the Llama 3 vocabulary gives 274,520 nodes). A set is
 * immutable afterwards except for the shortcuts' caches, which have a lock
 * of their own (root_lock). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/token_index_internal.h"

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
    sv_ti_shortcuts_free(ts);
    pthread_mutex_destroy(&ts->root_lock);
    free(ts);
}

/* Whether b[p..len) is UTF-8 starting at a character boundary; the last
 * character may be cut short. */
static bool utf8_from(const uint8_t *b, uint32_t len, uint32_t p) {
    while (p < len) {
        uint32_t n;
        uint8_t lo, hi;
        if (!sv_utf8_lead(b[p], &n, &lo, &hi)) return false;
        p++;
        for (uint32_t k = 0; k < n && p < len; k++, p++) {
            if (k == 0 ? (b[p] < lo || b[p] > hi) : !sv_ti_utf8_cont(b[p])) return false;
        }
    }
    return true;
}

/* The smallest p from which the token is UTF-8 from a boundary (len when
 * none); from any later p at a non-continuation byte it is too. */
static uint32_t utf8_start(const uint8_t *b, uint32_t len) {
    for (uint32_t p = 0; p < len; p++)
        if (!sv_ti_utf8_cont(b[p]) && utf8_from(b, len, p)) return p;
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
            if (sv_ti_utf8_cont(b)) ts->sums[ts->nsum[i]].utf8 = 0;
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
    if (!ts->tok_ascii || !ts->tok_first || !ts->tok_root_ok || !ts->tok_high || !sv_ti_shortcuts_init(ts)) {
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
    if (!st) sv_ti_partial_build(ts); /* without it, walks take the main trie there */
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
