# Empty compiler generated dependencies file for example_quickstart.
# This may be replaced when dependencies are built.
