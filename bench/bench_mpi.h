/* `dtorch bench collectives --mpi`: collectives through dt_redistribute
 * over the processes of an MPI job, against MPI's own collectives between
 * the same processes in the same run, and the issuing cost of a cached
 * DTensor add in a multi-process runtime (bench_mpi.c explains the
 * figures; docs/collectives.md). */
#ifndef BENCH_BENCH_MPI_H
#define BENCH_BENCH_MPI_H

#include <stdint.h>

#include <stdbool.h>

/* Runs every figure with `local` rank threads per process (the runtime's
 * num_ranks is local × the job's processes), 8 B to max_bytes, best of
 * reps batches; breakdown: the all_reduce leader's steps timed one by
 * one as well. Process 0 prints. Returns the exit status: 0, 1 if a
 * result was wrong or a call failed, 2 if this build has no MPI. */
int bench_collectives_mpi(int reps, int64_t max_bytes, int local,
                          bool breakdown);

/* --breakdown (bench_mpi_parts.c, built with MPI only): the steps of an
 * all_reduce's leader in a process of `procs` with `local` members each,
 * run one by one by this thread on buffers of the same sizes; process
 * `me` 0 prints. False if a step failed. */
bool bench_mpi_parts(int procs, int me, int local, int reps, int64_t max_bytes);

#endif
