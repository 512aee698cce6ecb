/* bench: the cost models' byte and flop counts worked out by hand, the score and speed-of-light
 * arithmetic, the ceilings cache, a copy kernel timed by the bench against the bandwidth probe,
 * the optimized catalog kernel's bits across thread counts, and a small end-to-end bench.
 * No timing assertions: measured figures are printed; only a very loose sanity range is held. */
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

#include "parity/bench.h"
#include "parity/kernel.h"
#include "parity/op.h"
#include "parity/tensor.h"
#include "parity/verify.h"
#include "src/core/parallel.h"

static void cost_fused_by_hand(void **state)
{
    (void)state;
    parity_cost_t c;
    /* The text workload: N=16384 D=256 V=50257, bf16 in, fp32 out.
     * read: dy, x 2*16384*256*2 = 16777216; gamma 256*2 = 512; ids 4*16384 = 65536.
     * write: dE 50257*256*4 = 51463168; dgamma 256*4 = 1024.
     * flops: 16384 * (12*256 + 5) = 16384 * 3077 = 50413568. */
    assert_int_equal(parity_bench_cost_shape("embedding_rmsnorm_bwd", 16384, 256, 50257,
                                             PARITY_DT_BF16, PARITY_DT_F32, &c), PARITY_OK);
    assert_true(c.bytes_read == 16777216.0 + 512 + 65536);
    assert_true(c.bytes_written == 51463168.0 + 1024);
    assert_true(c.bytes == c.bytes_read + c.bytes_written);
    assert_true(c.flops == 50413568.0);
    assert_string_equal(c.flop_dtype, "fp32");
    /* bf16 out halves the writes. */
    assert_int_equal(parity_bench_cost_shape("embedding_rmsnorm_bwd", 16384, 256, 50257,
                                             PARITY_DT_BF16, PARITY_DT_BF16, &c), PARITY_OK);
    assert_true(c.bytes_written == 50257.0 * 256 * 2 + 256 * 2);
}

static void cost_other_ops_by_hand(void **state)
{
    (void)state;
    parity_cost_t c;
    /* embedding_bwd N=4 D=3 V=10, f32 in and out: read 4*3*4 + 16 = 64, write 10*3*4 = 120,
     * 12 adds. */
    assert_int_equal(parity_bench_cost_shape("embedding_bwd", 4, 3, 10, PARITY_DT_F32, PARITY_DT_F32, &c), PARITY_OK);
    assert_true(c.bytes_read == 64 && c.bytes_written == 120 && c.flops == 12);
    /* embedding_fwd N=4 D=3 V=2 bf16: min(N,V) = 2 rows 2*3*2 = 12 + ids 16; write 4*3*2 = 24. */
    assert_int_equal(parity_bench_cost_shape("embedding_fwd", 4, 3, 2, PARITY_DT_BF16, PARITY_DT_BF16, &c), PARITY_OK);
    assert_true(c.bytes_read == 28 && c.bytes_written == 24 && c.flops == 0);
    /* rmsnorm_fwd N=2 D=8 bf16 -> f32: read 2*8*2 + 8*2 = 48, write 2*8*4 = 64, 2*(32+4) = 72. */
    assert_int_equal(parity_bench_cost_shape("rmsnorm_fwd", 2, 8, 0, PARITY_DT_BF16, PARITY_DT_F32, &c), PARITY_OK);
    assert_true(c.bytes_read == 48 && c.bytes_written == 64 && c.flops == 72);
    /* rmsnorm_bwd N=2 D=8 bf16 -> f32: read 2*2*8*2 + 16 = 80, write 64 + 32 = 96, 2*(88+5). */
    assert_int_equal(parity_bench_cost_shape("rmsnorm_bwd", 2, 8, 0, PARITY_DT_BF16, PARITY_DT_F32, &c), PARITY_OK);
    assert_true(c.bytes_read == 80 && c.bytes_written == 96 && c.flops == 186);
    /* log_softmax on 2 rows of V = 3 (d carries V): read 2*3*4, write 2*3*2, 2*(5*3+1) flops. */
    assert_int_equal(parity_bench_cost_shape("log_softmax", 2, 3, 0, PARITY_DT_F32, PARITY_DT_BF16, &c), PARITY_OK);
    assert_true(c.bytes_read == 24 && c.bytes_written == 12 && c.flops == 32);
    /* cross_entropy: + targets 4N read, + loss N written, 2*(5*3+5) flops. */
    assert_int_equal(parity_bench_cost_shape("cross_entropy", 2, 3, 0, PARITY_DT_F32, PARITY_DT_F32, &c), PARITY_OK);
    assert_true(c.bytes_read == 32 && c.bytes_written == 32 && c.flops == 40);
    /* gemm 2x3 . 3x4 in bf16 -> f32: read (6 + 12)*2, write 8*4, 2*2*3*4 flops; gemm_bwd twice. */
    assert_int_equal(parity_bench_cost_shape("gemm", 2, 3, 4, PARITY_DT_BF16, PARITY_DT_F32, &c), PARITY_OK);
    assert_true(c.bytes_read == 36 && c.bytes_written == 32 && c.flops == 48);
    assert_int_equal(parity_bench_cost_shape("gemm_bwd", 2, 3, 4, PARITY_DT_BF16, PARITY_DT_F32, &c), PARITY_OK);
    assert_true(c.bytes_read == 52 && c.bytes_written == 72 && c.flops == 96);
    assert_int_equal(parity_bench_cost_shape("no_such_op", 1, 1, 1, PARITY_DT_F32, PARITY_DT_F32, &c), PARITY_E_NOTFOUND);
    assert_int_equal(parity_bench_cost_shape("embedding_bwd", -1, 1, 1, PARITY_DT_F32, PARITY_DT_F32, &c), PARITY_E_INVALID);
    assert_int_equal(parity_bench_cost_shape(NULL, 1, 1, 1, PARITY_DT_F32, PARITY_DT_F32, &c), PARITY_E_INVALID);
}

/* The call-based cost reads N, D, V and dtypes from the tensors parity builds. */
static void cost_from_a_built_case(void **state)
{
    (void)state;
    const parity_op_t *ops[5] = {parity_op_find("embedding_rmsnorm_bwd"), parity_op_find("embedding_fwd"),
                                 parity_op_find("rmsnorm_bwd"), parity_op_find("gemm"),
                                 parity_op_find("gemm_bwd")};
    for (int o = 0; o < 5; o++) {
        assert_non_null(ops[o]);
        parity_workload_t wl;
        char name[64];
        static const char *const preset[5] = {"uniform", "uniform", "unit", "llm-fwd", "train-8k"};
        snprintf(name, sizeof name, "%s@64x24x500", preset[o]);
        assert_int_equal(parity_op_workload(ops[o], name, &wl), PARITY_OK);
        parity_case_t *c = NULL;
        parity_diag_t diag;
        assert_int_equal(parity_case_build(ops[o], &wl, 3, PARITY_DT_BF16, &c, &diag), PARITY_OK);
        parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
        for (int i = 0; i < c->n_inputs; i++) in[i] = c->inputs[i]->view;
        for (int i = 0; i < c->n_outputs; i++) {
            memset(&out[i], 0, sizeof out[i]);
            out[i].dtype = PARITY_DT_F32;
            out[i].ndim = c->out_ndim[i];
            memcpy(out[i].shape, c->out_shape[i], sizeof out[i].shape);
        }
        parity_abi_call_t call;
        memset(&call, 0, sizeof call);
        call.op = ops[o]->name;
        call.n_inputs = c->n_inputs;
        call.n_outputs = c->n_outputs;
        call.inputs = in;
        call.outputs = out;
        parity_cost_t a, b;
        assert_int_equal(parity_bench_cost_call(&call, &a), PARITY_OK);
        int64_t v = strcmp(ops[o]->name, "rmsnorm_bwd") == 0 ? 0 : 500;
        assert_int_equal(parity_bench_cost_shape(ops[o]->name, 64, 24, v, PARITY_DT_BF16, PARITY_DT_F32, &b), PARITY_OK);
        assert_true(a.bytes == b.bytes && a.flops == b.flops);
        parity_case_free(c);
    }
}

/* Every op of the registry has a cost model (ops/ops.def makes a missing one a link error; this
 * checks each gives work), and the attention and MoE models by hand through a call's shapes and
 * attributes. */
static void cost_every_op(void **state)
{
    (void)state;
    parity_cost_t c;
    for (int i = 0; i < parity_op_count(); i++) {
        assert_int_equal(parity_bench_cost_shape(parity_op_at(i)->name, 4, 8, 3, PARITY_DT_BF16,
                                                 PARITY_DT_F32, &c), PARITY_OK);
        assert_true(c.bytes > 0 && c.flops >= 0);
    }
    /* attention_fwd: Q, K, V (H=2, T=4, Dh=8) bf16, O f32, LSE f32, causal: P = 2*4*5/2 = 20
     * pairs, flops 20*(4*8+4) + 2*4*(8+2) = 800; read 3*2*4*8*2 = 384 B; write 2*4*8*4 + 2*4*4 =
     * 288 B. Not causal: P = 32, flops 32*36 + 80 = 1232. */
    parity_abi_tensor_t in[3], out[2];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    for (int a = 0; a < 3; a++) {
        in[a].dtype = PARITY_DT_BF16;
        in[a].ndim = 3;
        in[a].shape[0] = 2, in[a].shape[1] = 4, in[a].shape[2] = 8;
    }
    out[0] = in[0];
    out[0].dtype = PARITY_DT_F32;
    out[1].dtype = PARITY_DT_F32;
    out[1].ndim = 2;
    out[1].shape[0] = 2, out[1].shape[1] = 4;
    const char *names[1] = {"causal"};
    double causal = 1;
    parity_abi_call_t call;
    memset(&call, 0, sizeof call);
    call.op = "attention_fwd";
    call.n_inputs = 3, call.n_outputs = 2, call.inputs = in, call.outputs = out;
    call.n_attrs = 1, call.attr_names = names, call.attr_values = &causal;
    assert_int_equal(parity_bench_cost_call(&call, &c), PARITY_OK);
    assert_true(c.flops == 800 && c.bytes_read == 384 && c.bytes_written == 288);
    causal = 0;
    assert_int_equal(parity_bench_cost_call(&call, &c), PARITY_OK);
    assert_true(c.flops == 1232);
    /* moe_router_combine: logits (N=4, E=3), expert_out (4, 3, D=8) bf16, k = 2; out (4, 8) and
     * gates (4, 3) f32: read 4*3*2 + 4*2*8*2 = 152 B, write 4*8*4 + 4*3*4 = 176 B, flops
     * 4*(5*3 + 2*2 + 2*2*8) = 204. */
    parity_abi_tensor_t min[2], mout[2];
    memset(min, 0, sizeof min);
    memset(mout, 0, sizeof mout);
    min[0].dtype = min[1].dtype = PARITY_DT_BF16;
    min[0].ndim = 2, min[0].shape[0] = 4, min[0].shape[1] = 3;
    min[1].ndim = 3, min[1].shape[0] = 4, min[1].shape[1] = 3, min[1].shape[2] = 8;
    mout[0].dtype = mout[1].dtype = PARITY_DT_F32;
    mout[0].ndim = 2, mout[0].shape[0] = 4, mout[0].shape[1] = 8;
    mout[1].ndim = 2, mout[1].shape[0] = 4, mout[1].shape[1] = 3;
    const char *knames[1] = {"k"};
    double k = 2;
    call.op = "moe_router_combine";
    call.n_inputs = 2, call.n_outputs = 2, call.inputs = min, call.outputs = mout;
    call.n_attrs = 1, call.attr_names = knames, call.attr_values = &k;
    assert_int_equal(parity_bench_cost_call(&call, &c), PARITY_OK);
    assert_true(c.bytes_read == 152 && c.bytes_written == 176 && c.flops == 204);
}

static void score_and_sol(void **state)
{
    (void)state;
    /* S = 1 / (1 + (t_k - t_sol) / (t_b - t_sol)): the baseline gets 1/2, speed of light 1,
     * a kernel taking t_sol + 3 (t_b - t_sol) gets 1/4. */
    assert_true(parity_bench_score(5.0, 1.0, 5.0) == 0.5);
    assert_true(parity_bench_score(1.0, 1.0, 5.0) == 1.0);
    assert_true(parity_bench_score(13.0, 1.0, 5.0) == 0.25);
    assert_true(isnan(parity_bench_score(2.0, 5.0, 5.0))); /* baseline at the speed of light */
    assert_true(isnan(parity_bench_score(0.0, 1.0, 5.0)));
    parity_ceilings_t ce;
    memset(&ce, 0, sizeof ce);
    ce.bw_gbs = 10;
    ce.peak_gflops_f32 = 100;
    ce.peak_gflops_f64 = 50;
    parity_cost_t c = {0, 0, 1e9, 1e9, "fp32", ""};
    assert_true(fabs(parity_bench_sol(&c, &ce) - 0.1) < 1e-15);  /* 1 GB / 10 GB/s */
    c.flops = 1e11;
    assert_true(fabs(parity_bench_sol(&c, &ce) - 1.0) < 1e-15);  /* 100 GFLOP / 100 GFLOP/s */
    c.flop_dtype = "fp64";
    assert_true(fabs(parity_bench_sol(&c, &ce) - 2.0) < 1e-15);
    double t[5] = {5, 1, 4, 2, 3}, med, best, worst;
    parity_bench_stats(t, 5, &med, &best, &worst);
    assert_true(med == 3 && best == 1 && worst == 5);
    double u[4] = {4, 1, 3, 2};
    parity_bench_stats(u, 4, &med, &best, &worst);
    assert_true(med == 2.5);
}

static void ceilings_cache(void **state)
{
    (void)state;
    char dir[] = "/tmp/parity_bench_cacheXXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("XDG_CACHE_HOME", dir, 1);
    parity_ceiling_opts_t o;
    parity_ceiling_opts_default(&o);
    o.array_bytes = 8 << 20;
    o.reps = 2;
    o.n_threads = 2;
    parity_ceilings_t a, b;
    parity_diag_t diag;
    assert_int_equal(parity_bench_ceilings(&o, &a, &diag), PARITY_OK);
    printf("# probe (8 MiB arrays): copy %.2f GB/s, triad %.2f GB/s, fp32 %.1f GFLOP/s, fp64 %.1f\n",
           a.copy_gbs, a.triad_gbs, a.peak_gflops_f32, a.peak_gflops_f64);
    assert_false(a.from_cache);
    assert_true(a.copy_gbs > 0 && a.triad_gbs > 0 && a.peak_gflops_f32 > 0 && a.peak_gflops_f64 > 0);
    assert_true(a.bw_gbs == fmax(a.copy_gbs, a.triad_gbs));
    assert_true(strncmp(a.cache_path, dir, strlen(dir)) == 0);
    assert_int_equal(access(a.cache_path, R_OK), 0);
    assert_int_equal(parity_bench_ceilings(&o, &b, &diag), PARITY_OK);
    assert_true(b.from_cache);
    assert_true(b.copy_gbs == a.copy_gbs && b.triad_gbs == a.triad_gbs &&
                b.peak_gflops_f32 == a.peak_gflops_f32 && b.array_bytes == a.array_bytes);
    /* A damaged entry is a miss, measured again: a size no int64_t holds (fuzz_caches found its
     * conversion undefined), NaN, a missing field, a negative bandwidth. The first line is the
     * control: the same template intact is a hit (so the misses are the damage's doing). */
    static const char *const llc[] = {"llc_bytes 1024", "llc_bytes 1e300", "llc_bytes nan", "", "llc_bytes 1024"};
    for (size_t i = 0; i < sizeof llc / sizeof *llc; i++) {
        FILE *f = fopen(a.cache_path, "w");
        assert_non_null(f);
        fprintf(f, "parity-ceilings 1\n%s\narray_bytes 8388608\ncopy_gbs %s\ntriad_gbs 10\n"
                   "copy_spread 0\ntriad_spread 0\npeak_gflops_f32 100\npeak_gflops_f64 50\nseconds 1\n",
                llc[i], i == 4 ? "-1" : "10");
        fclose(f);
        assert_int_equal(parity_bench_ceilings(&o, &b, &diag), PARITY_OK);
        assert_int_equal(b.from_cache, i == 0);
        if (i == 0) assert_true(b.llc_bytes == 1024 && b.copy_gbs == 10);
    }
    o.remeasure = 1;
    assert_int_equal(parity_bench_ceilings(&o, &b, &diag), PARITY_OK);
    assert_false(b.from_cache);
    remove(a.cache_path);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/parity", dir);
    rmdir(sub);
    rmdir(dir);
    /* An unusable cache folder is never an error. */
    setenv("XDG_CACHE_HOME", "/proc/parity-no-such-dir", 1);
    o.remeasure = 0;
    assert_int_equal(parity_bench_ceilings(&o, &b, &diag), PARITY_OK);
    assert_false(b.from_cache);
    assert_string_equal(b.cache_path, "");
    unsetenv("XDG_CACHE_HOME");
}

/* A copy "kernel" through the bench's own timing path, against the copy probe on the same sizes
 * and threads. */
typedef struct {
    double *a;
    const double *b;
} copy_ctx_t;
static void copy_part(void *p, int64_t lo, int64_t hi, int t)
{
    (void)t;
    copy_ctx_t *c = p;
    for (int64_t i = lo; i < hi; i++) c->a[i] = c->b[i];
}
static int copy_kernel(const parity_abi_call_t *call)
{
    copy_ctx_t c = {call->outputs[0].data, call->inputs[0].data};
    parity_parallel_for(call->inputs[0].shape[0], call->n_threads, copy_part, &c);
    return PARITY_KERNEL_OK;
}

static void copy_kernel_vs_probe(void **state)
{
    (void)state;
    int64_t n = (int64_t)(32 << 20) / 8; /* 32 MiB per array */
    parity_tensor_t *in = parity_tensor_new("b", PARITY_DT_F64, 1, &n);
    parity_tensor_t *out = parity_tensor_new("a", PARITY_DT_F64, 1, &n);
    assert_non_null(in);
    assert_non_null(out);
    for (int64_t i = 0; i < n; i++) ((double *)in->view.data)[i] = (double)i;
    memset(out->view.data, 0, (size_t)n * 8);
    const parity_abi_kernel_t k = {sizeof k, "copy", "copy", "a = b", 0, PARITY_DT_F64, PARITY_DT_F64, copy_kernel, NULL};
    parity_abi_call_t call;
    memset(&call, 0, sizeof call);
    call.op = "copy";
    call.n_inputs = 1;
    call.n_outputs = 1;
    call.inputs = &in->view;
    call.outputs = &out->view;
    call.n_threads = 2;
    parity_time_opts_t to;
    parity_time_opts_default(&to);
    to.runs = 5;
    to.warmup = 1;
    to.scrub_bytes = -1; /* the probe does not scrub either */
    double times[5], med, best, worst;
    char detail[256];
    assert_int_equal(parity_bench_time_kernel(&k, &call, &to, times, detail, sizeof detail),
                     PARITY_VERDICT_FAITHFUL);
    parity_bench_stats(times, 5, &med, &best, &worst);
    double kernel_gbs = 16.0 * (double)n / best * 1e-9;
    double probe_gbs = parity_bench_stream_copy(out->view.data, in->view.data, n, 2, 5);
    double ratio = kernel_gbs / probe_gbs;
    printf("# copy kernel via bench timing: %.2f GB/s (best of 5), copy probe %.2f GB/s: %.0f%%\n",
           kernel_gbs, probe_gbs, 100 * ratio);
    /* Reported, not asserted: no timing assertions in tests (a shared CI machine can disagree
     * by any factor). Only that both measurements produced a finite, positive rate. */
    assert_true(isfinite(ratio) && ratio > 0);
    /* The parent's inputs are untouched by the timing child's regeneration. */
    assert_true(((double *)in->view.data)[7] == 7.0);
    parity_tensor_free(in);
    parity_tensor_free(out);
}

/* fp32_fast: the same bits with 1, 2 and 3 threads (reduction order fixed by blocks). */
static void fast_kernel_bits_independent_of_threads(void **state)
{
    (void)state;
    const parity_op_t *op = parity_op_find("embedding_rmsnorm_bwd");
    parity_kernel_list_t kl = {0};
    parity_diag_t diag;
    assert_int_equal(parity_kernel_resolve("builtin:fp32_fast", op->name, &kl, &diag), PARITY_OK);
    parity_workload_t wl;
    assert_int_equal(parity_op_workload(op, "zipf1.4@3001x77x5000", &wl), PARITY_OK);
    parity_case_t *c = NULL;
    assert_int_equal(parity_case_build(op, &wl, 5, PARITY_DT_BF16, &c, &diag), PARITY_OK);
    parity_tensor_t *outs[3][2];
    for (int t = 0; t < 3; t++) {
        parity_abi_tensor_t in[4], out[2];
        for (int i = 0; i < 4; i++) in[i] = c->inputs[i]->view;
        for (int i = 0; i < 2; i++) {
            outs[t][i] = parity_tensor_new(op->output_names[i], PARITY_DT_F32, c->out_ndim[i], c->out_shape[i]);
            assert_non_null(outs[t][i]);
            memset(outs[t][i]->view.data, 0xff, outs[t][i]->nbytes); /* NaN prefill */
            out[i] = outs[t][i]->view;
        }
        parity_abi_call_t call;
        memset(&call, 0, sizeof call);
        call.abi_version = PARITY_ABI_VERSION;
        call.struct_size = sizeof call;
        call.op = op->name;
        call.n_inputs = 4;
        call.n_outputs = 2;
        call.inputs = in;
        call.outputs = out;
        call.n_attrs = c->n_attrs;
        call.attr_names = c->attr_names;
        call.attr_values = c->attr_values;
        call.n_threads = t + 1;
        assert_int_equal(kl.items[0].k->run(&call), PARITY_KERNEL_OK);
    }
    for (int t = 1; t < 3; t++)
        for (int i = 0; i < 2; i++)
            assert_memory_equal(outs[0][i]->view.data, outs[t][i]->view.data, outs[0][i]->nbytes);
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 2; i++) parity_tensor_free(outs[t][i]);
    parity_case_free(c);
    parity_kernel_list_free(&kl);
}

/* The whole bench on a small workload: the gate, the rows, the scores. */
static void bench_end_to_end(void **state)
{
    (void)state;
    const parity_op_t *op = parity_op_find("embedding_rmsnorm_bwd");
    parity_kernel_list_t kl = {0};
    parity_diag_t diag;
    assert_int_equal(parity_kernel_resolve("builtin:fp32_fast", op->name, &kl, &diag), PARITY_OK);
    assert_int_equal(parity_kernel_resolve("builtin:bf16_accum", op->name, &kl, &diag), PARITY_OK);
    parity_bench_opts_t o;
    parity_bench_opts_default(&o);
    o.workload = "zipf1.4@4096x64x50257";
    o.check.workload = o.workload;
    o.time.runs = 3;
    o.time.warmup = 1;
    o.time.scrub_bytes = -1;
    o.time.n_threads = 2;
    o.ceil.array_bytes = 8 << 20;
    o.ceil.use_cache = 0;
    o.ceil.reps = 2;
    parity_bench_result_t r;
    assert_int_equal(parity_bench_run(op, &kl, &o, &r, &diag), PARITY_OK);
    assert_int_equal(r.n_rows, 3); /* the baseline fp32_seq was added */
    assert_string_equal(r.rows[2].kr->label, "builtin:fp32_seq");
    assert_true(r.rows[2].is_baseline && r.rows[2].added_baseline);
    assert_int_equal(r.baseline_row, 2);
    parity_cost_t c;
    assert_int_equal(parity_bench_cost_shape(op->name, 4096, 64, 50257, PARITY_DT_BF16, PARITY_DT_F32, &c), PARITY_OK);
    assert_true(r.cost.bytes == c.bytes && r.cost.flops == c.flops);
    assert_true(r.t_sol > 0);
    /* fp32_fast: faithful, timed, scored. */
    assert_int_equal(r.rows[0].verdict, PARITY_VERDICT_FAITHFUL);
    assert_true(r.rows[0].timed && r.rows[0].scored);
    assert_true(r.rows[0].score > 0);
    /* The incident: timed but unscored, with the workload that failed it. */
    assert_int_equal(r.rows[1].verdict, PARITY_VERDICT_UNFAITHFUL);
    assert_true(r.rows[1].timed);
    assert_false(r.rows[1].scored);
    assert_true(isnan(r.rows[1].score));
    assert_string_equal(r.rows[1].verdict_wl, o.workload);
    /* The baseline scores exactly one half. */
    assert_true(r.rows[2].scored && r.rows[2].score == 0.5);
    for (int i = 0; i < 3; i++)
        printf("# %-22s %s median %.3f ms, %.0f%% of SOL, score %.3f\n", r.rows[i].kr->label,
               parity_verdict_name(r.rows[i].verdict), 1e3 * r.rows[i].t_median,
               100 * r.rows[i].frac_sol, r.rows[i].score);
    parity_bench_result_free(&r);
    parity_kernel_list_free(&kl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cost_fused_by_hand),
        cmocka_unit_test(cost_other_ops_by_hand),
        cmocka_unit_test(cost_from_a_built_case),
        cmocka_unit_test(cost_every_op),
        cmocka_unit_test(score_and_sol),
        cmocka_unit_test(ceilings_cache),
        cmocka_unit_test(copy_kernel_vs_probe),
        cmocka_unit_test(fast_kernel_bits_independent_of_threads),
        cmocka_unit_test(bench_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
