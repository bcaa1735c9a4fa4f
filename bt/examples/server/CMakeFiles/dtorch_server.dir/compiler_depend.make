# Empty compiler generated dependencies file for dtorch_server.
# This may be replaced when dependencies are built.
