/* What users feel of a collective: dt_redistribute through the public API,
 * timed from the call until dt_runtime_synchronize returns (the record
 * published, the ranks woken, the output allocated, the collective, the
 * result usable), on a 1-D mesh of n ranks, float32:
 *   api_all_reduce      P(sum) -> R       S = the tensor (each rank's buffer)
 *   api_all_gather      S(0) -> R         S = the tensor (gathered output)
 *   api_reduce_scatter  P(sum) -> S(0)    S = the tensor (each rank's input)
 *   api_all_to_all      S(0) -> S(1)      S = each rank's shard: the tensor
 *                                         is [n, S/4], one row per rank
 * One JSON line per kind, rank count and size:
 *   {"bench":"api_all_reduce","ranks":R,"bytes":S,"us":T,"best_us":B,
 *    "busbw_gbs":...,"plain_us":P,"vs_plain":P/T,"helped":H,"ok":true[, phases]}
 * T is the median of the timed calls (B the best); busbw from T as for the
 * raw collectives; plain is the same data movement as the raw benchmark's
 * baseline, on buffers of the same sizes (from 1 MiB). Every timed call's
 * result is checked in full on every rank (outside the timing). Calls of
 * up to 4 KiB run back to back, as a training step issues them, and are
 * checked afterwards; larger ones are checked (and released, so the next
 * output reuses the block) after each call. Untimed, checked warm-up
 * calls come first (20 small, 1 large). H: records per timed call that the
 * issuing thread ran itself for sleeping ranks (sched/help.h), e.g. 2.0
 * when it ran both ranks' parts of every 2-rank call.
 *
 * --breakdown adds the median of each phase (µs), from the engine's probe
 * (mesh_probe_*; the slowest rank of each phase):
 *   issue        dt_redistribute returning (plan, output, record, wake;
 *                and the parts of the ranks it helped)
 *   wake         from its return to the last rank starting the record (0
 *                when every part started inside the call: helped)
 *   alloc        a rank allocating its output and scratch
 *   pack         a rank's other work before its collective (local copies)
 *   rendezvous   from the collective's call until the last member arrived
 *   move         the data movement and its completion barrier
 *   finish       unpacking and handing the output over
 *   complete     from the last rank's end until synchronize returned */
#include "bench/bench_e2e.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/bench_stream.h"
#include "dtorch/dtorch.h"
#include "mesh/rank_work.h"
#include "runtime/runtime.h"
#include "sched/pool.h"

#define API_MIB ((int64_t)1 << 20)
/* up to this size calls run back to back and are checked afterwards
 * (their outputs stay alive meanwhile: larger ones would each fault in
 * fresh pages, which a training step reusing freed blocks never does) */
#define API_BATCH ((int64_t)4096)
enum { K_AR, K_AG, K_RS, K_A2A, K_KINDS };
_Static_assert(K_A2A == (int)BENCH_ALL_TO_ALL && K_RS == (int)BENCH_REDUCE_SCATTER,
               "the kinds in bench_coll's order");
static const char *const api_names[K_KINDS] = {
  "api_all_reduce", "api_all_gather", "api_reduce_scatter", "api_all_to_all"};
enum { P_ISSUE, P_WAKE, P_ALLOC, P_PACK, P_RDV, P_MOVE, P_FINISH, P_COMPLETE,
       P_COUNT };
static const char *const phase_names[P_COUNT] = {
  "issue", "wake", "alloc", "pack", "rendezvous", "move", "finish", "complete"};

typedef struct api_cfg {
  int kind, n;
  int64_t bytes;          /* S */
  int64_t rows, cols;     /* the global tensor (rows = 1: 1-D) */
  dt_runtime *rt;
  dt_mesh *m;
  dt_tensor *x;
  float *host;            /* a shard's worth, for the checks */
  double helped;          /* records per timed call run by the issuer */
} api_cfg;

static void shape_of(api_cfg *c) {
  int64_t numel = c->bytes / 4;
  c->rows = 1;
  c->cols = numel;
  if (c->kind == K_A2A) { /* each rank's row is its S(0) shard of S bytes */
    c->rows = c->n;
    c->cols = numel;
  }
}

static dt_placement src_of(int kind) {
  return kind == K_AR || kind == K_RS ? DT_PARTIAL(DT_REDUCE_SUM) : DT_SHARD(0);
}
static dt_placement dst_of(int kind) {
  if (kind == K_AR || kind == K_AG) return DT_REPLICATE;
  return kind == K_RS ? DT_SHARD(0) : DT_SHARD(1);
}
static dt_shape global_shape(const api_cfg *c) {
  return c->rows == 1 ? DT_SHAPE(c->cols) : DT_SHAPE(c->rows, c->cols);
}
/* the value at global index (r, k): 1 for Partial sources (ones on
 * coordinate 0, zeros elsewhere), else the index modulo 2^20 (exact) */
static float value_at(const api_cfg *c, int64_t r, int64_t k) {
  if (c->kind == K_AR || c->kind == K_RS) return 1.0f;
  return (float)((r * c->cols + k) & 0xFFFFF);
}

static bool make_input(api_cfg *c) {
  dt_tensor_options o = {.mesh = c->m, .placements = (dt_placement[]){src_of(c->kind)}};
  if (c->kind == K_AR || c->kind == K_RS) {
    c->x = dt_ones(global_shape(c), &o);
    return c->x != NULL;
  }
  int64_t numel = c->rows * c->cols;
  float *v = malloc((size_t)numel * sizeof *v);
  if (!v) return false;
  for (int64_t r = 0; r < c->rows; r++)
    for (int64_t k = 0; k < c->cols; k++) v[r * c->cols + k] = value_at(c, r, k);
  c->x = dt_from_host(v, global_shape(c), &o);
  free(v);
  return c->x != NULL;
}

/* every element of every rank's shard of y */
static bool check(const api_cfg *c, dt_tensor *y) {
  for (int rank = 0; rank < c->n; rank++) {
    dt_shape ls = dt_tensor_local_shape(y, rank);
    int64_t lr = ls.ndim == 2 ? ls.dims[0] : 1, lc = ls.dims[ls.ndim - 1];
    if (dt_local_to_host(y, rank, c->host, (size_t)(lr * lc) * 4) != DT_OK)
      return false;
    /* the shard's offset: chunk `rank` of the sharded dim (torch.chunk) */
    int64_t r0 = 0, k0 = 0;
    if (c->kind == K_RS) k0 = (c->cols + c->n - 1) / c->n * rank;
    if (c->kind == K_A2A) k0 = (c->cols + c->n - 1) / c->n * rank;
    for (int64_t r = 0; r < lr; r++)
      for (int64_t k = 0; k < lc; k++)
        if (c->host[r * lc + k] != value_at(c, r0 + r, k0 + k)) return false;
  }
  return true;
}

/* phases of the last call (µs), from the probe; t0..t2: call, return,
 * synchronize returned */
static void phases_of(const api_cfg *c, double t0, double t1, double t2,
                      double *ph) {
  (void)t0;
  int64_t last_start = 0, last_end = 0;
  double alloc = 0, pack = 0, rdv = 0, move = 0, fin = 0;
  for (int rank = 0; rank < c->n; rank++) {
    mesh_probe p;
    if (!mesh_probe_read(rank, &p) || !p.start) continue;
    if (p.start > last_start) last_start = p.start;
    if (p.end > last_end) last_end = p.end;
    double a = p.alloc_ns * 1e-3, pk = (p.call - p.start) * 1e-3 - a;
    if (a > alloc) alloc = a;
    if (pk > pack) pack = pk;
    if ((p.rendezvous - p.call) * 1e-3 > rdv) rdv = (p.rendezvous - p.call) * 1e-3;
    if ((p.ret - p.rendezvous) * 1e-3 > move) move = (p.ret - p.rendezvous) * 1e-3;
    if ((p.end - p.ret) * 1e-3 > fin) fin = (p.end - p.ret) * 1e-3;
  }
  ph[P_ISSUE] = (t1 - t0) * 1e6;
  ph[P_WAKE] = last_start * 1e-3 - t1 * 1e6;
  if (ph[P_WAKE] < 0) ph[P_WAKE] = 0; /* started inside the call: helped */
  ph[P_ALLOC] = alloc;
  ph[P_PACK] = pack;
  ph[P_RDV] = rdv;
  ph[P_MOVE] = move;
  ph[P_FINISH] = fin;
  ph[P_COMPLETE] = t2 * 1e6 - last_end * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n ? v[n / 2] : 0;
}

/* the plain data movement of this kind and size (bench_collectives.c) */
static double plain_of(const api_cfg *c, int reps) {
  if (c->bytes < API_MIB) return 0;
  int n = c->n;
  float *in[8] = {0}, *out[8] = {0};
  bool ok = true;
  for (int j = 0; j < n; j++) {
    in[j] = aligned_alloc(4096, (size_t)c->bytes);
    out[j] = aligned_alloc(4096, (size_t)c->bytes);
    ok = ok && in[j] && out[j];
    if (ok) memset(in[j], 0, (size_t)c->bytes), memset(out[j], 0, (size_t)c->bytes);
  }
  /* the kinds are listed in bench_coll's order */
  double best = ok ? bench_plain_best((bench_coll)c->kind, n,
                                      (const float *const *)in, out,
                                      c->bytes / 4, reps)
                   : 0;
  for (int j = 0; j < n; j++) {
    free(in[j]);
    free(out[j]);
  }
  return best;
}

static void print_line(const api_cfg *c, double med, double best, double plain,
                       const double *ph, bool breakdown, bool ok) {
  int n = c->n;
  double f = c->kind == K_AR ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
  printf("{\"bench\":\"%s\",\"ranks\":%d,\"bytes\":%lld,\"us\":%.3f,"
         "\"best_us\":%.3f,\"busbw_gbs\":%.3f,", api_names[c->kind], n,
         (long long)c->bytes, med * 1e6, best * 1e6,
         (double)c->bytes / med * f * 1e-9);
  bench_print_plain(plain, med);
  printf("\"helped\":%.2f,", c->helped);
  for (int p = 0; breakdown && p < P_COUNT; p++)
    printf("\"%s_us\":%.3f,", phase_names[p], ph[p]);
  printf("\"ok\":%s}\n", ok ? "true" : "false");
  fflush(stdout);
}

/* times `iters` calls; back to back (checked afterwards) when small */
static bool run_calls(api_cfg *c, int iters, double *times, double (*ph)[P_COUNT]) {
  bool ok = true, batch = c->bytes <= API_BATCH;
  dt_tensor **ys = calloc((size_t)iters, sizeof *ys);
  const dt_placement dst[1] = {dst_of(c->kind)};
  ok = ys && dt_runtime_synchronize(c->rt) == DT_OK;
  /* untimed warm-up: the first calls fault in queue cells, output blocks
   * and collective groups, and a fresh process still settles (checked) */
  for (int i = 0; ok && i < (c->bytes <= API_MIB ? 20 : 1); i++) {
    dt_tensor *y = dt_redistribute(c->x, NULL, dst);
    ok = y && dt_runtime_synchronize(c->rt) == DT_OK && check(c, y);
    dt_tensor_release(y);
  }
  int64_t helped = 0; /* in the timed calls only (not the frees between) */
  for (int i = 0; ok && i < iters; i++) {
    int64_t h0 = sched_pool_get_stats(c->rt->pool).helped;
    double t0 = bench_now();
    dt_tensor *y = dt_redistribute(c->x, NULL, dst);
    double t1 = bench_now();
    ok = y && dt_runtime_synchronize(c->rt) == DT_OK;
    double t2 = bench_now();
    helped += sched_pool_get_stats(c->rt->pool).helped - h0;
    times[i] = t2 - t0;
    phases_of(c, t0, t1, t2, ph[i]);
    if (batch) {
      ys[i] = y;
      continue;
    }
    ok = ok && check(c, y);
    dt_tensor_release(y);
  }
  c->helped = (double)helped / iters;
  for (int i = 0; ys && i < iters; i++) {
    if (ys[i]) ok = ok && check(c, ys[i]);
    dt_tensor_release(ys[i]);
  }
  free(ys);
  return ok;
}

static bool one_config(int kind, int n, int64_t bytes, int reps, bool breakdown) {
  api_cfg c = {.kind = kind, .n = n, .bytes = bytes};
  shape_of(&c);
  c.rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = n});
  c.m = c.rt ? dt_mesh_init(c.rt, "cpu", DT_SHAPE(n), NULL) : NULL;
  c.host = malloc((size_t)bytes + 64 * (size_t)n); /* uneven chunks round up */
  bool ok = c.m && c.host && make_input(&c);
  int iters = bytes <= API_MIB ? 200 : bytes <= 16 * API_MIB ? 4 * reps : reps;
  double *times = calloc((size_t)iters, sizeof *times);
  double (*ph)[P_COUNT] = calloc((size_t)iters, sizeof *ph);
  ok = ok && times && ph;
  mesh_probe_enable(breakdown);
  ok = ok && run_calls(&c, iters, times, ph);
  mesh_probe_enable(false);
  if (!ok) fprintf(stderr, "bench %s: %s\n", api_names[kind], dt_last_error());
  double med = 0, best = 0, mph[P_COUNT] = {0};
  if (ok) {
    for (int p = 0; p < P_COUNT; p++) {
      double *v = malloc(sizeof *v * (size_t)iters);
      for (int i = 0; v && i < iters; i++) v[i] = ph[i][p];
      mph[p] = v ? median(v, iters) : 0;
      free(v);
    }
    med = median(times, iters);
    best = times[0];
  }
  dt_tensor_release(c.x);
  dt_mesh_release(c.m);
  dt_runtime_destroy(c.rt);
  free(c.host);
  free(times);
  free(ph);
  if (ok) print_line(&c, med, best, plain_of(&c, reps), mph, breakdown, ok);
  return ok;
}

bool bench_redistribute_e2e(int reps, int64_t max_bytes) {
  static const int ranks[] = {2, 8};
  static const int64_t sizes[] = {8, (int64_t)64 << 20};
  bool ok = true;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      if (sizes[j] <= max_bytes)
        ok = one_config(K_AR, ranks[i], sizes[j], reps, false) && ok;
  return ok;
}

bool bench_api(int reps, int64_t max_bytes, bool breakdown, int only_ranks) {
  static const int ranks[] = {2, 8};
  static const int64_t sizes[] = {8, 4 << 10, 64 << 10, API_MIB,
                                  16 * API_MIB, 64 * API_MIB, 256 * API_MIB};
  bool ok = true;
  for (int i = 0; i < 2; i++) {
    if (only_ranks && ranks[i] != only_ranks) continue;
    for (int k = 0; k < K_KINDS; k++)
      for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        if (sizes[s] <= max_bytes)
          ok = one_config(k, ranks[i], sizes[s], reps, breakdown) && ok;
  }
  return ok;
}
