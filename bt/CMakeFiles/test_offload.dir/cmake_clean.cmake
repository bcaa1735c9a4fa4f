file(REMOVE_RECURSE
  "CMakeFiles/test_offload.dir/tests/test_offload.c.o"
  "CMakeFiles/test_offload.dir/tests/test_offload.c.o.d"
  "test_offload"
  "test_offload.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_offload.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
