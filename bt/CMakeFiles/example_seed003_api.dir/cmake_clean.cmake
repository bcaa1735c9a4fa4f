file(REMOVE_RECURSE
  "CMakeFiles/example_seed003_api.dir/examples/seed003_api.c.o"
  "CMakeFiles/example_seed003_api.dir/examples/seed003_api.c.o.d"
  "example_seed003_api"
  "example_seed003_api.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/example_seed003_api.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
