# Thin wrapper over CMake (build dir: build/). `make demo` and `make test`
# work on a fresh machine: they install missing packages first.
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
CMAKE_FLAGS ?=
# extra ctest arguments for `make test`, e.g. CTEST_FLAGS="-LE mpi"
CTEST_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local

.PHONY: all bootstrap configure build demo demo-mpi test bench install clean
all: build

bootstrap:
	@scripts/bootstrap.sh

configure: bootstrap
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) \
	  >$(BUILD)/configure.log || { cat $(BUILD)/configure.log; exit 1; }
	@grep '^-- dtorch' $(BUILD)/configure.log || true

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/dtorch demo

# the main job as 2 processes of an MPI job (docs/multiprocess.md)
demo-mpi: build
	DTORCH_MPIRUN_TAG=0 scripts/mpirun.sh mpirun -np 2 $(BUILD)/dtorch demo --launcher mpi

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

bench: build
	$(BUILD)/dtorch bench core

# headers, libdtorch.so.1 + libdtorch.a, dtorch.pc, the CMake package
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
