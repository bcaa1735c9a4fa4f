# Empty compiler generated dependencies file for test_chaos.
# This may be replaced when dependencies are built.
