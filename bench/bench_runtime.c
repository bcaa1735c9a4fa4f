/* `dtorch bench sched`, the runtime's figures (the deque's and the rank
 * queue's come from bench_deque.c and bench_queue.c):
 *   wake     µs from publishing a record to a parked rank running it (the
 *            record's function stamps the time on the rank), median, p90
 *            and min of 200, each after the rank parked; futex_us: the
 *            median of a raw FUTEX_WAKE of a sleeping thread in the same
 *            run, and ratio = us / futex_us
 *   switch   the floor under any hand-off between threads that share a
 *            CPU (three threads on two CPUs: an issuer and two ranks): µs
 *            per round trip of two threads pinned to one CPU passing a
 *            turn back and forth with sched_yield, and with futex
 *            wait/wake; and the futex round trip between two CPUs.
 *            Medians of 5 runs of 20,000 round trips
 *   publish  ns per op on the issuing thread for a 4-element dt_add on a
 *            runtime of 8 and of 64 ranks (bursts that never fill a queue);
 *            ratio_64_to_8 should stay near 1: one record per op whatever
 *            the rank count
 *   publish_sustained  ns per op per issuing thread, 1 and 4 threads each
 *            adding on its own rank for 100,000 ops without synchronising
 *            (many laps of its queue), 8 and 64 ranks */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_queue.h"
#include "bench/bench_sched.h"
#include "dtorch/dtorch.h"
#include "runtime/exec.h"

/* runs on the woken rank: the time it started running */
static void stamp(void *arg, dt_runtime *rt, int rank) {
  (void)rt;
  if (rank == 1) atomic_store((_Atomic double *)arg, bench_now());
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ---- the baseline: a raw futex wake of a sleeping thread */
typedef struct futex_ping {
  _Atomic uint32_t word;     /* the futex: bumped by the waker */
  _Atomic double woke;       /* when the sleeper ran */
  _Atomic int stop;
} futex_ping;

static void *futex_sleeper(void *arg) {
  futex_ping *f = arg;
  uint32_t seen = 0;
  while (!atomic_load(&f->stop)) {
    while (atomic_load(&f->word) == seen && !atomic_load(&f->stop))
      syscall(SYS_futex, &f->word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
    seen = atomic_load(&f->word);
    atomic_store(&f->woke, bench_now());
  }
  return NULL;
}

/* median µs from FUTEX_WAKE to the sleeper running, 200 samples */
static double futex_wake_us(void) {
  enum { N = 200 };
  futex_ping f = {0};
  pthread_t t;
  if (pthread_create(&t, NULL, futex_sleeper, &f)) return -1;
  double lat[N];
  for (int i = 0; i < N; i++) {
    struct timespec ts = {0, 200000}; /* 200 us: it sleeps in the kernel */
    nanosleep(&ts, NULL);
    atomic_store(&f.woke, 0);
    double t0 = bench_now();
    atomic_fetch_add(&f.word, 1);
    syscall(SYS_futex, &f.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    while (atomic_load(&f.woke) == 0) {
    }
    lat[i] = (atomic_load(&f.woke) - t0) * 1e6;
  }
  atomic_store(&f.stop, 1);
  atomic_fetch_add(&f.word, 1);
  syscall(SYS_futex, &f.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  pthread_join(t, NULL);
  qsort(lat, N, sizeof *lat, cmp_double);
  return lat[N / 2];
}

static void bench_wake(int reps) {
  (void)reps; /* a fixed 200 samples */
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2,
                                                           .spin_us = 1});
  if (!rt) { fprintf(stderr, "%s\n", dt_last_error()); exit(1); }
  enum { N = 200 };
  double lat[N];
  _Atomic double ran;
  for (int i = 0; i < N; i++) {
    struct timespec ts = {0, 200000}; /* 200 us: the rank has parked */
    nanosleep(&ts, NULL);
    atomic_store(&ran, 0);
    double t0 = bench_now();
    runtime_publish_call(rt, 1, stamp, NULL, &ran); /* one record, rank 1 */
    while (atomic_load(&ran) == 0) {
    }
    lat[i] = (atomic_load(&ran) - t0) * 1e6;
  }
  qsort(lat, N, sizeof *lat, cmp_double);
  dt_runtime_destroy(rt);
  double base = futex_wake_us();
  printf("{\"bench\":\"wake\",\"us\":%.2f,\"p90_us\":%.2f,\"min_us\":%.2f,"
         "\"futex_us\":%.2f,\"ratio\":%.2f}\n", lat[N / 2], lat[N * 9 / 10],
         lat[0], base, lat[N / 2] / base);
}

/* ---- switch: round trips between two threads, pinned */
typedef struct pingpong {
  _Atomic uint32_t turn; /* even: the first thread's, odd: the second's */
  bool futex;
  int cpu;               /* the second thread's CPU */
} pingpong;

static void pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* waits until turn != v, yielding or sleeping on the futex */
static void pp_wait(pingpong *p, uint32_t v) {
  while (atomic_load(&p->turn) == v) {
    if (p->futex)
      syscall(SYS_futex, &p->turn, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
    else
      sched_yield();
  }
}
static void pp_pass(pingpong *p, uint32_t next) {
  atomic_store(&p->turn, next);
  if (p->futex) syscall(SYS_futex, &p->turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

enum { PP_ROUNDS = 20000 };
static void *pp_second(void *arg) {
  pingpong *p = arg;
  pin_self(p->cpu);
  for (uint32_t i = 0; i < PP_ROUNDS; i++) {
    pp_wait(p, 2 * i);     /* the first passed 2i + 1 */
    pp_pass(p, 2 * i + 2);
  }
  return NULL;
}

/* µs per round trip; -1 if the threads cannot be placed */
static double pp_run(bool futex, int cpu_a, int cpu_b) {
  pingpong p = {.futex = futex, .cpu = cpu_b};
  cpu_set_t old;
  pthread_getaffinity_np(pthread_self(), sizeof old, &old);
  pin_self(cpu_a);
  pthread_t t;
  if (pthread_create(&t, NULL, pp_second, &p)) return -1;
  double t0 = bench_now();
  for (uint32_t i = 0; i < PP_ROUNDS; i++) {
    pp_pass(&p, 2 * i + 1);
    pp_wait(&p, 2 * i + 1);
  }
  double us = (bench_now() - t0) / PP_ROUNDS * 1e6;
  pthread_join(t, NULL);
  pthread_setaffinity_np(pthread_self(), sizeof old, &old);
  return us;
}

static void bench_switch(int reps) {
  (void)reps; /* medians of 5 */
  /* the first two CPUs this thread may run on */
  cpu_set_t set;
  int c[2] = {-1, -1}, k = 0;
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0)
    for (int i = 0; i < CPU_SETSIZE && k < 2; i++)
      if (CPU_ISSET(i, &set)) c[k++] = i;
  double v[3][5];
  for (int r = 0; r < 5; r++) {
    v[0][r] = k > 0 ? pp_run(false, c[0], c[0]) : -1;
    v[1][r] = k > 0 ? pp_run(true, c[0], c[0]) : -1;
    v[2][r] = k > 1 ? pp_run(true, c[0], c[1]) : -1;
  }
  for (int j = 0; j < 3; j++) qsort(v[j], 5, sizeof **v, cmp_double);
  printf("{\"bench\":\"switch\",\"yield_same_cpu_us\":%.2f,"
         "\"futex_same_cpu_us\":%.2f,\"futex_two_cpus_us\":%.2f}\n",
         v[0][2], v[1][2], v[2][2]);
}

static double thread_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* best wall ns and best issuing-thread CPU ns per op over bursts of 256 */
static void publish_ns(int ranks, int reps, double *wall, double *cpu) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks});
  if (!rt) { fprintf(stderr, "%s\n", dt_last_error()); exit(1); }
  dt_runtime_set_current(rt);
  dt_tensor *a = dt_ones(DT_SHAPE(4), NULL);
  *wall = *cpu = 1e300;
  for (int r = 0; r < reps * 40; r++) {
    double t0 = bench_now(), c0 = thread_cpu_now();
    for (int i = 0; i < 256; i++) dt_tensor_release(dt_add(a, a));
    double t = (bench_now() - t0) / 256, c = (thread_cpu_now() - c0) / 256;
    if (t < *wall) *wall = t;
    if (c < *cpu) *cpu = c;
    dt_runtime_synchronize(rt);
  }
  *wall *= 1e9;
  *cpu *= 1e9;
  dt_tensor_release(a);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* cpu_ns: the issuing thread's own CPU time, which 64 threads sharing 2
 * cores do not inflate the way they inflate wall time */
/* sustained issuing: T threads, each adding on its own rank (cpu:t) with
 * no synchronisation for SUSTAIN_OPS ops (many laps of its queue); ns per
 * op per thread = wall time / ops of one thread */
#define SUSTAIN_OPS 100000
typedef struct sustain_arg {
  dt_runtime *rt;
  int rank;
  _Atomic int *ready;
  int threads;
  double secs;
} sustain_arg;

static void *sustain_thread(void *p) {
  sustain_arg *x = p;
  dt_runtime_set_current(x->rt);
  char dev[16];
  snprintf(dev, sizeof dev, "cpu:%d", x->rank);
  dt_tensor *a = dt_ones(DT_SHAPE(4), &(dt_tensor_options){.device = dev});
  atomic_fetch_add(x->ready, 1);
  while (atomic_load(x->ready) < x->threads) sched_yield();
  double t0 = bench_now();
  for (int i = 0; i < SUSTAIN_OPS; i++) {
    dt_tensor *c = dt_add(a, a);
    if (!c) { fprintf(stderr, "dt_add: %s\n", dt_last_error()); exit(1); }
    dt_tensor_release(c);
  }
  x->secs = bench_now() - t0;
  dt_tensor_release(a);
  dt_runtime_set_current(NULL);
  return NULL;
}

static double sustained_ns(int ranks, int threads) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks});
  if (!rt) { fprintf(stderr, "%s\n", dt_last_error()); exit(1); }
  _Atomic int ready = 0;
  sustain_arg x[4];
  pthread_t t[4];
  for (int i = 0; i < threads; i++) {
    x[i] = (sustain_arg){rt, i, &ready, threads, 0};
    if (pthread_create(&t[i], NULL, sustain_thread, &x[i])) exit(1);
  }
  double worst = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    if (x[i].secs > worst) worst = x[i].secs;
  }
  dt_runtime_synchronize(rt);
  dt_runtime_destroy(rt);
  return worst / SUSTAIN_OPS * 1e9;
}

static void bench_publish_sustained(int reps) {
  static const int threads[] = {1, 4};
  for (int ti = 0; ti < 2; ti++) {
    double best[2] = {1e300, 1e300};
    for (int r = 0; r < reps; r++)
      for (int k = 0; k < 2; k++) {
        double ns = sustained_ns(k ? 64 : 8, threads[ti]);
        if (ns < best[k]) best[k] = ns;
      }
    printf("{\"bench\":\"publish_sustained\",\"threads\":%d,\"ns_8\":%.1f,"
           "\"ns_64\":%.1f,\"ratio_64_to_8\":%.3f}\n", threads[ti], best[0],
           best[1], best[1] / best[0]);
  }
}

static void bench_publish(int reps) {
  double w8, c8, w64, c64;
  publish_ns(8, reps, &w8, &c8);
  publish_ns(64, reps, &w64, &c64);
  printf("{\"bench\":\"publish\",\"ranks\":8,\"ns\":%.1f,\"cpu_ns\":%.1f}\n",
         w8, c8);
  printf("{\"bench\":\"publish\",\"ranks\":64,\"ns\":%.1f,\"cpu_ns\":%.1f,"
         "\"ratio_64_to_8\":%.3f,\"cpu_ratio_64_to_8\":%.3f}\n",
         w64, c64, w64 / w8, c64 / c8);
}

int bench_sched(int argc, char **argv) {
  static const bench_figure figs[] = {{"deque", bench_sched_deque},
                                      {"queue", bench_sched_queue},
                                      {"spawn_pool", bench_spawn_pool},
                                      {"wake", bench_wake},
                                      {"switch", bench_switch},
                                      {"publish", bench_publish},
                                      {"publish_sustained", bench_publish_sustained}};
  return bench_main(argc, argv, "sched", figs,
                    (int)(sizeof figs / sizeof *figs));
}
