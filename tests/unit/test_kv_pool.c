/* test_kv_pool.c — the KV block allocator and block tables.
 *
 * Units: the byte-budget helper (exact counts, the minimum, overflow, the
 * cap), create's argument checks, alloc/incref/decref and their misuse,
 * appends across block boundaries, max_ctx, out-of-blocks leaving
 * everything unchanged, truncate, fork with copy-on-write of the partial
 * block, adopt, the sequence slab, the evictor hook, blocks_needed, and
 * sv_kv_pool_check catching a caller's double release.
 *
 * Random: thousands of operations (create, append in chunks, fork,
 * truncate, release, destroy, loose alloc/decref) against a model kept in
 * plain arrays. The test also plays the backend: it keeps a value for every
 * slot of every block, performs the copies append returns, and writes a
 * position's value when it is appended. After every step: refcounts equal the
 * model's holders, free + used == N, the free list is what the model says,
 * each table is the model's, and every sequence reads back exactly the
 * values it wrote — which fails if a shared block is written without a
 * copy. An out-of-blocks append must leave every refcount and table as it
 * was. At the end everything is released and the pool is whole again. */
#include <stdlib.h>
#include <string.h>

#include "src/engine/kv_pool.h"
#include "util/rng.h"
#include "test.h"

static sv_kv_pool_t *mkpool(uint32_t n_blocks, uint32_t max_seqs, uint32_t max_ctx) {
    sv_kv_pool_t *p = NULL;
    sv_error_t err;
    sv_kv_pool_config_t cfg = {n_blocks, max_seqs, max_ctx};
    if (sv_kv_pool_create(&cfg, &p, &err) != SV_OK) {
        fprintf(stderr, "pool create: %s\n", err.message);
        abort();
    }
    return p;
}

static int pool_ok(const sv_kv_pool_t *p) {
    sv_error_t err;
    if (sv_kv_pool_check(p, &err) == SV_OK)
        return 1;
    fprintf(stderr, "pool check: %s\n", err.message);
    return 0;
}

static void test_blocks_for_bytes(void) {
    sv_error_t err;
    uint32_t n = 7;
    uint64_t per = 22ull * 2 * 16 * 256 * 2; /* TinyLlama: 22 layers, 4 kv heads x 64, f16 */
    CHECK(sv_kv_pool_blocks_for_bytes(per * 1000 + per - 1, 22, 256, 2, 1, &n, &err) == SV_OK && n == 1000,
          "n = %u", n);
    CHECK(sv_kv_pool_blocks_for_bytes(per * 64, 22, 256, 2, 64, &n, &err) == SV_OK && n == 64, "exact minimum");
    CHECK(sv_kv_pool_blocks_for_bytes(per * 64 - 1, 22, 256, 2, 64, &n, &err) == SV_ERR_BUDGET && n == 0,
          "below minimum");
    CHECK(strstr(err.message, "need at least 64") != NULL, "message: %s", err.message);
    CHECK(sv_kv_pool_blocks_for_bytes(per - 1, 22, 256, 2, 0, &n, &err) == SV_ERR_BUDGET, "zero blocks");
    CHECK(sv_kv_pool_blocks_for_bytes(1 << 20, 0, 256, 2, 1, &n, &err) == SV_ERR_ARG, "zero layers");
    CHECK(sv_kv_pool_blocks_for_bytes(1 << 20, 1, 0, 2, 1, &n, &err) == SV_ERR_ARG, "zero kv_dim");
    CHECK(sv_kv_pool_blocks_for_bytes(1 << 20, 1, 1, 0, 1, &n, &err) == SV_ERR_ARG, "zero elem");
    CHECK(sv_kv_pool_blocks_for_bytes(UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, 1, &n, &err) == SV_ERR_ARG,
          "overflow");
    CHECK(sv_kv_pool_blocks_for_bytes(UINT64_MAX, 1, 1, 1, 1, &n, &err) == SV_OK && n == SV_KV_MAX_BLOCKS, "cap %u",
          n);
}

static void test_create(void) {
    sv_error_t err;
    sv_kv_pool_t *p = (sv_kv_pool_t *)1;
    sv_kv_pool_config_t bad[] = {{0, 1, 16}, {1, 0, 16}, {1, 1, 0}, {SV_KV_MAX_BLOCKS + 1, 1, 16},
                                 {1, SV_KV_MAX_SEQS + 1, 16}, {1, 1, SV_KV_MAX_CTX + 1}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(sv_kv_pool_create(&bad[i], &p, &err) == SV_ERR_ARG && p == NULL, "bad config %zu", i);
        p = (sv_kv_pool_t *)1;
    }
    CHECK(sv_kv_pool_create(NULL, &p, &err) == SV_ERR_ARG, "NULL config");
    sv_kv_pool_destroy(NULL);
    sv_kv_seq_destroy(NULL);
    sv_kv_seq_release(NULL);
}

static void test_blocks(void) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(4, 2, 64);
    uint32_t b[4], x = 0;
    for (int i = 0; i < 4; i++)
        CHECK(sv_kv_pool_alloc(p, &b[i], &err) == SV_OK && sv_kv_pool_refcount(p, b[i]) == 1, "alloc %d", i);
    CHECK(b[0] != b[1] && b[1] != b[2] && b[2] != b[3] && b[0] != b[3], "distinct ids");
    CHECK(sv_kv_pool_free_blocks(p) == 0, "all used");
    CHECK(sv_kv_pool_alloc(p, &x, &err) == SV_ERR_BUDGET && x == SV_KV_NO_BLOCK, "exhausted");
    CHECK(strstr(err.message, "out of KV blocks") != NULL, "message: %s", err.message);
    CHECK(sv_kv_pool_incref(p, b[1]) == SV_OK && sv_kv_pool_refcount(p, b[1]) == 2, "incref");
    CHECK(sv_kv_pool_decref(p, b[1]) == SV_OK && sv_kv_pool_free_blocks(p) == 0, "decref to 1 keeps it");
    CHECK(sv_kv_pool_decref(p, b[1]) == SV_OK && sv_kv_pool_free_blocks(p) == 1, "decref to 0 frees");
    CHECK(sv_kv_pool_refcount(p, b[1]) == 0, "free block count 0");
    CHECK(sv_kv_pool_decref(p, b[1]) == SV_ERR_ARG && sv_kv_pool_free_blocks(p) == 1, "double free refused");
    CHECK(sv_kv_pool_incref(p, b[1]) == SV_ERR_ARG, "incref of a free block refused");
    CHECK(sv_kv_pool_incref(p, 4) == SV_ERR_ARG && sv_kv_pool_decref(p, 99) == SV_ERR_ARG, "out of range");
    CHECK(sv_kv_pool_refcount(p, 1000) == 0, "refcount out of range");
    CHECK(sv_kv_pool_alloc(p, &x, &err) == SV_OK && x == b[1], "LIFO reuse");
    CHECK(pool_ok(p), "check");
    for (int i = 0; i < 4; i++)
        sv_kv_pool_decref(p, b[i]);
    sv_kv_pool_stats_t st;
    sv_kv_pool_stats(p, &st);
    CHECK(st.free_blocks == 4 && st.used_blocks == 0 && st.high_water == 4 && st.allocs == 5 &&
              st.out_of_blocks == 1,
          "stats free %u used %u hw %u allocs %llu oob %llu", st.free_blocks, st.used_blocks, st.high_water,
          (unsigned long long)st.allocs, (unsigned long long)st.out_of_blocks);
    sv_kv_pool_destroy(p);
}

static void test_append_truncate(void) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(8, 2, 100);
    sv_kv_seq_t *s;
    sv_kv_copy_t cp;
    uint32_t nb;
    CHECK(sv_kv_seq_create(p, &s, &err) == SV_OK && sv_kv_seq_len(s) == 0, "create");
    CHECK(sv_kv_seq_append(s, 0, &cp, &err) == SV_OK && sv_kv_pool_free_blocks(p) == 8 && cp.n_pos == 0,
          "append 0");
    CHECK(sv_kv_seq_blocks_needed(s, 1) == 1 && sv_kv_seq_blocks_needed(s, 16) == 1 &&
              sv_kv_seq_blocks_needed(s, 17) == 2,
          "needed from empty");
    CHECK(sv_kv_seq_append(s, 1, &cp, &err) == SV_OK && sv_kv_pool_free_blocks(p) == 7, "first token");
    CHECK(cp.n_pos == 0 && cp.src == SV_KV_NO_BLOCK, "no copy");
    CHECK(sv_kv_seq_append(s, 15, NULL, &err) == SV_OK && sv_kv_pool_free_blocks(p) == 7, "fill block 0");
    CHECK(sv_kv_seq_blocks_needed(s, 1) == 1, "boundary");
    CHECK(sv_kv_seq_append(s, 1, NULL, &err) == SV_OK && sv_kv_pool_free_blocks(p) == 6, "block 1");
    CHECK(sv_kv_seq_append(s, 40, NULL, &err) == SV_OK && sv_kv_seq_len(s) == 57, "prefill 40");
    const uint32_t *tab = sv_kv_seq_blocks(s, &nb);
    CHECK(nb == 4 && sv_kv_pool_free_blocks(p) == 4, "57 tokens in 4 blocks (%u)", nb);
    CHECK(tab[0] != tab[1] && tab[1] != tab[2] && tab[2] != tab[3] && tab[0] != tab[3], "distinct");
    /* max_ctx: 100 */
    CHECK(sv_kv_seq_append(s, 44, NULL, &err) == SV_ERR_BUDGET && sv_kv_seq_len(s) == 57, "past max_ctx");
    CHECK(strstr(err.message, "max_ctx") != NULL, "message: %s", err.message);
    CHECK(sv_kv_seq_append(s, 43, NULL, &err) == SV_OK && sv_kv_seq_len(s) == 100, "up to max_ctx");
    sv_kv_seq_blocks(s, &nb);
    CHECK(nb == 7 && sv_kv_pool_free_blocks(p) == 1, "100 tokens in 7 blocks");
    /* truncate */
    CHECK(sv_kv_seq_truncate(s, 101, &err) == SV_ERR_ARG, "truncate past len");
    CHECK(sv_kv_seq_truncate(s, 99, &err) == SV_OK && sv_kv_pool_free_blocks(p) == 1, "rollback 1 in a block");
    CHECK(sv_kv_seq_truncate(s, 96, &err) == SV_OK && sv_kv_pool_free_blocks(p) == 2, "rollback to boundary");
    sv_kv_seq_blocks(s, &nb);
    CHECK(nb == 6 && sv_kv_seq_len(s) == 96, "6 blocks");
    CHECK(sv_kv_seq_truncate(s, 17, &err) == SV_OK && sv_kv_pool_free_blocks(p) == 6, "to 17");
    CHECK(sv_kv_seq_append(s, 15, NULL, &err) == SV_OK && sv_kv_pool_free_blocks(p) == 6, "refill block 1");
    CHECK(pool_ok(p), "check");
    sv_kv_seq_release(s);
    CHECK(sv_kv_seq_len(s) == 0 && sv_kv_pool_free_blocks(p) == 8, "release");
    CHECK(sv_kv_seq_append(s, 3, NULL, &err) == SV_OK, "usable after release");
    sv_kv_seq_destroy(s);
    CHECK(sv_kv_pool_free_blocks(p) == 8, "destroy frees");
    sv_kv_pool_destroy(p);
}

static void test_out_of_blocks(void) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(5, 2, 1000);
    sv_kv_seq_t *a, *b;
    sv_kv_seq_create(p, &a, &err);
    sv_kv_seq_create(p, &b, &err);
    sv_kv_seq_append(a, 40, NULL, &err); /* 3 blocks */
    sv_kv_seq_append(b, 20, NULL, &err); /* 2 blocks */
    uint32_t na, nb2, ta[8], tb[8];
    memcpy(ta, sv_kv_seq_blocks(a, &na), sizeof ta[0] * 3);
    memcpy(tb, sv_kv_seq_blocks(b, &nb2), sizeof tb[0] * 2);
    CHECK(sv_kv_seq_append(a, 8, NULL, &err) == SV_OK, "fits in the partial block");
    sv_kv_copy_t cp = {1, 2, 3};
    CHECK(sv_kv_seq_append(a, 1, &cp, &err) == SV_ERR_BUDGET && sv_kv_seq_len(a) == 48, "no block for 49");
    CHECK(strstr(err.message, "out of KV blocks") != NULL, "message: %s", err.message);
    CHECK(cp.n_pos == 0, "no copy reported");
    const uint32_t *t2 = sv_kv_seq_blocks(a, &na);
    CHECK(na == 3 && memcmp(t2, ta, 3 * sizeof *ta) == 0, "table unchanged");
    for (int i = 0; i < 3; i++)
        CHECK(sv_kv_pool_refcount(p, ta[i]) == 1, "ref unchanged");
    CHECK(sv_kv_pool_free_blocks(p) == 0 && pool_ok(p), "free unchanged");
    /* A fork whose append needs a COW block and a new block, one free. */
    sv_kv_seq_destroy(b);
    sv_kv_seq_t *c;
    sv_kv_seq_truncate(a, 40, &err);
    CHECK(sv_kv_seq_fork(a, &c, &err) == SV_OK, "fork");
    uint32_t loose;
    CHECK(sv_kv_pool_alloc(p, &loose, &err) == SV_OK && sv_kv_pool_free_blocks(p) == 1, "one free");
    CHECK(sv_kv_seq_blocks_needed(c, 9) == 2, "COW + boundary = 2");
    CHECK(sv_kv_seq_append(c, 9, &cp, &err) == SV_ERR_BUDGET, "COW + new block, 1 free");
    CHECK(sv_kv_pool_free_blocks(p) == 1 && sv_kv_seq_len(c) == 40 && sv_kv_pool_refcount(p, ta[2]) == 2,
          "unchanged after failed COW");
    CHECK(sv_kv_seq_append(c, 8, NULL, &err) == SV_ERR_ARG && sv_kv_seq_len(c) == 40,
          "a needed copy with copy == NULL is refused");
    CHECK(sv_kv_seq_append(c, 8, &cp, &err) == SV_OK && cp.n_pos == 8 && cp.src == ta[2] && sv_kv_seq_len(c) == 48,
          "COW alone fits");
    CHECK(sv_kv_pool_refcount(p, ta[2]) == 1 && sv_kv_pool_free_blocks(p) == 0, "a keeps ta[2]");
    CHECK(sv_kv_seq_append(a, 1, &cp, &err) == SV_OK && cp.n_pos == 0, "a writes in place now");
    sv_kv_pool_decref(p, loose);
    CHECK(pool_ok(p), "check");
    sv_kv_seq_destroy(a);
    sv_kv_seq_destroy(c);
    CHECK(sv_kv_pool_free_blocks(p) == 5 && pool_ok(p), "all free");
    sv_kv_pool_destroy(p);
}

static void test_fork_cow(void) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(16, 4, 256);
    sv_kv_seq_t *a, *b, *c;
    sv_kv_copy_t cp;
    uint32_t n;
    sv_kv_seq_create(p, &a, &err);
    sv_kv_seq_append(a, 37, NULL, &err); /* 2 full + 5 */
    uint32_t ta[3];
    memcpy(ta, sv_kv_seq_blocks(a, &n), sizeof ta);
    CHECK(sv_kv_seq_fork(a, &b, &err) == SV_OK && sv_kv_seq_len(b) == 37, "fork");
    const uint32_t *tb = sv_kv_seq_blocks(b, &n);
    CHECK(n == 3 && memcmp(tb, ta, sizeof ta) == 0, "child shares the table");
    for (int i = 0; i < 3; i++)
        CHECK(sv_kv_pool_refcount(p, ta[i]) == 2, "shared ref 2");
    CHECK(sv_kv_pool_free_blocks(p) == 13, "fork takes no block");
    CHECK(sv_kv_seq_blocks_needed(b, 1) == 1, "COW counted");
    CHECK(sv_kv_seq_append(b, 1, &cp, &err) == SV_OK, "child appends");
    tb = sv_kv_seq_blocks(b, &n);
    CHECK(cp.src == ta[2] && cp.dst == tb[2] && cp.dst != ta[2] && cp.n_pos == 5, "copy %u -> %u, %u positions",
          cp.src, cp.dst, cp.n_pos);
    CHECK(tb[0] == ta[0] && tb[1] == ta[1], "full blocks still shared");
    CHECK(sv_kv_pool_refcount(p, ta[2]) == 1 && sv_kv_pool_refcount(p, tb[2]) == 1, "partial now private");
    CHECK(sv_kv_seq_append(a, 1, &cp, &err) == SV_OK && cp.n_pos == 0, "parent writes in place");
    sv_kv_pool_stats_t st;
    sv_kv_pool_stats(p, &st);
    CHECK(st.cow_copies == 1, "one copy");
    /* Fork at a block boundary: nothing to copy. */
    sv_kv_seq_truncate(a, 32, &err);
    CHECK(sv_kv_seq_fork(a, &c, &err) == SV_OK, "fork at 32");
    CHECK(sv_kv_seq_append(c, 3, &cp, &err) == SV_OK && cp.n_pos == 0, "no copy at a boundary");
    /* Rolling back into a shared full block makes it partial: COW on write. */
    sv_kv_seq_truncate(c, 30, &err);
    sv_kv_seq_blocks(c, &n);
    CHECK(n == 2 && sv_kv_pool_refcount(p, ta[1]) == 3, "c back in shared block 1");
    CHECK(sv_kv_seq_append(c, 1, &cp, &err) == SV_OK && cp.src == ta[1] && cp.n_pos == 14, "COW after rollback");
    CHECK(sv_kv_pool_refcount(p, ta[1]) == 2, "c dropped its reference");
    CHECK(pool_ok(p), "check");
    sv_kv_seq_destroy(a);
    sv_kv_seq_destroy(b);
    sv_kv_seq_destroy(c);
    CHECK(sv_kv_pool_free_blocks(p) == 16, "all free");
    sv_kv_pool_destroy(p);
}

static void test_slab_adopt(void) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(8, 2, 48);
    sv_kv_seq_t *a, *b, *c = (sv_kv_seq_t *)1;
    CHECK(sv_kv_seq_create(p, &a, &err) == SV_OK && sv_kv_seq_create(p, &b, &err) == SV_OK, "two handles");
    CHECK(sv_kv_seq_create(p, &c, &err) == SV_ERR_BUDGET && c == NULL, "third refused");
    CHECK(strstr(err.message, "too many sequences") != NULL, "message: %s", err.message);
    CHECK(sv_kv_seq_fork(a, &c, &err) == SV_ERR_BUDGET, "fork refused too");
    sv_kv_seq_destroy(b);
    sv_kv_seq_destroy(b); /* a caller bug, refused */
    CHECK(sv_kv_seq_create(p, &b, &err) == SV_OK, "handle reused");
    CHECK(sv_kv_seq_create(p, &c, &err) == SV_ERR_BUDGET, "double destroy did not free two handles");
    uint32_t blk[3];
    for (int i = 0; i < 3; i++)
        sv_kv_pool_alloc(p, &blk[i], &err);
    CHECK(sv_kv_seq_adopt(a, blk, 49, &err) == SV_ERR_BUDGET, "past max_ctx");
    CHECK(sv_kv_seq_adopt(a, blk, 40, &err) == SV_OK && sv_kv_seq_len(a) == 40, "adopt 40 tokens");
    CHECK(sv_kv_pool_refcount(p, blk[0]) == 1, "references taken over, not added");
    CHECK(sv_kv_seq_adopt(a, blk, 16, &err) == SV_ERR_ARG, "adopt into non-empty");
    uint32_t freed = 7;
    CHECK(sv_kv_seq_adopt(b, &freed, 1, &err) == SV_ERR_ARG, "free block refused");
    CHECK(sv_kv_seq_adopt(b, blk, 0, &err) == SV_OK && sv_kv_seq_len(b) == 0, "adopt nothing");
    sv_kv_pool_stats_t st;
    sv_kv_pool_stats(p, &st);
    CHECK(st.seqs == 2 && st.seqs_high_water == 2, "seq stats");
    CHECK(pool_ok(p), "check");
    sv_kv_seq_destroy(a);
    sv_kv_seq_destroy(b);
    CHECK(sv_kv_pool_free_blocks(p) == 8, "all free");
    sv_kv_pool_destroy(p);
}

/* An evictor over blocks the test holds as a "cache". */
typedef struct {
    sv_kv_pool_t *p;
    uint32_t held[16], n, calls, last_wanted;
} toy_cache_t;

static uint32_t toy_evict(void *ctx, uint32_t wanted) {
    toy_cache_t *c = ctx;
    c->calls++;
    c->last_wanted = wanted;
    uint32_t freed = 0;
    while (c->n && freed < wanted) {
        sv_kv_pool_decref(c->p, c->held[--c->n]);
        freed++;
    }
    return freed;
}

static void test_evictor(void) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(6, 2, 256);
    toy_cache_t tc = {.p = p};
    for (int i = 0; i < 4; i++)
        sv_kv_pool_alloc(p, &tc.held[tc.n++], &err);
    sv_kv_pool_set_evictor(p, toy_evict, &tc);
    sv_kv_seq_t *s;
    sv_kv_seq_create(p, &s, &err);
    CHECK(sv_kv_seq_append(s, 32, NULL, &err) == SV_OK && tc.calls == 0, "2 free: no eviction");
    CHECK(sv_kv_seq_append(s, 40, NULL, &err) == SV_OK, "3 more blocks");
    CHECK(tc.calls == 1 && tc.last_wanted == 3 && tc.n == 1, "evictor asked for exactly the shortfall (%u)",
          tc.last_wanted);
    CHECK(sv_kv_seq_append(s, 40, NULL, &err) == SV_ERR_BUDGET && sv_kv_seq_len(s) == 72, "evictor short");
    CHECK(tc.calls == 2 && tc.n == 0 && sv_kv_pool_free_blocks(p) == 1, "its eviction stands");
    uint32_t x, y;
    CHECK(sv_kv_pool_alloc(p, &x, &err) == SV_OK && tc.calls == 2, "alloc from the free list");
    CHECK(sv_kv_pool_alloc(p, &y, &err) == SV_ERR_BUDGET && tc.calls == 3, "evictor has nothing");
    sv_kv_pool_stats_t st;
    sv_kv_pool_stats(p, &st);
    CHECK(st.evictor_calls == 3 && st.evicted == 4 && st.out_of_blocks == 2, "stats calls %llu evicted %llu",
          (unsigned long long)st.evictor_calls, (unsigned long long)st.evicted);
    sv_kv_pool_set_evictor(p, NULL, NULL);
    CHECK(sv_kv_pool_alloc(p, &y, &err) == SV_ERR_BUDGET && tc.calls == 3, "uninstalled");
    sv_kv_seq_destroy(s);
    sv_kv_pool_decref(p, x);
    CHECK(sv_kv_pool_free_blocks(p) == 6, "all free");
    sv_kv_pool_destroy(p);
}

/* sv_kv_pool_check must notice a caller bug: a block dropped twice while a
 * table still lists it. */
static void test_check_catches(void) {
    sv_error_t err;
    sv_kv_pool_t *p = mkpool(4, 1, 64);
    sv_kv_seq_t *s;
    sv_kv_seq_create(p, &s, &err);
    sv_kv_seq_append(s, 20, NULL, &err);
    uint32_t n;
    uint32_t b0 = sv_kv_seq_blocks(s, &n)[0];
    CHECK(pool_ok(p), "consistent");
    sv_kv_pool_decref(p, b0); /* the bug */
    CHECK(sv_kv_pool_check(p, &err) == SV_ERR_ARG, "check reports a table entry on the free list");
    sv_kv_pool_destroy(p); /* s is gone with it */
}

/* ---- random operations against a model ------------------------------------------- */

enum { RN = 32, RSEQ = 12, RCTX = 200, RLOOSE = 8 };

typedef struct {
    sv_kv_seq_t *h;
    uint32_t len, table[RCTX / 16 + 1];
    uint64_t val[RCTX]; /* value written at each position */
} mseq_t;

static uint64_t kv[RN][16]; /* the "backend": one value per slot */
static mseq_t ms[RSEQ];
static uint32_t loose[RLOOSE], n_loose;

static uint32_t nblk(uint32_t len) { return (len + 15) / 16; }

static void expected_refs(uint32_t *ref) {
    memset(ref, 0, RN * sizeof *ref);
    for (int i = 0; i < RSEQ; i++)
        if (ms[i].h)
            for (uint32_t j = 0; j < nblk(ms[i].len); j++)
                ref[ms[i].table[j]]++;
    for (uint32_t i = 0; i < n_loose; i++)
        ref[loose[i]]++;
}

static int verify(sv_kv_pool_t *p, long step) {
    uint32_t ref[RN], zero = 0;
    int ok = 1;
    expected_refs(ref);
    for (uint32_t b = 0; b < RN; b++) {
        if (sv_kv_pool_refcount(p, b) != ref[b]) {
            fprintf(stderr, "step %ld: block %u ref %u, model %u\n", step, b, sv_kv_pool_refcount(p, b), ref[b]);
            ok = 0;
        }
        zero += ref[b] == 0;
    }
    sv_kv_pool_stats_t st;
    sv_kv_pool_stats(p, &st);
    if (st.free_blocks != zero || st.free_blocks + st.used_blocks != RN)
        ok = 0;
    for (int i = 0; i < RSEQ; i++) {
        if (!ms[i].h)
            continue;
        uint32_t n;
        const uint32_t *t = sv_kv_seq_blocks(ms[i].h, &n);
        if (sv_kv_seq_len(ms[i].h) != ms[i].len || n != nblk(ms[i].len) || memcmp(t, ms[i].table, n * sizeof *t))
            ok = 0;
        for (uint32_t q = 0; q < ms[i].len && ok; q++)
            if (kv[t[q / 16]][q % 16] != ms[i].val[q]) {
                fprintf(stderr, "step %ld: seq %d reads a wrong value at %u\n", step, i, q);
                ok = 0;
            }
    }
    return ok && pool_ok(p);
}

static void test_random(uint64_t seed, int steps) {
    sv_error_t err;
    sv_rng_t r;
    sv_rng_seed(&r, seed);
    sv_kv_pool_t *p = mkpool(RN, RSEQ, RCTX);
    memset(ms, 0, sizeof ms);
    n_loose = 0;
    int fails = 0;
    long n_oob = 0, n_cow = 0, n_fork = 0;
    for (int step = 0; step < steps && fails < 5; step++) {
        int i = (int)sv_rng_below(&r, RSEQ);
        mseq_t *m = &ms[i];
        uint32_t op = sv_rng_below(&r, 100);
        if (!m->h) {
            if (op < 60) {
                CHECK(sv_kv_seq_create(p, &m->h, &err) == SV_OK, "create");
                m->len = 0;
            }
        } else if (op < 45) { /* append: mostly decode steps, sometimes a prefill chunk */
            uint32_t n_new = op < 30 ? 1 + sv_rng_below(&r, 3) : 1 + sv_rng_below(&r, 60);
            uint32_t ref_before[RN], free_before = sv_kv_pool_free_blocks(p);
            expected_refs(ref_before);
            uint32_t want = sv_kv_seq_blocks_needed(m->h, n_new);
            sv_kv_copy_t cp;
            sv_status st = sv_kv_seq_append(m->h, n_new, &cp, &err);
            if (m->len + n_new > RCTX) {
                CHECK(st == SV_ERR_BUDGET, "past max_ctx");
            } else if (want > free_before) {
                n_oob++;
                CHECK(st == SV_ERR_BUDGET && sv_kv_pool_free_blocks(p) == free_before, "out of blocks");
                for (uint32_t b = 0; b < RN; b++)
                    CHECK(sv_kv_pool_refcount(p, b) == ref_before[b], "out of blocks changed block %u", b);
            } else {
                CHECK(st == SV_OK, "append: %s", err.message);
                CHECK(free_before - sv_kv_pool_free_blocks(p) == want, "blocks_needed %u", want);
                uint32_t n;
                const uint32_t *t = sv_kv_seq_blocks(m->h, &n);
                if (cp.n_pos) {
                    n_cow++;
                    CHECK(cp.src == m->table[nblk(m->len) - 1] && ref_before[cp.src] > 1 && ref_before[cp.dst] == 0 &&
                              cp.n_pos == m->len % 16 && t[nblk(m->len) - 1] == cp.dst,
                          "copy record");
                    memcpy(kv[cp.dst], kv[cp.src], cp.n_pos * sizeof kv[0][0]);
                } else if (m->len % 16) {
                    CHECK(ref_before[m->table[nblk(m->len) - 1]] == 1, "shared partial block written without a copy");
                }
                for (uint32_t j = nblk(m->len); j < n; j++)
                    CHECK(ref_before[t[j]] == 0, "new block %u was not free", t[j]);
                memcpy(m->table, t, n * sizeof *t);
                for (uint32_t q = m->len; q < m->len + n_new; q++) {
                    m->val[q] = sv_rng_next(&r);
                    kv[t[q / 16]][q % 16] = m->val[q];
                }
                m->len += n_new;
            }
        } else if (op < 60) { /* rollback: mostly by one token */
            uint32_t n = op < 52 ? (m->len ? m->len - 1 : 0) : sv_rng_below(&r, m->len + 1);
            CHECK(sv_kv_seq_truncate(m->h, n, &err) == SV_OK, "truncate");
            m->len = n;
        } else if (op < 72) { /* fork into a free slot */
            int j = 0;
            while (j < RSEQ && ms[j].h)
                j++;
            if (j < RSEQ) {
                n_fork++;
                CHECK(sv_kv_seq_fork(m->h, &ms[j].h, &err) == SV_OK, "fork");
                ms[j].len = m->len;
                memcpy(ms[j].table, m->table, sizeof m->table);
                memcpy(ms[j].val, m->val, sizeof m->val);
            } else {
                sv_kv_seq_t *x;
                CHECK(sv_kv_seq_fork(m->h, &x, &err) == SV_ERR_BUDGET, "slab full");
            }
        } else if (op < 78) {
            sv_kv_seq_release(m->h);
            m->len = 0;
        } else if (op < 88) {
            sv_kv_seq_destroy(m->h);
            m->h = NULL;
        } else if (op < 94) { /* a loose holder: take a block or a second reference */
            if (n_loose < RLOOSE) {
                uint32_t b;
                if (m->len && sv_rng_below(&r, 2)) {
                    b = m->table[sv_rng_below(&r, nblk(m->len))];
                    CHECK(sv_kv_pool_incref(p, b) == SV_OK, "incref");
                    loose[n_loose++] = b;
                } else if (sv_kv_pool_alloc(p, &b, &err) == SV_OK) {
                    loose[n_loose++] = b;
                } else {
                    CHECK(sv_kv_pool_free_blocks(p) == 0, "alloc failed with free blocks");
                }
            }
        } else if (n_loose) {
            uint32_t k = sv_rng_below(&r, n_loose);
            CHECK(sv_kv_pool_decref(p, loose[k]) == SV_OK, "decref");
            loose[k] = loose[--n_loose];
        }
        if (!verify(p, step)) {
            CHECK(0, "seed %llu step %d", (unsigned long long)seed, step);
            fails++;
        }
    }
    /* Cancellation frees every block. */
    for (int i = 0; i < RSEQ; i++)
        sv_kv_seq_destroy(ms[i].h), ms[i].h = NULL;
    while (n_loose)
        sv_kv_pool_decref(p, loose[--n_loose]);
    sv_kv_pool_stats_t st;
    sv_kv_pool_stats(p, &st);
    CHECK(st.free_blocks == RN && st.seqs == 0 && pool_ok(p), "everything returned: %u free", st.free_blocks);
    CHECK(n_oob > 10 && n_cow > 10 && n_fork > 10, "random run exercised out-of-blocks %ld, COW %ld, fork %ld", n_oob,
          n_cow, n_fork);
    printf("random seed %llu: %d steps, %ld out-of-blocks, %ld copies, %ld forks, high water %u\n",
           (unsigned long long)seed, steps, n_oob, n_cow, n_fork, st.high_water);
    sv_kv_pool_destroy(p);
}

int main(void) {
    test_blocks_for_bytes();
    test_create();
    test_blocks();
    test_append_truncate();
    test_out_of_blocks();
    test_fork_cow();
    test_slab_adopt();
    test_evictor();
    test_check_catches();
    for (uint64_t seed = 1; seed <= 4; seed++)
        test_random(seed, 5000);
    return test_summary("kv_pool: budget helper, blocks, tables, fork/COW, evictor, random vs model");
}
