/* token_shortcut.c — the shortcuts a walk takes from its start state, and
 * their caches in the token set (docs/token_index.md, shortcuts 3 to 5).
 *
 * Inside string content a state allows about 96% of the vocabulary, and the
 * main trie walk (token_index.c) would visit most of its nodes to say so.
 * When at least ROOT_MIN_LOOP ASCII bytes lead from the start state s0 to
 * one state c (the state most of them lead to) and as many loop on c, s0
 * has a root signature: those first bytes F, the loop bytes L of c, and
 * whether every multi-byte character leads s0 to c and loops on c.
 * What follows depends on the signature only, so it is computed once per
 * token set and shared by every index and every schema:
 *
 *   - a root mask (root_entry_t, an LRU of ROOT_CACHE per set): the tokens
 *     made of a first character in F and then characters in L, allowed
 *     whatever the rest of the DFA is. The walk starts from a copy and skips the
 *     subtrees that it covers;
 *   - tails (loop_entry_t, an LRU of LOOP_CACHE per set, keyed by L alone):
 *     each token split after its first character and its longest run of
 *     looping characters. A token that is all run ("rest loops") is allowed
 *     when its first character is in F; any other is in a small trie as
 *     (first byte, what follows), walked once from c under the first bytes
 *     in F. The main trie is then walked under the other first bytes only,
 *     and tokens cut inside their first character take the partial trie
 *     built with the set. This replaces the root mask where it is built;
 *   - chains (a string with maxLength: no loop, but a uniform successor
 *     for R more characters): the same loop entry, built further on first
 *     use, merges the tokens by (number k of leading characters that step
 *     along the chain, what follows), walked from the k-th successor; the
 *     tokens made only of such characters are allowed when they have at
 *     most R of them, taken out by a sorted list or, for R below
 *     CHAIN_MIN_RUN, by one bitset per R.
 *
 * Each is exact: every mask is checked against brute force by
 * tests/unit/test_token_index.c. Entries are shared under the set's
 * root_lock and counted by the walks that hold them, so that one evicted
 * meanwhile is freed by its last user. Costs: a root mask is one pass over
 * the ids; a tails or chain trie one pass and a sort of at most
 * TAIL_MAX_ENTRIES strings, into at most TAIL_MAX_NODES nodes (a loop set
 * that would need more falls back on the main trie and the root mask). For
 * string content, the 128k tokens of Llama 3 leave about 3,300 tokens with
 * a tail, under 2,000 nodes, and a mask takes about 10 µs instead of 100. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/dfa_internal.h"
#include "fsm/internal/token_index_internal.h"

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

bool sv_ti_shortcuts_init(sv_token_set_t *ts) {
    ts->roots = calloc(ROOT_CACHE, sizeof *ts->roots);
    ts->loops = calloc(LOOP_CACHE, sizeof *ts->loops);
    return ts->roots && ts->loops;
}

void sv_ti_shortcuts_free(sv_token_set_t *ts) {
    for (uint32_t i = 0; i < ts->nroots; i++) root_entry_free(ts->roots[i]);
    free(ts->roots);
    for (uint32_t i = 0; i < ts->nloops; i++) loop_entry_free(ts->loops[i]);
    free(ts->loops);
    tail_trie_free(ts->partial);
    free(ts->partial);
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
    if (!sv_utf8_lead(b[0], &k, &lo, &hi) || k == 0) return 0;
    k++; /* bytes in all */
    if (n < k || b[1] < lo || b[1] > hi) return 0;
    for (uint32_t j = 2; j < k; j++)
        if (!sv_ti_utf8_cont(b[j])) return 0;
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

void sv_ti_partial_build(sv_token_set_t *ts) {
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

static int cmp_long(const void *a, const void *b) {
    const uint32_t *x = a, *y = b; /* (chars, id) pairs */
    if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* The chain data of a loop entry (built once, under root_lock): for every
 * token made of loop characters from its first byte on, the number k of
 * those characters and what follows; the tokens made only of them and
 * longer than CHAIN_MIN_RUN characters, longest first; and by bitsets
 * those longer than each k below CHAIN_MIN_RUN. */
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
    const sv_dfa_t *d = ix->walk;
    uint64_t first[2];
    int32_t best = sv_ti_state_uni(ix, s0, first); /* the most common live target among ASCII bytes */
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
    sig->utf8_first = sv_ti_utf8_to(d, s0, best);
    sig->utf8_loop = sv_ti_state_utf8(ix, best);
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
 * alike (u) for R steps (sv_ti_state_run), as a string with maxLength counts its
 * characters. A token whose first k characters are in U reaches sk after
 * them, whatever they are, so the tokens are merged by (k, what follows):
 * the loop entry of (U, u) holds that trie, the tokens made only of U
 * characters (in the "rest loops" bitsets) and, by their character counts,
 * those that outrun a chain of R characters. Exact only when no token can
 * outrun the chain, or when every character of U dies at its end
 * (maxLength reached). */
bool sv_ti_chain_acquire(const sv_token_index_t *ix, int32_t s0, int32_t *sk, sv_ti_chain_t *out) {
    const sv_token_set_t *ts = ix->ts;
    const sv_dfa_t *d = ix->walk;
    uint64_t U[2];
    int32_t s1 = sv_ti_state_uni(ix, s0, U);
    if (s1 < 0 || s1 == s0 || __builtin_popcountll(U[0]) + __builtin_popcountll(U[1]) < ROOT_MIN_LOOP) return false;
    bool u = sv_ti_state_uni8(ix, s0, s1);
    uint32_t rmd, R = sv_ti_state_run(ix, s0, &rmd);
    uint32_t K = ts->max_len; /* no token has more characters */
    bool finite = R != SV_TI_RUN_INF && R < K;
    uint32_t nk = finite ? R : K, md = 0;
    sk[0] = s0;
    for (uint32_t k = 1; k <= nk; k++) {
        uint64_t set[2];
        sk[k] = sv_ti_state_uni(ix, sk[k - 1], set);
        if (sk[k] < 0) return false; /* cannot happen within the run */
        if (d->dist[sk[k]] > md) md = d->dist[sk[k]];
    }
    if (finite) {
        /* every character of U must die after the R-th */
        uint64_t live[2];
        sv_ti_state_live(ix, sk[R], live);
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
    walk_tails(ix->walk, ch.ktails, NULL, sk, ch.nk, s0, dst, &md);
    skip_first[0] = ch.first[0];
    skip_first[1] = ch.first[1];
    if (ch.utf8 && ts->have_partial) {
        skip_first[2] = skip_first[3] = ~0ull;
        walk_tails(ix->walk, ts->partial, NULL, NULL, 0, s0, dst, &md);
    }
    *maxd = md;
    sv_ti_chain_release(ix, &ch);
    return true;
}

void sv_ti_walk_start(const sv_token_index_t *ix, int32_t s0, uint32_t *dst, sv_ti_start_t *out) {
    const sv_token_set_t *ts = ix->ts;
    const sv_dfa_t *d = ix->walk;
    root_sig_t sig;
    int32_t c;
    *out = (sv_ti_start_t){.c = -1};
    if (root_signature(ix, s0, &sig, &c)) {
        loop_entry_t *le = loop_acquire(ts, &sig);
        if (le && le->have_tails) {
            /* A token whose first character takes s0 to c is allowed when
             * the rest loops, and is in the tails otherwise. The main walk
             * takes the tokens of the other first bytes (and those cut
             * inside their first character, unless the partial trie does). */
            rest_loops(ts, le, sig.first, sig.utf8_first, dst);
            out->maxd = d->dist[c];
            walk_tails(d, &le->tails, &sig, NULL, 0, c, dst, &out->maxd);
            out->tails = true;
            out->skip_first[0] = sig.first[0];
            out->skip_first[1] = sig.first[1];
            if (sig.utf8_first && ts->have_partial) {
                out->skip_first[2] = out->skip_first[3] = ~0ull;
                walk_tails(d, ts->partial, NULL, NULL, 0, s0, dst, &out->maxd);
            }
        }
        if (le) lru_release(ts, le, loop_entry_free);
        root_entry_t *re;
        if (!out->tails && (re = root_acquire(ts, &sig))) {
            out->root = true;
            out->u8 = sig.utf8_first && sig.utf8_loop;
            out->c = c;
            memcpy(out->first, sig.first, sizeof out->first);
            memcpy(out->loop, sig.loop, sizeof out->loop);
            memcpy(dst, re->mask, (size_t)ts->words * sizeof *dst);
            lru_release(ts, re, root_entry_free);
            /* its tokens end in c, or cut short inside a character */
            out->maxd = d->dist[c] + (out->u8 ? 3 : 0);
        }
    } else if (chain_walk(ix, s0, dst, &out->maxd, out->skip_first)) {
        out->tails = true;
    }
}
