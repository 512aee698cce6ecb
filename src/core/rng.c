/* xoshiro256** seeded by splitmix64 (public-domain algorithms by Blackman and Vigna),
 * written from the published description. */
#include "parity/rng.h"
#include "src/core/internal.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

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

/* n normals times scale by the ziggurat method of Marsaglia and Tsang ("The Ziggurat Method for
 * Generating Random Variables", J. Statistical Software 5(8), 2000), written from the paper's
 * description; a pure function of the rng state. The density f(x) = exp(-x^2/2) on x >= 0 is
 * covered by ZIG_LAYERS strips of equal area v: strip 0 is the rectangle [0, r] x [0, f(r)] with
 * the tail beyond r, strip i >= 1 the rectangle [0, x_i] x [f(x_i), f(x_(i+1))]. One 64-bit draw
 * gives the strip (its low 8 bits), the sign (bit 8) and a uniform U (its top 53 bits); x = U x_i
 * is a sample when x < x_(i+1) (the part of the strip under the curve: 98.5% of draws, a
 * multiplication and a comparison), else the tail (strip 0: Marsaglia's 1964 method, two logs)
 * or the wedge (accepted when a uniform height under the strip lies under f(x), else a new draw).
 * The method is exact: the samples have the normal distribution up to the tables' double
 * rounding (tests/test_rng.c holds the bulk loop to the method one draw at a time, bit for bit,
 * and the samples to the normal CDF). Until December 2026 these were Marsaglia's polar pairs: one
 * log, a division and a square root per pair, 2.3x the time per value (docs/check-speed.md). */
enum { ZIG_LAYERS = 256 };
#define ZIG_R 3.6541528853610088 /* x_1: where the tail starts, for 256 strips (the paper's) */
#define ZIG_V 0.00492867323399   /* the area of each strip (the paper's, for 256 strips) */

static double zig_x[ZIG_LAYERS + 1], zig_f[ZIG_LAYERS + 1]; /* x_i and f(x_i); x_256 = 0 */
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_init(void)
{
    double fr = exp(-0.5 * ZIG_R * ZIG_R);
    zig_x[0] = ZIG_V / fr; /* strip 0's rectangle would have this width with the tail's area */
    zig_f[0] = 0;
    zig_x[1] = ZIG_R;
    zig_f[1] = fr;
    for (int i = 2; i < ZIG_LAYERS; i++) { /* each strip's area v: x_i = f^-1(v / x_(i-1) + f(x_(i-1))) */
        zig_x[i] = sqrt(-2.0 * log(ZIG_V / zig_x[i - 1] + zig_f[i - 1]));
        zig_f[i] = exp(-0.5 * zig_x[i] * zig_x[i]);
    }
    zig_x[ZIG_LAYERS] = 0;
    zig_f[ZIG_LAYERS] = 1;
}

/* The draw u that missed the fast path (and the draws after it, from rng) to a signed sample. */
static double zig_slow(parity_rng_t *rng, uint64_t u)
{
    for (;;) {
        int i = (int)(u & 0xff);
        double x = (double)(u >> 11) * 0x1.0p-53 * zig_x[i], z;
        if (x < zig_x[i + 1]) {
            z = x;
        } else if (i == 0) { /* the tail beyond r: r + a, a ~ Exp(r) accepted w.p. exp(-a^2/2) */
            double a, b;
            do {
                a = -log(1.0 - parity_rng_uniform_inline(rng)) / ZIG_R;
                b = -log(1.0 - parity_rng_uniform_inline(rng));
            } while (2.0 * b < a * a);
            z = ZIG_R + a;
        } else if (zig_f[i] + parity_rng_uniform_inline(rng) * (zig_f[i + 1] - zig_f[i]) <
                   exp(-0.5 * x * x)) { /* the wedge */
            z = x;
        } else {
            u = parity_rng_u64_inline(rng);
            continue;
        }
        return u & 0x100 ? -z : z;
    }
}

void parity_rng_normals(parity_rng_t *rng, double *o, int64_t n, double scale)
{
    pthread_once(&zig_once, zig_init);
    parity_rng_t g = *rng; /* the state in registers: through memory it took 1.4x as long */
    for (int64_t j = 0; j < n; j++) {
        uint64_t u = parity_rng_u64_inline(&g);
        int i = (int)(u & 0xff);
        double x = (double)(u >> 11) * 0x1.0p-53 * zig_x[i];
        if (__builtin_expect(x < zig_x[i + 1], 1)) {
            /* the sign from bit 8 without a branch (a random branch: half mispredicted) */
            uint64_t b;
            memcpy(&b, &x, sizeof b);
            b ^= (u & 0x100) << 55;
            memcpy(&x, &b, sizeof x);
        } else { /* through *rng, so that g's address is never taken */
            *rng = g;
            x = zig_slow(rng, u);
            g = *rng;
        }
        o[j] = x * scale;
    }
    *rng = g;
}
