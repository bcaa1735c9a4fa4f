/* Chaos scheduling: a sweep of seeds over a program
 * that mixes controller DTensor ops with redistributions (two issuing
 * threads), stolen elementwise chunks and an SPMD run with collectives
 * changes no result (bitwise) against the run without chaos; decisions
 * are a pure function of (seed, thread, index); the perturbations really
 * happen; DTORCH_CHAOS is parsed. Under the sanitizers
 * (DTORCH_SWEEP=reduced) the sweep takes fewer seeds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/chaos.h"
#include "testutil.h"
#include "threads.h"

enum { ROWS = 8, K = 6, COLS = 4, BIG = 1 << 16 };

/* everything the program produces, compared bitwise */
typedef struct results {
  float y[2][ROWS];        /* per issuing thread: sum over cols of gelu(x w) */
  float big[BIG];          /* a + b, chunks stolen */
  double spmd[4][18];      /* per rank: collectives' outputs */
} results;

typedef struct run_ctx {
  dt_runtime *rt;
  dt_mesh *m;
  results *out;
} run_ctx;

static void controller(void *arg, int i) {
  run_ctx *c = arg;
  float xv[ROWS * K], wv[K * COLS];
  for (int k = 0; k < ROWS * K; k++) xv[k] = (float)sin(k * 0.3 + i);
  for (int k = 0; k < K * COLS; k++) wv[k] = (float)cos(k * 0.7 - i);
  dt_tensor *x = dt_from_host(xv, DT_SHAPE(ROWS, K), &(dt_tensor_options){
      .mesh = c->m, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)});
  dt_tensor *w = dt_from_host(wv, DT_SHAPE(K, COLS), &(dt_tensor_options){
      .mesh = c->m, .placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1))});
  dt_tensor *y = dt_matmul(x, w), *g = dt_gelu(y);
  dt_tensor *s = dt_sum(g, (const int[]){1}, 1, false);
  dt_tensor *r = dt_redistribute(s, NULL, DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE));
  TU_CHECK(dt_to_host(r, c->out->y[i], sizeof c->out->y[i]) == DT_OK, "%s",
           dt_last_error());
  dt_tensor *ts[] = {x, w, y, g, s, r};
  for (int k = 0; k < 6; k++) dt_tensor_release(ts[k]);
}

static dt_status spmd_fn(dt_spmd_ctx *c) {
  run_ctx *rc = c->arg;
  double v[8];
  for (int i = 0; i < 8; i++) v[i] = c->rank * 8 + i * 0.5;
  dt_tensor *x = dt_from_host(v, DT_SHAPE(2, 4), &(dt_tensor_options){.dtype = DT_FLOAT64});
  dt_tensor *a = dt_all_reduce(x, DT_REDUCE_SUM, NULL);
  dt_tensor *b = dt_reduce_scatter(x, DT_REDUCE_SUM, 1, NULL);
  dt_tensor *t = dt_all_to_all(x, 1, 0, NULL);
  double *o = rc->out->spmd[c->rank];
  TU_CHECK(a && b && t, "%s", dt_last_error());
  if (a && b && t) {
    TU_CHECK(dt_to_host(a, o, 8 * sizeof(double)) == DT_OK, "%s", dt_last_error());
    TU_CHECK(dt_to_host(b, o + 8, 2 * sizeof(double)) == DT_OK, "%s", dt_last_error());
    TU_CHECK(dt_to_host(t, o + 10, 8 * sizeof(double)) == DT_OK, "%s", dt_last_error());
  }
  dt_tensor *ts[] = {x, a, b, t};
  for (int k = 0; k < 4; k++) dt_tensor_release(ts[k]);
  return DT_OK;
}

static void run_program(uint64_t seed, results *out) {
  memset(out, 0, sizeof *out);
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 4, .auto_redistribute = true, .chaos_seed = seed});
  assert_non_null(rt);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), NULL);
  run_ctx c = {rt, m, out};
  tu_run_threads(2, controller, &c);
  float *av = malloc(sizeof(float) * BIG), *bv = malloc(sizeof(float) * BIG);
  for (int i = 0; i < BIG; i++) av[i] = (float)i * 0.25f, bv[i] = 1.0f / (float)(i + 1);
  dt_tensor *a = dt_from_host(av, DT_SHAPE(BIG), &(dt_tensor_options){.device = tu_dev(1)});
  dt_tensor *b = dt_from_host(bv, DT_SHAPE(BIG), &(dt_tensor_options){.device = tu_dev(1)});
  dt_tensor *s = dt_add(a, b);
  assert_int_equal(dt_to_host(s, out->big, sizeof out->big), DT_OK);
  assert_int_equal(dt_spmd_run(rt, spmd_fn, &c), DT_OK);
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_tensor_release(s);
  free(av);
  free(bv);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  assert_int_equal(tu_thread_failures_take(), 0);
}

static void test_sweep(void **state) {
  (void)state;
  const char *sweep = getenv("DTORCH_SWEEP");
  int seeds = sweep && strcmp(sweep, "reduced") == 0 ? 12 : 100;
  results *want = malloc(sizeof *want), *got = malloc(sizeof *got);
  run_program(0, want);
  /* the baseline itself is right: spot checks against plain arithmetic */
  assert_true(want->big[10] == 2.5f + 1.0f / 11.0f);
  assert_true(want->spmd[2][0] == 0 + 8 + 16 + 24); /* all_reduce, element 0 */
  uint64_t before = sched_chaos_count();
  for (int seed = 1; seed <= seeds; seed++) {
    run_program((uint64_t)seed * 0x9e3779b97f4a7c15ull, got);
    if (memcmp(want, got, sizeof *want) != 0)
      fail_msg("seed %d changed a result (replay: DTORCH_CHAOS=%llu)", seed,
               (unsigned long long)((uint64_t)seed * 0x9e3779b97f4a7c15ull));
  }
  /* the perturbations happened: yields, delays, failed steals */
  assert_true(sched_chaos_count() - before > (uint64_t)seeds * 10);
  free(want);
  free(got);
}

static void test_decisions_replay(void **state) {
  (void)state;
  int counts[5] = {0};
  for (uint64_t i = 0; i < 100000; i++) {
    int64_t a, b;
    sched_chaos_action x = sched_chaos_decide(42, 3, i, SCHED_CHAOS_RECORD, &a);
    sched_chaos_action y = sched_chaos_decide(42, 3, i, SCHED_CHAOS_RECORD, &b);
    assert_true(x == y && a == b);
    counts[x]++;
    if (x == SCHED_CHAOS_SLEEP) assert_true(a >= 50000 && a <= 560000);
    if (x == SCHED_CHAOS_SPIN) assert_true(a >= 1000 && a <= 64000);
  }
  /* about 9.4% yields, 6.3% spins, 1.6% sleeps */
  assert_true(counts[SCHED_CHAOS_YIELD] > 8000 && counts[SCHED_CHAOS_YIELD] < 11000);
  assert_true(counts[SCHED_CHAOS_SPIN] > 5000 && counts[SCHED_CHAOS_SPIN] < 7500);
  assert_true(counts[SCHED_CHAOS_SLEEP] > 1000 && counts[SCHED_CHAOS_SLEEP] < 2200);
  /* another seed or thread decides differently */
  int same_seed = 0, same_who = 0;
  for (uint64_t i = 0; i < 1000; i++) {
    int64_t a;
    sched_chaos_action x = sched_chaos_decide(42, 3, i, SCHED_CHAOS_STEAL, &a);
    same_seed += x == sched_chaos_decide(43, 3, i, SCHED_CHAOS_STEAL, &a);
    same_who += x == sched_chaos_decide(42, 4, i, SCHED_CHAOS_STEAL, &a);
  }
  assert_true(same_seed < 900 && same_who < 900);
}

static void test_env(void **state) {
  (void)state;
  setenv("DTORCH_CHAOS", "banana", 1);
  assert_null(dt_runtime_create(&(dt_runtime_options){.num_ranks = 2}));
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "DTORCH_CHAOS=\"banana\""));
  setenv("DTORCH_CHAOS", "7", 1);
  uint64_t before = sched_chaos_count();
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  assert_non_null(rt);
  float v[4] = {1, 2, 3, 4}, out[4];
  for (int k = 0; k < 50; k++) {
    dt_tensor *t = dt_from_host(v, DT_SHAPE(4), &(dt_tensor_options){.device = tu_dev(1)});
    dt_tensor *u = dt_mul_scalar(t, 2);
    assert_int_equal(dt_to_host(u, out, sizeof out), DT_OK);
    assert_true(out[3] == 8);
    dt_tensor_release(t);
    dt_tensor_release(u);
  }
  assert_true(sched_chaos_count() > before);
  dt_runtime_destroy(rt);
  unsetenv("DTORCH_CHAOS");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_decisions_replay),
    cmocka_unit_test(test_env),
    cmocka_unit_test(test_sweep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
