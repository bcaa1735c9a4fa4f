file(REMOVE_RECURSE
  "CMakeFiles/test_cuda_ops.dir/tests/test_cuda_ops.c.o"
  "CMakeFiles/test_cuda_ops.dir/tests/test_cuda_ops.c.o.d"
  "test_cuda_ops"
  "test_cuda_ops.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_cuda_ops.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
