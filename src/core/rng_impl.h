/* Internal: the xoshiro256** step of rng.c as an inline function, for the loops that draw
 * hundreds of millions of numbers (the workloads' normals, src/op/workload.c), where a call per
 * draw across files was a third of the generator's time. The one definition of the step: rng.c's
 * exported parity_rng_u64 and parity_rng_uniform are these, so the bits are the same either way. */
#ifndef PARITY_RNG_IMPL_H
#define PARITY_RNG_IMPL_H

#include "parity/rng.h"

static inline uint64_t parity_rng_rotl_(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t parity_rng_u64_inline(parity_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = parity_rng_rotl_(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = parity_rng_rotl_(s[3], 45);
    return result;
}

/* Uniform double in [0, 1) with 53 random bits (exact: an integer below 2^53 times 2^-53). */
static inline double parity_rng_uniform_inline(parity_rng_t *rng)
{
    return (double)(parity_rng_u64_inline(rng) >> 11) * 0x1.0p-53;
}

#endif
