file(REMOVE_RECURSE
  "CMakeFiles/example_spmd_tp.dir/examples/spmd_tp.c.o"
  "CMakeFiles/example_spmd_tp.dir/examples/spmd_tp.c.o.d"
  "example_spmd_tp"
  "example_spmd_tp.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/example_spmd_tp.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
