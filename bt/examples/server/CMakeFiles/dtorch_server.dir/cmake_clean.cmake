file(REMOVE_RECURSE
  "CMakeFiles/dtorch_server.dir/server.c.o"
  "CMakeFiles/dtorch_server.dir/server.c.o.d"
  "dtorch_server"
  "dtorch_server.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/dtorch_server.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
