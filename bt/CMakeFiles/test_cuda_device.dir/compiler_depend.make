# Empty compiler generated dependencies file for test_cuda_device.
# This may be replaced when dependencies are built.
