"""DTensor's basic calls as PyTorch's DTensor documentation shows them,
written for PyTorch: distribute_tensor, redistribute, full_tensor,
to_local, DTensor.from_local, placements, a factory and ops on DTensors.

run() returns two dicts. "same": values that do not depend on how many
ranks the mesh has (global values, placements, shapes per rank times the
rank count), compared between two runs on meshes of different sizes.
"pairs": (got, want) pairs that must be equal within a run, where the
value itself depends on the mesh size (this rank's shard, from_local's
global of equal locals)."""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import (
    DTensor,
    Partial,
    Replicate,
    Shard,
    distribute_tensor,
)
import torch.distributed.tensor as dt


def run(mesh_size=4, inputs=None, log=print):
    mesh = init_device_mesh("cpu", (mesh_size,))
    n, me = mesh.size(), mesh.get_rank()
    if inputs is None:
        torch.manual_seed(4)
        inputs = [torch.randn(8, 6), torch.randn(6, 3)]
    big, w = inputs
    same, pairs = {}, {}

    rows = distribute_tensor(big, mesh, [Shard(0)])          # rank r: rows r*8/n..
    cols = rows.redistribute(mesh, [Shard(1)])               # all_to_all
    full = cols.redistribute(mesh, [Replicate()])            # all_gather
    same["placements"] = [repr(p) for t in (rows, cols, full) for p in t.placements]
    same["rows.full_tensor"] = rows.full_tensor()
    same["cols.full_tensor"] = cols.full_tensor()
    same["full.full_tensor"] = full.full_tensor()
    same["shape"] = list(rows.shape)
    same["isinstance DTensor"] = isinstance(rows, DTensor)
    same["rank"] = me == dist.get_rank()
    same["world"] = dist.get_world_size() >= n

    mine = rows.to_local()                                   # this rank's shard
    same["local rows x ranks"] = mine.shape[0] * n
    pairs["to_local is my chunk"] = (mine, big.chunk(n, dim=0)[me])
    pairs["full's local is everything"] = (full.to_local(), big)

    # ops follow the placements: rows @ replicated w stays row-sharded
    wr = distribute_tensor(w, mesh, [Replicate()])
    y = rows @ wr
    same["matmul placements"] = [repr(p) for p in y.placements]
    same["matmul"] = y.full_tensor()
    s = (y.relu() * 2.0).sum()
    same["sum"] = s.full_tensor()

    # from_local: every rank passes the same local here
    local = torch.ones(2, 3) * 0.5
    sh = DTensor.from_local(local, mesh, [Shard(0)])
    same["from_local Shard rows / ranks"] = sh.shape[0] // n
    pairs["from_local Shard"] = (sh.full_tensor(), torch.cat([local] * n))
    rep = DTensor.from_local(local, mesh, [Replicate()])
    same["from_local Replicate"] = rep.full_tensor()
    part = DTensor.from_local(local, mesh, [Partial()])
    pairs["from_local Partial sums"] = (part.full_tensor(), local * n)
    same["Partial to Replicate"] = repr(part.redistribute(mesh, [Replicate()]).placements[0])

    ones = dt.ones(4, 4, device_mesh=mesh, placements=[Shard(1)])
    same["ones"] = ones.full_tensor()
    same["ones placements"] = repr(ones.placements[0])
    if me == 0:
        log(f"rank {me} of {n}: my shard {tuple(mine.shape)} of {tuple(rows.shape)}")
    return {"inputs": inputs, "same": same, "pairs": pairs}
