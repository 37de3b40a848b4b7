/* program.c — constraints composed from compiled parts.
 *
 * A flat DFA multiplies states wherever pieces combine: a free-form value
 * nested d levels costs about 2^d copies of a level, because a DFA tells an
 * array from an object at every open level only by being in another copy
 * of what lies below. A program instead keeps each piece once, as a part (a
 * minimized DFA), and lets a part *call* another: a call edge enters the
 * callee at its start and, when the callee reaches one of its final
 * states, continues at the call's return state. The matcher carries the
 * stack of return states. This is a recursive transition network; a part
 * that calls itself nests to any depth.
 *
 * How parts are written. The compilers build each part as an ordinary
 * AST → NFA → DFA, with a call written as a marker: the byte SV_CALL_MARK
 * then SV_CALL_DIGITS digit bytes naming the callee. Those bytes never occur
 * in UTF-8, so determinization and minimization treat a call like a
 * literal, and nothing downstream of the marker path changes. Linking
 * (sv_program_link) concatenates the parts into one table, drops the
 * marker bytes and records each marker path as a call edge.
 *
 * Determinism. A walk takes, for each byte, the direct transition if there
 * is one, else the call whose callee starts with the byte, else (in a final
 * state with a frame on the stack) a return. The linker checks that these
 * choices never compete: no byte both continues and starts a call, no two
 * calls of a state start alike, a callee never accepts the empty string,
 * and a part that may go on after reaching a final state never shares a
 * byte with what its callers do after it returns, unless staying in the
 * part loses nothing (the caller would read that byte into a state its
 * return state simulates: check_choices). A part whose calls
 * compete is first determinized again with those calls expanded (see
 * "competing choices" below); what still fails the check is compiled with
 * fewer calls by the schema compiler. Soundness does not
 * depend on the check (every accepted string has a derivation); the check
 * makes the walk complete.
 *
 * Costs. Linking is linear in the parts' tables. Distances (the fewest
 * bytes to a part's end, a call costing its callee's shortest string) are
 * a shortest-path problem whose call weights depend on the callees' own
 * distances: Dijkstra over each part's reversed edges, redone for the
 * callers of a part whose start distance fell (see distances()). */
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/grow.h"
#include "util/hash.h"
#include "util/memacct.h"
#include "fsm/internal/dfa_internal.h"

void sv_call_digits(uint32_t id, uint8_t digits[SV_CALL_DIGITS]) {
    for (int i = SV_CALL_DIGITS - 1; i >= 0; i--, id /= 10) digits[i] = (uint8_t)(SV_CALL_DIGIT0 + id % 10);
}

static sv_ast_t *marker(sv_arena_t *a, uint32_t id) {
    sv_ast_t *k[1 + SV_CALL_DIGITS];
    uint8_t digits[SV_CALL_DIGITS];
    sv_call_digits(id, digits);
    k[0] = sv_ast_bytes(a, SV_CALL_MARK, SV_CALL_MARK);
    for (int i = 0; i < SV_CALL_DIGITS; i++) k[1 + i] = sv_ast_bytes(a, digits[i], digits[i]);
    for (int i = 0; i <= SV_CALL_DIGITS; i++)
        if (!k[i]) return NULL;
    return sv_ast_cat(a, k, 1 + SV_CALL_DIGITS);
}

sv_ast_t *sv_call_marker(sv_arena_t *a, uint32_t id) { return id > SV_CALL_MAX_ID ? NULL : marker(a, id); }

sv_ast_t *sv_ann_marker(sv_arena_t *a, uint32_t code) { return code >= SV_ANN_CODES ? NULL : marker(a, SV_ANN_BASE + code); }

bool sv_dfa_has_markers(const sv_dfa_t *d) {
    if (d->call_off) return false; /* linked: the markers became calls */
    uint8_t c = d->classes[SV_CALL_MARK];
    for (uint32_t s = 0; s < d->nstates; s++)
        if (d->trans[(size_t)s * d->nclasses + c] >= 0) return true;
    return false;
}

/* ---- linking ------------------------------------------------------------------ */

typedef struct {
    uint32_t part, state; /* the caller (part-local state) */
    uint32_t callee;      /* part index */
    uint32_t ret;         /* part-local state of the caller */
    uint32_t id;          /* the marker's id */
} site_t;

/* A part's DFA replaced by its expansion (expand_round): `from` is what
 * the resolver (or the caller, for the root) gave, `to` is owned. */
typedef struct {
    const sv_dfa_t *from;
    sv_dfa_t *to;
} swap_t;

/* A key-set guard (SV_ANN_BASE markers): the part-local state before it,
 * the state after it, its code. */
typedef struct {
    uint32_t part, state, after, code;
} ann_t;

typedef struct {
    const sv_dfa_t **parts; /* what is linked: a part's DFA, or its expansion */
    const sv_dfa_t **orig;  /* what names the part (equal pointers are one part) */
    uint32_t nparts, capparts, caporig;
    site_t *sites;
    uint32_t nsites, capsites;
    ann_t *anns;
    uint32_t nanns, capanns;
    uint8_t *annp;          /* per part: it has guards */
    uint32_t capannp;
    const swap_t *swaps;
    uint32_t nswaps;
} linker_t;

static void linker_free(linker_t *L) {
    free(L->parts);
    free(L->orig);
    free(L->sites);
    free(L->anns);
    free(L->annp);
    L->parts = L->orig = NULL;
    L->sites = NULL;
    L->anns = NULL;
    L->annp = NULL;
    L->nparts = L->capparts = L->caporig = L->nsites = L->capsites = 0;
    L->nanns = L->capanns = L->capannp = 0;
}

static sv_status add_part(linker_t *L, const sv_dfa_t *d, uint32_t *idx, sv_error_t *err) {
    for (uint32_t i = 0; i < L->nparts; i++)
        if (L->orig[i] == d) { *idx = i; return SV_OK; }
    if (L->nparts >= SV_CALL_MAX_ID)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "the constraint has more than %u parts", SV_CALL_MAX_ID);
    if (!sv_grow((void **)&L->parts, &L->capparts, L->nparts + 1, sizeof *L->parts) ||
        !sv_grow((void **)&L->orig, &L->caporig, L->nparts + 1, sizeof *L->orig) ||
        !sv_grow((void **)&L->annp, &L->capannp, L->nparts + 1, sizeof *L->annp))
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
    *idx = L->nparts;
    L->annp[L->nparts] = 0;
    L->orig[L->nparts] = d;
    L->parts[L->nparts] = d;
    for (uint32_t i = 0; i < L->nswaps; i++)
        if (L->swaps[i].from == d) L->parts[L->nparts] = L->swaps[i].to;
    L->nparts++;
    return SV_OK;
}

/* The marker paths of part p: each (state, id, return state). */
static sv_status scan_part(linker_t *L, uint32_t p, sv_call_resolve_fn resolve, void *ctx, sv_error_t *err) {
    const sv_dfa_t *d = L->parts[p];
    for (uint32_t s = 0; s < d->nstates; s++) {
        int32_t m = sv_dfa_next(d, (int32_t)s, SV_CALL_MARK);
        if (m < 0) continue;
        /* depth-first over the digit bytes */
        int32_t st[SV_CALL_DIGITS + 1];
        uint32_t dig[SV_CALL_DIGITS + 1];
        int k = 0;
        st[0] = m;
        dig[0] = 0;
        while (k >= 0) {
            if (dig[k] == 10) { k--; if (k >= 0) dig[k]++; continue; }
            int32_t t = sv_dfa_next(d, st[k], (uint8_t)(SV_CALL_DIGIT0 + dig[k]));
            if (t < 0) { dig[k]++; continue; }
            if (k + 1 < SV_CALL_DIGITS) {
                st[k + 1] = t;
                dig[k + 1] = 0;
                k++;
                continue;
            }
            uint32_t id = 0;
            for (int i = 0; i < SV_CALL_DIGITS; i++) id = id * 10 + dig[i];
            if (id >= SV_ANN_BASE) { /* a guard, not a call */
                if (id - SV_ANN_BASE >= SV_ANN_CODES)
                    return sv_error_set(err, SV_ERR_INTERNAL, -1, "internal: marker %u is no guard", id);
                if (!sv_grow((void **)&L->anns, &L->capanns, L->nanns + 1, sizeof *L->anns))
                    return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
                L->anns[L->nanns++] = (ann_t){p, s, (uint32_t)t, id - SV_ANN_BASE};
                L->annp[p] = 1;
                dig[k]++;
                continue;
            }
            const sv_dfa_t *cd = resolve(ctx, id, err);
            if (!cd) return err && err->code ? err->code : SV_ERR_ARG;
            uint32_t ci;
            sv_status r = add_part(L, cd, &ci, err);
            if (r) return r;
            if (!sv_grow((void **)&L->sites, &L->capsites, L->nsites + 1, sizeof *L->sites))
                return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
            L->sites[L->nsites++] = (site_t){p, s, ci, (uint32_t)t, id};
            dig[k]++;
        }
    }
    return SV_OK;
}

static inline void bset(uint64_t *s, uint32_t b) { s[b >> 6] |= 1ull << (b & 63); }
static inline bool bmeet(const uint64_t *a, const uint64_t *b) {
    return (a[0] & b[0]) | (a[1] & b[1]) | (a[2] & b[2]) | (a[3] & b[3]);
}
static inline void bor(uint64_t *a, const uint64_t *b) {
    for (int i = 0; i < 4; i++) a[i] |= b[i];
}

/* The bytes of each of d's classes (cm: d->nclasses sets), so that a
 * state's bytes are a union over its live classes, not a scan of 256. */
static void class_bytes(const sv_dfa_t *d, uint64_t (*cm)[4]) {
    memset(cm, 0, (size_t)d->nclasses * sizeof *cm);
    for (int b = 0; b < 256; b++) bset(cm[d->classes[b]], (uint32_t)b);
}

/* The bytes with a direct move from x (cm: class_bytes of d). */
static void direct_set(const sv_dfa_t *d, const uint64_t (*cm)[4], int32_t x, uint64_t out[4]) {
    memset(out, 0, 4 * sizeof *out);
    const int32_t *row = d->trans + (size_t)x * d->nclasses;
    for (uint32_t c = 0; c < d->nclasses; c++)
        if (row[c] >= 0) bor(out, cm[c]);
}

/* first(q): the bytes a callee starting at q can begin with (its direct
 * bytes and those of the calls at q). A call at a start that leads back to
 * the same start without a byte (left recursion) has no finite first set. */
static sv_status first_of(sv_dfa_t *d, const uint64_t (*cm)[4], int32_t q, uint8_t *mark, uint64_t (*memo)[4],
                          sv_error_t *err) {
    if (mark[q] == 2) return SV_OK;
    if (mark[q] == 1)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a part calls itself before reading a byte");
    mark[q] = 1;
    direct_set(d, cm, q, memo[q]);
    for (uint32_t i = d->call_off[q]; i < d->call_off[q + 1]; i++) {
        sv_status st = first_of(d, cm, d->calls[i].callee, mark, memo, err);
        if (st) return st;
        bor(memo[q], memo[d->calls[i].callee]);
    }
    mark[q] = 2;
    return SV_OK;
}

/* A binary heap of (distance, state) for distances(). */
typedef struct { uint32_t d, s; } heap_t;

static void heap_push(heap_t *h, uint32_t *n, heap_t x) {
    uint32_t i = (*n)++;
    while (i && h[(i - 1) / 2].d > x.d) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = x;
}

static heap_t heap_pop(heap_t *h, uint32_t *n) {
    heap_t top = h[0], x = h[--*n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].d < h[c].d) c++;
        if (h[c].d >= x.d) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

/* The part holding linked state x: the last p with base[p] <= x. */
static uint32_t part_of(const uint32_t *base, uint32_t np, uint32_t x) {
    uint32_t lo = 0, hi = np; /* base[lo] <= x < base[hi] (base[np] is the total) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (base[mid] <= x) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* The byte edges of the linked program, reversed: (target << 32 | source),
 * source with SRC_QUOTE where the edge's bytes are all of the program's
 * class of `"`. Collected while the link writes the table, from the parts'
 * own rows: a part's row is as wide as its own classes, not the union's (a
 * tenth of the cells on a program of a hundred parts), and a class of
 * call-marker bytes only, which the link turns into calls, gives none.
 * Classes that follow one another in a row with the same target give one
 * edge (two where the run is mixed in the quote's class): distances need
 * each pair once, and a string's states move alike on most classes (a
 * third of the edges of Kubernetes' kb_233 are left: 113,466 of 347,793). */
typedef struct {
    uint64_t *v;
    uint32_t n, cap;
} edges_t;

#define SRC_QUOTE 0x80000000u /* distances' src: a byte edge on the quote's class only */

/* d->bdist and d->qcrit (dfa_internal.h) from distances' reversed edges:
 * a crossing takes a byte with no direct move at a state with a call on it
 * or at a final one, so 1 there; elsewhere one more than the nearest
 * direct successor (a search back over the byte edges); qcrit the same
 * search over the edges on any other class than the quote's, a state it
 * never reaches needing a quote. Done here from the parts' own tables, a
 * few classes wide, instead of from the program's by the first mask (the
 * first mask of Kubernetes' kb_233 spent 3.5 ms reading its table). Out
 * of memory leaves them NULL: the token index then finds them itself. */
static void boundary_distances(sv_dfa_t *d, const uint32_t *off, const uint32_t *src, const int32_t *via) {
    uint32_t n = d->nstates;
    uint16_t *bd = malloc((n ? n : 1) * sizeof *bd);
    uint8_t *qc = malloc(n ? n : 1);
    uint32_t *queue = malloc((n ? n : 1) * sizeof *queue);
    if (!bd || !qc || !queue) {
        free(bd);
        free(qc);
        free(queue);
        return;
    }
    uint32_t qh = 0, qt = 0;
    for (uint32_t x = 0; x < n; x++) {
        bool event = d->accept[x] || d->call_off[x + 1] > d->call_off[x];
        bd[x] = event ? 1 : SV_BDIST_INF;
        qc[x] = !event;
        if (event) queue[qt++] = x;
    }
    while (qh < qt) {
        uint32_t y = queue[qh++];
        uint16_t nd = bd[y] == SV_BDIST_INF - 1 ? bd[y] : (uint16_t)(bd[y] + 1);
        for (uint32_t i = off[y]; i < off[y + 1]; i++) {
            if (via[i] >= 0) continue;
            uint32_t x = src[i] & ~SRC_QUOTE;
            if (bd[x] == SV_BDIST_INF) bd[x] = nd, queue[qt++] = x;
        }
    }
    qh = qt = 0;
    for (uint32_t x = 0; x < n; x++)
        if (!qc[x]) queue[qt++] = x;
    while (qh < qt) {
        uint32_t y = queue[qh++];
        for (uint32_t i = off[y]; i < off[y + 1]; i++)
            if (via[i] < 0 && !(src[i] & SRC_QUOTE) && qc[src[i]]) qc[src[i]] = 0, queue[qt++] = src[i];
    }
    free(queue);
    d->bdist = bd;
    d->qcrit = qc;
}

/* ---- key sets -------------------------------------------------------------------
 *
 * With --key-order any, an object whose keys are too many for an automaton
 * of the sets of keys written (2^n states; schema_container.c) is a part
 * of its own, one loop over its members, and the set of keys it has
 * written lives in the walk: a configuration is (state, stack, set), and a
 * frame saves its caller's set. The part's raw DFA carries guard markers
 * (SV_ANN_BASE ids) that the linker turns into marks on states: a key's
 * closing quote enters a KEY state (refused when the key is in the set,
 * else adds it), '}' enters the CLOSE state (refused while a required key
 * is missing). Each marker's state takes the row of the state after it, so
 * guards cost no bytes and no epsilon moves: entering a marked state is
 * the check.
 *
 * A key's spelling, from an OPEN mark (after '{' and after ',') to the
 * mark that ends it (KEY, XEND for a key the object does not name, or
 * CLOSE), is a region: there a walk can be alive for the bytes and still
 * dead for the set (`"na` when "name" is written and no other key starts
 * so). reach[] says which key ends a region state can still get to, so the
 * walks check a configuration that ends in a region (sv_ks_viable).
 *
 * Distances. dist[] in an object part ignores the guards. The true fewest
 * bytes from (x, set), sv_ks_cost: in a region, a breadth-first search to
 * the cheapest end that the set allows; elsewhere dist[x] plus what the
 * missing required keys cost, each `,"k": ` with its value at its
 * shortest (memcost, found from the ',' region). A call to an object part
 * costs its start's true distance (xs[] holds the difference), so dist[]
 * of every other part is exact. ub[] bounds sv_ks_cost over all sets,
 * for the token index's budget shortcut (token_config.c). */

void sv_keysets_free(sv_keysets_t *ks) {
    if (!ks) return;
    free(ks->ann);
    free(ks->flags);
    free(ks->reach);
    free(ks->obj);
    free(ks->rid);
    free(ks->ub);
    free(ks->xs);
    free(ks->objs);
    free(ks->conds);
    free(ks);
}

static inline bool ks_is_key(uint8_t a) { return a >= KS_A_KEY0 && a < KS_A_KEY0 + SV_KS_MAX_KEYS; }
static inline bool ks_is_end(uint8_t a) { return ks_is_key(a) || a == KS_A_XEND || a == KS_A_CLOSE; }

static inline uint64_t sat_add(uint64_t a, uint64_t b) { return a + b < a || a + b > UINT32_MAX - 2 ? UINT32_MAX - 2 : a + b; }

static uint64_t ks_sum(const sv_kobj_t *o, uint64_t m) {
    uint64_t sum = 0;
    while (m) {
        sum = sat_add(sum, o->memcost[__builtin_ctzll(m)]);
        m &= m - 1;
    }
    return sum;
}

/* What the keys a close still needs after set cost at their shortest
 * (UINT32_MAX - 2 at most): the required keys and the dependencies of
 * what is written, closed under dependencies; where an anyOf of required
 * keys is not met, the one of them that costs least with its own. Every
 * condition only asks for more keys, so this is the least. */
static uint64_t ks_missing(const sv_kobj_t *o, uint64_t set) {
    const sv_kcond_t *k = o->cond;
    if (k && k->ntk) {
        /* a table (no dependency, no anyreq): the cheapest superset of the
         * table keys written that may close, beside the other required keys */
        uint64_t tmask = 0;
        for (uint32_t j = 0; j < k->ntk; j++)
            if (k->tkey[j] < SV_KS_MAX_KEYS) tmask |= 1ull << k->tkey[j];
        uint32_t tb = sv_ks_tbits(k, set);
        uint64_t best = UINT32_MAX - 2;
        for (uint32_t b = 0; b < 1u << k->ntk; b++) {
            if ((b & tb) != tb || !k->tok[b]) continue;
            uint64_t add = 0;
            for (uint32_t j = 0; j < k->ntk; j++)
                if (((b & ~tb) >> j & 1) && k->tkey[j] < SV_KS_MAX_KEYS) add |= 1ull << k->tkey[j];
            uint64_t c = ks_sum(o, add);
            if (c < best) best = c;
        }
        return sat_add(ks_sum(o, o->req & ~set & ~tmask), best);
    }
    uint64_t t = sv_ks_closure(o, set | o->req);
    if (!k || !k->anyreq || (t & k->anyreq)) return ks_sum(o, t & ~set);
    uint64_t best = UINT32_MAX - 2;
    for (uint64_t m = k->anyreq & o->keys; m; m &= m - 1) {
        uint64_t c = ks_sum(o, sv_ks_closure(o, t | (m & -m)) & ~set);
        if (c < best) best = c;
    }
    return best;
}

bool sv_ks_viable(const sv_dfa_t *d, int32_t y, uint64_t set) {
    const sv_keysets_t *ks = d->ks;
    uint8_t f = ks->flags[y];
    if (!(f & KS_F_REGION) || (f & KS_F_XREACH)) return true;
    const sv_kobj_t *o = &ks->objs[ks->obj[y]];
    if (ks->reach[y] & ~set & ~sv_ks_blocked(o, set)) return true;
    return (f & KS_F_CREACH) && sv_ks_close_ok(o, set);
}

/* Scratch for searches over one object's region (rid numbers). */
typedef struct {
    uint32_t *lvl;
    int32_t *queue, *par;
    uint8_t *pcls;
} rscratch_t;

static bool rscratch_get(rscratch_t *r, uint32_t n) {
    r->lvl = malloc((n ? n : 1) * sizeof *r->lvl);
    r->queue = malloc((n ? n : 1) * sizeof *r->queue);
    r->par = malloc((n ? n : 1) * sizeof *r->par);
    r->pcls = malloc(n ? n : 1);
    return r->lvl && r->queue && r->par && r->pcls;
}

static void rscratch_free(rscratch_t *r) {
    free(r->lvl);
    free(r->queue);
    free(r->par);
    free(r->pcls);
}

/* A breadth-first search of o's region from region state x (levels in
 * r->lvl, the way back in r->par and r->pcls by region number): each move
 * from a region state u at level lu to a state t outside the region, on
 * class c, goes to end(). It stops where *cut <= lu + 1 (nothing found
 * later is cheaper). */
typedef void (*region_end_fn)(void *ctx, int32_t u, uint32_t lu, uint32_t c, int32_t t);

static void region_search(const sv_dfa_t *d, const sv_kobj_t *o, int32_t x, rscratch_t *r, region_end_fn end,
                          void *ctx, const uint64_t *cut) {
    const sv_keysets_t *ks = d->ks;
    uint32_t nc = d->nclasses;
    for (uint32_t i = 0; i < o->nregion; i++) r->lvl[i] = UINT32_MAX;
    uint32_t head = 0, tail = 0;
    r->queue[tail++] = x;
    r->lvl[ks->rid[x]] = 0;
    while (head < tail) {
        int32_t u = r->queue[head++];
        uint32_t lu = r->lvl[ks->rid[u]];
        if (*cut <= (uint64_t)lu + 1) break;
        const int32_t *row = d->trans + (size_t)u * nc;
        for (uint32_t c = 0; c < nc; c++) {
            int32_t t = row[c];
            if (t < 0) continue;
            if (!(ks->flags[t] & KS_F_REGION)) {
                end(ctx, u, lu, c, t);
                continue;
            }
            uint32_t ri = ks->rid[t];
            if (r->lvl[ri] == UINT32_MAX) r->lvl[ri] = lu + 1, r->par[ri] = u, r->pcls[ri] = (uint8_t)c, r->queue[tail++] = t;
        }
    }
}

typedef struct {
    const sv_dfa_t *d;
    const sv_kobj_t *o;
    uint64_t set, best;
    int32_t ex, efrom;
    uint8_t ecls;
} best_t;

/* region_best's weighing of an end: what follows it, the set allowing. */
static void best_end(void *ctx, int32_t u, uint32_t lu, uint32_t c, int32_t t) {
    best_t *b = ctx;
    const sv_keysets_t *ks = b->d->ks;
    uint8_t a = ks->ann[t];
    uint64_t after;
    if (b->d->dist[t] == UINT32_MAX) return;
    if (ks_is_key(a)) {
        uint64_t bit = 1ull << (a - KS_A_KEY0);
        if (!sv_ks_key_ok(b->o, b->set, bit)) return;
        after = sat_add(b->d->dist[t], ks_missing(b->o, b->set | bit));
    } else if (a == KS_A_XEND) {
        after = sat_add(b->d->dist[t], ks_missing(b->o, b->set));
    } else if (a == KS_A_CLOSE) {
        if (!sv_ks_close_ok(b->o, b->set)) return;
        after = 0;
    } else {
        return;
    }
    uint64_t tot = (uint64_t)lu + 1 + after;
    if (tot < b->best) b->best = tot, b->ex = t, b->efrom = u, b->ecls = (uint8_t)c;
}

/* The cheapest way from region state x with set to the end of its object
 * part: the search's ends the set allows, each weighed by what follows it.
 * Returns the total (UINT64_MAX: none) and the end's state, the region
 * state it is entered from and the class. */
static uint64_t region_best(const sv_dfa_t *d, const sv_kobj_t *o, int32_t x, uint64_t set, rscratch_t *r,
                            int32_t *ex, int32_t *efrom, uint8_t *ecls) {
    best_t b = {d, o, set, UINT64_MAX, -1, -1, 0};
    region_search(d, o, x, r, best_end, &b, &b.best);
    *ex = b.ex, *efrom = b.efrom, *ecls = b.ecls;
    return b.best;
}

/* ks_costs' search from ',': the shortest `,"k": value` of each key. */
typedef struct {
    const sv_dfa_t *d;
    sv_kobj_t *o;
} memcost_t;

static void memcost_end(void *ctx, int32_t u, uint32_t lu, uint32_t c, int32_t t) {
    (void)u, (void)c;
    const sv_dfa_t *d = ((const memcost_t *)ctx)->d;
    sv_kobj_t *o = ((const memcost_t *)ctx)->o;
    uint8_t a = d->ks->ann[t];
    if (!ks_is_key(a) || d->dist[t] == UINT32_MAX) return;
    /* ',' is the byte into rcomma, and dist[t] counts the '}' */
    uint64_t m = sat_add((uint64_t)lu + 1, d->dist[t]);
    if (m < o->memcost[a - KS_A_KEY0]) o->memcost[a - KS_A_KEY0] = (uint32_t)m;
}

uint32_t sv_ks_cost(const sv_dfa_t *d, int32_t x, uint64_t set) {
    const sv_keysets_t *ks = d->ks;
    if (!ks || ks->obj[x] < 0) return d->dist[x];
    const sv_kobj_t *o = &ks->objs[ks->obj[x]];
    uint64_t extra = 0;
    if (x == o->start) { /* '{', then the first member's region */
        x = o->ropen;
        extra = 1;
    }
    if (!(ks->flags[x] & KS_F_REGION)) return (uint32_t)sat_add(d->dist[x], ks_missing(o, set));
    rscratch_t r;
    uint64_t best = UINT64_MAX;
    int32_t ex, ef;
    uint8_t ec;
    if (rscratch_get(&r, o->nregion)) best = region_best(d, o, x, set, &r, &ex, &ef, &ec);
    rscratch_free(&r);
    return best == UINT64_MAX ? UINT32_MAX : (uint32_t)sat_add(best, extra);
}

/* memcost, mmax and the start's xs of object oi, from dist[] of its part. */
static void ks_costs(sv_dfa_t *d, uint32_t oi) {
    sv_keysets_t *ks = d->ks;
    sv_kobj_t *o = &ks->objs[oi];
    for (uint32_t k = 0; k < SV_KS_MAX_KEYS; k++) o->memcost[k] = UINT32_MAX - 2;
    rscratch_t r;
    if (!rscratch_get(&r, o->nregion)) {
        rscratch_free(&r);
        return; /* the costs stay at their bound: no completion is cheaper than it is */
    }
    if (o->rcomma >= 0) {
        memcost_t m = {d, o};
        uint64_t never = UINT64_MAX;
        region_search(d, o, o->rcomma, &r, memcost_end, &m, &never);
    }
    uint64_t need = o->req;
    if (o->cond) {
        need |= o->cond->anyreq;
        for (uint32_t i = 0; i < o->cond->ndeps; i++) need |= 1ull << o->cond->dep_b[i];
        for (uint32_t j = 0; j < o->cond->ntk; j++)
            if (o->cond->tkey[j] < SV_KS_MAX_KEYS) need |= 1ull << o->cond->tkey[j];
    }
    o->mmax = ks_sum(o, need & o->keys);
    int32_t ex, ef;
    uint8_t ec;
    uint64_t b = region_best(d, o, o->ropen, 0, &r, &ex, &ef, &ec);
    uint32_t ds = d->dist[o->start];
    ks->xs[o->start] = b == UINT64_MAX || ds == UINT32_MAX || b + 1 <= ds ? 0 : (uint32_t)(sat_add(b, 1) - ds);
    rscratch_free(&r);
}

/* The moves out of region states, reversed: src[off[t] .. off[t + 1]) are
 * the region states that move to t (a state moving there on several
 * classes is listed once per class). False when out of memory. */
static bool region_moves_back(const sv_dfa_t *d, uint32_t **offp, uint32_t **srcp) {
    const sv_keysets_t *ks = d->ks;
    uint32_t n = d->nstates, nc = d->nclasses;
    uint32_t *off = calloc((size_t)n + 1, sizeof *off), *src = NULL;
    size_t ne = 0;
    for (uint32_t u = 0; off && u < n; u++) {
        if (!(ks->flags[u] & KS_F_REGION)) continue;
        const int32_t *row = d->trans + (size_t)u * nc;
        for (uint32_t c = 0; c < nc; c++)
            if (row[c] >= 0) off[row[c] + 1]++, ne++;
    }
    uint32_t *fill = off ? malloc((n ? n : 1) * sizeof *fill) : NULL;
    if (fill) src = malloc((ne ? ne : 1) * sizeof *src);
    if (!src) {
        free(off);
        free(fill);
        return false;
    }
    for (uint32_t x = 0; x < n; x++) off[x + 1] += off[x];
    memcpy(fill, off, (size_t)n * sizeof *fill);
    for (uint32_t u = 0; u < n; u++) {
        if (!(ks->flags[u] & KS_F_REGION)) continue;
        const int32_t *row = d->trans + (size_t)u * nc;
        for (uint32_t c = 0; c < nc; c++)
            if (row[c] >= 0) src[fill[row[c]]++] = u;
    }
    free(fill);
    *offp = off;
    *srcp = src;
    return true;
}

/* ub[] (sv_keysets_t) once distances are known: outside objects dist[];
 * in an object, dist[] plus what every key a close may need costs, and in a region
 * the largest over the ends it reaches of the way there and dist[] after. */
static bool ks_bounds(sv_dfa_t *d) {
    sv_keysets_t *ks = d->ks;
    uint32_t n = d->nstates;
    for (uint32_t x = 0; x < n; x++) {
        if (ks->obj[x] < 0) ks->ub[x] = d->dist[x];
        else ks->ub[x] = (uint32_t)sat_add(d->dist[x], ks->objs[ks->obj[x]].mmax);
    }
    /* regions: a search back from each end over the region's moves */
    uint32_t *off = NULL, *src = NULL, *lvl = malloc((n ? n : 1) * sizeof *lvl);
    uint32_t *queue = malloc((n ? n : 1) * sizeof *queue), *hmax = calloc(n ? n : 1, sizeof *hmax);
    bool ok = lvl && queue && hmax && region_moves_back(d, &off, &src);
    if (ok) {
        for (uint32_t x = 0; x < n; x++) lvl[x] = UINT32_MAX;
        for (uint32_t e = 0; e < n; e++) {
            if (!ks_is_end(ks->ann[e]) || off[e] == off[e + 1] || d->dist[e] == UINT32_MAX) continue;
            uint32_t qh = 0, qt = 0;
            for (uint32_t i = off[e]; i < off[e + 1]; i++)
                if (lvl[src[i]] == UINT32_MAX) lvl[src[i]] = 1, queue[qt++] = src[i];
            while (qh < qt) {
                uint32_t u = queue[qh++];
                uint64_t h = sat_add(lvl[u], d->dist[e]);
                if (h > hmax[u]) hmax[u] = (uint32_t)h;
                for (uint32_t i = off[u]; i < off[u + 1]; i++)
                    if (lvl[src[i]] == UINT32_MAX) lvl[src[i]] = lvl[u] + 1, queue[qt++] = src[i];
            }
            for (uint32_t i = 0; i < qt; i++) lvl[queue[i]] = UINT32_MAX;
        }
        for (uint32_t u = 0; u < n; u++)
            if (ks->flags[u] & KS_F_REGION) ks->ub[u] = (uint32_t)sat_add(hmax[u], ks->objs[ks->obj[u]].mmax);
        for (uint32_t i = 0; i < ks->nobjs; i++) {
            const sv_kobj_t *o = &ks->objs[i];
            ks->ub[o->start] = (uint32_t)sat_add(ks->ub[o->ropen], 1);
        }
    }
    free(off);
    free(src);
    free(lvl);
    free(queue);
    free(hmax);
    return ok;
}

static bool row_dead(const sv_dfa_t *d, uint32_t x) {
    const int32_t *row = d->trans + (size_t)x * d->nclasses;
    for (uint32_t c = 0; c < d->nclasses; c++)
        if (row[c] >= 0) return false;
    return true;
}

/* The marks of the guards (the header of this section): each marker's
 * state takes the row of the state after it; then the objects, their
 * regions and what each region state reaches. */
static sv_status ks_build(sv_dfa_t *d, const uint32_t *base, const linker_t *L, edges_t *E, const sv_kcond_t *conds,
                         uint32_t nconds, sv_error_t *err) {
    uint32_t n = d->nstates, nc = d->nclasses, np = L->nparts, nobj = 0;
    sv_keysets_t *ks = calloc(1, sizeof *ks);
    int32_t *pobj = malloc((np ? np : 1) * sizeof *pobj);
    uint32_t *queue = malloc((n ? n : 1) * sizeof *queue), *off = NULL, *src = NULL;
    uint8_t *inq = NULL;
    sv_status st = SV_OK;
    d->ks = ks;
    if (!ks || !pobj || !queue) goto nomem;
    for (uint32_t p = 0; p < np; p++) pobj[p] = L->annp[p] ? (int32_t)nobj++ : -1;
    ks->ann = calloc(n ? n : 1, 1);
    ks->flags = calloc(n ? n : 1, 1);
    ks->reach = calloc(n ? n : 1, sizeof *ks->reach);
    ks->obj = malloc((n ? n : 1) * sizeof *ks->obj);
    ks->rid = calloc(n ? n : 1, sizeof *ks->rid);
    ks->ub = malloc((n ? n : 1) * sizeof *ks->ub);
    ks->xs = calloc(n ? n : 1, sizeof *ks->xs);
    ks->objs = calloc(nobj ? nobj : 1, sizeof *ks->objs);
    ks->conds = calloc(nobj ? nobj : 1, sizeof *ks->conds);
    if (!ks->conds || !ks->ann || !ks->flags || !ks->reach || !ks->obj || !ks->rid || !ks->ub || !ks->xs || !ks->objs) goto nomem;
    ks->nobjs = nobj;
    for (uint32_t p = 0; p < np; p++) {
        for (uint32_t x = base[p]; x < base[p + 1]; x++) ks->obj[x] = pobj[p];
        if (pobj[p] < 0) continue;
        sv_kobj_t *o = &ks->objs[pobj[p]];
        o->start = (int32_t)base[p];
        o->ropen = o->rcomma = -1;
        for (uint32_t k = 0; k < SV_KS_MAX_KEYS; k++) o->kstate[k] = -1;
    }
    for (uint32_t i = 0; i < L->nanns; i++) {
        const ann_t *a = &L->anns[i];
        uint32_t x = base[a->part] + a->state, y = base[a->part] + a->after;
        sv_kobj_t *o = &ks->objs[pobj[a->part]];
        if (!row_dead(d, x) || sv_dfa_has_calls(d, (int32_t)x) || sv_dfa_has_calls(d, (int32_t)y) || ks->ann[x])
            goto shared;
        if (a->code < SV_ANN_XEND) {
            uint32_t k = a->code % SV_ANN_REQ;
            if (o->kstate[k] >= 0) goto shared;
            o->kstate[k] = (int32_t)x;
            o->keys |= 1ull << k;
            if (a->code >= SV_ANN_REQ) o->req |= 1ull << k;
            ks->ann[x] = (uint8_t)(KS_A_KEY0 + k);
        } else if (a->code >= SV_ANN_COND0) { /* a close with conditions */
            uint32_t j = a->code - SV_ANN_COND0;
            if (j >= nconds || o->cond) goto shared;
            ks->conds[pobj[a->part]] = conds[j];
            o->cond = &ks->conds[pobj[a->part]];
            ks->ann[x] = KS_A_CLOSE;
        } else {
            ks->ann[x] = a->code == SV_ANN_XEND ? KS_A_XEND : a->code == SV_ANN_OPEN ? KS_A_OPEN : KS_A_CLOSE;
        }
    }
    const uint8_t kq = d->classes['"'];
    for (uint32_t i = 0; i < L->nanns; i++) {
        const ann_t *a = &L->anns[i];
        uint32_t x = base[a->part] + a->state, y = base[a->part] + a->after;
        if (ks->ann[y]) goto shared; /* guards one after another */
        const int32_t *ry = d->trans + (size_t)y * nc;
        memcpy(d->trans + (size_t)x * nc, ry, nc * sizeof *ry);
        d->accept[x] = d->accept[y];
        for (uint32_t c = 0; c < nc; c++) {
            if (ry[c] < 0) continue;
            if (E->n == E->cap && !sv_grow((void **)&E->v, &E->cap, E->n + 1, sizeof *E->v)) goto nomem;
            E->v[E->n++] = (uint64_t)(uint32_t)ry[c] << 32 | x | (c == kq ? SRC_QUOTE : 0);
        }
    }
    /* the OPEN states after '{' and after ',' */
    for (uint32_t i = 0; i < nobj; i++) {
        sv_kobj_t *o = &ks->objs[i];
        int32_t y = d->trans[(size_t)o->start * nc + d->classes['{']];
        if (y >= 0 && ks->ann[y] == KS_A_OPEN) o->ropen = y;
    }
    for (uint32_t x = 0; x < n; x++) {
        if (ks->obj[x] < 0) continue;
        int32_t y = d->trans[(size_t)x * nc + d->classes[',']];
        if (y >= 0 && ks->ann[y] == KS_A_OPEN) {
            sv_kobj_t *o = &ks->objs[ks->obj[x]];
            if (o->rcomma >= 0 && o->rcomma != y) goto shared;
            o->rcomma = y;
        }
    }
    for (uint32_t i = 0; i < nobj; i++) {
        const sv_kobj_t *o = &ks->objs[i];
        if (o->ropen < 0) goto shared;
        for (uint64_t m = o->req; m; m &= m - 1)
            if (o->kstate[__builtin_ctzll(m)] < 0) goto shared;
        /* a condition's keys are the object's (the compiler drops the keys
         * whose dependency cannot be written) */
        const sv_kcond_t *k = o->cond;
        for (uint32_t j = 0; k && j < k->ndeps; j++)
            if (k->dep_a[j] >= SV_KS_MAX_KEYS || k->dep_b[j] >= SV_KS_MAX_KEYS || !(o->keys >> k->dep_b[j] & 1)) goto shared;
        if (k && (k->ntk > SV_KCOND_TABLE_KEYS || (k->ntk && (k->ndeps || k->anyreq)))) goto shared;
        for (uint32_t j = 0; k && j < k->ntk; j++)
            if (k->tkey[j] != 0xFF && (k->tkey[j] >= SV_KS_MAX_KEYS || !(o->keys >> k->tkey[j] & 1))) goto shared;
    }
    /* regions: from the OPEN states over direct moves up to the ends */
    uint32_t qt = 0;
    for (uint32_t x = 0; x < n; x++)
        if (ks->ann[x] == KS_A_OPEN) ks->flags[x] |= KS_F_REGION, queue[qt++] = x;
    for (uint32_t qh = 0; qh < qt;) {
        uint32_t u = queue[qh++];
        if (sv_dfa_has_calls(d, (int32_t)u)) goto shared; /* a key's spelling calls nothing */
        const int32_t *row = d->trans + (size_t)u * nc;
        for (uint32_t c = 0; c < nc; c++) {
            int32_t t = row[c];
            if (t < 0 || ks_is_end(ks->ann[t]) || (ks->flags[t] & KS_F_REGION)) continue;
            ks->flags[t] |= KS_F_REGION;
            queue[qt++] = (uint32_t)t;
        }
    }
    for (uint32_t x = 0; x < n; x++)
        if (ks->flags[x] & KS_F_REGION) ks->rid[x] = ks->objs[ks->obj[x]].nregion++;
    /* reach: the ends each region state gets to, a search back over the
     * region's moves from the states that move to an end */
    inq = calloc(n ? n : 1, 1);
    if (!inq || !region_moves_back(d, &off, &src)) goto nomem;
    for (uint32_t u = 0; u < n; u++) {
        if (!(ks->flags[u] & KS_F_REGION)) continue;
        const int32_t *row = d->trans + (size_t)u * nc;
        for (uint32_t c = 0; c < nc; c++) {
            int32_t t = row[c];
            if (t < 0 || (ks->flags[t] & KS_F_REGION)) continue;
            uint8_t a = ks->ann[t];
            if (ks_is_key(a)) ks->reach[u] |= 1ull << (a - KS_A_KEY0);
            else if (a == KS_A_XEND) ks->flags[u] |= KS_F_XREACH;
            else if (a == KS_A_CLOSE) ks->flags[u] |= KS_F_CREACH;
        }
    }
    qt = 0;
    for (uint32_t x = 0; x < n; x++)
        if (ks->flags[x] & KS_F_REGION) queue[qt++] = x, inq[x] = 1;
    /* a stack worklist: a state goes back on it when what it reaches grew
     * (only region states are ever on it, and only region states move to
     * them) */
    while (qt) {
        uint32_t t = queue[--qt];
        inq[t] = 0;
        for (uint32_t i = off[t]; i < off[t + 1]; i++) {
            uint32_t u = src[i];
            uint64_t r = ks->reach[u] | ks->reach[t];
            uint8_t f = ks->flags[u] | (ks->flags[t] & (KS_F_XREACH | KS_F_CREACH));
            if (r == ks->reach[u] && f == ks->flags[u]) continue;
            ks->reach[u] = r, ks->flags[u] = f;
            if (!inq[u]) inq[u] = 1, queue[qt++] = u;
        }
    }
    /* What a walk must check on entering: a key's end, the close, and a
     * region state from which no extra key may be spelled (with one, every
     * spelling stays alive whatever the set: the plain walks may take it,
     * and string content keeps its shortcuts there) */
    for (uint32_t y = 0; y < n; y++) {
        uint8_t a = ks->ann[y], f = ks->flags[y];
        if (((f & KS_F_REGION) && !(f & KS_F_XREACH)) || ks_is_key(a) || a == KS_A_CLOSE) ks->flags[y] |= KS_F_CHECK;
    }
    goto out;
shared:
    st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "an object's key-set guards do not stand alone in its automaton");
    goto out;
nomem:
    st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
out:
    free(pobj);
    free(queue);
    free(off);
    free(src);
    free(inq);
    return st;
}

/* The parts in an order whose last is taken first by distances()'s
 * worklist, a stack: callers before callees (the reverse of a depth-first
 * postorder over the calls), so that each part of a program without
 * recursion is searched once, after every part it calls. */
static bool callees_first(const sv_dfa_t *d, const uint32_t *base, uint32_t np, uint32_t *order) {
    uint32_t *off = calloc((size_t)np + 1, sizeof *off), *to = malloc(((size_t)d->ncalls + 1) * sizeof *to);
    uint32_t *stack = malloc(((size_t)np + 1) * sizeof *stack), *next = malloc(((size_t)np + 1) * sizeof *next);
    uint8_t *seen = calloc(np ? np : 1, 1);
    bool ok = off && to && stack && next && seen;
    if (ok) {
        for (uint32_t p = 0; p < np; p++) off[p + 1] = d->call_off[base[p + 1]] - d->call_off[base[p]];
        for (uint32_t p = 0; p < np; p++) off[p + 1] += off[p];
        for (uint32_t i = 0; i < d->ncalls; i++) to[i] = part_of(base, np, (uint32_t)d->calls[i].callee);
        /* calls are grouped by caller state, so part p's are off[p] .. off[p + 1] */
        uint32_t n = np;
        for (uint32_t r = 0; r < np; r++) {
            if (seen[r]) continue;
            uint32_t sp = 0;
            stack[sp] = r, next[sp++] = off[r], seen[r] = 1;
            while (sp) {
                uint32_t p = stack[sp - 1];
                if (next[sp - 1] == off[p + 1]) {
                    order[--n] = p; /* finished: after all it calls */
                    sp--;
                    continue;
                }
                uint32_t q = to[next[sp - 1]++];
                if (!seen[q]) seen[q] = 1, stack[sp] = q, next[sp++] = off[q];
            }
        }
    }
    free(off);
    free(to);
    free(stack);
    free(next);
    free(seen);
    return ok;
}

/* Distances with calls: per part, Dijkstra from its final states over
 * reversed edges, a call s -> ret weighing dist[callee] (the callee's start
 * distance as known so far). Parts are redone from a worklist: a part whose
 * start distance fell puts its callers back. Edges never leave a part, so
 * each redo touches one part; distances only fall, so it ends, at the least
 * fixed point (every edge then holds, and every distance is a real
 * completion's length). Parts are found callers first (the root is 0), so the
 * worklist takes them from the last: callees first, and a program without
 * recursion is one Dijkstra a part. */
static sv_status distances(sv_dfa_t *d, const uint32_t *base, const edges_t *E, sv_error_t *err) {
    uint32_t n = d->nstates, np = d->nparts;
    uint32_t *off = calloc((size_t)n + 1, sizeof *off), *fill = calloc(n ? n : 1, sizeof *fill);
    size_t ne = d->ncalls + E->n;
    for (size_t i = 0; off && i < E->n; i++) off[(E->v[i] >> 32) + 1]++;
    uint32_t *src = malloc((ne + 1) * sizeof *src);
    int32_t *via = malloc((ne + 1) * sizeof *via); /* -1: a byte; else the callee */
    heap_t *heap = malloc((ne + n + 1) * sizeof *heap);
    heap_t *fifo = malloc((ne + 1) * sizeof *fifo); /* moves on a byte, in order */
    uint8_t *done = malloc(n ? n : 1);
    /* callers[coff[p] .. coff[p + 1]): the parts that call part p */
    uint32_t *coff = calloc((size_t)np + 1, sizeof *coff), *callers = malloc((d->ncalls + 1) * sizeof *callers);
    uint32_t *work = malloc(((size_t)np + 1) * sizeof *work);
    uint8_t *queued = calloc(np ? np : 1, 1);
    d->dist = malloc((n ? n : 1) * sizeof *d->dist);
    uint32_t *xs = d->ks ? d->ks->xs : NULL;
    sv_status st = SV_OK;
    if (!off || !fill || !src || !via || !heap || !fifo || !done || !coff || !callers || !work || !queued || !d->dist) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory analyzing the constraint");
        goto out;
    }
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t i = d->call_off[s]; i < d->call_off[s + 1]; i++) off[d->calls[i].ret + 1]++;
    for (uint32_t i = 0; i < n; i++) off[i + 1] += off[i];
    for (size_t i = 0; i < E->n; i++) {
        uint32_t et = (uint32_t)(E->v[i] >> 32);
        src[off[et] + fill[et]] = (uint32_t)E->v[i];
        via[off[et] + fill[et]++] = -1;
    }
    for (uint32_t s = 0; s < n; s++) {
        for (uint32_t i = d->call_off[s]; i < d->call_off[s + 1]; i++) {
            int32_t t = d->calls[i].ret;
            src[off[t] + fill[t]] = s, via[off[t] + fill[t]++] = d->calls[i].callee;
        }
    }
    for (uint32_t i = 0; i < d->ncalls; i++) coff[part_of(base, np, (uint32_t)d->calls[i].callee) + 1]++;
    for (uint32_t p = 0; p < np; p++) coff[p + 1] += coff[p];
    memset(fill, 0, (n ? n : 1) * sizeof *fill);
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t i = d->call_off[s]; i < d->call_off[s + 1]; i++) {
            uint32_t q = part_of(base, np, (uint32_t)d->calls[i].callee);
            callers[coff[q] + fill[q]++] = part_of(base, np, s);
        }
    for (uint32_t s = 0; s < n; s++) d->dist[s] = UINT32_MAX;
    uint32_t nw = 0;
    if (!callees_first(d, base, np, work)) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory analyzing the constraint");
        goto out;
    }
    for (nw = 0; nw < np; nw++) queued[work[nw]] = 1;
    while (nw) {
        uint32_t p = work[--nw];
        queued[p] = 0;
        uint32_t lo = base[p], hi = base[p + 1], before = d->dist[lo], xbefore = xs ? xs[lo] : 0;
        uint32_t hn = 0;
        /* The distances known so far are lengths of real completions, so
         * they seed the search: only what a fallen callee shortens moves. */
        for (uint32_t s = lo; s < hi; s++) {
            done[s] = 0;
            if (d->accept[s]) d->dist[s] = 0;
            if (d->dist[s] != UINT32_MAX) heap_push(heap, &hn, (heap_t){d->dist[s], s});
        }
        /* Dijkstra, the heap holding the seeds and what calls reach; what
         * a byte reaches (one more than the state just taken, so in order)
         * waits in a FIFO, and the smaller head goes first. */
        uint32_t fh = 0, ft = 0;
        while (hn || fh < ft) {
            heap_t h = fh < ft && (!hn || fifo[fh].d <= heap[0].d) ? fifo[fh++] : heap_pop(heap, &hn);
            if (done[h.s] || h.d != d->dist[h.s]) continue;
            done[h.s] = 1;
            for (uint32_t i = off[h.s]; i < off[h.s + 1]; i++) {
                uint32_t w = via[i] < 0 ? 1 : d->dist[via[i]], x = src[i] & ~SRC_QUOTE;
                if (w == UINT32_MAX) continue;
                if (via[i] >= 0 && xs) w = (uint32_t)sat_add(w, xs[via[i]]);
                uint64_t nd = (uint64_t)h.d + w;
                if (nd < d->dist[x]) {
                    d->dist[x] = (uint32_t)nd;
                    if (via[i] < 0) fifo[ft++] = (heap_t){(uint32_t)nd, x};
                    else heap_push(heap, &hn, (heap_t){(uint32_t)nd, x});
                }
            }
        }
        if (xs && d->ks->obj[lo] >= 0) ks_costs(d, (uint32_t)d->ks->obj[lo]);
        if (d->dist[lo] == before && (!xs || xs[lo] == xbefore)) continue;
        for (uint32_t i = coff[p]; i < coff[p + 1]; i++)
            if (!queued[callers[i]]) queued[callers[i]] = 1, work[nw++] = callers[i];
    }
    if (!d->ks) boundary_distances(d, off, src, via); /* with key sets the token index finds them (guards cross) */
out:
    free(off);
    free(fill);
    free(src);
    free(via);
    free(heap);
    free(fifo);
    free(done);
    free(coff);
    free(callers);
    free(work);
    free(queued);
    return st;
}

static inline bool bsub(const uint64_t *a, const uint64_t *b) {
    return !(a[0] & ~b[0]) && !(a[1] & ~b[1]) && !(a[2] & ~b[2]) && !(a[3] & ~b[3]);
}

/* Whether state a simulates state b (same part): b accepting implies a
 * accepting, and every move of b, on a byte or a call, a makes too, to a
 * state that simulates b's. A coinductive search over at most SIM_PAIRS
 * pairs (past it: no). Simulation implies that a's language holds b's. */
#define SIM_PAIRS 256u

typedef struct {
    int32_t a[SIM_PAIRS], b[SIM_PAIRS];
    uint32_t n;
} sim_t;

static bool sim_go(const sv_dfa_t *d, sim_t *m, int32_t a, int32_t b) {
    if (a == b) return true;
    if (d->accept[b] && !d->accept[a]) return false;
    for (uint32_t i = 0; i < m->n; i++)
        if (m->a[i] == a && m->b[i] == b) return true;
    if (m->n == SIM_PAIRS) return false;
    m->a[m->n] = a, m->b[m->n++] = b;
    const int32_t *ra = d->trans + (size_t)a * d->nclasses, *rb = d->trans + (size_t)b * d->nclasses;
    for (uint32_t c = 0; c < d->nclasses; c++)
        if (rb[c] >= 0 && (ra[c] < 0 || !sim_go(d, m, ra[c], rb[c]))) return false;
    for (uint32_t j = d->call_off[b]; j < d->call_off[b + 1]; j++) {
        bool found = false;
        for (uint32_t k = d->call_off[a]; k < d->call_off[a + 1] && !found; k++)
            found = d->calls[k].callee == d->calls[j].callee && sim_go(d, m, d->calls[k].ret, d->calls[j].ret);
        if (!found) return false;
    }
    return true;
}

static bool simulates(const sv_dfa_t *d, int32_t a, int32_t b) {
    sim_t m;
    m.n = 0;
    return sim_go(d, &m, a, b);
}

/* For each part, what its callers may read after it returns: the union
 * over its call sites of what the return state reads (its bytes and its
 * calls' first bytes) and, where the return state is final, of its own
 * part's set; a fixed point over the call sites. With hard, only the bytes
 * read other than harmlessly (check_choices): a move to a state the return
 * state does not simulate, or a call. */
static void after_returns(const sv_dfa_t *d, const uint32_t *base, const uint64_t (*bytes)[4], bool hard,
                          uint64_t (*set)[4]) {
    uint32_t np = d->nparts;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t i = 0; i < d->ncalls; i++) {
            int32_t r = d->calls[i].ret;
            uint32_t pq = part_of(base, np, (uint32_t)d->calls[i].callee), pr = part_of(base, np, (uint32_t)r);
            uint64_t x[4] = {0, 0, 0, 0};
            const int32_t *row = d->trans + (size_t)r * d->nclasses;
            for (uint32_t c = 0; c < d->nclasses; c++)
                if (row[c] >= 0 && (!hard || (!bsub(bytes[c], set[pq]) && !simulates(d, r, row[c]))))
                    bor(x, bytes[c]);
            for (uint32_t j = d->call_off[r]; j < d->call_off[r + 1]; j++) bor(x, d->calls[j].first);
            if (d->accept[r]) bor(x, set[pr]);
            for (int w = 0; w < 4; w++)
                if (x[w] & ~set[pq][w]) set[pq][w] |= x[w], changed = true;
        }
    }
}

/* The determinism check of the header comment. */
static sv_status check_choices(sv_dfa_t *d, const uint32_t *base, sv_error_t *err) {
    uint32_t n = d->nstates;
    uint8_t *mark = calloc(n, 1);
    uint64_t (*first)[4] = calloc(n, sizeof *first);
    uint64_t (*cm)[4] = malloc(((size_t)d->nclasses + 1) * sizeof *cm);
    sv_status st = SV_OK;
    if (!mark || !first || !cm) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint"); goto out; }
    class_bytes(d, cm);
    const uint64_t (*bytes)[4] = (const uint64_t (*)[4])cm;
    for (uint32_t i = 0; i < d->ncalls && !st; i++) st = first_of(d, bytes, d->calls[i].callee, mark, first, err);
    if (st) goto out;
    for (uint32_t i = 0; i < d->ncalls; i++) memcpy(d->calls[i].first, first[d->calls[i].callee], sizeof d->calls[i].first);
    for (uint32_t s = 0; s < n && !st; s++) {
        uint32_t lo = d->call_off[s], hi = d->call_off[s + 1];
        if (lo == hi) continue;
        uint64_t seen[4];
        direct_set(d, bytes, (int32_t)s, seen);
        for (uint32_t i = lo; i < hi; i++) {
            if (d->accept[d->calls[i].callee]) {
                st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a called part accepts the empty string");
                break;
            }
            if (bmeet(seen, d->calls[i].first)) {
                st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a byte both continues and starts a call at one state");
                break;
            }
            bor(seen, d->calls[i].first);
        }
    }
    if (st) goto out;
    /* A final state that can go on (bytes or calls) competes with what its
     * callers do after it returns: FOLLOW(part), the bytes that may come
     * after the part ends, is the union over its call sites of FIRSTX(ret)
     * (ret's own bytes and calls, and FOLLOW of ret's part when ret is
     * final); nothing follows the root part. A fixed point over parts.
     *
     * One competition is harmless: where every caller state r that may
     * read byte b after the part returns moves to a state r' that r
     * simulates (whatever r' reads, r reads too, to a state that again
     * simulates; a loop r --b--> r is the common case: trailing whitespace
     * of a rule, then whitespace in its caller, `item ::= "[" ws item ws
     * "]" ws`), and what the part reads from its final state f on such
     * bytes keeps it at final states that read no other byte a caller may
     * read. The walk then stays in the part (a direct move comes before a
     * return) and loses nothing by it: a path that returned at f and read
     * those bytes in the caller, reaching some r'', is matched by reading
     * them in the part and returning after them to r, which simulates r''.
     * HARD[p] holds the bytes of FOLLOW(p) that some caller state reads
     * otherwise (a move to a state it does not simulate, a call); the part
     * may not go on with them at a final state. Computed only where a
     * final state meets FOLLOW. */
    uint32_t np = d->nparts;
    uint64_t (*follow)[4] = calloc(2 * (size_t)np, sizeof *follow);
    if (!follow) { st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint"); goto out; }
    uint64_t (*hard)[4] = follow + np; /* bytes of FOLLOW(p) read other than harmlessly (below) */
    bool hard_known = false;
#define PART_OF(x, p) ((p) = part_of(base, np, (uint32_t)(x)))
    after_returns(d, base, bytes, false, follow);
    uint32_t *seen = NULL, *stack = NULL, gen = 0; /* the walk from each final state that meets FOLLOW */
    for (uint32_t f = 0; f < n && !st; f++) {
        if (!d->accept[f]) continue;
        uint32_t pf;
        PART_OF(f, pf);
        uint64_t go[4];
        direct_set(d, bytes, (int32_t)f, go);
        for (uint32_t j = d->call_off[f]; j < d->call_off[f + 1]; j++) bor(go, d->calls[j].first);
        if (!bmeet(go, follow[pf])) continue;
        /* Harmless when every state f reaches on bytes of FOLLOW is final,
         * reads no byte of HARD, and starts no call on a byte of FOLLOW. */
        if (!seen && (!(seen = calloc(n, sizeof *seen)) || !(stack = malloc(n * sizeof *stack)))) {
            st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
            break;
        }
        if (!hard_known) {
            hard_known = true;
            after_returns(d, base, bytes, true, hard);
        }
        gen++;
        uint32_t nt = 0;
        bool ok = true;
        seen[f] = gen, stack[nt++] = f;
        while (nt && ok) {
            uint32_t x = stack[--nt];
            const int32_t *row = d->trans + (size_t)x * d->nclasses;
            ok = d->accept[x];
            for (uint32_t j = d->call_off[x]; j < d->call_off[x + 1] && ok; j++) ok = !bmeet(d->calls[j].first, follow[pf]);
            for (uint32_t c = 0; c < d->nclasses && ok; c++) {
                if (row[c] < 0 || !bmeet(bytes[c], follow[pf])) continue;
                ok = !bmeet(bytes[c], hard[pf]);
                if (ok && seen[row[c]] != gen) seen[row[c]] = gen, stack[nt++] = (uint32_t)row[c];
            }
        }
        if (!ok) st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a called part may go on where its caller continues");
    }
    free(seen);
    free(stack);
#undef PART_OF
    free(follow);
out:
    free(mark);
    free(first);
    free(cm);
    return st;
}

/* ---- competing choices, resolved by expansion ----------------------------------
 *
 * A union of branches that call a part where another branch spells the same
 * kind of value out (`{"a": {}}` beside `{"a": [[1]]}`: the free-form part's
 * call and the bytes of `[[1]]` after `"a": `), or that call two parts which
 * start alike, leaves a state whose choices compete, and check_choices
 * refuses it. Before linking, such a part is determinized again over
 * *configurations*: a state of any part with a stack of return states (a
 * few frames deep) and the set of its calls already expanded. Where the
 * configurations of a subset compete (a call's callee may start with a
 * byte the subset reads, or with a byte another callee starts with, or
 * accepts the empty string), each competing call is expanded: the callee's
 * start joins the subset with the call's return state pushed, and a final
 * state of a callee joins its return state (popped) as an epsilon move. A
 * call that competes with nothing stays a call (a marker in the new part,
 * its return the subset of the configurations that made it). So the
 * branches share the bytes they share and split where they differ, one
 * container level deeper where the spelled-out side goes on, which a finite
 * automaton does only to a bounded depth; a loop of the spelled side (the
 * items of an array) meets the same configurations again and closes. A call
 * stands for its callee's strings, so the new part has the same language:
 * exact. What it cannot settle within EXPAND_DEPTH frames or the budgets
 * stays for check_choices to refuse, and the schema compiler then compiles
 * with fewer parts, as before. */

#define EXPAND_ROUNDS 4
#define EXPAND_DEPTH 16

/* The text bytes with a move from x (the marker bytes aside). */
static void text_set(const sv_dfa_t *d, int32_t x, uint64_t out[4]) {
    memset(out, 0, 4 * sizeof *out);
    const int32_t *row = d->trans + (size_t)x * d->nclasses;
    for (int b = 0; b < SV_CALL_DIGIT0; b++)
        if (row[d->classes[b]] >= 0) bset(out, (uint32_t)b);
}

/* first(p) over unlinked parts: the text bytes of p's start and the first
 * sets of the calls there (soff[p]: p's first site; sites are in part, then
 * state order). False on a call before any byte that leads back to p. */
static bool raw_first(const linker_t *L, const uint32_t *soff, uint32_t p, uint8_t *mark, uint64_t (*memo)[4]) {
    if (mark[p] == 2) return true;
    if (mark[p] == 1) return false;
    mark[p] = 1;
    text_set(L->parts[p], 0, memo[p]);
    for (uint32_t i = soff[p]; i < soff[p + 1] && L->sites[i].state == 0; i++) {
        if (!raw_first(L, soff, L->sites[i].callee, mark, memo)) return false;
        bor(memo[p], memo[L->sites[i].callee]);
    }
    mark[p] = 2;
    return true;
}

static uint32_t words_hash(const uint32_t *t, uint32_t k) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < k; i++) h = sv_hash_step(h, t[i]), h ^= h >> 29;
    return (uint32_t)h;
}

/* Interned lists of words, in one pool: subsets of configurations (sorted
 * id lists), and with lists of k words frames and configurations. Ids in
 * order of first sight, an open-addressing table of ids. */
typedef struct {
    uint32_t *pool, npool, cappool;
    uint32_t *off, n, capoff; /* list i is pool[off[i] .. off[i + 1]) */
    uint32_t *tab, tcap;      /* ids + 1; 0 empty */
} lists_t;

/* The id of list c (nc words), added if new; UINT32_MAX when out of memory. */
static uint32_t list_id(lists_t *S, const uint32_t *c, uint32_t nc) {
    if (2 * (S->n + 1) > S->tcap) {
        uint32_t cap = S->tcap ? 2 * S->tcap : 1024;
        uint32_t *nt = calloc(cap, sizeof *nt);
        if (!nt) return UINT32_MAX;
        for (uint32_t i = 0; i < S->n; i++) {
            uint32_t h = words_hash(S->pool + S->off[i], S->off[i + 1] - S->off[i]) & (cap - 1);
            while (nt[h]) h = (h + 1) & (cap - 1);
            nt[h] = i + 1;
        }
        free(S->tab);
        S->tab = nt;
        S->tcap = cap;
    }
    uint32_t h = words_hash(c, nc) & (S->tcap - 1);
    for (; S->tab[h]; h = (h + 1) & (S->tcap - 1)) {
        uint32_t i = S->tab[h] - 1;
        if (S->off[i + 1] - S->off[i] == nc && !memcmp(S->pool + S->off[i], c, nc * sizeof *c)) return i;
    }
    if (!sv_grow((void **)&S->pool, &S->cappool, S->npool + nc, sizeof *S->pool) ||
        !sv_grow((void **)&S->off, &S->capoff, S->n + 2, sizeof *S->off))
        return UINT32_MAX;
    if (!S->n) S->off[0] = 0;
    memcpy(S->pool + S->npool, c, nc * sizeof *c);
    S->npool += nc;
    S->off[S->n + 1] = S->npool;
    S->tab[h] = S->n + 1;
    return S->n++;
}

static void lists_free(lists_t *S) {
    free(S->pool);
    free(S->off);
    free(S->tab);
}

typedef struct {
    const linker_t *L;
    const uint32_t *base, *pof, *sidx; /* per part: first global state; per global state: its part, first site */
    const uint64_t (*first)[4];
    lists_t frames; /* (return state, frame below); frame 0 is the empty stack */
    uint32_t *depth, capdepth;
    lists_t confs;  /* (global state, frame, expanded sites: a bit per site of the state) */
    uint32_t *set, nset, capset; /* the subset being closed */
    sv_error_t *err;
    int32_t keep; /* >= 0: every call to another part is expanded too (sv_program_expand) */
    uint64_t deadline; /* sv_now_ns() past which the compile has run out of time (0: none) */
    uint64_t budget_ms; /* for the message */
    uint64_t (*text)[4]; /* per global state, text_set once known (tknown) */
    uint8_t *tknown;
} expander_t;

static const sv_dfa_t *gpart(const expander_t *E, uint32_t x, uint32_t *local) {
    uint32_t p = E->pof[x];
    *local = x - E->base[p];
    return E->L->parts[p];
}

/* Configuration i's words, frame f's words (fixed lengths 3 and 2). */
static const uint32_t *conf(const expander_t *E, uint32_t i) { return E->confs.pool + (size_t)i * 3; }
static const uint32_t *frame_of(const expander_t *E, uint32_t f) { return E->frames.pool + (size_t)f * 2; }

static sv_status add_conf(expander_t *E, uint32_t x, uint32_t frame, uint32_t exp) {
    if (E->L->annp[E->pof[x]]) /* its guards mark states of its own: it stays a part */
        return sv_error_set(E->err, SV_ERR_UNSUPPORTED, -1, "an object whose keys may come in any order would be expanded");
    uint32_t t[3] = {x, frame, exp}, id = list_id(&E->confs, t, 3);
    if (id == UINT32_MAX || !sv_grow((void **)&E->set, &E->capset, E->nset + 1, sizeof *E->set))
        return sv_error_set(E->err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
    for (uint32_t i = 0; i < E->nset; i++)
        if (E->set[i] == id) return SV_OK;
    E->set[E->nset++] = id;
    return SV_OK;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Closes E->set: returns from final states of callees, and expansions of
 * the calls that compete; then sorts it. */
static sv_status close_set(expander_t *E) {
    sv_status st;
    for (bool changed = true; changed;) {
        changed = false;
        /* a round rescans the whole set: big sets take long, so the time
         * budget is checked here too, not only between states */
        if (E->deadline && sv_now_ns() > E->deadline)
            return sv_error_set(E->err, SV_ERR_TIMEOUT, -1,
                                "compiling the constraint exceeded the time budget of %llu ms",
                                (unsigned long long)E->budget_ms);
        uint64_t text[4] = {0};
        for (uint32_t i = 0; i < E->nset; i++) {
            const uint32_t *c = conf(E, E->set[i]);
            uint32_t loc;
            const sv_dfa_t *d = gpart(E, c[0], &loc);
            if (!E->tknown[c[0]]) text_set(d, (int32_t)loc, E->text[c[0]]), E->tknown[c[0]] = 1;
            bor(text, E->text[c[0]]);
            if (c[1] && d->accept[loc]) {
                const uint32_t *f = frame_of(E, c[1]);
                uint32_t before = E->nset;
                if ((st = add_conf(E, f[0], f[1], 0))) return st;
                changed |= E->nset != before;
            }
        }
        for (uint32_t i = 0; i < E->nset; i++) {
            const uint32_t *c = conf(E, E->set[i]);
            uint32_t x = c[0], frame = c[1], exp = c[2], grow = 0;
            for (uint32_t s = E->sidx[x]; s < E->sidx[x + 1]; s++) {
                uint32_t bit = 1u << (s - E->sidx[x]);
                if (exp & bit) continue;
                uint32_t q = E->L->sites[s].callee;
                bool clash = (E->keep >= 0 && q != (uint32_t)E->keep) || bmeet(text, E->first[q]) ||
                             E->L->parts[q]->accept[0];
                /* another unexpanded call of the subset to a different part */
                for (uint32_t j = 0; j < E->nset && !clash; j++) {
                    const uint32_t *o = conf(E, E->set[j]);
                    for (uint32_t t = E->sidx[o[0]]; t < E->sidx[o[0] + 1] && !clash; t++)
                        clash = !(o[2] & 1u << (t - E->sidx[o[0]])) && E->L->sites[t].callee != q &&
                                bmeet(E->first[q], E->first[E->L->sites[t].callee]);
                }
                if (clash) grow |= bit;
            }
            if (!grow) continue;
            if (E->depth[frame] >= EXPAND_DEPTH)
                return sv_error_set(E->err, SV_ERR_UNSUPPORTED, -1, "competing calls nest deeper than %d frames",
                                    EXPAND_DEPTH);
            /* the configuration with those calls expanded replaces it */
            uint32_t t[3] = {x, frame, exp | grow}, id = list_id(&E->confs, t, 3);
            if (id == UINT32_MAX) return sv_error_set(E->err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
            E->set[i] = id;
            for (uint32_t s = E->sidx[x]; s < E->sidx[x + 1]; s++) {
                if (!(grow & 1u << (s - E->sidx[x]))) continue;
                const site_t *z = &E->L->sites[s];
                uint32_t fr[2] = {E->base[z->part] + z->ret, frame}, fid = list_id(&E->frames, fr, 2);
                if (fid == UINT32_MAX || !sv_grow((void **)&E->depth, &E->capdepth, E->frames.n, sizeof *E->depth))
                    return sv_error_set(E->err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
                E->depth[fid] = E->depth[frame] + 1;
                if ((st = add_conf(E, E->base[z->callee], fid, 0))) return st;
            }
            changed = true;
        }
    }
    qsort(E->set, E->nset, sizeof *E->set, cmp_u32);
    uint32_t n = 0;
    for (uint32_t i = 0; i < E->nset; i++)
        if (!n || E->set[n - 1] != E->set[i]) E->set[n++] = E->set[i];
    E->nset = n;
    return SV_OK;
}

/* An edge of expand_part's automaton: the bytes lo..hi, or a call's marker
 * (call < UINT32_MAX: its id). */
typedef struct {
    uint32_t from, to, call;
    uint8_t lo, hi;
} xedge_t;

/* The minimal DFA of expand_part's automaton (n subsets, deterministic
 * already: one target per byte, a marker per callee), from a raw table
 * written directly, the markers spelled out through states of their own
 * (a trie per subset: its markers share the mark byte and leading digits),
 * the byte classes the runs' bounds. It went through an AST, an NFA and
 * subset construction: 7.7 of the 19 ms that Github_ultra---o359's one
 * expanded part took. */
static sv_status xedges_dfa(uint32_t n, const xedge_t *e, uint32_t ne, const uint8_t *final,
                            const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    sv_rawdfa_t raw = {0};
    bool cut[257] = {false};
    cut[0] = true;
    for (uint32_t i = 0; i < ne; i++)
        if (e[i].call == UINT32_MAX) cut[e[i].lo] = cut[e[i].hi + 1] = true;
    for (int b = SV_CALL_DIGIT0; b <= 0xFF; b++) cut[b] = true;
    uint32_t k = 0;
    for (int b = 0; b < 256; b++) raw.classes[b] = (uint8_t)(k += cut[b], k - 1);
    raw.nclasses = k;
    /* states: the subsets, then SV_CALL_DIGITS per marker at most */
    uint32_t nm = 0;
    for (uint32_t i = 0; i < ne; i++) nm += e[i].call != UINT32_MAX;
    size_t cap = (size_t)n + (size_t)nm * SV_CALL_DIGITS;
    sv_status st = SV_OK;
    if (cap > UINT32_MAX / 2) return sv_error_set(err, SV_ERR_BUDGET, -1, "expanding competing calls needs too many states");
    raw.trans = malloc((cap ? cap : 1) * k * sizeof *raw.trans);
    raw.accept = calloc(cap ? cap : 1, 1);
    if (!raw.trans || !raw.accept) {
        sv_rawdfa_free(&raw);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
    }
    memset(raw.trans, 0xFF, cap * k * sizeof *raw.trans);
    memcpy(raw.accept, final, n);
    uint32_t used = n;
    for (uint32_t i = 0; i < ne; i++) {
        int32_t *row = raw.trans + (size_t)e[i].from * k;
        if (e[i].call == UINT32_MAX) {
            for (uint32_t c = raw.classes[e[i].lo]; c <= raw.classes[e[i].hi]; c++) row[c] = (int32_t)e[i].to;
            continue;
        }
        uint8_t spell[1 + SV_CALL_DIGITS];
        spell[0] = SV_CALL_MARK;
        sv_call_digits(e[i].call, spell + 1);
        uint32_t x = e[i].from;
        for (int j = 0; j < SV_CALL_DIGITS; j++) { /* the trie node after spell[0..j] */
            int32_t *r = raw.trans + (size_t)x * k + raw.classes[spell[j]];
            if (*r < 0) *r = (int32_t)used++;
            x = (uint32_t)*r;
        }
        raw.trans[(size_t)x * k + raw.classes[spell[SV_CALL_DIGITS]]] = (int32_t)e[i].to;
    }
    raw.nstates = used;
    raw.start = 0;
    st = sv_dfa_minimize_budget(&raw, 0, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    sv_rawdfa_free(&raw);
    return st;
}

/* Part p determinized over configurations (above), as a raw DFA with the
 * calls that stay as markers. */
static sv_status expand_part(const linker_t *L, uint32_t p, const uint64_t (*first)[4],
                             int32_t keep, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    uint32_t np = L->nparts, total = 0;
    expander_t E = {.L = L, .first = first, .err = err, .keep = keep};
    lists_t S = {0};
    uint32_t *base = malloc(((size_t)np + 1) * sizeof *base), *pof = NULL, *sidx = NULL;
    xedge_t *edges = NULL;
    uint32_t ne = 0, cape = 0;
    uint8_t *final = NULL;
    uint32_t capfinal = 0;
    uint64_t t0 = sv_now_ns(), deadline = lim && lim->max_time_us ? t0 + lim->max_time_us * 1000 : 0, acct = 0;
    E.deadline = deadline;
    E.budget_ms = lim ? (lim->time_budget_us ? lim->time_budget_us : lim->max_time_us) / 1000 : 0;
    size_t charged = 0;
    uint32_t max_states = lim ? lim->max_dfa_states : 200000;
    sv_status st = SV_OK;
    if (!base) goto nomem;
    for (uint32_t q = 0; q < np; q++) base[q] = total, total += L->parts[q]->nstates;
    base[np] = total;
    pof = malloc(((size_t)total + 1) * sizeof *pof);
    sidx = calloc((size_t)total + 2, sizeof *sidx);
    E.text = malloc(((size_t)total + 1) * sizeof *E.text);
    E.tknown = calloc((size_t)total + 1, 1);
    if (!pof || !sidx || !E.text || !E.tknown) goto nomem;
    for (uint32_t q = 0; q < np; q++)
        for (uint32_t x = base[q]; x < base[q + 1]; x++) pof[x] = q;
    for (uint32_t i = 0; i < L->nsites; i++) sidx[base[L->sites[i].part] + L->sites[i].state + 1]++;
    for (uint32_t x = 0; x < total; x++) {
        if (sidx[x + 1] > 32) {
            st = sv_error_set(err, SV_ERR_UNSUPPORTED, -1, "a state makes more than 32 calls");
            goto done;
        }
        sidx[x + 1] += sidx[x];
    }
    E.base = base;
    E.pof = pof;
    E.sidx = sidx;
    uint32_t empty[2] = {UINT32_MAX, UINT32_MAX};
    if (list_id(&E.frames, empty, 2) != 0 || !sv_grow((void **)&E.depth, &E.capdepth, 1, sizeof *E.depth)) goto nomem;
    E.depth[0] = 0;
    E.nset = 0;
    if ((st = add_conf(&E, base[p], 0, 0)) || (st = close_set(&E))) goto done;
    if (list_id(&S, E.set, E.nset) == UINT32_MAX) goto nomem;
    /* a byte's raw successors (state, frame pairs), and the byte before's */
    uint32_t *next = NULL, capnext = 0, *prev = NULL, capprev = 0;
    for (uint32_t u = 0; u < S.n; u++) {
        if (!(u & 63)) {
            /* the tables so far, charged to the compile's account */
            size_t bytes = (size_t)total * (2 * sizeof(uint32_t) + sizeof *E.text + 1) +
                           ((size_t)E.frames.cappool + E.frames.capoff + E.frames.tcap + E.confs.cappool +
                            E.confs.capoff + E.confs.tcap + E.capset + E.capdepth + S.cappool + S.capoff + S.tcap +
                            capnext + capprev) * sizeof(uint32_t) + (size_t)cape * sizeof *edges + capfinal;
            if (bytes > charged) {
                uint64_t id;
                if (!sv_memacct_charge(bytes - charged, &id)) {
                    st = sv_error_set(err, SV_ERR_BUDGET, -1, "expanding competing calls exceeds what is left of "
                                      "the compile's memory budget of %zu bytes", lim ? lim->max_memory : 0);
                    break;
                }
                acct = id;
                charged = bytes;
            }
        }
        if (S.n > max_states) {
            st = sv_error_set(err, SV_ERR_BUDGET, -1, "the constraint needs more than %u DFA states (the "
                              "max_dfa_states budget)", max_states);
            break;
        }
        if (deadline && !(u & 15) && sv_now_ns() > deadline) {
            st = sv_error_set(err, SV_ERR_TIMEOUT, -1, "compiling the constraint exceeded the time budget of %llu ms",
                              (unsigned long long)((lim->time_budget_us ? lim->time_budget_us : lim->max_time_us) / 1000));
            break;
        }
        if (!sv_grow((void **)&final, &capfinal, u + 1, 1)) { st = SV_ERR_NOMEM; break; }
        final[u] = 0;
        uint32_t lo = S.off[u], hi = S.off[u + 1];
        for (uint32_t i = lo; i < hi; i++) {
            const uint32_t *c = conf(&E, S.pool[i]);
            uint32_t lc;
            const sv_dfa_t *d = gpart(&E, c[0], &lc);
            if (!c[1] && d->accept[lc]) final[u] = 1;
        }
        /* text bytes: the successor subset per byte, a run of bytes with
         * the same successor one edge */
        int32_t prev_target = -1;
        int run_lo = 0;
        uint32_t nprev = 0;
        for (int b = 0; b <= SV_CALL_DIGIT0; b++) {
            int32_t target = -1;
            uint32_t nn = 0;
            if (b < SV_CALL_DIGIT0) {
                for (uint32_t i = S.off[u]; i < S.off[u + 1]; i++) {
                    const uint32_t *c = conf(&E, S.pool[i]);
                    uint32_t lc;
                    const sv_dfa_t *d = gpart(&E, c[0], &lc);
                    int32_t t = d->trans[(size_t)lc * d->nclasses + d->classes[b]];
                    if (t < 0) continue;
                    if (!sv_grow((void **)&next, &capnext, 2 * (nn + 1), sizeof *next)) { st = SV_ERR_NOMEM; break; }
                    next[2 * nn] = c[0] - lc + (uint32_t)t;
                    next[2 * nn + 1] = c[1];
                    nn++;
                }
                if (st) break;
                if (nn && nn == nprev && !memcmp(prev, next, 2 * nn * sizeof *next)) {
                    target = prev_target;
                } else if (nn) {
                    E.nset = 0;
                    for (uint32_t i = 0; i < nn && !st; i++) st = add_conf(&E, next[2 * i], next[2 * i + 1], 0);
                    if (st || (st = close_set(&E))) break;
                    uint32_t id = list_id(&S, E.set, E.nset);
                    if (id == UINT32_MAX) { st = SV_ERR_NOMEM; break; }
                    target = (int32_t)id;
                }
                /* keep this byte's successors to compare with the next byte's */
                uint32_t *tp = prev, tc = capprev;
                prev = next, capprev = capnext;
                next = tp, capnext = tc;
                nprev = nn;
            }
            if (b > 0 && target != prev_target) {
                if (prev_target >= 0) {
                    if (!sv_grow((void **)&edges, &cape, ne + 1, sizeof *edges)) { st = SV_ERR_NOMEM; break; }
                    edges[ne++] = (xedge_t){u, (uint32_t)prev_target, UINT32_MAX, (uint8_t)run_lo, (uint8_t)(b - 1)};
                }
                run_lo = b;
            }
            prev_target = target;
        }
        if (st) break;
        /* the calls that stay: one marker per callee, its return the subset
         * of the configurations after it */
        /* (add_conf may move E.confs.pool: configurations are copied out) */
        for (uint32_t i = lo; i < hi && !st; i++) {
            const uint32_t cx = conf(&E, S.pool[i])[0], cexp = conf(&E, S.pool[i])[2];
            for (uint32_t s = sidx[cx]; s < sidx[cx + 1] && !st; s++) {
                if (cexp & 1u << (s - sidx[cx])) continue;
                uint32_t q = L->sites[s].callee;
                bool seen = false; /* a call to q from an earlier configuration made the edge */
                for (uint32_t j = lo; j < i && !seen; j++) {
                    const uint32_t *o = conf(&E, S.pool[j]);
                    for (uint32_t t = sidx[o[0]]; t < sidx[o[0] + 1] && !seen; t++)
                        seen = !(o[2] & 1u << (t - sidx[o[0]])) && L->sites[t].callee == q;
                }
                if (seen) continue;
                E.nset = 0;
                for (uint32_t j = i; j < hi && !st; j++) {
                    const uint32_t *o = conf(&E, S.pool[j]);
                    const uint32_t ox = o[0], ofr = o[1], oexp = o[2];
                    for (uint32_t t = sidx[ox]; t < sidx[ox + 1] && !st; t++)
                        if (!(oexp & 1u << (t - sidx[ox])) && L->sites[t].callee == q)
                            st = add_conf(&E, base[L->sites[t].part] + L->sites[t].ret, ofr, 0);
                }
                if (st || (st = close_set(&E))) break;
                uint32_t id = list_id(&S, E.set, E.nset);
                if (id == UINT32_MAX) { st = SV_ERR_NOMEM; break; }
                if (L->sites[s].id > SV_CALL_MAX_ID || !sv_grow((void **)&edges, &cape, ne + 1, sizeof *edges)) {
                    st = SV_ERR_NOMEM;
                    break;
                }
                edges[ne++] = (xedge_t){u, id, L->sites[s].id, 0, 0};
            }
        }
        if (st) break;
    }
    free(next);
    free(prev);
    if (st == SV_ERR_NOMEM) goto nomem;
    if (st) goto done;
    st = xedges_dfa(S.n, edges, ne, final, lim, out, err);
    goto done;
nomem:
    st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
done:
    if (charged) sv_memacct_release(acct, charged);
    free(base);
    free(pof);
    free(sidx);
    free(E.text);
    free(E.tknown);
    free(edges);
    free(final);
    lists_free(&E.frames);
    free(E.depth);
    lists_free(&E.confs);
    free(E.set);
    lists_free(&S);
    return st;
}

/* One round: finds the parts with calls whose choice competes at their
 * state (the callee may start with a byte the state reads, or that another
 * call there starts with, or accepts the empty string) and determinizes
 * each again over configurations, its swap recorded under the DFA that
 * names it. *n: the parts redone. */
static sv_status expand_round(linker_t *L, swap_t **swaps, uint32_t *nswaps, uint32_t *capswaps,
                              const sv_fsm_limits_t *lim, bool root_only, int32_t keep, uint32_t *n,
                              sv_error_t *err) {
    *n = 0;
    uint32_t np = L->nparts, ns = L->nsites;
    uint32_t *soff = calloc((size_t)np + 1, sizeof *soff);
    uint8_t *mark = calloc(np, 1), *want = calloc(np, 1);
    uint64_t (*first)[4] = calloc(np, sizeof *first);
    sv_status st = SV_OK;
    if (!soff || !mark || !want || !first) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
        goto out;
    }
    for (uint32_t i = 0; i < ns; i++) soff[L->sites[i].part + 1]++;
    for (uint32_t p = 0; p < np; p++) soff[p + 1] += soff[p];
    for (uint32_t p = 0; p < np; p++)
        if (!raw_first(L, soff, p, mark, first)) goto out; /* check_choices says why */
    uint32_t nwant = 0;
    for (uint32_t i = 0, j; i < ns; i = j) {
        const site_t *x = &L->sites[i];
        for (j = i; j < ns && L->sites[j].part == x->part && L->sites[j].state == x->state;) j++;
        if (root_only && x->part) break;
        uint64_t own[4];
        text_set(L->parts[x->part], (int32_t)x->state, own);
        for (uint32_t k = i; k < j && !want[x->part]; k++) {
            const uint64_t *fk = first[L->sites[k].callee];
            bool clash = (keep >= 0 && L->sites[k].callee != (uint32_t)keep) || bmeet(own, fk) ||
                         L->parts[L->sites[k].callee]->accept[0];
            for (uint32_t m = i; m < j && !clash; m++)
                clash = L->sites[m].callee != L->sites[k].callee && bmeet(fk, first[L->sites[m].callee]);
            if (clash) want[x->part] = 1, nwant++;
        }
    }
    for (uint32_t p = 0; p < np && nwant; p++) {
        if (!want[p]) continue;
        sv_dfa_t *nd = NULL;
        if ((st = expand_part(L, p, (const uint64_t(*)[4])first, keep, lim, &nd, err))) goto out;
        uint32_t w = 0;
        while (w < *nswaps && (*swaps)[w].from != L->orig[p]) w++;
        if (w == *nswaps) {
            if (!sv_grow((void **)swaps, capswaps, w + 1, sizeof **swaps)) {
                sv_dfa_destroy(nd);
                st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
                goto out;
            }
            (*swaps)[w] = (swap_t){L->orig[p], NULL};
            (*nswaps)++;
        }
        /* the other parts of this round still read the old DFA: keep it
         * until the round ends */
        sv_dfa_t *old = (*swaps)[w].to;
        (*swaps)[w].to = nd;
        (*n)++;
        if (old) {
            if (!sv_grow((void **)swaps, capswaps, *nswaps + 1, sizeof **swaps)) {
                sv_dfa_destroy(old);
                st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
                goto out;
            }
            (*swaps)[(*nswaps)++] = (swap_t){NULL, old}; /* freed with the rest */
        }
    }
out:
    free(soff);
    free(mark);
    free(want);
    free(first);
    return st;
}

sv_status sv_program_link(const sv_dfa_t *root, sv_call_resolve_fn resolve, void *ctx, const sv_fsm_limits_t *lim,
                          sv_dfa_t **out, sv_error_t *err) {
    return sv_program_link_ks(root, resolve, ctx, NULL, 0, lim, out, err);
}

/* The program's forced chains (sv_dfa_analyze_forced) from its parts'
 * forced bytes instead of a scan of every linked row: a part's state moves
 * on a single byte in the program exactly where it does in the part,
 * unless that byte is a call marker's (the program has a call there, or
 * the state is on a marker path the linker dropped), or a marker byte
 * shares a class some state moves on with a byte of the program (then the
 * part counted the marker; such a part is scanned). */
static sv_status forced_from_parts(sv_dfa_t *d, const uint32_t *base, const linker_t *L, sv_error_t *err) {
    if (d->ks) return sv_dfa_analyze(d, err); /* ks_build gave guard markers other rows */
    int16_t *fb = malloc(((size_t)d->nstates + 1) * sizeof *fb);
    if (!fb) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
    uint32_t class_size[256] = {0};
    for (int b = 0; b < 256; b++) class_size[d->classes[b]]++;
    for (uint32_t p = 0; p < L->nparts; p++) {
        const sv_dfa_t *q = L->parts[p];
        bool marker[256] = {false}, mixed = !q->forced_len;
        for (int m = SV_CALL_DIGIT0; m < 256; m++) marker[q->classes[m]] = true;
        for (int b = 0; b < SV_CALL_DIGIT0 && !mixed; b++) {
            uint32_t c = q->classes[b];
            if (!marker[c]) continue;
            marker[c] = false; /* a column where no state moves changes no count */
            for (uint32_t s = 0; s < q->nstates && !mixed; s++) mixed = q->trans[(size_t)s * q->nclasses + c] >= 0;
        }
        for (uint32_t s = 0; s < q->nstates; s++) {
            uint32_t x = base[p] + s;
            int b = -1;
            if (mixed) {
                b = sv_dfa_forced_byte(d, x, class_size);
            } else if (q->forced_len[s] && d->call_off[x] == d->call_off[x + 1]) {
                b = q->forced_buf[q->forced_off[s]];
                if (b >= SV_CALL_DIGIT0) b = -1;
            }
            fb[x] = (int16_t)b;
        }
    }
    sv_status st = sv_dfa_analyze_forced(d, fb, err);
    free(fb);
    return st;
}

sv_status sv_program_link_ks(const sv_dfa_t *root, sv_call_resolve_fn resolve, void *ctx, const sv_kcond_t *conds,
                             uint32_t nconds, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    *out = NULL;
    linker_t L = {0};
    sv_dfa_t *d = NULL;
    uint32_t *base = NULL;
    edges_t E = {0};
    swap_t *swaps = NULL;
    uint32_t nswaps = 0, capswaps = 0;
    sv_status st;
    uint32_t idx;
    for (uint32_t round = 0;; round++) {
        L.swaps = swaps;
        L.nswaps = nswaps;
        if ((st = add_part(&L, root, &idx, err))) goto fail;
        for (uint32_t p = 0; p < L.nparts; p++)
            if ((st = scan_part(&L, p, resolve, ctx, err))) goto fail;
        if (round == EXPAND_ROUNDS) break;
        uint32_t n;
        st = expand_round(&L, &swaps, &nswaps, &capswaps, lim, false, -1, &n, err);
        /* out of a budget: check_choices refuses what is left */
        if (st == SV_ERR_BUDGET) break;
        if (st) goto fail;
        if (!n) break;
        linker_free(&L);
    }
    base = malloc(((size_t)L.nparts + 1) * sizeof *base);
    if (!base) goto nomem;
    uint64_t total = 0;
    for (uint32_t p = 0; p < L.nparts; p++) base[p] = (uint32_t)total, total += L.parts[p]->nstates;
    if (lim && total > lim->max_dfa_states) {
        st = sv_error_set(err, SV_ERR_BUDGET, -1, "the constraint's parts need more than %u DFA states",
                          lim->max_dfa_states);
        goto fail;
    }
    base[L.nparts] = (uint32_t)total;
    d = calloc(1, sizeof *d);
    if (!d) goto nomem;
    d->nstates = (uint32_t)total;
    d->nparts = L.nparts;
    d->root_states = L.parts[0]->nstates; /* the root, or its expansion */
    /* Byte classes: the common refinement of the parts' classes, one part
     * at a time (a byte's class so far and its class in the part name its
     * class after the part: an open-addressing table of those pairs, reset
     * per part), then numbered by first byte; the marker bytes form one
     * class with no moves. */
    {
        uint16_t cls[256] = {0};
        for (uint32_t p = 0; p < L.nparts; p++) {
            const uint8_t *pc = L.parts[p]->classes;
            int32_t slot_key[512];
            uint16_t slot_val[512], nn = 0;
            for (int i = 0; i < 512; i++) slot_key[i] = -1;
            for (int b = 0; b < SV_CALL_DIGIT0; b++) {
                int32_t key = (int32_t)cls[b] << 8 | pc[b];
                uint32_t h = ((uint32_t)key * 2654435761u) >> 23; /* 9 bits */
                while (slot_key[h] >= 0 && slot_key[h] != key) h = (h + 1) & 511;
                if (slot_key[h] < 0) slot_key[h] = key, slot_val[h] = nn++;
                cls[b] = slot_val[h];
            }
        }
        uint8_t rep[256];
        int32_t id[256];
        for (int i = 0; i < 256; i++) id[i] = -1;
        uint32_t nc = 0;
        int marker_class = -1;
        for (int b = 0; b < 256; b++) {
            if (b >= SV_CALL_DIGIT0) {
                if (marker_class < 0) marker_class = (int)nc, rep[nc++] = (uint8_t)b;
                d->classes[b] = (uint8_t)marker_class;
                continue;
            }
            if (id[cls[b]] < 0) id[cls[b]] = (int32_t)nc, rep[nc++] = (uint8_t)b;
            d->classes[b] = (uint8_t)id[cls[b]];
        }
        d->nclasses = nc;
        for (uint32_t c = 0; c < nc; c++) d->class_rep[c] = rep[c];
    }
    uint32_t nc = d->nclasses;
    d->trans = sv_big_table((size_t)total * nc * sizeof *d->trans);
    d->accept = calloc(total ? total : 1, 1);
    d->call_off = calloc(total + 1, sizeof *d->call_off);
    d->calls = malloc(((size_t)L.nsites + 1) * sizeof *d->calls);
    if (!d->trans || !d->accept || !d->call_off || !d->calls) goto nomem;
    const uint8_t kq = d->classes['"'];
    for (uint32_t p = 0; p < L.nparts; p++) {
        const sv_dfa_t *q = L.parts[p];
        /* Rows start dead, and each of the part's live moves is written
         * into the program's classes it stands for (pc[po[j] .. po[j + 1])
         * for the part's class j): most rows hold one move or a few
         * (a key's bytes), so the table costs about its memset. The moves
         * are kept reversed for the distances (edges_t). */
        uint16_t po[257] = {0};
        uint8_t pc[256];
        for (uint32_t c = 0; c < nc; c++)
            if (d->class_rep[c] < SV_CALL_DIGIT0) po[q->classes[d->class_rep[c]] + 1]++;
        for (uint32_t j = 0; j < q->nclasses; j++) po[j + 1] += po[j];
        {
            uint16_t at[256];
            memcpy(at, po, sizeof at);
            for (uint32_t c = 0; c < nc; c++)
                if (d->class_rep[c] < SV_CALL_DIGIT0) pc[at[q->classes[d->class_rep[c]]]++] = (uint8_t)c;
        }
        bool qonly[256];
        for (uint32_t j = 0; j < q->nclasses; j++) qonly[j] = po[j + 1] - po[j] == 1 && pc[po[j]] == kq;
        for (uint32_t s = 0; s < q->nstates; s++) {
            int32_t *row = d->trans + (size_t)(base[p] + s) * nc;
            const int32_t *qrow = q->trans + (size_t)s * q->nclasses;
            memset(row, 0xFF, nc * sizeof *row); /* SV_DFA_DEAD */
            int32_t last = -1;
            bool lastq = false;
            for (uint32_t j = 0; j < q->nclasses; j++) {
                if (j + 8 <= q->nclasses && sv_dead_run8(qrow + j)) { j += 7; continue; }
                if (qrow[j] < 0 || po[j + 1] == po[j]) continue;
                int32_t t = (int32_t)(base[p] + (uint32_t)qrow[j]);
                for (uint32_t i = po[j]; i < po[j + 1]; i++) row[pc[i]] = t;
                if (t == last && qonly[j] == lastq) continue;
                last = t, lastq = qonly[j];
                if (E.n == E.cap && !sv_grow((void **)&E.v, &E.cap, E.n + 1, sizeof *E.v)) goto nomem;
                E.v[E.n++] = (uint64_t)(uint32_t)t << 32 | (base[p] + s) | (lastq ? SRC_QUOTE : 0);
            }
            d->accept[base[p] + s] = q->accept[s];
        }
    }
    /* Calls, grouped by caller state (sites are in part, state order). */
    for (uint32_t i = 0; i < L.nsites; i++) d->call_off[base[L.sites[i].part] + L.sites[i].state + 1]++;
    for (uint32_t s = 0; s < total; s++) d->call_off[s + 1] += d->call_off[s];
    {
        uint32_t *fill = calloc(total ? total : 1, sizeof *fill);
        if (!fill) goto nomem;
        for (uint32_t i = 0; i < L.nsites; i++) {
            uint32_t s = base[L.sites[i].part] + L.sites[i].state;
            d->calls[d->call_off[s] + fill[s]++] =
                (sv_dfa_call_t){(int32_t)base[L.sites[i].callee], (int32_t)(base[L.sites[i].part] + L.sites[i].ret), {0}};
        }
        free(fill);
    }
    d->ncalls = L.nsites;
    if (L.nanns && (st = ks_build(d, base, &L, &E, conds, nconds, err))) goto fail;
    if ((st = check_choices(d, base, err))) goto fail;
    if ((st = distances(d, base, &E, err))) goto fail;
    if (d->ks && !ks_bounds(d)) goto nomem;
    if (d->dist[0] == UINT32_MAX) {
        st = sv_error_set(err, SV_ERR_EMPTY, -1, "the constraint matches no string");
        goto fail;
    }
    if ((st = forced_from_parts(d, base, &L, err)) || (st = sv_dfa_charge(d, err))) goto fail;
    *out = d;
    d = NULL;
    goto done;
nomem:
    st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory linking the constraint");
fail:
    sv_dfa_destroy(d);
done:
    free(base);
    free(E.v);
    linker_free(&L);
    for (uint32_t i = 0; i < nswaps; i++) sv_dfa_destroy(swaps[i].to);
    free(swaps);
    return st;
}

sv_status sv_program_expand(const sv_dfa_t *d, sv_call_resolve_fn resolve, void *ctx, const sv_dfa_t *keep,
                            const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    *out = NULL;
    linker_t L = {0};
    swap_t *swaps = NULL;
    uint32_t nswaps = 0, capswaps = 0, idx, n = 0;
    sv_status st = add_part(&L, d, &idx, err);
    for (uint32_t p = 0; p < L.nparts && !st; p++) st = scan_part(&L, p, resolve, ctx, err);
    int32_t k = -1; /* with keep: its part, or one no part has (every call expanded) */
    if (keep) {
        k = (int32_t)L.nparts;
        for (uint32_t p = 0; p < L.nparts; p++)
            if (L.orig[p] == keep) k = (int32_t)p;
    }
    if (!st) st = expand_round(&L, &swaps, &nswaps, &capswaps, lim, true, k, &n, err);
    for (uint32_t i = 0; i < nswaps; i++) {
        if (!st && swaps[i].from == d) *out = swaps[i].to;
        else sv_dfa_destroy(swaps[i].to);
    }
    free(swaps);
    linker_free(&L);
    return st;
}

/* ---- walks with a stack ------------------------------------------------------- */

#define STACK_MAX (1u << 20)

/* Return states, and with key sets the set each frame's part had. */
typedef struct {
    int32_t *v;
    uint64_t *sets;
    uint32_t n, cap, capsets;
} istack_t;

static bool ipush(istack_t *s, int32_t x, uint64_t set, bool ks) {
    if (s->n >= STACK_MAX || !sv_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) return false;
    if (ks) {
        if (!sv_grow((void **)&s->sets, &s->capsets, s->n + 1, sizeof *s->sets)) return false;
        s->sets[s->n] = set;
    }
    s->v[s->n++] = x;
    return true;
}

static void ifree(istack_t *s) {
    free(s->v);
    free(s->sets);
}

/* One byte: the direct move (its guard passed), else a call, else a return. */
static int32_t step(const sv_dfa_t *d, int32_t x, uint8_t b, istack_t *stk, uint64_t *set) {
    bool ks = d->ks != NULL;
    for (;;) {
        int32_t t = sv_dfa_next(d, x, b);
        if (t >= 0) return ks && (d->ks->flags[t] & KS_F_CHECK) && !sv_ks_enter(d, t, set) ? -1 : t;
        const sv_dfa_call_t *c = sv_dfa_call_for(d, x, b);
        if (c) {
            if (!ipush(stk, c->ret, *set, ks)) return -1;
            x = c->callee;
            *set = 0;
            continue;
        }
        if (d->accept[x] && stk->n) {
            x = stk->v[--stk->n];
            if (ks) *set = stk->sets[stk->n];
            continue;
        }
        return -1;
    }
}

/* Final with an empty stack after unwinding the returns that are left. */
static bool ends(const sv_dfa_t *d, int32_t x, istack_t *stk) {
    while (d->accept[x] && stk->n) x = stk->v[--stk->n];
    return d->accept[x] && !stk->n && (uint32_t)x < d->root_states;
}

/* Whether configuration (x, set) can still be completed. */
static inline bool alive(const sv_dfa_t *d, int32_t x, uint64_t set) { return !d->ks || sv_ks_viable(d, x, set); }

bool sv_program_viable(const sv_dfa_t *d, const uint8_t *s, size_t n) {
    if (!d->call_off) {
        int32_t q = 0;
        for (size_t i = 0; i < n && q >= 0; i++) q = sv_dfa_next(d, q, s[i]);
        return q >= 0;
    }
    istack_t stk = {0};
    int32_t x = 0;
    uint64_t set = 0;
    for (size_t i = 0; i < n && x >= 0; i++) x = step(d, x, s[i], &stk, &set);
    ifree(&stk);
    return x >= 0 && alive(d, x, set);
}

bool sv_program_matches(const sv_dfa_t *d, const uint8_t *s, size_t n) {
    istack_t stk = {0};
    int32_t x = 0;
    uint64_t set = 0;
    for (size_t i = 0; i < n && x >= 0; i++) x = step(d, x, s[i], &stk, &set);
    bool ok = x >= 0 && ends(d, x, &stk);
    ifree(&stk);
    return ok;
}

size_t sv_program_viable_prefix(const sv_dfa_t *d, const uint8_t *s, size_t n) {
    istack_t stk = {0};
    int32_t x = 0;
    uint64_t set = 0;
    size_t i = 0, ok = 0; /* ok: the longest prefix seen alive */
    for (; i < n; i++) {
        if ((x = step(d, x, s[i], &stk, &set)) < 0) break;
        if (alive(d, x, set)) ok = i + 1;
    }
    ifree(&stk);
    return d->ks ? ok : i;
}

/* Sampling a program with key sets: the choices the guards and the regions
 * allow, and past soft_len the shortest completion. */
static sv_status ks_sample(const sv_dfa_t *d, sv_rng_t *rng, uint32_t soft_len, uint8_t *buf, size_t cap, size_t *len) {
    istack_t stk = {0};
    int32_t x = 0;
    uint64_t set = 0;
    size_t n = 0;
    sv_status st = SV_OK;
    uint32_t opt[512];
    for (;;) {
        if (n >= soft_len) {
            /* the shortest completion, its stack top last */
            uint32_t room = cap - n > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)(cap - n);
            uint32_t m = sv_program_completion_ks(d, x, set, stk.v, stk.sets, stk.n, buf + n, room);
            if (m == UINT32_MAX) st = SV_ERR_BUDGET;
            else n += m;
            break;
        }
        uint32_t no = 0;
        for (uint32_t c = 0; c < d->nclasses; c++) {
            int32_t t = d->trans[(size_t)x * d->nclasses + c];
            if (t < 0) continue;
            uint64_t s2 = set;
            if ((d->ks->flags[t] & KS_F_CHECK) && (!sv_ks_enter(d, t, &s2) || !sv_ks_viable(d, t, s2))) continue;
            opt[no++] = c;
        }
        for (uint32_t i = d->call_off[x]; i < d->call_off[x + 1]; i++) opt[no++] = 256 + (i - d->call_off[x]);
        if (d->accept[x]) {
            if (!stk.n) {
                if (no == 0 || sv_rng_below(rng, 4) == 0) break;
            } else if (no == 0 || sv_rng_below(rng, 4) == 0) {
                x = stk.v[--stk.n];
                set = stk.sets[stk.n];
                continue;
            }
        }
        if (no == 0) { st = SV_ERR_ARG; break; } /* cannot happen: the configuration was alive */
        uint32_t o = opt[sv_rng_below(rng, no)];
        if (o >= 256) {
            const sv_dfa_call_t *c = &d->calls[d->call_off[x] + (o - 256)];
            if (!ipush(&stk, c->ret, set, true)) { st = SV_ERR_BUDGET; break; }
            x = c->callee;
            set = 0;
            continue;
        }
        uint8_t byte = sv_dfa_class_byte(d, o, rng);
        if (n == cap) { st = SV_ERR_BUDGET; break; }
        buf[n++] = (uint8_t)byte;
        x = sv_dfa_next(d, x, (uint8_t)byte);
        if (d->ks->flags[x] & KS_F_CHECK) sv_ks_enter(d, x, &set);
    }
    ifree(&stk);
    *len = n;
    return st;
}

sv_status sv_program_sample(const sv_dfa_t *d, sv_rng_t *rng, uint32_t soft_len, uint8_t *buf, size_t cap,
                            size_t *len) {
    if (d->ks) return ks_sample(d, rng, soft_len, buf, cap, len);
    istack_t stk = {0};
    uint64_t below = 0; /* sum of the dist of the return states on the stack */
    int32_t x = 0;
    size_t n = 0;
    sv_status st = SV_OK;
    uint32_t opt[512];
    for (;;) {
        uint64_t here = (uint64_t)d->dist[x] + below;
        /* the choices: 0..nclasses-1 a byte class, nclasses + i call i, and
         * 2 * 256 a return */
        uint32_t no = 0;
        for (uint32_t c = 0; c < d->nclasses; c++) {
            int32_t t = d->trans[(size_t)x * d->nclasses + c];
            if (t < 0) continue;
            if (n >= soft_len && (uint64_t)d->dist[t] + below >= here) continue;
            opt[no++] = c;
        }
        for (uint32_t i = d->call_off[x]; i < d->call_off[x + 1]; i++) {
            const sv_dfa_call_t *c = &d->calls[i];
            uint64_t via = (uint64_t)d->dist[c->callee] + d->dist[c->ret] + below;
            if (n >= soft_len && via > here) continue; /* only a call on a shortest way */
            opt[no++] = 256 + (i - d->call_off[x]);
        }
        if (d->accept[x]) {
            if (!stk.n) {
                if (n >= soft_len || no == 0 || sv_rng_below(rng, 4) == 0) break;
            } else if (no == 0 || n >= soft_len || sv_rng_below(rng, 4) == 0) {
                x = stk.v[--stk.n];
                below -= d->dist[x];
                continue;
            }
        }
        if (no == 0) { st = SV_ERR_ARG; break; } /* cannot happen in a trimmed program */
        uint32_t o = opt[sv_rng_below(rng, no)];
        if (o >= 256) {
            const sv_dfa_call_t *c = &d->calls[d->call_off[x] + (o - 256)];
            if (!ipush(&stk, c->ret, 0, false)) { st = SV_ERR_BUDGET; break; }
            below += d->dist[c->ret];
            x = c->callee;
            continue;
        }
        uint8_t byte = sv_dfa_class_byte(d, o, rng);
        if (n == cap) { st = SV_ERR_BUDGET; break; }
        buf[n++] = (uint8_t)byte;
        x = sv_dfa_next(d, x, (uint8_t)byte);
    }
    ifree(&stk);
    *len = n;
    return st;
}

static inline bool put(uint8_t *buf, uint32_t cap, uint32_t *n, uint8_t b) {
    if (*n >= cap) return false;
    buf[(*n)++] = b;
    return true;
}

/* The shortest completion of the part from x with set (calls expanded),
 * appended at buf[*n]; each byte takes one off sv_ks_cost's distance. */
static bool part_completion(const sv_dfa_t *d, int32_t x, uint64_t set, uint8_t *buf, uint32_t cap, uint32_t *n,
                            int depth) {
    if (depth > 64) return false;
    const sv_keysets_t *ks = d->ks;
    while (!d->accept[x]) {
        const int32_t *row = d->trans + (size_t)x * d->nclasses;
        const sv_kobj_t *o = ks && ks->obj[x] >= 0 ? &ks->objs[ks->obj[x]] : NULL;
        if (o && x == o->start) {
            if (!put(buf, cap, n, '{')) return false;
            x = o->ropen;
            continue;
        }
        if (o && (ks->flags[x] & KS_F_REGION)) {
            /* the cheapest end the set allows, by the search's path */
            rscratch_t r;
            int32_t ex = -1, ef = -1;
            uint8_t ec = 0;
            bool ok = rscratch_get(&r, o->nregion) && region_best(d, o, x, set, &r, &ex, &ef, &ec) != UINT64_MAX;
            uint32_t len = ok ? r.lvl[ks->rid[ef]] + 1 : 0;
            if (ok && *n + len > cap) ok = false;
            if (ok) {
                uint32_t at = *n + len;
                buf[--at] = d->class_rep[ec];
                for (int32_t u = ef; u != x; u = r.par[ks->rid[u]]) buf[--at] = d->class_rep[r.pcls[ks->rid[u]]];
                *n += len;
                sv_ks_enter(d, ex, &set);
                x = ex;
            }
            rscratch_free(&r);
            if (!ok) return false;
            continue;
        }
        int32_t best = -1;
        uint32_t bc = 0;
        for (uint32_t c = 0; c < d->nclasses; c++) {
            int32_t y = row[c];
            if (y < 0 || d->dist[y] == UINT32_MAX || d->dist[y] + 1 != d->dist[x]) continue;
            if (o && (ks->flags[y] & KS_F_CHECK)) {
                uint64_t s2 = set;
                if (!sv_ks_enter(d, y, &s2)) continue; /* a close with required keys missing */
            }
            best = y;
            bc = c;
            break;
        }
        if (best >= 0) {
            if (!put(buf, cap, n, d->class_rep[bc])) return false;
            if (o && (ks->flags[best] & KS_F_CHECK)) sv_ks_enter(d, best, &set);
            x = best;
            continue;
        }
        const sv_dfa_call_t *use = NULL;
        for (uint32_t i = d->call_off[x]; i < d->call_off[x + 1]; i++) {
            const sv_dfa_call_t *c = &d->calls[i];
            uint64_t w = (uint64_t)d->dist[c->callee] + (ks ? ks->xs[c->callee] : 0);
            if (w + d->dist[c->ret] == d->dist[x]) { use = c; break; }
        }
        if (use) {
            if (!part_completion(d, use->callee, 0, buf, cap, n, depth + 1)) return false;
            x = use->ret;
            continue;
        }
        /* an object's '}' waits for required keys: ',' and the next one */
        int32_t y = o ? row[d->classes[',']] : -1;
        if (y < 0 || !put(buf, cap, n, ',')) return false;
        x = y;
    }
    return true;
}

uint32_t sv_program_completion(const sv_dfa_t *d, int32_t x, const int32_t *ret, uint32_t n, uint8_t *buf,
                               uint32_t cap) {
    return sv_program_completion_ks(d, x, 0, ret, NULL, n, buf, cap);
}

uint32_t sv_program_completion_ks(const sv_dfa_t *d, int32_t x, uint64_t set, const int32_t *ret,
                                  const uint64_t *sets, uint32_t n, uint8_t *buf, uint32_t cap) {
    uint32_t len = 0;
    if (!part_completion(d, x, set, buf, cap, &len, 0)) return UINT32_MAX;
    for (uint32_t i = n; i-- > 0;)
        if (!part_completion(d, ret[i], sets ? sets[i] : 0, buf, cap, &len, 0)) return UINT32_MAX;
    return len;
}
