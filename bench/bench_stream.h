/* The memory baselines benchmarks compare with: a STREAM add
 * (c[i] = a[i] + b[i]) or a copy, split over `threads` threads (the
 * calling thread is thread 0). */
#ifndef BENCH_BENCH_STREAM_H
#define BENCH_BENCH_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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

/* A collective's data movement done the plain way: every output element
 * is the sum of the inputs' elements at the same index (a copy when
 * nin = 1), len floats, the outputs written with streaming stores as the
 * collectives write large blocks. */
typedef struct bench_mix {
  const float *const *in;
  int nin;
  float *const *out;
  int nout;
  int64_t len;
} bench_mix;
/* Seconds for one pass over the tasks on as many threads as CPUs (each
 * task's range split evenly; the thread start is included, as a
 * collective's wake-ups are). */
double bench_stream_mix(const bench_mix *tasks, int ntasks);

/* The collectives the plain baseline stands for, in the benchmarks' order */
typedef enum bench_coll {
  BENCH_ALL_REDUCE, BENCH_ALL_GATHER, BENCH_REDUCE_SCATTER, BENCH_ALL_TO_ALL
} bench_coll;
/* Best of reps seconds of collective k's minimum traffic over n ranks'
 * buffers ins/outs (n <= BENCH_PLAIN_MAX, len floats each): all_reduce reads the n
 * inputs and writes the n outputs, all_gather reads one and writes n,
 * reduce_scatter reads n and writes one, all_to_all copies each input to
 * its output. */
#define BENCH_PLAIN_MAX 256
double bench_plain_best(bench_coll k, int n, const float *const *ins,
                        float *const *outs, int64_t len, int reps);

/* The all-core bandwidths of the two halves of any data movement, bytes
 * per second over n floats on as many threads as CPUs, best of 10: reading
 * (sums that keep every load) and writing with streaming stores. For
 * reference (bench collectives' memory_bound line). false without
 * memory. */
typedef struct bench_membw { double read_bps, write_bps; } bench_membw;
bool bench_stream_read_write(int64_t n, bench_membw *out);

/* prints the baseline's JSON fields for a figure of `sec` seconds:
 * plain_us and vs_plain = plain / sec (null when plain is 0) */
static inline void bench_print_plain(double plain, double sec) {
  if (plain > 0)
    printf("\"plain_us\":%.3f,\"vs_plain\":%.3f,", plain * 1e6, plain / sec);
  else
    printf("\"plain_us\":null,\"vs_plain\":null,");
}

#endif
