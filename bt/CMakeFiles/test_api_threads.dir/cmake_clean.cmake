file(REMOVE_RECURSE
  "CMakeFiles/test_api_threads.dir/tests/test_api_threads.c.o"
  "CMakeFiles/test_api_threads.dir/tests/test_api_threads.c.o.d"
  "test_api_threads"
  "test_api_threads.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_api_threads.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
