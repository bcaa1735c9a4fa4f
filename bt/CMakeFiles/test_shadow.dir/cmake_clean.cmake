file(REMOVE_RECURSE
  "CMakeFiles/test_shadow.dir/tests/test_shadow.c.o"
  "CMakeFiles/test_shadow.dir/tests/test_shadow.c.o.d"
  "test_shadow"
  "test_shadow.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_shadow.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
