"""A tensor-parallel MLP as torchrun runs it: in_proj column-parallel,
out_proj row-parallel (parallelize_module on a 1-d mesh of every rank),
AdamW, the loss logged on rank 0 through device_mesh.get_rank() and
printed by every rank. Written for torch; tests run it under torchrun
and, with its torch imports made dtorch's, under python -m dtorch.run.

    torchrun --nproc-per-node 4 tp_mlp.py
"""
import logging
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

DIM, HIDDEN, OUT, BATCH, STEPS, LR = 8, 32, 4, 6, 5, 0.05

logger = logging.getLogger("tp_mlp")


def rank_log(rank, message):
    """Logs on rank 0 only, as the TP examples do."""
    if rank == 0:
        logger.info(message)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(DIM, HIDDEN)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(HIDDEN, OUT)

    def forward(self, x):
        return self.out_proj(self.relu(self.in_proj(x)))


def fill_(model):
    """Weights from a formula, the same under every framework."""
    with torch.no_grad():
        for i, (_, p) in enumerate(model.named_parameters()):
            v = torch.arange(p.numel(), dtype=torch.float32)
            p.copy_((torch.sin(v * 0.37 + i) * 0.3).reshape(p.shape))


def batch(step):
    v = torch.arange(BATCH * DIM, dtype=torch.float32)
    x = torch.cos(v * 0.11 + step).reshape(BATCH, DIM)
    return x, torch.tanh(x[:, :OUT] * 2.0)


def main():
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (int(os.environ["WORLD_SIZE"]),))
    rank = mesh.get_rank()
    rank_log(rank, f"device mesh {mesh}")
    model = MLP()
    fill_(model)
    model = parallelize_module(model, mesh, {"in_proj": ColwiseParallel(),
                                             "out_proj": RowwiseParallel()})
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, foreach=True)
    for step in range(STEPS):
        x, target = batch(step)
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        rank_log(rank, f"step {step}: loss {loss.item():.6f}")
        print(f"loss {step} {loss.item():.10e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
