file(REMOVE_RECURSE
  "CMakeFiles/test_pointwise.dir/tests/test_pointwise.c.o"
  "CMakeFiles/test_pointwise.dir/tests/test_pointwise.c.o.d"
  "test_pointwise"
  "test_pointwise.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_pointwise.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
