/* What a kernel's results say, from the results alone (no case, no buffers): the diagnosis's
 * classification of a candidate's error against the emulated accumulators, and a kernel's overall
 * verdict, worst workload and diagnosed workload over its workloads. Split from check.c, which
 * runs the units that produce these results. */
#include <math.h>
#include <stdio.h>

#include "parity/verify.h"
#include "src/verify/check_impl.h"
#include "src/verify/verify_impl.h"

/* 1.5x: the spread the diagnosis already reads as "the same error" (masked above; the
 * sequential-vs-pairwise spread of one format measured 0.92-1.42x). */
#define CAUSE_SAME 1.5
/* The effective bits and the closest emulation's precision may differ by this much before the
 * emulations are said to disagree (an error between two formats' reads as in between: bf16
 * pairwise sits near 11-bit sequential on long rows). */
#define CAUSE_BITS_APART 3.0
/* Where fp32 accumulation gives nearly the kernel's error (few terms, or an output rounding that
 * hides the accumulator), a lower-precision emulation still explains it when it fits at least
 * this much more closely in log terms (bf16_accum of embedding_rmsnorm_bwd on the uniform
 * workload: 1.000006x from bf16 sequential, 1.25x from fp32). */
#define CAUSE_TIGHT 0.25

/* The cause (verify.h): accumulator only where the emulations explain the error; otherwise
 * unknown, with the figures, and no bit count outside [0, 53]. */
static void diagnosis_cause(parity_diagnosis_t *d)
{
    double c = d->cand_err, e8 = d->emu_err[0], f32 = fmin(d->emu_err[4], d->emu_err[5]);
    int cb = parity_emu_bits[d->closest];
    double closest_err = d->emu_err[d->closest];
    double apart = fabs(log2((c + 1e-300) / (closest_err + 1e-300)));
    char *t = d->detail;
    size_t n = sizeof d->detail;
    d->cause = PARITY_CAUSE_UNKNOWN;
    if (d->zero_written) {
        snprintf(t, n, "an element whose terms are all zero (0 in the reference) holds a nonzero "
                       "value: a wrong index or selection, or an output that should stay 0 "
                       "written, not an accumulator effect");
    } else if (c == 0) {
        snprintf(t, n, "the sampled rows are exact: the error lies in rows the diagnosis did not "
                       "sample, and no accumulator figure applies");
    } else if (d->beyond) {
        snprintf(t, n, "relative error %.3g is %.1fx what 8-bit accumulation gives (%.3g): not an "
                       "accumulator effect", c, c / e8, e8);
    } else if (cb == 24 || (!(c > CAUSE_SAME * f32) &&
                            !(apart <= CAUSE_TIGHT * fabs(log2((c + 1e-300) / (f32 + 1e-300)))))) {
        snprintf(t, n, "a faithful fp32 accumulator gives %s error on the sampled rows "
                       "(relative error %.3g, the kernel's %.3g): not an accumulator effect",
                 cb == 24 ? "the closest" : "about the same", f32, c);
    } else if (d->masked && !(apart <= CAUSE_TIGHT * fabs(log2((c + 1e-300) / (f32 + 1e-300))))) {
        snprintf(t, n, "after rounding to the output dtype, 8- to 24-bit accumulators give the "
                       "same error (relative %.3g to %.3g), the kernel's is %.3g: not an "
                       "accumulator effect", e8, d->emu_err[4], c);
    } else if (!(d->eff_bits >= 0 && d->eff_bits <= 53)) {
        snprintf(t, n, "the accumulator emulations (relative error %.3g at 8 bits to %.3g at "
                       "24) fit no bit count to the kernel's %.3g: not an accumulator effect",
                 e8, d->emu_err[4], c);
    } else if (fabs(d->eff_bits - cb) > CAUSE_BITS_APART) {
        snprintf(t, n, "the emulations disagree: the error's size (relative %.3g) reads as ~%.1f "
                       "bits, but the closest emulation is %s (%.3g): no accumulator reproduces "
                       "it", c, d->eff_bits, parity_emu_names[d->closest], closest_err);
    } else if (d->worst_terms == 1 && apart > log2(CAUSE_SAME)) {
        snprintf(t, n, "the worst elements have one term each and no accumulator emulation of "
                       "the op's inner sums comes within %.1fx of their error (relative %.3g, "
                       "closest %s %.3g): not an accumulator effect",
                 CAUSE_SAME, c, parity_emu_names[d->closest], closest_err);
    } else {
        d->cause = PARITY_CAUSE_ACCUMULATOR;
        snprintf(t, n, "%s ~%.1f effective bits (closest emulation %s, relative error %.3g "
                       "against the kernel's %.3g)",
                 d->worst_terms == 1 ? "the op's inner sums accumulated at" : "accumulation at",
                 d->eff_bits, parity_emu_names[d->closest], closest_err, c);
    }
    /* Never a bit count outside [0, 53] (a double's significand): NaN where no accumulator fits. */
    if (d->cause != PARITY_CAUSE_ACCUMULATOR && !isinf(d->eff_bits) &&
        !(d->eff_bits >= 0 && d->eff_bits <= 53))
        d->eff_bits = NAN;
}

/* From d->cand_err and d->emu_err[]: the closest emulation, the effective bits, and whether the
 * error is beyond accumulator precision or masked by the output's rounding (verify_impl.h). */
void parity_diagnosis_classify(parity_diagnosis_t *d)
{
    double best = INFINITY;
    /* Closest emulation; on a tie (an output rounding can make several identical) the higher
     * precision wins, sequential before pairwise: 24, 11, 8 bits. */
    static const int ORDER[PARITY_N_EMU] = {4, 5, 2, 3, 0, 1};
    for (int i = 0; i < PARITY_N_EMU; i++) {
        int e = ORDER[i];
        double dist = fabs(log2((d->cand_err + 1e-300) / (d->emu_err[e] + 1e-300)));
        if (dist < best) {
            best = dist;
            d->closest = e;
        }
    }
    /* Effective bits: interpolate log2(error) linearly in precision between the sequential
     * emulations (8, 11, 24 bits); extrapolate with the 8-to-11 slope below 8 bits. */
    double p[3] = {8, 11, 24}, le[3];
    for (int i = 0; i < 3; i++) le[i] = log2(d->emu_err[2 * i] + 1e-300);
    double lc = log2(d->cand_err + 1e-300);
    if (d->cand_err == 0) {
        d->eff_bits = INFINITY;
    } else if (lc <= le[2]) { /* first: when the output rounding makes le[0] == le[2] */
        d->eff_bits = p[2];
    } else if (lc >= le[0]) {
        double slope = (le[1] - le[0]) / (p[1] - p[0]);
        d->eff_bits = slope < 0 ? p[0] + (lc - le[0]) / slope : p[0];
        /* 4x the 8-bit emulation's error = 2 bits worse than bf16 accumulation, beyond the
         * spread between sequential and pairwise orders (measured 0.92-1.42x on the uniform, text
         * and zipf1.4 workloads of the fused op): the error then needs
         * another cause (a wrong formula, lost updates) than accumulator precision. */
        d->beyond = d->cand_err > 4 * d->emu_err[0];
    } else {
        int i = lc >= le[1] ? 0 : 1;
        double t = (le[i] - le[i + 1]) != 0 ? (le[i] - lc) / (le[i] - le[i + 1]) : 0;
        d->eff_bits = p[i] + t * (p[i + 1] - p[i]);
    }
    /* When the output dtype's rounding swamps the accumulation (LSE rounded to bf16: 2^-9 of
     * |LSE| ~ 20 against an accumulation error of 2^-8 absolute), the 8- and 24-bit emulations
     * come out within 1.5x of each other after rounding (measured 1.00-1.25 on the bf16-output
     * kernels of log_softmax, cross_entropy and attention_fwd; bf16 accumulation of real-text
     * embedding rows stays at 1.85x): the report says the evidence is weak. */
    d->masked = !d->beyond && d->emu_err[0] < 1.5 * d->emu_err[4];
    d->available = 1;
    diagnosis_cause(d);
}

/* Overall verdict: the first non-faithful verdict in workload order; the worst workload by q,
 * failures other than "unfaithful" counting as infinitely bad; the diagnosis from the worst
 * workload that has one (production ones have none). */
void parity_kernel_result_finish(parity_kernel_result_t *kr)
{
    kr->verdict = PARITY_VERDICT_FAITHFUL;
    kr->worst_wl = 0;
    double worst = -1;
    for (int w = 0; w < kr->n_wl; w++) {
        parity_wl_result_t *r = &kr->wl[w];
        int bad = r->verdict != PARITY_VERDICT_FAITHFUL;
        double score = bad && r->verdict != PARITY_VERDICT_UNFAITHFUL ? INFINITY : r->max_q;
        if (kr->verdict == PARITY_VERDICT_FAITHFUL && bad) kr->verdict = r->verdict;
        if (score > worst) {
            worst = score;
            kr->worst_wl = w;
        }
    }
    kr->diag_wl = -1;
    double best = -1;
    for (int w = 0; w < kr->n_wl; w++)
        if (kr->wl[w].diag.available && kr->wl[w].max_q > best) {
            best = kr->wl[w].max_q;
            kr->diag_wl = w;
        }
    /* The kernel's cause: the worst diagnosed workload's, unless a strict majority of the
     * unfaithful workloads that name a cause name one word other than unknown (a cause that
     * holds on most workloads, unknown on the others where the emulations do not reach: fp16's
     * range, NaN outputs); then the worst workload that names it. A word that only a minority
     * names never wins (nor one named by half of them only). */
    int count[PARITY_N_CAUSES] = {0}, n_named = 0;
    for (int w = 0; w < kr->n_wl; w++) {
        const parity_wl_result_t *r = &kr->wl[w];
        if (r->verdict != PARITY_VERDICT_UNFAITHFUL || !r->diag.available ||
            r->diag.cause == PARITY_CAUSE_NONE || (int)r->diag.cause >= PARITY_N_CAUSES)
            continue;
        count[r->diag.cause]++;
        n_named++;
    }
    int top = PARITY_CAUSE_NONE;
    for (int c = 0; c < PARITY_N_CAUSES; c++)
        if (c != PARITY_CAUSE_UNKNOWN && c != PARITY_CAUSE_NONE && 2 * count[c] > n_named) top = c;
    if (top == PARITY_CAUSE_NONE || kr->diag_wl < 0 || (int)kr->wl[kr->diag_wl].diag.cause == top) return;
    best = -1;
    for (int w = 0; w < kr->n_wl; w++)
        if (kr->wl[w].verdict == PARITY_VERDICT_UNFAITHFUL && kr->wl[w].diag.available &&
            (int)kr->wl[w].diag.cause == top && kr->wl[w].max_q > best) {
            best = kr->wl[w].max_q;
            kr->diag_wl = w;
        }
}
