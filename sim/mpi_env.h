/* The MPI job a multi-process runtime joins (launcher "mpi",
 * docs/mpi.md). This header needs no MPI: the runtime layer
 * includes it in every build. Built without MPI (DTORCH_MPI=off, or no MPI
 * found), sim_mpi_open fails with DT_ERR_UNSUPPORTED and the rest is never
 * reached. The MPI-typed part (communicators, requests, waits) is in
 * sim/mpi_internal.h, for the sim/ files compiled with MPI.
 *
 * Initialisation. MPI can be initialised once per process and never again
 * after MPI_Finalize, while runtimes come and go. So the first open in a
 * process decides who owns MPI:
 *   - the program has not initialised MPI: dtorch calls
 *     MPI_Init_thread(MPI_THREAD_MULTIPLE) and finalises MPI itself from
 *     an atexit handler, so runtimes can be created one after another in
 *     one process. The program must then neither call MPI_Init* nor
 *     MPI_Finalize (it may use MPI_COMM_WORLD in between);
 *   - the program initialised MPI first: dtorch uses it, never finalises
 *     it, and every handle must be closed before the program's
 *     MPI_Finalize.
 * Either way dtorch needs MPI_THREAD_MULTIPLE: every rank thread posts its
 * own sends and receives, and a dtorch-wide lock around MPI calls (the
 * SERIALIZED alternative) would serialise them and cost more than the
 * 0.03-0.05 us per message MULTIPLE costs in Open MPI 4.1 (docs/mpi.md
 * has the measurement). A lower level is refused with DT_ERR_UNSUPPORTED.
 *
 * Each handle holds two duplicates of MPI_COMM_WORLD, one for collectives
 * and one for point-to-point, both with MPI_ERRORS_RETURN (an MPI error is
 * a dt_status, never an abort), so dtorch's traffic never matches the
 * program's. */
#ifndef SIM_MPI_ENV_H
#define SIM_MPI_ENV_H

#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

typedef struct sim_mpi sim_mpi;

/* Joins the MPI job (above). Collective over MPI_COMM_WORLD: every process
 * of the job opens (and later closes) its handles in the same order; opens
 * from several threads of one process are serialised, and pair with the
 * other processes' opens in the order they take the lock. fn names the
 * public function for messages.
 * Returns: the handle, or NULL with the thread's error set: DT_ERR_UNSUPPORTED
 * (no MPI in this build; a thread level below MULTIPLE; MPI already
 * finalised), DT_ERR_DEVICE (an MPI call failed: "fn: MPI_Comm_dup: <MPI's
 * error string>"), DT_ERR_OUT_OF_MEMORY.
 * Thread safety: any thread. */
sim_mpi *sim_mpi_open(const char *fn);
/* Frees the handle's communicators (collective, like the open). NULL is a
 * no-op. After the program's own MPI_Finalize: frees the memory only. */
void sim_mpi_close(sim_mpi *m);
/* A process of the job stopped answering dtorch's messages (an exchange
 * timed out, or MPI failed): the job may be broken. MPI_Finalize is
 * collective and would wait for that process for ever, so at exit (when
 * dtorch initialised MPI) every process first meets the others in a
 * barrier; a process that noted a break waits for it at most wait_ns
 * (the collective timeout), and at least 30 s, and when a process did not
 * come,
 * exits without MPI_Finalize: the launcher then ends the whole job
 * (mpirun exits non-zero). Thread safety: any thread. */
void sim_mpi_note_broken(int64_t wait_ns);

/* The job's process count and this process's index (MPI_COMM_WORLD's size
 * and rank; 1 and 0 for NULL). */
int sim_mpi_size(const sim_mpi *m);
int sim_mpi_rank(const sim_mpi *m);
/* The largest tag the point-to-point communicator takes (MPI_TAG_UB, at
 * least 32767 by the standard). */
int sim_mpi_tag_ub(const sim_mpi *m);
/* Whether process q runs on this node (a member of this process's
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) group); false for q out of
 * range. For docs and benchmarks: shared memory is the fast path there. */
bool sim_mpi_same_node(const sim_mpi *m, int q);

/* Collective over the job's processes, from one thread of each (not a
 * rank thread): process 0 gets every process's bytes concatenated in
 * process order in *all (malloc'd, *all_len bytes; the caller frees), the
 * others NULL. deadline_ns as sim_mpi_wait's. Errors name fn. (mpi_gather.c) */
dt_status sim_mpi_gather_bytes(sim_mpi *m, const void *buf, size_t len,
                               int64_t deadline_ns, char **all, size_t *all_len,
                               const char *fn);

/* CLOCK_MONOTONIC in nanoseconds: the clock of sim_mpi_wait's deadlines */
int64_t sim_mpi_now_ns(void);

/* ---- agreements between the processes' issuing threads
 * A step that every process of a job takes on its own (a checkpoint's
 * file-system work: creating, writing, renaming one shared file) and that
 * must succeed or fail everywhere at once. Each process casts a vote (its
 * status, a message, a 64-bit key to compare or to hand out); every
 * process gets every vote, in process order. */
typedef struct sim_mpi_vote {
  int32_t status;  /* a dt_status: DT_OK, or this process's failure */
  int32_t pad;     /* zero */
  uint64_t key;    /* what the caller compares or hands out */
  char msg[496];   /* the failure's message (truncated), else empty */
} sim_mpi_vote;

/* Every process sends `mine` to every other and receives theirs into
 * all[q] (all has sim_mpi_size entries; all[self] = *mine): 2 (P - 1)
 * point-to-point messages of 512 bytes on the handle's collective
 * communicator with tag 0, which no group of sim/coll_proc.c uses (their
 * tags are 1 .. ub - 1), so an agreement never matches a collective's
 * traffic. Messages between two processes with one tag and communicator
 * do not overtake each other, so consecutive agreements pair up in order:
 * every process must take the same agreements in the same order, from
 * one thread per handle at a time (a process-wide lock serialises
 * concurrent callers, but their order across processes would then be
 * the lock's). A process that failed before an agreement must still take
 * it (with its failure as its vote). Waits until deadline_ns
 * (sim_mpi_now_ns's clock; <= 0: none); NULL m (one process): all[0] =
 * *mine, DT_OK.
 * Returns: DT_OK once every vote is in (the votes say who failed);
 * DT_ERR_TIMEOUT ("what: process q did not reach this step within the
 * deadline") or DT_ERR_DEVICE (an MPI failure); after either, later
 * agreements on m may mismatch (the job is broken). Thread safety: any
 * thread, not a rank thread waiting on ranks' work. */
dt_status sim_mpi_agree(sim_mpi *m, const sim_mpi_vote *mine,
                        sim_mpi_vote *all, int64_t deadline_ns,
                        const char *what);

#endif
