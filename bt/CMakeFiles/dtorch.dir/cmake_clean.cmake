file(REMOVE_RECURSE
  "libdtorch.pdb"
  "libdtorch.so"
  "libdtorch.so.0"
  "libdtorch.so.0.1.0"
)

# Per-language clean rules from dependency scanning.
foreach(lang C CUDA)
  include(CMakeFiles/dtorch.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
