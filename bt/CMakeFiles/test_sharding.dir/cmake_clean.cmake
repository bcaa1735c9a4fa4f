file(REMOVE_RECURSE
  "CMakeFiles/test_sharding.dir/tests/test_sharding.c.o"
  "CMakeFiles/test_sharding.dir/tests/test_sharding.c.o.d"
  "test_sharding"
  "test_sharding.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_sharding.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
