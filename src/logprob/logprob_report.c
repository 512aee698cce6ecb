/* Reports of a logprob comparison: the text summary, the JSON schema of docs/logprobs.md
 * (written atomically) and a self-contained HTML page with inline SVG plots. Computes nothing
 * new: every number comes from the result of logprob_compare.c. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/logprob/logprob_cmp_impl.h"
#include "parity/format.h"

static double ratio(double v, double f)
{
    if (!(f > 0) || isnan(v)) return NAN;
    return v / f;
}

/* worst slices first: by the larger of x_floor(k3) and x_floor(max |dlogprob|) */
static const parity_logprob_result_t *g_r;
static double badness(size_t i)
{
    const parity_logprob_slice_t *s = &g_r->slices[i];
    double a = ratio(s->m.k3_mean, g_r->fl[i].v[LP_F_K3]), b = ratio(s->m.abs_dlogprob_max, g_r->fl[i].v[LP_F_MAX_ABS]);
    double v = isnan(a) ? b : isnan(b) ? a : a > b ? a : b;
    return isnan(v) ? s->m.k3_mean : v;
}
static int cmp_bad(const void *x, const void *y)
{
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    double a = badness(i), b = badness(j);
    if (a != b) return a < b ? 1 : -1;
    return i < j ? -1 : i > j;
}

static void fmt_x(char *b, size_t n, double v)
{
    if (isnan(v)) snprintf(b, n, "-");
    else snprintf(b, n, "%.3gx", v);
}

static const char *side_name(int side)
{
    return side == PARITY_LOGPROB_SIDE_B ? "B" : "A";
}

/* The measured floor in words: "A vs a2.jsonl", "A vs a2.jsonl and B vs b2.jsonl". */
static void floor_desc(const parity_logprob_result_t *r, char *b, size_t n)
{
    b[0] = 0;
    size_t l = 0;
    for (int k = 0; k < r->nfloor_run && l < n; k++) {
        int w = snprintf(b + l, n - l, "%s%s vs %s", k ? " and " : "", side_name(r->floor_run[k].side),
                         r->floor_run[k].path);
        if (w > 0) l += (size_t)w;
    }
}

/* What the report says of each measured floor run: how its side was told, its distances to the
 * two sides, a zero floor. */
static void floor_runs_text(const parity_logprob_result_t *r, FILE *out)
{
    if (r->nfloor_run > 1)
        fprintf(out, "  (floors of both sides: each metric's floor is the larger of the two)\n");
    for (int k = 0; k < r->nfloor_run; k++) {
        const lp_floor_run_t *f = &r->floor_run[k];
        const char *s = side_name(f->side), *o = side_name(!f->side);
        fprintf(out, "  %s: a second run of %s's side (%s", f->path, s,
                f->detected ? "found by --floor" : f->side ? "--floor-b" : "--floor-a");
        if (!isnan(f->mean_other))
            fprintf(out, "; mean |dlogprob| %.3g to %s, %.3g to %s", f->mean_same, s, f->mean_other, o);
        fprintf(out, ")\n");
        if (f->identical)
            fprintf(out, "  note: %s is identical to %s (every logprob equal): a zero floor, which measures no\n"
                         "  noise; a repeat measures it only when something in the run differs (docs/logprob-metrics.md)\n",
                    f->path, s);
    }
}

/* The warning of a floor as large as the drift it bounds: one line per slice and metric (k3,
 * max |dlogprob|; overall first, at most 6). */
static void floor_warnings_text(const parity_logprob_result_t *r, FILE *out)
{
    int nw = 0, more = 0, k3_anyway = 0;
    for (size_t i = 0; i < r->nslices; i++)
        for (int q = 0; q < 2; q++) {
            int k = q ? LP_F_MAX_ABS : LP_F_K3;
            if (!lp_floor_covers(r, i, k)) continue;
            if (nw == 6) {
                more++;
                continue;
            }
            if (nw++ == 0)
                fprintf(out, "  warning: the floor is as large as the drift it bounds, so this comparison cannot tell\n"
                             "  that drift from the floor runs' own noise:\n");
            const parity_dist_summary_t *m = &r->slices[i].m;
            double v = k == LP_F_K3 ? m->k3_mean : m->abs_dlogprob_max, f = r->fl[i].v[k];
            int anyway = k == LP_F_K3 && f > r->opts.k3_alarm;
            k3_anyway |= anyway;
            fprintf(out, "    %s: %s %.3g (alarm %g) is %.3gx its floor %.3g: %s\n", r->slices[i].name,
                    k == LP_F_K3 ? "k3" : "max |dlogprob|", v, lp_alarm_of(r, k), v / f, f,
                    anyway ? "alarm anyway, the floor's own k3 is above the alarm"
                           : "no alarm, only because of the floor");
        }
    if (more) fprintf(out, "    (and %d more; JSON: floor.excused)\n", more);
    if (k3_anyway)
        fprintf(out, "  A floor whose own k3 is above the alarm excuses no k3: its two runs of one side disagree by\n"
                     "  more than the alarm allows, which is not noise but a finding.\n");
    if (nw)
        fprintf(out, "  Check that each floor file repeats the side it is given for, and measure both sides'\n"
                     "  floors (--floor-a A2 --floor-b B2; docs/logprob-metrics.md, \"Noise floor\").\n");
}

parity_status_t parity_logprob_report_text(const parity_logprob_result_t *r, FILE *out)
{
    if (!r || !out) return PARITY_E_INVALID;
    const parity_logprob_counts_t *c = &r->counts;
    fprintf(out, "parity logprobs: A = %s (%s), B = %s (%s)\n", r->name_a, parity_logprob_format_name(r->fmt_a),
            r->name_b, parity_logprob_format_name(r->fmt_b));
    char fd[1200];
    floor_desc(r, fd, sizeof fd);
    fprintf(out, "delta = logprob_B - logprob_A; ratio r = p_A / p_B; floor: %s\n",
            r->floor_kind == 2 ? fd : "analytic");
    if (r->floor_kind != 2) fprintf(out, "  (analytic floor from dtype %s; measure it from a second run of one side: --floor-a A2 or --floor-b B2)\n", r->dtype);
    else floor_runs_text(r, out);
    fprintf(out, "sequences: A %llu, B %llu, paired %llu, only in A %llu, only in B %llu, diverged %llu\n",
            (unsigned long long)c->n_seq_a, (unsigned long long)c->n_seq_b, (unsigned long long)c->n_pairs,
            (unsigned long long)c->n_only_a, (unsigned long long)c->n_only_b, (unsigned long long)c->n_diverged);
    fprintf(out, "tokens: compared %llu, absent on a side %llu, after a divergence %llu, unkeyed %llu\n\n",
            (unsigned long long)c->n_tokens_compared, (unsigned long long)c->n_tokens_absent,
            (unsigned long long)c->n_tokens_after_divergence, (unsigned long long)c->n_unkeyed);
    if (r->nslices == 0) return PARITY_OK;
    const parity_dist_summary_t *m = &r->slices[0].m;
    char x1[32], x2[32];
    fmt_x(x1, sizeof x1, ratio(m->k3_mean, r->fl[0].v[LP_F_K3]));
    fmt_x(x2, sizeof x2, ratio(m->abs_dlogprob_max, r->fl[0].v[LP_F_MAX_ABS]));
    fprintf(out, "overall: %s\n", parity_logprob_verdict_name(parity_logprob_result_verdict(r, 0)));
    fprintf(out, "  |dlogprob| max %.3g (%s floor)  mean %.3g  p50 %.3g  p99 %.3g  p99.9 %.3g\n", m->abs_dlogprob_max,
            x2, m->abs_dlogprob_mean, m->abs_dlogprob_p50, m->abs_dlogprob_p99, m->abs_dlogprob_p999);
    fprintf(out, "  |dprob|    max %.3g  mean %.3g  p99 %.3g\n", fabs(m->abs_dprob_max), m->abs_dprob_mean,
            m->abs_dprob_p99);
    fprintf(out, "  KL(B||A) k1 %.3g  k2 %.3g  k3 %.3g (%s floor)  chi2/token %.3g  chi2/seq %.3g\n", m->k1_mean,
            m->k2_mean, m->k3_mean, x1, m->chi2_mean, m->chi2_seq_mean);
    fprintf(out, "  importance ratio mean %.6g  min %.3g  max %.3g  ESS %.4f  outside [0.5, 2] %.3g%%\n", m->iw_mean,
            m->iw_min, m->iw_max, m->iw_ess, 100 * m->iw_frac_out);
    fprintf(out, "  per sequence: |dlog ppl| max %.3g, ppl ratio B/A in [%.6g, %.6g]; Pearson r(p) %.9f\n",
            m->dlogppl_max_abs, m->ppl_ratio_min, m->ppl_ratio_max, m->pearson_p);
    if (m->n_topk)
        fprintf(out, "  top-k: top-1 agreement %.4f, overlap %.4f, truncated KL mean %.3g max %.3g\n", m->top1_agree,
                m->topk_overlap_mean, m->tkl_mean, m->tkl_max);
    if (m->n_invalid || m->n_inf_mismatch)
        fprintf(out, "  non-finite: %llu invalid, %llu -inf against finite\n", (unsigned long long)m->n_invalid,
                (unsigned long long)m->n_inf_mismatch);
    floor_warnings_text(r, out);
    if (r->nslices > 1) {
        size_t *ord = malloc(r->nslices * sizeof *ord);
        if (ord) {
            for (size_t i = 0; i < r->nslices - 1; i++) ord[i] = i + 1;
            g_r = r;
            qsort(ord, r->nslices - 1, sizeof *ord, cmp_bad);
            fprintf(out, "\nworst slices (of %zu):\n  %-28s %10s %10s %10s %10s %9s %9s  %s\n", r->nslices - 1, "slice",
                    "tokens", "max|d|", "mean|d|", "k3", "k3/floor", "max/floor", "verdict");
            for (size_t q = 0; q < r->nslices - 1 && q < 10; q++) {
                size_t i = ord[q];
                const parity_dist_summary_t *s = &r->slices[i].m;
                fmt_x(x1, sizeof x1, ratio(s->k3_mean, r->fl[i].v[LP_F_K3]));
                fmt_x(x2, sizeof x2, ratio(s->abs_dlogprob_max, r->fl[i].v[LP_F_MAX_ABS]));
                fprintf(out, "  %-28.28s %10llu %10.3g %10.3g %10.3g %9s %9s  %s\n", r->slices[i].name,
                        (unsigned long long)s->n_tok, s->abs_dlogprob_max, s->abs_dlogprob_mean, s->k3_mean, x1, x2,
                        parity_logprob_verdict_name(parity_logprob_result_verdict(r, i)));
            }
            free(ord);
        }
    }
    if (r->nworst) {
        fprintf(out, "\nworst tokens:\n");
        for (size_t i = 0; i < r->nworst; i++) {
            const parity_logprob_token_t *w = &r->worst[i];
            char kt[80]; /* the id, or the text of a token without one */
            if (w->key_a < 0 && w->text[0]) snprintf(kt, sizeof kt, "tok '%.60s'", w->text);
            else snprintf(kt, sizeof kt, "id %-8lld", (long long)w->key_a);
            fprintf(out, "  %-12.40s pos %-6llu %s A %-10.6g B %-10.6g d %+.3g%s%s%s%s\n", w->id,
                    (unsigned long long)w->position, kt, w->lp_a, w->lp_b, w->lp_b - w->lp_a,
                    w->slice_mod[0] ? "  modality " : "", w->slice_mod, w->context[0] ? "  " : "", w->context);
        }
    }
    if (r->ndiv) {
        fprintf(out, "\ntoken-id divergences (first position per request; tokens after it are not compared):\n");
        for (size_t i = 0; i < r->ndiv && i < 20; i++) {
            const parity_logprob_divergence_t *v = &r->div[i];
            char ka[32], kb[32];
            /* a token without an id (key -1) is shown by its text alone */
            if (v->key_a == INT64_MIN) snprintf(ka, sizeof ka, "(end, len %llu)", (unsigned long long)v->n_a);
            else if (v->key_a >= 0 || !v->text_a[0]) snprintf(ka, sizeof ka, "%lld", (long long)v->key_a);
            else ka[0] = 0;
            if (v->key_b == INT64_MIN) snprintf(kb, sizeof kb, "(end, len %llu)", (unsigned long long)v->n_b);
            else if (v->key_b >= 0 || !v->text_b[0]) snprintf(kb, sizeof kb, "%lld", (long long)v->key_b);
            else kb[0] = 0;
            fprintf(out, "  %-16.60s pos %-6llu A %s%s%s%s  B %s%s%s%s\n", v->id, (unsigned long long)v->position, ka,
                    v->text_a[0] ? (ka[0] ? " '" : "'") : "", v->text_a, v->text_a[0] ? "'" : "", kb,
                    v->text_b[0] ? (kb[0] ? " '" : "'") : "", v->text_b, v->text_b[0] ? "'" : "");
        }
        if (c->n_diverged > 20) fprintf(out, "  ... %llu more\n", (unsigned long long)(c->n_diverged - 20));
    }
    int ec = parity_logprob_result_exit_code(r);
    fprintf(out, "\nverdict: %s (alarms: k3 > %g, max |dlogprob| > %g, unless within %gx the floor)\n",
            ec ? "DRIFT" : "within alarms", r->opts.k3_alarm, r->opts.dlogprob_alarm, r->opts.floor_factor);
    return PARITY_OK;
}

/* ---- JSON --------------------------------------------------------------------------------- */

/* Numbers that read back as exactly the double computed (parity_format_decimal); undefined
 * ones (NaN, inf) as null. */
static void num(cJSON *o, const char *k, double v)
{
    if (v == 0) v = 0.0; /* no negative zero in the report */
    if (isnan(v) || isinf(v)) {
        cJSON_AddNullToObject(o, k);
        return;
    }
    char b[32];
    cJSON_AddRawToObject(o, k, parity_format_decimal(v, b));
}

static cJSON *slice_json(const parity_logprob_result_t *r, size_t i)
{
    const parity_logprob_slice_t *s = &r->slices[i];
    const parity_dist_summary_t *m = &s->m;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "name", s->name);
    cJSON_AddStringToObject(o, "verdict", parity_logprob_verdict_name(parity_logprob_result_verdict(r, i)));
    num(o, "n_tokens", (double)m->n_tok);
    num(o, "n_finite", (double)m->n_finite);
    num(o, "n_invalid", (double)m->n_invalid);
    num(o, "n_inf_mismatch", (double)m->n_inf_mismatch);
    num(o, "n_zero_match", (double)m->n_zero_match);
    num(o, "max_abs_dlogprob", m->abs_dlogprob_max);
    num(o, "mean_abs_dlogprob", m->abs_dlogprob_mean);
    num(o, "p50_abs_dlogprob", m->abs_dlogprob_p50);
    num(o, "p99_abs_dlogprob", m->abs_dlogprob_p99);
    num(o, "p999_abs_dlogprob", m->abs_dlogprob_p999);
    num(o, "mean_dlogprob", m->dlogprob_mean);
    num(o, "max_abs_dprob", m->abs_dprob_max);
    num(o, "mean_abs_dprob", m->abs_dprob_mean);
    num(o, "p50_abs_dprob", m->abs_dprob_p50);
    num(o, "p99_abs_dprob", m->abs_dprob_p99);
    num(o, "p999_abs_dprob", m->abs_dprob_p999);
    num(o, "k1", m->k1_mean);
    num(o, "k2", m->k2_mean);
    num(o, "k3", m->k3_mean);
    num(o, "k3_max", m->k3_max);
    num(o, "chi2_mean", m->chi2_mean);
    num(o, "chi2_max", m->chi2_max);
    num(o, "iw_mean", m->iw_mean);
    num(o, "iw_min", m->iw_min);
    num(o, "iw_max", m->iw_max);
    num(o, "iw_std", m->iw_std);
    num(o, "iw_ess", m->iw_ess);
    num(o, "iw_frac_low", m->iw_frac_low);
    num(o, "iw_frac_high", m->iw_frac_high);
    num(o, "iw_frac_out", m->iw_frac_out);
    num(o, "pearson_p", m->pearson_p);
    num(o, "n_seq", (double)m->n_seq);
    num(o, "n_seq_empty", (double)m->n_seq_empty);
    num(o, "dlogppl_mean", m->dlogppl_mean);
    num(o, "dlogppl_max_abs", m->dlogppl_max_abs);
    num(o, "ppl_ratio_mean", m->ppl_ratio_mean);
    num(o, "ppl_ratio_min", m->ppl_ratio_min);
    num(o, "ppl_ratio_max", m->ppl_ratio_max);
    num(o, "chi2_seq_mean", m->chi2_seq_mean);
    num(o, "n_topk", (double)m->n_topk);
    num(o, "top1_agree", m->n_topk ? m->top1_agree : NAN);
    num(o, "topk_overlap_mean", m->n_topk ? m->topk_overlap_mean : NAN);
    num(o, "n_tkl", (double)m->n_tkl);
    num(o, "tkl_mean", m->n_tkl ? m->tkl_mean : NAN);
    num(o, "tkl_max", m->n_tkl ? m->tkl_max : NAN);
    cJSON *f = cJSON_AddObjectToObject(o, "floor"), *x = cJSON_AddObjectToObject(o, "x_floor");
    for (int k = 0; k < LP_NF && f && x; k++) {
        num(f, lp_metric_name(k), r->fl[i].v[k]);
        num(x, lp_metric_name(k), ratio(lp_metric(m, k), r->fl[i].v[k]));
    }
    cJSON *h = cJSON_AddObjectToObject(o, "hist_dlogprob");
    if (h) {
        cJSON_AddStringToObject(h, "bins", "4 per decade of |delta| over [1e-9, 1e1), first and last bins open; "
                                           "bin b holds the |delta| whose quantile-sketch bin (128 per binade) "
                                           "starts in [10^(b/4-9), 10^((b+1)/4-9)), i.e. decimal edges rounded "
                                           "up to the sketch's grid (within 2^-7 relative); "
                                           "delta = NaN (both -inf) counts as zero");
        num(h, "zero", s->hist_zero);
        cJSON *neg = cJSON_AddArrayToObject(h, "negative"), *pos = cJSON_AddArrayToObject(h, "positive");
        for (int b = 0; b < HBINS && neg && pos; b++) {
            cJSON_AddItemToArray(neg, cJSON_CreateNumber(s->hist[0][b]));
            cJSON_AddItemToArray(pos, cJSON_CreateNumber(s->hist[1][b]));
        }
    }
    return o;
}

static cJSON *build_json(const parity_logprob_result_t *r)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "schema", "parity.logprobs/1");
    cJSON *a = cJSON_AddObjectToObject(root, "a"), *b = cJSON_AddObjectToObject(root, "b");
    cJSON_AddStringToObject(a, "path", r->name_a);
    cJSON_AddStringToObject(a, "format", parity_logprob_format_name(r->fmt_a));
    cJSON_AddStringToObject(b, "path", r->name_b);
    cJSON_AddStringToObject(b, "format", parity_logprob_format_name(r->fmt_b));
    cJSON *cv = cJSON_AddObjectToObject(root, "conventions");
    cJSON_AddStringToObject(cv, "delta", "logprob_B - logprob_A");
    cJSON_AddStringToObject(cv, "ratio", "p_A / p_B");
    cJSON_AddStringToObject(cv, "kl", "k1, k2, k3 estimate KL(B || A) from tokens sampled by B");
    cJSON *fl = cJSON_AddObjectToObject(root, "floor");
    cJSON_AddStringToObject(fl, "kind", r->floor_kind == 2 ? "measured" : "analytic");
    if (r->floor_kind == 2) cJSON_AddStringToObject(fl, "path", r->name_floor);
    cJSON_AddStringToObject(fl, "dtype", r->dtype);
    num(fl, "unit_roundoff", lp_unit_roundoff(r->dtype));
    if (r->floor_kind == 2) { /* only with a measured floor: the analytic report is unchanged */
        cJSON *runs = cJSON_AddArrayToObject(fl, "runs");
        for (int k = 0; k < r->nfloor_run && runs; k++) {
            const lp_floor_run_t *f = &r->floor_run[k];
            cJSON *o = cJSON_CreateObject();
            if (!o) break;
            cJSON_AddStringToObject(o, "path", f->path);
            cJSON_AddStringToObject(o, "side", f->side ? "b" : "a");
            cJSON_AddBoolToObject(o, "detected", f->detected);
            num(o, f->side ? "mean_abs_dlogprob_to_b" : "mean_abs_dlogprob_to_a", f->mean_same);
            num(o, f->side ? "mean_abs_dlogprob_to_a" : "mean_abs_dlogprob_to_b", f->mean_other);
            cJSON_AddBoolToObject(o, "identical", f->identical);
            cJSON_AddItemToArray(runs, o);
        }
        cJSON_AddBoolToObject(fl, "as_large_as_drift", parity_logprob_result_floor_as_large_as_drift(r));
        cJSON *ex = cJSON_AddArrayToObject(fl, "excused");
        for (size_t i = 0; i < r->nslices && ex; i++)
            for (int q = 0; q < 2; q++) {
                int k = q ? LP_F_MAX_ABS : LP_F_K3;
                if (!lp_floor_covers(r, i, k)) continue;
                const parity_dist_summary_t *m = &r->slices[i].m;
                cJSON *o = cJSON_CreateObject();
                if (!o) break;
                cJSON_AddStringToObject(o, "slice", r->slices[i].name);
                cJSON_AddStringToObject(o, "metric", lp_metric_name(k));
                num(o, "value", k == LP_F_K3 ? m->k3_mean : m->abs_dlogprob_max);
                num(o, "floor", r->fl[i].v[k]);
                num(o, "alarm", lp_alarm_of(r, k));
                /* k3 whose floor is itself above the alarm is not excused: the slice is in alarm */
                cJSON_AddBoolToObject(o, "alarm_anyway", k == LP_F_K3 && r->fl[i].v[k] > r->opts.k3_alarm);
                cJSON_AddItemToArray(ex, o);
            }
    }
    cJSON *al = cJSON_AddObjectToObject(root, "alarms");
    num(al, "k3", r->opts.k3_alarm);
    num(al, "max_abs_dlogprob", r->opts.dlogprob_alarm);
    num(al, "floor_factor", r->opts.floor_factor);
    const parity_logprob_counts_t *c = &r->counts;
    cJSON *cn = cJSON_AddObjectToObject(root, "counts");
    num(cn, "n_seq_a", (double)c->n_seq_a);
    num(cn, "n_seq_b", (double)c->n_seq_b);
    num(cn, "n_pairs", (double)c->n_pairs);
    num(cn, "n_only_a", (double)c->n_only_a);
    num(cn, "n_only_b", (double)c->n_only_b);
    num(cn, "n_diverged", (double)c->n_diverged);
    num(cn, "n_tokens_compared", (double)c->n_tokens_compared);
    num(cn, "n_tokens_absent", (double)c->n_tokens_absent);
    num(cn, "n_tokens_after_divergence", (double)c->n_tokens_after_divergence);
    num(cn, "n_unkeyed", (double)c->n_unkeyed);
    if (r->nslices) cJSON_AddItemToObject(root, "overall", slice_json(r, 0));
    cJSON *sl = cJSON_AddArrayToObject(root, "slices");
    for (size_t i = 1; i < r->nslices; i++) cJSON_AddItemToArray(sl, slice_json(r, i));
    cJSON *w = cJSON_AddArrayToObject(root, "worst_tokens");
    for (size_t i = 0; i < r->nworst; i++) {
        const parity_logprob_token_t *t = &r->worst[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", t->id);
        num(o, "position", (double)t->position);
        num(o, "token_id", (double)t->key_a);
        num(o, "logprob_a", t->lp_a);
        num(o, "logprob_b", t->lp_b);
        num(o, "dlogprob", t->lp_b - t->lp_a);
        cJSON_AddStringToObject(o, "text", t->text);
        cJSON_AddStringToObject(o, "context", t->context);
        cJSON_AddStringToObject(o, "modality", t->slice_mod);
        cJSON_AddItemToArray(w, o);
    }
    cJSON *dv = cJSON_AddArrayToObject(root, "divergences");
    for (size_t i = 0; i < r->ndiv; i++) {
        const parity_logprob_divergence_t *v = &r->div[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", v->id);
        num(o, "position", (double)v->position);
        if (v->key_a == INT64_MIN) cJSON_AddNullToObject(o, "token_a");
        else num(o, "token_a", (double)v->key_a);
        if (v->key_b == INT64_MIN) cJSON_AddNullToObject(o, "token_b");
        else num(o, "token_b", (double)v->key_b);
        cJSON_AddStringToObject(o, "text_a", v->text_a);
        cJSON_AddStringToObject(o, "text_b", v->text_b);
        num(o, "len_a", (double)v->n_a);
        num(o, "len_b", (double)v->n_b);
        cJSON_AddItemToArray(dv, o);
    }
    int ec = parity_logprob_result_exit_code(r);
    cJSON_AddStringToObject(root, "verdict", ec ? "drift" : "ok");
    num(root, "exit_code", ec);
    return root;
}

static parity_status_t write_atomic(const char *path, const char *data, size_t n, parity_diag_t *d)
{
    size_t tl = strlen(path) + 32;
    char *tmp = malloc(tl);
    if (!tmp) return parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
    snprintf(tmp, tl, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        parity_status_t st = parity_diag_set(d, PARITY_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return st;
    }
    int ok = fwrite(data, 1, n, f) == n;
    ok &= fflush(f) == 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        parity_status_t st = parity_diag_set(d, PARITY_E_IO, "%s: write failed: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return st;
    }
    free(tmp);
    return PARITY_OK;
}

parity_status_t parity_logprob_report_json(const parity_logprob_result_t *r, const char *path, parity_diag_t *diag)
{
    if (!r || !path) return parity_diag_set(diag, PARITY_E_INVALID, "report: NULL argument");
    cJSON *root = build_json(r);
    char *s = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!s) return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) {
        cJSON_free(s);
        return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    t[n] = '\n';
    t[n + 1] = 0;
    parity_status_t st = write_atomic(path, t, n + 1, diag);
    free(t);
    return st;
}

/* ---- HTML --------------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    int err;
} sb_t;

static void sbf(sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sbf(sb_t *b, const char *fmt, ...)
{
    if (b->err) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->err = 1;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t c = (b->cap + (size_t)k + 1) * 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->err = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
}

static void sb_esc(sb_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') sbf(b, "&lt;");
        else if (*s == '>') sbf(b, "&gt;");
        else if (*s == '&') sbf(b, "&amp;");
        else if (*s == '"') sbf(b, "&quot;");
        else sbf(b, "%c", *s);
    }
}

static void svg_hist(sb_t *b, const parity_logprob_slice_t *s)
{
    /* negative deltas to the left of the centre (large |delta| outermost), positive right */
    const int W = 480, H = 120, bw = 5;
    double mx = s->hist_zero;
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < HBINS; i++)
            if (s->hist[g][i] > mx) mx = s->hist[g][i];
    if (mx <= 0) mx = 1;
    sbf(b, "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\"><rect width=\"%d\" height=\"%d\" "
           "fill=\"#fafafa\" stroke=\"#ccc\"/>",
        W, H + 20, W, H + 20, W, H);
    int cx = W / 2;
    for (int i = 0; i < HBINS; i++) {
        double hn = (H - 10) * s->hist[0][i] / mx, hp = (H - 10) * s->hist[1][i] / mx;
        if (hn > 0)
            sbf(b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#c44\"/>", cx - 3 - (i + 1) * bw,
                H - hn, bw - 1, hn);
        if (hp > 0)
            sbf(b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#46c\"/>", cx + 3 + i * bw, H - hp,
                bw - 1, hp);
    }
    double hz = (H - 10) * s->hist_zero / mx;
    if (hz > 0) sbf(b, "<rect x=\"%d\" y=\"%.1f\" width=\"5\" height=\"%.1f\" fill=\"#888\"/>", cx - 2, H - hz, hz);
    for (int dec = -9; dec <= 1; dec += 2) {
        int off = (dec + 9) * 4 * bw;
        sbf(b, "<text x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\">1e%d</text>", cx + 3 + off, H + 14, dec);
        sbf(b, "<text x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\">-1e%d</text>", cx - 3 - off, H + 14,
            dec);
    }
    sbf(b, "</svg>");
}

static void svg_position(sb_t *b, const parity_logprob_result_t *r)
{
    /* mean and max |delta| per position bucket, log10 y axis */
    const int W = 640, H = 220, L = 50;
    size_t idx[64];
    int n = 0;
    for (size_t i = 1; i < r->nslices && n < 64; i++)
        if (!strncmp(r->slices[i].name, "pos=", 4) && r->slices[i].m.n_finite) idx[n++] = i;
    if (n == 0) return;
    double lo = 0, hi = -12;
    for (int k = 0; k < n; k++) {
        double v = r->slices[idx[k]].m.abs_dlogprob_max, u = r->slices[idx[k]].m.abs_dlogprob_mean;
        if (v > 0 && log10(v) > hi) hi = log10(v);
        if (u > 0 && log10(u) < lo) lo = log10(u);
    }
    lo = floor(lo);
    hi = ceil(hi);
    if (hi <= lo) hi = lo + 1;
    sbf(b, "<svg width=\"%d\" height=\"%d\" role=\"img\"><rect x=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" "
           "stroke=\"#ccc\"/>",
        W, H + 40, L, W - L, H);
    for (double t = lo; t <= hi; t += 1)
        sbf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"9\" text-anchor=\"end\">1e%g</text>", L - 4,
            H - (t - lo) / (hi - lo) * H + 3, t);
    const char *col[2] = {"#46c", "#c44"};
    for (int s = 0; s < 2; s++) {
        sbf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col[s]);
        for (int k = 0; k < n; k++) {
            const parity_dist_summary_t *m = &r->slices[idx[k]].m;
            double v = s ? m->abs_dlogprob_max : m->abs_dlogprob_mean;
            double y = v > 0 ? H - (log10(v) - lo) / (hi - lo) * H : H;
            sbf(b, "%.1f,%.1f ", L + (k + 0.5) * (W - L) / n, y);
        }
        sbf(b, "\"/>");
    }
    for (int k = 0; k < n; k++)
        sbf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"8\" text-anchor=\"end\" transform=\"rotate(-45 %.1f %d)\">%s</text>",
            L + (k + 0.5) * (W - L) / n, H + 12, L + (k + 0.5) * (W - L) / n, H + 12, r->slices[idx[k]].name + 4);
    sbf(b, "<text x=\"%d\" y=\"12\" font-size=\"10\" fill=\"#46c\">mean |dlogprob|</text><text x=\"%d\" y=\"24\" "
           "font-size=\"10\" fill=\"#c44\">max |dlogprob|</text></svg>",
        L + 8, L + 8);
}

parity_status_t parity_logprob_report_html(const parity_logprob_result_t *r, const char *path, parity_diag_t *diag)
{
    if (!r || !path) return parity_diag_set(diag, PARITY_E_INVALID, "report: NULL argument");
    sb_t b = {0};
    sbf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>parity logprobs</title><style>"
            "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px;text-align:right}"
            "td:first-child{text-align:left}.alarm{background:#fdd}.above-floor{background:#ffd}"
            "</style></head><body>\n<h1>parity logprobs</h1>\n<p>A = ");
    sb_esc(&b, r->name_a);
    sbf(&b, " (%s), B = ", parity_logprob_format_name(r->fmt_a));
    sb_esc(&b, r->name_b);
    sbf(&b, " (%s). delta = logprob<sub>B</sub> &minus; logprob<sub>A</sub>, ratio = p<sub>A</sub>/p<sub>B</sub>. "
            "Floor: ",
        parity_logprob_format_name(r->fmt_b));
    if (r->floor_kind == 2) {
        char fd[1200];
        floor_desc(r, fd, sizeof fd);
        sb_esc(&b, fd);
        if (parity_logprob_result_floor_as_large_as_drift(r))
            sbf(&b, " <b class=\"alarm\">(warning: the floor is as large as the drift it bounds; see the text "
                    "report)</b>");
    } else
        sbf(&b, "analytic (dtype %s)", r->dtype);
    sbf(&b, ". Verdict: <b>%s</b>.</p>\n", parity_logprob_result_exit_code(r) ? "drift" : "within alarms");
    sbf(&b, "<h2>Slices</h2><table><tr><th>slice</th><th>tokens</th><th>max |d|</th><th>mean |d|</th><th>p99 |d|</th>"
            "<th>k1</th><th>k3</th><th>k3 / floor</th><th>max / floor</th><th>chi2</th><th>top-1</th><th>verdict</th></tr>\n");
    for (size_t i = 0; i < r->nslices; i++) {
        const parity_dist_summary_t *m = &r->slices[i].m;
        parity_logprob_verdict_t v = parity_logprob_result_verdict(r, i);
        char x1[32], x2[32], t1[32] = "-";
        fmt_x(x1, sizeof x1, ratio(m->k3_mean, r->fl[i].v[LP_F_K3]));
        fmt_x(x2, sizeof x2, ratio(m->abs_dlogprob_max, r->fl[i].v[LP_F_MAX_ABS]));
        if (m->n_topk) snprintf(t1, sizeof t1, "%.4f", m->top1_agree);
        sbf(&b, "<tr class=\"%s\"><td>", parity_logprob_verdict_name(v));
        sb_esc(&b, r->slices[i].name);
        sbf(&b, "</td><td>%llu</td><td>%.3g</td><td>%.3g</td><td>%.3g</td><td>%.3g</td><td>%.3g</td><td>%s</td>"
                "<td>%s</td><td>%.3g</td><td>%s</td><td>%s</td></tr>\n",
            (unsigned long long)m->n_tok, m->abs_dlogprob_max, m->abs_dlogprob_mean, m->abs_dlogprob_p99, m->k1_mean,
            m->k3_mean, x1, x2, m->chi2_mean, t1, parity_logprob_verdict_name(v));
    }
    sbf(&b, "</table>\n<h2>|delta logprob| vs position</h2>\n");
    svg_position(&b, r);
    sbf(&b, "<h2>delta logprob histograms</h2>\n<p>Log-spaced bins of |delta| (4 per decade); negative deltas "
            "(B below A) red, left; positive blue, right; exact zeros grey in the middle.</p>\n");
    for (size_t i = 0; i < r->nslices; i++) {
        if (!r->slices[i].m.n_finite) continue;
        sbf(&b, "<h3>");
        sb_esc(&b, r->slices[i].name);
        sbf(&b, "</h3>");
        svg_hist(&b, &r->slices[i]);
        sbf(&b, "\n");
    }
    if (r->nworst) {
        sbf(&b, "<h2>Worst tokens</h2><table><tr><th>request</th><th>pos</th><th>token id</th><th>A</th><th>B</th>"
                "<th>delta</th><th>context</th></tr>\n");
        for (size_t i = 0; i < r->nworst; i++) {
            const parity_logprob_token_t *w = &r->worst[i];
            sbf(&b, "<tr><td>");
            sb_esc(&b, w->id);
            sbf(&b, "</td><td>%llu</td><td>%lld</td><td>%.6g</td><td>%.6g</td><td>%+.3g</td><td style=\"text-align:left\">",
                (unsigned long long)w->position, (long long)w->key_a, w->lp_a, w->lp_b, w->lp_b - w->lp_a);
            sb_esc(&b, w->context);
            sbf(&b, "</td></tr>\n");
        }
        sbf(&b, "</table>\n");
    }
    if (r->ndiv) {
        sbf(&b, "<h2>Token-id divergences</h2><table><tr><th>request</th><th>first position</th><th>A</th><th>B</th></tr>\n");
        for (size_t i = 0; i < r->ndiv && i < 200; i++) {
            sbf(&b, "<tr><td>");
            sb_esc(&b, r->div[i].id);
            const parity_logprob_divergence_t *v = &r->div[i];
            sbf(&b, "</td><td>%llu</td>", (unsigned long long)v->position);
            /* the id, or the text of a token without one (key -1) */
            for (int side = 0; side < 2; side++) {
                int64_t k = side ? v->key_b : v->key_a;
                const char *t = side ? v->text_b : v->text_a;
                sbf(&b, "<td>");
                if (k == INT64_MIN) sbf(&b, "(end)");
                else if (k >= 0 || !t[0]) sbf(&b, "%lld", (long long)k);
                if (t[0] && k != INT64_MIN) {
                    sbf(&b, k >= 0 ? " '" : "'");
                    sb_esc(&b, t);
                    sbf(&b, "'");
                }
                sbf(&b, "</td>");
            }
            sbf(&b, "</tr>\n");
        }
        sbf(&b, "</table>\n");
    }
    sbf(&b, "</body></html>\n");
    if (b.err) {
        free(b.p);
        return parity_diag_set(diag, PARITY_E_NOMEM, "out of memory");
    }
    parity_status_t st = write_atomic(path, b.p, b.n, diag);
    free(b.p);
    return st;
}
