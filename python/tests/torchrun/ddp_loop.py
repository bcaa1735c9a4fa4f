"""Data parallelism by hand, as DDP does it: every rank builds the model
(its own start, different on each rank), the parameters are broadcast
from rank 0, each rank trains on its own batch, and the gradients are
all-reduced (async_op=True handles, waited before the step) and
averaged; SGD with momentum. Each step's mean loss is gathered with
all_gather_into_tensor. Written for torch; run under torchrun and
python -m dtorch.run.

    torchrun --nproc-per-node 4 ddp_loop.py
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn

DIM, HIDDEN, OUT, BATCH, STEPS, LR = 6, 12, 3, 5, 5, 0.1


def start(model, rank):
    """Rank 0's weights are the formula's; the others' are off by their
    rank (the broadcast makes them rank 0's)."""
    with torch.no_grad():
        for i, (_, p) in enumerate(model.named_parameters()):
            v = torch.arange(p.numel(), dtype=torch.float32)
            p.copy_((torch.sin(v * 0.41 + i) * 0.3 + rank).reshape(p.shape))


def batch(step, rank):
    v = torch.arange(BATCH * DIM, dtype=torch.float32)
    x = torch.sin(v * 0.17 + 3 * step + 7 * rank).reshape(BATCH, DIM)
    return x, torch.cos(x[:, :OUT])


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"])
    model = nn.Sequential(nn.Linear(DIM, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT))
    start(model, rank)
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    for step in range(STEPS):
        x, target = batch(step, rank)
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        handles = [dist.all_reduce(p.grad, op=dist.ReduceOp.SUM, async_op=True)
                   for p in model.parameters()]
        for h in handles:
            h.wait()
        for p in model.parameters():
            p.grad /= world
        optimizer.step()
        optimizer.zero_grad()
        losses = torch.zeros(world)
        dist.all_gather_into_tensor(losses, loss.detach().reshape(1))
        print(f"loss {step} {losses.mean().item():.10e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
