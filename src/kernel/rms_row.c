/* The faithful fp32 RMSNorm row backward that the catalog kernels of the RMSNorm and embedding
 * families, their references' emulations and the training probe (src/train) share: a bottom
 * module, so that src/ never includes ops/ (docs/architecture.md). */
#include "src/kernel/rms_row.h"

#include <math.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

/* GCC at -O3 (it vectorizes the element-wise loops; it never reorders a sum without
 * -fassociative-math, and -ffp-contract=off holds), so the bits are those of -O2. */
/* r from the row's sum of squares ss, in the r mode's way (both row functions below). */
static inline float rms_r(float ss, int64_t d, float eps, int r_mode)
{
    float ms = ss / (float)d;
    float r = r_mode == PARITY_RMS_R_EPS_OUTSIDE ? 1.0f / (sqrtf(ms) + eps) : 1.0f / sqrtf(ms + eps);
    if (r_mode == PARITY_RMS_R_LOW_2ULP) r = nextafterf(nextafterf(r, 0.0f), 0.0f);
    return r;
}

/* dx_j = r (g_j dy_j - x_j r c), element-wise (vectorized at -O3; each element's operations as
 * written, so the same bits). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static inline void rms_dx(const float *restrict x, const float *restrict dy, const float *restrict g,
                          int64_t d, float r, float c, int ignore_gamma, float *restrict dx)
{
    for (int64_t j = 0; j < d; j++) {
        float xh = x[j] * r;
        float gj = ignore_gamma ? 1.0f : g[j];
        dx[j] = r * (gj * dy[j] - xh * c);
    }
}

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
float parity_rms_bwd_row_f32(const float *x, const float *dy, const float *g, int64_t d, float eps,
                             float *dx, float *xhat_dy, int ignore_gamma, int r_mode)
{
    float ss = 0.0f;
    for (int64_t k = 0; k < d; k++) ss += x[k] * x[k];
    float r = rms_r(ss, d, eps, r_mode);
    if (dx) { /* c enters dx only */
        float c = 0.0f;
        for (int64_t k = 0; k < d; k++) c += (ignore_gamma ? 1.0f : g[k]) * dy[k] * (x[k] * r);
        rms_dx(x, dy, g, d, r, c / (float)d, ignore_gamma, dx);
    }
    if (xhat_dy)
        for (int64_t j = 0; j < d; j++) xhat_dy[j] = dy[j] * (x[j] * r);
    return r;
}

/* parity_rms_bwd_row_f32 for four rows side by side, the same bits row by row: lane a of each
 * SSE register holds row a, so both sequential sums (of x^2, and of g dy xhat) run as four chains
 * at once, each in its row's order k = 0..d-1 and with the same single-precision operations
 * (mulps, addps: no contraction; intrinsics, so the build's -ffp-contract=off is not even needed).
 * The chains were the cost: one fp32 addition's latency per element and sum, each row after the
 * other. Elsewhere than SSE, the rows one at a time. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
void parity_rms_bwd_rows4_f32(const float *const x[4], const float *const dy[4], const float *g,
                              int64_t d, float eps, float *const dx[4], float r[4],
                              int ignore_gamma, int r_mode)
{
#if defined(__SSE2__)
    __m128 ss = _mm_setzero_ps();
    int64_t k = 0;
    for (; k + 4 <= d; k += 4) { /* four columns of four rows, transposed: v[c] = column k + c */
        __m128 v[4] = {_mm_loadu_ps(x[0] + k), _mm_loadu_ps(x[1] + k), _mm_loadu_ps(x[2] + k),
                       _mm_loadu_ps(x[3] + k)};
        _MM_TRANSPOSE4_PS(v[0], v[1], v[2], v[3]);
        for (int c = 0; c < 4; c++) ss = _mm_add_ps(ss, _mm_mul_ps(v[c], v[c]));
    }
    for (; k < d; k++) {
        __m128 v = _mm_setr_ps(x[0][k], x[1][k], x[2][k], x[3][k]);
        ss = _mm_add_ps(ss, _mm_mul_ps(v, v));
    }
    float s4[4], c4[4];
    _mm_storeu_ps(s4, ss);
    for (int a = 0; a < 4; a++) r[a] = rms_r(s4[a], d, eps, r_mode); /* lane by lane */
    /* c = sum_k (g_k dy_k) (x_k r) in k order, as (g[k] * dy[k]) * (x[k] * r) groups it */
    const __m128 rv = _mm_loadu_ps(r);
    __m128 cs = _mm_setzero_ps();
    for (k = 0; k + 4 <= d; k += 4) {
        __m128 xv[4] = {_mm_loadu_ps(x[0] + k), _mm_loadu_ps(x[1] + k), _mm_loadu_ps(x[2] + k),
                        _mm_loadu_ps(x[3] + k)};
        __m128 yv[4] = {_mm_loadu_ps(dy[0] + k), _mm_loadu_ps(dy[1] + k), _mm_loadu_ps(dy[2] + k),
                        _mm_loadu_ps(dy[3] + k)};
        _MM_TRANSPOSE4_PS(xv[0], xv[1], xv[2], xv[3]);
        _MM_TRANSPOSE4_PS(yv[0], yv[1], yv[2], yv[3]);
        for (int c = 0; c < 4; c++) {
            __m128 gd = _mm_mul_ps(_mm_set1_ps(ignore_gamma ? 1.0f : g[k + c]), yv[c]);
            cs = _mm_add_ps(cs, _mm_mul_ps(gd, _mm_mul_ps(xv[c], rv)));
        }
    }
    for (; k < d; k++) {
        __m128 xv = _mm_setr_ps(x[0][k], x[1][k], x[2][k], x[3][k]);
        __m128 yv = _mm_setr_ps(dy[0][k], dy[1][k], dy[2][k], dy[3][k]);
        __m128 gd = _mm_mul_ps(_mm_set1_ps(ignore_gamma ? 1.0f : g[k]), yv);
        cs = _mm_add_ps(cs, _mm_mul_ps(gd, _mm_mul_ps(xv, rv)));
    }
    _mm_storeu_ps(c4, cs);
    for (int a = 0; a < 4; a++) rms_dx(x[a], dy[a], g, d, r[a], c4[a] / (float)d, ignore_gamma, dx[a]);
#else
    for (int a = 0; a < 4; a++)
        r[a] = parity_rms_bwd_row_f32(x[a], dy[a], g, d, eps, dx[a], NULL, ignore_gamma, r_mode);
#endif
}

