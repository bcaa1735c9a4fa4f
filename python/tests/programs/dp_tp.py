"""Data x tensor parallelism on a 2-d mesh, written for PyTorch: a
("dp", "tp") mesh; the MLP's Linears are laid out Megatron's way on the
"tp" dim (in_proj's rows, out_proj's columns) and replicated over "dp";
each batch is sharded over "dp". The loss is the mean over the whole
batch, so each weight's gradient is the average over the dp groups of
their batch slice's gradient: data parallelism's averaged all-reduce.

The layout is written with distribute_module on the whole mesh (torch's
parallelize_module takes a 1-d mesh only)."""
import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_module, distribute_tensor

MEGATRON = {"in_proj": {"weight": Shard(0), "bias": Shard(0)},
            "out_proj": {"weight": Shard(1), "bias": Replicate()}}


class MLP(nn.Module):
    def __init__(self, dim=10, hidden=32, out=5):
        super().__init__()
        self.in_proj = nn.Linear(dim, hidden)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(hidden, out)

    def forward(self, x):
        return self.out_proj(self.relu(self.in_proj(x)))


def partition(name, module, mesh):
    for pname, tp_layout in MEGATRON.get(name, {}).items():
        param = getattr(module, pname)
        module.register_parameter(pname, nn.Parameter(
            distribute_tensor(param.detach(), mesh, [Replicate(), tp_layout])))


def shard_batch(module, inputs, mesh):
    return tuple(distribute_tensor(x, mesh, [Shard(0), Replicate()]) for x in inputs)


def gather_tp(module, output, mesh):
    return output.redistribute(mesh, [Shard(0), Replicate()])


def train(mesh_shape=(2, 4), steps=8, init=None, inputs=None, lr=0.01, log=print):
    """Returns the starting weights, (input, target) batches, losses and
    the trained parameters."""
    mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=("dp", "tp"))
    torch.manual_seed(5)
    model = MLP()
    if init is not None:
        model.load_state_dict(init)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model = distribute_module(model, mesh, partition, shard_batch, gather_tp)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    if mesh.get_rank() == 0:
        log(f"mesh {mesh}: dp={mesh['dp'].size()} tp={mesh['tp'].size()}")
    losses, batches = [], []
    for i in range(steps):
        if inputs is None:
            torch.manual_seed(500 + i)
            x, target = torch.rand(16, 10), torch.rand(16, 5)
        else:
            x, target = inputs[i]
        batches.append((x, target))
        optimizer.zero_grad()
        out = model(x)
        target = distribute_tensor(target, mesh, out.placements)
        loss = ((out - target) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.full_tensor().item())
        if mesh.get_rank() == 0:
            log(f"DPxTP step {i}: loss {losses[-1]:.6f}")
    return {"init": start, "inputs": batches, "losses": losses,
            "params": dict(model.named_parameters())}
