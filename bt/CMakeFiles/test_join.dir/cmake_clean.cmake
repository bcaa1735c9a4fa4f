file(REMOVE_RECURSE
  "CMakeFiles/test_join.dir/tests/test_join.c.o"
  "CMakeFiles/test_join.dir/tests/test_join.c.o.d"
  "test_join"
  "test_join.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_join.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
