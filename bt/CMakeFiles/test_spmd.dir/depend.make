# Empty dependencies file for test_spmd.
# This may be replaced when dependencies are built.
