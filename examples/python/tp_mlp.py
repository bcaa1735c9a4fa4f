"""Tensor parallelism on a two-layer MLP, written for PyTorch and run on
dtorch by changing its imports (examples/python/torch_on_dtorch.py).

in_proj is column-parallel and out_proj row-parallel (Megatron-LM's
split), so a forward pass needs one all_reduce, after out_proj; AdamW is
made after parallelize_module, so it holds the DTensor parameters.

    python examples/python/tp_mlp.py               # dtorch vs torch, exits 1 on a mismatch
    python examples/python/torch_on_dtorch.py examples/python/tp_mlp.py   # dtorch only

Run directly, the file loads itself twice: on dtorch (a mesh of 4 ranks,
every rank in this process) and on real torch (one gloo rank, its own
parallelize_module), the torch run starting from dtorch's weights and
batches, and compares the losses and trained weights to 1e-5.
"""
import logging
import os
import sys

import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

logging.basicConfig(format="%(message)s", level=logging.INFO)
logger = logging.getLogger("tp_mlp")


class ToyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(10, 32)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(32, 5)

    def forward(self, x):
        return self.out_proj(self.relu(self.in_proj(x)))


def train(world_size=4, steps=10, init=None, inputs=None, log=logger.info):
    mesh = init_device_mesh("cpu", (world_size,))
    rank = mesh.get_rank()

    def rank_log(msg):
        if rank == 0:
            log(msg)

    rank_log(f"device mesh: {mesh}")
    torch.manual_seed(0)
    model = ToyMLP()
    if init is not None:
        model.load_state_dict(init)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model = parallelize_module(model, mesh, {"in_proj": ColwiseParallel(),
                                             "out_proj": RowwiseParallel()})
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.02)
    losses, batches = [], []
    for i in range(steps):
        if inputs is None:
            torch.manual_seed(i)            # every TP rank sees the same batch
            x = torch.rand(20, 10)
        else:
            x = inputs[i]
        batches.append(x)
        optimizer.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        rank_log(f"TP iter {i}: loss {losses[-1]:.6f}")
    return {"init": start, "inputs": batches, "losses": losses,
            "params": dict(model.named_parameters())}


def compare():
    """This file on dtorch and on torch; 0 when they agree."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_on_dtorch as tod
    got = tod.host(tod.load_program(__file__, "dtorch").train(world_size=4))
    tod.init_torch_one_rank()
    want = tod.host(tod.load_program(__file__, "torch").train(
        world_size=1, init=got["init"], inputs=got["inputs"], log=lambda m: None))
    bad = tod.mismatches(got, want)
    print("\n".join(bad) or f"dtorch (4 ranks) == torch: {len(got['losses'])} losses "
          f"and {len(got['params'])} parameters to 1e-5")
    return 1 if bad else 0


if __name__ == "__main__":
    if torch.__name__ != "torch":       # run by torch_on_dtorch.py: torch is dtorch
        train()
    else:
        sys.exit(compare())
