# Empty compiler generated dependencies file for example_seed003_api.
# This may be replaced when dependencies are built.
