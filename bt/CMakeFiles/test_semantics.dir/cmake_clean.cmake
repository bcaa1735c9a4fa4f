file(REMOVE_RECURSE
  "CMakeFiles/test_semantics.dir/tests/test_semantics.c.o"
  "CMakeFiles/test_semantics.dir/tests/test_semantics.c.o.d"
  "test_semantics"
  "test_semantics.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_semantics.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
