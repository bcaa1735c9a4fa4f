/* In-place writes (dt_copy_, docs/inplace.md): writes through every kind
 * of view reach the base (checked against a host array updated by index
 * arithmetic), broadcast and cast, stream order against ops issued before
 * and after (a matmul reading the old value, checked against a naive
 * double loop), DTensor shards on a mesh of 4, version counters and
 * autograd's saved-tensor checks, the errors, several threads writing
 * disjoint views at once, and a destroy racing dt_copy_. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "support/testutil.h"
#include "support/threads.h"

static dt_tensor *iota(dt_shape s) {
  dt_tensor *r = dt_arange(0, (double)tu_numel(s), 1, NULL);
  assert_non_null(r);
  dt_tensor *v = dt_view(r, s);
  assert_non_null(v);
  dt_tensor_release(r);
  return v;
}

static void expect_values(dt_tensor *t, const double *want, const char *what) {
  double *got = tu_values(t);
  tu_assert_close(got, want, dt_tensor_numel(t), 0, 0, what);
  free(got);
}

static void copy_ok(dt_tensor *dst, dt_tensor *src) {
  if (dt_copy_(dst, src) != DT_OK) fail_msg("dt_copy_: %s", dt_last_error());
}

/* ---- views written through: ref is the base's value, row-major */
static void test_views_write_through(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  enum { R = 4, C = 6 };
  double ref[R * C];
  for (int i = 0; i < R * C; i++) ref[i] = i;
  dt_tensor *base = iota(DT_SHAPE(R, C));

  /* a row, from a 0-d value */
  dt_tensor *row = dt_select(base, 0, 1), *v = dt_full(DT_SHAPE(), 100, NULL);
  copy_ok(row, v);
  for (int j = 0; j < C; j++) ref[1 * C + j] = 100;
  expect_values(base, ref, "row");
  TU_RELEASE(row, v);

  /* a column */
  double col[R] = {-1, -2, -3, -4};
  dt_tensor *c2 = dt_select(base, 1, 2);
  v = tu_tensor(col, DT_SHAPE(R), DT_FLOAT32);
  copy_ok(c2, v);
  for (int i = 0; i < R; i++) ref[i * C + 2] = col[i];
  expect_values(base, ref, "column");
  TU_RELEASE(c2, v);

  /* every other column (strides [6, 2]) */
  double sv[R * 3];
  for (int i = 0; i < R * 3; i++) sv[i] = 1000 + i;
  dt_tensor *st = dt_slice(base, 1, 1, C, 2);
  v = tu_tensor(sv, DT_SHAPE(R, 3), DT_FLOAT32);
  copy_ok(st, v);
  for (int i = 0; i < R; i++)
    for (int k = 0; k < 3; k++) ref[i * C + 1 + 2 * k] = sv[i * 3 + k];
  expect_values(base, ref, "strided");
  TU_RELEASE(st, v);

  /* the transpose: element (j, i) of it is (i, j) of the base */
  double tv[C * R];
  for (int i = 0; i < C * R; i++) tv[i] = -500 - i;
  dt_tensor *t = dt_transpose(base, 0, 1);
  v = tu_tensor(tv, DT_SHAPE(C, R), DT_FLOAT32);
  copy_ok(t, v);
  for (int j = 0; j < C; j++)
    for (int i = 0; i < R; i++) ref[i * C + j] = tv[j * R + i];
  expect_values(base, ref, "transposed");
  TU_RELEASE(t, v);

  /* rows 1..2, columns 3..5 of a slice of a slice */
  dt_tensor *s1 = dt_slice(base, 0, 1, 3, 1), *s2 = dt_slice(s1, 1, 3, C, 1);
  double bv[2 * 3] = {7, 8, 9, 10, 11, 12};
  v = tu_tensor(bv, DT_SHAPE(2, 3), DT_FLOAT32);
  copy_ok(s2, v);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 3; k++) ref[(1 + i) * C + 3 + k] = bv[i * 3 + k];
  expect_values(base, ref, "sliced");
  /* the view itself reads the new values */
  expect_values(s2, bv, "the view");
  TU_RELEASE(s1, s2, v, base);
  tu_settle();
  tu_leaks_end();
}

/* ---- broadcast and cast */
static void test_broadcast_cast(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *dst = dt_zeros(DT_SHAPE(3, 4), NULL);
  double row[4] = {0.1, -2.25, 1e-3, 3.0000001};
  dt_tensor *src = tu_tensor(row, DT_SHAPE(4), DT_FLOAT64);
  copy_ok(dst, src);
  double want[12];
  for (int i = 0; i < 12; i++) want[i] = tu_round(row[i % 4], DT_FLOAT32);
  expect_values(dst, want, "float64 row into float32");
  dt_tensor_release(src);
  /* an int32 column [3, 1] */
  double colv[3] = {5, -6, 7};
  src = tu_tensor(colv, DT_SHAPE(3, 1), DT_INT32);
  copy_ok(dst, src);
  for (int i = 0; i < 12; i++) want[i] = colv[i / 4];
  expect_values(dst, want, "int32 column");
  dt_tensor_release(src);
  /* float into an int64 dst (integral values: exact) and into bool */
  dt_tensor *di = dt_zeros(DT_SHAPE(2, 2), &(dt_tensor_options){.dtype = DT_INT64});
  double fv[4] = {-3, 0, 9, 1 << 20};
  src = tu_tensor(fv, DT_SHAPE(2, 2), DT_FLOAT32);
  copy_ok(di, src);
  expect_values(di, fv, "float32 into int64");
  dt_tensor *db = dt_zeros(DT_SHAPE(2, 2), &(dt_tensor_options){.dtype = DT_BOOL});
  copy_ok(db, src);
  double bw[4] = {1, 0, 1, 1};
  expect_values(db, bw, "float32 into bool");
  TU_RELEASE(src, di, db, dst);
  tu_settle();
  tu_leaks_end();
}

/* ---- stream order */
static void naive_matmul(const double *a, const double *b, double *c, int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
      c[i * n + j] = s;
    }
}

static void test_stream_order(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  enum { N = 192 };
  double *xv, *wv;
  dt_tensor *x = tu_random(DT_SHAPE(N, N), DT_FLOAT32, 11, -1, 1, &xv);
  dt_tensor *w = tu_random(DT_SHAPE(N, N), DT_FLOAT32, 12, -1, 1, &wv);
  double *want = malloc(sizeof(double) * N * N);
  naive_matmul(xv, wv, want, N);
  for (int round = 0; round < 4; round++) {
    /* issued first: the matmul and a fetch read the old x */
    dt_tensor *y = dt_matmul(x, w);
    assert_non_null(y);
    float *old = malloc(sizeof(float) * N * N);
    dt_future *f = dt_to_host_async(x, old, sizeof(float) * N * N);
    assert_non_null(f);
    dt_tensor *z = dt_full(DT_SHAPE(N), (double)(round + 2), NULL);
    copy_ok(x, z); /* every row becomes round + 2 */
    /* issued after: reads the new x */
    dt_tensor *x2 = dt_mul_scalar(x, 1.0);
    assert_int_equal(dt_future_wait(f, -1), DT_OK);
    dt_future_release(f);
    double *got = tu_values(y);
    tu_assert_close(got, want, N * N, 1e-5, 1e-4, "matmul of the old x");
    free(got);
    for (int i = 0; i < N * N; i++)
      if ((double)old[i] != xv[i]) fail_msg("fetch %d: %g != %g", i, old[i], xv[i]);
    double *nx = tu_values(x2);
    for (int i = 0; i < N * N; i++)
      if (nx[i] != round + 2) fail_msg("later op read %g at %d", nx[i], i);
    free(nx);
    /* the next round's reference: the new x */
    for (int i = 0; i < N * N; i++) xv[i] = round + 2;
    naive_matmul(xv, wv, want, N);
    free(old);
    TU_RELEASE(y, z, x2);
  }
  free(want);
  free(xv);
  free(wv);
  TU_RELEASE(x, w);
  tu_settle();
  tu_leaks_end();
}

/* ---- DTensors on a mesh of 4 */
static void test_dtensor_shards(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(4), NULL);
  enum { R = 8, C = 4 };
  float host[R * C], src[R * C], shard[R * C];
  for (int i = 0; i < R * C; i++) host[i] = (float)i, src[i] = (float)(-3 * i);
  dt_placement pls[3] = {DT_SHARD(0), DT_SHARD(1), DT_REPLICATE};
  for (int p = 0; p < 3; p++)
    for (int q = 0; q < 3; q++) {
      dt_tensor *d = dt_from_host(host, DT_SHAPE(R, C), &(dt_tensor_options){
                                      .mesh = m, .placements = &pls[p]});
      dt_tensor *s = dt_from_host(src, DT_SHAPE(R, C), &(dt_tensor_options){
                                      .mesh = m, .placements = &pls[q]});
      assert_true(d && s);
      copy_ok(d, s);
      assert_int_equal(dt_tensor_version(d), 1);
      float got[R * C];
      assert_int_equal(dt_to_host(d, got, sizeof got), DT_OK);
      for (int i = 0; i < R * C; i++) assert_true(got[i] == src[i]);
      /* each rank's shard: its box of src */
      for (int r = 0; r < 4; r++) {
        dt_shape ls = dt_tensor_local_shape(d, r);
        int64_t rows = ls.dims[0], cols = ls.dims[1];
        int64_t r0 = pls[p].kind == DT_PLACEMENT_SHARD && pls[p].dim == 0 ? r * rows : 0;
        int64_t c0 = pls[p].kind == DT_PLACEMENT_SHARD && pls[p].dim == 1 ? r * cols : 0;
        assert_int_equal(dt_local_to_host(d, r, shard, sizeof shard), DT_OK);
        for (int64_t i = 0; i < rows; i++)
          for (int64_t k = 0; k < cols; k++)
            assert_true(shard[i * cols + k] == src[(r0 + i) * C + c0 + k]);
      }
      TU_RELEASE(d, s);
    }
  /* a broadcast Replicate row into a Shard(0) DTensor */
  dt_tensor *d = dt_zeros(DT_SHAPE(R, C), &(dt_tensor_options){
                              .mesh = m, .placements = &pls[0]});
  float rowv[C] = {1.5f, -2, 3, 4};
  dt_tensor *row = dt_from_host(rowv, DT_SHAPE(C), &(dt_tensor_options){.mesh = m});
  copy_ok(d, row);
  float got[R * C];
  assert_int_equal(dt_to_host(d, got, sizeof got), DT_OK);
  for (int i = 0; i < R * C; i++) assert_true(got[i] == rowv[i % C]);
  /* an op issued before reads the old value: redistribute then write */
  dt_tensor *rep = dt_redistribute(d, m, (dt_placement[]){DT_REPLICATE});
  dt_tensor *zero = dt_zeros(DT_SHAPE(), &(dt_tensor_options){.mesh = m});
  copy_ok(d, zero);
  assert_int_equal(dt_to_host(rep, got, sizeof got), DT_OK);
  for (int i = 0; i < R * C; i++) assert_true(got[i] == rowv[i % C]);
  assert_int_equal(dt_to_host(d, got, sizeof got), DT_OK);
  for (int i = 0; i < R * C; i++) assert_true(got[i] == 0);
  /* errors: Partial dst, a DTensor view, a single-device src, meshes */
  dt_tensor *part = dt_zeros(DT_SHAPE(R, C), &(dt_tensor_options){
      .mesh = m, .placements = (dt_placement[]){DT_PARTIAL(DT_REDUCE_SUM)}});
  tu_expect_status(dt_copy_(part, d), DT_ERR_PLACEMENT, "dt_copy_",
                   "Partial", NULL);
  dt_tensor *sel = dt_select(d, 1, 1);
  tu_expect_status(dt_copy_(sel, zero), DT_ERR_UNSUPPORTED, "dt_copy_",
                   "select view of a DTensor", NULL);
  dt_tensor *one = dt_ones(DT_SHAPE(R, C), NULL);
  tu_expect_status(dt_copy_(d, one), DT_ERR_MESH, "dt_copy_",
                   "dst is a DTensor and src is a single-device tensor", NULL);
  dt_mesh *m2 = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  dt_tensor *o2 = dt_ones(DT_SHAPE(R, C), &(dt_tensor_options){.mesh = m2});
  tu_expect_status(dt_copy_(d, o2), DT_ERR_MESH, "dt_copy_", "one mesh", NULL);
  /* a detached alias shares the shards and the version */
  dt_tensor *al = dt_detach(d);
  copy_ok(al, row);
  assert_int_equal(dt_tensor_version(d), dt_tensor_version(al));
  assert_true(dt_tensor_shares_storage(al, d));
  assert_int_equal(dt_to_host(d, got, sizeof got), DT_OK);
  for (int i = 0; i < R * C; i++) assert_true(got[i] == rowv[i % C]);
  TU_RELEASE(d, row, rep, zero, part, sel, one, o2, al);
  dt_mesh_release(m2);
  dt_mesh_release(m);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* ---- version counters */
static void test_versions(void **state) {
  (void)state;
  dt_tensor *b = dt_zeros(DT_SHAPE(3, 3), NULL), *one = dt_ones(DT_SHAPE(), NULL);
  assert_int_equal(dt_tensor_version(b), 0);
  dt_tensor *r = dt_select(b, 0, 2), *a = dt_detach(b);
  copy_ok(r, one); /* through a view: the base's storage */
  assert_int_equal(dt_tensor_version(b), 1);
  assert_int_equal(dt_tensor_version(r), 1);
  copy_ok(a, one);
  assert_int_equal(dt_tensor_version(b), 2);
  dt_tensor *c = dt_add(b, one); /* a new storage */
  assert_int_equal(dt_tensor_version(c), 0);
  dt_clear_error();
  assert_int_equal(dt_tensor_version(NULL), -1);
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  dt_clear_error();
  TU_RELEASE(b, one, r, a, c);
}

/* ---- autograd */
static void test_autograd(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  double xv[3] = {1, 2, 3}, wv[3] = {4, 5, 6};
  dt_tensor *x = tu_tensor(xv, DT_SHAPE(3), DT_FLOAT32);
  dt_tensor *w = tu_tensor(wv, DT_SHAPE(3), DT_FLOAT32);
  assert_int_equal(dt_tensor_set_requires_grad(w, true), DT_OK);
  dt_tensor *z = dt_zeros(DT_SHAPE(3), NULL);
  /* a leaf that requires grad: refused with grad mode on, allowed off */
  tu_expect_status(dt_copy_(w, z), DT_ERR_INVALID_ARGUMENT,
                   "a leaf tensor that requires grad is being used in an "
                   "in-place operation", NULL);
  bool was = dt_set_grad_enabled(false);
  copy_ok(w, x); /* w = [1, 2, 3] */
  dt_set_grad_enabled(was);
  /* mul saves x: writing x after the forward fails the backward */
  dt_tensor *y = dt_mul(x, w), *l = dt_sum(y, NULL, 0, false);
  copy_ok(x, z);
  tu_expect_status(dt_backward(l), DT_ERR_INVALID_ARGUMENT, "dt_backward",
                   "one of the variables needed for gradient computation has "
                   "been modified by an inplace operation", "input 0 of mul",
                   "at version 1; expected version 0", NULL);
  TU_RELEASE(y, l);
  /* add reads no values: the same write leaves its backward right */
  y = dt_add(x, w);
  l = dt_sum(y, NULL, 0, false);
  copy_ok(x, z);
  assert_int_equal(dt_backward(l), DT_OK);
  dt_tensor *g = dt_grad(w);
  float gf[3];
  assert_int_equal(dt_to_host(g, gf, sizeof gf), DT_OK);
  for (int i = 0; i < 3; i++) assert_true(gf[i] == 1.0f);
  TU_RELEASE(y, l, g);
  /* a non-leaf dst or a src in a graph: not recorded, refused */
  dt_tensor *h = dt_mul_scalar(w, 2.0);
  tu_expect_status(dt_copy_(h, z), DT_ERR_UNSUPPORTED, "dt_copy_",
                   "made by mul_scalar", NULL);
  tu_expect_status(dt_copy_(z, h), DT_ERR_UNSUPPORTED, "dt_copy_",
                   "src requires grad", NULL);
  /* dt_set_grad: replace, clear, errors */
  dt_tensor *g2 = dt_full(DT_SHAPE(3), 7, NULL);
  assert_int_equal(dt_set_grad(w, g2), DT_OK);
  g = dt_grad(w);
  assert_int_equal(dt_to_host(g, gf, sizeof gf), DT_OK);
  assert_true(gf[2] == 7.0f);
  dt_tensor_release(g);
  assert_int_equal(dt_set_grad(w, NULL), DT_OK);
  assert_null(dt_grad(w));
  dt_tensor *bad = dt_zeros(DT_SHAPE(4), NULL);
  tu_expect_status(dt_set_grad(w, bad), DT_ERR_SHAPE, "dt_set_grad",
                   "[4]", "[3]", NULL);
  tu_expect_status(dt_set_grad(h, g2), DT_ERR_INVALID_ARGUMENT, "dt_set_grad",
                   "made by mul_scalar", NULL);
  /* dt_detach: no grad, same storage */
  dt_tensor *dw = dt_detach(w);
  assert_false(dt_tensor_requires_grad(dw));
  assert_true(dt_tensor_shares_storage(dw, w));
  copy_ok(dw, g2); /* grad mode on: a detached alias may be written */
  assert_int_equal(dt_to_host(w, gf, sizeof gf), DT_OK);
  assert_true(gf[0] == 7.0f);
  TU_RELEASE(x, w, z, h, g2, bad, dw);
  tu_settle();
  tu_leaks_end();
}

/* ---- errors */
static void test_errors(void **state) {
  (void)state;
  dt_tensor *a = dt_zeros(DT_SHAPE(2, 3), NULL), *b = dt_ones(DT_SHAPE(4), NULL);
  tu_expect_status(dt_copy_(a, b), DT_ERR_SHAPE, "dt_copy_", "src of shape [4]",
                   "dst's shape [2, 3]", NULL);
  tu_expect_status(dt_copy_(NULL, b), DT_ERR_INVALID_ARGUMENT, "dt_copy_",
                   "dst is NULL", NULL);
  tu_expect_status(dt_copy_(a, NULL), DT_ERR_INVALID_ARGUMENT, "dt_copy_",
                   "src is NULL", NULL);
  dt_tensor *row = dt_zeros(DT_SHAPE(3), NULL);
  dt_tensor *e = dt_expand(row, DT_SHAPE(2, 3));
  tu_expect_status(dt_copy_(e, a), DT_ERR_INVALID_ARGUMENT, "dt_copy_",
                   "more than one element of the written-to tensor refers to "
                   "a single memory location", "strides [0, 1]", NULL);
  dt_tensor *other = dt_zeros(DT_SHAPE(2, 3), &(dt_tensor_options){.device = "cpu:1"});
  tu_expect_status(dt_copy_(a, other), DT_ERR_DEVICE, "dt_copy_",
                   "dst is on cpu:0 and src on cpu:1", NULL);
  /* an overlapping self-copy reads before it writes: a[1] = a[0] + shift */
  double v[6] = {1, 2, 3, 4, 5, 6};
  dt_tensor *t = tu_tensor(v, DT_SHAPE(6), DT_FLOAT32);
  dt_tensor *lo = dt_slice(t, 0, 0, 4, 1), *hi = dt_slice(t, 0, 2, 6, 1);
  copy_ok(hi, lo);
  double want[6] = {1, 2, 1, 2, 3, 4};
  expect_values(t, want, "overlapping copy");
  TU_RELEASE(a, b, row, e, other, t, lo, hi);
}

/* ---- threads writing disjoint rows of one tensor */
enum { ROWS = 6, COLS = 4096, ITERS = 60 };
static dt_tensor *shared_t;

static void writer(void *arg, int i) {
  (void)arg;
  dt_tensor *row = dt_select(shared_t, 0, i);
  TU_CHECK_TRUE(row != NULL);
  for (int k = 0; k < ITERS; k++) {
    dt_tensor *v = dt_full_like(row, i * 1000 + k);
    TU_CHECK(dt_copy_(row, v) == DT_OK, "%s", dt_last_error());
    dt_tensor_release(v);
  }
  dt_tensor_release(row);
}

static void test_threads_disjoint(void **state) {
  (void)state;
  shared_t = dt_zeros(DT_SHAPE(ROWS, COLS), NULL);
  tu_run_threads(ROWS, writer, NULL);
  TU_ASSERT_NO_THREAD_FAILURES();
  double *got = tu_values(shared_t);
  for (int i = 0; i < ROWS; i++)
    for (int j = 0; j < COLS; j++)
      if (got[i * COLS + j] != i * 1000 + ITERS - 1)
        fail_msg("row %d col %d: %g", i, j, got[i * COLS + j]);
  free(got);
  assert_int_equal(dt_tensor_version(shared_t), ROWS * ITERS);
  dt_tensor_release(shared_t);
}

/* ---- a destroy racing dt_copy_ */
typedef struct race {
  dt_runtime *rt;
  _Atomic int started;
  _Atomic bool destroyed;
} race;

static void racer(void *arg, int i) {
  race *r = arg;
  if (i == 1) {
    while (!atomic_load(&r->started)) tu_sleep_ns(50000);
    tu_sleep_ns(200000);
    dt_runtime_destroy(r->rt);
    atomic_store(&r->destroyed, true);
    return;
  }
  dt_runtime_set_current(r->rt);
  dt_tensor *d = dt_zeros(DT_SHAPE(64, 64), NULL);
  dt_tensor *s = dt_ones(DT_SHAPE(64), &(dt_tensor_options){.dtype = DT_FLOAT64});
  TU_CHECK_TRUE(d && s);
  dt_tensor *col = d ? dt_select(d, 1, 3) : NULL;
  dt_tensor *sc = s ? dt_narrow(s, 0, 0, 1) : NULL;
  for (int k = 0;; k++) {
    bool after = atomic_load(&r->destroyed);
    dt_status st = dt_copy_(k % 2 ? col : d, k % 2 ? sc : s);
    TU_CHECK(st == DT_OK || (st == DT_ERR_DEVICE &&
                             strstr(dt_last_error(), "destroyed")),
             "dt_copy_: %s: %s", dt_status_name(st), dt_last_error());
    if (k == 4) atomic_store(&r->started, 1);
    if (after) {
      TU_CHECK(st != DT_OK, "a dt_copy_ succeeded after the destroy");
      break;
    }
  }
  TU_RELEASE(d, s, col, sc);
  dt_runtime_set_current(NULL);
}

static void test_destroy_race(void **state) {
  (void)state;
  for (int round = 0; round < 20; round++) {
    race r = {.rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2})};
    assert_non_null(r.rt);
    tu_run_threads(2, racer, &r);
    TU_ASSERT_NO_THREAD_FAILURES();
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_views_write_through),
      cmocka_unit_test(test_broadcast_cast),
      cmocka_unit_test(test_stream_order),
      cmocka_unit_test(test_dtensor_shards),
      cmocka_unit_test(test_versions),
      cmocka_unit_test(test_autograd),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_threads_disjoint),
      cmocka_unit_test(test_destroy_race),
  };
  return TU_RUN_TESTS_WITH_ALARM(240, tests);
}
