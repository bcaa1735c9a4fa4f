"""The Python binding's safety: no environment variable written at
import, "cuda" without a GPU refused (unless emulation is asked for),
errors named after the Python function, integers never truncated, views
readable after their runtime is destroyed, no handle of a temporary
passed (`(a * b)._h`), and the C extension and the ctypes path alike."""
import gc
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch

import dtorch
from dtorch import _interop, _lib
from dtorch.distributed_spec import Replicate, Shard, init_device_mesh

PKG = pathlib.Path(dtorch.__file__).resolve().parent


def _run(code, **env):
    """code in a fresh interpreter (the import under test), its stdout."""
    e = dict(os.environ, **env)
    e["PYTHONPATH"] = os.pathsep.join([str(PKG.parent)] + e.get("PYTHONPATH", "").split(os.pathsep))
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


# ---- the environment
def test_import_changes_no_environment_variable():
    code = ("import os; before = dict(os.environ); import dtorch, dtorch.nn, "
            "dtorch.distributed; dtorch.zeros(2) + 1; print(dict(os.environ) == before, "
            "'DTORCH_NUM_RANKS' in os.environ, dtorch.Runtime.current().num_ranks)")
    assert _run(code, DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE="4") == "True False 4"
    # DTORCH_NUM_RANKS wins, as the runtime's own rule says
    assert _run(code, DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE="4",
                DTORCH_NUM_RANKS="2") == "True True 2"


def test_emulated_device_count_must_be_a_number():
    e = dict(os.environ, DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE="four",
             PYTHONPATH=str(PKG.parent))
    e.pop("DTORCH_NUM_RANKS", None)
    r = subprocess.run([sys.executable, "-c", "import dtorch"], env=e, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0
    assert "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE='four' is not a number" in r.stderr


# ---- "cuda" without a GPU
def test_cuda_without_gpu_names_the_device(monkeypatch):
    monkeypatch.delenv("DTORCH_DTENSOR_IN_SAME_DEVICE", raising=False)
    with pytest.raises(dtorch.DTorchError, match=r"^zeros: device 'cuda:1': the runtime has "
                       r"no CUDA ranks.*set DTORCH_DTENSOR_IN_SAME_DEVICE=1") as e:
        dtorch.zeros(2, device="cuda:1")
    assert e.value.status == "DT_ERR_DEVICE"
    with pytest.raises(dtorch.DTorchError, match=r"^init_device_mesh: device 'cuda'"):
        init_device_mesh("cuda", (2,))
    with pytest.raises(dtorch.DTorchError, match=r"^Tensor.__init__: device 'cuda'"):
        dtorch.Tensor(torch.ones(2), device="cuda")
    monkeypatch.setenv("DTORCH_DTENSOR_IN_SAME_DEVICE", "0")
    with pytest.raises(dtorch.DTorchError, match="device 'cuda'"):
        dtorch.ones(2, device="cuda")


def test_cuda_with_emulation_asked_runs_on_cpu_ranks(monkeypatch):
    monkeypatch.setenv("DTORCH_DTENSOR_IN_SAME_DEVICE", "true")
    t = dtorch.ones(3, device="cuda:1")
    assert t.tolist() == torch.ones(3).tolist()
    assert init_device_mesh("cuda", (2,)).device_type == "cuda"


# ---- error names
def test_errors_name_the_python_function():
    x, y = dtorch.ones(3), dtorch.ones(4)
    with pytest.raises(dtorch.InvalidArgumentError,
                       match=r"^Tensor.__add__: shapes \[3\] and \[4\] cannot be broadcast"
                             r".*\(dt_add\)$"):
        x + y
    with pytest.raises(torch.cat([torch.ones(3)]).new_empty(0).__class__ and
                       dtorch.InvalidArgumentError, match=r"^Tensor.__rsub__: .*\(dt_sub\)$"):
        torch.ones(3) - y
    with pytest.raises(dtorch.InvalidArgumentError, match=r"^Tensor.softmax: dim 5 .*\(dt_softmax\)$"):
        x.softmax(5)
    with pytest.raises(dtorch.InvalidArgumentError, match=r"^softmax: dim 5 .*\(dt_softmax\)$"):
        dtorch.softmax(x, 5)
    with pytest.raises(dtorch.InvalidArgumentError, match=r"^Tensor.view: .*\(dt_view\)$"):
        x.view(2, 2)
    with pytest.raises(dtorch.InvalidArgumentError, match=r"^Tensor.exp: |^Tensor.sum: "):
        x.sum(dim=3)
    # the same Python names as the torch functions'
    with pytest.raises(IndexError):
        torch.ones(3).softmax(5)
    with pytest.raises(dtorch.InvalidArgumentError, match=r"^cat: .*\(dt_cat\)$"):
        dtorch.cat([dtorch.ones(2, 3), dtorch.ones(2, 4)], 0)


# ---- integer ranges
@pytest.mark.parametrize("call, match", [
    (lambda x: x.softmax(2**32), r"^Tensor.softmax: dim=4294967296 is out of the range of the "
                                  r"C int32_t it is passed as \[-2147483648, 2147483647\]"),
    (lambda x: dtorch.softmax(x, -2**31 - 1), r"^softmax: dim=-2147483649 is out of the range"),
    (lambda x: x.sum(dim=2**33), r"^Tensor.sum: dim=8589934592 is out of the range"),
    (lambda x: x.transpose(0, 2**32), r"^Tensor.transpose: dim1=4294967296"),
    (lambda x: x.permute(1, 2**32), r"^Tensor.permute: dims=4294967296"),
    (lambda x: x.unsqueeze(2**40), r"^Tensor.unsqueeze: dim=1099511627776"),
    (lambda x: x.to_local(2**40), r"^Tensor.to_local: rank=1099511627776"),
    (lambda x: dtorch.zeros(2**64), r"^zeros: size=18446744073709551616 is out of the range "
                                    r"of the C int64_t"),
    (lambda x: dtorch.ones((2, 2**63)), r"^ones: size=9223372036854775808"),
    (lambda x: x.reshape(2**64, 1), r"^Tensor.reshape: size=18446744073709551616"),
    (lambda x: dtorch.Tensor(torch.ones(4), device_mesh=init_device_mesh("cpu", (2,)),
                             placements=[Shard(2**32)]), r"^Shard: dim=4294967296"),
    (lambda x: dtorch.DeviceMesh("cpu", [0, 2**32]), r"^DeviceMesh: mesh=4294967296"),
])
def test_integers_out_of_range_are_errors_not_truncated(call, match):
    x = dtorch.ones(4, 3)
    with pytest.raises(OverflowError, match=match):
        call(x)
    # what truncation would have given works: the value itself was refused
    assert x.softmax(0).shape == torch.Size([4, 3])


def test_in_range_integer_types_pass():
    x = dtorch.Tensor(torch.arange(12.0).reshape(3, 4))
    ref = torch.arange(12.0).reshape(3, 4)
    for d in (np.int64(1), np.int32(-1), torch.tensor(1).item(), True):
        assert torch.equal(x.softmax(d).to_torch(), ref.softmax(int(d)))
    assert dtorch.zeros(np.int64(3)).shape == torch.Size([3])
    with pytest.raises(OverflowError, match=r"Tensor.softmax: dim=4294967296"):
        x.softmax(np.int64(2**32))
    with pytest.raises(TypeError, match=r"^Tensor.softmax: dim must be an integer, got float 1.5"):
        x.softmax(1.5)
    with pytest.raises(TypeError):
        torch.ones(2).softmax(1.5)


def test_check_int_helper():
    import ctypes
    assert _lib.check_int(2**31 - 1, ctypes.c_int, "f: n") == 2**31 - 1
    with pytest.raises(OverflowError, match=r"^f: n=-1 is out of the range of the C uint64_t"):
        _lib.check_int(-1, ctypes.c_uint64, "f: n")
    with pytest.raises(TypeError, match="f: n must be an integer, got str 'a'"):
        _lib.check_int("a", ctypes.c_int, "f: n")
    assert list(_lib.int_array([1, -2], "f: dims")) == [1, -2]
    with pytest.raises(OverflowError, match="f: dims=4294967297"):
        _lib.int_array([1, 2**32 + 1], "f: dims")


# ---- views after their runtime is destroyed
def test_views_readable_after_their_runtime_is_destroyed():
    src = torch.arange(1000, dtype=torch.float32) * 0.25
    rt = dtorch.Runtime(2)
    with rt:
        t = dtorch.Tensor(src)
        u = dtorch.Tensor(src) * 2.0
        a = np.asarray(t)
        d = torch.from_dlpack(u)
    assert rt._h is None  # destroyed from Python's side (its C teardown waits)
    assert _interop._pending
    del t, u
    gc.collect()
    np.testing.assert_array_equal(a, src.numpy())  # no crash, the values
    assert torch.equal(d, src * 2.0)
    del a, d
    gc.collect()
    assert not _interop._pending  # the last view gone: the runtime torn down


def test_runtime_destroyed_without_views_at_once():
    rt = dtorch.Runtime(2)
    with rt:
        t = dtorch.ones(3)
        a = np.asarray(t)
    del a
    gc.collect()  # t lent its memory, and still lives: the destroy waits
    assert _interop._pending
    del t
    gc.collect()
    assert not _interop._pending
    with rt.__class__(2) as rt2:
        t = dtorch.ones(3)
    assert rt2._h is None and not _interop._pending
    with pytest.raises(dtorch.DTorchError, match="destroyed"):
        t + t


# ---- handles of temporaries, and the C base type
def test_no_handle_of_a_temporary_is_passed():
    """`f((a * b)._h)` frees a * b before f runs (its handle dangles): the
    package never takes the handle of an expression's result. Every
    module is parsed (calls, subscripts, operators, conditionals, and
    attributes, which may be properties making a new tensor such as
    .grad or .data, over any number of lines): `._h` is read from a name
    only, one that holds its tensor while the call runs."""
    import ast
    modules = sorted(PKG.rglob("*.py"))
    assert {"_tensor.py", "functional.py", "optimizer.py", "_C.c"} <= \
        {p.name for p in PKG.rglob("*")}  # the whole package is walked
    bad = []
    for p in modules:
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.Attribute) and node.attr == "_h" and \
                    not isinstance(node.value, ast.Name):
                bad.append(f"{p.relative_to(PKG)}:{node.lineno}: {ast.unparse(node)}")
    assert bad == []
    # the checker sees the forms it is for
    for code in ("f((a * b)._h)", "f(g(x)\n  ._h)", "f(x.grad._h)", "f(x[0]._h)"):
        tree = ast.parse(code)
        assert any(isinstance(n, ast.Attribute) and n.attr == "_h" and
                   not isinstance(n.value, ast.Name) for n in ast.walk(tree))


@pytest.mark.parametrize("fn", ["cat", "stack"])
def test_a_generator_of_temporaries_lives_through_the_call(fn, monkeypatch):
    """cat / stack of a generator: the tensors it makes are alive when the
    C function reads their handles (the list holding them was dropped
    before the call)."""
    xs = [dtorch.Tensor(torch.full((3,), float(i))) for i in range(4)]
    gc.collect()
    base = dtorch.live_tensors()
    live_at_call = []
    real = getattr(_lib, f"dt_{fn}")

    def spy(arr, n, dim):
        live_at_call.append(dtorch.live_tensors() - base)
        return real(arr, n, dim)
    monkeypatch.setattr(_lib, f"dt_{fn}", spy)
    out = getattr(dtorch, fn)(x * 2 for x in xs)
    assert live_at_call == [4]
    assert torch.equal(out.to_torch(), getattr(torch, fn)([x.to_torch() * 2 for x in xs]))


def test_binding_is_reported_and_both_work():
    assert _lib.BINDING in ("c", "ctypes")
    out = _run("import dtorch, torch; x = dtorch.Tensor(torch.arange(4.0)); "
               "print(dtorch._lib.BINDING, (x * 2 + 1 - x / 2).tolist(), (1 - x).tolist())",
               DTORCH_BINDING="ctypes")
    assert out == "ctypes [1.0, 2.5, 4.0, 5.5] [1.0, 0.0, -1.0, -2.0]"
    e = dict(os.environ, DTORCH_BINDING="bogus", PYTHONPATH=str(PKG.parent))
    r = subprocess.run([sys.executable, "-c", "import dtorch"], env=e, capture_output=True,
                       text=True, timeout=120)
    assert "DTORCH_BINDING='bogus' is not 'c' or 'ctypes'" in r.stderr


@pytest.mark.skipif(_lib.BINDING != "c", reason="the C extension is not built")
def test_c_operators_match_torch_and_release():
    ref = torch.tensor([[1.5, -2.0], [3.25, 0.5]])
    x = dtorch.Tensor(ref)
    i = dtorch.Tensor(torch.tensor([3, -4], dtype=torch.int32))
    ri = torch.tensor([3, -4], dtype=torch.int32)
    gc.collect()
    base = dtorch.live_tensors()
    for f in (lambda a: a + a, lambda a: a - 2, lambda a: 2 * a, lambda a: a / 3,
              lambda a: a // 2, lambda a: a % 2, lambda a: a ** 2, lambda a: a @ a,
              lambda a: -a, lambda a: abs(a), lambda a: 2 ** a, lambda a: 1 - a,
              lambda a: a + 2**53, lambda a: a * 2**60):
        got, want = f(x).to_torch(), f(ref)
        assert got.dtype == want.dtype and torch.allclose(got, want, rtol=1e-6, atol=1e-6)
    for f in (lambda a: a + 1, lambda a: a + 1.5, lambda a: a / 2, lambda a: a * True,
              lambda a: a // 3, lambda a: a % 3, lambda a: 7 - a):
        got, want = f(i).to_torch(), f(ri)
        assert got.dtype == want.dtype and torch.equal(got, want)
    gc.collect()
    assert dtorch.live_tensors() == base  # every result released
    with pytest.raises(TypeError):
        pow(x, 2, 3)
    with pytest.raises(ValueError, match="mul: the integer scalar 18446744073709551616"):
        x * 2**64


# ---- copies of tensors: each its own handle (never the same one twice)
def test_copy_deepcopy_and_pickle_as_torch():
    """copy.deepcopy / copy.copy / pickle of a dtorch tensor behave as
    torch's: deepcopy a leaf with its own values (and requires_grad and
    grad), copy a leaf sharing the storage, pickle the values; each result
    owns a handle of its own (a copied handle would be released twice)."""
    import copy
    import pickle
    ref = torch.tensor([[1.5, -2.0], [3.0, 4.0]])
    gc.collect()
    base = dtorch.live_tensors()
    t = dtorch.Tensor(ref, requires_grad=True)
    t.grad = dtorch.Tensor(torch.full((2, 2), 0.5))
    tt = ref.clone().requires_grad_()
    tt.grad = torch.full((2, 2), 0.5)
    d, td = copy.deepcopy(t), copy.deepcopy(tt)
    assert (type(d), d.requires_grad, d.is_leaf) == (dtorch.Tensor, td.requires_grad, td.is_leaf)
    assert torch.equal(d.to_torch(), td.detach()) and torch.equal(d.grad.to_torch(), td.grad)
    with dtorch.no_grad():
        d.mul_(2)  # its own storage
    assert torch.equal(t.to_torch(), ref)
    c, tc = copy.copy(t), copy.copy(tt)
    assert (c.requires_grad, c.is_leaf, c.grad is None) == \
        (tc.requires_grad, tc.is_leaf, tc.grad is None)
    with dtorch.no_grad():
        c.add_(1)  # the same storage as t, as torch's copy.copy
    with torch.no_grad():
        tc.add_(1)
    assert torch.equal(t.to_torch(), tt.detach()) and torch.equal(tt.detach(), ref + 1)
    p = pickle.loads(pickle.dumps(t))
    tp = pickle.loads(pickle.dumps(tt))
    assert (p.requires_grad, torch.equal(p.to_torch(), tp.detach())) == (tp.requires_grad, True)
    sd = copy.deepcopy(dnn_linear_state(dtorch))  # a module's state_dict, the usual case
    assert all(isinstance(v, dtorch.Tensor) for v in sd.values())
    with pytest.raises(RuntimeError, match="graph leaves"):  # torch's refusal
        copy.deepcopy(t * 2)
    del t, d, c, p, sd
    gc.collect()
    assert dtorch.live_tensors() == base  # every copy released once


def test_deepcopy_keeps_a_dtensor_laid_out_and_pickle_refuses_it():
    import copy
    import pickle
    mesh = init_device_mesh("cpu", (2,))
    x = dtorch.Tensor(torch.arange(4.0), device_mesh=mesh, placements=[Shard(0)])
    d = copy.deepcopy(x)
    assert d.placements == (Shard(0),) and torch.equal(d.to_torch(), torch.arange(4.0))
    for t in (x, dtorch.nn.Parameter(x)):
        with pytest.raises(TypeError, match="DTensor.*dtorch.save"):
            pickle.dumps(t)


def dnn_linear_state(ns):
    m = ns.nn.Module()
    m.weight = ns.nn.Parameter(ns.tensor([[1.0, 2.0]]))
    m.register_buffer("count", ns.tensor([3]))
    return m.state_dict()


def test_a_parameters_results_are_tensors_and_leak_no_handle():
    """p.detach() and p.data are plain tensors, as torch's; a Parameter's
    in-place initialisers (through results of its own class before) and
    the layers made with them leave no handle behind."""
    import copy
    tp = torch.nn.Parameter(torch.ones(3))
    gc.collect()
    base = dtorch.live_tensors()
    p = dtorch.nn.Parameter(dtorch.ones(3))
    assert type(p.detach()).__name__ == type(tp.detach()).__name__ == "Tensor"
    assert type(p.data) is dtorch.Tensor and type(tp.data) is torch.Tensor
    c, tc = copy.copy(p), copy.copy(tp)
    assert (type(c).__name__, c.requires_grad) == (type(tc).__name__, tc.requires_grad)
    with dtorch.no_grad():
        c.fill_(2.0)
    assert p.tolist() == [2.0, 2.0, 2.0]  # the same storage, as torch's copy.copy
    for _ in range(5):
        p.detach()
        dtorch.nn.init.normal_(p)
        dtorch.nn.init.uniform_(p)
        with dtorch.no_grad():
            p.masked_fill_(dtorch.tensor([True, False, True]), 0.0)
        dtorch.nn.Linear(4, 4)
        dtorch.nn.Embedding(5, 2, padding_idx=0)
    del p, c
    gc.collect()
    assert dtorch.live_tensors() == base
