file(REMOVE_RECURSE
  "CMakeFiles/test_chaos.dir/tests/test_chaos.c.o"
  "CMakeFiles/test_chaos.dir/tests/test_chaos.c.o.d"
  "test_chaos"
  "test_chaos.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_chaos.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
