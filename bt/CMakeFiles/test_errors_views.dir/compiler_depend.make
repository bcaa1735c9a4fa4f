# Empty compiler generated dependencies file for test_errors_views.
# This may be replaced when dependencies are built.
