/* A rank's record queue (sched/queue.h): what one claim + fill + commit
 * costs the issuing threads while one consumer (the rank) drains, with 1
 * and 4 producer threads, against a baseline doing the same work with the
 * same threads: the same bounded ring of cells behind one pthread mutex
 * (producers and the consumer take the lock for each cell).
 *   queue_publish  ns: wall ns per record (all producers' records / time),
 *                  best of reps, capacity 1024, 64-byte records;
 *                  mutex_ns: the baseline; ratio = mutex_ns / ns */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/bench_queue.h"
#include "sched/queue.h"

#define QB_CAPACITY 1024
#define QB_RECORD 64
#define QB_RECORDS (1 << 18)

/* the baseline: a mutex around a ring of cells */
typedef struct mutex_queue {
  pthread_mutex_t lock;
  char *cells;
  uint64_t head, tail;
} mutex_queue;

typedef struct qbench {
  bool locked;               /* the mutex baseline, else sched_queue */
  sched_queue *q;
  mutex_queue m;
  int producers;
  int64_t per_producer;
  _Atomic int ready;
  _Atomic int64_t checksum;  /* the consumer's sum of record payloads */
} qbench;

static bool mq_put(mutex_queue *m, int64_t v) {
  pthread_mutex_lock(&m->lock);
  bool ok = m->tail - m->head < QB_CAPACITY;
  if (ok) {
    char *c = m->cells + (m->tail % QB_CAPACITY) * QB_RECORD;
    memset(c, 0, QB_RECORD);
    memcpy(c, &v, sizeof v);
    m->tail++;
  }
  pthread_mutex_unlock(&m->lock);
  return ok;
}

static bool mq_take(mutex_queue *m, int64_t *v) {
  pthread_mutex_lock(&m->lock);
  bool ok = m->head != m->tail;
  if (ok) {
    memcpy(v, m->cells + (m->head % QB_CAPACITY) * QB_RECORD, sizeof *v);
    m->head++;
  }
  pthread_mutex_unlock(&m->lock);
  return ok;
}

static void start_line(qbench *b) {
  /* relaxed: a start line only; thread creation orders the setup */
  atomic_fetch_add_explicit(&b->ready, 1, memory_order_relaxed);
  while (atomic_load_explicit(&b->ready, memory_order_relaxed) < b->producers + 1)
    sched_yield();
}

static void *producer(void *arg) {
  qbench *b = arg;
  start_line(b);
  for (int64_t i = 1; i <= b->per_producer; i++) {
    if (b->locked) {
      for (int s = 0; !mq_put(&b->m, i); s++) if (s > 64) sched_yield();
      continue;
    }
    uint64_t pos;
    char *c = sched_queue_claim(b->q, &pos);
    memset(c, 0, QB_RECORD);
    memcpy(c, &i, sizeof i);
    sched_queue_commit(b->q, pos);
  }
  return NULL;
}

static void *consumer(void *arg) {
  qbench *b = arg;
  start_line(b);
  int64_t sum = 0, n = b->per_producer * b->producers;
  for (int64_t k = 0; k < n; k++) {
    int64_t v;
    if (b->locked) {
      for (int s = 0; !mq_take(&b->m, &v); s++) if (s > 64) sched_yield();
    } else {
      char *c;
      for (int s = 0; !(c = sched_queue_peek(b->q)); s++) if (s > 64) sched_yield();
      memcpy(&v, c, sizeof v);
      sched_queue_pop(b->q);
    }
    sum += v;
  }
  atomic_store_explicit(&b->checksum, sum, memory_order_relaxed);
  return NULL;
}

/* seconds per record, or -1 on a setup failure or a wrong checksum */
static double run(bool locked, int producers) {
  qbench b = {.locked = locked, .producers = producers,
              .per_producer = QB_RECORDS / producers};
  if (locked) {
    pthread_mutex_init(&b.m.lock, NULL);
    b.m.cells = calloc(QB_CAPACITY, QB_RECORD);
    if (!b.m.cells) return -1;
  } else if (!(b.q = sched_queue_create(QB_CAPACITY, QB_RECORD))) {
    return -1;
  }
  pthread_t t[9];
  double t0 = bench_now();
  int started = 0;
  bool ok = pthread_create(&t[started], NULL, consumer, &b) == 0;
  for (started = ok; ok && started <= producers; started++)
    ok = pthread_create(&t[started], NULL, producer, &b) == 0;
  if (!ok) {
    fprintf(stderr, "bench queue: cannot start threads\n");
    exit(1); /* started threads wait at the start line: nothing to join */
  }
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  double secs = bench_now() - t0;
  int64_t per = b.per_producer, want = producers * per * (per + 1) / 2;
  bool right = atomic_load_explicit(&b.checksum, memory_order_relaxed) == want;
  if (locked) {
    free(b.m.cells);
    pthread_mutex_destroy(&b.m.lock);
  } else {
    sched_queue_destroy(b.q);
  }
  return right ? secs / (double)(per * producers) : -1;
}

void bench_sched_queue(int reps) {
  static const int producers[] = {1, 4};
  for (int i = 0; i < 2; i++) {
    double best = 1e300, base = 1e300;
    for (int r = 0; r < reps; r++) {
      double q = run(false, producers[i]), m = run(true, producers[i]);
      if (q < 0 || m < 0) {
        fprintf(stderr, "bench queue: a run lost or corrupted records\n");
        return;
      }
      if (q < best) best = q;
      if (m < base) base = m;
    }
    printf("{\"bench\":\"queue_publish\",\"producers\":%d,\"ns\":%.1f,"
           "\"mutex_ns\":%.1f,\"ratio\":%.2f}\n", producers[i], best * 1e9,
           base * 1e9, base / best);
  }
}
