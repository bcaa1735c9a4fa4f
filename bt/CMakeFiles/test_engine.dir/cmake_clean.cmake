file(REMOVE_RECURSE
  "CMakeFiles/test_engine.dir/tests/test_engine.c.o"
  "CMakeFiles/test_engine.dir/tests/test_engine.c.o.d"
  "test_engine"
  "test_engine.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_engine.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
