/* The embedding family's plain ops: embedding backward (scatter-add of dY rows into dE by token
 * id) and embedding forward, with fp64 references (error-model data: docs/error-model.md). The
 * fused embedding-gradient + RMSNorm backward and the helpers these share are in embedding.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/embedding/embedding_impl.h"
#include "src/core/parallel.h"
#include "src/core/internal.h"

/* ---- embedding_bwd ------------------------------------------------------------------------- */
/* Inputs: dY (N,D), ids (N). Output: dE (V,D), dE[v] = sum of dY rows whose id is v.
 * Terms are inputs (exact), so the bound is the accumulation's alone. */

typedef struct {
    const parity_abi_tensor_t *dy;
    const int32_t *ids;
    const int64_t *slot;
    double *dE, *s_abs;
} ref_ebwd_t;

static void ref_ebwd_cols(void *p, int64_t jb, int64_t je, int thread)
{
    (void)thread;
    const ref_ebwd_t *r = p;
    int64_t n = r->dy->shape[0], d = r->dy->shape[1];
    for (int64_t i = 0; i < n; i++) {
        int64_t row = r->slot ? r->slot[r->ids[i]] : r->ids[i];
        double *dst = r->dE + row * d, *abs_dst = r->s_abs ? r->s_abs + row * d : NULL;
        if (r->dy->dtype == PARITY_DT_F32) {
            const float *src = (const float *)r->dy->data + i * d;
            for (int64_t j = jb; j < je; j++) dst[j] += src[j];
            if (abs_dst)
                for (int64_t j = jb; j < je; j++) abs_dst[j] += fabs((double)src[j]);
        } else {
            for (int64_t j = jb; j < je; j++) {
                double t = elem(r->dy, i * d + j);
                dst[j] += t;
                if (abs_dst) abs_dst[j] += fabs(t);
            }
        }
    }
}

parity_status_t parity_ref_embedding_bwd(const parity_abi_tensor_t *dy, const int32_t *ids,
                                         const int64_t *slot, double *dE, double *s_abs,
                                         int n_threads)
{
    if (!dy || !ids || !dE || dy->ndim != 2) return PARITY_E_INVALID;
    ref_ebwd_t r = {dy, ids, slot, dE, s_abs};
    parity_parallel_for(dy->shape[1], n_threads, ref_ebwd_cols, &r);
    return PARITY_OK;
}

static parity_status_t ebwd_build(const parity_op_t *op, const parity_workload_t *wl,
                                  uint64_t seed, parity_dtype_t dt, parity_case_t *c,
                                  parity_diag_t *diag)
{
    (void)op;
    parity_status_t st = PARITY_OK;
    c->inputs[0] = emb_gen_matrix("dY", dt, wl->n, wl->d, wl->dy_vals, wl->dy_scale, 0, 1, seed, 1);
    c->inputs[1] = emb_gen_ids("ids", wl, seed, wl->n, wl->v, &st, diag);
    if (st != PARITY_OK) return st;
    if (!c->inputs[0] || !c->inputs[1]) return PARITY_E_NOMEM;
    c->rows_are_text_tokens = wl->ids == PARITY_IDS_TEXT;
    if ((st = emb_scatter_build(c, c->inputs[1]->view.data, wl->n, wl->d, wl->v)) != PARITY_OK) return st;
    if ((st = emb_vocab_ref_alloc(c, 0, "dE", 0)) != PARITY_OK) return st;
    scatter_t *sc = c->priv;
    st = parity_ref_embedding_bwd(&c->inputs[0]->view, sc->ids, c->ref[0].slot, c->ref[0].ref,
                                  c->ref[0].s_acc, 0);
    /* Symmetric class: dE[v, j]'s terms are dY[i, j] themselves (distinct rows i). */
    if (st != PARITY_OK || !parity_vals_symmetric(wl->dy_vals)) return st;
    parity_ref_output_t *R = &c->ref[0];
    if ((st = emb_sym_alloc(R)) != PARITY_OK) return st;
    const parity_abi_tensor_t *dy = &c->inputs[0]->view;
    for (int64_t i = 0; i < wl->n; i++) {
        double *sq = R->s_sym + R->slot[sc->ids[i]] * wl->d;
        for (int64_t j = 0; j < wl->d; j++) {
            double t = elem(dy, i * wl->d + j);
            sq[j] += t * t;
        }
    }
    emb_sym_finish(R);
    return PARITY_OK;
}

static parity_status_t ebwd_emulate(const parity_case_t *c, int out, const parity_format_t *acc,
                                    parity_sum_order_t order, const int64_t *rows, int64_t n_rows,
                                    double *dst)
{
    return emb_scatter_emulate(c, out, acc, order, rows, n_rows, dst, 0);
}

static parity_status_t ebwd_terms_ref(const parity_case_t *c, int out, int64_t from, int64_t to,
                                      const int64_t *rows, int64_t n_rows, double *sum,
                                      double *abs_sum, double *sq_sum)
{
    return emb_scatter_terms_ref(c, out, from, to, rows, n_rows, sum, abs_sum, sq_sum, 0);
}

static const parity_workload_t EBWD_PRESETS[] = {
    {"uniform", "uniform ids, unit normal dY", 4096, 512, 4096, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"zipf1.1", "Zipf(1.1) ids, gradient-scale dY", 16384, 256, 50257, PARITY_IDS_ZIPF, 1.1, PARITY_VALS_GRADSCALE, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"text", "tinyshakespeare GPT-2 ids, gradient-scale dY", 16384, 256, 50257, PARITY_IDS_TEXT, 0, PARITY_VALS_GRADSCALE, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"intprobe", "real-text ids, dY small integers in [-4,4]: exact sums, any lost addition shows", 16384, 256, 50257, PARITY_IDS_TEXT, 0, PARITY_VALS_INTPROBE, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"odd-d1000", "odd shape N=4097 D=1000, Zipf(1.1)", 4097, 1000, 50257, PARITY_IDS_ZIPF, 1.1, PARITY_VALS_GRADSCALE, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"prod", "production-like: N=65536 real-text tokens, D=2048, V=50257", 65536, 2048, 50257, PARITY_IDS_TEXT, 0, PARITY_VALS_GRADSCALE, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 1, ""},
    /* Structure and range (docs/workloads.md): D = 259 (2 x 128 + 3), about 4 hits per row. */
    {"exact", "sparse powers of two in dY (0 or +-2^e, |e| <= 2): exact sums, a lost or misplaced addition is a gross error; N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_SPARSE_POW2, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"x1e-3", "unit randn dY times 1e-3; N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1e-3, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"x64", "unit randn dY times 64; N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 64, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"near-max", "randn dY x 2^118: rows of ~4 hits reach 2^122, within 2^6 of fp32/bf16 overflow; N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 0x1p118, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"subnormal", "dY at gradient scale x 1e-35 (1e-38..1e-41 per token): sums in fp32's subnormal range; N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_GRADSCALE, 1e-35, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
};

static const parity_workload_t EBWD_BASELINES[] = {
    {"sol-execbench", "unit randn dY, uniform ids, seed 200", 4096, 1024, 16384, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"kernelbench", "torch.rand dY, uniform ids", 2048, 1024, 8192, PARITY_IDS_UNIFORM, 0, PARITY_VALS_UNIFORM01, 1, PARITY_VALS_UNIFORM01, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"assert_close", "randn dY, uniform ids, small shape", 512, 256, 1000, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
};

const parity_op_t parity_op_embedding_bwd = {
    .name = "embedding_bwd",
    .summary = "embedding gradient: scatter-add of dY rows into dE (V,D) by token id",
    .n_inputs = 2,
    .n_outputs = 1,
    .input_names = {"dY", "ids"},
    .output_names = {"dE"},
    .input_is_float = {1, 0},
    .faithful_accumulator = "fp32",
    .error_model = "dE[v,j]: hits(v) exact terms accumulated",
    .presets = EBWD_PRESETS,
    .n_presets = (int)(sizeof EBWD_PRESETS / sizeof EBWD_PRESETS[0]),
    .baseline_workloads = EBWD_BASELINES,
    .build = ebwd_build,
    .emulate = ebwd_emulate,
    .terms_ref = ebwd_terms_ref,
    .free_priv = emb_scatter_free,
};

/* ---- embedding_fwd ------------------------------------------------------------------------- */
/* Inputs: E (V,D), ids (N). Output: Y (N,D) = E[ids]. A copy: exact unless the output dtype is
 * narrower than E's (then one rounding). */

static parity_status_t efwd_build(const parity_op_t *op, const parity_workload_t *wl,
                                  uint64_t seed, parity_dtype_t dt, parity_case_t *c,
                                  parity_diag_t *diag)
{
    (void)op;
    parity_status_t st = PARITY_OK;
    c->inputs[0] = emb_gen_matrix("E", dt, wl->v, wl->d, wl->x_vals, wl->x_scale, wl->outliers,
                              wl->outlier_factor, seed, 2);
    c->inputs[1] = emb_gen_ids("ids", wl, seed, wl->n, wl->v, &st, diag);
    if (st != PARITY_OK) return st;
    if (!c->inputs[0] || !c->inputs[1]) return PARITY_E_NOMEM;
    parity_ref_output_t *R = &c->ref[0];
    if ((st = parity_ref_output_alloc(R, "Y", "row", wl->n, wl->d, 0, 0, 0)) != PARITY_OK) return st;
    c->out_ndim[0] = 2;
    c->out_shape[0][0] = wl->n;
    c->out_shape[0][1] = wl->d;
    const int32_t *ids = c->inputs[1]->view.data;
    for (int64_t i = 0; i < wl->n; i++) {
        R->k[i] = 1;
        for (int64_t j = 0; j < wl->d; j++) {
            double e = elem(&c->inputs[0]->view, (int64_t)ids[i] * wl->d + j);
            R->ref[i * wl->d + j] = e;
            R->s_acc[i * wl->d + j] = fabs(e);
        }
    }
    return PARITY_OK;
}

/* The diagnosis's variants (op.h variant_ref; docs/error-model.md "Cause"): Y's rows gathered
 * at id + 1 (which 0) or id - 1 (which 1), modulo V, as a gather with a wrong base offset
 * reads them (structural); the reference data as build forms it for those rows. */
static parity_status_t efwd_variant_ref(const parity_case_t *c, int out, int which,
                                        const parity_format_t *fmt, int dir, const int64_t *rows,
                                        int64_t n_rows, double *ref, double *s_acc, double *s_up)
{
    (void)fmt;
    (void)dir;
    (void)s_up;
    if (out != 0 || which < 0 || which > 1) return PARITY_E_UNSUPPORTED;
    const parity_abi_tensor_t *E = &c->inputs[0]->view;
    const int32_t *ids = c->inputs[1]->view.data;
    int64_t v = E->shape[0], d = E->shape[1], shift = which == 0 ? 1 : v - 1;
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t id = ((int64_t)ids[rows[r]] + shift) % v;
        for (int64_t j = 0; j < d; j++) {
            double e = elem(E, id * d + j);
            ref[r * d + j] = e;
            s_acc[r * d + j] = fabs(e);
        }
    }
    return PARITY_OK;
}

static const parity_workload_t EFWD_PRESETS[] = {
    {"uniform", "uniform ids, unit normal E", 4096, 512, 4096, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"text", "tinyshakespeare GPT-2 ids, embedding-scale E with 4 outlier channels", 8192, 256, 50257, PARITY_IDS_TEXT, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_OUTLIER, 0.02, PARITY_GAMMA_ONES, 4, 100, 0, ""},
    {"odd-d1000", "odd shape N=4097 D=1000, Zipf(1.1)", 4097, 1000, 5003, PARITY_IDS_ZIPF, 1.1, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 0.02, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    /* Structure and range (docs/workloads.md). */
    {"exact", "sparse powers of two in E (0 or +-2^e, |e| <= 2): a wrong row is a gross error; N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_SPARSE_POW2, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"x1e-3", "unit randn E times 1e-3; N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1e-3, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"x64", "unit randn E times 64; N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 64, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"near-max", "randn E x 2^124: entries up to bf16's largest finite; N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 0x1p124, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"subnormal", "randn E x 1e-39: bf16 subnormals (a flush-to-zero copy fails); N=4097, D=259, V=1024", 4097, 259, 1024, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1e-39, PARITY_GAMMA_ONES, 0, 0, 0, ""},
};

static const parity_workload_t EFWD_BASELINES[] = {
    {"sol-execbench", "unit randn E, uniform ids, seed 200", 4096, 1024, 16384, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"kernelbench", "torch.rand E, uniform ids", 2048, 1024, 8192, PARITY_IDS_UNIFORM, 0, PARITY_VALS_UNIFORM01, 1, PARITY_VALS_UNIFORM01, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
    {"assert_close", "randn E, uniform ids, small shape", 512, 256, 1000, PARITY_IDS_UNIFORM, 0, PARITY_VALS_NORMAL, 1, PARITY_VALS_NORMAL, 1, PARITY_GAMMA_ONES, 0, 0, 0, ""},
};

const parity_op_t parity_op_embedding_fwd = {
    .name = "embedding_fwd",
    .summary = "embedding lookup: Y (N,D) = E[ids]",
    .n_inputs = 2,
    .n_outputs = 1,
    .input_names = {"E", "ids"},
    .output_names = {"Y"},
    .input_is_float = {1, 0},
    .faithful_accumulator = "none (a copy)",
    .error_model = "Y[i,j]: a copy, exact unless the output dtype is narrower (one rounding)",
    .presets = EFWD_PRESETS,
    .n_presets = (int)(sizeof EFWD_PRESETS / sizeof EFWD_PRESETS[0]),
    .baseline_workloads = EFWD_BASELINES,
    .build = efwd_build,
    .emulate = NULL,
    .free_priv = NULL,
    .variants = {{PARITY_VARIANT_STRUCTURAL, "rows gathered at id + 1 (a wrong base offset)", 0},
                 {PARITY_VARIANT_STRUCTURAL, "rows gathered at id - 1 (a wrong base offset)", 0}},
    .variant_ref = efwd_variant_ref,
};
