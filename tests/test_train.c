/* train: the whole backward against central finite differences on tiny models, the kernel ABI
 * plumbing (an fp32 test kernel reproduces the reference bit for bit; failing kernels are caught),
 * and the experiment on tiny synthetic runs (verdicts, byte-identical JSON). */
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
 * ~1e-6 / 2h = 5e-5, truncation ~h^2 |L'''| ~ 1e-4; tolerance 4e-4 + 3e-2 |g|. */
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
    assert_true(fabs(loss - parity_train_model_loss(m, in, tg, c.batch_seqs)) < 1e-6);
    int checked = 0;
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
            double tol = 4e-4 + 3e-2 * fabs(g[i]);
            if (fabs(fd - g[i]) > tol)
                fail_msg("layers %d: %s[%zu]: analytic %.6g, central difference %.6g", layers, name,
                         i - off, (double)g[i], fd);
            checked++;
        }
    }
    assert_true(checked >= 6 * 10);
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
    /* catalog fp32_seq takes bf16 inputs: close (bf16 input rounding, 2^-9 relative), not equal */
    parity_kernel_list_t kl = {0};
    assert_int_equal(parity_kernel_resolve("builtin:fp32_seq", "embedding_rmsnorm_bwd", &kl, NULL), PARITY_OK);
    assert_int_equal(parity_train_model_grad(m, in, tg, c.batch_seqs, kl.items[0].k, 0, &l1, &st, NULL), PARITY_OK);
    const float *g = parity_train_model_grads(m);
    size_t off, cnt;
    parity_train_model_tensor(m, 0, &off, &cnt); /* wte */
    double num = 0, den = 0;
    for (size_t i = off; i < off + cnt; i++) {
        num += ((double)g[i] - ref[i]) * ((double)g[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    assert_true(den > 0 && sqrt(num / den) < 2e-2 && sqrt(num / den) > 0);
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
    assert_int_equal(parity_train_run(&c, &K_F32, "test_f32", d, 2, o, 2, NULL, NULL, &r, NULL), PARITY_OK);
    assert_int_equal(r->n_cells, 4);
    for (int i = 0; i < 4; i++) {
        const parity_train_cell_t *x = &r->cells[i];
        /* the same arithmetic as the reference: identical curves, gap exactly 0 */
        assert_string_equal(x->verdict, "within-noise");
        assert_true(x->final_gap == 0.0 && x->max_gap == 0.0);
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
    assert_int_equal(parity_train_run(&c, &K_F32, "test_f32", d, 2, o, 2, NULL, NULL, &r, NULL), PARITY_OK);
    assert_int_equal(parity_train_write_json(r, p1, NULL), PARITY_OK);
    char *b = slurp(p1);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "\"schema\":\t\"parity.train/1\""));
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
    assert_int_equal(parity_train_run(&c, &K_LAZY, "lazy", &d, 1, &o, 1, NULL, NULL, &r, NULL), PARITY_OK);
    assert_string_equal(r->cells[0].verdict, "crashed");
    assert_int_equal(r->cells[0].first_departure, 0);
    assert_non_null(strstr(r->cells[0].reason, "non-finite"));
    parity_train_report_free(r);
    /* a wrong kernel with finite outputs: departs, at a step, with all steps done */
    assert_int_equal(parity_train_run(&c, &K_HUGE, "huge", &d, 1, &o, 1, NULL, NULL, &r, NULL), PARITY_OK);
    assert_string_equal(r->cells[0].verdict, "departs");
    assert_int_equal(r->cells[0].steps_done, c.steps);
    assert_true(r->cells[0].first_departure > 0);
    assert_true(fabs(r->cells[0].max_gap) > r->cells[0].noise_max);
    parity_train_report_free(r);
    /* bad configuration: usage error, no report */
    c.steps = 0;
    parity_diag_t diag;
    assert_int_equal(parity_train_run(&c, &K_F32, "x", &d, 1, &o, 1, NULL, NULL, &r, &diag), PARITY_E_INVALID);
    assert_null(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backward_matches_finite_differences),
        cmocka_unit_test(kernel_path_plumbing),
        cmocka_unit_test(experiment_verdicts_and_json),
        cmocka_unit_test(failing_candidate_is_a_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
