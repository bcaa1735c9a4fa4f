# Empty compiler generated dependencies file for test_api_threads.
# This may be replaced when dependencies are built.
