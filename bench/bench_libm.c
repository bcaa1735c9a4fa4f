/* The libmvec compute baseline (bench/bench_libm.h). Built with
 * -ffast-math -fopenmp-simd (CMakeLists.txt): only then does glibc's
 * math.h declare the vector variants, and GCC call _ZGVeN16v_expf and its
 * kin from the loops below (one clone per ISA level, so an AVX-512
 * machine gets the 16-wide versions). */
#include "bench/bench_libm.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__clang__)
/* `omp simd` is a request: clang says when it cannot vectorise a libm call */
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__clang__)
#if !defined(DTORCH_SIMD_MAX_LEVEL) || DTORCH_SIMD_MAX_LEVEL >= 2
#define LIBM_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#elif DTORCH_SIMD_MAX_LEVEL == 1 /* the kernels' cap (CMake's DTORCH_SIMD_MAX) */
#define LIBM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define LIBM_CLONES
#endif
#else
#define LIBM_CLONES
#endif

enum { BLK = 2048 }; /* 8 KB in, 8 KB out: L1 */

LIBM_CLONES static void blk_run(bench_libm_fn f, float *restrict y,
                                const float *restrict x) {
  switch (f) {
  case BENCH_LIBM_EXPF:
#pragma omp simd
    for (int i = 0; i < BLK; i++) y[i] = expf(x[i]);
    break;
  case BENCH_LIBM_ERFF:
#pragma omp simd
    for (int i = 0; i < BLK; i++) y[i] = erff(x[i]);
    break;
  case BENCH_LIBM_SINF:
#pragma omp simd
    for (int i = 0; i < BLK; i++) y[i] = sinf(x[i]);
    break;
  case BENCH_LIBM_LOGF:
#pragma omp simd
    for (int i = 0; i < BLK; i++) y[i] = logf(x[i]);
    break;
  }
}

const char *bench_libm_name(bench_libm_fn f) {
  static const char *names[] = {"expf", "erff", "sinf", "logf"};
  return names[f];
}

typedef struct libm_part { bench_libm_fn f; int64_t blocks; } libm_part;

static void *part_run(void *p) {
  const libm_part *w = p;
  float x[BLK], y[BLK];
  /* the ranges the ops see: exp of x - max <= 0, erf around 0, sin of
   * normals, log of positives */
  for (int i = 0; i < BLK; i++) {
    float u = (float)((i * 7919) % BLK) / (float)BLK; /* [0, 1) */
    x[i] = w->f == BENCH_LIBM_EXPF ? -20.0f * u
           : w->f == BENCH_LIBM_LOGF ? 0.01f + 100.0f * u : 8.0f * u - 4.0f;
  }
  for (int64_t b = 0; b < w->blocks; b++) {
    blk_run(w->f, y, x);
    __asm__ volatile("" ::"r"(y) : "memory"); /* keep every block */
  }
  return NULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double bench_libm_seconds(bench_libm_fn f, int64_t n, int reps) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
  int64_t blocks = (n + BLK - 1) / BLK;
  double best = 0;
  for (int r = 0; r < (reps < 1 ? 1 : reps); r++) {
    pthread_t t[64];
    libm_part w[64];
    double t0 = now();
    for (int i = 0; i < threads; i++) {
      w[i] = (libm_part){f, blocks * (i + 1) / threads - blocks * i / threads};
      if (i && pthread_create(&t[i], NULL, part_run, &w[i]) != 0) {
        fprintf(stderr, "bench libm: cannot start a thread\n");
        exit(1);
      }
    }
    part_run(&w[0]); /* the calling thread is thread 0 */
    for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
    double s = now() - t0;
    if (r == 0 || s < best) best = s;
  }
  return best;
}
