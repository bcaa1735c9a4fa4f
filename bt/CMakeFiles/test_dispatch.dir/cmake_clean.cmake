file(REMOVE_RECURSE
  "CMakeFiles/test_dispatch.dir/tests/test_dispatch.c.o"
  "CMakeFiles/test_dispatch.dir/tests/test_dispatch.c.o.d"
  "test_dispatch"
  "test_dispatch.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_dispatch.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
