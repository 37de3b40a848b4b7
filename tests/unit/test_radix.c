/* test_radix.c — the radix prefix cache over the KV pool.
 *
 * Units: match on an empty tree, insert and match (whole blocks only, the
 * partial tail ignored, max_blocks, divergence in each block), references
 * (the tree's own, the caller's from match, blocks that stay cached after
 * their sequence is gone), insert's errors changing nothing, duplicates
 * (the cached block wins), eviction order (LRU, leaves before parents,
 * pinned leaves skipped), the pool's evictor hook, copy-on-write after a
 * rollback into a cached block, counters, destroy returning every block, and
 * lookups with the hash cut to 1 bit (every node in one of two buckets) —
 * which fail if a lookup trusts the hash.
 *
 * Random: thousands of serving-like operations (requests that match a
 * prefix and adopt it, chunked prefill, decode, fork, rollback, insert,
 * preempt, release, explicit eviction, probes) with the tree installed as
 * the pool's evictor, against a model: a brute-force cache (every cached
 * block with its whole token prefix and a recency stamp) whose matches are
 * the longest cached prefix found by comparing against every entry, and
 * whose evictions replay the documented policy exactly. The test plays the
 * backend: the value at position p is a hash of tokens[0..p], so a cached
 * block must hold exactly the values of its prefix and a sequence that
 * adopts a match must read its own prefix's values. After every step:
 * refcounts equal the model's holders (tables + the tree), the cached set,
 * counters and all contents agree, both check functions pass. At the end
 * everything is released and the pool is whole. */
#include <stdlib.h>
#include <string.h>

#include "src/engine/kv_pool.h"
#include "src/engine/radix.h"
#include "util/rng.h"
#include "test.h"

#define NONE UINT32_MAX

static sv_kv_pool_t *mkpool(uint32_t n_blocks, uint32_t max_seqs, uint32_t max_ctx) {
    sv_kv_pool_t *p = NULL;
    sv_error_t err;
    sv_kv_pool_config_t cfg = {n_blocks, max_seqs, max_ctx};
    if (sv_kv_pool_create(&cfg, &p, &err) != SV_OK)
        abort();
    return p;
}

static sv_radix_t *mktree(sv_kv_pool_t *p, uint32_t hash_bits) {
    sv_radix_t *t = NULL;
    sv_error_t err;
    sv_radix_config_t cfg = {hash_bits};
    if (sv_radix_create(p, &cfg, &t, &err) != SV_OK)
        abort();
    return t;
}

static int both_ok(const sv_kv_pool_t *p, const sv_radix_t *t) {
    sv_error_t err;
    if (sv_kv_pool_check(p, &err) != SV_OK) {
        fprintf(stderr, "pool check: %s\n", err.message);
        return 0;
    }
    if (t && sv_radix_check(t, &err) != SV_OK) {
        fprintf(stderr, "radix check: %s\n", err.message);
        return 0;
    }
    return 1;
}

/* A sequence computed for tokens[0..n): returns the handle. */
static sv_kv_seq_t *computed(sv_kv_pool_t *p, uint32_t n) {
    sv_kv_seq_t *s;
    sv_error_t err;
    if (sv_kv_seq_create(p, &s, &err) || sv_kv_seq_append(s, n, NULL, &err))
        abort();
    return s;
}

static void fill(int32_t *tok, uint32_t n, int32_t base) {
    for (uint32_t i = 0; i < n; i++)
        tok[i] = base + (int32_t)i;
}

static void test_basic(uint32_t hash_bits) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(16, 4, 128);
    sv_radix_t *t = mktree(p, hash_bits);
    int32_t tok[64];
    uint32_t blk[8], n;
    fill(tok, 64, 100);
    CHECK(sv_radix_match(t, tok, 40, blk, 8) == 0, "empty tree");
    sv_kv_seq_t *a = computed(p, 40); /* 2 full blocks + 8 */
    uint32_t ta[3];
    memcpy(ta, sv_kv_seq_blocks(a, &n), sizeof ta);
    uint32_t added = 9;
    CHECK(sv_radix_insert(t, tok, 40, ta, &added, &err) == SV_OK && added == 2, "insert 2 full blocks (%u)", added);
    CHECK(sv_radix_holds(t, ta[0]) && sv_radix_holds(t, ta[1]) && !sv_radix_holds(t, ta[2]), "partial not cached");
    CHECK(sv_kv_pool_refcount(p, ta[0]) == 2 && sv_kv_pool_refcount(p, ta[2]) == 1, "tree holds its own reference");
    CHECK(sv_radix_match(t, tok, 40, blk, 8) == 32 && blk[0] == ta[0] && blk[1] == ta[1], "full match");
    CHECK(sv_kv_pool_refcount(p, ta[0]) == 3, "match increfs for the caller");
    sv_kv_pool_decref(p, blk[0]);
    sv_kv_pool_decref(p, blk[1]);
    CHECK(sv_radix_match(t, tok, 31, blk, 8) == 16 && blk[0] == ta[0], "31 tokens: one whole block");
    sv_kv_pool_decref(p, blk[0]);
    CHECK(sv_radix_match(t, tok, 15, blk, 8) == 0, "under a block");
    CHECK(sv_radix_match(t, tok, 40, blk, 1) == 16, "max_blocks");
    sv_kv_pool_decref(p, blk[0]);
    tok[20] = -5; /* diverge in block 1 */
    CHECK(sv_radix_match(t, tok, 40, blk, 8) == 16, "diverging in block 1");
    sv_kv_pool_decref(p, blk[0]);
    tok[20] = 120;
    tok[0] = -5; /* diverge in block 0 */
    CHECK(sv_radix_match(t, tok, 40, blk, 8) == 0, "diverging in block 0");
    tok[0] = 100;
    /* Block 1's ids under a different first block must not match. */
    int32_t other[32];
    fill(other, 32, 100);
    other[3] = 7;
    CHECK(sv_radix_match(t, other, 32, blk, 8) == 0, "same ids, other parent");
    /* Same 16 ids at the root as block 1 has under block 0. */
    CHECK(sv_radix_match(t, tok + 16, 16, blk, 8) == 0, "block 1's ids at depth 0");
    sv_radix_stats_t st;
    sv_radix_stats(t, &st);
    CHECK(st.lookups == 9 && st.hit_tokens == 32 + 16 + 16 + 16 && st.cached_blocks == 2 && st.inserted_blocks == 2,
          "stats lookups %llu hits %llu", (unsigned long long)st.lookups, (unsigned long long)st.hit_tokens);
    CHECK(st.miss_tokens == 40 + 8 + 15 + 15 + 24 + 24 + 40 + 32 + 16, "misses %llu",
          (unsigned long long)st.miss_tokens);
    CHECK(both_ok(p, t), "checks");

    /* A second sequence with the same prefix, computed on its own, then a
     * third block: the cached blocks win, the new one hangs under them. */
    sv_kv_seq_t *b = computed(p, 48);
    uint32_t tb[3];
    memcpy(tb, sv_kv_seq_blocks(b, &n), sizeof tb);
    CHECK(sv_radix_insert(t, tok, 48, tb, &added, &err) == SV_OK && added == 1, "one new block (%u)", added);
    CHECK(!sv_radix_holds(t, tb[0]) && !sv_radix_holds(t, tb[1]) && sv_radix_holds(t, tb[2]), "duplicates not taken");
    CHECK(sv_radix_match(t, tok, 64, blk, 8) == 48 && blk[0] == ta[0] && blk[1] == ta[1] && blk[2] == tb[2],
          "path through the cached blocks");
    for (int i = 0; i < 3; i++)
        sv_kv_pool_decref(p, blk[i]);
    CHECK(sv_radix_insert(t, tok, 48, tb, &added, &err) == SV_OK && added == 0, "reinsert adds nothing");

    /* Errors change nothing. */
    uint32_t bad[4] = {ta[0], ta[1], tb[2], 0};
    uint32_t fr = NONE;
    for (uint32_t i = 0; i < 16; i++)
        if (sv_kv_pool_refcount(p, i) == 0)
            fr = i;
    int32_t fresh[64];
    fill(fresh, 64, 5000);
    bad[0] = fr;
    CHECK(sv_radix_insert(t, fresh, 32, bad, &added, &err) == SV_ERR_ARG && strstr(err.message, "not held"),
          "free block: %s", err.message);
    bad[0] = tb[0];
    bad[1] = tb[0];
    CHECK(sv_radix_insert(t, fresh, 32, bad, &added, &err) == SV_ERR_ARG && strstr(err.message, "twice"),
          "listed twice: %s", err.message);
    bad[1] = ta[1];
    CHECK(sv_radix_insert(t, fresh, 32, bad, &added, &err) == SV_ERR_ARG && strstr(err.message, "another position"),
          "cached elsewhere: %s", err.message);
    bad[1] = 999;
    CHECK(sv_radix_insert(t, fresh, 32, bad, &added, &err) == SV_ERR_ARG && strstr(err.message, "range"),
          "out of range: %s", err.message);
    sv_radix_stats(t, &st);
    CHECK(st.cached_blocks == 3 && !sv_radix_holds(t, tb[0]) && sv_kv_pool_refcount(p, tb[0]) == 1,
          "nothing changed by failed inserts");
    CHECK(both_ok(p, t), "checks after errors");
    CHECK(sv_radix_insert(t, fresh, 15, bad, &added, &err) == SV_OK && added == 0, "no full block: nothing");

    /* Released sequences leave their cached blocks cached. */
    sv_kv_seq_destroy(a);
    sv_kv_seq_destroy(b);
    CHECK(sv_kv_pool_free_blocks(p) == 13, "3 blocks cached, rest free (%u)", sv_kv_pool_free_blocks(p));
    CHECK(sv_radix_match(t, tok, 48, blk, 8) == 48, "still cached");
    for (int i = 0; i < 3; i++)
        sv_kv_pool_decref(p, blk[i]);
    sv_radix_destroy(t);
    CHECK(sv_kv_pool_free_blocks(p) == 16 && both_ok(p, NULL), "destroy returns cached blocks");
    sv_radix_destroy(NULL);
    sv_kv_pool_destroy(p);
}

/* The same 16 ids X at the root and under eight different first blocks:
 * each lookup must land on its own parent's node. With a 1-bit hash they
 * all collide, so this fails if lookups skip the parent or id compare. */
static void test_same_ids_other_parents(uint32_t hash_bits) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(32, 10, 64);
    sv_radix_t *t = mktree(p, hash_bits);
    int32_t tok[9][32];
    uint32_t want[9][2], blk[2], n;
    sv_kv_seq_t *s[9];
    for (int i = 0; i < 9; i++) {
        fill(tok[i], 16, 1000 * (i + 1)); /* first block differs... */
        fill(tok[i] + 16, 16, 7);         /* ...second block is X for all */
        uint32_t len = i == 8 ? 16 : 32;  /* the last: X alone at the root */
        s[i] = computed(p, len);
        const uint32_t *tb = sv_kv_seq_blocks(s[i], &n);
        memcpy(want[i], tb, n * sizeof *tb);
        CHECK(sv_radix_insert(t, i == 8 ? tok[i] + 16 : tok[i], len, want[i], NULL, &err) == SV_OK, "insert %d: %s", i,
              err.message);
    }
    for (int i = 0; i < 9; i++) {
        uint32_t len = i == 8 ? 16 : 32;
        uint32_t got = sv_radix_match(t, i == 8 ? tok[i] + 16 : tok[i], len, blk, 2);
        CHECK(got == len && blk[0] == want[i][0] && (len == 16 || blk[1] == want[i][1]), "lookup %d (bits %u)", i,
              hash_bits);
        for (uint32_t j = 0; j < got / 16; j++)
            sv_kv_pool_decref(p, blk[j]);
    }
    int32_t q[32];
    fill(q, 16, 99999);
    fill(q + 16, 16, 7);
    CHECK(sv_radix_match(t, q, 32, blk, 2) == 0, "X under an unknown parent");
    CHECK(both_ok(p, t), "checks");
    for (int i = 0; i < 9; i++)
        sv_kv_seq_destroy(s[i]);
    sv_radix_destroy(t);
    CHECK(sv_kv_pool_free_blocks(p) == 32, "all free");
    sv_kv_pool_destroy(p);
}

/* Two branches under a shared root block: A = [r, a1, a2], B = [r, b1]. */
static void test_evict_order(void) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(12, 4, 64);
    sv_radix_t *t = mktree(p, 0);
    int32_t ta[48], tb[32];
    uint32_t n, blk[4];
    fill(ta, 48, 0);
    fill(tb, 32, 0);
    tb[20] = -1;
    sv_kv_seq_t *a = computed(p, 48);
    uint32_t ba[3];
    memcpy(ba, sv_kv_seq_blocks(a, &n), sizeof ba);
    sv_radix_insert(t, ta, 48, ba, NULL, &err);
    /* B shares block r with A: adopt from the tree. */
    sv_kv_seq_t *b;
    sv_kv_seq_create(p, &b, &err);
    CHECK(sv_radix_match(t, tb, 32, blk, 4) == 16 && blk[0] == ba[0], "B matches r");
    sv_kv_seq_adopt(b, blk, 16, &err);
    sv_kv_seq_append(b, 16, NULL, &err);
    const uint32_t *bb = sv_kv_seq_blocks(b, &n);
    uint32_t b1 = bb[1];
    sv_radix_insert(t, tb, 32, bb, NULL, &err);
    CHECK(both_ok(p, t), "checks");
    CHECK(sv_radix_evict(t, 10) == 0, "everything pinned by sequences");
    sv_kv_seq_destroy(a);
    sv_kv_seq_destroy(b);
    CHECK(sv_kv_pool_free_blocks(p) == 8, "4 cached");
    /* Recency: B was inserted last, so A's leaf a2 goes first, then a1; r
     * only after b1. */
    CHECK(sv_radix_evict(t, 1) == 1 && !sv_radix_holds(t, ba[2]) && sv_radix_holds(t, ba[1]), "a2 first");
    /* Touch A's remaining path: now B's leaf is the oldest. */
    CHECK(sv_radix_match(t, ta, 48, blk, 4) == 32, "A has 2 cached blocks");
    sv_kv_pool_decref(p, blk[0]);
    /* Pin a1 (blk[1] kept): eviction must skip it and take b1, and may
     * not take r (interior). */
    CHECK(sv_radix_evict(t, 5) == 1 && !sv_radix_holds(t, b1) && sv_radix_holds(t, ba[1]) && sv_radix_holds(t, ba[0]),
          "pinned leaf skipped, interior kept");
    sv_kv_pool_decref(p, blk[1]);
    CHECK(sv_radix_evict(t, 5) == 2 && sv_kv_pool_free_blocks(p) == 12, "then a1 and its parent r");
    sv_radix_stats_t st;
    sv_radix_stats(t, &st);
    CHECK(st.evictions == 4 && st.cached_blocks == 0, "evictions %llu", (unsigned long long)st.evictions);
    CHECK(both_ok(p, t), "checks");
    sv_radix_destroy(t);
    sv_kv_pool_destroy(p);
}

/* The tree as the pool's evictor; COW after rolling back into a cached block. */
static void test_hook_and_cow(void) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(6, 4, 200);
    sv_radix_t *t = mktree(p, 0);
    sv_kv_pool_set_evictor(p, sv_radix_evictor, t);
    int32_t tok[96];
    uint32_t n, blk[6];
    fill(tok, 96, 1);
    sv_kv_seq_t *a = computed(p, 64);
    sv_radix_insert(t, tok, 64, sv_kv_seq_blocks(a, &n), NULL, &err);
    sv_kv_seq_destroy(a);
    CHECK(sv_kv_pool_free_blocks(p) == 2, "4 cached, 2 free");
    /* A request for the same prompt adopts 48 tokens, rolls back to 40 so
     * it has tokens left to compute, then writes: copy-on-write. */
    sv_kv_seq_t *s;
    sv_kv_seq_create(p, &s, &err);
    CHECK(sv_radix_match(t, tok, 50, blk, 6) == 48, "3 blocks matched");
    CHECK(sv_kv_seq_adopt(s, blk, 48, &err) == SV_OK, "adopt");
    sv_kv_seq_truncate(s, 40, &err);
    sv_kv_copy_t cp;
    CHECK(sv_kv_seq_append(s, 8, &cp, &err) == SV_OK && cp.src == blk[2] && cp.n_pos == 8,
          "COW of the cached block %u", cp.src);
    CHECK(sv_radix_holds(t, blk[2]) && sv_kv_pool_refcount(p, blk[2]) == 1, "cached block untouched");
    /* A big append needs more than free: the evictor frees the unpinned
     * cached leaves (the 4th block, then the 3rd). */
    CHECK(sv_kv_pool_free_blocks(p) == 1, "1 free");
    CHECK(sv_kv_seq_append(s, 46, &cp, &err) == SV_OK && sv_kv_seq_len(s) == 94, "append with eviction");
    sv_radix_stats_t st;
    sv_radix_stats(t, &st);
    CHECK(st.evictions == 2 && st.cached_blocks == 2, "evicted %llu", (unsigned long long)st.evictions);
    CHECK(sv_kv_seq_append(s, 16, &cp, &err) == SV_ERR_BUDGET, "the rest is pinned by s");
    CHECK(sv_kv_seq_len(s) == 94 && sv_kv_pool_free_blocks(p) == 0 && both_ok(p, t), "unchanged");
    sv_kv_seq_destroy(s);
    sv_kv_pool_set_evictor(p, NULL, NULL);
    CHECK(sv_radix_evict(t, UINT32_MAX) == 2 && sv_kv_pool_free_blocks(p) == 6, "drop the cache");
    sv_radix_destroy(t);
    sv_kv_pool_destroy(p);
}

/* ---- random serving against a model ------------------------------------------------ */

enum { RN = 24, RSEQ = 8, RCTX = 160, RMAXB = RCTX / 16, NTPL = 4 };

typedef struct {
    sv_kv_seq_t *h;
    uint32_t n_tok, len; /* tokens known, tokens computed */
    int32_t tok[RCTX];
    uint64_t ph[RCTX];   /* value of position p: a hash of tok[0..p] */
    uint32_t table[RMAXB];
} mseq_t;

typedef struct {
    int cached;
    uint32_t parent, depth, kids; /* parent: block id or NONE; depth in blocks */
    uint64_t stamp;
    int32_t tok[RCTX];            /* the whole prefix, 16 * depth ids */
    uint64_t val[16];             /* what the block must hold */
} mnode_t;

static mseq_t ms[RSEQ];
static mnode_t mn[RN];
static uint64_t kv[RN][16];
static uint64_t clock_, m_lookups, m_hits, m_misses, m_evictions;
static int32_t tpl[NTPL][RCTX];

static uint64_t mix(uint64_t h, int32_t id) {
    h = (h ^ (uint32_t)id) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}
static void set_tok(mseq_t *m, uint32_t q, int32_t id) {
    m->tok[q] = id;
    m->ph[q] = mix(q ? m->ph[q - 1] : 7, id);
}
static uint32_t nblk(uint32_t len) { return (len + 15) / 16; }

/* References other than the tree's: block-table entries. */
static void table_refs(uint32_t *ref) {
    memset(ref, 0, RN * sizeof *ref);
    for (int i = 0; i < RSEQ; i++)
        if (ms[i].h)
            for (uint32_t j = 0; j < nblk(ms[i].len); j++)
                ref[ms[i].table[j]]++;
}

/* The cached node for tokens[0 .. 16 d), by comparing with every entry. */
static uint32_t brute_node(const int32_t *tok, uint32_t d) {
    uint32_t found = NONE;
    for (uint32_t b = 0; b < RN; b++)
        if (mn[b].cached && mn[b].depth == d && memcmp(mn[b].tok, tok, 16 * d * sizeof *tok) == 0) {
            if (found != NONE)
                CHECK(0, "model has two nodes for one prefix");
            found = b;
        }
    return found;
}

static void model_touch(uint32_t b) {
    for (; b != NONE; b = mn[b].parent)
        mn[b].stamp = ++clock_;
}

/* The documented policy: oldest first, leaves whose only holder is the tree. */
static uint32_t model_evict(uint32_t wanted) {
    uint32_t order[RN], k = 0, ref[RN], freed = 0;
    table_refs(ref);
    for (uint32_t b = 0; b < RN; b++)
        if (mn[b].cached)
            order[k++] = b;
    for (uint32_t i = 1; i < k; i++) /* insertion sort by stamp */
        for (uint32_t j = i; j > 0 && mn[order[j - 1]].stamp > mn[order[j]].stamp; j--) {
            uint32_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    for (uint32_t i = 0; i < k && freed < wanted; i++) {
        uint32_t b = order[i];
        if (mn[b].kids == 0 && ref[b] == 0) {
            mn[b].cached = 0;
            if (mn[b].parent != NONE)
                mn[mn[b].parent].kids--;
            freed++;
            m_evictions++;
        }
    }
    return freed;
}

static uint32_t model_free(void) {
    uint32_t ref[RN], n = 0;
    table_refs(ref);
    for (uint32_t b = 0; b < RN; b++)
        n += ref[b] == 0 && !mn[b].cached;
    return n;
}

static int verify(sv_kv_pool_t *p, sv_radix_t *t, long step) {
    uint32_t ref[RN], n_cached = 0;
    int ok = both_ok(p, t);
    table_refs(ref);
    for (uint32_t b = 0; b < RN; b++) {
        uint32_t want = ref[b] + (mn[b].cached ? 1u : 0u);
        if (sv_kv_pool_refcount(p, b) != want || sv_radix_holds(t, b) != mn[b].cached) {
            fprintf(stderr, "step %ld: block %u ref %u (model %u), cached %d (model %d)\n", step, b,
                    sv_kv_pool_refcount(p, b), want, sv_radix_holds(t, b), mn[b].cached);
            ok = 0;
        }
        if (mn[b].cached) {
            n_cached++;
            if (memcmp(kv[b], mn[b].val, sizeof kv[b])) {
                fprintf(stderr, "step %ld: cached block %u was overwritten\n", step, b);
                ok = 0;
            }
        }
    }
    sv_radix_stats_t st;
    sv_radix_stats(t, &st);
    sv_kv_pool_stats_t ps;
    sv_kv_pool_stats(p, &ps);
    if (st.cached_blocks != n_cached || st.lookups != m_lookups || st.hit_tokens != m_hits ||
        st.miss_tokens != m_misses || st.evictions != m_evictions || ps.free_blocks + ps.used_blocks != RN ||
        ps.free_blocks != model_free()) {
        fprintf(stderr, "step %ld: counters differ\n", step);
        ok = 0;
    }
    for (int i = 0; i < RSEQ; i++) {
        mseq_t *m = &ms[i];
        if (!m->h)
            continue;
        uint32_t n;
        const uint32_t *tb = sv_kv_seq_blocks(m->h, &n);
        if (sv_kv_seq_len(m->h) != m->len || n != nblk(m->len) || memcmp(tb, m->table, n * sizeof *tb)) {
            fprintf(stderr, "step %ld: seq %d table differs\n", step, i);
            ok = 0;
            continue;
        }
        for (uint32_t q = 0; q < m->len; q++)
            if (kv[tb[q / 16]][q % 16] != m->ph[q]) {
                fprintf(stderr, "step %ld: seq %d reads a wrong value at %u\n", step, i, q);
                ok = 0;
                break;
            }
    }
    return ok;
}

/* Match tokens[0..n) in tree and model; returns the matched length and the
 * blocks (referenced for the caller). */
static uint32_t both_match(sv_radix_t *t, const int32_t *tok, uint32_t n, uint32_t *blk) {
    uint32_t want[RMAXB], d = 0, last = NONE;
    while (d < n / 16) {
        uint32_t b = brute_node(tok, d + 1);
        if (b == NONE)
            break;
        want[d++] = b;
        last = b;
    }
    model_touch(last);
    m_lookups++;
    m_hits += 16 * d;
    m_misses += n - 16 * d;
    uint32_t got = sv_radix_match(t, tok, n, blk, RMAXB);
    CHECK(got == 16 * d && memcmp(blk, want, d * sizeof *want) == 0, "match %u tokens, brute force %u", got, 16 * d);
    return got;
}

static void run_random(uint64_t seed, uint32_t hash_bits, int steps, int destroy_at_end) {
    sv_error_t err;
    sv_rng_t r;
    sv_rng_seed(&r, seed);
    sv_kv_pool_t *p = mkpool(RN, RSEQ, RCTX);
    sv_radix_t *t = mktree(p, hash_bits);
    sv_kv_pool_set_evictor(p, sv_radix_evictor, t);
    memset(ms, 0, sizeof ms);
    memset(mn, 0, sizeof mn);
    clock_ = m_lookups = m_hits = m_misses = m_evictions = 0;
    for (int i = 0; i < NTPL; i++)
        for (int j = 0; j < RCTX; j++)
            tpl[i][j] = (int32_t)sv_rng_below(&r, 1000);
    long fails = 0, n_hit = 0, n_oob = 0, n_cow = 0, n_ins = 0, n_evict_calls = 0;
    for (int step = 0; step < steps && fails < 5; step++) {
        int i = (int)sv_rng_below(&r, RSEQ);
        mseq_t *m = &ms[i];
        uint32_t op = sv_rng_below(&r, 100), blk[RMAXB];
        if (!m->h) {
            if (op >= 50)
                continue;
            /* A new request: a template prefix, then a short tail over a
             * tiny vocabulary so that tails collide too. */
            uint32_t pre = sv_rng_below(&r, RCTX - 20), tail = sv_rng_below(&r, 20);
            const int32_t *tp = tpl[sv_rng_below(&r, NTPL)];
            m->n_tok = pre + tail;
            for (uint32_t q = 0; q < m->n_tok; q++)
                set_tok(m, q, q < pre ? tp[q] : (int32_t)sv_rng_below(&r, 3));
            CHECK(sv_kv_seq_create(p, &m->h, &err) == SV_OK, "create");
            m->len = 0;
            uint32_t got = both_match(t, m->tok, m->n_tok, blk);
            n_hit += got > 0;
            CHECK(sv_kv_seq_adopt(m->h, blk, got, &err) == SV_OK, "adopt");
            memcpy(m->table, blk, nblk(got) * sizeof *blk);
            m->len = got;
            if (got && got == m->n_tok) { /* keep a token to compute */
                CHECK(sv_kv_seq_truncate(m->h, got - 1, &err) == SV_OK, "truncate");
                m->len = got - 1;
            }
        } else if (op < 40) { /* prefill chunk, or decode when the prompt is done */
            uint32_t n_new;
            if (m->len < m->n_tok) {
                n_new = 1 + sv_rng_below(&r, 48);
                if (n_new > m->n_tok - m->len)
                    n_new = m->n_tok - m->len;
            } else {
                n_new = 1 + sv_rng_below(&r, 2);
                if (m->len + n_new > RCTX)
                    continue;
                for (uint32_t q = m->len; q < m->len + n_new; q++)
                    set_tok(m, q, (int32_t)sv_rng_below(&r, 3));
                m->n_tok = m->len + n_new;
            }
            uint32_t ref[RN];
            table_refs(ref);
            uint32_t last = m->len % 16 ? m->table[nblk(m->len) - 1] : NONE;
            int cow = last != NONE && ref[last] + (mn[last].cached ? 1u : 0u) > 1;
            uint32_t need = nblk(m->len + n_new) - nblk(m->len) + (uint32_t)cow, fr = model_free();
            CHECK(sv_kv_seq_blocks_needed(m->h, n_new) == need, "blocks_needed");
            if (fr < need) {
                n_evict_calls++;
                fr += model_evict(need - fr);
            }
            sv_kv_copy_t cp;
            sv_status st = sv_kv_seq_append(m->h, n_new, &cp, &err);
            if (fr < need) {
                n_oob++;
                CHECK(st == SV_ERR_BUDGET, "expected out of blocks");
                if (sv_rng_below(&r, 2)) { /* preempt: free it, recompute later */
                    sv_kv_seq_release(m->h);
                    m->len = 0;
                }
            } else {
                CHECK(st == SV_OK, "append: %s", err.message);
                uint32_t n;
                const uint32_t *tb = sv_kv_seq_blocks(m->h, &n);
                CHECK((cp.n_pos != 0) == cow, "copy iff shared partial block");
                if (cp.n_pos) {
                    n_cow++;
                    CHECK(cp.src == last && cp.n_pos == m->len % 16 && tb[nblk(m->len) - 1] == cp.dst &&
                              cp.dst != last,
                          "copy record");
                    memcpy(kv[cp.dst], kv[cp.src], cp.n_pos * sizeof kv[0][0]);
                }
                for (uint32_t j = 0; j < nblk(m->len) - (cow ? 1u : 0u); j++)
                    CHECK(tb[j] == m->table[j], "old entries kept");
                memcpy(m->table, tb, n * sizeof *tb);
                for (uint32_t q = m->len; q < m->len + n_new; q++)
                    kv[tb[q / 16]][q % 16] = m->ph[q];
                m->len += n_new;
            }
        } else if (op < 55) { /* insert what it computed */
            uint32_t full = m->len / 16, d = 0;
            while (d < full && brute_node(m->tok, d + 1) != NONE)
                d++;
            uint32_t added = 99;
            CHECK(sv_radix_insert(t, m->tok, m->len, m->table, &added, &err) == SV_OK, "insert: %s", err.message);
            CHECK(added == full - d, "added %u, model %u", added, full - d);
            n_ins += added;
            uint32_t parent = d ? brute_node(m->tok, d) : NONE;
            for (uint32_t j = d; j < full; j++) {
                uint32_t b = m->table[j];
                mnode_t *x = &mn[b];
                CHECK(!x->cached, "model: block %u cached twice", b);
                x->cached = 1;
                x->parent = parent;
                x->depth = j + 1;
                x->kids = 0;
                x->stamp = ++clock_;
                memcpy(x->tok, m->tok, 16 * (j + 1) * sizeof *m->tok);
                memcpy(x->val, m->ph + 16 * j, sizeof x->val);
                if (parent != NONE)
                    mn[parent].kids++;
                parent = b;
            }
            model_touch(parent);
        } else if (op < 65) { /* fork (n > 1) */
            int j = 0;
            while (j < RSEQ && ms[j].h)
                j++;
            if (j == RSEQ)
                continue;
            CHECK(sv_kv_seq_fork(m->h, &ms[j].h, &err) == SV_OK, "fork");
            sv_kv_seq_t *h = ms[j].h;
            ms[j] = *m;
            ms[j].h = h;
            ms[j].n_tok = m->len; /* the child samples its own continuation */
        } else if (op < 75) { /* rollback: jump-forward retokenization, mostly one token */
            uint32_t n = op < 73 ? (m->len ? m->len - 1 : 0) : sv_rng_below(&r, m->len + 1);
            CHECK(sv_kv_seq_truncate(m->h, n, &err) == SV_OK, "truncate");
            m->len = n;
            if (op >= 73)
                m->n_tok = m->len; /* what follows is resampled */
        } else if (op < 82) { /* finished or cancelled */
            sv_kv_seq_destroy(m->h);
            m->h = NULL;
        } else if (op < 90) { /* preempted: blocks freed, tokens kept for recompute */
            sv_kv_seq_release(m->h);
            m->len = 0;
            uint32_t got = both_match(t, m->tok, m->n_tok, blk); /* readmission */
            CHECK(sv_kv_seq_adopt(m->h, blk, got, &err) == SV_OK, "re-adopt");
            memcpy(m->table, blk, nblk(got) * sizeof *blk);
            m->len = got;
        } else if (op < 95) { /* explicit eviction */
            uint32_t k = 1 + sv_rng_below(&r, 6), want = model_evict(k);
            CHECK(sv_radix_evict(t, k) == want, "evict %u: model %u", k, want);
        } else { /* a probe: the scheduler asks how much is cached, uses nothing */
            uint32_t got = both_match(t, m->tok, m->n_tok, blk);
            for (uint32_t j = 0; j < got / 16; j++)
                sv_kv_pool_decref(p, blk[j]);
        }
        if (!verify(p, t, step)) {
            CHECK(0, "seed %llu step %d", (unsigned long long)seed, step);
            fails++;
        }
    }
    /* Cancellation frees every block; the cache then gives back the rest. */
    for (int i = 0; i < RSEQ; i++)
        sv_kv_seq_destroy(ms[i].h), ms[i].h = NULL;
    sv_radix_stats_t st;
    sv_radix_stats(t, &st);
    CHECK(sv_kv_pool_free_blocks(p) == RN - st.cached_blocks && both_ok(p, t), "only cached blocks held");
    sv_kv_pool_set_evictor(p, NULL, NULL);
    if (destroy_at_end) {
        sv_radix_destroy(t);
    } else {
        CHECK(sv_radix_evict(t, UINT32_MAX) == st.cached_blocks, "evict all");
        sv_radix_destroy(t);
    }
    CHECK(sv_kv_pool_free_blocks(p) == RN && both_ok(p, NULL), "pool whole again");
    CHECK(n_hit > 50 && n_oob > 20 && n_cow > 20 && n_ins > 100 && st.evictions > 100 && n_evict_calls > 20,
          "coverage: hits %ld, out-of-blocks %ld, copies %ld, inserted %ld, evictions %llu (%ld calls)", n_hit, n_oob, n_cow,
          n_ins, (unsigned long long)st.evictions, n_evict_calls);
    printf("random seed %llu hash_bits %u: %d steps, %ld requests hit, %llu/%llu tokens hit, %ld inserted, "
           "%llu evicted (%ld evictor calls), %ld out-of-blocks, %ld copies\n",
           (unsigned long long)seed, hash_bits ? hash_bits : 64, steps, n_hit, (unsigned long long)st.hit_tokens,
           (unsigned long long)(st.hit_tokens + st.miss_tokens), n_ins, (unsigned long long)st.evictions,
           n_evict_calls, n_oob, n_cow);
    sv_kv_pool_destroy(p);
}

int main(void) {
    test_basic(0);
    test_basic(1); /* every hash in {0, 1}: lookups must compare ids */
    test_same_ids_other_parents(0);
    test_same_ids_other_parents(1);
    test_evict_order();
    test_hook_and_cow();
    run_random(1, 0, 6000, 0);
    run_random(2, 0, 6000, 1);
    run_random(3, 2, 6000, 0);
    run_random(4, 1, 6000, 1);
    return test_summary("radix: match/insert/evict units, random serving vs brute-force model");
}
