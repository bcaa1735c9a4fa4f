# Empty compiler generated dependencies file for test_deque.
# This may be replaced when dependencies are built.
