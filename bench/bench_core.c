/* `dtorch bench core`: the foundation's figures, each against a baseline
 * measured in the same run.
 *   add_f32_16M       dt_add of two 16M-element float32 tensors until the
 *                     result is computed, bytes moved (2 reads + 1 write)
 *                     per second, against a STREAM add (c[i] = a[i] + b[i])
 *                     on as many threads as can run the add at once
 *                     (min(ranks, CPUs): idle ranks steal its chunks), its
 *                     bytes counted the same way; copy_gbs: an all-thread
 *                     memcpy for reference (1 read + 1 write)
 *   matmul_f32_1024   dt_matmul until computed vs a direct cblas_sgemm with
 *                     OpenBLAS on as many threads as can run the matmul
 *                     (min(ranks, CPUs): its blocks are chunks idle ranks
 *                     steal)
 *   dispatch_add_tiny a 4-element dt_add: `ns` is the caller's time per op
 *                     (dispatch, infer, output handle, one published
 *                     record, release) with the ring not full; `e2e_ns` the
 *                     sustained time per op until all have run on the rank
 * Ops run on rank 0 of the default runtime (DTORCH_NUM_RANKS ranks). */
#include <cblas.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_stream.h"
#include "dtorch/dtorch.h"

typedef struct add_arg { dt_tensor *a, *b; } add_arg;
static void run_add(void *p) {
  add_arg *x = p;
  dt_tensor *c = dt_add(x->a, x->b);
  if (!c) { fprintf(stderr, "dt_add: %s\n", dt_last_error()); exit(1); }
  dt_tensor_release(c);
}
static void sync_default(void) {
  if (dt_runtime_synchronize(dt_runtime_default()) != DT_OK) {
    fprintf(stderr, "synchronize: %s\n", dt_last_error());
    exit(1);
  }
}
static void run_add_sync(void *p) {
  run_add(p);
  sync_default();
}


static void run_stream(void *p) { bench_stream_run(p); }

static void bench_add(int reps) {
  const int64_t n = 16 << 20;
  dt_manual_seed(1);
  add_arg a = {dt_rand(DT_SHAPE(n), NULL), dt_rand(DT_SHAPE(n), NULL)};
  size_t bytes = (size_t)n * 4;
  float *sa = malloc(bytes), *sb = malloc(bytes), *sc = malloc(bytes);
  if (!sa || !sb || !sc) { fprintf(stderr, "bench add: out of memory\n"); exit(1); }
  for (int64_t i = 0; i < n; i++) { sa[i] = 1.0f; sb[i] = 2.0f; sc[i] = 0.0f; }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int ranks = dt_runtime_num_ranks(dt_runtime_default());
  int threads = (int)(cpus < ranks ? cpus : ranks);
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  bench_stream st = {sa, sb, sc, n, threads, false}, cp = st;
  cp.copy = true;
  run_add_sync(&a); /* warm the allocator cache and the pages */
  run_stream(&st);
  double t_add = bench_best(run_add_sync, &a, reps, 3);
  double t_str = bench_best(run_stream, &st, reps, 3);
  double t_cpy = bench_best(run_stream, &cp, reps, 3);
  bool right = sc[0] == 2.0f && sc[n - 1] == 2.0f; /* the last run: a copy */
  run_stream(&st);
  right = right && sc[0] == 3.0f && sc[n / 2] == 3.0f && sc[n - 1] == 3.0f;
  if (!right) { fprintf(stderr, "bench add: the baseline computed wrong values\n"); exit(1); }
  double add_gbs = 3.0 * (double)bytes / t_add / 1e9;
  double str_gbs = 3.0 * (double)bytes / t_str / 1e9;
  double cpy_gbs = 2.0 * (double)bytes / t_cpy / 1e9;
  printf("{\"bench\":\"add_f32_16M\",\"gbs\":%.2f,\"stream_add_gbs\":%.2f,"
         "\"threads\":%d,\"copy_gbs\":%.2f,\"ratio\":%.3f}\n", add_gbs,
         str_gbs, threads, cpy_gbs, add_gbs / str_gbs);
  free(sa);
  free(sb);
  free(sc);
  dt_tensor_release(a.a);
  dt_tensor_release(a.b);
}

typedef struct mm_arg { dt_tensor *a, *b; float *ha, *hb, *hc; int n; } mm_arg;
static void run_matmul(void *p) {
  mm_arg *x = p;
  dt_tensor *c = dt_matmul(x->a, x->b);
  if (!c) { fprintf(stderr, "dt_matmul: %s\n", dt_last_error()); exit(1); }
  dt_tensor_release(c);
  sync_default();
}
static void run_sgemm(void *p) {
  mm_arg *x = p;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, x->n, x->n, x->n,
              1.0f, x->ha, x->n, x->hb, x->n, 0.0f, x->hc, x->n);
}

static void bench_matmul(int reps) {
  const int n = 1024;
  size_t bytes = (size_t)n * n * 4;
  dt_manual_seed(2);
  mm_arg m = {dt_randn(DT_SHAPE(n, n), NULL), dt_randn(DT_SHAPE(n, n), NULL),
              malloc(bytes), malloc(bytes), malloc(bytes), n};
  dt_to_host(m.a, m.ha, bytes);
  dt_to_host(m.b, m.hb, bytes);
  run_matmul(&m);
  run_sgemm(&m);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int ranks = dt_runtime_num_ranks(dt_runtime_default());
  int threads = (int)(cpus < ranks ? cpus : ranks), before = openblas_get_num_threads();
  /* interleave so both see the same machine state; the runtime keeps
   * OpenBLAS at one thread, the baseline gets the matmul's threads */
  double t_dt = 1e300, t_bl = 1e300;
  for (int r = 0; r < reps; r++) {
    double a = bench_best(run_matmul, &m, 1, 2);
    openblas_set_num_threads(threads < 1 ? 1 : threads);
    double b = bench_best(run_sgemm, &m, 1, 2);
    openblas_set_num_threads(before);
    if (a < t_dt) t_dt = a;
    if (b < t_bl) t_bl = b;
  }
  double flop = 2.0 * n * n * (double)n;
  printf("{\"bench\":\"matmul_f32_1024\",\"gflops\":%.2f,\"cblas_gflops\":%.2f,"
         "\"threads\":%d,\"ratio\":%.3f}\n", flop / t_dt / 1e9, flop / t_bl / 1e9,
         threads, t_bl / t_dt);
  free(m.ha); free(m.hb); free(m.hc);
  dt_tensor_release(m.a);
  dt_tensor_release(m.b);
}

static void bench_dispatch_tiny(int reps) {
  add_arg a = {dt_ones(DT_SHAPE(4), NULL), dt_ones(DT_SHAPE(4), NULL)};
  for (int i = 0; i < 10000; i++) run_add(&a);
  sync_default();
  /* caller time: bursts of 256 ops (the ring holds 1024 records and each op
   * makes two: the op and the release of its output), drained between */
  double best = 1e300;
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < 200; k++) {
      double t0 = bench_now();
      for (int i = 0; i < 256; i++) run_add(&a);
      double t = (bench_now() - t0) / 256;
      if (t < best) best = t;
      sync_default();
    }
  /* sustained: issue many, wait for all */
  double e2e = 1e300;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    for (int i = 0; i < 100000; i++) run_add(&a);
    sync_default();
    double t = (bench_now() - t0) / 100000;
    if (t < e2e) e2e = t;
  }
  printf("{\"bench\":\"dispatch_add_tiny\",\"ns\":%.1f,\"e2e_ns\":%.1f,"
         "\"ranks\":%d}\n", best * 1e9, e2e * 1e9,
         dt_runtime_num_ranks(dt_runtime_default()));
  dt_tensor_release(a.a);
  dt_tensor_release(a.b);
}

int bench_core(int argc, char **argv) {
  static const bench_figure figs[] = {{"add", bench_add},
                                      {"matmul", bench_matmul},
                                      {"dispatch", bench_dispatch_tiny}};
  return bench_main(argc, argv, "core", figs,
                    (int)(sizeof figs / sizeof *figs));
}
