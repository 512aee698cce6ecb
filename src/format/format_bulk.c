/* Fast bulk conversions between fp32 and bf16 / fp16 / e4m3fn: nearest-even, default saturation
 * (no saturation), written as branch-free integer bit tricks so GCC vectorizes the loops.
 * Deliberately not here: other rounding modes and formats (use parity_format_encode). Every
 * function here must agree bit for bit with parity_format_encode / decode; tests/test_format.c
 * checks that over structured and random fp32 patterns, tests/long_format.sh over all 2^32. */
#include "parity/format.h"

#include <string.h>

#include "src/core/internal.h"

/* The hot loops get -O3 (full vectorizer cost model) on top of the project's -O2; this changes
 * no floating-point semantics (still no fast-math, no contraction). */
#if defined(__GNUC__) && !defined(__clang__)
#define PARITY_HOT __attribute__((optimize("O3")))
#else
#define PARITY_HOT /* clang vectorizes these loops at -O2 already */
#endif

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
/* Branch-free select: all-ones mask picks a. Written with masks rather than ?: so that GCC keeps
 * the (always executed) fp32 additions outside any branch: with -ftrapping-math, the default
 * we keep, it will not if-convert a branch that contains a floating-point operation. */
static inline uint32_t sel(uint32_t mask, uint32_t a, uint32_t b) { return (a & mask) | (b & ~mask); }
static inline uint32_t mask_if(int c) { return (uint32_t)0 - (uint32_t)c; }

/* fp32 -> bf16, nearest-even: adding 0x7fff plus the lowest kept bit to the bit pattern rounds
 * the 16 dropped bits half-to-even (a tie 0x8000 carries only when the kept lsb is 1); a carry
 * out of the fraction increments the exponent, and 0x7f7fffff-class values carry into the inf
 * code 0x7f80, which is IEEE overflow. NaN becomes the canonical quiet NaN with its sign. */
static inline uint16_t bf16_rne(uint32_t u)
{
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

/* fp32 -> fp16, nearest-even (after F. Giesen's float_to_half_fast3_rtne, rewritten as selects):
 * normal results: rebias the exponent (127 -> 15) and round 13 bits as in bf16_rne;
 * subnormal results (|x| < 2^-14): |x| + 0.5f is one correctly rounded fp32 addition whose
 * ulp, 2^-24, is the fp16 subnormal quantum, so the low bits are the rounded fp16 code (a carry
 * to 0x400 is the smallest normal, correctly); |x| >= 65536 (incl. inf) -> inf; values in
 * [65520, 65536) round up to 0x7c00 through the normal path; NaN -> sign | 0x7e00. */
static inline uint16_t fp16_rne(uint32_t u)
{
    uint32_t sign = (u >> 16) & 0x8000u, x = u & 0x7fffffffu;
    uint32_t nrm = (x - (112u << 23) + 0xfffu + ((x >> 13) & 1u)) >> 13;
    uint32_t sub = f2u(u2f(x) + 0.5f) - 0x3f000000u;
    uint32_t r = sel(mask_if(x < (113u << 23)), sub, nrm);
    r = sel(mask_if(x >= (143u << 23)), 0x7c00u, r);
    r = sel(mask_if(x > 0x7f800000u), 0x7e00u, r);
    return (uint16_t)(r | sign);
}

/* fp32 -> e4m3fn, nearest-even, overflow to NaN (ml_dtypes / PyTorch):
 * normal results (|x| >= 2^-6): round 20 bits half-to-even, rebias 127 -> 7 (subtract 120 << 3
 * from exponent:fraction); subnormal results: |x| + 2^14 is one rounded fp32 addition with ulp
 * 2^-9, the e4m3fn subnormal quantum; |x| > 464 (the midpoint between 448 and the missing 480;
 * 464 itself ties to the even 448) and NaN -> 0x7f. */
static inline uint8_t e4m3fn_rne(uint32_t u)
{
    uint32_t sign = (u >> 24) & 0x80u, x = u & 0x7fffffffu;
    uint32_t nrm = ((x + 0x7ffffu + ((x >> 20) & 1u)) >> 20) - (120u << 3);
    uint32_t sub = f2u(u2f(x) + 16384.0f) - 0x46800000u;
    uint32_t r = sel(mask_if(x < (121u << 23)), sub, nrm);
    r = sel(mask_if(x > 0x43e80000u), 0x7fu, r); /* 0x43e80000 = 464.0f */
    return (uint8_t)(r | sign);
}

PARITY_HOT void parity_fp32_to_bf16(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = bf16_rne(f2u(in[i]));
}

PARITY_HOT void parity_bf16_to_fp32(const uint16_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = u2f((uint32_t)in[i] << 16);
}

PARITY_HOT void parity_fp32_to_fp16(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = fp16_rne(f2u(in[i]));
}

/* fp16 -> fp32: rebias normal codes; subnormals m 2^-24 computed exactly as
 * (2^-14 (1 + m/1024)) - 2^-14 in fp32; inf/NaN keep their fraction (NaN stays NaN). */
PARITY_HOT void parity_fp16_to_fp32(const uint16_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t h = in[i];
        uint32_t o = (h & 0x7fffu) << 13, e = o & (0x1fu << 23);
        uint32_t nrm = o + (112u << 23);
        uint32_t sub = f2u(u2f(o + (113u << 23)) - u2f(113u << 23));
        uint32_t inf = o | (0xffu << 23);
        uint32_t r = sel(mask_if(e == 0), sub, sel(mask_if(e == (0x1fu << 23)), inf, nrm));
        out[i] = u2f(r | ((h & 0x8000u) << 16));
    }
}

PARITY_HOT void parity_fp32_to_e4m3fn(const float *in, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = e4m3fn_rne(f2u(in[i]));
}

/* e4m3fn -> fp32: normal codes rebias 7 -> 127; subnormals are m 2^-9 (exact int -> float);
 * 0x7f / 0xff are NaN. */
PARITY_HOT void parity_e4m3fn_to_fp32(const uint8_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t b = in[i], mag = b & 0x7fu;
        uint32_t nrm = (mag << 20) + (120u << 23);
        uint32_t sub = f2u((float)(int32_t)mag * 0x1p-9f);
        uint32_t r = sel(mask_if(mag < 8u), sub, nrm);
        r = sel(mask_if(mag == 0x7fu), 0x7fc00000u, r);
        out[i] = u2f(r | ((b & 0x80u) << 24));
    }
}

uint16_t parity_fp32_to_bf16_1(float x) { return bf16_rne(f2u(x)); }

float parity_bf16_to_fp32_1(uint16_t b) { return parity_bf16_bits_to_f32(b); }

float parity_round_bf16(float x) { return u2f((uint32_t)bf16_rne(f2u(x)) << 16); }
