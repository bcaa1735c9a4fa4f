# Empty dependencies file for test_semantics.
# This may be replaced when dependencies are built.
