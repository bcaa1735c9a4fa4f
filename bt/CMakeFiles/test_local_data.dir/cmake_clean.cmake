file(REMOVE_RECURSE
  "CMakeFiles/test_local_data.dir/tests/test_local_data.c.o"
  "CMakeFiles/test_local_data.dir/tests/test_local_data.c.o.d"
  "test_local_data"
  "test_local_data.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_local_data.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
