file(REMOVE_RECURSE
  "CMakeFiles/test_comm_debug.dir/tests/test_comm_debug.c.o"
  "CMakeFiles/test_comm_debug.dir/tests/test_comm_debug.c.o.d"
  "test_comm_debug"
  "test_comm_debug.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_comm_debug.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
