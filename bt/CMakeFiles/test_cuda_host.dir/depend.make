# Empty dependencies file for test_cuda_host.
# This may be replaced when dependencies are built.
