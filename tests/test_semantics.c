/* Op semantics equal to PyTorch's, case by case. Every expected
 * value here is PyTorch 2.15's result on CPU for the same inputs (written
 * down from torch, or worked by hand from its documented rules), never
 * dtorch's own output. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"
#include "threads.h"

/* t's values equal want (n of them, bit for bit: signed zeros count, NaN
 * equals NaN) and its dtype is d */
static void expect(dt_tensor *t, dt_dtype d, const double *want, int n,
                   const char *what) {
  if (!t) fail_msg("%s: %s", what, dt_last_error());
  if (dt_tensor_dtype(t) != d)
    fail_msg("%s: dtype %s, want %s", what, dt_dtype_name(dt_tensor_dtype(t)),
             dt_dtype_name(d));
  double *got = tu_values(t);
  for (int i = 0; i < n; i++) {
    bool same = (isnan(got[i]) && isnan(want[i])) ||
                (got[i] == want[i] && signbit(got[i]) == signbit(want[i]));
    if (!same)
      fail_msg("%s: element %d is %.17g, want %.17g", what, i, got[i], want[i]);
  }
  free(got);
  dt_tensor_release(t);
}

/* t's float64 values within 1e-12 relative of want */
static void expect_close(dt_tensor *t, const double *want, int n,
                         const char *what) {
  if (!t) fail_msg("%s: %s", what, dt_last_error());
  double *got = tu_values(t);
  for (int i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= 1e-12 * fabs(want[i])))
      fail_msg("%s: element %d is %.17g, want %.17g", what, i, got[i], want[i]);
  free(got);
  dt_tensor_release(t);
}

static dt_tensor *T(dt_dtype d, int n, const double *v) {
  return tu_tensor(v, DT_SHAPE(n), d);
}
static dt_tensor *S(dt_dtype d, double v) { /* 0-d */
  return tu_tensor(&v, DT_SHAPE(), d);
}
#define V(...) ((const double[]){__VA_ARGS__})

/* 0-d operands are converted to the common dtype before computing */
static void test_zero_dim_operands_round(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *h1 = T(DT_FLOAT16, 1, V(1.0)), *d2049 = S(DT_FLOAT64, 2049.0);
  expect(dt_add(h1, d2049), DT_FLOAT16, V(2048), 1, "f16 [1] + f64 0-d 2049");
  dt_tensor *d = S(DT_FLOAT64, 1.0004), *h3 = T(DT_FLOAT16, 1, V(3.0));
  expect(dt_mul(d, h3), DT_FLOAT16, V(3.0), 1, "f64 0-d 1.0004 * f16 [3]");
  dt_tensor *b = T(DT_BFLOAT16, 1, V(4.34375)), *e = S(DT_FLOAT64, 4.3493);
  expect(dt_ge(b, e), DT_BOOL, V(1), 1, "bf16 [4.34375] >= f64 0-d 4.3493");
  dt_tensor *u = T(DT_UINT8, 1, V(17)), *m5 = S(DT_INT32, -5);
  expect(dt_maximum(u, m5), DT_UINT8, V(251), 1, "maximum(uint8 [17], int32 0-d -5)");
  dt_tensor *u3 = T(DT_UINT8, 1, V(3));
  expect(dt_lt(m5, u3), DT_BOOL, V(0), 1, "int32 0-d -5 < uint8 [3]");
  /* true division meets in float32: no wrap to uint8 */
  dt_tensor *u10 = T(DT_UINT8, 1, V(10));
  expect(dt_div(u10, m5), DT_FLOAT32, V(-2), 1, "uint8 [10] / int32 0-d -5");
  /* not only 0-d: int64 + f16 tensors meet in f16 */
  dt_tensor *i = T(DT_INT64, 1, V(2049));
  expect(dt_add(i, h1), DT_FLOAT16, V(2048), 1, "int64 [2049] + f16 [1]");
  dt_tensor *h2049 = T(DT_FLOAT16, 1, V(2048)); /* 2049 is not a float16 */
  expect(dt_eq(h2049, d2049), DT_BOOL, V(1), 1, "f16 [2048] == f64 0-d 2049");
  dt_tensor *u100 = T(DT_UINT8, 1, V(100)), *i200 = S(DT_INT64, 200);
  expect(dt_add(u100, i200), DT_UINT8, V(44), 1, "uint8 [100] + int64 0-d 200");
  /* mul/div take a one-element second operand exactly (PyTorch's scalar
   * fast path), a first one rounded */
  dt_tensor *b66 = T(DT_BFLOAT16, 1, V(66)), *i702 = T(DT_INT32, 1, V(-702));
  expect(dt_mul(b66, i702), DT_BFLOAT16, V(-46336), 1, "bf16 [66] * int32 [-702]");
  dt_tensor *b33 = T(DT_BFLOAT16, 1, V(-33)), *i530 = T(DT_INT32, 1, V(530));
  expect(dt_div(b33, i530), DT_BFLOAT16, V(-0.062255859375), 1, "bf16 [-33] / int32 [530]");
  expect(dt_div(h3, d), DT_FLOAT16, V(2.998046875), 1, "f16 [3] / f64 0-d 1.0004");
  dt_tensor *b1 = T(DT_BFLOAT16, 1, V(1)), *i257 = T(DT_INT32, 1, V(257));
  expect(dt_add(b1, i257), DT_BFLOAT16, V(256), 1, "bf16 [1] + int32 [257] (rounded)");
  TU_RELEASE(h1, d2049, d, h3, b, e, u, m5, u3, u10, i, h2049, u100, i200,
             b66, i702, b33, i530, b1, i257);
  tu_leaks_end();
}

/* add, sub and pow round a scalar to a float16/bfloat16 tensor's dtype
 * first; mul and div use it exactly */
static void test_scalars_round_like_torch(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *h = T(DT_FLOAT16, 2, V(1, 3));
  expect(dt_add_scalar(h, 2049), DT_FLOAT16, V(2048, 2052), 2, "f16 [1, 3] + 2049");
  dt_tensor *b = T(DT_BFLOAT16, 1, V(1));
  expect(dt_sub_scalar(b, 257), DT_BFLOAT16, V(-255), 1, "bf16 [1] - 257");
  dt_tensor *h02 = T(DT_FLOAT16, 2, V(0, 2));
  expect(dt_pow_scalar(h02, 1e-45), DT_FLOAT16, V(1, 1), 2, "f16 [0, 2] ** 1e-45");
  dt_tensor *h0 = T(DT_FLOAT16, 1, V(0.0));
  expect(dt_sub_scalar(h0, 1e-45), DT_FLOAT16, V(0.0), 1, "f16 [0] - 1e-45 (+0)");
  dt_tensor *h3 = T(DT_FLOAT16, 1, V(3));
  expect(dt_mul_scalar(h3, 1.0004), DT_FLOAT16, V(3.001953125), 1, "f16 [3] * 1.0004");
  expect(dt_div_scalar(h3, 1.0004), DT_FLOAT16, V(2.998046875), 1, "f16 [3] / 1.0004");
  /* floor_divide keeps the scalar exact, remainder rounds it */
  dt_tensor *h2048 = T(DT_FLOAT16, 1, V(2048));
  expect(dt_floor_divide_scalar(h2048, 1.0004), DT_FLOAT16, V(2047), 1,
         "f16 [2048] // 1.0004");
  dt_tensor_release(h2048);
  /* integer tensors: integral scalars wrap like PyTorch's int arithmetic,
   * also as divisors (uint8 // 257 divides by 1) */
  dt_tensor *u34 = T(DT_UINT8, 1, V(34));
  expect(dt_floor_divide_scalar(u34, 257), DT_UINT8, V(34), 1, "uint8 [34] // 257");
  expect(dt_remainder_scalar(u34, 2049), DT_UINT8, V(0), 1, "uint8 [34] % 2049");
  dt_tensor_release(u34);
  dt_tensor *u = T(DT_UINT8, 1, V(1));
  expect(dt_add_scalar(u, 300), DT_UINT8, V(45), 1, "uint8 [1] + 300");
  dt_tensor *i = T(DT_INT32, 1, V(1));
  expect(dt_add_scalar(i, 2147483648.0), DT_INT32, V(-2147483647), 1,
         "int32 [1] + 2^31");
  TU_RELEASE(h, b, h02, h0, h3, u, i);
  tu_leaks_end();
}

/* pow exponents and masked_fill values are converted with an overflow
 * check ("value cannot be converted to type X without overflow") */
static void test_scalar_overflow_checks(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *i = T(DT_INT32, 1, V(2)), *u = T(DT_UINT8, 1, V(2));
  dt_tensor *h = T(DT_FLOAT16, 1, V(2)), *f = T(DT_FLOAT32, 1, V(2));
  dt_tensor *m = T(DT_BOOL, 1, V(1));
  tu_expect_error(dt_pow_scalar(i, 3e9), DT_ERR_INVALID_ARGUMENT, "dt_pow_scalar",
                  "exponent", "int32", "overflow", NULL);
  tu_expect_error(dt_pow_scalar(u, 300), DT_ERR_INVALID_ARGUMENT, "dt_pow_scalar",
                  "exponent 300", "uint8", NULL);
  tu_expect_error(dt_pow_scalar(h, 1e10), DT_ERR_INVALID_ARGUMENT, "dt_pow_scalar",
                  "float16", "overflow", NULL);
  tu_expect_error(dt_masked_fill(h, m, 70000), DT_ERR_INVALID_ARGUMENT,
                  "dt_masked_fill", "value 70000", "float16", NULL);
  tu_expect_error(dt_masked_fill(h, m, 65519), DT_ERR_INVALID_ARGUMENT,
                  "dt_masked_fill", "value 65519", "float16", NULL);
  tu_expect_error(dt_masked_fill(f, m, 1e39), DT_ERR_INVALID_ARGUMENT,
                  "dt_masked_fill", "float32", "overflow", NULL);
  /* what passes next to them */
  expect(dt_masked_fill(h, m, 65504), DT_FLOAT16, V(65504), 1, "f16 fill 65504");
  expect(dt_masked_fill(h, m, INFINITY), DT_FLOAT16, V(INFINITY), 1, "f16 fill inf");
  expect(dt_masked_fill(u, m, -1), DT_UINT8, V(255), 1, "uint8 fill -1");
  expect(dt_pow_scalar(u, 255), DT_UINT8, V(0), 1, "uint8 [2] ** 255");
  expect(dt_pow_scalar(h, INFINITY), DT_FLOAT16, V(INFINITY), 1, "f16 [2] ** inf");
  TU_RELEASE(i, u, h, f, m);
  tu_leaks_end();
}

/* float -> integer casts of NaN and values out of range give what
 * PyTorch's CPU casts give */
static void test_float_to_int_casts(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *f = T(DT_FLOAT32, 5, V(1e10, INFINITY, NAN, -1e10, -7.9));
  expect(dt_cast(f, DT_INT32), DT_INT32,
         V(-2147483648.0, -2147483648.0, -2147483648.0, -2147483648.0, -7), 5,
         "f32 -> int32");
  dt_tensor *d = T(DT_FLOAT64, 4, V(1e19, INFINITY, NAN, -1e300));
  expect(dt_cast(d, DT_INT64), DT_INT64,
         V(-9223372036854775808.0, -9223372036854775808.0,
           -9223372036854775808.0, -9223372036854775808.0), 4, "f64 -> int64");
  dt_tensor *g = T(DT_FLOAT32, 4, V(INFINITY, 300, -1, NAN));
  expect(dt_cast(g, DT_UINT8), DT_UINT8, V(0, 44, 255, 0), 4, "f32 -> uint8");
  dt_tensor *e = T(DT_FLOAT64, 3, V(4294967301.0, -2147483649.0, 1e10));
  expect(dt_cast(e, DT_UINT8), DT_UINT8, V(5, 255, 0), 3, "f64 -> uint8");
  dt_tensor *h = T(DT_FLOAT16, 2, V(INFINITY, 65504));
  expect(dt_cast(h, DT_INT32), DT_INT32, V(-2147483648.0, 65504), 2, "f16 -> int32");
  TU_RELEASE(f, d, g, e, h);
  tu_leaks_end();
}

/* signed zero and NaN bounds */
static void test_signed_zero_and_nan_bounds(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *z = T(DT_FLOAT32, 3, V(-0.0, -2, NAN));
  expect(dt_relu(z), DT_FLOAT32, V(-0.0, 0.0, NAN), 3, "relu keeps -0.0 and NaN");
  expect(dt_clamp(z, 0, INFINITY), DT_FLOAT32, V(-0.0, 0.0, NAN), 3,
         "clamp(-0.0, 0, inf)");
  /* maximum/minimum keep the first operand on a tie of zeros */
  dt_tensor *za = T(DT_FLOAT32, 2, V(0.0, -0.0)), *zb = T(DT_FLOAT32, 2, V(-0.0, 0.0));
  expect(dt_maximum(za, zb), DT_FLOAT32, V(0.0, -0.0), 2, "maximum(0, -0)");
  expect(dt_minimum(za, zb), DT_FLOAT32, V(0.0, -0.0), 2, "minimum(0, -0)");
  TU_RELEASE(za, zb);
  dt_tensor *x = T(DT_FLOAT64, 2, V(1, 5));
  expect(dt_clamp(x, NAN, 3), DT_FLOAT64, V(NAN, NAN), 2, "clamp min NaN");
  expect(dt_clamp(x, 0, NAN), DT_FLOAT64, V(NAN, NAN), 2, "clamp max NaN");
  dt_tensor *i = T(DT_INT32, 2, V(1, 5));
  expect(dt_clamp(i, NAN, 3), DT_FLOAT32, V(NAN, NAN), 2, "clamp(int, NaN) is float");
  dt_tensor *b = T(DT_BOOL, 2, V(1, 0));
  expect(dt_clamp(b, 0, 1), DT_INT64, V(1, 0), 2, "clamp(bool, 0, 1)");
  expect(dt_clamp(b, 0.5, 1), DT_FLOAT32, V(1, 0.5), 2, "clamp(bool, 0.5, 1)");
  TU_RELEASE(z, x, i, b);
  tu_leaks_end();
}

/* what PyTorch refuses, refused with its reason */
static void test_torch_refusals(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *f = T(DT_FLOAT32, 1, V(1)), *b = T(DT_BOOL, 2, V(1, 0));
  dt_tensor *b1 = T(DT_BOOL, 1, V(1));
  dt_tensor *i = T(DT_INT32, 1, V(1)), *l = T(DT_INT64, 1, V(1));
  dt_tensor *u = T(DT_UINT8, 1, V(1));
  tu_expect_error(dt_sub(f, b1), DT_ERR_DTYPE, "dt_sub", "bool", NULL);
  tu_expect_error(dt_sub(b1, f), DT_ERR_DTYPE, "dt_sub", "bool", NULL);
  tu_expect_error(dt_abs(b), DT_ERR_DTYPE, "dt_abs", "bool", NULL);
  tu_expect_error(dt_relu(b), DT_ERR_DTYPE, "dt_relu", "bool", NULL);
  tu_expect_error(dt_silu(i), DT_ERR_DTYPE, "dt_silu", "int32", NULL);
  tu_expect_error(dt_gelu(l), DT_ERR_DTYPE, "dt_gelu", "int64", NULL);
  tu_expect_error(dt_gelu_tanh(u), DT_ERR_DTYPE, "dt_gelu_tanh", "uint8", NULL);
  tu_expect_error(dt_argmax(b, NULL, 0, false), DT_ERR_DTYPE, "dt_argmax",
                  "bool", NULL);
  tu_expect_error(dt_argmin(b, NULL, 0, false), DT_ERR_DTYPE, "dt_argmin",
                  "bool", NULL);
  tu_expect_error(dt_masked_fill(f, u, 2), DT_ERR_DTYPE, "dt_masked_fill",
                  "mask", "uint8", NULL);
  TU_RELEASE(f, b, b1, i, l, u);
  tu_leaks_end();
}

/* masked_fill's result has the broadcast shape of the input and the mask */
static void test_masked_fill_broadcasts(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *a = S(DT_FLOAT32, 0.5), *m = T(DT_BOOL, 2, V(0, 1));
  expect(dt_masked_fill(a, m, 2), DT_FLOAT32, V(0.5, 2), 2, "0-d a, mask [2]");
  dt_tensor *c = tu_tensor(V(1, 2, 3), DT_SHAPE(3, 1), DT_FLOAT32);
  dt_tensor *k = tu_tensor(V(1, 0, 1, 0), DT_SHAPE(1, 4), DT_BOOL);
  dt_tensor *r = dt_masked_fill(c, k, 9);
  assert_non_null(r);
  dt_shape rs = dt_tensor_shape(r);
  assert_true(rs.ndim == 2 && rs.dims[0] == 3 && rs.dims[1] == 4);
  expect(r, DT_FLOAT32, V(9, 1, 9, 1, 9, 2, 9, 2, 9, 3, 9, 3), 12,
         "a [3, 1], mask [1, 4]");
  TU_RELEASE(a, m, c, k);
  tu_leaks_end();
}

/* layer_norm / rms_norm with weight and bias of another floating dtype:
 * the result has x's dtype */
static void test_norm_mixed_dtypes(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *x = tu_tensor(V(1, 2, 3, 4), DT_SHAPE(1, 4), DT_FLOAT16);
  dt_tensor *w = T(DT_FLOAT32, 4, V(1, 0.5, 2, 1)), *b = T(DT_FLOAT32, 4, V(0, 1, 0, -1));
  expect(dt_layer_norm(x, w, b, 1e-5), DT_FLOAT16,
         V(-1.341796875, 0.7763671875, 0.89453125, 0.341552734375), 4,
         "layer_norm f16 x, f32 weight and bias");
  expect(dt_rms_norm(x, w, 1e-6), DT_FLOAT16,
         V(0.365234375, 0.365234375, 2.19140625, 1.4609375), 4,
         "rms_norm f16 x, f32 weight");
  TU_RELEASE(x, w, b);
  tu_leaks_end();
}

/* linear with a 1-D weight, and biases that broadcast */
static void test_linear_shapes(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *x = tu_tensor(V(1, 2, 3, 4), DT_SHAPE(2, 2), DT_FLOAT32);
  dt_tensor *w1 = T(DT_FLOAT32, 2, V(1, -1)), *x1 = T(DT_FLOAT32, 2, V(1, 2));
  dt_tensor *h = S(DT_FLOAT32, 0.5);
  expect(dt_linear(x, w1, NULL), DT_FLOAT32, V(-1, -1), 2, "x [2, 2] . w [2]");
  expect(dt_linear(x1, w1, h), DT_FLOAT32, V(-0.5), 1, "x [2] . w [2] + 0.5");
  tu_expect_error(dt_linear(x, w1, h), DT_ERR_SHAPE, "dt_linear", "1-D weight",
                  NULL);
  dt_tensor *w = tu_tensor(V(1, 0, 0, 1, 1, 1), DT_SHAPE(3, 2), DT_FLOAT32);
  expect(dt_linear(x, w, h), DT_FLOAT32, V(1.5, 2.5, 3.5, 3.5, 4.5, 7.5), 6,
         "bias 0-d");
  dt_tensor *b1 = T(DT_FLOAT32, 1, V(0.5));
  expect(dt_linear(x, w, b1), DT_FLOAT32, V(1.5, 2.5, 3.5, 3.5, 4.5, 7.5), 6,
         "bias [1]");
  dt_tensor *b23 = tu_tensor(V(1, 2, 3, 4, 5, 6), DT_SHAPE(2, 3), DT_FLOAT32);
  expect(dt_linear(x, w, b23), DT_FLOAT32, V(2, 4, 6, 7, 9, 13), 6, "bias [2, 3]");
  dt_tensor *x3 = dt_ones(DT_SHAPE(2, 2, 2), NULL);
  expect(dt_linear(x3, w, b23), DT_FLOAT32,
         V(2, 3, 5, 5, 6, 8, 2, 3, 5, 5, 6, 8), 12, "x [2, 2, 2], bias [2, 3]");
  dt_tensor *b33 = dt_ones(DT_SHAPE(3, 3), NULL);
  tu_expect_error(dt_linear(x, w, b33), DT_ERR_SHAPE, "dt_linear", "bias",
                  "[3, 3]", "[2, 3]", NULL);
  TU_RELEASE(x, w1, x1, h, w, b1, b23, x3, b33);
  tu_leaks_end();
}

/* var of constant rows of huge magnitude is 0, along the last dim (row
 * path) and along a leading dim (tile path); PyTorch gives 0 for two such
 * rows but 2.97e28 for one (dtorch: 0, the exact value) */
static void test_var_constant_rows(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *r = dt_full(DT_SHAPE(2, 3), 1e30, &(dt_tensor_options){.dtype = DT_FLOAT64});
  expect(dt_var(r, (int[]){1}, 1, 1, false), DT_FLOAT64, V(0, 0), 2, "var rows");
  dt_tensor *c = dt_full(DT_SHAPE(3, 2), 1e30, &(dt_tensor_options){.dtype = DT_FLOAT64});
  expect(dt_var(c, (int[]){0}, 1, 1, false), DT_FLOAT64, V(0, 0), 2, "var columns");
  dt_tensor *one = dt_full(DT_SHAPE(3), 1e30, &(dt_tensor_options){.dtype = DT_FLOAT64});
  expect(dt_var(one, NULL, 0, 1, false), DT_FLOAT64, V(0), 1, "var of one row");
  TU_RELEASE(r, c, one);
  tu_leaks_end();
}

/* numerics where dtorch keeps the exact value and PyTorch does not (the
 * README lists them); and gelu at the infinities, where both agree */
static void test_numerics_kept(void **state) {
  (void)state;
  tu_leaks_begin();
  /* mean accumulates in double: 3e38 (PyTorch float32: inf) */
  dt_tensor *m = T(DT_FLOAT32, 2, V(3e38, 3e38));
  expect(dt_mean(m, NULL, 0, false), DT_FLOAT32, V((double)3e38f), 1, "mean f32 3e38");
  /* float16 log_softmax rounds once, from float32 (PyTorch: -1.439453125,
   * -0.43994140625 for the last two) */
  dt_tensor *h = tu_tensor(V(1, 2, 3, 4), DT_SHAPE(1, 4), DT_FLOAT16);
  expect(dt_log_softmax(h, 1), DT_FLOAT16,
         V(-3.439453125, -2.439453125, -1.4404296875, -0.440185546875), 4,
         "log_softmax f16");
  /* layer_norm of a constant float16 row is 0 (PyTorch: 9.5e-7 for 0.1) */
  dt_tensor *c = tu_tensor(V(0.1, 0.1, 0.1, 0.1), DT_SHAPE(1, 4), DT_FLOAT16);
  expect(dt_layer_norm(c, NULL, NULL, 1e-5), DT_FLOAT16, V(0, 0, 0, 0), 4,
         "layer_norm constant f16 row");
  /* gelu(inf) = inf, gelu(-inf) = NaN in both (the exact limit is 0) */
  dt_tensor *g = T(DT_FLOAT32, 2, V(INFINITY, -INFINITY));
  expect(dt_gelu(g), DT_FLOAT32, V(INFINITY, NAN), 2, "gelu at the infinities");
  expect(dt_gelu_tanh(g), DT_FLOAT32, V(INFINITY, NAN), 2, "gelu_tanh at the infinities");
  TU_RELEASE(m, h, c, g);
  tu_leaks_end();
}

/* empty inputs PyTorch accepts */
static void test_empty_inputs(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *e = dt_zeros(DT_SHAPE(0, 3), &(dt_tensor_options){.dtype = DT_INT64});
  dt_tensor *s = dt_softmax(e, 1), *l = dt_log_softmax(e, 0);
  assert_true(s && l);
  assert_int_equal(dt_tensor_dtype(s), DT_INT64);
  assert_int_equal(dt_tensor_numel(l), 0);
  dt_tensor *a = dt_zeros(DT_SHAPE(2, 0), &(dt_tensor_options){.dtype = DT_BOOL});
  dt_tensor *b = dt_zeros(DT_SHAPE(0, 3), &(dt_tensor_options){.dtype = DT_BOOL});
  expect(dt_matmul(a, b), DT_BOOL, V(0, 0, 0, 0, 0, 0), 6, "bool [2, 0] @ [0, 3]");
  dt_tensor *z = dt_zeros(DT_SHAPE(0), NULL);
  dt_tensor *c = dt_cat((dt_tensor *[]){z, z}, 2, 1); /* legacy: [0]s skipped */
  assert_non_null(c);
  assert_int_equal(dt_tensor_numel(c), 0);
  dt_tensor *o = dt_ones(DT_SHAPE(2, 3), NULL);
  expect(dt_cat((dt_tensor *[]){z, o}, 2, 1), DT_FLOAT32, V(1, 1, 1, 1, 1, 1), 6,
         "cat [0] and [2, 3] along dim 1");
  TU_RELEASE(e, s, l, a, b, z, c, o);
  tu_leaks_end();
}

/* cross_entropy as F.cross_entropy: [C] logits, K-dimensional logits,
 * probability targets, label smoothing (PyTorch's float64 results) */
static void test_cross_entropy_forms(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *x = T(DT_FLOAT64, 3, V(1, 2, 3)), *t0 = S(DT_INT64, 2);
  dt_tensor *t1 = T(DT_INT64, 1, V(2));
  expect_close(dt_cross_entropy(x, t0, DT_REDUCTION_MEAN, -100),
               V(0.4076059644443804), 1, "[C] logits, 0-d target");
  dt_tensor *l1 = dt_cross_entropy(x, t1, DT_REDUCTION_NONE, -100);
  assert_non_null(l1);
  assert_int_equal(dt_tensor_ndim(l1), 0);
  expect_close(l1, V(0.4076059644443804), 1, "[C] logits, [1] target");
  dt_tensor *X = tu_tensor(V(1, 2, 0, 1, 3, -1, 0.5, 0, 1, 1, 2, 2),
                           DT_SHAPE(2, 3, 2), DT_FLOAT64);
  dt_tensor *K = tu_tensor(V(0, 2, 1, 0), DT_SHAPE(2, 2), DT_INT64);
  dt_tensor *kn = dt_cross_entropy(X, K, DT_REDUCTION_NONE, -100);
  assert_non_null(kn);
  assert_true(dt_tensor_ndim(kn) == 2);
  expect_close(kn, V(2.1698460195562856, 3.349012216768186, 1.464368784107945,
                     2.4076059644443806), 4, "[N, C, d] none");
  expect_close(dt_cross_entropy(X, K, DT_REDUCTION_MEAN, -100),
               V(2.347708246219199), 1, "[N, C, d] mean");
  expect_close(dt_cross_entropy(X, K, DT_REDUCTION_SUM, -100),
               V(9.390832984876797), 1, "[N, C, d] sum");
  dt_tensor *Ki = tu_tensor(V(0, -100, 1, 0), DT_SHAPE(2, 2), DT_INT64);
  expect_close(dt_cross_entropy(X, Ki, DT_REDUCTION_MEAN, -100),
               V(2.0139402560362036), 1, "[N, C, d] ignore_index");
  dt_tensor *L = tu_tensor(V(1, 2, 3, 0, 0, 1), DT_SHAPE(2, 3), DT_FLOAT64);
  dt_tensor *P = tu_tensor(V(0.2, 0.3, 0.5, 1, 0, 0), DT_SHAPE(2, 3), DT_FLOAT64);
  expect_close(dt_cross_entropy(L, P, DT_REDUCTION_MEAN, -100),
               V(1.3295253391882158), 1, "probabilities mean");
  expect_close(dt_cross_entropy(L, P, DT_REDUCTION_NONE, -100),
               V(1.1076059644443805, 1.551444713932051), 2, "probabilities none");
  dt_tensor *I = T(DT_INT64, 2, V(2, 0)), *Ii = T(DT_INT64, 2, V(2, -100));
  expect_close(dt_cross_entropy_smoothed(L, I, DT_REDUCTION_MEAN, -100, 0.1),
               V(1.0128586725215492), 1, "label_smoothing 0.1");
  expect_close(dt_cross_entropy_smoothed(L, I, DT_REDUCTION_NONE, -100, 0.1),
               V(0.5076059644443804, 1.5181113805987176), 2, "smoothing none");
  expect_close(dt_cross_entropy_smoothed(L, P, DT_REDUCTION_MEAN, -100, 0.1),
               V(1.327858672521549), 1, "smoothing with probabilities");
  expect_close(dt_cross_entropy_smoothed(L, Ii, DT_REDUCTION_MEAN, -100, 0.1),
               V(0.5076059644443804), 1, "smoothing with ignore_index");
  TU_RELEASE(x, t0, t1, X, K, Ki, L, P, I, Ii);
  tu_leaks_end();
}

/* floor_divide and remainder with PyTorch's sign rules */
static void test_floor_divide_remainder(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = T(DT_INT64, 4, V(7, -7, 7, -7)), *b = T(DT_INT64, 4, V(2, 2, -2, -2));
  expect(dt_floor_divide(a, b), DT_INT64, V(3, -4, -4, 3), 4, "int64 //");
  expect(dt_remainder(a, b), DT_INT64, V(1, 1, -1, -1), 4, "int64 %");
  dt_tensor *x = T(DT_FLOAT32, 8, V(7.5, -7.5, 7.5, -7.5, 1, -1, 0, -0.0));
  dt_tensor *y = T(DT_FLOAT32, 8, V(2, 2, -2, -2, 0, 0, 3, 3));
  expect(dt_floor_divide(x, y), DT_FLOAT32,
         V(3, -4, -4, 3, INFINITY, -INFINITY, 0.0, -0.0), 8, "float32 //");
  dt_tensor *p = T(DT_FLOAT32, 6, V(7.5, -7.5, 7.5, -7.5, 1, 0));
  dt_tensor *q = T(DT_FLOAT32, 6, V(2, 2, -2, -2, 0, -3));
  expect(dt_remainder(p, q), DT_FLOAT32, V(1.5, 0.5, -0.5, -1.5, NAN, 0.0), 6,
         "float32 %");
  /* integer division by zero: at the call for a scalar, at the fetch for a
   * tensor divisor (the kernel runs on the rank) */
  dt_tensor *one = T(DT_INT64, 1, V(1)), *zero = T(DT_INT64, 1, V(0));
  tu_expect_error(dt_floor_divide_scalar(one, 0), DT_ERR_INVALID_ARGUMENT,
                  "dt_floor_divide_scalar", "division by zero", NULL);
  tu_expect_error(dt_remainder_scalar(one, 0), DT_ERR_INVALID_ARGUMENT,
                  "dt_remainder_scalar", "division by zero", NULL);
  int64_t out[1];
  dt_tensor *fd = dt_floor_divide(one, zero), *rm = dt_remainder(one, zero);
  assert_true(fd && rm);
  tu_expect_status(dt_to_host(fd, out, sizeof out), DT_ERR_INVALID_ARGUMENT,
                   "dt_floor_divide", "division by zero", NULL);
  tu_expect_status(dt_to_host(rm, out, sizeof out), DT_ERR_INVALID_ARGUMENT,
                   "dt_remainder", "division by zero", NULL);
  /* promotion and the common dtype: uint8 7 // int64 0-d -2 is 7 // 254 */
  dt_tensor *u = T(DT_UINT8, 1, V(7)), *m2 = S(DT_INT64, -2);
  expect(dt_floor_divide(u, m2), DT_UINT8, V(0), 1, "uint8 [7] // int64 0-d -2");
  dt_tensor *i = T(DT_INT32, 1, V(7));
  expect(dt_remainder_scalar(i, 2.5), DT_FLOAT32, V(2), 1, "int32 [7] % 2.5");
  expect(dt_floor_divide_scalar(i, 2.5), DT_FLOAT32, V(2), 1, "int32 [7] // 2.5");
  dt_tensor *mn = T(DT_INT64, 1, V(-9223372036854775808.0)), *m1 = T(DT_INT64, 1, V(-1));
  expect(dt_floor_divide(mn, m1), DT_INT64, V(-9223372036854775808.0), 1,
         "INT64_MIN // -1 wraps");
  expect(dt_remainder(mn, m1), DT_INT64, V(0), 1, "INT64_MIN % -1");
  dt_tensor *h5 = T(DT_FLOAT16, 1, V(5)), *h3 = T(DT_FLOAT16, 1, V(0.3));
  expect(dt_floor_divide(h5, h3), DT_FLOAT16, V(16), 1, "f16 5 // f16 0.3");
  expect(dt_remainder_scalar(h5, 0.3), DT_FLOAT16, V(0.19921875), 1,
         "f16 5 % 0.3 (the scalar rounded to f16 first)");
  dt_tensor *bt = T(DT_BOOL, 1, V(1));
  tu_expect_error(dt_floor_divide(bt, bt), DT_ERR_DTYPE, "dt_floor_divide", "bool", NULL);
  tu_expect_error(dt_remainder(bt, bt), DT_ERR_DTYPE, "dt_remainder", "bool", NULL);
  expect(dt_floor_divide_scalar(bt, 2), DT_INT64, V(0), 1, "bool // 2");
  expect(dt_remainder_scalar(bt, 2), DT_INT64, V(1), 1, "bool % 2");
  TU_RELEASE(a, b, x, y, p, q, one, zero, fd, rm, u, m2, i, mn, m1, h5, h3, bt);
  tu_leaks_end();
}

/* the new ops from several threads at once, each checking its values */
static void new_ops_body(void *arg, int i) {
  (void)arg;
  for (int k = 0; k < 200; k++) {
    double a = 7 + i + k, q = floor(a / -2.0), r = a - q * -2.0;
    dt_tensor *x = tu_tensor(&a, DT_SHAPE(1), DT_INT64);
    dt_tensor *fd = dt_floor_divide_scalar(x, -2), *rm = dt_remainder_scalar(x, -2);
    dt_tensor *ff = dt_floor_divide(x, x);
    int64_t v[3] = {0};
    TU_CHECK(fd && dt_to_host(fd, &v[0], 8) == DT_OK && v[0] == (int64_t)q,
             "thread %d: %g // -2 = %lld", i, a, (long long)v[0]);
    TU_CHECK(rm && dt_to_host(rm, &v[1], 8) == DT_OK && v[1] == (int64_t)r,
             "thread %d: %g %% -2 = %lld", i, a, (long long)v[1]);
    TU_CHECK(ff && dt_to_host(ff, &v[2], 8) == DT_OK && v[2] == 1,
             "thread %d: x // x = %lld", i, (long long)v[2]);
    double l[3] = {1, 2, 3};
    dt_tensor *lg = tu_tensor(l, DT_SHAPE(3), DT_FLOAT64);
    dt_tensor *tg = tu_tensor((double[]){(double)(k % 3)}, DT_SHAPE(), DT_INT64);
    dt_tensor *ce = dt_cross_entropy_smoothed(lg, tg, DT_REDUCTION_SUM, -100, 0.2);
    double lse = log(exp(1.0) + exp(2.0) + exp(3.0)), got = 0;
    double want = 0.8 * (lse - l[k % 3]) + 0.2 * (lse - 2);
    TU_CHECK(ce && dt_to_host(ce, &got, 8) == DT_OK && fabs(got - want) < 1e-12,
             "thread %d: cross_entropy %.17g, want %.17g", i, got, want);
    TU_RELEASE(x, fd, rm, ff, lg, tg, ce);
  }
}

static void test_new_ops_from_threads(void **state) {
  (void)state;
  tu_run_threads(4, new_ops_body, NULL);
  TU_ASSERT_NO_THREAD_FAILURES();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_zero_dim_operands_round),
      cmocka_unit_test(test_scalars_round_like_torch),
      cmocka_unit_test(test_scalar_overflow_checks),
      cmocka_unit_test(test_float_to_int_casts),
      cmocka_unit_test(test_signed_zero_and_nan_bounds),
      cmocka_unit_test(test_torch_refusals),
      cmocka_unit_test(test_floor_divide_remainder),
      cmocka_unit_test(test_masked_fill_broadcasts),
      cmocka_unit_test(test_norm_mixed_dtypes),
      cmocka_unit_test(test_linear_shapes),
      cmocka_unit_test(test_var_constant_rows),
      cmocka_unit_test(test_numerics_kept),
      cmocka_unit_test(test_empty_inputs),
      cmocka_unit_test(test_cross_entropy_forms),
      cmocka_unit_test(test_new_ops_from_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
