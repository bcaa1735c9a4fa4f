"""A Megatron-style tensor-parallel MLP, written for PyTorch: in_proj
column-parallel, out_proj row-parallel (one all_reduce per forward),
AdamW, ten steps on inputs drawn from a fixed seed per step, logging on
rank 0. optimizer_first=True makes the optimizer before parallelize_module,
as some scripts do: it then holds the parameters parallelize_module
replaced, which receive no gradients, so the model does not train (real
PyTorch behaves so; the test checks both)."""
import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)


class MLP(nn.Module):
    def __init__(self, dim=10, hidden=32, out=5):
        super().__init__()
        self.in_proj = nn.Linear(dim, hidden)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(hidden, out)

    def forward(self, x):
        return self.out_proj(self.relu(self.in_proj(x)))


def train(tp_size=4, steps=10, optimizer_first=False, init=None, inputs=None,
          lr=0.01, log=print):
    """Trains MLP on a 1-d mesh of tp_size; init (a state_dict) and inputs
    (one batch per step), when given, replace the drawn ones. Returns the
    starting weights, the inputs, the losses and the trained parameters."""
    mesh = init_device_mesh("cpu", (tp_size,))
    rank = mesh.get_rank()
    torch.manual_seed(0)
    model = MLP()
    if init is not None:
        model.load_state_dict(init)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if optimizer_first:
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model = parallelize_module(model, mesh, {"in_proj": ColwiseParallel(),
                                             "out_proj": RowwiseParallel()})
    if not optimizer_first:
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses, batches = [], []
    for i in range(steps):
        if inputs is None:
            torch.manual_seed(100 + i)      # every TP rank draws the same batch
            x = torch.rand(20, 10)
        else:
            x = inputs[i]
        batches.append(x)
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if rank == 0:
            log(f"TP step {i}: loss {losses[-1]:.6f}")
    return {"init": start, "inputs": batches, "losses": losses,
            "params": dict(model.named_parameters())}
