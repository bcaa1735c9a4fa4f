# Empty dependencies file for example_train_dp.
# This may be replaced when dependencies are built.
