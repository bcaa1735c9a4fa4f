file(REMOVE_RECURSE
  "CMakeFiles/test_queue.dir/tests/test_queue.c.o"
  "CMakeFiles/test_queue.dir/tests/test_queue.c.o.d"
  "test_queue"
  "test_queue.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_queue.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
