# Empty dependencies file for test_grad_ops.
# This may be replaced when dependencies are built.
