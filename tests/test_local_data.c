/* dt_tensor_local_data: the address of a single-device tensor's memory,
 * read back against the values it was made from (row-major, by hand), for
 * a contiguous tensor, a computed one, a slice (offset applied) and a
 * transpose (strides); the errors: NULL arguments, a DTensor. */
#include <string.h>

#include "testutil.h"

static void test_contiguous_and_computed(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  float host[12];
  for (int i = 0; i < 12; i++) host[i] = (float)(i * i) - 3.5f;
  dt_tensor *a = dt_from_host(host, DT_SHAPE(3, 4), NULL);
  void *p = NULL;
  assert_int_equal(dt_tensor_local_data(a, &p), DT_OK);
  assert_non_null(p);
  assert_memory_equal(p, host, sizeof host);
  dt_tensor *b = dt_mul_scalar(a, 2.0); /* computed on the rank */
  float *q = NULL;
  assert_int_equal(dt_tensor_local_data(b, (void **)&q), DT_OK);
  for (int i = 0; i < 12; i++) assert_true(q[i] == 2.0f * host[i]);
  dt_tensor_release(b);
  dt_tensor_release(a);
  tu_leaks_end();
}

static void test_views(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  int64_t host[12];
  for (int i = 0; i < 12; i++) host[i] = 100 + i;
  dt_tensor *a = dt_from_host(host, DT_SHAPE(3, 4), &(dt_tensor_options){.dtype = DT_INT64});
  dt_tensor *row1 = dt_select(a, 0, 1);   /* host[4..7]: offset 4 */
  dt_tensor *t = dt_transpose(a, 0, 1);   /* strides [1, 4] */
  int64_t *p = NULL, *r = NULL, *tp = NULL;
  assert_int_equal(dt_tensor_local_data(a, (void **)&p), DT_OK);
  assert_int_equal(dt_tensor_local_data(row1, (void **)&r), DT_OK);
  assert_int_equal(dt_tensor_local_data(t, (void **)&tp), DT_OK);
  assert_ptr_equal(r, p + 4);
  for (int j = 0; j < 4; j++) assert_int_equal(r[j], 104 + j);
  dt_shape st = dt_tensor_strides(t);
  assert_int_equal(st.dims[0], 1);
  assert_int_equal(st.dims[1], 4);
  /* t[j][i] = host[i][j] */
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 3; i++) assert_int_equal(tp[j * st.dims[0] + i * st.dims[1]], host[i * 4 + j]);
  dt_tensor_release(t);
  dt_tensor_release(row1);
  dt_tensor_release(a);
  tu_leaks_end();
}

static void test_errors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  void *p = (void *)1;
  assert_int_equal(dt_tensor_local_data(NULL, &p), DT_ERR_INVALID_ARGUMENT);
  assert_null(p);
  assert_non_null(strstr(dt_last_error(), "dt_tensor_local_data: t is NULL"));
  dt_tensor *a = dt_zeros(DT_SHAPE(2), NULL);
  assert_int_equal(dt_tensor_local_data(a, NULL), DT_ERR_INVALID_ARGUMENT);
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  dt_tensor *d = dt_zeros(DT_SHAPE(4), &(dt_tensor_options){.mesh = m,
                          .placements = DT_PLACEMENTS(DT_SHARD(0))});
  assert_int_equal(dt_tensor_local_data(d, &p), DT_ERR_UNSUPPORTED);
  assert_non_null(strstr(dt_last_error(), "is a DTensor"));
  dt_tensor *e = dt_zeros(DT_SHAPE(0, 3), NULL); /* no elements, no memory */
  p = (void *)1;
  assert_int_equal(dt_tensor_local_data(e, &p), DT_OK);
  assert_null(p);
  /* an op that fails on the rank (integer division by a zero element):
   * its error, not an address */
  dt_tensor *n = dt_from_host((const int32_t[]){7, 8}, DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT32});
  dt_tensor *z = dt_from_host((const int32_t[]){1, 0}, DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT32});
  dt_tensor *q = dt_floor_divide(n, z);
  assert_non_null(q);
  p = (void *)1;
  assert_int_equal(dt_tensor_local_data(q, &p), DT_ERR_INVALID_ARGUMENT);
  assert_null(p);
  assert_non_null(strstr(dt_last_error(), "zero"));
  dt_tensor_release(q);
  dt_tensor_release(z);
  dt_tensor_release(n);
  dt_tensor_release(e);
  dt_tensor_release(d);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  dt_tensor_release(a);
  dt_clear_error();
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_contiguous_and_computed),
    cmocka_unit_test(test_views),
    cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
