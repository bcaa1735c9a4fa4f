# Empty compiler generated dependencies file for test_uring.
# This may be replaced when dependencies are built.
