file(REMOVE_RECURSE
  "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/coll.cu.o"
  "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/coll.cu.o.d"
  "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/elementwise.cu.o"
  "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/elementwise.cu.o.d"
  "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/random.cu.o"
  "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/random.cu.o.d"
  "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/rows.cu.o"
  "CMakeFiles/dtorch_cuda_obj.dir/kernels/cuda/rows.cu.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang CUDA)
  include(CMakeFiles/dtorch_cuda_obj.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
