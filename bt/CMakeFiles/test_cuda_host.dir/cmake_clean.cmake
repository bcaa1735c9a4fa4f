file(REMOVE_RECURSE
  "CMakeFiles/test_cuda_host.dir/tests/test_cuda_host.c.o"
  "CMakeFiles/test_cuda_host.dir/tests/test_cuda_host.c.o.d"
  "test_cuda_host"
  "test_cuda_host.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_cuda_host.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
