/* Stealing without head-of-line blocking (sched/steal.c): a rank that
 * stole part of another rank's loop gets back to its own records after
 * one unit of a steps loop, not after the whole chunk; every unit still
 * runs exactly once and in order; loops longer than a window run every
 * chunk once; a cancelled loop skips what it has not started and a later
 * record runs normally. And the GEMM's plan (kernels/cpu/gemm.c): every
 * unit a thief can hold is at most CPU_GEMM_STEP_FLOP, and the blocks and
 * panels tile the product exactly. The states are made with flags the
 * records set and wait for, never by timing; a watchdog fails a hang. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dtorch/dtorch.h"
#include "kernels/cpu/gemm.h"
#include "sched/pool.h"
#include "testutil.h"
#include "threads.h"

enum { REC_LOOP, REC_OWN, REC_CANCEL_LOOP, REC_FULL_LOOP, REC_WINDOWS };
typedef struct rec { int kind; } rec;

#define UNITS 16
#define GRAIN 8                 /* two chunks: the owner's and the thief's */
#define WIN_UNITS (3 * SCHED_WINDOW + 5)

typedef struct world {
  sched_pool *p;
  bool steps;                   /* the loop under test: steps or plain */
  _Atomic int thief_in;         /* rank 1 started a unit of the loop */
  _Atomic int own_posted;       /* the test queued rank 1's own record */
  _Atomic int own_ran;          /* rank 1 ran it */
  _Atomic int loop_done;        /* rank 0's loop returned */
  _Atomic int units_by_thief;   /* units rank 1 ran */
  int thief_units_at_own;       /* units_by_thief when rank 1 ran its record */
  int loop_running_at_own;      /* !loop_done then */
  _Atomic int ran[WIN_UNITS];   /* per unit: times run */
  _Atomic int order_bad;        /* a unit ran before its predecessor in the chunk */
  _Atomic int64_t cancel_ran;   /* units of the cancelled loop that ran */
  _Atomic int cancelled;        /* the loop's record was cancelled */
  bool cancel_result, full_result;
  int64_t full_ran;
  _Atomic int64_t win_sum;
} world;

static world W;

static void wait_flag(_Atomic int *f) {
  while (!atomic_load_explicit(f, memory_order_acquire)) tu_sleep_ns(1000);
}

/* units of the loop under test */
static void loop_units(int64_t begin, int64_t end, void *ctx) {
  (void)ctx;
  for (int64_t u = begin; u < end; u++) {
    /* the unit before u in its chunk ran first */
    if (u % GRAIN && atomic_load(&W.ran[u - 1]) != 1) atomic_store(&W.order_bad, 1);
    if (sched_current_rank() == 1) {
      if (atomic_fetch_add(&W.units_by_thief, 1) == 0) {
        atomic_store_explicit(&W.thief_in, 1, memory_order_release);
        wait_flag(&W.own_posted); /* rank 1's own record is queued now */
      }
    } else if (u == 1) {
      /* the owner holds its loop open until rank 1 ran its own record:
       * the loop is running while rank 1 gets to its stream */
      wait_flag(&W.own_ran);
    }
    atomic_fetch_add(&W.ran[u], 1);
  }
}

/* The owner's first chunk cancels the loop's record (a cancel from any
 * thread looks the same to the loop); a thief's chunk, once started,
 * waits for the cancel, so every other chunk starts after it. */
static void cancel_units(int64_t begin, int64_t end, void *ctx) {
  (void)ctx;
  for (int64_t u = begin; u < end; u++) {
    if (sched_current_rank() == 0 && u == 0) {
      sched_pool_cancel(W.p);
      atomic_store_explicit(&W.cancelled, 1, memory_order_release);
    } else if (sched_current_rank() != 0) {
      wait_flag(&W.cancelled);
    }
    atomic_fetch_add(&W.cancel_ran, 1);
  }
}

static void count_units(int64_t begin, int64_t end, void *ctx) {
  (void)ctx;
  for (int64_t u = begin; u < end; u++) {
    atomic_fetch_add(&W.ran[u], 1);
    atomic_fetch_add(&W.win_sum, u);
  }
}

static void full_units(int64_t begin, int64_t end, void *ctx) {
  _Atomic int64_t *n = ctx;
  atomic_fetch_add(n, end - begin);
}

static void exec(void *ctx, void *record, int rank) {
  (void)ctx;
  (void)rank;
  const rec *r = record;
  switch (r->kind) {
  case REC_LOOP:
    if (W.steps) sched_parallel_steps(UNITS, GRAIN, loop_units, NULL);
    else sched_parallel_for(UNITS, GRAIN, loop_units, NULL);
    atomic_store_explicit(&W.loop_done, 1, memory_order_release);
    break;
  case REC_OWN:
    W.thief_units_at_own = atomic_load(&W.units_by_thief);
    W.loop_running_at_own = !atomic_load_explicit(&W.loop_done, memory_order_acquire);
    atomic_store_explicit(&W.own_ran, 1, memory_order_release);
    break;
  case REC_CANCEL_LOOP:
    sched_cancel_arm();
    W.cancel_result = sched_parallel_for(64 * GRAIN, GRAIN, cancel_units, NULL);
    break;
  case REC_FULL_LOOP: {
    _Atomic int64_t n = 0;
    sched_cancel_arm();
    W.full_result = sched_parallel_for(64 * GRAIN, GRAIN, full_units, &n);
    W.full_ran = atomic_load(&n);
    break;
  }
  case REC_WINDOWS:
    sched_parallel_for(WIN_UNITS, 1, count_units, NULL);
    break;
  }
}

static void issue(sched_pool *p, int rank, int kind) {
  sched_claim c;
  rec *r = sched_pool_claim(p, rank, &c);
  r->kind = kind;
  sched_pool_commit(p, &c);
}

static sched_pool *make_pool(int ranks) {
  sched_pool_config cfg = {.ranks = ranks, .queue_capacity = 64,
                           .record_size = sizeof(rec), .exec = exec};
  const char *why;
  sched_pool *p = sched_pool_create(&cfg, &why);
  if (!p) fail_msg("sched_pool_create: %s", why);
  return p;
}

static void reset(bool steps) {
  memset(&W, 0, sizeof W);
  W.steps = steps;
}

/* rank 0 runs a loop of two chunks; rank 1 steals the second; once rank 1
 * is inside it, a record of rank 1's own is queued. Returns after both
 * ran and the pool drained. */
static void run_thief_case(bool steps) {
  reset(steps);
  W.p = make_pool(2);
  issue(W.p, 0, REC_LOOP);
  wait_flag(&W.thief_in);
  issue(W.p, 1, REC_OWN);
  atomic_store_explicit(&W.own_posted, 1, memory_order_release);
  while (!sched_pool_try_drain(W.p, 1000000000)) {}
  sched_pool_stats st = sched_pool_get_stats(W.p);
  sched_pool_destroy(W.p);
  for (int u = 0; u < UNITS; u++)
    if (atomic_load(&W.ran[u]) != 1)
      fail_msg("unit %d ran %d times", u, atomic_load(&W.ran[u]));
  assert_int_equal(atomic_load(&W.order_bad), 0);
  assert_true(W.loop_running_at_own);
  if (steps) assert_true(st.chunks_left >= 1);
}

/* the fix: rank 1 ran one unit of the stolen chunk, then its own record,
 * while rank 0's loop was still running; the rest of the chunk ran once,
 * in order (by rank 0 stealing it back, or rank 1 later) */
static void test_thief_leaves_steps_chunk(void **state) {
  (void)state;
  run_thief_case(true);
  assert_int_equal(W.thief_units_at_own, 1);
}

/* a plain loop keeps its contract: a stolen chunk is run whole (units
 * may not be split), so rank 1's record waits for the chunk */
static void test_plain_chunk_runs_whole(void **state) {
  (void)state;
  run_thief_case(false);
  assert_int_equal(W.thief_units_at_own, GRAIN);
}

/* more chunks than a window: every unit once (a conservation count and
 * the sum of the unit indices against the closed form) */
static void test_windows_conserve(void **state) {
  (void)state;
  reset(false);
  W.p = make_pool(3);
  issue(W.p, 0, REC_WINDOWS);
  while (!sched_pool_try_drain(W.p, 1000000000)) {}
  sched_pool_destroy(W.p);
  for (int u = 0; u < WIN_UNITS; u++)
    if (atomic_load(&W.ran[u]) != 1)
      fail_msg("unit %d ran %d times", u, atomic_load(&W.ran[u]));
  int64_t n = WIN_UNITS;
  assert_int_equal(atomic_load(&W.win_sum), n * (n - 1) / 2);
}

/* a loop cancelled midway skips chunks it had not started and says so;
 * a record claimed after the cancel runs its loop whole */
static void test_cancel_loop(void **state) {
  (void)state;
  reset(false);
  W.p = make_pool(2);
  issue(W.p, 0, REC_CANCEL_LOOP);
  while (!sched_pool_try_drain(W.p, 1000000000)) {}
  assert_false(W.cancel_result);
  int64_t ran = atomic_load(&W.cancel_ran);
  /* the chunks started before the cancel finish: the owner's first and
   * at most one the other rank took */
  if (ran != GRAIN && ran != 2 * GRAIN)
    fail_msg("the cancelled loop ran %lld of %d units", (long long)ran, 64 * GRAIN);
  issue(W.p, 1, REC_FULL_LOOP);
  while (!sched_pool_try_drain(W.p, 1000000000)) {}
  sched_pool_destroy(W.p);
  assert_true(W.full_result);
  assert_int_equal(W.full_ran, 64 * GRAIN);
}

/* the plan of a GEMM: blocks cover C, panels cover K, and no unit (one
 * panel of one block: what a thief holds before it looks at its own
 * records) exceeds the step bound; a 3072^3 float32 matmul was two units
 * of 29 GFLOP each on two CPUs */
static void check_plan(int64_t m, int64_t n, int64_t k) {
  cpu_gemm_grid g;
  cpu_gemm_plan(m, n, k, &g);
  int64_t rb = (m + g.mb - 1) / g.mb, cb = (n + g.nb - 1) / g.nb;
  assert_int_equal(g.blocks, rb * cb);
  assert_true(g.mb >= 1 && g.nb >= 1 && g.kc >= 1 && g.panels >= 1);
  assert_true(g.panels * g.kc >= k && (g.panels - 1) * g.kc < (k > 0 ? k : 1));
  double step = 2.0 * (double)g.mb * (double)g.nb * (double)g.kc;
  if (g.kc > 8 && step > CPU_GEMM_STEP_FLOP)
    fail_msg("%lld x %lld x %lld: a unit of %.3g flops (mb %lld nb %lld kc %lld)",
             (long long)m, (long long)n, (long long)k, step, (long long)g.mb,
             (long long)g.nb, (long long)g.kc);
}

static void test_gemm_units_bounded(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {
      {3072, 3072, 3072}, {1024, 1024, 1024}, {4096, 4096, 16384},
      {16384, 16384, 16384}, {64, 64, 1 << 20}, {1, 1 << 20, 4096},
      {1 << 20, 1, 4096}, {7, 9, 11}, {100000, 100000, 64}, {3000, 17, 0}};
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
    check_plan(shapes[i][0], shapes[i][1], shapes[i][2]);
}

/* The panel path against a naive double product: small products with a
 * step bound small enough that every block is several K panels (the
 * later ones adding to C), with either operand transposed (BLAS reads it
 * with a transpose flag: the panels' offsets differ), float64, and
 * dt_linear's bias (the first panel adds to it too); and the same bits
 * on 1 and 2 ranks. */
#define GM 96
#define GN 80
#define GK 1000

static void naive(const double *a, const double *b, const double *bias, double *c,
                  bool ta, bool tb) {
  for (int i = 0; i < GM; i++)
    for (int j = 0; j < GN; j++) {
      double acc = bias ? bias[j] : 0;
      for (int p = 0; p < GK; p++)
        acc += (ta ? a[p * GM + i] : a[i * GK + p]) * (tb ? b[j * GK + p] : b[p * GN + j]);
      c[i * GN + j] = acc;
    }
}

/* C on a runtime of `ranks` ranks; case: 0 plain, 1 A transposed, 2 B
 * transposed, 3 linear (x · Wᵀ + bias) */
static double *panel_product(int ranks, int kase, dt_dtype d, const double *a,
                             const double *b, const double *bias) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks});
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  bool ta = kase == 1, tb = kase == 2 || kase == 3;
  dt_tensor *ta0 = tu_tensor(a, ta ? DT_SHAPE(GK, GM) : DT_SHAPE(GM, GK), d);
  dt_tensor *tb0 = tu_tensor(b, tb ? DT_SHAPE(GN, GK) : DT_SHAPE(GK, GN), d);
  dt_tensor *x = ta ? dt_transpose(ta0, 0, 1) : dt_tensor_retain(ta0);
  dt_tensor *c, *tbias = NULL;
  if (kase == 3) {
    tbias = tu_tensor(bias, DT_SHAPE(GN), d);
    c = dt_linear(x, tb0, tbias);
  } else {
    dt_tensor *y = tb ? dt_transpose(tb0, 0, 1) : dt_tensor_retain(tb0);
    c = dt_matmul(x, y);
    dt_tensor_release(y);
  }
  if (!c) fail_msg("case %d: %s", kase, dt_last_error());
  double *v = tu_values(c);
  tu_release_n((dt_tensor *[]){c, x, ta0, tb0, tbias}, tbias ? 5 : 4);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  return v;
}

static void test_gemm_panels_exact(void **state) {
  (void)state;
  cpu_gemm_set_step(1000000); /* ~8 panels per block for these sizes */
  cpu_gemm_grid g;
  cpu_gemm_plan(GM, GN, GK, &g);
  assert_true(g.panels >= 4);
  double *a = tu_random_values(GM * GK, DT_FLOAT64, 11, -1, 1, false);
  double *b = tu_random_values(GK * GN, DT_FLOAT64, 12, -1, 1, false);
  double *bias = tu_random_values(GN, DT_FLOAT64, 13, -1, 1, false);
  double want[GM * GN];
  for (int kase = 0; kase < 4; kase++)
    for (int f = 0; f < 2; f++) {
      dt_dtype d = f ? DT_FLOAT64 : DT_FLOAT32;
      /* the reference from the values as stored (float32 rounds them) */
      double ra[GM * GK], rb[GK * GN], rbias[GN];
      for (int i = 0; i < GM * GK; i++) ra[i] = tu_round(a[i], d);
      for (int i = 0; i < GK * GN; i++) rb[i] = tu_round(b[i], d);
      for (int i = 0; i < GN; i++) rbias[i] = tu_round(bias[i], d);
      naive(ra, rb, kase == 3 ? rbias : NULL, want, kase == 1, kase >= 2);
      double *one = panel_product(1, kase, d, a, b, bias);
      double *two = panel_product(2, kase, d, a, b, bias);
      char what[64];
      snprintf(what, sizeof what, "case %d %s", kase, f ? "float64" : "float32");
      tu_assert_close(two, want, GM * GN, f ? 1e-12 : 1e-4, f ? 1e-12 : 1e-4, what);
      if (memcmp(one, two, sizeof(double) * GM * GN))
        fail_msg("%s: 1 and 2 ranks differ in bits", what);
      free(one);
      free(two);
    }
  cpu_gemm_set_step(0);
  free(a);
  free(b);
  free(bias);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_thief_leaves_steps_chunk),
      cmocka_unit_test(test_plain_chunk_runs_whole),
      cmocka_unit_test(test_windows_conserve),
      cmocka_unit_test(test_cancel_loop),
      cmocka_unit_test(test_gemm_units_bounded),
      cmocka_unit_test(test_gemm_panels_exact),
  };
  return TU_RUN_TESTS_WITH_ALARM(120, tests);
}
