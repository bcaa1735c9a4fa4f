/* Tests of the reductions (dt_sum, dt_mean, dt_amax, dt_amin, dt_prod,
 * dt_argmax, dt_argmin, dt_var) against a naive reference written here:
 * the input is gathered into rows (one per output element, in row-major
 * order over the reduced dims) and each row is reduced in long double or
 * exact 64-bit integer arithmetic. Every op runs on every dtype it accepts,
 * on shapes with size-0 and size-1 dims, 0-d tensors, every dim subset
 * (with negative and reordered dims, and ndims 0), keepdim both ways, and
 * contiguous, step-2 (tu_noncontig) and transposed inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/testutil.h"
#include "threads.h"

typedef enum rop {
  R_SUM, R_MEAN, R_AMAX, R_AMIN, R_PROD, R_ARGMAX, R_ARGMIN, R_VAR,
  R_VAR_UNBIASED, R_COUNT
} rop;
static const char *const rop_names[R_COUNT] = {
    "sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "var",
    "var(unbiased)"};

/* ---------------------------------------------------------- the reference */
typedef struct dimset { int n; int dims[DT_MAX_DIMS]; } dimset;

static uint32_t mask_of(const dimset *ds, int ndim) {
  if (ndim == 0) return 0;
  if (ds->n == 0) return (1u << ndim) - 1;
  uint32_t m = 0;
  for (int i = 0; i < ds->n; i++)
    m |= 1u << (ds->dims[i] < 0 ? ds->dims[i] + ndim : ds->dims[i]);
  return m;
}

/* rows[o * rowlen + j]: element j (row-major over the reduced dims) of the
 * row that output o (row-major over the kept dims) reduces */
static double *gather_rows(const double *v, dt_shape s, uint32_t mask,
                           int64_t *nout, int64_t *rowlen) {
  int64_t no = 1, nr = 1;
  for (int k = 0; k < s.ndim; k++) {
    if (mask >> k & 1) nr *= s.dims[k];
    else no *= s.dims[k];
  }
  int64_t total = no * nr;
  double *rows = malloc(sizeof(double) * (size_t)(total > 0 ? total : 1));
  int64_t idx[DT_MAX_DIMS], n = tu_numel(s);
  for (int64_t i = 0; i < n; i++) {
    tu_unravel(i, s, idx);
    int64_t o = 0, j = 0;
    for (int k = 0; k < s.ndim; k++) {
      if (mask >> k & 1) j = j * s.dims[k] + idx[k];
      else o = o * s.dims[k] + idx[k];
    }
    rows[o * nr + j] = v[i];
  }
  *nout = no;
  *rowlen = nr;
  return rows;
}

/* the reference of one row; *scale: the magnitude the rounding errors of a
 * sum scale with (sum |x|, mean |x|, mean x^2) */
static double ref_row(rop op, const double *x, int64_t n, bool integer,
                      double *scale) {
  long double s = 0, a = 0, p = 1;
  uint64_t is = 0, ip = 1;
  for (int64_t j = 0; j < n; j++) {
    s += x[j];
    a += fabsl((long double)x[j]);
    p *= x[j];
    if (integer) { /* wraps modulo 2^64, as int64 does in PyTorch */
      is += (uint64_t)(int64_t)x[j];
      ip *= (uint64_t)(int64_t)x[j];
    }
  }
  *scale = (double)a;
  switch (op) {
  case R_SUM: return integer ? (double)(int64_t)is : (double)s;
  case R_PROD: return integer ? (double)(int64_t)ip : (double)p;
  case R_MEAN:
    *scale = n ? (double)(a / n) : 0;
    return n ? (double)(s / n) : NAN;
  case R_VAR: case R_VAR_UNBIASED: {
    int64_t dof = n - (op == R_VAR_UNBIASED);
    if (n == 0 || dof <= 0) return NAN;
    long double m = s / n, m2 = 0;
    for (int64_t j = 0; j < n; j++) m2 += (x[j] - m) * (x[j] - m);
    *scale = (double)(m2 / n + m * m);
    return (double)(m2 / dof);
  }
  default: break;
  }
  if (n == 0) fail_msg("ref_row: %s of an empty row", rop_names[op]);
  bool max = op == R_AMAX || op == R_ARGMAX;
  int64_t best = 0;
  for (int64_t j = 1; j < n && x[best] == x[best]; j++)
    if (x[j] != x[j] || (max ? x[j] > x[best] : x[j] < x[best])) best = j;
  return (op == R_ARGMAX || op == R_ARGMIN) ? (double)best : x[best];
}

/* ------------------------------------------------------------- one case */
static bool supports(rop op, dt_dtype d) {
  if (d == DT_BOOL && (op == R_ARGMAX || op == R_ARGMIN))
    return false; /* PyTorch refuses bool argmax/argmin: test_hand_values */
  return tu_is_float(d) ||
         (op != R_MEAN && op != R_VAR && op != R_VAR_UNBIASED);
}

static dt_dtype out_dtype(rop op, dt_dtype d) {
  if (op == R_ARGMAX || op == R_ARGMIN) return DT_INT64;
  if ((op == R_SUM || op == R_PROD) && !tu_is_float(d)) return DT_INT64;
  return d;
}

static dt_tensor *call(rop op, dt_tensor *a, const int *dims, int n,
                       bool keep) {
  switch (op) {
  case R_SUM: return dt_sum(a, dims, n, keep);
  case R_MEAN: return dt_mean(a, dims, n, keep);
  case R_AMAX: return dt_amax(a, dims, n, keep);
  case R_AMIN: return dt_amin(a, dims, n, keep);
  case R_PROD: return dt_prod(a, dims, n, keep);
  case R_ARGMAX: return dt_argmax(a, dims, n, keep);
  case R_ARGMIN: return dt_argmin(a, dims, n, keep);
  case R_VAR: return dt_var(a, dims, n, false, keep);
  default: return dt_var(a, dims, n, true, keep);
  }
}

/* tolerance of element o: exact for integers and selections; sums scale
 * with their magnitude (8 * tu_rtol relative, tu_rtol * scale absolute) */
static void tolerance(rop op, dt_dtype od, double scale, double *rtol,
                      double *atol) {
  *rtol = *atol = 0;
  if (!tu_is_float(od) || op == R_AMAX || op == R_AMIN) return;
  *rtol = 8 * tu_rtol(od);
  *atol = op == R_PROD ? tu_rtol(od) * 1e-4 : tu_rtol(od) * scale;
}

static void run_case(rop op, dt_tensor *a, const double *v, dt_shape s,
                     dt_dtype d, const dimset *ds, bool keep, tu_layout l) {
  char what[256], sh[128];
  tu_shape_str(s, sh, sizeof sh);
  int n = snprintf(what, sizeof what, "%s %s %s %s dims {", rop_names[op],
                   dt_dtype_name(d), sh, tu_layout_names[l]);
  for (int i = 0; i < ds->n; i++)
    n += snprintf(what + n, sizeof what - (size_t)n, i ? ",%d" : "%d",
                  ds->dims[i]);
  snprintf(what + n, sizeof what - (size_t)n, "} keepdim %d", keep);

  uint32_t mask = mask_of(ds, s.ndim);
  int64_t nout, rowlen;
  double *rows = gather_rows(v, s, mask, &nout, &rowlen);
  dt_tensor *r = call(op, a, ds->dims, ds->n, keep);
  if (rowlen == 0 && (op == R_AMAX || op == R_AMIN || op == R_ARGMAX ||
                      op == R_ARGMIN)) {
    free(rows);
    tu_expect_error(r, DT_ERR_SHAPE, "zero-size", NULL);
    return;
  }
  dt_dtype od = out_dtype(op, d);
  dt_shape ws = {.ndim = 0};
  for (int k = 0; k < s.ndim; k++)
    if (!(mask >> k & 1)) ws.dims[ws.ndim++] = s.dims[k];
    else if (keep) ws.dims[ws.ndim++] = 1;
  tu_assert_meta(r, od, ws, what);
  double *got = tu_values(r);
  for (int64_t o = 0; o < nout; o++) {
    double scale, rtol, atol;
    double want =
        ref_row(op, rows + o * rowlen, rowlen, !tu_is_float(d), &scale);
    if (tu_is_float(od)) want = tu_round(want, od);
    tolerance(op, od, scale, &rtol, &atol);
    tu_assert_close(&got[o], &want, 1, rtol, atol, what);
  }
  free(got);
  free(rows);
  dt_tensor_release(r);
}

/* ndims 0, then every non-empty subset of the dims, some written negative
 * and some in reverse order */
static int make_dimsets(int ndim, dimset *out) {
  int k = 0;
  out[k++] = (dimset){.n = 0};
  if (ndim == 0) {
    out[k++] = (dimset){.n = 1, .dims = {0}};
    out[k++] = (dimset){.n = 1, .dims = {-1}};
    return k;
  }
  for (uint32_t m = 1; m < (1u << ndim); m++) {
    dimset ds = {.n = 0};
    for (int d = 0; d < ndim; d++)
      if (m >> d & 1) ds.dims[ds.n++] = d;
    if (m % 2) ds.dims[0] -= ndim;
    if (m % 3 == 0)
      for (int i = 0; i < ds.n / 2; i++) {
        int t = ds.dims[i];
        ds.dims[i] = ds.dims[ds.n - 1 - i];
        ds.dims[ds.n - 1 - i] = t;
      }
    out[k++] = ds;
  }
  return k;
}

static const dt_shape shapes[] = {
    DT_SHAPE(),        DT_SHAPE(5),          DT_SHAPE(0),
    DT_SHAPE(2, 3, 4), DT_SHAPE(3, 0, 2),    DT_SHAPE(1, 7, 1),
    DT_SHAPE(3, 33),   DT_SHAPE(2, 300),     DT_SHAPE(4, 1, 3, 2),
    DT_SHAPE(2, 2, 1, 2, 3),
};

/* every op on one dtype: all shapes, dim sets, keepdims and layouts */
static void check_dtype(dt_dtype d) {
  tu_leaks_begin();
  double lo = -2, hi = 2, plo = 0.6, phi = 1.6;
  if (d == DT_UINT8) lo = 0, hi = 255, plo = 0, phi = 3;
  else if (!tu_is_float(d)) lo = -50, hi = 50, plo = -3, phi = 3;
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    dt_shape s = shapes[si];
    dimset ds[64];
    int nds = make_dimsets(s.ndim, ds);
    for (int l = 0; l < TU_LAYOUTS; l++) {
      double *v, *pv;
      uint64_t seed = 1000 * si + 10 * (uint64_t)d;
      dt_tensor *a =
          tu_layout_input(s, d, seed, lo, hi, false, (tu_layout)l, &v);
      dt_tensor *p =
          tu_layout_input(s, d, seed + 1, plo, phi, true, (tu_layout)l, &pv);
      for (int k = 0; k < nds; k++)
        for (int keep = 0; keep < 2; keep++)
          for (int op = 0; op < R_COUNT; op++) {
            if (!supports((rop)op, d)) continue;
            bool isp = op == R_PROD;
            run_case((rop)op, isp ? p : a, isp ? pv : v, s, d, &ds[k],
                     keep, (tu_layout)l);
          }
      free(v);
      free(pv);
      dt_tensor_release(a);
      dt_tensor_release(p);
    }
  }
  tu_leaks_end();
}

static void test_float32(void **state) { (void)state; check_dtype(DT_FLOAT32); }
static void test_float64(void **state) { (void)state; check_dtype(DT_FLOAT64); }
static void test_float16(void **state) { (void)state; check_dtype(DT_FLOAT16); }
static void test_bfloat16(void **state) { (void)state; check_dtype(DT_BFLOAT16); }
static void test_int32(void **state) { (void)state; check_dtype(DT_INT32); }
static void test_int64(void **state) { (void)state; check_dtype(DT_INT64); }
static void test_uint8(void **state) { (void)state; check_dtype(DT_UINT8); }
static void test_bool(void **state) { (void)state; check_dtype(DT_BOOL); }

/* ------------------------------------------------------ targeted checks */
static void expect_values(dt_tensor *t, dt_dtype dtype, dt_shape shape,
                          const double *want, const char *what) {
  tu_assert_meta(t, dtype, shape, what);
  double *got = tu_values(t);
  tu_assert_close(got, want, tu_numel(shape), 0, 0, what);
  free(got);
  dt_tensor_release(t);
}

/* hand-computed results, independent of the reference above */
static void test_hand_values(void **state) {
  (void)state;
  tu_leaks_begin();
  const double m[6] = {1, 2, 3, 4, 5, 6};
  dt_tensor *a = tu_tensor(m, DT_SHAPE(2, 3), DT_INT32);
  expect_values(dt_sum(a, (int[]){0}, 1, false), DT_INT64, DT_SHAPE(3),
                (double[]){5, 7, 9}, "sum dim 0");
  expect_values(dt_sum(a, (int[]){-1}, 1, true), DT_INT64, DT_SHAPE(2, 1),
                (double[]){6, 15}, "sum dim -1 keepdim");
  expect_values(dt_prod(a, NULL, 0, false), DT_INT64, DT_SHAPE(),
                (double[]){720}, "prod all");
  expect_values(dt_amax(a, NULL, 0, true), DT_INT32, DT_SHAPE(1, 1),
                (double[]){6}, "amax all keepdim");
  expect_values(dt_argmin(a, (int[]){1}, 1, false), DT_INT64, DT_SHAPE(2),
                (double[]){0, 0}, "argmin dim 1");
  dt_tensor_release(a);

  /* argmax over two dims counts row-major over those dims only */
  const double c[8] = {0, 9, 2, 3, 4, 5, 9, 7}; /* [2, 2, 2] */
  dt_tensor *b = tu_tensor(c, DT_SHAPE(2, 2, 2), DT_FLOAT32);
  expect_values(dt_argmax(b, (int[]){2, 0}, 2, false), DT_INT64, DT_SHAPE(2),
                (double[]){1, 2}, "argmax dims {2, 0}");
  expect_values(dt_argmax(b, NULL, 0, false), DT_INT64, DT_SHAPE(),
                (double[]){1}, "argmax flat: the first 9");
  expect_values(dt_var(b, (int[]){-1}, 1, false, false), DT_FLOAT32,
                DT_SHAPE(2, 2), (double[]){20.25, 0.25, 0.25, 1},
                "var biased");
  expect_values(dt_mean(b, (int[]){0, 1}, 2, false), DT_FLOAT32, DT_SHAPE(2),
                (double[]){15.0 / 4, 24.0 / 4}, "mean dims {0, 1}");
  dt_tensor_release(b);

  /* an expanded (stride-0) input: [1, 4] broadcast to [3, 4] */
  dt_tensor *row = tu_tensor((double[]){1, 2, 3, 4}, DT_SHAPE(1, 4),
                             DT_FLOAT32);
  dt_tensor *ex = dt_expand(row, DT_SHAPE(3, 4));
  assert_non_null(ex);
  expect_values(dt_sum(ex, (int[]){0}, 1, false), DT_FLOAT32, DT_SHAPE(4),
                (double[]){3, 6, 9, 12}, "sum of expanded rows");
  expect_values(dt_var(ex, (int[]){0}, 1, true, true), DT_FLOAT32,
                DT_SHAPE(1, 4), (double[]){0, 0, 0, 0}, "var of expanded");
  expect_values(dt_argmax(ex, NULL, 0, false), DT_INT64, DT_SHAPE(),
                (double[]){3}, "argmax of expanded");
  dt_tensor_release(ex);
  dt_tensor_release(row);

  /* bool: sum counts, amax is any; argmax/argmin refuse bool as PyTorch
   * does ("argmax(): does not support bool input") */
  const double t[4] = {0, 1, 1, 0};
  dt_tensor *e = tu_tensor(t, DT_SHAPE(4), DT_BOOL);
  expect_values(dt_sum(e, NULL, 0, false), DT_INT64, DT_SHAPE(), (double[]){2},
                "bool sum");
  expect_values(dt_amax(e, NULL, 0, false), DT_BOOL, DT_SHAPE(), (double[]){1},
                "bool amax");
  tu_expect_error(dt_argmax(e, NULL, 0, false), DT_ERR_DTYPE, "dt_argmax",
                  "bool", NULL);
  tu_expect_error(dt_argmin(e, NULL, 0, false), DT_ERR_DTYPE, "dt_argmin",
                  "bool", NULL);
  dt_tensor_release(e);
  tu_leaks_end();
}

/* empty extents: sum 0, prod 1, mean and var NaN; var of one element */
static void test_empty_and_single(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *z = dt_zeros(DT_SHAPE(0), NULL);
  expect_values(dt_sum(z, NULL, 0, false), DT_FLOAT32, DT_SHAPE(),
                (double[]){0}, "sum of empty");
  expect_values(dt_prod(z, (int[]){0}, 1, true), DT_FLOAT32, DT_SHAPE(1),
                (double[]){1}, "prod of empty");
  expect_values(dt_mean(z, NULL, 0, false), DT_FLOAT32, DT_SHAPE(),
                (double[]){NAN}, "mean of empty");
  expect_values(dt_var(z, NULL, 0, false, false), DT_FLOAT32, DT_SHAPE(),
                (double[]){NAN}, "var of empty");
  dt_tensor_release(z);
  dt_tensor *zi = dt_zeros(DT_SHAPE(2, 0), &(dt_tensor_options){.dtype = DT_UINT8});
  expect_values(dt_sum(zi, (int[]){1}, 1, false), DT_INT64, DT_SHAPE(2),
                (double[]){0, 0}, "uint8 sum over an empty dim");
  expect_values(dt_amax(zi, (int[]){0}, 1, false), DT_UINT8, DT_SHAPE(0),
                (double[]){0}, "amax keeping the empty dim");
  dt_tensor_release(zi);
  dt_tensor *one = dt_full(DT_SHAPE(3, 1), 2.5, NULL);
  expect_values(dt_var(one, (int[]){1}, 1, true, false), DT_FLOAT32,
                DT_SHAPE(3), (double[]){NAN, NAN, NAN}, "unbiased var of 1");
  expect_values(dt_var(one, (int[]){1}, 1, false, true), DT_FLOAT32,
                DT_SHAPE(3, 1), (double[]){0, 0, 0}, "biased var of 1");
  dt_tensor_release(one);
  tu_leaks_end();
}

/* NaN wins max/min and their indices (the first NaN); infinities order */
static void test_nan_inf(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int k = 0; k < 4; k++) {
    dt_dtype d = tu_float_dtypes[k];
    const double v[5] = {1, NAN, 3, NAN, -INFINITY};
    dt_tensor *a = tu_tensor(v, DT_SHAPE(5), d);
    expect_values(dt_amax(a, NULL, 0, false), d, DT_SHAPE(), (double[]){NAN},
                  "amax with NaN");
    expect_values(dt_amin(a, NULL, 0, false), d, DT_SHAPE(), (double[]){NAN},
                  "amin with NaN");
    expect_values(dt_argmax(a, NULL, 0, false), DT_INT64, DT_SHAPE(),
                  (double[]){1}, "argmax: first NaN");
    expect_values(dt_argmin(a, (int[]){0}, 1, false), DT_INT64, DT_SHAPE(),
                  (double[]){1}, "argmin: first NaN");
    expect_values(dt_sum(a, NULL, 0, false), d, DT_SHAPE(), (double[]){NAN},
                  "sum with NaN");
    dt_tensor_release(a);
    const double w[6] = {-INFINITY, -INFINITY, INFINITY, 2, INFINITY, 2};
    dt_tensor *b = tu_tensor(w, DT_SHAPE(2, 3), d);
    expect_values(dt_argmax(b, (int[]){1}, 1, false), DT_INT64, DT_SHAPE(2),
                  (double[]){2, 1}, "argmax with infinities");
    expect_values(dt_argmin(b, (int[]){1}, 1, false), DT_INT64, DT_SHAPE(2),
                  (double[]){0, 0}, "argmin with infinities");
    expect_values(dt_amax(b, (int[]){0}, 1, false), d, DT_SHAPE(3),
                  (double[]){2, INFINITY, INFINITY}, "amax over dim 0");
    dt_tensor_release(b);
  }
  tu_leaks_end();
}

/* int64 sums and products are exact past 2^53 and wrap like int64 */
static void test_int64_exact(void **state) {
  (void)state;
  tu_leaks_begin();
  const dt_tensor_options o = {.dtype = DT_INT64};
  int64_t v[3] = {INT64_C(1) << 53, 1, INT64_MAX};
  dt_tensor *a = dt_from_host(v, DT_SHAPE(3), &o);
  dt_tensor *s = dt_sum(a, (int[]){0}, 1, false);
  dt_tensor *head = dt_narrow(a, 0, 0, 2);
  dt_tensor *s2 = dt_sum(head, NULL, 0, false);
  int64_t got = 0, got2 = 0;
  assert_int_equal(dt_to_host(s, &got, sizeof got), DT_OK);
  assert_int_equal(dt_to_host(s2, &got2, sizeof got2), DT_OK);
  /* 2^53 + 1 + (2^63 - 1) wraps to 2^53 - 2^63 */
  assert_true(got == (int64_t)((UINT64_C(1) << 53) + (UINT64_C(1) << 63)));
  assert_true(got2 == (INT64_C(1) << 53) + 1);
  int32_t w[2] = {INT32_MAX, INT32_MAX};
  dt_tensor *b = dt_from_host(w, DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT32});
  dt_tensor *p = dt_prod(b, NULL, 0, false);
  int64_t gp = 0;
  assert_int_equal(dt_to_host(p, &gp, sizeof gp), DT_OK);
  assert_true(gp == (int64_t)INT32_MAX * INT32_MAX); /* no int32 overflow */
  dt_tensor_release(p);
  dt_tensor_release(b);
  dt_tensor_release(s);
  dt_tensor_release(s2);
  dt_tensor_release(head);
  dt_tensor_release(a);
  tu_leaks_end();
}

/* float32 sums and means over short rows (the register tiles of
 * kernels/cpu/reduce.c: rows of at most 256 positions read down the
 * columns) are bitwise those of the same values laid out as dense rows
 * (the lane sums), for row lengths around the 8 lanes and the 256 limit,
 * 67 columns (a full tile of 64, then 3 in the tail), signed zeros and
 * magnitudes 2^40 apart (so a change of order changes the bits), one
 * reduced dim or two; and each equals a naive double sum to rounding */
static void test_short_rows_bitwise(void **state) {
  (void)state;
  tu_leaks_begin();
  const int64_t lens[] = {1, 2, 3, 7, 8, 9, 16, 31, 256, 257};
  enum { COLS = 67 };
  for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
    int64_t n = lens[li];
    double *v = tu_random_values(n * COLS, DT_FLOAT32, 7 + li, -3, 3, false);
    double *t = malloc(sizeof(double) * (size_t)(n * COLS));
    for (int64_t i = 0; i < n * COLS; i += 5) v[i] = -0.0; /* zeros' signs */
    /* magnitudes 2^40 apart: double sums round, so the order shows */
    for (int64_t i = 1; i < n * COLS; i += 3) v[i] = (i % 2 ? 1 : -1) * ldexp(1.0 + (double)(i % 7), 40);
    for (int64_t c = 0; c < COLS; c++)
      for (int64_t j = 0; j < n; j++) t[j * COLS + c] = v[c * n + j];
    dt_tensor *rows = tu_tensor(v, DT_SHAPE(COLS, n), DT_FLOAT32);  /* dense rows */
    dt_tensor *cols = tu_tensor(t, DT_SHAPE(n, COLS), DT_FLOAT32);  /* tiles */
    /* the same rows as [a, b] reduced over both dims (n = a * b) */
    int64_t a = n % 2 == 0 ? 2 : 1;
    dt_tensor *cols2 = tu_tensor(t, DT_SHAPE(a, n / a, COLS), DT_FLOAT32);
    for (int op = R_SUM; op <= R_MEAN; op++) {
      dt_tensor *x = call((rop)op, rows, (int[]){1}, 1, false);
      dt_tensor *y = call((rop)op, cols, (int[]){0}, 1, false);
      dt_tensor *z = call((rop)op, cols2, (int[]){0, 1}, 2, false);
      assert_true(x && y && z);
      float bx[COLS], by[COLS], bz[COLS];
      assert_int_equal(dt_to_host(x, bx, sizeof bx), DT_OK);
      assert_int_equal(dt_to_host(y, by, sizeof by), DT_OK);
      assert_int_equal(dt_to_host(z, bz, sizeof bz), DT_OK);
      for (int c = 0; c < COLS; c++) {
        if (memcmp(&bx[c], &by[c], sizeof(float)) || memcmp(&bx[c], &bz[c], sizeof(float)))
          fail_msg("%s over %lld: column %d: rows %a, tiles %a, two dims %a", rop_names[op],
                   (long long)n, c, (double)bx[c], (double)by[c], (double)bz[c]);
        double want = 0, mag = 0; /* double rounding: n eps sum |v|, then float's */
        for (int64_t j = 0; j < n; j++) {
          want += v[c * n + j];
          mag += fabs(v[c * n + j]);
        }
        if (op == R_MEAN) {
          want /= (double)n;
          mag /= (double)n;
        }
        if (fabs(bx[c] - want) > 4e-16 * (double)n * mag + 1.2e-7 * fabs(want) + 1e-30)
          fail_msg("%s over %lld: column %d is %g, naive %g", rop_names[op],
                   (long long)n, c, (double)bx[c], want);
      }
      TU_RELEASE(x, y, z);
    }
    TU_RELEASE(rows, cols, cols2);
    free(v);
    free(t);
  }
  tu_leaks_end();
}

/* float sums are bitwise the same for any layout of the same values and
 * run to run (the order depends only on the sizes), and a long dense row
 * (the in-place fast path) matches the reference */
static void test_deterministic(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int k = 0; k < 4; k++) {
    dt_dtype d = tu_float_dtypes[k];
    double *v = tu_random_values(6000, d, 99 + k, -3, 3, false);
    dt_tensor *a = tu_tensor(v, DT_SHAPE(6, 1000), d);
    dt_tensor *nc = tu_noncontig_values(v, DT_SHAPE(6, 1000), d);
    dt_tensor *t1 = dt_transpose(a, 0, 1);
    dt_tensor *tc = dt_contiguous(t1);
    dt_tensor *tr = dt_transpose(tc, 0, 1); /* a's values, column-major */
    dt_tensor *in[3] = {a, nc, tr};
    size_t es = d == DT_FLOAT64 ? 8 : d == DT_FLOAT32 ? 4 : 2;
    for (int op = R_SUM; op <= R_VAR_UNBIASED; op++) {
      if (op == R_PROD) continue;
      unsigned char first[6 * 8], got[6 * 8];
      for (int i = 0; i < 4; i++) {
        dt_tensor *r = call((rop)op, in[i % 3], (int[]){-1}, 1, false);
        assert_non_null(r);
        assert_int_equal(dt_to_host(r, i ? got : first, sizeof got), DT_OK);
        if (i && memcmp(first, got, 6 * es) != 0)
          fail_msg("%s %s: layout %d gives different bits", rop_names[op],
                   dt_dtype_name(d), i % 3);
        if (i == 0) { /* and the values are right */
          double *gv = tu_values(r);
          for (int o = 0; o < 6; o++) {
            double scale, rtol, atol;
            double want = tu_round(ref_row((rop)op, v + o * 1000, 1000, false,
                                           &scale), d);
            tolerance((rop)op, d, scale, &rtol, &atol);
            tu_assert_close(&gv[o], &want, 1, rtol, atol, rop_names[op]);
          }
          free(gv);
        }
        dt_tensor_release(r);
      }
    }
    free(v);
    dt_tensor_release(tr);
    dt_tensor_release(tc);
    dt_tensor_release(t1);
    dt_tensor_release(nc);
    dt_tensor_release(a);
  }
  tu_leaks_end();
}

/* A reduced dim of size 0 with the kept dims laid out so that neighbouring
 * outputs are adjacent in memory (the column-tile layout): every output is
 * the identity of its op. Regression: the tiled path overshot the output
 * ([0, 2, 100]: a heap overflow) or stored nothing ([0, 100]). */
static void test_empty_reduced_leading_dim(void **state) {
  (void)state;
  tu_leaks_begin();
  static const dt_shape empties[] = {DT_SHAPE(0, 100), DT_SHAPE(0, 2, 100),
                                     DT_SHAPE(0, 3, 70), DT_SHAPE(0, 65)};
  for (int di = 0; di < 4; di++) {
    dt_dtype d = tu_float_dtypes[di];
    for (size_t si = 0; si < sizeof empties / sizeof *empties; si++) {
      dt_shape s = empties[si];
      dt_tensor *a = dt_zeros(s, &(dt_tensor_options){.dtype = d});
      assert_non_null(a);
      int64_t n = 1; /* the kept dims */
      for (int k = 1; k < s.ndim; k++) n *= s.dims[k];
      char ss[64];
      tu_shape_str(s, ss, sizeof ss);
      const rop ops[] = {R_SUM, R_MEAN, R_PROD, R_VAR, R_VAR_UNBIASED};
      const double want[] = {0, NAN, 1, NAN, NAN};
      for (int o = 0; o < 5; o++) {
        dt_tensor *r = call(ops[o], a, (int[]){0}, 1, false);
        if (!r) fail_msg("%s: %s", rop_names[ops[o]], dt_last_error());
        assert_int_equal(dt_tensor_numel(r), n);
        double *got = tu_values(r);
        for (int64_t i = 0; i < n; i++) {
          bool ok = isnan(want[o]) ? isnan(got[i]) : got[i] == want[o];
          if (!ok)
            fail_msg("%s %s over dim 0 of %s zeros: output %lld is %g, "
                     "want %g", rop_names[ops[o]], dt_dtype_name(d), ss,
                     (long long)i, got[i], want[o]);
        }
        free(got);
        dt_tensor_release(r);
      }
      dt_tensor_release(a);
    }
  }
  /* integers: sum 0, prod 1 over the same layout */
  dt_tensor *ai = dt_zeros(DT_SHAPE(0, 2, 100), &(dt_tensor_options){.dtype = DT_INT32});
  dt_tensor *si = dt_sum(ai, (int[]){0}, 1, false);
  dt_tensor *pi = dt_prod(ai, (int[]){0}, 1, false);
  double *gs = tu_values(si), *gp = tu_values(pi);
  for (int i = 0; i < 200; i++) assert_true(gs[i] == 0 && gp[i] == 1);
  free(gs);
  free(gp);
  TU_RELEASE(pi, si, ai);
  tu_leaks_end();
}

/* ---------------------------------------------------- DTensor means
 * A mean over dims that hold no element is 0 / 0 = NaN (PyTorch:
 * torch.zeros(0).mean() and torch.zeros(3, 0).mean(1) are NaN), on a
 * mesh as on one device: a Shard of the reduced dim, a Partial input and
 * all dims (ndims 0) alike, keepdim both ways. A non-empty mean whose
 * last rank holds an empty shard ([5] over 4 ranks: 2, 2, 1, 0) keeps
 * its value (1 + ... + 5) / 5 = 3. */
typedef struct mean_case {
  dt_shape shape;
  dt_placement pl[2];
  int dims[2], ndims;
  bool keep;
  int64_t n;       /* outputs */
  double want;     /* each output */
} mean_case;

static void check_dtensor_mean(dt_mesh *m, const mean_case *k, dt_dtype d) {
  dt_tensor_options o = {.dtype = d, .mesh = m, .placements = k->pl};
  double v[5] = {1, 2, 3, 4, 5};
  dt_tensor *a;
  if (tu_numel(k->shape)) { /* [5]: 1..5 in dtype d */
    unsigned char raw[5 * 8];
    for (int i = 0; i < 5; i++) tu_encode(raw + i * dt_dtype_size(d), d, v[i]);
    a = dt_from_host(raw, k->shape, &o);
  } else {
    a = dt_zeros(k->shape, &o);
  }
  if (!a) fail_msg("input: %s", dt_last_error());
  dt_tensor *r = dt_mean(a, k->ndims ? k->dims : NULL, k->ndims, k->keep);
  if (!r) fail_msg("dt_mean: %s", dt_last_error());
  assert_int_equal(dt_tensor_numel(r), k->n);
  double *got = tu_values(r);
  char ss[64];
  tu_shape_str(k->shape, ss, sizeof ss);
  for (int64_t i = 0; i < k->n; i++)
    if (isnan(k->want) ? !isnan(got[i]) : got[i] != k->want)
      fail_msg("%s mean of %s over %d dims (keepdim %d) on a %d-d mesh: "
               "output %lld is %g, want %g", dt_dtype_name(d), ss, k->ndims,
               k->keep, dt_mesh_ndim(m), (long long)i, got[i], k->want);
  free(got);
  TU_RELEASE(r, a);
}

static void test_dtensor_mean_of_nothing(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  assert_non_null(rt);
  dt_mesh *line = dt_mesh_init(rt, NULL, DT_SHAPE(4), NULL);
  dt_mesh *grid = dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), NULL);
  assert_true(line && grid);
  const dt_placement S0 = DT_SHARD(0), S1 = DT_SHARD(1), R = DT_REPLICATE,
                     PS = DT_PARTIAL(DT_REDUCE_SUM), PA = DT_PARTIAL(DT_REDUCE_AVG);
  const mean_case line_cases[] = {
      {DT_SHAPE(0), {S0}, {0}, 0, false, 1, NAN},
      {DT_SHAPE(0), {S0}, {0}, 1, true, 1, NAN},
      {DT_SHAPE(0), {R}, {0}, 0, false, 1, NAN},
      {DT_SHAPE(0), {PS}, {0}, 0, false, 1, NAN},
      {DT_SHAPE(0), {PA}, {0}, 1, false, 1, NAN},
      {DT_SHAPE(3, 0), {S1}, {1}, 1, false, 3, NAN},
      {DT_SHAPE(3, 0), {S1}, {-1}, 1, true, 3, NAN},
      {DT_SHAPE(3, 0), {S1}, {0}, 0, false, 1, NAN},
      {DT_SHAPE(3, 0), {S0}, {1}, 1, false, 3, NAN},
      {DT_SHAPE(5), {S0}, {0}, 0, false, 1, 3},
  };
  const mean_case grid_cases[] = {
      {DT_SHAPE(0, 4), {S0, S1}, {0}, 1, false, 4, NAN},
      {DT_SHAPE(0, 4), {S1, S0}, {0}, 0, true, 1, NAN},
      {DT_SHAPE(4, 0), {R, S1}, {1}, 1, true, 4, NAN},
  };
  for (int di = 0; di < 4; di++) {
    for (size_t i = 0; i < sizeof line_cases / sizeof *line_cases; i++)
      check_dtensor_mean(line, &line_cases[i], tu_float_dtypes[di]);
    for (size_t i = 0; i < sizeof grid_cases / sizeof *grid_cases; i++)
      check_dtensor_mean(grid, &grid_cases[i], tu_float_dtypes[di]);
  }
  dt_mesh_release(grid);
  dt_mesh_release(line);
  dt_runtime_destroy(rt);
}

/* ------------------------------------------------------------- errors */
static void test_errors(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_clear_error();
  dt_tensor *a = dt_zeros(DT_SHAPE(2, 3), NULL);
  dt_tensor *e = dt_zeros(DT_SHAPE(3, 0), NULL);
  dt_tensor *i = dt_zeros(DT_SHAPE(4), &(dt_tensor_options){.dtype = DT_INT32});
  dt_tensor *b = dt_zeros(DT_SHAPE(4), &(dt_tensor_options){.dtype = DT_BOOL});
  dt_tensor *s = dt_zeros(DT_SHAPE(), NULL);
  dt_tensor *c = dt_zeros(DT_SHAPE(2, 3, 4), NULL);

  tu_expect_error(dt_sum(NULL, NULL, 0, false), DT_ERR_INVALID_ARGUMENT,
                  "dt_sum", "a is NULL", NULL);
  tu_expect_error(dt_sum(a, (int[]){5}, 1, false), DT_ERR_INVALID_ARGUMENT,
                  "dt_sum", "dim 5", "2-d", NULL);
  tu_expect_error(dt_mean(a, (int[]){0, -3}, 2, true),
                  DT_ERR_INVALID_ARGUMENT, "dt_mean", "-3", NULL);
  tu_expect_error(dt_amax(c, (int[]){1, -2}, 2, false),
                  DT_ERR_INVALID_ARGUMENT, "dt_amax", "-2", "more than once",
                  NULL);
  tu_expect_error(dt_mean(i, NULL, 0, false), DT_ERR_DTYPE, "dt_mean",
                  "int32", NULL);
  tu_expect_error(dt_var(b, NULL, 0, true, false), DT_ERR_DTYPE, "dt_var",
                  "bool", NULL);
  tu_expect_error(dt_argmax(e, (int[]){1}, 1, false), DT_ERR_SHAPE,
                  "dt_argmax", "zero-size", "dim 1", "[3, 0]", NULL);
  tu_expect_error(dt_amin(e, NULL, 0, true), DT_ERR_SHAPE, "dt_amin",
                  "zero-size", NULL);
  tu_expect_error(dt_prod(a, (int[]){0, 1, 0, 1, 0, 1, 0, 1, 0}, 9, false),
                  DT_ERR_INVALID_ARGUMENT, "dt_prod", "ndims 9", NULL);
  tu_expect_error(dt_argmin(a, NULL, -1, false), DT_ERR_INVALID_ARGUMENT,
                  "dt_argmin", "ndims -1", NULL);
  tu_expect_error(dt_sum(a, NULL, 2, false), DT_ERR_INVALID_ARGUMENT,
                  "dt_sum", "dims is NULL", "2", NULL);
  tu_expect_error(dt_argmin(s, (int[]){1}, 1, false), DT_ERR_INVALID_ARGUMENT,
                  "dt_argmin", "dim 1", "0-d", NULL);
  tu_expect_error(dt_var(s, (int[]){0, -1}, 2, false, false),
                  DT_ERR_INVALID_ARGUMENT, "dt_var", "-1", "more than once",
                  NULL);
  /* a failed inner call: the outer one keeps the first error */
  tu_expect_error(dt_sum(dt_mean(i, NULL, 0, false), NULL, 0, false),
                  DT_ERR_DTYPE, "dt_mean", "int32", NULL);
  /* 0-d tensors take dim 0 and -1 */
  dt_tensor *r = dt_sum(s, (int[]){-1}, 1, true);
  assert_non_null(r);
  assert_int_equal(dt_tensor_ndim(r), 0);
  dt_tensor_release(r);

  dt_tensor_release(c);
  dt_tensor_release(s);
  dt_tensor_release(b);
  dt_tensor_release(i);
  dt_tensor_release(e);
  dt_tensor_release(a);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_values),
      cmocka_unit_test(test_empty_and_single),
      cmocka_unit_test(test_nan_inf),
      cmocka_unit_test(test_int64_exact),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_short_rows_bitwise),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_empty_reduced_leading_dim),
      cmocka_unit_test(test_dtensor_mean_of_nothing),
      cmocka_unit_test(test_float32),
      cmocka_unit_test(test_float64),
      cmocka_unit_test(test_float16),
      cmocka_unit_test(test_bfloat16),
      cmocka_unit_test(test_int32),
      cmocka_unit_test(test_int64),
      cmocka_unit_test(test_uint8),
      cmocka_unit_test(test_bool),
  };
  /* the DTensor means run on rank threads: a hang fails the run */
  return TU_RUN_TESTS_WITH_ALARM(600, tests);
}
