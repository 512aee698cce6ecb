/* Hostile kernels against a declared op and against the built-in op it mirrors, for
 * tests/cli_declared_hostile.sh (issue #35): the same misbehaviour must get the same verdict
 * whether the op is declared in C (op_abi.h, `parity check --op-plugin`) or built in.
 *   rmsnorm_declared  y = x / sqrt(mean(x^2) + eps) * gamma over the last dimension: the
 *                     built-in rmsnorm_fwd's contract (inputs x, gamma; attribute eps), declared
 *                     (the empirical floor: no multilinear reduction)
 * Every kernel below is listed twice, once per op; the arithmetic is the built-in catalog's
 * faithful fp32 kernel (fp32 sum of squares, 1/sqrtf(mean + eps)):
 *   control       faithful
 *   hang          blocks every signal it can and waits forever (SIGALRM ignored and blocked):
 *                 only a parent-side deadline ending in SIGKILL stops it -> timeout
 *   oob_after     writes one element past the end of y -> wrote-out-of-bounds
 *   oob_before    writes one element before the start of y -> wrote-out-of-bounds
 *   memo_ptr      remembers the output pointer of its last call and, called again on it,
 *                 leaves the buffer as it is ("already computed") -> stale-cache
 *   modify_input  computes y, then flips a bit of x -> modified-inputs
 *   nondet        flips the last bit of nonzero outputs from the pid and the clock (one ulp,
 *                 inside any tolerance) -> nondeterministic
 * Self-contained: only kernel_abi.h/op_abi.h. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parity/op_abi.h"

#define EPS_DEFAULT 1e-5 /* rmsnorm_fwd's eps when a call does not pass one */

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float load(const parity_abi_tensor_t *t, int64_t i)
{
    return t->dtype == PARITY_DT_BF16 ? bf16_to_f32(((const uint16_t *)t->data)[i]) : ((const float *)t->data)[i];
}

static double attr(const parity_abi_call_t *c, const char *name, double dflt)
{
    for (int a = 0; a < c->n_attrs; a++)
        if (strcmp(c->attr_names[a], name) == 0) return c->attr_values[a];
    return dflt;
}

/* ---- the declared op --------------------------------------------------------------------- */
/* The reference in the call's float dtype: F64 (the reference) or F32 (the contract evaluation
 * the empirical floor measures). */
static int rms_reference(const parity_abi_call_t *c)
{
    const parity_abi_tensor_t *X = &c->inputs[0], *G = &c->inputs[1];
    int64_t n = X->shape[0], d = X->shape[1];
    double eps = attr(c, "eps", EPS_DEFAULT);
    if (X->dtype == PARITY_DT_F64) {
        const double *x = X->data, *g = G->data;
        double *y = c->outputs[0].data;
        for (int64_t i = 0; i < n; i++) {
            double ss = 0;
            for (int64_t k = 0; k < d; k++) ss += x[i * d + k] * x[i * d + k];
            double r = 1.0 / sqrt(ss / (double)d + eps);
            for (int64_t j = 0; j < d; j++) y[i * d + j] = x[i * d + j] * r * g[j];
        }
        return PARITY_KERNEL_OK;
    }
    if (X->dtype == PARITY_DT_F32) {
        const float *x = X->data, *g = G->data;
        float *y = c->outputs[0].data;
        for (int64_t i = 0; i < n; i++) {
            float ss = 0;
            for (int64_t k = 0; k < d; k++) ss += x[i * d + k] * x[i * d + k];
            float r = 1.0f / sqrtf(ss / (float)d + (float)eps);
            for (int64_t j = 0; j < d; j++) y[i * d + j] = x[i * d + j] * r * g[j];
        }
        return PARITY_KERNEL_OK;
    }
    return PARITY_KERNEL_UNSUPPORTED;
}

static const int64_t SIZES_N[] = {64}, SIZES_D[] = {256};
static const parity_abi_op_dim_t DIMS[] = {
    {sizeof(parity_abi_op_dim_t), "N", 1, SIZES_N, 0},
    {sizeof(parity_abi_op_dim_t), "D", 1, SIZES_D, 0},
};
static const parity_abi_op_input_t INPUTS[] = {
    {sizeof(parity_abi_op_input_t), "x", PARITY_ROLE_ACTIVATION, 2, {"N", "D"}, NULL},
    {sizeof(parity_abi_op_input_t), "gamma", PARITY_ROLE_NORM_WEIGHT, 1, {"D"}, NULL},
};
static const parity_abi_op_output_t OUTPUTS[] = {
    {sizeof(parity_abi_op_output_t), "y", 2, {"N", "D"}, 0, {NULL}},
};
static const char *const ATTR_NAMES[] = {"eps"};
static const double ATTR_VALUES[] = {EPS_DEFAULT};
static const parity_abi_op_decl_t OPS[] = {
    {sizeof(parity_abi_op_decl_t), "rmsnorm_declared", "y = x / sqrt(mean(x^2) + eps) * gamma (rmsnorm_fwd, declared)",
     0, 2, DIMS, 2, INPUTS, 1, OUTPUTS, 1, ATTR_NAMES, ATTR_VALUES, rms_reference},
};
static const parity_abi_op_table_t OP_TABLE = {PARITY_OP_ABI_VERSION, sizeof(parity_abi_op_table_t), 1, OPS};
const parity_abi_op_table_t *parity_op_entry(void);
const parity_abi_op_table_t *parity_op_entry(void) { return &OP_TABLE; }

/* ---- kernels (either op: the same contract) ------------------------------------------------ */
static int compute(const parity_abi_call_t *c)
{
    const parity_abi_tensor_t *X = &c->inputs[0], *G = &c->inputs[1];
    int64_t n = X->shape[0], d = X->shape[1];
    float eps = (float)attr(c, "eps", EPS_DEFAULT);
    float *y = c->outputs[0].data;
    for (int64_t i = 0; i < n; i++) {
        float ss = 0.0f;
        for (int64_t k = 0; k < d; k++) {
            float v = load(X, i * d + k);
            ss += v * v;
        }
        float r = 1.0f / sqrtf(ss / (float)d + eps);
        for (int64_t j = 0; j < d; j++) y[i * d + j] = load(X, i * d + j) * r * load(G, j);
    }
    return PARITY_KERNEL_OK;
}

static int64_t out_elems(const parity_abi_call_t *c)
{
    return c->outputs[0].shape[0] * c->outputs[0].shape[1];
}

static int k_control(const parity_abi_call_t *c) { return compute(c); }

static int k_hang(const parity_abi_call_t *c)
{
    (void)c;
    sigset_t all;
    sigfillset(&all);
    signal(SIGALRM, SIG_IGN);
    sigprocmask(SIG_BLOCK, &all, NULL); /* SIGKILL and SIGSTOP cannot be blocked */
    for (;;) pause();
    return PARITY_KERNEL_OK;
}

static int k_oob_after(const parity_abi_call_t *c)
{
    int rc = compute(c);
    ((float *)c->outputs[0].data)[out_elems(c)] = 1.0f;
    return rc;
}

static int k_oob_before(const parity_abi_call_t *c)
{
    int rc = compute(c);
    ((float *)c->outputs[0].data)[-1] = 1.0f;
    return rc;
}

static int k_memo_ptr(const parity_abi_call_t *c)
{
    static const void *last;
    if (last == c->outputs[0].data) return PARITY_KERNEL_OK; /* "these buffers are done" */
    last = c->outputs[0].data;
    return compute(c);
}

static int k_modify_input(const parity_abi_call_t *c)
{
    int rc = compute(c);
    ((unsigned char *)c->inputs[0].data)[0] ^= 1u;
    return rc;
}

static int k_nondet(const parity_abi_call_t *c)
{
    /* Bits that depend on the process and the clock: every run (a fresh fork) differs. */
    int rc = compute(c);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t s = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec;
    uint32_t *bits = c->outputs[0].data;
    for (int64_t i = 0; i < out_elems(c); i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        if ((bits[i] & 0x7fffffffu) != 0) bits[i] ^= (uint32_t)(s >> 63);
    }
    return rc;
}

#define K(name, op, desc, fn) \
    {sizeof(parity_abi_kernel_t), name, op, desc, 0, PARITY_DT_BF16, PARITY_DT_F32, fn, NULL}
#define BOTH(name, desc, fn) K(name, "rmsnorm_declared", desc, fn), K(name, "rmsnorm_fwd", desc, fn)
static const parity_abi_kernel_t KERNELS[] = {
    BOTH("control", "faithful fp32 kernel", k_control),
    BOTH("hang", "blocks every signal (SIGALRM ignored) and waits forever", k_hang),
    BOTH("oob_after", "writes one element past the end of y", k_oob_after),
    BOTH("oob_before", "writes one element before the start of y", k_oob_before),
    BOTH("memo_ptr", "skips a call on the output pointer of its last call", k_memo_ptr),
    BOTH("modify_input", "flips a bit of x after computing y", k_modify_input),
    BOTH("nondet", "last bits depend on the pid and the clock", k_nondet),
};
static const parity_abi_plugin_t PLUGIN = {PARITY_ABI_VERSION, sizeof(parity_abi_plugin_t), "declared_hostile",
                                           (int32_t)(sizeof KERNELS / sizeof KERNELS[0]), KERNELS};
const parity_abi_plugin_t *parity_plugin_entry(void);
const parity_abi_plugin_t *parity_plugin_entry(void) { return &PLUGIN; }
