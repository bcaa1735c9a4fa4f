/* Small redistributes over a mesh dim spanning the processes of an MPI job
 * (run by scripts/mpirun.sh on 2 processes, ctest label mpi), issued while
 * the ranks sleep, so the issuing thread helps the ranks' parts (runs them
 * nested on its stack, sched/help.h). Such a round's exchange over MPI is
 * done by the local member whose arrival completes the local rendezvous
 * — the last helped, on top of the stack — and it waits for no other
 * local member (sim/coll_proc.c); when the lowest member did it, with the
 * others waiting in a completion barrier for it, a member suspended on
 * the helper's stack above it hung an 8-byte S(0) -> R within its first
 * calls. The pool's helped count must grow. Each process hosts 4 of the 8 ranks
 * of a 1-D mesh over all of them; the ranks spin 1 us, and every call comes after a
 * 2 ms pause, so they are asleep when it is published. References:
 * hand-computed values (sum of dt_ones' Partial = 1; the gathered tensor
 * is the host array it was made from). A hang fails through the alarm.
 *   --ranks N  a job of N ranks (run with N processes: one rank each,
 *              the lone local member is the exchanger).
 * Built without MPI: skipped (77). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "dtorch/dtorch.h"
#include "runtime/runtime.h"
#include "sched/pool.h"
#include "threads.h"

#define ELEMS 2 /* 8 bytes of float32: one-phase in one process */

static dt_runtime *rt;
static dt_mesh *mesh;
static int nranks;

/* every local rank's shard of y against want(global index) */
static void check_local(dt_tensor *y, int64_t chunk, bool sharded,
                        const float *want) {
  for (int r = 0; r < nranks; r++) {
    if (!dt_runtime_rank_is_local(rt, r)) continue;
    dt_shape ls = dt_tensor_local_shape(y, r);
    float got[ELEMS] = {0};
    assert_int_equal(dt_local_to_host(y, r, got, (size_t)ls.dims[0] * 4), DT_OK);
    int64_t k0 = sharded ? chunk * r : 0;
    for (int64_t k = 0; k < ls.dims[0]; k++) assert_true(got[k] == want[k0 + k]);
  }
}

static void run_calls(dt_tensor *x, dt_placement dst, bool sharded,
                      const float *want) {
  int64_t helped = sched_pool_get_stats(rt->pool).helped;
  for (int i = 0; i < 40; i++) {
    usleep(2000); /* the ranks park */
    dt_tensor *y = dt_redistribute(x, NULL, (dt_placement[]){dst});
    assert_non_null(y);
    assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
    check_local(y, 1, sharded, want);
    dt_tensor_release(y);
  }
  helped = sched_pool_get_stats(rt->pool).helped - helped;
  assert_true(helped > 0);
}

static void test_partial_to_replicate(void **state) {
  (void)state;
  dt_tensor_options o = {.mesh = mesh,
                         .placements = (dt_placement[]){DT_PARTIAL(DT_REDUCE_SUM)}};
  dt_tensor *x = dt_ones(DT_SHAPE(ELEMS), &o);
  assert_non_null(x);
  const float want[ELEMS] = {1, 1};
  run_calls(x, DT_REPLICATE, false, want);
  run_calls(x, DT_SHARD(0), true, want); /* reduce_scatter */
  dt_tensor_release(x);
}

static void test_shard_to_replicate(void **state) {
  (void)state;
  dt_tensor_options o = {.mesh = mesh, .placements = (dt_placement[]){DT_SHARD(0)}};
  const float v[ELEMS] = {3, 7};
  dt_tensor *x = dt_from_host(v, DT_SHAPE(ELEMS), &o);
  assert_non_null(x);
  run_calls(x, DT_REPLICATE, false, v);
  dt_tensor_release(x);
}

int main(int argc, char **argv) {
  /* one process of a 2-process job: every process issues the same calls */
  nranks = 8;
  if (argc > 2 && strcmp(argv[1], "--ranks") == 0) {
    nranks = atoi(argv[2]);
  }
  rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = nranks, .launcher = "mpi", .spin_us = 1});
  if (!rt && dt_last_status() == DT_ERR_UNSUPPORTED) {
    fprintf(stderr, "test_mpi_help: skipped: %s\n", dt_last_error());
    return 77;
  }
  mesh = rt ? dt_mesh_init(rt, "cpu", DT_SHAPE(nranks), NULL) : NULL;
  if (!mesh) {
    fprintf(stderr, "test_mpi_help: %s\n", dt_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_partial_to_replicate),
    cmocka_unit_test(test_shard_to_replicate),
  };
  int rc = TU_RUN_TESTS_WITH_ALARM(60, tests);
  dt_mesh_release(mesh);
  dt_runtime_destroy(rt);
  return rc;
}
