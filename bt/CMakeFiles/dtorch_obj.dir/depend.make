# Empty dependencies file for dtorch_obj.
# This may be replaced when dependencies are built.
