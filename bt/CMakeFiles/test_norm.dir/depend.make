# Empty dependencies file for test_norm.
# This may be replaced when dependencies are built.
