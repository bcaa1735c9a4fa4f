# Empty compiler generated dependencies file for test_shadow.
# This may be replaced when dependencies are built.
