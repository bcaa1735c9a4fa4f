# Empty compiler generated dependencies file for example_spmd_tp.
# This may be replaced when dependencies are built.
