/* View ops (PyTorch's view semantics, docs/architecture.md): shape, strides, storage offset and
 * storage sharing of every view op, checked against layouts worked out by
 * hand (PyTorch's values), and values read through dt_to_host compared with
 * references computed here from the base values by index arithmetic.
 * Bases are iota tensors (element k holds k), so a wrong offset or stride
 * shows up as a wrong value. Also: copies (contiguous, clone, reshape and
 * flatten of non-viewable layouts) make new storage; views keep their
 * storage alive after the base is released. */
#include <stdint.h>
#include <stdlib.h>

#include "support/testutil.h"

#define END INT64_MAX /* a[start:] */

/* float32 tensor of shape s with element k (row-major) equal to k */
static dt_tensor *iota(dt_shape s) {
  dt_tensor *r = dt_arange(0, (double)tu_numel(s), 1, NULL);
  assert_non_null(r);
  dt_tensor *v = dt_view(r, s);
  if (!v) fail_msg("dt_view: %s", dt_last_error());
  dt_tensor_release(r);
  return v;
}

static void expect_layout(dt_tensor *t, dt_shape shape, dt_shape strides,
                          int64_t offset) {
  if (!t) fail_msg("expected a view: %s", dt_last_error());
  tu_assert_dims(dt_tensor_shape(t), shape, "shape");
  tu_assert_dims(dt_tensor_strides(t), strides, "strides");
  assert_int_equal(dt_tensor_storage_offset(t), offset);
}

/* a view: layout as given and the base's storage */
static void expect_view(dt_tensor *t, dt_tensor *base, dt_shape shape,
                        dt_shape strides, int64_t offset) {
  expect_layout(t, shape, strides, offset);
  assert_true(dt_tensor_shares_storage(t, base));
}

static void expect_values(dt_tensor *t, const double *want, int64_t n,
                          const char *what) {
  assert_int_equal(dt_tensor_numel(t), n);
  double *got = tu_values(t);
  tu_assert_close(got, want, n, 0, 0, what);
  free(got);
}

static void test_views_share_storage(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = iota(DT_SHAPE(3, 4));
  expect_layout(a, DT_SHAPE(3, 4), DT_SHAPE(4, 1), 0);
  assert_true(dt_tensor_is_contiguous(a));

  dt_tensor *b = dt_transpose(a, 0, 1); /* a.T */
  expect_view(b, a, DT_SHAPE(4, 3), DT_SHAPE(1, 4), 0);
  assert_false(dt_tensor_is_contiguous(b));
  double wb[12];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) wb[i * 3 + j] = j * 4 + i;
  expect_values(b, wb, 12, "a.T");

  dt_tensor *rows = dt_slice(a, 0, 1, END, 1); /* a[1:] */
  expect_view(rows, a, DT_SHAPE(2, 4), DT_SHAPE(4, 1), 4);
  dt_tensor *c = dt_slice(rows, 1, 0, 2, 1);   /* a[1:, :2] */
  expect_view(c, a, DT_SHAPE(2, 2), DT_SHAPE(4, 1), 4);
  expect_values(c, (double[]){4, 5, 8, 9}, 4, "a[1:, :2]");

  dt_tensor *v = dt_view(a, DT_SHAPE(2, 6));
  expect_view(v, a, DT_SHAPE(2, 6), DT_SHAPE(6, 1), 0);

  dt_tensor *e = dt_expand(a, DT_SHAPE(5, 3, 4));
  expect_view(e, a, DT_SHAPE(5, 3, 4), DT_SHAPE(0, 4, 1), 0);
  double we[60];
  for (int k = 0; k < 60; k++) we[k] = k % 12;
  expect_values(e, we, 60, "expand");

  /* contiguous() of the transpose copies into new storage */
  int64_t bytes = dt_live_storage_bytes();
  dt_tensor *f = dt_contiguous(b);
  expect_layout(f, DT_SHAPE(4, 3), DT_SHAPE(3, 1), 0);
  assert_false(dt_tensor_shares_storage(f, a));
  assert_true(dt_tensor_is_contiguous(f));
  assert_int_equal(dt_live_storage_bytes() - bytes, 12 * 4);
  expect_values(f, wb, 12, "a.T.contiguous()");

  TU_RELEASE(a, b, rows, c, v, e, f);
  tu_leaks_end();
}

static void test_view_and_reshape_noncontig(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = iota(DT_SHAPE(3, 4)), *b = dt_transpose(a, 0, 1);
  tu_expect_error(dt_view(b, DT_SHAPE(12)), DT_ERR_SHAPE, "dt_view",
                  "dt_reshape", "[12]", "[4, 3]", NULL);
  tu_expect_error(dt_view(b, DT_SHAPE(3, 4)), DT_ERR_SHAPE, "dt_view", NULL);
  double w[12];
  for (int k = 0; k < 12; k++) w[k] = (k % 3) * 4 + k / 3; /* b row-major */
  dt_tensor *r = dt_reshape(b, DT_SHAPE(12));
  expect_layout(r, DT_SHAPE(12), DT_SHAPE(1), 0);
  assert_false(dt_tensor_shares_storage(r, a));
  expect_values(r, w, 12, "reshape(a.T)");
  dt_tensor *r2 = dt_reshape(b, DT_SHAPE(2, -1));
  expect_layout(r2, DT_SHAPE(2, 6), DT_SHAPE(6, 1), 0);
  assert_false(dt_tensor_shares_storage(r2, a));
  expect_values(r2, w, 12, "reshape(a.T, (2, -1))");
  /* reshape of a viewable layout is a view */
  dt_tensor *r3 = dt_reshape(a, DT_SHAPE(6, 2));
  expect_view(r3, a, DT_SHAPE(6, 2), DT_SHAPE(2, 1), 0);
  /* a non-contiguous layout can still be viewed when the split dim is
   * contiguous in itself: b's dim 0 (size 4, stride 1) → (2, 2) */
  dt_tensor *w3 = dt_view(b, DT_SHAPE(2, 2, 3));
  expect_view(w3, a, DT_SHAPE(2, 2, 3), DT_SHAPE(2, 1, 4), 0);
  double ww[12];
  for (int p = 0; p < 2; p++)
    for (int q = 0; q < 2; q++)
      for (int j = 0; j < 3; j++) ww[(p * 2 + q) * 3 + j] = j * 4 + p * 2 + q;
  expect_values(w3, ww, 12, "view(a.T, (2, 2, 3))");
  TU_RELEASE(a, b, r, r2, r3, w3);
  tu_leaks_end();
}

static void test_view_infer(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = iota(DT_SHAPE(2, 3, 4));
  double w[24];
  for (int k = 0; k < 24; k++) w[k] = k;
  struct { dt_shape req, shape, strides; } cases[] = {
      {DT_SHAPE(-1, 4), DT_SHAPE(6, 4), DT_SHAPE(4, 1)},
      {DT_SHAPE(4, -1), DT_SHAPE(4, 6), DT_SHAPE(6, 1)},
      {DT_SHAPE(-1), DT_SHAPE(24), DT_SHAPE(1)},
      {DT_SHAPE(2, -1, 2), DT_SHAPE(2, 6, 2), DT_SHAPE(12, 2, 1)},
      {DT_SHAPE(24), DT_SHAPE(24), DT_SHAPE(1)},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    dt_tensor *v = dt_view(a, cases[i].req);
    expect_view(v, a, cases[i].shape, cases[i].strides, 0);
    expect_values(v, w, 24, "view");
    dt_tensor *r = dt_reshape(a, cases[i].req);
    expect_view(r, a, cases[i].shape, cases[i].strides, 0);
    dt_tensor_release(v);
    dt_tensor_release(r);
  }
  /* a 0-d tensor views as [1] and back */
  dt_tensor *s = dt_select(a, 0, 1), *s0 = dt_select(s, 0, 2);
  dt_tensor *s1 = dt_select(s0, 0, 3);
  expect_layout(s1, DT_SHAPE(), DT_SHAPE(), 12 + 8 + 3);
  dt_tensor *v1 = dt_view(s1, DT_SHAPE(1)), *v0 = dt_view(v1, DT_SHAPE());
  expect_view(v1, a, DT_SHAPE(1), DT_SHAPE(1), 23);
  expect_view(v0, a, DT_SHAPE(), DT_SHAPE(), 23);
  expect_values(v0, (double[]){23}, 1, "0-d view");
  TU_RELEASE(a, s, s0, s1, v1, v0);
  tu_leaks_end();
}

static void test_transpose_permute(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = iota(DT_SHAPE(2, 3, 4));
  double w[24];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 3; k++) w[(i * 2 + j) * 3 + k] = j * 12 + k * 4 + i;
  dt_tensor *p = dt_permute(a, (int[]){2, 0, 1}, 3);
  expect_view(p, a, DT_SHAPE(4, 2, 3), DT_SHAPE(1, 12, 4), 0);
  expect_values(p, w, 24, "permute(2, 0, 1)");
  dt_tensor *q = dt_permute(a, (int[]){-1, 0, -2}, 3);
  expect_view(q, a, DT_SHAPE(4, 2, 3), DT_SHAPE(1, 12, 4), 0);
  expect_values(q, w, 24, "permute(-1, 0, -2)");
  dt_tensor *id = dt_permute(a, (int[]){0, 1, 2}, 3);
  expect_view(id, a, DT_SHAPE(2, 3, 4), DT_SHAPE(12, 4, 1), 0);
  assert_true(dt_tensor_is_contiguous(id));
  double wt[24];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 2; k++) wt[(i * 3 + j) * 2 + k] = k * 12 + j * 4 + i;
  dt_tensor *t = dt_transpose(a, -1, 0);
  expect_view(t, a, DT_SHAPE(4, 3, 2), DT_SHAPE(1, 4, 12), 0);
  expect_values(t, wt, 24, "transpose(-1, 0)");
  dt_tensor *same = dt_transpose(a, 1, 1);
  expect_view(same, a, DT_SHAPE(2, 3, 4), DT_SHAPE(12, 4, 1), 0);
  TU_RELEASE(a, p, q, id, t, same);
  tu_leaks_end();
}

static void test_slice(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a3 = iota(DT_SHAPE(2, 3, 4)), *a = iota(DT_SHAPE(3, 4));
  double w[24];
  int n = 0;
  dt_tensor *s1 = dt_slice(a3, 2, 0, 4, 2); /* a3[:, :, ::2] */
  expect_view(s1, a3, DT_SHAPE(2, 3, 2), DT_SHAPE(12, 4, 2), 0);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 2; k++) w[n++] = i * 12 + j * 4 + 2 * k;
  expect_values(s1, w, n, "a3[:, :, ::2]");
  dt_tensor *s2 = dt_slice(a, -1, -3, -1, 1); /* a[:, -3:-1] */
  expect_view(s2, a, DT_SHAPE(3, 2), DT_SHAPE(4, 1), 1);
  n = 0;
  for (int i = 0; i < 3; i++)
    for (int j = 1; j < 3; j++) w[n++] = i * 4 + j;
  expect_values(s2, w, n, "a[:, -3:-1]");
  dt_tensor *s3 = dt_slice(a, 0, -100, 100, 2); /* clamped: a[::2] */
  expect_view(s3, a, DT_SHAPE(2, 4), DT_SHAPE(8, 1), 0);
  expect_values(s3, (double[]){0, 1, 2, 3, 8, 9, 10, 11}, 8, "a[-100:100:2]");
  dt_tensor *s4 = dt_slice(a, 1, 3, 1, 1); /* empty: a[:, 3:1] */
  expect_view(s4, a, DT_SHAPE(3, 0), DT_SHAPE(4, 1), 3);
  dt_tensor *s5 = dt_slice(a, 1, 0, END, 3); /* a[:, ::3] */
  expect_view(s5, a, DT_SHAPE(3, 2), DT_SHAPE(4, 3), 0);
  expect_values(s5, (double[]){0, 3, 4, 7, 8, 11}, 6, "a[:, ::3]");
  dt_tensor *s6 = dt_slice(a, 0, 1, -1, 5); /* a[1:-1:5] */
  expect_view(s6, a, DT_SHAPE(1, 4), DT_SHAPE(20, 1), 4);
  expect_values(s6, (double[]){4, 5, 6, 7}, 4, "a[1:-1:5]");
  dt_tensor *s7 = dt_slice(a, 0, INT64_MIN, -2, 1); /* a[:-2] */
  expect_view(s7, a, DT_SHAPE(1, 4), DT_SHAPE(4, 1), 0);
  TU_RELEASE(a3, a, s1, s2, s3, s4, s5, s6, s7);
  tu_leaks_end();
}

/* a huge step must not overflow the size arithmetic: a[1::INT64_MAX] is
 * one element */
static void test_slice_huge_step(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = iota(DT_SHAPE(3, 4));
  dt_tensor *s = dt_slice(a, 1, 1, END, INT64_MAX);
  if (!s) fail_msg("dt_slice: %s", dt_last_error());
  tu_assert_dims(dt_tensor_shape(s), DT_SHAPE(3, 1),
                 "a[:, 1::INT64_MAX] shape");
  expect_values(s, (double[]){1, 5, 9}, 3, "a[:, 1::INT64_MAX]");
  dt_tensor_release(s);
  dt_tensor_release(a);
  tu_leaks_end();
}

static void test_narrow_select(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a3 = iota(DT_SHAPE(2, 3, 4)), *a = iota(DT_SHAPE(3, 4));
  double w[24];
  int n = 0;
  dt_tensor *n1 = dt_narrow(a3, 1, 1, 2);
  expect_view(n1, a3, DT_SHAPE(2, 2, 4), DT_SHAPE(12, 4, 1), 4);
  for (int i = 0; i < 2; i++)
    for (int j = 1; j < 3; j++)
      for (int k = 0; k < 4; k++) w[n++] = i * 12 + j * 4 + k;
  expect_values(n1, w, n, "narrow(a3, 1, 1, 2)");
  dt_tensor *n2 = dt_narrow(a, -1, -2, 2); /* start counts from the end */
  expect_view(n2, a, DT_SHAPE(3, 2), DT_SHAPE(4, 1), 2);
  expect_values(n2, (double[]){2, 3, 6, 7, 10, 11}, 6, "narrow(a, -1, -2, 2)");
  dt_tensor *n3 = dt_narrow(a, 0, 3, 0); /* empty at the end */
  expect_view(n3, a, DT_SHAPE(0, 4), DT_SHAPE(4, 1), 12);
  dt_tensor *s1 = dt_select(a3, 1, -1);
  expect_view(s1, a3, DT_SHAPE(2, 4), DT_SHAPE(12, 1), 8);
  n = 0;
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) w[n++] = i * 12 + 8 + k;
  expect_values(s1, w, n, "select(a3, 1, -1)");
  dt_tensor *s2 = dt_select(a, 0, 2);
  expect_view(s2, a, DT_SHAPE(4), DT_SHAPE(1), 8);
  expect_values(s2, (double[]){8, 9, 10, 11}, 4, "a[2]");
  dt_tensor *s3 = dt_select(a, 1, -4);
  expect_view(s3, a, DT_SHAPE(3), DT_SHAPE(4), 0);
  expect_values(s3, (double[]){0, 4, 8}, 3, "a[:, -4]");
  dt_tensor *s4 = dt_select(s2, 0, -1); /* 0-d */
  expect_view(s4, a, DT_SHAPE(), DT_SHAPE(), 11);
  expect_values(s4, (double[]){11}, 1, "a[2][-1]");
  TU_RELEASE(a3, a, n1, n2, n3, s1, s2, s3, s4);
  tu_leaks_end();
}

static void test_expand(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *x = iota(DT_SHAPE(3, 1));
  dt_tensor *e1 = dt_expand(x, DT_SHAPE(3, 4));
  expect_view(e1, x, DT_SHAPE(3, 4), DT_SHAPE(1, 0), 0);
  expect_values(e1, (double[]){0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}, 12, "expand");
  dt_tensor *e2 = dt_expand(x, DT_SHAPE(2, -1, 4)); /* -1 keeps 3 */
  expect_view(e2, x, DT_SHAPE(2, 3, 4), DT_SHAPE(0, 1, 0), 0);
  double w[24];
  for (int k = 0; k < 24; k++) w[k] = (k / 4) % 3;
  expect_values(e2, w, 24, "expand(2, -1, 4)");
  dt_tensor *e3 = dt_expand(x, DT_SHAPE(3, 1)); /* same shape */
  expect_view(e3, x, DT_SHAPE(3, 1), DT_SHAPE(1, 1), 0);
  dt_tensor *a = iota(DT_SHAPE(2, 3, 4)), *tmp = dt_select(a, 0, 1);
  dt_tensor *s = dt_select(tmp, 0, 2); /* [4] at offset 20 */
  dt_tensor *one = dt_select(s, 0, 1); /* 0-d, value 21 */
  dt_tensor *e4 = dt_expand(one, DT_SHAPE(2, 2));
  expect_view(e4, a, DT_SHAPE(2, 2), DT_SHAPE(0, 0), 21);
  expect_values(e4, (double[]){21, 21, 21, 21}, 4, "expand of 0-d");
  dt_tensor *e5 = dt_expand(x, DT_SHAPE(3, 0)); /* a size-1 dim may go to 0 */
  expect_view(e5, x, DT_SHAPE(3, 0), DT_SHAPE(1, 0), 0);
  TU_RELEASE(x, e1, e2, e3, a, tmp, s, one, e4, e5);
  tu_leaks_end();
}

static void test_squeeze_unsqueeze(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  double w[12];
  for (int k = 0; k < 12; k++) w[k] = k;
  dt_tensor *a = iota(DT_SHAPE(3, 4)), *y = dt_view(a, DT_SHAPE(3, 1, 4));
  expect_view(y, a, DT_SHAPE(3, 1, 4), DT_SHAPE(4, 4, 1), 0);
  dt_tensor *q1 = dt_squeeze(y, 1), *q2 = dt_squeeze(y, 0),
            *q3 = dt_squeeze(y, -2);
  expect_view(q1, a, DT_SHAPE(3, 4), DT_SHAPE(4, 1), 0);
  expect_view(q2, a, DT_SHAPE(3, 1, 4), DT_SHAPE(4, 4, 1), 0); /* no-op */
  expect_view(q3, a, DT_SHAPE(3, 4), DT_SHAPE(4, 1), 0);
  expect_values(q1, w, 12, "squeeze(1)");
  dt_tensor *z = dt_view(a, DT_SHAPE(1, 3, 1, 4)), *qa = dt_squeeze_all(z);
  expect_view(qa, a, DT_SHAPE(3, 4), DT_SHAPE(4, 1), 0);
  expect_values(qa, w, 12, "squeeze_all");
  dt_tensor *ones = dt_view(a, DT_SHAPE(12, 1, 1)),
            *n1 = dt_narrow(ones, 0, 5, 1);
  dt_tensor *q0 = dt_squeeze_all(n1); /* all ones → 0-d */
  expect_view(q0, a, DT_SHAPE(), DT_SHAPE(), 5);
  expect_values(q0, (double[]){5}, 1, "squeeze_all to 0-d");
  dt_tensor *q00 = dt_squeeze(q0, 0); /* 0-d squeeze is a no-op */
  expect_view(q00, a, DT_SHAPE(), DT_SHAPE(), 5);
  dt_tensor *u0 = dt_unsqueeze(a, 0), *u1 = dt_unsqueeze(a, 1);
  dt_tensor *um1 = dt_unsqueeze(a, -1), *um3 = dt_unsqueeze(a, -3);
  expect_view(u0, a, DT_SHAPE(1, 3, 4), DT_SHAPE(12, 4, 1), 0);
  expect_view(u1, a, DT_SHAPE(3, 1, 4), DT_SHAPE(4, 4, 1), 0);
  expect_view(um1, a, DT_SHAPE(3, 4, 1), DT_SHAPE(4, 1, 1), 0);
  expect_view(um3, a, DT_SHAPE(1, 3, 4), DT_SHAPE(12, 4, 1), 0);
  expect_values(um1, w, 12, "unsqueeze(-1)");
  /* of a transpose: the new dim's stride is size * stride of the next */
  dt_tensor *b = dt_transpose(a, 0, 1), *ub = dt_unsqueeze(b, 1);
  expect_view(ub, a, DT_SHAPE(4, 1, 3), DT_SHAPE(1, 12, 4), 0);
  double wb[12];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) wb[i * 3 + j] = j * 4 + i;
  expect_values(ub, wb, 12, "unsqueeze(a.T, 1)");
  dt_tensor *u00 = dt_unsqueeze(q0, 0); /* 0-d → [1] */
  expect_view(u00, a, DT_SHAPE(1), DT_SHAPE(1), 5);
  TU_RELEASE(a, y, q1, q2, q3, z, qa, ones, n1, q0, q00, u0, u1, um1, um3, b,
             ub, u00);
  tu_leaks_end();
}

static void test_flatten(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  double w[24];
  for (int k = 0; k < 24; k++) w[k] = k;
  dt_tensor *a = iota(DT_SHAPE(2, 3, 4));
  dt_tensor *f1 = dt_flatten(a, 0, -1), *f2 = dt_flatten(a, 1, 2);
  dt_tensor *f3 = dt_flatten(a, 1, 1), *f4 = dt_flatten(a, -3, -2);
  expect_view(f1, a, DT_SHAPE(24), DT_SHAPE(1), 0);
  expect_view(f2, a, DT_SHAPE(2, 12), DT_SHAPE(12, 1), 0);
  expect_view(f3, a, DT_SHAPE(2, 3, 4), DT_SHAPE(12, 4, 1), 0);
  expect_view(f4, a, DT_SHAPE(6, 4), DT_SHAPE(4, 1), 0);
  expect_values(f2, w, 24, "flatten(1, 2)");
  /* a 0-d input flattens to [1] */
  dt_tensor *s = dt_select(f1, 0, 7), *fs = dt_flatten(s, 0, -1);
  expect_view(fs, a, DT_SHAPE(1), DT_SHAPE(1), 7);
  expect_values(fs, (double[]){7}, 1, "flatten(0-d)");
  /* a transpose cannot be flattened in place: a copy */
  dt_tensor *t = dt_transpose(a, 0, 2), *ft = dt_flatten(t, 0, 1);
  expect_layout(ft, DT_SHAPE(12, 2), DT_SHAPE(2, 1), 0);
  assert_false(dt_tensor_shares_storage(ft, a));
  double wt[24];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 2; k++) wt[(i * 3 + j) * 2 + k] = k * 12 + j * 4 + i;
  expect_values(ft, wt, 24, "flatten(a.transpose(0, 2), 0, 1)");
  /* a permute that keeps memory order still flattens in place */
  dt_tensor *p = dt_permute(a, (int[]){0, 1, 2}, 3), *fp = dt_flatten(p, 0, 1);
  expect_view(fp, a, DT_SHAPE(6, 4), DT_SHAPE(4, 1), 0);
  TU_RELEASE(a, f1, f2, f3, f4, s, fs, t, ft, p, fp);
  tu_leaks_end();
}

static void test_contiguous_clone(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = iota(DT_SHAPE(3, 4));
  dt_tensor *c = dt_contiguous(a); /* already contiguous: the same view */
  expect_view(c, a, DT_SHAPE(3, 4), DT_SHAPE(4, 1), 0);
  dt_tensor *rows = dt_slice(a, 0, 1, END, 1), *cr = dt_contiguous(rows);
  expect_view(cr, a, DT_SHAPE(2, 4), DT_SHAPE(4, 1), 4); /* offset kept */
  dt_tensor *cols = dt_slice(a, 1, 1, 3, 1), *cc = dt_contiguous(cols);
  expect_layout(cc, DT_SHAPE(3, 2), DT_SHAPE(2, 1), 0);
  assert_false(dt_tensor_shares_storage(cc, a));
  expect_values(cc, (double[]){1, 2, 5, 6, 9, 10}, 6, "a[:, 1:3].contiguous()");
  dt_tensor *k = dt_clone(a); /* always a copy */
  expect_layout(k, DT_SHAPE(3, 4), DT_SHAPE(4, 1), 0);
  assert_false(dt_tensor_shares_storage(k, a));
  double w[24];
  for (int i = 0; i < 12; i++) w[i] = i;
  expect_values(k, w, 12, "clone");
  dt_tensor *e_src = dt_slice(a, 0, 0, 1, 1);
  dt_tensor *e = dt_expand(e_src, DT_SHAPE(2, 4));
  dt_tensor *ke = dt_clone(e); /* a broadcast view clones to real values */
  expect_layout(ke, DT_SHAPE(2, 4), DT_SHAPE(4, 1), 0);
  expect_values(ke, (double[]){0, 1, 2, 3, 0, 1, 2, 3}, 8, "clone(expand)");
  TU_RELEASE(a, c, rows, cr, cols, cc, k, e_src, e, ke);
  tu_leaks_end();
}

static void test_views_of_views(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = iota(DT_SHAPE(2, 3, 4));
  dt_tensor *s = dt_slice(a, 2, 1, 4, 2);     /* a[:, :, 1::2] */
  expect_view(s, a, DT_SHAPE(2, 3, 2), DT_SHAPE(12, 4, 2), 1);
  dt_tensor *t = dt_transpose(s, 0, 2);       /* t[k, j, i] = s[i, j, k] */
  expect_view(t, a, DT_SHAPE(2, 3, 2), DT_SHAPE(2, 4, 12), 1);
  dt_tensor *u = dt_select(t, 1, -1);         /* u[k, i] = a[i][2][1 + 2k] */
  expect_view(u, a, DT_SHAPE(2, 2), DT_SHAPE(2, 12), 9);
  double w[4];
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 2; i++) w[k * 2 + i] = i * 12 + 8 + 1 + 2 * k;
  expect_values(u, w, 4, "select(transpose(slice))");
  dt_tensor *n = dt_narrow(u, 1, 1, 1);
  expect_view(n, a, DT_SHAPE(2, 1), DT_SHAPE(2, 12), 21);
  expect_values(n, (double[]){21, 23}, 2, "narrow of it");
  dt_tensor *col = dt_select(a, 2, 0);        /* a[:, :, 0] */
  dt_tensor *uq = dt_unsqueeze(col, 0), *ex = dt_expand(uq, DT_SHAPE(2, 2, 3));
  expect_view(ex, a, DT_SHAPE(2, 2, 3), DT_SHAPE(0, 12, 4), 0);
  double we[12];
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) we[(r * 2 + i) * 3 + j] = i * 12 + j * 4;
  expect_values(ex, we, 12, "expand(unsqueeze(select))");
  dt_tensor *pv = dt_permute(ex, (int[]){2, 0, 1}, 3);
  dt_tensor *fl = dt_flatten(pv, 1, 2); /* (3, 4) with a 0 stride: a copy */
  expect_layout(fl, DT_SHAPE(3, 4), DT_SHAPE(4, 1), 0);
  double wf[12];
  for (int j = 0; j < 3; j++)
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < 2; i++) wf[j * 4 + r * 2 + i] = i * 12 + j * 4;
  expect_values(fl, wf, 12, "flatten(permute(expand))");
  TU_RELEASE(a, s, t, u, n, col, uq, ex, pv, fl);
  tu_leaks_end();
}

/* a view holds its storage: release the base, read the view */
static void test_view_outlives_base(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  int64_t bytes0 = dt_live_storage_bytes();
  dt_tensor *a = iota(DT_SHAPE(3, 4));
  assert_int_equal(dt_live_storage_bytes() - bytes0, 48);
  dt_tensor *v = dt_slice(a, 1, 1, 3, 1), *t = dt_transpose(v, 0, 1);
  dt_tensor_release(a);
  assert_int_equal(dt_live_storage_bytes() - bytes0, 48); /* still held */
  expect_values(v, (double[]){1, 2, 5, 6, 9, 10}, 6, "view after base release");
  dt_tensor_release(v);
  expect_values(t, (double[]){1, 5, 9, 2, 6, 10}, 6, "view of view");
  dt_tensor_release(t);
  tu_settle(); /* the free runs on the rank, in stream order */
  assert_int_equal(dt_live_storage_bytes(), bytes0); /* the last one frees */
  tu_leaks_end();
}

/* value at view index idx of a layout over a contiguous base */
static double *strided_ref(const double *base, dt_shape shape, dt_shape st,
                           int64_t off) {
  int64_t n = tu_numel(shape);
  double *w = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t o = 0; o < n; o++) {
    int64_t idx[DT_MAX_DIMS], p = off;
    tu_unravel(o, shape, idx);
    for (int k = 0; k < shape.ndim; k++) p += idx[k] * st.dims[k];
    w[o] = base[p];
  }
  return w;
}

static void check_strided(dt_tensor *v, dt_tensor *base, const double *bv,
                          dt_shape shape, dt_shape st, int64_t off) {
  expect_view(v, base, shape, st, off);
  double *w = strided_ref(bv, shape, st, off);
  expect_values(v, w, tu_numel(shape), dt_dtype_name(dt_tensor_dtype(v)));
  free(w);
  dt_tensor_release(v);
}

/* the element size enters every offset: each view op on every dtype */
static void test_views_every_dtype(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  for (int k = 0; k < 8; k++) {
    dt_dtype d = tu_all_dtypes[k];
    double *v;
    dt_tensor *a = tu_random(DT_SHAPE(2, 3, 4), d, 90 + (uint64_t)k, 0, 100, &v);
    check_strided(dt_transpose(a, 0, 2), a, v, DT_SHAPE(4, 3, 2),
                  DT_SHAPE(1, 4, 12), 0);
    check_strided(dt_slice(a, 1, 1, 3, 1), a, v, DT_SHAPE(2, 2, 4),
                  DT_SHAPE(12, 4, 1), 4);
    check_strided(dt_slice(a, 2, -3, END, 2), a, v, DT_SHAPE(2, 3, 2),
                  DT_SHAPE(12, 4, 2), 1);
    check_strided(dt_narrow(a, 0, 1, 1), a, v, DT_SHAPE(1, 3, 4),
                  DT_SHAPE(12, 4, 1), 12);
    check_strided(dt_select(a, 1, -1), a, v, DT_SHAPE(2, 4), DT_SHAPE(12, 1), 8);
    check_strided(dt_permute(a, (int[]){1, 2, 0}, 3), a, v, DT_SHAPE(3, 4, 2),
                  DT_SHAPE(4, 1, 12), 0);
    check_strided(dt_view(a, DT_SHAPE(6, -1)), a, v, DT_SHAPE(6, 4),
                  DT_SHAPE(4, 1), 0);
    check_strided(dt_unsqueeze(a, 2), a, v, DT_SHAPE(2, 3, 1, 4),
                  DT_SHAPE(12, 4, 4, 1), 0);
    dt_tensor *s = dt_select(a, 0, 1), *u = dt_unsqueeze(s, 0);
    check_strided(dt_expand(u, DT_SHAPE(3, 3, 4)), a, v, DT_SHAPE(3, 3, 4),
                  DT_SHAPE(0, 4, 1), 12);
    /* copies of a non-contiguous view, in row-major order of the view */
    dt_tensor *t = dt_transpose(a, 1, 2);
    double *w = strided_ref(v, DT_SHAPE(2, 4, 3), DT_SHAPE(12, 1, 4), 0);
    dt_tensor *cp[3] = {dt_contiguous(t), dt_clone(t),
                        dt_reshape(t, DT_SHAPE(24))};
    for (int i = 0; i < 3; i++) {
      assert_non_null(cp[i]);
      assert_false(dt_tensor_shares_storage(cp[i], a));
      assert_true(dt_tensor_is_contiguous(cp[i]));
      assert_int_equal(dt_tensor_dtype(cp[i]), d);
      expect_values(cp[i], w, 24, "copy of a transpose");
      dt_tensor_release(cp[i]);
    }
    free(w);
    TU_RELEASE(a, s, u, t);
    free(v);
  }
  tu_leaks_end();
}

/* Same-dtype copies (contiguous, clone, dt_to_host) of every dtype from
 * every layout: dense rows (one memcpy), step-2, transposed, narrowed rows
 * and broadcast (stride 0) inputs (the per-element-size loops), with rows
 * longer than the kernels' blocks. Values are compared exactly with the
 * logical values the inputs were built from. */
static void test_same_dtype_copies(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  const dt_shape s = DT_SHAPE(3, 700);
  for (int k = 0; k < 8; k++) {
    dt_dtype d = tu_all_dtypes[k];
    size_t es = dt_dtype_size(d);
    double lo = d == DT_UINT8 ? 0 : -100;
    for (int l = 0; l < TU_LAYOUTS + 2; l++) {
      double *v;
      dt_tensor *x;
      int64_t n = 2100;
      if (l < TU_LAYOUTS) {
        x = tu_layout_input(s, d, 300 + (uint64_t)k, lo, 100, true,
                            (tu_layout)l, &v);
      } else if (l == TU_LAYOUTS) { /* dense rows 600 long, rows 700 apart */
        double *full;
        dt_tensor *b = tu_layout_input(s, d, 400 + (uint64_t)k, lo, 100,
                                       true, TU_CONTIG, &full);
        x = dt_narrow(b, 1, 50, 600);
        n = 1800;
        v = malloc(sizeof(double) * (size_t)n);
        for (int r = 0; r < 3; r++)
          for (int j = 0; j < 600; j++) v[r * 600 + j] = full[r * 700 + 50 + j];
        free(full);
        dt_tensor_release(b);
      } else { /* one row broadcast to 3: stride 0 */
        double *row;
        dt_tensor *b = tu_layout_input(DT_SHAPE(1, 700), d, 500 + (uint64_t)k,
                                       lo, 100, true, TU_STEP2, &row);
        x = dt_expand(b, s);
        v = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) v[i] = row[i % 700];
        free(row);
        dt_tensor_release(b);
      }
      assert_non_null(x);
      dt_tensor *cp[2] = {dt_contiguous(x), dt_clone(x)};
      unsigned char *raw = malloc(es * (size_t)n);
      assert_int_equal(dt_to_host(x, raw, es * (size_t)n), DT_OK);
      for (int64_t i = 0; i < n; i++)
        if (tu_decode(raw + (size_t)i * es, d) != v[i])
          fail_msg("to_host %s layout %d: element %lld got %g want %g",
                   dt_dtype_name(d), l, (long long)i,
                   tu_decode(raw + (size_t)i * es, d), v[i]);
      for (int c = 0; c < 2; c++) {
        assert_non_null(cp[c]);
        assert_int_equal(dt_tensor_dtype(cp[c]), d);
        double *g = tu_values(cp[c]);
        for (int64_t i = 0; i < n; i++)
          if (g[i] != v[i])
            fail_msg("%s %s layout %d: element %lld got %g want %g",
                     c ? "clone" : "contiguous", dt_dtype_name(d), l,
                     (long long)i, g[i], v[i]);
        free(g);
        dt_tensor_release(cp[c]);
      }
      free(raw);
      free(v);
      dt_tensor_release(x);
    }
  }
  tu_leaks_end();
}

/* contiguous() of transposes and permutes large enough for the tiled
 * copy (kernels/cpu/transpose.c): every dtype, sizes that are not
 * multiples of the 8 x 8 tile or the 256 x 256 chunk, a batch dim,
 * against element-by-element indexing here */
static void test_transposed_copies(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  const int64_t b = 3, r = 263, c = 37;
  for (int k = 0; k < 8; k++) {
    dt_dtype d = tu_all_dtypes[k];
    double *v;
    dt_tensor *a = tu_random(DT_SHAPE(b, r, c), d, 600 + (uint64_t)k,
                             d == DT_UINT8 ? 0 : -100, 100, &v);
    dt_tensor *t = dt_transpose(a, 1, 2);              /* [b, c, r] */
    dt_tensor *p = dt_permute(a, (int[]){2, 1, 0}, 3); /* [c, r, b] */
    dt_tensor *f = dt_contiguous(t), *g = dt_contiguous(p);
    assert_non_null(f);
    assert_non_null(g);
    double *fv = tu_values(f), *gv = tu_values(g);
    for (int64_t i = 0; i < b; i++)
      for (int64_t j = 0; j < c; j++)
        for (int64_t l = 0; l < r; l++) {
          double want = v[(i * r + l) * c + j];
          if (fv[(i * c + j) * r + l] != want || gv[(j * r + l) * b + i] != want)
            fail_msg("%s: transposed copy wrong at (%lld, %lld, %lld)",
                     dt_dtype_name(d), (long long)i, (long long)j,
                     (long long)l);
        }
    free(fv);
    free(gv);
    free(v);
    dt_tensor_release(f);
    dt_tensor_release(g);
    dt_tensor_release(t);
    dt_tensor_release(p);
    dt_tensor_release(a);
  }
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_views_share_storage),
      cmocka_unit_test(test_view_and_reshape_noncontig),
      cmocka_unit_test(test_view_infer),
      cmocka_unit_test(test_transpose_permute),
      cmocka_unit_test(test_slice),
      cmocka_unit_test(test_narrow_select),
      cmocka_unit_test(test_expand),
      cmocka_unit_test(test_squeeze_unsqueeze),
      cmocka_unit_test(test_flatten),
      cmocka_unit_test(test_contiguous_clone),
      cmocka_unit_test(test_views_of_views),
      cmocka_unit_test(test_view_outlives_base),
      cmocka_unit_test(test_views_every_dtype),
      cmocka_unit_test(test_same_dtype_copies),
      cmocka_unit_test(test_transposed_copies),
      /* last: on the current core it overflows (UBSan aborts the run) */
      cmocka_unit_test(test_slice_huge_step),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
