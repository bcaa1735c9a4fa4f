# Empty dependencies file for dtorch_static.
# This may be replaced when dependencies are built.
