"""dtorch.distributed against torch.distributed: the module paths, the
process-group calls one controller answers, DeviceMesh's rank queries
and sub-meshes (against torch's DeviceMesh on a one-process fake group of
the same size), DTensor, distribute_tensor, from_local's per-rank locals,
the factories, CommDebugMode and visualize_sharding."""
import importlib
import io
import contextlib

import pytest
import torch

import dtorch
import dtorch.distributed as dist
from dtorch.distributed.tensor import DTensor, Partial, Replicate, Shard, \
    distribute_tensor
from dtorch.distributed.tensor.debug import CommDebugMode, visualize_sharding

N = dtorch._lib.dt_runtime_num_ranks(dtorch._lib.dt_runtime_default())
needs8 = pytest.mark.skipif(N < 8, reason=f"needs 8 ranks (the runtime has {N})")


@pytest.fixture(autouse=True)
def fresh_group(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    if dist.is_initialized():
        dist.destroy_process_group()
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def torch_world():
    """torch's own DeviceMesh on a fake process group of N ranks, rank 0:
    the reference for what the current rank sees."""
    import torch.distributed as tdist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if not tdist.is_initialized():
        tdist.init_process_group("fake", store=FakeStore(), rank=0, world_size=N)
    return tdist


NAMES = {
    "dtorch.distributed": ["init_process_group", "destroy_process_group",
                           "is_initialized", "is_available", "get_rank",
                           "get_world_size", "barrier", "get_backend",
                           "DeviceMesh", "init_device_mesh"],
    "dtorch.distributed.tensor": ["DTensor", "distribute_tensor",
                                  "distribute_module", "Shard", "Replicate",
                                  "Partial", "Placement", "zeros", "ones",
                                  "empty", "full", "rand", "randn",
                                  "DeviceMesh", "init_device_mesh"],
    "dtorch.distributed.tensor.placement_types": ["Shard", "Replicate",
                                                  "Partial", "Placement"],
    "dtorch.distributed.tensor.parallel": [
        "parallelize_module", "ColwiseParallel", "RowwiseParallel",
        "SequenceParallel", "PrepareModuleInput", "PrepareModuleOutput",
        "PrepareModuleInputOutput", "ParallelStyle", "loss_parallel"],
    "dtorch.distributed.tensor.debug": ["CommDebugMode", "visualize_sharding"],
    "dtorch.distributed.device_mesh": ["DeviceMesh", "init_device_mesh"],
    "dtorch.distributed._tensor": ["DTensor", "Shard", "Replicate",
                                   "distribute_tensor", "DeviceMesh"],
    "dtorch.distributed._tensor.device_mesh": ["init_device_mesh", "DeviceMesh"],
}


@pytest.mark.parametrize("module", sorted(NAMES))
def test_module_paths(module):
    mod = importlib.import_module(module)
    torch_mod = importlib.import_module(module.replace("dtorch", "torch", 1))
    for name in NAMES[module]:
        assert hasattr(mod, name), f"{module}.{name}"
        assert hasattr(torch_mod, name), f"torch's {module}.{name}"


def test_the_same_objects_everywhere():
    from dtorch.distributed._tensor import DTensor as old
    from dtorch.distributed._tensor.device_mesh import init_device_mesh
    from dtorch.distributed.device_mesh import DeviceMesh
    assert old is DTensor
    assert DeviceMesh is dtorch.DeviceMesh is dtorch.distributed_spec.DeviceMesh
    assert Shard is dtorch.Shard and Replicate is dtorch.distributed_spec.Replicate
    assert init_device_mesh is dist.init_device_mesh
    assert dtorch.distributed_spec.init_device_mesh is dtorch.init_device_mesh


def test_process_group_one_controller():
    assert dist.is_available() and not dist.is_initialized()
    with pytest.raises(ValueError, match="get_rank: Default process group has not been initialized"):
        dist.get_rank()
    dist.init_process_group("nccl")
    assert dist.is_initialized()
    assert dist.get_rank() == 0
    assert dist.get_world_size() == N
    assert dist.get_backend() == "nccl"
    dist.barrier()
    with pytest.raises(ValueError, match="initialize the default process group twice"):
        dist.init_process_group()
    dist.destroy_process_group()
    assert not dist.is_initialized()
    dist.init_process_group()
    assert dist.get_backend() == "dtorch"


def test_process_group_arguments():
    with pytest.raises(ValueError, match=r"init_process_group: backend 'tcp' is not one of"):
        dist.init_process_group("tcp")
    with pytest.raises(ValueError, match=rf"world_size=3 but the runtime has {N} ranks"):
        dist.init_process_group(world_size=3)
    with pytest.raises(ValueError, match="rank=1 but this process's first rank is 0"):
        dist.init_process_group(rank=1)
    with pytest.raises(TypeError, match="timeout 5 is not a datetime.timedelta"):
        dist.init_process_group(timeout=5)
    dist.init_process_group("cpu:gloo,cuda:nccl", world_size=N, rank=0)
    with pytest.raises(TypeError, match="get_rank: group 3 is not a ProcessGroup"):
        dist.get_rank(3)
    assert dist.get_rank(dist.group.WORLD) == 0
    assert dist.get_process_group_ranks(dist.group.WORLD) == list(range(N))


def test_world_size_from_the_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", str(N))
    dist.init_process_group()
    assert dist.get_world_size() == N
    monkeypatch.setenv("WORLD_SIZE", str(N + 1))
    with pytest.raises(ValueError, match=rf"WORLD_SIZE={N + 1} in the environment but "
                                         rf"the runtime has {N} ranks"):
        dist.get_world_size()
    monkeypatch.setenv("WORLD_SIZE", "four")
    with pytest.raises(ValueError, match="WORLD_SIZE='four' is not an integer"):
        dist.get_world_size()
    dist.destroy_process_group()
    monkeypatch.setenv("WORLD_SIZE", str(N + 1))
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        dist.init_process_group()
    assert not dist.is_initialized()


@needs8
def test_device_mesh_against_torch(torch_world):
    from torch.distributed.device_mesh import init_device_mesh as torch_init
    tm = torch_init("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
    m = dist.init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
    assert dist.is_initialized()  # as torch's init_device_mesh does
    assert m.get_rank() == tm.get_rank() == 0
    assert m.ndim == tm.ndim and tuple(m.shape) == tuple(tm.shape)
    assert m.size() == tm.size() and m.size(1) == tm.size(1)
    assert m.mesh_dim_names == tm.mesh_dim_names
    assert m.mesh.tolist() == tm.mesh.tolist()
    assert m.get_coordinate() == tm.get_coordinate()
    for d in (0, 1, "dp", "tp"):
        assert m.get_local_rank(d) == tm.get_local_rank(d)
    for key in ("tp", "dp", ("dp", "tp")):
        sub, tsub = m[key], tm[key]
        assert sub.mesh.tolist() == tsub.mesh.tolist(), key
        assert sub.mesh_dim_names == tsub.mesh_dim_names
    for d in ("dp", "tp"):
        g, tg = m.get_group(d), tm.get_group(d)
        assert list(g.ranks) == torch_world.get_process_group_ranks(tg)
        assert dist.get_world_size(g) == torch_world.get_world_size(tg)
        assert dist.get_rank(g) == torch_world.get_rank(tg)
    assert m.device_type == tm.device_type == "cpu"


@needs8
def test_device_mesh_errors():
    m = dist.init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
    with pytest.raises(KeyError, match=r"'pp' is not one of the mesh's dim names \('dp', 'tp'\)"):
        m["pp"]
    with pytest.raises(ValueError, match="get_group: a 2-d mesh needs mesh_dim"):
        m.get_group()
    with pytest.raises(ValueError, match="mesh_dim 2 is out of range for a 2-d mesh"):
        m.get_local_rank(2)
    with pytest.raises(TypeError, match=r"mesh_shape '4' is not a tuple of ints"):
        dist.init_device_mesh("cpu", "4")
    other = dtorch.DeviceMesh("cpu", [4, 5, 6, 7])
    assert other.get_coordinate() is None
    with pytest.raises(ValueError, match="the current rank 0 is not in"):
        other.get_local_rank()


def test_dtensor_isinstance_and_methods():
    m = dtorch.init_device_mesh("cpu", (4,))
    g = torch.arange(24.).reshape(4, 6)
    x = distribute_tensor(g, m, [Shard(-1)])
    assert isinstance(x, DTensor) and isinstance(x, dtorch.Tensor)
    assert not isinstance(dtorch.ones(2), DTensor) and not isinstance(g, DTensor)
    assert x.placements == (Shard(1),) and x.device_mesh is m
    torch.testing.assert_close(x.full_tensor(), g)
    # to_local(): the current rank's (rank 0's) shard; to_local(r) rank r's,
    # split as torch's Shard splits (6 columns on 4 ranks: 2, 2, 2, 0)
    from torch.distributed.tensor import Shard as TorchShard
    ref = TorchShard(1)._split_tensor(g, 4, with_padding=False)[0]
    torch.testing.assert_close(x.to_local(), ref[0])
    for r in range(4):
        torch.testing.assert_close(x.to_local(r), ref[r])
    r = x.redistribute(m, [Replicate()], async_op=True)
    assert r.placements == (Replicate(),)
    torch.testing.assert_close(r.to_local(), g)
    with pytest.raises(TypeError, match=r"DTensor\(\.\.\.\): make a DTensor with distribute_tensor"):
        DTensor(g)
    with pytest.raises(TypeError, match="full_tensor: a single-device tensor is no DTensor"):
        dtorch.ones(2).full_tensor()


def test_distribute_tensor():
    m = dtorch.init_device_mesh("cpu", (4,))
    g = torch.randn(8, 3)
    for pl in ([Shard(0)], [Replicate()], [Partial()], None):
        x = distribute_tensor(g, m, pl)
        torch.testing.assert_close(x.full_tensor(), g)
    # from a dtorch tensor: differentiable
    leaf = dtorch.Tensor(g, requires_grad=True)
    x = distribute_tensor(leaf, m, [Shard(0)])
    (x * x).sum().backward()
    torch.testing.assert_close(leaf.grad.to_torch(), 2 * g)
    assert distribute_tensor(x, m, [Shard(0)]) is x
    with pytest.raises(ValueError, match=r"already a DTensor .* use redistribute"):
        distribute_tensor(x, m, [Replicate()])
    with pytest.raises(ValueError, match="src_data_rank 4 is not a rank of the 4-rank mesh"):
        distribute_tensor(g, m, [Shard(0)], src_data_rank=4)
    with pytest.raises(ValueError, match="Shard\\(dim=2\\) is out of range for a 2-d tensor"):
        distribute_tensor(g, m, [Shard(2)])
    with pytest.raises(ValueError, match=r"2 placements .* for a 1-d mesh"):
        distribute_tensor(g, m, [Shard(0), Shard(1)])
    with pytest.raises(ValueError, match="no device_mesh given and no `with mesh:` block"):
        distribute_tensor(g)
    with m:
        assert distribute_tensor(g).placements == (Replicate(),)
    with pytest.raises(TypeError, match="distribute_tensor: list is not a torch.Tensor"):
        distribute_tensor([1.0], m)


@needs8
def test_from_local_one_local_per_rank():
    m = dtorch.init_device_mesh("cpu", (2, 4))
    locs = [torch.randn(2, 3) for _ in range(8)]
    # Shard on both mesh dims of one tensor dim: torch's nesting (the
    # outer mesh dim splits first)
    x = DTensor.from_local(locs, m, [Shard(0), Shard(0)])
    torch.testing.assert_close(x.full_tensor(), torch.cat(locs, 0))
    for r in range(8):
        torch.testing.assert_close(x.to_local(r), locs[r])
    x = DTensor.from_local(locs, m, [Shard(1), Shard(0)])
    rows = [torch.cat(locs[4 * i:4 * i + 4], 0) for i in range(2)]
    torch.testing.assert_close(x.full_tensor(), torch.cat(rows, 1))
    x = DTensor.from_local(locs, m, [Replicate(), Partial()])
    torch.testing.assert_close(x.full_tensor(), sum(locs[0:4]))
    x = DTensor.from_local(locs, m, [Partial("max"), Replicate()])
    torch.testing.assert_close(x.full_tensor(), torch.maximum(locs[0], locs[4]))
    with pytest.raises(ValueError, match="run_check: the Replicate locals differ"):
        DTensor.from_local(locs, m, [Replicate(), Replicate()], run_check=True)
    same = [locs[0]] * 8
    torch.testing.assert_close(DTensor.from_local(same, m, [Replicate(), Replicate()],
                                                  run_check=True).full_tensor(), locs[0])


def test_from_local_one_tensor_is_every_ranks_local():
    m = dtorch.init_device_mesh("cpu", (4,))
    loc = torch.randn(3, 2)
    x = DTensor.from_local(loc, m, [Shard(0)])
    assert tuple(x.shape) == (12, 2)
    torch.testing.assert_close(x.full_tensor(), torch.cat([loc] * 4))
    torch.testing.assert_close(DTensor.from_local(loc, m, [Partial()]).full_tensor(), 4 * loc)
    torch.testing.assert_close(DTensor.from_local(loc, m, [Replicate()]).full_tensor(), loc)
    torch.testing.assert_close(DTensor.from_local(loc, m, [Shard(1)], shape=(3, 8),
                                                  stride=(8, 1)).full_tensor(),
                               torch.cat([loc] * 4, 1))
    # dtorch locals: differentiable
    leaf = dtorch.Tensor(loc, requires_grad=True)
    x = DTensor.from_local(leaf, m, [Shard(0)])
    (x * 3.0).sum().backward()
    torch.testing.assert_close(leaf.grad.to_torch(), torch.full((3, 2), 12.0))
    with pytest.raises(ValueError, match=r"shape \(5, 2\) is not the locals' global shape \(12, 2\)"):
        DTensor.from_local(loc, m, [Shard(0)], shape=(5, 2))
    with pytest.raises(ValueError, match="stride .* contiguous"):
        DTensor.from_local(loc, m, [Shard(0)], stride=(1, 12))
    with pytest.raises(ValueError, match="3 locals for a mesh of 4 ranks"):
        DTensor.from_local([loc] * 3, m, [Shard(0)])
    with pytest.raises(ValueError, match=r"rank 0's local has shape \(1, 2\) but dtorch's split"):
        DTensor.from_local([loc[:1], loc, loc, loc], m, [Shard(0)])
    with pytest.raises(TypeError, match="a local is already a DTensor"):
        DTensor.from_local(x, m, [Shard(0)])


def test_factories_against_torch():
    from dtorch.distributed import tensor as dt
    m = dtorch.init_device_mesh("cpu", (4,))
    z = dt.zeros(4, 6, device_mesh=m, placements=[Shard(-1)])
    assert isinstance(z, DTensor) and z.placements == (Shard(1),)
    torch.testing.assert_close(z.full_tensor(), torch.zeros(4, 6))
    torch.testing.assert_close(dt.ones((2, 3), device_mesh=m).full_tensor(), torch.ones(2, 3))
    f = dt.full((4, 2), 2.5, device_mesh=m, placements=[Shard(0)])
    torch.testing.assert_close(f.full_tensor(), torch.full((4, 2), 2.5))
    assert tuple(dt.empty(8, device_mesh=m, placements=[Shard(0)]).shape) == (8,)
    dtorch.manual_seed(5)
    a = dt.randn(8, 4, device_mesh=m, placements=[Shard(0)]).full_tensor()
    dtorch.manual_seed(5)
    b = dt.randn(8, 4, device_mesh=m, placements=[Replicate()]).full_tensor()
    torch.testing.assert_close(a, b)  # the values one device would draw
    r = dt.rand(100, device_mesh=m, placements=[Shard(0)], dtype=torch.float64)
    assert r.dtype is torch.float64 and 0 <= float(r.full_tensor().min())
    assert dt.zeros(3, device_mesh=m, requires_grad=True).requires_grad
    with m:
        assert dt.ones(4).device_mesh is m
    with pytest.raises(ValueError, match="zeros: no device_mesh given"):
        dt.zeros(4)
    with pytest.raises(ValueError, match="layout torch.sparse_coo: only torch.strided"):
        dt.zeros(4, device_mesh=m, layout=torch.sparse_coo)


def test_comm_debug_mode_counts_torchs_op_names():
    m = dtorch.init_device_mesh("cpu", (4,))
    x = distribute_tensor(torch.randn(8, 8), m, [Shard(0)])
    funcol = torch.ops.c10d_functional
    with CommDebugMode() as comm:
        a = x.redistribute(m, [Replicate()])          # all_gather
        b = x.redistribute(m, [Shard(1)])             # all_to_all
        p = distribute_tensor(torch.ones(8), m, [Partial()])
        c = p.redistribute(m, [Replicate()])          # all_reduce
        d = p.redistribute(m, [Shard(0)])             # reduce_scatter
    counts = comm.get_comm_counts()
    assert counts[funcol.all_gather_into_tensor] == 1
    assert counts[funcol.all_to_all_single] == 1
    assert counts[funcol.all_reduce] == 1
    assert counts["c10d_functional.reduce_scatter_tensor"] == 1
    assert counts[funcol.broadcast] == 0
    assert comm.get_total_counts() == 4
    assert comm.get_total_bytes() > 0
    del a, b, c, d
    with CommDebugMode() as comm:
        (x * 2.0).sum(1)
    assert comm.get_total_counts() == 0 and dict(comm.get_comm_counts()) == {}
    with pytest.raises(RuntimeError, match="another CommDebugMode is already open"):
        with CommDebugMode():
            with CommDebugMode():
                pass


def test_visualize_sharding():
    m = dtorch.init_device_mesh("cpu", (4,))
    x = distribute_tensor(torch.zeros(4, 8), m, [Shard(1)])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        visualize_sharding(x, header="w1.weight")
    text = out.getvalue()
    assert text.startswith("w1.weight\n")
    body = text.splitlines()[1:]
    cells = [ln for ln in body if any(ch.isdigit() for ch in ln) and "mesh" not in ln]
    # one row of four blocks, ranks 0..3 left to right
    labels = cells[0].replace("│", " ").split()
    assert labels == ["0", "1", "2", "3"]
    assert "S(1)" in text
    with pytest.raises(TypeError, match="visualize_sharding: list is not a dtorch.Tensor"):
        visualize_sharding([1])
    with pytest.raises(dtorch.DTorchError):
        visualize_sharding(distribute_tensor(torch.zeros(2, 2, 2), m, [Shard(0)]))


@needs8
def test_the_current_rank_is_this_processs_first_rank(monkeypatch):
    """In an MPI job a process hosts a block of the ranks: get_rank() and
    every "current rank" answer follow the one decision in _world (here
    the runtime's locality is replaced by process 1 of 2's: ranks 4-7)."""
    from dtorch.distributed import _capi
    monkeypatch.setattr(_capi, "dt_runtime_rank_is_local", lambda rt, r: r >= N // 2)
    dist.init_process_group()
    assert dist.get_rank() == N // 2 and dist.get_world_size() == N
    m = dtorch.init_device_mesh("cpu", (2, N // 2), mesh_dim_names=("dp", "tp"))
    assert m.get_rank() == N // 2 and m.get_coordinate() == (1, 0)
    assert m["tp"].mesh.tolist() == list(range(N // 2, N))
    assert list(m.get_group("dp").ranks) == [0, N // 2]
    assert dist.get_rank(m.get_group("dp")) == 1
    g = torch.arange(float(N))
    x = distribute_tensor(g, m, [Replicate(), Shard(0)])
    torch.testing.assert_close(x.to_local(), g[:2])  # rank N/2: tp coordinate 0
    y = distribute_tensor(g, m, [Shard(0), Replicate()])
    torch.testing.assert_close(y.to_local(), g[N // 2:])
    with pytest.raises(ValueError, match=f"rank=0 but this process's first rank is {N // 2}"):
        dist.destroy_process_group() or dist.init_process_group(rank=0)


def test_placement_str_and_repr_are_torchs():
    import torch.distributed.tensor as tdt
    from dtorch.distributed.tensor import Partial, Replicate, Shard
    for ours, theirs in [(Shard(0), tdt.Shard(0)), (Shard(2), tdt.Shard(2)),
                         (Replicate(), tdt.Replicate()), (Partial(), tdt.Partial()),
                         (Partial("max"), tdt.Partial("max")),
                         (Partial("avg"), tdt.Partial("avg"))]:
        assert str(ours) == str(theirs) and repr(ours) == repr(theirs)
        assert f"{ours}" == f"{theirs}"


def test_view_shards():
    """Tensor.view_shards (dt_view_shards): the shards as another global
    shape, no data moved; each rank's local is its contiguous piece of the
    row-major order; a layout whose shards would move is refused naming
    the rank; the view refuses in-place writes and shows writes into its
    base."""
    mesh = dtorch.init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
    x = torch.arange(16 * 6, dtype=torch.float32).reshape(16, 6)
    t = distribute_tensor(x, mesh, [Replicate(), Shard(0)])
    v = t.view_shards((4, 24), [Replicate(), Shard(0)])
    assert tuple(v.shape) == (4, 24) and not v.requires_grad
    assert torch.equal(torch.from_numpy(v.full_tensor().numpy()), x.reshape(4, 24))
    # the optimiser's layout: each dp rank holds half of its tp rank's row
    q = v.redistribute(mesh, [Shard(1), Shard(0)])
    for r in range(8):
        want = x.reshape(4, 24)[r % 4, (r // 4) * 12:(r // 4 + 1) * 12]
        assert torch.equal(q.to_local(r).reshape(-1), want)
    with pytest.raises(Exception, match=r"view_shards.*rank 0's shard"):
        distribute_tensor(x, mesh, [Replicate(), Shard(1)]).view_shards(
            (4, 24), [Replicate(), Shard(0)])
    with pytest.raises(Exception, match="does not hold"):
        t.view_shards((5, 24), [Replicate(), Shard(0)])
    with pytest.raises(ValueError, match="single-device"):
        dtorch.Tensor(x).view_shards((4, 24), [Shard(0)])
    with pytest.raises(Exception):
        v.copy_(v + 1)  # it would write t's shards
    y = x * -3
    t.copy_(distribute_tensor(y, mesh, [Replicate(), Shard(0)]))
    assert torch.equal(torch.from_numpy(v.full_tensor().numpy()), y.reshape(4, 24))
