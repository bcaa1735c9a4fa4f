# Empty compiler generated dependencies file for test_vmath.
# This may be replaced when dependencies are built.
