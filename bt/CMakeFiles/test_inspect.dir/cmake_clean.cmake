file(REMOVE_RECURSE
  "CMakeFiles/test_inspect.dir/tests/test_inspect.c.o"
  "CMakeFiles/test_inspect.dir/tests/test_inspect.c.o.d"
  "test_inspect"
  "test_inspect.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_inspect.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
