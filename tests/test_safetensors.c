/* safetensors: write/read round trip of every dtype, metadata, views, and rejection of malformed
 * headers (bad length, bad JSON, unknown dtype, offsets past the end, overlaps, absurd shapes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "parity/safetensors.h"

static void roundtrip(void **state)
{
    (void)state;
    char path[] = "/tmp/parity_safetensors_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    double f64[6] = {1.5, -2.25, 0, 1e300, -1e-300, 3};
    float f32[3] = {0.1f, -7.0f, 1e-30f};
    uint16_t bf16[2] = {0x3f80, 0xc000}; /* 1, -2 */
    uint16_t f16[3] = {0x3c00, 0x0001, 0xfc00}; /* 1, 2^-24, -inf */
    int32_t i32[2] = {-5, 7};
    int64_t i64[2] = {INT64_C(-9007199254740992), 42};
    uint64_t s23[2] = {2, 3}, s3[1] = {3}, s2[1] = {2};
    parity_safetensors_entry_t e[] = {{"f64", PARITY_SAFETENSORS_F64, 2, s23, f64}, {"f32", PARITY_SAFETENSORS_F32, 1, s3, f32},
                             {"bf16", PARITY_SAFETENSORS_BF16, 1, s2, bf16}, {"f16", PARITY_SAFETENSORS_F16, 1, s3, f16},
                             {"i32", PARITY_SAFETENSORS_I32, 1, s2, i32},   {"i64", PARITY_SAFETENSORS_I64, 1, s2, i64},
                             {"scalar", PARITY_SAFETENSORS_F64, 0, NULL, f64}};
    const char *meta[] = {"producer", "test", "format", "pt"};
    parity_diag_t d;
    assert_int_equal(parity_safetensors_write(path, e, 7, meta, 2, &d), PARITY_OK);
    parity_safetensors_file_t *f = NULL;
    assert_int_equal(parity_safetensors_open(path, &f, &d), PARITY_OK);
    assert_int_equal(parity_safetensors_count(f), 7);
    assert_string_equal(parity_safetensors_tensor(f, 0)->name, "f64"); /* header order kept */
    assert_string_equal(parity_safetensors_metadata(f, "producer"), "test");
    assert_null(parity_safetensors_metadata(f, "nope"));
    const parity_safetensors_tensor_t *t = parity_safetensors_find(f, "f64");
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->numel, 6);
    assert_int_equal((parity_safetensors_tensor(f, 0)->offset - 8) % 8, 0); /* buffer 8-aligned */
    double out[6];
    assert_int_equal(parity_safetensors_read_f64(f, t, 0, 6, out), PARITY_OK);
    assert_memory_equal(out, f64, sizeof f64);
    assert_int_equal(parity_safetensors_read_f64(f, t, 5, 2, out), PARITY_E_INVALID); /* past the end */
    assert_int_equal(parity_safetensors_read_f64(f, parity_safetensors_find(f, "f32"), 0, 3, out), PARITY_OK);
    assert_true(out[0] == (double)0.1f && out[1] == -7 && out[2] == (double)1e-30f);
    assert_int_equal(parity_safetensors_read_f64(f, parity_safetensors_find(f, "bf16"), 0, 2, out), PARITY_OK);
    assert_true(out[0] == 1 && out[1] == -2);
    assert_int_equal(parity_safetensors_read_f64(f, parity_safetensors_find(f, "f16"), 0, 3, out), PARITY_OK);
    assert_true(out[0] == 1 && out[1] == 0x1p-24 && out[2] < 0 && out[2] * 0 != 0);
    int64_t iv[2];
    assert_int_equal(parity_safetensors_read_i64(f, parity_safetensors_find(f, "i32"), 0, 2, iv), PARITY_OK);
    assert_true(iv[0] == -5 && iv[1] == 7);
    assert_int_equal(parity_safetensors_read_i64(f, parity_safetensors_find(f, "i64"), 0, 2, iv), PARITY_OK);
    assert_true(iv[0] == INT64_C(-9007199254740992) && iv[1] == 42);
    assert_int_equal(parity_safetensors_read_i64(f, t, 0, 1, iv), PARITY_E_INVALID); /* float tensor */
    const parity_safetensors_tensor_t *sc = parity_safetensors_find(f, "scalar");
    assert_int_equal(sc->ndim, 0);
    assert_int_equal(sc->numel, 1);
    double v0;
    memcpy(&v0, parity_safetensors_view(f, sc), 8);
    assert_true(v0 == 1.5);
    parity_safetensors_close(f);
    /* duplicate names are refused and the file is left as it was */
    parity_safetensors_entry_t dup[] = {{"x", PARITY_SAFETENSORS_F64, 1, s2, f64}, {"x", PARITY_SAFETENSORS_F64, 1, s2, f64}};
    assert_int_equal(parity_safetensors_write(path, dup, 2, NULL, 0, &d), PARITY_E_INVALID);
    assert_int_equal(parity_safetensors_open(path, &f, &d), PARITY_OK);
    assert_int_equal(parity_safetensors_count(f), 7);
    parity_safetensors_close(f);
    unlink(path);
}

/* Build a file image: 8-byte length, header text, then nbuf zero bytes. */
static size_t image(unsigned char *buf, size_t cap, const char *hdr, uint64_t declared, size_t nbuf)
{
    size_t hl = strlen(hdr);
    assert_true(8 + hl + nbuf <= cap);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(declared >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    memset(buf + 8 + hl, 0, nbuf);
    return 8 + hl + nbuf;
}

static void expect_bad(const char *hdr, int64_t declared, size_t nbuf, const char *needle)
{
    unsigned char buf[4096];
    size_t n = image(buf, sizeof buf, hdr, declared < 0 ? strlen(hdr) : (uint64_t)declared, nbuf);
    parity_safetensors_file_t *f = (parity_safetensors_file_t *)1;
    parity_diag_t d = {{0}};
    parity_status_t st = parity_safetensors_open_mem(buf, n, "x.safetensors", &f, &d);
    if (st != PARITY_E_FORMAT || f != NULL || !strstr(d.msg, needle)) {
        print_error("header %s: status %d, message '%s', wanted '%s'\n", hdr, st, d.msg, needle);
        fail();
    }
}

static void malformed(void **state)
{
    (void)state;
    expect_bad("{}", 1000, 0, "offset 0");                                   /* length past the end */
    expect_bad("{}", (int64_t)1 << 40, 0, "100 MB");                         /* absurd length */
    expect_bad("{\"a\":", -1, 0, "not valid JSON");
    expect_bad("[1]", -1, 0, "JSON object");
    expect_bad("{\"a\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", -1, 1, "dtype 'F8'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 4, "past the byte buffer");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", -1, 8, "expected 12");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", -1, 8,
               "overflows");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", -1, 4, "non-negative");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               -1, 8, "overlap");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", -1, 8, "data_offsets");
    expect_bad("{\"__metadata__\":{\"k\":1}}", -1, 0, "__metadata__.k");
    unsigned char tiny[4] = {1, 2, 3, 4};
    parity_safetensors_file_t *f;
    parity_diag_t d;
    assert_int_equal(parity_safetensors_open_mem(tiny, 4, NULL, &f, &d), PARITY_E_FORMAT);
    assert_int_equal(parity_safetensors_open("/nonexistent/x.safetensors", &f, &d), PARITY_E_IO);
    assert_int_equal(parity_safetensors_open(NULL, &f, &d), PARITY_E_INVALID);
    parity_safetensors_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(roundtrip), cmocka_unit_test(malformed)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
