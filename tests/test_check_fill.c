/* The check's bulk passes written for speed (docs/check-speed.md) against their element-wise
 * definitions: the NaN prefill (a string store on x86), the rerun's reference prefill, the bulk
 * input store, the judge's zero-row scan. Each must give the same bytes as the one-element code
 * it replaced, at odd lengths and offsets, and never touch a guard byte. And the rerun's digest,
 * which replaced a memcmp, must see every difference a memcmp saw that a kernel could make. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ops/ops_impl.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "src/core/parallel.h"
#include "src/core/internal.h"
#include "src/kernel/kernel_util.h"
#include "parity/format.h"
#include "parity/op.h"
#include "parity/rng.h"
#include "parity/tensor.h"
#include "parity/verify.h"
#include "src/verify/check_impl.h"
#include "src/verify/verify_impl.h"

static void free_ref(parity_ref_output_t *R)
{
    free(R->slot);
    free(R->ref);
    free(R->s_acc);
    free(R->s_up);
    free(R->k);
}

/* Every element of t holds the bits `want` (elements of es bytes) and its guards are intact. */
static void assert_filled(const parity_tensor_t *t, size_t es, uint64_t want)
{
    int64_t n = parity_tensor_numel(&t->view);
    for (int64_t i = 0; i < n; i++) {
        uint64_t got = 0;
        memcpy(&got, (const char *)t->view.data + (size_t)i * es, es);
        if (got != want) fail_msg("element %lld of %lld: 0x%llx, want 0x%llx", (long long)i,
                                  (long long)n, (unsigned long long)got, (unsigned long long)want);
    }
    assert_true(parity_tensor_guards_ok(t));
}

static void nan_prefill_patterns(void **state)
{
    (void)state;
    /* Lengths around the string store's and the pair packing's edges (0, odd, one page + 1), and
     * past the size filled in chunks on every core (tensor.c: 2 x 2^22 elements), odd too. */
    const int64_t lens[] = {0, 1, 2, 3, 7, 1023, 1025, 4097, (2 << 22) + 1, (3 << 22) + 5};
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        int64_t shape[1] = {lens[l]};
        parity_tensor_t *f = parity_tensor_new("f", PARITY_DT_F32, 1, shape);
        parity_tensor_t *b = parity_tensor_new("b", PARITY_DT_BF16, 1, shape);
        parity_tensor_t *h = parity_tensor_new("h", PARITY_DT_F16, 1, shape);
        assert_non_null(f);
        assert_non_null(b);
        assert_non_null(h);
        memset(f->view.data, 0x11, f->nbytes);
        memset(b->view.data, 0x11, b->nbytes);
        memset(h->view.data, 0x11, h->nbytes);
        parity_tensor_fill_nan(f);
        parity_tensor_fill_nan(b);
        parity_tensor_fill_nan(h);
        float nan = NAN;
        uint32_t w;
        memcpy(&w, &nan, sizeof w);
        assert_true(w == 0x7fc00000u); /* the quiet NaN the loop stored */
        assert_filled(f, 4, w);
        assert_filled(b, 2, 0x7fc0);
        assert_filled(h, 2, 0x7e00);
        parity_tensor_free(f);
        parity_tensor_free(b);
        parity_tensor_free(h);
    }
    /* A bf16 view that starts 2 bytes past a 4-byte boundary: the first element alone, then pairs. */
    int64_t shape[1] = {9};
    parity_tensor_t *b = parity_tensor_new("b", PARITY_DT_BF16, 1, shape);
    assert_non_null(b);
    memset(b->view.data, 0x11, b->nbytes);
    parity_tensor_t view = *b;
    view.view.data = (uint16_t *)b->view.data + 1;
    view.view.shape[0] = 7;
    view.nbytes = 14;
    parity_tensor_fill_nan(&view);
    const uint16_t *p = b->view.data;
    assert_true(p[0] == 0x1111 && p[8] == 0x1111); /* outside the view: untouched */
    for (int i = 1; i < 8; i++) assert_true(p[i] == 0x7fc0);
    parity_tensor_free(b);
}

static void reference_prefill_matches_elementwise(void **state)
{
    (void)state;
    /* 5 rows x 7 columns, rows 1 and 3 without terms (slot -1): zeros; the others the fp32
     * rounding of the reference, including a tie, a subnormal and an overflow to infinity. */
    parity_ref_output_t R;
    assert_int_equal(parity_ref_output_alloc(&R, "dE", "token", 5, 7, 1, 3, 0), PARITY_OK);
    const int64_t slots[5] = {0, -1, 1, -1, 2};
    memcpy(R.slot, slots, sizeof slots);
    const double special[7] = {1.0 + 0x1p-24, -0x1p-140, 0x1.fffffffp127, 1e300, -0.0, 3.0, 0x1p-150};
    for (int64_t e = 0; e < 21; e++) R.ref[e] = special[e % 7] * (double)(1 + e / 7);
    int64_t shape[2] = {5, 7};
    parity_tensor_t *t = parity_tensor_new("dE", PARITY_DT_F32, 2, shape);
    assert_non_null(t);
    parity_tensor_fill_nan(t);
    parity_fill_reference(t, &R);
    const float *y = t->view.data;
    for (int64_t r = 0; r < 5; r++)
        for (int64_t j = 0; j < 7; j++) {
            float want = slots[r] >= 0 ? (float)R.ref[slots[r] * 7 + j] : 0.0f;
            uint32_t a, b;
            memcpy(&a, &y[r * 7 + j], 4);
            memcpy(&b, &want, 4);
            if (a != b) fail_msg("row %lld col %lld: 0x%08x, want 0x%08x", (long long)r, (long long)j, a, b);
        }
    assert_true(parity_tensor_guards_ok(t));
    parity_tensor_free(t);
    free_ref(&R);
}

static void bulk_store_matches_set(void **state)
{
    (void)state;
    /* bf16 from double in one rounding: ties both ways, just above a tie (the case double
     * rounding through fp32 gets wrong), subnormals, the overflow edge, infinities, NaN. */
    const double x[] = {1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8, 1.0 + 0x1p-8 + 0x1p-40, -0x1p-130,
                        0x1p-133, 0x1.ff7fffffffffffp127, 0x1.ff8p127, INFINITY, -INFINITY, NAN,
                        0.0, -0.0, 1e-320, 3.14159};
    const int n = (int)(sizeof x / sizeof x[0]);
    const parity_dtype_t dts[] = {PARITY_DT_BF16, PARITY_DT_F32, PARITY_DT_F16};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        int64_t shape[1] = {n + 3};
        parity_tensor_t *a = parity_tensor_new("a", dts[d], 1, shape);
        parity_tensor_t *b = parity_tensor_new("b", dts[d], 1, shape);
        assert_non_null(a);
        assert_non_null(b);
        memset(a->view.data, 0, a->nbytes);
        memset(b->view.data, 0, b->nbytes);
        parity_tensor_store_f64(&a->view, 2, x, n);
        for (int i = 0; i < n; i++) parity_tensor_set(&b->view, 2 + i, x[i]);
        assert_memory_equal(a->view.data, b->view.data, a->nbytes);
        parity_tensor_free(a);
        parity_tensor_free(b);
    }
    /* The bulk bf16 store (integer fast path, vectorized) against the general encoder of
     * src/format, which shares no code with it: random bit patterns with exponents from below
     * bf16's subnormals to above its overflow, the 2^-7 grid's ties and their neighbours one
     * double ulp away, and runs of odd length at every alignment. */
    parity_format_t bf;
    assert_int_equal(parity_format_get("bf16", &bf, NULL), PARITY_OK);
    parity_round_opts_t ro = parity_format_default_opts(&bf);
    enum { M = 40000 };
    double *y = malloc(M * sizeof *y);
    uint16_t *got = malloc((M + 8) * sizeof *got);
    assert_non_null(y);
    assert_non_null(got);
    uint64_t st = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < M; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t r = st ^ (st >> 29), b;
        uint64_t e = 1023 - 140 + (r >> 52) % 280; /* 2^-140 .. 2^140 */
        if (i % 4 == 1) r = (r & ~0x00001FFFFFFFFFFFULL) | 0x0000100000000000ULL; /* a tie */
        b = (r & 0x800FFFFFFFFFFFFFULL) | (e << 52);
        if (i % 4 == 2) b = ((r & ~0x00001FFFFFFFFFFFULL) | 0x0000100000000000ULL | (e << 52)) + 1;
        if (i % 4 == 3) b = ((r & ~0x00001FFFFFFFFFFFULL) | 0x0000100000000000ULL | (e << 52)) - 1;
        if (i % 4 == 2 || i % 4 == 3) b = (b & 0x800FFFFFFFFFFFFFULL) | (e << 52);
        memcpy(&y[i], &b, 8);
    }
    for (int off = 0; off < 8; off++) {
        int64_t shape[1] = {M + 8};
        parity_tensor_t *t = parity_tensor_new("t", PARITY_DT_BF16, 1, shape);
        assert_non_null(t);
        int len = M - 2 * off - 1;
        parity_tensor_store_f64(&t->view, off, y + off, len);
        memcpy(got, t->view.data, (size_t)(M + 8) * sizeof *got);
        for (int i = off; i < off + len; i++) {
            uint16_t want = (uint16_t)parity_format_encode(&bf, y[i], &ro, NULL);
            if (got[i] != want) fail_msg("bf16 of %a: 0x%04x, the encoder gives 0x%04x", y[i], got[i], want);
        }
        parity_tensor_free(t);
    }
    free(y);
    free(got);
}

static void zero_row_scan(void **state)
{
    (void)state;
    /* A row without terms passes only when every element is +-0: a single set bit anywhere in
     * a long row (the vectorized scan's tail included) fails it. */
    parity_ref_output_t R;
    assert_int_equal(parity_ref_output_alloc(&R, "dE", "token", 1, 1031, 1, 0, 0), PARITY_OK);
    R.slot[0] = -1;
    int64_t shape[2] = {1, 1031};
    parity_tensor_t *t = parity_tensor_new("dE", PARITY_DT_F32, 2, shape);
    assert_non_null(t);
    const int64_t pos[] = {0, 1, 15, 16, 1023, 1030};
    for (size_t p = 0; p < sizeof pos / sizeof pos[0]; p++) {
        memset(t->view.data, 0, t->nbytes);
        ((uint32_t *)t->view.data)[3] = 0x80000000u; /* -0.0 is zero */
        parity_wl_result_t res;
        memset(&res, 0, sizeof res);
        parity_judge_output(&R, &t->view, PARITY_DT_F32, 0, &res, NULL);
        assert_true(res.max_q == 0);
        ((uint32_t *)t->view.data)[pos[p]] = 1; /* the smallest subnormal */
        memset(&res, 0, sizeof res);
        parity_judge_output(&R, &t->view, PARITY_DT_F32, 0, &res, NULL);
        if (!(res.max_q > 1)) fail_msg("a subnormal at column %lld passed as zero", (long long)pos[p]);
    }
    parity_tensor_free(t);
    free_ref(&R);
}

/* The rerun's digest (src/core/digest.c) in place of a memcmp: every single-bit difference, at any
 * place of an odd-length buffer, changes it; so do the differences FNV-1a over words cannot see
 * (two sign flips of odd-indexed fp32 elements: bit 63 of two words), two words swapped, and a
 * trailing zero byte. The same bytes at another address give the same digest. */
static void rerun_digest(void **state)
{
    (void)state;
    enum { N = 1001 };
    unsigned char *a = malloc(N + 8), *b = malloc(N + 8);
    assert_non_null(a);
    assert_non_null(b);
    uint64_t x = 0x243f6a8885a308d3ULL;
    for (size_t i = 0; i < N + 8; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (unsigned char)(x >> 56);
    }
    const uint64_t h = parity_digest64(a, N);
    memcpy(b + 3, a, N); /* unaligned copy */
    assert_true(parity_digest64(b + 3, N) == h);
    for (size_t i = 0; i < N; i++)
        for (int bit = 0; bit < 8; bit++) {
            a[i] ^= (unsigned char)(1u << bit);
            if (parity_digest64(a, N) == h) fail_msg("a flip of bit %d of byte %zu keeps the digest", bit, i);
            a[i] ^= (unsigned char)(1u << bit);
        }
    float f[64];
    memcpy(f, a, sizeof f);
    const uint64_t hf = parity_digest64(f, sizeof f);
    f[1] = -f[1];
    f[37] = -f[37];
    assert_true(parity_digest64(f, sizeof f) != hf);
    f[1] = -f[1];
    f[37] = -f[37];
    uint64_t w[2];
    memcpy(w, f, 16);
    memcpy(f, w + 1, 8);
    memcpy((char *)f + 8, w, 8);
    assert_true(parity_digest64(f, sizeof f) != hf || w[0] == w[1]);
    /* Two flips in words that share a lane (i and i + 8), every pair of bit places: with an xor
     * into the lane before its multiplication, bit 34 of one and bit 63 of the next cancelled. */
    uint64_t lw[32];
    memcpy(lw, a, sizeof lw);
    const uint64_t hl = parity_digest64(lw, sizeof lw);
    for (int i = 0; i < 8; i += 3)
        for (int b1 = 0; b1 < 64; b1++)
            for (int b2 = 0; b2 < 64; b2++) {
                lw[i] ^= 1ULL << b1;
                lw[i + 8] ^= 1ULL << b2;
                if (parity_digest64(lw, sizeof lw) == hl)
                    fail_msg("flips of bit %d of word %d and bit %d of word %d keep the digest", b1, i, b2, i + 8);
                lw[i] ^= 1ULL << b1;
                lw[i + 8] ^= 1ULL << b2;
            }
    a[N] = 0;
    assert_true(parity_digest64(a, N + 1) != h);
    free(a);
    free(b);
    /* Over 4 MiB the digest is taken in blocks on every core (digest.c): the same digest for any
     * thread count; a flip in the first, a middle and the last (short) block, a flip of bit 63 in
     * two blocks at once, two blocks swapped and one byte more or fewer all change it. */
    const size_t M = ((size_t)3 << 22) + 4099;
    uint64_t *big = malloc(M + 16);
    assert_non_null(big);
    unsigned char *bb = (unsigned char *)big;
    for (size_t i = 0; i < M + 16; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        bb[i] = (unsigned char)(x >> 56);
    }
    const uint64_t hb = parity_digest64(bb, M);
    setenv("PARITY_THREADS", "1", 1);
    assert_true(parity_digest64(bb, M) == hb);
    setenv("PARITY_THREADS", "3", 1);
    assert_true(parity_digest64(bb, M) == hb);
    unsetenv("PARITY_THREADS");
    const size_t at[] = {0, 5, ((size_t)1 << 22) + 17, ((size_t)2 << 22) - 1, M - 1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        for (int bit = 0; bit < 8; bit += 7) {
            bb[at[i]] ^= (unsigned char)(1u << bit);
            if (parity_digest64(bb, M) == hb) fail_msg("a flip of bit %d of byte %zu keeps the digest", bit, at[i]);
            bb[at[i]] ^= (unsigned char)(1u << bit);
        }
    big[7] ^= 1ULL << 63;
    big[((size_t)1 << 22) / 8 + 7] ^= 1ULL << 63;
    assert_true(parity_digest64(bb, M) != hb);
    big[7] ^= 1ULL << 63;
    big[((size_t)1 << 22) / 8 + 7] ^= 1ULL << 63;
    unsigned char *tmp = malloc((size_t)1 << 22);
    assert_non_null(tmp);
    memcpy(tmp, bb, (size_t)1 << 22);
    memcpy(bb, bb + ((size_t)1 << 22), (size_t)1 << 22);
    memcpy(bb + ((size_t)1 << 22), tmp, (size_t)1 << 22);
    assert_true(parity_digest64(bb, M) != hb);
    memcpy(bb + ((size_t)1 << 22), bb, (size_t)1 << 22);
    memcpy(bb, tmp, (size_t)1 << 22);
    assert_true(parity_digest64(bb, M) == hb);
    assert_true(parity_digest64(bb, M + 1) != hb);
    assert_true(parity_digest64(bb, M - 1) != hb);
    free(tmp);
    free(big);
}

/* The inputs' hash ("did the kernel change its inputs") is the same digest: a kernel negating
 * two bf16 inputs whose sign bits are bit 63 of two 8-byte words (elements 3 and 7), which
 * FNV-1a over words could not see, is seen; so is any single flipped bit. */
static void input_hash_sees_sign_flips(void **state)
{
    (void)state;
    int64_t shape[1] = {64};
    parity_tensor_t *t = parity_tensor_new("x", PARITY_DT_BF16, 1, shape);
    assert_non_null(t);
    uint16_t *v = t->view.data;
    for (int i = 0; i < 64; i++) v[i] = (uint16_t)(0x3f80u + 3u * (unsigned)i);
    const uint64_t h = parity_tensor_hash(t);
    v[3] ^= 0x8000u;
    v[7] ^= 0x8000u;
    assert_true(parity_tensor_hash(t) != h);
    v[3] ^= 0x8000u;
    v[7] ^= 0x8000u;
    assert_true(parity_tensor_hash(t) == h);
    for (int i = 0; i < 64; i++)
        for (int bit = 0; bit < 16; bit++) {
            v[i] ^= (uint16_t)(1u << bit);
            if (parity_tensor_hash(t) == h) fail_msg("a flip of bit %d of element %d keeps the hash", bit, i);
            v[i] ^= (uint16_t)(1u << bit);
        }
    parity_tensor_free(t);
}

/* parity_calloc_faulted (the reference arrays): calloc's contents, zero, for small blocks (from
 * the heap), large ones (mapped and faulted in writable at once), sizes that are not whole pages,
 * a block reusing freed heap memory that held other bytes, and a count of 0. */
static void calloc_faulted_is_zeroed(void **state)
{
    (void)state;
    const size_t counts[] = {0, 1, 511, 4096, (size_t)1 << 17, ((size_t)1 << 17) + 12345, (size_t)3 << 18};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (int round = 0; round < 2; round++) {
            double *p = parity_calloc_faulted(counts[c], sizeof *p);
            assert_non_null(p);
            for (size_t i = 0; i < counts[c]; i++)
                if (p[i] != 0.0 || signbit(p[i])) fail_msg("count %zu: element %zu is %a", counts[c], i, p[i]);
            for (size_t i = 0; i < counts[c]; i++) p[i] = -1.5; /* what the next round's block may reuse */
            free(p);
        }
}

/* Outputs of kernel k on case c with n_threads threads, NaN-prefilled, into o (made here). */
static int run_threads(const parity_case_t *c, const parity_abi_kernel_t *k, int n_threads,
                       parity_tensor_t **o)
{
    parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
    parity_abi_call_t call;
    for (int i = 0; i < c->n_outputs; i++) {
        o[i] = parity_tensor_new(c->op->output_names[i], (parity_dtype_t)k->out_dtype,
                                 c->out_ndim[i], c->out_shape[i]);
        assert_non_null(o[i]);
        parity_tensor_fill_nan(o[i]);
    }
    parity_case_make_call(c, in, out, o, n_threads, c->seed, &call);
    return k->run(&call);
}

/* Kernel k's outputs on workload name of op (seed 3) are the same bytes with 1 thread and with
 * 2, 3 and 5. */
static void same_bits_any_threads(const parity_op_t *op, const char *name, const parity_abi_kernel_t *k)
{
    parity_workload_t wl;
    assert_int_equal(parity_op_workload(op, name, &wl), PARITY_OK);
    parity_diag_t diag = {{0}};
    parity_case_t *c = NULL;
    if (parity_case_build(op, &wl, 3, (parity_dtype_t)k->in_dtype, &c, &diag) != PARITY_OK)
        fail_msg("%s on %s: %s", op->name, name, diag.msg);
    parity_tensor_t *one[PARITY_OP_MAX_ARGS] = {0}, *many[PARITY_OP_MAX_ARGS] = {0};
    int rc1 = run_threads(c, k, 1, one);
    const int threads[] = {2, 3, 5};
    for (int t = 0; t < 3; t++) {
        int rc = run_threads(c, k, threads[t], many);
        assert_int_equal(rc, rc1);
        for (int i = 0; i < c->n_outputs; i++) {
            if (memcmp(one[i]->view.data, many[i]->view.data, one[i]->nbytes) != 0)
                fail_msg("%s %s on %s: output %s differs with %d threads", op->name, k->name, name,
                         op->output_names[i], threads[t]);
            parity_tensor_free(many[i]);
        }
    }
    for (int i = 0; i < c->n_outputs; i++) parity_tensor_free(one[i]);
    parity_case_free(c);
}

/* The index of op's smallest preset that is not production-sized (N D V), or -1. */
static int smallest_preset(const parity_op_t *op)
{
    int best = -1;
    double best_size = 0;
    for (int p = 0; p < op->n_presets; p++) {
        const parity_workload_t *w = &op->presets[p];
        double size = (double)w->n * (double)w->d * (double)(w->v > 0 ? w->v : 1);
        if (!w->production && (best < 0 || size < best_size)) {
            best = p;
            best_size = size;
        }
    }
    return best;
}

/* The floor's variants run with every core (check_floor.c) whatever --threads gives the
 * candidates, which is only sound while their bits do not depend on the thread count: every
 * floor variant of every op on its smallest non-production workload, and every kernel of the
 * embedding catalog (threads over vocabulary shares, ops/embedding/kernels.c) on skewed ids, a
 * vocabulary smaller than the thread count and shapes that split unevenly. */
static void catalog_bits_ignore_threads(void **state)
{
    (void)state;
    for (int o = 0; o < parity_op_count(); o++) {
        const parity_op_t *op = parity_op_at(o);
        const parity_abi_kernel_t *fk[CHECK_N_FLOOR_KERNELS];
        int nf = check_floor_kernels(op, fk);
        int best = smallest_preset(op);
        for (int f = 0; f < nf && best >= 0; f++) same_bits_any_threads(op, op->presets[best].name, fk[f]);
    }
    const char *const shapes[] = {"zipf1.4@3001x130x517", "text@1500x40x50257", "uniform@777x100x37",
                                  "uniform@50x8x2"};
    const char *const emb[] = {"embedding_rmsnorm_bwd", "embedding_bwd"};
    for (int e = 0; e < 2; e++) {
        const parity_op_t *op = parity_op_find(emb[e]);
        assert_non_null(op);
        for (int i = 0; i < parity_catalog_count(); i++) {
            const parity_abi_kernel_t *k = parity_catalog_at(i);
            if (strcmp(k->op, op->name) != 0) continue;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                if (strncmp(shapes[s], "zipf1.4", 7) == 0 && e == 1) continue; /* not a preset there */
                same_bits_any_threads(op, shapes[s], k);
            }
        }
    }
}

/* max_q of output i judged in full and from tolerances computed once (the floor's way,
 * check_floor.c): the same double, bit for bit. */
static void same_max_q(const parity_case_t *c, parity_tensor_t *const *o, const char *what)
{
    for (int i = 0; i < c->n_outputs; i++) {
        if (o[i]->view.dtype != PARITY_DT_F32) continue;
        parity_wl_result_t res;
        memset(&res, 0, sizeof res);
        parity_judge_output(&c->ref[i], &o[i]->view, PARITY_DT_F32, i, &res, NULL);
        double *tp = parity_judge_tolerances(&c->ref[i], PARITY_DT_F32, PARITY_DT_F32);
        assert_non_null(tp);
        double m = parity_judge_max_q(&c->ref[i], &o[i]->view, tp);
        free(tp);
        if (memcmp(&m, &res.max_q, sizeof m) != 0)
            fail_msg("%s %s, output %s: max err/tol %a from the tolerances, %a judged", c->op->name,
                     what, c->op->output_names[i], m, res.max_q);
    }
}

/* The floor's largest err/tol from tolerances computed once equals the full judgement's: every
 * fp32-output catalog kernel (faithful and mutants) of every op on its smallest non-production
 * workload and the embedding ops on skewed and real-text ids, then those outputs with a NaN, an
 * infinity and a nonzero element in a row without terms written in. */
static void floor_max_q_is_the_judges(void **state)
{
    (void)state;
    for (int oi = 0; oi < parity_op_count(); oi++) {
        const parity_op_t *op = parity_op_at(oi);
        const char *names[3] = {NULL, NULL, NULL};
        int best = smallest_preset(op);
        if (best < 0) continue;
        names[0] = op->presets[best].name;
        if (!strcmp(op->name, "embedding_rmsnorm_bwd") || !strcmp(op->name, "embedding_bwd")) {
            names[1] = "zipf1.1@3001x130x5170";
            names[2] = "text@1500x40x50257";
        }
        for (int n = 0; n < 3 && names[n]; n++) {
            parity_workload_t wl;
            assert_int_equal(parity_op_workload(op, names[n], &wl), PARITY_OK);
            for (int ki = 0; ki < parity_catalog_count(); ki++) {
                const parity_abi_kernel_t *k = parity_catalog_at(ki);
                if (strcmp(k->op, op->name) != 0 || k->out_dtype != PARITY_DT_F32) continue;
                parity_diag_t diag = {{0}};
                parity_case_t *c = NULL;
                if (parity_case_build(op, &wl, 2, (parity_dtype_t)k->in_dtype, &c, &diag) != PARITY_OK)
                    fail_msg("%s on %s: %s", op->name, names[n], diag.msg);
                parity_tensor_t *o[PARITY_OP_MAX_ARGS] = {0};
                if (run_threads(c, k, 2, o) == PARITY_KERNEL_OK) {
                    char what[160];
                    snprintf(what, sizeof what, "%s on %s", k->name, names[n]);
                    same_max_q(c, o, what);
                    const parity_ref_output_t *R = &c->ref[0];
                    float *y = o[0]->view.data;
                    int64_t hit = -1, empty = -1;
                    for (int64_t r = 0; r < R->rows && (hit < 0 || empty < 0); r++) {
                        int64_t slot = R->slot ? R->slot[r] : r;
                        if (slot >= 0 && hit < 0) hit = r;
                        if (slot < 0 && empty < 0) empty = r;
                    }
                    if (empty >= 0) { /* first: an infinite err/tol elsewhere would hide it */
                        y[empty * R->cols] = 1e-30f;
                        same_max_q(c, o, "with a nonzero element in a row without terms");
                        y[empty * R->cols] = 0;
                    }
                    if (hit >= 0 && R->cols > 2) {
                        y[hit * R->cols + 1] = INFINITY;
                        same_max_q(c, o, "with an infinity");
                        y[hit * R->cols + 2] = NAN;
                        same_max_q(c, o, "with a NaN");
                    }
                }
                for (int i = 0; i < c->n_outputs; i++) parity_tensor_free(o[i]);
                parity_case_free(c);
            }
        }
    }
}

/* The floor skips the NaN prefill of catalog kernels flagged PARITY_KERNEL_WRITES_OUTPUTS_FIRST
 * (check_floor.c): every such kernel must give the same bytes on NaN-filled outputs and on outputs
 * holding other bytes (random, and a previous run's results), on skewed and uniform ids, an odd
 * shape and a vocabulary of 2, with 1 and 3 threads. */
static void flagged_kernels_ignore_prefill(void **state)
{
    (void)state;
    const char *const shapes[] = {"zipf1.1@2001x130x517", "uniform@777x100x37", "uniform@50x8x2"};
    int flagged = 0;
    for (int i = 0; i < parity_catalog_count(); i++) {
        const parity_abi_kernel_t *k = parity_catalog_at(i);
        if (!(k->flags & PARITY_KERNEL_WRITES_OUTPUTS_FIRST)) continue;
        flagged++;
        const parity_op_t *op = parity_op_find(k->op);
        assert_non_null(op);
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
            parity_workload_t wl;
            assert_int_equal(parity_op_workload(op, shapes[sh], &wl), PARITY_OK);
            parity_diag_t diag = {{0}};
            parity_case_t *c = NULL;
            if (parity_case_build(op, &wl, 5, (parity_dtype_t)k->in_dtype, &c, &diag) != PARITY_OK)
                fail_msg("%s on %s: %s", op->name, shapes[sh], diag.msg);
            for (int nt = 1; nt <= 3; nt += 2) {
                parity_tensor_t *a[PARITY_OP_MAX_ARGS] = {0}, *b[PARITY_OP_MAX_ARGS] = {0};
                assert_int_equal(run_threads(c, k, nt, a), PARITY_KERNEL_OK);
                parity_abi_tensor_t in[PARITY_OP_MAX_ARGS], out[PARITY_OP_MAX_ARGS];
                parity_abi_call_t call;
                for (int round = 0; round < 2; round++) {
                    for (int o = 0; o < c->n_outputs; o++) {
                        if (!b[o]) {
                            b[o] = parity_tensor_new(op->output_names[o], (parity_dtype_t)k->out_dtype,
                                                     c->out_ndim[o], c->out_shape[o]);
                            assert_non_null(b[o]);
                        }
                        if (round == 0) { /* random bytes; round 1: what round 0 left */
                            unsigned char *p = b[o]->view.data;
                            uint64_t x = 0x2545F4914F6CDD1DULL + (uint64_t)o;
                            for (size_t e = 0; e < b[o]->nbytes; e++) {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                p[e] = (unsigned char)x;
                            }
                        }
                    }
                    parity_case_make_call(c, in, out, b, nt, c->seed, &call);
                    assert_int_equal(k->run(&call), PARITY_KERNEL_OK);
                    for (int o = 0; o < c->n_outputs; o++)
                        if (memcmp(a[o]->view.data, b[o]->view.data, a[o]->nbytes) != 0)
                            fail_msg("%s %s on %s: output %s depends on what it held before", op->name,
                                     k->name, shapes[sh], op->output_names[o]);
                }
                for (int o = 0; o < c->n_outputs; o++) {
                    parity_tensor_free(a[o]);
                    parity_tensor_free(b[o]);
                }
            }
            parity_case_free(c);
        }
    }
    assert_true(flagged >= 3); /* the floor variants of embedding_rmsnorm_bwd at least */
}

/* The judge takes rows in blocks on every core and merges the blocks' results (verify.c): the
 * merge must give what one pass over the rows gives. 1000 rows of 3 identical elements (so equal
 * errors give equal err/tol), a third of them without terms, failing rows in many blocks with
 * ties, a larger one and a NaN: the worst element is the first with the largest err/tol, the
 * failing rows list keeps row order among ties, and the counts are sums; a second output judged
 * into the same result keeps an earlier worst unless it is beaten. */
static void judge_blocks_merge_in_row_order(void **state)
{
    (void)state;
    enum { ROWS = 1000, COLS = 3 };
    parity_ref_output_t R;
    assert_int_equal(parity_ref_output_alloc(&R, "dE", "token", ROWS, COLS, 1, ROWS, 1), PARITY_OK);
    int64_t slots = 0;
    for (int64_t r = 0; r < ROWS; r++) R.slot[r] = r % 3 == 2 ? -1 : slots++;
    for (int64_t sl = 0; sl < slots; sl++) {
        R.k[sl] = 4;
        for (int j = 0; j < COLS; j++) {
            R.ref[sl * COLS + j] = 1.0;
            R.s_acc[sl * COLS + j] = 1.0;
            R.s_up[sl * COLS + j] = 0.5;
        }
    }
    R.m_up = 8;
    int64_t shape[2] = {ROWS, COLS};
    parity_tensor_t *t = parity_tensor_new("dE", PARITY_DT_F32, 2, shape);
    assert_non_null(t);
    float *y = t->view.data;
    for (int64_t r = 0; r < ROWS; r++)
        for (int j = 0; j < COLS; j++) y[r * COLS + j] = R.slot[r] >= 0 ? 1.0f : 0.0f;
    const int64_t same[] = {4, 301, 700, 903, 951, 999}; /* err 1e-3 in column 1 */
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) y[same[i] * COLS + 1] = 1.001f;
    y[600 * COLS + 2] = 1.002f; /* a larger error */
    y[200 * COLS + 0] = NAN;    /* in a row without terms */
    y[5 * COLS + 1] = 1e-30f;   /* row 5 has no terms: a value there fails */
    parity_wl_result_t res;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &t->view, PARITY_DT_F32, 0, &res, NULL);
    assert_int_equal(res.rows_judged, ROWS);
    assert_int_equal(res.rows_failed, 9);
    assert_int_equal(res.nan_count, 1);
    assert_int_equal(res.max_hits, 4);
    assert_true(isinf(res.max_q));
    assert_int_equal(res.worst.row, 5); /* the first of the two infinite err/tol */
    assert_int_equal(res.worst.col, 1);
    const int64_t order[5] = {5, 200, 600, 4, 301}; /* inf, inf, 2e-3, then 1e-3 in row order */
    assert_int_equal(res.n_worst_rows, 5);
    for (int i = 0; i < 5; i++)
        if (res.worst_rows[i].row != order[i])
            fail_msg("failing row %d is %lld, want %lld", i, (long long)res.worst_rows[i].row,
                     (long long)order[i]);
    /* Without the infinities the worst is the larger error, then the first of the ties. */
    y[200 * COLS + 0] = 0.0f;
    y[5 * COLS + 1] = 0.0f;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &t->view, PARITY_DT_F32, 0, &res, NULL);
    assert_int_equal(res.worst.row, 600);
    y[600 * COLS + 2] = 1.0f;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &t->view, PARITY_DT_F32, 0, &res, NULL);
    assert_int_equal(res.worst.row, 4);
    assert_int_equal(res.worst.col, 1);
    double q4 = res.worst.q;
    /* A second output with the same errors: the first output's worst stays (not strictly beaten). */
    parity_judge_output(&R, &t->view, PARITY_DT_F32, 1, &res, NULL);
    assert_int_equal(res.worst.row, 4);
    assert_true(res.worst.q == q4);
    assert_int_equal(res.rows_failed, 12);
    assert_int_equal(res.worst_rows[0].row, 4); /* the list was full of ties: ties come after */
    assert_int_equal(res.worst_rows[1].row, 301);
    assert_int_equal(res.worst_rows[4].row, 951);
    /* All exact: the worst is the first element judged (q = 0), rows without terms included. */
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) y[same[i] * COLS + 1] = 1.0f;
    memset(&res, 0, sizeof res);
    parity_judge_output(&R, &t->view, PARITY_DT_F32, 0, &res, NULL);
    assert_true(res.max_q == 0);
    assert_int_equal(res.worst.row, 0);
    assert_int_equal(res.worst.col, 0);
    assert_int_equal(res.rows_failed, 0);
    parity_tensor_free(t);
    free_ref(&R);
}

/* parity_child_wait, with the child's descriptor and without (the sleeping fallback): it returns
 * when the child ends, with its status, well before max_s; and it returns 0 after max_s, not
 * before, while the child runs on. Also: page populates in pieces on every core leave the bytes
 * of a mapping as they were and fault it in writable. */
static void child_wait_and_populate(void **state)
{
    (void)state;
    for (int use_fd = 0; use_fd < 2; use_fd++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            usleep(30000);
            _exit(7);
        }
        int fd = use_fd ? parity_child_fd(pid) : -1, status = 0;
        long sl = 200;
        /* 1: the child's end was seen (at the deadline it would be 0), with its status. */
        assert_int_equal(parity_child_wait(pid, fd, &status, 10.0, &sl), 1);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 7);
        assert_int_equal(waitpid(pid, NULL, WNOHANG), -1); /* reaped: nothing left to wait for */
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            usleep(3000000);
            _exit(0);
        }
        if (fd >= 0) close(fd);
        fd = use_fd ? parity_child_fd(pid) : -1;
        /* 0 at the deadline, the child still running and not reaped (no wall-clock assertion:
         * the property is the state the wait leaves, not how long it took). */
        assert_int_equal(parity_child_wait(pid, fd, &status, 0.1, &sl), 0);
        assert_int_equal(waitpid(pid, NULL, WNOHANG), 0);
        assert_int_equal(kill(pid, 0), 0);
        kill(pid, SIGKILL);
        assert_int_equal(parity_child_wait(pid, fd, &status, 10.0, &sl), 1);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        if (fd >= 0) close(fd);
    }
    const size_t n = (size_t)160 << 20; /* five pieces */
    unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    for (size_t i = 0; i < n; i += 4093) p[i] = (unsigned char)(i * 7 + 1);
#ifdef MADV_POPULATE_WRITE
    parity_madvise_parallel(p, n, MADV_POPULATE_WRITE);
#endif
    for (size_t i = 0; i < n; i += 4093) assert_int_equal(p[i], (unsigned char)(i * 7 + 1));
    for (size_t i = 1; i < n; i += 4093) assert_int_equal(p[i], 0);
    munmap(p, n);
}

/* parity_rms_bwd_rows4_f32 against four calls of the one-row function, bit for bit (dx and r):
 * row lengths around the 4-column blocks and production's, every r mode, with gamma and without,
 * magnitudes from 2^-60 to 2^60 (sums of squares near fp32's ends), and with rows repeated. */
static void rows4_is_four_rows(void **state)
{
    (void)state;
    const int64_t lens[] = {1, 2, 3, 4, 5, 7, 8, 9, 63, 257, 2048};
    parity_rng_t rng;
    parity_rng_seed(&rng, 5, 9);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t d = lens[li];
        float *buf = malloc((size_t)d * 13 * sizeof *buf);
        assert_non_null(buf);
        float *x = buf, *dy = buf + 4 * d, *g = buf + 8 * d, *got = buf + 9 * d;
        float want[2048];
        for (int trial = 0; trial < 6; trial++) {
            for (int64_t e = 0; e < 4 * d; e++) {
                int sc = (int)parity_rng_below(&rng, 121) - 60;
                x[e] = (float)ldexp(2.0 * parity_rng_uniform(&rng) - 1.0, trial < 3 ? sc / 6 : sc);
                dy[e] = (float)ldexp(2.0 * parity_rng_uniform(&rng) - 1.0, -(int)parity_rng_below(&rng, 20));
            }
            if (trial == 5) memcpy(x + d, x, (size_t)d * sizeof *x); /* two equal rows */
            for (int64_t j = 0; j < d; j++) g[j] = (float)(0.5 + parity_rng_uniform(&rng));
            for (int mode = 0; mode < 3; mode++)
                for (int ig = 0; ig < 2; ig++) {
                    const float *xs[4] = {x, x + d, x + 2 * d, x + 3 * d};
                    const float *ys[4] = {dy, dy + d, dy + 2 * d, dy + 3 * d};
                    float *os[4] = {got, got + d, got + 2 * d, got + 3 * d}, r[4];
                    parity_rms_bwd_rows4_f32(xs, ys, g, d, 1e-6f, os, r, ig, mode);
                    for (int a = 0; a < 4; a++) {
                        float ra = parity_rms_bwd_row_f32(xs[a], ys[a], g, d, 1e-6f, want, NULL, ig, mode);
                        if (memcmp(&ra, &r[a], sizeof ra) != 0)
                            fail_msg("d %lld mode %d gamma %d row %d: r %a vs %a", (long long)d, mode, !ig, a, r[a], ra);
                        if (memcmp(want, os[a], (size_t)d * sizeof *want) != 0)
                            fail_msg("d %lld mode %d gamma %d row %d: dx differs", (long long)d, mode, !ig, a);
                    }
                }
        }
        free(buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nan_prefill_patterns),
        cmocka_unit_test(reference_prefill_matches_elementwise),
        cmocka_unit_test(bulk_store_matches_set),
        cmocka_unit_test(zero_row_scan),
        cmocka_unit_test(rerun_digest),
        cmocka_unit_test(input_hash_sees_sign_flips),
        cmocka_unit_test(calloc_faulted_is_zeroed),
        cmocka_unit_test(catalog_bits_ignore_threads),
        cmocka_unit_test(floor_max_q_is_the_judges),
        cmocka_unit_test(judge_blocks_merge_in_row_order),
        cmocka_unit_test(flagged_kernels_ignore_prefill),
        cmocka_unit_test(child_wait_and_populate),
        cmocka_unit_test(rows4_is_four_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
