# Empty compiler generated dependencies file for dtorch_test_support.
# This may be replaced when dependencies are built.
