/* kv_pool.h — the KV block allocator and per-sequence block tables.
 *
 * The KV cache is cut into N physical blocks of SV_KV_BLOCK = 16 token
 * positions; physical block b of layer l holds K and V for 16 positions. This
 * module manages block ids only: the tensors live in the backend, which reads
 * and writes them through a sequence's block table (its physical block ids in
 * position order: position p lives in table[p / 16] at slot p % 16).
 *
 * Blocks are reference-counted. A block is free (refcount 0, on the free
 * list) or held: by one or more sequences' block tables, by the prefix cache
 * (src/engine/radix.h, which holds an ordinary reference of its own), or by
 * a caller between sv_radix_match and sv_kv_seq_adopt. A block returns to the
 * free list exactly when its count reaches 0, so a block a released sequence
 * shared with the prefix cache stays cached until the cache evicts it.
 *
 * Memory is fixed at sv_kv_pool_create and never grows: the refcounts and
 * the free list (8 bytes per block), and a slab of max_seqs sequence handles,
 * each with a block table sized for max_ctx tokens (4 * ceil(max_ctx / 16)
 * bytes). Nothing after create allocates: sequence create/destroy take and
 * return slab slots, appends take blocks from the free list. A sequence that
 * would exceed max_ctx, a slab with no free handle and a pool with no free
 * block are SV_ERR_BUDGET errors that change nothing.
 *
 * Running out of blocks. A pool may have an evictor (sv_kv_pool_set_evictor):
 * when an allocation finds fewer free blocks than it needs, the pool calls
 * it once with the shortfall before giving up. The engine wires the prefix
 * cache in (sv_radix_evictor), so cached-but-unused blocks are reclaimed on
 * demand and "out of KV blocks" means every block is really in use — the
 * scheduler's cue to preempt. The evictor may only drop references
 * (sv_kv_pool_decref); it must not allocate or touch sequences.
 *
 * Sharing and copy-on-write. sv_kv_seq_fork gives the child a reference to
 * every block of the parent's table, including a partially filled last
 * block. Full blocks are never written again, so they are shared for good.
 * A partial block is written when either sequence appends: sv_kv_seq_append
 * sees that the block it must write into is shared (refcount > 1), allocates
 * a private block for it and returns the copy the caller must make in the
 * backend (positions [0, n_pos) of every layer from src to dst) before the
 * forward pass writes. The same rule covers a sequence that truncated into
 * a full block it shares with the prefix cache. Rule for the engine: make all
 * the copies returned while preparing a step before that step's forward pass
 * writes any KV (another holder of src may write into it in the same step
 * once its refcount has dropped to 1).
 *
 * Threads: the pool and its sequences belong to one thread (the engine
 * thread); there are no locks.
 *
 * Costs: alloc, incref, decref O(1); append O(1 + new blocks); truncate
 * O(1 + freed blocks); fork O(blocks of the parent). */
#ifndef SV_ENGINE_KV_POOL_H
#define SV_ENGINE_KV_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define SV_KV_BLOCK 16u                 /* token positions per block */
#define SV_KV_NO_BLOCK UINT32_MAX       /* "no block" in copy records */
#define SV_KV_MAX_BLOCKS (1u << 30)     /* ids stay far from SV_KV_NO_BLOCK */
#define SV_KV_MAX_SEQS (1u << 20)
#define SV_KV_MAX_CTX (1u << 24)        /* tokens per sequence */

typedef struct sv_kv_pool sv_kv_pool_t;
typedef struct sv_kv_seq sv_kv_seq_t;

/* Blocks that fit a byte budget: bytes / (n_layers * 2 * 16 * kv_dim *
 * bytes_per_elem), K and V for 16 positions in every layer per block, capped
 * at SV_KV_MAX_BLOCKS. kv_dim = n_kv_heads * head_dim. SV_ERR_ARG for a zero
 * or overflowing shape; SV_ERR_BUDGET ("KV budget of B bytes holds only N
 * blocks, need M") when the result is below min_blocks (pass
 * ceil(max_ctx / 16) so that one full-length sequence fits). */
sv_status sv_kv_pool_blocks_for_bytes(uint64_t bytes, uint32_t n_layers, uint32_t kv_dim,
                                      uint32_t bytes_per_elem, uint32_t min_blocks, uint32_t *out,
                                      sv_error_t *err);

typedef struct sv_kv_pool_config {
    uint32_t n_blocks; /* physical blocks, 1..SV_KV_MAX_BLOCKS */
    uint32_t max_seqs; /* sequence handles alive at once (running, forked, preempted) */
    uint32_t max_ctx;  /* tokens per sequence; sizes every block table */
} sv_kv_pool_config_t;

/* All memory the pool will ever use is allocated here. SV_ERR_ARG for zero
 * or oversized fields, SV_ERR_NOMEM. Caller frees with sv_kv_pool_destroy. */
sv_status sv_kv_pool_create(const sv_kv_pool_config_t *cfg, sv_kv_pool_t **out, sv_error_t *err);
/* Frees the pool, its sequence handles (they become invalid) and its tables.
 * The prefix cache, if any, must be destroyed first. NULL is a no-op. */
void sv_kv_pool_destroy(sv_kv_pool_t *p);

/* The evictor: frees up to n_wanted blocks (by dropping references it
 * holds) and returns how many reached the free list. */
typedef uint32_t (*sv_kv_evictor_fn)(void *ctx, uint32_t n_wanted);
/* Installs (or, with fn == NULL, removes) the evictor. */
void sv_kv_pool_set_evictor(sv_kv_pool_t *p, sv_kv_evictor_fn fn, void *ctx);

/* One free block with refcount 1, owned by the caller (drop it with
 * sv_kv_pool_decref). SV_ERR_BUDGET "out of KV blocks" when none is free
 * even after asking the evictor. */
sv_status sv_kv_pool_alloc(sv_kv_pool_t *p, uint32_t *block, sv_error_t *err);
/* Adds / drops one reference to a held block. At 0 the block returns to the
 * free list. SV_ERR_ARG (and nothing changes) for an id out of range or a
 * free block: that is a caller bug, reported rather than corrupting the
 * free list. */
sv_status sv_kv_pool_incref(sv_kv_pool_t *p, uint32_t block);
sv_status sv_kv_pool_decref(sv_kv_pool_t *p, uint32_t block);
/* Current count (0 for a free block or an id out of range). */
uint32_t sv_kv_pool_refcount(const sv_kv_pool_t *p, uint32_t block);

uint32_t sv_kv_pool_n_blocks(const sv_kv_pool_t *p);
uint32_t sv_kv_pool_free_blocks(const sv_kv_pool_t *p);

typedef struct sv_kv_pool_stats {
    uint32_t n_blocks, free_blocks, used_blocks; /* free + used == n_blocks */
    uint32_t high_water;                         /* most blocks used at once */
    uint32_t seqs, seqs_high_water;              /* live sequence handles */
    uint64_t allocs;                             /* blocks handed out */
    uint64_t cow_copies;                         /* copies returned by append */
    uint64_t evictor_calls, evicted;             /* calls, blocks they freed */
    uint64_t out_of_blocks;                      /* SV_ERR_BUDGET from alloc/append */
} sv_kv_pool_stats_t;
void sv_kv_pool_stats(const sv_kv_pool_t *p, sv_kv_pool_stats_t *st);

/* Checks every invariant the pool can see: the free list holds exactly the
 * blocks with refcount 0, once each; used == n_blocks - free; every block in
 * a live table is held, with a refcount at least its number of table
 * entries; each table has ceil(len / 16) entries. O(n_blocks + table
 * entries). For tests and debug builds; SV_ERR_ARG with a description of
 * the first violation. */
sv_status sv_kv_pool_check(const sv_kv_pool_t *p, sv_error_t *err);

/* ---- sequences -------------------------------------------------------------- */

/* A copy the caller must make in the backend before writing: positions
 * [0, n_pos) of block src into block dst, in every layer. n_pos == 0 means
 * no copy (src and dst are then SV_KV_NO_BLOCK). */
typedef struct sv_kv_copy {
    uint32_t src, dst, n_pos;
} sv_kv_copy_t;

/* An empty sequence from the pool's slab (no allocation). SV_ERR_BUDGET
 * "too many sequences" when all max_seqs handles are in use. Caller returns
 * it with sv_kv_seq_destroy. */
sv_status sv_kv_seq_create(sv_kv_pool_t *p, sv_kv_seq_t **out, sv_error_t *err);
/* Releases the sequence's blocks and returns the handle to the slab; the
 * handle is invalid afterwards (a second destroy is ignored until the slot
 * is handed out again). NULL is a no-op. */
void sv_kv_seq_destroy(sv_kv_seq_t *s);

/* Tokens in the sequence's KV (positions 0 .. len-1). */
uint32_t sv_kv_seq_len(const sv_kv_seq_t *s);
/* The block table: ceil(len / 16) ids, borrowed, valid until the next call
 * that changes the sequence. */
const uint32_t *sv_kv_seq_blocks(const sv_kv_seq_t *s, uint32_t *n_blocks);

/* Blocks sv_kv_seq_append(s, n_new) would take from the pool (new blocks
 * plus a copy-on-write block), for the scheduler's planning. */
uint32_t sv_kv_seq_blocks_needed(const sv_kv_seq_t *s, uint32_t n_new);

/* Makes room for n_new more tokens at positions len .. len+n_new-1: takes
 * new blocks as positions cross block boundaries and, if the partial last
 * block is shared, replaces it with a private copy and fills *copy (which
 * the caller must perform first; see the header essay); otherwise sets
 * copy->n_pos = 0. copy may be NULL only when the caller knows no copy can
 * arise (never shared); a needed copy with copy == NULL is SV_ERR_ARG.
 * SV_ERR_BUDGET "out of KV blocks" (after the evictor) or "sequence exceeds
 * max_ctx": the sequence and every refcount are unchanged (only the
 * evictor's work stands). O(1 + new blocks), no allocation. */
sv_status sv_kv_seq_append(sv_kv_seq_t *s, uint32_t n_new, sv_kv_copy_t *copy, sv_error_t *err);

/* Shrinks the sequence to n tokens (jump-forward rollback, speculative
 * rejection, recompute), dropping its references to blocks past
 * ceil(n / 16). SV_ERR_ARG if n > len. */
sv_status sv_kv_seq_truncate(sv_kv_seq_t *s, uint32_t n, sv_error_t *err);
/* Truncates to 0: every reference dropped, the handle stays usable
 * (preemption, cancellation). */
void sv_kv_seq_release(sv_kv_seq_t *s);

/* A new sequence sharing all of src's blocks (one more reference each), of
 * the same length: n > 1 sampling and prefix sharing. SV_ERR_BUDGET "too
 * many sequences". Caller destroys *out. */
sv_status sv_kv_seq_fork(sv_kv_seq_t *src, sv_kv_seq_t **out, sv_error_t *err);

/* Sets an empty sequence's table to blocks[0 .. ceil(n_tokens/16)) and its
 * length to n_tokens, taking over the caller's reference to each block (as
 * sv_radix_match hands them out; no incref). SV_ERR_ARG if the sequence is
 * not empty or a block is not held; SV_ERR_BUDGET if n_tokens > max_ctx. On
 * error the references stay the caller's. */
sv_status sv_kv_seq_adopt(sv_kv_seq_t *s, const uint32_t *blocks, uint32_t n_tokens, sv_error_t *err);

#endif
