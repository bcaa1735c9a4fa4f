"""The Python binding's speed against PyTorch's, side by side in one run
(``python -m dtorch.bench``, or ``dtorch bench python``): JSON lines, one a
case, each the time of a loop of ``--ops`` (20,000) ops including the final
synchronize, best of ``--reps``:

- ``dtensor_add``: a 4x4 float32 DTensor add on a 2x4 mesh, dtorch vs
  PyTorch's DTensor on its fake process group (world size 8, rank 0: the
  ops run locally; torch.distributed's "fake" backend); goal ratio 0.1;
- ``add``: a plain 4x4 float32 add, dtorch vs torch; goal ratio 1.0;
- ``mlp_step``: the DP2xTP4 MLP training step of ``dtorch bench demo``
  (hidden 1024, batch 64, GELU, MSE, AdamW lr 3e-3 weight decay 0.01)
  written in Python with ``dtorch.nn`` + ``parallelize_module`` +
  ``dtorch.optim.AdamW``, against the same step written in C: the CLI's
  ``bench demo --only mlp`` (``--cli``, else ``DTORCH_CLI``, else a
  ``dtorch`` next to the loaded library or on PATH), run in the same
  invocation, before and after the Python steps; ``ratio`` = the Python
  step's median over the C step's (the better of its two runs); goal 1.1.

``dtorch_issue_us_per_op`` is the loop before its synchronize: what the
calling thread spends (the binding and the C call's issue); the rest of
``dtorch_us_per_op`` is the ranks running the ops (8 rank threads, on
however many cores the machine has).

``ratio`` is dtorch's time over PyTorch's (lower is better). A case whose
PyTorch side cannot run (no torch.distributed) prints ``"torch_s": null``.
"""
import argparse
import json
import sys
import time

import torch

GOALS = {"dtensor_add": 0.1, "add": 1.0, "mlp_step": 1.1}
MICRO = ("dtensor_add", "add")


def _loop(fn, x, y, n, sync):
    """(seconds for n ops and the synchronize, seconds for the n ops'
    issue alone: the Python side and the C call on this thread)"""
    t0 = time.perf_counter()
    for _ in range(n):
        fn(x, y)
    t1 = time.perf_counter()
    sync()
    return time.perf_counter() - t0, t1 - t0


def _no_sync():
    pass


def _side_by_side(ours, theirs, n, reps):
    """Best of reps for each, the two loops interleaved rep by rep so both
    see the same phase of a noisy machine."""
    (x, sync), t = ours, theirs
    _loop(_add, x, x, min(n, 1000), sync)  # warm: caches, allocator
    if t is not None:
        _loop(_add, t, t, min(n, 1000), _no_sync)
    ds, ts = [], []
    for _ in range(reps):
        ds.append(_loop(_add, x, x, n, sync))
        if t is not None:
            ts.append(_loop(_add, t, t, n, _no_sync))
    return min(ds), (min(ts)[0] if ts else None)


def _add(a, b):
    return a + b


def _dtorch_cases():
    """dtorch's two operands, on a runtime of 8 ranks made for the run."""
    import dtorch
    from dtorch.distributed_spec import DeviceMesh, Shard, Replicate
    rt = dtorch.Runtime(8)
    rt.__enter__()  # current on this thread until the run ends
    mesh = DeviceMesh("cpu", torch.arange(8).reshape(2, 4))
    src = torch.randn(4, 4)
    d = dtorch.Tensor(src, device_mesh=mesh, placements=[Shard(0), Replicate()])
    plain = dtorch.Tensor(src)
    return {"dtensor_add": (d, rt.synchronize), "add": (plain, rt.synchronize)}, rt


def _torch_dtensor():
    """A 4x4 DTensor on a 2x4 mesh of torch's fake process group, or None."""
    import torch.distributed as dist
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, Replicate, distribute_tensor
    except ImportError:
        from torch.distributed._tensor import Shard, Replicate, distribute_tensor
        from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    mesh = init_device_mesh("cpu", (2, 4))
    return distribute_tensor(torch.randn(4, 4), mesh, [Shard(0), Replicate()])


class _MLP:
    """The demo's MLP: Linear(h, 4h) -> GELU -> Linear(4h, h), made as a
    dtorch.nn.Module subclass at first use (the import is the package's)."""

    @staticmethod
    def make(hidden):
        from dtorch import nn
        import dtorch.nn.functional as F

        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.w1 = nn.Linear(hidden, 4 * hidden)
                self.w2 = nn.Linear(4 * hidden, hidden)

            def forward(self, x):
                return self.w2(F.gelu(self.w1(x)))
        return MLP()


def _python_mlp_steps(steps, hidden=1024, batch=64):
    """Median and best ms of `steps` Python training steps (after 2 warm-up
    steps), each until every rank is done."""
    import dtorch
    import dtorch.nn.functional as F
    from dtorch.distributed.device_mesh import init_device_mesh
    from dtorch.distributed.tensor import Replicate, Shard, distribute_tensor
    from dtorch.distributed.tensor.parallel import (
        ColwiseParallel, RowwiseParallel, parallelize_module)
    rt = dtorch.Runtime(8)
    with rt:
        mesh = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
        model = parallelize_module(_MLP.make(hidden), mesh,
                                   {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
        opt = dtorch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        g = torch.Generator().manual_seed(0)
        x = distribute_tensor(torch.randn(batch, hidden, generator=g), mesh,
                              [Shard(0), Replicate()])
        t = distribute_tensor(torch.randn(batch, hidden, generator=g), mesh,
                              [Shard(0), Replicate()])
        times = []
        for i in range(steps + 2):
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = F.mse_loss(model(x), t)
            loss.backward()
            opt.step()
            rt.synchronize()
            if i >= 2:
                times.append((time.perf_counter() - t0) * 1e3)
            del loss
    times.sort()
    return times[len(times) // 2], times[0]


def _find_cli(given):
    import os
    import shutil
    if given:
        return given
    if os.environ.get("DTORCH_CLI"):
        return os.environ["DTORCH_CLI"]
    from dtorch import _lib
    lib = _lib.path or ""
    near = os.path.join(os.path.dirname(lib), "dtorch")
    if lib and os.access(near, os.X_OK):
        return near
    return shutil.which("dtorch")


def _c_mlp_step(cli, steps):
    """The C step's median ms from `cli bench demo --only mlp`, or None."""
    import subprocess
    try:
        out = subprocess.run([cli, "bench", "demo", "--only", "mlp", "--reps", str(steps)],
                             capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"dtorch bench python: {cli} bench demo: {e}", file=sys.stderr)
        return None
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            if d.get("bench") == "train_step" and d.get("model") == "mlp":
                return d["ms"]
    print(f"dtorch bench python: {cli} bench demo printed no mlp line: "
          f"{out.stderr.strip()[-300:]}", file=sys.stderr)
    return None


def _binding():
    from dtorch import _lib
    return getattr(_lib, "BINDING", "ctypes")


def _mlp_case(a):
    cli = _find_cli(a.cli)
    c1 = _c_mlp_step(cli, a.steps) if cli else None
    py_ms, py_best = _python_mlp_steps(a.steps)
    c2 = _c_mlp_step(cli, a.steps) if cli else None
    cs = [c for c in (c1, c2) if c is not None]
    c_ms = min(cs) if cs else None
    print(json.dumps({
        "bench": "python", "case": "mlp_step", "dp": 2, "tp": 4, "hidden": 1024,
        "batch": 64, "steps": a.steps, "python_ms": round(py_ms, 3),
        "python_best_ms": round(py_best, 3),
        "c_ms": None if c_ms is None else round(c_ms, 3),
        "c_runs_ms": [round(c, 3) for c in cs],
        "ratio": None if c_ms is None else round(py_ms / c_ms, 3),
        "goal": GOALS["mlp_step"], "binding": _binding(),
        "cli": cli}), flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="dtorch bench python", description=__doc__.split("\n")[0])
    p.add_argument("--ops", type=int, default=20000, help="ops per timed loop")
    p.add_argument("--reps", type=int, default=5, help="loops per case (best kept)")
    p.add_argument("--only", choices=sorted(GOALS), help="one case")
    p.add_argument("--steps", type=int, default=7,
                   help="mlp_step: timed training steps per side (median kept)")
    p.add_argument("--cli", help="mlp_step: the dtorch CLI whose bench demo is the C step")
    a = p.parse_args(argv)
    if a.only == "mlp_step":
        _mlp_case(a)
        return 0
    import dtorch
    torch.set_num_threads(1)
    ours, rt = _dtorch_cases()
    try:
        theirs = {"dtensor_add": _torch_dtensor()}
    except Exception as e:  # no torch.distributed in this torch build
        print(f"dtorch bench python: PyTorch DTensor unavailable: {e}", file=sys.stderr)
        theirs = {"dtensor_add": None}
    theirs["add"] = torch.randn(4, 4)
    for case in MICRO:
        if a.only and case != a.only:
            continue
        (ds, issue), ts = _side_by_side(ours[case], theirs[case], a.ops, a.reps)
        print(json.dumps({
            "bench": "python", "case": case, "ops": a.ops, "dtorch_s": round(ds, 6),
            "torch_s": None if ts is None else round(ts, 6),
            "dtorch_us_per_op": round(ds / a.ops * 1e6, 3),
            "dtorch_issue_us_per_op": round(issue / a.ops * 1e6, 3),
            "torch_us_per_op": None if ts is None else round(ts / a.ops * 1e6, 3),
            "ratio": None if ts is None else round(ds / ts, 3),
            "goal": GOALS[case], "binding": getattr(dtorch._lib, "BINDING", "ctypes")}), flush=True)
    del ours
    rt.__exit__(None, None, None)
    if not a.only:
        _mlp_case(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
