/* The worker pool's two streams (sched/pool.c): one-rank records in each
 * rank's queue and all-rank records in the broadcast ring. Every rank must
 * run exactly the records addressed to it, each once, in the order they
 * were issued (one issuing thread, and across threads that hand work to
 * each other); parked ranks must all wake for a broadcast; a drain must
 * cover both streams. Checked against per-rank logs kept by the records
 * themselves, under ThreadSanitizer in CI. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sched/pool.h"
#include "testutil.h"
#include "threads.h"

typedef struct rec { int64_t seq; int target; } rec;

typedef struct logs {
  int ranks;
  int64_t cap;
  int64_t *n;          /* per rank: entries */
  int64_t *v;          /* per rank: cap entries */
  _Atomic int64_t countdown;
} logs;

static void log_exec(void *ctx, void *record, int rank) {
  logs *l = ctx;
  const rec *r = record;
  if (l->n[rank] < l->cap) l->v[(int64_t)rank * l->cap + l->n[rank]] = r->seq;
  l->n[rank]++;
  atomic_fetch_sub_explicit(&l->countdown, 1, memory_order_acq_rel);
}

static sched_pool *pool_with(logs *l, int ranks, int64_t cap) {
  l->ranks = ranks;
  l->cap = cap;
  l->n = calloc((size_t)ranks, sizeof *l->n);
  l->v = calloc((size_t)ranks * (size_t)cap, sizeof *l->v);
  atomic_init(&l->countdown, 0);
  sched_pool_config cfg = {.ranks = ranks, .queue_capacity = 64,
                           .record_size = sizeof(rec), .exec = log_exec,
                           .ctx = l};
  const char *why;
  sched_pool *p = sched_pool_create(&cfg, &why);
  if (!p) fail_msg("sched_pool_create: %s", why);
  return p;
}

static void logs_free(logs *l) {
  free(l->n);
  free(l->v);
}

static void issue(sched_pool *p, int target, int64_t seq) {
  sched_claim c;
  rec *r = sched_pool_claim(p, target, &c);
  assert_non_null(r);
  r->seq = seq;
  r->target = target;
  sched_pool_commit(p, &c);
}

/* one issuer, a random mix of one-rank and all-rank records (the queues
 * and the ring are small, so both wrap many times): every rank's log is
 * exactly its records, in issue order */
static void run_mix(int ranks, int64_t n) {
  logs l;
  sched_pool *p = pool_with(&l, ranks, n);
  int *target = malloc(sizeof(int) * (size_t)n);
  uint64_t x = 88172645463325252ull;
  for (int64_t i = 0; i < n; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    target[i] = x % 3 == 0 ? SCHED_ALL : (int)(x % (uint64_t)ranks);
    issue(p, target[i], i);
  }
  sched_pool_destroy(p); /* runs everything first */
  for (int r = 0; r < ranks; r++) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
      if (target[i] != SCHED_ALL && target[i] != r) continue;
      if (k >= l.n[r] || l.v[(int64_t)r * n + k] != i)
        fail_msg("rank %d: record %lld ran as entry %lld of %lld (order or "
                 "loss)", r, (long long)i, (long long)k, (long long)l.n[r]);
      k++;
    }
    assert_int_equal(k, l.n[r]);
  }
  free(target);
  logs_free(&l);
}

static void test_one_issuer_order(void **state) {
  (void)state;
  run_mix(3, 20000);
  run_mix(64, 4000); /* 64 ranks on this machine's CPUs: parked, woken */
}

/* across threads: A publishes, then hands over (a release store); B then
 * publishes to one rank. On that rank A's record runs first, whichever
 * stream each used. */
typedef struct handoff { sched_pool *p; _Atomic int64_t turn; int64_t rounds; int rank; } handoff;

static void *thread_a(void *arg) {
  handoff *h = arg;
  for (int64_t i = 0; i < h->rounds; i++) {
    while (atomic_load_explicit(&h->turn, memory_order_acquire) != 2 * i) {}
    issue(h->p, i % 2 ? SCHED_ALL : h->rank, 2 * i);
    atomic_store_explicit(&h->turn, 2 * i + 1, memory_order_release);
  }
  return NULL;
}

static void test_handoff_order(void **state) {
  (void)state;
  logs l;
  int ranks = 4;
  int64_t rounds = 3000;
  handoff h = {.p = pool_with(&l, ranks, 2 * rounds), .rounds = rounds, .rank = 2};
  atomic_init(&h.turn, 0);
  pthread_t a = tu_spawn(thread_a, &h);
  for (int64_t i = 0; i < rounds; i++) { /* this thread is B */
    while (atomic_load_explicit(&h.turn, memory_order_acquire) != 2 * i + 1) {}
    issue(h.p, i % 2 ? h.rank : SCHED_ALL, 2 * i + 1);
    atomic_store_explicit(&h.turn, 2 * i + 2, memory_order_release);
  }
  pthread_join(a, NULL);
  sched_pool_destroy(h.p);
  /* rank 2 got every record, in seq order */
  assert_int_equal(l.n[2], 2 * rounds);
  for (int64_t k = 0; k < 2 * rounds; k++)
    if (l.v[2 * l.cap + k] != k)
      fail_msg("rank 2: entry %lld is record %lld", (long long)k,
               (long long)l.v[2 * l.cap + k]);
  logs_free(&l);
}

/* parked ranks all wake for a broadcast, many times over; and a drain
 * covers the broadcasts */
static void test_broadcast_wakes_parked(void **state) {
  (void)state;
  logs l;
  int ranks = 64;
  sched_pool *p = pool_with(&l, ranks, 64);
  for (int round = 0; round < 40; round++) {
    tu_sleep_ns(round % 4 == 0 ? 2000000 : 0); /* sometimes all parked */
    atomic_store(&l.countdown, ranks);
    issue(p, SCHED_ALL, round);
    int64_t until = tu_now_ns() + 10000000000LL;
    while (atomic_load(&l.countdown) > 0) {
      if (tu_now_ns() > until)
        fail_msg("round %d: %lld ranks never ran the broadcast", round,
                 (long long)atomic_load(&l.countdown));
      tu_sleep_ns(10000);
    }
  }
  for (int i = 0; i < 200; i++) issue(p, i % 5 ? SCHED_ALL : i % ranks, 1000 + i);
  while (!sched_pool_try_drain(p, 1000000000)) {}
  int64_t total = 0;
  for (int r = 0; r < ranks; r++) total += l.n[r];
  assert_int_equal(total, 40 * ranks + 160 * ranks + 40);
  sched_pool_destroy(p);
  logs_free(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_issuer_order),
      cmocka_unit_test(test_handoff_order),
      cmocka_unit_test(test_broadcast_wakes_parked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
