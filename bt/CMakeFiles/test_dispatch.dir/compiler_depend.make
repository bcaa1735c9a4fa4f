# Empty compiler generated dependencies file for test_dispatch.
# This may be replaced when dependencies are built.
