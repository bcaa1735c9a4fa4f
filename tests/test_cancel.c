/* dt_runtime_cancel: huge legal work can be stopped. A sum over 2^62
 * elements (an expanded one-element tensor: legal, and hours of work) is
 * cancelled from another thread once its kernel is known to run (the
 * pool's chunk counter moved); the fetch the main thread is blocked in
 * fails with the cancel's error, and the runtime then computes a fresh
 * sum exactly (against the element count). Work queued behind the
 * cancelled op is cancelled with it; work issued after the call runs.
 * A watchdog turns a cancel that does not stop the kernel into a failure. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "dtorch/dtorch.h"
#include "runtime/runtime.h"
#include "sched/pool.h"
#include "testutil.h"
#include "threads.h"

#define HUGE_N ((int64_t)1 << 62)

static int64_t chunks(dt_runtime *rt) {
  sched_pool_stats s = sched_pool_get_stats(rt->pool);
  return s.chunks_run + s.chunks_stolen;
}

/* sum over n copies of one float32 1 on `dev` */
static dt_tensor *sum_of_ones(int64_t n, const char *dev) {
  dt_tensor *one = dt_ones(DT_SHAPE(1), &(dt_tensor_options){.device = dev});
  assert_non_null(one);
  dt_tensor *e = dt_expand(one, DT_SHAPE(n));
  assert_non_null(e);
  dt_tensor *s = dt_sum(e, NULL, 0, false);
  assert_non_null(s);
  dt_tensor_release(e);
  dt_tensor_release(one);
  return s;
}

typedef struct canceller { dt_runtime *rt; int64_t from; dt_status st; } canceller;

/* waits until the huge sum's kernel has run chunks, then cancels */
static void *cancel_when_running(void *arg) {
  canceller *c = arg;
  while (chunks(c->rt) < c->from + 2) tu_sleep_ns(100000);
  c->st = dt_runtime_cancel(c->rt);
  return NULL;
}

/* op: the op whose cancel the message names (NULL: any; an op cancelled
 * before it ran may report its input's, e.g. dt_ones's) */
static void expect_cancelled(dt_tensor *t, const char *what, const char *op) {
  float v;
  dt_status st = dt_to_host(t, &v, sizeof v);
  if (st != DT_ERR_TIMEOUT || !strstr(dt_last_error(), "cancelled by dt_runtime_cancel"))
    fail_msg("%s: fetch gave %s (%s), expected the cancel", what, dt_status_name(st),
             dt_last_error());
  if (op && strncmp(dt_last_error(), op, strlen(op)))
    fail_msg("%s: message %s", what, dt_last_error());
}

static void expect_sum(dt_tensor *t, double want) {
  float v = 0;
  dt_status st = dt_to_host(t, &v, sizeof v);
  if (st != DT_OK) fail_msg("fetch: %s", dt_last_error());
  assert_true((double)v == want);
}

static void test_cancel_running_sum(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  dt_tensor *warm = sum_of_ones(1 << 20, "cpu:0"); /* exact in float32 */
  expect_sum(warm, 1 << 20);
  dt_tensor_release(warm);
  canceller c = {rt, chunks(rt), DT_ERR_INTERNAL};
  dt_tensor *huge = sum_of_ones(HUGE_N, "cpu:0");
  dt_tensor *behind = sum_of_ones(HUGE_N, "cpu:0"); /* queued behind it */
  pthread_t t = tu_spawn(cancel_when_running, &c);
  expect_cancelled(huge, "the running sum", "dt_sum:");
  pthread_join(t, NULL);
  assert_int_equal(c.st, DT_OK);
  expect_cancelled(behind, "the sum queued behind it", NULL);
  /* issued after the cancel: runs, on both ranks, exactly */
  dt_tensor *after0 = sum_of_ones(3 << 20, "cpu:0");
  dt_tensor *after1 = sum_of_ones(5 << 20, "cpu:1");
  expect_sum(after0, 3 << 20);
  expect_sum(after1, 5 << 20);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  dt_tensor_release(after0);
  dt_tensor_release(after1);
  dt_tensor_release(huge);
  dt_tensor_release(behind);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* one rank: the loop runs its chunks in turn and still sees the cancel */
static void test_cancel_one_rank(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 1});
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  dt_tensor *warm = sum_of_ones(1 << 20, "cpu:0");
  expect_sum(warm, 1 << 20);
  dt_tensor_release(warm);
  canceller c = {rt, chunks(rt), DT_ERR_INTERNAL};
  dt_tensor *huge = sum_of_ones(HUGE_N, "cpu:0");
  pthread_t t = tu_spawn(cancel_when_running, &c);
  expect_cancelled(huge, "the one-rank sum", "dt_sum:");
  pthread_join(t, NULL);
  assert_int_equal(c.st, DT_OK);
  dt_tensor *after = sum_of_ones(1 << 20, "cpu:0");
  expect_sum(after, 1 << 20);
  dt_tensor_release(after);
  dt_tensor_release(huge);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

static void test_cancel_misuse(void **state) {
  (void)state;
  tu_expect_status(dt_runtime_cancel(NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_runtime_cancel", "rt is NULL", NULL);
  /* nothing pending: a no-op, and later work runs */
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  assert_non_null(rt);
  assert_int_equal(dt_runtime_cancel(rt), DT_OK);
  dt_runtime_set_current(rt);
  dt_tensor *s = sum_of_ones(1 << 18, "cpu:1");
  expect_sum(s, 1 << 18);
  dt_tensor_release(s);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cancel_running_sum),
      cmocka_unit_test(test_cancel_one_rank),
      cmocka_unit_test(test_cancel_misuse),
  };
  return TU_RUN_TESTS_WITH_ALARM(120, tests);
}
