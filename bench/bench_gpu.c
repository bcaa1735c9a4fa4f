/* `dtorch bench gpu` (docs/cuda.md): the CUDA backend against baselines
 * measured in the same run on the same GPU:
 *   add     dt_add of two 256 MiB float32 tensors through the public API
 *           vs a device-to-device cudaMemcpy of 256 MiB (HBM bound): bytes
 *           moved per second, add 3 x 256 MiB, copy 2 x 256 MiB
 *   sgemm   dt_matmul 8192^3 float32 vs the same cuBLAS call made
 *           directly (kernels/cuda cuda_gemm on its own stream)
 *   issue   the caller's time to issue a small dt_add on a "cuda" runtime
 *           vs a "cpu" one (the dispatch path; the work is not timed)
 *   all_reduce  8 members on one GPU, 256 MiB each: the emulated
 *           collective's data movement (kernels/cuda/coll.cu) vs the HBM
 *           bound 2 N S / B; called directly, not through the API yet
 * Prints one JSON object per figure; without a usable GPU one object
 * saying why, and exit status 0. */
#include "bench/bench.h"

#include "dtorch/dtorch.h"
#include "dtorch/spmd.h"

/* the "skipped" object with the reason as a JSON string */
static void print_skipped(const char *why) {
  printf("{\"bench\":\"gpu\",\"status\":\"skipped\",\"why\":\"");
  for (const char *c = why; *c; c++) {
    if (*c == '"' || *c == '\\') putchar('\\');
    if ((unsigned char)*c >= 0x20) putchar(*c);
  }
  printf("\"}\n");
}

#if DTORCH_HAVE_CUDA
#include "kernels/cuda/cuda.h"

static dt_runtime *gpu_runtime(int64_t memory) {
  dt_runtime_options o = {.device = "cuda", .num_ranks = 1,
                          .device_memory = memory};
  return dt_runtime_create(&o);
}

/* best seconds of one D2D copy of `bytes` on a stream of GPU 0 */
static double memcpy_d2d(size_t bytes, int reps) {
  cuda_rank *r;
  char why[256];
  if (cuda_rank_create(&r, 0, 0, why, sizeof why)) return -1;
  void *a = cuda_rank_alloc(r, bytes, why, sizeof why);
  void *b = cuda_rank_alloc(r, bytes, why, sizeof why);
  double best = -1;
  if (a && b) {
    cuda_rank_copy(r, b, a, bytes, CUDA_COPY_D2D, why, sizeof why); /* warm */
    cuda_rank_sync(r, why, sizeof why);
    for (int i = 0; i < reps; i++) {
      double t0 = bench_now();
      cuda_rank_copy(r, b, a, bytes, CUDA_COPY_D2D, why, sizeof why);
      cuda_rank_sync(r, why, sizeof why);
      double t = bench_now() - t0;
      if (best < 0 || t < best) best = t;
    }
  }
  cuda_rank_free(r, a);
  cuda_rank_free(r, b);
  cuda_rank_destroy(r);
  return best;
}

static void fig_add(int reps) {
  const int64_t n = 64 << 20; /* 256 MiB of float32 */
  const double bytes = 4.0 * (double)n;
  dt_runtime *rt = gpu_runtime(0);
  dt_runtime_set_current(rt);
  dt_tensor *a = dt_full(DT_SHAPE(n), 1, NULL), *b = dt_full(DT_SHAPE(n), 2, NULL);
  double best = 1e300;
  for (int i = 0; i <= reps; i++) { /* the first is a warm-up */
    dt_runtime_synchronize(rt);
    double t0 = bench_now();
    dt_tensor *c = dt_add(a, b);
    dt_runtime_synchronize(rt);
    double t = bench_now() - t0;
    if (i && t < best) best = t;
    if (i == reps) { /* the timed result is right: 1 + 2 everywhere */
      float *h = malloc((size_t)bytes);
      int64_t bad = h && dt_to_host(c, h, (size_t)bytes) == DT_OK ? 0 : n;
      for (int64_t k = 0; h && !bad && k < n; k++) bad += h[k] != 3.0f;
      free(h);
      if (bad) {
        fprintf(stderr, "bench gpu add: %lld wrong elements\n", (long long)bad);
        exit(1);
      }
    }
    dt_tensor_release(c);
  }
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  double copy = memcpy_d2d((size_t)bytes, reps);
  double gbs = 3 * bytes / best / 1e9, base = 2 * bytes / copy / 1e9;
  printf("{\"bench\":\"gpu_add\",\"bytes\":%.0f,\"seconds\":%.6f,"
         "\"gbs\":%.1f,\"d2d_copy_gbs\":%.1f,\"ratio\":%.3f}\n", bytes, best,
         gbs, base, copy > 0 ? gbs / base : 0);
}

static void fig_sgemm(int reps) {
  const int64_t n = 8192;
  dt_runtime *rt = gpu_runtime(0);
  dt_runtime_set_current(rt);
  dt_tensor *a = dt_rand(DT_SHAPE(n, n), NULL), *b = dt_rand(DT_SHAPE(n, n), NULL);
  double best = 1e300;
  for (int i = 0; i <= reps; i++) {
    dt_runtime_synchronize(rt);
    double t0 = bench_now();
    dt_tensor *c = dt_matmul(a, b);
    dt_runtime_synchronize(rt);
    double t = bench_now() - t0;
    if (i && t < best) best = t;
    if (!c) fprintf(stderr, "dt_matmul: %s\n", dt_last_error());
    dt_tensor_release(c);
  }
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  /* the same cuBLAS call, directly */
  cuda_rank *r;
  char why[256];
  double direct = 1e300;
  size_t bytes = sizeof(float) * (size_t)(n * n);
  if (!cuda_rank_create(&r, 0, 0, why, sizeof why)) {
    void *x = cuda_rank_alloc(r, bytes, why, sizeof why);
    void *y = cuda_rank_alloc(r, bytes, why, sizeof why);
    void *z = cuda_rank_alloc(r, bytes, why, sizeof why);
    cuda_fill(cuda_rank_stream(r), 0, n * n, x, 0.5);
    cuda_fill(cuda_rank_stream(r), 0, n * n, y, 0.25);
    for (int i = 0; x && y && z && i <= reps; i++) {
      cuda_rank_sync(r, why, sizeof why);
      double t0 = bench_now();
      cuda_gemm(r, 0, 1, n, n, n, x, y, z, why, sizeof why);
      cuda_rank_sync(r, why, sizeof why);
      double t = bench_now() - t0;
      if (i && t < direct) direct = t;
    }
    cuda_rank_free(r, x);
    cuda_rank_free(r, y);
    cuda_rank_free(r, z);
    cuda_rank_destroy(r);
  }
  double flop = 2.0 * n * n * n;
  printf("{\"bench\":\"gpu_sgemm\",\"n\":%lld,\"seconds\":%.6f,"
         "\"tflops\":%.2f,\"cublas_tflops\":%.2f,\"ratio\":%.3f}\n",
         (long long)n, best, flop / best / 1e12, flop / direct / 1e12,
         direct / best);
}

static double issue_ns(dt_runtime *rt, int iters) {
  dt_runtime_set_current(rt);
  dt_tensor *a = dt_full(DT_SHAPE(8), 1, NULL), *b = dt_full(DT_SHAPE(8), 2, NULL);
  double best = 1e300;
  for (int rep = 0; rep < 5; rep++) {
    dt_runtime_synchronize(rt);
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) dt_tensor_release(dt_add(a, b));
    double t = (bench_now() - t0) / iters;
    if (t < best) best = t;
  }
  dt_runtime_synchronize(rt);
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_runtime_set_current(NULL);
  return best * 1e9;
}

static void fig_issue(int reps) {
  (void)reps;
  dt_runtime *g = gpu_runtime(0);
  dt_runtime_options co = {.num_ranks = 1};
  dt_runtime *c = dt_runtime_create(&co);
  double ng = issue_ns(g, 2000), nc = issue_ns(c, 2000);
  dt_runtime_destroy(g);
  dt_runtime_destroy(c);
  printf("{\"bench\":\"gpu_issue\",\"op\":\"add\",\"cuda_ns\":%.0f,"
         "\"cpu_ns\":%.0f,\"ratio\":%.3f}\n", ng, nc, nc / ng);
}

/* one emulated all_reduce: inputs ready (events) -> every member reduces
 * its segment through the pointer table -> every stream done */
static int all_reduce_once(cuda_rank **r, int n, void **in, void **out,
                           int64_t count) {
  char why[256];
  void *ev[CUDA_COLL_MAX];
  int bad = 0;
  for (int i = 0; i < n; i++) ev[i] = cuda_event_record(r[i], why, sizeof why);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (j != i && ev[j]) bad |= cuda_event_wait(r[i], ev[j], why, sizeof why);
  for (int i = 0; i < n; i++) {
    int64_t b = count * i / n, e = count * (i + 1) / n;
    bad |= cuda_reduce_ptrs(cuda_rank_stream(r[i]), 0, 0, n,
                            (const void *const *)in, n, out, b, e);
  }
  for (int i = 0; i < n; i++) {
    bad |= cuda_rank_sync(r[i], why, sizeof why);
    cuda_event_destroy(ev[i]);
  }
  return bad;
}

/* 8 members on GPU 0, 256 MiB each, vs the HBM bound 2 N S / B, B from a
 * D2D copy in the same run: the emulated collective's data movement alone
 * (the kernel and the events); fig_all_reduce_api measures the API path */
static void fig_all_reduce(int reps) {
  enum { N = 8 };
  const int64_t count = 64 << 20;
  const size_t bytes = sizeof(float) * (size_t)count;
  cuda_rank *r[N] = {0};
  void *in[N] = {0}, *out[N] = {0};
  char why[256];
  int bad = 0;
  for (int i = 0; i < N && !bad; i++) {
    bad = cuda_rank_create(&r[i], 0, 0, why, sizeof why);
    if (!bad) {
      in[i] = cuda_rank_alloc(r[i], bytes, why, sizeof why);
      out[i] = cuda_rank_alloc(r[i], bytes, why, sizeof why);
      bad = !in[i] || !out[i] ||
            cuda_fill(cuda_rank_stream(r[i]), 0, count, in[i], i + 1);
    }
  }
  double best = 1e300;
  for (int k = 0; !bad && k <= reps; k++) {
    double t0 = bench_now();
    bad = all_reduce_once(r, N, in, out, count);
    double t = bench_now() - t0;
    if (k && t < best) best = t;
  }
  float probe[4] = {0};
  if (!bad) { /* 1 + 2 + ... + 8 = 36 at both ends of member 5's output */
    cuda_rank_copy(r[5], probe, out[5], 2 * sizeof(float), CUDA_COPY_D2H, why,
                   sizeof why);
    cuda_rank_copy(r[5], probe + 2, (float *)out[5] + count - 2,
                   2 * sizeof(float), CUDA_COPY_D2H, why, sizeof why);
    cuda_rank_sync(r[5], why, sizeof why);
    for (int i = 0; i < 4; i++) bad |= probe[i] != 36.0f;
  }
  for (int i = 0; i < N; i++) {
    if (!r[i]) continue;
    cuda_rank_free(r[i], in[i]);
    cuda_rank_free(r[i], out[i]);
    cuda_rank_destroy(r[i]);
  }
  if (bad) {
    fprintf(stderr, "bench gpu all_reduce failed: %s\n", why);
    exit(1);
  }
  double copy = memcpy_d2d(bytes, reps);
  double hbm = 2.0 * (double)bytes / copy;          /* bytes per second */
  double bound = 2.0 * N * (double)bytes / hbm;     /* seconds */
  printf("{\"bench\":\"gpu_all_reduce\",\"ranks\":%d,\"bytes\":%zu,"
         "\"seconds\":%.6f,\"bound_seconds\":%.6f,\"hbm_gbs\":%.1f,"
         "\"ratio\":%.3f,\"path\":\"kernel (cuda_reduce_ptrs), not the "
         "API\"}\n", N, bytes, best, bound, hbm / 1e9, bound / best);
}

/* the API path: dt_all_reduce in an SPMD run of 8 ranks on GPU 0 (the
 * device world of sim/coll_device.c), from the issue to every stream
 * done. dt_all_reduce is functional (its input is copied, then reduced in
 * place), so the bound is 4 N S / B: the copy and the reduction. */
typedef struct ar_arg { int64_t count; dt_tensor *x[8]; float probe[8][2]; } ar_arg;

static dt_status ar_make(dt_spmd_ctx *c) {
  ar_arg *a = c->arg;
  a->x[c->rank] = dt_full(DT_SHAPE(a->count), c->rank + 1, NULL);
  return a->x[c->rank] ? DT_OK : dt_last_status();
}
static dt_status ar_once(dt_spmd_ctx *c) {
  ar_arg *a = c->arg;
  dt_tensor *y = dt_all_reduce(a->x[c->rank], DT_REDUCE_SUM, NULL);
  dt_tensor_release(y); /* a stream-ordered free */
  return y ? DT_OK : dt_last_status();
}
static dt_status ar_check(dt_spmd_ctx *c) {
  ar_arg *a = c->arg;
  dt_tensor *y = dt_all_reduce(a->x[c->rank], DT_REDUCE_SUM, NULL);
  int64_t last = a->count - 1;
  dt_tensor *e = y ? dt_slice(y, 0, last, a->count, 1) : NULL;
  dt_status st = e ? dt_to_host(e, &a->probe[c->rank][1], sizeof(float))
                   : dt_last_status();
  dt_tensor *f = y && st == DT_OK ? dt_slice(y, 0, 0, 1, 1) : NULL;
  if (st == DT_OK)
    st = f ? dt_to_host(f, &a->probe[c->rank][0], sizeof(float)) : dt_last_status();
  dt_tensor_release(f);
  dt_tensor_release(e);
  dt_tensor_release(y);
  dt_tensor_release(a->x[c->rank]);
  return st;
}

static void fig_all_reduce_api(int reps) {
  enum { N = 8 };
  setenv("DTORCH_DTENSOR_IN_SAME_DEVICE", "1", 1);
  dt_runtime_options o = {.device = "cuda", .num_ranks = N};
  dt_runtime *rt = dt_runtime_create(&o);
  ar_arg a = {.count = 64 << 20};
  const size_t bytes = sizeof(float) * (size_t)a.count;
  dt_status st = rt ? dt_spmd_run(rt, ar_make, &a) : dt_last_status();
  double best = 1e300;
  for (int k = 0; st == DT_OK && k <= reps; k++) {
    double t0 = bench_now();
    st = dt_spmd_run(rt, ar_once, &a);
    if (st == DT_OK) st = dt_runtime_synchronize(rt);
    double t = bench_now() - t0;
    if (k && t < best) best = t;
  }
  if (st == DT_OK) st = dt_spmd_run(rt, ar_check, &a);
  for (int i = 0; st == DT_OK && i < N; i++) /* 1 + 2 + ... + 8 */
    if (a.probe[i][0] != 36.0f || a.probe[i][1] != 36.0f)
      st = DT_ERR_INTERNAL;
  if (st != DT_OK) {
    fprintf(stderr, "bench gpu all_reduce_api failed: %s\n", dt_last_error());
    exit(1);
  }
  dt_runtime_destroy(rt);
  double copy = memcpy_d2d(bytes, reps);
  double hbm = 2.0 * (double)bytes / copy;
  double bound = 4.0 * N * (double)bytes / hbm;
  printf("{\"bench\":\"gpu_all_reduce_api\",\"ranks\":%d,\"bytes\":%zu,"
         "\"seconds\":%.6f,\"bound_seconds\":%.6f,\"hbm_gbs\":%.1f,"
         "\"ratio\":%.3f,\"path\":\"dt_all_reduce in dt_spmd_run (input "
         "copy + reduction: bound 4NS/B)\"}\n", N, bytes, best, bound,
         hbm / 1e9, bound / best);
}

int bench_gpu(int argc, char **argv) {
  dt_runtime *probe = gpu_runtime(0);
  if (!probe) {
    print_skipped(dt_last_error());
    return 0;
  }
  dt_runtime_destroy(probe);
  static const bench_figure figs[] = {{"add", fig_add}, {"sgemm", fig_sgemm},
                                      {"issue", fig_issue},
                                      {"all_reduce", fig_all_reduce},
                                      {"all_reduce_api", fig_all_reduce_api}};
  return bench_main(argc, argv, "gpu", figs, 5);
}

#else
int bench_gpu(int argc, char **argv) {
  (void)argc, (void)argv;
  print_skipped("built without the CUDA backend");
  return 0;
}
#endif
