/* Number formats: bit-exact encode/decode/round for bf16, fp16, e4m3fn, e5m2, tf32, fp32 and
 * custom (mantissa bits, exponent bits) formats; rounding modes; saturation policy; emulated
 * accumulation in a format; accurate (compensated and exact) reference summation in double.
 * Deliberately not here: tensors, op semantics (see op.h), anything wider than 32 bits of storage. */
#ifndef PARITY_FORMAT_H
#define PARITY_FORMAT_H

#ifndef PARITY_STATIC_LINKING_ONLY
#error "parity/format.h is in the experimental part of the C API, whose layouts change between releases: define PARITY_STATIC_LINKING_ONLY before including it and link libparity.a, or use the stable parity/parity.h (docs/c-api.md)"
#endif

#include <stddef.h>
#include <stdint.h>

#include "parity/rng.h"
#include "parity/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PARITY_FMT_FP32 = 0,
    PARITY_FMT_TF32 = 1,   /* 1+8+10, stored here in 19 bits (low bits of the code) */
    PARITY_FMT_BF16 = 2,
    PARITY_FMT_FP16 = 3,
    PARITY_FMT_E4M3FN = 4, /* OCP FP8 E4M3: no infinity, max 448, S.1111.111 is the only NaN */
    PARITY_FMT_E5M2 = 5,   /* OCP FP8 E5M2: IEEE-like, has infinities */
    PARITY_FMT_CUSTOM = 6  /* IEEE-like with given mantissa/exponent bits, has infinities */
} parity_format_kind_t;

/* NaN/infinity encoding family. */
typedef enum {
    PARITY_NANINF_IEEE = 0, /* exponent all ones: mantissa 0 = inf, else NaN */
    PARITY_NANINF_FN = 1    /* no infinities; only exponent and mantissa all ones is NaN */
} parity_naninf_t;

/* A fully described binary floating-point format. Fill it with parity_format_get() or
 * parity_format_custom(); the derived fields are consistent with kind/mant_bits/exp_bits. */
typedef struct {
    parity_format_kind_t kind;
    const char *name;      /* "bf16", "e4m3fn", "custom:m=10,e=5" style (static or internal) */
    int mant_bits;         /* explicit fraction bits t; precision p = t + 1 */
    int exp_bits;          /* w */
    int bias;              /* 2^(w-1) - 1 */
    int emin;              /* 1 - bias: exponent of the smallest normal */
    int emax;              /* exponent of the largest finite value */
    parity_naninf_t naninf;
    int total_bits;        /* 1 + w + t */
    double max_finite;     /* largest finite value */
    double min_normal;     /* 2^emin */
    double min_subnormal;  /* 2^(emin - t) */
    double unit_roundoff;  /* u = 2^-p (round to nearest) */
    char name_buf[32];     /* storage for custom names */
} parity_format_t;

typedef enum {
    PARITY_ROUND_NEAREST_EVEN = 0,
    PARITY_ROUND_TOWARD_ZERO = 1,
    PARITY_ROUND_STOCHASTIC = 2 /* round up with probability (x - down) / (up - down) */
} parity_rounding_t;

/* How a value beyond the finite range is encoded. Defaults per format: see
 * parity_format_default_opts() and docs/formats.md. */
typedef struct {
    parity_rounding_t rounding;
    int saturate_finite; /* 1: finite values that round beyond max_finite become +-max_finite;
                            0: they become +-inf (or NaN in FN formats, which have no inf) */
    int saturate_inf;    /* 1: +-inf inputs become +-max_finite; 0: +-inf (NaN in FN formats) */
} parity_round_opts_t;

/* Look up a named format: "fp32", "tf32", "bf16", "fp16", "e4m3fn", "e5m2", or a custom one
 * written "custom:m=T,e=W" (T fraction bits 1..23, W exponent bits 2..8, 1+W+T <= 32).
 * Returns PARITY_OK, PARITY_E_NOTFOUND for an unknown name, PARITY_E_INVALID for a bad custom
 * spec (diag says which field). */
parity_status_t parity_format_get(const char *name, parity_format_t *out, parity_diag_t *diag);

/* A custom IEEE-like format (has infinities), mant_bits 1..23, exp_bits 2..8. */
parity_status_t parity_format_custom(int mant_bits, int exp_bits, parity_format_t *out);

/* Defaults: nearest-even everywhere. saturate_finite/saturate_inf follow the implementation named
 * in docs/formats.md (bf16, fp16, e5m2, tf32, fp32: IEEE overflow to inf, as PyTorch and
 * ml_dtypes; e4m3fn: overflow to NaN and inf to NaN, as ml_dtypes' astype and PyTorch's
 * .to(torch.float8_e4m3fn); CUDA's __nv_cvt_float_to_fp8(..., __NV_SATFINITE) saturates). */
parity_round_opts_t parity_format_default_opts(const parity_format_t *f);

/* Encode the exact real value hi + lo (a double-double, |lo| <= ulp(hi)/2, or lo == 0) into the
 * format's bit pattern (low total_bits of the result), correctly rounded per opts: there is no
 * double rounding. rng is used only for stochastic rounding (may be NULL otherwise). NaN inputs
 * give the format's canonical quiet NaN with the input's sign where the format has one.
 * Clarifications: opts NULL means parity_format_default_opts(f). A pair that is not normalized
 * is renormalized first with 2Sum (exact unless hi + lo overflows double). Stochastic rounding
 * draws exactly one parity_rng_uniform() per finite nonzero input (none for zero, inf, NaN);
 * with rng NULL it falls back to nearest-even. Under round-toward-zero a finite overflow gives
 * +-max_finite whatever saturate_finite says (IEEE 754 section 7.4). */
uint32_t parity_format_encode2(const parity_format_t *f, double hi, double lo,
                               const parity_round_opts_t *opts, parity_rng_t *rng);
/* parity_format_encode2(f, x, 0, opts, rng). */
uint32_t parity_format_encode(const parity_format_t *f, double x, const parity_round_opts_t *opts,
                              parity_rng_t *rng);
/* Bulk forms of encode/decode (for ctypes oracles and tools): out[i] = encode(f, x[i], opts, rng),
 * out[i] = decode(f, bits[i]). Caller owns all buffers; opts NULL means default opts. */
void parity_format_encode_array(const parity_format_t *f, const double *x, size_t n,
                                const parity_round_opts_t *opts, parity_rng_t *rng, uint32_t *out);
void parity_format_decode_array(const parity_format_t *f, const uint32_t *bits, size_t n,
                                double *out);
/* The exact value of a bit pattern (always representable in double); NaN codes give a NaN with
 * the code's sign. Bits above total_bits are ignored. */
double parity_format_decode(const parity_format_t *f, uint32_t bits);
/* decode(encode(x)): the value x becomes in the format. */
double parity_format_round(const parity_format_t *f, double x, const parity_round_opts_t *opts,
                           parity_rng_t *rng);
double parity_format_round2(const parity_format_t *f, double hi, double lo,
                            const parity_round_opts_t *opts, parity_rng_t *rng);
/* ulp of the format at x: the spacing of representable values in the binade of x (subnormal
 * spacing below min_normal). For x == 0 returns min_subnormal; NaN/inf give NaN. */
double parity_format_ulp(const parity_format_t *f, double x);

/* Fast bulk conversions (hot paths, vectorizable), nearest-even, default saturation. */
void parity_fp32_to_bf16(const float *in, uint16_t *out, size_t n);
void parity_bf16_to_fp32(const uint16_t *in, float *out, size_t n);
void parity_fp32_to_fp16(const float *in, uint16_t *out, size_t n);
void parity_fp16_to_fp32(const uint16_t *in, float *out, size_t n);
void parity_fp32_to_e4m3fn(const float *in, uint8_t *out, size_t n);
void parity_e4m3fn_to_fp32(const uint8_t *in, float *out, size_t n);
/* Scalar forms of the fast conversions (same results). */
uint16_t parity_fp32_to_bf16_1(float x);
float parity_bf16_to_fp32_1(uint16_t b);
/* Round a float to bf16 and back (nearest-even). */
float parity_round_bf16(float x);

/* Emulated accumulation of terms (given exactly as doubles) in format f: each addition is
 * computed exactly (2Sum) and rounded once to f per opts. */
typedef enum {
    PARITY_SUM_SEQUENTIAL = 0, /* acc = 0; acc = fl(acc + x[i]) for i = 0..n-1 */
    PARITY_SUM_PAIRWISE = 1,   /* recursive halving: fl(sum(left) + sum(right)), leaves of 1 */
    PARITY_SUM_BLOCKED = 2     /* sequential within blocks of `block` terms, then sequential
                                  over the block sums */
} parity_sum_order_t;

double parity_format_sum(const parity_format_t *f, const double *x, size_t n,
                         parity_sum_order_t order, size_t block, const parity_round_opts_t *opts,
                         parity_rng_t *rng);
/* One emulated addition: fl_f(a + b), a and b exact doubles. */
double parity_format_add(const parity_format_t *f, double a, double b,
                         const parity_round_opts_t *opts, parity_rng_t *rng);

/* Neumaier's compensated sum in double (error about u^2 * n * sum|x| + u * |sum|). */
double parity_sum_neumaier(const double *x, size_t n);
/* The exact sum, correctly rounded to double (Shewchuk's error-free partials, as in Python's
 * math.fsum). Non-finite inputs give the IEEE result of naive summation. */
double parity_sum_exact(const double *x, size_t n);

/* x as decimal text that reads back (strtod) as exactly x: the shortest of %.15g, %.16g and
 * %.17g that does, or "%d" for an integer of int range; NaN and inf as "nan", "inf", "-inf".
 * For JSON reports (cJSON's printer takes %1.15g when it reads back within DBL_EPSILON, which
 * can leave a value an ulp off). buf holds at least 32 bytes; returns buf. */
char *parity_format_decimal(double x, char *buf);

#ifdef __cplusplus
}
#endif
#endif
