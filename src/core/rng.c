/* xoshiro256** seeded by splitmix64 (public-domain algorithms by Blackman and Vigna),
 * written from the published description. */
#include "parity/rng.h"
#include "src/core/internal.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void parity_rng_seed(parity_rng_t *rng, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL);
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

uint64_t parity_rng_u64(parity_rng_t *rng) { return parity_rng_u64_inline(rng); }

double parity_rng_uniform(parity_rng_t *rng) { return parity_rng_uniform_inline(rng); }

uint64_t parity_rng_below(parity_rng_t *rng, uint64_t n)
{
    /* Lemire's nearly-divisionless method needs 128-bit products; plain rejection is enough. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
    uint64_t r;
    do {
        r = parity_rng_u64(rng);
    } while (r >= limit);
    return r % n;
}

double parity_rng_normal(parity_rng_t *rng)
{
    double u1, u2;
    do {
        u1 = parity_rng_uniform(rng);
    } while (u1 <= 0.0);
    u2 = parity_rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}
