/* Benchmark helpers: a monotonic clock and best-of-N timing. Benchmarks
 * print one JSON object per figure; a figure worth quoting is a ratio to a
 * baseline measured in the same run (these machines are noisy). */
#ifndef DT_BENCH_BENCH_H
#define DT_BENCH_BENCH_H

#include <stdint.h>
#include <time.h>

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* runs fn(arg) `reps` times, `iters` calls per rep; returns the best
 * seconds per call */
typedef void (*bench_fn)(void *arg);
static inline double bench_best(bench_fn fn, void *arg, int reps, int iters) {
  double best = 1e300;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) fn(arg);
    double t = (bench_now() - t0) / iters;
    if (t < best) best = t;
  }
  return best;
}

int bench_core(int argc, char **argv);
int bench_sched(int argc, char **argv);

#endif
