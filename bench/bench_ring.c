/* The broadcast op ring (sched/ring.h): what one publish costs the
 * caller's thread while C consumer threads (ranks) drain the ring, for
 * C = 8 and 64. A publish touches one slot whatever C is (the gating scan
 * over the cursors is amortised over the ring's capacity), so the ideal
 * ratio_64_to_8 is 1; on a machine with fewer cores than consumers the
 * wall-clock figure also carries the consumers' share of the cores, which
 * cpu_ns (the producer thread's own CPU time) leaves out.
 *   ring_publish  ns: wall ns per publish, best of reps, capacity 1024;
 *                 cpu_ns: producer thread CPU ns per publish, same rep */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench/bench.h"
#include "bench/bench_ring.h"
#include "sched/ring.h"

#define RING_BENCH_CAPACITY 1024
#define RING_BENCH_RECORDS (1 << 17)

typedef struct ring_bench {
  sched_ring *r;
  int64_t records;
  _Atomic int ready; /* consumers at the start line */
} ring_bench;

typedef struct ring_bench_consumer {
  ring_bench *b;
  int id;
} ring_bench_consumer;

static void *drain(void *arg) {
  ring_bench_consumer *w = arg;
  ring_bench *b = w->b;
  /* relaxed: a start line only; thread creation orders the setup */
  atomic_fetch_add_explicit(&b->ready, 1, memory_order_relaxed);
  for (int64_t k = 0; k < b->records; k++) {
    uint64_t seq;
    for (int spin = 0; !sched_ring_peek(b->r, w->id, &seq); spin++) {
      if (spin >= 64) sched_yield();
    }
    sched_ring_advance(b->r, w->id);
  }
  return NULL;
}

static double thread_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* one rep: seconds per publish, wall and producer CPU; false on failure */
static bool ring_rep(int consumers, double *wall, double *cpu) {
  static int token; /* any non-NULL item */
  ring_bench b = {sched_ring_create(RING_BENCH_CAPACITY, consumers),
                  RING_BENCH_RECORDS, 0};
  pthread_t *t = calloc((size_t)consumers, sizeof *t);
  ring_bench_consumer *w = calloc((size_t)consumers, sizeof *w);
  bool ok = b.r && t && w;
  int started = 0;
  for (; ok && started < consumers; started++) {
    w[started] = (ring_bench_consumer){&b, started};
    if (pthread_create(&t[started], NULL, drain, &w[started])) ok = false;
  }
  if (ok) {
    while (atomic_load_explicit(&b.ready, memory_order_relaxed) < consumers)
      sched_yield();
    double c0 = thread_cpu_now(), t0 = bench_now();
    for (int64_t i = 0; i < b.records; i++) sched_ring_publish(b.r, &token);
    *wall = (bench_now() - t0) / (double)b.records;
    *cpu = (thread_cpu_now() - c0) / (double)b.records;
  } else {
    /* feed the consumers that did start so that they finish */
    for (int64_t i = 0; b.r && i < b.records; i++)
      sched_ring_publish(b.r, &token);
  }
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  sched_ring_destroy(b.r);
  free(t);
  free(w);
  return ok;
}

void bench_sched_ring(int reps) {
  static const int consumers[] = {8, 64};
  double best[2] = {1e300, 1e300}, best_cpu[2] = {1e300, 1e300};
  if (reps < 1) reps = 1;
  for (int i = 0; i < 2; i++) {
    for (int r = 0; r < reps; r++) {
      double wall = 0, cpu = 0;
      if (!ring_rep(consumers[i], &wall, &cpu)) {
        fprintf(stderr, "bench ring: setup failed (%d consumers)\n",
                consumers[i]);
        return;
      }
      if (wall < best[i]) best[i] = wall;
      if (cpu < best_cpu[i]) best_cpu[i] = cpu;
    }
    printf("{\"bench\":\"ring_publish\",\"consumers\":%d,\"ns\":%.1f,"
           "\"cpu_ns\":%.1f", consumers[i], best[i] * 1e9,
           best_cpu[i] * 1e9);
    if (i == 1)
      printf(",\"ratio_64_to_8\":%.2f,\"cpu_ratio_64_to_8\":%.2f",
             best[1] / best[0], best_cpu[1] / best_cpu[0]);
    printf("}\n");
  }
}
