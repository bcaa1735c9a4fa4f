#!/usr/bin/env bash
# Fuzzes the safetensors header parser (core/safetensors.c) at length:
#   scripts/fuzz-safetensors.sh BUILD_DIR [INPUTS]
# 1. the seeded mutation loop of tests/test_safetensors_fuzz.c, INPUTS
#    inputs (default 1,000,000), from BUILD_DIR (configure it with
#    -DDTORCH_SANITIZE=address,undefined so every read is checked);
# 2. where clang is installed, the same checks as a libFuzzer target
#    (-fsanitize=fuzzer,address,undefined), INPUTS runs from the seeds.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [INPUTS]}
inputs=${2:-1000000}
root=$(cd "$(dirname "$0")/.." && pwd)
cmake --build "$build" --target test_safetensors_fuzz >/dev/null
DTORCH_FUZZ_ITERS=$inputs "$build/test_safetensors_fuzz"
if ! command -v clang >/dev/null; then
  echo "fuzz-safetensors: no clang, libFuzzer skipped"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -DDTORCH_LIBFUZZER \
  -I "$root/include" -I "$root" $(pkg-config --cflags libcjson) \
  "$root/tests/test_safetensors_fuzz.c" "$root/core/safetensors.c" \
  "$root/core/error.c" "$root/core/dtype.c" $(pkg-config --libs libcjson) \
  -lpthread -lm -o "$work/fuzz"
mkdir "$work/corpus"
"$build/test_safetensors_fuzz" --seeds "$work/corpus"
"$work/fuzz" -runs="$inputs" -max_len=4096 "$work/corpus" 2>&1 | tail -n 3
