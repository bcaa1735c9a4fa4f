/* matmul and linear against a double-precision reference loop written here:
 * every rank combination of torch.matmul, broadcast batch dims, transposed,
 * strided and expanded operands, size-0 and size-1 dims, every numeric
 * dtype; then the error cases and the BLAS thread hook. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* how an operand is laid out in memory (its logical value is the same) */
typedef enum {
  L_CONTIG,      /* row-major */
  L_NONCONTIG,   /* step-2 slice of the last dim (tu_noncontig) */
  L_TRANSPOSED,  /* transpose of a contiguous tensor in the last two dims */
  L_EXPANDED,    /* dim 0 is an expanded size-1 dim (stride 0) */
  L_BATCH_T,     /* transpose of dims 0 and 1 (batch dims that do not fold) */
  L_COUNT
} layout;

/* A tensor of logical shape s in layout l; *vals gets its logical values
 * (row-major doubles, malloc'd). */
static dt_tensor *make_operand(dt_shape s, dt_dtype d, uint64_t seed, layout l,
                               double **vals) {
  /* small ints: exact sums (uint8 products wrap mod 256, see below) */
  double lo = tu_is_float(d) ? -1 : d == DT_UINT8 ? 0 : -5;
  double hi = d == DT_UINT8 ? 5 : -lo;
  int nd = s.ndim;
  if (l == L_EXPANDED) {
    dt_shape s0 = s;
    s0.dims[0] = 1;
    double *v0;
    dt_tensor *t0 = tu_random(s0, d, seed, lo, hi, &v0);
    dt_tensor *t = dt_expand(t0, s);
    assert_non_null(t);
    dt_tensor_release(t0);
    int64_t n = tu_numel(s);
    *vals = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) (*vals)[i] = v0[tu_bcast_index(i, s, s0)];
    free(v0);
    return t;
  }
  double *v = *vals = tu_random_values(tu_numel(s), d, seed, lo, hi, false);
  switch (l) {
  case L_CONTIG: return tu_tensor(v, s, d);
  case L_NONCONTIG: return tu_noncontig_values(v, s, d);
  case L_TRANSPOSED: return tu_transposed(v, s, d, nd - 2, nd - 1);
  default: return tu_transposed(v, s, d, 0, 1); /* L_BATCH_T */
  }
}

/* torch.matmul in double, written from its definition; *so gets the shape */
static double *ref_matmul(const double *a, dt_shape sa, const double *b,
                          dt_shape sb, dt_shape *so) {
  int64_t m = sa.ndim == 1 ? 1 : sa.dims[sa.ndim - 2];
  int64_t k = sa.dims[sa.ndim - 1];
  int64_t n = sb.ndim == 1 ? 1 : sb.dims[sb.ndim - 1];
  dt_shape ba = {.ndim = sa.ndim > 2 ? sa.ndim - 2 : 0};
  dt_shape bb = {.ndim = sb.ndim > 2 ? sb.ndim - 2 : 0};
  memcpy(ba.dims, sa.dims, sizeof(int64_t) * (size_t)ba.ndim);
  memcpy(bb.dims, sb.dims, sizeof(int64_t) * (size_t)bb.ndim);
  dt_shape bo = {.ndim = ba.ndim > bb.ndim ? ba.ndim : bb.ndim};
  for (int i = 0; i < bo.ndim; i++) {
    int ia = i - (bo.ndim - ba.ndim), ib = i - (bo.ndim - bb.ndim);
    int64_t da = ia >= 0 ? ba.dims[ia] : 1, db = ib >= 0 ? bb.dims[ib] : 1;
    bo.dims[i] = da == 1 ? db : da;
  }
  int64_t nbatch = tu_numel(bo);
  double *out = calloc((size_t)(nbatch * m * n + 1), sizeof(double));
  for (int64_t t = 0; t < nbatch; t++) {
    int64_t ta = tu_bcast_index(t, bo, ba), tb = tu_bcast_index(t, bo, bb);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++)
          s += a[(ta * m + i) * k + p] * b[(tb * k + p) * n + j];
        out[(t * m + i) * n + j] = s;
      }
  }
  *so = bo;
  if (sa.ndim > 1) so->dims[so->ndim++] = m;
  if (sb.ndim > 1) so->dims[so->ndim++] = n;
  return out;
}

/* Compares a result of dtype d with the exact reference of a K-term sum.
 * float32/64: error grows like sqrt(K); float16/bfloat16 are accumulated in
 * float32 and rounded once, so they match the rounded reference within an
 * ulp; integers are exact. */
static void assert_result(dt_tensor *got, double *want, int64_t n, dt_dtype d,
                          int64_t k, const char *what) {
  assert_int_equal(dt_tensor_dtype(got), d);
  double *g = tu_values(got);
  double sk = sqrt((double)(k > 0 ? k : 1));
  if (d == DT_FLOAT16 || d == DT_BFLOAT16) {
    for (int64_t i = 0; i < n; i++) want[i] = tu_round(want[i], d);
    tu_assert_close(g, want, n, tu_rtol(d), 1e-6 * sk, what);
  } else if (tu_is_float(d)) {
    double tol = tu_rtol(d) * sk * 4;
    tu_assert_close(g, want, n, tol, tol, what);
  } else {
    if (d == DT_UINT8) /* two's complement wrap to 8 bits (sums are >= 0) */
      for (int64_t i = 0; i < n; i++) want[i] = fmod(want[i], 256);
    tu_assert_close(g, want, n, 0, 0, what);
  }
  free(g);
}

static void check_matmul(dt_shape sa, dt_shape sb, dt_dtype d, layout la,
                         layout lb) {
  static uint64_t seed = 1;
  double *va, *vb;
  dt_tensor *a = make_operand(sa, d, seed++, la, &va);
  dt_tensor *b = make_operand(sb, d, seed++, lb, &vb);
  dt_shape so;
  double *want = ref_matmul(va, sa, vb, sb, &so);
  dt_tensor *c = dt_matmul(a, b);
  char what[160];
  snprintf(what, sizeof what, "matmul %dd x %dd %s layouts %d/%d", sa.ndim,
           sb.ndim, dt_dtype_name(d), (int)la, (int)lb);
  if (!c) fail_msg("%s: %s", what, dt_last_error());
  tu_assert_shape(c, so, what);
  assert_true(dt_tensor_is_contiguous(c));
  assert_result(c, want, tu_numel(so), d, sa.dims[sa.ndim - 1], what);
  free(want);
  free(va);
  free(vb);
  dt_tensor_release(c);
  dt_tensor_release(a);
  dt_tensor_release(b);
}

static const dt_dtype numeric[] = {DT_FLOAT32, DT_FLOAT64, DT_FLOAT16,
                                   DT_BFLOAT16, DT_INT32, DT_INT64, DT_UINT8};
#define NNUMERIC (int)(sizeof numeric / sizeof *numeric)

typedef struct pair { dt_shape a, b; } pair;

/* every rank combination, broadcast batches, size-1 and larger sizes */
static const pair rank_cases[] = {
    {DT_SHAPE(8), DT_SHAPE(8)},              /* dot → 0-d */
    {DT_SHAPE(8), DT_SHAPE(8, 5)},           /* 1-D · 2-D */
    {DT_SHAPE(6, 8), DT_SHAPE(8)},           /* 2-D · 1-D */
    {DT_SHAPE(6, 8), DT_SHAPE(8, 5)},        /* mm */
    {DT_SHAPE(3, 6, 8), DT_SHAPE(8, 5)},     /* 3-D · 2-D (folds) */
    {DT_SHAPE(6, 8), DT_SHAPE(3, 8, 5)},     /* 2-D · 3-D */
    {DT_SHAPE(3, 6, 8), DT_SHAPE(8)},        /* N-D · 1-D */
    {DT_SHAPE(8), DT_SHAPE(3, 8, 5)},        /* 1-D · N-D */
    {DT_SHAPE(2, 1, 3, 4), DT_SHAPE(5, 4, 2)}, /* broadcast batch */
    {DT_SHAPE(2, 3, 6, 8), DT_SHAPE(2, 3, 8, 5)},
    {DT_SHAPE(1, 8), DT_SHAPE(8, 1)},        /* size-1 M and N */
    {DT_SHAPE(6, 1), DT_SHAPE(1, 5)},        /* K = 1 */
    {DT_SHAPE(1), DT_SHAPE(1)},
    {DT_SHAPE(33, 65), DT_SHAPE(65, 17)},    /* past BLAS block edges */
};
#define NRANK (int)(sizeof rank_cases / sizeof *rank_cases)

static void test_matmul_ranks_dtypes(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int di = 0; di < NNUMERIC; di++)
    for (int i = 0; i < NRANK; i++)
      check_matmul(rank_cases[i].a, rank_cases[i].b, numeric[di], L_CONTIG,
                     L_CONTIG);
  tu_leaks_end();
}

/* every layout on either side where the rank allows it */
static void test_matmul_layouts(void **state) {
  (void)state;
  tu_leaks_begin();
  static const pair cases[] = {
      {DT_SHAPE(6, 8), DT_SHAPE(8, 5)},
      {DT_SHAPE(3, 6, 8), DT_SHAPE(3, 8, 5)},
      {DT_SHAPE(4, 6, 8), DT_SHAPE(8, 5)},
      {DT_SHAPE(70, 130), DT_SHAPE(130, 40)},
      {DT_SHAPE(8), DT_SHAPE(8, 5)},
      {DT_SHAPE(6, 8), DT_SHAPE(8)},
  };
  /* float16 stands for the widening path on small cases only: the test's
   * float16 encoder is a brute-force search */
  static const dt_dtype dts[] = {DT_FLOAT32, DT_FLOAT64, DT_BFLOAT16,
                                 DT_INT64, DT_FLOAT16};
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
      for (int la = 0; la < L_COUNT; la++)
        for (int lb = 0; lb < L_COUNT; lb++) {
          dt_shape sa = cases[ci].a, sb = cases[ci].b;
          bool a_ok = (la != L_TRANSPOSED || sa.ndim >= 2) &&
                      (la < L_EXPANDED || sa.ndim >= 3);
          bool b_ok = (lb != L_TRANSPOSED || sb.ndim >= 2) &&
                      (lb < L_EXPANDED || sb.ndim >= 3);
          if (a_ok && b_ok) check_matmul(sa, sb, dts[di], la, lb);
        }
  tu_leaks_end();
}

static void test_matmul_empty(void **state) {
  (void)state;
  tu_leaks_begin();
  static const pair cases[] = {
      {DT_SHAPE(4, 0), DT_SHAPE(0, 3)},      /* K = 0: zeros */
      {DT_SHAPE(0), DT_SHAPE(0)},            /* empty dot: 0 */
      {DT_SHAPE(2, 4, 0), DT_SHAPE(0, 3)},
      {DT_SHAPE(0, 8), DT_SHAPE(8, 3)},      /* M = 0: empty */
      {DT_SHAPE(4, 8), DT_SHAPE(8, 0)},      /* N = 0 */
      {DT_SHAPE(0, 2, 3), DT_SHAPE(3, 4)},   /* batch 0 */
      {DT_SHAPE(2, 0, 3), DT_SHAPE(2, 3, 4)},
  };
  for (int di = 0; di < NNUMERIC; di++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      check_matmul(cases[i].a, cases[i].b, numeric[di], L_CONTIG, L_CONTIG);
  /* K = 0 really gives zeros (not garbage from the fresh allocation) */
  dt_tensor *a = dt_empty(DT_SHAPE(64, 0), NULL), *b = dt_empty(DT_SHAPE(0, 64), NULL);
  dt_tensor *c = dt_matmul(a, b);
  double *v = tu_values(c);
  for (int i = 0; i < 64 * 64; i++) assert_true(v[i] == 0.0);
  free(v);
  dt_tensor_release(c);
  dt_tensor_release(a);
  dt_tensor_release(b);
  tu_leaks_end();
}

/* integer GEMM wraps like two's complement, as PyTorch's int matmul */
static void test_matmul_int_wraps(void **state) {
  (void)state;
  tu_leaks_begin();
  double av[2] = {65536, 65536}, bv[2] = {65536, 1};
  dt_tensor *a = tu_tensor(av, DT_SHAPE(1, 2), DT_INT32);
  dt_tensor *b = tu_tensor(bv, DT_SHAPE(2, 1), DT_INT32);
  dt_tensor *c = dt_matmul(a, b);
  double *v = tu_values(c);
  assert_true(v[0] == 65536.0); /* 2^32 + 2^16 wraps to 2^16 */
  free(v);
  dt_tensor_release(c);
  dt_tensor_release(a);
  dt_tensor_release(b);
  tu_leaks_end();
}

/* ---- linear */
static void check_linear(dt_shape sx, int64_t out, bool with_bias, dt_dtype d,
                         layout lx, layout lw) {
  static uint64_t seed = 1000;
  int64_t in = sx.dims[sx.ndim - 1];
  double *vx, *vw, *vb = NULL;
  dt_tensor *x = make_operand(sx, d, seed++, lx, &vx);
  dt_tensor *w = make_operand(DT_SHAPE(out, in), d, seed++, lw, &vw);
  dt_tensor *b = with_bias ? make_operand(DT_SHAPE(out), d, seed++, L_CONTIG,
                                         &vb)
                           : NULL;
  int64_t rows = 1; /* x as [rows, in] */
  for (int i = 0; i < sx.ndim - 1; i++) rows *= sx.dims[i];
  dt_shape so = sx;
  so.dims[so.ndim - 1] = out;
  double *want = calloc((size_t)(rows * out + 1), sizeof(double));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < out; o++) {
      double s = vb ? vb[o] : 0;
      for (int64_t p = 0; p < in; p++) s += vx[r * in + p] * vw[o * in + p];
      want[r * out + o] = s;
    }
  dt_tensor *y = dt_linear(x, w, b);
  char what[128];
  snprintf(what, sizeof what, "linear %dd %s bias %d layouts %d/%d", sx.ndim,
           dt_dtype_name(d), (int)with_bias, (int)lx, (int)lw);
  if (!y) fail_msg("%s: %s", what, dt_last_error());
  tu_assert_shape(y, so, what);
  assert_result(y, want, tu_numel(so), d, in + 1, what);
  free(want);
  free(vx);
  free(vw);
  free(vb);
  dt_tensor_release(y);
  dt_tensor_release(x);
  dt_tensor_release(w);
  dt_tensor_release(b);
}

static void test_linear(void **state) {
  (void)state;
  tu_leaks_begin();
  static const dt_shape xs[] = {DT_SHAPE(4, 8), DT_SHAPE(8), DT_SHAPE(2, 3, 8),
                                DT_SHAPE(1, 8), DT_SHAPE(3, 0), DT_SHAPE(0, 8)};
  for (int di = 0; di < NNUMERIC; di++)
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
      for (int bias = 0; bias < 2; bias++)
        check_linear(xs[i], 5, bias, numeric[di], L_CONTIG, L_CONTIG);
  /* strided x, weight stored transposed (BLAS reads it without a flag) */
  for (int lx = L_CONTIG; lx <= L_TRANSPOSED; lx++)
    for (int lw = L_CONTIG; lw <= L_TRANSPOSED; lw++) {
      check_linear(DT_SHAPE(6, 16), 7, true, DT_FLOAT32, lx, lw);
      check_linear(DT_SHAPE(2, 6, 16), 7, true, DT_FLOAT64, lx, lw);
      check_linear(DT_SHAPE(2, 6, 16), 7, false, DT_BFLOAT16, lx, lw);
    }
  check_linear(DT_SHAPE(2, 3, 8), 5, true, DT_FLOAT32, L_BATCH_T, L_CONTIG);
  check_linear(DT_SHAPE(4, 8), 0, true, DT_FLOAT32, L_CONTIG, L_CONTIG);
  tu_leaks_end();
}

/* ---- errors */
static void test_errors(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *a48 = dt_zeros(DT_SHAPE(4, 8), NULL);
  dt_tensor *b48 = dt_zeros(DT_SHAPE(4, 8), NULL);
  dt_tensor_options f64 = {.dtype = DT_FLOAT64}, bo = {.dtype = DT_BOOL};
  dt_tensor *d84 = dt_zeros(DT_SHAPE(8, 4), &f64);
  dt_tensor *bool48 = dt_zeros(DT_SHAPE(4, 8), &bo);
  dt_tensor *bool84 = dt_zeros(DT_SHAPE(8, 4), &bo);
  dt_tensor *s0 = dt_zeros(DT_SHAPE(), NULL);
  dt_tensor *w58 = dt_zeros(DT_SHAPE(5, 8), NULL);
  dt_tensor *w8 = dt_zeros(DT_SHAPE(8), NULL);
  dt_tensor *b6 = dt_zeros(DT_SHAPE(6), NULL);
  dt_tensor *b5d = dt_zeros(DT_SHAPE(5), &f64);
  dt_tensor *x234 = dt_zeros(DT_SHAPE(2, 3, 4), NULL);
  dt_tensor *x542 = dt_zeros(DT_SHAPE(5, 4, 2), NULL);

  tu_expect_error(dt_matmul(NULL, b48), DT_ERR_INVALID_ARGUMENT, "dt_matmul",
                  "NULL", NULL);
  tu_expect_error(dt_matmul(a48, NULL), DT_ERR_INVALID_ARGUMENT, "dt_matmul",
                  "NULL", NULL);
  tu_expect_error(dt_matmul(a48, b48), DT_ERR_SHAPE, "dt_matmul",
                  "shapes [4, 8] and [4, 8] cannot be multiplied", NULL);
  tu_expect_error(dt_matmul(x234, x542), DT_ERR_SHAPE, "dt_matmul",
                  "[2, 3, 4]", "[5, 4, 2]", "batch", NULL);
  tu_expect_error(dt_matmul(a48, d84), DT_ERR_DTYPE, "dt_matmul", "float32",
                  "float64", NULL);
  tu_expect_error(dt_matmul(bool48, bool84), DT_ERR_DTYPE, "dt_matmul", "bool",
                  NULL);
  tu_expect_error(dt_matmul(s0, a48), DT_ERR_SHAPE, "dt_matmul", "[]",
                  "[4, 8]", NULL);
  tu_expect_error(dt_matmul(w8, s0), DT_ERR_SHAPE, "dt_matmul", "at least 1",
                  NULL);
  tu_expect_error(dt_linear(NULL, w58, NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_linear", "x", NULL);
  tu_expect_error(dt_linear(a48, NULL, NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_linear", "weight", NULL);
  /* a 1-D weight is fine without a bias (PyTorch: x @ w), not with one */
  dt_tensor *lv = dt_linear(a48, w8, NULL);
  assert_non_null(lv);
  dt_shape lvs = dt_tensor_shape(lv);
  assert_true(lvs.ndim == 1 && lvs.dims[0] == 4);
  dt_tensor_release(lv);
  tu_expect_error(dt_linear(a48, w8, b6), DT_ERR_SHAPE, "dt_linear",
                  "1-D weight", "[8]", NULL);
  tu_expect_error(dt_linear(a48, d84, NULL), DT_ERR_SHAPE, "dt_linear",
                  "[4, 8]", "[8, 4]", NULL);
  tu_expect_error(dt_linear(a48, w58, b6), DT_ERR_SHAPE, "dt_linear", "bias",
                  "[6]", "[4, 5]", NULL);
  tu_expect_error(dt_linear(a48, w58, b5d), DT_ERR_DTYPE, "dt_linear", "bias",
                  "float64", NULL);
  tu_expect_error(dt_linear(s0, w58, NULL), DT_ERR_SHAPE, "dt_linear", "x",
                  NULL);
  /* a NULL input keeps the first error (chaining) */
  dt_clear_error();
  tu_expect_error(dt_matmul(dt_matmul(a48, b48), a48), DT_ERR_SHAPE,
                  "dt_matmul", "[4, 8] and [4, 8]", NULL);

  TU_RELEASE(a48, b48, d84, bool48, bool84, s0, w58, w8, b6, b5d, x234, x542);
  tu_leaks_end();
}

static void test_blas_threads(void **state) {
  (void)state;
  dt_clear_error();
  dt_blas_set_threads(0);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_blas_set_threads", "0", NULL);
  /* one thread (the rank-thread setting) still computes the same product */
  dt_blas_set_threads(1);
  assert_int_equal(dt_last_status(), DT_OK);
  tu_leaks_begin();
  check_matmul(DT_SHAPE(70, 130), DT_SHAPE(130, 40), DT_FLOAT32, L_CONTIG,
               L_TRANSPOSED);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_ranks_dtypes),
      cmocka_unit_test(test_matmul_layouts),
      cmocka_unit_test(test_matmul_empty),
      cmocka_unit_test(test_matmul_int_wraps),
      cmocka_unit_test(test_linear),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_blas_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
