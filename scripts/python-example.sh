#!/usr/bin/env bash
# One Python example (examples/python/*.py) against a built libdtorch.so.1:
#   scripts/python-example.sh VENV_DIR SOURCE_DIR LIBDTORCH EXAMPLE.py [args...]
# Runs with VENV_DIR's python (the python_package test's venv, which has
# torch; python3 when that venv is not made yet but python3 imports torch)
# and the package from SOURCE_DIR/python. The example compares itself
# with real torch and exits non-zero on a mismatch. Exits 77 (skipped)
# without a python that imports torch and numpy.
set -u
venv=$1
src=$(cd "$2" && pwd)
lib=$3
example=$4
shift 4
py=$venv/bin/python
if ! "$py" -c "import torch, numpy" 2>/dev/null; then
  py=python3
  if ! command -v python3 >/dev/null || ! python3 -c "import torch, numpy" 2>/dev/null; then
    echo "python example: skipped: no python with torch (run the python_package test first: it makes $venv)"
    exit 77
  fi
fi
cd "$(dirname "$venv")" &&
  DTORCH_LIBRARY=$lib PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH} \
    exec "$py" "$src/examples/python/$example" "$@"
