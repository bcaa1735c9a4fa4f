# Empty compiler generated dependencies file for test_queue_depth.
# This may be replaced when dependencies are built.
