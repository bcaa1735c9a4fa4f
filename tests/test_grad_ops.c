/* The backward kernels (gelu_backward, slice_scatter, index_select_backward,
 * cross_entropy_backward) against references written here: naive
 * double-precision loops over the logical (row-major) values, plus central
 * finite differences of dt_gelu and dt_cross_entropy_smoothed in float64.
 * Error cases check the status and that the message names the function
 * and the bad value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static double *alloc_d(int64_t n) {
  return calloc((size_t)(n ? n : 1), sizeof(double));
}

/* a bad index or target fails the call itself (the call waits for
 * kernels that check data: ops_checks_data), as on PyTorch's CPU */
#define EXPECT_DATA_ERROR(expr, want, ...)                                    \
  do {                                                                        \
    dt_tensor *t_ = (expr);                                                   \
    if (t_) dt_tensor_release(t_);                                            \
    assert_null(t_);                                                          \
    tu_expect_error(NULL, want, __VA_ARGS__);                                 \
  } while (0)

/* ------------------------------------------------------------ gelu_backward */
static double ref_dgelu(double x) {
  return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

static dt_shape bcast(dt_shape a, dt_shape b) {
  dt_shape o = {a.ndim > b.ndim ? a.ndim : b.ndim, {0}};
  for (int i = 0; i < o.ndim; i++) {
    int ia = i - (o.ndim - a.ndim), ib = i - (o.ndim - b.ndim);
    int64_t sa = ia >= 0 ? a.dims[ia] : 1, sb = ib >= 0 ? b.dims[ib] : 1;
    o.dims[i] = sa == 1 ? sb : sa;
  }
  return o;
}

static void check_gelu_bw(dt_shape sg, dt_dtype dg, dt_shape sx, dt_dtype dx,
                          dt_dtype want_dt, bool strided) {
  double *gv, *xv;
  dt_tensor *g = tu_random(sg, dg, 3, -2, 2, &gv);
  dt_tensor *x = tu_random(sx, dx, 4, -4, 4, &xv);
  if (strided) {
    tu_make_noncontig(&g);
    tu_make_noncontig(&x);
  }
  dt_tensor *r = dt_gelu_backward(g, x);
  dt_shape so = bcast(sg, sx);
  tu_assert_meta(r, want_dt, so, "gelu_backward");
  int64_t n = tu_numel(so);
  double *want = alloc_d(n), *got = tu_values(r);
  for (int64_t i = 0; i < n; i++)
    want[i] = gv[tu_bcast_index(i, so, sg)] * ref_dgelu(xv[tu_bcast_index(i, so, sx)]);
  /* Φ + xφ cancels near x = -0.75: an absolute floor */
  double rtol = want_dt == DT_FLOAT64 ? 1e-12 : want_dt == DT_FLOAT32 ? 1e-5
                : 4 * tu_rtol(want_dt);
  tu_assert_close(got, want, n, rtol, rtol, "gelu_backward");
  free(want);
  free(got);
  free(gv);
  free(xv);
  TU_RELEASE(r, g, x);
}

static void test_gelu_backward(void **state) {
  (void)state;
  tu_leaks_begin();
  static const dt_shape sg[] = {DT_SHAPE(4, 5), DT_SHAPE(5), DT_SHAPE(3, 1),
                                DT_SHAPE(), DT_SHAPE(2, 3), DT_SHAPE(2, 0)};
  static const dt_shape sx[] = {DT_SHAPE(4, 5), DT_SHAPE(3, 5), DT_SHAPE(1, 4),
                                DT_SHAPE(2, 3), DT_SHAPE(), DT_SHAPE(1, 0)};
  for (size_t s = 0; s < sizeof sg / sizeof *sg; s++)
    for (int strided = 0; strided < 2; strided++) {
      for (int k = 0; k < 4; k++) {
        dt_dtype d = tu_float_dtypes[k];
        check_gelu_bw(sg[s], d, sx[s], d, d, strided);
      }
      check_gelu_bw(sg[s], DT_FLOAT32, sx[s], DT_FLOAT64,
                    sx[s].ndim == 0 && sg[s].ndim > 0 ? DT_FLOAT32 : DT_FLOAT64,
                    strided);
      check_gelu_bw(sg[s], DT_BFLOAT16, sx[s], DT_FLOAT16,
                    sx[s].ndim == 0 && sg[s].ndim > 0   ? DT_BFLOAT16
                    : sg[s].ndim == 0 && sx[s].ndim > 0 ? DT_FLOAT16
                                                        : DT_FLOAT32,
                    strided);
    }
  tu_leaks_end();
}

/* d/dx gelu by central differences of dt_gelu, float64 */
static void test_gelu_backward_fd(void **state) {
  (void)state;
  tu_leaks_begin();
  enum { N = 41 };
  double xv[N], xp[N], xm[N], ones[N], h = 1e-5;
  for (int i = 0; i < N; i++) {
    xv[i] = -5 + 0.25 * i;
    xp[i] = xv[i] + h;
    xm[i] = xv[i] - h;
    ones[i] = 1;
  }
  dt_tensor *x = tu_tensor(xv, DT_SHAPE(N), DT_FLOAT64);
  dt_tensor *tp = tu_tensor(xp, DT_SHAPE(N), DT_FLOAT64);
  dt_tensor *tm = tu_tensor(xm, DT_SHAPE(N), DT_FLOAT64);
  dt_tensor *g = tu_tensor(ones, DT_SHAPE(N), DT_FLOAT64);
  dt_tensor *fp = dt_gelu(tp), *fm = dt_gelu(tm), *d = dt_gelu_backward(g, x);
  double *vp = tu_values(fp), *vm = tu_values(fm), *vd = tu_values(d);
  double fd[N];
  for (int i = 0; i < N; i++) fd[i] = (vp[i] - vm[i]) / (2 * h);
  tu_assert_close(vd, fd, N, 1e-7, 1e-8, "gelu_backward vs central differences");
  free(vp);
  free(vm);
  free(vd);
  TU_RELEASE(x, tp, tm, g, fp, fm, d);
  tu_leaks_end();
}

static void test_gelu_backward_errors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *f = tu_random(DT_SHAPE(3, 4), DT_FLOAT32, 1, -1, 1, NULL);
  dt_tensor *i = tu_random(DT_SHAPE(3, 4), DT_INT64, 1, -3, 3, NULL);
  dt_tensor *f5 = tu_random(DT_SHAPE(5), DT_FLOAT32, 1, -1, 1, NULL);
  tu_expect_error(dt_gelu_backward(i, f), DT_ERR_DTYPE, "dt_gelu_backward",
                  "grad", "int64", NULL);
  tu_expect_error(dt_gelu_backward(f, i), DT_ERR_DTYPE, "dt_gelu_backward",
                  "x", "int64", NULL);
  tu_expect_error(dt_gelu_backward(f, f5), DT_ERR_SHAPE, "dt_gelu_backward",
                  "4", "5", NULL);
  tu_expect_error(dt_gelu_backward(NULL, f), DT_ERR_INVALID_ARGUMENT,
                  "dt_gelu_backward", "grad", NULL);
  TU_RELEASE(f, i, f5);
  tu_leaks_end();
}

/* ------------------------------------------------------------ slice_scatter */
typedef struct scatter_case {
  dt_shape src, shape;
  int dim;
  int64_t start, end, step;
  int64_t first; /* the normalised start */
} scatter_case;

static void check_slice_scatter(const scatter_case *k, dt_dtype d, bool strided) {
  double *sv;
  dt_tensor *src = tu_random(k->src, d, 9, -5, 5, &sv);
  if (strided) tu_make_noncontig(&src);
  dt_tensor *r = dt_slice_scatter(src, k->shape, k->dim, k->start, k->end,
                                  k->step);
  tu_assert_meta(r, d, k->shape, "slice_scatter");
  int64_t n = tu_numel(k->shape), ns = tu_numel(k->src), ix[DT_MAX_DIMS];
  int dim = k->dim < 0 ? k->dim + k->shape.ndim : k->dim;
  double *want = alloc_d(n), *got = tu_values(r);
  for (int64_t i = 0; i < ns; i++) {
    tu_unravel(i, k->src, ix);
    ix[dim] = k->first + ix[dim] * k->step;
    want[tu_ravel(ix, k->shape)] = sv[i];
  }
  tu_assert_close(got, want, n, 0, 0, "slice_scatter");
  free(want);
  free(got);
  free(sv);
  TU_RELEASE(r, src);
}

static void test_slice_scatter(void **state) {
  (void)state;
  tu_leaks_begin();
  static const scatter_case cases[] = {
    {DT_SHAPE(2, 3), DT_SHAPE(2, 7), 1, 1, 6, 2, 1},
    {DT_SHAPE(2, 4), DT_SHAPE(6, 4), 0, -5, -1, 2, 1},
    {DT_SHAPE(2), DT_SHAPE(5), -1, 3, 100, 1, 3},
    {DT_SHAPE(0, 3), DT_SHAPE(5, 3), 0, 4, 2, 1, 4},
    {DT_SHAPE(2, 3, 2), DT_SHAPE(2, 3, 7), 2, 0, 7, 4, 0},
    {DT_SHAPE(3, 1, 2), DT_SHAPE(3, 4, 2), 1, 2, 3, 1, 2},
    {DT_SHAPE(3, 1), DT_SHAPE(3, 4), 1, -100, 1, 5, 0},
    {DT_SHAPE(4, 2), DT_SHAPE(4, 2), 0, 0, 4, 1, 0},
  };
  static const dt_dtype ds[] = {DT_FLOAT32, DT_FLOAT64, DT_BFLOAT16, DT_INT64};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (size_t d = 0; d < sizeof ds / sizeof *ds; d++)
      for (int strided = 0; strided < 2; strided++)
        check_slice_scatter(&cases[c], ds[d], strided);
  tu_leaks_end();
}

static void test_slice_scatter_errors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *s = tu_random(DT_SHAPE(2, 3), DT_FLOAT32, 1, -1, 1, NULL);
  dt_tensor *z = tu_random(DT_SHAPE(), DT_FLOAT32, 1, -1, 1, NULL);
  const char *fn = "dt_slice_scatter";
  tu_expect_error(dt_slice_scatter(s, DT_SHAPE(2, 7), 1, 0, 7, 0),
                  DT_ERR_INVALID_ARGUMENT, fn, "step", "0", NULL);
  tu_expect_error(dt_slice_scatter(s, DT_SHAPE(2, 7), 1, 0, 7, -2),
                  DT_ERR_INVALID_ARGUMENT, fn, "step", "-2", NULL);
  tu_expect_error(dt_slice_scatter(s, DT_SHAPE(2, 7, 1), 1, 0, 3, 1),
                  DT_ERR_SHAPE, fn, "shape", "3 dims", "2", NULL);
  tu_expect_error(dt_slice_scatter(s, DT_SHAPE(4, 7), 1, 0, 3, 1),
                  DT_ERR_SHAPE, fn, "[2, 3]", "[4, 7]", "dim 0", NULL);
  tu_expect_error(dt_slice_scatter(s, DT_SHAPE(2, 7), 1, 0, 7, 2),
                  DT_ERR_SHAPE, fn, "takes 4 elements", "src has 3", NULL);
  tu_expect_error(dt_slice_scatter(s, DT_SHAPE(2, 7), 2, 0, 3, 1),
                  DT_ERR_INVALID_ARGUMENT, fn, "dim", "2", NULL);
  tu_expect_error(dt_slice_scatter(s, DT_SHAPE(2, -3), 1, 0, 3, 1),
                  DT_ERR_SHAPE, fn, "negative", "-3", NULL);
  tu_expect_error(dt_slice_scatter(z, DT_SHAPE(), 0, 0, 1, 1), DT_ERR_SHAPE,
                  fn, "0-d", NULL);
  tu_expect_error(dt_slice_scatter(NULL, DT_SHAPE(2), 0, 0, 1, 1),
                  DT_ERR_INVALID_ARGUMENT, fn, "src", NULL);
  TU_RELEASE(s, z);
  tu_leaks_end();
}

/* ---------------------------------------------------- index_select_backward */
static void check_isb(dt_shape sg, int dim, const double *iv, dt_shape si,
                      int64_t size, dt_dtype d, dt_dtype id, bool strided) {
  double *gv;
  dt_tensor *g = tu_random(sg, d, 17, -3, 3, &gv);
  dt_tensor *idx = tu_tensor(iv, si, id);
  if (strided) {
    tu_make_noncontig(&g);
    tu_make_noncontig(&idx);
  }
  dt_tensor *r = dt_index_select_backward(g, dim, idx, size);
  int nd = sg.ndim, dd = dim < 0 ? dim + (nd ? nd : 1) : dim;
  dt_shape so = sg;
  if (nd) so.dims[dd] = size;
  tu_assert_meta(r, d, so, "index_select_backward");
  int64_t n = tu_numel(so), ng = tu_numel(sg), ix[DT_MAX_DIMS];
  double *want = alloc_d(n), *got = tu_values(r);
  for (int64_t i = 0; i < ng; i++) { /* in index order, as index_add_ */
    tu_unravel(i, sg, ix);
    if (nd) ix[dd] = (int64_t)iv[ix[dd]];
    int64_t o = tu_ravel(ix, so);
    want[o] = tu_round(want[o] + gv[i], d);
  }
  tu_assert_close(got, want, n, 2 * tu_rtol(d), 1e-6, "index_select_backward");
  free(want);
  free(got);
  free(gv);
  TU_RELEASE(r, g, idx);
}

static void test_index_select_backward(void **state) {
  (void)state;
  tu_leaks_begin();
  static const double iv[] = {2, 0, 2, 4, 2, 1}; /* duplicates */
  dt_shape sg = DT_SHAPE(4, 3, 2);
  for (int id = 0; id < 2; id++)
    for (int strided = 0; strided < 2; strided++)
      for (int k = 0; k < 2; k++) {
        dt_dtype d = k ? DT_FLOAT64 : DT_FLOAT32, ix = id ? DT_INT32 : DT_INT64;
        for (int dim = -3; dim < 3; dim++) {
          int dd = dim < 0 ? dim + 3 : dim;
          check_isb(sg, dim, iv, DT_SHAPE(sg.dims[dd]), 5, d, ix, strided);
        }
        check_isb(DT_SHAPE(6), 0, iv, DT_SHAPE(6), 5, d, ix, strided);
        check_isb(DT_SHAPE(2, 1), 1, iv + 2, DT_SHAPE(), 4, d, ix, strided);
        check_isb(DT_SHAPE(2, 0), 1, iv, DT_SHAPE(0), 3, d, ix, strided);
        check_isb(DT_SHAPE(0, 3), 1, iv, DT_SHAPE(3), 5, d, ix, strided);
        check_isb(DT_SHAPE(), 0, (double[]){0}, DT_SHAPE(1), 1, d, ix, strided);
      }
  check_isb(DT_SHAPE(6, 3), 0, iv, DT_SHAPE(6), 5, DT_BFLOAT16, DT_INT64, false);
  tu_leaks_end();
}

static void test_index_select_backward_errors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  const char *fn = "dt_index_select_backward";
  dt_tensor *g = tu_random(DT_SHAPE(3, 2), DT_FLOAT32, 1, -1, 1, NULL);
  dt_tensor *gi = tu_random(DT_SHAPE(3, 2), DT_INT64, 1, -1, 1, NULL);
  dt_tensor *bad = tu_tensor((double[]){1, 7, 0}, DT_SHAPE(3), DT_INT64);
  dt_tensor *neg = tu_tensor((double[]){1, -1, 0}, DT_SHAPE(3), DT_INT32);
  dt_tensor *ok = tu_tensor((double[]){1, 4, 0}, DT_SHAPE(3), DT_INT64);
  dt_tensor *two = tu_tensor((double[]){1, 4, 0, 0}, DT_SHAPE(2, 2), DT_INT64);
  dt_tensor *fl = tu_tensor((double[]){1, 4, 0}, DT_SHAPE(3), DT_FLOAT32);
  EXPECT_DATA_ERROR(dt_index_select_backward(g, 0, bad, 5),
                    DT_ERR_INVALID_ARGUMENT, fn, "index 7", "size 5", NULL);
  EXPECT_DATA_ERROR(dt_index_select_backward(g, 0, neg, 5),
                    DT_ERR_INVALID_ARGUMENT, fn, "index -1", NULL);
  tu_expect_error(dt_index_select_backward(g, 1, ok, 5), DT_ERR_SHAPE, fn,
                  "3 elements", "2 at dim 1", NULL);
  tu_expect_error(dt_index_select_backward(g, 0, two, 5), DT_ERR_SHAPE, fn,
                  "index", "[2, 2]", NULL);
  tu_expect_error(dt_index_select_backward(g, 0, fl, 5), DT_ERR_DTYPE, fn,
                  "index", "float32", NULL);
  tu_expect_error(dt_index_select_backward(gi, 0, ok, 5), DT_ERR_DTYPE, fn,
                  "grad", "int64", NULL);
  tu_expect_error(dt_index_select_backward(g, 0, ok, -2),
                  DT_ERR_INVALID_ARGUMENT, fn, "size -2", NULL);
  tu_expect_error(dt_index_select_backward(g, 3, ok, 5),
                  DT_ERR_INVALID_ARGUMENT, fn, "dim 3", NULL);
  TU_RELEASE(g, gi, bad, neg, ok, two, fl);
  tu_leaks_end();
}

/* --------------------------------------------------- cross_entropy_backward */
typedef struct ce_case {
  dt_shape x;          /* [C], [N, C] or [N, C, d...] */
  bool probs;
  dt_reduction red;
  int64_t ignore;
  double eps;
} ce_case;

static int64_t ce_positions(dt_shape x, dt_shape *pos) {
  *pos = (dt_shape){0, {0}};
  for (int i = 0; x.ndim > 1 && i < x.ndim; i++)
    if (i != 1) pos->dims[pos->ndim++] = x.dims[i];
  return tu_numel(*pos);
}

/* the offset of position p's class c in row-major x */
static int64_t ce_at(dt_shape x, int64_t p, int64_t c) {
  if (x.ndim == 1) return c;
  int64_t inner = 1;
  for (int i = 2; i < x.ndim; i++) inner *= x.dims[i];
  return ((p / inner) * x.dims[1] + c) * inner + p % inner;
}

/* class-index targets with some ignored and (ignore < C) some equal to an
 * in-range ignore_index */
static double *ce_targets(const ce_case *k, int64_t m, int64_t nc) {
  double *t = alloc_d(m);
  for (int64_t p = 0; p < m; p++) t[p] = (double)((p * 2 + 1) % nc);
  if (m > 2) t[1] = (double)k->ignore;
  return t;
}

/* the reference: w · (softmax(x) Σq − q) per position */
static double *ref_ce_grad(const ce_case *k, const double *xv, const double *tv,
                           const double *gv) {
  dt_shape pos;
  int64_t m = ce_positions(k->x, &pos), nc = k->x.dims[k->x.ndim == 1 ? 0 : 1];
  double *out = alloc_d(m * nc), denom = 0;
  for (int64_t p = 0; p < m; p++) denom += k->probs || (int64_t)tv[p] != k->ignore;
  for (int64_t p = 0; p < m; p++) {
    if (!k->probs && (int64_t)tv[p] == k->ignore) continue;
    double w = k->red == DT_REDUCTION_NONE ? gv[p]
               : k->red == DT_REDUCTION_SUM ? gv[0] : gv[0] / denom;
    double mx = -INFINITY, s = 0, sq = 0;
    for (int64_t c = 0; c < nc; c++) mx = fmax(mx, xv[ce_at(k->x, p, c)]);
    for (int64_t c = 0; c < nc; c++) s += exp(xv[ce_at(k->x, p, c)] - mx);
    for (int64_t c = 0; c < nc; c++) {
      double q = k->probs ? (1 - k->eps) * tv[ce_at(k->x, p, c)] + k->eps / (double)nc
                 : (1 - k->eps) * (c == (int64_t)tv[p]) + k->eps / (double)nc;
      sq += q;
    }
    for (int64_t c = 0; c < nc; c++) {
      int64_t at = ce_at(k->x, p, c);
      double q = k->probs ? (1 - k->eps) * tv[at] + k->eps / (double)nc
                 : (1 - k->eps) * (c == (int64_t)tv[p]) + k->eps / (double)nc;
      out[at] = w * (exp(xv[at] - mx) / s * sq - q);
    }
  }
  return out;
}

typedef struct ce_inputs {
  dt_tensor *x, *t, *g;
  double *xv, *tv, *gv;
} ce_inputs;

static ce_inputs ce_make(const ce_case *k, dt_dtype d, dt_dtype td, bool strided) {
  ce_inputs in;
  dt_shape pos;
  int64_t m = ce_positions(k->x, &pos), nc = k->x.dims[k->x.ndim == 1 ? 0 : 1];
  in.x = tu_random(k->x, d, 31, -3, 3, &in.xv);
  if (k->probs) /* not normalised: Σ t is not assumed to be 1 */
    in.t = tu_random(k->x, d, 32, 0, 0.6, &in.tv);
  else {
    in.tv = ce_targets(k, m, nc);
    in.t = tu_tensor(in.tv, k->x.ndim == 1 ? DT_SHAPE() : pos, td);
  }
  in.g = tu_random(k->red == DT_REDUCTION_NONE ? pos : DT_SHAPE(), d, 33, -2,
                   2, &in.gv);
  if (strided) {
    tu_make_noncontig(&in.x);
    tu_make_noncontig(&in.t);
    tu_make_noncontig(&in.g);
  }
  return in;
}

static void ce_free(ce_inputs *in) {
  TU_RELEASE(in->x, in->t, in->g);
  free(in->xv);
  free(in->tv);
  free(in->gv);
}

static void check_ce_bw(const ce_case *k, dt_dtype d, dt_dtype td, bool strided) {
  ce_inputs in = ce_make(k, d, td, strided);
  dt_tensor *r = dt_cross_entropy_backward(in.g, in.x, in.t, k->red, k->ignore,
                                           k->eps);
  tu_assert_meta(r, d, k->x, "cross_entropy_backward");
  double *want = ref_ce_grad(k, in.xv, in.tv, in.gv), *got = tu_values(r);
  tu_assert_close(got, want, tu_numel(k->x), d == DT_FLOAT64 ? 1e-12 : 1e-5,
                  d == DT_FLOAT64 ? 1e-14 : 1e-7, "cross_entropy_backward");
  free(want);
  free(got);
  dt_tensor_release(r);
  ce_free(&in);
}

/* [6, 1003]: rows long enough for the float32 fast path's vector loops
 * (and their remainders) */
static const dt_shape ce_shapes[] = {DT_SHAPE(5), DT_SHAPE(4, 5),
                                     DT_SHAPE(3, 4, 2), DT_SHAPE(2, 3, 2, 2),
                                     DT_SHAPE(6, 1003)};

static void test_cross_entropy_backward(void **state) {
  (void)state;
  tu_leaks_begin();
  static const int64_t ignores[] = {-100, 1};
  static const double epss[] = {0.0, 0.3};
  for (size_t s = 0; s < sizeof ce_shapes / sizeof *ce_shapes; s++)
    for (int probs = 0; probs < 2; probs++)
      for (int red = 0; red < 3; red++)
        for (int ig = 0; ig < 2; ig++)
          for (int e = 0; e < 2; e++)
            for (int k = 0; k < 2; k++) {
              ce_case c = {ce_shapes[s], probs, (dt_reduction)red, ignores[ig],
                           epss[e]};
              dt_dtype d = k ? DT_FLOAT64 : DT_FLOAT32;
              check_ce_bw(&c, d, k ? DT_INT32 : DT_INT64, false);
              check_ce_bw(&c, d, DT_INT64, true);
            }
  tu_leaks_end();
}

/* every target ignored: MEAN's denominator is 0, the gradient all zeros */
static void test_cross_entropy_backward_all_ignored(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *x = tu_random(DT_SHAPE(3, 4), DT_FLOAT32, 1, -1, 1, NULL);
  dt_tensor *t = tu_tensor((double[]){-100, -100, -100}, DT_SHAPE(3), DT_INT64);
  dt_tensor *g = tu_tensor((double[]){1}, DT_SHAPE(), DT_FLOAT32);
  dt_tensor *r = dt_cross_entropy_backward(g, x, t, DT_REDUCTION_MEAN, -100, 0.1);
  double *got = tu_values(r), zero[12] = {0};
  tu_assert_close(got, zero, 12, 0, 0, "all ignored");
  free(got);
  TU_RELEASE(x, t, g, r);
  tu_leaks_end();
}

/* the loss of (x with element i moved by dx): Σ g_p loss_p for NONE */
static double ce_loss_at(const ce_case *k, ce_inputs *in, int64_t i, double dx) {
  int64_t n = tu_numel(k->x);
  double *xv = alloc_d(n);
  memcpy(xv, in->xv, sizeof(double) * (size_t)n);
  xv[i] += dx;
  dt_tensor *x = tu_tensor(xv, k->x, DT_FLOAT64);
  dt_tensor *l = dt_cross_entropy_smoothed(x, in->t, k->red, k->ignore, k->eps);
  if (!l) fail_msg("cross_entropy: %s", dt_last_error());
  double *lv = tu_values(l), s = 0;
  int64_t nl = dt_tensor_numel(l);
  for (int64_t p = 0; p < nl; p++)
    s += k->red == DT_REDUCTION_NONE ? in->gv[p] * lv[p] : in->gv[0] * lv[p];
  free(lv);
  free(xv);
  TU_RELEASE(x, l);
  return s;
}

static void test_cross_entropy_backward_fd(void **state) {
  (void)state;
  tu_leaks_begin();
  double h = 1e-6;
  for (size_t s = 0; s < 4; s++)
    for (int probs = 0; probs < 2; probs++)
      for (int red = 0; red < 3; red++) {
        /* [C]: its one target is 1, which must not be ignored */
        ce_case k = {ce_shapes[s], probs, (dt_reduction)red, s ? 1 : -100, 0.2};
        ce_inputs in = ce_make(&k, DT_FLOAT64, DT_INT64, false);
        dt_tensor *r = dt_cross_entropy_backward(in.g, in.x, in.t, k.red,
                                                 k.ignore, k.eps);
        int64_t n = tu_numel(k.x);
        double *got = tu_values(r), *fd = alloc_d(n);
        for (int64_t i = 0; i < n; i++)
          fd[i] = (ce_loss_at(&k, &in, i, h) - ce_loss_at(&k, &in, i, -h)) / (2 * h);
        tu_assert_close(got, fd, n, 1e-6, 1e-8,
                        "cross_entropy_backward vs central differences");
        free(got);
        free(fd);
        dt_tensor_release(r);
        ce_free(&in);
      }
  tu_leaks_end();
}

static void test_cross_entropy_backward_errors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  const char *fn = "dt_cross_entropy_backward";
  dt_tensor *x = tu_random(DT_SHAPE(3, 4), DT_FLOAT32, 1, -1, 1, NULL);
  dt_tensor *xi = tu_random(DT_SHAPE(3, 4), DT_INT64, 1, -1, 1, NULL);
  dt_tensor *t = tu_tensor((double[]){0, 9, 1}, DT_SHAPE(3), DT_INT64);
  dt_tensor *ok = tu_tensor((double[]){0, 3, 1}, DT_SHAPE(3), DT_INT64);
  dt_tensor *t2 = tu_tensor((double[]){0, 3}, DT_SHAPE(2), DT_INT64);
  dt_tensor *g0 = tu_tensor((double[]){1}, DT_SHAPE(), DT_FLOAT32);
  dt_tensor *g3 = tu_tensor((double[]){1, 2, 3}, DT_SHAPE(3), DT_FLOAT32);
  dt_tensor *gi = tu_tensor((double[]){1}, DT_SHAPE(), DT_INT64);
  EXPECT_DATA_ERROR(dt_cross_entropy_backward(g0, x, t, DT_REDUCTION_SUM, -100, 0),
                    DT_ERR_INVALID_ARGUMENT, fn, "target 9", "4 classes", NULL);
  tu_expect_error(dt_cross_entropy_backward(g0, x, ok, DT_REDUCTION_NONE, -100, 0),
                  DT_ERR_SHAPE, fn, "grad", "[]", "[3]", NULL);
  tu_expect_error(dt_cross_entropy_backward(g3, x, ok, DT_REDUCTION_MEAN, -100, 0),
                  DT_ERR_SHAPE, fn, "grad", "[3]", NULL);
  tu_expect_error(dt_cross_entropy_backward(g0, x, ok, (dt_reduction)7, -100, 0),
                  DT_ERR_INVALID_ARGUMENT, fn, "reduction 7", NULL);
  tu_expect_error(dt_cross_entropy_backward(g0, x, ok, DT_REDUCTION_SUM, -100, 1.5),
                  DT_ERR_INVALID_ARGUMENT, fn, "label_smoothing 1.5", NULL);
  tu_expect_error(dt_cross_entropy_backward(g0, xi, ok, DT_REDUCTION_SUM, -100, 0),
                  DT_ERR_DTYPE, fn, "input", "int64", NULL);
  tu_expect_error(dt_cross_entropy_backward(gi, x, ok, DT_REDUCTION_SUM, -100, 0),
                  DT_ERR_DTYPE, fn, "grad", "int64", NULL);
  tu_expect_error(dt_cross_entropy_backward(g0, x, t2, DT_REDUCTION_SUM, -100, 0),
                  DT_ERR_SHAPE, fn, "target", "[2]", "[3, 4]", NULL);
  tu_expect_error(dt_cross_entropy_backward(g0, x, g3, DT_REDUCTION_SUM, -100, 0),
                  DT_ERR_SHAPE, fn, "target", "probabilities", NULL);
  tu_expect_error(dt_cross_entropy_backward(g0, g0, ok, DT_REDUCTION_SUM, -100, 0),
                  DT_ERR_SHAPE, fn, "input", "0-d", NULL);
  tu_expect_error(dt_cross_entropy_backward(g0, NULL, ok, DT_REDUCTION_SUM, -100, 0),
                  DT_ERR_INVALID_ARGUMENT, fn, "input", NULL);
  TU_RELEASE(x, xi, t, ok, t2, g0, g3, gi);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gelu_backward),
      cmocka_unit_test(test_gelu_backward_fd),
      cmocka_unit_test(test_gelu_backward_errors),
      cmocka_unit_test(test_slice_scatter),
      cmocka_unit_test(test_slice_scatter_errors),
      cmocka_unit_test(test_index_select_backward),
      cmocka_unit_test(test_index_select_backward_errors),
      cmocka_unit_test(test_cross_entropy_backward),
      cmocka_unit_test(test_cross_entropy_backward_all_ignored),
      cmocka_unit_test(test_cross_entropy_backward_fd),
      cmocka_unit_test(test_cross_entropy_backward_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
