/* Binary pointwise ops and their scalar forms against a double-precision
 * reference: every dtype, broadcasting, non-contiguous inputs, size-0 and
 * size-1 dims, 0-d tensors and type promotion. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "testutil.h"

typedef dt_tensor *(*bin_fn)(dt_tensor *, dt_tensor *);
typedef enum { K_ARITH, K_DIV, K_CMP, K_LOGIC } kind;
typedef struct binop {
  const char *name;
  bin_fn fn;
  kind k;
  double (*ref)(double, double);
} binop;

static double r_add(double a, double b) { return a + b; }
static double r_sub(double a, double b) { return a - b; }
static double r_mul(double a, double b) { return a * b; }
static double r_div(double a, double b) { return a / b; }
static double r_pow(double a, double b) { return pow(a, b); }
static double r_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double r_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }
static double r_eq(double a, double b) { return a == b; }
static double r_ne(double a, double b) { return a != b; }
static double r_lt(double a, double b) { return a < b; }
static double r_le(double a, double b) { return a <= b; }
static double r_gt(double a, double b) { return a > b; }
static double r_ge(double a, double b) { return a >= b; }
static double r_and(double a, double b) { return a != 0 && b != 0; }
static double r_or(double a, double b) { return a != 0 || b != 0; }

static const binop ops[] = {
    {"add", dt_add, K_ARITH, r_add},  {"sub", dt_sub, K_ARITH, r_sub},
    {"mul", dt_mul, K_ARITH, r_mul},  {"div", dt_div, K_DIV, r_div},
    {"pow", dt_pow, K_ARITH, r_pow},  {"maximum", dt_maximum, K_ARITH, r_max},
    {"minimum", dt_minimum, K_ARITH, r_min},
    {"eq", dt_eq, K_CMP, r_eq},       {"ne", dt_ne, K_CMP, r_ne},
    {"lt", dt_lt, K_CMP, r_lt},       {"le", dt_le, K_CMP, r_le},
    {"gt", dt_gt, K_CMP, r_gt},       {"ge", dt_ge, K_CMP, r_ge},
    {"logical_and", dt_logical_and, K_LOGIC, r_and},
    {"logical_or", dt_logical_or, K_LOGIC, r_or},
};

/* the value stored in dtype d for the exact result v (integers wrap) */
static double store_as(double v, dt_dtype d) {
  if (d == DT_BOOL) return v != 0;
  if (d == DT_INT32 || d == DT_INT64 || d == DT_UINT8) {
    if (isnan(v) || isinf(v)) return NAN; /* not compared */
    double t = trunc(v);
    if (d == DT_UINT8) return fmod(fmod(t, 256) + 256, 256);
    if (d == DT_INT32) {
      double m = fmod(t, 4294967296.0);
      if (m >= 2147483648.0) m -= 4294967296.0;
      if (m < -2147483648.0) m += 4294967296.0;
      return m;
    }
    return t;
  }
  return tu_round(v, d);
}

static dt_dtype expect_dtype(const binop *op, dt_dtype r) {
  if (op->k == K_CMP || op->k == K_LOGIC) return DT_BOOL;
  if (op->k == K_DIV && !tu_is_float(r)) return DT_FLOAT32;
  return r;
}

/* input ranges that keep every op well defined for the dtype */
static void ranges(const binop *op, dt_dtype d, int which, double *lo,
                   double *hi) {
  if (d == DT_UINT8) { *lo = 0; *hi = op->fn == dt_pow ? 3 : 15; return; }
  if (op->fn == dt_pow) {
    if (tu_is_float(d)) { *lo = which ? -2 : 0.5; *hi = which ? 2 : 2; }
    else { *lo = which ? 0 : -3; *hi = which ? 4 : 3; }
    return;
  }
  if (op->k == K_DIV && which == 1 && tu_is_float(d)) { *lo = 0.5; *hi = 4; return; }
  if (tu_is_float(d)) { *lo = -4; *hi = 4; } else { *lo = -20; *hi = 20; }
}

static void check_op(const binop *op, dt_shape sa, dt_dtype da, dt_shape sb,
                     dt_dtype db, dt_dtype want_dtype, bool noncontig,
                     uint64_t seed) {
  double lo, hi, *va, *vb;
  ranges(op, da, 0, &lo, &hi);
  dt_tensor *a = tu_random(sa, da, seed, lo, hi, &va);
  ranges(op, db, 1, &lo, &hi);
  dt_tensor *b = tu_random(sb, db, seed + 1, lo, hi, &vb);
  if (op->k == K_DIV && !tu_is_float(db)) /* avoid 0/0 in integer division */
    for (int64_t i = 0; i < tu_numel(sb); i++) if (vb[i] == 0) vb[i] = 3;
  if (op->k == K_DIV && !tu_is_float(db)) {
    dt_tensor_release(b);
    b = tu_tensor(vb, sb, db);
  }
  if (noncontig) {
    tu_make_noncontig(&a);
    tu_make_noncontig(&b);
    assert_false(dt_tensor_is_contiguous(a) && tu_numel(sa) > 1);
  }
  dt_tensor *o = op->fn(a, b);
  if (!o) fail_msg("%s: %s", op->name, dt_last_error());
  assert_int_equal(dt_tensor_dtype(o), want_dtype);
  /* broadcast shape, computed here */
  dt_shape so = {.ndim = sa.ndim > sb.ndim ? sa.ndim : sb.ndim};
  for (int i = 0; i < so.ndim; i++) {
    int ia = sa.ndim - so.ndim + i, ib = sb.ndim - so.ndim + i;
    int64_t x = ia >= 0 ? sa.dims[ia] : 1, y = ib >= 0 ? sb.dims[ib] : 1;
    so.dims[i] = x == 1 ? y : x;
  }
  dt_shape got = dt_tensor_shape(o);
  assert_int_equal(got.ndim, so.ndim);
  for (int i = 0; i < so.ndim; i++) assert_int_equal(got.dims[i], so.dims[i]);
  int64_t n = tu_numel(so);
  double *vo = tu_values(o), *ref = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) {
    double x = va[tu_bcast_index(i, so, sa)], y = vb[tu_bcast_index(i, so, sb)];
    ref[i] = store_as(op->ref(x, y), want_dtype);
    if (!tu_is_float(want_dtype) && isnan(ref[i])) ref[i] = vo[i];
  }
  double rtol = tu_rtol(want_dtype);
  /* float16/bfloat16 compute in float32 then round: one extra rounding;
   * pow goes through powf */
  if (want_dtype == DT_FLOAT16 || want_dtype == DT_BFLOAT16) rtol *= 2;
  if (op->fn == dt_pow && want_dtype == DT_FLOAT32) rtol = 1e-6;
  char what[160];
  snprintf(what, sizeof what, "%s(%s, %s)%s", op->name, dt_dtype_name(da),
           dt_dtype_name(db), noncontig ? " non-contiguous" : "");
  tu_assert_close(vo, ref, n, rtol, 0, what);
  free(vo); free(ref); free(va); free(vb);
  dt_tensor_release(o); dt_tensor_release(a); dt_tensor_release(b);
}

static const dt_shape shapes_a[] = {
    {2, {3, 4}}, {2, {3, 1}}, {3, {2, 3, 4}}, {2, {0, 4}}, {1, {1}},
    {0, {0}},    {4, {2, 1, 3, 1}}, {1, {1000}},
};
static const dt_shape shapes_b[] = {
    {2, {3, 4}}, {2, {1, 4}}, {1, {4}},   {2, {1, 4}}, {1, {5}},
    {2, {2, 3}}, {3, {5, 1, 4}}, {1, {1000}},
};
#define NSHAPES (sizeof shapes_a / sizeof *shapes_a)

static void test_binary_same_dtype(void **state) {
  (void)state;
  tu_leaks_begin();
  uint64_t seed = 1;
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
    for (int di = 0; di < 8; di++) {
      dt_dtype d = tu_all_dtypes[di];
      if (d == DT_BOOL && (ops[o].fn == dt_sub || ops[o].fn == dt_pow ||
                           ops[o].k == K_DIV))
        continue; /* bool sub is an error (test_errors); pow/div promote */
      for (size_t s = 0; s < NSHAPES; s++)
        for (int nc = 0; nc < 2; nc++)
          check_op(&ops[o], shapes_a[s], d, shapes_b[s], d,
                   expect_dtype(&ops[o], d), nc, seed++);
    }
  tu_leaks_end();
}

/* promotion pairs with the result dtype worked out by hand from PyTorch's
 * promote_types table */
static void test_binary_promotion(void **state) {
  (void)state;
  tu_leaks_begin();
  static const struct { dt_dtype a, b, r; } pairs[] = {
      {DT_INT32, DT_FLOAT16, DT_FLOAT16}, {DT_UINT8, DT_INT32, DT_INT32},
      {DT_BOOL, DT_UINT8, DT_UINT8},      {DT_FLOAT16, DT_BFLOAT16, DT_FLOAT32},
      {DT_INT64, DT_FLOAT32, DT_FLOAT32}, {DT_FLOAT32, DT_FLOAT64, DT_FLOAT64},
      {DT_INT32, DT_INT64, DT_INT64},     {DT_BOOL, DT_FLOAT64, DT_FLOAT64},
      {DT_BFLOAT16, DT_FLOAT32, DT_FLOAT32}, {DT_UINT8, DT_BFLOAT16, DT_BFLOAT16},
  };
  uint64_t seed = 1000;
  for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++)
    for (int o = 0; o < 3; o++) /* add, sub, mul */ {
      /* sub with a bool operand is an error, as in PyTorch */
      if (o == 1 && (pairs[p].a == DT_BOOL || pairs[p].b == DT_BOOL)) continue;
      check_op(&ops[o], DT_SHAPE(3, 4), pairs[p].a, DT_SHAPE(4), pairs[p].b,
               pairs[p].r, false, seed++);
    }
  /* comparisons promote to compare, then give bool */
  check_op(&ops[10], DT_SHAPE(6), DT_INT32, DT_SHAPE(6), DT_FLOAT32, DT_BOOL,
           false, seed++);
  /* integer true division gives float32 */
  check_op(&ops[3], DT_SHAPE(5), DT_INT64, DT_SHAPE(5), DT_INT32, DT_FLOAT32,
           true, seed++);
  tu_leaks_end();
}

/* a 0-d tensor does not decide the dtype within its category */
static void test_zero_dim_promotion(void **state) {
  (void)state;
  tu_leaks_begin();
  double x = 2.5, one = 3;
  dt_tensor *s64 = tu_tensor(&x, DT_SHAPE(), DT_FLOAT64);
  dt_tensor *si = tu_tensor(&one, DT_SHAPE(), DT_INT64);
  dt_tensor *h = tu_random(DT_SHAPE(4), DT_FLOAT16, 5, -1, 1, NULL);
  dt_tensor *i8 = tu_random(DT_SHAPE(4), DT_UINT8, 6, 0, 9, NULL);
  dt_tensor *r1 = dt_add(h, s64);  /* float16 + 0-d float64 → float16 */
  dt_tensor *r2 = dt_add(i8, si);  /* uint8 + 0-d int64 → uint8 */
  dt_tensor *r3 = dt_add(i8, s64); /* uint8 + 0-d float64 → float64 */
  dt_tensor *r4 = dt_add(s64, si); /* both 0-d → float64 */
  assert_int_equal(dt_tensor_dtype(r1), DT_FLOAT16);
  assert_int_equal(dt_tensor_dtype(r2), DT_UINT8);
  assert_int_equal(dt_tensor_dtype(r3), DT_FLOAT64);
  assert_int_equal(dt_tensor_dtype(r4), DT_FLOAT64);
  assert_int_equal(dt_tensor_ndim(r4), 0);
  double *v = tu_values(r4);
  assert_true(v[0] == 5.5);
  free(v);
  TU_RELEASE(s64, si, h, i8, r1, r2, r3, r4);
  tu_leaks_end();
}

typedef dt_tensor *(*sca_fn)(dt_tensor *, double);
static void check_scalar(const char *name, sca_fn fn, double (*ref)(double, double),
                         dt_dtype d, double s, dt_dtype want, bool nc) {
  double *va;
  bool is_pow = fn == dt_pow_scalar;
  double lo = d == DT_UINT8 ? 0 : is_pow && tu_is_float(d) ? 0.5 : -9;
  dt_tensor *a = tu_random(DT_SHAPE(3, 5), d, 77, lo, d == DT_UINT8 ? 9 : 3, &va);
  if (nc) tu_make_noncontig(&a);
  dt_tensor *o = fn(a, s);
  if (!o) fail_msg("%s: %s", name, dt_last_error());
  assert_int_equal(dt_tensor_dtype(o), want);
  double *vo = tu_values(o), ref_v[15];
  for (int i = 0; i < 15; i++) ref_v[i] = store_as(ref(va[i], s), want);
  double rtol = tu_rtol(want) * (want == DT_FLOAT16 || want == DT_BFLOAT16 ? 2 : 1);
  if (is_pow && want == DT_FLOAT32) rtol = 1e-6;
  char what[128];
  snprintf(what, sizeof what, "%s(%s, %g)", name, dt_dtype_name(d), s);
  tu_assert_close(vo, ref_v, 15, rtol, 0, what);
  free(vo); free(va);
  dt_tensor_release(o); dt_tensor_release(a);
}

static void test_scalar_forms(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int di = 0; di < 8; di++) {
    dt_dtype d = tu_all_dtypes[di];
    bool fl = tu_is_float(d);
    dt_dtype int_keep = d == DT_BOOL ? DT_INT64 : d;
    for (int nc = 0; nc < 2; nc++) {
      check_scalar("add_scalar", dt_add_scalar, r_add, d, 2, int_keep, nc);
      check_scalar("add_scalar", dt_add_scalar, r_add, d, 0.5,
                   fl ? d : DT_FLOAT32, nc);
      if (d != DT_BOOL)
        check_scalar("sub_scalar", dt_sub_scalar, r_sub, d, 3, d, nc);
      check_scalar("mul_scalar", dt_mul_scalar, r_mul, d, -2, int_keep, nc);
      check_scalar("mul_scalar", dt_mul_scalar, r_mul, d, 1.5,
                   fl ? d : DT_FLOAT32, nc);
      check_scalar("div_scalar", dt_div_scalar, r_div, d, 4,
                   fl ? d : DT_FLOAT32, nc);
      check_scalar("pow_scalar", dt_pow_scalar, r_pow, d, 2, int_keep, nc);
      if (fl) check_scalar("pow_scalar", dt_pow_scalar, r_pow, d, 0.5, d, nc);
    }
  }
  tu_leaks_end();
}

/* contiguous float32 ⊕ scalar has its own fast path: check it bitwise */
static void test_scalar_fast_path_exact(void **state) {
  (void)state;
  double *va;
  dt_tensor *a = tu_random(DT_SHAPE(10001), DT_FLOAT32, 9, -100, 100, &va);
  dt_tensor *o = dt_div_scalar(a, 3.0);
  double *vo = tu_values(o);
  for (int i = 0; i < 10001; i++)
    assert_true(vo[i] == (double)((float)va[i] / 3.0f));
  free(va); free(vo);
  dt_tensor_release(o); dt_tensor_release(a);
}

/* NaN propagates through maximum/minimum; comparisons with NaN are false */
static void test_nan_semantics(void **state) {
  (void)state;
  double a[4] = {NAN, 1, 2, NAN}, b[4] = {0, NAN, 1, NAN};
  dt_tensor *ta = tu_tensor(a, DT_SHAPE(4), DT_FLOAT32);
  dt_tensor *tb = tu_tensor(b, DT_SHAPE(4), DT_FLOAT32);
  dt_tensor *mx = dt_maximum(ta, tb), *mn = dt_minimum(ta, tb);
  dt_tensor *eq = dt_eq(ta, tb), *ne = dt_ne(ta, tb);
  double *vx = tu_values(mx), *vn = tu_values(mn), *ve = tu_values(eq),
         *vne = tu_values(ne);
  assert_true(isnan(vx[0]) && isnan(vx[1]) && vx[2] == 2 && isnan(vx[3]));
  assert_true(isnan(vn[0]) && isnan(vn[1]) && vn[2] == 1 && isnan(vn[3]));
  for (int i = 0; i < 4; i++) assert_true(ve[i] == 0 && vne[i] == 1);
  free(vx); free(vn); free(ve); free(vne);
  TU_RELEASE(ta, tb, mx, mn, eq, ne);
}

/* integer arithmetic wraps like PyTorch's (two's complement) */
static void test_integer_wrap(void **state) {
  (void)state;
  double a[2] = {2147483647, -2147483648.0}, b[2] = {1, -1};
  dt_tensor *ta = tu_tensor(a, DT_SHAPE(2), DT_INT32);
  dt_tensor *tb = tu_tensor(b, DT_SHAPE(2), DT_INT32);
  dt_tensor *s = dt_add(ta, tb);
  double *v = tu_values(s);
  assert_true(v[0] == -2147483648.0 && v[1] == 2147483647);
  free(v);
  dt_tensor_release(s); dt_tensor_release(ta); dt_tensor_release(tb);
}

/* pow of two bool tensors is an error, as in PyTorch ("pow" is not
 * implemented for 'Bool'). Regression: it silently gave zeros. A bool
 * with an integer or float operand promotes and works. */
static void test_pow_bool(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_clear_error();
  double ones[2] = {1, 1}, two[2] = {2, 3};
  dt_tensor *b = tu_tensor(ones, DT_SHAPE(2), DT_BOOL);
  dt_tensor *b0 = tu_tensor(ones, DT_SHAPE(), DT_BOOL);
  dt_tensor *i = tu_tensor(two, DT_SHAPE(2), DT_INT32);
  tu_expect_error(dt_pow(b, b), DT_ERR_DTYPE, "dt_pow", "bool", NULL);
  tu_expect_error(dt_pow(b, b0), DT_ERR_DTYPE, "dt_pow", "bool", NULL);
  dt_tensor *r = dt_pow(b, i); /* 1^2, 1^3 in int32 */
  assert_non_null(r);
  assert_int_equal(dt_tensor_dtype(r), DT_INT32);
  double *v = tu_values(r);
  assert_true(v[0] == 1 && v[1] == 1);
  free(v);
  dt_tensor *q = dt_pow(i, b); /* 2^1, 3^1 */
  assert_non_null(q);
  v = tu_values(q);
  assert_true(v[0] == 2 && v[1] == 3);
  free(v);
  TU_RELEASE(q, r, i, b0, b);
  tu_leaks_end();
}

/* float-to-float casts against the test's own conversions (tu_encode:
 * round to nearest even, ties and overflow included; NaN stays NaN), bit
 * for bit: float32 bit patterns from an LCG (every class: denormals,
 * infinities, NaNs) plus bfloat16 ties, small and large — an output of
 * cpu_stream_min_bytes() or more is written with streamed stores
 * (kernels/cpu/pointwise.c; set to 8 MiB here, the machine's may be more)
 * and every element of it is checked — and back from bfloat16 (exact) */
static uint32_t cast_bits(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 32);
}

static void check_cast(const float *x, int64_t n, dt_dtype to) {
  size_t es = to == DT_FLOAT64 ? 8 : 2;
  dt_tensor_options o = {.dtype = DT_FLOAT32};
  dt_tensor *t = dt_from_host(x, DT_SHAPE(n), &o);
  dt_tensor *c = dt_cast(t, to);
  assert_non_null(c);
  unsigned char *got = malloc(es * (size_t)n);
  assert_non_null(got);
  assert_int_equal(dt_to_host(c, got, es * (size_t)n), DT_OK);
  for (int64_t i = 0; i < n; i++) {
    unsigned char want[8];
    if (x[i] != x[i]) {
      if (tu_decode(got + es * (size_t)i, to) == tu_decode(got + es * (size_t)i, to))
        fail_msg("cast %lld: NaN came out a number", (long long)i);
      continue;
    }
    tu_encode(want, to, (double)x[i]);
    if (memcmp(want, got + es * (size_t)i, es))
      fail_msg("cast to %d of %a (element %lld of %lld): %g, want %g", (int)to,
               (double)x[i], (long long)i, (long long)n,
               tu_decode(got + es * (size_t)i, to), tu_decode(want, to));
  }
  if (to == DT_BFLOAT16) { /* and back: every bfloat16 is a float32 */
    dt_tensor *b = dt_cast(c, DT_FLOAT32);
    float *back = malloc(sizeof *back * (size_t)n);
    assert_non_null(back);
    assert_int_equal(dt_to_host(b, back, sizeof *back * (size_t)n), DT_OK);
    for (int64_t i = 0; i < n; i++) {
      uint16_t h;
      memcpy(&h, got + 2 * (size_t)i, 2);
      uint32_t u = (uint32_t)h << 16, v;
      memcpy(&v, &back[i], 4);
      if (u != v) fail_msg("bfloat16 %#x back: %#x", (unsigned)h, (unsigned)v);
    }
    free(back);
    dt_tensor_release(b);
  }
  free(got);
  dt_tensor_release(c);
  dt_tensor_release(t);
}

static void test_float_casts(void **state) {
  (void)state;
  tu_leaks_begin();
  static const uint32_t ties[] = {0x3f808000u, 0x3f818000u, 0x7f7fffffu,
                                  0x7f7f8000u, 0x00008000u, 0x80018000u,
                                  0x7f800000u, 0xff800000u, 0x7fc00001u};
  const int64_t sizes[] = {1000, (int64_t)4200000}; /* 8.4 MB of bfloat16 */
  uint64_t s = 99;
  cpu_stream_set_min_bytes(CPU_STREAM_MIN_BYTES);
  for (int k = 0; k < 2; k++) {
    int64_t n = sizes[k];
    float *x = malloc(sizeof *x * (size_t)n);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) {
      uint32_t u = i < 9 ? ties[i] : cast_bits(&s);
      memcpy(&x[i], &u, 4);
    }
    check_cast(x, n, DT_BFLOAT16);
    if (k == 0) {
      check_cast(x, n, DT_FLOAT16);
      check_cast(x, n, DT_FLOAT64);
    }
    free(x);
  }
  cpu_stream_set_min_bytes(0);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_binary_same_dtype),
      cmocka_unit_test(test_binary_promotion),
      cmocka_unit_test(test_zero_dim_promotion),
      cmocka_unit_test(test_scalar_forms),
      cmocka_unit_test(test_scalar_fast_path_exact),
      cmocka_unit_test(test_nan_semantics),
      cmocka_unit_test(test_integer_wrap),
      cmocka_unit_test(test_pow_bool),
      cmocka_unit_test(test_float_casts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
