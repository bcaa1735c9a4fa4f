# Empty compiler generated dependencies file for test_sharding_props.
# This may be replaced when dependencies are built.
