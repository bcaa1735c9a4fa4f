# Empty compiler generated dependencies file for test_collectives.
# This may be replaced when dependencies are built.
