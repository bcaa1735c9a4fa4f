/* Bad input to the view ops: dims out of range (the message names the dim
 * and the tensor's ndim), impossible shapes, bad steps, indices and
 * permutations. Each case checks the exact status, the function and the
 * value at fault in the message, and that nothing leaks. */
#include <stdint.h>

#include "support/testutil.h"

static void test_dim_out_of_range(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(3, 4), NULL);
  tu_expect_error(dt_transpose(a, 0, 2), DT_ERR_INVALID_ARGUMENT, "dt_transpose",
                  "dim1 2", "2-d", "[-2, 1]", NULL);
  tu_expect_error(dt_transpose(a, -3, 0), DT_ERR_INVALID_ARGUMENT, "dt_transpose",
                  "dim0 -3", "2-d", NULL);
  tu_expect_error(dt_slice(a, 5, 0, 1, 1), DT_ERR_INVALID_ARGUMENT, "dt_slice",
                  "dim 5", "2-d", NULL);
  tu_expect_error(dt_narrow(a, -3, 0, 1), DT_ERR_INVALID_ARGUMENT, "dt_narrow",
                  "dim -3", NULL);
  tu_expect_error(dt_select(a, 2, 0), DT_ERR_INVALID_ARGUMENT, "dt_select",
                  "dim 2", NULL);
  tu_expect_error(dt_squeeze(a, 2), DT_ERR_INVALID_ARGUMENT, "dt_squeeze",
                  "dim 2", "2-d", NULL);
  tu_expect_error(dt_unsqueeze(a, 3), DT_ERR_INVALID_ARGUMENT, "dt_unsqueeze",
                  "dim 3", "[-3, 2]", NULL);
  tu_expect_error(dt_unsqueeze(a, -4), DT_ERR_INVALID_ARGUMENT, "dt_unsqueeze",
                  "dim -4", NULL);
  tu_expect_error(dt_flatten(a, 0, 2), DT_ERR_INVALID_ARGUMENT, "dt_flatten",
                  "end_dim 2", "2-d", NULL);
  tu_expect_error(dt_flatten(a, 1, 0), DT_ERR_INVALID_ARGUMENT, "dt_flatten",
                  "start_dim 1", "end_dim 0", NULL);
  tu_expect_error(dt_permute(a, (int[]){0, 2}, 2), DT_ERR_INVALID_ARGUMENT,
                  "dt_permute", "2", "2-d", NULL);
  dt_tensor_release(a);
  tu_leaks_end();
}

static void test_bad_view_shapes(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(3, 4), NULL);
  tu_expect_error(dt_view(a, DT_SHAPE(-1, -1)), DT_ERR_SHAPE, "dt_view",
                  "only one dim", "[-1, -1]", NULL);
  tu_expect_error(dt_view(a, DT_SHAPE(5, 2)), DT_ERR_SHAPE, "dt_view", "[5, 2]",
                  "size 12", NULL);
  tu_expect_error(dt_view(a, DT_SHAPE(5, -1)), DT_ERR_SHAPE, "dt_view",
                  "[5, -1]", "12", NULL);
  tu_expect_error(dt_view(a, DT_SHAPE(0, -1)), DT_ERR_SHAPE, "dt_view",
                  "[0, -1]", NULL);
  tu_expect_error(dt_view(a, DT_SHAPE(-2, 6)), DT_ERR_SHAPE, "dt_view", "-2",
                  NULL);
  tu_expect_error(dt_view(a, (dt_shape){.ndim = 9}), DT_ERR_SHAPE, "dt_view",
                  "9 dims", NULL);
  tu_expect_error(dt_reshape(a, DT_SHAPE(7)), DT_ERR_SHAPE, "dt_reshape", "[7]",
                  "12", NULL);
  dt_tensor_release(a);
  tu_leaks_end();
}

static void test_bad_expand(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(3, 1), NULL);
  tu_expect_error(dt_expand(a, DT_SHAPE(4, 5)), DT_ERR_SHAPE, "dt_expand",
                  "4", "3", "non-singleton", NULL);
  tu_expect_error(dt_expand(a, DT_SHAPE(5)), DT_ERR_SHAPE, "dt_expand",
                  "[3, 1]", "1 dims", NULL);
  tu_expect_error(dt_expand(a, DT_SHAPE(-1, 3, 2)), DT_ERR_SHAPE, "dt_expand",
                  "-1", "leading", NULL);
  tu_expect_error(dt_expand(a, DT_SHAPE(3, -2)), DT_ERR_SHAPE, "dt_expand",
                  "-2", NULL);
  dt_tensor_release(a);
  tu_leaks_end();
}

/* Shapes whose element count passes 2^63: the product used to wrap (2^32 *
 * 2^32 = 0) and match an empty input, or give a view of negative numel. */
static void test_numel_overflow(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  const int64_t g = INT64_C(1) << 32;
  dt_tensor *e = dt_zeros(DT_SHAPE(0), NULL);
  dt_tensor *one = dt_ones(DT_SHAPE(1, 1), NULL);
  dt_tensor *a = dt_ones(DT_SHAPE(3, 4), NULL);
  tu_expect_error(dt_view(e, DT_SHAPE(g, g)), DT_ERR_SHAPE, "dt_view",
                  "[4294967296, 4294967296]", "2^63", NULL);
  tu_expect_error(dt_reshape(e, DT_SHAPE(g, g)), DT_ERR_SHAPE, "dt_reshape",
                  "[4294967296, 4294967296]", "2^63", NULL);
  tu_expect_error(dt_view(e, DT_SHAPE(g, -1, g)), DT_ERR_SHAPE, "dt_view",
                  "[4294967296, -1, 4294967296]", "2^63", NULL);
  /* a size 0 does not hide the overflow of the others (their contiguous
   * strides would overflow) */
  tu_expect_error(dt_view(e, DT_SHAPE(0, g, g)), DT_ERR_SHAPE, "dt_view",
                  "[0, 4294967296, 4294967296]", "2^63", NULL);
  /* 2^62 * 4 wraps to 0, then * 3 = 0: it must not be read as 12 != 0 */
  tu_expect_error(dt_view(a, DT_SHAPE(INT64_C(1) << 62, 4, 3)), DT_ERR_SHAPE,
                  "dt_view", "2^63", NULL);
  tu_expect_error(dt_expand(one, DT_SHAPE(g, g)), DT_ERR_SHAPE, "dt_expand",
                  "[1, 1]", "[4294967296, 4294967296]", "2^63", NULL);
  tu_expect_error(dt_expand(one, DT_SHAPE(g, 1, g)), DT_ERR_SHAPE,
                  "dt_expand", "[4294967296, 1, 4294967296]", "2^63", NULL);
  /* just below the limit is fine: 2^31 * 2^31 = 2^62 elements, a view */
  dt_tensor *big = dt_expand(one, DT_SHAPE(INT64_C(1) << 31, INT64_C(1) << 31));
  if (!big) fail_msg("expand to 2^62 elements: %s", dt_last_error());
  assert_true(dt_tensor_numel(big) == INT64_C(1) << 62);
  dt_tensor *ez = dt_view(e, DT_SHAPE(0, g, 2));
  if (!ez) fail_msg("view [0] as [0, 2^32, 2]: %s", dt_last_error());
  assert_true(dt_tensor_numel(ez) == 0);
  TU_RELEASE(ez, big, a, one, e);
  tu_leaks_end();
}

static void test_bad_permute(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3, 4), NULL);
  tu_expect_error(dt_permute(a, (int[]){0, 0, 1}, 3), DT_ERR_INVALID_ARGUMENT,
                  "dt_permute", "dim 0", "twice", NULL);
  tu_expect_error(dt_permute(a, (int[]){2, -1, 0}, 3), DT_ERR_INVALID_ARGUMENT,
                  "dt_permute", "dim 2", "twice", NULL);
  tu_expect_error(dt_permute(a, (int[]){1, 0}, 2), DT_ERR_INVALID_ARGUMENT,
                  "dt_permute", "2 entries", "3-d", NULL);
  tu_expect_error(dt_permute(a, NULL, 3), DT_ERR_INVALID_ARGUMENT, "dt_permute",
                  "NULL", NULL);
  tu_expect_error(dt_permute(a, (int[]){0}, -1), DT_ERR_INVALID_ARGUMENT,
                  "dt_permute", "ndims -1", NULL);
  dt_tensor_release(a);
  tu_leaks_end();
}

static void test_bad_slice_narrow_select(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(3, 4), NULL), *s = dt_ones(DT_SHAPE(), NULL);
  tu_expect_error(dt_slice(a, 0, 0, 3, 0), DT_ERR_INVALID_ARGUMENT, "dt_slice",
                  "step", "0", NULL);
  tu_expect_error(dt_slice(a, 1, 3, 0, -1), DT_ERR_INVALID_ARGUMENT, "dt_slice",
                  "step", "-1", NULL);
  tu_expect_error(dt_slice(s, 0, 0, 1, 1), DT_ERR_SHAPE, "dt_slice", "0-d", NULL);
  tu_expect_error(dt_narrow(a, 1, 2, 5), DT_ERR_INVALID_ARGUMENT, "dt_narrow",
                  "start 2", "length 5", "size 4", NULL);
  tu_expect_error(dt_narrow(a, 1, 5, 0), DT_ERR_INVALID_ARGUMENT, "dt_narrow",
                  "start 5", NULL);
  tu_expect_error(dt_narrow(a, 0, 0, -1), DT_ERR_INVALID_ARGUMENT, "dt_narrow",
                  "length -1", NULL);
  tu_expect_error(dt_narrow(a, 0, -4, 1), DT_ERR_INVALID_ARGUMENT, "dt_narrow",
                  "start -4", "size 3", NULL);
  tu_expect_error(dt_narrow(s, 0, 0, 1), DT_ERR_SHAPE, "dt_narrow", "0-d", NULL);
  tu_expect_error(dt_select(a, 0, 3), DT_ERR_INVALID_ARGUMENT, "dt_select",
                  "index 3", "size 3", NULL);
  tu_expect_error(dt_select(a, 1, -5), DT_ERR_INVALID_ARGUMENT, "dt_select",
                  "index -5", "size 4", NULL);
  tu_expect_error(dt_select(s, 0, 0), DT_ERR_SHAPE, "dt_select", "0-d", NULL);
  dt_tensor_release(a);
  dt_tensor_release(s);
  tu_leaks_end();
}

static void test_too_many_dims(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *e = dt_ones(DT_SHAPE(1, 2, 1, 2, 1, 2, 1, 2), NULL);
  tu_expect_error(dt_unsqueeze(e, 0), DT_ERR_SHAPE, "dt_unsqueeze", "8", NULL);
  tu_expect_error(dt_unsqueeze(e, -1), DT_ERR_SHAPE, "dt_unsqueeze", "8", NULL);
  tu_expect_error(dt_expand(e, (dt_shape){.ndim = 9}), DT_ERR_SHAPE, "dt_expand",
                  "9", NULL);
  dt_tensor_release(e);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dim_out_of_range),
      cmocka_unit_test(test_bad_view_shapes),
      cmocka_unit_test(test_bad_expand),
      cmocka_unit_test(test_numel_overflow),
      cmocka_unit_test(test_bad_permute),
      cmocka_unit_test(test_bad_slice_narrow_select),
      cmocka_unit_test(test_too_many_dims),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
