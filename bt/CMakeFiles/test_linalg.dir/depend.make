# Empty dependencies file for test_linalg.
# This may be replaced when dependencies are built.
