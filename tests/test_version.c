/* version: parity_version_string() / parity_version_number() are the version.h macros, which
 * CMake writes from project(VERSION) (the one source; issue #40). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "parity/version.h"

static void runtime_is_compile_time(void **state)
{
    (void)state;
    const char *v = parity_version_string();
    assert_non_null(v);
    assert_string_equal(v, PARITY_VERSION_STRING);
    assert_int_equal(parity_version_number(), PARITY_VERSION_NUMBER);
}

static void string_is_major_minor_patch(void **state)
{
    (void)state;
    unsigned ma, mi, pa;
    char tail;
    assert_int_equal(sscanf(parity_version_string(), "%u.%u.%u%c", &ma, &mi, &pa, &tail), 3);
    assert_int_equal(ma, PARITY_VERSION_MAJOR);
    assert_int_equal(mi, PARITY_VERSION_MINOR);
    assert_int_equal(pa, PARITY_VERSION_PATCH);
    assert_int_equal(parity_version_number(), ma * 10000 + mi * 100 + pa);
#if PARITY_VERSION_NUMBER < 100
#error "PARITY_VERSION_NUMBER is usable in #if and at least 0.1.0"
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(runtime_is_compile_time),
        cmocka_unit_test(string_is_major_minor_patch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
