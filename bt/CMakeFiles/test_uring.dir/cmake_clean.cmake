file(REMOVE_RECURSE
  "CMakeFiles/test_uring.dir/tests/test_uring.c.o"
  "CMakeFiles/test_uring.dir/tests/test_uring.c.o.d"
  "test_uring"
  "test_uring.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_uring.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
