# Empty dependencies file for example_ring_server.
# This may be replaced when dependencies are built.
