# Empty compiler generated dependencies file for test_inspect.
# This may be replaced when dependencies are built.
