file(REMOVE_RECURSE
  "CMakeFiles/test_linalg.dir/tests/test_linalg.c.o"
  "CMakeFiles/test_linalg.dir/tests/test_linalg.c.o.d"
  "test_linalg"
  "test_linalg.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_linalg.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
