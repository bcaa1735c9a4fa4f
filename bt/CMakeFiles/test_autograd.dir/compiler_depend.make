# Empty compiler generated dependencies file for test_autograd.
# This may be replaced when dependencies are built.
