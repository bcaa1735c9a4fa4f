"""Run a PyTorch program on dtorch by rewriting its torch imports.

    python examples/python/torch_on_dtorch.py my_torch_script.py [args...]
    python examples/python/torch_on_dtorch.py --show my_torch_script.py

The script's source is read, every import of a module dtorch provides is
rewritten to dtorch's module of the same path, and the result runs as
``__main__`` (``--show`` prints the rewritten import statements instead).
The rewrite, statement by statement:

    import torch                          -> import dtorch as torch
    import torch as th                    -> import dtorch as th
    import torch.nn as nn                 -> import dtorch.nn as nn
    import torch.distributed              -> import dtorch as torch; import dtorch.distributed
    from torch.X import a, b              -> from dtorch.X import a, b
    from torch import nn                  -> from dtorch import nn

An import of a torch module dtorch does not provide (torch.multiprocessing,
torch.utils.data, ...) is refused with the line it is on, rather than left
to real torch, whose tensors would then mix with dtorch's.

load_program(path, backend) does the same for a module (a test or an
example loads one program twice, "dtorch" and "torch", and compares), and
the helpers below it start real torch's one-rank process group and
compare two runs' results.
"""
import ast
import os
import re
import sys
import types

# the torch modules dtorch has (python/dtorch/...), by their torch path
PROVIDED = (
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init",
    "torch.nn.parameter", "torch.nn.utils", "torch.optim",
    "torch.optim.lr_scheduler", "torch.distributed",
    "torch.distributed.device_mesh", "torch.distributed.tensor",
    "torch.distributed.tensor.parallel", "torch.distributed.tensor.debug",
    "torch.distributed.tensor.placement_types", "torch.distributed._tensor",
    "torch.distributed._tensor.device_mesh")


def _dtorch_name(module, path, lineno):
    if module not in PROVIDED:
        raise ImportError(f"torch_on_dtorch: {path}:{lineno} imports {module}, "
                          f"which dtorch does not provide (it has: "
                          f"{', '.join(PROVIDED)})")
    return "d" + module


def _import_text(node, path):
    """The dtorch form of an `import a, torch.b as c` statement."""
    parts = []
    for alias in node.names:
        top = alias.name.split(".")[0]
        if top != "torch":
            parts.append(f"import {alias.name}" +
                         (f" as {alias.asname}" if alias.asname else ""))
        elif alias.asname:
            parts.append(f"import {_dtorch_name(alias.name, path, node.lineno)} "
                         f"as {alias.asname}")
        else:
            # `import torch.x` binds torch and makes torch.x reachable
            parts.append("import dtorch as torch")
            if alias.name != "torch":
                parts.append(f"import {_dtorch_name(alias.name, path, node.lineno)}")
    return "; ".join(parts)


def _from_text(node, path, segment):
    """segment (`from torch.x import ...`) with the module renamed."""
    name = _dtorch_name(node.module, path, node.lineno)
    return re.sub(r"^from\s+" + re.escape(node.module) + r"\b",
                  "from " + name, segment, count=1)


def rewrite_imports(source, path="<program>"):
    """source with its torch imports made dtorch's; also the list of
    (line, old statement, new statement) it changed."""
    tree = ast.parse(source, path)
    lines = source.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
                a.name.split(".")[0] == "torch" for a in node.names):
            edits.append((node, _import_text(node, path)))
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and
              node.module.split(".")[0] == "torch"):
            edits.append((node, None))
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode()))
    data = source.encode()
    changes = []
    # from the end, so earlier offsets stay valid
    for node, text in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset),
                             reverse=True):
        a = starts[node.lineno - 1] + node.col_offset
        b = starts[node.end_lineno - 1] + node.end_col_offset
        old = data[a:b].decode()
        new = text if text is not None else _from_text(node, path, old)
        data = data[:a] + new.encode() + data[b:]
        changes.append((node.lineno, old, new))
    return data.decode(), changes[::-1]


def load_program(path, backend="dtorch", name=None):
    """The program at path as a new module, its torch imports rewritten
    when backend is "dtorch" (unchanged for "torch")."""
    if backend not in ("dtorch", "torch"):
        raise ValueError(f"load_program: backend {backend!r} is not 'dtorch' or "
                         f"'torch'")
    with open(path, encoding="utf-8") as f:
        source = f.read()
    if backend == "dtorch":
        source, _ = rewrite_imports(source, path)
    stem = os.path.splitext(os.path.basename(path))[0]
    mod = types.ModuleType(name or f"{stem}_on_{backend}")
    mod.__file__ = path
    exec(compile(source, path, "exec"), mod.__dict__)
    return mod


# ---- running one program both ways
def init_torch_one_rank():
    """Real torch's default process group as a one-rank gloo group (what
    the torch side of a comparison runs its DeviceMesh on); once per
    process."""
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=0, world_size=1,
                                store=dist.HashStore())


def host(x):
    """x as plain torch values: a dtorch tensor (a DTensor: its global
    value) or a torch DTensor as a torch.Tensor, containers element-wise."""
    import torch
    if isinstance(x, dict):
        return {k: host(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(host(v) for v in x)
    if hasattr(x, "to_torch"):                  # a dtorch.Tensor
        return x.detach().to_torch()
    if isinstance(x, torch.Tensor):
        if hasattr(x, "full_tensor"):           # a torch DTensor
            return x.detach().full_tensor()
        return x.detach().clone()
    return x


def mismatches(got, want, rtol=1e-5, where="result"):
    """Where got (dtorch's run) and want (torch's), both host() values,
    differ: tensors by more than rtol relative to want's largest
    magnitude (a reordered float32 sum moves an element near zero by
    more than its own 1e-5), floats by more than rtol relative, other
    values exactly. An empty list when they agree."""
    import torch
    out = []
    if isinstance(want, dict):
        if set(got) != set(want):
            return [f"{where}: keys {sorted(got)} != {sorted(want)}"]
        for k in want:
            out += mismatches(got[k], want[k], rtol, f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return [f"{where}: {len(got)} items != {len(want)}"]
        for i, (g, w) in enumerate(zip(got, want)):
            out += mismatches(g, w, rtol, f"{where}[{i}]")
    elif isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return [f"{where}: {getattr(got, 'shape', got)} != shape {tuple(want.shape)}"]
        w, g = want.double(), got.double()
        scale = w.abs().max().item() if w.numel() else 0.0
        err = (g - w).abs().max().item() / (scale or 1.0) if w.numel() else 0.0
        if not err <= rtol:
            out.append(f"{where}: relative error {err:.3g} > {rtol}")
    elif isinstance(want, float):
        if not abs(got - want) <= rtol * abs(want):
            out.append(f"{where}: {got!r} != {want!r}")
    elif got != want:
        out.append(f"{where}: {got!r} != {want!r}")
    return out


def main(argv):
    show = argv[:1] == ["--show"]
    args = argv[1:] if show else argv
    if not args:
        print(__doc__.split("\n\n")[1])
        return 2
    path = args[0]
    with open(path, encoding="utf-8") as f:
        source = f.read()
    new, changes = rewrite_imports(source, path)
    if show:
        for line, old, text in changes:
            print(f"{path}:{line}: {old}\n    -> {text}")
        return 0
    sys.argv = args
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    glb = {"__name__": "__main__", "__file__": path}
    exec(compile(new, path, "exec"), glb)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
