/* hash.h — the hash functions of the in-memory tables, one copy each.
 *
 * - FNV-1a (64-bit) over bytes, and its step for callers that feed words
 *   one at a time (a DFA's columns, a state set): cheap, and good enough
 *   for open addressing where every probe compares the key.
 * - sv_hash_u64: a multiply-xorshift of one 64-bit key (the first half of
 *   MurmurHash3's finalizer), for tables keyed by integers or id pairs.
 * - sv_hash_splitmix: splitmix64's finalizer, a bijection with full
 *   avalanche; it also derives seeds (util/rng.h, src/engine/engine.c),
 *   so its output is observable and must never change.
 * - sv_hash_fib32: Fibonacci hashing, the top 32 bits of k times 2^64/phi.
 * - sv_hash_words: long byte strings eight bytes a step (FNV-1a's byte
 *   steps each wait on a multiply: hashing the memo keys of automata,
 *   fsm/dfa_cache.c, took 7% of compiling JSON Schema Store's Skaffold
 *   schema).
 *
 * No value of these is persisted (no file, store or cache on disk holds
 * one); tables that use them compare keys, so a collision costs a probe,
 * never a wrong answer. Not for anything an attacker must not collide. */
#ifndef SV_UTIL_HASH_H
#define SV_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SV_HASH_FNV_BASIS 0xcbf29ce484222325ull /* FNV-1a's 64-bit offset basis */
#define SV_HASH_FNV_PRIME 0x100000001b3ull      /* FNV's 64-bit prime */

/* One FNV-1a step: x is one byte, or one word for hashes over words. */
static inline uint64_t sv_hash_step(uint64_t h, uint64_t x) { return (h ^ x) * SV_HASH_FNV_PRIME; }

/* FNV-1a of p[0..n). */
static inline uint64_t sv_hash_bytes(const void *p, size_t n) {
    const uint8_t *s = (const uint8_t *)p;
    uint64_t h = SV_HASH_FNV_BASIS;
    for (size_t i = 0; i < n; i++) h = sv_hash_step(h, s[i]);
    return h;
}

/* FNV-1a of a NUL-terminated string (the NUL not included): equal to
 * sv_hash_bytes(s, strlen(s)). */
static inline uint64_t sv_hash_str(const char *s) {
    uint64_t h = SV_HASH_FNV_BASIS;
    for (; *s; s++) h = sv_hash_step(h, (uint8_t)*s);
    return h;
}

/* A 64-bit key's slot hash: its low bits depend on all of k. */
static inline uint64_t sv_hash_u64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* splitmix64's finalizer: every output bit depends on every input bit. */
static inline uint64_t sv_hash_splitmix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Eight bytes a step, each word folded in with a multiply-xorshift, the
 * length and the tail mixed in last. */
static inline uint64_t sv_hash_words(const void *p, size_t n) {
    const uint8_t *s = (const uint8_t *)p;
    uint64_t h = SV_HASH_FNV_BASIS ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, sizeof w);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    uint64_t t = 0;
    if (n > i) memcpy(&t, s + i, n - i);
    return sv_hash_splitmix(h ^ t);
}

/* Fibonacci hashing: mask the result for a power-of-two table. */
static inline uint32_t sv_hash_fib32(uint64_t k) { return (uint32_t)((k * 0x9e3779b97f4a7c15ull) >> 32); }

#endif
