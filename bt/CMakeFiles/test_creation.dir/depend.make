# Empty dependencies file for test_creation.
# This may be replaced when dependencies are built.
