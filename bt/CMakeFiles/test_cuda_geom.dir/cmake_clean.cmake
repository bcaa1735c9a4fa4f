file(REMOVE_RECURSE
  "CMakeFiles/test_cuda_geom.dir/tests/test_cuda_geom.c.o"
  "CMakeFiles/test_cuda_geom.dir/tests/test_cuda_geom.c.o.d"
  "test_cuda_geom"
  "test_cuda_geom.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_cuda_geom.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
