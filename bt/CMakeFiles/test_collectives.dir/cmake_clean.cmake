file(REMOVE_RECURSE
  "CMakeFiles/test_collectives.dir/tests/test_collectives.c.o"
  "CMakeFiles/test_collectives.dir/tests/test_collectives.c.o.d"
  "test_collectives"
  "test_collectives.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_collectives.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
