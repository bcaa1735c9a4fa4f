# Empty compiler generated dependencies file for example_debug_tp.
# This may be replaced when dependencies are built.
