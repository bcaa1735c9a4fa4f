
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/tests/test_offload.c" "CMakeFiles/test_offload.dir/tests/test_offload.c.o" "gcc" "CMakeFiles/test_offload.dir/tests/test_offload.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/main/bt/CMakeFiles/dtorch_test_support.dir/DependInfo.cmake"
  "/work/main/bt/CMakeFiles/dtorch_static.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
