file(REMOVE_RECURSE
  "CMakeFiles/test_dtensor.dir/tests/test_dtensor.c.o"
  "CMakeFiles/test_dtensor.dir/tests/test_dtensor.c.o.d"
  "test_dtensor"
  "test_dtensor.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_dtensor.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
