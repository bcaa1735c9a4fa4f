/* Unary pointwise ops, clamp, where, masked_fill and cast against double
 * references, for every dtype, contiguous and not. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

typedef dt_tensor *(*un_fn)(dt_tensor *);
typedef struct unop {
  const char *name;
  un_fn fn;
  double (*ref)(double);
  double lo, hi;       /* float input range */
  int keeps;           /* 1: keeps integer dtypes; 0: int → float32 */
  double rtol32;       /* float32 tolerance (libm float vs double) */
} unop;

static double r_neg(double x) { return -x; }
static double r_abs(double x) { return fabs(x); }
static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_relu(double x) { return x > 0 ? x : 0; }
static double r_silu(double x) { return x / (1 + exp(-x)); }
/* erfc form: 1 + erf(x) cancels for x << 0 */
static double r_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double r_gelu_tanh(double x) {
  double u = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return x > 0 ? 0.5 * x * (1 + tanh(u)) : 0.5 * x * 2 * exp(2 * u) / (1 + exp(2 * u));
}

static const unop unops[] = {
    {"neg", dt_neg, r_neg, -5, 5, 1, 0},
    {"abs", dt_abs, r_abs, -5, 5, 1, 0},
    {"exp", dt_exp, exp, -5, 5, 0, 2e-7},
    {"log", dt_log, log, 0.1, 9, 0, 2e-7},
    {"sqrt", dt_sqrt, sqrt, 0, 9, 0, 1e-7},
    {"rsqrt", dt_rsqrt, r_rsqrt, 0.1, 9, 0, 2e-7},
    {"sin", dt_sin, sin, -5, 5, 0, 4e-7},
    {"cos", dt_cos, cos, -5, 5, 0, 4e-7},
    {"tanh", dt_tanh, tanh, -4, 4, 0, 4e-7},
    {"sigmoid", dt_sigmoid, r_sigmoid, -8, 8, 0, 4e-7},
    {"relu", dt_relu, r_relu, -5, 5, 1, 0},
    {"silu", dt_silu, r_silu, -8, 8, 0, 4e-7},
    {"gelu", dt_gelu, r_gelu, -5, 5, 0, 4e-6},
    {"gelu_tanh", dt_gelu_tanh, r_gelu_tanh, -5, 5, 0, 4e-6},
};

static const dt_shape shapes[] = {{2, {7, 9}}, {0, {0}}, {3, {2, 0, 3}},
                                  {3, {1, 1, 1}}, {1, {3001}}};

static void check_unary(const unop *u, dt_dtype d, dt_shape s, bool nc,
                        uint64_t seed) {
  double lo = u->lo, hi = u->hi;
  if (!tu_is_float(d)) {
    lo = d == DT_UINT8 || u->lo >= 0 ? (u->lo > 0 ? 1 : 0) : -5;
    hi = 9;
  }
  double *va;
  dt_tensor *a = tu_random(s, d, seed, lo, hi, &va);
  if (nc) tu_make_noncontig(&a);
  dt_tensor *o = u->fn(a);
  if (!o) fail_msg("%s(%s): %s", u->name, dt_dtype_name(d), dt_last_error());
  dt_dtype want = tu_is_float(d) || u->keeps ? d : DT_FLOAT32;
  assert_int_equal(dt_tensor_dtype(o), want);
  int64_t n = tu_numel(s);
  double *vo = tu_values(o), *ref = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) {
    double r = u->ref(va[i]);
    if (d == DT_UINT8 && u->fn == dt_neg) r = fmod(256 - va[i], 256);
    ref[i] = tu_is_float(want) ? tu_round(r, want) : r;
  }
  double rtol = want == DT_FLOAT32 ? u->rtol32 + 1e-7
              : want == DT_FLOAT64 ? 1e-14 : tu_rtol(want) * 2;
  char what[96];
  snprintf(what, sizeof what, "%s(%s)%s", u->name, dt_dtype_name(d),
           nc ? " non-contiguous" : "");
  tu_assert_close(vo, ref, n, rtol, 1e-30, what);
  free(va); free(vo); free(ref);
  dt_tensor_release(o); dt_tensor_release(a);
}

static void test_unary_all(void **state) {
  (void)state;
  tu_leaks_begin();
  uint64_t seed = 3;
  for (size_t u = 0; u < sizeof unops / sizeof *unops; u++)
    for (int di = 0; di < 8; di++) {
      dt_dtype d = tu_all_dtypes[di];
      /* errors, as in PyTorch: neg/abs/relu of bool, silu/gelu of
       * integer dtypes (test_torch_refusals in test_semantics.c) */
      if (d == DT_BOOL && (unops[u].fn == dt_neg || unops[u].fn == dt_abs ||
                           unops[u].fn == dt_relu))
        continue;
      if (!tu_is_float(d) && (unops[u].fn == dt_silu || unops[u].fn == dt_gelu ||
                              unops[u].fn == dt_gelu_tanh))
        continue;
      for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int nc = 0; nc < 2; nc++)
          check_unary(&unops[u], d, shapes[s], nc, seed++);
    }
  tu_leaks_end();
}

static void test_logical_not(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int di = 0; di < 8; di++) {
    double v[6] = {0, 1, -2, 0.5, 0, 3};
    dt_dtype d = tu_all_dtypes[di];
    if (d == DT_UINT8) v[2] = 2;
    dt_tensor *a = tu_tensor(v, DT_SHAPE(2, 3), d);
    dt_tensor *t = dt_transpose(a, 0, 1);
    dt_tensor *o = dt_logical_not(t);
    assert_int_equal(dt_tensor_dtype(o), DT_BOOL);
    double *vo = tu_values(o);
    /* transposed order: (0,0) (1,0) (0,1) (1,1) (0,2) (1,2) */
    int order[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++) {
      double x = tu_round(v[order[i]], d);
      assert_true(vo[i] == (x == 0 ? 1 : 0));
    }
    free(vo);
    dt_tensor_release(o); dt_tensor_release(t); dt_tensor_release(a);
  }
  tu_leaks_end();
}

static void test_clamp(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int di = 0; di < 7; di++) { /* bool is an error */
    dt_dtype d = tu_all_dtypes[di];
    double *va;
    dt_tensor *a = tu_random(DT_SHAPE(4, 6), d, 40 + di, d == DT_UINT8 ? 0 : -9, 9, &va);
    for (int nc = 0; nc < 2; nc++) {
      dt_tensor *x = nc ? tu_noncontig(a) : dt_tensor_retain(a);
      struct { double lo, hi; } b[] = {{-2, 3}, {1, 1}, {-INFINITY, 0},
                                       {4, -4} /* lo > hi: all hi */};
      if (d == DT_UINT8) b[3].hi = 2; /* keep uint8 results in range */
      for (int k = 0; k < 4; k++) {
        dt_tensor *o = dt_clamp(x, b[k].lo, b[k].hi);
        if (!o) fail_msg("clamp %s: %s", dt_dtype_name(d), dt_last_error());
        assert_int_equal(dt_tensor_dtype(o), d);
        double *vo = tu_values(o);
        for (int i = 0; i < 24; i++) {
          double r = fmin(fmax(va[i], b[k].lo), b[k].hi);
          if (d == DT_UINT8 && r < 0) r = 0; /* -inf..0 on uint8 */
          if (vo[i] != tu_round(r, d))
            fail_msg("clamp(%s, %g, %g): element %d got %g want %g",
                     dt_dtype_name(d), b[k].lo, b[k].hi, i, vo[i], r);
        }
        free(vo);
        dt_tensor_release(o);
      }
      dt_tensor_release(x);
    }
    free(va);
    dt_tensor_release(a);
  }
  /* fractional bounds promote integer tensors to float32 */
  double v[3] = {-3, 0, 3};
  dt_tensor *i = tu_tensor(v, DT_SHAPE(3), DT_INT32);
  dt_tensor *o = dt_clamp(i, -0.5, 1.5);
  assert_int_equal(dt_tensor_dtype(o), DT_FLOAT32);
  double *vo = tu_values(o);
  assert_true(vo[0] == -0.5 && vo[1] == 0 && vo[2] == 1.5);
  free(vo);
  dt_tensor_release(o); dt_tensor_release(i);
  tu_leaks_end();
}

/* Integer clamp compares exactly, as integers. A min below the dtype's
 * range (or a max above it), -inf/+inf included, bounds nothing; a min
 * above the range or a max below it is an error (the result could not be
 * stored). Regressions: clamp(int64, 1e19, inf) gave INT64_MIN (below
 * min!); a max past 9.2e18 was ignored; int64 values past 2^53 were
 * compared after rounding to double. */
static void test_clamp_integer_bounds(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  int64_t x[4] = {INT64_MIN, -5, (INT64_C(1) << 53) + 1, INT64_MAX};
  dt_tensor *a = dt_from_host(x, DT_SHAPE(4), &(dt_tensor_options){.dtype = DT_INT64});
  tu_expect_error(dt_clamp(a, 1e19, INFINITY), DT_ERR_INVALID_ARGUMENT,
                  "dt_clamp", "min 1e+19", "cannot be converted to int64",
                  NULL);
  tu_expect_error(dt_clamp(a, 9223372036854775808.0, INFINITY),
                  DT_ERR_INVALID_ARGUMENT, "dt_clamp", "min", "int64", NULL);
  tu_expect_error(dt_clamp(a, -INFINITY, -1e19), DT_ERR_INVALID_ARGUMENT,
                  "dt_clamp", "max -1e+19", "int64", NULL);
  tu_expect_error(dt_clamp(a, INFINITY, INFINITY), DT_ERR_INVALID_ARGUMENT,
                  "dt_clamp", "min inf", NULL);
  tu_expect_error(dt_clamp(a, -INFINITY, -INFINITY), DT_ERR_INVALID_ARGUMENT,
                  "dt_clamp", "max -inf", NULL);
  double small[3] = {-7, 0, 7};
  dt_tensor *b = tu_tensor(small, DT_SHAPE(3), DT_INT32);
  tu_expect_error(dt_clamp(b, 2147483648.0, INFINITY), DT_ERR_INVALID_ARGUMENT,
                  "dt_clamp", "min 2147483648", "int32", NULL);
  tu_expect_error(dt_clamp(b, -INFINITY, -2147483649.0),
                  DT_ERR_INVALID_ARGUMENT, "dt_clamp", "max -2147483649",
                  "int32", NULL);
  dt_tensor *u = tu_tensor(small + 1, DT_SHAPE(2), DT_UINT8);
  tu_expect_error(dt_clamp(u, -INFINITY, -1), DT_ERR_INVALID_ARGUMENT,
                  "dt_clamp", "max -1", "uint8", NULL);
  tu_expect_error(dt_clamp(u, 256, INFINITY), DT_ERR_INVALID_ARGUMENT,
                  "dt_clamp", "min 256", "uint8", NULL);
  struct { double lo, hi; int64_t want[4]; } cases[] = {
      /* no bounds: unchanged, exactly */
      {-INFINITY, INFINITY, {INT64_MIN, -5, (INT64_C(1) << 53) + 1, INT64_MAX}},
      /* bounds past the range bound nothing */
      {-1e30, 1e30, {INT64_MIN, -5, (INT64_C(1) << 53) + 1, INT64_MAX}},
      /* 2^53 is a double; 2^53 + 1 is not and must still be clamped */
      {-INFINITY, 9007199254740992.0,
       {INT64_MIN, -5, INT64_C(1) << 53, INT64_C(1) << 53}},
      /* the largest double below 2^63 is a real bound */
      {-9223372036854775808.0, 9223372036854774784.0,
       {INT64_MIN, -5, (INT64_C(1) << 53) + 1, INT64_C(9223372036854774784)}},
      {0, INFINITY, {0, 0, (INT64_C(1) << 53) + 1, INT64_MAX}}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    dt_tensor *o = dt_clamp(a, cases[k].lo, cases[k].hi);
    if (!o) fail_msg("clamp(int64, %g, %g): %s", cases[k].lo, cases[k].hi,
                     dt_last_error());
    assert_int_equal(dt_tensor_dtype(o), DT_INT64);
    int64_t got[4];
    assert_int_equal(dt_to_host(o, got, sizeof got), DT_OK);
    for (int i = 0; i < 4; i++)
      if (got[i] != cases[k].want[i])
        fail_msg("clamp(int64, %g, %g): element %d got %lld want %lld",
                 cases[k].lo, cases[k].hi, i, (long long)got[i],
                 (long long)cases[k].want[i]);
    dt_tensor_release(o);
  }
  /* int32 and uint8: a min below the range is no bound */
  dt_tensor *o32 = dt_clamp(b, -1e10, 5), *o8 = dt_clamp(u, -300, 5);
  if (!o32 || !o8) fail_msg("clamp below the range: %s", dt_last_error());
  assert_int_equal(dt_tensor_dtype(o32), DT_INT32);
  assert_int_equal(dt_tensor_dtype(o8), DT_UINT8);
  double *v32 = tu_values(o32), *v8 = tu_values(o8);
  assert_true(v32[0] == -7 && v32[1] == 0 && v32[2] == 5);
  assert_true(v8[0] == 0 && v8[1] == 5);
  free(v32);
  free(v8);
  TU_RELEASE(o8, o32, u, b, a);
  tu_leaks_end();
}

/* masked_fill with a value the integer dtype cannot hold is an error */
static void test_masked_fill_out_of_range(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT32});
  dt_tensor *m = dt_ones(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_BOOL});
  tu_expect_error(dt_masked_fill(a, m, NAN), DT_ERR_INVALID_ARGUMENT,
                  "dt_masked_fill", "value nan", "int32", NULL);
  tu_expect_error(dt_masked_fill(a, m, 1e20), DT_ERR_INVALID_ARGUMENT,
                  "dt_masked_fill", "value 1e+20", "int32", "overflow", NULL);
  dt_tensor *f = dt_masked_fill(a, m, -2147483648.0);
  assert_non_null(f);
  double *v = tu_values(f);
  assert_true(v[0] == -2147483648.0 && v[1] == -2147483648.0);
  free(v);
  /* floating tensors take infinities and NaN, but not finite values past
   * their largest (PyTorch: f16 65505 fails, 65504 and inf pass) */
  dt_tensor *h = dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_FLOAT16});
  tu_expect_error(dt_masked_fill(h, m, 1e20), DT_ERR_INVALID_ARGUMENT,
                  "dt_masked_fill", "value 1e+20", "float16", "overflow", NULL);
  dt_tensor *hf = dt_masked_fill(h, m, INFINITY);
  assert_non_null(hf);
  v = tu_values(hf);
  assert_true(isinf(v[0]) && v[0] > 0);
  free(v);
  TU_RELEASE(hf, h, f, m, a);
  tu_leaks_end();
}

static void test_where_and_masked_fill(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int di = 0; di < 8; di++) {
    dt_dtype d = tu_all_dtypes[di];
    double *vc, *va, *vb;
    dt_tensor *c = tu_random(DT_SHAPE(3, 1), DT_BOOL, 1 + di, 0, 1, &vc);
    dt_tensor *a = tu_random(DT_SHAPE(3, 4), d, 11 + di, 0, 9, &va);
    dt_tensor *b = tu_random(DT_SHAPE(4), d, 21 + di, 0, 9, &vb);
    dt_tensor *an = tu_noncontig(a);
    dt_tensor *o = dt_where(c, an, b);
    assert_int_equal(dt_tensor_dtype(o), d);
    double *vo = tu_values(o);
    for (int i = 0; i < 12; i++)
      assert_true(vo[i] == (vc[i / 4] ? va[i] : vb[i % 4]));
    free(vo);
    dt_tensor *m = tu_random(DT_SHAPE(4), DT_BOOL, 31 + di, 0, 1, NULL);
    double *vm = tu_values(m);
    dt_tensor *f = dt_masked_fill(an, m, 7);
    assert_int_equal(dt_tensor_dtype(f), d);
    double *vf = tu_values(f);
    for (int i = 0; i < 12; i++)
      assert_true(vf[i] == (vm[i % 4] ? tu_round(7, d) : va[i]));
    free(vf); free(vm); free(vc); free(va); free(vb);
    TU_RELEASE(c, a, b, an, o, m, f);
  }
  /* where promotes a and b */
  dt_tensor *c = dt_ones(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_BOOL});
  dt_tensor *a = dt_ones(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT32});
  dt_tensor *b = dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_FLOAT16});
  dt_tensor *o = dt_where(c, a, b);
  assert_int_equal(dt_tensor_dtype(o), DT_FLOAT16);
  dt_tensor_release(o); dt_tensor_release(c); dt_tensor_release(a);
  dt_tensor_release(b);
  tu_leaks_end();
}

/* cast between every pair of dtypes: float → int truncates, anything →
 * bool is "nonzero", bool → number is 0/1 */
static void test_cast_all_pairs(void **state) {
  (void)state;
  tu_leaks_begin();
  double v[8] = {0, 1, 2.75, -3.5, 100.25, 0.5, -0.0, 65};
  for (int si = 0; si < 8; si++)
    for (int ti = 0; ti < 8; ti++) {
      dt_dtype s = tu_all_dtypes[si], t = tu_all_dtypes[ti];
      double in[8];
      for (int i = 0; i < 8; i++) {
        double x = v[i];
        if (t == DT_UINT8 || s == DT_UINT8) x = fabs(x);
        in[i] = tu_round(tu_is_float(s) ? x : trunc(x), s);
        if (s == DT_BOOL) in[i] = x != 0;
      }
      dt_tensor *a = tu_tensor(in, DT_SHAPE(2, 4), s);
      dt_tensor *at = dt_transpose(a, 0, 1);
      dt_tensor *o = dt_cast(at, t);
      assert_int_equal(dt_tensor_dtype(o), t);
      double *vo = tu_values(o);
      for (int i = 0; i < 8; i++) {
        double x = in[(i % 2) * 4 + i / 2];
        double r = t == DT_BOOL ? (x != 0) : tu_is_float(t) ? tu_round(x, t) : trunc(x);
        if (vo[i] != r)
          fail_msg("cast %s→%s: element %d got %g want %g", dt_dtype_name(s),
                   dt_dtype_name(t), i, vo[i], r);
      }
      free(vo);
      dt_tensor_release(o); dt_tensor_release(at); dt_tensor_release(a);
    }
  tu_leaks_end();
}

/* int64 → float32 rounds once, as the C cast (float)x; float16 and
 * bfloat16 round that float32 once more, as PyTorch's conversions do.
 * Regression: the cast went through double, rounding to 53 bits first
 * (2^60 + 2^36 + 1 became 2^60, not 2^60 + 2^37). */
static void test_cast_int64_rounds_once(void **state) {
  (void)state;
  tu_leaks_begin();
  const int64_t p60 = INT64_C(1) << 60;
  int64_t x[8] = {p60 + (INT64_C(1) << 36) + 1,
                  -(p60 + (INT64_C(1) << 36) + 1),
                  p60 + (INT64_C(1) << 52) + (INT64_C(1) << 36) + 1,
                  (INT64_C(1) << 53) + 1, INT64_MAX, INT64_MIN,
                  (INT64_C(1) << 24) + 1, 65519};
  float want[8];
  for (int i = 0; i < 8; i++) want[i] = (float)x[i];
  /* the independent reference: the one rounding (float)x does */
  assert_true(want[0] == 1152921642045800448.0f);
  dt_tensor *a = dt_from_host(x, DT_SHAPE(2, 4), &(dt_tensor_options){.dtype = DT_INT64});
  dt_tensor *at = dt_transpose(a, 0, 1); /* element i at (i % 4, i / 4) */
  const dt_dtype ts[3] = {DT_FLOAT32, DT_FLOAT16, DT_BFLOAT16};
  for (int k = 0; k < 3; k++)
    for (int strided = 0; strided < 2; strided++) {
      dt_tensor *o = dt_cast(strided ? at : a, ts[k]);
      assert_non_null(o);
      double *vo = tu_values(o);
      for (int j = 0; j < 8; j++) {
        int i = strided ? (j % 2) * 4 + j / 2 : j;
        double w = tu_round((double)want[i], ts[k]);
        if (vo[j] != w)
          fail_msg("cast int64 %lld → %s (%s): got %.17g want %.17g",
                   (long long)x[i], dt_dtype_name(ts[k]),
                   strided ? "strided" : "contiguous", vo[j], w);
      }
      free(vo);
      dt_tensor_release(o);
    }
  /* bfloat16: rounding the 53-bit double gives 2^60, the float 2^60+2^53 */
  dt_tensor *b = dt_cast(a, DT_BFLOAT16);
  double *vb = tu_values(b);
  assert_true(vb[2] == (double)(p60 + (INT64_C(1) << 53)));
  free(vb);
  TU_RELEASE(b, at, a);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary_all),
      cmocka_unit_test(test_logical_not),
      cmocka_unit_test(test_clamp),
      cmocka_unit_test(test_clamp_integer_bounds),
      cmocka_unit_test(test_masked_fill_out_of_range),
      cmocka_unit_test(test_where_and_masked_fill),
      cmocka_unit_test(test_cast_all_pairs),
      cmocka_unit_test(test_cast_int64_rounds_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
