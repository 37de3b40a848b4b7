/* radix.c — the prefix cache (see radix.h for the design).
 *
 * Nodes live in one array of as many entries as the pool has blocks; free
 * nodes are chained through `chain`. The root is virtual (index NONE, hash
 * ROOT_HASH). The recency list runs from `oldest` to `newest` through
 * prev/next. */
#include "radix.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

#define NONE UINT32_MAX
#define MARK (UINT32_MAX - 1) /* block_node value while sv_radix_insert validates */
#define ROOT_HASH 0x51e7e5eedcafe001ull

typedef struct node {
    int32_t ids[SV_KV_BLOCK]; /* the block's token ids */
    uint64_t hash;            /* mix(parent's hash, ids) & hash_mask */
    uint32_t parent;          /* node index, NONE for the root */
    uint32_t block;           /* physical block; NONE while the node is free */
    uint32_t n_children;
    uint32_t chain;           /* next node in the bucket, or in the free list */
    uint32_t prev, next;      /* recency list: prev is older */
} node_t;

struct sv_radix {
    sv_kv_pool_t *pool;
    uint32_t cap;          /* nodes == pool blocks */
    node_t *nodes;         /* (cap) */
    uint32_t free_nodes;   /* head of the free chain */
    uint32_t n_nodes;
    uint32_t *buckets;     /* (mask + 1) first node per bucket */
    uint32_t mask;
    uint32_t *block_node;  /* (cap) node caching each block, or NONE */
    uint32_t oldest, newest;
    uint64_t hash_mask;
    uint64_t lookups, hit_tokens, miss_tokens, inserted, evictions;
};

/* A 64-bit mix of the parent's hash and 16 ids (multiply-xorshift per id,
 * splitmix64's finalizer at the end). Good spread, not collision-proof:
 * callers compare ids. */
static uint64_t hash_block(uint64_t parent, const int32_t *ids) {
    uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 0; i < SV_KV_BLOCK; i++) {
        h = (h ^ (uint32_t)ids[i]) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return sv_hash_splitmix(h);
}

static uint64_t node_hash(const sv_radix_t *t, uint32_t parent, const int32_t *ids) {
    uint64_t ph = parent == NONE ? ROOT_HASH : t->nodes[parent].hash;
    return hash_block(ph, ids) & t->hash_mask;
}

static uint32_t bucket_of(const sv_radix_t *t, uint64_t h) { return (uint32_t)(h ^ (h >> 32)) & t->mask; }

sv_status sv_radix_create(sv_kv_pool_t *pool, const sv_radix_config_t *cfg, sv_radix_t **out, sv_error_t *err) {
    *out = NULL;
    uint32_t bits = cfg && cfg->hash_bits ? cfg->hash_bits : 64;
    if (bits > 64)
        return sv_error_set(err, SV_ERR_ARG, -1, "radix: hash_bits %u > 64", bits);
    sv_radix_t *t = calloc(1, sizeof *t);
    if (!t)
        goto fail;
    t->pool = pool;
    t->cap = sv_kv_pool_n_blocks(pool);
    t->hash_mask = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
    uint32_t nb = 1;
    while (nb < t->cap)
        nb <<= 1;
    t->mask = nb - 1;
    t->nodes = malloc((size_t)t->cap * sizeof *t->nodes);
    t->buckets = malloc((size_t)nb * sizeof *t->buckets);
    t->block_node = malloc((size_t)t->cap * sizeof *t->block_node);
    if (!t->nodes || !t->buckets || !t->block_node)
        goto fail;
    for (uint32_t i = 0; i < nb; i++)
        t->buckets[i] = NONE;
    for (uint32_t i = 0; i < t->cap; i++) {
        t->nodes[i].block = NONE;
        t->nodes[i].chain = i + 1 < t->cap ? i + 1 : NONE;
        t->block_node[i] = NONE;
    }
    t->free_nodes = 0;
    t->oldest = t->newest = NONE;
    *out = t;
    return SV_OK;
fail:
    if (t) {
        free(t->nodes);
        free(t->buckets);
        free(t->block_node);
        free(t);
    }
    return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory for a prefix cache of %u blocks",
                        sv_kv_pool_n_blocks(pool));
}

void sv_radix_destroy(sv_radix_t *t) {
    if (!t)
        return;
    for (uint32_t i = t->oldest; i != NONE; i = t->nodes[i].next)
        (void)sv_kv_pool_decref(t->pool, t->nodes[i].block);
    free(t->nodes);
    free(t->buckets);
    free(t->block_node);
    free(t);
}

/* ---- the recency list ------------------------------------------------------- */

static void lru_unlink(sv_radix_t *t, uint32_t i) {
    node_t *n = &t->nodes[i];
    if (n->prev != NONE)
        t->nodes[n->prev].next = n->next;
    else
        t->oldest = n->next;
    if (n->next != NONE)
        t->nodes[n->next].prev = n->prev;
    else
        t->newest = n->prev;
}

static void lru_push_newest(sv_radix_t *t, uint32_t i) {
    node_t *n = &t->nodes[i];
    n->prev = t->newest;
    n->next = NONE;
    if (t->newest != NONE)
        t->nodes[t->newest].next = i;
    else
        t->oldest = i;
    t->newest = i;
}

/* Marks the path from node i up to the root as just used, deepest first, so
 * that each ancestor ends up more recent than its descendants. */
static void touch_path(sv_radix_t *t, uint32_t i) {
    for (; i != NONE; i = t->nodes[i].parent) {
        if (t->newest != i) {
            lru_unlink(t, i);
            lru_push_newest(t, i);
        }
    }
}

/* ---- lookup ----------------------------------------------------------------- */

static uint32_t find_child(const sv_radix_t *t, uint32_t parent, const int32_t *ids) {
    uint64_t h = node_hash(t, parent, ids);
    for (uint32_t i = t->buckets[bucket_of(t, h)]; i != NONE; i = t->nodes[i].chain) {
        const node_t *n = &t->nodes[i];
        if (n->hash == h && n->parent == parent && memcmp(n->ids, ids, sizeof n->ids) == 0)
            return i;
    }
    return NONE;
}

uint32_t sv_radix_match(sv_radix_t *t, const int32_t *tokens, uint32_t n, uint32_t *blocks, uint32_t max_blocks) {
    uint32_t cur = NONE, d = 0, full = n / SV_KV_BLOCK;
    while (d < full && d < max_blocks) {
        uint32_t c = find_child(t, cur, tokens + (size_t)d * SV_KV_BLOCK);
        if (c == NONE)
            break;
        blocks[d++] = t->nodes[c].block;
        sv_status st = sv_kv_pool_incref(t->pool, t->nodes[c].block);
        assert(st == SV_OK); /* the tree holds every cached block */
        (void)st;
        cur = c;
    }
    touch_path(t, cur);
    t->lookups++;
    t->hit_tokens += (uint64_t)d * SV_KV_BLOCK;
    t->miss_tokens += n - d * SV_KV_BLOCK;
    return d * SV_KV_BLOCK;
}

sv_status sv_radix_insert(sv_radix_t *t, const int32_t *tokens, uint32_t n, const uint32_t *blocks,
                          uint32_t *n_added, sv_error_t *err) {
    if (n_added)
        *n_added = 0;
    uint32_t full = n / SV_KV_BLOCK, cur = NONE, d = 0;
    /* The part of the path the tree already has. */
    for (; d < full; d++) {
        uint32_t c = find_child(t, cur, tokens + (size_t)d * SV_KV_BLOCK);
        if (c == NONE)
            break;
        cur = c;
    }
    /* Validate the blocks to add before changing anything; MARK catches a
     * block listed twice. */
    uint32_t bad = NONE;
    const char *why = NULL;
    for (uint32_t i = d; i < full && !why; i++) {
        uint32_t b = blocks[i];
        why = b >= t->cap                              ? "out of range"
              : sv_kv_pool_refcount(t->pool, b) == 0   ? "not held"
              : t->block_node[b] == MARK               ? "listed twice"
              : t->block_node[b] != NONE               ? "already cached at another position"
                                                       : NULL;
        if (why)
            bad = i;
        else
            t->block_node[b] = MARK;
    }
    for (uint32_t i = d; i < (why ? bad : full); i++)
        if (t->block_node[blocks[i]] == MARK)
            t->block_node[blocks[i]] = NONE;
    if (why)
        return sv_error_set(err, SV_ERR_ARG, -1, "radix insert: block %u (block %u of the sequence) is %s",
                            blocks[bad], bad, why);
    for (uint32_t i = d; i < full; i++) {
        uint32_t id = t->free_nodes;
        assert(id != NONE); /* nodes == pool blocks, each cached once */
        node_t *nd = &t->nodes[id];
        t->free_nodes = nd->chain;
        memcpy(nd->ids, tokens + (size_t)i * SV_KV_BLOCK, sizeof nd->ids);
        nd->parent = cur;
        nd->hash = node_hash(t, cur, nd->ids);
        nd->block = blocks[i];
        nd->n_children = 0;
        uint32_t bk = bucket_of(t, nd->hash);
        nd->chain = t->buckets[bk];
        t->buckets[bk] = id;
        if (cur != NONE)
            t->nodes[cur].n_children++;
        t->block_node[blocks[i]] = id;
        sv_status st = sv_kv_pool_incref(t->pool, blocks[i]);
        assert(st == SV_OK);
        (void)st;
        lru_push_newest(t, id);
        t->n_nodes++;
        t->inserted++;
        cur = id;
    }
    touch_path(t, cur);
    if (n_added)
        *n_added = full - d;
    return SV_OK;
}

/* ---- eviction --------------------------------------------------------------- */

static void remove_node(sv_radix_t *t, uint32_t i) {
    node_t *n = &t->nodes[i];
    uint32_t *link = &t->buckets[bucket_of(t, n->hash)];
    while (*link != i)
        link = &t->nodes[*link].chain;
    *link = n->chain;
    lru_unlink(t, i);
    if (n->parent != NONE)
        t->nodes[n->parent].n_children--;
    t->block_node[n->block] = NONE;
    sv_status st = sv_kv_pool_decref(t->pool, n->block);
    assert(st == SV_OK);
    (void)st;
    n->block = NONE;
    n->chain = t->free_nodes;
    t->free_nodes = i;
    t->n_nodes--;
    t->evictions++;
}

uint32_t sv_radix_evict(sv_radix_t *t, uint32_t n_wanted) {
    uint32_t freed = 0;
    /* Oldest first; a parent is newer than its children, so one that
     * becomes a leaf here is still ahead of the walk. */
    for (uint32_t i = t->oldest; i != NONE && freed < n_wanted;) {
        uint32_t next = t->nodes[i].next;
        if (t->nodes[i].n_children == 0 && sv_kv_pool_refcount(t->pool, t->nodes[i].block) == 1) {
            remove_node(t, i);
            freed++;
        }
        i = next;
    }
    return freed;
}

uint32_t sv_radix_evictor(void *ctx, uint32_t n_wanted) { return sv_radix_evict(ctx, n_wanted); }

void sv_radix_stats(const sv_radix_t *t, sv_radix_stats_t *st) {
    st->lookups = t->lookups;
    st->hit_tokens = t->hit_tokens;
    st->miss_tokens = t->miss_tokens;
    st->inserted_blocks = t->inserted;
    st->evictions = t->evictions;
    st->cached_blocks = t->n_nodes;
}

int sv_radix_holds(const sv_radix_t *t, uint32_t block) { return block < t->cap && t->block_node[block] != NONE; }

sv_status sv_radix_check(const sv_radix_t *t, sv_error_t *err) {
    sv_status st = SV_OK;
    /* rank[i]: position in the recency list + 1 (0: not on it);
     * kids[i]: children counted from parent links. */
    uint32_t *rank = calloc(t->cap, sizeof *rank), *kids = calloc(t->cap, sizeof *kids);
    if (!rank || !kids) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        goto done;
    }
    uint32_t pos = 0, prev = NONE;
    for (uint32_t i = t->oldest; i != NONE; prev = i, i = t->nodes[i].next) {
        if (i >= t->cap || rank[i] || t->nodes[i].prev != prev || t->nodes[i].block == NONE) {
            st = sv_error_set(err, SV_ERR_ARG, -1, "recency list broken at node %u", i);
            goto done;
        }
        rank[i] = ++pos;
    }
    if (prev != t->newest || pos != t->n_nodes) {
        st = sv_error_set(err, SV_ERR_ARG, -1, "recency list has %u nodes, tree counts %u", pos, t->n_nodes);
        goto done;
    }
    for (uint32_t i = 0; i < t->cap; i++) {
        const node_t *n = &t->nodes[i];
        if (!rank[i])
            continue;
        if (n->parent != NONE) {
            if (n->parent >= t->cap || !rank[n->parent] || rank[n->parent] < rank[i]) {
                st = sv_error_set(err, SV_ERR_ARG, -1, "node %u: parent %u missing or older", i, n->parent);
                goto done;
            }
            kids[n->parent]++;
        }
        if (n->block >= t->cap || t->block_node[n->block] != i || sv_kv_pool_refcount(t->pool, n->block) == 0) {
            st = sv_error_set(err, SV_ERR_ARG, -1, "node %u: block %u not mapped back or not held", i, n->block);
            goto done;
        }
        if (n->hash != node_hash(t, n->parent, n->ids)) {
            st = sv_error_set(err, SV_ERR_ARG, -1, "node %u: stale hash", i);
            goto done;
        }
        uint32_t j = t->buckets[bucket_of(t, n->hash)];
        while (j != NONE && j != i)
            j = t->nodes[j].chain;
        if (j != i) {
            st = sv_error_set(err, SV_ERR_ARG, -1, "node %u: not in its bucket", i);
            goto done;
        }
    }
    uint32_t mapped = 0, chained = 0;
    for (uint32_t i = 0; i < t->cap; i++) {
        if (rank[i] && kids[i] != t->nodes[i].n_children) {
            st = sv_error_set(err, SV_ERR_ARG, -1, "node %u: %u children, counts %u", i, kids[i],
                              t->nodes[i].n_children);
            goto done;
        }
        if (t->block_node[i] != NONE) {
            mapped++;
            if (t->block_node[i] >= t->cap || t->nodes[t->block_node[i]].block != i) {
                st = sv_error_set(err, SV_ERR_ARG, -1, "block %u maps to a node that does not hold it", i);
                goto done;
            }
        }
    }
    for (uint32_t b = 0; b <= t->mask; b++)
        for (uint32_t j = t->buckets[b]; j != NONE && chained <= t->n_nodes; j = t->nodes[j].chain)
            chained++;
    if (mapped != t->n_nodes || chained != t->n_nodes) {
        st = sv_error_set(err, SV_ERR_ARG, -1, "%u nodes, %u blocks mapped, %u chained", t->n_nodes, mapped, chained);
        goto done;
    }
done:
    free(rank);
    free(kids);
    return st;
}
