/* The version API: dt_version() against the project()'s VERSION string
 * CMake passes in (an independent source), and the DT_VERSION_* macros
 * against the same string parsed here. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#ifndef DTORCH_PROJECT_VERSION
#error "CMake passes DTORCH_PROJECT_VERSION (cmake/install.cmake)"
#endif

static void test_version_string(void **state) {
  (void)state;
  assert_non_null(dt_version());
  assert_string_equal(dt_version(), DTORCH_PROJECT_VERSION);
  assert_ptr_equal(dt_version(), dt_version()); /* static storage */
}

static void test_version_macros(void **state) {
  (void)state;
  int major = -1, minor = -1, patch = -1;
  assert_int_equal(sscanf(DTORCH_PROJECT_VERSION, "%d.%d.%d", &major, &minor, &patch), 3);
  assert_int_equal(DT_VERSION_MAJOR, major);
  assert_int_equal(DT_VERSION_MINOR, minor);
  assert_int_equal(DT_VERSION_PATCH, patch);
  assert_int_equal(DT_VERSION_NUMBER, major * 10000 + minor * 100 + patch);
#if DT_VERSION_NUMBER < 100
#error "DT_VERSION_NUMBER must be usable in #if and at least 0.1.0"
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_version_string),
    cmocka_unit_test(test_version_macros),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
