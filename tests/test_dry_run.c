/* Dry runs: the same program on a real and a dry-run
 * runtime issues the same collectives with the same bytes; the
 * alpha-beta time of one all-reduce equals the formula computed here;
 * per-rank memory peaks and their return to zero; values cannot be
 * fetched; a 1,024-rank mesh in little memory; several issuing threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "testutil.h"
#include "threads.h"

static void expect_in(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("\"%s\" not in: %s", part, msg);
}

/* a TP MLP layer with its backward on a dp x tp mesh (auto mode) */
static dt_status program(dt_mesh *m, int64_t b, int64_t h) {
  dt_tensor_options o = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  dt_tensor *x = dt_ones(DT_SHAPE(b, h), &o);
  o.placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0));
  o.requires_grad = true;
  dt_tensor *w1 = dt_full(DT_SHAPE(4 * h, h), 0.01, &o);
  o.placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1));
  dt_tensor *w2 = dt_full(DT_SHAPE(h, 4 * h), 0.02, &o);
  dt_tensor *a = dt_linear(x, w1, NULL), *g = dt_gelu(a), *y = dt_linear(g, w2, NULL);
  dt_tensor *r = dt_redistribute(y, NULL, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_tensor *l = dt_mean(r, NULL, 0, false);
  dt_status st = l ? dt_backward(l) : dt_last_status();
  dt_tensor *ts[] = {x, w1, w2, a, g, y, r, l};
  for (int i = 0; i < 8; i++) dt_tensor_release(ts[i]);
  return st;
}

static dt_comm_counts counted(dt_runtime *rt, int dp, int tp) {
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(dp, tp), NULL);
  dt_comm_count_begin();
  assert_int_equal(program(m, 8, 16), DT_OK);
  dt_comm_counts c = dt_comm_count_end();
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  dt_mesh_release(m);
  return c;
}

static void test_same_collectives_as_real(void **state) {
  (void)state;
  dt_runtime *real = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4,
                                                             .auto_redistribute = true});
  dt_runtime *dry = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4,
                                                            .auto_redistribute = true,
                                                            .dry_run = true});
  dt_comm_counts a = counted(real, 2, 2), b = counted(dry, 2, 2);
  assert_true(a.all_reduce + a.all_gather + a.reduce_scatter + a.all_to_all > 0);
  assert_int_equal(a.all_reduce, b.all_reduce);
  assert_int_equal(a.all_gather, b.all_gather);
  assert_int_equal(a.reduce_scatter, b.reduce_scatter);
  assert_int_equal(a.all_to_all, b.all_to_all);
  assert_int_equal(a.bytes, b.bytes);
  dt_dry_run_stats s;
  assert_int_equal(dt_dry_run_report(dry, &s), DT_OK);
  assert_int_equal(s.collectives, b.all_reduce + b.all_gather + b.reduce_scatter + b.all_to_all);
  assert_int_equal(s.comm_bytes, b.bytes);
  assert_true(s.ops > 10 && s.comm_s > 0 && s.compute_s > 0);
  assert_true(fabs(s.step_s - (s.comm_s + s.compute_s)) < 1e-12);
  /* memory: peaks seen, everything back to zero once released */
  assert_true(s.peak_max >= s.peak_min && s.peak_min > 0);
  for (int r = 0; r < 4; r++) {
    dt_memory_stats ms;
    assert_int_equal(dt_runtime_memory(dry, r, &ms), DT_OK);
    assert_int_equal(ms.used, 0);
  }
  /* the same order of making and releasing: the same live set at the
   * end of the step (the real peaks differ by collective scratch and by
   * when the ranks ran each free relative to each op) */
  dt_memory_stats rm;
  assert_int_equal(dt_runtime_memory(real, s.peak_rank, &rm), DT_OK);
  assert_true(rm.peak > 0);
  dt_runtime_destroy(real);
  dt_runtime_destroy(dry);
}

/* one P(sum) -> R all-reduce of 1024 float32 over 4 ranks:
 * 2 (n-1) alpha + 2 (n-1)/n s / beta with s = 4096 bytes per rank */
static void test_alpha_beta(void **state) {
  (void)state;
  dt_runtime *dry = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4, .dry_run = true,
      .dry_link_gbps = 50, .dry_link_latency_us = 2});
  dt_mesh *m = dt_mesh_init(dry, NULL, DT_SHAPE(4), NULL);
  dt_tensor *p = dt_zeros(DT_SHAPE(1024), &(dt_tensor_options){.mesh = m,
      .placements = DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM))});
  assert_int_equal(dt_dry_run_reset(dry), DT_OK);
  dt_tensor *r = dt_redistribute(p, NULL, DT_PLACEMENTS(DT_REPLICATE));
  dt_dry_run_stats s;
  assert_int_equal(dt_dry_run_report(dry, &s), DT_OK);
  double want = 2 * 3 * 2e-6 + 2 * 0.75 * 4096 / 50e9;
  assert_int_equal(s.collectives, 1);
  assert_int_equal(s.comm_bytes, 4 * 4096);
  assert_true(fabs(s.comm_s - want) < 1e-11);
  /* no values in a dry run */
  float v[1024];
  assert_int_equal(dt_to_host(r, v, sizeof v), DT_ERR_UNSUPPORTED);
  expect_in(dt_last_error(), "dry-run runtime holds no values");
  dt_runtime_set_current(dry);
  dt_tensor *d = dt_ones(DT_SHAPE(2), NULL);
  assert_int_equal(dt_to_host(d, v, 2 * sizeof(float)), DT_ERR_UNSUPPORTED);
  assert_null(dt_to_host_async(d, v, 2 * sizeof(float)));
  dt_runtime_set_current(NULL);
  dt_tensor_release(d);
  dt_tensor_release(p);
  dt_tensor_release(r);
  dt_mesh_release(m);
  dt_runtime_destroy(dry);
  /* a real runtime has no dry-run report */
  dt_runtime *real = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  assert_int_equal(dt_dry_run_report(real, &s), DT_ERR_INVALID_ARGUMENT);
  expect_in(dt_last_error(), "not a dry run");
  dt_runtime_destroy(real);
}

static dt_status never(dt_spmd_ctx *c) {
  (void)c;
  return DT_ERR_INTERNAL;
}

/* 1,024 ranks (32 x 32) in little memory */
static void test_large_mesh(void **state) {
  (void)state;
  dt_runtime *dry = dt_runtime_create(&(dt_runtime_options){.num_ranks = 1024,
      .dry_run = true, .auto_redistribute = true});
  assert_non_null(dry);
  assert_int_equal(dt_spmd_run(dry, never, NULL), DT_ERR_UNSUPPORTED);
  dt_mesh *m = dt_mesh_init(dry, NULL, DT_SHAPE(32, 32), NULL);
  assert_int_equal(program(m, 256, 512), DT_OK);
  dt_dry_run_stats s;
  assert_int_equal(dt_dry_run_report(dry, &s), DT_OK);
  assert_true(s.collectives > 0 && s.comm_bytes > 0 && s.peak_max > 0);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
  /* (the sanitizers' shadow memory of 1,024 threads is not ours) */
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  assert_true(ru.ru_maxrss < 1024 * 1024); /* KiB: under 1 GiB */
#endif
  dt_mesh_release(m);
  dt_runtime_destroy(dry);
}

/* four issuing threads: four times one thread's counts */
static dt_runtime *shared;
static dt_mesh *shared_mesh;
static void issue(void *arg, int i) {
  (void)arg;
  (void)i;
  TU_CHECK(program(shared_mesh, 8, 16) == DT_OK, "%s", dt_last_error());
}

static void test_threads(void **state) {
  (void)state;
  shared = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4, .dry_run = true,
                                                   .auto_redistribute = true});
  shared_mesh = dt_mesh_init(shared, NULL, DT_SHAPE(2, 2), NULL);
  issue(NULL, 0);
  dt_dry_run_stats one, four;
  assert_int_equal(dt_dry_run_report(shared, &one), DT_OK);
  assert_int_equal(dt_dry_run_reset(shared), DT_OK);
  tu_run_threads(4, issue, NULL);
  assert_int_equal(tu_thread_failures_take(), 0);
  assert_int_equal(dt_dry_run_report(shared, &four), DT_OK);
  assert_int_equal(four.ops, 4 * one.ops);
  assert_int_equal(four.collectives, 4 * one.collectives);
  assert_int_equal(four.comm_bytes, 4 * one.comm_bytes);
  dt_mesh_release(shared_mesh);
  dt_runtime_destroy(shared);
}

/* compute_s of one op on a fresh report */
static double op_compute_s(dt_runtime *rt, dt_tensor *(*op)(dt_tensor *, dt_tensor *),
                           dt_tensor *a, dt_tensor *b) {
  assert_int_equal(dt_dry_run_reset(rt), DT_OK);
  dt_tensor *c = op(a, b);
  assert_non_null(c);
  dt_dry_run_stats s;
  assert_int_equal(dt_dry_run_report(rt, &s), DT_OK);
  assert_int_equal(s.collectives, 0);
  dt_tensor_release(c);
  return s.compute_s;
}

/* The compute model, one for a single-device op and a DTensor one: the
 * fullest rank writes its outputs and reads as much again (bytes over the
 * memory bandwidth), and matmul does 2 m n k FLOPs, k its share of the
 * contraction; an add does none. Hand-computed at 1000 GB/s, 1 TFLOP/s. */
static void test_compute_model(void **state) {
  (void)state;
  dt_runtime *dry = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2,
      .dry_run = true, .dry_mem_gbps = 1000, .dry_tflops = 1});
  assert_non_null(dry);
  dt_runtime_set_current(dry);
  dt_tensor *a = dt_zeros(DT_SHAPE(8, 16), NULL), *b = dt_zeros(DT_SHAPE(16, 4), NULL);
  /* [8, 4] float32 out: 2 * 128 bytes; 2 * 8 * 4 * 16 FLOPs */
  assert_true(fabs(op_compute_s(dry, dt_matmul, a, b) - (256 / 1e12 + 1024 / 1e12)) < 1e-14);
  /* [8, 16] out: 2 * 512 bytes, no FLOPs counted */
  assert_true(fabs(op_compute_s(dry, dt_add, a, a) - 1024 / 1e12) < 1e-14);
  dt_runtime_set_current(NULL);
  dt_mesh *m = dt_mesh_init(dry, NULL, DT_SHAPE(2), NULL);
  dt_tensor *da = dt_zeros(DT_SHAPE(8, 16), &(dt_tensor_options){.mesh = m,
      .placements = DT_PLACEMENTS(DT_SHARD(1))});
  dt_tensor *db = dt_zeros(DT_SHAPE(16, 4), &(dt_tensor_options){.mesh = m,
      .placements = DT_PLACEMENTS(DT_SHARD(0))});
  /* the contraction sharded: each rank's [8, 4] partial (256 bytes moved)
   * over its 8 of the 16 contraction indices, 2 * 8 * 4 * 8 FLOPs */
  assert_true(fabs(op_compute_s(dry, dt_matmul, da, db) - (256 / 1e12 + 512 / 1e12)) < 1e-14);
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_tensor_release(da);
  dt_tensor_release(db);
  dt_mesh_release(m);
  dt_runtime_destroy(dry);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_same_collectives_as_real), cmocka_unit_test(test_alpha_beta),
    cmocka_unit_test(test_large_mesh), cmocka_unit_test(test_threads),
    cmocka_unit_test(test_compute_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
