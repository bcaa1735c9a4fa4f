file(REMOVE_RECURSE
  "CMakeFiles/test_errors_views.dir/tests/test_errors_views.c.o"
  "CMakeFiles/test_errors_views.dir/tests/test_errors_views.c.o.d"
  "test_errors_views"
  "test_errors_views.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_errors_views.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
