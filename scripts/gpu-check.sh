#!/usr/bin/env bash
# The CUDA backend's check on a machine with a GPU (docs/cuda.md): builds
# with DTORCH_CUDA=on for the GPU present, runs the gpu-labelled tests and
# the host-side CUDA tests, runs `dtorch bench gpu`, and prints ONE JSON
# summary line last. Needs no network (the build dependencies must be
# installed: scripts/bootstrap.sh, which this script runs only if apt is
# reachable). Fails loudly: each stage says what it does; exit 1 on any
# failure, with the summary line still printed.
#   scripts/gpu-check.sh [BUILD_DIR]     (default build-gpu; ~5 min on H200)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
t0=$(date +%s)
log() { echo "gpu-check: $*" >&2; }
status=ok; why=""; tests_json='null'; bench_json='[]'
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
summary() {
  local secs=$(( $(date +%s) - t0 ))
  printf '{"gpu_check":"%s","why":"%s","gpu":"%s","build":"%s","tests":%s,"bench":%s,"seconds":%d}\n' \
    "$status" "${why//\"/\'}" "${gpu:-none}" "$build" "$tests_json" "$bench_json" "$secs"
}
fail() { status=failed; why=$1; log "FAILED: $1"; summary; exit 1; }

log "GPU: ${gpu:-none found by nvidia-smi}"
[ -n "$gpu" ] || log "no GPU visible: the gpu tests will skip and the check fails"

# the build dependencies (packages) must be there; install only if we can
missing=$(for p in cmake pkg-config liburing-dev libck-dev libcmocka-dev libopenblas-dev libcjson-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo -n "$p "; done)
if [ -n "$missing" ]; then
  log "missing packages: $missing; trying scripts/bootstrap.sh"
  scripts/bootstrap.sh >&2 || fail "missing build packages ($missing) and no way to install them"
fi

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || fail "nvcc not found (PATH, /usr/local/cuda/bin)"
arch=native   # only the GPU present: the build takes a minute, not three
cmake_ver=$(cmake --version | head -1 | awk '{print $3}')
if [ "$(printf '%s\n3.24\n' "$cmake_ver" | sort -V | head -1)" != "3.24" ]; then
  arch="80-real;90"   # cmake < 3.24 has no "native"
fi
mkdir -p "$build"
log "configure $build: DTORCH_CUDA=on, architectures $arch, $(nproc) jobs"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTORCH_CUDA=on \
  "-DDTORCH_CUDA_ARCHITECTURES=$arch" >"$build/gpu-check.configure.log" 2>&1 \
  || { cat "$build/gpu-check.configure.log" >&2; fail "cmake configure failed"; }
grep '^-- dtorch' "$build/gpu-check.configure.log" >&2
log "build"
cmake --build "$build" -j "$(nproc)" >"$build/gpu-check.build.log" 2>&1 \
  || { tail -40 "$build/gpu-check.build.log" >&2; fail "build failed (see $build/gpu-check.build.log)"; }

log "tests: the gpu tests (each once, directly), the host-side CUDA tests"
( cd "$build" && timeout 120 ctest --output-on-failure -R 'cuda_no_driver_link|test_cuda_host|test_cuda_device' ) >&2
host_rc=$?
# each gpu test once, directly: its exit status tells a skip (77: the GPU
# was not usable, a failure here) from a pass; a test stuck past its
# timeout is a failure too (124)
gpu_tests_json=""; gpu_tests_ok=1
run_gpu_test() { # name binary [VAR=value ...]
  local name=$1 bin=$2 rc res; shift 2
  log "  $name"
  if [ -z "$gpu" ]; then
    res=no-gpu; gpu_tests_ok=0
  elif env "$@" timeout 300 "$build/$bin" >"$build/gpu-check.$name.log" 2>&1; then
    res=pass
  else
    rc=$?; res="fail($rc)"; [ "$rc" = 77 ] && res=skipped
    tail -30 "$build/gpu-check.$name.log" >&2
    gpu_tests_ok=0
  fi
  gpu_tests_json="$gpu_tests_json,\"$name\":\"$res\""
}
run_gpu_test test_cuda_ops test_cuda_ops
run_gpu_test test_cuda_coll test_cuda_coll
run_gpu_test test_cuda_dtensor test_cuda_dtensor
run_gpu_test test_sharding_props_cuda test_sharding_props DTORCH_TEST_DEVICE=cuda \
  DTORCH_SWEEP=reduced DTORCH_CUDA_FALLBACK=1 DTORCH_CUDA_FALLBACK_QUIET=1
tests_json=$(printf '{"ctest_host_rc":%d%s}' "$host_rc" "$gpu_tests_json")

# the training demo (DP x TP on DTensors, against one device) on 8 CUDA
# ranks of one GPU, ops without CUDA kernels through the host fallback
log "demo: dtorch demo on 8 CUDA ranks of one GPU"
demo_out=$(DTORCH_DEVICE=cuda DTORCH_DTENSOR_IN_SAME_DEVICE=1 DTORCH_CUDA_FALLBACK=1 \
  timeout 120 "$build/dtorch" demo --steps 3 --json 2>&1)
demo_rc=$?
echo "$demo_out" | tail -3 >&2
demo_json=$(echo "$demo_out" | grep '"summary":true' | tail -1)
[ -n "$demo_json" ] || demo_json='null'
tests_json="${tests_json%\}},\"demo\":$demo_json}"

log "bench: dtorch bench gpu"
bench_out=$(timeout 240 "$build/dtorch" bench gpu --reps 3)
bench_rc=$?
echo "$bench_out" >&2
bench_json="[$(echo "$bench_out" | grep '^{' | paste -sd, -)]"
[ "$bench_json" = "[]" ] && bench_json='[]'

[ $host_rc -eq 0 ] || fail "host-side CUDA tests failed"
[ $gpu_tests_ok -eq 1 ] || fail "a gpu test failed or skipped: $tests_json"
[ $demo_rc -eq 0 ] && echo "$demo_json" | grep -q '"ok":true' \
  || fail "the demo on CUDA ranks failed (exit $demo_rc)"
[ $bench_rc -eq 0 ] || fail "dtorch bench gpu exited $bench_rc"
summary
