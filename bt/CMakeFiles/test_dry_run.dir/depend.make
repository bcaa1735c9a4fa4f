# Empty dependencies file for test_dry_run.
# This may be replaced when dependencies are built.
