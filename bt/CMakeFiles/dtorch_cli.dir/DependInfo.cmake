
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/bench/bench_collectives.c" "CMakeFiles/dtorch_cli.dir/bench/bench_collectives.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_collectives.c.o.d"
  "/work/main/bench/bench_core.c" "CMakeFiles/dtorch_cli.dir/bench/bench_core.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_core.c.o.d"
  "/work/main/bench/bench_demo.c" "CMakeFiles/dtorch_cli.dir/bench/bench_demo.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_demo.c.o.d"
  "/work/main/bench/bench_deque.c" "CMakeFiles/dtorch_cli.dir/bench/bench_deque.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_deque.c.o.d"
  "/work/main/bench/bench_dispatch.c" "CMakeFiles/dtorch_cli.dir/bench/bench_dispatch.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_dispatch.c.o.d"
  "/work/main/bench/bench_e2e.c" "CMakeFiles/dtorch_cli.dir/bench/bench_e2e.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_e2e.c.o.d"
  "/work/main/bench/bench_gpu.c" "CMakeFiles/dtorch_cli.dir/bench/bench_gpu.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_gpu.c.o.d"
  "/work/main/bench/bench_io.c" "CMakeFiles/dtorch_cli.dir/bench/bench_io.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_io.c.o.d"
  "/work/main/bench/bench_ops.c" "CMakeFiles/dtorch_cli.dir/bench/bench_ops.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_ops.c.o.d"
  "/work/main/bench/bench_pool.c" "CMakeFiles/dtorch_cli.dir/bench/bench_pool.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_pool.c.o.d"
  "/work/main/bench/bench_queue.c" "CMakeFiles/dtorch_cli.dir/bench/bench_queue.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_queue.c.o.d"
  "/work/main/bench/bench_runtime.c" "CMakeFiles/dtorch_cli.dir/bench/bench_runtime.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_runtime.c.o.d"
  "/work/main/bench/bench_stream.c" "CMakeFiles/dtorch_cli.dir/bench/bench_stream.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/bench/bench_stream.c.o.d"
  "/work/main/tools/demo.c" "CMakeFiles/dtorch_cli.dir/tools/demo.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/tools/demo.c.o.d"
  "/work/main/tools/demo_dry.c" "CMakeFiles/dtorch_cli.dir/tools/demo_dry.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/tools/demo_dry.c.o.d"
  "/work/main/tools/demo_model.c" "CMakeFiles/dtorch_cli.dir/tools/demo_model.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/tools/demo_model.c.o.d"
  "/work/main/tools/demo_trace.c" "CMakeFiles/dtorch_cli.dir/tools/demo_trace.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/tools/demo_trace.c.o.d"
  "/work/main/tools/dtorch.c" "CMakeFiles/dtorch_cli.dir/tools/dtorch.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/tools/dtorch.c.o.d"
  "/work/main/tools/stress.c" "CMakeFiles/dtorch_cli.dir/tools/stress.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/tools/stress.c.o.d"
  "/work/main/tools/stress_prog.c" "CMakeFiles/dtorch_cli.dir/tools/stress_prog.c.o" "gcc" "CMakeFiles/dtorch_cli.dir/tools/stress_prog.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/bt/CMakeFiles/dtorch_static.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
