/* The memory baselines (bench/bench_stream.h). */
#include "bench/bench_stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

typedef struct stream_part { const bench_stream *x; int i; } stream_part;

static void *stream_part_run(void *p) {
  const stream_part *w = p;
  const bench_stream *x = w->x;
  int64_t lo = x->n * w->i / x->threads, hi = x->n * (w->i + 1) / x->threads;
  if (x->copy) {
    memcpy(x->c + lo, x->b + lo, (size_t)(hi - lo) * sizeof(float));
  } else {
    const float *restrict a = x->a, *restrict b = x->b;
    float *restrict c = x->c;
    for (int64_t i = lo; i < hi; i++) c[i] = a[i] + b[i];
  }
  __asm__ volatile("" ::"r"(x->c) : "memory"); /* keep the stores */
  return NULL;
}

void bench_stream_run(const bench_stream *x) {
  pthread_t t[64];
  stream_part w[64];
  for (int i = 0; i < x->threads; i++) {
    w[i] = (stream_part){x, i};
    if (i && pthread_create(&t[i], NULL, stream_part_run, &w[i]) != 0) {
      fprintf(stderr, "bench stream: cannot start a thread\n");
      exit(1);
    }
  }
  stream_part_run(&w[0]); /* the calling thread is thread 0 */
  for (int i = 1; i < x->threads; i++) pthread_join(t[i], NULL);
}

double bench_stream_bandwidth(int64_t n, double *copy_bps, double *add_bps) {
  size_t bytes = (size_t)n * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
  if (!a || !b || !c) {
    free(a);
    free(b);
    free(c);
    return 0;
  }
  for (int64_t i = 0; i < n; i++) { a[i] = 1.0f; b[i] = 2.0f; c[i] = 0.0f; }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
  bench_stream add = {a, b, c, n, threads, false}, cp = add;
  cp.copy = true;
  double t_add = 1e300, t_cpy = 1e300;
  for (int r = 0; r < 3; r++) {
    double t0 = bench_now();
    bench_stream_run(&add);
    double t1 = bench_now();
    bench_stream_run(&cp);
    double t2 = bench_now();
    if (t1 - t0 < t_add) t_add = t1 - t0;
    if (t2 - t1 < t_cpy) t_cpy = t2 - t1;
  }
  free(a);
  free(b);
  free(c);
  *copy_bps = 2.0 * (double)bytes / t_cpy;
  /* the add's plain stores read each line of c before writing it (the
   * read-for-ownership): 4 arrays of traffic; memcpy of this size streams
   * its stores (no RFO): 2 */
  *add_bps = 4.0 * (double)bytes / t_add;
  return *copy_bps > *add_bps ? *copy_bps : *add_bps;
}
