# Empty dependencies file for test_cuda_geom.
# This may be replaced when dependencies are built.
