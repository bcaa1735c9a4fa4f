file(REMOVE_RECURSE
  "CMakeFiles/test_help.dir/tests/test_help.c.o"
  "CMakeFiles/test_help.dir/tests/test_help.c.o.d"
  "test_help"
  "test_help.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_help.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
