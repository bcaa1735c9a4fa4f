/* contiguous() of transposed and permuted views, the blocked-tile path
 * (kernels/cpu/transpose.c: 8 x 8 vector tiles for 4-byte elements, scalar
 * tiles at the edges and for other sizes), against the index arithmetic
 * done here element by element: shapes with full tiles, ragged edges and
 * outer dims, every element size, values (exact in float16) that differ
 * patterns within every tile (a tile that moved an element shows). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* out[i, j] == in[j, i] for a [r, c] int32 input, values i * c + j */
static void check_2d(int64_t r, int64_t c, dt_dtype dt) {
  int32_t *v = malloc(sizeof *v * (size_t)(r * c));
  assert_non_null(v);
  for (int64_t k = 0; k < r * c; k++) v[k] = (int32_t)((k * 37 + 11) % 2003) - 1000;
  dt_tensor *a = dt_from_host(v, DT_SHAPE(r, c), &(dt_tensor_options){
      .dtype = DT_INT32, .device = "cpu:0"});
  dt_tensor *x = dt_cast(a, dt);
  dt_tensor *t = dt_transpose(x, 0, 1);
  dt_tensor *y = dt_contiguous(t);
  dt_tensor *back = dt_cast(y, DT_INT32);
  assert_non_null(back);
  int32_t *h = malloc(sizeof *h * (size_t)(r * c));
  int32_t *ref = malloc(sizeof *ref * (size_t)(r * c));
  assert_non_null(h);
  assert_non_null(ref);
  /* the reference: the cast's values (round trip through dt) of v^T */
  dt_tensor *rv = dt_cast(x, DT_INT32);
  assert_int_equal(dt_to_host(rv, ref, sizeof *ref * (size_t)(r * c)), DT_OK);
  assert_int_equal(dt_to_host(back, h, sizeof *h * (size_t)(r * c)), DT_OK);
  for (int64_t i = 0; i < c; i++)
    for (int64_t j = 0; j < r; j++)
      if (h[i * r + j] != ref[j * c + i])
        fail_msg("[%lld, %lld] %s: out[%lld, %lld] = %d, want %d", (long long)r,
                 (long long)c, dt_dtype_name(dt), (long long)i, (long long)j,
                 h[i * r + j], ref[j * c + i]);
  free(v);
  free(h);
  free(ref);
  dt_tensor *ts[] = {a, x, t, y, back, rv};
  for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) dt_tensor_release(ts[k]);
}

static void test_transpose_2d(void **state) {
  (void)state;
  static const int64_t shapes[][2] = {{8, 8}, {16, 24}, {67, 45}, {256, 520},
                                      {1024, 9}, {9, 1024}, {300, 300}};
  static const dt_dtype dts[] = {DT_INT32, DT_FLOAT32, DT_INT64, DT_FLOAT16,
                                 DT_UINT8};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
      check_2d(shapes[s][0], shapes[s][1], dts[d]);
}

/* a [3, 40, 72] int32 tensor permuted (2, 0, 1) and (1, 2, 0) */
static void test_permute_3d(void **state) {
  (void)state;
  enum { A = 3, B = 40, C = 72 };
  int32_t *v = malloc(sizeof *v * A * B * C), *h = malloc(sizeof *h * A * B * C);
  assert_non_null(v);
  assert_non_null(h);
  for (int k = 0; k < A * B * C; k++) v[k] = k * 7 + 1;
  dt_tensor *a = dt_from_host(v, DT_SHAPE(A, B, C), &(dt_tensor_options){
      .dtype = DT_INT32, .device = "cpu:0"});
  assert_non_null(a);
  static const int perms[2][3] = {{2, 0, 1}, {1, 2, 0}};
  for (int p = 0; p < 2; p++) {
    dt_tensor *t = dt_permute(a, perms[p], 3), *y = dt_contiguous(t);
    assert_int_equal(dt_to_host(y, h, sizeof *h * A * B * C), DT_OK);
    int64_t dims[3] = {A, B, C}, od[3];
    for (int k = 0; k < 3; k++) od[k] = dims[perms[p][k]];
    for (int64_t i = 0; i < od[0]; i++)
      for (int64_t j = 0; j < od[1]; j++)
        for (int64_t k = 0; k < od[2]; k++) {
          int64_t idx[3], o[3] = {i, j, k};
          for (int q = 0; q < 3; q++) idx[perms[p][q]] = o[q];
          int32_t want = v[(idx[0] * B + idx[1]) * C + idx[2]];
          assert_int_equal(h[(i * od[1] + j) * od[2] + k], want);
        }
    dt_tensor_release(y);
    dt_tensor_release(t);
  }
  dt_tensor_release(a);
  free(v);
  free(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_transpose_2d),
    cmocka_unit_test(test_permute_3d),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
