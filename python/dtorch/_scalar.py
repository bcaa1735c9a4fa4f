"""A Python scalar's kind, as PyTorch decides a tensor-scalar op's dtype
by it: an int keeps an integer tensor's dtype (int32 + 1 is int32), a
float makes it float32 (int32 + 1.0), a bool keeps every dtype (bool +
True is bool). The C library takes scalars as doubles, which cannot tell
1 from 1.0, so the operators pass the kind to the dt_*_scalar_typed
functions (include/dtorch/dtorch.h) declared here."""
import numbers

import torch

from . import _lib

# dt_scalar_kind
AUTO, INT, FLOAT, BOOL = (_lib.E["DT_SCALAR_" + n] for n in ("AUTO", "INT", "FLOAT", "BOOL"))

SCALAR_OPS = ["add", "sub", "mul", "div", "pow", "floor_divide", "remainder"]
for _n in SCALAR_OPS:
    _lib._decl(f"dt_{_n}_scalar_typed", _lib.P, _lib.P, _lib.D, _lib.I)
_lib._decl("dt_clamp_typed", _lib.P, _lib.P, _lib.D, _lib.I, _lib.D, _lib.I)
_typed = {n: getattr(_lib, f"dt_{n}_scalar_typed") for n in SCALAR_OPS}
dt_clamp_typed = _lib.dt_clamp_typed


def typed(name):
    """dt_<name>_scalar_typed(handle, value, kind)."""
    return _typed[name]


def _is_bool(x):
    # numpy's bool_ is no numbers.Number
    return isinstance(x, bool) or type(x).__name__ == "bool_"


def is_scalar(x):
    """A Python (or numpy) int, float or bool, or a 0-d torch.Tensor of a
    real dtype: what PyTorch's operators take as a scalar operand."""
    if isinstance(x, torch.Tensor):
        return x.ndim == 0 and not x.is_complex()
    return _is_bool(x) or isinstance(x, numbers.Real)


def _kind_of_dtype(d):
    if d == torch.bool:
        return BOOL
    return FLOAT if d.is_floating_point else INT


def kind_and_value(x, where="dtorch"):
    """(dt_scalar_kind, value as a double) of a scalar operand. An int that
    a double does not hold exactly (past 2**53) is refused: the C API takes
    scalars as doubles."""
    if isinstance(x, torch.Tensor):
        return _kind_of_dtype(x.dtype), float(x.item())
    if _is_bool(x):
        return BOOL, float(bool(x))
    if isinstance(x, numbers.Integral):
        i = int(x)
        if not -2**63 <= i < 2**63:
            raise ValueError(f"{where}: the integer scalar {i} does not fit "
                             "int64 (PyTorch: Overflow when unpacking long)")
        if float(i) != i:
            raise ValueError(f"{where}: the integer scalar {i} is not exactly a "
                             "double (past 2**53); dtorch's C API takes scalars "
                             "as doubles: use a tensor operand")
        return INT, float(i)
    return FLOAT, float(x)


def result_dtype(dtype, x):
    """torch.result_type of a tensor of `dtype` (with dims) and scalar x:
    PyTorch's own rule, for a Python scalar (a wrapped number) and for a
    0-d tensor (whose dtype counts where its category is higher)."""
    return torch.result_type(torch.empty((1,), dtype=dtype), x)


def kind_dtype(dtype, kind):
    """The dtype the C library gives tensor ⊕ scalar of this kind
    (core_result_type_kind): the rule result_dtype follows for Python
    scalars."""
    if dtype.is_floating_point or kind == BOOL:
        return dtype
    if kind == INT:
        return torch.int64 if dtype == torch.bool else dtype
    return torch.float32


def wrap_int(v, dtype):
    """An integral value as PyTorch converts a Python int to an int32 /
    uint8 tensor's dtype: modulo 2**32 / 2**8 (int32 + 2**32 adds 0)."""
    if dtype == torch.uint8:
        return float(int(v) % 256)
    if dtype == torch.int32:
        i = int(v) % 2**32
        return float(i - 2**32 if i >= 2**31 else i)
    return v
