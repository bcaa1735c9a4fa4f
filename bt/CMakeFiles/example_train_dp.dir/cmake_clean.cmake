file(REMOVE_RECURSE
  "CMakeFiles/example_train_dp.dir/examples/train_dp.c.o"
  "CMakeFiles/example_train_dp.dir/examples/train_dp.c.o.d"
  "example_train_dp"
  "example_train_dp.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/example_train_dp.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
