# Empty compiler generated dependencies file for dtorch_cli.
# This may be replaced when dependencies are built.
