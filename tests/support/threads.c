/* Test support for the threaded suites (threads.h). */
#include "threads.h"

#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int64_t tu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void tu_sleep_ns(int64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0) {}
}

pthread_t tu_spawn(void *(*fn)(void *), void *arg) {
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
  return t;
}

typedef struct spawn_arg {
  tu_body_fn fn;
  void *arg;
  int i;
} spawn_arg;

static void *spawn_main(void *p) {
  spawn_arg *s = p;
  s->fn(s->arg, s->i);
  return NULL;
}

void tu_run_threads(int n, tu_body_fn fn, void *arg) {
  pthread_t t[16];
  spawn_arg a[16];
  assert_true(n <= 16);
  for (int i = 0; i < n; i++) {
    a[i] = (spawn_arg){fn, arg, i};
    assert_int_equal(pthread_create(&t[i], NULL, spawn_main, &a[i]), 0);
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

static _Atomic int thread_failures;

void tu_thread_fail(const char *file, int line, const char *cond,
                    const char *fmt, ...) {
  fprintf(stderr, "%s:%d: check failed: %s: ", file, line, cond);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  atomic_fetch_add(&thread_failures, 1);
}

void tu_thread_fail_cond(const char *file, int line, const char *cond) {
  fprintf(stderr, "%s:%d: check failed: %s\n", file, line, cond);
  atomic_fetch_add(&thread_failures, 1);
}

int tu_thread_failures_take(void) {
  return atomic_exchange(&thread_failures, 0);
}

void tu_alarm(unsigned seconds) { alarm(seconds); }
