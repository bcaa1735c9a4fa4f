/* The broadcast op ring (sched/ring.h): order on one thread, wrap-around of
 * slot indices and of the 64-bit counters, and conservation under threads:
 * every consumer sees every record exactly once, all in one global order
 * that keeps each producer's own order, and publish returns unique dense
 * sequence numbers. The reference is the test's own bookkeeping (per
 * producer counters and the sequence each publish returned), never the
 * ring's state. Backpressure: a slow consumer and an 8-slot ring; producers
 * check after each publish that they never passed the slowest cursor by
 * more than the capacity, and consumers validate every payload. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "sched/ring.h"

#if defined(__SANITIZE_THREAD__)
#define SCALE 4  /* TSan: ~10x slower, and 2 cores */
#else
#define SCALE 1
#endif

#define STALL_S 60 /* a run that has not finished by then is stuck */
#define REC_MAGIC UINT64_C(0x52494e4752454331) /* "RINGREC1" */

/* one record; written by its producer before publish, then read-only */
typedef struct rec {
  uint64_t magic;
  int producer;
  int64_t counter; /* 0, 1, 2, ... per producer */
} rec;

typedef struct run_cfg {
  uint32_t capacity;
  int producers, consumers;
  int64_t per_producer;
  uint64_t first;   /* first sequence number */
  int slow_every;   /* consumer 0 sleeps every this many records (0: never) */
  bool check_gate;  /* producers check the capacity bound after publishing */
} run_cfg;

typedef struct run {
  run_cfg cfg;
  sched_ring *r;
  int64_t total;
  rec *recs;            /* [producer][counter] */
  uint64_t *seqs;       /* what publish returned, [producer][counter] */
  const rec **seen;     /* [consumer][position] */
  _Atomic int started;  /* a start line, so that threads overlap */
  _Atomic int errors;
  char error[160];      /* the first error (written by one thread) */
} run;

typedef struct worker { run *x; int id; } worker;

static void report(run *x, const char *what, int id, int64_t k) {
  /* relaxed: the counter only elects who writes the message; join orders it */
  if (atomic_fetch_add_explicit(&x->errors, 1, memory_order_relaxed) == 0)
    snprintf(x->error, sizeof x->error, "%s (thread %d, index %lld)", what,
             id, (long long)k);
}

static void start_line(run *x) {
  int n = x->cfg.producers + x->cfg.consumers;
  /* relaxed: the start line orders nothing (setup precedes pthread_create) */
  atomic_fetch_add_explicit(&x->started, 1, memory_order_relaxed);
  while (atomic_load_explicit(&x->started, memory_order_relaxed) < n)
    sched_yield();
}

static void *producer_main(void *arg) {
  worker *w = arg;
  run *x = w->x;
  int64_t n = x->cfg.per_producer;
  start_line(x);
  for (int64_t i = 0; i < n; i++) {
    rec *p = &x->recs[(int64_t)w->id * n + i];
    p->magic = REC_MAGIC;
    p->producer = w->id;
    p->counter = i;
    uint64_t s = sched_ring_publish(x->r, p);
    x->seqs[(int64_t)w->id * n + i] = s;
    if (!x->cfg.check_gate) continue;
    /* cursors only grow: if one is still <= s - capacity now, it was when
     * the slot was written, and an unread slot was overwritten (a cursor
     * may also be past s already: s - cursor is then "negative") */
    for (int c = 0; c < x->cfg.consumers; c++) {
      uint64_t behind = s - sched_ring_cursor(x->r, c);
      if (behind >= x->cfg.capacity && behind < (UINT64_C(1) << 63))
        report(x, "publish passed a consumer by the capacity", w->id, i);
    }
  }
  return NULL;
}

static bool valid(const run *x, const rec *p) {
  return p >= x->recs && p < x->recs + x->total && p->magic == REC_MAGIC &&
         p->producer >= 0 && p->producer < x->cfg.producers &&
         p->counter >= 0 && p->counter < x->cfg.per_producer &&
         p == &x->recs[(int64_t)p->producer * x->cfg.per_producer +
                       p->counter];
}

static void *consumer_main(void *arg) {
  worker *w = arg;
  run *x = w->x;
  const rec **seen = &x->seen[(int64_t)w->id * x->total];
  int64_t *last = calloc((size_t)x->cfg.producers, sizeof *last);
  for (int p = 0; p < x->cfg.producers; p++) last[p] = -1;
  start_line(x);
  for (int64_t k = 0; k < x->total; k++) {
    uint64_t s;
    const rec *p;
    for (int spin = 0; !(p = sched_ring_peek(x->r, w->id, &s)); spin++)
      if (spin > 16) sched_yield();
    if (s != x->cfg.first + (uint64_t)k)
      report(x, "cursor is not first + records consumed", w->id, k);
    if (!valid(x, p)) {
      report(x, "bad payload", w->id, k);
    } else {
      if (p->counter != last[p->producer] + 1)
        report(x, "a producer's records out of order or lost", w->id, k);
      last[p->producer] = p->counter;
    }
    seen[k] = p;
    if (w->id == 0 && x->cfg.slow_every && k % x->cfg.slow_every == 0) {
      struct timespec ts = {0, 50000}; /* hold the record unadvanced */
      nanosleep(&ts, NULL);
    }
    sched_ring_advance(x->r, w->id);
  }
  free(last);
  return NULL;
}

/* every consumer's sequence equals consumer 0's; consumer 0's is a
 * permutation of all records, and publish's return values map each record
 * to its position: unique, dense and in the order consumers saw them */
static void check_orders(run *x) {
  for (int c = 1; c < x->cfg.consumers; c++)
    for (int64_t k = 0; k < x->total; k++)
      if (x->seen[(int64_t)c * x->total + k] != x->seen[k])
        fail_msg("consumer %d differs from consumer 0 at %lld", c,
                 (long long)k);
  for (int64_t k = 0; k < x->total; k++) {
    int64_t idx = x->seen[k] - x->recs; /* valid() held for every record */
    if (x->seqs[idx] != x->cfg.first + (uint64_t)k)
      fail_msg("record %lld: publish returned %llu, consumers saw it at %llu",
               (long long)idx, (unsigned long long)x->seqs[idx],
               (unsigned long long)(x->cfg.first + (uint64_t)k));
  }
  assert_true(sched_ring_claimed(x->r) == x->cfg.first + (uint64_t)x->total);
  for (int c = 0; c < x->cfg.consumers; c++)
    assert_true(sched_ring_cursor(x->r, c) ==
                x->cfg.first + (uint64_t)x->total);
}

/* A lost or overwritten record shows as a stall (a consumer waits forever
 * for a sequence that will never appear): turn it into a failure with the
 * ring's state. The stuck threads and x are leaked then. */
static void join_or_fail(run *x, pthread_t *t, int n) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += STALL_S;
  for (int i = 0; i < n; i++) {
    if (pthread_timedjoin_np(t[i], NULL, &deadline) == 0) continue;
    char cur[96] = "";
    for (int c = 0, len = 0; c < x->cfg.consumers && c < 4; c++)
      len += snprintf(cur + len, sizeof cur - (size_t)len, " %llu",
                      (unsigned long long)sched_ring_cursor(x->r, c));
    fail_msg("stalled for %d s: capacity %u, %d producers, %d consumers, "
             "claimed %llu, cursors%s", STALL_S, x->cfg.capacity,
             x->cfg.producers, x->cfg.consumers,
             (unsigned long long)sched_ring_claimed(x->r), cur);
  }
}

static void run_ring(run_cfg cfg) {
  run *x = calloc(1, sizeof *x);
  assert_non_null(x);
  x->cfg = cfg;
  x->total = cfg.per_producer * cfg.producers;
  x->r = sched_ring_create_at(cfg.capacity, cfg.consumers, cfg.first);
  x->recs = calloc((size_t)x->total, sizeof *x->recs);
  x->seqs = calloc((size_t)x->total, sizeof *x->seqs);
  x->seen = calloc((size_t)x->total * (size_t)cfg.consumers, sizeof *x->seen);
  assert_true(x->r && x->recs && x->seqs && x->seen);
  int n = cfg.producers + cfg.consumers;
  pthread_t *t = calloc((size_t)n, sizeof *t);
  worker *w = calloc((size_t)n, sizeof *w);
  assert_true(t && w);
  for (int i = 0; i < n; i++) {
    w[i].x = x;
    w[i].id = i < cfg.consumers ? i : i - cfg.consumers;
    assert_int_equal(pthread_create(&t[i], NULL,
                                    i < cfg.consumers ? consumer_main
                                                      : producer_main,
                                    &w[i]),
                     0);
  }
  join_or_fail(x, t, n);
  if (atomic_load_explicit(&x->errors, memory_order_relaxed))
    fail_msg("capacity %u, %d producers, %d consumers: %s", cfg.capacity,
             cfg.producers, cfg.consumers, x->error);
  check_orders(x);
  sched_ring_destroy(x->r);
  free(t);
  free(w);
  free(x->recs);
  free(x->seqs);
  free(x->seen);
  free(x);
}

static void test_bad_arguments(void **state) {
  (void)state;
  assert_null(sched_ring_create(0, 1));
  assert_null(sched_ring_create(1, 1));
  assert_null(sched_ring_create(6, 1));
  assert_null(sched_ring_create(8, 0));
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  sched_ring_destroy(NULL);
}

/* one thread publishes and consumes: order, peek on empty, two consumers
 * at different cursors, and the slot reuse once both have passed it */
static void test_single_thread_order(void **state) {
  (void)state;
  int v[12];
  sched_ring *r = sched_ring_create(4, 2);
  assert_non_null(r);
  uint64_t s = 99;
  assert_null(sched_ring_peek(r, 0, &s));
  assert_true(s == 0);
  for (int i = 0; i < 4; i++)
    assert_true(sched_ring_publish(r, &v[i]) == (uint64_t)i);
  assert_true(sched_ring_claimed(r) == 4);
  for (int i = 0; i < 4; i++) {
    assert_ptr_equal(sched_ring_peek(r, 0, &s), &v[i]);
    assert_ptr_equal(sched_ring_peek(r, 0, &s), &v[i]); /* no advance */
    assert_true(s == (uint64_t)i);
    sched_ring_advance(r, 0);
  }
  assert_null(sched_ring_peek(r, 0, &s));
  assert_true(sched_ring_cursor(r, 0) == 4 && sched_ring_cursor(r, 1) == 0);
  for (int lap = 0; lap < 2; lap++) { /* consumer 1 frees one slot a time */
    for (int i = 0; i < 4; i++) {
      int k = lap * 4 + i;
      assert_ptr_equal(sched_ring_peek(r, 1, &s), &v[k]);
      sched_ring_advance(r, 1);
      assert_true(sched_ring_publish(r, &v[k + 4]) == (uint64_t)(k + 4));
      assert_ptr_equal(sched_ring_peek(r, 0, &s), &v[k + 4]);
      assert_true(s == (uint64_t)(k + 4));
      sched_ring_advance(r, 0);
    }
  }
  assert_true(sched_ring_cursor(r, 0) == 12 && sched_ring_cursor(r, 1) == 8);
  sched_ring_destroy(r);
}

/* slot indices wrap thousands of times in a 2- and a 4-slot ring */
static void test_wrap_small_rings(void **state) {
  (void)state;
  for (uint32_t cap = 2; cap <= 4; cap *= 2) {
    run_ring((run_cfg){cap, 1, 1, 10000 / SCALE, 0, 0, false});
    run_ring((run_cfg){cap, 2, 3, 5000 / SCALE, 0, 0, false});
  }
}

/* the 64-bit sequence counters wrap past UINT64_MAX mid-run */
static void test_wrap_counters(void **state) {
  (void)state;
  uint64_t first = UINT64_MAX - 1000;
  run_ring((run_cfg){4, 2, 3, 5000 / SCALE, first, 0, true});
  run_ring((run_cfg){64, 3, 2, 5000 / SCALE, first + 7, 0, true});
}

/* producers x consumers sweep: 1/2/4 x 1/3/8/64 */
static void test_conservation(void **state) {
  (void)state;
  static const int producers[] = {1, 2, 4};
  static const int consumers[] = {1, 3, 8, 64};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) {
      int64_t total = consumers[j] >= 64 ? 40000 : 200000;
      run_ring((run_cfg){256, producers[i], consumers[j],
                         total / SCALE / producers[i], 0, 0, false});
    }
}

/* an 8-slot ring with a consumer that sleeps holding a record: producers
 * must wait, never overwrite */
static void test_backpressure(void **state) {
  (void)state;
  run_ring((run_cfg){8, 1, 2, 20000 / SCALE, 0, 16, true});
  run_ring((run_cfg){8, 4, 3, 5000 / SCALE, 0, 16, true});
  run_ring((run_cfg){8, 2, 8, 5000 / SCALE, 0, 8, true});
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_single_thread_order),
      cmocka_unit_test(test_wrap_small_rings),
      cmocka_unit_test(test_wrap_counters),
      cmocka_unit_test(test_conservation),
      cmocka_unit_test(test_backpressure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
