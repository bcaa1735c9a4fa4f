"""How the package finds libdtorch: DTORCH_LIBRARY first, and a clear
ImportError naming it when the library is not there."""
import os
import subprocess
import sys


def test_dtorch_library_is_used():
    import dtorch
    want = os.environ.get("DTORCH_LIBRARY")
    if want:
        assert dtorch._lib.path == want


def test_missing_library_is_a_clear_import_error():
    env = dict(os.environ, DTORCH_LIBRARY="/nonexistent/libdtorch.so.1")
    r = subprocess.run([sys.executable, "-c", "import dtorch"], env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "DTORCH_LIBRARY" in r.stderr
    assert "/nonexistent/libdtorch.so.1" in r.stderr
