file(REMOVE_RECURSE
  "CMakeFiles/test_vmath.dir/tests/test_vmath.c.o"
  "CMakeFiles/test_vmath.dir/tests/test_vmath.c.o.d"
  "test_vmath"
  "test_vmath.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_vmath.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
