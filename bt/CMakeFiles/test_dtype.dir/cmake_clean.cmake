file(REMOVE_RECURSE
  "CMakeFiles/test_dtype.dir/tests/test_dtype.c.o"
  "CMakeFiles/test_dtype.dir/tests/test_dtype.c.o.d"
  "test_dtype"
  "test_dtype.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_dtype.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
