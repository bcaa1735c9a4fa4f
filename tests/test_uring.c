/* Completions in the caller's io_uring: a future's
 * completion arrives as a CQE {user_data, res} in a ring the test owns —
 * success (res 0, the data there), failure (res -status), an already
 * complete future, four threads' futures at once; errors word for word. */
#include <liburing.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"

static struct io_uring ring;

static int setup(void **state) {
  (void)state;
  return io_uring_queue_init(64, &ring, 0);
}

static int teardown(void **state) {
  (void)state;
  io_uring_queue_exit(&ring);
  return 0;
}

/* the next CQE within 10 s */
static struct io_uring_cqe next_cqe(void) {
  struct io_uring_cqe *c;
  struct __kernel_timespec ts = {.tv_sec = 10};
  int r = io_uring_wait_cqe_timeout(&ring, &c, &ts);
  if (r < 0) fail_msg("no CQE within 10 s: %s", strerror(-r));
  struct io_uring_cqe got = *c;
  io_uring_cqe_seen(&ring, c);
  return got;
}

static void test_success(void **state) {
  (void)state;
  dt_tensor *a = dt_full(DT_SHAPE(1000), 2.5, NULL), *b = dt_mul_scalar(a, 2);
  float host[1000];
  dt_future *f = dt_to_host_async(b, host, sizeof host);
  assert_non_null(f);
  assert_int_equal(dt_future_notify_ring(f, ring.ring_fd, 42), DT_OK);
  struct io_uring_cqe c = next_cqe();
  assert_int_equal(c.user_data, 42);
  assert_int_equal(c.res, 0);
  /* complete when it arrives; the wait (at once) orders the reads after
   * the ranks' writes for the memory model (the CQE's own ordering goes
   * through the kernel, which ThreadSanitizer cannot see) */
  assert_int_equal(dt_future_wait(f, 0), DT_OK);
  assert_true(host[0] == 5.0f && host[999] == 5.0f);
  /* an already complete future posts at once */
  assert_int_equal(dt_future_notify_ring(f, ring.ring_fd, 43), DT_OK);
  c = next_cqe();
  assert_int_equal(c.user_data, 43);
  dt_future_release(f);
  TU_RELEASE(a, b);
}

static void test_failure(void **state) {
  (void)state;
  /* a rank with 1 KiB of memory cannot hold 4 KiB: the result is
   * poisoned and its fetch fails */
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 1,
                                                           .device_memory = 1024});
  dt_runtime_set_current(rt);
  dt_tensor *a = dt_ones(DT_SHAPE(1024), NULL);
  float host[1024];
  dt_future *f = a ? dt_to_host_async(a, host, sizeof host) : NULL;
  assert_non_null(f);
  assert_int_equal(dt_future_notify_ring(f, ring.ring_fd, 7), DT_OK);
  struct io_uring_cqe c = next_cqe();
  assert_int_equal(c.user_data, 7);
  assert_int_equal(c.res, -(int)DT_ERR_OUT_OF_MEMORY);
  assert_int_equal(dt_future_status(f), DT_ERR_OUT_OF_MEMORY);
  dt_future_release(f);
  dt_tensor_release(a);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* four threads, eight futures each, one ring */
static void body(void *arg, int i) {
  (void)arg;
  for (int k = 0; k < 8; k++) {
    dt_tensor *a = dt_full(DT_SHAPE(16), i, NULL);
    float host[16];
    dt_future *f = dt_to_host_async(a, host, sizeof host);
    TU_CHECK(f && dt_future_notify_ring(f, ring.ring_fd, (uint64_t)(100 * i + k)) == DT_OK,
             "%s", dt_last_error());
    TU_CHECK_TRUE(dt_future_wait(f, -1) == DT_OK);
    dt_future_release(f);
    dt_tensor_release(a);
  }
}

static void test_threads(void **state) {
  (void)state;
  tu_run_threads(4, body, NULL);
  TU_ASSERT_NO_THREAD_FAILURES();
  bool seen[4][8] = {{false}};
  for (int n = 0; n < 32; n++) {
    struct io_uring_cqe c = next_cqe();
    assert_int_equal(c.res, 0);
    int i = (int)(c.user_data / 100), k = (int)(c.user_data % 100);
    assert_true(i < 4 && k < 8 && !seen[i][k]);
    seen[i][k] = true;
  }
}

static void test_errors(void **state) {
  (void)state;
  assert_int_equal(dt_future_notify_ring(NULL, ring.ring_fd, 1), DT_ERR_INVALID_ARGUMENT);
  assert_string_equal(dt_last_error(), "dt_future_notify_ring: f is NULL");
  dt_tensor *a = dt_ones(DT_SHAPE(4), NULL);
  float host[4];
  dt_future *f = dt_to_host_async(a, host, sizeof host);
  assert_int_equal(dt_future_notify_ring(f, -1, 1), DT_ERR_INVALID_ARGUMENT);
  assert_string_equal(dt_last_error(), "dt_future_notify_ring: ring_fd -1 is not a "
                      "file descriptor");
  /* host is this frame's: the copy must land before it returns */
  assert_int_equal(dt_future_wait(f, -1), DT_OK);
  dt_future_release(f);
  dt_tensor_release(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_success),
    cmocka_unit_test(test_failure),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_errors),
  };
  tu_alarm(120);
  return cmocka_run_group_tests(tests, setup, teardown);
}
