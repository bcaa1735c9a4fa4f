file(REMOVE_RECURSE
  "CMakeFiles/test_unary.dir/tests/test_unary.c.o"
  "CMakeFiles/test_unary.dir/tests/test_unary.c.o.d"
  "test_unary"
  "test_unary.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_unary.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
