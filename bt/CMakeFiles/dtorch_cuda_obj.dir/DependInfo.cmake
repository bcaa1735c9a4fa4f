
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/kernels/cuda/coll.cu" "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/coll.cu.o" "gcc" "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/coll.cu.o.d"
  "/work/main/kernels/cuda/elementwise.cu" "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/elementwise.cu.o" "gcc" "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/elementwise.cu.o.d"
  "/work/main/kernels/cuda/random.cu" "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/random.cu.o" "gcc" "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/random.cu.o.d"
  "/work/main/kernels/cuda/rows.cu" "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/rows.cu.o" "gcc" "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/rows.cu.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
