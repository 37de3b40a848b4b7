/* rng.h — a small seeded PRNG (xoshiro256** seeded through splitmix64).
 * Deterministic for a given seed on every platform; not for cryptography. */
#ifndef SV_UTIL_RNG_H
#define SV_UTIL_RNG_H

#include <stdint.h>

#include "hash.h"

typedef struct sv_rng { uint64_t s[4]; } sv_rng_t;

static inline uint64_t sv_splitmix64(uint64_t *x) { return sv_hash_splitmix(*x += 0x9e3779b97f4a7c15ull); }

static inline void sv_rng_seed(sv_rng_t *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = sv_splitmix64(&seed);
}

static inline uint64_t sv_rng_next(sv_rng_t *r) {
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5, result = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform integer in [0, n); n > 0. The modulo bias is below 2^-32 for n < 2^32. */
static inline uint32_t sv_rng_below(sv_rng_t *r, uint32_t n) {
    return (uint32_t)(sv_rng_next(r) % n);
}

#endif
