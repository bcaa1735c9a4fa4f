#!/usr/bin/env bash
# Loads the trace of tests/test_trace.c's known program in Perfetto's trace
# processor (scripts/check_trace_perfetto.py):
#   scripts/perfetto-trace.sh VENV_DIR TEST_TRACE_EXE
# makes the venv (python3 -m venv, pip install perfetto) when it lacks it;
# exits 77 (skipped, with the reason) without Python, venv, PyPI or the
# trace processor binary (which perfetto downloads from Google's storage).
set -u
venv=$1
exe=$2
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null; then
  echo "perfetto trace check: skipped: no python3"; exit 77
fi
if ! "$venv/bin/python" -c "import perfetto" 2>/dev/null; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    echo "perfetto trace check: skipped: python3 -m venv failed"; exit 77
  fi
  if ! timeout 600 "$venv/bin/pip" install -q perfetto >/dev/null 2>&1; then
    echo "perfetto trace check: skipped: pip install perfetto failed (no network to PyPI?)"; exit 77
  fi
fi
"$exe" --write trace_perfetto.json || exit 1
exec timeout 300 "$venv/bin/python" "$here/check_trace_perfetto.py" trace_perfetto.json
