# Empty compiler generated dependencies file for test_sharding.
# This may be replaced when dependencies are built.
