file(REMOVE_RECURSE
  "CMakeFiles/example_train_tp.dir/examples/train_tp.c.o"
  "CMakeFiles/example_train_tp.dir/examples/train_tp.c.o.d"
  "example_train_tp"
  "example_train_tp.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/example_train_tp.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
