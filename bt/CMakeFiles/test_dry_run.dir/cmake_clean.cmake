file(REMOVE_RECURSE
  "CMakeFiles/test_dry_run.dir/tests/test_dry_run.c.o"
  "CMakeFiles/test_dry_run.dir/tests/test_dry_run.c.o.d"
  "test_dry_run"
  "test_dry_run.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_dry_run.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
