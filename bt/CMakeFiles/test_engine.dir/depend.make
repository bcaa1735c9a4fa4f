# Empty dependencies file for test_engine.
# This may be replaced when dependencies are built.
