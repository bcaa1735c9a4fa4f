file(REMOVE_RECURSE
  "CMakeFiles/test_spmd.dir/tests/test_spmd.c.o"
  "CMakeFiles/test_spmd.dir/tests/test_spmd.c.o.d"
  "test_spmd"
  "test_spmd.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_spmd.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
