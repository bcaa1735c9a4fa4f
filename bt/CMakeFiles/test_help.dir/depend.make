# Empty dependencies file for test_help.
# This may be replaced when dependencies are built.
