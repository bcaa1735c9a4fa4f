/* Tests of softmax, log_softmax, layer_norm and rms_norm against naive
 * double-precision references written here, on every float dtype, shapes
 * with size-0 and size-1 dims, 0-d tensors, every dim (negative too), and
 * contiguous, step-2 and transposed inputs (and step-2 weights); plus
 * numerical stability, masking rows, bitwise agreement of the dense fast
 * path with strided inputs, and bad arguments. Inputs come from
 * tu_layout_input (tests/support/testutil.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "support/testutil.h"

/* ----------------------------------------------------------- references */
/* softmax (or log_softmax) of v (shape s) along dim d, in double */
static void ref_softmax(const double *v, dt_shape s, int d, bool lg,
                        double *out) {
  int64_t n = tu_numel(s), len = s.ndim ? s.dims[d] : 1, inner = 1;
  for (int k = d + 1; k < s.ndim; k++) inner *= s.dims[k];
  int64_t idx[DT_MAX_DIMS];
  for (int64_t i = 0; i < n; i++) {
    int64_t at = 0;
    if (s.ndim) {
      tu_unravel(i, s, idx);
      at = idx[d];
    }
    const double *row = v + (i - at * inner); /* row[k * inner] */
    double m = -INFINITY, sum = 0;
    for (int64_t k = 0; k < len; k++) m = row[k * inner] > m ? row[k * inner] : m;
    for (int64_t k = 0; k < len; k++) sum += exp(row[k * inner] - m);
    out[i] = lg ? (v[i] - m) - log(sum) : exp(v[i] - m) / sum;
  }
}

/* layer_norm (rms: rms_norm) of x (shape s) over the last dim; w, b may be
 * NULL; *scale: the largest |normalised * w| + |b| */
static void ref_norm(const double *x, dt_shape s, const double *w,
                     const double *b, double eps, bool rms, double *out,
                     double *scale) {
  int64_t len = s.dims[s.ndim - 1], n = tu_numel(s);
  *scale = 0;
  for (int64_t r = 0; len && r < n / len; r++) {
    const double *row = x + r * len;
    double mean = 0, var = 0;
    for (int64_t k = 0; k < len; k++) mean += row[k];
    mean = rms ? 0 : mean / len;
    for (int64_t k = 0; k < len; k++) var += (row[k] - mean) * (row[k] - mean);
    var /= len;
    for (int64_t k = 0; k < len; k++) {
      double y = (row[k] - mean) / sqrt(var + eps) * (w ? w[k] : 1);
      double c = fabs(y) + (b ? fabs(b[k]) : 0);
      out[r * len + k] = y + (b ? b[k] : 0);
      *scale = c > *scale ? c : *scale;
    }
  }
}

/* got ≈ want rounded to d: 8 * tu_rtol(d) relative (a rounding step of d);
 * absolute: 8 * tu_rtol of the compute type (float32 for the 16-bit
 * types) times the magnitude of the terms */
static void check_result(dt_tensor *r, const double *ref, dt_shape s,
                         dt_dtype d, double scale, const char *what) {
  tu_assert_meta(r, d, s, what);
  int64_t n = tu_numel(s);
  double *got = tu_values(r);
  double rtol = 8 * tu_rtol(d);
  double atol = 8 * tu_rtol(d == DT_FLOAT64 ? DT_FLOAT64 : DT_FLOAT32) * scale;
  for (int64_t i = 0; i < n; i++) {
    double want = tu_round(ref[i], d);
    tu_assert_close(&got[i], &want, 1, rtol, atol, what);
  }
  free(got);
  dt_tensor_release(r);
}

static const dt_shape shapes[] = {
    DT_SHAPE(),      DT_SHAPE(5),        DT_SHAPE(0),      DT_SHAPE(2, 3, 4),
    DT_SHAPE(3, 0, 2), DT_SHAPE(1, 7, 1), DT_SHAPE(3, 33), DT_SHAPE(2, 300),
    DT_SHAPE(4, 1, 3, 2), DT_SHAPE(4, 1), DT_SHAPE(0, 4),
};
#define NSHAPES (sizeof shapes / sizeof *shapes)

/* ------------------------------------------------------ softmax sweeps */
static void softmax_case(dt_tensor *a, const double *v, dt_shape s,
                         dt_dtype d, int dim, bool lg, tu_layout l) {
  char what[200], sh[128];
  tu_shape_str(s, sh, sizeof sh);
  snprintf(what, sizeof what, "%s %s %s %s dim %d",
           lg ? "log_softmax" : "softmax", dt_dtype_name(d), sh,
           tu_layout_names[l], dim);
  int64_t n = tu_numel(s);
  double *ref = malloc(sizeof(double) * (size_t)(n ? n : 1)), scale = 1;
  int wd = s.ndim && dim < 0 ? dim + s.ndim : s.ndim ? dim : 0;
  ref_softmax(v, s, wd, lg, ref);
  for (int64_t i = 0; lg && i < n; i++)
    scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
  check_result(lg ? dt_log_softmax(a, dim) : dt_softmax(a, dim), ref, s, d,
               scale, what);
  free(ref);
}

static void check_softmax(dt_dtype d) {
  tu_leaks_begin();
  for (size_t si = 0; si < NSHAPES; si++) {
    dt_shape s = shapes[si];
    for (int l = 0; l < TU_LAYOUTS; l++) {
      double *v;
      dt_tensor *a = tu_layout_input(s, d, 31 * si + (uint64_t)d, -4, 4, false,
                                (tu_layout)l, &v);
      int nd = s.ndim ? s.ndim : 1;
      for (int k = 0; k < nd; k++)
        for (int lg = 0; lg < 2; lg++) {
          softmax_case(a, v, s, d, k, lg, (tu_layout)l);
          softmax_case(a, v, s, d, k - nd, lg, (tu_layout)l);
        }
      free(v);
      dt_tensor_release(a);
    }
  }
  tu_leaks_end();
}

/* --------------------------------------------------- layer/rms sweeps */
typedef struct affine { dt_tensor *w, *b; double *wv, *bv; } affine;

/* kind: 0 none, 1 weight, 2 weight + bias, 3 bias only; odd kinds use
 * step-2 parameters */
static affine make_affine(int kind, int64_t len, dt_dtype d, uint64_t seed) {
  affine f = {0};
  tu_layout l = kind % 2 ? TU_STEP2 : TU_CONTIG;
  if (kind == 1 || kind == 2)
    f.w = tu_layout_input(DT_SHAPE(len), d, seed, 0.5, 1.5, true, l, &f.wv);
  if (kind >= 2)
    f.b = tu_layout_input(DT_SHAPE(len), d, seed + 7, -1, 1, false, l, &f.bv);
  return f;
}

static void affine_free(affine *f) {
  dt_tensor_release(f->w);
  dt_tensor_release(f->b);
  free(f->wv);
  free(f->bv);
}

static void norm_case(dt_tensor *x, const double *v, dt_shape s, dt_dtype d,
                      const affine *f, double eps, bool rms, tu_layout l) {
  char what[200], sh[128];
  tu_shape_str(s, sh, sizeof sh);
  snprintf(what, sizeof what, "%s %s %s %s weight %d bias %d eps %g",
           rms ? "rms_norm" : "layer_norm", dt_dtype_name(d), sh,
           tu_layout_names[l], f->w != NULL, !rms && f->b, eps);
  int64_t n = tu_numel(s);
  double *ref = malloc(sizeof(double) * (size_t)(n ? n : 1)), scale;
  ref_norm(v, s, f->wv, rms ? NULL : f->bv, eps, rms, ref, &scale);
  dt_tensor *r = rms ? dt_rms_norm(x, f->w, eps)
                     : dt_layer_norm(x, f->w, f->b, eps);
  check_result(r, ref, s, d, scale > 1 ? scale : 1, what);
  free(ref);
}

static void check_norms(dt_dtype d) {
  tu_leaks_begin();
  for (size_t si = 0; si < NSHAPES; si++) {
    dt_shape s = shapes[si];
    if (s.ndim == 0) continue; /* needs a last dim: test_norm_errors */
    int64_t len = s.dims[s.ndim - 1];
    for (int l = 0; l < TU_LAYOUTS; l++) {
      double *v;
      dt_tensor *x = tu_layout_input(s, d, 77 * si + (uint64_t)d, -2, 2, false,
                                (tu_layout)l, &v);
      for (int kind = 0; kind < 4; kind++) {
        affine f = make_affine(kind, len, d, 5 * si + (uint64_t)kind);
        double eps = kind % 2 ? 1e-5 : 0.1;
        norm_case(x, v, s, d, &f, eps, false, (tu_layout)l);
        if (kind < 3) norm_case(x, v, s, d, &f, eps, true, (tu_layout)l);
        affine_free(&f);
      }
      free(v);
      dt_tensor_release(x);
    }
  }
  tu_leaks_end();
}

static void test_softmax_float32(void **state) { (void)state; check_softmax(DT_FLOAT32); }
static void test_softmax_float64(void **state) { (void)state; check_softmax(DT_FLOAT64); }
static void test_softmax_float16(void **state) { (void)state; check_softmax(DT_FLOAT16); }
static void test_softmax_bfloat16(void **state) { (void)state; check_softmax(DT_BFLOAT16); }
static void test_norms_float32(void **state) { (void)state; check_norms(DT_FLOAT32); }
static void test_norms_float64(void **state) { (void)state; check_norms(DT_FLOAT64); }
static void test_norms_float16(void **state) { (void)state; check_norms(DT_FLOAT16); }
static void test_norms_bfloat16(void **state) { (void)state; check_norms(DT_BFLOAT16); }

/* ---------------------------------------------------- targeted checks */
static void expect_exact(dt_tensor *r, const double *want, int64_t n,
                         double rtol, const char *what) {
  if (!r) fail_msg("%s: %s", what, dt_last_error());
  double *got = tu_values(r);
  tu_assert_close(got, want, n, rtol, 0, what);
  free(got);
  dt_tensor_release(r);
}

/* large logits do not overflow; -inf masks give exact zeros; a row that
 * is all -inf is NaN (as PyTorch); hand-computed values */
static void test_softmax_special(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int k = 0; k < 4; k++) {
    dt_dtype d = tu_float_dtypes[k];
    /* steps of whole ulps of the dtype at that magnitude */
    double big = d == DT_FLOAT16 ? 10000 : 1000;
    double step = d == DT_FLOAT16 ? 8 : d == DT_BFLOAT16 ? 4 : 1;
    const double v[3] = {big, big + step, big + 2 * step};
    dt_tensor *a = tu_tensor(v, DT_SHAPE(3), d);
    double e1 = exp(-step), e2 = exp(-2 * step), z = 1 + e1 + e2;
    double want[3] = {tu_round(e2 / z, d), tu_round(e1 / z, d),
                      tu_round(1 / z, d)};
    expect_exact(dt_softmax(a, 0), want, 3, 8 * tu_rtol(d), "large logits");
    double lwant[3] = {tu_round(-2 * step - log(z), d),
                       tu_round(-step - log(z), d), tu_round(-log(z), d)};
    expect_exact(dt_log_softmax(a, -1), lwant, 3, 8 * tu_rtol(d),
                 "large logits (log)");
    dt_tensor_release(a);

    const double m[6] = {-INFINITY, 0, -INFINITY, -INFINITY, -INFINITY,
                         -INFINITY};
    dt_tensor *b = tu_tensor(m, DT_SHAPE(2, 3), d);
    expect_exact(dt_softmax(b, 1), (double[]){0, 1, 0, NAN, NAN, NAN}, 6, 0,
                 "masked rows");
    expect_exact(dt_log_softmax(b, 1),
                 (double[]){-INFINITY, 0, -INFINITY, NAN, NAN, NAN}, 6, 0,
                 "masked rows (log)");
    dt_tensor_release(b);

    dt_tensor *s = dt_full(DT_SHAPE(), 3.5, &(dt_tensor_options){.dtype = d});
    expect_exact(dt_softmax(s, 0), (double[]){1}, 1, 0, "0-d softmax");
    expect_exact(dt_log_softmax(s, -1), (double[]){0}, 1, 0, "0-d log");
    dt_tensor_release(s);
  }
  tu_leaks_end();
}

static void test_norm_hand_values(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *x = tu_tensor((double[]){1, 2, 3, 4, 3, 4, 0, 0}, DT_SHAPE(2, 4),
                           DT_FLOAT64);
  /* row 0: mean 2.5, var 1.25; row 1: mean 1.75, var 3.1875 */
  double r0 = 1 / sqrt(1.25), r1 = 1 / sqrt(3.1875);
  expect_exact(dt_layer_norm(x, NULL, NULL, 0), (double[]){
      -1.5 * r0, -0.5 * r0, 0.5 * r0, 1.5 * r0, 1.25 * r1, 2.25 * r1,
      -1.75 * r1, -1.75 * r1}, 8, 1e-14, "layer_norm by hand");
  dt_tensor *w = tu_tensor((double[]){1, 2, 3, 4}, DT_SHAPE(4), DT_FLOAT64);
  /* row 0: mean of squares 7.5; row 1: 6.25 */
  double q0 = 1 / sqrt(7.5 + 0.5), q1 = 1 / sqrt(6.25 + 0.5);
  expect_exact(dt_rms_norm(x, w, 0.5), (double[]){
      1 * q0, 4 * q0, 9 * q0, 16 * q0, 3 * q1, 8 * q1, 0, 0}, 8, 1e-14,
      "rms_norm by hand");
  /* one element per row: (x - mean) = 0, so y = bias */
  dt_tensor *c = tu_tensor((double[]){5, -3}, DT_SHAPE(2, 1), DT_FLOAT32);
  dt_tensor *wb = tu_tensor((double[]){2}, DT_SHAPE(1), DT_FLOAT32);
  dt_tensor *bb = tu_tensor((double[]){0.25}, DT_SHAPE(1), DT_FLOAT32);
  expect_exact(dt_layer_norm(c, wb, bb, 1e-5), (double[]){0.25, 0.25}, 2, 0,
               "layer_norm of one element");
  /* expanded (stride-0) x and weight */
  dt_tensor *ex = dt_expand(wb, DT_SHAPE(3));
  dt_tensor *xe = dt_expand(bb, DT_SHAPE(2, 3));
  assert_non_null(ex);
  assert_non_null(xe);
  expect_exact(dt_softmax(xe, 0), (double[]){0.5, 0.5, 0.5, 0.5, 0.5, 0.5},
               6, 0, "softmax of expanded");
  expect_exact(dt_rms_norm(xe, ex, 0), (double[]){2, 2, 2, 2, 2, 2}, 6,
               1e-6, "rms_norm of expanded");
  dt_tensor_release(xe);
  dt_tensor_release(ex);
  dt_tensor_release(bb);
  dt_tensor_release(wb);
  dt_tensor_release(c);
  dt_tensor_release(w);
  dt_tensor_release(x);
  tu_leaks_end();
}

/* the dense fast path and the strided path give the same bits, run after
 * run (their sums use the same lane order) */
static void test_norm_deterministic(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int k = 0; k < 4; k++) {
    dt_dtype d = tu_float_dtypes[k];
    dt_shape s = DT_SHAPE(5, 700);
    double *v = tu_random_values(3500, d, 11 + k, -6, 6, false);
    double *wv = tu_random_values(700, d, 12 + k, 0.5, 1.5, true);
    double *bv = tu_random_values(700, d, 13 + k, -1, 1, false);
    dt_tensor *a = tu_tensor(v, s, d), *nc = tu_noncontig_values(v, s, d);
    dt_tensor *t1 = dt_transpose(a, 0, 1), *tc = dt_contiguous(t1);
    dt_tensor *tr = dt_transpose(tc, 0, 1);
    dt_tensor *w = tu_tensor(wv, DT_SHAPE(700), d);
    dt_tensor *ws = tu_noncontig_values(wv, DT_SHAPE(700), d);
    dt_tensor *b = tu_tensor(bv, DT_SHAPE(700), d);
    dt_tensor *in[3] = {a, nc, tr}, *wt[2] = {w, ws};
    size_t bytes = 3500 * (d == DT_FLOAT64 ? 8 : d == DT_FLOAT32 ? 4 : 2);
    unsigned char *first = malloc(bytes), *got = malloc(bytes);
    /* softmax over dim 0 runs column tiles (contiguous), strided rows
     * (step-2) and dense-input rows (transposed) */
    for (int op = 0; op < 6; op++) {
      for (int i = 0; i < 4; i++) {
        dt_tensor *x = in[i % 3], *wi = wt[i % 2];
        dt_tensor *r = op == 0 ? dt_softmax(x, -1)
                     : op == 1 ? dt_log_softmax(x, 1)
                     : op == 2 ? dt_layer_norm(x, wi, b, 1e-5)
                     : op == 3 ? dt_rms_norm(x, wi, 1e-6)
                     : op == 4 ? dt_softmax(x, 0)
                               : dt_log_softmax(x, -2);
        assert_non_null(r);
        assert_int_equal(dt_to_host(r, i ? got : first, bytes), DT_OK);
        if (i && memcmp(first, got, bytes) != 0)
          fail_msg("op %d %s: input %d gives different bits", op,
                   dt_dtype_name(d), i);
        dt_tensor_release(r);
      }
    }
    free(first);
    free(got);
    TU_RELEASE(a, nc, t1, tc, tr, w, ws, b);
    free(v);
    free(wv);
    free(bv);
  }
  tu_leaks_end();
}

/* -------------------------------------------------------------- errors */
static void test_norm_errors(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_clear_error();
  dt_tensor *x = dt_zeros(DT_SHAPE(3, 4), NULL);
  dt_tensor *i = dt_zeros(DT_SHAPE(3, 4), &(dt_tensor_options){.dtype = DT_INT32});
  dt_tensor *bo = dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_BOOL});
  dt_tensor *w5 = dt_ones(DT_SHAPE(5), NULL);
  dt_tensor *w2d = dt_ones(DT_SHAPE(1, 4), NULL);
  dt_tensor *w64 = dt_ones(DT_SHAPE(4), &(dt_tensor_options){.dtype = DT_FLOAT64});
  dt_tensor *s = dt_zeros(DT_SHAPE(), NULL);
  dt_tensor *il = dt_zeros(DT_SHAPE(4), &(dt_tensor_options){.dtype = DT_INT64});

  tu_expect_error(dt_softmax(NULL, 0), DT_ERR_INVALID_ARGUMENT, "dt_softmax",
                  "a is NULL", NULL);
  tu_expect_error(dt_softmax(i, 1), DT_ERR_DTYPE, "dt_softmax", "int32",
                  NULL);
  tu_expect_error(dt_log_softmax(bo, 0), DT_ERR_DTYPE, "dt_log_softmax",
                  "bool", NULL);
  tu_expect_error(dt_log_softmax(x, 3), DT_ERR_INVALID_ARGUMENT,
                  "dt_log_softmax", "dim 3", "2-d", NULL);
  tu_expect_error(dt_softmax(x, -3), DT_ERR_INVALID_ARGUMENT, "dt_softmax",
                  "-3", NULL);
  tu_expect_error(dt_layer_norm(NULL, NULL, NULL, 1e-5),
                  DT_ERR_INVALID_ARGUMENT, "dt_layer_norm", "x is NULL", NULL);
  tu_expect_error(dt_layer_norm(x, w5, NULL, 1e-5), DT_ERR_SHAPE,
                  "dt_layer_norm", "weight", "[5]", "[3, 4]", NULL);
  tu_expect_error(dt_layer_norm(x, NULL, w2d, 1e-5), DT_ERR_SHAPE,
                  "dt_layer_norm", "bias", "[1, 4]", NULL);
  tu_expect_error(dt_layer_norm(x, NULL, NULL, -1), DT_ERR_INVALID_ARGUMENT,
                  "dt_layer_norm", "eps -1", NULL);
  tu_expect_error(dt_layer_norm(x, NULL, NULL, NAN), DT_ERR_INVALID_ARGUMENT,
                  "dt_layer_norm", "eps nan", NULL);
  tu_expect_error(dt_rms_norm(x, NULL, INFINITY), DT_ERR_INVALID_ARGUMENT,
                  "dt_rms_norm", "eps inf", NULL);
  /* a weight of another floating dtype is fine (PyTorch); an integer one
   * is not */
  dt_tensor *mixed = dt_rms_norm(x, w64, 1e-6);
  assert_non_null(mixed);
  assert_int_equal(dt_tensor_dtype(mixed), DT_FLOAT32);
  dt_tensor_release(mixed);
  dt_tensor *wi = dt_ones(DT_SHAPE(4), &(dt_tensor_options){.dtype = DT_INT32});
  tu_expect_error(dt_rms_norm(x, wi, 1e-6), DT_ERR_DTYPE, "dt_rms_norm",
                  "weight", "int32", NULL);
  dt_tensor_release(wi);
  tu_expect_error(dt_rms_norm(il, NULL, 1e-6), DT_ERR_DTYPE, "dt_rms_norm",
                  "int64", NULL);
  tu_expect_error(dt_layer_norm(s, NULL, NULL, 1e-5), DT_ERR_SHAPE,
                  "dt_layer_norm", "0-d", NULL);
  tu_expect_error(dt_rms_norm(NULL, w5, 1e-6), DT_ERR_INVALID_ARGUMENT,
                  "dt_rms_norm", "x is NULL", NULL);

  TU_RELEASE(x, i, bo, w5, w2d, w64, s, il);
  tu_leaks_end();
}

/* rows run in chunks that idle ranks steal: the bits do not depend on how
 * many ranks (threads) share them, for every path (dense rows, column
 * tiles, strided rows) */
static void test_chunked_rows_same_bits(void **state) {
  (void)state;
  dt_shape s = DT_SHAPE(600, 300); /* 600 rows: several chunks of rows */
  double *v = tu_random_values(180000, DT_FLOAT32, 21, -6, 6, false);
  unsigned char *res[2][4];
  int ranks[2] = {1, 8};
  for (int k = 0; k < 2; k++) {
    dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks[k]});
    dt_runtime_set_current(rt);
    dt_tensor *a = tu_tensor(v, s, DT_FLOAT32), *t = dt_transpose(a, 0, 1);
    for (int op = 0; op < 4; op++) {
      dt_tensor *r = op == 0 ? dt_softmax(a, -1) : op == 1 ? dt_softmax(a, 0)
                   : op == 2 ? dt_log_softmax(t, 0) : dt_layer_norm(a, NULL, NULL, 1e-5);
      assert_non_null(r);
      res[k][op] = malloc(180000 * 4);
      assert_int_equal(dt_to_host(r, res[k][op], 180000 * 4), DT_OK);
      dt_tensor_release(r);
    }
    TU_RELEASE(a, t);
    dt_runtime_set_current(NULL);
    dt_runtime_destroy(rt);
  }
  for (int op = 0; op < 4; op++) {
    if (memcmp(res[0][op], res[1][op], 180000 * 4))
      fail_msg("op %d: 1 rank and 8 ranks give different bits", op);
    free(res[0][op]);
    free(res[1][op]);
  }
  free(v);
}

/* outputs of cpu_stream_min_bytes() and more are written with streaming
 * stores (layer_norm; log_softmax): the same bits as the plain stores of
 * a small output, row for row. The threshold is set to 8 MiB here (the
 * machine's may be higher: an eighth of its L3, kernels/cpu/stream.c)
 * and [2112, 1024] float32 is 8.25 MiB; 64-row
 * copies of its first, middle and last rows (and, with an odd
 * row length in a second shape, whose rows are not 64-byte aligned) go
 * the plain way. float64 [1056, 1024] too. */
static void check_streamed(dt_dtype d, int64_t rows, int64_t cols) {
  int64_t n = rows * cols;
  size_t es = d == DT_FLOAT64 ? 8 : 4;
  double *v = tu_random_values(n, d, 77 + (uint64_t)cols, -6, 6, false);
  double *wv = tu_random_values(cols, d, 78, 0.5, 1.5, true);
  double *bv = tu_random_values(cols, d, 79, -1, 1, false);
  dt_tensor *a = tu_tensor(v, DT_SHAPE(rows, cols), d);
  dt_tensor *w = tu_tensor(wv, DT_SHAPE(cols), d), *b = tu_tensor(bv, DT_SHAPE(cols), d);
  unsigned char *big = malloc((size_t)n * es), *small = malloc(64 * (size_t)cols * es);
  assert_non_null(big);
  assert_non_null(small);
  int64_t starts[3] = {0, rows - 64, rows / 2 + 3};
  for (int op = 0; op < 4; op++) {
    dt_tensor *r = op == 0 ? dt_layer_norm(a, w, b, 1e-5)
                 : op == 1 ? dt_layer_norm(a, NULL, NULL, 1e-5)
                 : op == 2 ? dt_log_softmax(a, -1) : dt_softmax(a, 1);
    assert_non_null(r);
    assert_int_equal(dt_to_host(r, big, (size_t)n * es), DT_OK);
    for (int k = 0; k < 3; k++) {
      dt_tensor *nv = dt_narrow(a, 0, starts[k], 64), *c = dt_contiguous(nv);
      dt_tensor *rs = op == 0 ? dt_layer_norm(c, w, b, 1e-5)
                    : op == 1 ? dt_layer_norm(c, NULL, NULL, 1e-5)
                    : op == 2 ? dt_log_softmax(c, -1) : dt_softmax(c, 1);
      assert_non_null(rs);
      assert_int_equal(dt_to_host(rs, small, 64 * (size_t)cols * es), DT_OK);
      if (memcmp(big + (size_t)(starts[k] * cols) * es, small,
                 64 * (size_t)cols * es))
        fail_msg("op %d %s [%lld, %lld]: rows %lld..: streamed output differs "
                 "from the plain one", op, dt_dtype_name(d), (long long)rows,
                 (long long)cols, (long long)starts[k]);
      TU_RELEASE(nv, c, rs);
    }
    dt_tensor_release(r);
  }
  TU_RELEASE(a, w, b);
  free(big);
  free(small);
  free(v);
  free(wv);
  free(bv);
}

static void test_streamed_outputs(void **state) {
  (void)state;
  tu_leaks_begin();
  cpu_stream_set_min_bytes(CPU_STREAM_MIN_BYTES);
  assert_int_equal(cpu_stream_min_bytes(), (int64_t)8 << 20);
  check_streamed(DT_FLOAT32, 2112, 1024);
  check_streamed(DT_FLOAT32, 2100, 1027); /* rows not 64-byte aligned */
  check_streamed(DT_FLOAT64, 1056, 1024);
  cpu_stream_set_min_bytes(0);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax_special),
      cmocka_unit_test(test_norm_hand_values),
      cmocka_unit_test(test_norm_deterministic),
      cmocka_unit_test(test_chunked_rows_same_bits),
      cmocka_unit_test(test_streamed_outputs),
      cmocka_unit_test(test_norm_errors),
      cmocka_unit_test(test_softmax_float32),
      cmocka_unit_test(test_softmax_float64),
      cmocka_unit_test(test_softmax_float16),
      cmocka_unit_test(test_softmax_bfloat16),
      cmocka_unit_test(test_norms_float32),
      cmocka_unit_test(test_norms_float64),
      cmocka_unit_test(test_norms_float16),
      cmocka_unit_test(test_norms_bfloat16),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
