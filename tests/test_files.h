/* Whole-file helpers for cmocka tests (include after <cmocka.h>): read a file into a NUL-terminated
 * buffer (caller frees) and write a buffer to a file, failing the test on any I/O error. */
#ifndef PARITY_TEST_FILES_H
#define PARITY_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>

static inline char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b[n] = '\0';
    *len = (size_t)n;
    return b;
}

static inline void spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

#endif
