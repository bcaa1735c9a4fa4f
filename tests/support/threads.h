/* Test support for the threaded suites: a monotonic clock, sleeping,
 * starting and joining raw pthreads, failure counting for checks made off
 * the test's own thread, and an alarm around the cmocka run. */
#ifndef TESTS_SUPPORT_THREADS_H
#define TESTS_SUPPORT_THREADS_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* CLOCK_MONOTONIC in nanoseconds */
int64_t tu_now_ns(void);
/* sleeps ns nanoseconds (resumes after signals) */
void tu_sleep_ns(int64_t ns);

/* starts fn(arg) on a new thread; fails the test if it cannot */
pthread_t tu_spawn(void *(*fn)(void *), void *arg);
/* runs fn(arg, i) for i in [0, n) on n threads (n <= 16) and joins them */
typedef void (*tu_body_fn)(void *arg, int i);
void tu_run_threads(int n, tu_body_fn fn, void *arg);

/* cmocka's asserts longjmp and so belong to the test's own thread; other
 * threads count failures here and the test asserts the count is 0.
 * tu_thread_fail prints "file:line: check failed: cond: <message>",
 * tu_thread_fail_cond the same without a message. */
void tu_thread_fail(const char *file, int line, const char *cond,
                    const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void tu_thread_fail_cond(const char *file, int line, const char *cond);
/* the failures counted since the last call (and resets the count) */
int tu_thread_failures_take(void);

/* on any thread: counts a failure unless cond, with a printf message */
#define TU_CHECK(cond, ...)                                                 \
  do {                                                                      \
    if (!(cond)) tu_thread_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);    \
  } while (0)
/* the same without a message */
#define TU_CHECK_TRUE(cond)                                                 \
  do {                                                                      \
    if (!(cond)) tu_thread_fail_cond(__FILE__, __LINE__, #cond);            \
  } while (0)
/* on the test's thread: no check failed on any thread since the last one */
#define TU_ASSERT_NO_THREAD_FAILURES()                                      \
  assert_int_equal(tu_thread_failures_take(), 0)

/* cmocka_run_group_tests(tests) under alarm(seconds): a hang fails the run
 * instead of stalling CI */
void tu_alarm(unsigned seconds);
#define TU_RUN_TESTS_WITH_ALARM(seconds, tests)                             \
  (tu_alarm(seconds), cmocka_run_group_tests(tests, NULL, NULL))

#endif
