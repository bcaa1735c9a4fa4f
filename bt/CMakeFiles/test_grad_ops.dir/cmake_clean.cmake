file(REMOVE_RECURSE
  "CMakeFiles/test_grad_ops.dir/tests/test_grad_ops.c.o"
  "CMakeFiles/test_grad_ops.dir/tests/test_grad_ops.c.o.d"
  "test_grad_ops"
  "test_grad_ops.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_grad_ops.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
