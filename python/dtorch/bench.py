"""The Python binding's speed against PyTorch's, side by side in one run
(``python -m dtorch.bench``, or ``dtorch bench python``): JSON lines, one a
case, each the time of a loop of ``--ops`` (20,000) ops including the final
synchronize, best of ``--reps``:

- ``dtensor_add``: a 4x4 float32 DTensor add on a 2x4 mesh, dtorch vs
  PyTorch's DTensor on its fake process group (world size 8, rank 0: the
  ops run locally; torch.distributed's "fake" backend); goal ratio 0.1;
- ``add``: a plain 4x4 float32 add, dtorch vs torch; goal ratio 1.0.

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

GOALS = {"dtensor_add": 0.1, "add": 1.0}


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


def main(argv=None):
    p = argparse.ArgumentParser(prog="dtorch bench python", description=__doc__.split("\n")[0])
    p.add_argument("--ops", type=int, default=20000, help="ops per timed loop")
    p.add_argument("--reps", type=int, default=5, help="loops per case (best kept)")
    p.add_argument("--only", choices=sorted(GOALS), help="one case")
    a = p.parse_args(argv)
    import dtorch
    torch.set_num_threads(1)
    ours, rt = _dtorch_cases()
    try:
        theirs = {"dtensor_add": _torch_dtensor()}
    except Exception as e:  # no torch.distributed in this torch build
        print(f"dtorch bench python: PyTorch DTensor unavailable: {e}", file=sys.stderr)
        theirs = {"dtensor_add": None}
    theirs["add"] = torch.randn(4, 4)
    for case in sorted(GOALS, reverse=True):
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
