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
 *   head_of_line      a runtime of 2 ranks: a 3072^3 float32 dt_matmul on
 *                     rank 0 (idle rank 1 steals its blocks) while 20,000
 *                     4-element dt_add calls go to rank 1; `adds_s`: issue to
 *                     the last add's fetch, `matmul_s`: issue to the
 *                     matmul's fetch (same start), ratio = adds_s /
 *                     matmul_s, the median of the runs (ratio_max the
 *                     worst; a rank that holds one stolen block too
 *                     long makes it ~1; adds_s and matmul_s are the run
 *                     of the fastest matmul); `adds_alone_s` and
 *                     `matmul_alone_s` the same work each on its own,
 *                     `matmul_slowdown` = matmul_s / matmul_alone_s;
 *                     matmul_vs_cblas: a direct cblas_sgemm on 2 threads
 *                     (`cblas_s`) / matmul_alone_s
 * Ops run on rank 0 of the default runtime (DTORCH_NUM_RANKS ranks), but
 * head_of_line's own runtime. */
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

/* ---- head-of-line: rank 1's own stream next to rank 0's long matmul */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct hol_arg {
  dt_tensor *a, *b, *x; /* a, b on cpu:0; x on cpu:1 */
  int adds;
} hol_arg;

static void hol_check(bool ok, const char *what) {
  if (!ok) { fprintf(stderr, "bench head_of_line: %s: %s\n", what, dt_last_error()); exit(1); }
}

/* issues the adds on rank 1 and fetches the last: seconds from t0 */
static double hol_adds(hol_arg *h, double t0) {
  dt_tensor *y = NULL;
  for (int i = 0; i < h->adds; i++) {
    dt_tensor_release(y);
    y = dt_add(h->x, h->x);
    hol_check(y != NULL, "dt_add");
  }
  float v[4];
  hol_check(dt_to_host(y, v, sizeof v) == DT_OK, "dt_to_host (adds)");
  double t = bench_now() - t0;
  hol_check(v[0] == 2.0f && v[3] == 2.0f, "the adds' values");
  dt_tensor_release(y);
  return t;
}

/* seconds from t0 until c is fetched (one element suffices: the fetch
 * waits for the op) */
static double hol_fetch(dt_tensor *c, double t0) {
  hol_check(c != NULL, "dt_matmul");
  float v[1];
  dt_tensor *e = dt_reshape(c, DT_SHAPE(-1));
  hol_check(e != NULL, "dt_reshape");
  dt_tensor *first = dt_slice(e, 0, 0, 1, 1);
  hol_check(first != NULL && dt_to_host(first, v, sizeof v) == DT_OK, "dt_to_host (matmul)");
  double t = bench_now() - t0;
  dt_tensor_release(first);
  dt_tensor_release(e);
  dt_tensor_release(c);
  return t;
}

static void bench_head_of_line(int reps) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  hol_check(rt != NULL, "dt_runtime_create");
  dt_runtime_set_current(rt);
  const int64_t n = 3072;
  dt_manual_seed(3);
  hol_arg h = {dt_randn(DT_SHAPE(n, n), &(dt_tensor_options){.device = "cpu:0"}),
               dt_randn(DT_SHAPE(n, n), &(dt_tensor_options){.device = "cpu:0"}),
               dt_ones(DT_SHAPE(4), &(dt_tensor_options){.device = "cpu:1"}), 20000};
  hol_check(h.a && h.b && h.x, "inputs");
  hol_fetch(dt_matmul(h.a, h.b), bench_now()); /* warm the allocator */
  /* the baseline: cblas_sgemm on as many threads as can run the matmul */
  size_t bytes = (size_t)(n * n) * 4;
  mm_arg m = {NULL, NULL, malloc(bytes), malloc(bytes), malloc(bytes), (int)n};
  hol_check(m.ha && m.hb && m.hc, "host buffers");
  hol_check(dt_to_host(h.a, m.ha, bytes) == DT_OK && dt_to_host(h.b, m.hb, bytes) == DT_OK,
            "dt_to_host (inputs)");
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus < 2 ? 1 : 2, before = openblas_get_num_threads();
  double adds = 1e300, mm = 1e300, adds_alone = 1e300, mm_alone = 1e300;
  double ratios[64];
  if (reps > 64) reps = 64;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    double t = hol_adds(&h, t0);
    if (t < adds_alone) adds_alone = t;
    t0 = bench_now();
    t = hol_fetch(dt_matmul(h.a, h.b), t0);
    if (t < mm_alone) mm_alone = t;
    t0 = bench_now();
    dt_tensor *c = dt_matmul(h.a, h.b);
    double ta = hol_adds(&h, t0), tm = hol_fetch(c, t0);
    ratios[r] = ta / tm;
    if (tm < mm) { mm = tm; adds = ta; } /* the pair of the best matmul */
  }
  qsort(ratios, (size_t)reps, sizeof *ratios, cmp_double);
  /* after the runs above: OpenBLAS's threads spin for a while after a
   * call and would take the CPUs the issuer and the ranks need */
  openblas_set_num_threads(threads);
  double blas = bench_best(run_sgemm, &m, reps, 1);
  openblas_set_num_threads(before);
  printf("{\"bench\":\"head_of_line\",\"n\":%lld,\"adds\":%d,\"adds_s\":%.4f,"
         "\"matmul_s\":%.4f,\"adds_alone_s\":%.4f,\"matmul_alone_s\":%.4f,"
         "\"matmul_slowdown\":%.3f,\"cblas_s\":%.4f,\"matmul_vs_cblas\":%.3f,"
         "\"ratio_max\":%.3f,\"ratio\":%.3f}\n", (long long)n, h.adds, adds, mm,
         adds_alone, mm_alone, mm / mm_alone, blas, blas / mm_alone, ratios[reps - 1],
         ratios[reps / 2]);
  free(m.ha);
  free(m.hb);
  free(m.hc);
  dt_tensor_release(h.a);
  dt_tensor_release(h.b);
  dt_tensor_release(h.x);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

int bench_core(int argc, char **argv) {
  static const bench_figure figs[] = {{"add", bench_add},
                                      {"matmul", bench_matmul},
                                      {"dispatch", bench_dispatch_tiny},
                                      {"head_of_line", bench_head_of_line}};
  return bench_main(argc, argv, "core", figs,
                    (int)(sizeof figs / sizeof *figs));
}
