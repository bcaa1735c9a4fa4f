file(REMOVE_RECURSE
  "CMakeFiles/test_sharding_props.dir/tests/test_sharding_props.c.o"
  "CMakeFiles/test_sharding_props.dir/tests/test_sharding_props.c.o.d"
  "test_sharding_props"
  "test_sharding_props.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_sharding_props.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
