# Empty dependencies file for dtorch.
# This may be replaced when dependencies are built.
