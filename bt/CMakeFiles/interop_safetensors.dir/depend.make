# Empty dependencies file for interop_safetensors.
# This may be replaced when dependencies are built.
