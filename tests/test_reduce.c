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

typedef enum rop {
  R_SUM, R_MEAN, R_AMAX, R_AMIN, R_PROD, R_ARGMAX, R_ARGMIN, R_VAR,
  R_VAR_UNBIASED, R_COUNT
} rop;
static const char *const rop_names[R_COUNT] = {
    "sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "var",
    "var(unbiased)"};

typedef enum layout { L_CONTIG, L_NONCONTIG, L_TRANSPOSED, L_COUNT } layout;
static const char *const layout_names[L_COUNT] = {"contiguous", "step-2",
                                                   "transposed"};

/* ------------------------------------------------------------ helpers */
/* float16 rounding by scaling (ties to even): what tu_round(v, FLOAT16)
 * gives, without its brute-force search (test_round_f16 checks that) */
static double round_f16(double v) {
  if (v != v || isinf(v)) return v;
  double a = fabs(v);
  if (a >= 65520.0) return copysign(INFINITY, v);
  int e;
  frexp(a, &e);         /* a = m * 2^e, m in [0.5, 1) */
  int q = e - 11;       /* 11 significant bits */
  if (q < -24) q = -24; /* subnormals: fixed spacing 2^-24 */
  return copysign(ldexp(nearbyint(ldexp(a, -q)), q), v);
}
static double round_to(double v, dt_dtype d) {
  return d == DT_FLOAT16 ? round_f16(v) : tu_round(v, d);
}

/* float16 bits of a value float16 holds exactly (tu_encode's search is
 * too slow for the thousands of tensors built here; test_round_f16 checks
 * the two agree) */
static uint16_t f16_bits(double v) {
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  double a = fabs(v);
  if (a != a) return 0x7e00;
  if (isinf(a)) return (uint16_t)(sign | 0x7c00);
  int e;
  double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  if (a == 0) return sign;
  if (e < -13) return (uint16_t)(sign | (uint16_t)ldexp(a, 24)); /* subnormal */
  return (uint16_t)(sign | (e + 14) << 10 | ((uint16_t)ldexp(m, 11) - 1024));
}

static bool is_float(dt_dtype d) {
  return d == DT_FLOAT32 || d == DT_FLOAT64 || d == DT_FLOAT16 ||
         d == DT_BFLOAT16;
}

static void shape_str(dt_shape s, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < s.ndim && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, i ? ", %lld" : "%lld",
                          (long long)s.dims[i]);
  if (n < len) snprintf(buf + n, len - n, "]");
}

static void assert_shape(dt_tensor *t, dt_shape want, const char *what) {
  dt_shape got = dt_tensor_shape(t);
  bool same = got.ndim == want.ndim;
  for (int i = 0; same && i < want.ndim; i++)
    same = got.dims[i] == want.dims[i];
  if (!same) {
    char g[128], w[128];
    shape_str(got, g, sizeof g);
    shape_str(want, w, sizeof w);
    fail_msg("%s: shape %s, want %s", what, g, w);
  }
}

/* tu_tensor, with a fast path for float16 (values already rounded) */
static dt_tensor *host_tensor(const double *v, dt_shape s, dt_dtype d) {
  if (d != DT_FLOAT16) return tu_tensor(v, s, d);
  int64_t n = tu_numel(s);
  uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) h[i] = f16_bits(v[i]);
  dt_tensor *t = dt_from_host(h, s, &(dt_tensor_options){.dtype = d});
  free(h);
  assert_non_null(t);
  return t;
}

/* tu_noncontig for values v of shape s (built with host_tensor): a step-2
 * slice of storage twice as long in the last dim; 0-d: a select */
static dt_tensor *step2(const double *v, dt_shape s, dt_dtype d) {
  if (d != DT_FLOAT16) {
    dt_tensor *t = tu_tensor(v, s, d), *r = tu_noncontig(t);
    dt_tensor_release(t);
    return r;
  }
  int64_t n = tu_numel(s);
  double *w = malloc(sizeof(double) * (size_t)(2 * n + 3));
  dt_shape bs = s.ndim ? s : DT_SHAPE(3);
  if (s.ndim) bs.dims[s.ndim - 1] *= 2;
  else w[0] = w[2] = -7, w[1] = v[0];
  for (int64_t i = 0; s.ndim && i < n; i++) {
    w[2 * i] = v[i];
    w[2 * i + 1] = -7; /* garbage the view must never read */
  }
  dt_tensor *big = host_tensor(w, bs, d);
  dt_tensor *r = s.ndim ? dt_slice(big, s.ndim - 1, 0, INT64_MAX, 2)
                        : dt_select(big, 0, 1);
  dt_tensor_release(big);
  free(w);
  assert_non_null(r);
  return r;
}

/* random values for n elements of dtype d: floats in [lo, hi), ints in
 * [lo, hi]; flip negates every third (prod data: signs without shrinking) */
static double *random_values(int64_t n, dt_dtype d, uint64_t seed, double lo,
                             double hi, bool flip) {
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  tu_fill_random(v, n, is_float(d) ? DT_FLOAT64 : d, seed, lo, hi);
  for (int64_t i = 0; i < n; i++) {
    if (flip && i % 3 == 0 && d != DT_UINT8 && d != DT_BOOL) v[i] = -v[i];
    if (is_float(d)) v[i] = round_to(v[i], d);
  }
  return v;
}

/* A tensor of logical shape s and dtype d in layout l; *vals receives its
 * row-major values. Transposed: the storage holds shape s with dims 0 and
 * last swapped and the result is its transpose (1-d and 0-d: step-2). */
static dt_tensor *make_input(dt_shape s, dt_dtype d, uint64_t seed, double lo,
                             double hi, bool flip, layout l, double **vals) {
  if (l == L_TRANSPOSED && s.ndim < 2) l = L_NONCONTIG;
  int last = s.ndim - 1;
  dt_shape bs = s;
  if (l == L_TRANSPOSED) {
    bs.dims[0] = s.dims[last];
    bs.dims[last] = s.dims[0];
  }
  int64_t n = tu_numel(s);
  double *bv = random_values(n, d, seed, lo, hi, flip);
  if (l == L_NONCONTIG) {
    *vals = bv;
    return step2(bv, s, d);
  }
  dt_tensor *base = host_tensor(bv, bs, d);
  if (l == L_CONTIG) {
    *vals = bv;
    return base;
  }
  dt_tensor *t = dt_transpose(base, 0, last);
  dt_tensor_release(base);
  assert_non_null(t);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  int64_t idx[DT_MAX_DIMS];
  for (int64_t i = 0; i < n; i++) { /* v[i0, .., iL] = bv[iL, .., i0] */
    tu_unravel(i, s, idx);
    int64_t tmp = idx[0];
    idx[0] = idx[last];
    idx[last] = tmp;
    int64_t flat = 0;
    for (int k = 0; k < bs.ndim; k++) flat = flat * bs.dims[k] + idx[k];
    v[i] = bv[flat];
  }
  free(bv);
  *vals = v;
  return t;
}

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
  return is_float(d) || (op != R_MEAN && op != R_VAR && op != R_VAR_UNBIASED);
}

static dt_dtype out_dtype(rop op, dt_dtype d) {
  if (op == R_ARGMAX || op == R_ARGMIN) return DT_INT64;
  if ((op == R_SUM || op == R_PROD) && !is_float(d)) return DT_INT64;
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
  if (!is_float(od) || op == R_AMAX || op == R_AMIN) return;
  *rtol = 8 * tu_rtol(od);
  *atol = op == R_PROD ? tu_rtol(od) * 1e-4 : tu_rtol(od) * scale;
}

static void run_case(rop op, dt_tensor *a, const double *v, dt_shape s,
                     dt_dtype d, const dimset *ds, bool keep, layout l) {
  char what[256], sh[128];
  shape_str(s, sh, sizeof sh);
  int n = snprintf(what, sizeof what, "%s %s %s %s dims {", rop_names[op],
                   dt_dtype_name(d), sh, layout_names[l]);
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
  if (!r) fail_msg("%s: %s", what, dt_last_error());
  dt_dtype od = out_dtype(op, d);
  if (dt_tensor_dtype(r) != od)
    fail_msg("%s: dtype %s, want %s", what, dt_dtype_name(dt_tensor_dtype(r)),
             dt_dtype_name(od));
  dt_shape ws = {.ndim = 0};
  for (int k = 0; k < s.ndim; k++)
    if (!(mask >> k & 1)) ws.dims[ws.ndim++] = s.dims[k];
    else if (keep) ws.dims[ws.ndim++] = 1;
  assert_shape(r, ws, what);
  double *got = tu_values(r);
  for (int64_t o = 0; o < nout; o++) {
    double scale, rtol, atol;
    double want = ref_row(op, rows + o * rowlen, rowlen, !is_float(d), &scale);
    if (is_float(od)) want = round_to(want, od);
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
  else if (!is_float(d)) lo = -50, hi = 50, plo = -3, phi = 3;
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    dt_shape s = shapes[si];
    dimset ds[64];
    int nds = make_dimsets(s.ndim, ds);
    for (int l = 0; l < L_COUNT; l++) {
      double *v, *pv;
      uint64_t seed = 1000 * si + 10 * (uint64_t)d;
      dt_tensor *a = make_input(s, d, seed, lo, hi, false, (layout)l, &v);
      dt_tensor *p = make_input(s, d, seed + 1, plo, phi, true, (layout)l, &pv);
      for (int k = 0; k < nds; k++)
        for (int keep = 0; keep < 2; keep++)
          for (int op = 0; op < R_COUNT; op++) {
            if (!supports((rop)op, d)) continue;
            bool isp = op == R_PROD;
            run_case((rop)op, isp ? p : a, isp ? pv : v, s, d, &ds[k],
                     keep, (layout)l);
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
/* the test's fast float16 rounding agrees with tu_round */
static void test_round_f16(void **state) {
  (void)state;
  double v[1200];
  tu_fill_random(v, 1000, DT_FLOAT64, 7, -1, 1);
  for (int i = 0; i < 1000; i++) v[i] = ldexp(v[i], (i % 45) - 28);
  for (int i = 0; i < 200; i++) /* exact ties between float16 neighbours */
    v[1000 + i] = ldexp(2 * (1024 + i) + 1, (i % 30) - 35);
  for (int i = 0; i < 1200; i++) {
    double r = round_f16(v[i]);
    if (r != tu_round(v[i], DT_FLOAT16))
      fail_msg("round_f16(%.17g) = %.17g, tu_round %.17g", v[i], r,
               tu_round(v[i], DT_FLOAT16));
    uint16_t want;
    tu_encode(&want, DT_FLOAT16, r);
    if (f16_bits(r) != want)
      fail_msg("f16_bits(%.17g) = %#x, tu_encode %#x", r, f16_bits(r), want);
  }
  const double special[4] = {0.0, -0.0, INFINITY, -INFINITY};
  for (int i = 0; i < 4; i++) {
    uint16_t want;
    tu_encode(&want, DT_FLOAT16, special[i]);
    assert_int_equal(f16_bits(special[i]), want);
  }
}

static void expect_values(dt_tensor *t, dt_dtype dtype, dt_shape shape,
                          const double *want, const char *what) {
  if (!t) fail_msg("%s: %s", what, dt_last_error());
  if (dt_tensor_dtype(t) != dtype)
    fail_msg("%s: dtype %s, want %s", what, dt_dtype_name(dt_tensor_dtype(t)),
             dt_dtype_name(dtype));
  assert_shape(t, shape, what);
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

  /* bool: sum counts, amax is any, argmax finds the first true */
  const double t[4] = {0, 1, 1, 0};
  dt_tensor *e = tu_tensor(t, DT_SHAPE(4), DT_BOOL);
  expect_values(dt_sum(e, NULL, 0, false), DT_INT64, DT_SHAPE(), (double[]){2},
                "bool sum");
  expect_values(dt_amax(e, NULL, 0, false), DT_BOOL, DT_SHAPE(), (double[]){1},
                "bool amax");
  expect_values(dt_argmax(e, NULL, 0, false), DT_INT64, DT_SHAPE(),
                (double[]){1}, "bool argmax");
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

/* float sums are bitwise the same for any layout of the same values and
 * run to run (the order depends only on the sizes), and a long dense row
 * (the in-place fast path) matches the reference */
static void test_deterministic(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int k = 0; k < 4; k++) {
    dt_dtype d = tu_float_dtypes[k];
    double *v = random_values(6000, d, 99 + k, -3, 3, false);
    dt_tensor *a = host_tensor(v, DT_SHAPE(6, 1000), d);
    dt_tensor *nc = step2(v, DT_SHAPE(6, 1000), d);
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
            double want = round_to(ref_row((rop)op, v + o * 1000, 1000, false,
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
      cmocka_unit_test(test_round_f16),
      cmocka_unit_test(test_hand_values),
      cmocka_unit_test(test_empty_and_single),
      cmocka_unit_test(test_nan_inf),
      cmocka_unit_test(test_int64_exact),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_float32),
      cmocka_unit_test(test_float64),
      cmocka_unit_test(test_float16),
      cmocka_unit_test(test_bfloat16),
      cmocka_unit_test(test_int32),
      cmocka_unit_test(test_int64),
      cmocka_unit_test(test_uint8),
      cmocka_unit_test(test_bool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
