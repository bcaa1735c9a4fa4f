"""2-D parallelism as torchrun runs it: a (dp, tp) mesh, the MLP
tensor-parallel over "tp", each dp replica its own batch, the gradients
averaged over "dp" with dist.all_reduce on each gradient's local shard
(the dp group of the mesh), AdamW. Written for torch; run under
torchrun and python -m dtorch.run (world size 4: dp 2 x tp 2).

    torchrun --nproc-per-node 4 dp_tp.py
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

DIM, HIDDEN, OUT, BATCH, STEPS, LR = 8, 16, 4, 4, 4, 0.05


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN)
        self.act = nn.Tanh()
        self.down = nn.Linear(HIDDEN, OUT)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


def fill_(model):
    with torch.no_grad():
        for i, (_, p) in enumerate(model.named_parameters()):
            v = torch.arange(p.numel(), dtype=torch.float32)
            p.copy_((torch.sin(v * 0.29 + 2 * i) * 0.35).reshape(p.shape))


def batch(step, replica):
    v = torch.arange(BATCH * DIM, dtype=torch.float32)
    x = torch.cos(v * 0.13 + step + 10 * replica).reshape(BATCH, DIM)
    return x, torch.sin(x[:, :OUT] * 3.0)


def main():
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh["dp"], mesh["tp"]
    replica = dp.get_local_rank()
    model = MLP()
    fill_(model)
    model = parallelize_module(model, tp, {"up": ColwiseParallel(),
                                           "down": RowwiseParallel()})
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    dp_group = dp.get_group()
    for step in range(STEPS):
        x, target = batch(step, replica)
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        for p in model.parameters():
            g = p.grad.to_local()
            dist.all_reduce(g, group=dp_group)
            g.div_(dp.size())
        optimizer.step()
        optimizer.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean, group=dp_group)
        print(f"loss {step} {mean.item() / dp.size():.10e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
