file(REMOVE_RECURSE
  "CMakeFiles/test_creation.dir/tests/test_creation.c.o"
  "CMakeFiles/test_creation.dir/tests/test_creation.c.o.d"
  "test_creation"
  "test_creation.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_creation.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
