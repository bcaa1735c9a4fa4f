"""The optional C extension dtorch._C (python/dtorch/_C.c): pip builds it
when a C compiler and Python's headers are there; where it cannot, the
package installs without it and runs on its ctypes binding (dtorch._lib
says which: BINDING). It links to nothing: the library's functions come
from the ctypes-loaded libdtorch at import. The rest of the project's
metadata is pyproject.toml's."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("dtorch._C", ["dtorch/_C.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c11"])])
