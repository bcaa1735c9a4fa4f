"""The DTorch API guide's snippets, section by section, each checked
against real torch computing the same thing (exits 1 on a mismatch).

    python examples/python/api_guide.py

Unlike tp_mlp.py and dp_tp_transformer.py this is dtorch's own API (the
guide's): DeviceMesh and placements from dtorch.distributed_spec,
dtorch.Tensor(data, device_mesh=, placements=), to_local(rank),
redistribute / redistribute_like / redistribute_by_dict, to_torch and
to_torch_async. python/tests/test_api_guide.py tests the same snippets
and their error messages.
"""
import os

# the guide's "cuda" meshes on a machine without a GPU: emulated on the CPU
os.environ.setdefault("DTORCH_DTENSOR_IN_SAME_DEVICE", "1")

import asyncio
import sys
import warnings

import torch

import dtorch
from dtorch.distributed_spec import DeviceMesh, Partial, Replicate, Shard, init_device_mesh

warnings.filterwarnings("ignore", category=dtorch.distributed_spec.DTorchEmulationWarning)
failures = []


def check(what, got, want, exact=False):
    """Records a failure unless got equals want (tensors: to float32
    rounding, or exactly)."""
    try:
        if isinstance(want, torch.Tensor):
            tol = dict(rtol=0, atol=0) if exact else dict(rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(got, want, **tol)
        elif got != want:
            raise AssertionError(f"{got!r} != {want!r}")
        print(f"  ok   {what}")
    except AssertionError as e:
        failures.append(what)
        print(f"  FAIL {what}: {str(e).splitlines()[0]}")


print("1. the single-device API is PyTorch's")
a = dtorch.randn(4, 8)
b = dtorch.matmul(a, a.transpose(0, 1))
c = (a + a * 2.0).relu().sum()
ta = a.to_torch()
check("matmul(a, a.T)", b.to_torch(), ta @ ta.T)
check("(a + 2a).relu().sum()", c.to_torch(), (ta + ta * 2.0).relu().sum())
check("dtypes are torch's", dtorch.float32 is torch.float32, True)

print("2. DeviceMesh and DTensor creation")
mesh = DeviceMesh("cuda", [[0, 1], [2, 3]], mesh_dim_names=["dp", "tp"])
check("DeviceMesh shape", mesh.shape, (2, 2))
mesh = init_device_mesh("cuda", mesh_shape=(2, 2), mesh_dim_names=["dp", "tp"])
check("init_device_mesh", repr(mesh),
      "DeviceMesh('cuda', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))")
dt = dtorch.zeros(4, 128, 256, device_mesh=mesh, placements=[Shard(0), Replicate()])
check("zeros: rank 3's shard", tuple(dt.to_local(3).shape), (2, 128, 256))
torch_t = torch.randn(4, 128)
dt = dtorch.Tensor(torch_t, device_mesh=mesh, placements=[Shard(0), Replicate()])
check("from torch: rank 2 (dp 1) holds rows 2:4", dt.to_local(2), torch_t[2:4], exact=True)
check("to_torch is the global value", dt.to_torch(), torch_t, exact=True)
check("Partial() is a sum", Partial() == Partial("sum"), True)

print("3. placements propagate; illegal ones raise with the legal ones")
a = dtorch.Tensor(torch_t, device_mesh=mesh, placements=[Shard(0), Replicate()])
s = dtorch.nn.functional.softmax(a, dim=-1)
check("softmax keeps [S(0), R]", list(s.placements), [Shard(0), Replicate()])
check("softmax value", s.to_torch(), torch.softmax(torch_t, dim=-1))
bad = dtorch.Tensor(torch_t, device_mesh=mesh, placements=[Replicate(), Shard(1)])
try:
    dtorch.nn.functional.softmax(bad, dim=-1)
    check("softmax over a sharded dim raises", "no error", "PlacementError")
except dtorch.PlacementError as e:
    check("softmax over a sharded dim names the legal placements",
          "legal on mesh dim 1: [R], [S(0)]" in str(e), True)
fixed = dtorch.nn.functional.softmax(bad.redistribute(mesh, [Replicate(), Replicate()]), dim=-1)
check("after redistribute", fixed.to_torch(), torch.softmax(torch_t, dim=-1))

print("4. redistribute")
value = torch.arange(32, dtype=torch.float32).reshape(4, 8)
tensor = dtorch.Tensor(value, device_mesh=mesh, placements=[Replicate(), Shard(1)])
new = tensor.redistribute(device_mesh=mesh, placements=[Shard(0), Replicate()])
check("redistribute placements", list(new.placements), [Shard(0), Replicate()])
check("redistribute: rank 1's rows", new.to_local(1), value[0:2], exact=True)
like = tensor.redistribute_like(dtorch.zeros(4, 8, device_mesh=mesh,
                                             placements=[Shard(1), Shard(0)]))
check("redistribute_like placements", list(like.placements), [Shard(1), Shard(0)])
check("redistribute_like value", like.to_torch(), value, exact=True)
kept = tensor.redistribute_by_dict(placements_dict={"dp": Shard(0)},
                                   default_placement_mode="keep")
check("redistribute_by_dict keep", list(kept.placements), [Shard(0), Shard(1)])
check("redistribute_by_dict value", kept.to_torch(), value, exact=True)

print("5. to_torch_async")
x, y = dtorch.rand(300, 200), dtorch.rand(200, 100)
future = dtorch.matmul(x, y).to_torch_async()
check("future.get()", future.get(), x.to_torch() @ y.to_torch())


async def fetch(t):
    return await t.to_torch_async()

check("await future", asyncio.run(fetch(dtorch.Tensor(torch.ones(2, 3)))), torch.ones(2, 3),
      exact=True)

print(f"{'all snippets agree with torch' if not failures else 'FAILED: ' + ', '.join(failures)}")
sys.exit(1 if failures else 0)
