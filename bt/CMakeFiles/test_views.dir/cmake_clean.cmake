file(REMOVE_RECURSE
  "CMakeFiles/test_views.dir/tests/test_views.c.o"
  "CMakeFiles/test_views.dir/tests/test_views.c.o.d"
  "test_views"
  "test_views.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_views.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
