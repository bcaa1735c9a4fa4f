file(REMOVE_RECURSE
  "CMakeFiles/example_ring_server.dir/examples/ring_server.c.o"
  "CMakeFiles/example_ring_server.dir/examples/ring_server.c.o.d"
  "example_ring_server"
  "example_ring_server.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/example_ring_server.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
