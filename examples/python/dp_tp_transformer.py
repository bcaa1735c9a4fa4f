"""A transformer block trained with data x tensor parallelism, written
with PyTorch's imports and run on dtorch by changing them
(torch_on_dtorch.py): RMSNorm, multi-head attention on
scaled_dot_product_attention (causal), a GELU MLP, LayerNorm, residuals.

The mesh is ("dp", "tp") = (2, 4). parallelize_module lays the block out
Megatron's way: wq / wk / wv and w1 column-parallel (heads and hidden
units split over "tp"), wo and w2 row-parallel (one all_reduce each);
the norms are replicated (distribute_module). Each batch is sharded over
"dp" (distribute_tensor(x, mesh, [Shard(0), Replicate()])); the loss is
the mean over the whole batch, so the gradients are the dp groups'
average.

dtorch's styles accept the 2-d mesh and act on its "tp" dim
(docs/python-distributed.md); torch's parallelize_module takes only the
1-d mesh["tp"] and leaves the dp dim to FSDP or DDP. So this file is
compared with torch running the same block unparallelised (mesh_shape
None): run directly, it trains on dtorch, then on torch from dtorch's
weights and batches, prints both losses and exits 1 unless every loss
and trained weight agrees to 1e-5.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_module, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

DIM, HEADS, SEQ, BATCH = 32, 4, 8, 4


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x):
        b, s, _ = x.shape                   # global shapes (dtorch's one controller)
        q, k, v = (w(x).view(b, s, HEADS, DIM // HEADS).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, s, DIM))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, 4 * DIM)
        self.w2 = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_norm = nn.RMSNorm(DIM, eps=1e-6)
        self.attn = Attention()
        self.mlp_norm = nn.LayerNorm(DIM)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


PLAN = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(),
        "attn.wv": ColwiseParallel(), "attn.wo": RowwiseParallel(),
        "mlp.w1": ColwiseParallel(), "mlp.w2": RowwiseParallel()}


def train(mesh_shape=(2, 4), steps=5, init=None, inputs=None, log=print):
    torch.manual_seed(0)
    block = Block()
    if init is not None:
        block.load_state_dict(init)
    start = {k: v.detach().clone() for k, v in block.state_dict().items()}
    mesh = None
    if mesh_shape is not None:
        mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=("dp", "tp"))
        block = parallelize_module(block, mesh, PLAN)
        for norm in (block.attn_norm, block.mlp_norm):
            distribute_module(norm, mesh)   # Replicate() everywhere
        if mesh.get_rank() == 0:
            log(f"mesh {mesh}; attn.wq.weight {block.attn.wq.weight.placements}, "
                f"attn.wo.weight {block.attn.wo.weight.placements}")
    optimizer = torch.optim.AdamW(block.parameters(), lr=1e-3, weight_decay=0.01)
    losses, batches = [], []
    for i in range(steps):
        if inputs is None:
            torch.manual_seed(10 + i)
            x, target = torch.randn(BATCH, SEQ, DIM), torch.randn(BATCH, SEQ, DIM)
        else:
            x, target = inputs[i]
        batches.append((x, target))
        if mesh is not None:
            x = distribute_tensor(x, mesh, [Shard(0), Replicate()])
            target = distribute_tensor(target, mesh, [Shard(0), Replicate()])
        optimizer.zero_grad()
        loss = F.mse_loss(block(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if mesh is None or mesh.get_rank() == 0:
            log(f"step {i}: loss {losses[-1]:.6f}")
    return {"init": start, "inputs": batches, "losses": losses,
            "params": dict(block.named_parameters())}


def compare():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_on_dtorch as tod
    print("dtorch, dp x tp = 2 x 4:")
    got = tod.host(tod.load_program(__file__, "dtorch").train())
    print("torch, unparallelised:")
    want = tod.host(tod.load_program(__file__, "torch").train(
        mesh_shape=None, init=got["init"], inputs=got["inputs"]))
    bad = tod.mismatches(got, want)
    print("\n".join(bad) or f"equal to 1e-5: {len(got['losses'])} losses, "
          f"{len(got['params'])} parameters")
    return 1 if bad else 0


if __name__ == "__main__":
    if torch.__name__ != "torch":       # run by torch_on_dtorch.py: torch is dtorch
        train()
    else:
        sys.exit(compare())
