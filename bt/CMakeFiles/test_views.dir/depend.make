# Empty dependencies file for test_views.
# This may be replaced when dependencies are built.
