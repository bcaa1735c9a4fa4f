/* The compute baseline of ops bound by a transcendental function per
 * element: the same function evaluations done by glibc's vectorised libm
 * (libmvec: expf, erff, sinf, logf, 16 floats per call on AVX-512
 * machines) in a plain loop on as many threads as CPUs. The loop reads an
 * L1-resident block again and again, so it is compute only: what a plain
 * C kernel with the system's best vector math gets before any memory
 * traffic. A baseline, not a bound (dtorch's exp is faster than glibc's). */
#ifndef BENCH_BENCH_LIBM_H
#define BENCH_BENCH_LIBM_H

#include <stdint.h>

typedef enum bench_libm_fn {
  BENCH_LIBM_EXPF, BENCH_LIBM_ERFF, BENCH_LIBM_SINF, BENCH_LIBM_LOGF
} bench_libm_fn;

/* the function's name in the JSON lines */
const char *bench_libm_name(bench_libm_fn f);

/* best of `reps` seconds for n evaluations of f split over every CPU */
double bench_libm_seconds(bench_libm_fn f, int64_t n, int reps);

#endif
