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
    const emb_bwd_params_t *p = parity_workload_params(wl, op->name, diag);
    if (!p) return PARITY_E_INVALID;
    parity_status_t st = PARITY_OK;
    c->inputs[0] = emb_gen_matrix("dY", dt, wl->n, wl->d, p->dy.kind, p->dy.scale, 0, 1, seed, 1);
    c->inputs[1] = emb_gen_ids("ids", wl, p->ids, seed, wl->n, wl->v, &st, diag);
    if (st != PARITY_OK) return st;
    if (!c->inputs[0] || !c->inputs[1]) return PARITY_E_NOMEM;
    c->rows_are_text_tokens = p->ids.kind == PARITY_IDS_TEXT;
    if ((st = emb_scatter_build(c, c->inputs[1]->view.data, wl->n, wl->d, wl->v)) != PARITY_OK) return st;
    if ((st = emb_vocab_ref_alloc(c, 0, "dE", 0)) != PARITY_OK) return st;
    scatter_t *sc = c->priv;
    st = parity_ref_embedding_bwd(&c->inputs[0]->view, sc->ids, c->ref[0].slot, c->ref[0].ref,
                                  c->ref[0].s_acc, 0);
    /* Symmetric class: dE[v, j]'s terms are dY[i, j] themselves (distinct rows i). */
    if (st != PARITY_OK || !parity_vals_symmetric(p->dy.kind)) return st;
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

const parity_workload_family_t emb_bwd_family = {
    "embedding_bwd", sizeof(emb_bwd_params_t), 2,
    {PARITY_WL_FIELD(emb_bwd_params_t, ids, PARITY_WL_IDS, "the tokens' ids over [0, V)"),
     PARITY_WL_FIELD(emb_bwd_params_t, dy, PARITY_WL_VALS, "upstream gradient dY (N,D)")}};

/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define EBWD_RANGE(name_, summary_, ...)                                                           \
    {.name = name_, .summary = summary_ "; N=4097, D=259, V=1024", .n = 4097, .d = 259, .v = 1024, \
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_UNIFORM}, __VA_ARGS__}}
static const parity_workload_t EBWD_PRESETS[] = {
    {.name = "uniform",
     .summary = "uniform ids, unit normal dY",
     .n = 4096, .d = 512, .v = 4096,
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_UNIFORM}, .dy = {PARITY_VALS_NORMAL, 1}}},
    {.name = "zipf1.1",
     .summary = "Zipf(1.1) ids, gradient-scale dY",
     .n = 16384, .d = 256, .v = 50257,
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_ZIPF, 1.1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}}},
    {.name = "text",
     .summary = "tinyshakespeare GPT-2 ids, gradient-scale dY",
     .n = 16384, .d = 256, .v = 50257,
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_TEXT}, .dy = {PARITY_VALS_GRADSCALE, 1}}},
    {.name = "intprobe",
     .summary = "real-text ids, dY small integers in [-4,4]: exact sums, any lost addition shows",
     .n = 16384, .d = 256, .v = 50257,
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_TEXT}, .dy = {PARITY_VALS_INTPROBE, 1}}},
    {.name = "odd-d1000",
     .summary = "odd shape N=4097 D=1000, Zipf(1.1)",
     .n = 4097, .d = 1000, .v = 50257,
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_ZIPF, 1.1},
                           .dy = {PARITY_VALS_GRADSCALE, 1}}},
    {.name = "prod",
     .summary = "production-like: N=65536 real-text tokens, D=2048, V=50257",
     .n = 65536, .d = 2048, .v = 50257, .production = 1,
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_TEXT}, .dy = {PARITY_VALS_GRADSCALE, 1}}},
    /* Structure and range (docs/workloads.md): D = 259 (2 x 128 + 3), about 4 hits per row. */
    EBWD_RANGE("exact",
               "sparse powers of two in dY (0 or +-2^e, |e| <= 2): exact sums, a lost or misplaced addition is a gross error",
               .dy = {PARITY_VALS_SPARSE_POW2, 1}),
    EBWD_RANGE("x1e-3",
               "unit randn dY times 1e-3",
               .dy = {PARITY_VALS_NORMAL, 1e-3}),
    EBWD_RANGE("x64",
               "unit randn dY times 64",
               .dy = {PARITY_VALS_NORMAL, 64}),
    EBWD_RANGE("near-max",
               "randn dY x 2^118: rows of ~4 hits reach 2^122, within 2^6 of fp32/bf16 overflow",
               .dy = {PARITY_VALS_NORMAL, 0x1p118}),
    EBWD_RANGE("subnormal",
               "dY at gradient scale x 1e-35 (1e-38..1e-41 per token): sums in fp32's subnormal range",
               .dy = {PARITY_VALS_GRADSCALE, 1e-35}),
};
#undef EBWD_RANGE

static const parity_workload_t EBWD_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "unit randn dY, uniform ids, seed 200",
     .n = 4096, .d = 1024, .v = 16384,
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_UNIFORM}, .dy = {PARITY_VALS_NORMAL, 1}}},
    {.name = "kernelbench",
     .summary = "torch.rand dY, uniform ids",
     .n = 2048, .d = 1024, .v = 8192,
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .dy = {PARITY_VALS_UNIFORM01, 1}}},
    {.name = "assert_close",
     .summary = "randn dY, uniform ids, small shape",
     .n = 512, .d = 256, .v = 1000,
     .params = &(const emb_bwd_params_t){.ids = {PARITY_IDS_UNIFORM}, .dy = {PARITY_VALS_NORMAL, 1}}},
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
    .wl_family = &emb_bwd_family,
    .catalog = {{parity_catalog_embedding, &parity_catalog_embedding_count}},
    .cost = &parity_cost_embedding_bwd,
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
    const emb_fwd_params_t *p = parity_workload_params(wl, op->name, diag);
    if (!p) return PARITY_E_INVALID;
    parity_status_t st = PARITY_OK;
    c->inputs[0] = emb_gen_matrix("E", dt, wl->v, wl->d, p->table.kind, p->table.scale, p->outliers,
                              p->outlier_factor, seed, 2);
    c->inputs[1] = emb_gen_ids("ids", wl, p->ids, seed, wl->n, wl->v, &st, diag);
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

#define F(member, type, what) PARITY_WL_FIELD(emb_fwd_params_t, member, type, what)
const parity_workload_family_t emb_fwd_family = {
    "embedding_fwd", sizeof(emb_fwd_params_t), 4,
    {F(ids, PARITY_WL_IDS, "the tokens' ids over [0, V)"),
     F(table, PARITY_WL_VALS, "the embedding table E (V,D)"),
     F(outliers, PARITY_WL_INT, "outlier channels of E (table outlier)"),
     F(outlier_factor, PARITY_WL_DOUBLE, "their factor")}};
#undef F

/* The structure-and-range presets (docs/workloads.md), made by one helper: their shared shape
 * and parameters; each of the five names what it sets. */
#define EFWD_RANGE(name_, summary_, ...)                                                           \
    {.name = name_, .summary = summary_ "; N=4097, D=259, V=1024", .n = 4097, .d = 259, .v = 1024, \
     .params = &(const emb_fwd_params_t){.ids = {PARITY_IDS_UNIFORM}, __VA_ARGS__}}
static const parity_workload_t EFWD_PRESETS[] = {
    {.name = "uniform",
     .summary = "uniform ids, unit normal E",
     .n = 4096, .d = 512, .v = 4096,
     .params = &(const emb_fwd_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .table = {PARITY_VALS_NORMAL, 1}}},
    {.name = "text",
     .summary = "tinyshakespeare GPT-2 ids, embedding-scale E with 4 outlier channels",
     .n = 8192, .d = 256, .v = 50257,
     .params = &(const emb_fwd_params_t){.ids = {PARITY_IDS_TEXT},
                           .table = {PARITY_VALS_OUTLIER, 0.02}, .outliers = 4,
                           .outlier_factor = 100}},
    {.name = "odd-d1000",
     .summary = "odd shape N=4097 D=1000, Zipf(1.1)",
     .n = 4097, .d = 1000, .v = 5003,
     .params = &(const emb_fwd_params_t){.ids = {PARITY_IDS_ZIPF, 1.1},
                           .table = {PARITY_VALS_NORMAL, 0.02}}},
    /* Structure and range (docs/workloads.md). */
    EFWD_RANGE("exact",
               "sparse powers of two in E (0 or +-2^e, |e| <= 2): a wrong row is a gross error",
               .table = {PARITY_VALS_SPARSE_POW2, 1}),
    EFWD_RANGE("x1e-3",
               "unit randn E times 1e-3",
               .table = {PARITY_VALS_NORMAL, 1e-3}),
    EFWD_RANGE("x64",
               "unit randn E times 64",
               .table = {PARITY_VALS_NORMAL, 64}),
    EFWD_RANGE("near-max",
               "randn E x 2^124: entries up to bf16's largest finite",
               .table = {PARITY_VALS_NORMAL, 0x1p124}),
    EFWD_RANGE("subnormal",
               "randn E x 1e-39: bf16 subnormals (a flush-to-zero copy fails)",
               .table = {PARITY_VALS_NORMAL, 1e-39}),
};
#undef EFWD_RANGE

static const parity_workload_t EFWD_BASELINES[] = {
    {.name = "sol-execbench",
     .summary = "unit randn E, uniform ids, seed 200",
     .n = 4096, .d = 1024, .v = 16384,
     .params = &(const emb_fwd_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .table = {PARITY_VALS_NORMAL, 1}}},
    {.name = "kernelbench",
     .summary = "torch.rand E, uniform ids",
     .n = 2048, .d = 1024, .v = 8192,
     .params = &(const emb_fwd_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .table = {PARITY_VALS_UNIFORM01, 1}}},
    {.name = "assert_close",
     .summary = "randn E, uniform ids, small shape",
     .n = 512, .d = 256, .v = 1000,
     .params = &(const emb_fwd_params_t){.ids = {PARITY_IDS_UNIFORM},
                           .table = {PARITY_VALS_NORMAL, 1}}},
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
    .wl_family = &emb_fwd_family,
    .catalog = {{parity_catalog_embedding_fwd, &parity_catalog_embedding_fwd_count}},
    .cost = &parity_cost_embedding_fwd,
    .build = efwd_build,
    .emulate = NULL,
    .free_priv = NULL,
    .variants = {{PARITY_VARIANT_STRUCTURAL, "rows gathered at id + 1 (a wrong base offset)", 0},
                 {PARITY_VARIANT_STRUCTURAL, "rows gathered at id - 1 (a wrong base offset)", 0}},
    .variant_ref = efwd_variant_ref,
};
