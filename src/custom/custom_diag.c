/* The diagnosis of a declared op (docs/custom-ops.md, "Diagnosis"): for an unfaithful kernel of an
 * op with a multilinear reduction, which emulated accumulator its error looks like -- bf16, an
 * 11-bit or an fp32 accumulator, sequential or pairwise -- as the built-in ops' diagnosis line
 * says (src/verify/check.c diagnose(), whose measures this file restates for a declared op's
 * arrays: the same emulations, error measure, closest rule, effective bits and flags). The terms
 * come from the reference itself, slice by slice over the reduced dimensions (custom_power.c).
 * Deliberately not here: a diagnosis without a multilinear reduction (its terms are not the
 * reference on slices: the result says so), the report's layout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/custom/custom_impl.h"
#include "parity/format.h"
#include "parity/tensor.h"
#include "src/format/format_fast.h"
#include "src/verify/verify_impl.h"

#define DIAG_ROWS 64               /* as check.c's 32 + 32: rows evenly spaced (every row has k terms) */
#define TERM_BUDGET (1LL << 28)    /* k x (input + output elements) the slice evaluation may touch */
#define TERMS_KEPT (1LL << 24)     /* terms held for the emulations: 128 MiB of doubles */

/* The emulations, in verify.c's parity_emu_names order (check.c's EMU_FMT). */
static const char *const EMU_FMT[PARITY_N_EMU] = {"bf16", "bf16", "custom:m=10,e=8", "custom:m=10,e=8", "fp32",
                                                  "fp32"};

typedef struct {
    const custom_case_t *c;
    int o;
    const int64_t *el; /* the diagnosis elements */
    int64_t n_el;
    double *T;         /* k x n_el fp32 terms */
} terms_t;

static int take(void *ctx, int64_t t, double *const *out)
{
    terms_t *s = ctx;
    for (int64_t e = 0; e < s->n_el; e++) s->T[t * s->n_el + e] = (float)out[s->o][s->el[e]];
    return 0;
}

/* RMS over the elements with sum |terms| > 0 of (round_out(v) - ref) / sum |terms| (check.c's
 * diag_error). */
static double diag_error(const custom_case_t *c, int o, const int64_t *el, int64_t n, const double *v, int odt)
{
    double s = 0;
    int64_t m = 0;
    for (int64_t e = 0; e < n; e++) {
        double sc = c->s_acc[o][el[e]];
        if (!(sc > 0)) continue;
        double d = (parity_dtype_round((parity_dtype_t)odt, v[e]) - c->ref[o][el[e]]) / sc;
        s += d * d;
        m++;
    }
    return m ? sqrt(s / (double)m) : 0;
}

void custom_diagnose(const custom_case_t *c, int out_dtype, void *const *outputs, parity_custom_result_t *r)
{
    const parity_custom_op_t *op = c->op;
    parity_diagnosis_t *d = &r->diag;
    memset(d, 0, sizeof *d);
    r->no_diag[0] = '\0';
    int o = 0;
    for (int i = 0; i < op->n_out; i++)
        if (strcmp(op->out[i].name, r->worst_output) == 0) o = i;
    if (!(op->multilinear && op->n_red[o] > 0)) {
        snprintf(r->no_diag, sizeof r->no_diag, "%s", op->n_red[o] == 0 ? "no reduction declared"
                 : "the declared reduction is not multilinear: its terms are not the reference on slices");
        return;
    }
    int64_t k = 1, touched = c->n_out[o];
    for (int j = 0; j < op->n_red[o]; j++) k *= c->wl->size[op->red[o][j]];
    for (int i = 0; i < op->n_in; i++) touched += c->n_in[i];
    if ((double)k * (double)touched > (double)TERM_BUDGET || !c->s_acc[o]) {
        snprintf(r->no_diag, sizeof r->no_diag, "the reduction is too long to emulate here (k = %lld)", (long long)k);
        return;
    }
    int64_t rows = c->rows[o], cols = c->cols[o], nr = rows < DIAG_ROWS ? rows : DIAG_ROWS;
    if ((double)k * (double)cols > (double)TERMS_KEPT) {
        snprintf(r->no_diag, sizeof r->no_diag, "the reduction is too long to emulate here (k = %lld)", (long long)k);
        return;
    }
    while (nr > 1 && (double)nr * (double)cols * (double)k > (double)TERMS_KEPT) nr /= 2; /* fewer rows */
    int64_t n = nr * cols;
    int64_t *el = malloc((size_t)(n > 0 ? n : 1) * sizeof *el);
    double *T = malloc((size_t)(k * n > 0 ? k * n : 1) * sizeof *T), *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    double *emu[PARITY_N_EMU] = {0};
    int ok = el && T && v;
    for (int e = 0; ok && e < PARITY_N_EMU; e++) ok = (emu[e] = malloc((size_t)(n > 0 ? n : 1) * sizeof(double))) != NULL;
    if (!ok) {
        snprintf(r->no_diag, sizeof r->no_diag, "out of memory");
        goto done;
    }
    for (int64_t q = 0; q < nr; q++) /* evenly spaced rows, all of them when there are few */
        for (int64_t j = 0; j < cols; j++) el[q * cols + j] = (q * rows / nr) * cols + j;
    terms_t tt = {c, o, el, n, T};
    if (custom_for_each_term(c, o, take, &tt) != 0) {
        snprintf(r->no_diag, sizeof r->no_diag, "the reference failed on a slice of the reduction");
        goto done;
    }
    for (int e = 0; e < PARITY_N_EMU; e++) { /* parity_format_sum's results, n chains side by side */
        parity_format_t f;
        parity_format_get(EMU_FMT[e], &f, NULL);
        if (parity_format_sum_fast_cols(&f, T, k, n, (e % 2) ? PARITY_SUM_PAIRWISE : PARITY_SUM_SEQUENTIAL, emu[e])) {
            snprintf(r->no_diag, sizeof r->no_diag, "out of memory");
            goto done;
        }
    }
    for (int64_t x = 0; x < n; x++) v[x] = custom_decode(out_dtype, outputs[o], el[x]);
    /* From here as check.c's diagnose(): the candidate's values are already in its dtype. */
    d->cand_err = diag_error(c, o, el, n, v, out_dtype);
    if (!isfinite(d->cand_err)) {
        snprintf(r->no_diag, sizeof r->no_diag, "non-finite outputs: nothing to compare");
        goto done;
    }
    snprintf(d->output, sizeof d->output, "%s", op->out[o].name);
    for (int e = 0; e < PARITY_N_EMU; e++) d->emu_err[e] = diag_error(c, o, el, n, emu[e], out_dtype);
    parity_diagnosis_classify(d); /* check.c's conclusions, one definition */
done:
    free(el);
    free(T);
    free(v);
    for (int e = 0; e < PARITY_N_EMU; e++) free(emu[e]);
}
