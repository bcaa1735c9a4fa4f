/* `dtorch bench sched`, the deque's figures (sched/deque.c):
 *   deque_push_pop  one owner push + pop pair on a warm deque, ns
 *   deque_steal     ns per successful steal by one thief while the owner
 *                   keeps the deque filled (see the section below)
 *   spawn           tiny-task throughput: a binary tree of ~1M tasks, each
 *                   adding its node number to its worker's sum and
 *                   spawning its two children, run by SPAWN_WORKERS
 *                   workers that pop their own deque and steal from the
 *                   others; the baseline runs the same tasks through one
 *                   mutex + condvar FIFO shared by the same workers.
 *                   tasks / s / worker for both, and their ratio.
 * Each figure is the best of `reps` runs. Task records are preallocated,
 * one per tree node, so neither side measures malloc. Termination: the
 * tree's size is known, so each worker publishes how many tasks it has run
 * (its own cache line, written by it alone) and an idle worker stops when
 * the counts add up to the total: no shared counter is touched per task. */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/bench_sched.h"
#include "sched/deque.h"

#ifndef SPAWN_WORKERS
#define SPAWN_WORKERS 2        /* the machines this runs on have 2 cores */
#endif
#define SPAWN_DEPTH 20         /* 2^20 - 1 tasks */
#define BENCH_LINE 64

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static void die(const char *what) {
  fprintf(stderr, "bench_deque: %s\n", what);
  exit(1);
}

/* ---- deque_push_pop */

static double bench_push_pop(int reps) {
  const int iters = 10 * 1000 * 1000;
  sched_deque *q = sched_deque_create(64);
  if (!q) die("out of memory");
  uintptr_t sink = 0;
  double best = 1e300;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) {
      if (!sched_deque_push_owner(q, (void *)(uintptr_t)(i + 1))) die("push");
      sink += (uintptr_t)sched_deque_pop_owner(q);
    }
    double t = (bench_now() - t0) / iters;
    if (t < best) best = t;
  }
  if (sink == 0) die("push/pop lost items");
  sched_deque_destroy(q);
  return best * 1e9;
}

/* ---- deque_steal
 * The owner pushes whenever the deque holds fewer than STEAL_FILL items;
 * the thief times batches of STEAL_BATCH consecutive steals. A batch
 * counts only if every steal found an item and the owner pushed at least
 * half a batch meanwhile: on a busy machine the two threads are often not
 * running at the same time, and a steal from an idle owner's deque is
 * cheaper than the contended case this figure is about. The figure is the
 * median of the counted batches (null if the owner never ran alongside
 * within STEAL_SECONDS). */

#define STEAL_BATCH 256
#define STEAL_BATCHES 1000
#define STEAL_FILL 4096
#define STEAL_SECONDS 2.0

typedef struct steal_ctx {
  sched_deque *q;
  /* pushes so far, published by the owner */
  alignas(BENCH_LINE) _Atomic uint64_t pushed;
  alignas(BENCH_LINE) double batch[STEAL_BATCHES];  /* s per steal */
  int counted;
  atomic_bool go, stop;
} steal_ctx;

static void *steal_thief(void *p) {
  steal_ctx *c = p;
  /* acquire: pairs with the owner's release store of go (deque filled) */
  while (!atomic_load_explicit(&c->go, memory_order_acquire)) cpu_relax();
  double start = bench_now(), t0 = start;
  while (c->counted < STEAL_BATCHES && t0 - start < STEAL_SECONDS) {
    uint64_t p0 = atomic_load_explicit(&c->pushed, memory_order_relaxed);
    int k = 0;
    while (k < STEAL_BATCH && sched_deque_steal(c->q)) k++;
    double t1 = bench_now();
    uint64_t p1 = atomic_load_explicit(&c->pushed, memory_order_relaxed);
    if (k == STEAL_BATCH && p1 - p0 >= STEAL_BATCH / 2)
      c->batch[c->counted++] = (t1 - t0) / STEAL_BATCH;
    if (k < STEAL_BATCH) cpu_relax();
    t0 = t1;
  }
  /* release: pairs with the owner's acquire load of stop; batch is set */
  atomic_store_explicit(&c->stop, true, memory_order_release);
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* seconds per steal (median of counted batches), or -1 if none counted */
static double bench_steal_once(void) {
  steal_ctx *c = aligned_alloc(BENCH_LINE, sizeof *c);
  if (!c) die("out of memory");
  c->q = sched_deque_create(2 * STEAL_FILL);
  if (!c->q) die("out of memory");
  c->counted = 0;
  atomic_init(&c->pushed, 0);
  atomic_init(&c->go, false);
  atomic_init(&c->stop, false);
  pthread_t tid;
  if (pthread_create(&tid, NULL, steal_thief, c)) die("pthread_create");
  void *item = c;
  uint64_t pushed = 0;
  for (; pushed < STEAL_FILL; pushed++)
    if (!sched_deque_push_owner(c->q, item)) die("push");
  /* release: pairs with the thief's acquire load of go */
  atomic_store_explicit(&c->go, true, memory_order_release);
  /* acquire: pairs with the thief's release store of stop */
  while (!atomic_load_explicit(&c->stop, memory_order_acquire)) {
    if (sched_deque_size(c->q) < STEAL_FILL) {
      if (!sched_deque_push_owner(c->q, item)) die("push");
      atomic_store_explicit(&c->pushed, ++pushed, memory_order_relaxed);
    } else {
      cpu_relax();
    }
  }
  pthread_join(tid, NULL);
  sched_deque_destroy(c->q);
  qsort(c->batch, (size_t)c->counted, sizeof c->batch[0], cmp_double);
  double median = c->counted ? c->batch[c->counted / 2] : -1;
  free(c);
  return median;
}

/* ns per steal, best of reps; -1 if no run counted a batch */
static double bench_steal(int reps) {
  double best = -1;
  for (int r = 0; r < reps; r++) {
    double t = bench_steal_once();
    if (t >= 0 && (best < 0 || t < best)) best = t;
  }
  return best < 0 ? -1 : best * 1e9;
}

/* ---- spawn: the same task tree, two schedulers */

typedef struct spawn_worker spawn_worker;
typedef struct spawn_pool spawn_pool;

typedef struct spawn_task {
  void (*fn)(spawn_worker *w, uint32_t node);
  uint32_t node;
} spawn_task;

struct spawn_worker {
  /* tasks run, published for the termination check (only we write it) */
  alignas(BENCH_LINE) _Atomic int64_t done;
  int64_t ran;
  uint64_t sum;  /* of node numbers: checks that every task ran once */
  void (*spawn)(spawn_worker *w, spawn_task *t);
  sched_deque *q;
  spawn_pool *pool;
  int id;
  pthread_t tid;
};

struct spawn_pool {
  spawn_task *tasks;     /* one per tree node, indexed by node */
  uint32_t total;
  spawn_worker w[SPAWN_WORKERS];
  bool deques;           /* this run's scheduler: deques, or the FIFO */
  atomic_bool go;
  /* the baseline's queue: a FIFO of task pointers under one mutex */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  spawn_task **fifo;     /* total entries: each task is queued once */
  uint32_t head, tail, finished;
  int waiting;           /* workers blocked on cv */
};

/* node n's children are 2n + 1 and 2n + 2 (heap numbering) */
static void tree_task(spawn_worker *w, uint32_t node) {
  spawn_pool *p = w->pool;
  w->sum += node;
  uint64_t c = 2 * (uint64_t)node + 1;
  for (int k = 0; k < 2 && c + (uint64_t)k < p->total; k++) {
    spawn_task *t = &p->tasks[c + (uint64_t)k];
    t->fn = tree_task;
    t->node = (uint32_t)(c + (uint64_t)k);
    w->spawn(w, t);
  }
}

static void deque_spawn(spawn_worker *w, spawn_task *t) {
  if (!sched_deque_push_owner(w->q, t)) die("push: out of memory");
}

static bool all_done(spawn_pool *p) {
  int64_t n = 0;
  for (int k = 0; k < SPAWN_WORKERS; k++)
    n += atomic_load_explicit(&p->w[k].done, memory_order_relaxed);
  return n == p->total;
}

static void deque_worker(spawn_worker *w) {
  spawn_pool *p = w->pool;
  for (;;) {
    spawn_task *t = sched_deque_pop_owner(w->q);
    for (int k = 1; !t && k < SPAWN_WORKERS; k++)
      t = sched_deque_steal(p->w[(w->id + k) % SPAWN_WORKERS].q);
    if (t) {
      t->fn(w, t->node);
      atomic_store_explicit(&w->done, ++w->ran, memory_order_relaxed);
    } else if (all_done(p)) {
      return;
    } else {
      cpu_relax();
    }
  }
}

static void fifo_spawn(spawn_worker *w, spawn_task *t) {
  spawn_pool *p = w->pool;
  pthread_mutex_lock(&p->mu);
  p->fifo[p->tail++] = t;
  if (p->waiting) pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* takes a task and reports the previous one finished under one lock */
static void fifo_worker(spawn_worker *w) {
  spawn_pool *p = w->pool;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->head == p->tail && p->finished < p->total) {
      p->waiting++;
      pthread_cond_wait(&p->cv, &p->mu);
      p->waiting--;
    }
    if (p->head == p->tail) break;  /* all finished */
    spawn_task *t = p->fifo[p->head++];
    pthread_mutex_unlock(&p->mu);
    t->fn(w, t->node);
    w->ran++;
    pthread_mutex_lock(&p->mu);
    if (++p->finished == p->total) pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
}

static void run_worker(spawn_worker *w) {
  if (w->pool->deques) deque_worker(w);
  else fifo_worker(w);
}

static void *spawn_thread(void *arg) {
  spawn_worker *w = arg;
  /* acquire: pairs with the release store of go; the root task is queued */
  while (!atomic_load_explicit(&w->pool->go, memory_order_acquire))
    cpu_relax();
  run_worker(w);
  return NULL;
}

/* one run of the whole tree; seconds, and checks every task ran once */
static double spawn_run(spawn_pool *p, bool deques) {
  p->deques = deques;
  atomic_store_explicit(&p->go, false, memory_order_relaxed);
  p->head = p->tail = p->finished = 0;
  p->waiting = 0;
  for (int k = 0; k < SPAWN_WORKERS; k++) {
    spawn_worker *w = &p->w[k];
    atomic_store_explicit(&w->done, 0, memory_order_relaxed);
    w->ran = 0;
    w->sum = 0;
    w->spawn = deques ? deque_spawn : fifo_spawn;
    w->pool = p;
    w->id = k;
    w->q = deques ? sched_deque_create(256) : NULL;
    if (deques && !w->q) die("out of memory");
  }
  p->tasks[0] = (spawn_task){tree_task, 0};
  p->w[0].spawn(&p->w[0], &p->tasks[0]);  /* the root, from worker 0 */
  for (int k = 1; k < SPAWN_WORKERS; k++)
    if (pthread_create(&p->w[k].tid, NULL, spawn_thread, &p->w[k]))
      die("pthread_create");
  double t0 = bench_now();
  /* release: pairs with the workers' acquire load of go */
  atomic_store_explicit(&p->go, true, memory_order_release);
  run_worker(&p->w[0]);
  for (int k = 1; k < SPAWN_WORKERS; k++) pthread_join(p->w[k].tid, NULL);
  double t = bench_now() - t0;
  int64_t ran = 0;
  uint64_t sum = 0;
  for (int k = 0; k < SPAWN_WORKERS; k++) {
    ran += p->w[k].ran;
    sum += p->w[k].sum;
    sched_deque_destroy(p->w[k].q);
  }
  if (ran != p->total || sum != (uint64_t)p->total * (p->total - 1) / 2)
    die("spawn: a task was lost or ran twice");
  return t;
}

static void bench_spawn(int reps) {
  spawn_pool *p = aligned_alloc(BENCH_LINE, sizeof *p);  /* workers align */
  if (!p) die("out of memory");
  memset(p, 0, sizeof *p);
  p->total = (1u << SPAWN_DEPTH) - 1;
  p->tasks = calloc(p->total, sizeof *p->tasks);
  p->fifo = calloc(p->total, sizeof *p->fifo);
  if (!p->tasks || !p->fifo) die("out of memory");
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  double best_deque = 1e300, best_fifo = 1e300;
  for (int r = 0; r < reps; r++) {
    double t = spawn_run(p, true);
    if (t < best_deque) best_deque = t;
    t = spawn_run(p, false);
    if (t < best_fifo) best_fifo = t;
  }
  double rate = p->total / best_deque / SPAWN_WORKERS;
  double base = p->total / best_fifo / SPAWN_WORKERS;
  printf("{\"bench\":\"spawn\",\"threads\":%d,\"tasks\":%u,"
         "\"tasks_per_s_per_core\":%.0f,"
         "\"baseline_tasks_per_s_per_core\":%.0f,\"ratio\":%.2f}\n",
         SPAWN_WORKERS, p->total, rate, base, rate / base);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p->fifo);
  free(p->tasks);
  free(p);
}

void bench_sched_deque(int reps) {
  if (reps < 1) reps = 1;
  printf("{\"bench\":\"deque_push_pop\",\"ns\":%.2f}\n", bench_push_pop(reps));
  fflush(stdout);
  double steal = bench_steal(reps);
  if (steal < 0) printf("{\"bench\":\"deque_steal\",\"ns\":null}\n");
  else printf("{\"bench\":\"deque_steal\",\"ns\":%.1f}\n", steal);
  fflush(stdout);
  bench_spawn(reps);
  fflush(stdout);
}
