/* Sharding propagation beyond the property sweep (test_sharding_props.c):
 * the per-thread cache (hits, static and deciding arguments, stale meshes,
 * eviction, eight issuing threads and a future callback each with their
 * own cache), strict-mode messages word for word, auto mode from the
 * environment, and a small DP x TP forward pass against the single-device
 * run computed by a naive double loop. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"

static dt_runtime *rt4;
static dt_mesh *tp4, *grid;

static int setup(void **state) {
  (void)state;
  dt_runtime_options o = {.num_ranks = 4};
  rt4 = dt_runtime_create(&o);
  const char *tp[] = {"tp"}, *dptp[] = {"dp", "tp"};
  tp4 = dt_mesh_init(rt4, NULL, DT_SHAPE(4), tp);
  grid = dt_mesh_init(rt4, NULL, DT_SHAPE(2, 2), dptp);
  return rt4 && tp4 && grid ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  dt_mesh_release(tp4);
  dt_mesh_release(grid);
  dt_runtime_destroy(rt4);
  return 0;
}

static dt_tensor *dfull(dt_mesh *m, dt_shape s, const dt_placement *pl, double v) {
  dt_tensor_options o = {.dtype = DT_FLOAT32, .mesh = m, .placements = pl};
  dt_tensor *t = dt_full(s, v, &o);
  if (!t) fail_msg("dt_full: %s", dt_last_error());
  return t;
}

static void expect_stats(int64_t hits, int64_t misses, const char *what) {
  dt_cache_stats s = dt_sharding_cache_stats();
  if (s.hits != hits || s.misses != misses)
    fail_msg("%s: hits %lld misses %lld, want %lld and %lld", what,
             (long long)s.hits, (long long)s.misses, (long long)hits,
             (long long)misses);
}

/* ---- the cache */
static void test_cache_hits_and_keys(void **state) {
  (void)state;
  dt_sharding_cache_clear();
  dt_tensor *a = dfull(tp4, DT_SHAPE(8, 4), DT_PLACEMENTS(DT_SHARD(0)), 1);
  dt_tensor *b = dfull(tp4, DT_SHAPE(8, 4), DT_PLACEMENTS(DT_SHARD(0)), 2);
  dt_tensor *r[12];
  int n = 0;
  r[n++] = dt_add(a, b);
  expect_stats(0, 1, "first add");
  r[n++] = dt_add(b, a); /* other tensors, the same specs */
  expect_stats(1, 1, "second add");
  r[n++] = dt_add_scalar(a, 1.0);
  r[n++] = dt_add_scalar(a, 2.0); /* the scalar does not decide sharding */
  expect_stats(2, 2, "add_scalar with another scalar");
  r[n++] = dt_sum(a, (const int[]){0}, 1, false);
  r[n++] = dt_sum(a, (const int[]){1}, 1, false); /* dims do */
  expect_stats(2, 4, "sum over another dim");
  r[n++] = dt_sum(a, (const int[]){1}, 1, true); /* and keepdim */
  expect_stats(2, 5, "sum with keepdim");
  dt_tensor *c = dfull(tp4, DT_SHAPE(8, 4), DT_PLACEMENTS(DT_REPLICATE), 3);
  r[n++] = dt_add(a, c); /* other placements */
  expect_stats(2, 6, "add with a Replicate input");
  r[n++] = dt_layer_norm(a, NULL, NULL, 1e-5);
  r[n++] = dt_layer_norm(a, NULL, NULL, 1e-3); /* eps does not decide */
  expect_stats(3, 7, "layer_norm with another eps");
  dt_cache_stats s = dt_sharding_cache_stats();
  assert_int_equal(s.entries, 7);
  for (int i = 0; i < n; i++) {
    if (!r[i]) fail_msg("op %d failed: %s", i, dt_last_error());
    dt_tensor_release(r[i]);
  }
  float v[32];
  dt_tensor *sum = dt_add(a, b);
  assert_int_equal(dt_to_host(sum, v, sizeof v), DT_OK);
  for (int i = 0; i < 32; i++) assert_true(v[i] == 3.0f);
  dt_tensor_release(sum);
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_tensor_release(c);
  dt_sharding_cache_clear();
  s = dt_sharding_cache_stats();
  assert_true(s.hits == 0 && s.misses == 0 && s.entries == 0);
}

/* a mesh made after another was destroyed never matches the old entries */
static void test_cache_stale_mesh(void **state) {
  (void)state;
  dt_sharding_cache_clear();
  for (int round = 0; round < 2; round++) {
    dt_mesh *m = dt_mesh_init(rt4, NULL, DT_SHAPE(4), NULL);
    dt_tensor *a = dfull(m, DT_SHAPE(4), DT_PLACEMENTS(DT_SHARD(0)), round);
    dt_tensor *r = dt_relu(a);
    float v[4];
    assert_int_equal(dt_to_host(r, v, sizeof v), DT_OK);
    assert_true(v[3] == (float)round);
    dt_tensor_release(r);
    dt_tensor_release(a);
    dt_mesh_release(m);
  }
  expect_stats(0, 2, "the same op on a new mesh");
}

static void test_cache_eviction(void **state) {
  (void)state;
  dt_sharding_cache_clear();
  int64_t n = 4200; /* more shapes than the 4,096 entries */
  for (int64_t k = 1; k <= n; k++) {
    dt_tensor *a = dfull(tp4, DT_SHAPE(k), DT_PLACEMENTS(DT_REPLICATE), 1);
    dt_tensor *r = dt_neg(a);
    if (!r) fail_msg("neg [%lld]: %s", (long long)k, dt_last_error());
    dt_tensor_release(r);
    dt_tensor_release(a);
  }
  dt_cache_stats s = dt_sharding_cache_stats();
  assert_int_equal(s.misses, n);
  assert_true(s.entries <= 4096);
  assert_int_equal(dt_sharding_cache_evictions(), n - s.entries);
  dt_sharding_cache_clear();
}

/* eight issuing threads at once: each has its own cache and its own
 * counts, and every result is right */
static void client(void *arg, int i) {
  (void)arg;
  dt_sharding_cache_clear();
  dt_tensor *a = dfull(grid, DT_SHAPE(4, 6), DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE), i);
  dt_tensor *w = dfull(grid, DT_SHAPE(6, 4), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1)), 0.5);
  for (int k = 0; k < 20; k++) {
    dt_tensor *y = dt_matmul(a, w);
    TU_CHECK(y != NULL, "thread %d: %s", i, dt_last_error());
    float v[16];
    TU_CHECK(dt_to_host(y, v, sizeof v) == DT_OK, "thread %d fetch", i);
    for (int e = 0; e < 16; e++)
      TU_CHECK(v[e] == 3.0f * (float)i, "thread %d: %g", i, (double)v[e]);
    dt_tensor_release(y);
  }
  dt_cache_stats s = dt_sharding_cache_stats();
  TU_CHECK(s.hits == 19 && s.misses == 1 && s.entries == 1,
           "thread %d: hits %lld misses %lld", i, (long long)s.hits, (long long)s.misses);
  TU_CHECK(dt_sharding_cache_evictions() == 0, "thread %d: evictions", i);
  dt_sharding_cache_clear(); /* this thread's only */
  s = dt_sharding_cache_stats();
  TU_CHECK(s.hits == 0 && s.entries == 0, "thread %d: clear", i);
  dt_tensor_release(a);
  dt_tensor_release(w);
}

typedef struct cb_state { dt_tensor *a; _Atomic int done; int ok; } cb_state;
static void on_ready(dt_future *f, dt_status st, void *user) {
  (void)f;
  cb_state *s = user;
  dt_tensor *y = st == DT_OK ? dt_mul(s->a, s->a) : NULL;
  float v[8];
  dt_cache_stats c = dt_sharding_cache_stats(); /* the callback thread's own */
  s->ok = y && dt_to_host(y, v, sizeof v) == DT_OK && v[7] == 4.0f && c.misses >= 1 &&
          dt_sharding_cache_evictions() == 0;
  dt_sharding_cache_clear();
  s->ok = s->ok && dt_sharding_cache_stats().entries == 0;
  dt_tensor_release(y);
  atomic_store(&s->done, 1);
}

static void test_cache_per_thread(void **state) {
  (void)state;
  tu_run_threads(8, client, NULL);
  assert_int_equal(tu_thread_failures_take(), 0);
  cb_state s = {.a = dfull(tp4, DT_SHAPE(8), DT_PLACEMENTS(DT_SHARD(0)), 2)};
  float host[8];
  dt_future *f = dt_to_host_async(s.a, host, sizeof host);
  assert_non_null(f);
  assert_int_equal(dt_future_then(f, on_ready, &s), DT_OK);
  while (!atomic_load(&s.done)) tu_sleep_ns(100000);
  assert_true(s.ok);
  dt_future_release(f);
  dt_tensor_release(s.a);
}

/* ---- strict mode's words and auto mode */
static void test_strict_messages(void **state) {
  (void)state;
  dt_tensor *x = dfull(tp4, DT_SHAPE(8, 16), DT_PLACEMENTS(DT_SHARD(1)), 1);
  tu_expect_error(dt_softmax(x, 1), DT_ERR_PLACEMENT,
                  "dt_softmax: input placements [S(1)] on mesh (tp=4) are not "
                  "supported by softmax without communication; legal: [R], "
                  "[S(0)]; cheapest fix: redistribute input 0 to [S(0)] "
                  "(all_to_all, 512 B); or enable auto_redistribute", NULL);
  dt_tensor *w = dfull(tp4, DT_SHAPE(16, 4), DT_PLACEMENTS(DT_SHARD(1)), 1);
  tu_expect_error(dt_matmul(x, w), DT_ERR_PLACEMENT,
                  "dt_matmul: input placements [S(1)] and [S(1)] on mesh (tp=4)",
                  "legal: ([R], [R]), ([S(0)], [R]), ([R], [S(1)]), ([S(1)], "
                  "[S(0)]),", "cheapest fix: redistribute input 1 to [S(0)] "
                  "(all_to_all, 256 B)", NULL);
  dt_tensor *g = dfull(grid, DT_SHAPE(4, 4), DT_PLACEMENTS(DT_SHARD(0), DT_PARTIAL(DT_REDUCE_SUM)), 1);
  tu_expect_error(dt_relu(g), DT_ERR_PLACEMENT,
                  "dt_relu: input placements [S(0), P(sum)] on mesh (dp=2, "
                  "tp=2) are not supported by relu without communication; "
                  "legal on mesh dim 1: [R], [S(0)], [S(1)], [P(max)], "
                  "[P(min)]; cheapest fix: redistribute input 0 to [S(0), "
                  "S(0)] (reduce_scatter", NULL);
  dt_tensor_release(x);
  dt_tensor_release(w);
  dt_tensor_release(g);
}

/* A mesh dim of one rank moves no data: strict mode runs what needs a
 * redistribution only there (S -> R, P -> R on a 1-rank mesh, or on the
 * size-1 dim of a 4 x 1 mesh) with no collective, and the values equal
 * a naive double loop. Where another dim does communicate, the refusal
 * names that fix (never an empty one). */
static void expect_softmax(dt_tensor *y, const double *v, int n, const char *what) {
  if (!y) fail_msg("%s: %s", what, dt_last_error());
  double mx = -INFINITY, z = 0;
  for (int i = 0; i < n; i++) mx = fmax(mx, v[i]);
  for (int i = 0; i < n; i++) z += exp(v[i] - mx);
  float got[16];
  assert_int_equal(dt_to_host(y, got, sizeof(float) * (size_t)n), DT_OK);
  for (int i = 0; i < n; i++)
    if (!(fabs(got[i] - exp(v[i] - mx) / z) < 1e-6))
      fail_msg("%s: element %d is %g, want %g", what, i, got[i], exp(v[i] - mx) / z);
  dt_tensor_release(y);
}

static void test_strict_one_rank_dims(void **state) {
  (void)state;
  dt_mesh *one = dt_mesh_init(rt4, NULL, DT_SHAPE(1), NULL);
  dt_mesh *tall = dt_mesh_init(rt4, NULL, DT_SHAPE(4, 1), NULL);
  assert_true(one && tall);
  const double v[8] = {3, 1, 4, 1, 5, 9, 2, 6};
  float raw[8];
  for (int i = 0; i < 8; i++) raw[i] = (float)v[i];
  dt_tensor_options os = {.mesh = one, .placements = DT_PLACEMENTS(DT_SHARD(0))};
  dt_tensor_options op = {.mesh = one, .placements = DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM))};
  dt_tensor_options ot = {.mesh = tall, .placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0))};
  dt_tensor *a = dt_from_host(raw, DT_SHAPE(8), &os);
  dt_tensor *p = dt_from_host(raw, DT_SHAPE(8), &op);
  dt_tensor *t = dt_from_host(raw, DT_SHAPE(8), &ot);
  assert_true(a && p && t);
  dt_comm_count_begin();
  dt_tensor *am = dt_argmax(a, NULL, 0, false);
  if (!am) fail_msg("argmax of S(0) on a 1-rank mesh: %s", dt_last_error());
  dt_tensor *sa = dt_softmax(a, 0);
  dt_tensor *rp = dt_relu(p);
  if (!rp) fail_msg("relu of P(sum) on a 1-rank mesh: %s", dt_last_error());
  dt_tensor *st = dt_softmax(t, 0);
  dt_comm_counts cc = dt_comm_count_end();
  assert_int_equal(cc.all_reduce + cc.all_gather + cc.reduce_scatter + cc.all_to_all, 0);
  int64_t at = -1;
  assert_int_equal(dt_to_host(am, &at, sizeof at), DT_OK);
  assert_int_equal(at, 5);
  expect_softmax(sa, v, 8, "softmax of S(0) on a 1-rank mesh");
  expect_softmax(st, v, 8, "softmax of [R, S(0)] on a 4 x 1 mesh");
  float got[8];
  assert_int_equal(dt_to_host(rp, got, sizeof got), DT_OK);
  for (int i = 0; i < 8; i++) assert_true(got[i] == raw[i]); /* all > 0 */
  /* dim 0 of the 4 x 1 mesh communicates: refused, with its fix */
  dt_tensor_options oss = {.mesh = tall, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(0))};
  dt_tensor *u = dt_from_host(raw, DT_SHAPE(8), &oss);
  tu_expect_error(dt_softmax(u, 0), DT_ERR_PLACEMENT,
                  "dt_softmax: input placements [S(0), S(0)] on mesh (4, 1) are "
                  "not supported by softmax without communication; legal on mesh "
                  "dim 0: [R]; cheapest fix: redistribute input 0 to [R, R] "
                  "(all_gather, ", NULL);
  TU_RELEASE(am, rp, a, p, t, u);
  dt_mesh_release(one);
  dt_mesh_release(tall);
}

static void test_auto_from_environment(void **state) {
  (void)state;
  setenv("DTORCH_AUTO_REDISTRIBUTE", "1", 1);
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  unsetenv("DTORCH_AUTO_REDISTRIBUTE");
  assert_non_null(rt);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(4), NULL);
  double hv[32];
  for (int i = 0; i < 32; i++) hv[i] = i % 7 - 3;
  float raw[32];
  for (int i = 0; i < 32; i++) raw[i] = (float)hv[i];
  dt_tensor_options o = {.dtype = DT_FLOAT32, .mesh = m,
                         .placements = DT_PLACEMENTS(DT_SHARD(1))};
  dt_tensor *x = dt_from_host(raw, DT_SHAPE(4, 8), &o);
  dt_comm_count_begin();
  dt_tensor *y = dt_softmax(x, 1);
  dt_comm_counts cc = dt_comm_count_end();
  if (!y) fail_msg("auto softmax: %s", dt_last_error());
  assert_int_equal(cc.all_to_all + cc.all_gather, 1);
  float v[32];
  assert_int_equal(dt_to_host(y, v, sizeof v), DT_OK);
  for (int r = 0; r < 4; r++) { /* naive double softmax per row */
    double mx = -INFINITY, z = 0;
    for (int k = 0; k < 8; k++) mx = fmax(mx, hv[r * 8 + k]);
    for (int k = 0; k < 8; k++) z += exp(hv[r * 8 + k] - mx);
    for (int k = 0; k < 8; k++)
      assert_true(fabs(v[r * 8 + k] - exp(hv[r * 8 + k] - mx) / z) < 1e-6);
  }
  dt_tensor_release(x);
  dt_tensor_release(y);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  setenv("DTORCH_AUTO_REDISTRIBUTE", "2", 1);
  assert_null(dt_runtime_create(NULL));
  unsetenv("DTORCH_AUTO_REDISTRIBUTE");
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "DTORCH_AUTO_REDISTRIBUTE=\"2\""));
}

/* ---- a DP x TP forward pass: Megatron's column- then row-parallel MLP,
 * data parallel over dp; strict mode runs it with no collective, and the
 * loss (Partial on both mesh dims) equals the naive double computation */
static dt_tensor *from(const double *v, dt_shape s, const dt_placement *pl) {
  int64_t n = 1;
  for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
  float *raw = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) raw[i] = (float)v[i];
  dt_tensor_options o = {.dtype = DT_FLOAT32, .mesh = grid, .placements = pl};
  dt_tensor *t = dt_from_host(raw, s, &o);
  free(raw);
  return t;
}

static void test_dp_tp_forward(void **state) {
  (void)state;
  enum { B = 8, D = 6, H = 12 };
  double x[B * D], w1[H * D], b1[H], w2[D * H], b2[D];
  tu_fill_random(x, B * D, DT_FLOAT32, 1, -1, 1);
  tu_fill_random(w1, H * D, DT_FLOAT32, 2, -1, 1);
  tu_fill_random(b1, H, DT_FLOAT32, 3, -1, 1);
  tu_fill_random(w2, D * H, DT_FLOAT32, 4, -1, 1);
  tu_fill_random(b2, D, DT_FLOAT32, 5, -1, 1);
  double want = 0;
  for (int i = 0; i < B; i++) {
    double h[H];
    for (int j = 0; j < H; j++) {
      double a = b1[j];
      for (int k = 0; k < D; k++) a += x[i * D + k] * w1[j * D + k];
      h[j] = a > 0 ? a : 0;
    }
    for (int j = 0; j < D; j++) {
      double a = b2[j];
      for (int k = 0; k < H; k++) a += h[k] * w2[j * H + k];
      want += a;
    }
  }
  dt_tensor *tx = from(x, DT_SHAPE(B, D), DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *tw1 = from(w1, DT_SHAPE(H, D), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  dt_tensor *tb1 = from(b1, DT_SHAPE(H), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  dt_tensor *tw2 = from(w2, DT_SHAPE(D, H), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1)));
  dt_tensor *tb2 = from(b2, DT_SHAPE(D), DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE));
  dt_comm_count_begin();
  dt_tensor *z = dt_linear(tx, tw1, tb1);
  dt_tensor *h = dt_relu(z);
  dt_tensor *y = dt_linear(h, tw2, tb2);
  dt_tensor *loss = dt_sum(y, NULL, 0, false);
  dt_comm_counts cc = dt_comm_count_end();
  if (!loss) fail_msg("forward: %s", dt_last_error());
  assert_int_equal(cc.all_reduce + cc.all_gather + cc.reduce_scatter + cc.all_to_all, 0);
  assert_int_equal(dt_tensor_placement(h, 0).kind, DT_PLACEMENT_SHARD);
  assert_int_equal(dt_tensor_placement(h, 1).dim, 1);
  assert_int_equal(dt_tensor_placement(y, 1).kind, DT_PLACEMENT_PARTIAL);
  float got;
  assert_int_equal(dt_to_host(loss, &got, sizeof got), DT_OK);
  if (!(fabs(got - want) <= 1e-4 * fabs(want) + 1e-4))
    fail_msg("loss %.9g, naive double loop %.9g", (double)got, want);
  dt_tensor *all[] = {tx, tw1, tb1, tw2, tb2, z, h, y, loss};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) dt_tensor_release(all[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cache_hits_and_keys),
      cmocka_unit_test(test_cache_stale_mesh),
      cmocka_unit_test(test_cache_eviction),
      cmocka_unit_test(test_cache_per_thread),
      cmocka_unit_test(test_strict_messages),
      cmocka_unit_test(test_strict_one_rank_dims),
      cmocka_unit_test(test_auto_from_environment),
      cmocka_unit_test(test_dp_tp_forward),
  };
  tu_alarm(600); /* ops run on rank threads: a hang fails the run */
  return cmocka_run_group_tests(tests, setup, teardown);
}
