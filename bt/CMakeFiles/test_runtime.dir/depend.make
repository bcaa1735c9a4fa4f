# Empty dependencies file for test_runtime.
# This may be replaced when dependencies are built.
