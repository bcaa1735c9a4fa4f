file(REMOVE_RECURSE
  "CMakeFiles/test_future.dir/tests/test_future.c.o"
  "CMakeFiles/test_future.dir/tests/test_future.c.o.d"
  "test_future"
  "test_future.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_future.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
