# Empty dependencies file for test_local_data.
# This may be replaced when dependencies are built.
