/* dt_runtime_queue_depth: records issued to a rank and not yet run. A
 * stall fault holds rank 0 asleep for 400 ms at its next record, so the
 * ops issued behind it must all be counted (a count fixed by the test, not
 * by timing); rank 1, given nothing, has 0; after the work drains, rank 0
 * returns to 0; bad arguments fail with -1 and a message. */
#include <string.h>
#include <time.h>

#include "testutil.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_depth_behind_a_stalled_rank(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  assert_non_null(rt);
  assert_int_equal(dt_runtime_queue_depth(rt, 0), 0);
  dt_tensor_options on0 = {.device = "cpu:0"};
  dt_runtime_set_current(rt);
  dt_tensor *a = dt_zeros(DT_SHAPE(4), &on0);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  /* the synchronize's barrier completes inside its record, before each
   * rank pops it: wait until both queues are empty, so the counts below
   * are the ops issued behind the stall and nothing else */
  for (int i = 0; i < 2000 && (dt_runtime_queue_depth(rt, 0) != 0 ||
                               dt_runtime_queue_depth(rt, 1) != 0); i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  assert_int_equal(dt_runtime_queue_depth(rt, 0), 0);
  assert_int_equal(dt_runtime_queue_depth(rt, 1), 0);
  assert_int_equal(dt_fault_inject(rt, &(dt_fault){.kind = DT_FAULT_STALL, .rank = 0,
                                                   .after = 1, .stall_ms = 400}), DT_OK);
  enum { N = 20 };
  double t0 = now_s();
  dt_tensor *t[N];
  for (int i = 0; i < N; i++) t[i] = dt_add_scalar(a, i); /* each one record */
  int64_t d0 = dt_runtime_queue_depth(rt, 0), d1 = dt_runtime_queue_depth(rt, 1);
  if (now_s() - t0 < 0.3) { /* issued while rank 0 sleeps: none has run */
    assert_true(d0 >= N - 1);
    assert_true(d0 <= N);
  }
  assert_int_equal(d1, 0);
  for (int i = 0; i < N; i++) dt_tensor_release(t[i]);
  dt_tensor_release(a);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  int64_t d = -1;
  for (int i = 0; i < 2000 && (d = dt_runtime_queue_depth(rt, 0)) != 0; i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  assert_int_equal(d, 0);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  tu_leaks_end();
}

static void test_bad_arguments(void **state) {
  (void)state;
  dt_clear_error();
  assert_int_equal(dt_runtime_queue_depth(NULL, 0), -1);
  assert_non_null(strstr(dt_last_error(), "dt_runtime_queue_depth: rt is NULL"));
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  assert_int_equal(dt_runtime_queue_depth(rt, 2), -1);
  assert_non_null(strstr(dt_last_error(), "rank 2 is outside [0, 2)"));
  assert_int_equal(dt_runtime_queue_depth(rt, -1), -1);
  dt_runtime_destroy(rt);
  dt_clear_error();
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_depth_behind_a_stalled_rank),
    cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
