/* `dtorch bench collectives --mpi`, one process of an MPI job
 * (scripts/mpirun.sh mpirun -np P build/dtorch bench collectives --mpi).
 * Every process makes a runtime with launcher "mpi" and num_ranks =
 * L × P (L = 4 rank threads per process unless --ranks says otherwise),
 * so process p hosts ranks p·L .. p·L + L − 1. Process 0 prints.
 *
 * Collectives: dt_redistribute of a float32 tensor on a 1-D mesh over all
 * L × P ranks (its one dim spans every process, with L members in each:
 * the hierarchical path in full — the local rendezvous of L members, the
 * leader's partials over them, MPI between the leaders, the copy to the
 * local members' outputs; a mesh [P, L]'s dim 0 would have one member per
 * process and skip the local half):
 *   mpi_all_reduce      P(sum) -> R     S = each rank's buffer
 *   mpi_all_gather      S(0) -> R       S = the gathered tensor
 *   mpi_reduce_scatter  P(sum) -> S(0)  S = each rank's input
 * S (`bytes`) is the nccl-tests size, as in the one-process figures. The
 * baseline, `mpi_us`: MPI_Allreduce / MPI_Allgather /
 * MPI_Reduce_scatter_block (MPI_FLOAT, MPI_SUM) over MPI_COMM_WORLD on
 * buffers of each process's own with one rank's payload: all_reduce S in
 * and S out; all_gather S/P in and S out; reduce_scatter S in and S/P out.
 * That is what the processes must exchange for the dtorch call (its L
 * local members' buffers are combined inside the process first), so
 * vs_mpi = mpi_us / us reads as how close dtorch comes to handing the
 * same bytes to MPI once per process.
 *
 * Timing: a batch of calls starts after an MPI_Barrier; each call is
 * timed from dt_redistribute until dt_runtime_synchronize returns (the
 * output released then, except that batches of calls of up to 4 KiB keep
 * their outputs until the batch ends, as bench_e2e.c does); a batch's
 * time is the slowest process's (MPI_Allreduce MAX), divided by its
 * calls. dtorch and MPI batches alternate, reps of each; `us` and
 * `mpi_us` are the best batches, `median_us` / `mpi_median_us` the
 * medians. Every output on every local rank of the warm-up call and of
 * the last timed call is checked in full against closed forms; `ok` is
 * every process's verdict.
 *
 * Issuing: the dtensor_add_hit figure of `dtorch bench dispatch` (a 4x4
 * add of [S(0), R] DTensors with a cache hit, the issuing thread's CPU ns
 * per op, best burst of 256) on a mesh [P, L] of the multi-process
 * runtime, against the same program on a one-process runtime (launcher
 * "none") with the same num_ranks, created in the same process, bursts
 * alternating: `ratio` = ns / one_process_ns. A second baseline, a
 * one-process runtime with L ranks on a mesh [1, L], issues as many
 * records per op as the multi-process runtime does in each process
 * (`vs_local_ranks`).
 *
 * The last line, mpi_collectives_goals, gives the goals (not asserted)
 * beside the figures: the 64 MiB all_reduce's vs_mpi (>= 0.9), the 8-byte
 * all_reduce's us (<= 10) and the issuing ratio (<= 1.2); null when not
 * run. --breakdown: the probe's phases on each line and the all_reduce
 * leader's steps (bench_mpi_parts.c). */
#include "bench/bench_mpi.h"

#include <stdbool.h>
#include <stdio.h>

#ifndef DTORCH_HAVE_MPI

int bench_collectives_mpi(int reps, int64_t max_bytes, int local,
                          bool breakdown) {
  (void)reps, (void)max_bytes, (void)local, (void)breakdown;
  fprintf(stderr, "dtorch bench collectives --mpi: this dtorch was built "
          "without MPI (configured with DTORCH_MPI=off, or no MPI found); "
          "configure with -DDTORCH_MPI=on and run it under mpirun\n");
  return 2;
}

#else

#include <mpi.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "dtorch/dtorch.h"
#include "mesh/rank_work.h"

#define MIB ((int64_t)1 << 20)
#define HOLD_MAX ((int64_t)4096) /* batches of calls up to this keep outputs */
enum { X_AR, X_AG, X_RS, X_KINDS };
static const char *const names[X_KINDS] = {"mpi_all_reduce", "mpi_all_gather",
                                           "mpi_reduce_scatter"};
static const int64_t sizes[] = {8, 4 << 10, 64 << 10, MIB, 16 * MIB, 64 * MIB,
                                256 * MIB};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

typedef struct xp_bench {
  int procs, me, local, n; /* n = local * procs */
  int reps;
  bool breakdown;
  dt_runtime *rt;
  dt_mesh *mesh;
} xp_bench;

typedef struct xp_cfg {
  int kind;
  int64_t bytes, elems; /* S and the global tensor's elements */
  dt_tensor *x;
  float *host;          /* one rank's output, for the checks */
  float *min, *mout;    /* MPI's buffers */
  int64_t min_n, mout_n;
} xp_cfg;

static double slowest(double t) {
  double m = t;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

static bool all_true(bool ok) {
  int v = ok, all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

/* the global element k: 1 for the Partial sources (dt_ones: ones on mesh
 * coordinate 0, zeros elsewhere, so every sum is 1), else k mod 2^20 */
static float value_at(int kind, int64_t k) {
  return kind == X_AG ? (float)(k & 0xFFFFF) : 1.0f;
}

static bool make_input(const xp_bench *b, xp_cfg *c) {
  dt_placement src = c->kind == X_AG ? DT_SHARD(0) : DT_PARTIAL(DT_REDUCE_SUM);
  dt_tensor_options o = {.mesh = b->mesh, .placements = &src};
  if (c->kind != X_AG) {
    c->x = dt_ones(DT_SHAPE(c->elems), &o);
    return c->x != NULL;
  }
  float *v = malloc((size_t)c->elems * sizeof *v);
  if (!v) return false;
  for (int64_t k = 0; k < c->elems; k++) v[k] = value_at(c->kind, k);
  c->x = dt_from_host(v, DT_SHAPE(c->elems), &o);
  free(v);
  return c->x != NULL;
}

/* every element of every local rank's shard of y */
static bool check(const xp_bench *b, const xp_cfg *c, dt_tensor *y) {
  int64_t chunk = (c->elems + b->n - 1) / b->n; /* torch.chunk */
  for (int r = 0; r < b->n; r++) {
    if (!dt_runtime_rank_is_local(b->rt, r)) continue;
    dt_shape ls = dt_tensor_local_shape(y, r);
    int64_t len = ls.dims[0], k0 = c->kind == X_RS ? chunk * r : 0;
    if (dt_local_to_host(y, r, c->host, (size_t)len * 4) != DT_OK) return false;
    for (int64_t k = 0; k < len; k++)
      if (c->host[k] != value_at(c->kind, k0 + k)) {
        fprintf(stderr, "bench %s: %lld bytes: rank %d [%lld] = %g, want %g\n",
                names[c->kind], (long long)c->bytes, r, (long long)k,
                c->host[k], value_at(c->kind, k0 + k));
        return false;
      }
  }
  return true;
}

/* --breakdown: the phases of one call (µs) from the engine's probe
 * (mesh_probe_*) on this process's ranks, as bench_e2e.c reads them */
enum { PH_ISSUE, PH_WAKE, PH_RDV, PH_LEAD, PH_MOVE, PH_COMPLETE, PH_COUNT };
static const char *const ph_names[PH_COUNT] = {
  "issue", "wake", "rendezvous", "leader_move", "others_move", "complete"};
#define PH_CALLS 1024

static void phases_of(const xp_bench *b, double t0, double t1, double t2,
                      double *ph) {
  int64_t last_start = 0, last_end = 0;
  double rdv = 0, others = 0, lead = 0;
  for (int r = 0; r < b->n; r++) {
    mesh_probe p;
    if (!dt_runtime_rank_is_local(b->rt, r) || !mesh_probe_read(r, &p) || !p.start)
      continue;
    if (p.start > last_start) last_start = p.start;
    if (p.end > last_end) last_end = p.end;
    double rv = (p.rendezvous - p.call) * 1e-3, mv = (p.ret - p.rendezvous) * 1e-3;
    if (rv > rdv) rdv = rv;
    if (r == b->me * b->local) lead = mv; /* the lowest local rank leads */
    else if (mv > others) others = mv;
  }
  ph[PH_ISSUE] = (t1 - t0) * 1e6;
  ph[PH_WAKE] = last_start * 1e-3 - t1 * 1e6 > 0 ? last_start * 1e-3 - t1 * 1e6 : 0;
  ph[PH_RDV] = rdv;
  ph[PH_LEAD] = lead;
  ph[PH_MOVE] = others;
  ph[PH_COMPLETE] = t2 * 1e6 - last_end * 1e-3;
}

static double ph_acc[PH_CALLS][PH_COUNT]; /* this size's calls */
static int ph_n;

static dt_tensor *one_call(const xp_bench *b, const xp_cfg *c) {
  const dt_placement dst[1] = {c->kind == X_RS ? DT_SHARD(0) : DT_REPLICATE};
  double t0 = bench_now();
  dt_tensor *y = dt_redistribute(c->x, NULL, dst);
  double t1 = bench_now();
  dt_status st = y ? dt_runtime_synchronize(b->rt) : DT_OK;
  if (b->breakdown && y && st == DT_OK && ph_n < PH_CALLS)
    phases_of(b, t0, t1, bench_now(), ph_acc[ph_n++]);
  if (y && st != DT_OK) {
    dt_tensor_release(y);
    return NULL;
  }
  return y;
}

/* one dtorch batch of `iters` calls: seconds per call (slowest process);
 * *ok false on a failed call; the last output checked when `last` */
static double xp_batch(const xp_bench *b, const xp_cfg *c, int iters,
                       bool last, bool *ok) {
  dt_tensor *held[64];
  bool hold = c->bytes <= HOLD_MAX && iters <= 64;
  double total = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < iters; i++) {
    double t0 = bench_now();
    dt_tensor *y = *ok ? one_call(b, c) : NULL;
    total += bench_now() - t0;
    if (!y) *ok = false;
    if (y && last && i == iters - 1) *ok = check(b, c, y) && *ok;
    if (hold) held[i] = y;
    else dt_tensor_release(y);
  }
  for (int i = 0; hold && i < iters; i++) dt_tensor_release(held[i]);
  return slowest(total) / iters;
}

static bool mpi_call(const xp_cfg *c) {
  int rc;
  switch (c->kind) {
  case X_AR:
    rc = MPI_Allreduce(c->min, c->mout, (int)c->min_n, MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD);
    break;
  case X_AG:
    rc = MPI_Allgather(c->min, (int)c->min_n, MPI_FLOAT, c->mout, (int)c->min_n,
                       MPI_FLOAT, MPI_COMM_WORLD);
    break;
  default:
    rc = MPI_Reduce_scatter_block(c->min, c->mout, (int)c->mout_n, MPI_FLOAT,
                                  MPI_SUM, MPI_COMM_WORLD);
    break;
  }
  return rc == MPI_SUCCESS;
}

static double mpi_batch(const xp_cfg *c, int iters, bool *ok) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) *ok = mpi_call(c) && *ok;
  return slowest(bench_now() - t0) / iters;
}

/* MPI's buffers: one rank's payload per process (the top) */
static bool mpi_buffers(const xp_bench *b, xp_cfg *c) {
  int64_t e = c->bytes / 4, per = e / b->procs > 0 ? e / b->procs : 1;
  c->min_n = c->kind == X_AG ? per : c->kind == X_RS ? per * b->procs : e;
  c->mout_n = c->kind == X_AG ? per * b->procs : c->kind == X_RS ? per : e;
  c->min = malloc((size_t)c->min_n * 4);
  c->mout = malloc((size_t)c->mout_n * 4);
  if (!c->min || !c->mout) return false;
  for (int64_t k = 0; k < c->min_n; k++) c->min[k] = 1.0f;
  memset(c->mout, 0, (size_t)c->mout_n * 4);
  return true;
}

/* the goals' figures, as measured (-1: not run) */
static double goal_vs_mpi = -1, goal_us = -1, goal_ratio = -1;

static int cmp_d(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* the median of each phase over this size's calls, the slowest process's */
static void print_phases(const xp_bench *b) {
  double v[PH_CALLS];
  for (int p = 0; p < PH_COUNT; p++) {
    for (int i = 0; i < ph_n; i++) v[i] = ph_acc[i][p];
    qsort(v, (size_t)ph_n, sizeof *v, cmp_d);
    double med = ph_n ? v[ph_n / 2] : 0, slow = med;
    MPI_Allreduce(&med, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (!b->me) printf(",\"%s_us\":%.3f", ph_names[p], slow);
  }
}

static void print_row(const xp_bench *b, const xp_cfg *c, double *t, double *m,
                      int reps, bool ok) {
  qsort(t, (size_t)reps, sizeof *t, cmp_d);
  qsort(m, (size_t)reps, sizeof *m, cmp_d);
  if (!b->me)
    printf("{\"bench\":\"%s\",\"procs\":%d,\"ranks\":%d,\"bytes\":%lld,"
           "\"us\":%.3f,\"median_us\":%.3f,\"mpi_us\":%.3f,\"mpi_median_us\":%.3f,"
           "\"vs_mpi\":%.3f", names[c->kind], b->procs, b->n, (long long)c->bytes,
           t[0] * 1e6, t[reps / 2] * 1e6, m[0] * 1e6, m[reps / 2] * 1e6, m[0] / t[0]);
  if (c->kind == X_AR && c->bytes == 64 * MIB) goal_vs_mpi = m[0] / t[0];
  if (c->kind == X_AR && c->bytes == 8) goal_us = t[0] * 1e6;
  if (b->breakdown) print_phases(b);
  if (!b->me) printf(",\"ok\":%s}\n", ok ? "true" : "false");
  fflush(stdout);
}

/* one kind and size; false if a result was wrong or a call failed */
static bool one_size(const xp_bench *b, int kind, int64_t bytes) {
  xp_cfg c = {.kind = kind, .bytes = bytes, .elems = bytes / 4};
  int iters = bytes <= 64 << 10 ? 50 : bytes <= MIB ? 10 : bytes <= 16 * MIB ? 3 : 1;
  int reps = bytes <= MIB ? 4 * b->reps : b->reps;
  double *t = calloc((size_t)reps, sizeof *t), *m = calloc((size_t)reps, sizeof *m);
  c.host = malloc((size_t)bytes + 64);
  bool ok = t && m && c.host && make_input(b, &c) && mpi_buffers(b, &c);
  ok = all_true(ok);
  mesh_probe_enable(b->breakdown);
  if (ok) { /* warm-up: faults, groups, the stage; checked */
    dt_tensor *y = one_call(b, &c);
    ok = y && check(b, &c, y);
    dt_tensor_release(y);
    for (int i = 0; ok && i < 3; i++) ok = mpi_call(&c);
    ok = all_true(ok);
  }
  ph_n = 0; /* the timed calls only */
  for (int r = 0; ok && r < reps; r++) {
    t[r] = xp_batch(b, &c, iters, r == reps - 1, &ok);
    m[r] = mpi_batch(&c, iters, &ok);
    ok = all_true(ok);
  }
  if (!ok) fprintf(stderr, "bench %s: %lld bytes: %s\n", names[kind],
                   (long long)bytes, dt_last_error());
  mesh_probe_enable(false);
  if (ok) print_row(b, &c, t, m, reps, ok);
  dt_tensor_release(c.x);
  free(c.host);
  free(c.min);
  free(c.mout);
  free(t);
  free(m);
  return ok;
}

/* ---- the issuing cost of a cached add (bench_dispatch.c's dtensor_add_hit) */

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct add_rt {
  dt_runtime *rt;
  dt_mesh *m;
  dt_tensor *a, *c;
  double best; /* CPU ns per op, best burst */
} add_rt;

static bool add_rt_init(add_rt *x, const char *launcher, int ranks, int rows) {
  *x = (add_rt){.best = 1e300};
  x->rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks,
                                                  .launcher = launcher});
  x->m = x->rt ? dt_mesh_init(x->rt, "cpu", DT_SHAPE(rows, ranks / rows), NULL)
               : NULL;
  dt_tensor_options o = {.mesh = x->m,
                         .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  x->a = x->m ? dt_ones(DT_SHAPE(4, 4), &o) : NULL;
  x->c = x->m ? dt_ones(DT_SHAPE(4, 4), &o) : NULL;
  return x->a && x->c;
}

/* 256 adds, then synchronize (outside the burst's time) */
static bool add_burst(add_rt *x) {
  double c0 = cpu_now();
  for (int i = 0; i < 256; i++) {
    dt_tensor *y = dt_add(x->a, x->c);
    if (!y) return false;
    dt_tensor_release(y);
  }
  double ns = (cpu_now() - c0) / 256 * 1e9;
  if (ns < x->best) x->best = ns;
  return dt_runtime_synchronize(x->rt) == DT_OK;
}

static void add_rt_free(add_rt *x) {
  dt_tensor_release(x->a);
  dt_tensor_release(x->c);
  dt_mesh_release(x->m);
  dt_runtime_destroy(x->rt);
}

static bool bench_issue(const xp_bench *b) {
  add_rt xp, one, loc;
  bool ok = add_rt_init(&xp, "mpi", b->n, b->procs);
  ok = add_rt_init(&one, "none", b->n, b->procs) && ok;
  ok = add_rt_init(&loc, "none", b->local, 1) && ok;
  ok = all_true(ok);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; ok && r < b->reps * 20; r++)
    ok = add_burst(&xp) && add_burst(&one) && add_burst(&loc);
  if (!ok) fprintf(stderr, "bench mpi_dtensor_add_hit: %s\n", dt_last_error());
  ok = all_true(ok);
  double ratio = xp.best / one.best, worst = slowest(ratio);
  goal_ratio = ratio;
  if (ok && !b->me)
    printf("{\"bench\":\"mpi_dtensor_add_hit\",\"procs\":%d,\"ranks\":%d,"
           "\"mesh\":\"%dx%d\",\"ns\":%.0f,\"one_process_ns\":%.0f,"
           "\"ratio\":%.2f,\"worst_process_ratio\":%.2f,\"local_ranks_ns\":%.0f,"
           "\"vs_local_ranks\":%.2f}\n", b->procs, b->n, b->procs, b->local,
           xp.best, one.best, ratio, worst, loc.best, xp.best / loc.best);
  add_rt_free(&xp);
  add_rt_free(&one);
  add_rt_free(&loc);
  return ok;
}

static bool run_all(xp_bench *b, int64_t max_bytes) {
  b->rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = b->n,
                                                  .launcher = "mpi"});
  b->mesh = b->rt ? dt_mesh_init(b->rt, "cpu", DT_SHAPE(b->n), NULL) : NULL;
  if (!all_true(b->mesh != NULL)) {
    fprintf(stderr, "bench collectives --mpi: %s\n", dt_last_error());
    return false;
  }
  bool ok = true;
  for (int k = 0; ok && k < X_KINDS; k++)
    for (int s = 0; ok && s < NSIZES; s++)
      if (sizes[s] <= max_bytes) ok = one_size(b, k, sizes[s]);
  dt_mesh_release(b->mesh);
  dt_runtime_destroy(b->rt);
  ok = ok && bench_issue(b);
  if (ok && b->breakdown) ok = bench_mpi_parts(b->procs, b->me, b->local,
                                                 b->reps, max_bytes);
  return ok;
}

int bench_collectives_mpi(int reps, int64_t max_bytes, int local,
                          bool breakdown) {
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  /* the bench owns MPI (dtorch then uses it and never finalises it) */
  if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) !=
                     MPI_SUCCESS) {
    fprintf(stderr, "dtorch bench collectives --mpi: MPI_Init_thread failed\n");
    return 1;
  }
  xp_bench b = {.reps = reps, .local = local, .breakdown = breakdown};
  MPI_Comm_size(MPI_COMM_WORLD, &b.procs);
  MPI_Comm_rank(MPI_COMM_WORLD, &b.me);
  b.n = local * b.procs;
  bool ok = run_all(&b, max_bytes);
  if (!b.me) {
    printf("{\"bench\":\"mpi_collectives_goals\",\"procs\":%d,\"ranks\":%d,"
           "\"all_reduce_64MiB_vs_mpi\":", b.procs, b.n);
    printf(goal_vs_mpi >= 0 ? "%.3f" : "null", goal_vs_mpi);
    printf(",\"vs_mpi_goal\":0.9,\"all_reduce_8B_us\":");
    printf(goal_us >= 0 ? "%.3f" : "null", goal_us);
    printf(",\"us_goal\":10.0,\"issue_ratio\":");
    printf(goal_ratio >= 0 ? "%.2f" : "null", goal_ratio);
    printf(",\"ratio_goal\":1.2,\"ok\":%s}\n", ok ? "true" : "false");
  }
  if (!inited) MPI_Finalize();
  return ok ? 0 : 1;
}

#endif
