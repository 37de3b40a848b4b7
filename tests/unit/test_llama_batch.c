/* test_llama_batch — the paged KV cache and ragged batches (issue 6).
 *
 * The promise: a sequence's logits are bit-identical whether it runs alone
 * (one call, its own cache with an identity block table) or inside ragged
 * batches with other sequences, in shuffled physical blocks. Checked by a
 * small scheduler simulation on tiny GGUF models (tiny_model.h):
 * - 32 requests (4 of them forks) arrive over time; each step runs 2..8 of
 *   them together, each contributing a prefill chunk, a decode row or a
 *   multi-token extend, with blocks taken from a shuffled free list and
 *   recycled when a request ends;
 * - some requests write wrong tokens and roll back over them (rewriting
 *   positions) inside a batch;
 * - forks share their parent's blocks and copy a block before writing into
 *   it (copy-on-write), including partial blocks and shared blocks that a
 *   rollback rewrites;
 * - runs with 2 threads and 64 rows per step, and with 1 thread and 5 rows
 *   per step (sequences split across internal steps);
 * - 8 sequences sharing a 10-block prefix decode together (the step's
 *   block tables overflow and are cut);
 * - a bad batch is refused before anything is written; a wrong block table
 *   changes the logits (the comparison can fail);
 * - the backend ops on a paged view equal them on contiguous views. The
 *   comparisons above share one attention kernel on both sides (the alone
 *   run is an identity table), so this is what catches a kernel that reads
 *   the wrong block consistently. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/backend/cpu.h"
#include "src/model/llama.h"
#include "test.h"
#include "tiny_model.h"

enum {
    BCTX = 192,                /* the models' context */
    NSEQ = 32,                 /* requests in the simulation */
    MAXB = BCTX / 16 + 1,      /* blocks per sequence */
    MAXROWS = 8 * 20,          /* rows per batch: 8 sequences of at most 20 */
    POOL = 128,                /* physical blocks */
};

static sv_backend_t *be1, *be2; /* 1 and 2 threads */
static char dir[] = "/tmp/sv_test_llama_batch_XXXXXX";

static sv_llama_t *load(sv_backend_t *be, const char *arch, bool biases, sv_error_t *err) {
    model_spec_t sp = {.arch = arch, .biases = biases, .ctx = BCTX};
    return load_tiny(dir, &sp, be, err);
}

static uint64_t trng;
static int32_t rnd(int32_t n) { /* 0 .. n-1 */
    trng ^= trng << 13;
    trng ^= trng >> 7;
    trng ^= trng << 17;
    return (int32_t)((trng >> 33) % (uint64_t)n);
}

/* Every position's logits of toks[0..n) run alone in one call: (n, VOCAB). */
static float *alone(sv_llama_t *m, const int32_t *toks, int32_t n) {
    sv_error_t err;
    sv_llama_state_t *s = NULL;
    int32_t pos[BCTX];
    float *out = malloc(sizeof(float) * (size_t)n * VOCAB);
    for (int32_t i = 0; i < n; i++)
        pos[i] = i;
    CHECK(sv_llama_state_create(m, n, 64, &s, &err) == SV_OK, "%s", err.message);
    if (s)
        CHECK(sv_llama_forward(m, s, toks, pos, n, SV_LLAMA_LOGITS_ALL, out, &err) == SV_OK, "%s",
              err.message);
    sv_llama_state_destroy(s);
    return out;
}

/* ---- a block pool with reference counts (what kv_pool.h will do) ---- */

typedef struct pool {
    int32_t free[POOL], n_free;
    int32_t ref[POOL];
} pool_t;

static void pool_init(pool_t *p, int32_t n) {
    p->n_free = n;
    for (int32_t i = 0; i < n; i++) {
        p->free[i] = i;
        p->ref[i] = 0;
    }
    for (int32_t i = n - 1; i > 0; i--) { /* shuffle: blocks come in no order */
        int32_t j = rnd(i + 1), t = p->free[i];
        p->free[i] = p->free[j];
        p->free[j] = t;
    }
}

static int32_t pool_get(pool_t *p) {
    if (p->n_free == 0)
        return -1;
    int32_t j = rnd(p->n_free), b = p->free[j];
    p->free[j] = p->free[--p->n_free];
    p->ref[b] = 1;
    return b;
}

static void pool_put(pool_t *p, int32_t b) {
    if (--p->ref[b] == 0)
        p->free[p->n_free++] = b;
}

/* ---- one request ---- */

typedef struct tseq {
    int32_t toks[BCTX]; /* the text it ends with */
    int32_t n, prompt;  /* final length; prefix run as prefill chunks */
    int32_t len;        /* positions cached */
    int32_t good;       /* leading positions that hold toks (<= len) */
    uint32_t blocks[MAXB];
    int32_t n_blocks;
    int parent, fork_at; /* a fork: shares parent's first fork_at positions */
    bool started, done;
    float *ref;          /* alone(toks) */
} tseq_t;

typedef struct stats {
    int rows_checked, bad, steps, max_seqs, rollbacks, cows, recycled;
} stats_t;

/* Makes positions [p0, p1) of s writable: blocks appended from the pool,
 * shared blocks copied first. */
static bool make_writable(sv_llama_kv_t *kv, pool_t *p, tseq_t *s, int32_t p0, int32_t p1,
                          stats_t *st) {
    sv_error_t err;
    for (int32_t b = p0 / 16; b <= (p1 - 1) / 16; b++) {
        if (b >= s->n_blocks) {
            int32_t nb = pool_get(p);
            if (nb < 0)
                return false;
            s->blocks[s->n_blocks++] = nb;
        } else if (p->ref[s->blocks[b]] > 1) {
            int32_t nb = pool_get(p);
            if (nb < 0)
                return false;
            CHECK(sv_llama_kv_copy_block(kv, s->blocks[b], nb, &err) == SV_OK, "%s", err.message);
            pool_put(p, s->blocks[b]);
            s->blocks[b] = nb;
            st->cows++;
        }
    }
    return true;
}

/* Gives back the blocks past len. */
static void trim(pool_t *p, tseq_t *s) {
    while (s->n_blocks > (s->len + 15) / 16)
        pool_put(p, s->blocks[--s->n_blocks]);
}

/* Builds NSEQ requests; requests 28..31 fork earlier ones. */
static void make_requests(tseq_t *q, sv_llama_t *m) {
    for (int i = 0; i < NSEQ; i++) {
        tseq_t *s = &q[i];
        memset(s, 0, sizeof *s);
        s->parent = -1;
        s->n = 2 + rnd(BCTX - 40);
        if (i % 7 == 3)
            s->n = BCTX; /* some use the whole context */
        s->prompt = 1 + rnd(s->n);
        for (int32_t j = 0; j < BCTX; j++) /* all of them: a fork may lengthen its parent */
            s->toks[j] = rnd(VOCAB);
    }
    static const int forks[][3] = {/* child, parent, fork_at */
                                   {28, 3, 37}, {29, 3, 32}, {30, 10, 50}, {31, 28, 60}};
    for (size_t f = 0; f < sizeof forks / sizeof *forks; f++) {
        tseq_t *s = &q[forks[f][0]], *par = &q[forks[f][1]];
        s->parent = forks[f][1];
        s->fork_at = forks[f][2];
        if (par->n < s->fork_at + 1)
            par->n = s->fork_at + 1 + rnd(20);
        if (s->n < s->fork_at + 2)
            s->n = s->fork_at + 2 + rnd(60);
        memcpy(s->toks, par->toks, sizeof(int32_t) * (size_t)s->fork_at);
        s->prompt = s->fork_at + rnd(s->n - s->fork_at);
    }
    /* (31 forks 28 after 28 has its text: 31's prefix is 28's, whose prefix is 3's) */
    for (int i = 0; i < NSEQ; i++)
        q[i].ref = alone(m, q[i].toks, q[i].n);
}

/* Runs the simulation on model m with a cache of `max_tokens` rows per
 * step; every checked row must equal the alone reference bit for bit. */
static void simulate(sv_llama_t *m, int32_t max_tokens, uint64_t seed, const char *what) {
    sv_error_t err;
    trng = seed;
    tseq_t *q = malloc(sizeof(tseq_t) * NSEQ);
    make_requests(q, m);
    sv_llama_kv_t *kv = NULL;
    CHECK(sv_llama_kv_create(m, POOL, max_tokens, &kv, &err) == SV_OK, "%s", err.message);
    if (!kv) {
        free(q);
        return;
    }
    pool_t *pool = malloc(sizeof *pool);
    pool_init(pool, POOL);
    stats_t st = {0};
    static int32_t tok[MAXROWS], pos[MAXROWS], seq[MAXROWS], lrows[MAXROWS];
    static bool check_row[MAXROWS];
    static float logits[MAXROWS * VOCAB];
    sv_llama_seq_t seqs[8];
    int next = 0; /* next plain request to start */
    bool ok = true;
    for (int step = 0; step < 5000 && ok; step++) {
        /* arrivals: plain requests up to 8 active; forks when their parent
         * has its prefix cached (and not rolled past it) */
        int active[NSEQ], n_act = 0;
        for (int i = 0; i < NSEQ; i++)
            if (q[i].started && !q[i].done)
                n_act++;
        while (n_act < 8 && next < NSEQ && q[next].parent < 0) {
            q[next++].started = true;
            n_act++;
        }
        while (next < NSEQ && q[next].parent >= 0)
            next++;
        for (int i = 0; i < NSEQ; i++) {
            tseq_t *s = &q[i], *par = s->parent >= 0 ? &q[s->parent] : NULL;
            if (!par || s->started || !par->started || par->done || par->len != par->good ||
                par->good < s->fork_at)
                continue;
            s->started = true;
            s->n_blocks = (s->fork_at + 15) / 16;
            for (int32_t b = 0; b < s->n_blocks; b++) {
                s->blocks[b] = par->blocks[b];
                pool->ref[s->blocks[b]]++;
            }
            s->len = s->good = s->fork_at;
        }
        n_act = 0;
        for (int i = 0; i < NSEQ; i++) /* (a finished parent waits for its fork) */
            if (q[i].started && !q[i].done && !(q[i].good == q[i].n && q[i].len == q[i].n))
                active[n_act++] = i;
        if (n_act == 0)
            break;
        /* 2..8 of them, in random order */
        for (int i = n_act - 1; i > 0; i--) {
            int j = rnd(i + 1), t = active[i];
            active[i] = active[j];
            active[j] = t;
        }
        int k = n_act == 1 ? 1 : 2 + rnd((n_act < 8 ? n_act : 8) - 1);
        int32_t n = 0, nl = 0;
        for (int bi = 0; bi < k && ok; bi++) {
            tseq_t *s = &q[active[bi]];
            int32_t p0, cnt;
            bool correct = true;
            if (s->len > s->good) { /* roll back over the wrong tokens, and maybe further */
                p0 = s->good - rnd((s->good < 3 ? s->good : 3) + 1);
                cnt = 1 + rnd(4);
                st.rollbacks++;
            } else if (s->len < s->n - 3 && s->len > 0 && rnd(8) == 0) { /* wrong tokens */
                p0 = s->len;
                cnt = 1 + rnd(3);
                correct = false;
            } else {
                p0 = s->len;
                cnt = s->len < s->prompt ? 1 + rnd(s->prompt - s->len < 20 ? s->prompt - s->len : 20)
                                         : (rnd(3) == 0 ? 2 + rnd(3) : 1);
            }
            if (cnt > s->n - p0)
                cnt = s->n - p0;
            if (!make_writable(kv, pool, s, p0, p0 + cnt, &st)) {
                CHECK(0, "%s: the block pool ran dry", what);
                ok = false;
                break;
            }
            bool all = rnd(2) == 0;
            for (int32_t j = 0; j < cnt; j++) {
                int32_t t = s->toks[p0 + j];
                if (!correct) /* differs from the text at the first row */
                    t = j == 0 ? (t + 1 + rnd(VOCAB - 1)) % VOCAB : rnd(VOCAB);
                tok[n] = t;
                pos[n] = p0 + j;
                seq[n] = bi;
                check_row[n] = correct;
                if (all || j == cnt - 1)
                    lrows[nl++] = n;
                n++;
            }
            s->len = p0 + cnt;
            if (correct)
                s->good = s->len;
            seqs[bi] = (sv_llama_seq_t){s->blocks, s->n_blocks, s->len};
        }
        if (!ok)
            break;
        sv_llama_batch_t b = {n, tok, pos, seq, k, seqs, nl, lrows, NULL, NULL, NULL, NULL};
        sv_status rc = sv_llama_forward_batch(m, kv, &b, logits, &err);
        CHECK(rc == SV_OK, "%s: step %d: %s", what, step, err.message);
        if (rc) {
            ok = false;
            break;
        }
        st.steps++;
        st.max_seqs = k > st.max_seqs ? k : st.max_seqs;
        for (int32_t i = 0; i < nl; i++) {
            int32_t r = lrows[i];
            if (!check_row[r])
                continue;
            const tseq_t *s = &q[active[seq[r]]];
            st.rows_checked++;
            if (memcmp(logits + (size_t)i * VOCAB, s->ref + (size_t)pos[r] * VOCAB,
                       sizeof(float) * VOCAB) != 0) {
                if (st.bad++ < 5)
                    fprintf(stderr, "%s: step %d: request %d position %d differs from alone\n",
                            what, step, active[seq[r]], pos[r]);
            }
        }
        for (int bi = 0; bi < k; bi++) {
            tseq_t *s = &q[active[bi]];
            trim(pool, s);
        }
        /* requests that end give their blocks back, unless a fork of theirs
         * has not started yet */
        for (int i = 0; i < NSEQ; i++) {
            tseq_t *s = &q[i];
            if (!s->started || s->done || s->good < s->n || s->len != s->n)
                continue;
            bool waiting = false;
            for (int c = 0; c < NSEQ; c++)
                waiting = waiting || (q[c].parent == i && !q[c].started);
            if (waiting)
                continue;
            s->done = true;
            for (int32_t bl = 0; bl < s->n_blocks; bl++)
                pool_put(pool, s->blocks[bl]);
            st.recycled += s->n_blocks;
            s->n_blocks = 0;
        }
    }
    int n_done = 0;
    for (int i = 0; i < NSEQ; i++)
        n_done += q[i].done;
    CHECK(n_done == NSEQ, "%s: %d of %d requests finished", what, n_done, NSEQ);
    CHECK(pool->n_free == POOL, "%s: %d blocks not given back", what, POOL - pool->n_free);
    CHECK(st.bad == 0, "%s: %d of %d rows differ from the sequence run alone", what, st.bad,
          st.rows_checked);
    /* the run exercised what it claims */
    CHECK(st.rows_checked > 1000 && st.max_seqs == 8 && st.rollbacks > 10 && st.cows >= 3 &&
              st.recycled > POOL,
          "%s: a weak run (%d rows, at most %d sequences, %d rollbacks, %d copies, %d recycled)",
          what, st.rows_checked, st.max_seqs, st.rollbacks, st.cows, st.recycled);
    printf("  %s: %d steps, %d rows checked, <= %d sequences a step, %d rollbacks, %d block "
           "copies, %d blocks recycled\n",
           what, st.steps, st.rows_checked, st.max_seqs, st.rollbacks, st.cows, st.recycled);
    for (int i = 0; i < NSEQ; i++)
        free(q[i].ref);
    free(q);
    free(pool);
    sv_llama_kv_destroy(kv);
}

/* A 150-token prefix shared by 8 sequences (9 full blocks and a partial
 * one), which then decode together: each copies the partial block on its
 * first write, and the step's tables (8 x 10 entries) exceed the cache's
 * table buffer (24 + 12), so the batch runs as several internal steps. */
static void test_shared_prefix(sv_llama_t *m) {
    enum { P = 150, D = 8, F = 8, NB = 24 };
    sv_error_t err;
    trng = 99;
    int32_t toks[F][P + D];
    for (int32_t j = 0; j < P + D; j++)
        toks[0][j] = rnd(VOCAB);
    float *ref[F];
    for (int f = 0; f < F; f++) {
        memcpy(toks[f], toks[0], sizeof(int32_t) * P);
        for (int32_t j = P; j < P + D && f > 0; j++)
            toks[f][j] = rnd(VOCAB);
        ref[f] = alone(m, toks[f], P + D);
    }
    sv_llama_kv_t *kv = NULL;
    CHECK(sv_llama_kv_create(m, NB, 64, &kv, &err) == SV_OK, "%s", err.message);
    if (!kv)
        return;
    trng = 7;
    pool_t pool;
    pool_init(&pool, NB);
    uint32_t blocks[F][MAXB];
    int32_t nb[F];
    nb[0] = (P + 15) / 16;
    for (int32_t b = 0; b < nb[0]; b++)
        blocks[0][b] = (uint32_t)pool_get(&pool);
    /* the prefix, in chunks of 50 */
    int32_t pos[P], zero[P] = {0}, last;
    float lg[F * VOCAB];
    for (int32_t i = 0; i < P; i++)
        pos[i] = i;
    for (int32_t c = 0; c < P; c += 50) {
        last = 49;
        sv_llama_seq_t sq = {blocks[0], nb[0], c + 50};
        sv_llama_batch_t b = {50, toks[0] + c, pos + c, zero, 1, &sq, 1, &last, NULL, NULL, NULL, NULL};
        CHECK(sv_llama_forward_batch(m, kv, &b, lg, &err) == SV_OK, "%s", err.message);
    }
    CHECK(memcmp(lg, ref[0] + (size_t)(P - 1) * VOCAB, sizeof(float) * VOCAB) == 0,
          "shared prefix: the prefill differs from alone");
    for (int f = 1; f < F; f++) { /* fork */
        nb[f] = nb[0];
        memcpy(blocks[f], blocks[0], sizeof(uint32_t) * (size_t)nb[0]);
        for (int32_t b = 0; b < nb[0]; b++)
            pool.ref[blocks[0][b]]++;
    }
    int bad = 0, cows = 0;
    for (int32_t d = 0; d < D; d++) {
        int32_t t[F], p[F], s[F], lr[F];
        sv_llama_seq_t sq[F];
        for (int f = 0; f < F; f++) {
            int32_t b = (P + d) / 16;
            if (b == nb[f]) {
                blocks[f][nb[f]++] = (uint32_t)pool_get(&pool);
            } else if (pool.ref[blocks[f][b]] > 1) {
                int32_t fresh = pool_get(&pool);
                CHECK(fresh >= 0 &&
                          sv_llama_kv_copy_block(kv, (int32_t)blocks[f][b], fresh, &err) == SV_OK,
                      "copy-on-write");
                pool_put(&pool, blocks[f][b]);
                blocks[f][b] = (uint32_t)fresh;
                cows++;
            }
            t[f] = toks[f][P + d];
            p[f] = P + d;
            s[f] = f;
            lr[f] = f;
            sq[f] = (sv_llama_seq_t){blocks[f], nb[f], P + d + 1};
        }
        sv_llama_batch_t b = {F, t, p, s, F, sq, F, lr, NULL, NULL, NULL, NULL};
        CHECK(sv_llama_forward_batch(m, kv, &b, lg, &err) == SV_OK, "%s", err.message);
        for (int f = 0; f < F; f++)
            bad += memcmp(lg + (size_t)f * VOCAB, ref[f] + (size_t)(P + d) * VOCAB,
                          sizeof(float) * VOCAB) != 0;
    }
    CHECK(bad == 0, "shared prefix: %d of %d decode rows differ from alone", bad, F * D);
    CHECK(cows == F - 1, "shared prefix: %d copies of the partial block, wanted %d", cows, F - 1);
    for (int f = 0; f < F; f++)
        free(ref[f]);
    sv_llama_kv_destroy(kv);
}

/* Bad batches are refused, naming the problem, before anything is
 * written; a wrong block table changes the logits. */
static void test_errors(sv_llama_t *m) {
    sv_error_t err;
    trng = 5;
    int32_t ta[40], tb[40], pos[40];
    for (int i = 0; i < 40; i++) {
        ta[i] = rnd(VOCAB);
        tb[i] = rnd(VOCAB);
        pos[i] = i;
    }
    float *ra = alone(m, ta, 21);
    sv_llama_kv_t *kv = NULL;
    CHECK(sv_llama_kv_create(m, 8, 16, &kv, &err) == SV_OK, "%s", err.message);
    if (!kv) {
        free(ra);
        return;
    }
    CHECK(sv_llama_kv_block_bytes(m) == (size_t)LAYERS * 2 * 16 * KVH * HD * 4 &&
              sv_llama_kv_n_blocks(kv) == 8 &&
              sv_llama_kv_bytes(kv) >= 8 * sv_llama_kv_block_bytes(m),
          "kv: %zu bytes a block, %zu held", sv_llama_kv_block_bytes(m), sv_llama_kv_bytes(kv));
    uint32_t ba[3] = {3, 5, 6}, bb[3] = {7, 1, 0};
    int32_t zero[40] = {0}, last = 19;
    float lg[2 * VOCAB];
    /* A and B, 20 positions each, in their own blocks */
    sv_llama_seq_t sa = {ba, 2, 20}, sb = {bb, 2, 20};
    sv_llama_batch_t b = {20, ta, pos, zero, 1, &sa, 1, &last, NULL, NULL, NULL, NULL};
    CHECK(sv_llama_forward_batch(m, kv, &b, lg, &err) == SV_OK, "%s", err.message);
    b = (sv_llama_batch_t){20, tb, pos, zero, 1, &sb, 1, &last, NULL, NULL, NULL, NULL};
    CHECK(sv_llama_forward_batch(m, kv, &b, lg, &err) == SV_OK, "%s", err.message);

    /* Each case: A rewriting its positions 0..3 with B's tokens (which
     * would change A's cache) next to one broken thing. */
    int32_t tok[8], ps[8] = {0, 1, 2, 3, 20, 21, 22, 23}, sq[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    int32_t lr[2] = {3, 7};
    memcpy(tok, tb, sizeof(int32_t) * 4);
    memcpy(tok + 4, tb + 20, sizeof(int32_t) * 4);
    struct {
        const char *says;
        int what;
    } cases[] = {{"token", 0}, {"grouped", 1}, {"does not follow", 2}, {"length", 3},
                 {"outside the cache", 4}, {"blocks for length", 5}, {"logit row", 6},
                 {"context", 7}, {"sequence 2 outside", 8}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int32_t t2[8], p2[8], s2[8], l2[2];
        uint32_t bb2[3];
        memcpy(t2, tok, sizeof t2);
        memcpy(p2, ps, sizeof p2);
        memcpy(s2, sq, sizeof s2);
        memcpy(l2, lr, sizeof l2);
        memcpy(bb2, bb, sizeof bb2);
        sv_llama_seq_t ss[2] = {{ba, 2, 4}, {bb2, 3, 24}};
        switch (cases[i].what) {
        case 0: t2[6] = VOCAB; break;
        case 1: s2[7] = 0; break;
        case 2: p2[6] = 23; break;
        case 3: ss[1].len = 25; break;
        case 4: bb2[1] = 8; break;
        case 5: ss[1].n_blocks = 1; break;
        case 6: l2[1] = 3; break;
        case 7: ss[1].len = BCTX + 1, p2[4] = BCTX - 3, p2[5] = BCTX - 2, p2[6] = BCTX - 1,
                p2[7] = BCTX; break;
        case 8: s2[7] = 2; break;
        }
        sv_llama_batch_t bad = {8, t2, p2, s2, 2, ss, 2, l2, NULL, NULL, NULL, NULL};
        sv_error_clear(&err);
        sv_status rc = sv_llama_forward_batch(m, kv, &bad, lg, &err);
        CHECK(rc == SV_ERR_ARG && strstr(err.message, cases[i].says),
              "case %zu: got %s '%s', wanted an error naming '%s'", i, sv_status_name(rc),
              err.message, cases[i].says);
    }
    /* A's cache is untouched: its next position equals alone */
    int32_t t20 = ta[20], p20 = 20;
    uint32_t bl3[3] = {3, 5, 6};
    sv_llama_seq_t sa3 = {bl3, 2, 21};
    int32_t zero1 = 0;
    b = (sv_llama_batch_t){1, &t20, &p20, &zero1, 1, &sa3, 1, &zero1, NULL, NULL, NULL, NULL};
    CHECK(sv_llama_forward_batch(m, kv, &b, lg, &err) == SV_OK, "%s", err.message);
    CHECK(memcmp(lg, ra + 20 * VOCAB, sizeof(float) * VOCAB) == 0,
          "a refused batch changed the cache");
    /* ... and reading B's blocks instead gives other logits */
    sv_llama_seq_t wrong = {bb, 2, 21};
    b.seqs = &wrong;
    CHECK(sv_llama_forward_batch(m, kv, &b, lg, &err) == SV_OK, "%s", err.message);
    CHECK(memcmp(lg, ra + 20 * VOCAB, sizeof(float) * VOCAB) != 0,
          "another sequence's blocks give the same logits");
    CHECK(sv_llama_kv_copy_block(kv, 0, 8, &err) == SV_ERR_ARG &&
              sv_llama_kv_copy_block(kv, -1, 0, &err) == SV_ERR_ARG &&
              sv_llama_kv_copy_block(kv, 2, 2, &err) == SV_OK,
          "copy_block range checks");
    sv_llama_kv_t *k2 = NULL;
    CHECK(sv_llama_kv_create(m, 0, 16, &k2, &err) == SV_ERR_ARG &&
              sv_llama_kv_create(m, 4, 0, &k2, &err) == SV_ERR_ARG,
          "kv_create accepts 0 blocks or 0 rows");
    sv_llama_kv_destroy(NULL);
    free(ra);
    sv_llama_kv_destroy(kv);
}

/* The backend ops on a paged view equal them on contiguous views, bit for
 * bit (test_backend checks the contiguous ones against a naive reference):
 * three sequences in shuffled blocks, their rows interleaved in one call. */
static void test_paged_ops(sv_backend_t *be) {
    enum { H = 6, G = 2, D = 40, KVD = G * D, QD = H * D, NS = 3, BLK = 16, NPHYS = 12 };
    static const int32_t lens[NS] = {37, 70, 5};
    const int32_t rows = 37 + 70 + 5;
    sv_error_t err;
    trng = 11;
    float *k = malloc(sizeof(float) * rows * KVD), *v = malloc(sizeof(float) * rows * KVD);
    float *q = malloc(sizeof(float) * rows * QD), *o1 = malloc(sizeof(float) * rows * QD);
    float *o2 = malloc(sizeof(float) * rows * QD);
    float *kc = malloc(sizeof(float) * NPHYS * BLK * KVD), *vc = malloc(sizeof(float) * NPHYS * BLK * KVD);
    float *kp = malloc(sizeof(float) * NPHYS * BLK * KVD), *vp = malloc(sizeof(float) * NPHYS * BLK * KVD);
    for (int32_t i = 0; i < rows * KVD; i++) {
        k[i] = (float)rnd(2001) / 1000.0f - 1.0f;
        v[i] = (float)rnd(2001) / 1000.0f - 1.0f;
    }
    for (int32_t i = 0; i < rows * QD; i++)
        q[i] = (float)rnd(2001) / 1000.0f - 1.0f;
    for (int32_t i = 0; i < NPHYS * BLK * KVD; i++) /* stale data everywhere */
        kp[i] = vp[i] = 1e3f;
    /* rows: sequence s position p, in a shuffled order */
    int32_t seq[37 + 70 + 5], pos[37 + 70 + 5], order[37 + 70 + 5];
    for (int32_t s = 0, r = 0; s < NS; s++)
        for (int32_t p = 0; p < lens[s]; p++, r++)
            seq[r] = s, pos[r] = p;
    for (int32_t r = 0; r < rows; r++)
        order[r] = r;
    for (int32_t r = rows - 1; r > 0; r--) {
        int32_t j = rnd(r + 1), t = order[r];
        order[r] = order[j];
        order[j] = t;
    }
    /* shuffled physical blocks: 3 + 5 + 1 of 12 */
    int32_t perm[NPHYS], off[NS + 1] = {0, 3, 8, 9};
    for (int32_t i = 0; i < NPHYS; i++)
        perm[i] = i;
    for (int32_t i = NPHYS - 1; i > 0; i--) {
        int32_t j = rnd(i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    sv_attn_shape_t sh = {H, G, D, 1.0f / sqrtf((float)D), 0, 0};
    /* contiguous, one sequence at a time */
    for (int32_t s = 0, r0 = 0; s < NS; r0 += lens[s], s++) {
        sv_kv_view_t cv = {.k = kc, .v = vc, .capacity = NPHYS * BLK, .kv_dim = KVD};
        CHECK(be->ops->kv_write(be, &cv, lens[s], pos + r0, k + (size_t)r0 * KVD,
                                v + (size_t)r0 * KVD, &err) == SV_OK &&
                  be->ops->attention(be, &cv, &sh, lens[s], pos + r0, q + (size_t)r0 * QD,
                                     o1 + (size_t)r0 * QD, &err) == SV_OK,
              "contiguous: %s", err.message);
    }
    /* paged, all rows in one call, permuted */
    int32_t ps[37 + 70 + 5], ss[37 + 70 + 5];
    float *kk = malloc(sizeof(float) * rows * KVD), *vv = malloc(sizeof(float) * rows * KVD);
    float *qq = malloc(sizeof(float) * rows * QD);
    for (int32_t i = 0; i < rows; i++) {
        int32_t r = order[i];
        ps[i] = pos[r];
        ss[i] = seq[r];
        memcpy(kk + (size_t)i * KVD, k + (size_t)r * KVD, sizeof(float) * KVD);
        memcpy(vv + (size_t)i * KVD, v + (size_t)r * KVD, sizeof(float) * KVD);
        memcpy(qq + (size_t)i * QD, q + (size_t)r * QD, sizeof(float) * QD);
    }
    sv_kv_view_t pv = {.k = kp, .v = vp, .capacity = NPHYS * BLK, .kv_dim = KVD, .block_size = BLK,
                       .n_seqs = NS, .seq_of_row = ss, .table_off = off, .tables = perm};
    CHECK(be->ops->kv_write(be, &pv, rows, ps, kk, vv, &err) == SV_OK &&
              be->ops->attention(be, &pv, &sh, rows, ps, qq, o2, &err) == SV_OK,
          "paged: %s", err.message);
    int bad = 0;
    for (int32_t i = 0; i < rows; i++)
        bad += memcmp(o2 + (size_t)i * QD, o1 + (size_t)order[i] * QD, sizeof(float) * QD) != 0;
    CHECK(bad == 0, "paged attention: %d of %d rows differ from contiguous", bad, (int)rows);
    /* a position past its table, a block outside the cache, a bad sequence */
    int32_t far = 16 * 3, zero = 0;
    sv_kv_view_t one = pv;
    one.seq_of_row = &zero;
    CHECK(be->ops->attention(be, &one, &sh, 1, &far, qq, o2, &err) == SV_ERR_ARG &&
              be->ops->kv_write(be, &one, 1, &far, kk, vv, &err) == SV_ERR_ARG,
          "paged: a position past the block table accepted");
    int32_t bad_tab[NPHYS];
    memcpy(bad_tab, perm, sizeof bad_tab);
    bad_tab[4] = NPHYS;
    one.tables = bad_tab;
    CHECK(be->ops->attention(be, &one, &sh, 1, &zero, qq, o2, &err) == SV_ERR_ARG,
          "paged: a block outside the cache accepted");
    int32_t three = NS;
    one.tables = perm;
    one.seq_of_row = &three;
    CHECK(be->ops->kv_write(be, &one, 1, &zero, kk, vv, &err) == SV_ERR_ARG,
          "paged: sequence %d of %d accepted", NS, NS);
    free(k), free(v), free(q), free(o1), free(o2), free(kc), free(vc), free(kp), free(vp);
    free(kk), free(vv), free(qq);
}

int main(void) {
    sv_error_t err;
    sv_cpu_config_t one = {.n_threads = 1}, two = {.n_threads = 2};
    if (!mkdtemp(dir) || sv_cpu_backend_create(&one, &be1, &err) ||
        sv_cpu_backend_create(&two, &be2, &err)) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    test_paged_ops(be1);
    test_paged_ops(be2);
    struct {
        const char *arch;
        bool biases;
    } models[] = {{"llama", false}, {"qwen2", true}, {"gemma3", false}};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        sv_llama_t *m1 = load(be1, models[i].arch, models[i].biases, &err);
        sv_llama_t *m2 = load(be2, models[i].arch, models[i].biases, &err);
        CHECK(m1 && m2, "%s: %s", models[i].arch, err.message);
        if (m1 && m2) {
            char what[64];
            snprintf(what, sizeof what, "%s, 2 threads, 64 rows a step", models[i].arch);
            simulate(m2, 64, 0x9e3779b97f4a7c15ull + i, what);
            snprintf(what, sizeof what, "%s, 1 thread, 5 rows a step", models[i].arch);
            simulate(m1, 5, 0x2545f4914f6cdd1dull + i, what);
            test_shared_prefix(m2);
            test_errors(m1);
        }
        sv_llama_destroy(m1);
        sv_llama_destroy(m2);
    }
    sv_backend_destroy(be1);
    sv_backend_destroy(be2);
    rmdir(dir);
    return test_summary("llama batch: ragged batches of 2..8 sequences in shuffled blocks == each "
                        "sequence alone (bit for bit), chunked prefill, decode, extends, "
                        "rollback, forks with copy-on-write, batch errors; llama, qwen2 and "
                        "gemma3 (sliding-window layers of 5 positions)");
}
