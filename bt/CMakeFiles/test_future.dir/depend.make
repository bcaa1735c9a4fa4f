# Empty dependencies file for test_future.
# This may be replaced when dependencies are built.
