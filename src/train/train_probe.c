/* The op's in-process variants for the training probe: the fp32 reference, the faithful floor
 * (builtin:fp32_shuffled's arithmetic with its own permutation, the candidate's interface), and
 * the gradient probe that compares a step's dE with the reference and counts the contributions
 * a bf16 or fp32 accumulator rounds away. Deliberately not here: calling candidate kernels
 * through the ABI, the model (train_model.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/kernel/rms_row.h"
#include "parity/format.h"
#include "parity/rng.h"
#include "src/train/train_impl.h"

const int train_bucket_edges[PARITY_TRAIN_BUCKETS + 1] = {0, 10, 100, 1000, 5000, 1 << 30};

/* One row of RMSNorm backward (the same arithmetic as the op's fp32 reference row):
 * dx = r (g dy - xhat c), c = mean(g dy xhat); dg += dy xhat. dx may alias nothing. Here with the
 * reference that is made of it; the model's backward (train_model.c) calls it too, and this file
 * calls nothing of train_model.c. */
void train_rms_bwd_row(float *dx, float *dg, const float *x, const float *dy, const float *g,
                       float r, int d)
{
    float c = 0.0f;
    for (int k = 0; k < d; k++) c += g[k] * dy[k] * (x[k] * r);
    c /= (float)d;
    for (int k = 0; k < d; k++) {
        float xh = x[k] * r;
        dx[k] = r * (g[k] * dy[k] - xh * c);
        dg[k] += dy[k] * xh;
    }
}

/* The reference embedding_rmsnorm_bwd: fp32, token order (as builtin:fp32_seq, fp32 inputs),
 * into dE (V, D) and dg (D). */
void train_emb_rms_bwd_ref(parity_train_model_t *m, const float *dy, int N, float *dE, float *dg)
{
    int D = m->D;
    memset(dE, 0, (size_t)m->V * D * sizeof(float));
    memset(dg, 0, (size_t)D * sizeof(float));
    float *dx = m->dt2;
    for (int n = 0; n < N; n++) {
        train_rms_bwd_row(dx, dg, m->e + (size_t)n * D, dy + (size_t)n * D, m->g0, m->r0[n], D);
        float *dst = dE + (size_t)m->ids_buf[n] * D;
        for (int k = 0; k < D; k++) dst[k] += dx[k];
    }
}

static float round_to(int dt, float v) { return dt == PARITY_DT_BF16 ? parity_round_bf16(v) : v; }

/* Row n of the op's inputs as a kernel with input dtype `dt` receives them (x, dy into xr, dyr),
 * then the catalog kernels' fp32 row backward (parity_rms_bwd_row_f32): dx, and dy * xhat. */
static void kernel_row(const parity_train_model_t *m, const float *dy, int n, int dt, const float *gr,
                       float *xr, float *dyr, float *dx, float *xdy)
{
    int D = m->D;
    for (int k = 0; k < D; k++) {
        xr[k] = round_to(dt, m->e[(size_t)n * D + k]);
        dyr[k] = round_to(dt, dy[(size_t)n * D + k]);
    }
    parity_rms_bwd_row_f32(xr, dyr, gr, D, (float)PARITY_RMS_EPS, dx, xdy, 0, 0);
}

/* The faithful floor: the arithmetic of builtin:fp32_shuffled (inputs as the kernel's in_dtype
 * gives them, fp32 row backward, fp32 accumulation in a seeded random order of the tokens, dgamma
 * in the same order) with its own permutation per order k and step, outputs rounded once to
 * out_dtype. It differs from the fp32 reference only by what the interface forces (input and
 * output rounding) and the order of the fp32 sums. */
void train_emb_rms_bwd_floor(parity_train_model_t *m, const float *dy, int N, uint64_t seed)
{
    int D = m->D;
    float *gr = m->rowbuf, *xr = gr + D, *dyr = xr + D, *dx = dyr + D, *xdy = dx + D;
    for (int k = 0; k < D; k++) gr[k] = round_to(m->floor_in, m->g0[k]);
    memset(m->dwte, 0, (size_t)m->V * D * sizeof(float));
    memset(m->dg0, 0, (size_t)D * sizeof(float));
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, 0xf1002000u + (uint64_t)m->floor_order);
    for (int n = 0; n < N; n++) m->perm[n] = n;
    for (int n = N - 1; n > 0; n--) { /* Fisher-Yates */
        int64_t j = (int64_t)parity_rng_below(&rng, (uint64_t)n + 1), t = m->perm[n];
        m->perm[n] = m->perm[j];
        m->perm[j] = t;
    }
    for (int q = 0; q < N; q++) {
        int n = (int)m->perm[q];
        kernel_row(m, dy, n, m->floor_in, gr, xr, dyr, dx, xdy);
        float *dst = m->dwte + (size_t)m->ids_buf[n] * D;
        for (int k = 0; k < D; k++) {
            dst[k] += dx[k];
            m->dg0[k] += xdy[k];
        }
    }
    if (m->floor_out == PARITY_DT_BF16) {
        for (size_t i = 0; i < (size_t)m->V * D; i++) m->dwte[i] = parity_round_bf16(m->dwte[i]);
        for (int k = 0; k < D; k++) m->dg0[k] = parity_round_bf16(m->dg0[k]);
    }
}

/* The gradient probe, after the op wrote m->dwte: the fp32 reference dE on the same inputs, and
 * two emulated accumulators (bf16, fp32) adding the step's contributions in token order with the
 * inputs rounded as the run's kernel receives them. An addition of a nonzero term t to a row's
 * accumulator a is "rounded away" when round(a + t) == a: the row never sees that contribution.
 * For builtin:bf16_accum the bf16 emulation is that kernel's own arithmetic (tested). */
void train_probe_grad(parity_train_model_t *m, const float *dy, int N)
{
    int D = m->D, V = m->V;
    train_emb_rms_bwd_ref(m, dy, N, m->ref_dE, m->rowbuf); /* dgamma into scratch, unused */
    float *gr = m->rowbuf, *xr = gr + D, *dyr = xr + D, *dx = dyr + D, *xdy = dx + D;
    for (int k = 0; k < D; k++) gr[k] = round_to(m->probe_in, m->g0[k]);
    memset(m->emu16, 0, (size_t)V * D * sizeof(float));
    memset(m->emu32, 0, (size_t)V * D * sizeof(float));
    int64_t adds[PARITY_TRAIN_BUCKETS] = {0}, lost16[PARITY_TRAIN_BUCKETS] = {0},
            lost32[PARITY_TRAIN_BUCKETS] = {0};
    for (int n = 0; n < N; n++) {
        int id = m->ids_buf[n], b = 0;
        while (id >= train_bucket_edges[b + 1]) b++;
        kernel_row(m, dy, n, m->probe_in, gr, xr, dyr, dx, xdy);
        float *a16 = m->emu16 + (size_t)id * D, *a32 = m->emu32 + (size_t)id * D;
        for (int k = 0; k < D; k++) {
            if (dx[k] == 0.0f) continue;
            adds[b]++;
            float s16 = parity_round_bf16(a16[k] + dx[k]), s32 = a32[k] + dx[k];
            lost16[b] += s16 == a16[k];
            lost32[b] += s32 == a32[k];
            a16[k] = s16;
            a32[k] = s32;
        }
    }
    for (int b = 0; b < PARITY_TRAIN_BUCKETS; b++) {
        parity_train_gstep_t *p = &m->probe[b];
        int lo = train_bucket_edges[b], hi = train_bucket_edges[b + 1] < V ? train_bucket_edges[b + 1] : V;
        double se = 0.0, sc = 0.0;
        int rows = 0;
        for (int r = lo; r < hi; r++) {
            if (!m->hits[r]) continue;
            const float *c = m->dwte + (size_t)r * D, *f = m->ref_dE + (size_t)r * D;
            double dd = 0, ff = 0, cc = 0, cf = 0;
            for (int k = 0; k < D; k++) {
                double t = (double)c[k] - f[k];
                dd += t * t;
                ff += (double)f[k] * f[k];
                cc += (double)c[k] * c[k];
                cf += (double)c[k] * f[k];
            }
            if (!(ff > 0.0)) continue; /* the reference row is exactly zero: nothing to compare to */
            se += sqrt(dd / ff);
            sc += cc > 0.0 ? cf / sqrt(cc * ff) : 0.0;
            rows++;
        }
        p->rows_hit = rows;
        p->rel_err = rows ? se / rows : 0.0;
        p->cosine = rows ? sc / rows : 0.0;
        p->absorbed_bf16 = adds[b] ? (double)lost16[b] / (double)adds[b] : 0.0;
        p->absorbed_fp32 = adds[b] ? (double)lost32[b] / (double)adds[b] : 0.0;
    }
}

static parity_status_t scratch(parity_train_model_t *m, int probe)
{
    size_t VD = (size_t)m->V * m->D;
    if (!m->rowbuf) m->rowbuf = malloc((size_t)5 * m->D * sizeof(float));
    if (!m->perm) m->perm = malloc((size_t)m->nseq_max * m->T * sizeof(int64_t));
    if (probe) {
        if (!m->ref_dE) m->ref_dE = malloc(VD * sizeof(float));
        if (!m->emu16) m->emu16 = malloc(VD * sizeof(float));
        if (!m->emu32) m->emu32 = malloc(VD * sizeof(float));
        if (!m->ref_dE || !m->emu16 || !m->emu32) return PARITY_E_NOMEM;
    }
    return m->rowbuf && m->perm ? PARITY_OK : PARITY_E_NOMEM;
}

parity_status_t train_model_set_floor(parity_train_model_t *m, int in_dtype, int out_dtype, int order)
{
    m->floor_order = order;
    m->floor_in = in_dtype;
    m->floor_out = out_dtype;
    return order > 0 ? scratch(m, 0) : PARITY_OK;
}

parity_status_t train_model_set_probe(parity_train_model_t *m, int in_dtype)
{
    m->probe_on = in_dtype >= 0;
    m->probe_in = in_dtype;
    memset(m->probe, 0, sizeof m->probe);
    return m->probe_on ? scratch(m, 1) : PARITY_OK;
}
