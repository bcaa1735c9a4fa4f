# Empty compiler generated dependencies file for test_comm_debug.
# This may be replaced when dependencies are built.
