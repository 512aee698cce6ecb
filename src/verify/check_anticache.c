/* Caching probes of a check (docs/check-json.md, "Caching"): a kernel must compute every call from
 * that call's inputs. The first run of a kernel is alone in its child; the second (the rerun)
 * first calls it on a decoy (other inputs, writing into the judged buffers: check.c) and on the
 * very buffers of the judged call holding other contents, and a sequence of calls at shape
 * neighbours (N-1, N, N+1) runs in one child. A kernel that answers from a memo keyed on pointers, shapes or a few input bytes then
 * returns stale outputs; faithful alone, its verdict is "stale-cache" and the detail names the
 * probe. Deliberately not here: the judgement itself (verify.c), which units run (check_grid.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/verify/check_impl.h"
#include "parity/verify.h"
#include "src/verify/verify_impl.h"

/* ---- the call on the judged buffers ------------------------------------------------------------ */

/* Bytes at each end of every floating-point input that the other contents leave as they are: a
 * memo keyed on "the first (or last) few bytes" (a cheap fingerprint: a cache line) then sees the
 * same key and returns its stale answer. 64 bytes = one cache line, the usual fingerprint. */
#define SAME_KEEP_BYTES 64

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Other contents for input t, in place: about one element in eight between the kept ends (gaps of
 * 1..15 elements, seeded) is multiplied by -2, where that is exact and finite (so it can be undone
 * exactly: x -> -2x -> x). Sparse, so that a memo keyed on a sample of s bytes sees a changed one
 * with probability about 1 - (7/8)^s only; spread over every row, so that the reference of almost
 * every output element changes (each row of the token-major inputs has D/8 changed elements on
 * average). done[] marks the k-th visited position when it was changed. With undo, the marked
 * positions are divided by -2 again: the judged contents come back bit for bit without a copy
 * (an element the kernel changed meanwhile does not, and the input's hash shows it). */
static void other_contents(const parity_abi_tensor_t *t, uint64_t seed, int input,
                           unsigned char *done, int undo)
{
    size_t es = parity_dtype_size((parity_dtype_t)t->dtype);
    int64_t ne = parity_tensor_numel(t);
    int64_t keep = (int64_t)((SAME_KEEP_BYTES + es - 1) / es);
    uint64_t s = seed ^ (0x5a3e0000ULL + (uint64_t)input);
    parity_abi_tensor_t v = *t;
    int64_t k = 0;
    for (int64_t e = keep + (int64_t)(splitmix(&s) % 8); e < ne - keep;
         e += 1 + (int64_t)(splitmix(&s) % 15), k++) {
        unsigned char bit = (unsigned char)(1u << (k & 7));
        if (undo) {
            if (!(done[k >> 3] & bit)) continue;
            uint16_t *p16 = t->data;
            if (t->dtype == PARITY_DT_F32) ((float *)t->data)[e] *= -0.5f; /* exact: y = -2x */
            else if (t->dtype == PARITY_DT_BF16 && ((p16[e] >> 7) & 0xff) - 2u < 253u)
                p16[e] = (uint16_t)((p16[e] - 0x0080u) ^ 0x8000u); /* the bit path, reversed */
            else parity_tensor_set(&v, e, -0.5 * parity_tensor_get(&v, e));
            continue;
        }
        if (t->dtype == PARITY_DT_F32) {
            float *p = t->data, y = -2.0f * p[e];
            if (!isfinite(y)) continue;
            p[e] = y;
        } else if (t->dtype == PARITY_DT_BF16 && ((((uint16_t *)t->data)[e] >> 7) & 0xff) - 1u < 253u) {
            uint16_t *p = t->data; /* a normal number away from overflow: sign flipped, exponent + 1 */
            p[e] = (uint16_t)((p[e] ^ 0x8000u) + 0x0080u);
        } else {
            double x = parity_tensor_get(&v, e), y = parity_dtype_round((parity_dtype_t)t->dtype, -2.0 * x);
            if (!isfinite(y) || parity_dtype_round((parity_dtype_t)t->dtype, -0.5 * y) != x) continue;
            parity_tensor_set(&v, e, y);
        }
        done[k >> 3] |= bit;
    }
}

static void fill_nan_view(const parity_abi_tensor_t *v)
{
    parity_tensor_t t;
    memset(&t, 0, sizeof t);
    t.view = *v;
    t.nbytes = (size_t)parity_tensor_numel(v) * parity_dtype_size((parity_dtype_t)v->dtype);
    parity_tensor_fill_nan(&t);
}

int check_same_buffers_step(void *ctx, const parity_abi_kernel_t *k, const parity_abi_call_t *call)
{
    const parity_case_t *c = ctx;
    unsigned char *done[PARITY_OP_MAX_ARGS] = {0};
    for (int i = 0; i < call->n_inputs && i < PARITY_OP_MAX_ARGS; i++) {
        const parity_abi_tensor_t *t = &call->inputs[i];
        if (!c->op->input_is_float[i] || !parity_dtype_is_float((parity_dtype_t)t->dtype)) continue;
        /* one bit per visited position; at most one position per element */
        if (!(done[i] = calloc((size_t)parity_tensor_numel(t) / 8 + 1, 1))) continue;
        other_contents(t, c->seed, i, done[i], 0);
    }
    /* NaN-prefilled (by the caller) like a judged call. Its answer is not judged; it stays in the
     * outputs, so a kernel that skips the judged call ("these buffers are done") leaves it there
     * (and NaN where this call skipped too), and one that reads its outputs sees it. */
    (void)k->run(call);
    for (int i = 0; i < call->n_inputs && i < PARITY_OP_MAX_ARGS; i++) {
        if (!done[i]) continue;
        other_contents(&call->inputs[i], c->seed, i, done[i], 1); /* the judged contents again */
        free(done[i]);
    }
    /* An input the kernel changed during this call stays changed: the parent's hashes of the
     * judged inputs, taken after the child, report it ("modified-inputs"). */
    return 0;
}

/* ---- attribution --------------------------------------------------------------------------------- */

int check_stale_outputs(const parity_case_t *c, const parity_abi_kernel_t *k, parity_tensor_t **o2,
                        const parity_abi_call_t *call2, const parity_abi_call_t *decoy,
                        const parity_check_opts_t *opts, parity_wl_result_t *res)
{
    parity_wl_result_t after;
    memset(&after, 0, sizeof after);
    after.verdict = PARITY_VERDICT_FAITHFUL;
    parity_judge_case(c, o2, &after);
    if (after.verdict == PARITY_VERDICT_FAITHFUL) return 0; /* bits differ, values fine */
    /* Faithful alone (the first run), wrong after the earlier calls: which one? The decoy alone
     * in buffers of its own (NaN-prefilled), then the judged call: wrong means the decoy's call
     * is enough; else the call on the judged buffers. Without buffers for the decoy (out of
     * memory) the probe is not named. */
    const char *probe = "a call on the same buffers holding other contents (a memo keyed on "
                        "pointers or a few input bytes)";
    uint64_t h[PARITY_OP_MAX_ARGS];
    for (int i = 0; i < c->n_inputs; i++) h[i] = parity_tensor_hash(c->inputs[i]);
    if (decoy) {
        for (int i = 0; i < c->n_outputs; i++) parity_tensor_fill_nan(o2[i]);
        for (int i = 0; i < decoy->n_outputs; i++) fill_nan_view(&decoy->outputs[i]);
        parity_wl_result_t d;
        memset(&d, 0, sizeof d);
        double secs;
        d.verdict = parity_run_isolated(k, decoy, call2, opts->timeout_s, d.detail, sizeof d.detail, &secs);
        if (d.verdict == PARITY_VERDICT_FAITHFUL) parity_judge_case(c, o2, &d);
        if (d.verdict != PARITY_VERDICT_FAITHFUL)
            probe = "a call on other buffers of the same shapes (a memo keyed on shapes or on nothing)";
    } else {
        probe = "earlier calls in the same process";
    }
    int dirty = 0;
    for (int i = 0; i < c->n_inputs; i++) dirty |= parity_tensor_hash(c->inputs[i]) != h[i];
    /* The workload's numbers become those of the stale run; the detail keeps the alone run's. */
    char q1[32], q0[32];
    snprintf(q1, sizeof q1, "%.3g", after.max_q);
    snprintf(q0, sizeof q0, "%.3g", res->max_q);
    parity_wl_result_t keep = *res;
    *res = after;
    memcpy(res->workload, keep.workload, sizeof res->workload);
    res->production = keep.production;
    res->floor_q = keep.floor_q;
    res->seconds = keep.seconds;
    res->verdict = PARITY_VERDICT_STALE_CACHE;
    snprintf(res->detail, sizeof res->detail,
             "stale outputs after %s: err/tol %s; faithful called alone (err/tol %s)", probe, q1, q0);
    return dirty ? 2 : 1;
}

/* ---- shape neighbours ---------------------------------------------------------------------------- */

/* The sequence's shapes: N0 - 1, N0, N0 + 1 tokens with N0 = min(N, 32), D capped at 128, V at 256
 * (ids of real text need V = 50257: those become uniform ids). Small on purpose: a plan or memo
 * keyed loosely on the shape shows at any size, and three tiny calls cost milliseconds. */
#define NBR_N 32
#define NBR_D 128
#define NBR_V 256
#define NBR_CALLS 3

struct check_nbr {
    const parity_workload_t *src; /* the workload the cases were derived from, with seed, dtype */
    uint64_t seed;
    parity_dtype_t dt;
    int built, failed, dirty;
    parity_workload_t wl[NBR_CALLS];
    parity_wl_params_store_t params[NBR_CALLS]; /* a neighbour's own parameters, when changed */
    parity_case_t *c[NBR_CALLS];
    parity_tensor_t *out[NBR_CALLS][PARITY_OP_MAX_ARGS];
};

check_nbr_t *check_nbr_new(void) { return calloc(1, sizeof(check_nbr_t)); }

static void nbr_clear(check_nbr_t *nb)
{
    for (int s = 0; s < NBR_CALLS; s++) {
        parity_case_free(nb->c[s]);
        nb->c[s] = NULL;
    }
    nb->built = nb->failed = nb->dirty = 0;
}

void check_nbr_free(check_nbr_t *nb)
{
    if (!nb) return;
    nbr_clear(nb);
    for (int s = 0; s < NBR_CALLS; s++)
        for (int i = 0; i < PARITY_OP_MAX_ARGS; i++) parity_tensor_free(nb->out[s][i]);
    free(nb);
}

static parity_ids_kind_t text_to_uniform(parity_ids_kind_t k, void *ctx)
{
    (void)ctx;
    return k == PARITY_IDS_TEXT ? PARITY_IDS_UNIFORM : k;
}

static int nbr_build(check_nbr_t *nb, const parity_op_t *op, const parity_workload_t *wl,
                     uint64_t seed, parity_dtype_t dt)
{
    if (nb->built && !nb->dirty && nb->src == wl && nb->seed == seed && nb->dt == dt) return !nb->failed;
    nbr_clear(nb);
    nb->src = wl;
    nb->seed = seed;
    nb->dt = dt;
    nb->built = 1;
    int64_t n0 = wl->n < NBR_N ? wl->n : NBR_N;
    if (n0 < 2) n0 = 2;
    for (int s = 0; s < NBR_CALLS; s++) {
        parity_workload_t *w = &nb->wl[s];
        *w = *wl;
        w->production = 0;
        w->n = n0 - 1 + s;
        if (w->d > NBR_D) w->d = NBR_D;
        if (w->v > NBR_V) {
            w->v = NBR_V;
            /* Real-text ids need GPT-2's vocabulary: uniform ids at the smaller one. */
            if (parity_workload_has_ids(op->wl_family, w->params, PARITY_IDS_TEXT))
                parity_workload_map_ids(op->wl_family,
                                        parity_workload_own_params(op->wl_family, w, &nb->params[s]),
                                        text_to_uniform, NULL);
        }
        snprintf(w->label, sizeof w->label, "%.40s@%lldx%lldx%lld", wl->name, (long long)w->n,
                 (long long)w->d, (long long)w->v);
        w->name = w->label;
        parity_diag_t d = {{0}};
        if (parity_case_build(op, w, seed, dt, &nb->c[s], &d) != PARITY_OK) {
            nb->failed = 1; /* an op whose generator refuses such shapes: no sequence */
            return 0;
        }
    }
    return 1;
}

/* The child step: the calls at N0 - 1 and N0 before the judged one at N0 + 1. */
typedef struct {
    const parity_abi_call_t *calls;
} nbr_step_t;

static int nbr_step(void *ctx, const parity_abi_kernel_t *k, const parity_abi_call_t *call)
{
    (void)call;
    const nbr_step_t *st = ctx;
    for (int s = 0; s < NBR_CALLS - 1; s++) {
        int rc = k->run(&st->calls[s]);
        if (rc != PARITY_KERNEL_OK) return rc == PARITY_KERNEL_UNSUPPORTED ? 64 : 65;
    }
    return 0;
}

parity_status_t check_neighbours(check_nbr_t *nb, const parity_op_t *op, const parity_workload_t *wl,
                                 const parity_check_opts_t *opts, const parity_kernel_ref_t *kr,
                                 parity_wl_result_t *r)
{
    const parity_abi_kernel_t *k = kr->k;
    if (!nb || !nbr_build(nb, op, wl, opts->seed, (parity_dtype_t)k->in_dtype)) return PARITY_OK;
    parity_abi_tensor_t in[NBR_CALLS][PARITY_OP_MAX_ARGS], out[NBR_CALLS][PARITY_OP_MAX_ARGS];
    parity_abi_call_t calls[NBR_CALLS];
    uint64_t in_hash[NBR_CALLS][PARITY_OP_MAX_ARGS];
    for (int s = 0; s < NBR_CALLS; s++) {
        const parity_case_t *c = nb->c[s];
        for (int i = 0; i < c->n_outputs; i++) {
            nb->out[s][i] = parity_tensor_reuse(nb->out[s][i], op->output_names[i],
                                                (parity_dtype_t)k->out_dtype, c->out_ndim[i],
                                                c->out_shape[i]);
            if (!nb->out[s][i]) return PARITY_E_NOMEM;
            parity_tensor_fill_nan(nb->out[s][i]);
        }
        for (int i = 0; i < c->n_inputs; i++) in_hash[s][i] = parity_tensor_hash(c->inputs[i]);
        parity_case_make_call(c, in[s], out[s], nb->out[s], opts->n_threads, c->seed, &calls[s]);
    }
    nbr_step_t st = {calls};
    parity_wl_result_t t;
    memset(&t, 0, sizeof t);
    t.verdict = parity_run_isolated_step(k, NULL, nbr_step, &st, &calls[NBR_CALLS - 1],
                                         opts->timeout_s, t.detail, sizeof t.detail, &t.seconds);
    char shapes[96];
    snprintf(shapes, sizeof shapes, "neighbours N=%lld,%lld,%lld D=%lld V=%lld in one process",
             (long long)nb->wl[0].n, (long long)nb->wl[1].n, (long long)nb->wl[2].n,
             (long long)nb->wl[0].d, (long long)nb->wl[0].v);
    if (t.verdict == PARITY_VERDICT_UNSUPPORTED) return PARITY_OK; /* declines these shapes: fine */
    int bad = -1;
    parity_wl_result_t judged[NBR_CALLS];
    for (int s = 0; s < NBR_CALLS && t.verdict == PARITY_VERDICT_FAITHFUL; s++) {
        const parity_case_t *c = nb->c[s];
        for (int i = 0; i < c->n_inputs; i++)
            if (parity_tensor_hash(c->inputs[i]) != in_hash[s][i]) {
                nb->dirty = 1;
                t.verdict = PARITY_VERDICT_MODIFIED_INPUTS;
                snprintf(t.detail, sizeof t.detail, "input %s changed at N=%lld",
                         op->input_names[i], (long long)nb->wl[s].n);
            }
        for (int i = 0; i < c->n_outputs && t.verdict == PARITY_VERDICT_FAITHFUL; i++)
            if (!parity_tensor_guards_ok(nb->out[s][i])) {
                t.verdict = PARITY_VERDICT_OOB;
                snprintf(t.detail, sizeof t.detail, "bytes around output %s were overwritten at "
                         "N=%lld", op->output_names[i], (long long)nb->wl[s].n);
            }
        if (t.verdict != PARITY_VERDICT_FAITHFUL) break;
        memset(&judged[s], 0, sizeof judged[s]);
        judged[s].verdict = PARITY_VERDICT_FAITHFUL;
        parity_judge_case(c, nb->out[s], &judged[s]);
        if (judged[s].verdict != PARITY_VERDICT_FAITHFUL && bad < 0) bad = s;
    }
    if (t.verdict == PARITY_VERDICT_FAITHFUL && bad < 0) return PARITY_OK;
    if (t.verdict != PARITY_VERDICT_FAITHFUL) { /* crashed, timed out, wrote out of bounds... */
        r->verdict = t.verdict;
        snprintf(r->detail, sizeof r->detail, "%.90s: %.150s", shapes, t.detail);
        return PARITY_OK;
    }
    /* A wrong answer at N0 - 1 is a first call: plain unfaithfulness at a small shape. Later in
     * the sequence, the same call alone in a fresh process tells caching from a shape bug. */
    char q[32];
    snprintf(q, sizeof q, "%.3g", judged[bad].max_q);
    if (bad > 0) {
        const parity_case_t *c = nb->c[bad];
        parity_wl_result_t alone;
        memset(&alone, 0, sizeof alone);
        for (int i = 0; i < c->n_outputs; i++) parity_tensor_fill_nan(nb->out[bad][i]);
        alone.verdict = parity_run_isolated(k, NULL, &calls[bad], opts->timeout_s, alone.detail,
                                            sizeof alone.detail, &alone.seconds);
        if (alone.verdict == PARITY_VERDICT_FAITHFUL) parity_judge_case(c, nb->out[bad], &alone);
        for (int i = 0; i < c->n_inputs; i++)
            if (parity_tensor_hash(c->inputs[i]) != in_hash[bad][i]) nb->dirty = 1;
        if (!nb->dirty && alone.verdict == PARITY_VERDICT_FAITHFUL) {
            char q0[32];
            snprintf(q0, sizeof q0, "%.3g", alone.max_q);
            r->verdict = PARITY_VERDICT_STALE_CACHE;
            snprintf(r->detail, sizeof r->detail, "%.70s: after N=%lld, N=%lld is wrong (err/tol "
                     "%.12s, %lld NaN), faithful alone (err/tol %.12s): state kept across shapes", shapes, (long long)nb->wl[bad - 1].n,
                     (long long)nb->wl[bad].n, q, (long long)judged[bad].nan_count, q0);
            return PARITY_OK;
        }
    }
    r->verdict = PARITY_VERDICT_UNFAITHFUL;
    snprintf(r->detail, sizeof r->detail, "%.90s: unfaithful at N=%lld (err/tol %.12s)", shapes,
             (long long)nb->wl[bad].n, q);
    return PARITY_OK;
}
