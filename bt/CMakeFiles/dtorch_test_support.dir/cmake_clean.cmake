file(REMOVE_RECURSE
  "CMakeFiles/dtorch_test_support.dir/tests/support/op_cases.c.o"
  "CMakeFiles/dtorch_test_support.dir/tests/support/op_cases.c.o.d"
  "CMakeFiles/dtorch_test_support.dir/tests/support/testutil.c.o"
  "CMakeFiles/dtorch_test_support.dir/tests/support/testutil.c.o.d"
  "CMakeFiles/dtorch_test_support.dir/tests/support/threads.c.o"
  "CMakeFiles/dtorch_test_support.dir/tests/support/threads.c.o.d"
  "libdtorch_test_support.a"
  "libdtorch_test_support.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/dtorch_test_support.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
