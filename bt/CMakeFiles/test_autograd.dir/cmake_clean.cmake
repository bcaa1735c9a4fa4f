file(REMOVE_RECURSE
  "CMakeFiles/test_autograd.dir/tests/test_autograd.c.o"
  "CMakeFiles/test_autograd.dir/tests/test_autograd.c.o.d"
  "test_autograd"
  "test_autograd.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_autograd.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
