"""A sequence-parallel block as torchrun runs it: LayerNorm under
SequenceParallel (activations sharded along the sequence), then an MLP
column-parallel in (the sequence gathered) and row-parallel out (reduced
and scattered back along the sequence), a residual on the local shard.
Each rank feeds its own slice of the sequence; its loss is its shard's
part of the global mean, summed over the ranks for the log. Written for
torch; run under torchrun and python -m dtorch.run.

    torchrun --nproc-per-node 4 sequence_parallel.py
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

BATCH, SEQ, DIM, HIDDEN, STEPS, LR = 2, 8, 6, 16, 4, 0.1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.w1 = nn.Linear(DIM, HIDDEN)
        self.act = nn.GELU()
        self.w2 = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.w2(self.act(self.w1(self.norm(x))))


def fill_(model):
    with torch.no_grad():
        for i, (_, p) in enumerate(model.named_parameters()):
            v = torch.arange(p.numel(), dtype=torch.float32)
            p.copy_((torch.cos(v * 0.23 + i) * 0.4 + (1.0 if i == 0 else 0.0))
                    .reshape(p.shape))


def sequence(step):
    """The global input [BATCH, SEQ, DIM] of a step."""
    v = torch.arange(BATCH * SEQ * DIM, dtype=torch.float32)
    return torch.sin(v * 0.07 + step * 0.5).reshape(BATCH, SEQ, DIM)


def main():
    world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (world,))
    model = Block()
    fill_(model)
    model = parallelize_module(model, mesh, {
        "norm": SequenceParallel(),
        "w1": ColwiseParallel(input_layouts=Shard(1)),
        "w2": RowwiseParallel(output_layouts=Shard(1)),
    })
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    part = SEQ // world
    for step in range(STEPS):
        x = sequence(step)[:, rank * part:(rank + 1) * part, :]
        y = model(x) + x
        loss = (y ** 2).sum() / (BATCH * SEQ * DIM)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total)
        print(f"loss {step} {total.item():.10e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
