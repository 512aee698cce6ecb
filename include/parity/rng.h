/* Seeded, reproducible random numbers: every random choice in parity flows from a 64-bit seed.
 * xoshiro256** (Blackman & Vigna 2018) seeded through splitmix64; streams derived from
 * (seed, stream id) are independent for practical purposes. Not for cryptography. */
#ifndef PARITY_RNG_H
#define PARITY_RNG_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/rng.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t s[4];
} parity_rng_t;

/* Seed from (seed, stream): the same pair always gives the same sequence. */
void parity_rng_seed(parity_rng_t *rng, uint64_t seed, uint64_t stream);
uint64_t parity_rng_u64(parity_rng_t *rng);
/* Uniform double in [0, 1) with 53 random bits. */
double parity_rng_uniform(parity_rng_t *rng);
/* Uniform integer in [0, n), unbiased (rejection); n > 0. */
uint64_t parity_rng_below(parity_rng_t *rng, uint64_t n);
/* Standard normal (Box-Muller, both values used across calls is NOT done: one value per call,
 * so the sequence depends only on the number of calls). */
double parity_rng_normal(parity_rng_t *rng);

#ifdef __cplusplus
}
#endif
#endif
