/* radix.h — the prefix cache: a radix tree of full KV blocks keyed by the
 * token ids they hold (RadixAttention-style).
 *
 * Every node stands for one FULL block: 16 token ids and the physical block
 * (src/engine/kv_pool.h) whose K and V were computed for those 16 positions
 * after the prefix spelled by the path from the root. A path of d nodes is
 * therefore a cached prefix of 16 * d tokens. Partial blocks are never
 * cached (they are still being written).
 *
 * References. The tree holds one ordinary pool reference to each block it
 * caches (taken by sv_radix_insert, dropped when the node is evicted or the
 * tree destroyed). sv_radix_match takes one more reference per matched block
 * for the caller, who usually hands them to a sequence (sv_kv_seq_adopt) or
 * drops them (sv_kv_pool_decref). A block whose refcount is 1 is held by the
 * tree alone and may be evicted; any other holder pins it.
 *
 * Lookup. Children are found through one hash table over all nodes keyed by
 * (parent, the 16 ids): each node's 64-bit hash mixes its parent's hash with
 * its ids, and a hit is confirmed by comparing the parent and all 16 ids —
 * the hash alone is never trusted. Match and insert cost O(n / 16) hash
 * probes plus 16-id compares.
 *
 * Eviction. All nodes sit on one list in recency order. Match and insert
 * move the nodes of the path they touch to the recent end, deepest first, so
 * a node is always more recent than each of its descendants; eviction walks
 * from the old end and removes leaves held by the tree alone, and a parent
 * that becomes a leaf is met later in the same walk. The walk skips interior
 * nodes and pinned leaves, so one call costs O(nodes visited) — up to all
 * nodes when most of the cache is pinned. Ask for the whole shortfall at
 * once (the pool's evictor hook does) rather than a block at a time.
 *
 * Wiring: the engine installs the tree as the pool's evictor,
 *     sv_kv_pool_set_evictor(pool, sv_radix_evictor, tree);
 * so an allocation that finds the free list short evicts before failing;
 * sv_radix_evict may also be called directly (e.g. to drop the cache).
 *
 * Memory is fixed at create: a node per pool block (a block is cached at
 * most once, so the tree can never need more) of ~100 bytes with its 16 ids,
 * a bucket array of the next power of two >= the block count, and a
 * block -> node map. Threads: the engine thread only, like the pool. */
#ifndef SV_ENGINE_RADIX_H
#define SV_ENGINE_RADIX_H

#include <stdint.h>

#include "kv_pool.h"
#include "util/error.h"

typedef struct sv_radix sv_radix_t;

typedef struct sv_radix_config {
    /* Bits of the 64-bit node hash that are kept (1..64; 0 means 64). Only
     * tests lower it, to force collisions and prove that lookups compare
     * ids rather than trusting hashes. */
    uint32_t hash_bits;
} sv_radix_config_t;

/* A tree caching blocks of `pool` (borrowed: it must outlive the tree), with
 * one node per pool block. cfg may be NULL for defaults. SV_ERR_NOMEM.
 * Caller frees with sv_radix_destroy. Does not install itself as the pool's
 * evictor (see above). */
sv_status sv_radix_create(sv_kv_pool_t *pool, const sv_radix_config_t *cfg, sv_radix_t **out, sv_error_t *err);
/* Drops the tree's reference to every cached block (blocks nobody else
 * holds return to the free list) and frees the tree. If it is the pool's
 * evictor, uninstall it first. NULL is a no-op. */
void sv_radix_destroy(sv_radix_t *t);

/* The longest cached prefix of tokens[0 .. n): returns its length in tokens
 * (a multiple of 16, at most 16 * max_blocks) and writes its physical blocks
 * to blocks[0 .. length / 16), taking one reference to each for the caller.
 * Counts one lookup, the returned tokens as hits and the rest of n as
 * misses; marks the path recently used. Never fails. */
uint32_t sv_radix_match(sv_radix_t *t, const int32_t *tokens, uint32_t n, uint32_t *blocks, uint32_t max_blocks);

/* Caches the full blocks of a computed sequence: block i holds tokens
 * [16 i, 16 i + 16) in blocks[i], for i < n / 16 (a trailing partial block
 * is ignored). Blocks on a path the tree already has are left alone (the
 * cached block wins; the caller's duplicate stays the caller's); each new
 * node takes its own reference to its block. *n_added (may be NULL) gets the
 * number of blocks newly cached. SV_ERR_ARG, changing nothing, when a block
 * to be added is not held, is already cached elsewhere in the tree, or
 * appears twice. */
sv_status sv_radix_insert(sv_radix_t *t, const int32_t *tokens, uint32_t n, const uint32_t *blocks,
                          uint32_t *n_added, sv_error_t *err);

/* Evicts least recently used leaves held by the tree alone until n_wanted
 * blocks have returned to the pool or none is left; returns how many did. */
uint32_t sv_radix_evict(sv_radix_t *t, uint32_t n_wanted);
/* sv_radix_evict with the pool's evictor signature; ctx is the tree. */
uint32_t sv_radix_evictor(void *ctx, uint32_t n_wanted);

typedef struct sv_radix_stats {
    uint64_t lookups;                  /* sv_radix_match calls */
    uint64_t hit_tokens, miss_tokens;  /* summed over lookups */
    uint64_t inserted_blocks;          /* nodes ever created */
    uint64_t evictions;                /* nodes evicted */
    uint32_t cached_blocks;            /* nodes now */
} sv_radix_stats_t;
void sv_radix_stats(const sv_radix_t *t, sv_radix_stats_t *st);

/* Checks the tree's invariants: node count, child counts, each cached
 * block held (refcount >= 1) and mapped back to its node, hashes recomputed
 * from parent and ids, every node reachable in its bucket, the recency list
 * complete and each node more recent than its children. For tests;
 * O(nodes + buckets). SV_ERR_ARG describing the first violation. */
sv_status sv_radix_check(const sv_radix_t *t, sv_error_t *err);

/* Whether physical block b is cached (for tests and accounting). */
int sv_radix_holds(const sv_radix_t *t, uint32_t block);

#endif
