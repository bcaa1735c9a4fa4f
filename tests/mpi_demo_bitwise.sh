#!/bin/sh
# The demo's training losses are bitwise the same on 1, 2 and 4 processes
# (ctest label mpi; cmake registers it as mpi_demo_bitwise):
#   tests/mpi_demo_bitwise.sh DTORCH MPIEXEC MPIRUN_SH
# runs `DTORCH demo --steps 3 --json --model M` once in one process and
# under MPIRUN_SH MPIEXEC -np 2 and -np 4 with --launcher mpi, for the MLP
# and the transformer, and compares every step's "loss" as printed. The
# losses are float32 values printed with %.9g, which tells every float32
# apart, so equal text is equal bits. A multi-process job prints from
# process 0 only: output from another process means the processes did not
# join one job. MPIEXEC empty (dtorch built without MPI): skipped (77).
set -u
dtorch=$1 mpiexec=$2 mpirun_sh=$3
if [ -z "$mpiexec" ]; then
  echo "skipped: dtorch was built without MPI"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# the "loss" of every step line of file $1, one a line
losses() {
  grep '"step":' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'
}

for model in mlp transformer; do
  args="demo --steps 3 --json --model $model"
  # shellcheck disable=SC2086
  timeout 300 "$dtorch" $args > "$tmp/one.out" 2> "$tmp/one.err"
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL: $dtorch $args: exit $rc"; cat "$tmp/one.err"; fail=1; continue
  fi
  losses "$tmp/one.out" > "$tmp/one.loss"
  if [ "$(wc -l < "$tmp/one.loss")" -ne 3 ]; then
    echo "FAIL: $model: one process printed no 3 losses:"; cat "$tmp/one.out"
    fail=1; continue
  fi
  for np in 2 4; do
    # shellcheck disable=SC2086
    timeout 300 "$mpirun_sh" "$mpiexec" -np $np "$dtorch" $args \
      --launcher mpi > "$tmp/mp.out" 2> "$tmp/mp.err"
    rc=$?
    if [ $rc -ne 0 ]; then
      echo "FAIL: $model on $np processes: exit $rc"; cat "$tmp/mp.out" "$tmp/mp.err"
      fail=1; continue
    fi
    # Open MPI's --tag-output (scripts/mpirun.sh) prefixes "[job,rank]"
    if grep -q '^\[[0-9]*,[1-9][0-9]*\]<stdout>' "$tmp/mp.out"; then
      echo "FAIL: $model on $np processes: a process other than 0 printed:"
      grep '^\[[0-9]*,[1-9]' "$tmp/mp.out" | head -5; fail=1; continue
    fi
    losses "$tmp/mp.out" > "$tmp/mp.loss"
    if cmp -s "$tmp/one.loss" "$tmp/mp.loss"; then
      echo "ok: $model on $np processes: losses $(tr '\n' ' ' < "$tmp/mp.loss")"
    else
      echo "FAIL: $model on $np processes: losses differ (one process, then $np):"
      paste "$tmp/one.loss" "$tmp/mp.loss"; fail=1
    fi
  done
done
exit $fail
