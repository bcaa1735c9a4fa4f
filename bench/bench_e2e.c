/* What users feel of a collective: dt_redistribute of a Partial(sum)
 * DTensor to Replicate through the public API, timed from the call until
 * dt_runtime_synchronize returns (the record published, the ranks woken,
 * the output allocated, the all_reduce, the result usable), best of reps.
 * Every timed call's result is checked (outside the timing) on every
 * rank: the value is 1 (the factory puts it on coordinate 0 and the sum's
 * identity elsewhere), at the first, middle and last element.
 *   {"bench":"redistribute_e2e","ranks":R,"bytes":S,"us":T,
 *    "busbw_gbs":B,"plain_us":P,"vs_plain":P/T,"ok":true}
 * busbw and the baseline as for the raw all_reduce (bench_collectives.c):
 * the plain all-core loop over n inputs and n outputs of S, on buffers of
 * its own (null below 1 MiB). */
#include "bench/bench_e2e.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_stream.h"

#include "bench/bench.h"
#include "dtorch/dtorch.h"

/* the checked elements of rank r's replica */
static bool check(dt_tensor *y, int rank, int64_t n, float *buf) {
  if (dt_local_to_host(y, rank, buf, (size_t)n * sizeof *buf) != DT_OK)
    return false;
  return buf[0] == 1.0f && buf[n / 2] == 1.0f && buf[n - 1] == 1.0f;
}

/* the plain all_reduce of S bytes over n ranks' buffers: best seconds */
static double plain_all_reduce(int n, int64_t bytes, int reps) {
  if (bytes < ((int64_t)1 << 20)) return 0;
  float *in[8] = {0}, *out[8] = {0};
  bool ok = true;
  for (int j = 0; j < n; j++) {
    in[j] = aligned_alloc(4096, (size_t)bytes);
    out[j] = aligned_alloc(4096, (size_t)bytes);
    ok = ok && in[j] && out[j];
    for (int64_t i = 0; ok && i < bytes / 4; i++) in[j][i] = out[j][i] = 1.0f;
  }
  double best = 0;
  if (ok) {
    bench_mix t = {(const float *const *)in, n, out, n, bytes / 4};
    best = 1e300;
    for (int r = 0; r < reps; r++) {
      double sec = bench_stream_mix(&t, 1);
      if (sec < best) best = sec;
    }
  }
  for (int j = 0; j < n; j++) {
    free(in[j]);
    free(out[j]);
  }
  return best;
}

static bool one_config(int ranks, int64_t bytes, int reps) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks});
  dt_mesh *m = rt ? dt_mesh_init(rt, "cpu", DT_SHAPE(ranks), NULL) : NULL;
  int64_t n = bytes / 4;
  float *buf = malloc((size_t)n * sizeof *buf);
  dt_tensor *x = m && buf ? dt_ones(DT_SHAPE(n), &(dt_tensor_options){
                                .mesh = m,
                                .placements = DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM))})
                          : NULL;
  bool ok = x != NULL;
  double best = 1e300;
  for (int r = 0; ok && r < reps; r++) {
    if (dt_runtime_synchronize(rt) != DT_OK) { ok = false; break; }
    double t0 = bench_now();
    dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_REPLICATE));
    ok = y && dt_runtime_synchronize(rt) == DT_OK;
    double t = bench_now() - t0;
    if (t < best) best = t;
    for (int k = 0; ok && k < ranks; k++) ok = check(y, k, n, buf);
    dt_tensor_release(y);
  }
  if (!ok) fprintf(stderr, "bench redistribute_e2e: %s\n", dt_last_error());
  double f = 2.0 * (ranks - 1) / ranks; /* nccl-tests busbw for all_reduce */
  double bus = (double)bytes / best * f;
  double plain = plain_all_reduce(ranks, bytes, reps);
  printf("{\"bench\":\"redistribute_e2e\",\"ranks\":%d,\"bytes\":%lld,"
         "\"us\":%.3f,\"busbw_gbs\":%.3f,", ranks, (long long)bytes,
         best * 1e6, bus * 1e-9);
  bench_print_plain(plain, best);
  printf("\"ok\":%s}\n", ok ? "true" : "false");
  dt_tensor_release(x);
  free(buf);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  return ok;
}

bool bench_redistribute_e2e(int reps, int64_t max_bytes) {
  static const int ranks[] = {2, 8};
  static const int64_t sizes[] = {8, (int64_t)64 << 20};
  bool ok = true;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      if (sizes[j] <= max_bytes)
        ok = one_config(ranks[i], sizes[j], sizes[j] > 4096 ? reps : reps * 20)
             && ok;
  return ok;
}
