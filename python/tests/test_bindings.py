"""Every DT_API function of include/dtorch/*.h is declared in
dtorch._lib with its prototype's argument count, and each group is
reachable from Python and does what the header says: runtimes, streams,
events, futures, meshes, memory, counts, debugging, traces, interception,
safetensors, autograd, optimisers, dry runs, faults and SPMD — values
compared with torch, or with the C behaviour the header documents."""
import ctypes
import gc
import importlib.util
import json
import mmap
import pathlib
import re
import select
import threading

import pytest
import torch

import dtorch
import dtorch._optim  # noqa: F401  (the C optimisers, under dtorch.optim's classes)
from dtorch import Replicate, Shard, _lib

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEADERS = ["dtorch.h", "autograd.h", "debug.h", "sim.h", "spmd.h"]

# Declared in the headers and deliberately not in _lib.py, each with why
# (none today).
ALLOW = {}


def header_names():
    names = []
    for h in HEADERS:
        text = re.sub(r"/\*.*?\*/", "", (ROOT / "include" / "dtorch" / h).read_text(), flags=re.S)
        names += re.findall(r"^\s*DT_API\b[^;(]*?\b(dt_\w+)\s*\(", text, re.M | re.S)
    return names


def test_every_dt_api_function_is_declared():
    names = header_names()
    assert len(names) > 240
    missing = [n for n in names if n not in ALLOW and
               not hasattr(vars(_lib).get(n), "argtypes")]
    assert missing == [], f"not declared in dtorch/_lib.py: {missing}"


def test_declarations_take_the_prototypes_argument_counts():
    spec = importlib.util.spec_from_file_location("cols", ROOT / "scripts" / "check-op-columns.py")
    cols = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cols)
    protos = cols.prototypes("\n".join((ROOT / "include" / "dtorch" / h).read_text()
                                       for h in HEADERS))
    wrong = {n: (len(v.argtypes), protos[n]) for n, v in vars(_lib).items()
             if n.startswith("dt_") and hasattr(v, "argtypes") and n in protos
             and len(v.argtypes) != protos[n]}
    assert wrong == {}


# ---- value types
def test_dtype_and_status_names():
    from dtorch._tensor import DTYPES
    for d in DTYPES:
        assert dtorch.dtype_name(d) == str(d).split(".")[1]
        assert dtorch.dtype_size(d) == d.itemsize
    assert dtorch.status_name(2) == "DT_ERR_SHAPE"
    # outside the enum: the library answers "DT_ERR_?" (the header says "?")
    assert dtorch.status_name(99).endswith("?")
    assert dtorch.version() == "1.0.0"


# ---- runtimes and processes
def test_runtime_create_options_and_processes():
    with dtorch.Runtime(3, device_memory=1 << 20, ring_capacity=64, spin_us=5,
                        collective_timeout_ms=20000, pin_ranks=-1) as rt:
        assert rt.num_ranks == 3 and dtorch.Runtime.current() is rt
        assert (rt.num_processes, rt.process_index) == (1, 0)
        assert rt.local_ranks() == [0, 1, 2] and dtorch.rank_is_local(2)
        assert dtorch.num_processes() == 1 and dtorch.process_index() == 0
        with pytest.raises(dtorch.InvalidArgumentError, match="rank 3 is not a rank"):
            rt.rank_is_local(3)
        assert rt.memory(0).capacity == 1 << 20
        t = dtorch.ones(4)  # the factories use the current runtime
        assert t.to_torch().tolist() == [1.0] * 4
    assert dtorch.Runtime.current() is not rt
    with pytest.raises(dtorch.DTorchError, match="Tensor.__add__: the tensors' runtime was destroyed \\(dt_add_scalar_typed\\)") as e:
        (t + 1.0).to_torch()  # rt destroyed: ops on its tensors fail
    assert e.value.status == "DT_ERR_DEVICE"
    with pytest.raises(dtorch.InvalidArgumentError, match='options.launcher "bogus" is unknown'):
        dtorch.Runtime(2, launcher="bogus")
    with pytest.raises(dtorch.InvalidArgumentError, match="options.num_ranks -1"):
        dtorch.Runtime(-1)
    with pytest.raises(ValueError, match="default runtime"):
        dtorch.Runtime.default().destroy()


def test_memory_empty_cache_queue_depth_cancel():
    with dtorch.Runtime(2) as rt:
        gc.collect()
        before = rt.memory(0).used
        x = dtorch.zeros(1 << 18)  # 1 MiB on rank 0
        rt.synchronize()
        assert rt.memory(0).used == before + (1 << 20)
        assert rt.memory(0).peak >= before + (1 << 20)
        base = dtorch.live_storage_bytes()
        del x
        gc.collect()
        rt.synchronize()
        assert dtorch.live_storage_bytes() == base - (1 << 20)
        rt.empty_cache()
        assert rt.memory(0).used == before
        assert "memory of 2 ranks" in rt.memory_report()
        assert rt.queue_depth(0) >= 0
        with pytest.raises(dtorch.InvalidArgumentError):
            rt.queue_depth(7)
        s = dtorch.ones(1).expand(2 ** 40).sum()  # would run for hours
        rt.cancel()
        with pytest.raises(dtorch.DTorchTimeoutError, match="cancelled by dt_runtime_cancel"):
            s.item()
        assert (dtorch.ones(2) * 2.0).tolist() == [2.0, 2.0]  # later work runs


def test_streams_and_events():
    with dtorch.Runtime(2) as rt:
        a = dtorch.randn(256, 256, device="cpu:1")
        b = a @ a
        ev = rt.record_event(1)
        assert isinstance(ev, dtorch.Future) and ev.rank == 1
        s0 = rt.stream(0)
        s0.wait_event(ev)  # rank 0 waits for rank 1's matmul
        s0.wait_stream(rt.stream(1))
        c = dtorch.ones(3, device="cpu:0") * 2.0
        ev.synchronize()
        assert ev.query() and ev.status == "DT_OK" and ev.error == ""
        s0.synchronize()
        assert c.tolist() == [2.0] * 3
        torch.testing.assert_close(b.to_torch(), a.to_torch() @ a.to_torch(), rtol=1e-4, atol=1e-3)
        with pytest.raises(TypeError, match="not a dtorch Event"):
            rt.wait_event(0, object())


# ---- futures
def test_future_status_error_and_callback():
    f = (dtorch.ones(4) * 3.0).to_torch_async()
    seen, done = [], threading.Event()

    def cb(fut):
        seen.append((fut is f, fut.status, threading.current_thread() is threading.main_thread()))
        done.set()
    f.add_done_callback(cb)
    assert done.wait(10)
    assert f.get().tolist() == [3.0] * 4 and seen[0][:2] == (True, "DT_OK")
    seen.clear()
    f.add_done_callback(cb)  # complete already: at once, on this thread
    assert seen == [(True, "DT_OK", True)]
    bad = (dtorch.tensor([7, 8]) // dtorch.tensor([1, 0])).to_torch_async()
    with pytest.raises(dtorch.DTorchError, match="zero"):
        bad.get()
    assert bad.status == "DT_ERR_INVALID_ARGUMENT" and "zero" in bad.error


def _uring():
    """A raw io_uring (syscall 425, io_uring_setup) and its CQ ring mapped."""
    libc = ctypes.CDLL(None, use_errno=True)
    params = (ctypes.c_uint32 * 30)()
    fd = libc.syscall(425, 8, params)
    if fd < 0:
        pytest.skip(f"io_uring_setup: errno {ctypes.get_errno()}")
    cq = list(params[20:27])  # head, tail, ring_mask, ring_entries, overflow, cqes, flags
    ring = mmap.mmap(fd, cq[5] + params[1] * 16, mmap.MAP_SHARED,
                     mmap.PROT_READ | mmap.PROT_WRITE, offset=0x8000000)
    return fd, ring, cq


def test_future_notify_ring_posts_a_cqe():
    fd, ring, cq = _uring()
    try:
        f = (dtorch.full((1000,), 2.5) * 2.0).to_torch_async()
        f.notify_ring(fd, 42)
        assert select.select([fd], [], [], 10)[0] == [fd]  # a CQE is there
        head = int.from_bytes(ring[cq[0]:cq[0] + 4], "little")
        mask = int.from_bytes(ring[cq[2]:cq[2] + 4], "little")
        at = cq[5] + (head & mask) * 16
        assert int.from_bytes(ring[at:at + 8], "little") == 42  # user_data
        assert int.from_bytes(ring[at + 8:at + 12], "little", signed=True) == 0  # res
        f.wait(0)
        assert f.get().tolist() == [5.0] * 1000
        with pytest.raises(dtorch.DTorchError, match="ring_fd"):
            f.notify_ring(-1, 1)
    finally:
        ring.close()
        import os
        os.close(fd)


# ---- meshes
def test_mesh_functions():
    with dtorch.Runtime(8) as rt:
        m = dtorch.mesh_range("cpu", (2, 4), mesh_dim_names=["dp", "tp"], runtime=rt)
        ranks = torch.arange(8).reshape(2, 4)
        assert m.mesh.tolist() == ranks.tolist() and m.runtime is rt
        for r in range(8):
            assert m.coordinates_of(r) == tuple((ranks == r).nonzero()[0].tolist())
        assert dtorch.dim_index(m, "tp") == 1
        sub = m.submesh("tp", 6)
        assert sub.mesh.tolist() == [4, 5, 6, 7] and sub.mesh_dim_names == ("tp",)
        assert m.submesh(["dp"], 6).mesh.tolist() == [2, 6]
        flat = m.flatten_dims(["dp", "tp"])
        assert flat.mesh.tolist() == list(range(8)) and flat.mesh_dim_names == ("dp_tp",)
        assert dtorch.flatten_dims(m, ["dp", "tp"], "all").mesh_dim_names == ("all",)
        with pytest.raises(dtorch.InvalidArgumentError):
            m.dim_index("pp")
        with pytest.raises(dtorch.InvalidArgumentError):
            m.coordinates_of(9)


# ---- tensor metadata and leak counters
def test_tensor_metadata():
    A = torch.arange(24.0).reshape(2, 3, 4)
    t = dtorch.Tensor(A)
    for f in [lambda x: x, lambda x: x[1], lambda x: x.transpose(0, 2), lambda x: x[:, 1:]]:
        g, w = f(t), f(A)
        assert (g.ndim, g.storage_offset(), g.is_contiguous()) == \
            (w.ndim, w.storage_offset(), w.is_contiguous())
    assert t[1].shares_storage(t) and not t.clone().shares_storage(t)


# ---- communication counts, sharding cache, labels, reports
@pytest.fixture
def mesh4():
    with dtorch.Runtime(4):
        yield dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=["tp"])


def test_comm_count_and_sharding_cache(mesh4):
    x = dtorch.Tensor(torch.arange(32.0).reshape(8, 4), device_mesh=mesh4, placements=[Shard(0)])
    with dtorch.comm_count() as c:
        y = x.redistribute(mesh4, [Replicate()])
    # one all_gather; bytes: each of 4 ranks feeds its 2 x 4 float32 shard
    assert c.counts == dtorch._debug.CommCounts(0, 1, 0, 0, 0, 0, 4 * 32)
    assert c.all_gather == 1
    torch.testing.assert_close(y.to_torch(), torch.arange(32.0).reshape(8, 4))
    dtorch.sharding_cache_clear()
    assert dtorch.sharding_cache_stats() == (0, 0, 0, 0)
    (x * 2.0).to_torch()
    (x * 2.0).to_torch()
    st = dtorch.sharding_cache_stats()
    assert st.misses == 1 and st.hits == 1 and st.entries == 1
    assert dtorch.sharding_cache_evictions() == st.evictions == 0


def test_shadow_labels_and_comm_debug(mesh4):
    x = dtorch.Tensor(torch.randn(8, 4), device_mesh=mesh4, placements=[Shard(0)])
    w = dtorch.Tensor(torch.randn(4, 4), device_mesh=mesh4, placements=[Replicate()])
    with dtorch.shadow() as s:
        with dtorch.label("mlp"):
            y = (x @ w).relu()
    assert s.report.ops_checked >= 2 and s.report.first_divergence == 0
    assert s.report.message == "" and not s.report.failed
    with dtorch.comm_debug() as d:
        with dtorch.comm_debug_label("layer1"):
            y.redistribute(mesh4, [Replicate()])
    assert "layer1" in d.table and "all_gather" in d.table and "dt_redistribute" in d.table
    assert d.json is not None and "all_gather" in json.dumps(d.json)


def test_inspection_text(mesh4):
    x = dtorch.Tensor(torch.zeros(8, 4), device_mesh=mesh4, placements=[Shard(0)])
    pic = dtorch.visualize_sharding(x, ascii=True)
    assert all(str(r) in pic for r in range(4)) and "+" in pic and "S(0)" in pic
    desc = dtorch.describe(x)
    assert "DTensor float32[8, 4]" in desc and "[2, 4]" in desc
    assert "device" in dtorch.describe(dtorch.zeros(3))
    with pytest.raises(dtorch.InvalidArgumentError):
        dtorch.visualize_sharding(dtorch.zeros(2, 2, 2))
    assert "memory of 4 ranks" in dtorch.memory_report()


def test_trace_writes_chrome_json(tmp_path, mesh4):
    path = tmp_path / "t.json"
    with dtorch.trace(path):
        (dtorch.ones(64) * 2.0).to_torch()
    doc = json.loads(path.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    assert any("mul" in str(e.get("name", "")) for e in events)


# ---- interception
def test_intercept_op_counter_op_printer():
    a, b = dtorch.ones(2), dtorch.ones(2)
    names = []

    def hook(call):
        names.append(call.name)
        assert [t.shape for t in call.inputs] == [torch.Size([2])] * len(call.inputs)
        call.run()
        assert call.outputs[0].shape == (2,)
        names.append(call.format())
    with dtorch.intercept(hook):
        c = (a + b).relu()
    assert names == ["add", "add(float32[2], float32[2]) -> float32[2]",
                     "relu", "relu(float32[2]) -> float32[2]"]
    assert c.tolist() == [2.0, 2.0]

    def refuse(call):
        raise RuntimeError("no")
    h = dtorch.intercept(refuse)
    with h, pytest.raises(dtorch.DTorchError):
        a + b
    assert isinstance(h.errors[0], RuntimeError)
    with dtorch.op_counter() as cnt:
        (a + b + b).exp()
    assert (cnt["add"], cnt["exp"], cnt.total) == (2, 1, 3)
    assert str(cnt).split() == ["2", "add", "1", "exp"]
    with dtorch.op_printer() as p:
        a * b
    assert p.text == "mul(float32[2], float32[2]) -> float32[2]\n"


# ---- safetensors
def test_safetensors_save_index_load(tmp_path, mesh4):
    from safetensors.torch import load_file, save_file
    W, b = torch.randn(8, 6), torch.arange(5, dtype=torch.int32)
    path = tmp_path / "ck.safetensors"
    dtorch.save_safetensors({"w": dtorch.Tensor(W, device_mesh=mesh4, placements=[Shard(0)]),
                             "b": dtorch.Tensor(b)}, path)
    got = load_file(str(path))
    assert torch.equal(got["w"], W) and torch.equal(got["b"], b)
    idx = dtorch.safetensors_index(path)
    by = {e.name: e for e in idx.tensors}
    assert by["w"].dtype is torch.float32 and by["w"].shape == (8, 6) and by["w"].nbytes == 192
    assert by["b"].dtype_name == "I32" and by["b"].nbytes == 20
    save_file({"x": torch.randn(4, 8)}, str(tmp_path / "t.safetensors"), metadata={"k": "v"})
    assert dtorch.safetensors_index(tmp_path / "t.safetensors").metadata == {"k": "v"}
    w1 = dtorch.load_safetensors(path, "w", device_mesh=mesh4, placements=[Shard(1)])
    assert w1.placements == (Shard(1),)
    torch.testing.assert_close(w1.to_torch(), W, rtol=0, atol=0)
    b1, fut = dtorch.load_safetensors_async(path, "b", device="cpu:2")
    fut.wait()
    assert torch.equal(b1.to_torch(), b)
    with pytest.raises(dtorch.InvalidArgumentError, match="nope"):
        dtorch.load_safetensors(path, "nope")
    with pytest.raises(TypeError, match="save_safetensors: tensors must be a dict"):
        dtorch.save_safetensors([b1], path)


# ---- autograd, optimisers, backward kernels
def test_grad_mode_backward_clip():
    assert dtorch.is_grad_enabled()
    w = dtorch.Tensor(torch.tensor([1.0, -2.0, 3.0]), requires_grad=True)
    with dtorch.no_grad():
        assert not dtorch.is_grad_enabled() and not (w * 2.0).requires_grad
        with dtorch.enable_grad():
            assert (w * 2.0).requires_grad
    with dtorch.set_grad_enabled(False):
        assert not dtorch.is_grad_enabled()
    assert dtorch.is_grad_enabled()
    gc.collect()  # earlier tests' graphs are freed before the count is taken
    dtorch.synchronize()
    nodes = dtorch.autograd_live_nodes()
    y = w * w
    assert dtorch.autograd_live_nodes() > nodes
    seed = dtorch.tensor([1.0, 0.5, 2.0])
    dtorch._autograd.backward(y, seed)
    wt = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    (wt * wt).backward(torch.tensor([1.0, 0.5, 2.0]))
    torch.testing.assert_close(w.grad.to_torch(), wt.grad)
    total = dtorch.clip_grad_norm_([w], 1.0)
    want = torch.nn.utils.clip_grad_norm_([wt], 1.0)
    torch.testing.assert_close(total.to_torch(), want)
    torch.testing.assert_close(w.grad.to_torch(), wt.grad)
    dtorch._autograd.zero_grad(w)
    assert w.grad is None


@pytest.mark.parametrize("name,kw", [("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}),
                                     ("SGD", {"lr": 0.05, "momentum": 0.5, "nesterov": True}),
                                     ("AdamW", {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.1})])
def test_optimizers_as_torch(name, kw):
    W0 = torch.randn(3, 4)
    x = torch.randn(5, 4)
    p = dtorch.Tensor(W0, requires_grad=True)
    pt = W0.clone().requires_grad_()
    opt = getattr(dtorch._optim, name)([p], **kw)  # the C optimisers
    opt_t = getattr(torch.optim, name)([pt], **kw)
    for _ in range(3):
        opt.zero_grad()
        opt_t.zero_grad()
        ((dtorch.Tensor(x) @ p.t()) ** 2.0).sum().backward()
        ((x @ pt.t()) ** 2).sum().backward()
        opt.step()
        opt_t.step()
    assert opt.steps == 3
    torch.testing.assert_close(p.to_torch(), pt.detach(), rtol=1e-5, atol=1e-5)


def test_nn_ops_and_backward_kernels():
    x = torch.randn(4, 5)
    tgt = torch.tensor([0, 4, 2, -100])
    for kw in ({}, {"label_smoothing": 0.1}, {"reduction": "sum"}, {"reduction": "none"}):
        got = dtorch.cross_entropy(dtorch.Tensor(x), dtorch.Tensor(tgt), **kw)
        torch.testing.assert_close(got.to_torch(), torch.nn.functional.cross_entropy(x, tgt, **kw))
    wt = torch.randn(6, 3)
    ids = torch.tensor([[1, 5], [0, 1]])
    assert torch.equal(dtorch.embedding(dtorch.Tensor(ids), dtorch.Tensor(wt)).to_torch(),
                       torch.nn.functional.embedding(ids, wt))
    g = torch.randn(5)
    torch.testing.assert_close(dtorch.rms_norm(dtorch.Tensor(x), 5, dtorch.Tensor(g)).to_torch(),
                               torch.rms_norm(x, [5], g), rtol=1e-5, atol=1e-6)
    xr = x.clone().requires_grad_()
    gr = torch.randn(4, 5)
    want, = torch.autograd.grad(torch.nn.functional.gelu(xr), xr, gr)
    torch.testing.assert_close(dtorch._autograd.gelu_backward(
        dtorch.Tensor(gr), dtorch.Tensor(x)).to_torch(), want, rtol=1e-5, atol=1e-6)
    src = torch.randn(4, 2)
    torch.testing.assert_close(dtorch._autograd.slice_scatter(
        dtorch.Tensor(src), (4, 5), 1, 1, 5, 2).to_torch(),
        torch.slice_scatter(torch.zeros(4, 5), src, 1, 1, 5, 2))
    idx = torch.tensor([2, 0, 2])
    grad = torch.randn(3, 5)
    torch.testing.assert_close(dtorch._autograd.index_select_backward(
        dtorch.Tensor(grad), 0, dtorch.Tensor(idx), 4).to_torch(),
        torch.zeros(4, 5).index_add_(0, idx, grad))
    tg = torch.tensor([0, 4, 2, 1])
    want, = torch.autograd.grad(torch.nn.functional.cross_entropy(xr, tg, label_smoothing=0.2), xr)
    got = dtorch._autograd.cross_entropy_backward(dtorch.tensor(1.0), dtorch.Tensor(x),
                                                  dtorch.Tensor(tg), label_smoothing=0.2)
    torch.testing.assert_close(got.to_torch(), want, rtol=1e-5, atol=1e-6)
    m, v, pp = (torch.rand(6) for _ in range(3))
    torch.testing.assert_close(dtorch._optim.adam_moment(dtorch.Tensor(m), dtorch.Tensor(v), 0.9,
                                                        True).to_torch(), 0.9 * m + 0.1 * v * v)
    torch.testing.assert_close(dtorch._optim.adamw_apply(
        dtorch.Tensor(pp), dtorch.Tensor(m), dtorch.Tensor(v), 0.01, 1e-8, 0.99).to_torch(),
        0.99 * pp - 0.01 * m / (v.sqrt() + 1e-8))
    dtorch.blas_set_threads(1)
    a = torch.randn(16, 16)
    torch.testing.assert_close((dtorch.Tensor(a) @ dtorch.Tensor(a)).to_torch(), a @ a,
                               rtol=1e-5, atol=1e-5)


# ---- dry runs and faults (sim.h)
def test_dry_run_report():
    with dtorch.Runtime(4, dry_run=True, dry_link_gbps=50.0) as rt:
        m = dtorch.init_device_mesh("cpu", (4,))
        x = dtorch.randn(64, 32, device_mesh=m, placements=[Shard(0)])
        y = x.redistribute(m, [Replicate()]) * 2.0
        with pytest.raises(dtorch.UnsupportedError):
            y.to_torch()
        r = rt.dry_run_report()
        assert r.collectives == 1 and r.comm_bytes == 64 * 32 * 4 and r.ops >= 1
        assert r.comm_s > 0 and r.step_s >= r.comm_s and r.peak_max >= 64 * 32 * 4
        rt.dry_run_reset()
        assert rt.dry_run_report().collectives == 0
    with dtorch.Runtime(2) as rt, pytest.raises(dtorch.InvalidArgumentError, match="dry run"):
        rt.dry_run_report()


def test_fault_injection():
    with dtorch.Runtime(2) as rt:
        m = dtorch.init_device_mesh("cpu", (2,))
        x = dtorch.Tensor(torch.ones(4, 2), device_mesh=m, placements=[Shard(0)])
        rt.synchronize()  # counted from the call, on the rank: x is made before
        rt.inject_fault("rank_fail", rank=1, after=1)
        with pytest.raises(dtorch.DTorchError, match="injected fault.*rank 1"):
            (x * 2.0).to_torch()
        assert rt.fault_count == 1
        assert (x * 3.0).to_torch().tolist() == [[3.0, 3.0]] * 4  # usable after
        rt.inject_fault(["oom", "io"], rank=0, after=5)
        rt.clear_faults()
        assert (x + 1.0).to_torch().sum().item() == 16.0 and rt.fault_count == 1
        with pytest.raises(ValueError, match="kind 'disk'"):
            rt.inject_fault("disk")
        with pytest.raises(dtorch.InvalidArgumentError):
            rt.inject_fault("stall", rank=9)


# ---- SPMD
def test_spmd_collectives_and_dtensors():
    from dtorch import spmd
    with dtorch.Runtime(4) as rt:
        mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=["dp", "tp"])

        def body(ctx, scale):
            r = ctx.rank
            assert spmd.spmd_rank() == r and ctx.world_size == 4
            t = dtorch.full((4,), float(r + 1)) * scale
            out = {"sum": spmd.all_reduce(t).tolist(),
                   "max_tp": spmd.all_reduce(t, "max", (mesh, "tp")).tolist(),
                   "gather": spmd.all_gather(t[:1], 0).tolist(),
                   "rs": spmd.reduce_scatter(t, "sum", 0).tolist(),
                   "a2a": spmd.all_to_all(dtorch.arange(4.0) + 10.0 * r, 0, 0).tolist(),
                   "bcast": spmd.broadcast(t, 2, [0, 1, 2, 3]).tolist()}
            spmd.barrier()
            if r == 0:
                spmd.send(dtorch.tensor([5.0, 6.0]), 3)
            if r == 3:
                out["recv"] = spmd.recv(0, (2,), torch.float32).tolist()
            d = spmd.dtensor_from_local(dtorch.full((1, 3), float(r)), mesh, [Shard(0), Shard(0)])
            out["local"] = spmd.dtensor_to_local(d * 2.0).tolist()
            return out
        res = rt.spmd_run(body, 1.0)
        assert spmd.spmd_rank() == -1
        for r, out in enumerate(res):
            assert out["sum"] == [10.0] * 4
            assert out["max_tp"] == [float(2 * (r // 2) + 2)] * 4
            assert out["gather"] == [1.0, 2.0, 3.0, 4.0]
            assert out["rs"] == [10.0]
            assert out["a2a"] == [float(r + 10 * j) for j in range(4)]
            assert out["bcast"] == [3.0] * 4
            assert out["local"] == [[2.0 * r] * 3]
        assert res[3]["recv"] == [5.0, 6.0]


def test_spmd_errors_name_the_rank_and_call_site():
    from dtorch import spmd
    with dtorch.Runtime(2) as rt:
        def raises(ctx):
            if ctx.rank == 1:
                raise KeyError("rank one")
            return ctx.rank
        with pytest.raises(KeyError, match="rank one") as e:
            rt.spmd_run(raises)
        assert "rank 1 failed" in str(e.value.__cause__)

        def desync(ctx):
            t = dtorch.ones(2)
            return spmd.all_reduce(t) if ctx.rank == 0 else spmd.all_gather(t)
        with pytest.raises(dtorch.DTorchError, match=r"test_bindings\.py:\d+") as e:
            rt.spmd_run(desync)
        assert "all_gather" in str(e.value) or "all_gather" in str(e.value.__cause__)
        with pytest.raises(TypeError, match="all_reduce: expected a dtorch.Tensor"):
            spmd.all_reduce([1.0])
        with pytest.raises(dtorch.InvalidArgumentError, match="SPMD"):
            spmd.all_reduce(dtorch.ones(2))  # outside an SPMD function
