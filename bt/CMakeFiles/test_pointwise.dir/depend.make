# Empty dependencies file for test_pointwise.
# This may be replaced when dependencies are built.
