/* token_index_internal.h — the token set and token index structures, shared
 * by token_index.c (tries, plain walks, the mask set) and token_config.c (a
 * program's configurations); not part of the public API. */
#ifndef SV_FSM_TOKEN_INDEX_INTERNAL_H
#define SV_FSM_TOKEN_INDEX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "token_index.h"

struct sv_token_set {
    uint32_t n, mask_bits, words;
    uint8_t *kind;         /* (n) */
    uint32_t *off, *len;   /* (n): bytes in buf */
    uint8_t *buf;
    /* whitespace shape of each token: leading and trailing run, longest run,
     * and whether it is whitespace only */
    uint16_t *ws_lead, *ws_trail, *ws_max;
    uint8_t *ws_all;
    int32_t *eog;          /* EOG ids */
    uint32_t neog;
    bool all_bytes;
    uint64_t single[4];   /* the bytes that are a token on their own */
    /* the trie */
    uint32_t nnodes;
    uint8_t *nbyte;
    uint16_t *ndepth;
    uint32_t *nskip;
    uint32_t *ntok_lo;     /* into sorted */
    uint16_t *ntok_n;
    int32_t *sorted;       /* NORMAL ids sorted by bytes */
    uint32_t nsorted;
    uint32_t max_len;
    /* Subtree summaries, for nodes with at least SUMMARY_MIN tokens below:
     * nsum[i] indexes sums, or is UINT32_MAX. */
    uint32_t *nsum;
    struct summary *sums;
    uint16_t *sorted_len;  /* token lengths in `sorted` order */
    uint32_t nsums;
    /* the same nodes packed for the walk: one 8-byte record each */
    struct node *nodes;
    /* Root masks: for a state whose self-loop bytes are many (string
     * content), the tokens made only of those bytes (and of whole UTF-8
     * characters, when they loop too) are allowed whatever the DFA; they are
     * cached by that signature and shared by every index on this set. */
    uint64_t (*tok_ascii)[2];  /* (n) ASCII bytes of each token after its first character */
    uint8_t *tok_first;        /* (n) first byte */
    uint8_t *tok_root_ok;      /* (n) UTF-8 from byte 0 (last character may be cut) */
    uint8_t *tok_high;         /* (n) has a byte >= 0x80 */
    pthread_mutex_t root_lock;
    void **roots;              /* root_entry_t, most recently used first */
    uint32_t nroots;
    void **loops;              /* loop_entry_t, most recently used first */
    uint32_t nloops;
    /* tokens whose first byte is >= 0x80 but not a whole character, walked
     * whole when whole characters take the tails (have_partial: built) */
    struct tail_trie *partial;
    bool have_partial;
    uint32_t first_lo[257];    /* sorted[first_lo[x] .. first_lo[x + 1]): the tokens starting with byte x */
};

/* One record per summarized node, so a check touches one cache line. */
typedef struct summary {
    uint64_t bytes[4];     /* every byte on an edge of the subtree, the node's own included */
    uint32_t lo, hi;       /* the subtree's tokens: sorted[lo..hi) */
    uint16_t maxlen;       /* the longest token in the subtree */
    uint8_t utf8;          /* every token's bytes from this node on are UTF-8 from a
                              character boundary (possibly cut short at the end) */
} summary_t;

typedef struct node {
    uint32_t skip;
    uint16_t depth;
    uint8_t byte;
    uint8_t flags;   /* NODE_TOKENS, NODE_SUMMARY */
} node_t;

enum { NODE_TOKENS = 1, NODE_SUMMARY = 2 };

typedef struct {
    uint64_t hash;
    uint32_t *mask;
} cons_slot_t;

struct sv_token_index {
    uint64_t serial; /* sv_token_index_serial: unique in the process, from 1 */
    sv_dfa_t *dfa;
    const sv_token_set_t *ts;
    sv_token_index_opts_t o;
    uint32_t nbuckets;                 /* ws_cap + 1 */
    size_t nentries;                   /* nstates * nbuckets */
    _Atomic(uintptr_t) *memo;          /* (nentries): const uint32_t * or 0 */
    uint32_t *maxd;                    /* (nentries) */
    pthread_mutex_t lock;
    cons_slot_t *cons;                 /* hash set of distinct masks (under lock) */
    uint32_t ncons, capcons;
    uint32_t *scratch;                 /* words (under lock) */
    size_t mask_bytes;
    uint32_t known;
    _Atomic uint64_t walks;
    /* per state, computed on first need by any walk: its ASCII self-loop
     * bytes and whether every multi-byte character loops on it */
    _Atomic uint8_t *st_flags;        /* ST_LOOP, ST_UTF8_KNOWN, ST_UTF8 */
    _Atomic uint64_t (*st_loop)[2];
    /* the state most ASCII bytes lead to, and those bytes */
    _Atomic int32_t *st_uni;
    _Atomic uint64_t (*st_uniset)[2];
    /* runs: from s, how many uniform steps keep the same byte set and
     * UTF-8 flag, and the largest distance on the way */
    _Atomic uint64_t (*st_live)[2];   /* ASCII bytes with a live transition */
    _Atomic uint16_t *st_run;
    _Atomic uint32_t *st_runmaxd;
    struct cfgtab *cfg;               /* a program's configurations (below), else NULL */
    /* sv_token_index_bytes_bound, found on first need: 0 not yet, 1 yes, 2 no */
    _Atomic uint8_t bytes_bound;
};


static inline bool sv_ti_ws_ok(const sv_token_set_t *ts, uint32_t cap, uint32_t run, int32_t id) {
    if (ts->ws_max[id] > cap) return false;
    return run + (ts->ws_all[id] ? ts->len[id] : ts->ws_lead[id]) <= cap;
}


/* A trie of byte strings in depth-first preorder, walked like the main
 * trie but without summaries: node i's tokens are ids[tok_lo ..
 * tok_lo + tok_n). */
typedef struct tail_node {
    uint32_t skip, tok_lo, tok_n;
    uint16_t depth;
    uint8_t byte;
    uint8_t quote; /* some string of the subtree has a '"' from this node on */
} tail_node_t;

typedef struct tail_trie {
    tail_node_t *nodes;
    int32_t *ids;
    uint32_t nnodes, nids;
} tail_trie_t;

/* The tokens of state s0's root signature (token_index.c, "Tokens merged
 * by what follows their looping characters"): from s0, a first[] byte (or,
 * with utf8_first, a whole multi-byte character, labeled by its lead byte)
 * leads to c by a direct move, and c's loop bytes keep it in c. A token made
 * of such a first character and looping ones ends in c having crossed no
 * boundary; any other token whose first character is one of those is in the
 * trie as (first byte, what follows the looping run), walked from c. */
typedef struct sv_ti_tails {
    const tail_trie_t *trie;
    void *entry;              /* the shared loop entry held */
    uint64_t first[2];
    bool utf8_first;
    int32_t c;
} sv_ti_tails_t;

/* The chain from state s0 (token_index.c, "Chains": a string with
 * maxLength): its uniform successors sk[1..nk] take the ASCII byte set U
 * (first[]), and every whole multi-byte character when utf8, one state a
 * character, by direct moves. ktails holds every token whose first k
 * characters are in U and which goes on with another byte, as (k, what
 * follows), walked from sk[k]; a token made only of U characters reaches
 * sk[its characters] by direct moves. When finite, U characters (and
 * multi-byte ones, with utf8) have no direct move at sk[nk]. */
typedef struct sv_ti_chain {
    const tail_trie_t *ktails;
    void *entry;              /* the shared loop entry held */
    uint64_t first[2];
    bool utf8, finite;
    uint32_t nk;
    uint32_t maxd;            /* the largest dist[] of sk[1..nk] */
    int32_t *sk;              /* the caller's SV_TOKEN_SET_MAX_BYTES + 1 states */
} sv_ti_chain_t;

/* token_index.c, for token_config.c */
/* False when s0 starts no chain of at least ROOT_MIN_LOOP ASCII bytes, or
 * its loop entry has no chain data. */
bool sv_ti_chain_acquire(const sv_token_index_t *ix, int32_t s0, int32_t *sk, sv_ti_chain_t *out);
void sv_ti_chain_release(const sv_token_index_t *ix, sv_ti_chain_t *ch);
/* Whether every string of at most h bytes over the ASCII bytes sb[0..1]
 * (and whole multi-byte characters, with high) walks from s by uniform
 * steps, all direct moves (token_index.c, "Chains": a string with
 * maxLength); *maxd is then the largest distance on the way (plus 3 for a
 * character cut short). */
bool sv_ti_chain_fits(const sv_token_index_t *ix, int32_t s, const uint64_t *sb, bool high, uint32_t h,
                      uint32_t *maxd);
/* False when s0 has no signature or its loop set no tails trie. */
bool sv_ti_tails_acquire(const sv_token_index_t *ix, int32_t s0, sv_ti_tails_t *out);
void sv_ti_tails_release(const sv_token_index_t *ix, sv_ti_tails_t *t);
void sv_ti_state_loops(const sv_token_index_t *ix, int32_t s, uint64_t out[2]);
bool sv_ti_state_utf8(const sv_token_index_t *ix, int32_t s);
sv_status sv_ti_cons_insert(sv_token_index_t *ix, const uint32_t *m, const uint32_t **out);
/* The memoized plain walk of a DFA state (for a program: the tokens that
 * stay in the state's part, without EOG). */
sv_status sv_ti_pure_mask(sv_token_index_t *ix, int32_t state, uint32_t ws_run, const uint32_t **mask,
                          uint32_t *max_dist);

/* token_config.c: a program's configurations */
struct cfgtab;
sv_status sv_ti_cfg_create(sv_token_index_t *ix);
void sv_ti_cfg_destroy(struct cfgtab *t);
sv_status sv_ti_cfg_mask(sv_token_index_t *ix, int32_t v, uint32_t ws_run, const uint32_t **mask, uint32_t *max_dist);
bool sv_ti_cfg_known(const sv_token_index_t *ix, int32_t v, uint32_t ws_run);
int32_t sv_ti_cfg_next(const sv_token_index_t *ix, int32_t v, int32_t id);
size_t sv_ti_cfg_bytes(const sv_token_index_t *ix);

#endif
