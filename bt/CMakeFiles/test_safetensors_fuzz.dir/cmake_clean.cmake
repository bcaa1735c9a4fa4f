file(REMOVE_RECURSE
  "CMakeFiles/test_safetensors_fuzz.dir/tests/test_safetensors_fuzz.c.o"
  "CMakeFiles/test_safetensors_fuzz.dir/tests/test_safetensors_fuzz.c.o.d"
  "test_safetensors_fuzz"
  "test_safetensors_fuzz.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_safetensors_fuzz.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
