# Empty compiler generated dependencies file for test_cuda_ops.
# This may be replaced when dependencies are built.
