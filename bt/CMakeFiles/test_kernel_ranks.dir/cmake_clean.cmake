file(REMOVE_RECURSE
  "CMakeFiles/test_kernel_ranks.dir/tests/test_kernel_ranks.c.o"
  "CMakeFiles/test_kernel_ranks.dir/tests/test_kernel_ranks.c.o.d"
  "test_kernel_ranks"
  "test_kernel_ranks.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_kernel_ranks.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
