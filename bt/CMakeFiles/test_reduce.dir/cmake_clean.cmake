file(REMOVE_RECURSE
  "CMakeFiles/test_reduce.dir/tests/test_reduce.c.o"
  "CMakeFiles/test_reduce.dir/tests/test_reduce.c.o.d"
  "test_reduce"
  "test_reduce.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_reduce.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
