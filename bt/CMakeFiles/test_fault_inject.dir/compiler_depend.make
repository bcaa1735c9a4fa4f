# Empty compiler generated dependencies file for test_fault_inject.
# This may be replaced when dependencies are built.
