/* dfa_internal.h — the DFA struct and the construction pipeline, shared by
 * the files of fsm/ and by its tests; not part of the public API. */
#ifndef SV_FSM_DFA_INTERNAL_H
#define SV_FSM_DFA_INTERNAL_H

#include <pthread.h>

#include "util/hash.h"
#include "fsm/ast.h"
#include "fsm/dfa.h"

struct sv_dfa {
    uint32_t nstates;
    uint32_t nclasses;
    uint8_t classes[256];     /* byte -> class */
    uint8_t class_rep[256];   /* class -> its smallest byte */
    int32_t *trans;           /* (nstates, nclasses): next state or SV_DFA_DEAD */
    uint8_t *accept;          /* (nstates): 1 if accepting */
    uint32_t *dist;           /* (nstates): fewest bytes to acceptance */
    uint32_t *forced_off;     /* (nstates): offset into forced_buf */
    uint32_t *forced_len;     /* (nstates): 0 if not forced */
    uint8_t *forced_buf;      /* the forced chains, each state's a suffix of one */
    uint32_t nforced;         /* states with forced_len > 0 */
    _Atomic uint64_t fp;      /* fingerprint of the tables (dfa_cache.c), 0 = not yet */
    /* A program (program.c): several parts linked into one table, with call
     * edges. NULL for a plain DFA. State s's calls are calls[call_off[s] ..
     * call_off[s + 1]); accept[] then means "final in its part" (the whole
     * string is accepted in a final state of the root part, states
     * 0..root_states-1, with no frame on the stack), and dist[] counts the
     * bytes to the part's end, a call costing its callee's shortest string. */
    uint32_t *call_off;       /* (nstates + 1) */
    struct sv_dfa_call *calls;
    uint32_t ncalls, nparts, root_states;
    /* Per state, what the token index's boundary walk prunes by
     * (fsm/token_config.c): bdist, a lower bound on the bytes to a
     * boundary (SV_BDIST_INF: never), and qcrit, whether every way there
     * by direct moves takes a byte of the quote's class. Found by the link
     * from the parts' own tables (program.c); NULL when out of memory. */
    uint16_t *bdist;
    uint8_t *qcrit;
    /* Key sets walked in the frame (--key-order any; program.c, "Key
     * sets"): NULL when no part is an object with guarded keys. */
    struct sv_keysets *ks;
    /* What it is charged to the memory account of the compile that built
     * it (util/memacct.h; 0: nothing). */
    uint64_t acct;
    size_t charged;
    /* Charged through its shared tables instead (holds one of their
     * holders, below): the tables count once in an account however many
     * of its DFAs hold them. */
    bool holds;
    /* Non-NULL: trans, accept, dist and the forced tables above belong to
     * this holder, shared with other DFAs of the same tables (the DFA memo
     * and the copies it hands out, dfa_cache.c); the last to go frees them.
     * Tables are immutable once built, so sharing needs no lock. */
    struct sv_dfa_tables *tables;
};

#define SV_BDIST_INF UINT16_MAX

typedef struct sv_dfa_tables {
    _Atomic uint32_t refs;
    int32_t *trans;
    uint8_t *accept;
    uint32_t *dist, *forced_off, *forced_len;
    uint8_t *forced_buf;
    /* The one account the tables are charged to (bytes), while `holders`
     * DFAs charged to it hold them (sv_dfa_charge); 0 holders: none. A DFA
     * of another account, while one holds them, is charged in full. */
    pthread_mutex_t lock;
    uint64_t acct;
    uint32_t holders;
    size_t bytes;
} sv_dfa_tables_t;

/* Another DFA over d's tables (d a plain DFA, no calls): the tables become
 * shared if they were not; NULL when out of memory. The copy is charged to
 * no account (sv_dfa_charge charges it, as for any DFA). When the tables
 * become shared, d's own charge becomes theirs, d their first holder. */
sv_dfa_t *sv_dfa_share(sv_dfa_t *d);

/* Charges d's tables to the thread's memory account; an SV_ERR_BUDGET
 * error when they do not fit (d is left to the caller to destroy). Shared
 * tables already charged to that account by another of its DFAs are not
 * charged again: d becomes one more holder, and the tables' charge is
 * released with the last (so what a compile is charged for a DFA the memo
 * hands out is what it keeps alive, counted once, and never depends on
 * what the memo holds, since the tables live at least as long as d). */
sv_status sv_dfa_charge(sv_dfa_t *d, sv_error_t *err);
/* Takes d off its account: for what outlives the compile (its result, a
 * cache entry). */
void sv_dfa_uncharge(sv_dfa_t *d);

/* A call edge: enter the part that starts at `callee`, and continue at `ret`
 * when it ends. first[] is the set of bytes the callee can start with (the
 * linker checks that the choices at a state never share a byte). */
typedef struct sv_dfa_call {
    int32_t callee, ret;
    uint64_t first[4];
} sv_dfa_call_t;

/* Call markers (program.c). Inside a part's raw DFA a call to part `id` is
 * the byte string SV_CALL_MARK followed by SV_CALL_DIGITS digit bytes
 * (SV_CALL_DIGIT0 + a decimal digit, most significant first). None of these
 * bytes occurs in UTF-8, so no text language ever holds one; the linker
 * turns each marker path into a call edge. */
#define SV_CALL_MARK 0xFF
#define SV_CALL_DIGIT0 0xF5
#define SV_CALL_DIGITS 4
#define SV_CALL_MAX_ID 8999u

/* Key-set guards (program.c, "Key sets"): a call marker whose id is
 * SV_ANN_BASE + code marks the state before it, in an object part whose
 * keys may come in any order, instead of calling a part: code k < 64 is
 * the closing quote of optional key k, SV_ANN_REQ + k of required key k,
 * SV_ANN_XEND the closing quote of a key the object does not name,
 * SV_ANN_OPEN the place where a key may start (after '{' and ','), and
 * SV_ANN_CLOSE the object's '}' (SV_ANN_COND0 + j: with the key
 * conditions j of the link's sv_kcond_t table). The linker turns each into a mark on
 * that state (sv_keysets_t), which the walks check against the set of
 * keys the object has written. */
#define SV_ANN_BASE 9000u
#define SV_ANN_REQ 64u
#define SV_ANN_XEND 128u
#define SV_ANN_OPEN 129u
#define SV_ANN_CLOSE 130u
#define SV_ANN_COND0 131u
#define SV_ANN_CODES 1000u

/* What an object's close needs beside its required keys, in its key
 * numbers: each dependency's key when its trigger is written, and one key
 * of anyreq (anyOf of single required keys) when it is not 0. Conditions
 * that writing a key can break (a `not`, oneOf or anyOf of key conditions,
 * sv_sc_not_keys and sv_sc_union_keys in schema_container.c) are a table
 * over at most 8 keys (ntk > 0; then no dependency and no anyreq): tok[b]
 * says whether the object may close with the table keys b written (bit j:
 * key tkey[j], 0xFF for a key that is never written), required ones
 * included; text[b] whether some superset of b may, so a key whose
 * writing leaves none is refused where it ends. */
#define SV_KCOND_TABLE_KEYS 8u
typedef struct sv_kcond {
    uint64_t anyreq;
    uint32_t ndeps;
    uint8_t dep_a[64], dep_b[64];
    uint8_t ntk;
    uint8_t tkey[SV_KCOND_TABLE_KEYS];
    uint8_t tok[1u << SV_KCOND_TABLE_KEYS], text[1u << SV_KCOND_TABLE_KEYS];
} sv_kcond_t;
#define SV_KS_MAX_KEYS 64u

/* The AST of a guard marker (code < SV_ANN_CODES). */
sv_ast_t *sv_ann_marker(sv_arena_t *a, uint32_t code);

/* A linked program's key sets. Per state: ann, its mark (KS_A_*); flags
 * (KS_F_*); for a state of a key's spelling (a region: from an OPEN mark to
 * the mark that ends the key), reach, the keys whose end it reaches there;
 * obj, the object of its part (-1 for other parts); ub, an upper bound on
 * the bytes to its part's end whatever the set (dist[] for other parts);
 * xs, what a call to it costs beyond dist[] (the required keys of an object
 * part's start, 0 elsewhere). */
enum { KS_A_NONE = 0, KS_A_KEY0 = 1, KS_A_CLOSE = 65, KS_A_XEND = 66, KS_A_OPEN = 67 };
/* KS_F_CHECK: entering the state is the walk's to check with the set (a
 * key's end, the close, a region state where no extra key may go on). */
enum { KS_F_REGION = 1, KS_F_XREACH = 2, KS_F_CREACH = 4, KS_F_CHECK = 8 };

typedef struct sv_kobj {
    int32_t start;             /* the part's start state */
    int32_t ropen, rcomma;     /* the OPEN states after '{' and after ',' (-1: none) */
    uint64_t req, keys;        /* required keys; keys with a state */
    int32_t kstate[SV_KS_MAX_KEYS]; /* the state after key k's closing quote */
    uint32_t memcost[SV_KS_MAX_KEYS]; /* `,"k": value` at its shortest, to the next member's end */
    uint64_t mmax;             /* what the keys a close may need cost: a bound on what is missing */
    const sv_kcond_t *cond;    /* NULL: the required keys alone */
    uint32_t nregion;          /* region states (rid numbers them) */
} sv_kobj_t;

typedef struct sv_keysets {
    uint8_t *ann, *flags;
    uint64_t *reach;
    int32_t *obj;
    uint32_t *rid;             /* a region state's number in its object */
    uint32_t *ub, *xs;
    sv_kobj_t *objs;
    uint32_t nobjs;
    sv_kcond_t *conds;         /* the objects' conditions (copies of the link's) */
} sv_keysets_t;

/* set closed under o's dependencies. */
static inline uint64_t sv_ks_closure(const sv_kobj_t *o, uint64_t set) {
    const sv_kcond_t *k = o->cond;
    for (bool more = k && k->ndeps; more;) {
        more = false;
        for (uint32_t i = 0; i < k->ndeps; i++)
            if ((set >> k->dep_a[i] & 1) && !(set >> k->dep_b[i] & 1)) set |= 1ull << k->dep_b[i], more = true;
    }
    return set;
}

/* The table keys (sv_kcond_t) of set, as the table's bits. */
static inline uint32_t sv_ks_tbits(const sv_kcond_t *k, uint64_t set) {
    uint32_t b = 0;
    for (uint32_t j = 0; j < k->ntk; j++)
        if (k->tkey[j] < SV_KS_MAX_KEYS && (set >> k->tkey[j] & 1)) b |= 1u << j;
    return b;
}

/* Whether object o may close with the keys of set. */
static inline bool sv_ks_close_ok(const sv_kobj_t *o, uint64_t set) {
    if ((set & o->req) != o->req) return false;
    const sv_kcond_t *k = o->cond;
    if (!k) return true;
    if (k->ntk && !k->tok[sv_ks_tbits(k, set)]) return false;
    if (k->anyreq && !(set & k->anyreq)) return false;
    return sv_ks_closure(o, set) == set;
}

/* Whether key bit may end with set written: not yet written, and a close
 * stays possible (the table's text). */
static inline bool sv_ks_key_ok(const sv_kobj_t *o, uint64_t set, uint64_t bit) {
    if (set & bit) return false;
    const sv_kcond_t *k = o->cond;
    return !k || !k->ntk || k->text[sv_ks_tbits(k, set | bit)];
}

/* The keys not in set that sv_ks_key_ok refuses (table keys only). */
static inline uint64_t sv_ks_blocked(const sv_kobj_t *o, uint64_t set) {
    const sv_kcond_t *k = o->cond;
    if (!k || !k->ntk) return 0;
    uint32_t b = sv_ks_tbits(k, set);
    uint64_t m = 0;
    for (uint32_t j = 0; j < k->ntk; j++)
        if (k->tkey[j] < SV_KS_MAX_KEYS && !(b >> j & 1) && !k->text[b | 1u << j]) m |= 1ull << k->tkey[j];
    return m;
}

void sv_keysets_free(sv_keysets_t *ks);

/* Entering state y of d (d->ks non-NULL) with the object's key set *set:
 * false when y's mark refuses it (a key already written, a close with a
 * required key missing), else true with the key added. */
static inline bool sv_ks_enter(const struct sv_dfa *d, int32_t y, uint64_t *set) {
    const sv_keysets_t *ks = d->ks;
    uint8_t a = ks->ann[y];
    if (a >= KS_A_KEY0 && a < KS_A_KEY0 + SV_KS_MAX_KEYS) {
        uint64_t bit = 1ull << (a - KS_A_KEY0);
        if (!sv_ks_key_ok(&ks->objs[ks->obj[y]], *set, bit)) return false;
        *set |= bit;
    } else if (a == KS_A_CLOSE) {
        if (!sv_ks_close_ok(&ks->objs[ks->obj[y]], *set)) return false;
    }
    return true;
}
/* Whether a walk in y with set can still end its object (always, outside
 * a key's spelling). */
bool sv_ks_viable(const struct sv_dfa *d, int32_t y, uint64_t set);
/* The fewest bytes from state x with set to its part's end (the set
 * matters in an object part only). */
uint32_t sv_ks_cost(const struct sv_dfa *d, int32_t x, uint64_t set);
/* sv_program_completion with the key sets: set is x's, sets[i] ret[i]'s. */
uint32_t sv_program_completion_ks(const struct sv_dfa *d, int32_t x, uint64_t set, const int32_t *ret,
                                  const uint64_t *sets, uint32_t n, uint8_t *buf, uint32_t cap);

/* The digit bytes of a call marker for part id, most significant first. */
void sv_call_digits(uint32_t id, uint8_t digits[SV_CALL_DIGITS]);
/* The AST of a call marker for part id (<= SV_CALL_MAX_ID). */
sv_ast_t *sv_call_marker(sv_arena_t *a, uint32_t id);
/* True when a raw DFA has a call marker. */
bool sv_dfa_has_markers(const sv_dfa_t *d);
/* Resolves a marker id to the raw DFA of its part (borrowed; equal pointers
 * are one part). NULL with err filled on failure. */
typedef const sv_dfa_t *(*sv_call_resolve_fn)(void *ctx, uint32_t id, sv_error_t *err);
/* Links a root DFA with markers and the parts they call (transitively) into
 * one program. SV_ERR_UNSUPPORTED when the choices of some state overlap
 * (a byte could both continue and call, two calls could start alike, or a
 * part could both go on and return on one byte): the caller compiles
 * without calls then. *out is a new DFA. */
sv_status sv_program_link(const sv_dfa_t *root, sv_call_resolve_fn resolve, void *ctx, const sv_fsm_limits_t *lim,
                          sv_dfa_t **out, sv_error_t *err);
/* With the key conditions that SV_ANN_COND0 + j guards name (conds[j]). */
sv_status sv_program_link_ks(const sv_dfa_t *root, sv_call_resolve_fn resolve, void *ctx, const sv_kcond_t *conds,
                             uint32_t nconds, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err);
/* Raw DFA d determinized again with the calls that compete at a state
 * expanded (program.c, "competing choices"), and with keep non-NULL every
 * call to a part other than keep as well: *out is the new DFA, or NULL when
 * there was nothing to expand. SV_ERR_UNSUPPORTED or SV_ERR_BUDGET when the
 * expansion cannot be done within its depth (a recursive part) or the
 * budgets. */
sv_status sv_program_expand(const sv_dfa_t *d, sv_call_resolve_fn resolve, void *ctx, const sv_dfa_t *keep,
                            const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err);
/* The product of raw DFAs whose only markers call part id, the free-form
 * container `part` (program_product.c): a call one side makes where the
 * other reads a bracket is first expanded into a copy of the part, as deep
 * as needed, so the result is exact and keeps the calls both sides make.
 * SV_ERR_UNSUPPORTED when it cannot be exact that way. */
sv_status sv_dfa_product_calls(const sv_dfa_t *a, const sv_dfa_t *b, sv_dfa_op op, uint32_t id, const sv_dfa_t *part,
                               const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err);
/* Without the memo (program_product.c; the memo is dfa_cache.c's). */
/* Whether L(a) and L(b) share a string, without building their product:
 * the product's walk up to the first pair where both accept (dfa_ops.c;
 * with calls to the free-form part, program_product.c). Budgets as the
 * product's. */
sv_status sv_dfa_meets(const sv_dfa_t *a, const sv_dfa_t *b, const sv_fsm_limits_t *lim, bool *meets, sv_error_t *err);
sv_status sv_dfa_meets_calls(const sv_dfa_t *a, const sv_dfa_t *b, uint32_t id, const sv_dfa_t *part,
                             const sv_fsm_limits_t *lim, bool *meets, sv_error_t *err);
sv_status sv_dfa_product_calls_uncached(const sv_dfa_t *a, const sv_dfa_t *b, sv_dfa_op op, uint32_t id,
                                        const sv_dfa_t *part, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                                        sv_error_t *err);
/* A uniform byte of class c (sampling). */
uint8_t sv_dfa_class_byte(const sv_dfa_t *d, uint32_t c, sv_rng_t *rng);
/* Whole-string matching and sampling of a program (sv_dfa_matches and
 * sv_dfa_sample call them). */
bool sv_program_matches(const sv_dfa_t *d, const uint8_t *s, size_t n);
size_t sv_program_viable_prefix(const sv_dfa_t *d, const uint8_t *s, size_t n);
/* Whether s is a prefix of an accepted string (every configuration a walk
 * reaches can be completed); for plain DFAs too. */
bool sv_program_viable(const sv_dfa_t *d, const uint8_t *s, size_t n);
sv_status sv_program_sample(const sv_dfa_t *d, sv_rng_t *rng, uint32_t soft_len, uint8_t *buf, size_t cap,
                            size_t *len);
/* Whether the 8 cells at t are all missing transitions (negative): tables
 * are mostly those, and the passes over them skip such runs whole. */
/* A table of bytes bytes, freed with free(): at 2 MiB or more aligned to
 * and advised into transparent huge pages (fsm/dfa.c). */
void *sv_big_table(size_t bytes);

static inline bool sv_dead_run8(const int32_t *t) {
    return (t[0] & t[1] & t[2] & t[3] & t[4] & t[5] & t[6] & t[7]) < 0;
}

static inline bool sv_dfa_is_program(const sv_dfa_t *d) { return d->call_off != NULL; }
/* The call at state x whose callee starts with byte b, or NULL. */
static inline const sv_dfa_call_t *sv_dfa_call_for(const sv_dfa_t *d, int32_t x, uint8_t b) {
    for (uint32_t i = d->call_off[x], e = d->call_off[x + 1]; i < e; i++)
        if ((d->calls[i].first[b >> 6] >> (b & 63)) & 1) return &d->calls[i];
    return 0;
}
static inline bool sv_dfa_has_calls(const sv_dfa_t *d, int32_t x) {
    return d->call_off && d->call_off[x + 1] > d->call_off[x];
}
/* The whole string's shortest completion from state x with the return
 * states ret[0..n) on the stack (ret[n-1] the top): bytes, calls expanded,
 * into buf (cap bytes). Returns its length, or UINT32_MAX when it does not
 * fit. */
uint32_t sv_program_completion(const sv_dfa_t *d, int32_t x, const int32_t *ret, uint32_t n, uint8_t *buf,
                               uint32_t cap);

/* Thompson NFA over bytes. */
/* NFA_DFA: state q of an embedded DFA. Its byte moves are the DFA's own
 * (read from the DFA, not stored as NFA edges: an embedded DFA costs one NFA
 * state per DFA state); out is the fragment's exit when q accepts, else -1;
 * out1 indexes nfa->embeds. */
typedef enum { NFA_BYTE, NFA_SPLIT, NFA_EPS, NFA_BOL, NFA_EOL, NFA_MATCH, NFA_DFA } nfa_kind;

typedef struct {
    uint8_t kind, lo, hi;
    int32_t out, out1;  /* out1: SPLIT's second branch, or NFA_DFA's embed index */
} sv_nfa_state_t;

typedef struct sv_nfa_embed {
    const sv_dfa_t *dfa;
    int32_t base;       /* NFA id of the DFA's state 0 */
} sv_nfa_embed_t;

typedef struct sv_nfa {
    sv_nfa_state_t *s;
    uint32_t n, cap;
    int32_t start;
    sv_nfa_embed_t *embeds;
    uint32_t nembeds, capembeds;
} sv_nfa_t;

/* Builds the NFA of an AST. Caller frees with sv_nfa_free. */
sv_status sv_nfa_build(const sv_ast_t *ast, const sv_fsm_limits_t *lim, sv_nfa_t *nfa, sv_error_t *err);
void sv_nfa_free(sv_nfa_t *nfa);

/* A raw DFA from subset construction: complete numbering, not minimal; may
 * contain states that cannot reach acceptance. */
typedef struct sv_rawdfa {
    uint32_t nstates, nclasses;
    uint8_t classes[256];
    int32_t *trans;   /* (nstates, nclasses) */
    uint8_t *accept;
    int32_t start;
    /* (nstates) each state's incoming moves, counted by subset construction
     * as it writes them, so that minimization builds its inverse edges
     * without a pass over the table to count them; NULL where a builder
     * does not count (products, direct tables) or the table changed since */
    uint32_t *indeg;
    /* The builder's word that no two states that can reach acceptance
     * accept the same strings (json_quote.c's counted strings): minimizing
     * then only trims, renumbers and coarsens the classes, with no
     * partition refinement. */
    bool minimal;
} sv_rawdfa_t;

void sv_rawdfa_free(sv_rawdfa_t *r);

/* Subset construction with the budgets of lim, measured from t0_ns. */
sv_status sv_dfa_determinize(const sv_nfa_t *nfa, const sv_fsm_limits_t *lim, uint64_t t0_ns, sv_rawdfa_t *out,
                             sv_error_t *err);

/* SV_ERR_BUDGET (with err filled) if minimizing raw, with raw itself and
 * `held` more bytes of the caller's transient tables alive, does not fit
 * what is left of lim->max_memory (util/memacct.h). */
sv_status sv_dfa_minimize_budget(const sv_rawdfa_t *raw, size_t held, const sv_fsm_limits_t *lim, sv_error_t *err);

/* The hashes of the k columns of the row-major table t (n rows), and a
 * DFA's fingerprint from the hashes of its own columns: sizes, class map,
 * columns, accepting states. Minimal BFS-numbered DFAs of one language have
 * equal fingerprints; the minimizer stores it as it coarsens the classes,
 * dfa_cache.c computes it for a DFA that has none. */
void sv_dfa_column_hashes(const int32_t *t, uint32_t n, uint32_t k, uint64_t h[256]);
uint64_t sv_dfa_fingerprint_of(const sv_dfa_t *d, const uint64_t *colh);

/* Merges the classes of raw whose columns are equal in every row, in
 * place. Products call it before minimizing: they run over the common
 * refinement of two DFAs' classes, and most of those pairs move alike (47
 * classes down to 10 on Handwritten---allany17), so every pass of the
 * minimizer gets that much shorter. Subset construction's classes rarely
 * merge, and there the pass would only cost time. */
sv_status sv_rawdfa_merge_classes(sv_rawdfa_t *raw, sv_error_t *err);

/* Hopcroft minimization, trimming, BFS renumbering, byte-class coarsening and
 * the forced/distance analysis. Returns SV_ERR_EMPTY when the language is
 * empty. On success *out is a new DFA. */
sv_status sv_dfa_minimize(const sv_rawdfa_t *raw, sv_dfa_t **out, sv_error_t *err);

/* Computes dist, forced_* and nforced of a DFA whose nstates, classes,
 * class_rep, trans and accept are set (minimal and trimmed). */
sv_status sv_dfa_analyze(sv_dfa_t *d, sv_error_t *err);
/* The same, with each state's forced byte given (given[s]: the single
 * byte a non-final state without calls moves on, else -1: what
 * sv_dfa_analyze finds by scanning each row; program.c knows it from the
 * parts). */
sv_status sv_dfa_analyze_forced(sv_dfa_t *d, const int16_t *given, sv_error_t *err);
/* The single byte non-final state s without calls moves on, else -1
 * (class_size[c]: how many bytes class c has). */
static inline int sv_dfa_forced_byte(const sv_dfa_t *d, uint32_t s, const uint32_t *class_size) {
    if (d->accept[s] || sv_dfa_has_calls(d, (int32_t)s)) return -1; /* a call is a choice the chain cannot see */
    int byte = -1;
    uint32_t count = 0;
    const int32_t *row = d->trans + (size_t)s * d->nclasses;
    for (uint32_t c = 0; c < d->nclasses; c++) {
        if (c + 8 <= d->nclasses && sv_dead_run8(row + c)) { c += 7; continue; }
        if (row[c] < 0) continue;
        count += class_size[c];
        if (count > 1) return -1;
        byte = d->class_rep[c];
    }
    return count == 1 ? byte : -1;
}


/* Products (dfa_ops.c, program_product.c) walk pairs of states, -1 being
 * a side's implicit dead state. */
typedef struct sv_pair { int32_t a, b; } sv_pair_t;

/* Whether a pair can still lead to acceptance under op. */
static inline bool sv_pair_alive(sv_pair_t p, sv_dfa_op op) {
    switch (op) {
    case SV_DFA_AND: return p.a >= 0 && p.b >= 0;
    case SV_DFA_DIFF: return p.a >= 0;
    default: return p.a >= 0 || p.b >= 0;
    }
}

/* Whether a pair accepts under op, its sides accepting x and y. */
static inline bool sv_pair_accepts(bool x, bool y, sv_dfa_op op) {
    switch (op) {
    case SV_DFA_AND: return x && y;
    case SV_DFA_OR: return x || y;
    case SV_DFA_DIFF: return x && !y;
    case SV_DFA_XOR: return x != y;
    }
    return false;
}

static inline uint32_t sv_pair_hash(sv_pair_t p) {
    return sv_hash_fib32((uint64_t)(uint32_t)p.a << 32 | (uint32_t)p.b);
}

/* sv_dfa_product without the memo (dfa_ops.c; sv_dfa_product, in
 * dfa_cache.c, looks the result up first). */
sv_status sv_dfa_product_uncached(const sv_dfa_t *a, const sv_dfa_t *b, sv_dfa_op op, const sv_fsm_limits_t *lim,
                                  sv_dfa_t **out, sv_error_t *err);

/* The JSON string values whose content is a string of `content`: '"', the
 * content as json.dumps writes it ('"', '\\' and controls escaped), '"'.
 * The same language as the AST '"' sv_ast_dfa(content, true) '"', built
 * without subset construction (json_quote.c); memoized in dfa_cache.c. */
sv_status sv_dfa_json_quoted(const sv_dfa_t *content, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err);
sv_status sv_dfa_json_quoted_uncached(const sv_dfa_t *content, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                                      sv_error_t *err);
/* The JSON string values of mn to mx code points (mx SV_AST_INF: no
 * maximum), any code point, spelled as json.dumps writes them: the same
 * language as sv_dfa_json_quoted of the content [^]{mn,mx}, written down
 * as its minimal DFA (json_quote.c); memoized in dfa_cache.c. */
sv_status sv_dfa_json_quoted_counted(uint32_t mn, uint32_t mx, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                                     sv_error_t *err);
sv_status sv_dfa_json_quoted_counted_uncached(uint32_t mn, uint32_t mx, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                                              sv_error_t *err);
/* The JSON strings of any (the quoted any string, sv_dfa_json_quoted of
 * [^]*) whose content is none of keys[0..n): an object's extra keys,
 * written down (json_quote.c). *out stays NULL where a key has a byte that
 * is escaped or not ASCII, or is longer than the state budget: the caller
 * takes the general route. */
sv_status sv_dfa_json_quoted_except(const sv_dfa_t *any, const char *const *keys, uint32_t n,
                                    const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err);
/* The whole pipeline from an AST (memoized in dfa_cache.c); an AST that is
 * one minimized DFA (no JSON escaping) gives that DFA's tables, shared. */
sv_status sv_dfa_from_ast(const sv_ast_t *ast, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err);
/* The bytes the memo keys ast's language by (equal bytes, equal languages):
 * malloc'd, *n long; NULL when longer than the memo takes, or out of memory. */
uint8_t *sv_ast_key(const sv_ast_t *ast, size_t *n);

#endif
