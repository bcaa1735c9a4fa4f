# Empty compiler generated dependencies file for test_safetensors_fuzz.
# This may be replaced when dependencies are built.
