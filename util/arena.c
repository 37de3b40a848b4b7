#include "arena.h"

#include "memacct.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_MAX ((size_t)1 << 20)

typedef struct chunk {
    struct chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} chunk_t;

typedef struct cleanup {
    struct cleanup *next;
    sv_arena_cleanup_fn fn;
    void *ptr;
} cleanup_t;

struct sv_arena {
    chunk_t *head;
    cleanup_t *cleanups;
    size_t chunk_bytes;
    size_t total;
    uint64_t acct;   /* the memory account its chunks are charged to (memacct.h) */
};

sv_arena_t *sv_arena_create(size_t chunk_bytes) {
    sv_arena_t *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->chunk_bytes = chunk_bytes ? chunk_bytes : 64 * 1024;
    return a;
}

void sv_arena_destroy(sv_arena_t *a) {
    if (!a) return;
    for (cleanup_t *c = a->cleanups; c; c = c->next)
        if (c->fn) c->fn(c->ptr);
    for (chunk_t *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    sv_memacct_release(a->acct, a->total);
    free(a);
}

void *sv_arena_alloc(sv_arena_t *a, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    if (bytes == 0) bytes = 16;
    chunk_t *c = a->head;
    if (!c || c->size - c->used < bytes) {
        size_t size = bytes > a->chunk_bytes ? bytes : a->chunk_bytes;
        if (size > SIZE_MAX - sizeof(chunk_t)) return NULL;
        uint64_t id;
        if (!sv_memacct_charge(sizeof(chunk_t) + size, &id)) return NULL; /* the compile's memory budget */
        if (a->total && id != a->acct) { /* chunks of one arena go to one account */
            sv_memacct_release(id, sizeof(chunk_t) + size);
            id = a->acct;
        }
        a->acct = id;
        c = malloc(sizeof(chunk_t) + size);
        if (!c) {
            sv_memacct_release(id, sizeof(chunk_t) + size);
            return NULL;
        }
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
        a->total += sizeof(chunk_t) + size;
        /* Chunks double up to CHUNK_MAX: an arena that grows big (a
         * schema's ASTs, hundreds of MiB under a recursive difference)
         * takes pages of its own (past the mmap threshold, src/cli/main.c)
         * that go back when it is released, instead of 64 KiB pieces of the
         * heap that freed tables are interleaved with: those kept a
         * compile's peak RSS up to 30 MiB past what its account held
         * (tests/reliability/compile_bounds.py, Handwritten---mod309). */
        if (a->chunk_bytes < CHUNK_MAX) a->chunk_bytes *= 2;
    }
    void *p = c->data + c->used;
    c->used += bytes;
    memset(p, 0, bytes);
    return p;
}

bool sv_arena_release(sv_arena_t *a, void *ptr, unsigned recent) {
    for (cleanup_t *c = a->cleanups; c && recent; c = c->next, recent--)
        if (c->fn && c->ptr == ptr) {
            c->fn(ptr);
            c->fn = NULL;
            c->ptr = NULL;
            return true;
        }
    return false;
}

size_t sv_arena_bytes(const sv_arena_t *a) { return a->total; }

bool sv_arena_defer(sv_arena_t *a, sv_arena_cleanup_fn fn, void *ptr) {
    cleanup_t *c = sv_arena_alloc(a, sizeof *c);
    if (!c) {
        fn(ptr);
        return false;
    }
    c->fn = fn;
    c->ptr = ptr;
    c->next = a->cleanups;
    a->cleanups = c;
    return true;
}
