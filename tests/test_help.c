/* Helping (sched/help.h): a small redistribute or a DTensor free issued
 * while ranks sleep runs the sleeping ranks' part on the issuing thread.
 * Every result is checked shard by shard against a double-precision
 * computation on the host; the pool's counters show the path ran (and,
 * for work that must not be helped, that it did not); threads and a
 * future callback issue at once on one runtime; a 2-D mesh helps groups. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "sched/pool.h"
#include "testutil.h"
#include "threads.h"

#define K 2 /* columns: every message is 8 bytes per row */

/* exact in float: small integers */
static float val(uint64_t seed, int64_t i, int64_t j) {
  return (float)((seed * 7 + (uint64_t)i * 5 + (uint64_t)j * 3) % 17) - 8.0f;
}

/* a [rows, K] DTensor from host values, placed `pl` on a 1-D mesh */
static dt_tensor *make(dt_mesh *m, int64_t rows, uint64_t seed, dt_placement pl) {
  float v[64 * K];
  for (int64_t i = 0; i < rows; i++)
    for (int j = 0; j < K; j++) v[i * K + j] = val(seed, i, j);
  dt_tensor_options o = {.mesh = m, .placements = (dt_placement[]){pl}};
  return dt_from_host(v, DT_SHAPE(rows, K), &o);
}

/* every rank's shard of y equals ref (global [rows, cols]) cut as y's
 * single mesh dim says (Replicate, or Shard(0) in torch.chunk blocks) */
static bool shards_equal(dt_tensor *y, int n, const double *ref, int64_t rows,
                         int64_t cols, bool sharded) {
  for (int r = 0; r < n; r++) {
    dt_shape ls = dt_tensor_local_shape(y, r);
    int64_t lrows = ls.ndim == 2 ? ls.dims[0] : 1, lcols = ls.dims[ls.ndim - 1];
    int64_t per = (sharded ? (ls.ndim == 2 ? rows : cols) + n - 1 : 0) / n;
    float host[64 * K];
    if (lrows * lcols > 64 * K ||
        dt_local_to_host(y, r, host, sizeof(float) * (size_t)(lrows * lcols)) != DT_OK)
      return false;
    for (int64_t i = 0; i < lrows; i++)
      for (int64_t j = 0; j < lcols; j++) {
        int64_t gi = i + (sharded && ls.ndim == 2 ? per * r : 0);
        int64_t gj = j + (sharded && ls.ndim == 1 ? per * r : 0);
        if (host[i * lcols + j] != (float)ref[gi * cols + gj]) return false;
      }
  }
  return true;
}

/* One of four small redistributes (which = 0..3) on a 1-D mesh of n ranks,
 * checked: P(sum) -> R (all_reduce), S(0) -> R (all_gather), P(sum) ->
 * S(0) (reduce_scatter), R -> S(0) (a local slice). The Partial inputs are
 * the column sums of an S(0) [n, K] tensor (dt_sum over dim 0), so every
 * rank holds a different partial. Sleeps first when `park`: the ranks
 * then sleep when the redistribute is issued. */
static bool one_round(dt_mesh *m, int n, int which, uint64_t seed, bool park) {
  bool ok = true;
  dt_tensor *x = NULL, *src = NULL, *y = NULL;
  double ref[64 * K];
  if (which == 0 || which == 2) {
    x = make(m, n, seed, DT_SHARD(0));
    src = dt_sum(x, (int[]){0}, 1, false); /* [K], Partial(sum) */
    for (int j = 0; j < K; j++) {
      ref[j] = 0;
      for (int i = 0; i < n; i++) ref[j] += val(seed, i, j);
    }
  } else if (which == 1) {
    src = make(m, n, seed, DT_SHARD(0));
    for (int i = 0; i < n; i++)
      for (int j = 0; j < K; j++) ref[i * K + j] = val(seed, i, j);
  } else {
    src = make(m, n, seed, DT_REPLICATE);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < K; j++) ref[i * K + j] = val(seed, i, j);
  }
  if (!src || (which == 0 || which == 2 ? !x : false)) ok = false;
  if (ok && park) {
    ok = dt_runtime_synchronize(dt_mesh_runtime(m)) == DT_OK;
    tu_sleep_ns(300 * 1000); /* the ranks spin 20 µs, then sleep */
  }
  dt_placement to = which == 0 || which == 1 ? DT_REPLICATE : DT_SHARD(0);
  if (ok) y = dt_redistribute(src, m, &to);
  if (!y) ok = false;
  if (ok && which == 2) ok = shards_equal(y, n, ref, 1, K, true);
  else if (ok && which == 0) ok = shards_equal(y, n, ref, 1, K, false);
  else if (ok) ok = shards_equal(y, n, ref, n, K, which == 3);
  if (!ok) fprintf(stderr, "round %d (seed %llu) on %d ranks: %s\n", which,
                   (unsigned long long)seed, n, dt_last_error());
  dt_tensor_release(y);
  dt_tensor_release(src);
  dt_tensor_release(x);
  return ok;
}

static dt_runtime *runtime_of(int n) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = n});
  assert_non_null(rt);
  return rt;
}

static void rounds_on(int n) {
  dt_runtime *rt = runtime_of(n);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(n), NULL);
  assert_non_null(m);
  sched_pool_stats s0 = sched_pool_get_stats(rt->pool);
  for (int it = 0; it < 48; it++)
    assert_true(one_round(m, n, it % 4, (uint64_t)it, it % 3 != 2));
  sched_pool_stats s1 = sched_pool_get_stats(rt->pool);
  /* the path ran: records of sleeping ranks were run by this thread */
  assert_true(s1.helped - s0.helped > 0);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

static void test_rounds_2_ranks(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  rounds_on(2);
  tu_leaks_end();
}

static void test_rounds_8_ranks(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  rounds_on(8);
  tu_leaks_end();
}

/* a large redistribute is never helped: the issuing thread returns at
 * once and the ranks move the data (helped count unchanged by it) */
static void test_large_not_helped(void **state) {
  (void)state;
  dt_runtime *rt = runtime_of(2);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  dt_tensor_options o = {.mesh = m, .placements = (dt_placement[]){DT_PARTIAL(DT_REDUCE_SUM)}};
  dt_tensor *p = dt_ones(DT_SHAPE(1 << 16), &o); /* 256 KiB */
  assert_non_null(p);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  tu_sleep_ns(300 * 1000);
  int64_t h0 = sched_pool_get_stats(rt->pool).helped;
  dt_tensor *y = dt_redistribute(p, m, (dt_placement[]){DT_REPLICATE});
  assert_non_null(y);
  assert_int_equal(sched_pool_get_stats(rt->pool).helped, h0);
  float *host = malloc(sizeof(float) << 16);
  assert_int_equal(dt_local_to_host(y, 1, host, sizeof(float) << 16), DT_OK);
  for (int i = 0; i < 1 << 16; i++) assert_true(host[i] == 1.0f);
  free(host);
  dt_tensor_release(y);
  dt_tensor_release(p);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

/* ---- several issuing threads and a future callback on one runtime */
typedef struct shared {
  dt_mesh *m;
  int n;
  _Atomic int cb_done;
  _Atomic int cb_ok;
} shared;

static void issue_rounds(void *arg, int i) {
  shared *s = arg;
  for (int it = 0; it < 24; it++)
    TU_CHECK(one_round(s->m, s->n, (it + i) % 4, (uint64_t)(1000 * i + it), it % 4 == 0),
             "thread %d round %d", i, it);
}

static void on_ready(dt_future *f, dt_status st, void *arg) {
  (void)st;
  (void)f;
  shared *s = arg;
  bool ok = true;
  for (int it = 0; it < 8; it++) ok = ok && one_round(s->m, s->n, it % 4, 77 + (uint64_t)it, false);
  atomic_store(&s->cb_ok, ok);
  atomic_store(&s->cb_done, 1);
}

static void test_threads_and_callback(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_runtime *rt = runtime_of(8);
  shared s = {.m = dt_mesh_init(rt, NULL, DT_SHAPE(8), NULL), .n = 8};
  assert_non_null(s.m);
  assert_int_equal(dt_runtime_set_current(rt), DT_OK);
  dt_tensor *t = dt_zeros(DT_SHAPE(4), &(dt_tensor_options){.device = "cpu:0"});
  float host[4];
  dt_future *f = dt_to_host_async(t, host, sizeof host);
  assert_non_null(f);
  assert_int_equal(dt_future_then(f, on_ready, &s), DT_OK);
  tu_run_threads(4, issue_rounds, &s);
  TU_ASSERT_NO_THREAD_FAILURES();
  for (int i = 0; i < 10000 && !atomic_load(&s.cb_done); i++) tu_sleep_ns(1000000);
  assert_int_equal(atomic_load(&s.cb_done), 1);
  assert_int_equal(atomic_load(&s.cb_ok), 1);
  dt_future_release(f);
  dt_tensor_release(t);
  dt_runtime_set_current(NULL);
  dt_mesh_release(s.m);
  dt_runtime_destroy(rt);
  tu_leaks_end();
}

/* a 2x4 mesh: [R, Partial] -> [R, R] all-reduces in two groups of 4 */
static void test_mesh_2d_groups(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_runtime *rt = runtime_of(8);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2, 4), NULL);
  assert_non_null(m);
  int64_t h0 = sched_pool_get_stats(rt->pool).helped;
  for (int it = 0; it < 16; it++) {
    float v[4 * K];
    double ref[K] = {0};
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < K; j++) {
        v[i * K + j] = val((uint64_t)it, i, j);
        ref[j] += v[i * K + j];
      }
    dt_tensor_options o = {.mesh = m, .placements = (dt_placement[]){DT_REPLICATE, DT_SHARD(0)}};
    dt_tensor *x = dt_from_host(v, DT_SHAPE(4, K), &o);
    dt_tensor *p = dt_sum(x, (int[]){0}, 1, false); /* [R, Partial(sum)] */
    assert_non_null(p);
    assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
    tu_sleep_ns(300 * 1000);
    dt_tensor *y = dt_redistribute(p, m, (dt_placement[]){DT_REPLICATE, DT_REPLICATE});
    assert_non_null(y);
    for (int r = 0; r < 8; r++) {
      float h[K];
      assert_int_equal(dt_local_to_host(y, r, h, sizeof h), DT_OK);
      for (int j = 0; j < K; j++) assert_true(h[j] == (float)ref[j]);
    }
    dt_tensor_release(y);
    dt_tensor_release(p);
    dt_tensor_release(x);
  }
  assert_true(sched_pool_get_stats(rt->pool).helped > h0);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  tu_leaks_end();
}

/* ---- found in review: helping must never wait for work outside it */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define STRESS_ITERS 40
#else
#define STRESS_ITERS 200
#endif

typedef struct stress {
  dt_runtime *rt;
  dt_mesh *m;
} stress;

/* [S] on one mesh dim -> dt_sum -> Partial there -> [R, R], checked */
static bool round_2d(dt_mesh *m, int dim, uint64_t seed) {
  int len = dim == 0 ? 2 : 4;
  float v[4 * K];
  double ref[K] = {0};
  for (int i = 0; i < len; i++)
    for (int j = 0; j < K; j++) {
      v[i * K + j] = val(seed, i, j);
      ref[j] += v[i * K + j];
    }
  dt_placement pl[2] = {DT_REPLICATE, DT_REPLICATE};
  pl[dim] = DT_SHARD(0);
  dt_tensor_options o = {.mesh = m, .placements = pl};
  dt_tensor *x = dt_from_host(v, DT_SHAPE(len, K), &o);
  dt_tensor *p = x ? dt_sum(x, (int[]){0}, 1, false) : NULL;
  if (p && seed % 3 == 0) tu_sleep_ns(50 * 1000);
  dt_tensor *y = p ? dt_redistribute(p, m, (dt_placement[]){DT_REPLICATE, DT_REPLICATE})
                   : NULL;
  bool ok = y != NULL;
  for (int r = 0; ok && r < 8; r++) {
    float h[K];
    ok = dt_local_to_host(y, r, h, sizeof h) == DT_OK;
    for (int j = 0; ok && j < K; j++) ok = h[j] == (float)ref[j];
  }
  if (!ok) fprintf(stderr, "dim %d seed %llu: %s\n", dim, (unsigned long long)seed,
                   dt_last_error());
  dt_tensor_release(y);
  dt_tensor_release(p);
  dt_tensor_release(x);
  return ok;
}

static void stress_issue(void *arg, int i) {
  stress *s = arg;
  dt_runtime_set_current(s->rt);
  for (int it = 0; it < STRESS_ITERS; it++) {
    if (it % 5 == i % 5) { /* a one-rank op in between */
      char dev[16];
      snprintf(dev, sizeof dev, "cpu:%d", (it + i) % 8);
      dt_tensor *a = dt_ones(DT_SHAPE(64, 64), &(dt_tensor_options){.device = dev});
      dt_tensor *b = a ? dt_matmul(a, a) : NULL;
      TU_CHECK(b != NULL, "%s", dt_last_error());
      dt_tensor_release(b);
      dt_tensor_release(a);
    }
    TU_CHECK(round_2d(s->m, (it + i) % 2, (uint64_t)(1000 * i + it)),
             "thread %d round %d", i, it);
  }
  dt_runtime_set_current(NULL);
}

/* Four threads issue rounds on both dims of a 2x4 mesh, frees and one-rank
 * matmuls into a ring of 4 cells with ranks that spin 1 µs. Before the
 * fix a helper of a free ran an earlier ticket of the rank (another
 * thread's round) and waited for a rank whose wake-up chain passed
 * through the very rank it held: no progress until the watchdog (here
 * 20 s) broke the round, and a round failed with DT_ERR_TIMEOUT. */
static void test_stress_2d(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 8, .ring_capacity = 4, .spin_us = 1,
      .collective_timeout_ms = 20000});
  assert_non_null(rt);
  stress s = {.rt = rt, .m = dt_mesh_init(rt, NULL, DT_SHAPE(2, 4), NULL)};
  assert_non_null(s.m);
  tu_run_threads(4, stress_issue, &s);
  TU_ASSERT_NO_THREAD_FAILURES();
  dt_mesh_release(s.m);
  dt_runtime_destroy(rt);
}

/* A rank with queued work is not helped: a small redistribute issued right
 * after eight 1024x1024 matmuls on rank 0 returns while rank 0 still has
 * them queued (before the fix it waited for the whole backlog, 0.3-1 s). */
static void test_backlog_not_waited_for(void **state) {
  (void)state;
  dt_runtime *rt = runtime_of(4);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(4), NULL);
  assert_int_equal(dt_runtime_set_current(rt), DT_OK);
  dt_tensor_options po = {.mesh = m, .placements = (dt_placement[]){DT_PARTIAL(DT_REDUCE_SUM)}};
  dt_tensor *p = dt_ones(DT_SHAPE(2), &po);
  dt_tensor *a = dt_ones(DT_SHAPE(1024, 1024), &(dt_tensor_options){.device = "cpu:0"});
  assert_non_null(p);
  assert_non_null(a);
  for (int it = 0; it < 4; it++) {
    assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
    tu_sleep_ns(2 * 1000 * 1000); /* every rank asleep */
    dt_tensor *c[8];
    for (int k = 0; k < 8; k++) assert_non_null(c[k] = dt_matmul(a, a));
    dt_tensor *y = dt_redistribute(p, m, (dt_placement[]){DT_REPLICATE});
    assert_non_null(y);
    /* 8 GFLOP of matmuls take far longer than the call: still queued */
    assert_true(dt_runtime_queue_depth(rt, 0) > 0);
    float h[2];
    assert_int_equal(dt_local_to_host(y, 3, h, sizeof h), DT_OK);
    assert_true(h[0] == 1.0f && h[1] == 1.0f);
    for (int k = 0; k < 8; k++) dt_tensor_release(c[k]);
    dt_tensor_release(y);
  }
  dt_tensor_release(a);
  dt_tensor_release(p);
  dt_runtime_set_current(NULL);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

/* DTORCH_NO_HELP=1: the ranks run every record themselves (nothing
 * helped), with the same results */
static void test_no_help_env(void **state) {
  (void)state;
  assert_int_equal(setenv("DTORCH_NO_HELP", "1", 1), 0);
  dt_runtime *rt = runtime_of(2);
  unsetenv("DTORCH_NO_HELP");
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  assert_non_null(m);
  for (int it = 0; it < 8; it++) assert_true(one_round(m, 2, it % 4, (uint64_t)it, true));
  assert_int_equal(sched_pool_get_stats(rt->pool).helped, 0);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  /* a bad value names the variable */
  assert_int_equal(setenv("DTORCH_NO_HELP", "yes", 1), 0);
  assert_null(dt_runtime_create(&(dt_runtime_options){.num_ranks = 2}));
  unsetenv("DTORCH_NO_HELP");
  assert_non_null(strstr(dt_last_error(), "DTORCH_NO_HELP=\"yes\""));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_rounds_2_ranks),
    cmocka_unit_test(test_rounds_8_ranks),
    cmocka_unit_test(test_large_not_helped),
    cmocka_unit_test(test_threads_and_callback),
    cmocka_unit_test(test_mesh_2d_groups),
    cmocka_unit_test(test_stress_2d),
    cmocka_unit_test(test_backlog_not_waited_for),
    cmocka_unit_test(test_no_help_env),
  };
  return TU_RUN_TESTS_WITH_ALARM(300, tests);
}
