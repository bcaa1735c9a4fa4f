#!/usr/bin/env bash
# Checks that a shared library exports only the public API:
#   scripts/check-exports.sh libdtorch.so
# every defined dynamic symbol starts with dt_ (cmake/dtorch.map makes the
# rest local); lists the others and fails if there are any. Also fails if
# no dt_ symbol is exported at all (a wrong file, a broken map).
#   scripts/check-exports.sh --self-test
# builds two small libraries (one exporting a non-dt_ function) and checks
# that this script passes the first and fails the second.
set -u
if [ "${1:-}" = --self-test ]; then
  command -v cc >/dev/null || { echo "check-exports: skipped: no cc"; exit 77; }
  tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
  for i in $(seq 1 120); do echo "int dt_f$i(void) { return $i; }"; done >"$tmp/good.c"
  { cat "$tmp/good.c"; echo "int cpu_leak(void) { return 0; }"; } >"$tmp/bad.c"
  cc -shared -fPIC -o "$tmp/good.so" "$tmp/good.c" &&
    cc -shared -fPIC -o "$tmp/bad.so" "$tmp/bad.c" || exit 1
  "$0" "$tmp/good.so" >/dev/null || { echo "self-test: a dt_-only library failed"; exit 1; }
  if "$0" "$tmp/bad.so" | grep -q cpu_leak; then
    "$0" "$tmp/bad.so" >/dev/null && { echo "self-test: cpu_leak passed"; exit 1; }
    echo "check-exports self-test: passed"; exit 0
  fi
  echo "self-test: cpu_leak not reported"; exit 1
fi
lib=$1
if ! command -v nm >/dev/null; then
  echo "check-exports: skipped: no nm"; exit 77
fi
syms=$(nm -D --defined-only "$lib" | awk 'NF >= 3 {print $3}') || exit 1
n_dt=$(printf '%s\n' "$syms" | grep -c '^dt_')
others=$(printf '%s\n' "$syms" | grep -v '^dt_' | grep -v '^$')
if [ -n "$others" ]; then
  echo "check-exports: $lib exports symbols outside the dt_ API:"
  printf '  %s\n' $others
  exit 1
fi
if [ "$n_dt" -lt 100 ]; then
  echo "check-exports: $lib exports only $n_dt dt_ symbols (expected the whole API)"
  exit 1
fi
echo "check-exports: $lib exports $n_dt symbols, all dt_"
