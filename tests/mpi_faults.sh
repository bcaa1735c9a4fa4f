#!/bin/sh
# Faults of a multi-process job (ctest label mpi; cmake registers it as
# mpi_faults):
#   tests/mpi_faults.sh LOOP MPIEXEC MPIRUN_SH
# LOOP is build/test_mpi_loop (tests/test_mpi_loop.c): 2 processes of an
# 8-rank job calling all_reduce in a loop; each process writes
# DIR/ready.P (its pid) once its first call returned.
#  a) kill -9 of process 1 in the loop: mpirun ends, non-zero, within
#     60 s, and no process is left;
#  b) SIGSTOP of process 1 in the loop, DTORCH_COLLECTIVE_TIMEOUT=2:
#     process 0 fails its pending all_reduce with DT_ERR_TIMEOUT naming
#     "process 1 (ranks 4..7)" within the timeout plus 20 s of slack (the
#     message appears on its stderr) and the job ends non-zero within 60 s
#     more (at exit process 0 waits up to 30 s for the others before it
#     gives up MPI_Finalize, which would wait for the stopped one for
#     ever: sim/mpi_env.h); the stopped process is then continued and
#     killed, nothing is left.
# MPIEXEC empty (dtorch built without MPI): skipped (77).
set -u
loop=$1 mpiexec=$2 mpirun_sh=$3
if [ -z "$mpiexec" ]; then
  echo "skipped: dtorch was built without MPI"
  exit 77
fi
tmp=$(mktemp -d)
pids=""
cleanup() {
  for p in $pids; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
now() { date +%s; }

# waits until file $1 exists (at most $2 s); false on the bound
wait_file() {
  i=0
  while [ ! -s "$1" ]; do
    i=$((i + 1))
    [ $i -gt $(($2 * 10)) ] && return 1
    sleep 0.1
  done
}

# waits until process $1 ended (at most $2 s); false on the bound
wait_gone() {
  i=0
  while kill -0 "$1" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt $(($2 * 10)) ] && return 1
    sleep 0.1
  done
}

# starts the job in directory $1 (environment as given); sets job, p0, p1
start_job() {
  mkdir -p "$1"
  "$mpirun_sh" "$mpiexec" -np 2 "$loop" "$1" > "$1/out" 2>&1 &
  job=$!
  pids="$pids $job"
  if ! wait_file "$1/ready.0" 60 || ! wait_file "$1/ready.1" 60; then
    echo "FAIL: the job did not reach its loop in 60 s:"; cat "$1/out"
    return 1
  fi
  p0=$(cat "$1/ready.0") p1=$(cat "$1/ready.1")
  pids="$pids $p0 $p1"
}

# ---- a) kill -9
if start_job "$tmp/kill"; then
  kill -9 "$p1"
  t0=$(now)
  if ! wait_gone "$job" 60; then
    echo "FAIL: kill -9: mpirun still running 60 s after process 1 was killed"
    fail=1
  else
    wait "$job"; rc=$?
    if [ $rc -eq 0 ]; then
      echo "FAIL: kill -9: mpirun exited 0"; fail=1
    else
      echo "ok: kill -9 of process 1: mpirun exited $rc after $(($(now) - t0)) s"
    fi
    # mpirun killed it as it ended: give the kill a moment to land
    if ! wait_gone "$p0" 10; then
      echo "FAIL: kill -9: process 0 ($p0) is left 10 s after mpirun ended"
      fail=1
    fi
  fi
else
  fail=1
fi

# ---- b) SIGSTOP with a 2 s collective timeout
export DTORCH_COLLECTIVE_TIMEOUT=2
if start_job "$tmp/stop"; then
  kill -STOP "$p1"
  t0=$(now)
  i=0 seen=""
  while [ $i -lt 220 ] && [ -z "$seen" ]; do
    grep -q "test_mpi_loop: process 0:" "$tmp/stop/out" && seen=$(now)
    i=$((i + 1)); sleep 0.1
  done
  if [ -z "$seen" ]; then
    echo "FAIL: SIGSTOP: process 0 reported nothing within 22 s:"
    cat "$tmp/stop/out"; fail=1
  else
    line=$(grep "test_mpi_loop: process 0:" "$tmp/stop/out")
    case $line in
      *"DT_ERR_TIMEOUT"*"process 1 (ranks 4..7)"*)
        echo "ok: SIGSTOP of process 1: process 0 failed after $((seen - t0)) s: $line" ;;
      *) echo "FAIL: SIGSTOP: process 0 said: $line"; fail=1 ;;
    esac
  fi
  if ! wait_gone "$job" 60; then
    echo "FAIL: SIGSTOP: mpirun still running 60 s after process 0's failure"
    cat "$tmp/stop/out"; fail=1
  else
    wait "$job"; rc=$?
    if [ $rc -eq 0 ]; then
      echo "FAIL: SIGSTOP: mpirun exited 0"; fail=1
    else
      echo "ok: SIGSTOP: mpirun exited $rc, $(($(now) - t0)) s after the stop"
    fi
  fi
  kill -CONT "$p1" 2>/dev/null
  kill -9 "$p1" 2>/dev/null
  if ! wait_gone "$p1" 10 || ! wait_gone "$p0" 10; then
    echo "FAIL: SIGSTOP: a process is left"; fail=1
  fi
else
  fail=1
fi
exit $fail
