/* The execution engine through the public API: runtimes (options, env,
 * create/destroy cycles), ranks as devices ("cpu:N"), mixed work on 8 and
 * 64 ranks on a 2-core machine, device memory limits and out-of-memory,
 * poisoned tensors, async fetches and futures, idle CPU. */
#include <math.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "threads.h"

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* dt_runtime_create(opts) must fail with status and message substrings */
#define EXPECT_NO_RUNTIME(opts, status, ...)                                \
  do {                                                                      \
    dt_runtime *r_ = dt_runtime_create(opts);                               \
    if (r_) {                                                               \
      dt_runtime_destroy(r_);                                               \
      fail_msg("dt_runtime_create succeeded, want %s", #status);            \
    }                                                                       \
    tu_expect_status(dt_last_status(), status, __VA_ARGS__);                \
  } while (0)

static void test_options_and_env(void **state) {
  (void)state;
  EXPECT_NO_RUNTIME(&(dt_runtime_options){.num_ranks = -1}, DT_ERR_INVALID_ARGUMENT, "dt_runtime_create", "-1", NULL);
  EXPECT_NO_RUNTIME(&(dt_runtime_options){.num_ranks = 5000}, DT_ERR_INVALID_ARGUMENT, "num_ranks", "5000", NULL);
  EXPECT_NO_RUNTIME(&(dt_runtime_options){.device = "cuda"}, DT_ERR_DEVICE, "dt_runtime_create", "cuda", NULL);
  EXPECT_NO_RUNTIME(&(dt_runtime_options){.ring_capacity = 3}, DT_ERR_INVALID_ARGUMENT, "ring_capacity", "3", NULL);
  /* every bad option fails with a message, before anything is allocated */
  EXPECT_NO_RUNTIME(&(dt_runtime_options){.ring_capacity = -4}, DT_ERR_INVALID_ARGUMENT, "options.ring_capacity", "-4", NULL);
  EXPECT_NO_RUNTIME(&(dt_runtime_options){.ring_capacity = 1 << 26}, DT_ERR_INVALID_ARGUMENT, "options.ring_capacity", "67108864", NULL);
  EXPECT_NO_RUNTIME((&(dt_runtime_options){.num_ranks = 4096, .ring_capacity = 1 << 20}), DT_ERR_INVALID_ARGUMENT, "records in flight", NULL);
  EXPECT_NO_RUNTIME(&(dt_runtime_options){.spin_us = -1}, DT_ERR_INVALID_ARGUMENT, "options.spin_us", "-1", NULL);
  EXPECT_NO_RUNTIME(&(dt_runtime_options){.collective_timeout_ms = INT64_MAX}, DT_ERR_INVALID_ARGUMENT, "collective_timeout_ms", NULL);
  EXPECT_NO_RUNTIME(&(dt_runtime_options){.pin_ranks = 2}, DT_ERR_INVALID_ARGUMENT, "options.pin_ranks", "2", NULL);
  setenv("DTORCH_PIN_RANKS", "yes", 1);
  EXPECT_NO_RUNTIME(NULL, DT_ERR_INVALID_ARGUMENT, "DTORCH_PIN_RANKS", "yes", NULL);
  unsetenv("DTORCH_PIN_RANKS");
  static const char *const bad_timeouts[] = {"1e300", "nan", "-1", "0.0005", "5s"};
  for (int i = 0; i < 5; i++) {
    setenv("DTORCH_COLLECTIVE_TIMEOUT", bad_timeouts[i], 1);
    EXPECT_NO_RUNTIME(NULL, DT_ERR_INVALID_ARGUMENT, "DTORCH_COLLECTIVE_TIMEOUT", bad_timeouts[i], NULL);
  }
  unsetenv("DTORCH_COLLECTIVE_TIMEOUT");
  static const char *const bad_sizes[] = {"nan", "0.5", "1e30", "-4K", "inf"};
  for (int i = 0; i < 5; i++) {
    setenv("DTORCH_DEVICE_MEMORY", bad_sizes[i], 1);
    EXPECT_NO_RUNTIME(NULL, DT_ERR_INVALID_ARGUMENT, "DTORCH_DEVICE_MEMORY", bad_sizes[i], NULL);
  }
  unsetenv("DTORCH_DEVICE_MEMORY");
  setenv("DTORCH_NUM_RANKS", "abc", 1);
  EXPECT_NO_RUNTIME(NULL, DT_ERR_INVALID_ARGUMENT,
                  "DTORCH_NUM_RANKS", "abc", NULL);
  setenv("DTORCH_NUM_RANKS", "3", 1);
  dt_runtime *rt = dt_runtime_create(NULL);
  assert_non_null(rt);
  assert_int_equal(dt_runtime_num_ranks(rt), 3);
  dt_runtime_destroy(rt);
  unsetenv("DTORCH_NUM_RANKS");
  setenv("DTORCH_DEVICE_MEMORY", "12X", 1);
  EXPECT_NO_RUNTIME(NULL, DT_ERR_INVALID_ARGUMENT,
                  "DTORCH_DEVICE_MEMORY", "12X", NULL);
  setenv("DTORCH_DEVICE_MEMORY", "64K", 1);
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_memory_stats ms;
  assert_int_equal(dt_runtime_memory(rt, 1, &ms), DT_OK);
  assert_int_equal(ms.capacity, 65536);
  tu_expect_status(dt_runtime_memory(rt, 2, &ms), DT_ERR_INVALID_ARGUMENT,
                   "dt_runtime_memory", "2", NULL);
  dt_runtime_destroy(rt);
  unsetenv("DTORCH_DEVICE_MEMORY");
  rt = dt_runtime_create(NULL);
  assert_int_equal(dt_runtime_num_ranks(rt), 8); /* the default */
  dt_runtime_destroy(rt);
  dt_runtime_destroy(NULL);
}

/* 1,000 create/destroy cycles, some with work in flight at destroy */
static void test_create_destroy_cycles(void **state) {
  (void)state;
  tu_leaks_begin();
  int64_t bytes0 = dt_live_storage_bytes();
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  const int cycles = 200;
#else
  const int cycles = 1000;
#endif
  for (int i = 0; i < cycles; i++) {
    dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 1 + i % 8});
    assert_non_null(rt);
    if (i % 3 == 0) {
      assert_int_equal(dt_runtime_set_current(rt), DT_OK);
      dt_tensor *a = dt_ones(DT_SHAPE(64), NULL);
      dt_tensor *b = dt_add(a, a);
      dt_tensor_release(a);
      dt_tensor_release(b); /* released while (maybe) still running */
      dt_runtime_set_current(NULL);
    }
    dt_runtime_destroy(rt);
  }
  assert_int_equal(dt_live_storage_bytes(), bytes0);
  tu_leaks_end();
}

/* tensors on each rank of a runtime: results equal a host reference, and
 * work on different ranks runs concurrently and independently */
static void mixed_work(int ranks, int64_t n) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks});
  assert_non_null(rt);
  assert_int_equal(dt_runtime_set_current(rt), DT_OK);
  dt_tensor **x = calloc((size_t)ranks, sizeof *x), **y = calloc((size_t)ranks, sizeof *y);
  double **vx = calloc((size_t)ranks, sizeof *vx);
  for (int r = 0; r < ranks; r++) {
    char dev[16];
    snprintf(dev, sizeof dev, "cpu:%d", r);
    vx[r] = malloc(sizeof(double) * (size_t)n);
    tu_fill_random(vx[r], n, DT_FLOAT32, 100 + (uint64_t)r, -2, 2);
    float *h = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) h[i] = (float)vx[r][i];
    x[r] = dt_from_host(h, DT_SHAPE(n), &(dt_tensor_options){.device = dev});
    free(h);
    dt_tensor *e = dt_exp(x[r]);
    dt_tensor *m = dt_mul_scalar(e, 0.5);
    dt_tensor *s = dt_add(m, x[r]);
    y[r] = dt_sum(s, NULL, 0, false);
    TU_RELEASE(e, m, s);
  }
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  for (int r = 0; r < ranks; r++) {
    double want = 0;
    for (int64_t i = 0; i < n; i++) {
      float xf = (float)vx[r][i];
      want += (double)((float)(expf(xf) * 0.5f) + xf);
    }
    float got;
    assert_int_equal(dt_to_host(y[r], &got, sizeof got), DT_OK);
    if (fabs(got - want) > 1e-4 * fabs(want) + 1e-3)
      fail_msg("rank %d of %d: sum %g, want %g", r, ranks, got, want);
    TU_RELEASE(x[r], y[r]);
    free(vx[r]);
  }
  free(x); free(y); free(vx);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

static void test_mixed_work_8_ranks(void **state) {
  (void)state;
  tu_leaks_begin();
  mixed_work(8, 300000);
  tu_leaks_end();
}

static void test_mixed_work_64_ranks(void **state) {
  (void)state;
  tu_leaks_begin();
  mixed_work(64, 20000);
  tu_leaks_end();
}

static void test_devices(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  dt_runtime_set_current(rt);
  dt_tensor *a = dt_ones(DT_SHAPE(4), &(dt_tensor_options){.device = "cpu:1"});
  dt_tensor *b = dt_ones(DT_SHAPE(4), &(dt_tensor_options){.device = "cpu:2"});
  tu_expect_error(dt_add(a, b), DT_ERR_DEVICE, "dt_add", "cpu:1", "cpu:2", NULL);
  tu_expect_error(dt_ones(DT_SHAPE(4), &(dt_tensor_options){.device = "cpu:4"}),
                  DT_ERR_DEVICE, "cpu:4", "cpu:3", NULL);
  tu_expect_error(dt_ones(DT_SHAPE(4), &(dt_tensor_options){.device = "cpu:x"}),
                  DT_ERR_DEVICE, "cpu:x", NULL);
  /* like-factories follow their argument's device */
  dt_tensor *z = dt_zeros_like(b);
  dt_tensor *s = dt_add(z, b);
  assert_non_null(s);
  dt_runtime_set_current(NULL);
  dt_runtime *other = dt_runtime_default();
  assert_true(other != rt);
  dt_tensor *c = dt_ones(DT_SHAPE(4), NULL); /* on the default runtime */
  tu_expect_error(dt_add(c, b), DT_ERR_DEVICE, "another runtime", NULL);
  /* after destroy: handles stay valid, ops and fetches fail */
  dt_runtime_destroy(rt);
  float h[4];
  tu_expect_status(dt_to_host(s, h, sizeof h), DT_ERR_DEVICE, "dt_to_host",
                   "destroyed", NULL);
  tu_expect_error(dt_relu(s), DT_ERR_DEVICE, "dt_relu", "destroyed", NULL);
  TU_RELEASE(a, b, z, s, c);
  tu_leaks_end();
}

/* device memory limit: the failing op poisons its output; later ops and
 * fetches fail with the original message; the runtime stays usable */
static void test_out_of_memory(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 2, .device_memory = 1 << 20});
  dt_runtime_set_current(rt);
  dt_tensor *small = dt_ones(DT_SHAPE(1000), NULL);
  dt_tensor *big = dt_ones(DT_SHAPE(300000), NULL); /* 1.2 MB > 1 MiB */
  assert_non_null(big); /* the error shows when it runs */
  /* usually published before the failure is known; if the rank was
   * faster, the call itself fails with the same error */
  dt_tensor *derived = dt_relu(big);
  if (!derived)
    tu_expect_status(dt_last_status(), DT_ERR_OUT_OF_MEMORY, "dt_ones",
                     "rank 0", NULL);
  float h[4];
  tu_expect_status(dt_to_host(big, h, sizeof h * 300000), DT_ERR_OUT_OF_MEMORY,
                   "dt_ones", "rank 0", "1200000", "in use", NULL);
  float *hb = malloc(300000 * sizeof(float));
  if (derived)
    tu_expect_status(dt_to_host(derived, hb, 300000 * sizeof(float)),
                     DT_ERR_OUT_OF_MEMORY, "dt_ones", "rank 0", NULL);
  else
    derived = dt_ones(DT_SHAPE(1), NULL); /* something to release below */
  /* issued after the failure is known: fails at the call */
  tu_expect_error(dt_add(big, big), DT_ERR_OUT_OF_MEMORY, "dt_ones", NULL);
  /* the async fetch of a tensor known poisoned: its future fails with the
   * original error (as when the failure comes after the call) */
  dt_future *f = dt_to_host_async(big, hb, 300000 * sizeof(float));
  assert_non_null(f);
  assert_int_equal(dt_future_wait(f, -1), DT_ERR_OUT_OF_MEMORY);
  assert_int_equal(dt_future_status(f), DT_ERR_OUT_OF_MEMORY);
  assert_non_null(strstr(dt_future_error(f), "dt_ones"));
  dt_future_release(f);
  dt_clear_error();
  /* still usable */
  dt_tensor *ok = dt_add(small, small);
  float v[1000];
  assert_int_equal(dt_to_host(ok, v, sizeof v), DT_OK);
  assert_true(v[0] == 2 && v[999] == 2);
  dt_memory_stats ms;
  assert_int_equal(dt_runtime_memory(rt, 0, &ms), DT_OK);
  assert_true(ms.used >= 8000 && ms.used <= 1 << 20 && ms.capacity == 1 << 20);
  free(hb);
  TU_RELEASE(small, big, derived, ok);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  tu_leaks_end();
}

typedef struct cb_count { _Atomic int calls; dt_status last; } cb_count;
static void on_done(dt_future *f, dt_status st, void *user) {
  (void)f;
  cb_count *c = user;
  c->last = st;
  atomic_fetch_add(&c->calls, 1);
}

static void test_async_fetch(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_tensor *a = dt_arange(0, 100000, 1, NULL);
  dt_tensor *b = dt_mul_scalar(a, 2);
  float *h = malloc(100000 * sizeof(float));
  dt_future *f = dt_to_host_async(b, h, 100000 * sizeof(float));
  assert_non_null(f);
  cb_count cc = {0};
  assert_int_equal(dt_future_then(f, on_done, &cc), DT_OK);
  int fd = dt_future_fd(f);
  assert_true(fd >= 0);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  assert_int_equal(poll(&p, 1, 10000), 1);
  assert_int_equal(dt_future_wait(f, -1), DT_OK);
  assert_true(dt_future_ready(f));
  /* callbacks run on the completing thread right after the state flips:
   * wait() may return first */
  for (int i = 0; i < 10000 && atomic_load(&cc.calls) == 0; i++) usleep(100);
  usleep(1000);
  assert_int_equal(atomic_load(&cc.calls), 1);
  assert_int_equal(cc.last, DT_OK);
  for (int i = 0; i < 100000; i += 997) assert_true(h[i] == 2.0f * (float)i);
  dt_future_release(f);
  free(h);
  TU_RELEASE(a, b);
  tu_leaks_end();
}

/* idle ranks park: a runtime with 8 idle ranks uses ~no CPU */
static void test_idle_cpu(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8});
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL); /* let them park */
  double c0 = cpu_seconds();
  ts.tv_nsec = 300000000;
  nanosleep(&ts, NULL);
  double used = cpu_seconds() - c0;
  dt_runtime_destroy(rt);
  if (used > 0.03) fail_msg("8 idle ranks used %.3f s of CPU in 0.3 s", used);
}

/* chunked kernels: the same bits whichever rank steals which chunk */
static void test_chunked_reproducible(void **state) {
  (void)state;
  tu_leaks_begin();
  const int64_t n = 1 << 20;
  float *r1 = malloc(sizeof(float) * (size_t)n), *r8 = malloc(sizeof(float) * (size_t)n);
  for (int k = 0; k < 2; k++) {
    dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = k ? 8 : 1});
    dt_runtime_set_current(rt);
    dt_manual_seed(11);
    dt_tensor *a = dt_randn(DT_SHAPE(n), NULL), *b = dt_randn(DT_SHAPE(n), NULL);
    dt_tensor *c = dt_mul(a, b), *d = dt_tanh(c);
    assert_int_equal(dt_to_host(d, k ? r8 : r1, sizeof(float) * (size_t)n), DT_OK);
    TU_RELEASE(a, b, c, d);
    dt_runtime_set_current(NULL);
    dt_runtime_destroy(rt);
  }
  assert_memory_equal(r1, r8, sizeof(float) * (size_t)n);
  free(r1); free(r8);
  tu_leaks_end();
}

/* events order work across ranks' streams */
static _Atomic int slow_done, saw_done;
static void slow_work(void *arg, dt_runtime *r, int rank) {
  (void)arg;
  (void)r;
  (void)rank;
  struct timespec ts = {0, 100000000};
  nanosleep(&ts, NULL);
  atomic_store(&slow_done, 1);
}
static void check_after(void *arg, dt_runtime *r, int rank) {
  (void)arg;
  (void)r;
  (void)rank;
  atomic_store(&saw_done, atomic_load(&slow_done) ? 1 : -1);
}

static void test_events(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 3});
  atomic_store(&slow_done, 0);
  atomic_store(&saw_done, 0);
  runtime_publish_call(rt, 1, slow_work, NULL, NULL);
  dt_future *ev = dt_event_record(rt, 1);
  assert_non_null(ev);
  assert_false(dt_future_ready(ev)); /* rank 1 is still sleeping */
  assert_int_equal(dt_stream_wait_event(rt, 2, ev), DT_OK);
  runtime_publish_call(rt, 2, check_after, NULL, NULL);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  assert_int_equal(atomic_load(&saw_done), 1); /* ran after the event */
  assert_true(dt_future_ready(ev));
  dt_future_release(ev);
  assert_null(dt_event_record(rt, 3));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_event_record",
                   "rank 3", NULL);
  tu_expect_status(dt_stream_wait_event(rt, 0, NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_stream_wait_event", "ev", NULL);
  dt_runtime_destroy(rt);
}

/* a sticky rank fault (an NCCL communicator aborted under the rank's
 * stream): that rank's fetches and every synchronize fail with it, the
 * first message stays, other ranks' fetches still work */
static void test_rank_fault(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  assert_int_equal(dt_runtime_set_current(rt), DT_OK);
  dt_tensor *a = dt_full(DT_SHAPE(4), 2,
                         &(dt_tensor_options){.device = tu_dev(0)});
  dt_tensor *b = dt_full(DT_SHAPE(4), 3,
                         &(dt_tensor_options){.device = tu_dev(1)});
  assert_non_null(a);
  assert_non_null(b);
  float out[4];
  assert_int_equal(dt_to_host(b, out, sizeof out), DT_OK);
  assert_null(runtime_rank_fault_of(rt, 1));
  runtime_rank_fault(rt, 1, "boom: the stream's work was cut short");
  runtime_rank_fault(rt, 1, "a second fault"); /* the first stays */
  tu_expect_status(dt_to_host(b, out, sizeof out), DT_ERR_DEVICE, "boom",
                   NULL);
  assert_int_equal(dt_to_host(a, out, sizeof out), DT_OK);
  assert_true(out[0] == 2);
  tu_expect_status(dt_runtime_synchronize(rt), DT_ERR_DEVICE,
                   "dt_runtime_synchronize", "rank 1", "boom", NULL);
  /* the fault is not the cache's: emptying it still works */
  assert_int_equal(dt_runtime_empty_cache(rt), DT_OK);
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_options_and_env),
      cmocka_unit_test(test_create_destroy_cycles),
      cmocka_unit_test(test_mixed_work_8_ranks),
      cmocka_unit_test(test_mixed_work_64_ranks),
      cmocka_unit_test(test_devices),
      cmocka_unit_test(test_out_of_memory),
      cmocka_unit_test(test_async_fetch),
      cmocka_unit_test(test_idle_cpu),
      cmocka_unit_test(test_chunked_reproducible),
      cmocka_unit_test(test_events),
      cmocka_unit_test(test_rank_fault),
  };
  /* a deadlock fails the test instead of hanging CI */
  return TU_RUN_TESTS_WITH_ALARM(600, tests);
}
