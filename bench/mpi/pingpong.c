/* What MPI_THREAD_MULTIPLE costs dtorch (sim/mpi_env.h requires it): an
 * 8-byte ping-pong between processes 0 and 1 at the thread level given,
 * with blocking MPI_Send/MPI_Recv and with MPI_Isend/MPI_Irecv polled by
 * MPI_Test (how sim_mpi_wait waits). Plain MPI, no dtorch:
 *   scripts/mpirun.sh mpiexec -np 2 build/mpi_pingpong single|multiple
 * One JSON line per figure from process 0: the one-way latency (half a
 * round trip), best of 5 runs of 20,000 round trips. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define TRIPS 20000

static double run(int rank, int polled) {
  char buf[8] = {0};
  int peer = 1 - rank;
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (int i = 0; i < TRIPS; i++) {
    for (int leg = 0; leg < 2; leg++) {
      int sending = (leg == 0) == (rank == 0);
      if (!polled) {
        if (sending) MPI_Send(buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        else MPI_Recv(buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        continue;
      }
      MPI_Request req;
      if (sending) MPI_Isend(buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &req);
      else MPI_Irecv(buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &req);
      for (int done = 0; !done;) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
  }
  return (MPI_Wtime() - t) / TRIPS / 2 * 1e6;
}

int main(int argc, char **argv) {
  int want = argc > 1 && strcmp(argv[1], "single") == 0 ? MPI_THREAD_SINGLE
                                                         : MPI_THREAD_MULTIPLE;
  int got = 0, rank = 0, size = 0;
  MPI_Init_thread(&argc, &argv, want, &got);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: run it on 2 processes\n");
    MPI_Finalize();
    return 2;
  }
  for (int polled = 0; polled < 2; polled++) {
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
      double us = run(rank, polled);
      if (us < best) best = us;
    }
    if (rank == 0) {
      printf("{\"bench\":\"mpi_pingpong\",\"thread_level\":\"%s\",\"wait\":\"%s\","
             "\"bytes\":8,\"one_way_us\":%.3f}\n",
             got == MPI_THREAD_MULTIPLE ? "multiple" : "single",
             polled ? "test" : "blocking", best);
    }
  }
  MPI_Finalize();
  return 0;
}
