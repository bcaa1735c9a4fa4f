file(REMOVE_RECURSE
  "CMakeFiles/test_transpose.dir/tests/test_transpose.c.o"
  "CMakeFiles/test_transpose.dir/tests/test_transpose.c.o.d"
  "test_transpose"
  "test_transpose.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_transpose.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
