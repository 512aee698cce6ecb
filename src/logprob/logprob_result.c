/* The comparison's result: the unit roundoff of a dtype (the analytic floor's scale), the metrics
 * compared with the floor, a measured floor from another comparison, the verdict of each slice,
 * the exit code, and the accessors of the public result object. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_cmp_impl.h"

const char *parity_logprob_verdict_name(parity_logprob_verdict_t v)
{
    switch (v) {
    case PARITY_LOGPROB_OK: return "ok";
    case PARITY_LOGPROB_ABOVE_FLOOR: return "above-floor";
    case PARITY_LOGPROB_ALARM: return "alarm";
    case PARITY_LOGPROB_EMPTY: return "empty";
    }
    return "?";
}

double lp_unit_roundoff(const char *dtype)
{
    if (!dtype) return ldexp(1, -24);
    if (!strcmp(dtype, "bf16")) return ldexp(1, -8);
    if (!strcmp(dtype, "fp16")) return ldexp(1, -11);
    if (!strcmp(dtype, "fp64")) return ldexp(1, -53);
    if (!strcmp(dtype, "tf32")) return ldexp(1, -11);
    return ldexp(1, -24); /* fp32, and JSON text (engines print fp32 values) */
}

/* ---- floor and verdicts ------------------------------------------------------------------ */

void parity_logprob_result_free(parity_logprob_result_t *r)
{
    if (!r) return;
    free(r->slices);
    free(r->fl);
    free(r);
}

double lp_metric(const parity_dist_summary_t *m, int k)
{
    switch (k) {
    case LP_F_MAX_ABS: return m->abs_dlogprob_max;
    case LP_F_MEAN_ABS: return m->abs_dlogprob_mean;
    case LP_F_P50: return m->abs_dlogprob_p50;
    case LP_F_P99: return m->abs_dlogprob_p99;
    case LP_F_P999: return m->abs_dlogprob_p999;
    case LP_F_K1: return fabs(m->k1_mean);
    case LP_F_K2: return m->k2_mean;
    case LP_F_K3: return m->k3_mean;
    case LP_F_CHI2: return m->chi2_mean;
    case LP_F_DPROB_MAX: return m->abs_dprob_max;
    case LP_F_DPROB_MEAN: return m->abs_dprob_mean;
    case LP_F_DLOGPPL: return m->dlogppl_max_abs;
    case LP_F_TKL: return m->tkl_mean;
    }
    return NAN;
}

const char *lp_metric_name(int k)
{
    static const char *n[LP_NF] = {"max_abs_dlogprob", "mean_abs_dlogprob", "p50_abs_dlogprob", "p99_abs_dlogprob",
                                   "p999_abs_dlogprob", "abs_k1", "k2", "k3", "chi2_mean", "max_abs_dprob",
                                   "mean_abs_dprob", "max_abs_dlogppl", "tkl_mean"};
    return k >= 0 && k < LP_NF ? n[k] : "";
}

/* The overall mean |dlogprob| of a comparison (NaN without finite pairs). */
static double overall_mean(const parity_logprob_result_t *r)
{
    if (!r || r->nslices == 0 || r->slices[0].m.n_finite == 0) return NAN;
    return r->slices[0].m.abs_dlogprob_mean;
}

parity_status_t parity_logprob_result_add_floor(parity_logprob_result_t *r, const parity_logprob_result_t *floor,
                                                parity_logprob_side_t side, const parity_logprob_result_t *other, int detected)
{
    if (!r || !floor || (side != PARITY_LOGPROB_SIDE_A && side != PARITY_LOGPROB_SIDE_B) || r->nfloor_run >= 2 ||
        (r->nfloor_run == 1 && r->floor_run[0].side == (int)side))
        return PARITY_E_INVALID;
    int first = r->floor_kind != 2;
    for (size_t i = 0; i < r->nslices; i++) {
        double *F = r->fl[i].v;
        const parity_logprob_slice_t *fs = NULL;
        for (size_t j = 0; j < floor->nslices; j++)
            if (!strcmp(floor->slices[j].name, r->slices[i].name)) fs = &floor->slices[j];
        for (int k = 0; k < LP_NF; k++) {
            double v = fs && fs->m.n_finite ? lp_metric(&fs->m, k) : NAN;
            /* with floors of both sides, the larger (a slice one of them lacks takes the other's) */
            F[k] = first || isnan(F[k]) ? v : isnan(v) ? F[k] : fmax(F[k], v);
        }
    }
    r->floor_kind = 2;
    lp_floor_run_t *fr = &r->floor_run[r->nfloor_run++];
    snprintf(fr->path, sizeof fr->path, "%s", floor->name_b);
    fr->side = (int)side;
    fr->detected = detected;
    fr->mean_same = overall_mean(floor);
    fr->mean_other = other ? overall_mean(other) : NAN;
    const parity_dist_summary_t *m0 = floor->nslices ? &floor->slices[0].m : NULL;
    fr->identical = m0 && m0->n_finite > 0 && m0->abs_dlogprob_max == 0 && m0->n_inf_mismatch == 0 &&
                    m0->n_invalid == 0;
    if (first) snprintf(r->name_floor, sizeof r->name_floor, "%s", floor->name_b);
    return PARITY_OK;
}

parity_status_t parity_logprob_result_set_floor(parity_logprob_result_t *r, parity_logprob_result_t *floor)
{
    if (!r || !floor) return PARITY_E_INVALID;
    r->nfloor_run = 0;
    r->floor_kind = 1;
    return parity_logprob_result_add_floor(r, floor, PARITY_LOGPROB_SIDE_A, NULL, 0);
}

int parity_logprob_floor_side(const parity_logprob_result_t *a_f, const parity_logprob_result_t *b_f)
{
    double da = overall_mean(a_f), db = overall_mean(b_f);
    if (isnan(da) || isnan(db)) return -1;
    if (da * PARITY_LOGPROB_FLOOR_SIDE_RATIO <= db && db > 0) return PARITY_LOGPROB_SIDE_A;
    if (db * PARITY_LOGPROB_FLOOR_SIDE_RATIO <= da && da > 0) return PARITY_LOGPROB_SIDE_B;
    return -1;
}

double lp_alarm_of(const parity_logprob_result_t *r, int k)
{
    return k == LP_F_K3 ? r->opts.k3_alarm : r->opts.dlogprob_alarm;
}

int lp_floor_covers(const parity_logprob_result_t *r, size_t i, int k)
{
    if (!r || r->floor_kind != 2 || i >= r->nslices) return 0;
    const parity_dist_summary_t *m = &r->slices[i].m;
    if (m->n_finite == 0) return 0;
    double v = k == LP_F_K3 ? m->k3_mean : m->abs_dlogprob_max, f = r->fl[i].v[k];
    return v > lp_alarm_of(r, k) && v <= r->opts.floor_factor * f;
}

int parity_logprob_result_floor_as_large_as_drift(const parity_logprob_result_t *r)
{
    if (!r || r->floor_kind != 2) return 0;
    for (size_t i = 0; i < r->nslices; i++)
        if (lp_floor_covers(r, i, LP_F_K3) || lp_floor_covers(r, i, LP_F_MAX_ABS)) return 1;
    return 0;
}

parity_logprob_verdict_t parity_logprob_result_verdict(const parity_logprob_result_t *r, size_t i)
{
    if (!r || i >= r->nslices) return PARITY_LOGPROB_EMPTY;
    const parity_dist_summary_t *m = &r->slices[i].m;
    if (m->n_finite == 0 && m->n_invalid == 0 && m->n_inf_mismatch == 0) return PARITY_LOGPROB_EMPTY;
    if (m->n_inf_mismatch || m->n_invalid) return PARITY_LOGPROB_ALARM;
    const double *F = r->fl[i].v;
    double fac = r->opts.floor_factor;
    /* A metric is "explained by the floor" when it is within factor x floor. */
    int k3_above = !(m->k3_mean <= fac * F[LP_F_K3]);
    int max_above = !(m->abs_dlogprob_max <= fac * F[LP_F_MAX_ABS]);
    int mean_above = !(m->abs_dlogprob_mean <= fac * F[LP_F_MEAN_ABS]);
    /* a measured floor whose own k3 is above the alarm excuses no k3: its two runs disagree by
     * more than the alarm allows, which is not noise (docs/logprob-metrics.md, "Noise floor") */
    int k3_unexcused = k3_above || (r->floor_kind == 2 && F[LP_F_K3] > r->opts.k3_alarm);
    if ((m->k3_mean > r->opts.k3_alarm && k3_unexcused) || (m->abs_dlogprob_max > r->opts.dlogprob_alarm && max_above))
        return PARITY_LOGPROB_ALARM;
    if (k3_above || mean_above) return PARITY_LOGPROB_ABOVE_FLOOR;
    return PARITY_LOGPROB_OK;
}

int parity_logprob_result_exit_code(const parity_logprob_result_t *r)
{
    if (!r) return PARITY_EXIT_INPUT;
    if (r->counts.n_diverged || r->counts.n_only_a || r->counts.n_only_b) return PARITY_EXIT_VERDICT;
    for (size_t i = 0; i < r->nslices; i++)
        if (parity_logprob_result_verdict(r, i) == PARITY_LOGPROB_ALARM) return PARITY_EXIT_VERDICT;
    return PARITY_EXIT_OK;
}

size_t parity_logprob_result_nslices(const parity_logprob_result_t *r)
{
    return r ? r->nslices : 0;
}

const parity_logprob_slice_t *parity_logprob_result_slice(const parity_logprob_result_t *r, size_t i)
{
    return r && i < r->nslices ? &r->slices[i] : NULL;
}

size_t parity_logprob_result_nworst(const parity_logprob_result_t *r)
{
    return r ? r->nworst : 0;
}

const parity_logprob_token_t *parity_logprob_result_worst(const parity_logprob_result_t *r, size_t i)
{
    return r && i < r->nworst ? &r->worst[i] : NULL;
}

size_t parity_logprob_result_ndiv(const parity_logprob_result_t *r)
{
    return r ? r->ndiv : 0;
}

const parity_logprob_divergence_t *parity_logprob_result_div(const parity_logprob_result_t *r, size_t i)
{
    return r && i < r->ndiv ? &r->div[i] : NULL;
}

const parity_logprob_counts_t *parity_logprob_result_counts(const parity_logprob_result_t *r)
{
    return r ? &r->counts : NULL;
}
