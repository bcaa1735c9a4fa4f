/* The Chase–Lev deque (sched/deque.c): single-threaded order against a
 * hand-written expectation (LIFO for the owner, FIFO for thieves), growth
 * from 2 slots to 100k items with and without wrapped indices, the 2^64
 * wrap of the indices, and concurrent conservation: the owner pushes and
 * pops while 1..8 thieves steal, and every item must be taken exactly once
 * (a per-item counter ends at 1). Thieves also check that the items each
 * one steals come in push order: the top item is always the oldest live
 * one, so successive steals see increasing item numbers. Each item points
 * to plain memory written before its push, so TSan checks the ordering.
 * On a loaded 2-core machine threads rarely run at the same instant, so
 * the owner waits now and then for a steal: the races are then real. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "sched/deque.h"

/* single-threaded tests: item i is the non-NULL pointer value i + 1 */
#define ITEM(i) ((void *)(uintptr_t)((uint64_t)(i) + 1))

static void test_empty(void **state) {
  (void)state;
  sched_deque_destroy(NULL);  /* no-op */
  sched_deque *q = sched_deque_create(2);
  assert_non_null(q);
  assert_null(sched_deque_pop_owner(q));
  assert_null(sched_deque_steal(q));
  assert_int_equal(sched_deque_size(q), 0);
  assert_true(sched_deque_push_owner(q, ITEM(0)));
  assert_ptr_equal(sched_deque_pop_owner(q), ITEM(0));
  assert_null(sched_deque_pop_owner(q));
  assert_null(sched_deque_steal(q));
  assert_true(sched_deque_push_owner(q, ITEM(1)));
  assert_ptr_equal(sched_deque_steal(q), ITEM(1));
  assert_null(sched_deque_steal(q));
  assert_null(sched_deque_pop_owner(q));
  assert_int_equal(sched_deque_size(q), 0);
  sched_deque_destroy(q);
}

static void test_capacity_rounding(void **state) {
  (void)state;
  const int64_t ask[] = {-5, 0, 1, 2, 3, 4, 5, 1000, 1024};
  const int64_t want[] = {2, 2, 2, 2, 4, 4, 8, 1024, 1024};
  for (size_t i = 0; i < sizeof ask / sizeof ask[0]; i++) {
    sched_deque *q = sched_deque_create(ask[i]);
    assert_non_null(q);
    assert_int_equal(sched_deque_capacity(q), want[i]);
    sched_deque_destroy(q);
  }
}

/* push 0..4; owner pops 4, 3; thieves steal 0, 1; owner pops 2 */
static void test_lifo_fifo(void **state) {
  (void)state;
  sched_deque *q = sched_deque_create(8);
  for (int i = 0; i < 5; i++) assert_true(sched_deque_push_owner(q, ITEM(i)));
  assert_int_equal(sched_deque_size(q), 5);
  assert_ptr_equal(sched_deque_pop_owner(q), ITEM(4));
  assert_ptr_equal(sched_deque_pop_owner(q), ITEM(3));
  assert_ptr_equal(sched_deque_steal(q), ITEM(0));
  assert_ptr_equal(sched_deque_steal(q), ITEM(1));
  assert_int_equal(sched_deque_size(q), 1);
  assert_ptr_equal(sched_deque_pop_owner(q), ITEM(2));
  assert_null(sched_deque_pop_owner(q));
  assert_null(sched_deque_steal(q));
  sched_deque_destroy(q);
}

/* from 2 slots to 100k items: LIFO drain, then FIFO drain */
static void test_growth(void **state) {
  (void)state;
  const int64_t n = 100000;
  sched_deque *q = sched_deque_create(2);
  for (int64_t i = 0; i < n; i++)
    assert_true(sched_deque_push_owner(q, ITEM(i)));
  assert_int_equal(sched_deque_size(q), n);
  assert_int_equal(sched_deque_capacity(q), 131072);
  for (int64_t i = n - 1; i >= 0; i--)
    assert_ptr_equal(sched_deque_pop_owner(q), ITEM(i));
  assert_null(sched_deque_pop_owner(q));
  for (int64_t i = 0; i < n; i++)
    assert_true(sched_deque_push_owner(q, ITEM(i)));
  for (int64_t i = 0; i < n; i++)
    assert_ptr_equal(sched_deque_steal(q), ITEM(i));
  assert_null(sched_deque_steal(q));
  sched_deque_destroy(q);
}

/* push 3 / steal 2 moves top along while the deque fills, so every growth
 * copies a range that wraps around the old array; starting the indices
 * just below 2^64 also runs them through the wrap */
static void grow_wrapped(uint64_t first) {
  sched_deque *q = sched_deque_create_at(4, first);
  assert_non_null(q);
  int64_t pushed = 0, stolen = 0;
  while (pushed < 30000) {
    for (int k = 0; k < 3; k++)
      assert_true(sched_deque_push_owner(q, ITEM(pushed++)));
    for (int k = 0; k < 2; k++)
      assert_ptr_equal(sched_deque_steal(q), ITEM(stolen++));
  }
  assert_int_equal(sched_deque_size(q), pushed - stolen);
  assert_int_equal(sched_deque_capacity(q), 16384);
  assert_ptr_equal(sched_deque_pop_owner(q), ITEM(pushed - 1));
  while (stolen < pushed - 1)
    assert_ptr_equal(sched_deque_steal(q), ITEM(stolen++));
  assert_null(sched_deque_steal(q));
  assert_null(sched_deque_pop_owner(q));
  sched_deque_destroy(q);
}

static void test_growth_wrapped(void **state) {
  (void)state;
  grow_wrapped(0);
  grow_wrapped(UINT64_MAX - 7);
  grow_wrapped(UINT64_MAX - 20000);
}

/* ---- concurrent conservation */

typedef enum mode { MODE_INTERLEAVED, MODE_PUSH_THEN_POP, MODE_ROUNDS } mode;

typedef struct shared {
  sched_deque *q;
  _Atomic int *taken;       /* per item: how many times it was taken */
  /* item i is &payload[i]; plain memory written by the owner before the
   * push and rewritten by the taker, so TSan checks that the deque orders
   * the item's contents (not just its pointer) between threads */
  int64_t *payload;
  int64_t n;
  atomic_int ready;         /* thieves spinning, waiting for start */
  atomic_bool start, done;
  atomic_int errors;        /* out-of-range items, order violations */
} shared;

typedef struct thief {
  pthread_t tid;
  shared *s;
  int64_t count;            /* items this thief took */
} thief;

static int64_t take(shared *s, void *x) {
  int64_t i = (int64_t *)x - s->payload;
  if (i < 0 || i >= s->n || s->payload[i] != i + 1) {
    atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
    return -1;
  }
  s->payload[i] = 0;
  atomic_fetch_add_explicit(&s->taken[i], 1, memory_order_relaxed);
  return i;
}

static void push(shared *s, int64_t i) {
  s->payload[i] = i + 1;
  assert_true(sched_deque_push_owner(s->q, &s->payload[i]));
}

static void *thief_main(void *p) {
  thief *th = p;
  shared *s = th->s;
  atomic_fetch_add_explicit(&s->ready, 1, memory_order_relaxed);
  /* acquire: pairs with the release store of start by the owner */
  while (!atomic_load_explicit(&s->start, memory_order_acquire)) sched_yield();
  int64_t last = -1;
  unsigned misses = 0;
  for (;;) {
    void *x = sched_deque_steal(s->q);
    if (x) {
      int64_t i = take(s, x);
      th->count++;
      if (i <= last)
        atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
      last = i;
      misses = 0;
      continue;
    }
    /* acquire: pairs with the owner's release store of done, made after
     * its pop found the deque empty for good; nothing is left to steal */
    if (atomic_load_explicit(&s->done, memory_order_acquire)) break;
    if (++misses % 32 == 0) sched_yield();  /* let the owner run (2 cores) */
  }
  return NULL;
}

static int64_t owner_pop(shared *s) {
  void *x = sched_deque_pop_owner(s->q);
  if (!x) return 0;
  take(s, x);
  return 1;
}

/* a short random pause: gives thieves a window to reach the items */
static void dawdle(uint32_t *rng, uint32_t max) {
  *rng = *rng * 1664525u + 1013904223u;
  for (uint32_t k = (*rng >> 8) % max; k > 0; k--) __asm__ volatile("");
}

/* waits until a thief takes an item (only thieves shrink the deque while
 * the owner waits), so that thieves are surely running and racing the
 * owner when it goes on, however the threads are scheduled */
static void await_steal(shared *s) {
  int64_t n = sched_deque_size(s->q);
  while (n > 0 && sched_deque_size(s->q) >= n) sched_yield();
}

/* the owner's side; returns the number of items it took itself */
static int64_t owner_run(shared *s, mode m) {
  int64_t own = 0, i = 0;
  uint32_t rng = 12345;
  while (i < s->n) {
    if (m == MODE_ROUNDS) {  /* 1..3 items, a pause, pop until empty */
      for (int k = (int)(i % 3); k >= 0 && i < s->n; k--)
        push(s, i++);
      if (i % 4 == 0) await_steal(s);
      dawdle(&rng, 2048);
      for (int64_t got = 1; got;) own += got = owner_pop(s);
      continue;
    }
    push(s, i++);
    if (m == MODE_INTERLEAVED) {  /* a pop after about half the pushes */
      dawdle(&rng, 256);
      if (rng & 0x100000) own += owner_pop(s);
      if (i % 64 == 0) await_steal(s);
    }
  }
  /* push-then-pop: let the thieves take half first, so that both ends
   * are busy until they meet */
  while (m == MODE_PUSH_THEN_POP && s->n > 1 &&
         sched_deque_size(s->q) > s->n / 2)
    sched_yield();
  for (int64_t got = 1; got;) own += got = owner_pop(s);
  return own;
}

static void run_conservation(int64_t n, int nthieves, mode m) {
  shared s = {.n = n};
  /* 2 slots: it grows while thieves steal; the indices start n/2 below
   * 2^64, so they wrap mid-run */
  s.q = sched_deque_create_at(2, UINT64_MAX - (uint64_t)n / 2);
  s.taken = calloc((size_t)n, sizeof *s.taken);
  s.payload = calloc((size_t)n, sizeof *s.payload);
  assert_non_null(s.q);
  assert_non_null(s.taken);
  assert_non_null(s.payload);
  thief th[8];
  assert_true(nthieves <= 8);
  for (int k = 0; k < nthieves; k++) {
    th[k] = (thief){.s = &s};
    assert_int_equal(pthread_create(&th[k].tid, NULL, thief_main, &th[k]), 0);
  }
  while (atomic_load_explicit(&s.ready, memory_order_relaxed) < nthieves)
    sched_yield();
  /* release: pairs with the thieves' acquire load of start */
  atomic_store_explicit(&s.start, true, memory_order_release);
  int64_t own = owner_run(&s, m), total = own;
  /* release: pairs with the thieves' acquire load of done */
  atomic_store_explicit(&s.done, true, memory_order_release);
  for (int k = 0; k < nthieves; k++) {
    assert_int_equal(pthread_join(th[k].tid, NULL), 0);
    total += th[k].count;
  }
  assert_int_equal(atomic_load(&s.errors), 0);
  for (int64_t i = 0; i < n; i++) {
    int c = atomic_load_explicit(&s.taken[i], memory_order_relaxed);
    if (c != 1)
      fail_msg("n=%lld thieves=%d mode=%d: item %lld taken %d times",
               (long long)n, nthieves, (int)m, (long long)i, c);
  }
  assert_int_equal(total, n);
  /* the owner's waits guarantee the thieves a share */
  if (m == MODE_PUSH_THEN_POP && n > 1) assert_true(total - own >= n / 2);
  if (n >= 1000) assert_true(total - own > 0);
  assert_int_equal(sched_deque_size(s.q), 0);
  free(s.taken);
  free(s.payload);
  sched_deque_destroy(s.q);
}

/* N in {1, 1000, 100000} x 1, 2, 4, 8 thieves (under 5 s with TSan) */
static void sweep(mode m) {
  const int64_t ns[] = {1, 1000, 100000};
  const int ts[] = {1, 2, 4, 8};
  for (size_t i = 0; i < 3; i++)
    for (size_t j = 0; j < 4; j++) run_conservation(ns[i], ts[j], m);
}

static void test_conservation_interleaved(void **state) {
  (void)state;
  sweep(MODE_INTERLEAVED);
}

/* all pushes, then all pops: thieves drain the top while the owner drains
 * the bottom, so the two meet at the last item */
static void test_conservation_push_then_pop(void **state) {
  (void)state;
  sweep(MODE_PUSH_THEN_POP);
}

/* many tiny rounds: the deque is at zero or one item most of the time, so
 * the owner and thieves race for the last item over and over */
static void test_conservation_last_item_rounds(void **state) {
  (void)state;
  sweep(MODE_ROUNDS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_capacity_rounding),
      cmocka_unit_test(test_lifo_fifo),
      cmocka_unit_test(test_growth),
      cmocka_unit_test(test_growth_wrapped),
      cmocka_unit_test(test_conservation_interleaved),
      cmocka_unit_test(test_conservation_push_then_pop),
      cmocka_unit_test(test_conservation_last_item_rounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
