file(REMOVE_RECURSE
  "CMakeFiles/test_deque.dir/tests/test_deque.c.o"
  "CMakeFiles/test_deque.dir/tests/test_deque.c.o.d"
  "test_deque"
  "test_deque.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_deque.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
