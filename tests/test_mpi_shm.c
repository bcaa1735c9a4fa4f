/* Large all_reduces across processes on one node (sim/coll_proc_shm.c:
 * the node-shared window), run by scripts/mpirun.sh on 2 and 4 processes
 * (ctest label mpi). Each case is a genuine Partial — dt_sum / dt_amax
 * over dim 0 of a base [8, count] sharded S(0) on the Partial mesh dim —
 * redistributed to Replicate and Shard(0), on meshes [8], [2, 4] and
 * [4, 2], against the same program on a one-process runtime of the same
 * 8 ranks (bitwise) and a double-precision sum of the rows (float32
 * within 1e-5, integers and max exactly). Counts from just above the
 * window's threshold (1 MiB per rank) to 4 MiB, odd ones included, grow
 * and shrink the window between calls.
 *   (no flag)  the window is used: sim_xp_shm_rounds grows
 *   --no-shm   DTORCH_MPI_SHM=0: the same cases through MPI messages
 *              (the count stays 0), with the same bits
 * Built without MPI: skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dtorch/dtorch.h"

#if !DTORCH_HAVE_MPI

int main(void) {
  puts("skipped: dtorch was built without MPI");
  return 77;
}

#else

#include "mpi_dtensor_common.h"
#include "sim/coll_proc.h"

static bool no_shm;

#define R_ DT_REPLICATE
#define S0 DT_SHARD(0)
#define PS DT_PARTIAL(DT_REDUCE_SUM)

/* the Partial of dt_sum (or dt_amax) over dim 0 of base [8, count] laid
 * out S(0) on mesh dim `at` (Replicate on the other) */
static dt_tensor *partial(dt_mesh *m, int at, const char *bytes, int64_t count,
                          dt_dtype d, bool max) {
  dt_placement pl[2] = {R_, R_};
  pl[at] = S0;
  dt_tensor *b = from_host(bytes, DT_SHAPE(8, count), d, m, pl);
  dt_tensor *x = max ? dt_amax(b, (const int[]){0}, 1, false)
                     : dt_sum(b, (const int[]){0}, 1, false);
  dt_tensor_release(b);
  return x;
}

/* one case: the all_reduce to `to` on mesh dim `at` of mesh shape ms */
static void run(dt_shape ms, int at, int64_t count, dt_dtype d, bool max,
                dt_placement to, uint64_t seed) {
  dt_mesh *m = dt_mesh_create_range(rt, NULL, ms, NULL);
  dt_mesh *mr = dt_mesh_create_range(ref, NULL, ms, NULL);
  double lim = tu_is_float(d) ? 1 : 100; /* float sums of 8: within 1e-5 */
  double *base = tu_random_values(8 * count, d, seed, -lim, lim, true);
  char *bytes = encode(base, 8 * count, d);
  dt_tensor *x = partial(m, at, bytes, count, d, max);
  dt_tensor *xr = partial(mr, at, bytes, count, d, max);
  dt_placement pl[2] = {R_, R_};
  pl[at] = to;
  int64_t before = sim_xp_shm_rounds();
  dt_tensor *y = x ? dt_redistribute(x, NULL, pl) : NULL;
  dt_tensor *yr = xr ? dt_redistribute(xr, NULL, pl) : NULL;
  dt_runtime_synchronize(rt);
  int64_t used = sim_xp_shm_rounds() - before;
  char what[160], msh[32];
  tu_shape_str(ms, msh, sizeof msh);
  snprintf(what, sizeof what, "mesh %s dim %d, %s[%lld], P(%s) -> %s", msh,
           at, dt_dtype_name(d), (long long)count, max ? "max" : "sum",
           to.kind == DT_PLACEMENT_SHARD ? "S(0)" : "R");
  /* the dim's groups span processes when rank 0's does (these meshes
   * are ranges 0..7, row-major) */
  int stride = at == ms.ndim - 1 ? 1 : (int)ms.dims[1];
  bool spans = false;
  for (int i = 1; i < ms.dims[at]; i++) spans = spans || proc_of(i * stride) != 0;
  if (no_shm)
    CHECK(used == 0, "%s: %lld rounds through the window with DTORCH_MPI_SHM=0",
          what, (long long)used);
  else if (to.kind == DT_PLACEMENT_REPLICATE && spans)
    CHECK(used >= 1, "%s: no round went through the window", what);
  else
    CHECK(used == 0, "%s: %lld rounds through the window, none spans "
          "processes or reduces to Replicate", what, (long long)used);
  double *v = reduce_rows(base, 8, count, max);
  dt_dtype od = y ? dt_tensor_dtype(y) : d; /* int32 sums are int64 */
  char *want = encode(v, count, od);
  double tol = max || !tu_is_float(od) ? -1 : od == DT_FLOAT32 ? 1e-5 : 1.0 / 16;
  check_result(y, yr, pl, want, tol, what);
  free(v), free(want), free(base), free(bytes);
  TU_RELEASE(x, xr, y, yr);
  dt_mesh_release(m);
  dt_mesh_release(mr);
}

static void test_sizes(void **state) {
  (void)state;
  /* 1 MiB + 12 bytes, 2.4 MB, 4 MiB, then 1.2 MB: the window grows, then
   * is reused for a smaller call */
  static const int64_t counts[] = {262147, 600001, 1 << 20, 300007};
  for (int i = 0; i < 4; i++)
    run(DT_SHAPE(8), 0, counts[i], DT_FLOAT32, false, R_, 10 + (uint64_t)i);
  agree();
}

static void test_kinds(void **state) {
  (void)state;
  run(DT_SHAPE(8), 0, 300007, DT_FLOAT32, true, R_, 20);
  run(DT_SHAPE(8), 0, 300007, DT_INT32, false, R_, 21);
  run(DT_SHAPE(8), 0, 600001, DT_BFLOAT16, false, R_, 22);
  /* a reduce-scatter takes the messages: the same bits either way */
  run(DT_SHAPE(8), 0, 300007, DT_FLOAT32, false, S0, 23);
  agree();
}

/* groups of 2 and 4 ranks, several at once (one per row or column) */
static void test_meshes(void **state) {
  (void)state;
  static const dt_shape shapes[2] = {{2, {2, 4}}, {2, {4, 2}}};
  for (int s = 0; s < 2; s++)
    for (int at = 0; at < 2; at++)
      run(shapes[s], at, 270001, DT_FLOAT32, false, R_, 30 + (uint64_t)(2 * s + at));
  agree();
}

int main(int argc, char **argv) {
  no_shm = argc > 1 && strcmp(argv[1], "--no-shm") == 0;
  if (no_shm) setenv("DTORCH_MPI_SHM", "0", 1);
  rt = make_runtime("mpi", N);
  ref = rt ? make_runtime("none", N) : NULL;
  if (!rt || !ref) {
    fprintf(stderr, "test_mpi_shm: %s\n", dt_last_error());
    return 1;
  }
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  dt_runtime_set_current(rt);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sizes),
    cmocka_unit_test(test_kinds),
    cmocka_unit_test(test_meshes),
  };
  tu_alarm(240);
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(ref);
  dt_runtime_destroy(rt);
  return failed;
}

#endif
