/* train: the whole backward against central finite differences on tiny models, the kernel ABI
 * plumbing (an fp32 test kernel reproduces the reference bit for bit; failing kernels are caught),
 * the gradient probe (its bf16 emulation is builtin:bf16_accum's arithmetic, bit for bit), the
 * margin against its closed form, and the experiment on small synthetic runs (verdicts against the
 * faithful floor in both directions: the incident kernel departs, a faithful one does not;
 * byte-identical JSON). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "parity/kernel.h"
#include "parity/rng.h"
#include "parity/train.h"
#include "src/train/train_impl.h"

static parity_train_config_t tiny_cfg(int layers)
{
    parity_train_config_t c;
    parity_train_config_default(&c);
    c.d_model = 8;
    c.n_heads = 2;
    c.n_layers = layers;
    c.mlp_mult = 2;
    c.seq_len = 5;
    c.batch_seqs = 3;
    c.val_seqs = 2;
    return c;
}

static void tiny_batch(int V, int n, uint64_t seed, int32_t *in, int32_t *tg)
{
    parity_rng_t r;
    parity_rng_seed(&r, seed, 9);
    for (int i = 0; i < n; i++) {
        /* skewed ids so some rows get several hits */
        in[i] = (int32_t)(parity_rng_below(&r, 3) == 0 ? parity_rng_below(&r, (uint64_t)V) : parity_rng_below(&r, 3));
        tg[i] = (int32_t)parity_rng_below(&r, (uint64_t)V);
    }
}

/* Central differences in fp32 with h = 1e-2 (loss ~ 3, summed in double): rounding error
 * ~1e-6 / 2h = 5e-5, truncation ~h^2 |L'''| ~ 1e-4; the tolerance is their sum, 1.5e-4, absolute
 * (no term relative to |g|: the error of a central difference does not scale with g; the worst
 * |fd - g| measured on these two models is 6.6e-6). The check must have power: the same
 * comparison against the gradient made 1% wrong fails on some element (the largest |g| are
 * ~0.2, so 1% is ~2e-3, ten times the tolerance), which is asserted too. */
static void check_fd(int layers, int V)
{
    parity_train_config_t c = tiny_cfg(layers);
    parity_train_model_t *m = NULL;
    assert_int_equal(parity_train_model_new(&c, V, 5, &m, NULL), PARITY_OK);
    int N = c.batch_seqs * c.seq_len;
    int32_t in[64], tg[64];
    tiny_batch(V, N, 3, in, tg);
    double loss;
    assert_int_equal(parity_train_model_grad(m, in, tg, c.batch_seqs, NULL, 0, &loss, NULL, NULL), PARITY_OK);
    size_t np = parity_train_model_nparams(m);
    float *p = parity_train_model_params(m);
    float *g = malloc(np * sizeof *g);
    memcpy(g, parity_train_model_grads(m), np * sizeof *g);
    assert_true(loss == parity_train_model_loss(m, in, tg, c.batch_seqs)); /* the same forward, the same order */
    int checked = 0, caught = 0;
    for (int t = 0; t < parity_train_model_ntensors(m); t++) {
        size_t off, cnt;
        const char *name = parity_train_model_tensor(m, t, &off, &cnt);
        /* the 3 largest-|g| elements and 3 spread ones */
        size_t pick[6];
        int np6 = 0;
        for (int k = 0; k < 3; k++) {
            size_t best = off;
            double bv = -1;
            for (size_t i = off; i < off + cnt; i++) {
                int taken = 0;
                for (int q = 0; q < np6; q++) taken |= pick[q] == i;
                if (!taken && fabs(g[i]) > bv) { bv = fabs(g[i]); best = i; }
            }
            pick[np6++] = best;
        }
        for (int k = 0; k < 3; k++) pick[np6++] = off + (cnt * (size_t)(2 * k + 1)) / 6;
        for (int q = 0; q < np6; q++) {
            size_t i = pick[q];
            float save = p[i];
            float h = 1e-2f;
            p[i] = save + h;
            double lp = parity_train_model_loss(m, in, tg, c.batch_seqs);
            p[i] = save - h;
            double lm = parity_train_model_loss(m, in, tg, c.batch_seqs);
            p[i] = save;
            double fd = (lp - lm) / (2.0 * ((double)(save + h) - (double)save));
            double tol = 1.5e-4;
            caught += fabs(fd - 1.01 * (double)g[i]) > tol;
            if (fabs(fd - g[i]) > tol)
                fail_msg("layers %d: %s[%zu]: analytic %.6g, central difference %.6g", layers, name,
                         i - off, (double)g[i], fd);
            checked++;
        }
    }
    assert_true(checked >= 6 * 10);
    if (caught == 0) fail_msg("layers %d: a gradient 1%% wrong passes the check (tolerance too loose)", layers);
    free(g);
    parity_train_model_free(m);
}

static void backward_matches_finite_differences(void **state)
{
    (void)state;
    check_fd(1, 13);
    check_fd(2, 29); /* two blocks; 29 ids: classes of 6, the last one short */
}

/* An fp32-in, fp32-out kernel with the reference's arithmetic: must give identical gradients. */
static int k_f32_run(const parity_abi_call_t *call)
{
    const parity_abi_tensor_t *dy = &call->inputs[0], *x = &call->inputs[1], *g = &call->inputs[2];
    const int32_t *ids = call->inputs[3].data;
    float *dE = call->outputs[0].data, *dg = call->outputs[1].data;
    int64_t n = dy->shape[0], d = dy->shape[1], v = call->outputs[0].shape[0];
    const float *X = x->data, *DY = dy->data, *G = g->data;
    memset(dE, 0, (size_t)(v * d) * sizeof(float));
    memset(dg, 0, (size_t)d * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        const float *xr = X + i * d, *dyr = DY + i * d;
        float ss = 0.0f;
        for (int64_t k = 0; k < d; k++) ss += xr[k] * xr[k];
        float r = 1.0f / sqrtf(ss / (float)d + 1e-5f), c = 0.0f;
        for (int64_t k = 0; k < d; k++) c += G[k] * dyr[k] * (xr[k] * r);
        c /= (float)d;
        for (int64_t k = 0; k < d; k++) {
            float xh = xr[k] * r;
            dE[ids[i] * d + k] += r * (G[k] * dyr[k] - xh * c);
            dg[k] += dyr[k] * xh;
        }
    }
    return PARITY_KERNEL_OK;
}
static int k_error_run(const parity_abi_call_t *call) { (void)call; return PARITY_KERNEL_ERROR; }
static int k_lazy_run(const parity_abi_call_t *call) { (void)call; return PARITY_KERNEL_OK; }
/* the reference's dE times 1e30: finite outputs, a training that goes elsewhere (the RMSNorm
 * after E keeps the forward finite, so it departs rather than diverges) */
static int k_huge_run(const parity_abi_call_t *call)
{
    k_f32_run(call);
    float *dE = call->outputs[0].data;
    for (int64_t i = 0; i < call->outputs[0].shape[0] * call->outputs[0].shape[1]; i++) dE[i] *= 1e30f;
    return PARITY_KERNEL_OK;
}

static const parity_abi_kernel_t K_F32 = {sizeof(parity_abi_kernel_t), "test_f32", "embedding_rmsnorm_bwd", "", 0,
                                          PARITY_DT_F32, PARITY_DT_F32, k_f32_run, NULL};
static const parity_abi_kernel_t K_ERR = {sizeof(parity_abi_kernel_t), "test_err", "embedding_rmsnorm_bwd", "", 0,
                                          PARITY_DT_F32, PARITY_DT_F32, k_error_run, NULL};
static const parity_abi_kernel_t K_LAZY = {sizeof(parity_abi_kernel_t), "test_lazy", "embedding_rmsnorm_bwd", "", 0,
                                           PARITY_DT_BF16, PARITY_DT_F32, k_lazy_run, NULL};

static const parity_abi_kernel_t K_HUGE = {sizeof(parity_abi_kernel_t), "test_huge", "embedding_rmsnorm_bwd", "", 0,
                                           PARITY_DT_F32, PARITY_DT_F32, k_huge_run, NULL};

static void kernel_path_plumbing(void **state)
{
    (void)state;
    parity_train_config_t c = tiny_cfg(1);
    int V = 13, N = c.batch_seqs * c.seq_len;
    parity_train_model_t *m = NULL;
    assert_int_equal(parity_train_model_new(&c, V, 5, &m, NULL), PARITY_OK);
    int32_t in[64], tg[64];
    tiny_batch(V, N, 3, in, tg);
    size_t np = parity_train_model_nparams(m);
    float *ref = malloc(np * sizeof *ref);
    double l0, l1;
    parity_train_stats_t st = {0};
    assert_int_equal(parity_train_model_grad(m, in, tg, c.batch_seqs, NULL, 0, &l0, &st, NULL), PARITY_OK);
    assert_true(st.max_hits >= 2);
    memcpy(ref, parity_train_model_grads(m), np * sizeof *ref);
    /* fp32 test kernel: bit-identical */
    assert_int_equal(parity_train_model_grad(m, in, tg, c.batch_seqs, &K_F32, 0, &l1, &st, NULL), PARITY_OK);
    assert_memory_equal(ref, parity_train_model_grads(m), np * sizeof *ref);
    /* catalog fp32_seq takes bf16 inputs: close, not equal. Bound, first order in u = 2^-9 (bf16's
     * unit roundoff): dy, g, x each carry u; with r = 1/rms(x) (u) and xhat = x r (2u), the row
     * dx = r P(g dy), P the projection orthogonal to xhat, perturbs by at most
     * r (2u ||g dy|| + 6u |c| ||xhat||) + u ||dx|| <= (8u / sqrt(1 - 1/D) + u) ||dx|| when g dy is
     * not aligned with xhat (|c| ||xhat|| <= ||g dy|| by Cauchy-Schwarz, ||P g dy|| ~
     * sqrt(1 - 1/D) ||g dy|| for the random directions here). Summing a row's contributions adds
     * the errors and may cancel the terms; kappa (the summed norms of the contributions over the norm of the sums) measures that and
     * multiplies the bound. */
    parity_kernel_list_t kl = {0};
    assert_int_equal(parity_kernel_resolve("builtin:fp32_seq", "embedding_rmsnorm_bwd", &kl, NULL), PARITY_OK);
    assert_int_equal(parity_train_model_grad(m, in, tg, c.batch_seqs, kl.items[0].k, 0, &l1, &st, NULL), PARITY_OK);
    const float *g = parity_train_model_grads(m);
    size_t off, cnt;
    parity_train_model_tensor(m, 0, &off, &cnt); /* wte */
    double num = 0, den = 0, kappa = 0;
    for (size_t i = off; i < off + cnt; i++) {
        num += ((double)g[i] - ref[i]) * ((double)g[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    /* kappa = sqrt(sum_rows (sum_n ||dx_n||)^2) / ||dE||: the per-token dx rows recomputed from
     * the model's activations of this call (dy is still in m->dh, x in m->e) */
    {
        int D = c.d_model;
        double *rown = calloc((size_t)V, sizeof *rown), acc = 0;
        float dxn[8], dgs[8] = {0};
        assert_true(D <= 8 && rown);
        for (int n = 0; n < N; n++) {
            train_rms_bwd_row(dxn, dgs, m->e + (size_t)n * D, m->dh + (size_t)n * D, m->g0, m->r0[n], D);
            double q = 0;
            for (int k = 0; k < D; k++) q += (double)dxn[k] * dxn[k];
            rown[m->ids_buf[n]] += sqrt(q);
        }
        for (int r = 0; r < V; r++) acc += rown[r] * rown[r];
        kappa = sqrt(acc / den); /* kappa >= 1 */
        free(rown);
    }
    double u = 0x1p-9, bound = (8.0 * u / sqrt(1.0 - 1.0 / c.d_model) + u) * kappa;
    assert_true(kappa >= 1.0 - 1e-6);
    assert_true(den > 0 && sqrt(num / den) > 0);
    if (sqrt(num / den) > bound)
        fail_msg("fp32_seq vs reference: rel %.3g > %.3g (kappa %.3g)", sqrt(num / den), bound, kappa);
    parity_kernel_list_free(&kl);
    /* failing kernels */
    parity_diag_t d;
    memset(&st, 0, sizeof st);
    assert_int_equal(parity_train_model_grad(m, in, tg, c.batch_seqs, &K_ERR, 0, &l1, &st, &d), PARITY_E_UNSUPPORTED);
    assert_int_equal(st.kernel_status, PARITY_KERNEL_ERROR);
    memset(&st, 0, sizeof st);
    assert_int_equal(parity_train_model_grad(m, in, tg, c.batch_seqs, &K_LAZY, 0, &l1, &st, &d), PARITY_E_UNSUPPORTED);
    assert_true(st.nonfinite);
    /* bad ids are rejected, not read out of bounds */
    in[0] = V;
    assert_int_equal(parity_train_model_grad(m, in, tg, c.batch_seqs, NULL, 0, &l1, &st, &d), PARITY_E_INVALID);
    free(ref);
    parity_train_model_free(m);
}

static parity_train_config_t run_cfg(void)
{
    parity_train_config_t c;
    parity_train_config_default(&c);
    c.d_model = 8;
    c.n_heads = 2;
    c.mlp_mult = 2;
    c.seq_len = 8;
    c.batch_seqs = 16;
    c.val_seqs = 8;
    c.steps = 12;
    c.eval_every = 3;
    c.synth_tokens = 20000;
    c.jobs = 2;
    return c;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = calloc((size_t)n + 1, 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return b;
}

static void experiment_verdicts_and_json(void **state)
{
    (void)state;
    parity_train_config_t c = run_cfg();
    parity_train_data_t d[2] = {PARITY_TRAIN_DATA_ZIPF, PARITY_TRAIN_DATA_UNIFORM};
    parity_train_opt_t o[2] = {PARITY_TRAIN_OPT_SGD, PARITY_TRAIN_OPT_ADAMW};
    parity_train_report_t *r = NULL;
    const parity_abi_kernel_t *kf[1] = {&K_F32};
    assert_int_equal(parity_train_run(&c, kf, NULL, 1, d, 2, o, 2, NULL, NULL, &r, NULL), PARITY_OK);
    assert_int_equal(r->n_cells, 4);
    for (int i = 0; i < 4; i++) {
        const parity_train_cell_t *x = &r->cells[i];
        /* the same arithmetic as the reference: identical curves, gap exactly 0, ratio 0 whatever
         * the floor (f32 in and out, another fp32 order: with rows of at most two hits, as on
         * uniform ids here, a reordered sum is the same sum and the floor is 0 too) */
        assert_string_equal(x->verdict, "within-floor");
        assert_true(x->final_gap == 0.0 && x->max_gap == 0.0);
        assert_true(x->floor_gap_max >= 0.0 && x->loss_ratio == 0.0);
        assert_true(x->grad_err[0] == 0.0 && x->grad_cos[0] == 1.0);
        assert_int_equal(x->steps_done, c.steps);
        assert_int_equal(x->n_eval, 5);
        assert_true(x->val_ref[0] == x->val_noise[0]); /* same initial weights */
        assert_true(x->val_ref[4] < x->val_ref[0]);    /* it learns */
        assert_true(x->max_hits >= 1);
    }
    char p1[] = "/tmp/parity_train_XXXXXX";
    int fd = mkstemp(p1);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(parity_train_write_json(r, p1, NULL), PARITY_OK);
    char *a = slurp(p1);
    parity_train_report_free(r);
    c.jobs = 1; /* thread count must not change the result */
    assert_int_equal(parity_train_run(&c, kf, NULL, 1, d, 2, o, 2, NULL, NULL, &r, NULL), PARITY_OK);
    assert_int_equal(parity_train_write_json(r, p1, NULL), PARITY_OK);
    char *b = slurp(p1);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "\"schema\":\t\"parity.train/2\""));
    assert_int_equal(parity_train_write_svg(r, p1, NULL), PARITY_OK);
    char *s = slurp(p1);
    assert_non_null(strstr(s, "<svg"));
    assert_non_null(strstr(s, "</svg>"));
    free(a); free(b); free(s);
    unlink(p1);
    parity_train_report_free(r);
}

static void failing_candidate_is_a_verdict(void **state)
{
    (void)state;
    parity_train_config_t c = run_cfg();
    parity_train_data_t d = PARITY_TRAIN_DATA_ZIPF;
    parity_train_opt_t o = PARITY_TRAIN_OPT_SGD;
    parity_train_report_t *r = NULL;
    const parity_abi_kernel_t *kl[1] = {&K_LAZY}, *kh[1] = {&K_HUGE}, *kf[1] = {&K_F32};
    assert_int_equal(parity_train_run(&c, kl, NULL, 1, &d, 1, &o, 1, NULL, NULL, &r, NULL), PARITY_OK);
    assert_string_equal(r->cells[0].verdict, "crashed");
    assert_int_equal(r->cells[0].first_departure, 0);
    assert_non_null(strstr(r->cells[0].reason, "non-finite"));
    parity_train_report_free(r);
    /* a wrong kernel with finite outputs: departs on the loss and on every step's gradients (from
     * step 0), with all steps done */
    assert_int_equal(parity_train_run(&c, kh, NULL, 1, &d, 1, &o, 1, NULL, NULL, &r, NULL), PARITY_OK);
    assert_string_equal(r->cells[0].verdict, "departs");
    assert_int_equal(r->cells[0].steps_done, c.steps);
    assert_int_equal(r->cells[0].first_departure, 0);
    assert_non_null(strstr(r->cells[0].departs_on, "loss"));
    assert_non_null(strstr(r->cells[0].departs_on, "grad 0-9"));
    assert_true(r->cells[0].loss_ratio > r->cells[0].margin);
    parity_train_report_free(r);
    /* bad configuration: usage error, no report */
    c.steps = 0;
    parity_diag_t diag;
    assert_int_equal(parity_train_run(&c, kf, NULL, 1, &d, 1, &o, 1, NULL, NULL, &r, &diag), PARITY_E_INVALID);
    assert_null(r);
}


/* parity_train_margin for K = 1 has a closed form: |Z0| / |Z1| is the absolute value of a
 * standard Cauchy variable, P(> M) = (2/pi) atan(1/M), so M = 1 / tan(pi alpha / 2). For K >= 2
 * the margin falls with K (more floor runs, a sharper maximum), and P at the returned M is alpha
 * (checked by Monte Carlo: 2e5 draws, 1-sigma error sqrt(alpha/2e5) ~ 2.2e-4 at alpha = 0.01). */
static void margin_matches_closed_form(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        double a = (double[]){0.01, 0.05, 0.01 / 6}[i];
        double want = 1.0 / tan(M_PI * a / 2.0), got = parity_train_margin(1, a);
        /* measured 1.1e-11 relative (Simpson's rule at h = 0.005, the bisection's 1e-12 stop);
         * 1e-9 leaves two orders for another libm's erf */
        if (fabs(got - want) > 1e-9 * want) fail_msg("alpha %g: margin %.9g, closed form %.9g", a, got, want);
    }
    double m2 = parity_train_margin(2, 0.01), m3 = parity_train_margin(3, 0.01);
    assert_true(m3 < m2 && m2 < parity_train_margin(1, 0.01));
    parity_rng_t r;
    parity_rng_seed(&r, 7, 1);
    int over = 0, n = 200000;
    for (int i = 0; i < n; i++) {
        double z0 = fabs(parity_rng_normal(&r)), mx = 0.0;
        for (int k = 0; k < 3; k++) mx = fmax(mx, fabs(parity_rng_normal(&r)));
        over += z0 > m3 * mx;
    }
    /* 5 sigma: a wrong integrand (e.g. K and K+1 swapped: P ~ 0.0045) fails */
    if (fabs((double)over / n - 0.01) > 5 * sqrt(0.01 / n))
        fail_msg("K = 3, M = %.4f: Monte Carlo P = %.5f, want 0.01", m3, (double)over / n);
    assert_true(isnan(parity_train_margin(0, 0.01)));
}

/* The probe's bf16 emulation (inputs rounded to bf16, the catalog's fp32 row backward, token
 * order, round to bf16 after every addition) is builtin:bf16_accum's arithmetic: its accumulator
 * equals the kernel's dE bit for bit, so the "rounded away" count is that of the kernel's own
 * additions. The fp32 emulation is builtin:fp32_seq's: equal to that kernel's dE. */
static void probe_emulates_catalog_kernels(void **state)
{
    (void)state;
    parity_train_config_t c = tiny_cfg(1);
    c.batch_seqs = 40; /* 200 tokens, skewed: rows with dozens of hits */
    int V = 13, N = c.batch_seqs * c.seq_len;
    parity_train_model_t *m = NULL;
    assert_int_equal(parity_train_model_new(&c, V, 5, &m, NULL), PARITY_OK);
    int32_t in[256], tg[256];
    tiny_batch(V, N, 3, in, tg);
    static const char *const names[2] = {"builtin:bf16_accum", "builtin:fp32_seq"};
    for (int q = 0; q < 2; q++) {
        parity_kernel_list_t kl = {0};
        assert_int_equal(parity_kernel_resolve(names[q], "embedding_rmsnorm_bwd", &kl, NULL), PARITY_OK);
        assert_int_equal(train_model_set_probe(m, PARITY_DT_BF16), PARITY_OK);
        double loss;
        assert_int_equal(parity_train_model_grad(m, in, tg, c.batch_seqs, kl.items[0].k, 0, &loss, NULL, NULL), PARITY_OK);
        const float *emu = q == 0 ? m->emu16 : m->emu32;
        for (size_t i = 0; i < (size_t)V * c.d_model; i++)
            if (memcmp(&emu[i], &m->dwte[i], sizeof(float)) != 0)
                fail_msg("%s: dE[%zu] = %a, emulation %a", names[q], i, (double)m->dwte[i], (double)emu[i]);
        /* the most frequent rows lose contributions in bf16, none are lost entirely in fp32 at this size */
        assert_true(m->probe[0].absorbed_bf16 > 0.0 && m->probe[0].absorbed_fp32 == 0.0);
        assert_true(m->probe[0].rows_hit > 0 && m->probe[0].rel_err > 0.0 && m->probe[0].cosine <= 1.0);
        parity_kernel_list_free(&kl);
    }
    parity_train_model_free(m);
}

/* The acceptance test on a small configuration (12,288 tokens per step, Zipf(1): the most
 * frequent row gets ~1,300 hits per step): the incident kernel departs from the faithful floor and
 * a faithful kernel in another fp32 order (the catalog's fp32_shuffled) stays within it. */
static void incident_departs_faithful_does_not(void **state)
{
    (void)state;
    parity_train_config_t c = run_cfg();
    c.batch_seqs = 1536;
    c.steps = 3;
    c.eval_every = 1;
    c.synth_tokens = 50000;
    c.floor_orders = 3; /* M = 7.8: at ~1,300 hits the hot-row gradient error is ~14x the floor's */
    parity_kernel_list_t kl = {0};
    assert_int_equal(parity_kernel_resolve("builtin:bf16_accum", "embedding_rmsnorm_bwd", &kl, NULL), PARITY_OK);
    assert_int_equal(parity_kernel_resolve("builtin:fp32_shuffled", "embedding_rmsnorm_bwd", &kl, NULL), PARITY_OK);
    const parity_abi_kernel_t *ks[2] = {kl.items[0].k, kl.items[1].k};
    parity_train_data_t d = PARITY_TRAIN_DATA_ZIPF;
    parity_train_opt_t o = PARITY_TRAIN_OPT_SGD;
    parity_train_report_t *r = NULL;
    assert_int_equal(parity_train_run(&c, ks, NULL, 2, &d, 1, &o, 1, NULL, NULL, &r, NULL), PARITY_OK);
    assert_int_equal(r->n_cells, 2);
    const parity_train_cell_t *inc = &r->cells[0], *fa = &r->cells[1];
    assert_true(inc->max_hits > 1000);
    print_message("bf16_accum: loss x%.3g, hot-row gradient x%.3g, lost bf16 %.3f; fp32_shuffled: "
                  "loss x%.3g, gradient x%.3g; margin %.3f\n", inc->loss_ratio, inc->grad_ratio[0],
                  inc->absorbed_bf16[0], fa->loss_ratio, fa->grad_ratio[0], inc->margin);
    if (strcmp(inc->verdict, "departs") != 0)
        fail_msg("bf16_accum: %s (loss x%.3g, hot-row gradient x%.3g, margin %.3g)", inc->verdict,
                 inc->loss_ratio, inc->grad_ratio[0], inc->margin);
    assert_non_null(strstr(inc->departs_on, "grad 0-9"));
    assert_true(inc->absorbed_bf16[0] > 0.05); /* the stalls are there: contributions rounded away */
    if (strcmp(fa->verdict, "within-floor") != 0)
        fail_msg("fp32_shuffled: %s on %s (loss x%.3g, gradient x%.3g, margin %.3g)", fa->verdict,
                 fa->departs_on, fa->loss_ratio, fa->grad_ratio[0], fa->margin);
    parity_train_report_free(r);
    parity_kernel_list_free(&kl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backward_matches_finite_differences),
        cmocka_unit_test(kernel_path_plumbing),
        cmocka_unit_test(experiment_verdicts_and_json),
        cmocka_unit_test(failing_candidate_is_a_verdict),
        cmocka_unit_test(margin_matches_closed_form),
        cmocka_unit_test(probe_emulates_catalog_kernels),
        cmocka_unit_test(incident_departs_faithful_does_not),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
