#!/bin/sh
# Checkpoints across process counts (docs/io.md "Multi-process jobs"): a
# file saved by a 2-process job loads in 1 process (a plain run) and in 4;
# one saved by 1 process loads in 2. Each --load checks the values against
# the host references, the bytes each process read, and loads from a copy
# whose bytes outside the process's shards are garbage
# (tests/test_mpi_checkpoint.c).
# With PYTHON (the safetensors_interop test's venv, if it was made), the
# 2-process file is also loaded by Python's safetensors and compared with
# the same formulas.
# usage: mpi_checkpoint_cross.sh MPIRUN_SH MPIEXEC NP_FLAG EXE [PYTHON]
# Exit 77 (skipped) without an MPI launcher.
set -eu
wrap=$1 mpiexec=$2 npflag=$3 exe=$4 py=${5:-}
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
if [ -n "$py" ] && [ -x "$py" ] && "$py" -c "import safetensors, numpy" 2>/dev/null; then
  run "$py" - "$d/two.safetensors" <<'PY'
import sys
import numpy as np
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
assert sorted(t) == ["a", "b", "c"], sorted(t)
assert t["a"].dtype == np.float32 and t["a"].shape == (6, 10)
assert (t["a"].ravel() == np.arange(60) * 0.25 - 7.0).all()
assert t["b"].dtype == np.int32 and t["b"].shape == (5, 3)
assert (t["b"].ravel() == 1000 - 37 * np.arange(15)).all()
assert t["c"].dtype == np.float32 and (t["c"] == np.arange(7) + 0.5).all()
print("python safetensors: the 2-process file loads, values right")
PY
else
  echo "(no python with safetensors: the interop step is left out)"
fi
run "$exe" --save "$d/one.safetensors"
run "$wrap" "$mpiexec" "$npflag" 2 "$exe" --load "$d/one.safetensors"
echo "cross-process-count checkpoints: ok"
