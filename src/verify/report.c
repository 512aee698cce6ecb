/* Reports of a check run (include/parity/report.h): a human text summary and a stable JSON
 * schema (docs/check-json.md: keys are never renamed, only added), one renderer for the CLI's
 * `parity check` / `parity compare` and the Python package's parity.check / parity.compare, of
 * built-in and declared ops alike. The JSON holds no timings, so the same seed and inputs give a
 * byte-identical file. */
#include "parity/report.h"
#include "src/core/json_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity/workload.h"

static void token_text_of(const parity_wl_result_t *w, const parity_worst_t *e, char *buf, size_t len)
{
    buf[0] = 0;
    if (strcmp(e->output, "dE") != 0) return;
    if (strncmp(w->workload, "text", 4) != 0 && strcmp(w->workload, "prod") != 0 &&
        strcmp(w->workload, "outlier") != 0 && strcmp(w->workload, "intprobe") != 0)
        return;
    size_t n;
    const char *s = parity_workload_token_text((int32_t)e->row_key, &n);
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n') { buf[o++] = '\\'; buf[o++] = 'n'; }
        else if (ch < 32 || ch == '"' || ch == '\\') o += (size_t)snprintf(buf + o, len - o, "\\x%02x", ch);
        else buf[o++] = (char)ch;
    }
    buf[o] = 0;
}

static void token_text(const parity_kernel_result_t *kr, const parity_wl_result_t *w, char *buf,
                       size_t len)
{
    (void)kr;
    token_text_of(w, &w->worst, buf, len);
}

static const char *expected_of(const parity_kernel_result_t *kr)
{
    return kr->kr->k->expected ? kr->kr->k->expected : "-";
}

static int as_expected(const parity_kernel_result_t *kr)
{
    const char *e = kr->kr->k->expected;
    if (!e) return -1;
    int faithful = kr->verdict == PARITY_VERDICT_FAITHFUL;
    return strcmp(e, "faithful") == 0 ? faithful : !faithful;
}

static void fmt_q(char *b, size_t n, double q)
{
    if (isinf(q)) snprintf(b, n, "inf");
    else snprintf(b, n, "%.3g", q);
}

static void reproducer(char *b, size_t n, const parity_op_t *op, const parity_kernel_result_t *kr,
                       const parity_wl_result_t *w, const parity_report_opts_t *ctx)
{
    if (ctx->reproduce) {
        snprintf(b, n, "%s", ctx->reproduce);
        return;
    }
    if (ctx->inputs_path) {
        snprintf(b, n, "parity compare %s %s %s", op->name, ctx->inputs_path, kr->kr->label);
        return;
    }
    if (ctx->op_plugin) { /* a kernel of the op plugin itself: its NAME suffices */
        const char *kn = kr->kr->label;
        size_t pl = strlen(ctx->op_plugin);
        if (strncmp(kn, ctx->op_plugin, pl) == 0 && kn[pl] == ':') kn += pl + 1;
        snprintf(b, n, "parity %s %s --op-plugin %s --kernel %s --workload %s --seed %llu", ctx->command, op->name,
                 ctx->op_plugin, kn, w->workload, (unsigned long long)ctx->seed);
        return;
    }
    snprintf(b, n, "parity %s %s --kernel %s --workload %s --seed %llu", ctx->command, op->name,
             kr->kr->label, w->workload, (unsigned long long)ctx->seed);
}

void parity_report_text(FILE *out, const parity_op_t *op, const parity_kernel_result_t *res, int n,
                       const parity_report_opts_t *ctx)
{
    fprintf(out, "parity %s %s  (seed %llu%s%s)\n", ctx->command, op->name, (unsigned long long)ctx->seed,
            ctx->seed_fresh ? " drawn by --seed fresh; --seed with it reproduces this run" : "",
            ctx->quick ? ", --quick: production-sized workloads skipped" : "");
    fprintf(out, "error model: %s; faithful accumulator %s.\n", op->error_model,
            op->faithful_accumulator);
    if (op->declared) /* no catalog: its floor is in its tolerances (docs/custom-ops.md) */
        fprintf(out, "err/tol: worst |error| over its tolerance (> 1 fails); a declared op has no catalog of\n"
                     "faithful variants, so no floor: its tolerance is derived from the declaration.\n\n");
    else
        fprintf(out, "err/tol: worst |error| over its tolerance (> 1 fails); floor: the same for the\n"
                     "faithful catalog variants on that workload.\n\n");
    for (int k = 0; k < n; k++) {
        const parity_kernel_result_t *kr = &res[k];
        const parity_wl_result_t *w = &kr->wl[kr->worst_wl];
        int ok = as_expected(kr);
        fprintf(out, "%-28s %-12s expected %-10s %s\n", kr->kr->label,
                parity_verdict_name(kr->verdict), expected_of(kr),
                ok < 0 ? "" : ok ? "(as expected)" : "(NOT AS EXPECTED)");
        if (kr->kr->k->description) fprintf(out, "  what: %s\n", kr->kr->k->description);
        if (w->verdict != PARITY_VERDICT_FAITHFUL && w->verdict != PARITY_VERDICT_UNFAITHFUL) {
            fprintf(out, "  %s on workload %s: %s\n", parity_verdict_name(w->verdict), w->workload,
                    w->detail);
        } else {
            char q[32], fl[32], tok[96];
            fmt_q(q, sizeof q, w->max_q);
            fmt_q(fl, sizeof fl, w->floor_q);
            token_text(kr, w, tok, sizeof tok);
            fprintf(out, "  worst: workload %s, %s row %lld", w->workload, w->worst.output,
                    (long long)w->worst.row_key);
            if (tok[0]) fprintf(out, " (token \"%s\")", tok);
            fprintf(out, " [%lld terms], col %lld: got %.9g ref %.9g\n", (long long)w->worst.k,
                    (long long)w->worst.col, w->worst.got, w->worst.ref);
            fprintf(out, "         |err| %.3g vs tol %.3g: err/tol %s (floor %s), %s; %lld of %lld rows fail\n",
                    w->worst.err, w->worst.tol, q, w->floor_q < 0 ? "n/a" : fl,
                    w->max_q > 0 && w->max_q <= 1 ? "headroom" : "excess",
                    (long long)w->rows_failed, (long long)w->rows_judged);
            if (w->max_q > 0 && w->max_q <= 1)
                fprintf(out, "         headroom %.3gx\n", 1 / w->max_q);
            if (w->n_worst_rows > 1) {
                fprintf(out, "  worst rows (%s, err/tol, terms):", w->worst_rows[0].output);
                for (int q = 0; q < w->n_worst_rows; q++) {
                    char tq[96], qq[32];
                    token_text_of(w, &w->worst_rows[q], tq, sizeof tq);
                    fmt_q(qq, sizeof qq, w->worst_rows[q].q);
                    fprintf(out, " %lld%s%s%s %s [%lld]%s", (long long)w->worst_rows[q].row_key,
                            tq[0] ? " \"" : "", tq, tq[0] ? "\"" : "", qq,
                            (long long)w->worst_rows[q].k, q + 1 < w->n_worst_rows ? ";" : "\n");
                }
            }
            if (w->detail[0]) fprintf(out, "         note: %s\n", w->detail);
        }
        fprintf(out, "  workloads:");
        for (int i = 0; i < kr->n_wl; i++) {
            char q[32];
            fmt_q(q, sizeof q, kr->wl[i].max_q);
            fprintf(out, " %s %s", kr->wl[i].workload,
                    kr->wl[i].verdict == PARITY_VERDICT_FAITHFUL ? "ok" :
                    kr->wl[i].verdict == PARITY_VERDICT_UNFAITHFUL ? "FAIL" :
                    parity_verdict_name(kr->wl[i].verdict));
            if (kr->wl[i].verdict == PARITY_VERDICT_FAITHFUL || kr->wl[i].verdict == PARITY_VERDICT_UNFAITHFUL)
                fprintf(out, " (%s)", q);
            fprintf(out, "%s", i + 1 < kr->n_wl ? "," : "\n");
        }
        if (kr->diag_wl < 0 && kr->verdict == PARITY_VERDICT_UNFAITHFUL && op->no_diagnosis)
            fprintf(out, "  no diagnosis: %s\n", op->no_diagnosis);
        if (kr->diag_wl >= 0) {
            const parity_wl_result_t *dw = &kr->wl[kr->diag_wl];
            const parity_diagnosis_t *d = &dw->diag;
            fprintf(out, "  diagnosis (%s, %s): ", dw->workload, d->output);
            if (d->zero_written)
                fprintf(out, "an element whose terms are all zero (0 in the reference) holds "
                             "%.3g: a structural error (a wrong index or selection, an output "
                             "that should stay 0 written or not zeroed), not accumulator "
                             "precision", dw->worst.got);
            else if (isinf(d->eff_bits)) fprintf(out, "exact on the sampled rows");
            else if (!isfinite(d->cand_err)) /* check_cause_nonfinite */
                fprintf(out, "NaN or Inf outputs where the reference is finite: no error measure");
            else if (isnan(d->emu_err[0]) && isnan(d->emu_err[4])) /* check.c: a cause, no emulation */
                fprintf(out, "relative error %.3g (no accumulator emulation: %s)", d->cand_err,
                        op->no_diagnosis ? op->no_diagnosis : "none for this output");
            else if (d->beyond)
                fprintf(out, "error %.3g is beyond what 8-bit accumulation gives (%.3g): not an "
                             "accumulator-precision problem", d->cand_err, d->emu_err[0]);
            else if (isnan(d->eff_bits) ||
                     (dw->verdict == PARITY_VERDICT_UNFAITHFUL && d->cause != PARITY_CAUSE_ACCUMULATOR))
                /* No accumulator wording where no accumulator explains the error: the figures. */
                fprintf(out, "relative error %.3g; accumulator emulations (sequential) 8-bit "
                             "%.3g, 11-bit %.3g, fp32 %.3g", d->cand_err, d->emu_err[0],
                        d->emu_err[2], d->emu_err[4]);
            else
                fprintf(out, "effective accumulator ~%.1f bits, closest to %s%s", d->eff_bits,
                        parity_emu_names[d->closest],
                        d->masked ? " (weak evidence: after rounding to the output dtype, 8- and "
                                    "24-bit accumulation differ by < 1.5x on the sampled rows)"
                                  : "");
            if (!isnan(dw->hit_corr))
                fprintf(out, "; error vs hits r = %.2f%s", dw->hit_corr,
                        dw->hit_corr > 0.5 ? " (grows with hits)" : "");
            fputc('\n', out);
            if (dw->verdict == PARITY_VERDICT_UNFAITHFUL && d->cause != PARITY_CAUSE_NONE) {
                fprintf(out, "  cause: %s \xe2\x80\x94 %s", parity_cause_names[d->cause], d->detail);
                if (d->has_match)
                    fprintf(out, " (match %.1f%%: the sampled elements it reproduces within the "
                                 "faithful tolerance)", 100 * d->match);
                fputc('\n', out);
            }
        }
        if (kr->verdict != PARITY_VERDICT_FAITHFUL) {
            char rep[1024];
            reproducer(rep, sizeof rep, op, kr, w, ctx);
            fprintf(out, "  reproduce: %s\n", rep);
        }
        fputc('\n', out);
    }
    if (ctx->baselines) {
        fprintf(out, "detection matrix (CAUGHT = the verifier rejects the kernel; for a faithful kernel that is a false alarm)\n");
        int w = 28; /* the kernel column fits the longest label (plugin paths are long) */
        for (int k = 0; k < n; k++)
            if ((int)strlen(res[k].kr->label) > w) w = (int)strlen(res[k].kr->label);
        fprintf(out, "%-*s %-10s %-10s", w, "kernel", "expected", "parity");
        /* Each rule's column is as wide as its name (seven rules keep the matrix readable). */
        int bw[PARITY_N_BASELINES];
        for (int b = 0; b < PARITY_N_BASELINES; b++) {
            const char *nm = res[0].base[b].name ? res[0].base[b].name : "";
            bw[b] = (int)strlen(nm) > 6 ? (int)strlen(nm) : 6;
            fprintf(out, " %-*s", bw[b], nm);
        }
        fputc('\n', out);
        for (int k = 0; k < n; k++) {
            const parity_kernel_result_t *kr = &res[k];
            fprintf(out, "%-*s %-10s %-10s", w, kr->kr->label, expected_of(kr),
                    kr->verdict == PARITY_VERDICT_FAITHFUL ? "pass" : "CAUGHT");
            for (int b = 0; b < PARITY_N_BASELINES; b++)
                fprintf(out, " %-*s", bw[b], !kr->base[b].ran ? (kr->base[b].detail[0] ? "n/a" : "-")
                                                 : kr->base[b].caught ? "CAUGHT" : "pass");
            fputc('\n', out);
        }
        fprintf(out, "\nbaseline rules:\n");
        for (int b = 0; b < PARITY_N_BASELINES; b++) /* a rule that does not apply (a declared op's): why */
            if (res[0].base[b].name && (res[0].base[b].ran || !res[0].base[b].detail[0]))
                fprintf(out, "  %-14s %s\n", res[0].base[b].name, res[0].base[b].rule);
        for (int b = 0; b < PARITY_N_BASELINES; b++)
            if (res[0].base[b].name && !res[0].base[b].ran && res[0].base[b].detail[0])
                fprintf(out, "  %-14s n/a: %s\n", res[0].base[b].name, res[0].base[b].detail);
        fputc('\n', out);
    }
    int bad = 0, unexpected = 0, unsupported = 0;
    for (int k = 0; k < n; k++) {
        bad += res[k].verdict != PARITY_VERDICT_FAITHFUL;
        unsupported += res[k].verdict == PARITY_VERDICT_UNSUPPORTED;
        unexpected += as_expected(&res[k]) == 0;
    }
    fprintf(out, "summary: %d kernel(s), %d faithful, %d not", n, n - bad, bad);
    /* A kernel that declined is not judged: say so, so that "not" is not read as "wrong". */
    if (unsupported)
        fprintf(out, " (%d of them unsupported: declined, not judged)", unsupported);
    if (unexpected) fprintf(out, "; %d verdict(s) differ from the catalog's expectation", unexpected);
    fputc('\n', out);
}

/* diagnosis.parameter of the PARAMETER cause: the op's parameter, the fitted value and the op's,
 * and the sampled rows' max err/tol with each (docs/check-json.md). */
static void json_parameter(cJSON *dg, const parity_diagnosis_t *d)
{
    cJSON *p = cJSON_AddObjectToObject(dg, "parameter");
    cJSON_AddStringToObject(p, "name", d->param_name);
    cJSON_AddItemToObject(p, "fitted", parity_json_num(d->param_fitted));
    cJSON_AddItemToObject(p, "op", parity_json_num(d->param_op));
    cJSON_AddItemToObject(p, "err_tol_fitted", parity_json_num(d->param_q_fitted));
    cJSON_AddItemToObject(p, "err_tol_op", parity_json_num(d->param_q_op));
}

/* diagnosis.variant of the INTERMEDIATE_ROUNDING, IGNORED_INPUT and FLUSH_TO_ZERO causes: the
 * op's variant, the format an intermediate was rounded to, and the sampled rows' max err/tol
 * against the reference recomputed with it and against the op's (docs/check-json.md). */
static void json_variant(cJSON *dg, const parity_diagnosis_t *d)
{
    cJSON *p = cJSON_AddObjectToObject(dg, "variant");
    cJSON_AddStringToObject(p, "what", d->var_what);
    if (d->var_format[0]) cJSON_AddStringToObject(p, "format", d->var_format);
    cJSON_AddItemToObject(p, "err_tol_variant", parity_json_num(d->var_q));
    cJSON_AddItemToObject(p, "err_tol_op", parity_json_num(d->var_q_full));
}

static void json_dropped(cJSON *dg, const parity_diagnosis_t *d);

/* The cause's keys: cause, detail, match (where measured) and the cause's own object. */
static void json_cause(cJSON *dg, const parity_diagnosis_t *d)
{
    cJSON_AddStringToObject(dg, "cause", parity_cause_names[d->cause]);
    cJSON_AddStringToObject(dg, "detail", d->detail);
    if (d->has_match) cJSON_AddItemToObject(dg, "match", parity_json_num(d->match));
    if (d->cause == PARITY_CAUSE_PARAMETER) json_parameter(dg, d);
    if (d->cause == PARITY_CAUSE_DROPPED_TERMS || d->cause == PARITY_CAUSE_DUPLICATED_TERMS)
        json_dropped(dg, d);
    if (d->cause == PARITY_CAUSE_INTERMEDIATE_ROUNDING || d->cause == PARITY_CAUSE_IGNORED_INPUT ||
        d->cause == PARITY_CAUSE_FLUSH_TO_ZERO || d->cause == PARITY_CAUSE_TIE ||
        d->cause == PARITY_CAUSE_STRUCTURAL)
        json_variant(dg, d);
}

/* diagnosis.dropped of the DROPPED_TERMS cause (diagnosis.duplicated of DUPLICATED_TERMS): terms
 * [from, to) of the `of` terms of each sum left out (counted twice), and the sampled rows' max
 * err/tol with that and with every term once (docs/check-json.md). */
static void json_dropped(cJSON *dg, const parity_diagnosis_t *d)
{
    int twice = d->cause == PARITY_CAUSE_DUPLICATED_TERMS;
    cJSON *p = cJSON_AddObjectToObject(dg, twice ? "duplicated" : "dropped");
    if (d->drop_from < 0) { /* terms lost element by element (check_cause_more.c): no one block */
        cJSON_AddTrueToObject(p, "per_element");
    } else {
        cJSON_AddNumberToObject(p, "from", (double)d->drop_from);
        cJSON_AddNumberToObject(p, "to", (double)d->drop_to);
    }
    cJSON_AddNumberToObject(p, "of", (double)d->drop_of);
    cJSON_AddItemToObject(p, twice ? "err_tol_duplicated" : "err_tol_dropped", parity_json_num(d->drop_q));
    cJSON_AddItemToObject(p, "err_tol_full", parity_json_num(d->drop_q_full));
}

static cJSON *report_json(const parity_op_t *op, const parity_kernel_result_t *res, int n,
                          const parity_report_opts_t *ctx)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", "parity.check/1");
    cJSON_AddStringToObject(root, "op", op->name);
    if (op->declared) cJSON_AddBoolToObject(root, "custom_op", 1); /* built-in reports stay as they were */
    cJSON_AddNumberToObject(root, "seed", (double)ctx->seed);
    cJSON_AddBoolToObject(root, "quick", ctx->quick);
    cJSON_AddStringToObject(root, "faithful_accumulator", op->faithful_accumulator);
    cJSON *ks = cJSON_AddArrayToObject(root, "kernels");
    for (int k = 0; k < n; k++) {
        const parity_kernel_result_t *kr = &res[k];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(ks, o);
        cJSON_AddStringToObject(o, "name", kr->kr->label);
        cJSON_AddStringToObject(o, "description", kr->kr->k->description ? kr->kr->k->description : "");
        cJSON_AddStringToObject(o, "expected", kr->kr->k->expected ? kr->kr->k->expected : "unknown");
        cJSON_AddStringToObject(o, "verdict", parity_verdict_name(kr->verdict));
        cJSON_AddStringToObject(o, "in_dtype", parity_dtype_name((parity_dtype_t)kr->kr->k->in_dtype));
        cJSON_AddStringToObject(o, "out_dtype", parity_dtype_name((parity_dtype_t)kr->kr->k->out_dtype));
        cJSON_AddStringToObject(o, "worst_workload", kr->wl[kr->worst_wl].workload);
        char rep[1024];
        reproducer(rep, sizeof rep, op, kr, &kr->wl[kr->worst_wl], ctx);
        cJSON_AddStringToObject(o, "reproduce", rep);
        cJSON *ws = cJSON_AddArrayToObject(o, "workloads");
        for (int i = 0; i < kr->n_wl; i++) {
            const parity_wl_result_t *w = &kr->wl[i];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddItemToArray(ws, x);
            cJSON_AddStringToObject(x, "name", w->workload);
            cJSON_AddStringToObject(x, "verdict", parity_verdict_name(w->verdict));
            cJSON_AddStringToObject(x, "detail", w->detail);
            cJSON_AddItemToObject(x, "max_err_over_tol", parity_json_num(w->max_q));
            cJSON_AddItemToObject(x, "max_err_over_worst_case_bound", parity_json_num(w->max_qd));
            cJSON_AddItemToObject(x, "noise_floor", parity_json_num(w->floor_q));
            cJSON_AddItemToObject(x, "lambda", parity_json_num(w->lambda));
            /* Which bound judged it: "symmetric" where the symmetric reduction class's tolerance
             * was the smaller on some element (docs/error-model.md), else "general". */
            cJSON_AddStringToObject(x, "tolerance_class",
                                    w->sym_elements > 0 ? (w->perterm_elements > 0 ? "symmetric+per-term" : "symmetric")
                                                        : (w->perterm_elements > 0 ? "per-term" : "general"));
            cJSON_AddNumberToObject(x, "symmetric_elements", (double)w->sym_elements);
            cJSON_AddNumberToObject(x, "per_term_elements", (double)w->perterm_elements);
            cJSON_AddNumberToObject(x, "rows_judged", (double)w->rows_judged);
            cJSON_AddNumberToObject(x, "rows_failed", (double)w->rows_failed);
            cJSON_AddNumberToObject(x, "nan_count", (double)w->nan_count);
            cJSON_AddNumberToObject(x, "max_hits", (double)w->max_hits);
            cJSON_AddItemToObject(x, "hit_error_correlation", parity_json_num(w->hit_corr));
            cJSON *wo = cJSON_AddObjectToObject(x, "worst");
            cJSON_AddStringToObject(wo, "output", w->worst.output);
            cJSON_AddNumberToObject(wo, "row", (double)w->worst.row_key);
            char tok[96];
            token_text(kr, w, tok, sizeof tok);
            if (tok[0]) cJSON_AddStringToObject(wo, "token_text", tok);
            cJSON_AddNumberToObject(wo, "terms", (double)w->worst.k);
            cJSON_AddNumberToObject(wo, "col", (double)w->worst.col);
            cJSON_AddItemToObject(wo, "got", parity_json_num(w->worst.got));
            cJSON_AddItemToObject(wo, "ref", parity_json_num(w->worst.ref));
            cJSON_AddItemToObject(wo, "abs_err", parity_json_num(w->worst.err));
            cJSON_AddItemToObject(wo, "tol", parity_json_num(w->worst.tol));
            cJSON *wr = cJSON_AddArrayToObject(x, "worst_rows");
            for (int q = 0; q < w->n_worst_rows; q++) {
                const parity_worst_t *e = &w->worst_rows[q];
                cJSON *o2 = cJSON_CreateObject();
                cJSON_AddItemToArray(wr, o2);
                cJSON_AddStringToObject(o2, "output", e->output);
                cJSON_AddNumberToObject(o2, "row", (double)e->row_key);
                char tq[96];
                token_text_of(w, e, tq, sizeof tq);
                if (tq[0]) cJSON_AddStringToObject(o2, "token_text", tq);
                cJSON_AddNumberToObject(o2, "terms", (double)e->k);
                cJSON_AddNumberToObject(o2, "col", (double)e->col);
                cJSON_AddItemToObject(o2, "err_over_tol", parity_json_num(e->q));
                cJSON_AddItemToObject(o2, "abs_err", parity_json_num(e->err));
            }
            if (w->diag.available) {
                cJSON *d = cJSON_AddObjectToObject(x, "diagnosis");
                cJSON_AddStringToObject(d, "output", w->diag.output);
                cJSON_AddItemToObject(d, "effective_bits", parity_json_num(w->diag.eff_bits));
                if (isnan(w->diag.emu_err[w->diag.closest])) cJSON_AddNullToObject(d, "closest"); /* no emulation */
                else cJSON_AddStringToObject(d, "closest", parity_emu_names[w->diag.closest]);
                cJSON_AddBoolToObject(d, "beyond_8bit", w->diag.beyond);
                cJSON_AddBoolToObject(d, "unresolvable", w->diag.masked);
                cJSON_AddBoolToObject(d, "zero_written", w->diag.zero_written);
                if (w->verdict == PARITY_VERDICT_UNFAITHFUL && w->diag.cause != PARITY_CAUSE_NONE)
                    json_cause(d, &w->diag);
                cJSON_AddItemToObject(d, "candidate_rel_err", parity_json_num(w->diag.cand_err));
                cJSON *e = cJSON_AddObjectToObject(d, "emulation_rel_err");
                for (int q = 0; q < PARITY_N_EMU; q++)
                    cJSON_AddItemToObject(e, parity_emu_names[q], parity_json_num(w->diag.emu_err[q]));
            }
        }
        if (kr->diag_wl < 0 && kr->verdict == PARITY_VERDICT_UNFAITHFUL && op->no_diagnosis)
            cJSON_AddStringToObject(o, "no_diagnosis", op->no_diagnosis);
        if (kr->diag_wl >= 0) {
            const parity_diagnosis_t *d = &kr->wl[kr->diag_wl].diag;
            cJSON *dg = cJSON_AddObjectToObject(o, "diagnosis");
            cJSON_AddStringToObject(dg, "workload", kr->wl[kr->diag_wl].workload);
            cJSON_AddItemToObject(dg, "effective_bits", parity_json_num(d->eff_bits));
            if (isnan(d->emu_err[d->closest])) cJSON_AddNullToObject(dg, "closest"); /* no emulation */
            else cJSON_AddStringToObject(dg, "closest", parity_emu_names[d->closest]);
            cJSON_AddBoolToObject(dg, "beyond_8bit", d->beyond);
            cJSON_AddBoolToObject(dg, "unresolvable", d->masked);
            cJSON_AddBoolToObject(dg, "zero_written", d->zero_written);
            if (kr->wl[kr->diag_wl].verdict == PARITY_VERDICT_UNFAITHFUL && d->cause != PARITY_CAUSE_NONE)
                json_cause(dg, d);
            cJSON_AddItemToObject(dg, "hit_error_correlation", parity_json_num(kr->wl[kr->diag_wl].hit_corr));
        }
        if (ctx->baselines) {
            cJSON *b = cJSON_AddObjectToObject(o, "baselines");
            for (int q = 0; q < PARITY_N_BASELINES; q++) {
                if (!kr->base[q].ran && op->declared && kr->base[q].name && kr->base[q].detail[0]) {
                    cJSON *x = cJSON_AddObjectToObject(b, kr->base[q].name); /* n/a, and why */
                    cJSON_AddBoolToObject(x, "applies", 0);
                    cJSON_AddNullToObject(x, "caught");
                    cJSON_AddStringToObject(x, "why", kr->base[q].detail);
                    continue;
                }
                if (!kr->base[q].ran) continue;
                cJSON *x = cJSON_AddObjectToObject(b, kr->base[q].name);
                if (op->declared) cJSON_AddBoolToObject(x, "applies", 1); /* built-in reports as they were */
                cJSON_AddBoolToObject(x, "caught", kr->base[q].caught);
                cJSON_AddItemToObject(x, "pass_fraction", parity_json_num(kr->base[q].pass_fraction));
                cJSON_AddItemToObject(x, "margin", parity_json_num(kr->base[q].margin));
                cJSON_AddStringToObject(x, "rule", kr->base[q].rule);
            }
        }
    }
    return root;
}

int parity_report_json_write(const char *path, const parity_op_t *op, const parity_kernel_result_t *res, int n,
                             const parity_report_opts_t *ctx)
{
    cJSON *root = report_json(op, res, n, ctx);
    int rc = root ? parity_json_write(path, root) : -1;
    cJSON_Delete(root);
    return rc;
}

char *parity_report_json(const parity_op_t *op, const parity_kernel_result_t *res, int n,
                         const parity_report_opts_t *ctx)
{
    cJSON *root = report_json(op, res, n, ctx);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return NULL;
    size_t len = strlen(text); /* as the file: the printed tree and a newline */
    char *out = realloc(text, len + 2);
    if (!out) {
        free(text);
        return NULL;
    }
    out[len] = '\n';
    out[len + 1] = 0;
    return out;
}
