"""A sequence-parallel transformer MLP block, written for PyTorch: the
LayerNorms run on sequence shards (SequenceParallel), the MLPs are
column- then row-parallel, gathering the sequence before the first Linear
(one all_gather) and scattering it after the second (one reduce_scatter).
The first MLP gets its input prepared by PrepareModuleInput, the second by
ColwiseParallel(input_layouts=Shard(1)); the residual adds DTensors, so
the block's input is distributed Shard(1) and the last Linear keeps its
output a DTensor (use_local_output=False)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class Block(nn.Module):
    def __init__(self, dim=16, hidden=32):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.mlp1 = FeedForward(dim, hidden)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp2 = FeedForward(dim, hidden)

    def forward(self, x):
        x = x + self.mlp1(self.norm1(x))
        return x + self.mlp2(self.norm2(x))


def plan():
    return {
        "norm1": SequenceParallel(),
        "mlp1": PrepareModuleInput(input_layouts=(Shard(1),),
                                   desired_input_layouts=(Replicate(),)),
        "mlp1.w1": ColwiseParallel(),
        "mlp1.w2": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
        "norm2": SequenceParallel(),
        "mlp2.w1": ColwiseParallel(input_layouts=Shard(1)),
        "mlp2.w2": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
    }


def train(tp_size=4, steps=6, init=None, inputs=None, lr=0.01, log=print):
    """Trains Block on a 1-d mesh of tp_size with the sequence (dim 1)
    sharded; returns the starting weights, inputs, losses and parameters."""
    mesh = init_device_mesh("cpu", (tp_size,))
    torch.manual_seed(1)
    block = Block()
    if init is not None:
        block.load_state_dict(init)
    start = {k: v.detach().clone() for k, v in block.state_dict().items()}
    block = parallelize_module(block, mesh, plan())
    optimizer = torch.optim.AdamW(block.parameters(), lr=lr, weight_decay=0.1)
    losses, batches = [], []
    for i in range(steps):
        if inputs is None:
            torch.manual_seed(200 + i)
            x = torch.randn(2, 8, 16)         # batch, sequence, features
        else:
            x = inputs[i]
        batches.append(x)
        x = distribute_tensor(x, mesh, [Shard(1)])
        optimizer.zero_grad()
        out = block(x)
        assert isinstance(out, DTensor) and out.placements == (Shard(1),)
        loss = out.pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.full_tensor().item())
        if mesh.get_rank() == 0:
            log(f"SP step {i}: loss {losses[-1]:.6f}")
    return {"init": start, "inputs": batches, "losses": losses,
            "params": dict(block.named_parameters())}
