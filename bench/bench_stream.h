/* The memory baselines benchmarks compare with: a STREAM add
 * (c[i] = a[i] + b[i]) or a copy, split over `threads` threads (the
 * calling thread is thread 0). */
#ifndef BENCH_BENCH_STREAM_H
#define BENCH_BENCH_STREAM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct bench_stream {
  const float *a, *b;
  float *c;
  int64_t n;
  int threads;           /* 1..64 */
  bool copy;             /* c = b instead of c = a + b */
} bench_stream;

/* one pass; exits the process if a thread cannot start */
void bench_stream_run(const bench_stream *x);

/* The all-core memory bandwidth, bytes moved per second: the best of a
 * copy (2 arrays: glibc streams large copies' stores) and a STREAM add (4
 * arrays: a, b, c and c's read-for-ownership) of n floats each, on as many
 * threads as CPUs, best of 3 passes; 0 without memory. */
double bench_stream_bandwidth(int64_t n, double *copy_bps, double *add_bps);

#endif
