# Empty dependencies file for test_kernel_ranks.
# This may be replaced when dependencies are built.
