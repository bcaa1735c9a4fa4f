# Empty compiler generated dependencies file for test_unary.
# This may be replaced when dependencies are built.
