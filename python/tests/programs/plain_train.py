"""A plain PyTorch training loop, no distribution: an nn.Module
classifier (Embedding, Linear, LayerNorm, GELU, Dropout off in eval),
CrossEntropyLoss with label smoothing, AdamW, gradient clipping and a
warm-up then cosine learning-rate schedule."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR


class Classifier(nn.Module):
    def __init__(self, vocab=20, dim=12, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.hidden = nn.Sequential(nn.Linear(dim, 24), nn.GELU(), nn.Linear(24, dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens):
        h = self.embed(tokens)                     # [batch, seq, dim]
        h = self.norm(h + self.hidden(h))
        return self.head(h.mean(dim=1))           # [batch, classes]


def schedule(warmup, total):
    def f(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))
    return f


def train(steps=12, init=None, inputs=None, log=print):
    """Returns the starting weights, the (tokens, labels) batches, the
    losses, the learning rates and the trained parameters."""
    torch.manual_seed(2)
    model = Classifier()
    if init is not None:
        model.load_state_dict(init)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95))
    scheduler = LambdaLR(optimizer, schedule(3, steps))
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    model.train()
    losses, lrs, batches = [], [], []
    for i in range(steps):
        if inputs is None:
            torch.manual_seed(300 + i)
            # (torch.randint, which dtorch lacks, drawn from rand)
            tokens = (torch.rand(8, 5) * 20).long()
            labels = (torch.rand(8) * 4).long()
        else:
            tokens, labels = inputs[i]
        batches.append((tokens, labels))
        optimizer.zero_grad()
        loss = loss_fn(model(tokens), labels)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        lrs.append(scheduler.get_last_lr()[0])
        scheduler.step()
        losses.append(loss.item())
        log(f"step {i}: loss {losses[-1]:.6f} lr {lrs[-1]:.6f}")
    model.eval()
    with torch.no_grad():
        tokens, labels = batches[0]
        accuracy = (model(tokens).argmax(dim=-1) == labels).float().mean()
    return {"init": start, "inputs": batches, "losses": losses, "lrs": lrs,
            "eval_logits": model(tokens).detach(), "accuracy": accuracy,
            "params": dict(model.named_parameters())}
