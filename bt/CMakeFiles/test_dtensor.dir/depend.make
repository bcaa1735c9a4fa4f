# Empty dependencies file for test_dtensor.
# This may be replaced when dependencies are built.
