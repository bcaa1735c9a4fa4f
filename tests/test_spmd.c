/* SPMD mode: every collective on local tensors
 * against a naive host computation, over the world, mesh dims and rank
 * lists; SPMD versions of a TP MLP and a DP step equal the controller
 * runs; DTensors from / to local shards; desyncs of every kind named with
 * both call sites; a rank that fails or returns early fails its peers at
 * once and the runtime stays usable; random factories agree across
 * ranks; gradients through from_local / to_local; bad calls; several
 * issuing threads. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"

#define N 4
static dt_runtime *rt;
static dt_mesh *m22, *m4;

static int setup(void **state) {
  (void)state;
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = N,
                                                .collective_timeout_ms = 20000});
  m22 = dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), (const char *const[]){"dp", "tp"});
  m4 = dt_mesh_init(rt, NULL, DT_SHAPE(4), (const char *const[]){"tp"});
  return rt && m22 && m4 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  dt_mesh_release(m22);
  dt_mesh_release(m4);
  dt_runtime_destroy(rt);
  return 0;
}

/* a local float64 tensor of this rank holding v */
static dt_tensor *local64(const double *v, dt_shape s) {
  return dt_from_host(v, s, &(dt_tensor_options){.dtype = DT_FLOAT64});
}

/* t's values into out (n of them); counts a failure if it cannot */
static bool fetch(dt_tensor *t, double *out, int64_t n) {
  TU_CHECK(t != NULL, "rank %d: %s", dt_spmd_rank(), dt_last_error());
  if (!t) return false;
  TU_CHECK(dt_tensor_numel(t) == n, "numel %lld, want %lld",
           (long long)dt_tensor_numel(t), (long long)n);
  dt_status st = dt_to_host(t, out, (size_t)n * sizeof(double));
  TU_CHECK(st == DT_OK, "%s", dt_last_error());
  dt_tensor_release(t);
  return st == DT_OK;
}

static void expect_values(const char *what, int rank, const double *got,
                          const double *want, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      tu_thread_fail(__FILE__, __LINE__, what, "rank %d element %lld: %g, want %g",
                     rank, (long long)i, got[i], want[i]);
      return;
    }
}

/* rank r's input: [4, 8], element (i, j) = 100 r + 8 i + j */
static double in_val(int r, int i, int j) { return 100.0 * r + 8 * i + j; }

static dt_tensor *rank_input(int r) {
  double v[32];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++) v[i * 8 + j] = in_val(r, i, j);
  return local64(v, DT_SHAPE(4, 8));
}

/* ---- every collective against a naive computation */
static void check_reduce_ops(int r, dt_tensor *x) {
  double got[128], want[128];
  if (fetch(dt_all_reduce(x, DT_REDUCE_SUM, NULL), got, 32)) {
    for (int i = 0; i < 32; i++) {
      want[i] = 0;
      for (int q = 0; q < N; q++) want[i] += in_val(q, i / 8, i % 8);
    }
    expect_values("all_reduce", r, got, want, 32);
  }
  if (fetch(dt_all_reduce(x, DT_REDUCE_MAX, NULL), got, 32)) {
    for (int i = 0; i < 32; i++) want[i] = in_val(N - 1, i / 8, i % 8);
    expect_values("all_reduce max", r, got, want, 32);
  }
  /* reduce_scatter along dim 1: rank r keeps columns [2r, 2r + 2) */
  if (fetch(dt_reduce_scatter(x, DT_REDUCE_SUM, 1, NULL), got, 8)) {
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 2; j++) {
        want[i * 2 + j] = 0;
        for (int q = 0; q < N; q++) want[i * 2 + j] += in_val(q, i, 2 * r + j);
      }
    expect_values("reduce_scatter dim 1", r, got, want, 8);
  }
}

static void check_move_ops(int r, dt_tensor *x) {
  double got[128], want[128];
  if (fetch(dt_all_gather(x, 0, NULL), got, 128)) { /* [16, 8] */
    for (int i = 0; i < 128; i++) want[i] = in_val(i / 32, (i % 32) / 8, i % 8);
    expect_values("all_gather dim 0", r, got, want, 128);
  }
  if (fetch(dt_all_gather(x, 1, NULL), got, 128)) { /* [4, 32] */
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 32; j++) want[i * 32 + j] = in_val(j / 8, i, j % 8);
    expect_values("all_gather dim 1", r, got, want, 128);
  }
  /* split dim 1 (8 -> 2 per member), concat dim 0: [16, 2]; rows 4q.. come
   * from member q's columns [2r, 2r + 2) */
  if (fetch(dt_all_to_all(x, 1, 0, NULL), got, 32)) {
    for (int q = 0; q < N; q++)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) want[(q * 4 + i) * 2 + j] = in_val(q, i, 2 * r + j);
    expect_values("all_to_all", r, got, want, 32);
  }
  if (fetch(dt_broadcast(x, 2, NULL), got, 32)) {
    for (int i = 0; i < 32; i++) want[i] = in_val(2, i / 8, i % 8);
    expect_values("broadcast", r, got, want, 32);
  }
}

static void check_p2p(int r) {
  /* a ring: even ranks send first, odd ranks receive first */
  double v = r * 10.0 + 1, got = -1;
  dt_tensor *t = local64(&v, DT_SHAPE(1));
  int next = (r + 1) % N, prev = (r + N - 1) % N;
  dt_tensor *in = NULL;
  if (r % 2 == 0) {
    TU_CHECK(dt_send(t, next) == DT_OK, "%s", dt_last_error());
    in = dt_recv(prev, DT_SHAPE(1), DT_FLOAT64);
  } else {
    in = dt_recv(prev, DT_SHAPE(1), DT_FLOAT64);
    TU_CHECK(dt_send(t, next) == DT_OK, "%s", dt_last_error());
  }
  if (fetch(in, &got, 1))
    TU_CHECK(got == prev * 10.0 + 1, "rank %d got %g from %d", r, got, prev);
  dt_tensor_release(t);
}

static dt_status all_collectives(dt_spmd_ctx *c) {
  TU_CHECK(c->world_size == N && dt_spmd_rank() == c->rank, "ctx %d/%d",
           c->rank, c->world_size);
  dt_tensor *x = rank_input(c->rank);
  TU_CHECK(x != NULL, "%s", dt_last_error());
  if (!x) return dt_last_status();
  check_reduce_ops(c->rank, x);
  check_move_ops(c->rank, x);
  /* a non-contiguous input: the transpose [8, 4] gathered along dim 0 */
  dt_tensor *xt = dt_transpose(x, 0, 1);
  double got[128];
  if (fetch(dt_all_gather(xt, 0, NULL), got, 128))
    for (int q = 0; q < N; q++)
      for (int j = 0; j < 8; j++)
        for (int i = 0; i < 4; i++)
          TU_CHECK(got[(q * 8 + j) * 4 + i] == in_val(q, i, j), "transposed");
  dt_tensor_release(xt);
  TU_CHECK(dt_barrier(NULL) == DT_OK, "%s", dt_last_error());
  check_p2p(c->rank);
  dt_tensor_release(x);
  return DT_OK;
}

static void test_collectives(void **state) {
  (void)state;
  int64_t live = dt_live_tensors();
  assert_int_equal(dt_spmd_run(rt, all_collectives, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  assert_int_equal(dt_live_tensors(), live);
  for (int r = 0; r < N; r++) {
    dt_memory_stats ms;
    assert_int_equal(dt_runtime_memory(rt, r, &ms), DT_OK);
    assert_int_equal(ms.used, 0);
  }
}

/* ---- groups: mesh dims and rank lists */
static dt_status groups_fn(dt_spmd_ctx *c) {
  int r = c->rank, dp = r / 2, tp = r % 2;
  double v = 1 << r, got;
  dt_tensor *x = local64(&v, DT_SHAPE(1));
  /* along tp: ranks {2 dp, 2 dp + 1}; along dp: {tp, tp + 2} */
  if (fetch(dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.mesh = m22, .mesh_dim = 1}), &got, 1))
    TU_CHECK(got == (1 << (2 * dp)) + (1 << (2 * dp + 1)), "tp sum %g", got);
  if (fetch(dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.mesh = m22, .mesh_dim = 0}), &got, 1))
    TU_CHECK(got == (1 << tp) + (1 << (tp + 2)), "dp sum %g", got);
  if (fetch(dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.mesh = m22, .mesh_dim = -1}), &got, 1))
    TU_CHECK(got == 15, "mesh sum %g", got);
  if (r == 0 || r == 3) {
    int pair[] = {3, 0};
    if (fetch(dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.ranks = pair, .nranks = 2}), &got, 1))
      TU_CHECK(got == 9, "pair sum %g", got);
    /* broadcast from rank 3 within the pair (member 0) */
    if (fetch(dt_broadcast(x, 3, &(dt_group){.ranks = pair, .nranks = 2}), &got, 1))
      TU_CHECK(got == 8, "pair broadcast %g", got);
  }
  /* broadcast along tp from the rank with tp coordinate 1 of my row */
  if (fetch(dt_broadcast(x, 2 * dp + 1, &(dt_group){.mesh = m22, .mesh_dim = 1}), &got, 1))
    TU_CHECK(got == 1 << (2 * dp + 1), "tp broadcast %g", got);
  dt_tensor_release(x);
  return DT_OK;
}

static void test_groups(void **state) {
  (void)state;
  assert_int_equal(dt_spmd_run(rt, groups_fn, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
}

/* ---- a TP MLP (column- then row-parallel) and a DP step, each against
 * the controller run of the same program */
enum { B = 6, IN = 8, HID = 12, OUT = 5 };
static double xs[B * IN], w1[HID * IN], w2[OUT * HID];
static double tp_out[N][B * OUT], tp_dt_out[N][B * OUT];

/* rows [r * HID / N, ...) of w1 ([HID, IN]); columns of w2 ([OUT, HID]) */
static dt_status tp_fn(dt_spmd_ctx *c) {
  int r = c->rank, k = HID / N;
  double a[HID / N * IN], b[OUT * (HID / N)];
  memcpy(a, w1 + r * k * IN, sizeof a);
  for (int o = 0; o < OUT; o++)
    for (int j = 0; j < k; j++) b[o * k + j] = w2[o * HID + r * k + j];
  dt_tensor *x = local64(xs, DT_SHAPE(B, IN));
  dt_tensor *wa = local64(a, DT_SHAPE(HID / N, IN)), *wb = local64(b, DT_SHAPE(OUT, HID / N));
  /* plain locals and an explicit all_reduce */
  dt_tensor *h = dt_linear(x, wa, NULL), *g = dt_gelu(h), *yp = dt_linear(g, wb, NULL);
  fetch(dt_all_reduce(yp, DT_REDUCE_SUM, &(dt_group){.mesh = m4, .mesh_dim = 0}),
        tp_out[r], B * OUT);
  /* the same with DTensors: the shards claimed, the ops propagate */
  dt_tensor *X = dt_dtensor_from_local(x, m4, DT_PLACEMENTS(DT_REPLICATE));
  dt_tensor *A = dt_dtensor_from_local(wa, m4, DT_PLACEMENTS(DT_SHARD(0)));
  dt_tensor *Bw = dt_dtensor_from_local(wb, m4, DT_PLACEMENTS(DT_SHARD(1)));
  TU_CHECK(X && A && Bw, "%s", dt_last_error());
  dt_tensor *H0 = dt_linear(X, A, NULL), *H = dt_gelu(H0);
  dt_tensor *Y = dt_linear(H, Bw, NULL);
  TU_CHECK(Y && dt_tensor_placement(Y, 0).kind == DT_PLACEMENT_PARTIAL,
           "Y: %s", dt_last_error());
  dt_tensor *YR = dt_redistribute(Y, NULL, DT_PLACEMENTS(DT_REPLICATE));
  dt_shape gs = dt_tensor_shape(A);
  TU_CHECK(gs.ndim == 2 && gs.dims[0] == HID && gs.dims[1] == IN, "global shape");
  fetch(dt_dtensor_to_local(YR), tp_dt_out[r], B * OUT);
  dt_tensor *hs[] = {x, wa, wb, h, g, yp, X, A, Bw, H0, H, Y, YR};
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) dt_tensor_release(hs[i]);
  return DT_OK;
}

static void test_tp_mlp(void **state) {
  (void)state;
  for (int i = 0; i < B * IN; i++) xs[i] = sin(i * 0.37);
  for (int i = 0; i < HID * IN; i++) w1[i] = cos(i * 0.21) * 0.4;
  for (int i = 0; i < OUT * HID; i++) w2[i] = sin(i * 0.13 + 1) * 0.4;
  assert_int_equal(dt_spmd_run(rt, tp_fn, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
  /* the controller run: the same DTensors from the global values */
  dt_tensor_options o = {.dtype = DT_FLOAT64, .mesh = m4};
  dt_tensor *X = dt_from_host(xs, DT_SHAPE(B, IN), &o);
  o.placements = DT_PLACEMENTS(DT_SHARD(0));
  dt_tensor *A = dt_from_host(w1, DT_SHAPE(HID, IN), &o);
  o.placements = DT_PLACEMENTS(DT_SHARD(1));
  dt_tensor *Bw = dt_from_host(w2, DT_SHAPE(OUT, HID), &o);
  dt_tensor *h = dt_linear(X, A, NULL), *g = dt_gelu(h), *Y = dt_linear(g, Bw, NULL);
  double *want = tu_values(Y);
  for (int r = 0; r < N; r++)
    for (int i = 0; i < B * OUT; i++) {
      /* the same shards, the same kernels, the same reduction order */
      assert_true(tp_out[r][i] == want[i]);
      assert_true(tp_dt_out[r][i] == want[i]);
    }
  /* and an independent double loop, to a tolerance */
  for (int b = 0; b < B; b++)
    for (int o2 = 0; o2 < OUT; o2++) {
      double y = 0;
      for (int j = 0; j < HID; j++) {
        double s = 0;
        for (int i = 0; i < IN; i++) s += xs[b * IN + i] * w1[j * IN + i];
        y += 0.5 * s * (1 + erf(s / sqrt(2))) * w2[o2 * HID + j];
      }
      assert_true(fabs(want[b * OUT + o2] - y) < 1e-12);
    }
  free(want);
  dt_tensor *ts[] = {X, A, Bw, h, g, Y};
  for (size_t i = 0; i < 6; i++) dt_tensor_release(ts[i]);
}

/* DP: each rank's batch rows, the gradient of sum((x w^T)^2) over them,
 * averaged over the ranks */
static double dp_grad[N][OUT * IN];

static dt_status dp_fn(dt_spmd_ctx *c) {
  int r = c->rank, rows = 8 / N;
  double xv[8 * IN];
  for (int i = 0; i < 8 * IN; i++) xv[i] = cos(i * 0.11);
  dt_tensor *x = local64(xv + r * rows * IN, DT_SHAPE(rows, IN));
  dt_tensor *w = dt_from_host(w1, DT_SHAPE(OUT, IN),
                              &(dt_tensor_options){.dtype = DT_FLOAT64,
                                                   .requires_grad = true});
  dt_tensor *y = dt_linear(x, w, NULL), *y2 = dt_mul(y, y);
  dt_tensor *l = dt_sum(y2, NULL, 0, false);
  TU_CHECK(dt_backward(l) == DT_OK, "%s", dt_last_error());
  dt_tensor *gw = dt_grad(w);
  fetch(dt_all_reduce(gw, DT_REDUCE_AVG, NULL), dp_grad[r], OUT * IN);
  dt_tensor *ts[] = {x, w, y, y2, l, gw};
  for (size_t i = 0; i < 6; i++) dt_tensor_release(ts[i]);
  return DT_OK;
}

static void test_dp_step(void **state) {
  (void)state;
  assert_int_equal(dt_spmd_run(rt, dp_fn, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
  double xv[8 * IN];
  for (int i = 0; i < 8 * IN; i++) xv[i] = cos(i * 0.11);
  for (int o = 0; o < OUT; o++)
    for (int i = 0; i < IN; i++) { /* d/dw sum(y^2) = 2 y^T x, averaged */
      double g = 0;
      for (int b = 0; b < 8; b++) {
        double y = 0;
        for (int k = 0; k < IN; k++) y += xv[b * IN + k] * w1[o * IN + k];
        g += 2 * y * xv[b * IN + i];
      }
      for (int r = 0; r < N; r++)
        assert_true(fabs(dp_grad[r][o * IN + i] - g / N) < 1e-12 * (1 + fabs(g)));
    }
}

/* ---- desyncs: each kind named with both call sites */
static int variant, line_a, line_b;
static dt_status st_of[N];
static char msg_of[N][1024];

static dt_tensor *odd_call(dt_tensor *x, int r) {
  double v = 1;
  dt_tensor *f = NULL, *y;
  switch (variant) {
  case 0: line_b = __LINE__; return dt_all_gather(x, 0, NULL);            /* kind */
  case 1: f = dt_cast(x, DT_FLOAT32);                                      /* dtype */
    line_b = __LINE__; y = dt_all_reduce(f, DT_REDUCE_SUM, NULL);
    dt_tensor_release(f);
    return y;
  case 2: f = dt_from_host(&v, DT_SHAPE(1), &(dt_tensor_options){.dtype = DT_FLOAT64}); /* count */
    line_b = __LINE__; y = dt_all_reduce(f, DT_REDUCE_SUM, NULL);
    dt_tensor_release(f);
    return y;
  default: line_b = __LINE__; return dt_all_reduce(x, DT_REDUCE_MAX, NULL); /* op */
  }
  (void)r;
}

static dt_status desync_fn(dt_spmd_ctx *c) {
  double v[4] = {1, 2, 3, 4};
  dt_tensor *x = local64(v, DT_SHAPE(4)), *y;
  if (c->rank == 3) y = odd_call(x, c->rank);
  else { y = dt_all_reduce(x, DT_REDUCE_SUM, NULL); if (!c->rank) line_a = __LINE__; }
  st_of[c->rank] = y ? DT_OK : dt_last_status();
  snprintf(msg_of[c->rank], sizeof msg_of[c->rank], "%s", y ? "" : dt_last_error());
  dt_tensor_release(y);
  dt_tensor_release(x);
  return st_of[c->rank];
}

static void expect_in(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("\"%s\" not in: %s", part, msg);
}

static void test_desync_kinds(void **state) {
  (void)state;
  static const char *const what[] = {"all_gather(float64[16] in blocks)",
                                     "all_reduce(float32[4], sum)",
                                     "all_reduce(float64[1], sum)",
                                     "all_reduce(float64[4], max)"};
  for (variant = 0; variant < 4; variant++) {
    dt_status st = dt_spmd_run(rt, desync_fn, NULL);
    assert_int_equal(st, DT_ERR_DESYNC);
    expect_in(dt_last_error(), "dt_spmd_run: rank 0 failed (4 of 4 ranks failed)");
    char a[160], b[160];
    snprintf(a, sizeof a, "ranks 0, 1, 2 called all_reduce(float64[4], sum) at test_spmd.c:%d", line_a);
    snprintf(b, sizeof b, "rank 3 called %s at test_spmd.c:%d", what[variant], line_b);
    for (int r = 0; r < N; r++) {
      assert_int_equal(st_of[r], DT_ERR_DESYNC);
      expect_in(msg_of[r], "members disagree");
      expect_in(msg_of[r], a);
      expect_in(msg_of[r], b);
    }
  }
  /* the group still works afterwards */
  assert_int_equal(dt_spmd_run(rt, groups_fn, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
}

/* a DTensor redistribute that disagrees: its collectives carry the
 * caller's site (dt_call_site, as python/dtorch passes the program's
 * line), and the redistribute itself fails (no poisoned result) */
static dt_status redist_desync_fn(dt_spmd_ctx *c) {
  double v[8] = {0};
  dt_tensor *x = local64(v, DT_SHAPE(2, 4));
  dt_tensor *d = dt_dtensor_from_local(x, m4, DT_PLACEMENTS(DT_SHARD(0)));
  dt_tensor *y;
  if (c->rank == 3) {
    dt_call_site("train.py", 12);
    y = dt_redistribute(d, NULL, DT_PLACEMENTS(DT_SHARD(1)));
  } else {
    dt_call_site("train.py", 14);
    y = dt_redistribute(d, NULL, DT_PLACEMENTS(DT_REPLICATE));
  }
  st_of[c->rank] = y ? DT_OK : dt_last_status();
  snprintf(msg_of[c->rank], sizeof msg_of[c->rank], "%s", y ? "" : dt_last_error());
  dt_tensor *ts[] = {x, d, y};
  for (size_t i = 0; i < 3; i++) dt_tensor_release(ts[i]);
  return st_of[c->rank];
}

static void test_desync_redistribute(void **state) {
  (void)state;
  assert_int_equal(dt_spmd_run(rt, redist_desync_fn, NULL), DT_ERR_DESYNC);
  for (int r = 0; r < N; r++) {
    assert_int_equal(st_of[r], DT_ERR_DESYNC);
    expect_in(msg_of[r], "ranks 0, 1, 2 called all_gather(float64[32] in blocks) at "
                         "train.py:14");
    expect_in(msg_of[r], "rank 3 called all_to_all(");
    expect_in(msg_of[r], ") at train.py:12");
  }
  assert_int_equal(dt_spmd_run(rt, groups_fn, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
}

/* different groups: rank 3 calls on [2, 3] while 0-2 call on the world;
 * ranks 2 and 3 then wait for each other: a deadlock, named at once */
static int line_c, line_d;
static dt_status group_desync_fn(dt_spmd_ctx *c) {
  double v[4] = {1, 2, 3, 4};
  dt_tensor *x = local64(v, DT_SHAPE(4)), *y;
  int pair[] = {2, 3};
  if (c->rank == 3) {
    y = dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.ranks = pair, .nranks = 2}); line_d = __LINE__;
  } else {
    y = dt_all_reduce(x, DT_REDUCE_SUM, NULL); if (!c->rank) line_c = __LINE__;
  }
  st_of[c->rank] = y ? DT_OK : dt_last_status();
  snprintf(msg_of[c->rank], sizeof msg_of[c->rank], "%s", y ? "" : dt_last_error());
  dt_tensor_release(y);
  dt_tensor_release(x);
  return st_of[c->rank];
}

static void test_desync_group(void **state) {
  (void)state;
  int64_t t0 = tu_now_ns();
  assert_int_equal(dt_spmd_run(rt, group_desync_fn, NULL), DT_ERR_DESYNC);
  assert_true(tu_now_ns() - t0 < (int64_t)5e9); /* not the 20 s watchdog */
  char a[160], b[160];
  snprintf(a, sizeof a, "rank 2 waits in all_reduce(float64[4], sum) at test_spmd.c:%d "
           "on group [0, 1, 2, 3]", line_c);
  snprintf(b, sizeof b, "rank 3 waits in all_reduce(float64[4], sum) at test_spmd.c:%d "
           "on group [2, 3]", line_d);
  for (int r = 0; r < N; r++) {
    assert_int_equal(st_of[r], DT_ERR_DESYNC);
    expect_in(msg_of[r], "collectives deadlocked");
    expect_in(msg_of[r], a);
    expect_in(msg_of[r], b);
  }
  assert_int_equal(dt_spmd_run(rt, all_collectives, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
}

/* a rank busy outside any collective past the watchdog: the others' report
 * says where it is */
static dt_status stuck_fn(dt_spmd_ctx *c) {
  double v = 1;
  dt_tensor *x = local64(&v, DT_SHAPE(1));
  if (c->rank == 2) tu_sleep_ns(400 * 1000 * 1000);
  dt_tensor *y = dt_all_reduce(x, DT_REDUCE_SUM, NULL);
  st_of[c->rank] = y ? DT_OK : dt_last_status();
  snprintf(msg_of[c->rank], sizeof msg_of[c->rank], "%s", y ? "" : dt_last_error());
  dt_tensor_release(y);
  dt_tensor_release(x);
  return DT_OK;
}

static void test_watchdog_names_stuck_rank(void **state) {
  (void)state;
  dt_runtime *w = dt_runtime_create(&(dt_runtime_options){.num_ranks = 3,
                                                          .collective_timeout_ms = 100});
  assert_non_null(w);
  assert_int_equal(dt_spmd_run(w, stuck_fn, NULL), DT_OK);
  for (int r = 0; r < 2; r++) {
    if (st_of[r] != DT_ERR_TIMEOUT) fail_msg("rank %d: %s", r, msg_of[r]);
    expect_in(msg_of[r], "missing: rank 2; rank 2 is in its SPMD function");
  }
  /* the late rank: its peers gave up and left */
  assert_int_equal(st_of[2], DT_ERR_DESYNC);
  expect_in(msg_of[2], "left its SPMD function");
  dt_runtime_destroy(w);
}

/* ---- a rank that fails, or returns early, while the others wait */
static dt_status early_fn(dt_spmd_ctx *c) {
  double v = 1;
  dt_tensor *x = local64(&v, DT_SHAPE(1));
  dt_status st = DT_OK;
  if (c->rank == 1) {
    if (variant == 0) { /* fails: a shape error of its own */
      dt_tensor *bad = dt_view(x, DT_SHAPE(3));
      st = bad ? DT_OK : dt_last_status();
      snprintf(msg_of[1], sizeof msg_of[1], "%s", dt_last_error());
    }
    dt_tensor_release(x);
    return st; /* variant 1: returns DT_OK without the all_reduce */
  }
  dt_tensor *y = dt_all_reduce(x, DT_REDUCE_SUM, NULL);
  st_of[c->rank] = y ? DT_OK : dt_last_status();
  snprintf(msg_of[c->rank], sizeof msg_of[c->rank], "%s", y ? "" : dt_last_error());
  /* a later call fails at once too */
  dt_tensor *z = y ? NULL : dt_all_reduce(x, DT_REDUCE_SUM, NULL);
  TU_CHECK(!z && dt_last_status() == DT_ERR_DESYNC, "second call: %s", dt_last_error());
  dt_tensor_release(y);
  dt_tensor_release(x);
  return DT_OK;
}

static void test_rank_leaves(void **state) {
  (void)state;
  for (variant = 0; variant < 2; variant++) {
    int64_t t0 = tu_now_ns();
    dt_status st = dt_spmd_run(rt, early_fn, NULL);
    assert_true(tu_now_ns() - t0 < (int64_t)5e9); /* not the 20 s watchdog */
    if (variant == 0) {
      assert_int_equal(st, DT_ERR_SHAPE);
      expect_in(dt_last_error(), "rank 1 failed (1 of 4 ranks failed)");
      expect_in(dt_last_error(), msg_of[1]);
    } else {
      assert_int_equal(st, DT_OK);
    }
    for (int r = 0; r < N; r++) {
      if (r == 1) continue;
      assert_int_equal(st_of[r], DT_ERR_DESYNC);
      expect_in(msg_of[r], variant == 0 ? "rank 1 left its SPMD function (it failed: DT_ERR_SHAPE"
                                        : "rank 1 left its SPMD function (it returned DT_OK)");
    }
    assert_int_equal(tu_thread_failures_take(), 0);
  }
  /* the runtime works on: SPMD collectives and controller redistributes */
  assert_int_equal(dt_spmd_run(rt, all_collectives, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
  dt_tensor *p = dt_ones(DT_SHAPE(4), &(dt_tensor_options){.mesh = m4,
      .placements = DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM))});
  dt_tensor *q = dt_redistribute(p, NULL, DT_PLACEMENTS(DT_REPLICATE));
  double *v = tu_values(q);
  for (int i = 0; i < 4; i++) assert_true(v[i] == 1);
  free(v);
  dt_tensor_release(p);
  dt_tensor_release(q);
}

/* ---- random factories: equal on every rank, and the stream moves on */
static double rnd[N][6];

static dt_status random_fn(dt_spmd_ctx *c) {
  dt_tensor *t = dt_randn(DT_SHAPE(6), &(dt_tensor_options){.dtype = DT_FLOAT64});
  fetch(t, rnd[c->rank], 6);
  return DT_OK;
}

static void test_random(void **state) {
  (void)state;
  dt_manual_seed(7);
  assert_int_equal(dt_spmd_run(rt, random_fn, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
  /* what the controller draws from the same seed */
  dt_manual_seed(7);
  dt_tensor *t = dt_randn(DT_SHAPE(6), &(dt_tensor_options){.dtype = DT_FLOAT64});
  double *want = tu_values(t);
  dt_tensor *next = dt_randn(DT_SHAPE(6), &(dt_tensor_options){.dtype = DT_FLOAT64});
  double *after = tu_values(next);
  for (int r = 0; r < N; r++)
    for (int i = 0; i < 6; i++) assert_true(rnd[r][i] == want[i]);
  /* after an SPMD run the process stream continues past what ranks drew */
  dt_manual_seed(7);
  assert_int_equal(dt_spmd_run(rt, random_fn, NULL), DT_OK);
  dt_tensor *t2 = dt_randn(DT_SHAPE(6), &(dt_tensor_options){.dtype = DT_FLOAT64});
  double *v2 = tu_values(t2);
  for (int i = 0; i < 6; i++) assert_true(v2[i] == after[i]);
  free(want);
  free(after);
  free(v2);
  dt_tensor_release(t);
  dt_tensor_release(next);
  dt_tensor_release(t2);
}

/* ---- autograd through from_local / to_local (PyTorch's backwards): each
 * rank's rows x_r of X, made a Shard(0) DTensor, gathered to Replicate,
 * taken back as the full local L; loss = sum(L * L * c) on every rank,
 * so d loss / d x_r = 2 * c * x_r on rank r's rows */
#define GR 2
static double grad_x[N][GR * 3];
static char grad_fns[N][2][16];

static double gx(int i) { return sin(i * 0.37) + 0.5; }
static double gc(int i) { return cos(i * 0.21); }

static dt_status local_grad_fn(dt_spmd_ctx *c) {
  int r = c->rank;
  double xv[GR * 3], cv[N * GR * 3];
  for (int i = 0; i < GR * 3; i++) xv[i] = gx(r * GR * 3 + i);
  for (int i = 0; i < N * GR * 3; i++) cv[i] = gc(i);
  dt_tensor *x = dt_from_host(xv, DT_SHAPE(GR, 3), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .requires_grad = true});
  dt_tensor *k = local64(cv, DT_SHAPE(N * GR, 3));
  dt_tensor *d = dt_dtensor_from_local(x, m4, DT_PLACEMENTS(DT_SHARD(0)));
  dt_tensor *rep = dt_redistribute(d, NULL, DT_PLACEMENTS(DT_REPLICATE));
  dt_tensor *l = dt_dtensor_to_local(rep);
  TU_CHECK(l != NULL, "%s", dt_last_error());
  snprintf(grad_fns[r][0], 16, "%s", d ? dt_tensor_grad_fn(d) : "?");
  snprintf(grad_fns[r][1], 16, "%s", l ? dt_tensor_grad_fn(l) : "?");
  dt_tensor *sq = dt_mul(l, l), *w = dt_mul(sq, k);
  dt_tensor *loss = dt_sum(w, NULL, 0, false);
  TU_CHECK(dt_backward(loss) == DT_OK, "%s", dt_last_error());
  fetch(dt_grad(x), grad_x[r], GR * 3);
  dt_tensor *ts[] = {x, k, d, rep, l, sq, w, loss};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) dt_tensor_release(ts[i]);
  return DT_OK;
}

static void test_local_grads(void **state) {
  (void)state;
  int64_t live = dt_autograd_live_nodes();
  assert_int_equal(dt_spmd_run(rt, local_grad_fn, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
  for (int r = 0; r < N; r++) {
    assert_string_equal(grad_fns[r][0], "from_local");
    assert_string_equal(grad_fns[r][1], "to_local");
    for (int i = 0; i < GR * 3; i++) {
      int g = r * GR * 3 + i;
      assert_true(fabs(grad_x[r][i] - 2 * gc(g) * gx(g)) < 1e-12);
    }
  }
  assert_int_equal(dt_autograd_live_nodes(), live); /* nothing leaks */
}

/* ---- bad calls */
static dt_status misuse_fn(dt_spmd_ctx *c) {
  double v[6] = {0};
  dt_tensor *x = local64(v, DT_SHAPE(6));
  dt_tensor *other = dt_from_host(v, DT_SHAPE(6), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .device = c->rank ? tu_dev(0) : tu_dev(1)});
  TU_CHECK(!other && dt_last_status() == DT_ERR_DEVICE &&
           strstr(dt_last_error(), "SPMD function used rank"), "%s", dt_last_error());
  TU_CHECK(!dt_reduce_scatter(x, DT_REDUCE_SUM, 0, NULL) &&
           dt_last_status() == DT_ERR_SHAPE, "%s", dt_last_error());
  TU_CHECK(!dt_all_gather(x, 3, NULL) && dt_last_status() == DT_ERR_INVALID_ARGUMENT,
           "%s", dt_last_error());
  int pair[] = {(c->rank + 1) % N, (c->rank + 2) % N};
  TU_CHECK(!dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.ranks = pair, .nranks = 2}) &&
           strstr(dt_last_error(), "is not in group.ranks"), "%s", dt_last_error());
  TU_CHECK(dt_spmd_run(rt, misuse_fn, NULL) == DT_ERR_INVALID_ARGUMENT &&
           strstr(dt_last_error(), "do not nest"), "%s", dt_last_error());
  /* a shard that is not this rank's part of the claimed global shape */
  TU_CHECK(!dt_dtensor_from_local_shape(x, m4, DT_PLACEMENTS(DT_SHARD(0)), DT_SHAPE(4)) &&
           dt_last_status() == DT_ERR_SHAPE, "%s", dt_last_error());
  TU_CHECK(dt_runtime_synchronize(rt) == DT_OK, "%s", dt_last_error());
  dt_tensor_release(x);
  return DT_OK;
}

static void test_misuse(void **state) {
  (void)state;
  double v = 1;
  dt_tensor *x = dt_from_host(&v, DT_SHAPE(1), NULL);
  assert_null(dt_all_reduce(x, DT_REDUCE_SUM, NULL));
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  expect_in(dt_last_error(), "dt_all_reduce: called outside an SPMD function");
  assert_null(dt_dtensor_to_local(x));
  assert_int_equal(dt_spmd_run(NULL, misuse_fn, NULL), DT_ERR_INVALID_ARGUMENT);
  assert_int_equal(dt_spmd_run(rt, NULL, NULL), DT_ERR_INVALID_ARGUMENT);
  assert_int_equal(dt_spmd_run(rt, misuse_fn, NULL), DT_OK);
  assert_int_equal(tu_thread_failures_take(), 0);
  assert_int_equal(dt_spmd_rank(), -1);
  dt_tensor_release(x);
}

/* ---- several issuing threads: SPMD runs take turns with controller ops */
static void issuer(void *arg, int i) {
  (void)arg;
  for (int k = 0; k < 5; k++) {
    if (i % 2 == 0) {
      TU_CHECK(dt_spmd_run(rt, groups_fn, NULL) == DT_OK, "%s", dt_last_error());
    } else {
      dt_tensor *p = dt_full(DT_SHAPE(8), 2, &(dt_tensor_options){.mesh = m22,
          .placements = DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM), DT_SHARD(0))});
      dt_tensor *q = dt_redistribute(p, NULL, DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE));
      float v[8];
      TU_CHECK(dt_to_host(q, v, sizeof v) == DT_OK && v[7] == 2, "%s: %g", dt_last_error(), v[7]);
      dt_tensor_release(p);
      dt_tensor_release(q);
    }
  }
}

static void test_threads(void **state) {
  (void)state;
  tu_run_threads(4, issuer, NULL);
  assert_int_equal(tu_thread_failures_take(), 0);
}

/* from a future callback (dtorch's completion thread, not a rank's): an
 * SPMD run with collectives, as a server's completion handler would */
static _Atomic int cb_status = -1;
static void run_in_callback(dt_future *f, dt_status st, void *user) {
  (void)f;
  (void)user;
  atomic_store(&cb_status, st == DT_OK ? (int)dt_spmd_run(rt, groups_fn, NULL) : (int)st);
}

static void test_from_callback(void **state) {
  (void)state;
  for (int k = 0; k < 3; k++) {
    atomic_store(&cb_status, -1);
    dt_tensor *slow = dt_ones(DT_SHAPE(1 << 16), &(dt_tensor_options){.device = tu_dev(1)});
    dt_future *ev = dt_event_record(rt, 1);
    assert_non_null(ev);
    assert_int_equal(dt_future_then(ev, run_in_callback, NULL), DT_OK);
    int64_t t0 = tu_now_ns();
    while (atomic_load(&cb_status) < 0 && tu_now_ns() - t0 < (int64_t)10e9)
      tu_sleep_ns(100000);
    assert_int_equal(atomic_load(&cb_status), DT_OK);
    assert_int_equal(tu_thread_failures_take(), 0);
    dt_future_release(ev);
    dt_tensor_release(slow);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_collectives), cmocka_unit_test(test_groups),
    cmocka_unit_test(test_tp_mlp),      cmocka_unit_test(test_dp_step),
    cmocka_unit_test(test_desync_kinds), cmocka_unit_test(test_desync_group),
    cmocka_unit_test(test_desync_redistribute),
    cmocka_unit_test(test_watchdog_names_stuck_rank),
    cmocka_unit_test(test_rank_leaves),
    cmocka_unit_test(test_random),      cmocka_unit_test(test_local_grads),
    cmocka_unit_test(test_misuse),
    cmocka_unit_test(test_threads),     cmocka_unit_test(test_from_callback),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
