/* Agreements between the processes' issuing threads (sim/mpi_env.h
 * sim_mpi_agree): every process sends its vote to every other with tag 0
 * of the collective communicator and waits for theirs with a deadline.
 * Point-to-point rather than MPI_Iallgather because a timed-out
 * collective request cannot be cancelled (MPI_Cancel on one is
 * erroneous), while a timed-out send or receive can (sim_mpi_wait). */
#include "sim/mpi_env.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

#if !DTORCH_HAVE_MPI

dt_status sim_mpi_agree(sim_mpi *m, const sim_mpi_vote *mine,
                        sim_mpi_vote *all, int64_t deadline_ns,
                        const char *what) {
  (void)m;
  (void)deadline_ns;
  (void)what;
  all[0] = *mine;
  return DT_OK;
}

#else

#include <pthread.h>
#include <stdlib.h>

#include "sim/mpi_internal.h"

/* one caller at a time in this process: two agreements in flight on one
 * communicator and tag would match each other's messages */
static pthread_mutex_t agree_lock = PTHREAD_MUTEX_INITIALIZER;

/* the first process whose messages did not all arrive, for the message */
static int first_missing(const sim_mpi_req_state *state, int n, int self) {
  for (int i = 0; i < n; i++) {
    if (state[i] == SIM_MPI_REQ_DONE) continue;
    int q = i / 2; /* requests go (recv, send) per peer, peers skip self */
    return q >= self ? q + 1 : q;
  }
  return -1;
}

dt_status sim_mpi_agree(sim_mpi *m, const sim_mpi_vote *mine,
                        sim_mpi_vote *all, int64_t deadline_ns,
                        const char *what) {
  int n = m ? sim_mpi_size(m) : 1, self = m ? sim_mpi_rank(m) : 0;
  all[self] = *mine;
  if (n == 1) return DT_OK;
  MPI_Request *reqs = malloc(sizeof *reqs * 2 * (size_t)(n - 1));
  sim_mpi_req_state *state = malloc(sizeof *state * 2 * (size_t)(n - 1));
  if (!reqs || !state) {
    free(reqs);
    free(state);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
  }
  MPI_Comm comm = sim_mpi_coll_comm(m);
  dt_status st = DT_OK;
  int k = 0;
  pthread_mutex_lock(&agree_lock);
  for (int q = 0; q < n && st == DT_OK; q++) {
    if (q == self) continue;
    st = sim_mpi_check(MPI_Irecv(&all[q], (int)sizeof all[q], MPI_BYTE, q, 0,
                                 comm, &reqs[k]), what);
    if (st != DT_OK) break;
    k++;
    st = sim_mpi_check(MPI_Isend(mine, (int)sizeof *mine, MPI_BYTE, q, 0,
                                 comm, &reqs[k]), what);
    if (st == DT_OK) k++;
  }
  /* on an Isend/Irecv failure the posted ones are waited for with the same
   * deadline (a peer still answers), then the failure is kept */
  dt_status w = sim_mpi_wait(m, reqs, k, deadline_ns, state, what);
  pthread_mutex_unlock(&agree_lock);
  if (st == DT_OK && w == DT_ERR_TIMEOUT) {
    int q = first_missing(state, k, self);
    st = core_error_set(DT_ERR_TIMEOUT, "%s: process %d of %d did not reach "
                        "this step within the collective timeout (it failed "
                        "before it, or issues other work)", what, q, n);
  } else if (st == DT_OK) {
    st = w;
  }
  free(reqs);
  free(state);
  return st;
}

#endif
