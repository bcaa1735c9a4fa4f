"""The Python package in a multi-process job: python/tests/mpi/mpi_job.py
(a DP x TP program with dtorch.nn, parallelize_module and AdamW) run
alone and under mpirun on 2 and 4 processes (scripts/mpirun.sh, launcher
"mpi"): each run checks its process-group answers and its values against
real torch; the printed losses and parameters must be bitwise the same
for every process count, and dist.barrier() must meet the processes (the
last one's mark exists when the others leave it). Skipped without mpirun or when libdtorch was
built without MPI."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
JOB = ROOT / "python" / "tests" / "mpi" / "mpi_job.py"
MPIRUN = shutil.which("mpirun")


def run(np, tmp):
    mark = tmp / f"mark{np}"
    env = dict(os.environ, DTORCH_NUM_RANKS="8", DTORCH_MPIRUN_TAG="0",
               MPI_JOB_MARK=str(mark))
    cmd = [sys.executable, str(JOB)]
    if np > 1:
        env["DTORCH_LAUNCHER"] = "mpi"
        cmd = [str(ROOT / "scripts" / "mpirun.sh"), MPIRUN, "-np", str(np),
               "-x", "DTORCH_LAUNCHER", "-x", "DTORCH_NUM_RANKS",
               "-x", "DTORCH_LIBRARY", "-x", "PYTHONPATH", "-x", "MPI_JOB_MARK"] + cmd
    else:
        env.pop("DTORCH_LAUNCHER", None)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if "has no MPI" in p.stderr + p.stdout:
        pytest.skip("libdtorch was built without MPI")
    assert p.returncode == 0, f"{np} process(es): rc {p.returncode}\n{p.stdout}\n{p.stderr}"
    lines = [ln for ln in p.stdout.splitlines()
             if ln.startswith(("values", "losses", "params"))]
    assert len(lines) == 3, p.stdout
    return lines


@pytest.mark.skipif(MPIRUN is None, reason="no mpirun")
def test_same_bits_for_any_process_count(tmp_path):
    one = run(1, tmp_path)
    for np in (2, 4):
        assert run(np, tmp_path) == one, f"{np} processes differ from one"
