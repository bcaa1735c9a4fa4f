#!/usr/bin/env bash
# Installs the build to a prefix under the build dir and builds examples
# out of tree against the installed copy, as a user would:
#   scripts/install-test.sh BUILD_DIR SOURCE_DIR
# 1. pkg-config: quickstart.c, api_guide.c and hello.c (the README's)
#    on the shared library,
#    quickstart.c on libdtorch.a (pkg-config --static);
# 2. CMake: tests/install/CMakeLists.txt (find_package(dtorch CONFIG)).
# Runs each program; checks the SONAME, the version the .pc and the package
# report, and that the static program does not load libdtorch.so.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
for tool in cmake pkg-config cc readelf; do
  command -v $tool >/dev/null || { echo "install test: skipped: no $tool"; exit 77; }
done
work=$build/install-test
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"

version=$(sed -n 's/^project(dtorch VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
fail() { echo "install test: $*"; exit 1; }
for f in include/dtorch/dtorch.h include/dtorch/autograd.h include/dtorch/debug.h include/dtorch/sim.h \
         include/dtorch/spmd.h lib/libdtorch.a \
         lib/libdtorch.so "lib/libdtorch.so.${version%%.*}" "lib/libdtorch.so.$version" \
         lib/pkgconfig/dtorch.pc lib/cmake/dtorch/dtorchConfig.cmake \
         lib/cmake/dtorch/dtorchConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || fail "$f not installed"
done
soname=$(readelf -d "$prefix/lib/libdtorch.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libdtorch.so.${version%%.*}" ] || fail "SONAME is '$soname'"

# 1. pkg-config
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion dtorch)" = "$version" ] || fail "dtorch.pc version"
libdir=$(pkg-config --variable=libdir dtorch)
for ex in quickstart api_guide hello; do
  cc -std=c11 -O1 -o "$work/pc_$ex" "$src/examples/$ex.c" \
     $(pkg-config --cflags --libs dtorch) -lm -Wl,-rpath,"$libdir"
  echo "== pkg-config, shared: $ex"
  "$work/pc_$ex" >"$work/pc_$ex.out" || { cat "$work/pc_$ex.out"; fail "pc_$ex failed"; }
  tail -1 "$work/pc_$ex.out"
done
# static: the archive, then what pkg-config --static lists; --as-needed
# drops the -ldtorch it also lists (nothing is left to take from it)
cc -std=c11 -O1 -o "$work/pc_quickstart_static" "$src/examples/quickstart.c" \
   $(pkg-config --cflags dtorch) -Wl,--as-needed "$libdir/libdtorch.a" \
   $(pkg-config --static --libs dtorch)
readelf -d "$work/pc_quickstart_static" | grep -q 'libdtorch' &&
  fail "the static program loads libdtorch.so"
echo "== pkg-config, static: quickstart"
"$work/pc_quickstart_static" | tail -1

# 2. CMake
cmake -S "$src/tests/install" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
      -DDTORCH_EXAMPLES="$src/examples" >"$work/cmake-configure.log" ||
  { cat "$work/cmake-configure.log"; fail "find_package(dtorch) failed"; }
cmake --build "$work/cmake-build" -j 2 >"$work/cmake-build.log" ||
  { cat "$work/cmake-build.log"; fail "the CMake consumer does not build"; }
for ex in quickstart api_guide hello quickstart_static; do
  echo "== CMake: $ex"
  "$work/cmake-build/$ex" >"$work/cmake_$ex.out" || { cat "$work/cmake_$ex.out"; fail "$ex failed"; }
  tail -1 "$work/cmake_$ex.out"
done
readelf -d "$work/cmake-build/quickstart_static" | grep -q 'libdtorch' &&
  fail "quickstart_static loads libdtorch.so"
readelf -d "$work/cmake-build/quickstart" | grep -q "libdtorch.so.${version%%.*}" ||
  fail "quickstart does not load libdtorch.so.${version%%.*}"
echo "install test: installed to $prefix; pkg-config and CMake builds ran"
