/* Futures (sched/future.c): timeouts, wake-ups, errors, the eventfd, the
 * callbacks' exactly-once rule under races, many waiters, release before
 * completion, and a stress run where one thread completes 10k futures
 * while others wait, poll and register. Leaks are left to LeakSanitizer
 * (the ASan build); an alarm turns a hang into a failure. */
#include <fcntl.h>
#include <stdint.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sched/future.h"
#include "support/testutil.h"
#include "support/threads.h"

#define MS 1000000LL

/* poll fd for readability (any thread); 1 readable, 0 not within ms */
static int readable(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int r;
  do r = poll(&p, 1, ms); while (r < 0);
  return r == 1 && (p.revents & POLLIN) ? 1 : 0;
}

static void assert_message_has(const char *msg, const char *want) {
  if (!strstr(msg, want))
    fail_msg("message \"%s\" lacks \"%s\"", msg, want);
}

/* ---------------------------------------------------------- basic waiting */

static void test_null_and_queries(void **state) {
  (void)state;
  dt_clear_error();
  assert_int_equal(dt_future_wait(NULL, 0), DT_ERR_INVALID_ARGUMENT);
  assert_message_has(dt_last_error(), "dt_future_wait: f is NULL");
  assert_int_equal(dt_future_fd(NULL), -1);
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  assert_int_equal(dt_future_then(NULL, NULL, NULL), DT_ERR_INVALID_ARGUMENT);
  assert_int_equal(dt_future_status(NULL), DT_ERR_INVALID_ARGUMENT);
  assert_false(dt_future_ready(NULL));
  assert_null(dt_future_error(NULL));  /* a pointer: NULL + error */
  dt_future_release(NULL);

  dt_future *f = sched_future_new();
  assert_non_null(f);
  assert_false(dt_future_ready(f));
  assert_int_equal(dt_future_status(f), DT_ERR_TIMEOUT);
  assert_string_equal(dt_future_error(f), "");
  assert_int_equal(dt_future_then(f, NULL, NULL), DT_ERR_INVALID_ARGUMENT);
  assert_message_has(dt_last_error(), "cb is NULL");
  sched_future_complete(f, DT_OK, NULL);
  assert_true(dt_future_ready(f));
  assert_int_equal(dt_future_status(f), DT_OK);
  assert_string_equal(dt_future_error(f), "");
  dt_clear_error();
  assert_int_equal(dt_future_wait(f, 0), DT_OK);
  assert_int_equal(dt_future_wait(f, -1), DT_OK);
  assert_int_equal(dt_last_status(), DT_OK);   /* success sets nothing */
  dt_future_release(f);
}

static void test_wait_timeout(void **state) {
  (void)state;
  dt_future *f = sched_future_new();
  int64_t t0 = tu_now_ns();
  assert_int_equal(dt_future_wait(f, 0), DT_ERR_TIMEOUT);
  int64_t t1 = tu_now_ns();
  assert_int_equal(dt_last_status(), DT_ERR_TIMEOUT);
  assert_message_has(dt_last_error(), "dt_future_wait: not complete after 0 ns");
  assert_true(t1 - t0 < 50 * MS);   /* a poll, no sleep */

  t0 = tu_now_ns();
  assert_int_equal(dt_future_wait(f, 1 * MS), DT_ERR_TIMEOUT);
  t1 = tu_now_ns();
  assert_message_has(dt_last_error(), "not complete after 1000000 ns");
  assert_true(t1 - t0 >= 1 * MS);
  assert_true(t1 - t0 < 500 * MS);   /* generous: loaded 2-core CI, TSan */

  t0 = tu_now_ns();
  assert_int_equal(dt_future_wait(f, 30 * MS), DT_ERR_TIMEOUT);
  t1 = tu_now_ns();
  assert_true(t1 - t0 >= 30 * MS);
  assert_true(t1 - t0 < 800 * MS);
  assert_false(dt_future_ready(f));   /* still valid, still pending */
  sched_future_complete(f, DT_OK, "ignored on success");
  assert_int_equal(dt_future_wait(f, 1 * MS), DT_OK);
  dt_future_release(f);
}

typedef struct delayed {
  dt_future *f;
  int64_t delay_ns;
  dt_status st;
  const char *msg;
  pthread_t self;
} delayed;

static void *complete_later(void *arg) {
  delayed *d = arg;
  tu_sleep_ns(d->delay_ns);
  sched_future_complete(d->f, d->st, d->msg);
  return NULL;
}

static void test_wait_wakes(void **state) {
  (void)state;
  dt_future *f = sched_future_new();
  delayed d = {.f = f, .delay_ns = 20 * MS, .st = DT_OK};
  int64_t t0 = tu_now_ns();
  pthread_t t = tu_spawn(complete_later, &d);
  assert_int_equal(dt_future_wait(f, -1), DT_OK);
  int64_t dt = tu_now_ns() - t0;
  pthread_join(t, NULL);
  assert_true(dt >= 20 * MS);
  assert_true(dt < 2000 * MS);

  /* a finite timeout that the completion beats */
  dt_future *g = sched_future_new();
  delayed e = {.f = g, .delay_ns = 10 * MS, .st = DT_OK};
  t = tu_spawn(complete_later, &e);
  assert_int_equal(dt_future_wait(g, 10000 * MS), DT_OK);
  pthread_join(t, NULL);
  dt_future_release(f);
  dt_future_release(g);
}

static void test_error_outcome(void **state) {
  (void)state;
  dt_future *f = sched_future_new();
  delayed d = {.f = f, .delay_ns = 5 * MS, .st = DT_ERR_IO,
               .msg = "dt_to_host_async: disk on fire"};
  pthread_t t = tu_spawn(complete_later, &d);
  dt_clear_error();
  assert_int_equal(dt_future_wait(f, -1), DT_ERR_IO);
  pthread_join(t, NULL);
  assert_int_equal(dt_last_status(), DT_ERR_IO);
  assert_string_equal(dt_last_error(), "dt_to_host_async: disk on fire");
  assert_int_equal(dt_future_status(f), DT_ERR_IO);
  assert_string_equal(dt_future_error(f), "dt_to_host_async: disk on fire");
  /* the fast path reports it again */
  dt_clear_error();
  assert_int_equal(dt_future_wait(f, 0), DT_ERR_IO);
  assert_string_equal(dt_last_error(), "dt_to_host_async: disk on fire");
  dt_future_release(f);

  /* an error without a message still says what failed */
  f = sched_future_new();
  sched_future_complete(f, DT_ERR_DEVICE, NULL);
  assert_int_equal(dt_future_wait(f, -1), DT_ERR_DEVICE);
  assert_message_has(dt_last_error(), "DT_ERR_DEVICE");
  assert_string_equal(dt_future_error(f), "");
  dt_future_release(f);
}

/* a second completion is a runtime bug: CORE_ASSERT aborts (in a child) */
static void test_complete_twice_asserts(void **state) {
  (void)state;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    dt_future *f = sched_future_new();
    sched_future_complete(f, DT_OK, NULL);
    sched_future_complete(f, DT_OK, NULL);
    _exit(0);
  }
  int ws = 0;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  assert_true(WIFSIGNALED(ws));
  assert_int_equal(WTERMSIG(ws), SIGABRT);
}

/* ------------------------------------------------------------------ eventfd */

static void test_fd_before_completion(void **state) {
  (void)state;
  dt_future *f = sched_future_new();
  int fd = dt_future_fd(f);
  assert_true(fd >= 0);
  assert_int_equal(dt_future_fd(f), fd);   /* one fd per future */
  assert_int_equal(readable(fd, 0), 0);
  assert_int_equal(readable(fd, 10), 0);
  delayed d = {.f = f, .delay_ns = 10 * MS, .st = DT_OK};
  pthread_t t = tu_spawn(complete_later, &d);
  assert_int_equal(readable(fd, 5000), 1);
  pthread_join(t, NULL);
  uint64_t v = 0;
  assert_int_equal(read(fd, &v, sizeof v), (ssize_t)sizeof v);
  assert_true(v >= 1);
  assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  dt_future_release(f);
}

static void test_fd_after_completion(void **state) {
  (void)state;
  dt_future *f = sched_future_new();
  sched_future_complete(f, DT_ERR_FAULT, "injected");
  int fd = dt_future_fd(f);
  assert_true(fd >= 0);
  assert_int_equal(readable(fd, 0), 1);
  uint64_t v = 0;
  assert_int_equal(read(fd, &v, sizeof v), (ssize_t)sizeof v);
  assert_int_equal(v, 1);
  assert_int_equal(readable(fd, 0), 0);   /* read drained it; nonblocking */
  assert_int_equal(dt_future_fd(f), fd);
  dt_future_release(f);
}

/* many threads ask for the fd while another completes: one fd, readable */
typedef struct fd_race {
  dt_future *f;
  _Atomic int fds[8];
} fd_race;

static void *ask_fd(void *arg) {
  fd_race *r = arg;
  for (int i = 0; i < 8; i++)
    if (atomic_load(&r->fds[i]) == -2) {
      int fd = dt_future_fd(r->f);
      atomic_store(&r->fds[i], fd);
    }
  return NULL;
}

static void test_fd_race(void **state) {
  (void)state;
  for (int round = 0; round < 50; round++) {
    fd_race r = {.f = sched_future_new()};
    for (int i = 0; i < 8; i++) atomic_init(&r.fds[i], -2);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) t[i] = tu_spawn(ask_fd, &r);
    sched_future_complete(r.f, DT_OK, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    int fd = dt_future_fd(r.f);
    for (int i = 0; i < 8; i++)
      if (atomic_load(&r.fds[i]) != -2)
        assert_int_equal(atomic_load(&r.fds[i]), fd);
    assert_int_equal(readable(fd, 0), 1);
    dt_future_release(r.f);
  }
}

/* --------------------------------------------------------------- callbacks */

typedef struct cb_log {
  dt_future *f;
  _Atomic int calls;
  int order[8];
  pthread_t thread[8];
  dt_status status[8];
} cb_log;

typedef struct cb_arg { cb_log *log; int id; } cb_arg;

static void record_cb(dt_future *f, dt_status st, void *user) {
  cb_arg *a = user;
  int k = atomic_fetch_add(&a->log->calls, 1);
  TU_CHECK_TRUE(f == a->log->f);
  if (k < 8) {
    a->log->order[k] = a->id;
    a->log->thread[k] = pthread_self();
    a->log->status[k] = st;
  }
}

static void *complete_and_note(void *arg) {
  delayed *d = arg;
  d->self = pthread_self();
  sched_future_complete(d->f, d->st, d->msg);
  return NULL;
}

static void test_callbacks_before(void **state) {
  (void)state;
  cb_log log = {.f = sched_future_new()};
  cb_arg args[3] = {{&log, 0}, {&log, 1}, {&log, 2}};
  for (int i = 0; i < 3; i++)
    assert_int_equal(dt_future_then(log.f, record_cb, &args[i]), DT_OK);
  assert_int_equal(atomic_load(&log.calls), 0);
  delayed d = {.f = log.f, .st = DT_ERR_DESYNC, .msg = "rank 3 desync"};
  pthread_t t = tu_spawn(complete_and_note, &d);
  pthread_join(t, NULL);
  assert_int_equal(atomic_load(&log.calls), 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(log.order[i], i);   /* registration order */
    assert_true(pthread_equal(log.thread[i], d.self));
    assert_int_equal(log.status[i], DT_ERR_DESYNC);
  }
  dt_future_release(log.f);
  TU_ASSERT_NO_THREAD_FAILURES();
}

static void test_callbacks_after(void **state) {
  (void)state;
  cb_log log = {.f = sched_future_new()};
  cb_arg a = {&log, 7};
  sched_future_complete(log.f, DT_OK, NULL);
  assert_int_equal(dt_future_then(log.f, record_cb, &a), DT_OK);
  assert_int_equal(atomic_load(&log.calls), 1);   /* ran at once */
  assert_true(pthread_equal(log.thread[0], pthread_self()));
  assert_int_equal(log.status[0], DT_OK);
  assert_int_equal(log.order[0], 7);
  dt_future_release(log.f);
}

/* 8 threads register while another completes: each callback exactly once */
#define RACE_THREADS 8
#define RACE_PER_THREAD 64

typedef struct then_race {
  dt_future *f;
  _Atomic int go;
  _Atomic int hits[RACE_THREADS * RACE_PER_THREAD];
} then_race;

typedef struct then_arg { then_race *r; int t; } then_arg;

static void count_cb(dt_future *f, dt_status st, void *user) {
  (void)f;
  TU_CHECK_TRUE(st == DT_OK);
  atomic_fetch_add((_Atomic int *)user, 1);
}

static void *register_many(void *arg) {
  then_arg *a = arg;
  while (!atomic_load(&a->r->go)) {}
  for (int i = 0; i < RACE_PER_THREAD; i++) {
    _Atomic int *slot = &a->r->hits[a->t * RACE_PER_THREAD + i];
    TU_CHECK_TRUE(dt_future_then(a->r->f, count_cb, (void *)slot) == DT_OK);
  }
  return NULL;
}

static void test_callbacks_race(void **state) {
  (void)state;
  then_race *r = calloc(1, sizeof *r);
  for (int round = 0; round < 40; round++) {
    r->f = sched_future_new();
    atomic_store(&r->go, 0);
    for (int i = 0; i < RACE_THREADS * RACE_PER_THREAD; i++)
      atomic_store(&r->hits[i], 0);
    pthread_t t[RACE_THREADS];
    then_arg args[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
      args[i] = (then_arg){r, i};
      t[i] = tu_spawn(register_many, &args[i]);
    }
    atomic_store(&r->go, 1);
    for (volatile int spin = 0; spin < round * 500; spin++) {}
    sched_future_complete(r->f, DT_OK, NULL);
    for (int i = 0; i < RACE_THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < RACE_THREADS * RACE_PER_THREAD; i++)
      if (atomic_load(&r->hits[i]) != 1)
        fail_msg("round %d: callback %d ran %d times", round, i,
                 atomic_load(&r->hits[i]));
    dt_future_release(r->f);
  }
  free(r);
  TU_ASSERT_NO_THREAD_FAILURES();
}

/* ------------------------------------------------------------ many waiters */

typedef struct waiter {
  dt_future *f;
  int64_t timeout;
  dt_status got;
} waiter;

static void *wait_one(void *arg) {
  waiter *w = arg;
  w->got = dt_future_wait(w->f, w->timeout);
  return NULL;
}

static void test_many_waiters(void **state) {
  (void)state;
  dt_future *f = sched_future_new();
  waiter w[16];
  pthread_t t[16];
  for (int i = 0; i < 16; i++) {
    /* half wait forever, half with a long finite timeout */
    w[i] = (waiter){.f = f, .timeout = i % 2 ? -1 : 20000 * MS,
                    .got = DT_ERR_INTERNAL};
    t[i] = tu_spawn(wait_one, &w[i]);
  }
  tu_sleep_ns(20 * MS);   /* let them park */
  sched_future_complete(f, DT_ERR_FAULT, "chaos");
  for (int i = 0; i < 16; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].got, DT_ERR_FAULT);
  }
  dt_future_release(f);
}

/* ----------------------------------------------------------- device events */

static atomic_int drops;
static void drop_ev(void *ev) {
  assert_non_null(ev);
  atomic_fetch_add(&drops, 1);
}
static int owner_a, owner_b, ev_token[64];

typedef struct ev_waiter {
  dt_future *f;
  const void *owner;
  void *got;
  atomic_bool back;
} ev_waiter;

static void *wait_ev_one(void *p) {
  ev_waiter *w = p;
  w->got = sched_future_wait_event(w->f, w->owner);
  atomic_store(&w->back, true);
  return NULL;
}

/* a waiter parked on a pending future returns with the event as soon as
 * it is set, the future still pending; one of another owner returns only
 * with the completion; plain waiters are not woken for good; the event is
 * dropped once, with the last reference */
static void test_event_wakes_before_completion(void **state) {
  (void)state;
  atomic_store(&drops, 0);
  dt_future *f = sched_future_new();
  ev_waiter mine = {.f = f, .owner = &owner_a}, other = {.f = f,
                                                          .owner = &owner_b};
  waiter plain = {.f = f, .timeout = -1, .got = DT_ERR_INTERNAL};
  pthread_t t0 = tu_spawn(wait_ev_one, &mine);
  pthread_t t1 = tu_spawn(wait_ev_one, &other);
  pthread_t t2 = tu_spawn(wait_one, &plain);
  tu_sleep_ns(20 * MS); /* let them park */
  assert_false(atomic_load(&mine.back));
  sched_future_set_event(f, &owner_a, &ev_token[0], drop_ev);
  pthread_join(t0, NULL);
  assert_ptr_equal(mine.got, &ev_token[0]);
  assert_false(dt_future_ready(f));
  tu_sleep_ns(20 * MS);
  assert_false(atomic_load(&other.back));
  assert_int_equal(plain.got, DT_ERR_INTERNAL);
  sched_future_complete(f, DT_OK, NULL);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  assert_null(other.got);
  assert_int_equal(plain.got, DT_OK);
  /* after completion: NULL, no wait */
  assert_null(sched_future_wait_event(f, &owner_a));
  assert_int_equal(atomic_load(&drops), 0);
  dt_future_release(f);
  assert_int_equal(atomic_load(&drops), 1);
  /* completed before any event: NULL; a future without one drops nothing */
  f = sched_future_new();
  sched_future_complete(f, DT_OK, NULL);
  assert_null(sched_future_wait_event(f, &owner_a));
  dt_future_release(f);
  assert_int_equal(atomic_load(&drops), 1);
}

/* the waiter parks at every point of set_event's window (a random delay
 * before it) and must come back with the event, the future still
 * pending: a wake-up lost in the window would leave it asleep */
typedef struct ev_pingpong {
  _Atomic(dt_future *) f;
  atomic_int phase; /* 0 idle, 1 wait, 2 returned, 3 quit */
  void *got;
} ev_pingpong;

static void *ev_pong(void *p) {
  ev_pingpong *x = p;
  for (;;) {
    int ph;
    while ((ph = atomic_load(&x->phase)) != 1 && ph != 3) sched_yield();
    if (ph == 3) return NULL;
    x->got = sched_future_wait_event(atomic_load(&x->f), &owner_a);
    atomic_store(&x->phase, 2);
  }
}

static void test_event_no_lost_wakeup(void **state) {
  (void)state;
  ev_pingpong x = {.phase = 0};
  pthread_t t = tu_spawn(ev_pong, &x);
  unsigned seed = 7;
  for (int i = 0; i < 10000; i++) {
    dt_future *f = sched_future_new();
    atomic_store(&x.f, f);
    atomic_store(&x.phase, 1);
    seed = seed * 1103515245u + 12345u;
    for (volatile unsigned k = 0, n = (seed >> 8) % 20000; k < n; k++) {
    }
    sched_future_set_event(f, &owner_a, &ev_token[1], NULL);
    for (int w = 0; atomic_load(&x.phase) != 2; w++) {
      if (w > 200000) fail_msg("iteration %d: the event waiter slept through "
                               "set_event", i);
      if (w > 1000) tu_sleep_ns(10000); /* up to ~2 s in all */
      else sched_yield();
    }
    assert_ptr_equal(x.got, &ev_token[1]);
    assert_false(dt_future_ready(f));
    sched_future_complete(f, DT_OK, NULL);
    atomic_store(&x.phase, 0);
    dt_future_release(f);
  }
  atomic_store(&x.phase, 3);
  pthread_join(t, NULL);
}

typedef struct ev_race {
  dt_future *f[64];
} ev_race;

/* roles: 0 sets the events, 1 completes, 2 waits for events, 3 waits */

static void *ev_race_main(void *p) {
  ev_race *x = ((ev_race **)p)[0];
  int role = (int)(intptr_t)((void **)p)[1];
  for (int i = 0; i < 64; i++) {
    if (role == 0) sched_future_set_event(x->f[i], &owner_a, &ev_token[i],
                                          drop_ev);
    else if (role == 1) sched_future_complete(x->f[i], DT_OK, NULL);
    else if (role == 2) {
      void *ev = sched_future_wait_event(x->f[i], &owner_a);
      /* an event, its own, or the completion */
      if (ev) assert_ptr_equal(ev, &ev_token[i]);
      else assert_true(dt_future_ready(x->f[i]));
    } else
      assert_int_equal(sched_future_wait(x->f[i], -1), DT_OK);
  }
  return NULL;
}

/* setter, completer and waiters of both kinds race over 64 futures, 50
 * times: nobody hangs (the alarm), every event dropped exactly once */
static void test_event_race(void **state) {
  (void)state;
  atomic_store(&drops, 0);
  for (int round = 0; round < 50; round++) {
    ev_race x;
    for (int i = 0; i < 64; i++) x.f[i] = sched_future_new();
    void *args[5][2];
    pthread_t t[5];
    for (int r = 0; r < 5; r++) {
      args[r][0] = &x;
      args[r][1] = (void *)(intptr_t)(r < 3 ? r : 2 + (r & 1));
      t[r] = tu_spawn(ev_race_main, args[r]);
    }
    for (int r = 0; r < 5; r++) pthread_join(t[r], NULL);
    for (int i = 0; i < 64; i++) dt_future_release(x.f[i]);
  }
  assert_int_equal(atomic_load(&drops), 50 * 64);
}

/* --------------------------------------------------------------- lifetime */

static void test_release_before_completion(void **state) {
  (void)state;
  /* the user's handle goes first; the runtime's reference keeps f alive */
  cb_log log = {0};
  cb_arg a = {&log, 0};
  dt_future *f = sched_future_new();          /* the runtime's reference */
  log.f = f;
  dt_future *user = sched_future_retain(f);   /* the user's handle */
  assert_ptr_equal(user, f);
  assert_true(dt_future_fd(user) >= 0);
  assert_int_equal(dt_future_then(user, record_cb, &a), DT_OK);
  dt_future_release(user);
  delayed d = {.f = f, .delay_ns = 2 * MS, .st = DT_ERR_IO, .msg = "late"};
  pthread_t t = tu_spawn(complete_later, &d);
  pthread_join(t, NULL);
  assert_int_equal(atomic_load(&log.calls), 1);
  dt_future_release(f);   /* last reference: fd, message, f freed */

  /* dropped pending with a callback queued: nodes freed, never run */
  cb_log never = {0};
  cb_arg b = {&never, 0};
  f = sched_future_new();
  never.f = f;
  assert_int_equal(dt_future_then(f, record_cb, &b), DT_OK);
  dt_future_release(f);
  assert_int_equal(atomic_load(&never.calls), 0);
  TU_ASSERT_NO_THREAD_FAILURES();
}

/* ------------------------------------------------------------------ stress */

#define STRESS_N 10000
#define STRESS_WINDOW 256   /* completer's lead over the slowest consumer */
enum { ST_WAIT_FOREVER, ST_WAIT_POLL, ST_FD, ST_THEN_A, ST_THEN_B, ST_USERS };

typedef struct stress {
  dt_future *f[STRESS_N];
  _Atomic int hits[STRESS_N];
  _Atomic int progress[ST_USERS];
} stress;

typedef struct stress_arg { stress *s; int role; } stress_arg;

static dt_status stress_status(int i) { return i % 7 ? DT_OK : DT_ERR_IO; }

/* counts 1 per run on success, 1000 on failure: the total checks both the
 * number of runs and the status each saw */
static void stress_cb(dt_future *f, dt_status st, void *user) {
  (void)f;
  atomic_fetch_add((_Atomic int *)user, st == DT_OK ? 1 : 1000);
}

static void stress_consume(stress *s, int role, int i) {
  dt_future *f = s->f[i];
  dt_status want = stress_status(i);
  dt_status st;
  switch (role) {
  case ST_WAIT_FOREVER:
    TU_CHECK_TRUE(dt_future_wait(f, -1) == want);
    break;
  case ST_WAIT_POLL:   /* 20 µs slices: many timeouts, some wake-ups */
    while ((st = dt_future_wait(f, 20000)) == DT_ERR_TIMEOUT) {}
    TU_CHECK_TRUE(st == want);
    break;
  case ST_FD: {
    int fd = dt_future_fd(f);
    TU_CHECK_TRUE(fd >= 0);
    TU_CHECK_TRUE(readable(fd, 30000) == 1);
    TU_CHECK_TRUE(dt_future_ready(f));
    TU_CHECK_TRUE(dt_future_status(f) == want);
    break;
  }
  default:
    TU_CHECK_TRUE(dt_future_then(f, stress_cb, (void *)&s->hits[i]) == DT_OK);
  }
  dt_future_release(f);
}

static void *stress_user(void *arg) {
  stress_arg *a = arg;
  for (int i = 0; i < STRESS_N; i++) {
    stress_consume(a->s, a->role, i);
    atomic_store_explicit(&a->s->progress[a->role], i + 1,
                          memory_order_relaxed);
  }
  return NULL;
}

static int min_progress(stress *s) {
  int m = STRESS_N;
  for (int r = 0; r < ST_USERS; r++) {
    int p = atomic_load_explicit(&s->progress[r], memory_order_relaxed);
    if (p < m) m = p;
  }
  return m;
}

static void *stress_completer(void *arg) {
  stress *s = arg;
  char msg[32];
  for (int i = 0; i < STRESS_N; i++) {
    /* bound the open eventfds: stay within a window of the slowest */
    while (i - min_progress(s) > STRESS_WINDOW) sched_yield();
    snprintf(msg, sizeof msg, "future %d failed", i);
    sched_future_complete(s->f[i], stress_status(i),
                          stress_status(i) ? msg : NULL);
    dt_future_release(s->f[i]);   /* the runtime's reference */
  }
  return NULL;
}

static void test_stress(void **state) {
  (void)state;
  stress *s = calloc(1, sizeof *s);
  for (int i = 0; i < STRESS_N; i++) {
    s->f[i] = sched_future_new();
    for (int r = 0; r < ST_USERS; r++) sched_future_retain(s->f[i]);
  }
  pthread_t t[ST_USERS + 1];
  stress_arg args[ST_USERS];
  for (int r = 0; r < ST_USERS; r++) {
    args[r] = (stress_arg){s, r};
    t[r] = tu_spawn(stress_user, &args[r]);
  }
  t[ST_USERS] = tu_spawn(stress_completer, s);
  for (int r = 0; r <= ST_USERS; r++) pthread_join(t[r], NULL);
  for (int i = 0; i < STRESS_N; i++) {
    int want = stress_status(i) == DT_OK ? 2 : 2000;   /* two registrars */
    if (atomic_load(&s->hits[i]) != want)
      fail_msg("future %d: callback hits %d, want %d", i,
               atomic_load(&s->hits[i]), want);
  }
  free(s);
  TU_ASSERT_NO_THREAD_FAILURES();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_and_queries),
      cmocka_unit_test(test_wait_timeout),
      cmocka_unit_test(test_wait_wakes),
      cmocka_unit_test(test_error_outcome),
      cmocka_unit_test(test_complete_twice_asserts),
      cmocka_unit_test(test_fd_before_completion),
      cmocka_unit_test(test_fd_after_completion),
      cmocka_unit_test(test_fd_race),
      cmocka_unit_test(test_callbacks_before),
      cmocka_unit_test(test_callbacks_after),
      cmocka_unit_test(test_callbacks_race),
      cmocka_unit_test(test_many_waiters),
      cmocka_unit_test(test_event_wakes_before_completion),
      cmocka_unit_test(test_event_race),
      cmocka_unit_test(test_event_no_lost_wakeup),
      cmocka_unit_test(test_release_before_completion),
      cmocka_unit_test(test_stress),
  };
  return TU_RUN_TESTS_WITH_ALARM(300, tests); /* a hang fails the run */
}
