file(REMOVE_RECURSE
  "CMakeFiles/test_queue_depth.dir/tests/test_queue_depth.c.o"
  "CMakeFiles/test_queue_depth.dir/tests/test_queue_depth.c.o.d"
  "test_queue_depth"
  "test_queue_depth.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_queue_depth.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
