/* `dtorch bench sched --only spawn_pool`: the pool as the engine uses it,
 * against a classic thread pool doing the same work with the same threads.
 *
 *   spawn_pool  one issuing thread publishes POOL_RECORDS records to rank 0
 *               of an R-rank pool; each record splits POOL_CHUNKS chunks of
 *               POOL_GRAIN float adds with sched_parallel_for (rank 0's
 *               deque; the other, idle ranks wake and steal) and checks
 *               the chunks' sums. ns per record, wall time.
 *   baseline    the same records through a mutex + condvar queue to a rank
 *               0 thread, which splits the same chunks into one mutex +
 *               condvar task queue shared with R - 1 workers; every waiter
 *               spins for the pool's spin time (20 µs) before it sleeps on
 *               its condvar, as the pool's ranks do before they park.
 *   ratio = baseline ns / pool ns (above 1: the pool is faster).
 * Best of `reps` runs each; every record's sum is checked on both sides. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/bench_sched.h"
#include "sched/pool.h"

#define POOL_RECORDS 20000
#define POOL_CHUNKS 16
#define POOL_GRAIN 1024
#define POOL_SPIN_NS 20000
#define POOL_QCAP 1024

static float pool_data[POOL_CHUNKS * POOL_GRAIN];
static double pool_want; /* the sum of pool_data, in double */

static void pool_die(const char *what) {
  fprintf(stderr, "bench spawn_pool: %s\n", what);
  exit(1);
}

/* one chunk: its sum in out[chunk] (chunks are disjoint: no sharing) */
typedef struct pool_job { double out[POOL_CHUNKS]; } pool_job;
static void chunk_sum(int64_t begin, int64_t end, void *ctx) {
  pool_job *j = ctx;
  float s = 0;
  for (int64_t i = begin; i < end; i++) s += pool_data[i];
  j->out[begin / POOL_GRAIN] = s;
}
static void job_check(const pool_job *j) {
  double s = 0;
  for (int c = 0; c < POOL_CHUNKS; c++) s += j->out[c];
  if (s != pool_want) pool_die("a chunk was lost or ran twice");
}

/* ---- the pool */
static _Atomic int64_t pool_done;
static void pool_exec(void *ctx, void *record, int rank) {
  (void)ctx;
  (void)record;
  (void)rank;
  pool_job j;
  memset(&j, 0, sizeof j);
  sched_parallel_for(POOL_CHUNKS * POOL_GRAIN, POOL_GRAIN, chunk_sum, &j);
  job_check(&j);
  /* release: the issuer's acquire load sees every record finished */
  atomic_fetch_add_explicit(&pool_done, 1, memory_order_release);
}

static void wait_for(_Atomic int64_t *done, int64_t n) {
  while (atomic_load_explicit(done, memory_order_acquire) < n) sched_yield();
}

static double run_pool(int ranks) {
  sched_pool_config cfg = {.ranks = ranks, .queue_capacity = POOL_QCAP,
                           .record_size = 8, .exec = pool_exec,
                           .spin_ns = POOL_SPIN_NS};
  const char *why = NULL;
  sched_pool *p = sched_pool_create(&cfg, &why);
  if (!p) pool_die(why);
  atomic_store(&pool_done, 0);
  double t0 = bench_now();
  for (int i = 0; i < POOL_RECORDS; i++) {
    sched_claim c;
    sched_pool_claim(p, 0, &c);
    sched_pool_commit(p, &c);
  }
  wait_for(&pool_done, POOL_RECORDS);
  double t = bench_now() - t0;
  sched_pool_destroy(p);
  return t;
}

/* ---- the baseline: mutex + condvar queues, spin then sleep */
typedef struct mq {         /* a counting queue of work items */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic int64_t avail;    /* items queued (peeked while spinning) */
  int64_t head, tail;       /* under mu */
  int sleepers;             /* under mu */
} mq;

static void mq_init(mq *q) {
  memset(q, 0, sizeof *q);
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
}
static void mq_destroy(mq *q) {
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->cv);
}

/* adds n items; wakes sleepers */
static void mq_put(mq *q, int64_t n) {
  pthread_mutex_lock(&q->mu);
  q->tail += n;
  atomic_store_explicit(&q->avail, q->tail - q->head, memory_order_relaxed);
  if (q->sleepers) pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

/* takes one item without waiting: its index, or -1 */
static int64_t mq_try(mq *q) {
  if (atomic_load_explicit(&q->avail, memory_order_relaxed) <= 0) return -1;
  pthread_mutex_lock(&q->mu);
  int64_t k = q->head < q->tail ? q->head++ : -1;
  atomic_store_explicit(&q->avail, q->tail - q->head, memory_order_relaxed);
  pthread_mutex_unlock(&q->mu);
  return k;
}

/* takes one item: spins for POOL_SPIN_NS, then sleeps; -1 once *stop */
static int64_t mq_take(mq *q, _Atomic bool *stop) {
  double until = bench_now() + POOL_SPIN_NS * 1e-9;
  for (;;) {
    int64_t k = mq_try(q);
    if (k >= 0) return k;
    if (atomic_load_explicit(stop, memory_order_acquire)) return -1;
    if (bench_now() < until) continue;
    pthread_mutex_lock(&q->mu);
    while (q->head == q->tail && !atomic_load(stop)) {
      q->sleepers++;
      pthread_cond_wait(&q->cv, &q->mu);
      q->sleepers--;
    }
    pthread_mutex_unlock(&q->mu);
    until = bench_now() + POOL_SPIN_NS * 1e-9;
  }
}

typedef struct base_pool {
  mq records, tasks;
  _Atomic bool stop;
  _Atomic int64_t done;
  pool_job *job;              /* the record being split (one at a time) */
  _Atomic int64_t remaining;  /* its chunks not yet run */
  int64_t task_base;          /* task index of its chunk 0 */
} base_pool;

static void base_chunk(base_pool *b, int64_t task) {
  int64_t c = task - b->task_base;
  chunk_sum(c * POOL_GRAIN, (c + 1) * POOL_GRAIN, b->job);
  /* release: the splitter's acquire load sees the chunk's sum */
  atomic_fetch_sub_explicit(&b->remaining, 1, memory_order_release);
}

static void *base_worker(void *arg) {
  base_pool *b = arg;
  for (int64_t k; (k = mq_take(&b->tasks, &b->stop)) >= 0;) base_chunk(b, k);
  return NULL;
}

static void *base_rank0(void *arg) {
  base_pool *b = arg;
  pool_job j;
  for (int64_t r; (r = mq_take(&b->records, &b->stop)) >= 0;) {
    memset(&j, 0, sizeof j);
    b->job = &j;
    b->task_base = b->tasks.tail; /* only this thread adds tasks */
    atomic_store_explicit(&b->remaining, POOL_CHUNKS, memory_order_relaxed);
    mq_put(&b->tasks, POOL_CHUNKS);
    for (int64_t k; (k = mq_try(&b->tasks)) >= 0;) base_chunk(b, k);
    for (int spins = 0;
         atomic_load_explicit(&b->remaining, memory_order_acquire) > 0; spins++)
      if (spins > 1000) sched_yield();
    job_check(&j);
    atomic_fetch_add_explicit(&b->done, 1, memory_order_release);
  }
  return NULL;
}

static double run_baseline(int ranks) {
  base_pool *b = calloc(1, sizeof *b);
  if (!b) pool_die("out of memory");
  mq_init(&b->records);
  mq_init(&b->tasks);
  pthread_t t[64];
  if (pthread_create(&t[0], NULL, base_rank0, b)) pool_die("pthread_create");
  for (int i = 1; i < ranks; i++)
    if (pthread_create(&t[i], NULL, base_worker, b)) pool_die("pthread_create");
  double t0 = bench_now();
  for (int i = 0; i < POOL_RECORDS; i++) {
    /* bounded like the pool's queue: wait while POOL_QCAP are in flight */
    while (i - atomic_load_explicit(&b->done, memory_order_acquire) >= POOL_QCAP)
      sched_yield();
    mq_put(&b->records, 1);
  }
  wait_for(&b->done, POOL_RECORDS);
  double took = bench_now() - t0;
  atomic_store_explicit(&b->stop, true, memory_order_release);
  mq_put(&b->records, 0); /* wake the sleepers to see stop */
  mq_put(&b->tasks, 0);
  for (int i = 0; i < ranks; i++) pthread_join(t[i], NULL);
  mq_destroy(&b->records);
  mq_destroy(&b->tasks);
  free(b);
  return took;
}

void bench_spawn_pool(int reps) {
  pool_want = 0;
  for (int i = 0; i < POOL_CHUNKS * POOL_GRAIN; i++) {
    pool_data[i] = (float)(i % 7);
  }
  for (int c = 0; c < POOL_CHUNKS; c++) { /* per chunk in float, as they add */
    float s = 0;
    for (int i = 0; i < POOL_GRAIN; i++) s += pool_data[c * POOL_GRAIN + i];
    pool_want += s;
  }
  static const int rank_counts[] = {2, 4};
  for (size_t r = 0; r < sizeof rank_counts / sizeof *rank_counts; r++) {
    int ranks = rank_counts[r];
    double best = 1e300, base = 1e300;
    for (int k = 0; k < reps; k++) {
      double t = run_pool(ranks);
      if (t < best) best = t;
      t = run_baseline(ranks);
      if (t < base) base = t;
    }
    printf("{\"bench\":\"spawn_pool\",\"ranks\":%d,\"records\":%d,"
           "\"chunks\":%d,\"grain\":%d,\"ns_per_record\":%.0f,"
           "\"baseline_ns_per_record\":%.0f,\"ratio\":%.2f}\n",
           ranks, POOL_RECORDS, POOL_CHUNKS, POOL_GRAIN,
           best / POOL_RECORDS * 1e9, base / POOL_RECORDS * 1e9, base / best);
    fflush(stdout);
  }
}
