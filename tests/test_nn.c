/* embedding, index_select, cross_entropy and dropout against references
 * written here: gathers by direct indexing, cross-entropy as a
 * double-precision log-sum-exp loop, and dropout's mask from this file's own
 * Philox4x32-10 (checked against the Random123 known-answer vectors). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static dt_tensor *ints(const double *v, dt_shape s, dt_dtype d) {
  return tu_tensor(v, s, d);
}

/* ---- embedding */
static void check_embedding(dt_shape si, dt_dtype id, dt_dtype wd,
                            bool strided) {
  int64_t num = 10, dim = 4, n = tu_numel(si);
  double *wv, *iv = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) iv[i] = (double)((i * 7 + 3) % num);
  dt_tensor *w = tu_random(DT_SHAPE(num, dim), wd, 11, -3, 3, &wv);
  dt_tensor *idx = ints(iv, si, id);
  if (strided) {
    tu_make_noncontig(&w);
    tu_make_noncontig(&idx);
  }
  dt_tensor *e = dt_embedding(idx, w);
  if (!e) fail_msg("embedding: %s", dt_last_error());
  dt_shape so = si;
  so.dims[so.ndim++] = dim;
  tu_assert_shape(e, so, "embedding");
  assert_int_equal(dt_tensor_dtype(e), wd);
  double *got = tu_values(e);
  double *want = malloc(sizeof(double) * (size_t)(n * dim + 1));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < dim; j++)
      want[i * dim + j] = wv[(int64_t)iv[i] * dim + j];
  tu_assert_close(got, want, n * dim, 0, 0, "embedding");
  free(got);
  free(want);
  free(wv);
  free(iv);
  dt_tensor_release(e);
  dt_tensor_release(w);
  dt_tensor_release(idx);
}

static void test_embedding(void **state) {
  (void)state;
  tu_leaks_begin();
  static const dt_shape shapes[] = {DT_SHAPE(3), DT_SHAPE(2, 3),
                                    DT_SHAPE(2, 1, 3), DT_SHAPE(),
                                    DT_SHAPE(0), DT_SHAPE(2, 0)};
  static const dt_dtype wds[] = {DT_FLOAT32, DT_FLOAT64, DT_BFLOAT16,
                                 DT_FLOAT16, DT_INT64};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int id = 0; id < 2; id++)
      for (size_t w = 0; w < sizeof wds / sizeof *wds; w++)
        for (int strided = 0; strided < 2; strided++)
          check_embedding(shapes[s], id ? DT_INT32 : DT_INT64, wds[w],
                          strided);
  tu_leaks_end();
}

/* ---- index_select */
static void check_index_select(dt_shape sa, int dim, dt_shape si,
                               const double *iv, dt_dtype id, bool strided) {
  double *av;
  dt_tensor *a = tu_random(sa, DT_FLOAT32, 5, -2, 2, &av);
  if (strided) tu_make_noncontig(&a);
  dt_tensor *idx = ints(iv, si, id);
  dt_tensor *r = dt_index_select(a, dim, idx);
  if (!r) fail_msg("index_select dim %d: %s", dim, dt_last_error());
  int nd = sa.ndim, d = dim < 0 ? dim + nd : dim;
  int64_t n = tu_numel(si);
  dt_shape so = sa;
  if (nd > 0) so.dims[d] = n;
  tu_assert_shape(r, so, "index_select");
  int64_t on = tu_numel(so);
  double *want = malloc(sizeof(double) * (size_t)(on ? on : 1));
  int64_t ix[DT_MAX_DIMS];
  for (int64_t k = 0; k < on; k++) {
    tu_unravel(k, so, ix);
    if (nd > 0) ix[d] = (int64_t)iv[ix[d]];
    want[k] = av[tu_ravel(ix, sa)];
  }
  double *got = tu_values(r);
  tu_assert_close(got, want, on, 0, 0, "index_select");
  free(got);
  free(want);
  free(av);
  dt_tensor_release(r);
  dt_tensor_release(a);
  dt_tensor_release(idx);
}

static void test_index_select(void **state) {
  (void)state;
  tu_leaks_begin();
  static const double iv[] = {2, 0, 2, 1};
  dt_shape sa = DT_SHAPE(3, 4, 5);
  for (int dim = -3; dim < 3; dim++)
    for (int id = 0; id < 2; id++)
      for (int strided = 0; strided < 2; strided++) {
        dt_dtype d = id ? DT_INT32 : DT_INT64;
        check_index_select(sa, dim, DT_SHAPE(4), iv, d, strided);
        check_index_select(sa, dim, DT_SHAPE(), iv + 3, d, strided); /* 0-d */
        check_index_select(sa, dim, DT_SHAPE(0), iv, d, strided);
      }
  check_index_select(DT_SHAPE(6), 0, DT_SHAPE(4), iv, DT_INT64, true);
  double one = 0;
  check_index_select(DT_SHAPE(), 0, DT_SHAPE(1), &one, DT_INT64, false);
  check_index_select(DT_SHAPE(), -1, DT_SHAPE(), &one, DT_INT32, false);
  check_index_select(DT_SHAPE(2, 0, 3), 0, DT_SHAPE(4), (double[]){1, 0, 1, 1},
                     DT_INT64, false);
  tu_leaks_end();
}

/* ---- cross_entropy */
static double ref_ce_row(const double *x, int64_t c, int64_t t) {
  double mx = -INFINITY, s = 0;
  for (int64_t j = 0; j < c; j++) mx = x[j] > mx ? x[j] : mx;
  for (int64_t j = 0; j < c; j++) s += exp(x[j] - mx);
  return mx + log(s) - x[t];
}

static void check_ce(int64_t n, int64_t c, bool one_d, dt_dtype d, dt_dtype td,
                     dt_reduction red, int64_t ignore, const double *tv,
                     bool strided) {
  double *xv;
  dt_shape sx = one_d ? DT_SHAPE(c) : DT_SHAPE(n, c);
  dt_shape st = one_d ? DT_SHAPE() : DT_SHAPE(n);
  dt_tensor *x = tu_random(sx, d, 21, -4, 4, &xv);
  dt_tensor *t = ints(tv, st, td);
  if (strided) {
    tu_make_noncontig(&x);
    tu_make_noncontig(&t);
  }
  dt_tensor *l = dt_cross_entropy(x, t, red, ignore);
  if (!l) fail_msg("cross_entropy: %s", dt_last_error());
  assert_int_equal(dt_tensor_dtype(l), d);
  double per[64], sum = 0;
  int64_t count = 0, rows = one_d ? 1 : n;
  for (int64_t i = 0; i < rows; i++) {
    per[i] = 0;
    if ((int64_t)tv[i] == ignore) continue;
    per[i] = ref_ce_row(xv + i * c, c, (int64_t)tv[i]);
    sum += per[i];
    count++;
  }
  double *got = tu_values(l);
  double tol = tu_rtol(d) * 2; /* computed in double, rounded once */
  if (red == DT_REDUCTION_NONE) {
    tu_assert_shape(l, one_d ? DT_SHAPE() : DT_SHAPE(n), "ce none");
    tu_assert_close(got, per, rows, tol, tol, "cross_entropy none");
  } else {
    tu_assert_shape(l, DT_SHAPE(), "ce reduced");
    double want = red == DT_REDUCTION_SUM ? sum : count ? sum / (double)count
                                                        : NAN;
    tu_assert_close(got, &want, 1, tol, tol, "cross_entropy reduced");
  }
  free(got);
  free(xv);
  dt_tensor_release(l);
  dt_tensor_release(x);
  dt_tensor_release(t);
}

static void test_cross_entropy(void **state) {
  (void)state;
  tu_leaks_begin();
  static const double tv[] = {0, 4, -100, 2, 2, 1, -100, 3};
  static const dt_dtype dts[] = {DT_FLOAT64, DT_FLOAT32, DT_BFLOAT16};
  for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
    for (int red = 0; red < 3; red++)
      for (int td = 0; td < 2; td++)
        for (int strided = 0; strided < 2; strided++) {
          dt_dtype d = dts[di], t = td ? DT_INT32 : DT_INT64;
          check_ce(8, 5, false, d, t, (dt_reduction)red, -100, tv, strided);
          /* ignore_index equal to a real class */
          check_ce(8, 5, false, d, t, (dt_reduction)red, 2,
                   (double[]){0, 4, 2, 2, 2, 1, 0, 3}, strided);
          check_ce(1, 5, true, d, t, (dt_reduction)red, -100, tv + 1, strided);
          check_ce(1, 5, true, d, t, (dt_reduction)red, 4, tv + 1, strided);
          check_ce(0, 5, false, d, t, (dt_reduction)red, -100, tv, false);
        }
  /* float32 rows read in place four at a time (two groups and three
   * rows after them; 300 classes: a 256-element block, eight-lane groups
   * and a tail), an ignored row inside a group */
  static const double tv11[] = {0, 299, 17, -100, 256, 255, 3, 150, 64, 1, 298};
  for (int red = 0; red < 3; red++)
    check_ce(11, 300, false, DT_FLOAT32, DT_INT64, (dt_reduction)red, -100,
             tv11, false);
  /* all ignored: mean is NaN (0/0), sum 0 */
  check_ce(2, 3, false, DT_FLOAT32, DT_INT64, DT_REDUCTION_MEAN, -1,
           (double[]){-1, -1}, false);
  check_ce(2, 3, false, DT_FLOAT32, DT_INT64, DT_REDUCTION_SUM, -1,
           (double[]){-1, -1}, false);
  tu_leaks_end();
}

/* ---- dropout: an independent Philox4x32-10 (Salmon et al., SC'11) */
static void philox(uint32_t c[4], const uint32_t key[2]) {
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    if (round > 0) { /* Weyl sequence key schedule */
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)c[0] * 0xD2511F53u;
    uint64_t p1 = (uint64_t)c[2] * 0xCD9E8D57u;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
  }
}

/* dtorch's stream layout (kernels/cpu/random.c's header): element i uses
 * counter (lo32 i, hi32 i, 0, 0), key (lo32 seed, hi32 seed), and 53 bits
 * (out0 << 21) ^ (out1 >> 11) over 2^53 */
static double ref_uniform(uint64_t seed, uint64_t i) {
  uint32_t c[4] = {(uint32_t)i, (uint32_t)(i >> 32), 0, 0};
  uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  philox(c, k);
  uint64_t bits = (((uint64_t)c[0] << 21) ^ (c[1] >> 11)) & ((1ull << 53) - 1);
  return (double)bits / 9007199254740992.0;
}

static void test_philox_reference(void **state) {
  (void)state;
  /* Random123's kat_vectors for philox4x32_10 */
  uint32_t c1[4] = {0, 0, 0, 0}, k1[2] = {0, 0};
  philox(c1, k1);
  assert_true(c1[0] == 0x6627e8d5u && c1[1] == 0xe169c58du &&
              c1[2] == 0xbc57ac4cu && c1[3] == 0x9b00dbd8u);
  uint32_t c2[4] = {~0u, ~0u, ~0u, ~0u}, k2[2] = {~0u, ~0u};
  philox(c2, k2);
  assert_true(c2[0] == 0x408f276du && c2[1] == 0x41c83b0eu &&
              c2[2] == 0xa20bc7c6u && c2[3] == 0x6d5451fdu);
  uint32_t c3[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
  uint32_t k3[2] = {0xa4093822u, 0x299f31d0u};
  philox(c3, k3);
  assert_true(c3[0] == 0xd16cfe09u && c3[1] == 0x94fdccebu &&
              c3[2] == 0x5001e420u && c3[3] == 0x24126ea1u);
}

/* values of x in (0.5, 1.5): never 0, so a 0 in the output is a drop */
static dt_tensor *positive(dt_shape s, dt_dtype d, double **v) {
  return tu_random(s, d, 77, 0.5, 1.5, v);
}

/* out must be the dropout of xv with stream (seed, first): bitwise */
static void assert_dropout(dt_tensor *out, const double *xv, int64_t n,
                           double p, uint64_t seed, uint64_t first,
                           dt_dtype d) {
  double *got = tu_values(out);
  for (int64_t i = 0; i < n; i++) {
    bool keep = ref_uniform(seed, first + (uint64_t)i) >= p;
    double want = keep ? tu_round(xv[i] / (1.0 - p), d) : 0.0;
    if (got[i] != want)
      fail_msg("dropout element %lld: got %.17g, want %.17g (keep %d)",
               (long long)i, got[i], want, (int)keep);
  }
  free(got);
}

static void test_dropout_mask(void **state) {
  (void)state;
  tu_leaks_begin();
  int64_t n = 100000;
  double p = 0.3, *xv;
  dt_tensor *x = positive(DT_SHAPE(n), DT_FLOAT32, &xv);
  dt_manual_seed(1234);
  dt_tensor *y1 = dt_dropout(x, p, true);
  assert_non_null(y1);
  assert_dropout(y1, xv, n, p, 1234, 0, DT_FLOAT32);
  /* the fraction kept: binomial(n, 0.7), within 6 standard deviations */
  double *g = tu_values(y1);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; i++) kept += g[i] != 0;
  double sd = sqrt((double)n * p * (1 - p));
  assert_true(fabs((double)kept - (double)n * (1 - p)) < 6 * sd);
  free(g);
  /* same seed → same output; the next call continues the stream at n */
  dt_manual_seed(1234);
  dt_tensor *y2 = dt_dropout(x, p, true);
  dt_tensor *y3 = dt_dropout(x, p, true);
  assert_dropout(y2, xv, n, p, 1234, 0, DT_FLOAT32);
  assert_dropout(y3, xv, n, p, 1234, (uint64_t)n, DT_FLOAT32);
  dt_tensor_release(y1);
  dt_tensor_release(y2);
  dt_tensor_release(y3);
  dt_tensor_release(x);
  free(xv);
  tu_leaks_end();
}

/* element i's mask does not depend on the tensor's size or layout: a small
 * tensor's mask is the prefix of a larger one's from the same stream, and a
 * strided input is masked by its logical (row-major) index */
static void test_dropout_split_invariant(void **state) {
  (void)state;
  tu_leaks_begin();
  double p = 0.5, *xv;
  dt_tensor *big = positive(DT_SHAPE(40, 25), DT_FLOAT64, &xv);
  dt_tensor *small = dt_narrow(big, 0, 0, 8); /* first 200 elements */
  dt_manual_seed(99);
  dt_tensor *yb = dt_dropout(big, p, true);
  dt_manual_seed(99);
  dt_tensor *ys = dt_dropout(small, p, true);
  double *gb = tu_values(yb), *gs = tu_values(ys);
  for (int i = 0; i < 200; i++) assert_true((gb[i] != 0) == (gs[i] != 0));
  assert_dropout(ys, xv, 200, p, 99, 0, DT_FLOAT64);
  free(gb);
  free(gs);
  dt_tensor *t = dt_transpose(big, 0, 1), *tc = dt_contiguous(t);
  double *tv = tu_values(tc);
  dt_manual_seed(5);
  dt_tensor *yt = dt_dropout(t, p, true);
  assert_dropout(yt, tv, 1000, p, 5, 0, DT_FLOAT64);
  free(tv);
  free(xv);
  TU_RELEASE(big, small, yb, ys, t, tc, yt);
  tu_leaks_end();
}

static void test_dropout_modes(void **state) {
  (void)state;
  tu_leaks_begin();
  double *xv;
  dt_tensor *x = positive(DT_SHAPE(3, 50), DT_BFLOAT16, &xv);
  dt_manual_seed(3);
  dt_tensor *yh = dt_dropout(x, 0.25, true);
  assert_int_equal(dt_tensor_dtype(yh), DT_BFLOAT16);
  assert_dropout(yh, xv, 150, 0.25, 3, 0, DT_BFLOAT16);
  /* eval, p = 0 and p = 1 draw nothing: the stream stays at 150 */
  dt_tensor *ye = dt_dropout(x, 0.25, false);
  dt_tensor *y0 = dt_dropout(x, 0.0, true);
  dt_tensor *y1 = dt_dropout(x, 1.0, true);
  double *ge = tu_values(ye), *g0 = tu_values(y0), *g1 = tu_values(y1);
  for (int i = 0; i < 150; i++) {
    assert_true(ge[i] == xv[i] && g0[i] == xv[i]);
    assert_true(g1[i] == 0.0);
  }
  assert_false(dt_tensor_shares_storage(ye, x));
  dt_tensor *yn = dt_dropout(x, 0.25, true);
  assert_dropout(yn, xv, 150, 0.25, 3, 150, DT_BFLOAT16);
  dt_tensor *e = dt_zeros(DT_SHAPE(0, 3), NULL);
  dt_tensor *ee = dt_dropout(e, 0.5, true);
  assert_non_null(ee);
  assert_int_equal(dt_tensor_numel(ee), 0);
  free(ge);
  free(g0);
  free(g1);
  free(xv);
  TU_RELEASE(x, yh, ye, y0, y1, yn, e, ee);
  tu_leaks_end();
}

/* A dropout that fails draws nothing: the stream stays where it was.
 * Regression: the indices were reserved before the dtype was checked, so a
 * failed call on an int tensor shifted every later random value. */
static void test_dropout_failure_keeps_stream(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  double *xv;
  dt_tensor *x = positive(DT_SHAPE(64), DT_FLOAT32, &xv);
  dt_tensor *i = dt_zeros(DT_SHAPE(1000), &(dt_tensor_options){.dtype = DT_INT32});
  dt_tensor *b = dt_zeros(DT_SHAPE(10), &(dt_tensor_options){.dtype = DT_BOOL});
  dt_manual_seed(77);
  tu_expect_error(dt_dropout(i, 0.5, true), DT_ERR_DTYPE, "dt_dropout",
                  "int32", NULL);
  tu_expect_error(dt_dropout(b, 0.25, true), DT_ERR_DTYPE, "dt_dropout",
                  "bool", NULL);
  dt_tensor *y = dt_dropout(x, 0.5, true);
  assert_non_null(y);
  assert_dropout(y, xv, 64, 0.5, 77, 0, DT_FLOAT32); /* still at index 0 */
  /* and the next one continues at 64 */
  dt_tensor *y2 = dt_dropout(x, 0.5, true);
  assert_dropout(y2, xv, 64, 0.5, 77, 64, DT_FLOAT32);
  free(xv);
  TU_RELEASE(y2, y, b, i, x);
  tu_leaks_end();
}

/* ---- errors */
static void test_errors(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor_options i64 = {.dtype = DT_INT64}, i32 = {.dtype = DT_INT32};
  dt_tensor *w = dt_zeros(DT_SHAPE(10, 4), NULL);
  dt_tensor *w1 = dt_zeros(DT_SHAPE(10), NULL);
  dt_tensor *fidx = dt_zeros(DT_SHAPE(3), NULL);
  dt_tensor *bad = tu_tensor((double[]){1, 12, 3}, DT_SHAPE(3), DT_INT64);
  dt_tensor *neg = tu_tensor((double[]){-1}, DT_SHAPE(1), DT_INT32);
  dt_tensor *idx2 = dt_zeros(DT_SHAPE(2, 2), &i64);
  dt_tensor *logits = dt_zeros(DT_SHAPE(4, 5), NULL);
  dt_tensor *ilogits = dt_zeros(DT_SHAPE(4, 5), &i64);
  dt_tensor *t3 = dt_zeros(DT_SHAPE(3), &i64);
  dt_tensor *t4 = tu_tensor((double[]){0, 7, 1, 2}, DT_SHAPE(4), DT_INT32);
  dt_tensor *t4f = dt_zeros(DT_SHAPE(4), NULL);
  dt_tensor *t4ok = dt_zeros(DT_SHAPE(4), &i32);
  dt_tensor *x = dt_ones(DT_SHAPE(8), NULL);
  dt_tensor *xi = dt_ones(DT_SHAPE(8), &i64);

  tu_expect_error(dt_embedding(NULL, w), DT_ERR_INVALID_ARGUMENT,
                  "dt_embedding", "indices", NULL);
  tu_expect_error(dt_embedding(fidx, w), DT_ERR_DTYPE, "dt_embedding",
                  "indices", "float32", NULL);
  tu_expect_error(dt_embedding(bad, w), DT_ERR_INVALID_ARGUMENT,
                  "dt_embedding", "12", "10", NULL);
  tu_expect_error(dt_embedding(neg, w), DT_ERR_INVALID_ARGUMENT,
                  "dt_embedding", "-1", "10", NULL);
  tu_expect_error(dt_embedding(t3, w1), DT_ERR_SHAPE, "dt_embedding",
                  "weight", "[10]", NULL);
  tu_expect_error(dt_index_select(w, 2, t3), DT_ERR_INVALID_ARGUMENT,
                  "dt_index_select", "dim", "2", NULL);
  tu_expect_error(dt_index_select(w, -3, t3), DT_ERR_INVALID_ARGUMENT,
                  "dt_index_select", "-3", NULL);
  tu_expect_error(dt_index_select(w, 1, bad), DT_ERR_INVALID_ARGUMENT,
                  "dt_index_select", "12", "4", NULL);
  tu_expect_error(dt_index_select(w, 0, idx2), DT_ERR_SHAPE,
                  "dt_index_select", "[2, 2]", NULL);
  tu_expect_error(dt_index_select(w, 0, fidx), DT_ERR_DTYPE,
                  "dt_index_select", "float32", NULL);
  tu_expect_error(dt_cross_entropy(logits, t3, DT_REDUCTION_MEAN, -100),
                  DT_ERR_SHAPE, "dt_cross_entropy", "[3]", "[4, 5]",
                  "expected [4]", NULL);
  tu_expect_error(dt_cross_entropy(logits, t4, DT_REDUCTION_SUM, -100),
                  DT_ERR_INVALID_ARGUMENT, "dt_cross_entropy", "7", "5",
                  NULL);
  tu_expect_error(dt_cross_entropy(logits, t4, DT_REDUCTION_NONE, -100),
                  DT_ERR_INVALID_ARGUMENT, "dt_cross_entropy", "7", NULL);
  /* a float target means class probabilities: of the logits' shape */
  tu_expect_error(dt_cross_entropy(logits, t4f, DT_REDUCTION_MEAN, -100),
                  DT_ERR_SHAPE, "dt_cross_entropy", "target", "probabilities",
                  NULL);
  tu_expect_error(dt_cross_entropy(ilogits, t4ok, DT_REDUCTION_MEAN, -100),
                  DT_ERR_DTYPE, "dt_cross_entropy", "logits", "int64", NULL);
  tu_expect_error(dt_cross_entropy(logits, t4ok, (dt_reduction)7, -100),
                  DT_ERR_INVALID_ARGUMENT, "dt_cross_entropy", "reduction",
                  NULL);
  tu_expect_error(dt_cross_entropy(logits, NULL, DT_REDUCTION_MEAN, -100),
                  DT_ERR_INVALID_ARGUMENT, "dt_cross_entropy", "target", NULL);
  tu_expect_error(dt_dropout(x, 1.5, true), DT_ERR_INVALID_ARGUMENT,
                  "dt_dropout", "1.5", NULL);
  tu_expect_error(dt_dropout(x, -0.1, false), DT_ERR_INVALID_ARGUMENT,
                  "dt_dropout", "-0.1", NULL);
  tu_expect_error(dt_dropout(x, NAN, true), DT_ERR_INVALID_ARGUMENT,
                  "dt_dropout", "nan", NULL);
  tu_expect_error(dt_dropout(xi, 0.5, true), DT_ERR_DTYPE, "dt_dropout",
                  "int64", NULL);
  tu_expect_error(dt_dropout(NULL, 0.5, true), DT_ERR_INVALID_ARGUMENT,
                  "dt_dropout", NULL);

  TU_RELEASE(w, w1, fidx, bad, neg, idx2, logits, ilogits, t3, t4, t4f, t4ok, x,
             xi);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding),
      cmocka_unit_test(test_index_select),
      cmocka_unit_test(test_cross_entropy),
      cmocka_unit_test(test_philox_reference),
      cmocka_unit_test(test_dropout_mask),
      cmocka_unit_test(test_dropout_split_invariant),
      cmocka_unit_test(test_dropout_modes),
      cmocka_unit_test(test_dropout_failure_keeps_stream),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
