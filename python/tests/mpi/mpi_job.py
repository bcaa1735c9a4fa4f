"""A PyTorch-style DP x TP program run as one process of an MPI job
(python/tests/test_mpi_python.py starts it under mpirun, and alone): each
process hosts its block of the 8 ranks; the DTensor values, the TP MLP's
losses and parameters are printed by process 0 as hex floats, which the
test compares across process counts bit for bit, and with real torch on
one device to 1e-5. Every process checks its own answers of the
process-group calls."""
import os
import sys

import torch

import dtorch
import dtorch.distributed as dist
import dtorch.nn as nn
import dtorch.optim as optim
from dtorch.distributed.device_mesh import init_device_mesh
from dtorch.distributed.tensor import Replicate, Shard, distribute_tensor
from dtorch.distributed.tensor.parallel import ColwiseParallel, \
    RowwiseParallel, parallelize_module

N = 8


def fail(msg):
    print(f"mpi_job: process {dist.get_rank()}: {msg}", file=sys.stderr)
    sys.exit(1)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(16, 32)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(32, 16)

    def forward(self, x):
        return self.out_proj(self.relu(self.in_proj(x)))


def main():
    dist.init_process_group()
    procs = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    me = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    if dist.get_world_size() != N:
        fail(f"get_world_size() {dist.get_world_size()}, want {N}")
    if dist.get_rank() != me * (N // procs):
        fail(f"get_rank() {dist.get_rank()}, want {me * (N // procs)}")
    mesh = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
    if mesh.get_rank() != dist.get_rank():
        fail(f"mesh.get_rank() {mesh.get_rank()}")

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g)
    w = torch.randn(16, 12, generator=g)
    dx = distribute_tensor(x, mesh, [Shard(0), Replicate()])
    dw = distribute_tensor(w, mesh, [Replicate(), Shard(1)])
    y = (dx @ dw).full_tensor()
    if not torch.allclose(y, x @ w, rtol=1e-5, atol=1e-5):
        fail("matmul of DTensors differs from torch's")

    # the TP MLP over mesh["tp"], data parallel over "dp"
    model = MLP()
    ref = {k: v.to_torch()
           for k, v in model.state_dict().items()}
    tp = parallelize_module(model, mesh, {"in_proj": ColwiseParallel(),
                                          "out_proj": RowwiseParallel()})
    opt = optim.AdamW(tp.parameters(), lr=1e-2)
    data = torch.randn(4, 8, 16, generator=g)
    target = torch.randn(4, 8, 16, generator=g)
    losses = []
    for step in range(4):
        inp = distribute_tensor(data[step], mesh, [Shard(0), Replicate()])
        tgt = distribute_tensor(target[step], mesh, [Shard(0), Replicate()])
        loss = nn.functional.mse_loss(tp(inp), tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.full_tensor()))

    # real torch on one device from the same weights
    tm = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                             torch.nn.Linear(32, 16))
    with torch.no_grad():
        tm[0].weight.copy_(ref["in_proj.weight"])
        tm[0].bias.copy_(ref["in_proj.bias"])
        tm[2].weight.copy_(ref["out_proj.weight"])
        tm[2].bias.copy_(ref["out_proj.bias"])
    topt = torch.optim.AdamW(tm.parameters(), lr=1e-2)
    for step in range(4):
        tl = torch.nn.functional.mse_loss(tm(data[step]), target[step])
        topt.zero_grad()
        tl.backward()
        topt.step()
        if abs(tl.item() - losses[step]) > 1e-5 * (1 + abs(tl.item())):
            fail(f"step {step}: loss {losses[step]}, torch {tl.item()}")
    params = [p.full_tensor() for p in tp.parameters()]
    for p, q in zip(params, tm.parameters()):
        if not torch.allclose(p, q.detach(), rtol=1e-5, atol=1e-6):
            fail("a parameter differs from torch's after training")

    if dist.get_rank() == 0:
        print("values", y.flatten().tolist()[:8])
        print("losses", [v.hex() for v in losses])
        print("params", [float(p.double().sum()).hex() for p in params])
    # barrier meets every process: the last one's mark is there after it
    mark = os.environ.get("MPI_JOB_MARK")
    if mark and me == procs - 1:
        with open(mark, "w") as f:
            f.write("here")
    dist.barrier()
    if mark and not os.path.exists(mark):
        fail(f"barrier returned before process {procs - 1} reached it")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
