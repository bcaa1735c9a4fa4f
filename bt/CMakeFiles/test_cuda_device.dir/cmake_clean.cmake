file(REMOVE_RECURSE
  "CMakeFiles/test_cuda_device.dir/tests/test_cuda_device.c.o"
  "CMakeFiles/test_cuda_device.dir/tests/test_cuda_device.c.o.d"
  "test_cuda_device"
  "test_cuda_device.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_cuda_device.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
