/* The MPI-typed part of sim/mpi_env.h: for the sim/ files compiled with
 * MPI (DTORCH_HAVE_MPI), the cross-process collectives. Includes mpi.h,
 * so nothing above sim/ and nothing public includes it. */
#ifndef SIM_MPI_INTERNAL_H
#define SIM_MPI_INTERNAL_H

#if !DTORCH_HAVE_MPI
#error "sim/mpi_internal.h is for builds with MPI (DTORCH_HAVE_MPI)"
#endif

#include <mpi.h>
#include <stdint.h>

#include "dtorch/dtorch.h"
#include "sim/mpi_env.h"

/* The handle's communicators: duplicates of MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN, one for collectives, one for point-to-point. They
 * live until sim_mpi_close. Use each from any thread (MPI_THREAD_MULTIPLE),
 * but a collective call on one communicator from one thread at a time (an
 * MPI rule). */
MPI_Comm sim_mpi_coll_comm(const sim_mpi *m);
MPI_Comm sim_mpi_p2p_comm(const sim_mpi *m);

/* An MPI return code as a dt_status: DT_OK for MPI_SUCCESS, else
 * DT_ERR_DEVICE with "what: <MPI_Error_string>" as the thread's error. */
dt_status sim_mpi_check(int rc, const char *what);

/* What became of each request sim_mpi_wait was given. */
typedef enum sim_mpi_req_state {
  SIM_MPI_REQ_DONE,      /* completed: the message was sent / received */
  SIM_MPI_REQ_CANCELLED, /* cancelled on timeout: no data moved, and none
                            will; the buffer is the caller's again */
  SIM_MPI_REQ_ABANDONED, /* freed while still active (a send MPI cannot
                            cancel, a receive whose cancel did not finish in
                            SIM_MPI_CANCEL_GRACE_NS): MPI may still read or
                            write its buffer, which must stay allocated
                            (leaked) until the process exits */
} sim_mpi_req_state;

/* how long a timed-out wait waits for its cancels to take effect */
#define SIM_MPI_CANCEL_GRACE_NS 10000000LL

/* Waits for every request in reqs[0..n) to complete, or until deadline_ns
 * (sim_mpi_now_ns's clock; <= 0: no deadline).
 * Polls with MPI_Testsome: a spin of ~20 us, then sched_yield for up to
 * 5 ms (a peer sharing the core runs, and an answer is seen within a
 * yield), then sleeps of 50 us growing to 1 ms (a slow or stopped peer).
 * On return every reqs[i] is MPI_REQUEST_NULL (completed or freed) and, if
 * state is not NULL, state[i] says what became of request i.
 * Returns: DT_OK, all done. DT_ERR_TIMEOUT at the deadline ("what: timed
 * out with k of n MPI requests pending"): each pending request is cancelled
 * (MPI_Cancel) and given SIM_MPI_CANCEL_GRACE_NS to complete as cancelled
 * (state CANCELLED, or DONE where it had matched meanwhile); what is still
 * active then is freed (MPI_Request_free; ABANDONED). DT_ERR_DEVICE when a
 * request completes with an MPI error (a truncated receive, a dead peer):
 * "what: request i: <MPI_Error_string>"; the rest are cancelled as on a
 * timeout. DT_ERR_INVALID_ARGUMENT for n < 0 or reqs NULL with n > 0.
 * Thread safety: any thread; the requests are the caller's alone. */
dt_status sim_mpi_wait(sim_mpi *m, MPI_Request *reqs, int n,
                       int64_t deadline_ns, sim_mpi_req_state *state,
                       const char *what);

#endif
