# Empty compiler generated dependencies file for dtorch_cuda_obj.
# This may be replaced when dependencies are built.
