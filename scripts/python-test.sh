#!/usr/bin/env bash
# The Python package's tests: pip install ./python into a venv under the
# build dir and run pytest python/tests against the built libdtorch.so.1:
#   scripts/python-test.sh VENV_DIR SOURCE_DIR LIBDTORCH
# The venv is made on the first run and kept. Where the system python3
# already imports torch and numpy, the venv sees them
# (--system-site-packages) instead of downloading torch again; on a fresh
# machine (CI) it installs torch, numpy and pytest from PyPI: the CPU-only
# torch wheel from download.pytorch.org when that is reachable, else
# PyPI's default torch (with its CUDA wheels: 222 s with pip's cache cold,
# 84 s warm, and 5.4 GB, measured here). Exits 77 (skipped, with the reason) without python3, venv or a
# network to reach PyPI; a package that does not install or a failing
# test fails.
set -u
venv=$1
src=$(cd "$2" && pwd)
lib=$3
log=$venv.log
if ! command -v python3 >/dev/null; then
  echo "python test: skipped: no python3"; exit 77
fi
if ! "$venv/bin/python" -c "import torch, numpy, pytest, setuptools, safetensors" 2>/dev/null; then
  rm -rf "$venv"
  site=()
  python3 -c "import torch, numpy" 2>/dev/null && site=(--system-site-packages)
  if ! python3 -m venv "${site[@]}" "$venv" >"$log" 2>&1; then
    echo "python test: skipped: python3 -m venv failed (python3-venv missing?)"; exit 77
  fi
  start=$(date +%s)
  pip=("$venv/bin/python" -m pip install -q)
  if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    timeout 900 "${pip[@]}" --retries 1 --timeout 20 \
      --index-url https://download.pytorch.org/whl/cpu torch >>"$log" 2>&1 ||
      echo "python test: the CPU-only torch index is unreachable; torch from PyPI" >&2
  fi
  if ! timeout 1200 "${pip[@]}" torch numpy pytest setuptools safetensors >>"$log" 2>&1; then
    echo "python test: skipped: pip install torch numpy pytest failed (no network to PyPI?); see $log"
    rm -rf "$venv"; exit 77
  fi
  echo "python test: venv made in $(( $(date +%s) - start )) s ($venv${site:+, system site packages})"
fi
# the package itself: its failure to install is a failure, not a skip;
# from a copy, so setuptools' build/ and egg-info stay out of the sources
rm -rf "$venv-src" && cp -r "$src/python" "$venv-src" && rm -rf "$venv-src/build"
if ! "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation --force-reinstall \
     "$venv-src" >>"$log" 2>&1; then
  tail -20 "$log"; echo "python test: pip install ./python failed"; exit 1
fi
cd "$(dirname "$venv")" &&
  DTORCH_LIBRARY=$lib exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$src/python/tests"
