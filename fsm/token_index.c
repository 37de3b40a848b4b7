/* token_index.c — a DFA paired with a token set: the walk of the vocabulary
 * trie from a state, and the facts about states that the walk tests.
 *
 * The trie (token_set.c) is stored in depth-first preorder: node i has the
 * byte on its incoming edge, its depth (1 for children of the root) and
 * skip[i], the index just past its subtree. A walk from DFA state s is then
 * one forward scan: node i's parent state is stack[depth - 1]; if the DFA
 * dies on the node's byte, the scan jumps to skip[i], pruning every token
 * below it. Tokens with equal bytes hang off the same node.
 *
 * A plain walk costs a few nanoseconds per visited node, and a state inside
 * string content allows most of the vocabulary, so the walk takes exact
 * shortcuts (docs/token_index.md). Two are tested at each summarized node:
 * a subtree whose ASCII bytes all loop on the parent's state, and whose
 * multi-byte characters do too, is allowed whole (1, subtree summaries);
 * so is one whose characters can each take the state's uniform successor
 * for as many steps as its longest token (2, chains: a string with
 * maxLength). The others work from the start state before the scan begins
 * (token_shortcut.c: root masks, tails and chains merged by what follows).
 *
 * What those tests ask of a state (its self-loop bytes, whether every
 * multi-byte character loops on it, its uniform successor, how many uniform
 * steps follow) is computed on first need and kept per state in the index,
 * in atomics: walks of different states run at once, outside the index's
 * lock (token_memo.c), and a race computes a fact twice, to the same value.
 *
 * A filtered walk (the matcher's budget rule, on each token's end state)
 * takes neither the start shortcuts nor the chains; a walk under a
 * whitespace cap takes no start shortcut and tests each token's
 * whitespace. */
#include "token_index.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/dfa_internal.h"
#include "fsm/internal/token_index_internal.h"

enum { ST_LOOP = 1, ST_UTF8_KNOWN = 2, ST_UTF8 = 4, ST_UNI = 8, ST_UNI8_KNOWN = 16, ST_UNI8 = 32, ST_RUN = 64, ST_LIVE = 128 };

void sv_token_index_opts_default(sv_token_index_opts_t *o) {
    o->ws_cap = 0;
    o->max_mask_bytes = (size_t)256 << 20;
}

/* The walks' view of a program with key sets (ix->walk): its tables but
 * for a copy of the moves without those into states a guard checks. */
static sv_dfa_t *walk_view(const sv_dfa_t *d) {
    sv_dfa_t *w = malloc(sizeof *w);
    size_t cells = (size_t)d->nstates * d->nclasses;
    int32_t *t = malloc((cells ? cells : 1) * sizeof *t);
    if (!w || !t) {
        free(w);
        free(t);
        return NULL;
    }
    memset(w, 0, sizeof *w);
    w->nstates = d->nstates;
    w->nclasses = d->nclasses;
    memcpy(w->classes, d->classes, sizeof w->classes);
    memcpy(w->class_rep, d->class_rep, sizeof w->class_rep);
    for (size_t i = 0; i < cells; i++) t[i] = d->trans[i] >= 0 && (d->ks->flags[d->trans[i]] & KS_F_CHECK) ? SV_DFA_DEAD : d->trans[i];
    w->trans = t;
    w->accept = d->accept;
    w->dist = d->ks->ub;
    w->forced_off = d->forced_off;
    w->forced_len = d->forced_len;
    w->forced_buf = d->forced_buf;
    w->nforced = d->nforced;
    w->call_off = d->call_off;
    w->calls = d->calls;
    w->ncalls = d->ncalls;
    w->nparts = d->nparts;
    w->root_states = d->root_states;
    return w;
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
    ix->walk = dfa;
    if ((dfa->ks && !(ix->walk = walk_view(dfa))) || (dfa->call_off && sv_ti_cfg_create(ix))) {
        if (ix->walk == dfa) ix->walk = NULL;
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
    free(ix->notes);
    free(ix->fmasks);
    pthread_mutex_destroy(&ix->lock);
    sv_ti_cfg_destroy(ix->cfg);
    if (ix->walk && ix->walk != ix->dfa) {
        free(ix->walk->trans);
        free((sv_dfa_t *)ix->walk);
    }
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
        return id >= 0 && (uint32_t)id < ts->n && ts->kind[id] == SV_TOKKIND_EOG;
    }
    *ws_after = ts->ws_all[id] ? ws_run + ts->len[id] : ts->ws_trail[id];
    return !ix->o.ws_cap || sv_ti_ws_ok(ts, ix->o.ws_cap, ws_run, id);
}

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
    /* With key sets the shortest completion may take other bytes: a ','
     * before a required key, any byte of a key's spelling */
    if (d->ks && !class_ok[d->classes[',']]) return false;
    for (uint32_t x = 0; x < d->nstates; x++) {
        if (d->accept[x] || d->dist[x] == UINT32_MAX) continue;
        bool ok = false;
        const int32_t *row = d->trans + (size_t)x * d->nclasses;
        if (d->ks && (d->ks->flags[x] & KS_F_REGION))
            for (uint32_t c = 0; c < d->nclasses; c++)
                if (row[c] >= 0 && !class_ok[c]) return false;
        if (d->ks && d->ks->obj[x] >= 0 && (uint32_t)x == (uint32_t)d->ks->objs[d->ks->obj[x]].start &&
            !class_ok[d->classes['{']])
            return false;
        for (uint32_t c = 0; c < d->nclasses && !ok; c++)
            ok = row[c] >= 0 && class_ok[c] && d->dist[row[c]] != UINT32_MAX && d->dist[row[c]] + 1 == d->dist[x];
        for (uint32_t i = d->call_off ? d->call_off[x] : 0, e = d->call_off ? d->call_off[x + 1] : 0; i < e && !ok; i++)
            ok = (uint64_t)d->dist[d->calls[i].callee] + (d->ks ? d->ks->xs[d->calls[i].callee] : 0) +
                     d->dist[d->calls[i].ret] == d->dist[x];
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

/* ---- per-state facts (st_*), computed on first need ---------------------- */

/* The bytes that lead from state s back to s. */
static void loop_set(const sv_dfa_t *d, int32_t s, uint64_t out[4]) {
    const int32_t *row = d->trans + (size_t)s * d->nclasses;
    out[0] = out[1] = out[2] = out[3] = 0;
    for (int b = 0; b < 256; b++)
        if (row[d->classes[b]] == s) out[b >> 6] |= 1ull << (b & 63);
}

/* The states met inside a character by back_to, with the continuation
 * bytes still to come: intermediate states are few in a minimal DFA, and
 * each is checked once. */
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

bool sv_ti_utf8_to(const sv_dfa_t *d, int32_t from, int32_t s) {
    seen_t seen = {.n = 0};
    const int32_t *row = d->trans + (size_t)from * d->nclasses;
    /* leads that share a class and a continuation range are checked once */
    uint32_t checked[64];
    int nchecked = 0;
    for (int lead = 0xC2; lead <= 0xF4; lead++) {
        uint32_t n; /* continuation bytes, 1 to 3: every byte here is a lead */
        uint8_t lo, hi;
        sv_utf8_lead((uint8_t)lead, &n, &lo, &hi);
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
            if (!back_to(d, s, r2[cl], (int)n - 1, &seen)) return false;
        }
    }
    return true;
}

void sv_ti_state_loops(const sv_token_index_t *ix, int32_t s, uint64_t out[2]) {
    if (atomic_load_explicit(&ix->st_flags[s], memory_order_acquire) & ST_LOOP) {
        out[0] = atomic_load_explicit(&ix->st_loop[s][0], memory_order_relaxed);
        out[1] = atomic_load_explicit(&ix->st_loop[s][1], memory_order_relaxed);
        return;
    }
    uint64_t l[4];
    loop_set(ix->walk, s, l);
    out[0] = l[0];
    out[1] = l[1];
    atomic_store_explicit(&ix->st_loop[s][0], l[0], memory_order_relaxed);
    atomic_store_explicit(&ix->st_loop[s][1], l[1], memory_order_relaxed);
    atomic_fetch_or_explicit(&ix->st_flags[s], ST_LOOP, memory_order_release);
}

bool sv_ti_state_utf8(const sv_token_index_t *ix, int32_t s) {
    uint8_t f = atomic_load_explicit(&ix->st_flags[s], memory_order_acquire);
    if (f & ST_UTF8_KNOWN) return f & ST_UTF8;
    bool v = sv_ti_utf8_to(ix->walk, s, s);
    atomic_fetch_or_explicit(&ix->st_flags[s], (uint8_t)(ST_UTF8_KNOWN | (v ? ST_UTF8 : 0)), memory_order_release);
    return v;
}

int32_t sv_ti_state_uni(const sv_token_index_t *ix, int32_t s, uint64_t set[2]) {
    if (atomic_load_explicit(&ix->st_flags[s], memory_order_acquire) & ST_UNI) {
        set[0] = atomic_load_explicit(&ix->st_uniset[s][0], memory_order_relaxed);
        set[1] = atomic_load_explicit(&ix->st_uniset[s][1], memory_order_relaxed);
        return atomic_load_explicit(&ix->st_uni[s], memory_order_relaxed);
    }
    const sv_dfa_t *d = ix->walk;
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

bool sv_ti_state_uni8(const sv_token_index_t *ix, int32_t s, int32_t uni) {
    uint8_t f = atomic_load_explicit(&ix->st_flags[s], memory_order_acquire);
    if (f & ST_UNI8_KNOWN) return f & ST_UNI8;
    bool v = uni >= 0 && sv_ti_utf8_to(ix->walk, s, uni);
    atomic_fetch_or_explicit(&ix->st_flags[s], (uint8_t)(ST_UNI8_KNOWN | (v ? ST_UNI8 : 0)), memory_order_release);
    return v;
}

void sv_ti_state_live(const sv_token_index_t *ix, int32_t s, uint64_t out[2]) {
    if (atomic_load_explicit(&ix->st_flags[s], memory_order_acquire) & ST_LIVE) {
        out[0] = atomic_load_explicit(&ix->st_live[s][0], memory_order_relaxed);
        out[1] = atomic_load_explicit(&ix->st_live[s][1], memory_order_relaxed);
        return;
    }
    const sv_dfa_t *d = ix->walk;
    const int32_t *row = d->trans + (size_t)s * d->nclasses;
    out[0] = out[1] = 0;
    for (int b = 0; b < 128; b++)
        if (row[d->classes[b]] >= 0) out[b >> 6] |= 1ull << (b & 63);
    atomic_store_explicit(&ix->st_live[s][0], out[0], memory_order_relaxed);
    atomic_store_explicit(&ix->st_live[s][1], out[1], memory_order_relaxed);
    atomic_fetch_or_explicit(&ix->st_flags[s], ST_LIVE, memory_order_release);
}

#define RUN_MAX 1024

/* Computed along the chain and cached for every state on it. */
uint32_t sv_ti_state_run(const sv_token_index_t *ix, int32_t s, uint32_t *maxd) {
    if (atomic_load_explicit(&ix->st_flags[s], memory_order_acquire) & ST_RUN) {
        *maxd = atomic_load_explicit(&ix->st_runmaxd[s], memory_order_relaxed);
        return atomic_load_explicit(&ix->st_run[s], memory_order_relaxed);
    }
    const sv_dfa_t *d = ix->walk;
    int32_t chain[RUN_MAX + 1];
    uint64_t set0[2], set[2];
    int32_t t = sv_ti_state_uni(ix, s, set0);
    bool u0 = t >= 0 && sv_ti_state_uni8(ix, s, t);
    int n = 0;
    chain[n++] = s;
    uint32_t len = 0, md = 0;
    bool inf = false, tail_known = false;
    int32_t x = s;
    while (t >= 0 && n <= RUN_MAX) {
        /* x -> t is a uniform step with set0 */
        if (t == x) { inf = true; break; }
        int32_t t2 = sv_ti_state_uni(ix, t, set);
        bool u = t2 >= 0 && sv_ti_state_uni8(ix, t, t2);
        if (set[0] != set0[0] || set[1] != set0[1] || u != u0 || t2 < 0) break;
        if (atomic_load_explicit(&ix->st_flags[t], memory_order_acquire) & ST_RUN) { tail_known = true; break; }
        chain[n++] = t;
        x = t;
        t = t2;
    }
    /* backfill: chain[i] -> chain[i+1] -> ... ; the last one steps to t */
    if (inf) {
        len = SV_TI_RUN_INF;
        md = d->dist[t];
    } else if (tail_known) {
        uint32_t tm = atomic_load_explicit(&ix->st_runmaxd[t], memory_order_relaxed);
        uint32_t tl = atomic_load_explicit(&ix->st_run[t], memory_order_relaxed);
        len = tl == SV_TI_RUN_INF ? SV_TI_RUN_INF : tl + 1;
        md = tm > d->dist[t] ? tm : d->dist[t];
    } else {
        len = t >= 0 ? 1 : 0;
        md = t >= 0 ? d->dist[t] : 0;
    }
    for (int i = n - 1; i >= 0; i--) {
        if (i < n - 1) {
            int32_t nx = chain[i + 1];
            if (len != SV_TI_RUN_INF) len = len + 1 < SV_TI_RUN_INF ? len + 1 : SV_TI_RUN_INF - 1;
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
    int32_t t = sv_ti_state_uni(ix, s, set);
    if (t < 0 || (sb[0] & ~set[0]) || (sb[1] & ~set[1]) || (high && !sv_ti_state_uni8(ix, s, t))) return false;
    uint32_t rm, run = sv_ti_state_run(ix, s, &rm);
    if (h > run) return false;
    *maxd = rm + (high ? 3 : 0);
    return true;
}

/* ---- the walk ----------------------------------------------------------- */

/* For a subtree with ASCII byte set sb (and multi-byte characters when
 * high; its tokens are then UTF-8 from a boundary) whose tokens have at
 * most h bytes from here: whether every such string stays alive from s by
 * taking, per character, the uniform successor (so each token is allowed,
 * ending on the chain within h steps, or inside a character just before).
 * A string with maxLength counts its characters that way. *maxd gets the
 * largest distance of those end states; *limit the longest token (bytes
 * from here) allowed, less than h when the chain ends before and every
 * byte of the subtree dies there. */
static bool chain_ok(const sv_token_index_t *ix, int32_t s, const uint64_t *sb, bool high, uint32_t h,
                     uint32_t *maxd, uint32_t *limit) {
    uint32_t md = 0;
    *limit = h;
    if (sv_ti_chain_fits(ix, s, sb, high, h, maxd)) return true; /* the whole subtree fits in s's run, in O(1) */
    for (uint32_t k = 0; k < h; k++) {
        uint64_t set[2];
        int32_t t = sv_ti_state_uni(ix, s, set);
        if (t < 0 || (sb[0] & ~set[0]) || (sb[1] & ~set[1]) || (high && !sv_ti_state_uni8(ix, s, t))) {
            /* The chain ends here. For ASCII bytes only: if every byte of
             * the subtree dies at s, exactly the tokens of at most k bytes
             * (from here) are allowed. */
            if (high || k == 0) return false;
            uint64_t live[2];
            sv_ti_state_live(ix, s, live);
            if ((sb[0] & live[0]) || (sb[1] & live[1])) return false;
            *limit = k;
            break;
        }
        s = t;
        if (ix->walk->dist[s] > md) md = ix->walk->dist[s];
    }
    *maxd = md + (high ? 3 : 0);
    return true;
}

#ifdef TI_STATS /* counters for tests/bench/bench_token_index.c */
uint64_t ti_visited, ti_bulk_tokens, ti_skipped_root;
#endif
void sv_ti_walk(const sv_token_index_t *ix, int32_t s0, uint32_t run, sv_token_filter_fn filter, void *ctx,
                uint32_t *dst, uint32_t *maxd_out) {
    const sv_token_set_t *ts = ix->ts;
    const sv_dfa_t *d = ix->walk;
    const int32_t *trans = d->trans;
    const uint8_t *cls = d->classes;
    const size_t nc = d->nclasses;
    const node_t *nodes = ts->nodes;
    const uint32_t cap = ix->o.ws_cap;
    int32_t stack[SV_TOKEN_SET_MAX_BYTES + 1];
    stack[0] = s0;
    /* The shortcuts from s0 first (token_shortcut.c). With tails, the main
     * walk skips the subtrees of their first bytes. With the root mask (the
     * tokens allowed from s0 by its self-loops alone), a bulk-allowed
     * subtree below a pure path (only such bytes, back in s0) needs no bits
     * set: they are all in it already. */
    sv_ti_start_t sc = {.c = -1};
    if (!filter && !cap) sv_ti_walk_start(ix, s0, dst, &sc);
    const bool use_root = sc.root, u8 = sc.u8, tails = sc.tails;
    const int32_t c = sc.c;
    uint32_t maxd = sc.maxd;
    uint8_t pure[SV_TOKEN_SET_MAX_BYTES + 1];
    if (use_root) pure[0] = c == s0;
    const uint32_t N = ts->nnodes;
    uint32_t i = 0;
    while (i < N) {
        const node_t nd = nodes[i];
#ifdef TI_STATS
        ti_visited++;
#endif
        int32_t ps = stack[nd.depth - 1];
        int32_t ns = trans[(size_t)ps * nc + cls[nd.byte]];
        if (ns < 0 || (tails && nd.depth == 1 && ((sc.skip_first[nd.byte >> 6] >> (nd.byte & 63)) & 1))) {
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
                if (maybe) sv_ti_state_loops(ix, ps, lp);
                if (maybe && !(sb[0] & ~lp[0]) && !(sb[1] & ~lp[1]) && (!high || (sm->utf8 && !filter))) {
                    bool ok = !high || sv_ti_state_utf8(ix, ps);
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
            else if (nd.depth == 1) in = (sc.first[nd.byte >> 6] >> (nd.byte & 63)) & 1;
            else in = pure[nd.depth - 1] && ((sc.loop[nd.byte >> 6] >> (nd.byte & 63)) & 1);
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
}

/* Bits set in dst[0..words). Written out (SWAR) rather than
 * __builtin_popcount: without -mpopcnt, which sieve does not assume, GCC
 * makes that a call into libgcc for every word (4,000 a fill on Llama 3). */
static uint32_t popcount_words(const uint32_t *dst, uint32_t words) {
    uint32_t count = 0;
    for (uint32_t w = 0; w < words; w++) {
        uint32_t v = dst[w];
        v = v - ((v >> 1) & 0x55555555u);
        v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
        count += (((v + (v >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24;
    }
    return count;
}

enum { FILTER_CHUNK = 512 };

/* The filter on the n tokens of ids from configuration state, clearing in
 * dst those it drops; n becomes 0. */
static void filter_chunk(const sv_token_index_t *ix, int32_t state, const int32_t *ids, uint32_t *n,
                         sv_token_filter_fn filter, void *ctx, uint32_t *dst) {
    int32_t nx[FILTER_CHUNK];
    sv_ti_cfg_next_n(ix, state, ids, *n, nx);
    for (uint32_t i = 0; i < *n; i++)
        if (nx[i] < 0 || !filter(ctx, nx[i])) dst[ids[i] / 32] &= ~(1u << (ids[i] & 31));
    *n = 0;
}

uint32_t sv_token_index_fill(const sv_token_index_t *ix, int32_t state, uint32_t ws_run, sv_token_filter_fn filter,
                             void *ctx, uint32_t *dst) {
    memset(dst, 0, (size_t)ix->ts->words * sizeof *dst);
    if (ws_run > ix->o.ws_cap) ws_run = ix->o.ws_cap;
    if (ix->cfg) {
        /* The configuration's mask, then the filter on each allowed
         * token's configuration (a binding budget only). */
        if (sv_ti_cfg_fill((sv_token_index_t *)ix, state, ws_run, dst)) {
            memset(dst, 0, (size_t)ix->ts->words * sizeof *dst);
            return 0;
        }
        if (filter) {
            /* the allowed normal tokens' configurations, a chunk under one
             * lock, then the filter on them, which takes the lock itself */
            int32_t ids[FILTER_CHUNK];
            uint32_t n = 0;
            for (uint32_t w = 0; w < ix->ts->words; w++)
                for (uint32_t bits = dst[w]; bits; bits &= bits - 1) {
                    int32_t id = (int32_t)(w * 32 + (uint32_t)__builtin_ctz(bits));
                    if (ix->ts->kind[id] != SV_TOKKIND_NORMAL) continue;
                    ids[n++] = id;
                    if (n == FILTER_CHUNK) filter_chunk(ix, state, ids, &n, filter, ctx, dst);
                }
            filter_chunk(ix, state, ids, &n, filter, ctx, dst);
        }
        return popcount_words(dst, ix->ts->words);
    }
    atomic_fetch_add_explicit(&((sv_token_index_t *)ix)->walks, 1, memory_order_relaxed);
    sv_ti_walk(ix, state, ws_run, filter, ctx, dst, NULL);
    return popcount_words(dst, ix->ts->words);
}

int32_t sv_token_index_next(const sv_token_index_t *ix, int32_t s, int32_t id) {
    const sv_token_set_t *ts = ix->ts;
    if (s < 0 || id < 0 || (uint32_t)id >= ts->n || ts->kind[id] != SV_TOKKIND_NORMAL) return SV_DFA_DEAD;
    if (ix->cfg) return sv_ti_cfg_next(ix, s, id);
    const sv_dfa_t *d = ix->walk;
    const uint8_t *b = ts->buf + ts->off[id];
    for (uint32_t i = 0, L = ts->len[id]; i < L && s >= 0; i++) s = d->trans[(size_t)s * d->nclasses + d->classes[b[i]]];
    return s;
}
