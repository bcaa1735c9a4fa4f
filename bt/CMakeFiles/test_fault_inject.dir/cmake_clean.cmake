file(REMOVE_RECURSE
  "CMakeFiles/test_fault_inject.dir/tests/test_fault_inject.c.o"
  "CMakeFiles/test_fault_inject.dir/tests/test_fault_inject.c.o.d"
  "test_fault_inject"
  "test_fault_inject.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_fault_inject.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
