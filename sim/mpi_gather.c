/* Gathering bytes of every process at process 0 (sim/mpi_env.h
 * sim_mpi_gather_bytes): the sizes, then the bytes, with non-blocking
 * collectives waited for with a deadline, on the handle's collective
 * communicator (the calling thread is the only one making collective
 * calls on it: rank threads only send and receive there). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sim/mpi_env.h"

#if DTORCH_HAVE_MPI
#include "sim/mpi_internal.h"

dt_status sim_mpi_gather_bytes(sim_mpi *m, const void *buf, size_t len,
                               int64_t deadline_ns, char **all, size_t *all_len,
                               const char *fn) {
  *all = NULL;
  *all_len = 0;
  int np = sim_mpi_size(m), me = sim_mpi_rank(m);
  if (len > (size_t)1 << 30)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: %zu bytes from one process "
                          "(at most 1 GiB)", fn, len);
  int mine = (int)len;
  int *sizes = me == 0 ? calloc((size_t)np, sizeof *sizes) : NULL;
  int *at = me == 0 ? calloc((size_t)np, sizeof *at) : NULL;
  if (me == 0 && (!sizes || !at)) {
    free(sizes);
    free(at);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  MPI_Comm comm = sim_mpi_coll_comm(m);
  MPI_Request r;
  dt_status st = sim_mpi_check(MPI_Igather(&mine, 1, MPI_INT, sizes, 1, MPI_INT,
                                           0, comm, &r), "MPI_Igather");
  if (st == DT_OK) st = sim_mpi_wait(m, &r, 1, deadline_ns, NULL, fn);
  int64_t total = 0;
  for (int p = 0; me == 0 && st == DT_OK && p < np; p++) {
    at[p] = (int)total;
    total += sizes[p];
  }
  if (st == DT_OK && total > INT32_MAX)
    st = core_error_set(DT_ERR_UNSUPPORTED, "%s: %lld bytes in all (at most "
                        "2 GiB)", fn, (long long)total);
  char *out = me == 0 && st == DT_OK ? malloc((size_t)total + 1) : NULL;
  if (me == 0 && st == DT_OK && !out)
    st = core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  /* every process takes part even after a failure at process 0: it then
   * gathers nothing (sizes of 0) rather than leave the others waiting */
  if (me == 0 && st != DT_OK && sizes) memset(sizes, 0, (size_t)np * sizeof *sizes);
  if (st == DT_OK || me == 0) {
    dt_status g = sim_mpi_check(MPI_Igatherv(buf, mine, MPI_BYTE, out, sizes, at,
                                             MPI_BYTE, 0, comm, &r), "MPI_Igatherv");
    if (g == DT_OK) g = sim_mpi_wait(m, &r, 1, deadline_ns, NULL, fn);
    if (st == DT_OK) st = g;
  }
  free(sizes);
  free(at);
  if (st != DT_OK) {
    free(out);
    return st;
  }
  *all = out;
  *all_len = (size_t)total;
  return DT_OK;
}

#else

dt_status sim_mpi_gather_bytes(sim_mpi *m, const void *buf, size_t len,
                               int64_t deadline_ns, char **all, size_t *all_len,
                               const char *fn) {
  (void)m, (void)buf, (void)len, (void)deadline_ns;
  *all = NULL;
  *all_len = 0;
  return core_error_set(DT_ERR_UNSUPPORTED, "%s: this build has no MPI", fn);
}

#endif
