/* token_index_internal.h — the token set and token index structures, and
 * what their files share; not part of the public API (token_index.h).
 *
 *   token_set.c       the token set: bytes, kinds, the vocabulary trie and
 *                     its subtree summaries
 *   token_index.c     the index: the walk of the trie from a state, and the
 *                     per-state facts it tests (loops, uniform successors)
 *   token_shortcut.c  the shortcuts from a walk's start state (root masks,
 *                     tails, chains) and their caches in the token set
 *   token_memo.c      the memo of masks per (state, whitespace bucket) and
 *                     the hash set of distinct masks
 *   token_config.c    a program's configurations (a state and a stack) */
#ifndef SV_FSM_TOKEN_INDEX_INTERNAL_H
#define SV_FSM_TOKEN_INDEX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "util/utf8.h" /* sv_utf8_lead */
#include "fsm/token_index.h"

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
    /* Root masks (token_shortcut.c): for a state whose self-loop bytes are
     * many (string content), the tokens made only of those bytes (and of
     * whole UTF-8 characters, when they loop too) are allowed whatever the
     * DFA; they are cached by that signature and shared by every index on
     * this set. */
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
    /* What the plain walks read (masks of tokens that stay in a part, and
     * their shortcuts): dfa itself, or for a program with key sets a view
     * of it without the moves that a guard checks (into a key's spelling,
     * a key's end, an object's close), which the boundary walk takes with
     * the set (token_config.c), and with dist[] the bounds ub[]. */
    const sv_dfa_t *walk;
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
    struct cfgtab *cfg;               /* a program's configurations (token_config.c), else NULL */
    /* sv_token_index_bytes_bound, found on first need: 0 not yet, 1 yes, 2 no */
    _Atomic uint8_t bytes_bound;
    /* sv_token_index_note_*: an open-addressed table of (key + 1, value)
     * pairs, under lock; its bytes count in mask_bytes */
    struct { uint64_t key; uint32_t extra, val; } *notes;
    uint32_t nnotes, capnotes;
    const void *note_owner;
    const uint32_t **fmasks;          /* sv_token_index_filtered_*: masks of the set, by note value */
    uint32_t nfmasks, capfmasks;
};

/* Whether token id keeps every whitespace run within cap after a run of
 * run bytes. */
static inline bool sv_ti_ws_ok(const sv_token_set_t *ts, uint32_t cap, uint32_t run, int32_t id) {
    if (ts->ws_max[id] > cap) return false;
    return run + (ts->ws_all[id] ? ts->len[id] : ts->ws_lead[id]) <= cap;
}

/* UTF-8 as the walks read it (token_set.c, token_index.c, token_shortcut.c). */
static inline bool sv_ti_utf8_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

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

/* The tokens of state s0's root signature (token_shortcut.c, loop_entry_t:
 * tokens merged by what follows their looping characters): from s0, a
 * first[] byte (or, with utf8_first, a whole multi-byte character, labeled
 * by its lead byte) leads to c by a direct move, and c's loop bytes keep it
 * in c. A token made of such a first character and looping ones ends in c
 * having crossed no boundary; any other token whose first character is one
 * of those is in the trie as (first byte, what follows the looping run),
 * walked from c. */
typedef struct sv_ti_tails {
    const tail_trie_t *trie;
    void *entry;              /* the shared loop entry held */
    uint64_t first[2];
    bool utf8_first;
    int32_t c;
} sv_ti_tails_t;

/* The chain from state s0 (token_shortcut.c, sv_ti_chain_acquire: a string
 * with maxLength): its uniform successors sk[1..nk] take the ASCII byte set U
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

/* What the shortcuts from a walk's start state leave to the scan of the
 * main trie (sv_ti_walk_start). */
typedef struct sv_ti_start {
    uint32_t maxd;            /* the largest distance of the tokens set so far */
    /* tails (of a root signature, or of a chain): the first bytes whose
     * subtrees the scan skips, their tokens being set already */
    bool tails;
    uint64_t skip_first[4];
    /* else a root mask, set already: the signature's state c, its first and
     * loop bytes, and whether multi-byte characters both start and loop */
    bool root, u8;
    int32_t c;
    uint64_t first[2], loop[2];
} sv_ti_start_t;

/* ---- token_set.c uses token_shortcut.c ---------------------------------- */

/* The set's empty root and loop LRUs; false when out of memory. */
bool sv_ti_shortcuts_init(sv_token_set_t *ts);
/* Once the trie is built: the first-byte ranges of the sorted tokens
 * (first_lo) and the trie of the tokens cut inside their first character
 * (partial; have_partial stays false when it is too big or memory runs
 * out, and the walks take the main trie instead). */
void sv_ti_partial_build(sv_token_set_t *ts);
/* Frees the LRUs' entries and the partial trie (of a set built or not). */
void sv_ti_shortcuts_free(sv_token_set_t *ts);

/* ---- token_index.c: the walk and per-state facts ------------------------- */

/* Sets in dst (zeroed by the caller) the tokens allowed from state s0 with
 * a whitespace run of run bytes before (and the EOG tokens when s0 accepts,
 * for a plain DFA); with a filter, a token only when filter(ctx, its end
 * state). *maxd_out, if non-NULL, gets the largest distance of the allowed
 * tokens' end states. */
void sv_ti_walk(const sv_token_index_t *ix, int32_t s0, uint32_t run, sv_token_filter_fn filter, void *ctx,
                uint32_t *dst, uint32_t *maxd_out);
/* Facts about state s, computed on first need and kept in the index. */
/* Its ASCII self-loop bytes. */
void sv_ti_state_loops(const sv_token_index_t *ix, int32_t s, uint64_t out[2]);
/* Whether every multi-byte character leads from s back to s (and so every
 * prefix of one is live). */
bool sv_ti_state_utf8(const sv_token_index_t *ix, int32_t s);
/* Its uniform successor: the live state most ASCII bytes lead to (-1 when
 * none), and the set of those bytes. */
int32_t sv_ti_state_uni(const sv_token_index_t *ix, int32_t s, uint64_t set[2]);
/* Whether every multi-byte character leads from s to uni, its uniform
 * successor. */
bool sv_ti_state_uni8(const sv_token_index_t *ix, int32_t s, int32_t uni);
/* The ASCII bytes with a live move from s. */
void sv_ti_state_live(const sv_token_index_t *ix, int32_t s, uint64_t out[2]);
/* Its run: how many uniform steps from s keep the same byte set and UTF-8
 * flag (SV_TI_RUN_INF when they reach a state that steps to itself), and
 * in *maxd the largest distance on the way. */
#define SV_TI_RUN_INF UINT16_MAX
uint32_t sv_ti_state_run(const sv_token_index_t *ix, int32_t s, uint32_t *maxd);
/* Whether every string of at most h bytes over the ASCII bytes sb[0..1]
 * (and whole multi-byte characters, with high) walks from s by uniform
 * steps, all direct moves (docs/token_index.md, shortcut 2: a string with
 * maxLength); *maxd is then the largest distance on the way (plus 3 for a
 * character cut short). */
bool sv_ti_chain_fits(const sv_token_index_t *ix, int32_t s, const uint64_t *sb, bool high, uint32_t h,
                      uint32_t *maxd);
/* Whether every multi-byte character leads from state `from` to state s. */
bool sv_ti_utf8_to(const sv_dfa_t *d, int32_t from, int32_t s);

/* ---- token_shortcut.c: the shortcuts from a start state ------------------ */

/* Shortcuts 3 to 5 (docs/token_index.md) from s0, for a walk with neither
 * a filter nor a whitespace cap: sets their tokens in dst (zeroed by the
 * caller) and says in *out what the scan of the main trie still does. */
void sv_ti_walk_start(const sv_token_index_t *ix, int32_t s0, uint32_t *dst, sv_ti_start_t *out);
/* False when s0 starts no chain of at least ROOT_MIN_LOOP ASCII bytes, or
 * its loop entry has no chain data. sk: SV_TOKEN_SET_MAX_BYTES + 1 states. */
bool sv_ti_chain_acquire(const sv_token_index_t *ix, int32_t s0, int32_t *sk, sv_ti_chain_t *out);
void sv_ti_chain_release(const sv_token_index_t *ix, sv_ti_chain_t *ch);
/* False when s0 has no signature or its loop set no tails trie. */
bool sv_ti_tails_acquire(const sv_token_index_t *ix, int32_t s0, sv_ti_tails_t *out);
void sv_ti_tails_release(const sv_token_index_t *ix, sv_ti_tails_t *t);

/* ---- token_memo.c: the memo of masks ------------------------------------- */

/* The stored copy of mask m in *out, inserted when new; borrowed for the
 * index's lifetime. SV_ERR_BUDGET past max_mask_bytes. The caller holds
 * the index's lock. */
sv_status sv_ti_cons_insert(sv_token_index_t *ix, const uint32_t *m, const uint32_t **out);
/* The memoized plain walk of a DFA state (for a program: the tokens that
 * stay in the state's part, without EOG). */
sv_status sv_ti_pure_mask(sv_token_index_t *ix, int32_t state, uint32_t ws_run, const uint32_t **mask,
                          uint32_t *max_dist);

/* ---- token_config.c: a program's configurations ------------------------- */
struct cfgtab;
sv_status sv_ti_cfg_create(sv_token_index_t *ix);
void sv_ti_cfg_destroy(struct cfgtab *t);
sv_status sv_ti_cfg_mask(sv_token_index_t *ix, int32_t v, uint32_t ws_run, const uint32_t **mask, uint32_t *max_dist);
bool sv_ti_cfg_known(const sv_token_index_t *ix, int32_t v, uint32_t ws_run);
int32_t sv_ti_cfg_next(const sv_token_index_t *ix, int32_t v, int32_t id);
/* The mask of configuration v into dst: the memoized one, or, where the
 * memo's budget is spent (SV_ERR_BUDGET from sv_ti_cfg_mask), the same
 * union computed without storing it. */
sv_status sv_ti_cfg_fill(sv_token_index_t *ix, int32_t v, uint32_t ws_run, uint32_t *dst);
/* out[i] = sv_ti_cfg_next(ix, v, ids[i]) for i < n, under one lock. */
void sv_ti_cfg_next_n(const sv_token_index_t *ix, int32_t v, const int32_t *ids, uint32_t n, int32_t *out);
size_t sv_ti_cfg_bytes(const sv_token_index_t *ix);

#endif
