/* arena.h — a bump allocator for data that dies together (an AST, a parse).
 *
 * Allocations are 16-byte aligned and live until sv_arena_destroy. The arena
 * counts the bytes it holds so that callers can enforce a memory budget. */
#ifndef SV_UTIL_ARENA_H
#define SV_UTIL_ARENA_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sv_arena sv_arena_t;

/* Returns NULL when out of memory. Caller frees with sv_arena_destroy. */
sv_arena_t *sv_arena_create(size_t chunk_bytes);
void sv_arena_destroy(sv_arena_t *a);

/* Zero-filled memory owned by the arena; NULL when out of memory. */
void *sv_arena_alloc(sv_arena_t *a, size_t bytes);

/* Registers fn(ptr) to run when the arena is destroyed (last registered
 * runs first), so objects that are not arena memory (a DFA embedded in an
 * AST, say) die with it. Returns false when out of memory; then fn(ptr) has
 * already been called. */
typedef void (*sv_arena_cleanup_fn)(void *ptr);
bool sv_arena_defer(sv_arena_t *a, sv_arena_cleanup_fn fn, void *ptr);

/* Runs now the cleanup registered for ptr, if it is among the last `recent`
 * registrations, and forgets it: for an object that dies before the arena
 * (an intermediate result of a chain of products). Returns whether it ran;
 * when not, ptr lives until sv_arena_destroy as registered. */
bool sv_arena_release(sv_arena_t *a, void *ptr, unsigned recent);

/* Bytes obtained from the system so far. */
size_t sv_arena_bytes(const sv_arena_t *a);

#endif
