/* `dtorch bench collectives --mpi --breakdown`: where the time of an
 * all_reduce across processes goes. The hierarchical collective
 * (sim/coll_proc.c, sim/coll_proc_move.c) has each process's leader — one
 * rank thread — do, after the local rendezvous of its members:
 *   partials    reduce its members' inputs (its subtree of the fixed tree,
 *               sim/coll_reduce.h) into one partial: reads L·S, writes S
 *   pack        copy each other process's segment of the partial (S/P) to
 *               a send buffer (above 4 KiB; up to it, the partial travels
 *               in the header)
 *   exchange    send / receive the segments (MPI, nonblocking, then wait)
 *   combine     the tree's root over its own segment: reads P·S/P, writes
 *               S/P
 *   gather      send its reduced segment to every process, receive theirs
 *   fan_out     copy the result into each of its L members' outputs
 *               (streaming stores when large): writes L·S
 * This file runs the same steps, one at a time, on this thread, with the
 * same functions (sim_coll_tree_reduce, sim_coll_copy) and buffers of the
 * same sizes, each step best of reps (processes aligned by a barrier; the
 * slowest process's time). MPI's waits are timed twice: MPI_Waitall, and
 * through sim_mpi_wait itself (the collectives' wait: MPI_Testsome
 * spinning, then yielding, then sleeping). One JSON line per size:
 *   {"bench":"mpi_all_reduce_parts","procs":P,"ranks":N,"bytes":S,
 *    "partials_us":..,"pack_us":..,"exchange_us":..,"exchange_polled_us":..,
 *    "combine_us":..,"gather_us":..,"gather_polled_us":..,"fan_out_us":..,
 *    "sum_us":..,"sum_polled_us":..,"mpi_allreduce_us":..}
 * sum_us is the steps' total: the leader's path without the rendezvous,
 * the header exchange and the completion barrier (which the 8-byte
 * figure of the main table shows: there every step above is under a
 * microsecond). mpi_allreduce_us: MPI_Allreduce of S in the same run. */
#include "bench/bench_mpi.h"

#ifdef DTORCH_HAVE_MPI

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "sim/coll_reduce.h"
#include "sim/mpi_internal.h"

enum { PT_PARTIALS, PT_PACK, PT_EXCHANGE, PT_EXCHANGE_POLLED, PT_COMBINE,
       PT_GATHER, PT_GATHER_POLLED, PT_FAN_OUT, PT_MPI, PT_COUNT };
static const char *const part_names[PT_COUNT] = {
  "partials", "pack", "exchange", "exchange_polled", "combine", "gather",
  "gather_polled", "fan_out", "mpi_allreduce"};
#define TAG 7411
#define MAX_LOCAL 64

typedef struct parts {
  int procs, me, local, n;
  int64_t count, seg_lo, seg_n; /* this process's segment */
  float *in[MAX_LOCAL], *out[MAX_LOCAL];
  float *part, *fin, *send, *recv; /* recv: one segment per process */
  bool bad;
} parts;

/* the way the collectives wait: sim_mpi_wait itself (no deadline) */
static void polled_wait(MPI_Request *r, int n) {
  (void)sim_mpi_wait(NULL, r, n, 0, NULL, "bench");
}

/* segments of every other process: `gather` sends mine of fin and
 * receives theirs into fin, else sends theirs of my partial (packed in
 * send) and receives mine of theirs into recv */
static void exchange(parts *x, bool gather, bool polled) {
  MPI_Request r[2 * 64];
  int k = 0;
  for (int p = 0; p < x->procs; p++) {
    if (p == x->me) continue;
    int64_t lo = x->count * p / x->procs, len = x->count * (p + 1) / x->procs - lo;
    if (gather) {
      MPI_Irecv(x->fin + lo, (int)len, MPI_FLOAT, p, TAG, MPI_COMM_WORLD, &r[k++]);
      MPI_Isend(x->fin + x->seg_lo, (int)x->seg_n, MPI_FLOAT, p, TAG,
                MPI_COMM_WORLD, &r[k++]);
    } else {
      MPI_Irecv(x->recv + x->seg_n * p, (int)x->seg_n, MPI_FLOAT, p, TAG,
                MPI_COMM_WORLD, &r[k++]);
      MPI_Isend(x->send + lo, (int)len, MPI_FLOAT, p, TAG, MPI_COMM_WORLD, &r[k++]);
    }
  }
  if (polled) polled_wait(r, k);
  else MPI_Waitall(k, r, MPI_STATUSES_IGNORE);
}

static void step(parts *x, int which) {
  sim_coll_node nodes[64];
  int L = x->local;
  switch (which) {
  case PT_PARTIALS:
    for (int m = 0; m < L; m++)
      nodes[m] = (sim_coll_node){.lo = x->me * L + m, .hi = x->me * L + m + 1,
                                 .p = x->in[m], .acc = false};
    x->bad = sim_coll_tree_reduce(nodes, L, x->n, x->count, DT_FLOAT32,
                                  DT_REDUCE_SUM, x->part, true) != DT_OK || x->bad;
    break;
  case PT_PACK:
    for (int p = 0; p < x->procs; p++) {
      int64_t lo = x->count * p / x->procs, len = x->count * (p + 1) / x->procs - lo;
      if (p != x->me) memcpy(x->send + lo, x->part + lo, (size_t)len * 4);
    }
    break;
  case PT_EXCHANGE: exchange(x, false, false); break;
  case PT_EXCHANGE_POLLED: exchange(x, false, true); break;
  case PT_COMBINE:
    for (int p = 0; p < x->procs; p++)
      nodes[p] = (sim_coll_node){
        .lo = p * L, .hi = (p + 1) * L, .acc = true,
        .p = p == x->me ? x->part + x->seg_lo : x->recv + x->seg_n * p};
    x->bad = sim_coll_tree_reduce(nodes, x->procs, x->n, x->seg_n, DT_FLOAT32,
                                  DT_REDUCE_SUM, x->fin + x->seg_lo, false) != DT_OK ||
             x->bad;
    break;
  case PT_GATHER: exchange(x, true, false); break;
  case PT_GATHER_POLLED: exchange(x, true, true); break;
  case PT_FAN_OUT: {
    bool stream = sim_coll_streams(x->count * 4);
    for (int m = 0; m < L; m++) sim_coll_copy(x->out[m], x->fin, x->count * 4, stream);
    sim_coll_store_fence();
    break;
  }
  default:
    MPI_Allreduce(x->in[0], x->out[0], (int)x->count, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    break;
  }
}

static bool parts_alloc(parts *x) {
  size_t b = (size_t)x->count * 4 + 64;
  bool ok = (x->part = malloc(b)) && (x->fin = malloc(b)) && (x->send = malloc(b)) &&
            (x->recv = malloc((size_t)x->seg_n * 4 * (size_t)x->procs + 64));
  for (int m = 0; ok && m < x->local; m++) {
    ok = (x->in[m] = malloc(b)) && (x->out[m] = malloc(b));
    for (int64_t e = 0; ok && e < x->count; e++) x->in[m][e] = 1.0f;
    if (ok) memset(x->out[m], 0, b);
  }
  if (ok) memset(x->part, 0, b), memset(x->fin, 0, b), memset(x->send, 0, b);
  if (ok) memset(x->recv, 0, (size_t)x->seg_n * 4 * (size_t)x->procs);
  return ok;
}

static void parts_free(parts *x) {
  free(x->part);
  free(x->fin);
  free(x->send);
  free(x->recv);
  for (int m = 0; m < x->local; m++) free(x->in[m]), free(x->out[m]);
}

/* every step of one size, best of reps; false if a step failed */
static bool one_size(parts *x, int reps, double *best) {
  for (int s = 0; s < PT_COUNT; s++) best[s] = 1e300;
  for (int r = 0; r < reps; r++)
    for (int s = 0; s < PT_COUNT; s++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = bench_now();
      step(x, s);
      double t = bench_now() - t0, slow = t;
      MPI_Allreduce(&t, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (slow < best[s]) best[s] = slow;
    }
  /* every element of the result is n (each member's input is ones) */
  for (int64_t e = 0; e < x->count; e++)
    if (x->out[x->local - 1][e] != (float)x->n) return false;
  return !x->bad;
}

static void print_parts(const parts *x, int64_t bytes, const double *best) {
  printf("{\"bench\":\"mpi_all_reduce_parts\",\"procs\":%d,\"ranks\":%d,"
         "\"bytes\":%lld", x->procs, x->n, (long long)bytes);
  double sum = 0, sum_polled = 0;
  for (int s = 0; s < PT_COUNT; s++) {
    printf(",\"%s_us\":%.3f", part_names[s], best[s] * 1e6);
    if (s != PT_MPI && s != PT_EXCHANGE_POLLED && s != PT_GATHER_POLLED) sum += best[s];
    if (s != PT_MPI && s != PT_EXCHANGE && s != PT_GATHER) sum_polled += best[s];
  }
  printf(",\"sum_us\":%.3f,\"sum_polled_us\":%.3f}\n", sum * 1e6, sum_polled * 1e6);
  fflush(stdout);
}

bool bench_mpi_parts(int procs, int me, int local, int reps, int64_t max_bytes) {
  static const int64_t sizes[] = {(int64_t)1 << 20, (int64_t)16 << 20,
                                  (int64_t)64 << 20};
  if (local > MAX_LOCAL || procs > 64) return true; /* the arrays' room */
  bool ok = true;
  for (int i = 0; ok && i < 3 && sizes[i] <= max_bytes; i++) {
    parts x = {.procs = procs, .me = me, .local = local, .n = local * procs,
               .count = sizes[i] / 4};
    x.seg_lo = x.count * me / procs;
    x.seg_n = x.count * (me + 1) / procs - x.seg_lo;
    double best[PT_COUNT];
    int a = parts_alloc(&x), all = 0;
    MPI_Allreduce(&a, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    ok = all && one_size(&x, reps, best);
    a = ok;
    MPI_Allreduce(&a, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    ok = all;
    if (ok && !me) print_parts(&x, sizes[i], best);
    if (!ok && !me) fprintf(stderr, "bench mpi_all_reduce_parts: %lld bytes: a "
                            "step failed or gave a wrong result\n", (long long)sizes[i]);
    parts_free(&x);
  }
  return ok;
}

#endif
