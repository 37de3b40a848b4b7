/* kv_pool.c — reference-counted KV blocks, a LIFO free list, and a slab of
 * sequence handles with fixed-size block tables (see kv_pool.h).
 *
 * The free list is a stack of ids: a freed block is the next one handed out,
 * which keeps the working set of blocks small and warm. Sequence handles
 * live in one array, their tables in one array of max_seqs * max_table ids;
 * free handles form a stack of indices. */
#include "kv_pool.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct sv_kv_seq {
    sv_kv_pool_t *pool;
    uint32_t *table;   /* (max_table) physical block ids, first n_blocks valid */
    uint32_t len;      /* tokens */
    uint32_t n_blocks; /* == ceil(len / SV_KV_BLOCK) */
    bool live;
};

struct sv_kv_pool {
    uint32_t n_blocks, max_seqs, max_ctx, max_table;
    uint32_t *ref;        /* (n_blocks) reference counts */
    uint32_t *free_stack; /* (n_blocks) free ids, n_free of them */
    uint32_t n_free;
    sv_kv_seq_t *seqs;    /* (max_seqs) */
    uint32_t *tables;     /* (max_seqs * max_table) */
    uint32_t *free_seqs;  /* (max_seqs) indices of free handles, n_free_seqs of them */
    uint32_t n_free_seqs;
    sv_kv_evictor_fn evictor;
    void *evictor_ctx;
    uint32_t high_water, seqs_high_water;
    uint64_t allocs, cow_copies, evictor_calls, evicted, out_of_blocks;
};

static uint32_t blocks_for(uint32_t tokens) { return (uint32_t)(((uint64_t)tokens + SV_KV_BLOCK - 1) / SV_KV_BLOCK); }

sv_status sv_kv_pool_blocks_for_bytes(uint64_t bytes, uint32_t n_layers, uint32_t kv_dim,
                                      uint32_t bytes_per_elem, uint32_t min_blocks, uint32_t *out,
                                      sv_error_t *err) {
    *out = 0;
    if (!n_layers || !kv_dim || !bytes_per_elem)
        return sv_error_set(err, SV_ERR_ARG, -1, "KV block size: n_layers, kv_dim and bytes_per_elem must be > 0");
    /* n_layers * 2 * 16 * kv_dim * bytes_per_elem, refusing overflow. */
    uint64_t per = (uint64_t)n_layers * 2u * SV_KV_BLOCK; /* < 2^38 */
    if (per > UINT64_MAX / kv_dim)
        goto overflow;
    per *= kv_dim;
    if (per > UINT64_MAX / bytes_per_elem)
        goto overflow;
    per *= bytes_per_elem;
    uint64_t n = bytes / per;
    if (n > SV_KV_MAX_BLOCKS)
        n = SV_KV_MAX_BLOCKS;
    if (n < min_blocks || n == 0)
        return sv_error_set(err, SV_ERR_BUDGET, -1,
                            "KV budget of %llu bytes holds only %llu blocks of %llu bytes, need at least %u",
                            (unsigned long long)bytes, (unsigned long long)n, (unsigned long long)per,
                            min_blocks ? min_blocks : 1u);
    *out = (uint32_t)n;
    return SV_OK;
overflow:
    return sv_error_set(err, SV_ERR_ARG, -1, "KV block size overflows: %u layers x kv_dim %u x %u bytes", n_layers,
                        kv_dim, bytes_per_elem);
}

sv_status sv_kv_pool_create(const sv_kv_pool_config_t *cfg, sv_kv_pool_t **out, sv_error_t *err) {
    *out = NULL;
    if (!cfg || cfg->n_blocks == 0 || cfg->n_blocks > SV_KV_MAX_BLOCKS || cfg->max_seqs == 0 ||
        cfg->max_seqs > SV_KV_MAX_SEQS || cfg->max_ctx == 0 || cfg->max_ctx > SV_KV_MAX_CTX)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "KV pool: need 1..%u blocks, 1..%u sequences and max_ctx 1..%u", SV_KV_MAX_BLOCKS,
                            SV_KV_MAX_SEQS, SV_KV_MAX_CTX);
    uint32_t max_table = blocks_for(cfg->max_ctx);
    sv_kv_pool_t *p = calloc(1, sizeof *p);
    if (!p)
        goto fail;
    p->n_blocks = cfg->n_blocks;
    p->max_seqs = cfg->max_seqs;
    p->max_ctx = cfg->max_ctx;
    p->max_table = max_table;
    p->ref = calloc(p->n_blocks, sizeof *p->ref);
    p->free_stack = malloc((size_t)p->n_blocks * sizeof *p->free_stack);
    p->seqs = calloc(p->max_seqs, sizeof *p->seqs);
    p->tables = malloc((size_t)p->max_seqs * max_table * sizeof *p->tables);
    p->free_seqs = malloc((size_t)p->max_seqs * sizeof *p->free_seqs);
    if (!p->ref || !p->free_stack || !p->seqs || !p->tables || !p->free_seqs)
        goto fail;
    /* Stack order: block 0 is handed out first. */
    for (uint32_t i = 0; i < p->n_blocks; i++)
        p->free_stack[i] = p->n_blocks - 1 - i;
    p->n_free = p->n_blocks;
    for (uint32_t i = 0; i < p->max_seqs; i++) {
        p->seqs[i].pool = p;
        p->seqs[i].table = p->tables + (size_t)i * max_table;
        p->free_seqs[i] = p->max_seqs - 1 - i;
    }
    p->n_free_seqs = p->max_seqs;
    *out = p;
    return SV_OK;
fail:
    sv_kv_pool_destroy(p);
    return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory for a KV pool of %u blocks, %u sequences x %u tokens",
                        cfg->n_blocks, cfg->max_seqs, cfg->max_ctx);
}

void sv_kv_pool_destroy(sv_kv_pool_t *p) {
    if (!p)
        return;
    free(p->ref);
    free(p->free_stack);
    free(p->seqs);
    free(p->tables);
    free(p->free_seqs);
    free(p);
}

void sv_kv_pool_set_evictor(sv_kv_pool_t *p, sv_kv_evictor_fn fn, void *ctx) {
    p->evictor = fn;
    p->evictor_ctx = fn ? ctx : NULL;
}

/* ---- blocks ----------------------------------------------------------------- */

/* Pops a free block (the caller made sure there is one). */
static uint32_t take(sv_kv_pool_t *p) {
    assert(p->n_free > 0);
    uint32_t b = p->free_stack[--p->n_free];
    assert(p->ref[b] == 0);
    p->ref[b] = 1;
    p->allocs++;
    uint32_t used = p->n_blocks - p->n_free;
    if (used > p->high_water)
        p->high_water = used;
    return b;
}

/* Drops one reference to a block known to be held. */
static void drop(sv_kv_pool_t *p, uint32_t b) {
    assert(b < p->n_blocks && p->ref[b] > 0);
    if (--p->ref[b] == 0)
        p->free_stack[p->n_free++] = b;
}

/* True when `need` blocks are free, asking the evictor for the shortfall
 * first. */
static bool ensure_free(sv_kv_pool_t *p, uint32_t need) {
    if (p->n_free >= need)
        return true;
    if (p->evictor) {
        p->evictor_calls++;
        p->evicted += p->evictor(p->evictor_ctx, need - p->n_free);
    }
    if (p->n_free >= need)
        return true;
    p->out_of_blocks++;
    return false;
}

sv_status sv_kv_pool_alloc(sv_kv_pool_t *p, uint32_t *block, sv_error_t *err) {
    *block = SV_KV_NO_BLOCK;
    if (!ensure_free(p, 1))
        return sv_error_set(err, SV_ERR_BUDGET, -1, "out of KV blocks (all %u in use)", p->n_blocks);
    *block = take(p);
    return SV_OK;
}

sv_status sv_kv_pool_incref(sv_kv_pool_t *p, uint32_t b) {
    if (b >= p->n_blocks || p->ref[b] == 0 || p->ref[b] == UINT32_MAX)
        return SV_ERR_ARG;
    p->ref[b]++;
    return SV_OK;
}

sv_status sv_kv_pool_decref(sv_kv_pool_t *p, uint32_t b) {
    if (b >= p->n_blocks || p->ref[b] == 0)
        return SV_ERR_ARG;
    drop(p, b);
    return SV_OK;
}

uint32_t sv_kv_pool_refcount(const sv_kv_pool_t *p, uint32_t b) { return b < p->n_blocks ? p->ref[b] : 0; }
uint32_t sv_kv_pool_n_blocks(const sv_kv_pool_t *p) { return p->n_blocks; }
uint32_t sv_kv_pool_free_blocks(const sv_kv_pool_t *p) { return p->n_free; }

void sv_kv_pool_stats(const sv_kv_pool_t *p, sv_kv_pool_stats_t *st) {
    memset(st, 0, sizeof *st);
    st->n_blocks = p->n_blocks;
    st->free_blocks = p->n_free;
    st->used_blocks = p->n_blocks - p->n_free;
    st->high_water = p->high_water;
    st->seqs = p->max_seqs - p->n_free_seqs;
    st->seqs_high_water = p->seqs_high_water;
    st->allocs = p->allocs;
    st->cow_copies = p->cow_copies;
    st->evictor_calls = p->evictor_calls;
    st->evicted = p->evicted;
    st->out_of_blocks = p->out_of_blocks;
}

sv_status sv_kv_pool_check(const sv_kv_pool_t *p, sv_error_t *err) {
    sv_status st = SV_OK;
    uint32_t *seen = calloc(p->n_blocks, sizeof *seen); /* table entries per block; UINT32_MAX: on free list */
    if (!seen)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    if (p->n_free > p->n_blocks) {
        st = sv_error_set(err, SV_ERR_ARG, -1, "free count %u > %u blocks", p->n_free, p->n_blocks);
        goto done;
    }
    for (uint32_t i = 0; i < p->n_free; i++) {
        uint32_t b = p->free_stack[i];
        if (b >= p->n_blocks || seen[b] || p->ref[b]) {
            st = sv_error_set(err, SV_ERR_ARG, -1, "free list entry %u: block %u out of range, repeated or held (ref %u)",
                              i, b, b < p->n_blocks ? p->ref[b] : 0);
            goto done;
        }
        seen[b] = UINT32_MAX;
    }
    uint32_t zero = 0;
    for (uint32_t b = 0; b < p->n_blocks; b++)
        zero += p->ref[b] == 0;
    if (zero != p->n_free) {
        st = sv_error_set(err, SV_ERR_ARG, -1, "%u blocks have refcount 0 but %u are on the free list", zero, p->n_free);
        goto done;
    }
    uint32_t live = 0;
    for (uint32_t i = 0; i < p->max_seqs; i++) {
        const sv_kv_seq_t *s = &p->seqs[i];
        if (!s->live)
            continue;
        live++;
        if (s->len > p->max_ctx || s->n_blocks != blocks_for(s->len)) {
            st = sv_error_set(err, SV_ERR_ARG, -1, "sequence %u: %u tokens in %u blocks", i, s->len, s->n_blocks);
            goto done;
        }
        for (uint32_t j = 0; j < s->n_blocks; j++) {
            uint32_t b = s->table[j];
            if (b >= p->n_blocks || seen[b] == UINT32_MAX) {
                st = sv_error_set(err, SV_ERR_ARG, -1, "sequence %u entry %u: block %u out of range or free", i, j, b);
                goto done;
            }
            seen[b]++;
        }
    }
    if (live != p->max_seqs - p->n_free_seqs) {
        st = sv_error_set(err, SV_ERR_ARG, -1, "%u live sequences, %u handles taken", live,
                          p->max_seqs - p->n_free_seqs);
        goto done;
    }
    for (uint32_t b = 0; b < p->n_blocks; b++)
        if (seen[b] != UINT32_MAX && seen[b] > p->ref[b]) {
            st = sv_error_set(err, SV_ERR_ARG, -1, "block %u: %u table entries but refcount %u", b, seen[b], p->ref[b]);
            goto done;
        }
done:
    free(seen);
    return st;
}

/* ---- sequences -------------------------------------------------------------- */

sv_status sv_kv_seq_create(sv_kv_pool_t *p, sv_kv_seq_t **out, sv_error_t *err) {
    *out = NULL;
    if (p->n_free_seqs == 0)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "too many sequences (max_seqs %u)", p->max_seqs);
    sv_kv_seq_t *s = &p->seqs[p->free_seqs[--p->n_free_seqs]];
    s->len = s->n_blocks = 0;
    s->live = true;
    uint32_t taken = p->max_seqs - p->n_free_seqs;
    if (taken > p->seqs_high_water)
        p->seqs_high_water = taken;
    *out = s;
    return SV_OK;
}

void sv_kv_seq_destroy(sv_kv_seq_t *s) {
    /* A second destroy is a caller bug; refusing it keeps the slab's free
     * stack from holding one handle twice. */
    if (!s || !s->live)
        return;
    sv_kv_pool_t *p = s->pool;
    sv_kv_seq_release(s);
    s->live = false;
    p->free_seqs[p->n_free_seqs++] = (uint32_t)(s - p->seqs);
}

uint32_t sv_kv_seq_len(const sv_kv_seq_t *s) { return s->len; }

const uint32_t *sv_kv_seq_blocks(const sv_kv_seq_t *s, uint32_t *n_blocks) {
    *n_blocks = s->n_blocks;
    return s->table;
}

/* Whether writing position s->len means writing into a shared block. */
static bool needs_cow(const sv_kv_seq_t *s) {
    return s->len % SV_KV_BLOCK != 0 && s->pool->ref[s->table[s->n_blocks - 1]] > 1;
}

uint32_t sv_kv_seq_blocks_needed(const sv_kv_seq_t *s, uint32_t n_new) {
    if (n_new == 0)
        return 0;
    uint64_t total = (uint64_t)s->len + n_new;
    uint64_t blocks = (total + SV_KV_BLOCK - 1) / SV_KV_BLOCK;
    uint64_t need = blocks - s->n_blocks + (needs_cow(s) ? 1 : 0);
    return need > UINT32_MAX ? UINT32_MAX : (uint32_t)need;
}

sv_status sv_kv_seq_append(sv_kv_seq_t *s, uint32_t n_new, sv_kv_copy_t *copy, sv_error_t *err) {
    sv_kv_pool_t *p = s->pool;
    if (copy)
        *copy = (sv_kv_copy_t){SV_KV_NO_BLOCK, SV_KV_NO_BLOCK, 0};
    if (n_new == 0)
        return SV_OK;
    if (n_new > p->max_ctx - s->len)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "sequence of %u tokens plus %u exceeds max_ctx %u", s->len, n_new,
                            p->max_ctx);
    bool cow = needs_cow(s);
    if (cow && !copy)
        return sv_error_set(err, SV_ERR_ARG, -1, "append needs a copy-on-write but copy is NULL");
    uint32_t new_blocks = blocks_for(s->len + n_new) - s->n_blocks;
    if (!ensure_free(p, new_blocks + cow))
        return sv_error_set(err, SV_ERR_BUDGET, -1, "out of KV blocks (need %u, %u free of %u)", new_blocks + cow,
                            p->n_free, p->n_blocks);
    /* The evictor only drops references it holds alone, so a block this
     * sequence shares stays shared; re-check anyway rather than rely on it. */
    if (cow && needs_cow(s)) {
        uint32_t src = s->table[s->n_blocks - 1], dst = take(p);
        s->table[s->n_blocks - 1] = dst;
        drop(p, src);
        *copy = (sv_kv_copy_t){src, dst, s->len % SV_KV_BLOCK};
        p->cow_copies++;
    }
    for (uint32_t i = 0; i < new_blocks; i++)
        s->table[s->n_blocks++] = take(p);
    s->len += n_new;
    return SV_OK;
}

sv_status sv_kv_seq_truncate(sv_kv_seq_t *s, uint32_t n, sv_error_t *err) {
    if (n > s->len)
        return sv_error_set(err, SV_ERR_ARG, -1, "cannot truncate a sequence of %u tokens to %u", s->len, n);
    uint32_t keep = blocks_for(n);
    while (s->n_blocks > keep)
        drop(s->pool, s->table[--s->n_blocks]);
    s->len = n;
    return SV_OK;
}

void sv_kv_seq_release(sv_kv_seq_t *s) {
    if (s)
        (void)sv_kv_seq_truncate(s, 0, NULL);
}

sv_status sv_kv_seq_fork(sv_kv_seq_t *src, sv_kv_seq_t **out, sv_error_t *err) {
    sv_status st = sv_kv_seq_create(src->pool, out, err);
    if (st)
        return st;
    sv_kv_seq_t *c = *out;
    for (uint32_t i = 0; i < src->n_blocks; i++) {
        c->table[i] = src->table[i];
        src->pool->ref[src->table[i]]++;
    }
    c->n_blocks = src->n_blocks;
    c->len = src->len;
    return SV_OK;
}

sv_status sv_kv_seq_adopt(sv_kv_seq_t *s, const uint32_t *blocks, uint32_t n_tokens, sv_error_t *err) {
    sv_kv_pool_t *p = s->pool;
    if (s->len != 0)
        return sv_error_set(err, SV_ERR_ARG, -1, "adopt into a sequence of %u tokens (must be empty)", s->len);
    if (n_tokens > p->max_ctx)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "sequence of %u tokens exceeds max_ctx %u", n_tokens, p->max_ctx);
    uint32_t n = blocks_for(n_tokens);
    for (uint32_t i = 0; i < n; i++)
        if (blocks[i] >= p->n_blocks || p->ref[blocks[i]] == 0)
            return sv_error_set(err, SV_ERR_ARG, -1, "adopt: block %u (entry %u) is not held", blocks[i], i);
    memcpy(s->table, blocks, (size_t)n * sizeof *blocks);
    s->n_blocks = n;
    s->len = n_tokens;
    return SV_OK;
}
