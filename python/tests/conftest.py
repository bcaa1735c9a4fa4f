"""The tests' environment: "cuda" meshes and devices in the tests run on
the CPU ranks of a machine without a GPU, as single-GPU emulation asked
for (DTORCH_DTENSOR_IN_SAME_DEVICE=1; without it a "cuda" request there
fails: test_binding_safety.py checks that). Set before dtorch is imported."""
import os

os.environ.setdefault("DTORCH_DTENSOR_IN_SAME_DEVICE", "1")
