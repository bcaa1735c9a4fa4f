/* The program tests/mpi_faults.sh kills and stops (not a cmocka suite):
 *   test_mpi_loop DIR [ITERATIONS]
 * one process of an MPI job (launcher "mpi", 8 ranks): an SPMD function
 * calls all_reduce on the world ITERATIONS times (default 10,000,000,
 * more than a test waits for). Once the first call of its process
 * returned, the process's first rank writes DIR/ready.<process index>
 * holding the process id, so the script acts on a process that is in the
 * loop. A failure prints "test_mpi_loop: process P: <message>" and exits
 * 3; a finished loop exits 0. The collective timeout comes from
 * DTORCH_COLLECTIVE_TIMEOUT. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dtorch/dtorch.h"

static const char *dir;
static long iterations = 10000000;

static void mark_ready(int proc) {
  char path[4096], tmp[4100];
  snprintf(path, sizeof path, "%s/ready.%d", dir, proc);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fprintf(f, "%ld\n", (long)getpid());
  fclose(f);
  rename(tmp, path); /* the script sees the whole file or none */
}

static dt_status loop_fn(dt_spmd_ctx *c) {
  dt_tensor *x = dt_full(DT_SHAPE(64), 1, NULL);
  if (!x) return dt_last_status();
  bool first = dt_runtime_rank_is_local(c->rt, c->rank) &&
               (c->rank == 0 || !dt_runtime_rank_is_local(c->rt, c->rank - 1));
  dt_status st = DT_OK;
  for (long i = 0; i < iterations && st == DT_OK; i++) {
    dt_tensor *y = dt_all_reduce(x, DT_REDUCE_SUM, NULL);
    if (!y) st = dt_last_status();
    dt_tensor_release(y);
    if (i == 0 && first && st == DT_OK) mark_ready(dt_runtime_process_index(c->rt));
  }
  dt_tensor_release(x);
  return st;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_mpi_loop DIR [ITERATIONS]\n");
    return 2;
  }
  dir = argv[1];
  if (argc > 2) iterations = atol(argv[2]);
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8,
                                                           .launcher = "mpi"});
  if (!rt) {
    fprintf(stderr, "test_mpi_loop: dt_runtime_create: %s\n", dt_last_error());
    return dt_last_status() == DT_ERR_UNSUPPORTED ? 77 : 3;
  }
  int proc = dt_runtime_process_index(rt);
  dt_status st = dt_spmd_run(rt, loop_fn, NULL);
  if (st != DT_OK)
    fprintf(stderr, "test_mpi_loop: process %d: %s: %s\n", proc,
            dt_status_name(st), dt_last_error());
  dt_runtime_destroy(rt);
  return st == DT_OK ? 0 : 3;
}
