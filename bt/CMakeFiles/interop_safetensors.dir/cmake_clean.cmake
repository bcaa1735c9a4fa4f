file(REMOVE_RECURSE
  "CMakeFiles/interop_safetensors.dir/tests/interop_safetensors.c.o"
  "CMakeFiles/interop_safetensors.dir/tests/interop_safetensors.c.o.d"
  "interop_safetensors"
  "interop_safetensors.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/interop_safetensors.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
