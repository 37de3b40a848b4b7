/* token_config.c — masks of a program's configurations (the walks and the
 * mask memo of token_index.c and token_memo.c, through
 * token_index_internal.h).
 *
 * A program (program.c) is walked with a stack of return states, so the
 * state a matcher is in is a configuration: a DFA state and a stack. The
 * index numbers configurations as they are met (stacks are hash-consed
 * frames: parent + return state), and that number is the "state" the
 * matcher, the engine, the prefetcher and the device mask table see.
 *
 * The mask of a configuration (s, stack) is the union of
 *   - the tokens that stay in s's part: the memoized plain walk of s
 *     (pure_mask), shared by every stack;
 *   - the tokens that cross a part boundary (they take a call, or a return
 *     when the part ends): a walk of the trie that follows the DFA from s
 *     and, where a direct move dies, calls or returns. It reads the stack
 *     only as deep as its tokens pop, so it is memoized per (s, whitespace
 *     run, the return states it read): another stack that agrees on those
 *     gets the same tokens. Subtrees whose bytes all loop on a state with no
 *     call and no end (string content) cannot reach a boundary and are
 *     skipped;
 *   - the end-of-generation tokens when the configuration can end: each
 *     frame's part is at a final state, down to a final state of the root.
 *
 * Everything about configurations runs under the index's lock: they are
 * created by sv_token_index_next, which the engine thread and the
 * prefetcher both call. */

#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "fsm/internal/dfa_internal.h"
#include "fsm/internal/token_index_internal.h"

#define CFG_MAX (1u << 22)      /* configurations per index */
#define FRAME_MAX (1u << 22)    /* stack frames per index */
#define CFG_POP_MAX 64          /* calls/returns taken for one byte */

typedef struct {
    int32_t parent, ret;   /* parent frame (-1 for the empty stack's), return state */
    uint32_t depth;
    uint64_t sum;          /* the walk's dist[] of every return state on the stack (ix->walk:
                              with key sets, bounds over every set) */
    uint64_t set;          /* with key sets: the set of ret's object (0 elsewhere) */
    uint64_t esum;         /* with key sets: the true distance of every return state (sv_ks_cost) */
} frame_t;

typedef struct {
    int32_t state, frame;  /* its masks: cfgtab_t.masks[v * nbuckets + run] */
    uint64_t set;          /* with key sets: the keys state's object has written */
} config_t;

/* A boundary walk's result, shared by stacks that agree on what it read. */
typedef struct ctx_entry {     /* listed under its (state, ws) in cfgtab_t.ctx */
    uint64_t set0;            /* with key sets: the configuration's own set */
    uint64_t *sets;           /* with key sets: (depth_read) the sets of the frames read */
    uint32_t depth_read;      /* return states read from the top */
    bool bottom;              /* it reached the stack's bottom (so the depth must be equal) */
    int32_t *rets;            /* (depth_read) top first */
    const uint32_t *mask;     /* boundary tokens only */
    int64_t maxd_rel;         /* largest successor distance minus the stack's sum */
    bool any;                 /* some token crosses */
    struct ctx_entry *next;
} ctx_entry_t;

typedef struct cfgtab {
    frame_t *frames;
    uint32_t nframes, capframes;
    int32_t *fhash;           /* open addressing over frames */
    uint32_t fhcap;
    config_t *cfg;
    uint32_t ncfg, capcfg;
    int32_t *chash;
    uint32_t chcap;
    const uint32_t **masks;   /* (capcfg * nbuckets) */
    uint32_t *maxd;           /* (capcfg * nbuckets) */
    ctx_entry_t **ctx;        /* (nctx = nstates * nbuckets) lists */
    size_t nctx;
    /* scratch for walks */
    int32_t *rets;            /* the real stack, top first */
    uint32_t caprets;
    uint64_t *sets;           /* with key sets: the sets of its frames, top first */
    uint32_t capsets;
    int32_t *lret, *lpar;     /* local frames pushed during a walk */
    uint32_t nl, capl, caplp;
    uint64_t *lset;           /* with key sets: the set each local frame saved */
    uint32_t capls;
    uint32_t *bits;           /* words */
    /* Per state, a lower bound on the bytes a token needs from it to cross
     * a boundary (BDIST_INF: never): the program's (program.c), or built on
     * the first boundary walk (then owned: bdist_own). */
    uint16_t *bdist;
    bool bdist_own;
    /* Per state, whether every path of direct moves from it to a boundary
     * takes a byte of the class of '"' (string content, keys: only the
     * closing quote leaves them), and the bytes of that class; built with
     * bdist. */
    uint8_t *qcrit;
    uint64_t qbytes[4];
    bool qonly; /* the quote is alone in its class (the tails' quote flags then suffice) */
} cfgtab_t;

#define BDIST_INF SV_BDIST_INF
#define SRC_QUOTE 0x80000000u /* build_bdist: a move on the quote's class */


static inline uint64_t mix2(uint64_t a, uint64_t b) {
    uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static bool rehash(int32_t **tab, uint32_t *cap, uint32_t n, uint64_t (*key)(const cfgtab_t *, int32_t), const cfgtab_t *t) {
    if (2 * (n + 1) <= *cap) return true;
    uint32_t nc = *cap ? *cap * 2 : 1024;
    int32_t *nt = malloc((size_t)nc * sizeof *nt);
    if (!nt) return false;
    memset(nt, 0xff, (size_t)nc * sizeof *nt);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = (uint32_t)key(t, (int32_t)i) & (nc - 1);
        while (nt[p] >= 0) p = (p + 1) & (nc - 1);
        nt[p] = (int32_t)i;
    }
    free(*tab);
    *tab = nt;
    *cap = nc;
    return true;
}

static uint64_t fhash_of(int32_t parent, int32_t ret, uint64_t set) {
    return mix2((uint64_t)(uint32_t)parent, (uint64_t)(uint32_t)ret ^ (set * 0xff51afd7ed558ccdull));
}
static uint64_t chash_of(int32_t state, int32_t frame, uint64_t set) {
    return mix2((uint64_t)(uint32_t)state, (uint64_t)(uint32_t)frame ^ (set * 0xff51afd7ed558ccdull));
}
static uint64_t fkey(const cfgtab_t *t, int32_t i) { return fhash_of(t->frames[i].parent, t->frames[i].ret, t->frames[i].set); }
static uint64_t ckey(const cfgtab_t *t, int32_t i) { return chash_of(t->cfg[i].state, t->cfg[i].frame, t->cfg[i].set); }

/* The frame (parent, ret, set), made if new; -1 past the budget. */
static int32_t frame_get(const sv_token_index_t *ix, int32_t parent, int32_t ret, uint64_t set) {
    cfgtab_t *t = ix->cfg;
    uint64_t h = fhash_of(parent, ret, set);
    if (t->fhcap)
        for (uint32_t p = (uint32_t)h & (t->fhcap - 1);; p = (p + 1) & (t->fhcap - 1)) {
            int32_t i = t->fhash[p];
            if (i < 0) break;
            if (t->frames[i].parent == parent && t->frames[i].ret == ret && t->frames[i].set == set) return i;
        }
    if (t->nframes >= FRAME_MAX || !sv_grow((void **)&t->frames, &t->capframes, t->nframes + 1, sizeof *t->frames) ||
        !rehash(&t->fhash, &t->fhcap, t->nframes, fkey, t))
        return -1;
    int32_t i = (int32_t)t->nframes++;
    const frame_t *pf = parent >= 0 ? &t->frames[parent] : NULL;
    uint64_t esum = ix->dfa->ks ? (pf ? pf->esum : 0) + sv_ks_cost(ix->dfa, ret, set) : 0;
    t->frames[i] = (frame_t){parent, ret, pf ? pf->depth + 1 : 1, (pf ? pf->sum : 0) + ix->walk->dist[ret], set, esum};
    uint32_t p = (uint32_t)h & (t->fhcap - 1);
    while (t->fhash[p] >= 0) p = (p + 1) & (t->fhcap - 1);
    t->fhash[p] = i;
    return i;
}

/* The configuration (state, frame, set), made if new; -1 past the budget. */
static int32_t cfg_get(const sv_token_index_t *ix, int32_t state, int32_t frame, uint64_t set) {
    cfgtab_t *t = ix->cfg;
    uint64_t h = chash_of(state, frame, set);
    if (t->chcap)
        for (uint32_t p = (uint32_t)h & (t->chcap - 1);; p = (p + 1) & (t->chcap - 1)) {
            int32_t i = t->chash[p];
            if (i < 0) break;
            if (t->cfg[i].state == state && t->cfg[i].frame == frame && t->cfg[i].set == set) return i;
        }
    uint32_t oldcap = t->capcfg;
    if (t->ncfg >= CFG_MAX || !sv_grow((void **)&t->cfg, &t->capcfg, t->ncfg + 1, sizeof *t->cfg) ||
        !rehash(&t->chash, &t->chcap, t->ncfg, ckey, t))
        return -1;
    if (t->capcfg != oldcap) {
        size_t nb = ix->nbuckets;
        const uint32_t **m = realloc(t->masks, (size_t)t->capcfg * nb * sizeof *m);
        if (!m) return -1;
        t->masks = m;
        uint32_t *md = realloc(t->maxd, (size_t)t->capcfg * nb * sizeof *md);
        if (!md) return -1;
        t->maxd = md;
        memset(t->masks + (size_t)oldcap * nb, 0, (size_t)(t->capcfg - oldcap) * nb * sizeof *m);
    }
    int32_t i = (int32_t)t->ncfg++;
    t->cfg[i] = (config_t){state, frame, set};
    uint32_t p = (uint32_t)h & (t->chcap - 1);
    while (t->chash[p] >= 0) p = (p + 1) & (t->chcap - 1);
    t->chash[p] = i;
    return i;
}

sv_status sv_ti_cfg_create(sv_token_index_t *ix) {
    cfgtab_t *t = calloc(1, sizeof *t);
    if (!t) return SV_ERR_NOMEM;
    ix->cfg = t;
    t->nctx = (size_t)ix->dfa->nstates * ix->nbuckets;
    t->ctx = calloc(t->nctx, sizeof *t->ctx);
    t->bits = malloc((size_t)ix->ts->words * sizeof *t->bits);
    if (!t->ctx || !t->bits) return SV_ERR_NOMEM;
    /* configuration 0: the start with an empty stack */
    return cfg_get(ix, 0, -1, 0) == 0 ? SV_OK : SV_ERR_NOMEM;
}

void sv_ti_cfg_destroy(struct cfgtab *t) {
    if (!t) return;
    free(t->frames);
    free(t->fhash);
    free(t->cfg);
    free(t->chash);
    free(t->masks);
    free(t->maxd);
    free(t->rets);
    free(t->sets);
    free(t->lret);
    free(t->lpar);
    free(t->lset);
    free(t->bits);
    if (t->bdist_own) {
        free(t->bdist);
        free(t->qcrit);
    }
    for (size_t i = 0; t->ctx && i < t->nctx; i++)
        for (ctx_entry_t *e = t->ctx[i], *nx; e; e = nx) {
            nx = e->next;
            free(e->rets);
            free(e->sets);
            free(e);
        }
    free(t->ctx);
    free(t);
}

/* The stack of configuration v as return states, top first, in t->rets
 * (with key sets, their sets in t->sets). */
static uint32_t cfg_stack(const sv_token_index_t *ix, int32_t v) {
    cfgtab_t *t = ix->cfg;
    int32_t f = t->cfg[v].frame;
    uint32_t n = f >= 0 ? t->frames[f].depth : 0;
    if (!sv_grow((void **)&t->rets, &t->caprets, n + 1, sizeof *t->rets)) return UINT32_MAX;
    if (ix->dfa->ks && !sv_grow((void **)&t->sets, &t->capsets, n + 1, sizeof *t->sets)) return UINT32_MAX;
    for (uint32_t i = 0; f >= 0; f = t->frames[f].parent, i++) {
        t->rets[i] = t->frames[f].ret;
        if (ix->dfa->ks) t->sets[i] = t->frames[f].set;
    }
    return n;
}

/* A walk cursor: the DFA state, the local frames pushed (lt: top, -1 none),
 * the real frames popped, and dist[] of the local frames minus that of the
 * popped real ones. */
typedef struct {
    int32_t x, lt;
    uint32_t popped;
    int64_t rel;
    bool crossed;
    uint64_t set;  /* with key sets: x's object's keys */
} cur_t;

/* One byte from cursor c over the real stack rets[0..depth) (top first).
 * *read: the most real frames popped; *bottom: a pop found the stack empty. */
static bool cstep(const sv_token_index_t *ix, cur_t *c, uint8_t b, uint32_t depth, uint32_t *read, bool *bottom) {
    const sv_dfa_t *d = ix->dfa;
    const uint32_t *wd = ix->walk->dist;
    cfgtab_t *t = ix->cfg;
    for (int k = 0; k < CFG_POP_MAX; k++) {
        int32_t nx = d->trans[(size_t)c->x * d->nclasses + d->classes[b]];
        if (nx >= 0) {
            if (d->ks && (d->ks->flags[nx] & KS_F_CHECK)) { /* a guard: the boundary walk's to take */
                if (!sv_ks_enter(d, nx, &c->set)) return false;
                c->crossed = true;
            }
            c->x = nx;
            return true;
        }
        const sv_dfa_call_t *call = sv_dfa_call_for(d, c->x, b);
        if (call) {
            if (!sv_grow((void **)&t->lret, &t->capl, t->nl + 1, sizeof *t->lret) ||
                !sv_grow((void **)&t->lpar, &t->caplp, t->nl + 1, sizeof *t->lpar) ||
                (d->ks && !sv_grow((void **)&t->lset, &t->capls, t->nl + 1, sizeof *t->lset)))
                return false;
            t->lret[t->nl] = call->ret;
            t->lpar[t->nl] = c->lt;
            if (d->ks) t->lset[t->nl] = c->set;
            c->lt = (int32_t)t->nl++;
            c->rel += wd[call->ret];
            c->x = call->callee;
            c->set = 0;
            c->crossed = true;
            continue;
        }
        if (!d->accept[c->x]) return false;
        if (c->lt >= 0) {
            c->x = t->lret[c->lt];
            if (d->ks) c->set = t->lset[c->lt];
            c->rel -= wd[c->x];
            c->lt = t->lpar[c->lt];
        } else {
            if (c->popped >= depth) { *bottom = true; return false; }
            if (d->ks) c->set = t->sets[c->popped];
            c->x = t->rets[c->popped++];
            c->rel -= wd[c->x];
            if (c->popped > *read) *read = c->popped;
        }
        c->crossed = true;
    }
    return false;
}

/* Whether a token that ends at cursor c leaves a configuration that can
 * still end (with key sets, not in a key's spelling no key it may write
 * finishes). */
static inline bool cur_ok(const sv_token_index_t *ix, const cur_t *c) {
    return !ix->dfa->ks || sv_ks_viable(ix->dfa, c->x, c->set);
}

/* Marks a crossing token whose end is dd (relative, as cur_t's rel) from
 * the end. */
static inline void cross_mark(const sv_token_index_t *ix, int32_t id, uint32_t run, int64_t dd, uint32_t *dst,
                              int64_t *maxd_rel, bool *any) {
    const uint32_t cap = ix->o.ws_cap;
    if (cap && !sv_ti_ws_ok(ix->ts, cap, run, id)) return;
    dst[id >> 5] |= 1u << (id & 31);
    *any = true;
    if (dd > *maxd_rel) *maxd_rel = dd;
}

static inline int64_t cur_dist(const sv_token_index_t *ix, const cur_t *c) {
    return (int64_t)ix->walk->dist[c->x] + c->rel;
}

/* The boundary walk over s0's tails (sv_ti_tails_t): each (first
 * character, tail) once, from c. A token whose first character leads s0 to
 * c and whose other characters loop there ends in c by direct moves, which
 * cstep always takes first, so it crosses nothing and is not walked at all.
 * With ch instead, tt is the chain's trie of (k, tail): the first k
 * characters take s0 to sk[k] by direct moves, and the tail is walked from
 * there. Without either, tt is a trie of whole tokens walked from s0 (the
 * token set's partial trie: tokens that start inside a character).
 * For string content that leaves about 3,300 of Llama 3's 128k tokens, in a
 * trie of under 2,000 nodes, where the main trie walk visited tens of
 * thousands of nodes whose subtrees hold some `"`. */
static void boundary_tails(sv_token_index_t *ix, const tail_trie_t *tt, const sv_ti_tails_t *tv,
                           const sv_ti_chain_t *ch, int32_t s0, uint64_t set0, uint32_t run, uint32_t depth,
                           uint32_t *dst, uint32_t *read, bool *bottom, int64_t *maxd_rel, bool *any) {
    cfgtab_t *t = ix->cfg;
    static _Thread_local cur_t cs[SV_TOKEN_SET_MAX_BYTES + 2];
    static _Thread_local uint32_t nls[SV_TOKEN_SET_MAX_BYTES + 2];
    cs[0] = (cur_t){s0, -1, 0, 0, false, set0};
    nls[0] = 0;
    for (uint32_t i = 0, n = tt->nnodes; i < n;) {
        const tail_node_t nd = tt->nodes[i];
        cur_t c;
        if (tv && nd.depth == 1) { /* the first character's label */
            uint8_t x = nd.byte;
            if (!(x < 0x80 ? (tv->first[x >> 6] >> (x & 63)) & 1 : tv->utf8_first)) {
                i = nd.skip;
                continue;
            }
            c = (cur_t){tv->c, -1, 0, 0, false, set0};
            t->nl = 0;
        } else if (ch && nd.depth == 1) { /* a count of chain characters */
            if (nd.byte > ch->nk) {
                i = nd.skip;
                continue;
            }
            c = (cur_t){ch->sk[nd.byte], -1, 0, 0, false, set0};
            t->nl = 0;
        } else {
            c = cs[nd.depth - 1];
            /* every way to a boundary takes a quote, and no string below has one */
            if (!c.crossed && !nd.quote && t->qonly && t->qcrit[c.x]) {
                i = nd.skip;
                continue;
            }
            t->nl = nls[nd.depth - 1];
            if (!cstep(ix, &c, nd.byte, depth, read, bottom)) {
                i = nd.skip;
                continue;
            }
        }
        if (c.crossed && cur_ok(ix, &c))
            for (uint32_t j = nd.tok_lo, e = nd.tok_lo + nd.tok_n; j < e; j++)
                cross_mark(ix, tt->ids[j], run, cur_dist(ix, &c), dst, maxd_rel, any);
        cs[nd.depth] = c;
        nls[nd.depth] = t->nl;
        i++;
    }
}

/* The bytes of the class of '"', and whether the quote is alone in it. */
static void quote_bytes(const sv_dfa_t *d, cfgtab_t *t) {
    uint8_t kq = d->classes['"'];
    memset(t->qbytes, 0, sizeof t->qbytes);
    for (int b = 0; b < 256; b++)
        if (d->classes[b] == kq) t->qbytes[b >> 6] |= 1ull << (b & 63);
    t->qonly = t->qbytes[0] == 1ull << '"' && !t->qbytes[1] && !t->qbytes[2] && !t->qbytes[3];
}

/* bdist: a crossing takes a byte with no direct move at a state with a
 * call on it or at an accepting one (cstep), so 1 there; elsewhere one
 * more than the nearest direct successor. A breadth-first search back from
 * those states over the direct moves. False when out of memory. */
/* Whether x has a move that a guard checks (with key sets): the walk's view
 * lacks it, and a token that takes it crosses. */
static bool guarded_from(const sv_token_index_t *ix, uint32_t x) {
    if (ix->walk == ix->dfa) return false;
    size_t k = ix->dfa->nclasses;
    return memcmp(ix->dfa->trans + x * k, ix->walk->trans + x * k, k * sizeof *ix->dfa->trans) != 0;
}

static bool build_bdist(sv_token_index_t *ix) {
    const sv_dfa_t *d = ix->walk;
    cfgtab_t *t = ix->cfg;
    if (d->bdist && d->qcrit) { /* found by the link */
        t->bdist = d->bdist;
        t->qcrit = d->qcrit;
        quote_bytes(d, t);
        return true;
    }
    uint32_t n = d->nstates, k = d->nclasses;
    uint16_t *bd = malloc((size_t)n * sizeof *bd);
    uint32_t *off = calloc((size_t)n + 1, sizeof *off), *src = NULL, *queue = malloc((size_t)n * sizeof *queue);
    bool ok = bd && off && queue;
    /* One scan of the table (the first mask's main cost): its live moves
     * as (target, source) pairs, a move on the quote's class marked by the
     * source's top bit (qcrit); then grouped by target. */
    uint64_t *ed = NULL;
    size_t E = 0, cap = 0;
    uint32_t kq = (uint32_t)d->classes['"'];
    for (uint32_t x = 0; ok && x < n; x++) {
        const int32_t *row = d->trans + (size_t)x * k;
        for (uint32_t c = 0; c < k && ok; c++) {
            int32_t y = row[c];
            if (y < 0) continue;
            if (E == cap) {
                size_t nc = cap ? 2 * cap : 4 * (size_t)n + 16;
                uint64_t *ne = realloc(ed, nc * sizeof *ne);
                if (!ne) { ok = false; break; }
                ed = ne, cap = nc;
            }
            ed[E++] = (uint64_t)(uint32_t)y << 32 | (x | (c == kq ? SRC_QUOTE : 0));
            off[y + 1]++;
        }
    }
    if (ok) src = malloc((E ? E : 1) * sizeof *src);
    ok = ok && src;
    if (ok) {
        for (uint32_t y = 0; y < n; y++) off[y + 1] += off[y];
        uint32_t *fill = queue; /* borrowed as per-target cursors before the search */
        memcpy(fill, off, (size_t)n * sizeof *fill);
        for (size_t i = 0; i < E; i++) src[fill[ed[i] >> 32]++] = (uint32_t)ed[i];
        uint32_t qh = 0, qt = 0;
        for (uint32_t x = 0; x < n; x++) {
            bool event = d->accept[x] || sv_dfa_has_calls(d, (int32_t)x) || guarded_from(ix, x);
            bd[x] = event ? 1 : BDIST_INF;
        }
        for (uint32_t x = 0; x < n; x++)
            if (bd[x] == 1) queue[qt++] = x;
        while (qh < qt) {
            uint32_t y = queue[qh++];
            uint16_t nd = bd[y] == BDIST_INF - 1 ? bd[y] : (uint16_t)(bd[y] + 1);
            for (uint32_t i = off[y]; i < off[y + 1]; i++) {
                uint32_t x = src[i] & ~SRC_QUOTE;
                if (bd[x] == BDIST_INF) bd[x] = nd, queue[qt++] = x;
            }
        }
    }
    /* qcrit: the same search back from the boundary states, over the moves
     * on any other class than the quote's; a state it never reaches needs
     * a quote to cross. */
    uint8_t *qc = ok ? malloc(n ? n : 1) : NULL;
    if (qc) {
        memset(qc, 1, n);
        uint32_t qh = 0, qt = 0;
        for (uint32_t x = 0; x < n; x++)
            if (bd[x] == 1) qc[x] = 0, queue[qt++] = x;
        while (qh < qt) {
            uint32_t y = queue[qh++];
            for (uint32_t i = off[y]; i < off[y + 1]; i++)
                if (!(src[i] & SRC_QUOTE) && qc[src[i]]) qc[src[i]] = 0, queue[qt++] = src[i];
        }
        quote_bytes(d, t);
    }
    t->qcrit = qc;
    t->bdist_own = true;
    free(ed);
    free(off);
    free(src);
    free(queue);
    if (!ok) {
        free(bd);
        return false;
    }
    t->bdist = bd;
    return true;
}

/* s0's chain for the boundary walk: as the plain walk's, and when finite,
 * its last state neither accepts nor calls, so that a token of U characters
 * that outruns it cannot cross there either: it dies. */
static bool boundary_chain(sv_token_index_t *ix, int32_t s0, sv_ti_chain_t *ch) {
    static _Thread_local int32_t sk[SV_TOKEN_SET_MAX_BYTES + 1];
    if (!sv_ti_chain_acquire(ix, s0, sk, ch)) return false;
    const sv_dfa_t *d = ix->dfa;
    int32_t end = sk[ch->nk];
    if (ch->finite && (d->accept[end] || sv_dfa_has_calls(d, end) || guarded_from(ix, (uint32_t)end))) {
        sv_ti_chain_release(ix, ch);
        return false;
    }
    return true;
}

/* The boundary walk of the header comment into dst (zeroed by the caller). */
static void boundary_walk(sv_token_index_t *ix, int32_t s0, uint64_t set0, uint32_t run, uint32_t depth,
                          uint32_t *dst, uint32_t *read, bool *bottom, int64_t *maxd_rel, bool *any) {
    const sv_token_set_t *ts = ix->ts;
    const sv_dfa_t *d = ix->dfa;
    const node_t *nodes = ts->nodes;
    cfgtab_t *t = ix->cfg;
    static _Thread_local cur_t cs[SV_TOKEN_SET_MAX_BYTES + 1];
    static _Thread_local uint32_t nls[SV_TOKEN_SET_MAX_BYTES + 1];
    *read = 0;
    *bottom = false;
    *any = false;
    *maxd_rel = INT64_MIN;
    /* With s0's tails, the main trie is walked only under the other first
     * bytes (a multi-byte first character that leads to c, or a piece of
     * one, moves directly and crosses nothing either). */
    if (!t->bdist) build_bdist(ix); /* without it (out of memory), no pruning */
    const uint16_t *bd = t->bdist;
    const uint8_t *qc = t->qcrit;
    if (bd && bd[s0] > ts->max_len) return; /* no token is long enough to cross */
    uint64_t skip_first[4] = {0, 0, 0, 0};
    sv_ti_tails_t tv;
    sv_ti_chain_t ch;
    bool tails = sv_ti_tails_acquire(ix, s0, &tv), chain = !tails && boundary_chain(ix, s0, &ch);
    const uint64_t *first = NULL;
    bool utf8_first = false;
    if (tails) {
        boundary_tails(ix, tv.trie, &tv, NULL, s0, set0, run, depth, dst, read, bottom, maxd_rel, any);
        first = tv.first;
        utf8_first = tv.utf8_first;
    } else if (chain) {
        /* A chain (a string with maxLength): a token made of U characters
         * moves directly along it and crosses nothing, also past its end,
         * where they have no move at all; the others are in its trie. */
        boundary_tails(ix, ch.ktails, NULL, &ch, s0, set0, run, depth, dst, read, bottom, maxd_rel, any);
        first = ch.first;
        utf8_first = ch.utf8;
    }
    if (first) {
        skip_first[0] = first[0];
        skip_first[1] = first[1];
        if (utf8_first && ts->have_partial) {
            /* tokens that start inside a character (or with no character
             * at all) are not in the tails: walk them whole */
            skip_first[2] = skip_first[3] = ~0ull;
            boundary_tails(ix, ts->partial, NULL, NULL, s0, set0, run, depth, dst, read, bottom, maxd_rel, any);
        }
    }
    if (tails) sv_ti_tails_release(ix, &tv);
    if (chain) sv_ti_chain_release(ix, &ch);
    tails |= chain;
    cs[0] = (cur_t){s0, -1, 0, 0, false, set0};
    t->nl = 0;
    nls[0] = 0;
    const uint32_t N = ts->nnodes;
    uint32_t i = 0;
    while (i < N) {
        const node_t nd = nodes[i];
        if (tails && nd.depth == 1 && ((skip_first[nd.byte >> 6] >> (nd.byte & 63)) & 1)) {
            i = nd.skip;
            continue;
        }
        cur_t c = cs[nd.depth - 1];
        /* no token below has bytes enough left to reach a boundary, or the
         * quote that every way to one takes */
        if (!c.crossed && bd && (nd.flags & NODE_SUMMARY)) {
            const summary_t *sm = &ts->sums[ts->nsum[i]];
            if (bd[c.x] > sm->maxlen - (nd.depth - 1u) ||
                (qc && qc[c.x] && !(sm->bytes[0] & t->qbytes[0]) && !(sm->bytes[1] & t->qbytes[1]) &&
                 !(sm->bytes[2] & t->qbytes[2]) && !(sm->bytes[3] & t->qbytes[3]))) {
                i = nd.skip;
                continue;
            }
        }
        t->nl = nls[nd.depth - 1]; /* local frames pushed below this depth are dropped */
        if ((nd.flags & NODE_SUMMARY) && (c.crossed || (!d->accept[c.x] && !sv_dfa_has_calls(d, c.x))) &&
            !(d->ks && (d->ks->flags[c.x] & KS_F_CHECK))) {
            /* A subtree whose bytes all loop on the state by direct moves
             * (string content), or step uniformly along a chain (a string
             * with maxLength) for as many steps as its longest token: its
             * tokens move only directly and end alive (or cut short inside
             * a character, at most 3 bytes before). Before a crossing they
             * stay pure and are skipped; after one, they all cross. */
            int32_t ps = c.x;
            const summary_t *sm = &ts->sums[ts->nsum[i]];
            const uint64_t *sb = sm->bytes;
            bool high = sb[2] | sb[3];
            uint64_t lp[2] = {0, 0};
            sv_ti_state_loops(ix, ps, lp);
            bool whole = !(sb[0] & ~lp[0]) && !(sb[1] & ~lp[1]) && (!high || (sm->utf8 && sv_ti_state_utf8(ix, ps)));
            int64_t dd = cur_dist(ix, &c) + (high ? 3 : 0);
            uint32_t cm;
            if (!whole && (!high || sm->utf8) && sv_ti_chain_fits(ix, ps, sb, high, sm->maxlen - (nd.depth - 1u), &cm))
                whole = true, dd = (int64_t)cm + c.rel;
            if (whole) {
                if (c.crossed)
                    for (uint32_t j = sm->lo; j < sm->hi; j++) cross_mark(ix, ts->sorted[j], run, dd, dst, maxd_rel, any);
                i = nd.skip;
                continue;
            }
        }
        if (!cstep(ix, &c, nd.byte, depth, read, bottom)) {
            i = nd.skip;
            continue;
        }
        if (c.crossed && (nd.flags & NODE_TOKENS) && cur_ok(ix, &c)) {
            uint32_t lo = ts->ntok_lo[i], k = ts->ntok_n[i];
            for (uint32_t j = 0; j < k; j++) cross_mark(ix, ts->sorted[lo + j], run, cur_dist(ix, &c), dst, maxd_rel, any);
        }
        cs[nd.depth] = c;
        nls[nd.depth] = t->nl;
        i++;
    }
}

/* Whether configuration v may end here: every frame's part is final, down
 * to a final state of the root part. */
static bool cfg_ends(const sv_token_index_t *ix, int32_t v) {
    const cfgtab_t *t = ix->cfg;
    const sv_dfa_t *d = ix->dfa;
    int32_t x = t->cfg[v].state;
    for (int32_t f = t->cfg[v].frame;; f = t->frames[f].parent) {
        if (!d->accept[x]) return false;
        if (f < 0) break;
        x = t->frames[f].ret;
    }
    return (uint32_t)x < d->root_states;
}

static uint64_t cfg_sum(const sv_token_index_t *ix, int32_t v) {
    int32_t f = ix->cfg->cfg[v].frame;
    return f >= 0 ? ix->cfg->frames[f].sum : 0;
}

/* The boundary entry of (state, ws) for v's stack (t->rets, depth) and,
 * with key sets, v's set and the sets of the frames (t->sets). */
static sv_status ctx_lookup(sv_token_index_t *ix, int32_t s, uint64_t set, uint32_t ws, uint32_t depth,
                            ctx_entry_t **out) {
    cfgtab_t *t = ix->cfg;
    bool ks = ix->dfa->ks != NULL;
    ctx_entry_t **head = &t->ctx[(size_t)s * ix->nbuckets + ws];
    for (ctx_entry_t *e = *head; e; e = e->next) {
        if (depth < e->depth_read || (e->bottom && depth != e->depth_read)) continue;
        if (e->depth_read && memcmp(e->rets, t->rets, e->depth_read * sizeof *e->rets) != 0) continue;
        if (ks && (e->set0 != set || (e->depth_read && memcmp(e->sets, t->sets, e->depth_read * sizeof *e->sets) != 0)))
            continue;
        *out = e;
        return SV_OK;
    }
    ctx_entry_t *e = calloc(1, sizeof *e);
    if (!e) return SV_ERR_NOMEM;
    memset(t->bits, 0, (size_t)ix->ts->words * sizeof *t->bits);
    atomic_fetch_add_explicit(&ix->walks, 1, memory_order_relaxed);
    boundary_walk(ix, s, set, ws, depth, t->bits, &e->depth_read, &e->bottom, &e->maxd_rel, &e->any);
    e->set0 = set;
    if (e->depth_read) {
        e->rets = malloc(e->depth_read * sizeof *e->rets);
        e->sets = ks ? malloc(e->depth_read * sizeof *e->sets) : NULL;
        if (!e->rets || (ks && !e->sets)) { free(e->rets); free(e->sets); free(e); return SV_ERR_NOMEM; }
        memcpy(e->rets, t->rets, e->depth_read * sizeof *e->rets);
        if (ks) memcpy(e->sets, t->sets, e->depth_read * sizeof *e->sets);
    }
    /* no crossing token: no mask (cfg_mask then takes the pure one as is) */
    sv_status st = e->any ? sv_ti_cons_insert(ix, t->bits, &e->mask) : SV_OK;
    if (st) { free(e->rets); free(e->sets); free(e); return st; }
    e->next = *head;
    *head = e;
    *out = e;
    return SV_OK;
}

/* The EOG tokens added to mask m (a configuration that may end). */
static void add_eog(const sv_token_set_t *ts, uint32_t *m) {
    for (uint32_t j = 0; j < ts->neog; j++) m[ts->eog[j] >> 5] |= 1u << (ts->eog[j] & 31);
}

sv_status sv_ti_cfg_fill(sv_token_index_t *ix, int32_t v, uint32_t ws_run, uint32_t *dst) {
    const uint32_t *m;
    sv_status st = sv_ti_cfg_mask(ix, v, ws_run, &m, NULL);
    uint32_t words = ix->ts->words;
    if (st == SV_OK) {
        memcpy(dst, m, (size_t)words * sizeof *dst);
        return SV_OK;
    }
    if (st != SV_ERR_BUDGET) return st;
    /* The memo is full: the same union, computed without storing it. */
    cfgtab_t *t = ix->cfg;
    pthread_mutex_lock(&ix->lock);
    int32_t s = t->cfg[v].state; /* v is known: sv_ti_cfg_mask checked it */
    uint64_t set = t->cfg[v].set;
    pthread_mutex_unlock(&ix->lock);
    memset(dst, 0, (size_t)words * sizeof *dst);
    sv_ti_walk(ix, s, ws_run, NULL, NULL, dst, NULL);
    pthread_mutex_lock(&ix->lock);
    uint32_t depth = cfg_stack(ix, v), read;
    int64_t md;
    bool bottom, any;
    if (depth == UINT32_MAX) {
        pthread_mutex_unlock(&ix->lock);
        return SV_ERR_NOMEM;
    }
    memset(t->bits, 0, (size_t)words * sizeof *t->bits);
    boundary_walk(ix, s, set, ws_run, depth, t->bits, &read, &bottom, &md, &any);
    for (uint32_t w = 0; w < words; w++) dst[w] |= t->bits[w];
    if (cfg_ends(ix, v)) add_eog(ix->ts, dst);
    pthread_mutex_unlock(&ix->lock);
    return SV_OK;
}

sv_status sv_ti_cfg_mask(sv_token_index_t *ix, int32_t v, uint32_t ws_run, const uint32_t **mask, uint32_t *max_dist) {
    cfgtab_t *t = ix->cfg;
    const sv_token_set_t *ts = ix->ts;
    pthread_mutex_lock(&ix->lock);
    if (v < 0 || (uint32_t)v >= t->ncfg) {
        pthread_mutex_unlock(&ix->lock);
        return SV_ERR_ARG;
    }
    size_t key = (size_t)v * ix->nbuckets + ws_run;
    if (t->masks[key]) {
        *mask = t->masks[key];
        if (max_dist) *max_dist = t->maxd[key];
        pthread_mutex_unlock(&ix->lock);
        return SV_OK;
    }
    int32_t s = t->cfg[v].state;
    pthread_mutex_unlock(&ix->lock);
    /* the part's own tokens (takes the lock itself) */
    const uint32_t *pure;
    uint32_t pmaxd;
    sv_status st = sv_ti_pure_mask(ix, s, ws_run, &pure, &pmaxd);
    if (st) return st;
    pthread_mutex_lock(&ix->lock);
    uint32_t depth = cfg_stack(ix, v);
    ctx_entry_t *e = NULL;
    if (depth == UINT32_MAX) st = SV_ERR_NOMEM;
    else st = ctx_lookup(ix, s, t->cfg[v].set, ws_run, depth, &e);
    if (st) {
        pthread_mutex_unlock(&ix->lock);
        return st;
    }
    uint32_t words = ts->words;
    bool ends = cfg_ends(ix, v);
    const uint32_t *m = pure;
    if (e->mask || ends) {
        if (e->mask)
            for (uint32_t w = 0; w < words; w++) ix->scratch[w] = pure[w] | e->mask[w];
        else
            memcpy(ix->scratch, pure, (size_t)words * sizeof *pure);
        if (ends) add_eog(ts, ix->scratch);
        st = sv_ti_cons_insert(ix, ix->scratch, &m);
        if (st) {
            pthread_mutex_unlock(&ix->lock);
            return st;
        }
    }
    uint64_t sum = cfg_sum(ix, v);
    uint64_t md = (uint64_t)pmaxd + sum;
    if (e->any) {
        int64_t b = e->maxd_rel + (int64_t)sum;
        if (b > 0 && (uint64_t)b > md) md = (uint64_t)b;
    }
    t->masks[key] = m;
    t->maxd[key] = md > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)md;
    ix->known++;
    *mask = m;
    if (max_dist) *max_dist = t->maxd[key];
    pthread_mutex_unlock(&ix->lock);
    return SV_OK;
}

bool sv_ti_cfg_known(const sv_token_index_t *ix, int32_t v, uint32_t ws_run) {
    if (ws_run > ix->o.ws_cap) ws_run = ix->o.ws_cap;
    pthread_mutex_lock((pthread_mutex_t *)&ix->lock);
    bool k = v >= 0 && (uint32_t)v < ix->cfg->ncfg && ix->cfg->masks[(size_t)v * ix->nbuckets + ws_run];
    pthread_mutex_unlock((pthread_mutex_t *)&ix->lock);
    return k;
}

/* The configuration after token id (SV_DFA_DEAD when it does not walk, or
 * past the configuration budget). */
static int32_t cfg_next_locked(sv_token_index_t *ix, int32_t v, int32_t id);

int32_t sv_ti_cfg_next(const sv_token_index_t *cix, int32_t v, int32_t id) {
    sv_token_index_t *ix = (sv_token_index_t *)cix;
    pthread_mutex_lock(&ix->lock);
    int32_t r = cfg_next_locked(ix, v, id);
    pthread_mutex_unlock(&ix->lock);
    return r;
}

void sv_ti_cfg_next_n(const sv_token_index_t *cix, int32_t v, const int32_t *ids, uint32_t n, int32_t *out) {
    sv_token_index_t *ix = (sv_token_index_t *)cix;
    pthread_mutex_lock(&ix->lock);
    for (uint32_t i = 0; i < n; i++) out[i] = cfg_next_locked(ix, v, ids[i]);
    pthread_mutex_unlock(&ix->lock);
}

/* sv_ti_cfg_next under the lock. */
static int32_t cfg_next_locked(sv_token_index_t *ix, int32_t v, int32_t id) {
    const sv_token_set_t *ts = ix->ts;
    cfgtab_t *t = ix->cfg;
    int32_t r = SV_DFA_DEAD;
    if (v < 0 || (uint32_t)v >= t->ncfg) goto out;
    uint32_t depth = cfg_stack(ix, v);
    if (depth == UINT32_MAX) goto out;
    cur_t c = {t->cfg[v].state, -1, 0, 0, false, t->cfg[v].set};
    t->nl = 0;
    uint32_t read = 0;
    bool bottom = false;
    const uint8_t *b = ts->buf + ts->off[id];
    for (uint32_t i = 0, L = ts->len[id]; i < L; i++)
        if (!cstep(ix, &c, b[i], depth, &read, &bottom)) goto out;
    if (!cur_ok(ix, &c)) goto out;
    /* the new stack: v's frame less the popped ones, then the local ones */
    int32_t f = t->cfg[v].frame;
    for (uint32_t i = 0; i < c.popped; i++) f = t->frames[f].parent;
    int32_t loc[CFG_POP_MAX * 64];
    uint64_t lset[CFG_POP_MAX * 64];
    uint32_t nloc = 0;
    for (int32_t l = c.lt; l >= 0; l = t->lpar[l]) {
        if (nloc == sizeof loc / sizeof *loc) goto out;
        lset[nloc] = ix->dfa->ks ? t->lset[l] : 0;
        loc[nloc++] = t->lret[l];
    }
    while (nloc) {
        nloc--;
        f = frame_get(ix, f, loc[nloc], lset[nloc]);
        if (f < 0) goto out;
    }
    r = cfg_get(ix, c.x, f, c.set);
out:
    return r < 0 ? SV_DFA_DEAD : r;
}

/* Bytes held by the configuration tables (under the index's lock), and by
 * the walks' view of a program with key sets (its own table). */
size_t sv_ti_cfg_bytes(const sv_token_index_t *ix) {
    const cfgtab_t *t = ix->cfg;
    if (!t) return 0;
    size_t view = ix->walk != ix->dfa ? (size_t)ix->walk->nstates * ix->walk->nclasses * sizeof *ix->walk->trans : 0;
    return (size_t)t->capcfg * (sizeof *t->cfg + ix->nbuckets * (sizeof *t->masks + sizeof *t->maxd)) +
           (size_t)t->capframes * sizeof *t->frames + ((size_t)t->fhcap + t->chcap) * sizeof(int32_t) +
           t->nctx * sizeof *t->ctx + view;
}

/* ---- configuration queries for the matcher ---------------------------------- */

uint32_t sv_token_index_num_states(const sv_token_index_t *ix) {
    if (!ix->cfg) return ix->dfa->nstates;
    pthread_mutex_lock((pthread_mutex_t *)&ix->lock);
    uint32_t n = ix->cfg->ncfg;
    pthread_mutex_unlock((pthread_mutex_t *)&ix->lock);
    return n;
}

uint64_t sv_token_index_serial(const sv_token_index_t *ix) { return ix->serial; }

bool sv_token_index_accepting(const sv_token_index_t *ix, int32_t v) {
    if (!ix->cfg) return ix->dfa->accept[v] != 0;
    pthread_mutex_lock((pthread_mutex_t *)&ix->lock);
    bool a = cfg_ends(ix, v);
    pthread_mutex_unlock((pthread_mutex_t *)&ix->lock);
    return a;
}

static bool has_any_move(const sv_dfa_t *d, int32_t x) {
    const int32_t *row = d->trans + (size_t)x * d->nclasses;
    for (uint32_t c = 0; c < d->nclasses; c++)
        if (row[c] >= 0) return true;
    return sv_dfa_has_calls(d, x);
}

bool sv_token_index_final(const sv_token_index_t *ix, int32_t v) {
    const sv_dfa_t *d = ix->dfa;
    if (!ix->cfg) return d->accept[v] && !has_any_move(d, v);
    pthread_mutex_lock((pthread_mutex_t *)&ix->lock);
    const cfgtab_t *t = ix->cfg;
    bool fin = cfg_ends(ix, v);
    /* nothing can follow: no move at the state or at any return state */
    int32_t x = t->cfg[v].state;
    for (int32_t f = t->cfg[v].frame; fin; f = t->frames[f].parent) {
        if (has_any_move(d, x)) fin = false;
        if (f < 0) break;
        x = t->frames[f].ret;
    }
    pthread_mutex_unlock((pthread_mutex_t *)&ix->lock);
    return fin;
}

uint32_t sv_token_index_distance(const sv_token_index_t *ix, int32_t v) {
    if (!ix->cfg) return ix->dfa->dist[v];
    pthread_mutex_lock((pthread_mutex_t *)&ix->lock);
    uint64_t s;
    if (ix->dfa->ks) { /* the sets' true distances, not the walk's bounds */
        int32_t f = ix->cfg->cfg[v].frame;
        s = (uint64_t)sv_ks_cost(ix->dfa, ix->cfg->cfg[v].state, ix->cfg->cfg[v].set) + (f >= 0 ? ix->cfg->frames[f].esum : 0);
    } else {
        s = (uint64_t)ix->dfa->dist[ix->cfg->cfg[v].state] + cfg_sum(ix, v);
    }
    pthread_mutex_unlock((pthread_mutex_t *)&ix->lock);
    return s > UINT32_MAX - 2 ? UINT32_MAX - 2 : (uint32_t)s;
}

uint32_t sv_token_index_completion(const sv_token_index_t *ix, int32_t v, uint8_t *buf, uint32_t cap) {
    const sv_dfa_t *d = ix->dfa;
    if (!ix->cfg) {
        uint32_t n = d->dist[v];
        if (n > cap) return UINT32_MAX;
        int32_t x = v;
        for (uint32_t i = 0; i < n; i++) {
            const int32_t *row = d->trans + (size_t)x * d->nclasses;
            int32_t best = -1;
            uint32_t bc = 0;
            for (uint32_t c = 0; c < d->nclasses; c++)
                if (row[c] >= 0 && d->dist[row[c]] + 1 == d->dist[x]) { best = row[c]; bc = c; break; }
            if (best < 0) return UINT32_MAX;
            buf[i] = d->class_rep[bc];
            x = best;
        }
        return n;
    }
    pthread_mutex_lock((pthread_mutex_t *)&ix->lock);
    uint32_t depth = cfg_stack(ix, v), n = UINT32_MAX;
    if (depth != UINT32_MAX) {
        /* sv_program_completion wants the top last */
        int32_t *r = ix->cfg->rets;
        uint64_t *sets = d->ks ? ix->cfg->sets : NULL;
        for (uint32_t i = 0; i < depth / 2; i++) {
            int32_t tmp = r[i];
            r[i] = r[depth - 1 - i];
            r[depth - 1 - i] = tmp;
            if (sets) {
                uint64_t ts = sets[i];
                sets[i] = sets[depth - 1 - i];
                sets[depth - 1 - i] = ts;
            }
        }
        n = sv_program_completion_ks(d, ix->cfg->cfg[v].state, ix->cfg->cfg[v].set, r, sets, depth, buf, cap);
    }
    pthread_mutex_unlock((pthread_mutex_t *)&ix->lock);
    return n;
}

uint32_t sv_token_index_forced(const sv_token_index_t *ix, int32_t v, uint8_t *buf, uint32_t cap, bool *ends) {
    const sv_dfa_t *d = ix->dfa;
    *ends = false;
    if (!ix->cfg) {
        uint32_t len;
        const uint8_t *f = sv_dfa_forced(d, v, &len);
        if (len > cap) len = cap;
        memcpy(buf, f, len);
        int32_t z = v;
        for (uint32_t i = 0; i < len; i++) z = sv_dfa_next(d, z, f[i]);
        *ends = d->accept[z] && !has_any_move(d, z);
        return len;
    }
    /* Forced bytes across part boundaries: a part's chain, then into a
     * callee when the state's only way on is one call, and out of a part
     * that ends with nothing else to do. */
    pthread_mutex_lock((pthread_mutex_t *)&ix->lock);
    uint32_t depth = cfg_stack(ix, v), n = 0, popped = 0;
    int32_t x = ix->cfg->cfg[v].state;
    int32_t pushed[64];
    uint32_t np = 0;
    uint32_t csize[256] = {0};
    for (int b = 0; b < 256; b++) csize[d->classes[b]]++;
    while (depth != UINT32_MAX && n < cap) {
        if (d->forced_len[x]) { /* the part's own chain at once */
            uint32_t fl = d->forced_len[x];
            if (fl > cap - n) fl = cap - n;
            memcpy(buf + n, d->forced_buf + d->forced_off[x], fl);
            uint32_t i = 0;
            for (; i < fl; i++) {
                int32_t y = sv_dfa_next(d, x, buf[n + i]);
                if (d->ks && (d->ks->flags[y] & KS_F_CHECK)) break; /* a guard: the set decides, by tokens */
                x = y;
            }
            n += i;
            if (i < fl || !fl) break;
            continue;
        }
        const int32_t *row = d->trans + (size_t)x * d->nclasses;
        uint32_t live = 0;
        int byte = -1;
        for (uint32_t c = 0; c < d->nclasses && live < 2; c++)
            if (row[c] >= 0) live += csize[c], byte = d->class_rep[c];
        uint32_t ncalls = d->call_off[x + 1] - d->call_off[x];
        if (d->accept[x]) {
            if (live || ncalls) break;
            if (np) x = pushed[--np];
            else if (popped < depth) x = ix->cfg->rets[popped++];
            else { *ends = (uint32_t)x < d->root_states; break; }
            continue;
        }
        if (ncalls == 1 && live == 0 && np < 64) {
            const sv_dfa_call_t *c = &d->calls[d->call_off[x]];
            pushed[np++] = c->ret;
            x = c->callee;
            continue;
        }
        if (ncalls || live != 1) break;
        int32_t y = sv_dfa_next(d, x, (uint8_t)byte);
        if (d->ks && (d->ks->flags[y] & KS_F_CHECK)) break;
        buf[n++] = (uint8_t)byte;
        x = y;
    }
    pthread_mutex_unlock((pthread_mutex_t *)&ix->lock);
    return n;
}
