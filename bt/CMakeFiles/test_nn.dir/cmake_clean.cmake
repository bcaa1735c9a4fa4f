file(REMOVE_RECURSE
  "CMakeFiles/test_nn.dir/tests/test_nn.c.o"
  "CMakeFiles/test_nn.dir/tests/test_nn.c.o.d"
  "test_nn"
  "test_nn.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_nn.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
