file(REMOVE_RECURSE
  "CMakeFiles/example_debug_tp.dir/examples/debug_tp.c.o"
  "CMakeFiles/example_debug_tp.dir/examples/debug_tp.c.o.d"
  "example_debug_tp"
  "example_debug_tp.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/example_debug_tp.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
