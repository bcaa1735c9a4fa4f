#!/bin/sh
# The tools as one process of an MPI job (ctest label mpi; cmake registers
# it as mpi_tools):
#   tests/mpi_tools.sh DTORCH MPIEXEC MPIRUN_SH
#  a) `DTORCH demo --launcher mpi --trace FILE` on 2 processes writes ONE
#     trace holding every rank of every process: process tracks 0 and 1,
#     rank tracks 0..7 under their process, op slices on ranks of both;
#  b) `DTORCH stress --launcher mpi --iters N` on 2 processes, with chaos
#     and faults: every program equal to one device, exit 0, only process 0
#     prints its summary (the processes agree on when to stop, and on
#     every verdict a local failure could otherwise split).
# MPIEXEC empty (dtorch built without MPI): skipped (77).
set -u
dtorch=$1 mpiexec=$2 mpirun_sh=$3
if [ -z "$mpiexec" ]; then
  echo "skipped: dtorch was built without MPI"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

timeout 300 "$mpirun_sh" "$mpiexec" -np 2 "$dtorch" demo --steps 2 \
  --launcher mpi --trace "$tmp/trace.json" > "$tmp/demo.out" 2>&1 ||
  { echo "FAIL: demo --trace under MPI"; cat "$tmp/demo.out"; fail=1; }
python3 - "$tmp/trace.json" <<'PY' || fail=1
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
procs = {e["pid"] for e in ev if e.get("name") == "process_name"}
ranks = {(e["pid"], e["tid"]) for e in ev
         if e.get("name") == "thread_name" and e["args"]["name"].startswith("rank")}
want = {(r // 4, r) for r in range(8)}
busy = {e["tid"] for e in ev if e.get("ph") == "X" and e["tid"] < 8}
bad = []
if procs != {0, 1}: bad.append("process tracks %s, want {0, 1}" % sorted(procs))
if ranks != want: bad.append("rank tracks %s, want %s" % (sorted(ranks), sorted(want)))
if not (busy & {0, 1, 2, 3}) or not (busy & {4, 5, 6, 7}):
    bad.append("slices on ranks %s: want ranks of both processes" % sorted(busy))
for b in bad: print("FAIL: trace:", b)
sys.exit(1 if bad else 0)
PY

timeout 300 "$mpirun_sh" "$mpiexec" -np 2 "$dtorch" stress --iters 200 \
  --launcher mpi > "$tmp/stress.out" 2> "$tmp/stress.err" ||
  { echo "FAIL: stress under MPI"; cat "$tmp/stress.out" "$tmp/stress.err"; fail=1; }
n=$(grep -c "all equal to one device" "$tmp/stress.out")
if [ "$n" != 1 ]; then
  echo "FAIL: stress printed $n summaries (want 1, from process 0)"
  cat "$tmp/stress.out"
  fail=1
fi
[ $fail = 0 ] && echo "ok: one trace of both processes; stress equal to one device"
exit $fail
