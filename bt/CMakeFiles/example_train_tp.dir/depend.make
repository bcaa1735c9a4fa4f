# Empty dependencies file for example_train_tp.
# This may be replaced when dependencies are built.
