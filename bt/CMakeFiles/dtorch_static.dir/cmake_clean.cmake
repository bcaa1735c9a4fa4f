file(REMOVE_RECURSE
  "libdtorch.a"
  "libdtorch.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C CUDA)
  include(CMakeFiles/dtorch_static.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
