file(REMOVE_RECURSE
  "CMakeFiles/test_norm.dir/tests/test_norm.c.o"
  "CMakeFiles/test_norm.dir/tests/test_norm.c.o.d"
  "test_norm"
  "test_norm.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_norm.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
