"""A Python scalar's kind decides the dtype as in PyTorch: every operator
(+ - * / // % ** and the reflected forms, == != < <= > >=, clamp) on every
tensor dtype with int, float and bool scalars (negative, 0, large, NaN,
inf) and 0-d torch tensors, against real torch on the same values: the
same dtype and values, or an error where torch raises one. Then DTensors
(Replicate, Shard) and the errors dtorch adds (integers a double cannot
hold)."""
import math
import operator

import pytest
import torch

import dtorch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int32, torch.int64, torch.uint8, torch.bool]

SCALARS = [2, -3, 0, 1, True, False, 2.0, 0.5, -1.5, 0.0, math.nan, math.inf,
           -math.inf, 2**31, 2**40, 2**53, -2**63,
           torch.tensor(1.5, dtype=torch.float64), torch.tensor(2),
           torch.tensor(True), torch.tensor(3, dtype=torch.uint8),
           torch.tensor(0.25, dtype=torch.float16)]

OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv,
    "mod": operator.mod, "pow": operator.pow,
    "radd": lambda a, s: s + a, "rsub": lambda a, s: s - a,
    "rmul": lambda a, s: s * a, "rtruediv": lambda a, s: s / a,
    "rfloordiv": lambda a, s: s // a, "rmod": lambda a, s: s % a,
    "rpow": lambda a, s: s ** a,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
    "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "clamp_min": lambda a, s: a.clamp(min=s),
    "clamp_max": lambda a, s: a.clamp(max=s),
}


def _values(dtype):
    if dtype == torch.bool:
        return torch.tensor([True, False, True, True])
    if dtype == torch.uint8:
        return torch.tensor([3, 0, 1, 200], dtype=dtype)
    return torch.tensor([3, 0, 1, -2]).to(dtype)


def _reflected_tensor_scalar(name, s):
    # torch's reflected operators on a 0-d tensor left operand are that
    # tensor's own operators (tensor-tensor), not a scalar's
    return name.startswith("r") and isinstance(s, torch.Tensor)


def _torch(fn, t, s):
    try:
        return fn(t, s), None
    except (RuntimeError, TypeError, ValueError, ZeroDivisionError,
            NotImplementedError, OverflowError) as e:
        return None, e


def _check(name, dtype, s, got_fn):
    want, err = _torch(OPS[name], _values(dtype), s)
    if err is not None:
        # an integer division by a tensor holding 0 fails at the fetch
        # (dtorch.h: the ranks find it), as an error all the same
        with pytest.raises((dtorch.DTorchError, ValueError, TypeError)):
            got_fn().to_torch()
        return
    got = got_fn()
    assert got.dtype == want.dtype, (name, dtype, s)
    g = got.to_torch()
    if want.dtype.is_floating_point:
        torch.testing.assert_close(g, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    else:
        assert g.tolist() == want.tolist(), (name, dtype, s)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_operator_dtype_and_values_match_torch(name, dtype):
    for s in SCALARS:
        if _reflected_tensor_scalar(name, s):
            continue
        a = dtorch.tensor(_values(dtype))
        _check(name, dtype, s, lambda: OPS[name](a, s))


@pytest.mark.parametrize("placement", ["replicate", "shard"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.uint8, torch.bool], ids=str)
def test_dtensor_operators_match_torch(placement, dtype):
    mesh = dtorch.init_device_mesh("cpu", 2)
    pl = [dtorch.Replicate() if placement == "replicate" else dtorch.Shard(0)]
    for name in ["add", "mul", "truediv", "floordiv", "pow", "rsub", "lt",
                 "eq", "clamp_min"]:
        for s in [2, 2.0, True, -1.5, 2**40]:
            a = dtorch.Tensor(_values(dtype), device_mesh=mesh, placements=pl)
            want, err = _torch(OPS[name], _values(dtype), s)
            if err is not None:
                with pytest.raises((dtorch.DTorchError, ValueError, TypeError)):
                    OPS[name](a, s)
                continue
            got = OPS[name](a, s)
            assert got.dtype == want.dtype, (name, dtype, s)
            assert got.placements == a.placements
            torch.testing.assert_close(got.to_torch(), want, equal_nan=True)


def test_the_kind_not_the_value_decides():
    i = dtorch.tensor(torch.tensor([1, 2], dtype=torch.int32))
    assert (i + 1).dtype == torch.int32
    assert (i + 1.0).dtype == torch.float32
    assert (i + True).dtype == torch.int32
    b = dtorch.tensor(torch.tensor([True, False]))
    assert (b + 1).dtype == torch.int64
    assert (b + True).dtype == torch.bool
    assert (b * 1.0).dtype == torch.float32
    # alternating kinds on the same tensor: each call its own dtype
    for _ in range(3):
        assert (i * 2).dtype == torch.int32
        assert (i * 2.0).dtype == torch.float32


def test_int32_overflow_wraps_as_torch():
    t = torch.tensor([1, 0], dtype=torch.int32)
    a = dtorch.tensor(t)
    assert (a + 2**40).tolist() == (t + 2**40).tolist() == [1, 0]
    assert (a + 2**32 + 5).tolist() == (t + 2**32 + 5).tolist()
    # 2**32 converts to 0 in int32: a division by zero in both
    with pytest.raises(RuntimeError):
        t // 2**32
    with pytest.raises(dtorch.InvalidArgumentError, match="division by zero"):
        a // 2**32


def test_errors_for_integers_a_double_cannot_hold():
    a = dtorch.tensor(torch.tensor([1], dtype=torch.int64))
    with pytest.raises(ValueError, match=r"add: the integer scalar 9007199254740993 "
                                         r"is not exactly a double"):
        a + (2**53 + 1)
    with pytest.raises(ValueError, match=r"mul: the integer scalar 18446744073709551616 "
                                         r"does not fit int64"):
        a * 2**64
    with pytest.raises((RuntimeError, OverflowError)):
        torch.tensor([1]) * 2**64
    # 2**63 is no int64 either: dtorch refuses it (torch wraps this one)
    with pytest.raises(ValueError, match=r"add: the integer scalar 9223372036854775808 "
                                         r"does not fit int64"):
        a + 2**63
    # the C library's own check, for a caller passing the double itself
    from dtorch import _scalar
    with pytest.raises(dtorch.InvalidArgumentError,
                       match=r"dt_add_scalar_typed: scalar 9.2233720368547758e\+18 is "
                             r"of kind DT_SCALAR_INT but is not an integer in"):
        dtorch._tensor._wrap(_scalar.typed("add")(a._h, 2.0**63, _scalar.INT))


def test_clamp_needs_a_bound():
    a = dtorch.tensor(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="clamp: at least one of min and max"):
        a.clamp()
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).clamp()
