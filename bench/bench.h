/* Benchmark helpers: a monotonic clock and best-of-N timing. Benchmarks
 * print one JSON object per figure; a figure worth quoting is a ratio to a
 * baseline measured in the same run (these machines are noisy). */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* one figure of a `dtorch bench <what>` run */
typedef struct bench_figure {
  const char *name;
  void (*run)(int reps);
} bench_figure;

/* `dtorch bench <what> [--reps N] [--only NAME]`: runs the n figures (or
 * the one named) with reps (default 5, at least 1); an unknown argument
 * prints what was expected and returns 2, else 0 */
static inline int bench_main(int argc, char **argv, const char *what,
                             const bench_figure *figs, int n) {
  int reps = 5;
  const char *only = NULL;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "dtorch bench %s: unknown argument '%s' (expected "
              "--reps N, --only ", what, argv[i]);
      for (int f = 0; f < n; f++)
        fprintf(stderr, "%s%s", f ? "|" : "", figs[f].name);
      fprintf(stderr, ")\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  for (int f = 0; f < n; f++)
    if (!only || !strcmp(only, figs[f].name)) figs[f].run(reps);
  return 0;
}

int bench_core(int argc, char **argv);
int bench_sched(int argc, char **argv);
int bench_dispatch(int argc, char **argv);
int bench_demo(int argc, char **argv);
int bench_io(int argc, char **argv);
int bench_ops(int argc, char **argv);
int bench_gpu(int argc, char **argv);

#endif
