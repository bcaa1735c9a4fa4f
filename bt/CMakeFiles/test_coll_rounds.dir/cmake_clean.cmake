file(REMOVE_RECURSE
  "CMakeFiles/test_coll_rounds.dir/tests/test_coll_rounds.c.o"
  "CMakeFiles/test_coll_rounds.dir/tests/test_coll_rounds.c.o.d"
  "test_coll_rounds"
  "test_coll_rounds.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_coll_rounds.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
