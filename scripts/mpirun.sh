#!/bin/sh
# Runs an MPI test: scripts/mpirun.sh MPIEXEC -np N PROGRAM ARGS...
# (dtorch_mpi_test in cmake/mpi.cmake). Adds what Open MPI needs here:
#  - as root (containers, CI), --allow-run-as-root;
#  - more processes than cores (CI machines), --oversubscribe, and
#    --bind-to none so each process's rank threads are not pinned to one
#    core;
#  - the output of each process tagged with its rank (DTORCH_MPIRUN_TAG=0: not).
# Other MPIs (MPICH's mpiexec) take none of these: only Open MPI's (its
# mpiexec says "OpenRTE" in 4.x, "Open MPI" in 5.x) get them.
set -eu
mpiexec=$1; shift
if "$mpiexec" --version 2>/dev/null | grep -Eq "Open ?MPI|OpenRTE"; then
  extra="--oversubscribe --bind-to none"
  # each line tagged with its process ([1,0]<stdout>:), unless
  # DTORCH_MPIRUN_TAG=0 (make demo-mpi: process 0 alone prints)
  [ "${DTORCH_MPIRUN_TAG:-1}" = 0 ] || extra="$extra --tag-output"
  [ "$(id -u)" -eq 0 ] && extra="--allow-run-as-root $extra"
  # no ssh/rsh in containers: every process on this machine
  export OMPI_MCA_plm_rsh_agent=${OMPI_MCA_plm_rsh_agent:-false}
  exec "$mpiexec" $extra "$@"
fi
exec "$mpiexec" "$@"
