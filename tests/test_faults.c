/* Host memory running out on the rank threads (core/host_alloc.h's injection
 * hook): a program of redistributes (all_gather, all_reduce,
 * reduce_scatter, all_to_all, cross-mesh), a matmul whose kernel needs
 * scratch, and futures with callbacks runs with every n-th rank-side host
 * allocation failing. Every result must be either right (compared with
 * values computed here) or an out-of-memory error; nothing may crash, no
 * collective may wait for a member that failed (the watchdog is set far
 * beyond the time the program may take, and no message may say "timed
 * out"), and once injection stops the same runtime runs the program
 * exactly. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/host_alloc.h"
#include "testutil.h"

#define N 8 /* the global tensors are N x N */

typedef struct tally { int ok, oom; } tally;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* a result: right values, or an out-of-memory error that is not a timeout */
static void judge(tally *t, const char *what, dt_status st, const float *got,
                  const float *want, int n) {
  if (st == DT_OK) {
    for (int i = 0; i < n; i++)
      if (got[i] != want[i])
        fail_msg("%s: element %d is %g, want %g (reported DT_OK)", what, i,
                 (double)got[i], (double)want[i]);
    t->ok++;
    return;
  }
  const char *msg = dt_last_error();
  if (st != DT_ERR_OUT_OF_MEMORY || strstr(msg, "timed out"))
    fail_msg("%s: %s: %s (want right values or out of memory)", what,
             dt_status_name(st), msg);
  t->oom++;
}

/* d: NULL when its input was already known to have failed (the issuing
 * thread itself is never injected) */
static void check_dtensor(tally *t, const char *what, dt_tensor *d,
                          const float *want) {
  float got[N * N] = {0};
  if (!d) {
    judge(t, what, dt_last_status(), got, want, N * N);
    return;
  }
  judge(t, what, dt_to_host(d, got, sizeof got), got, want, N * N);
  dt_tensor_release(d);
}

typedef struct cb_seen { _Atomic int calls; _Atomic int ok; } cb_seen;
static void on_done(dt_future *f, dt_status st, void *user) {
  cb_seen *s = user;
  (void)f;
  if (st == DT_OK) atomic_fetch_add(&s->ok, 1);
  atomic_fetch_add(&s->calls, 1);
}

/* an async fetch whose future has a callback (run off the rank threads) */
static void fetch_with_callback(tally *t, dt_tensor *tf, float *got,
                                const float *want) {
  cb_seen seen = {0};
  dt_future *f = dt_to_host_async(tf, got, sizeof(float) * N * N);
  if (!f) { /* tf was already known to have failed */
    judge(t, "int32 matmul, async fetch", dt_last_status(), got, want, N * N);
    return;
  }
  assert_int_equal(dt_future_then(f, on_done, &seen), DT_OK);
  dt_status st = dt_future_wait(f, -1);
  judge(t, "int32 matmul (kernel scratch), async fetch", st, got, want, N * N);
  while (atomic_load(&seen.calls) == 0) { /* the callback runs elsewhere */
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(atomic_load(&seen.ok), st == DT_OK);
  dt_future_release(f);
}


static void program(dt_runtime *rt, dt_mesh *line, dt_mesh *grid,
                    dt_mesh *left, dt_mesh *right, tally *t) {
  dt_runtime_set_current(rt);
  float x[N * N];
  for (int i = 0; i < N * N; i++) x[i] = (float)(i % 13) - 4.0f;
  dt_tensor *s = dt_from_host(x, DT_SHAPE(N, N), &(dt_tensor_options){
      .mesh = grid, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1))});
  assert_non_null(s);
  check_dtensor(t, "S(0),S(1) -> R,R (all_gather x2)", dt_redistribute(
      s, grid, DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE)), x);
  check_dtensor(t, "S(0),S(1) -> S(1),S(0) (all_to_all)", dt_redistribute(
      s, grid, DT_PLACEMENTS(DT_SHARD(1), DT_SHARD(0))), x);
  dt_tensor_release(s);

  dt_tensor *p = dt_from_host(x, DT_SHAPE(N, N), &(dt_tensor_options){
      .mesh = line, .placements = DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM))});
  assert_non_null(p);
  check_dtensor(t, "P -> R (all_reduce)",
                dt_redistribute(p, line, DT_PLACEMENTS(DT_REPLICATE)), x);
  check_dtensor(t, "P -> S(1) (reduce_scatter)",
                dt_redistribute(p, line, DT_PLACEMENTS(DT_SHARD(1))), x);
  dt_tensor_release(p);

  dt_tensor *l = dt_from_host(x, DT_SHAPE(N, N), &(dt_tensor_options){
      .mesh = left, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  assert_non_null(l);
  check_dtensor(t, "cross-mesh S(0) -> S(1)",
                dt_redistribute(l, right, DT_PLACEMENTS(DT_SHARD(1))), x);
  dt_tensor_release(l);

  /* ops on DTensors: each rank allocates its call, its shards' storage
   * structs and their data; a failure poisons that rank's shard */
  dt_tensor *g = dt_from_host(x, DT_SHAPE(N, N), &(dt_tensor_options){
      .mesh = grid, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1))});
  assert_non_null(g);
  float twice[N * N], tx[N * N];
  for (int i = 0; i < N * N; i++) twice[i] = 2 * x[i];
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) tx[i * N + j] = x[j * N + i];
  check_dtensor(t, "DTensor add on a 2-D mesh", dt_add(g, g), twice);
  check_dtensor(t, "DTensor transpose (a view made contiguous on the ranks)",
                dt_transpose(g, 0, 1), tx);
  dt_tensor_release(g);

  /* int32 matmul: the kernel packs both operands into host scratch */
  int32_t a[N * N], b[N * N];
  float want[N * N], got[N * N] = {0};
  for (int i = 0; i < N * N; i++) {
    a[i] = i % 7 - 3;
    b[i] = (i * 5) % 11 - 5;
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      long acc = 0;
      for (int k = 0; k < N; k++) acc += (long)a[i * N + k] * b[k * N + j];
      want[i * N + j] = (float)acc;
    }
  dt_tensor_options o = {.dtype = DT_INT32, .device = tu_dev(1)};
  dt_tensor *ta = dt_from_host(a, DT_SHAPE(N, N), &o);
  dt_tensor *tb = dt_from_host(b, DT_SHAPE(N, N), &o);
  dt_tensor *tc = dt_matmul(ta, tb);
  dt_tensor *tf = dt_cast(tc, DT_FLOAT32);
  if (tf) fetch_with_callback(t, tf, got, want);
  else judge(t, "int32 matmul", dt_last_status(), got, want, N * N);
  dt_tensor_release(ta);
  dt_tensor_release(tb);
  dt_tensor_release(tc);
  dt_tensor_release(tf);
}

static void test_host_oom_on_rank_threads(void **state) {
  (void)state;
  /* a far watchdog: a member left waiting would show as a slow run */
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 4, .collective_timeout_ms = 60000});
  assert_non_null(rt);
  dt_mesh *line = dt_mesh_init(rt, NULL, DT_SHAPE(4), NULL);
  dt_mesh *grid = dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), NULL);
  dt_mesh *left = dt_mesh_create(rt, NULL, DT_SHAPE(2), (int[]){0, 1}, NULL);
  dt_mesh *right = dt_mesh_create(rt, NULL, DT_SHAPE(2), (int[]){2, 3}, NULL);
  assert_true(line && grid && left && right);
  static const uint64_t every[] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 31, 64};
  tally all = {0};
  for (size_t e = 0; e < sizeof every / sizeof every[0]; e++) {
    uint64_t before = core_fault_injected();
    double t0 = now_s();
    core_fault_host_alloc(every[e], -1);
    tally t = {0};
    for (int round = 0; round < 6; round++) program(rt, line, grid, left, right, &t);
    core_fault_host_alloc(0, -1);
    double took = now_s() - t0;
    uint64_t injected = core_fault_injected() - before;
    printf("every %3llu: %3d right, %3d out of memory, %5llu allocations "
           "failed, %.2f s\n", (unsigned long long)every[e], t.ok, t.oom,
           (unsigned long long)injected, took);
    assert_true(injected > 0);          /* the hook did fire */
    if (every[e] == 1) assert_int_equal(t.ok, 0); /* nothing can succeed */
    assert_true(took < 30.0);           /* nobody waited for the watchdog */
    all.ok += t.ok;
    all.oom += t.oom;
    /* the runtime is whole again: the program is exact */
    tally clean = {0};
    program(rt, line, grid, left, right, &clean);
    assert_int_equal(clean.oom, 0);
  }
  assert_true(all.ok > 0 && all.oom > 0); /* both outcomes were exercised */
  dt_mesh_release(line);
  dt_mesh_release(grid);
  dt_mesh_release(left);
  dt_mesh_release(right);
  dt_runtime_destroy(rt);
}

/* a member that cannot make its call (sim_coll_abstain) fails the round on
 * every member at once, with its message; the group stays usable */
static void test_abstain_fails_round_fast(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 4, .collective_timeout_ms = 60000});
  dt_mesh *line = dt_mesh_init(rt, NULL, DT_SHAPE(4), NULL);
  assert_true(rt && line);
  /* rank 2 cannot allocate its output: it abstains, and the all_gather
   * fails on every rank naming rank 2's error, long before the watchdog */
  float x[4096];
  for (int i = 0; i < 4096; i++) x[i] = (float)i;
  dt_tensor *s = dt_from_host(x, DT_SHAPE(4096), &(dt_tensor_options){
      .mesh = line, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  assert_non_null(s);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK); /* s is whole */
  double t0 = now_s();
  core_fault_host_alloc(1, 2); /* every allocation on rank 2 fails ... */
  dt_tensor *r = dt_redistribute(s, line, DT_PLACEMENTS(DT_REPLICATE));
  assert_non_null(r);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  core_fault_host_alloc(0, -1);
  float got[4096];
  dt_status st = dt_to_host(r, got, sizeof got);
  assert_int_equal(st, DT_ERR_OUT_OF_MEMORY);
  const char *msg = dt_last_error();
  assert_null(strstr(msg, "timed out"));
  for (int rank = 0; rank < 4; rank++) { /* every shard failed, with why */
    float part[4096];
    st = dt_local_to_host(r, rank, part, sizeof part);
    assert_int_equal(st, DT_ERR_OUT_OF_MEMORY);
    msg = dt_last_error();
    if (rank != 2 && (!strstr(msg, "member 2 (rank 2) could not take part") ||
                      !strstr(msg, "rank 2: out of host memory")))
      fail_msg("rank %d: %s", rank, msg);
  }
  assert_true(now_s() - t0 < 10.0);
  dt_tensor_release(r);
  /* ... and afterwards the same group all_gathers exactly */
  r = dt_redistribute(s, line, DT_PLACEMENTS(DT_REPLICATE));
  assert_int_equal(dt_to_host(r, got, sizeof got), DT_OK);
  assert_memory_equal(got, x, sizeof x);
  dt_tensor_release(r);
  dt_tensor_release(s);
  dt_mesh_release(line);
  dt_runtime_destroy(rt);
}

/* a failed assertion leaves the test early: never leave injection on */
static int injection_off(void **state) {
  (void)state;
  core_fault_host_alloc(0, -1);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_host_oom_on_rank_threads, injection_off),
      cmocka_unit_test_teardown(test_abstain_fails_round_fast, injection_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
