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
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ops/ops_impl.h"
#include "src/core/tensor_impl.h"
#include "parity/op.h"
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
    /* Lengths around the string store's and the pair packing's edges (0, odd, one page + 1). */
    const int64_t lens[] = {0, 1, 2, 3, 7, 1023, 1025, 4097};
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
