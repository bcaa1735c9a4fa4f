file(REMOVE_RECURSE
  "CMakeFiles/example_quickstart.dir/examples/quickstart.c.o"
  "CMakeFiles/example_quickstart.dir/examples/quickstart.c.o.d"
  "example_quickstart"
  "example_quickstart.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/example_quickstart.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
