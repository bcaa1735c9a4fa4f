# Empty compiler generated dependencies file for test_transpose.
# This may be replaced when dependencies are built.
