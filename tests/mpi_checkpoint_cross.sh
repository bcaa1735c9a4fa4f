#!/bin/sh
# Checkpoints across process counts (docs/io.md "Multi-process jobs"): a
# file saved by a 2-process job loads in 1 process (a plain run) and in 4;
# one saved by 1 process loads in 2. Each --load checks the values against
# the host references, the bytes each process read, and loads from a copy
# whose bytes outside the process's shards are garbage
# (tests/test_mpi_checkpoint.c).
# usage: mpi_checkpoint_cross.sh MPIRUN_SH MPIEXEC NP_FLAG EXE
# Exit 77 (skipped) without an MPI launcher.
set -eu
wrap=$1 mpiexec=$2 npflag=$3 exe=$4
if [ -z "$mpiexec" ] || ! command -v "$mpiexec" >/dev/null 2>&1; then
  echo "skipped: no MPI launcher"
  exit 77
fi
d=$(mktemp -d "${TMPDIR:-/tmp}/dtorch-ckpt-cross-XXXXXX")
trap 'rm -rf "$d"' EXIT
run() { echo "+ $*"; "$@"; }
run "$wrap" "$mpiexec" "$npflag" 2 "$exe" --save "$d/two.safetensors"
run "$exe" --load "$d/two.safetensors"
run "$wrap" "$mpiexec" "$npflag" 4 "$exe" --load "$d/two.safetensors"
run "$exe" --save "$d/one.safetensors"
run "$wrap" "$mpiexec" "$npflag" 2 "$exe" --load "$d/one.safetensors"
echo "cross-process-count checkpoints: ok"
