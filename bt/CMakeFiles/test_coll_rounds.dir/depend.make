# Empty dependencies file for test_coll_rounds.
# This may be replaced when dependencies are built.
