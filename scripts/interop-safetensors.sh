#!/usr/bin/env bash
# Runs the safetensors interop test with Python's safetensors + numpy:
#   scripts/interop-safetensors.sh VENV_DIR TEST_EXE
# makes the venv (python3 -m venv, pip install safetensors numpy) when it
# lacks them; exits 77 (skipped, with the reason) without Python, venv,
# pip or a network to reach PyPI.
set -u
venv=$1
exe=$2
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null; then
  echo "safetensors interop: skipped: no python3"; exit 77
fi
if ! "$venv/bin/python" -c "import safetensors, numpy" 2>/dev/null; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    echo "safetensors interop: skipped: python3 -m venv failed (python3-venv missing?)"; exit 77
  fi
  if ! timeout 600 "$venv/bin/pip" install -q safetensors numpy >/dev/null 2>&1; then
    echo "safetensors interop: skipped: pip install safetensors numpy failed (no network to PyPI?)"; exit 77
  fi
fi
DTORCH_PYTHON="$venv/bin/python" DTORCH_INTEROP_SCRIPT="$here/safetensors_interop.py" exec "$exe"
