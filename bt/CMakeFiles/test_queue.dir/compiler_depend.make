# Empty compiler generated dependencies file for test_queue.
# This may be replaced when dependencies are built.
