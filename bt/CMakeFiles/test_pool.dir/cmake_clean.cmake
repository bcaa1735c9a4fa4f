file(REMOVE_RECURSE
  "CMakeFiles/test_pool.dir/tests/test_pool.c.o"
  "CMakeFiles/test_pool.dir/tests/test_pool.c.o.d"
  "test_pool"
  "test_pool.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_pool.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
