file(REMOVE_RECURSE
  "CMakeFiles/test_runtime.dir/tests/test_runtime.c.o"
  "CMakeFiles/test_runtime.dir/tests/test_runtime.c.o.d"
  "test_runtime"
  "test_runtime.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_runtime.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
