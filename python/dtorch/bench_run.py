"""What a rank's Python costs under python -m dtorch.run, against one
controller doing the same work (``python -m dtorch.bench_run``): JSON
lines, one per rank count, each the best of ``--reps`` loops of
``--ops`` (2,000) 4x4 float32 DTensor adds on a 2 x (n/2) mesh,
[Shard(0), Replicate()]:

- ``controller_us_per_op``: one Python thread issues ``c = a + a`` on the
  global DTensor (every rank's part is published, the rank threads run
  them), the loop's time including the final synchronize, per add;
- ``spmd_us_per_op``: every rank's Python runs ``c = a + a`` on its own
  DTensor (from_local of its [2, 4] shard; its part runs inline on its
  thread), the wall time from a barrier before the loop to one after
  it, per add: the same work as one controller add (every rank's part);
- ``spmd_us_per_rank_op``: that over the ranks, what one rank's add costs
  (the ranks' Python takes turns under the GIL, so the wall time is the
  sum of the ranks' costs);
- ``ratio``: spmd_us_per_op / controller_us_per_op (goal 2.0).
"""
import argparse
import json
import sys
import time

import torch

GOAL = 2.0


def _controller(n, ops, reps):
    import dtorch
    from dtorch.distributed_spec import DeviceMesh, Replicate, Shard
    with dtorch.Runtime(n) as rt:
        mesh = DeviceMesh("cpu", torch.arange(n).reshape(2, n // 2))
        d = dtorch.Tensor(torch.randn(4, 4), device_mesh=mesh,
                          placements=[Shard(0), Replicate()])
        best = None
        for rep in range(reps + 1):         # the first loop warms
            t0 = time.perf_counter()
            for _ in range(ops):
                d + d
            rt.synchronize()
            took = time.perf_counter() - t0
            if rep:
                best = took if best is None else min(best, took)
        del d, mesh
    return best


def _spmd_rank(rank, n, ops, reps):
    import dtorch
    import dtorch.distributed as dist
    from dtorch.distributed.device_mesh import init_device_mesh
    from dtorch.distributed.tensor import DTensor, Replicate, Shard
    dist.init_process_group()
    mesh = init_device_mesh("cpu", (2, n // 2))
    x = DTensor.from_local(dtorch.randn(2, 4), mesh, [Shard(0), Replicate()])
    times = []
    for _ in range(reps + 1):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(ops):
            x + x
        dist.barrier()
        times.append(time.perf_counter() - t0)
    return min(times[1:])


def _spmd(n, ops, reps):
    import dtorch.run
    return max(dtorch.run.spawn(_spmd_rank, args=(n, ops, reps), nprocs=n, prefix=""))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m dtorch.bench_run",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[4, 8])
    p.add_argument("--ops", type=int, default=2000, help="adds per timed loop")
    p.add_argument("--reps", type=int, default=5, help="loops per side (best kept)")
    a = p.parse_args(argv)
    import dtorch
    torch.set_num_threads(1)
    for n in a.ranks:
        if n < 2 or n % 2:
            p.error(f"--ranks {n}: an even number of at least 2 (a 2 x n/2 mesh)")
        c = _controller(n, a.ops, a.reps)
        s = _spmd(n, a.ops, a.reps)
        print(json.dumps({
            "bench": "python_spmd", "case": "dtensor_add", "ranks": n, "ops": a.ops,
            "controller_us_per_op": round(c / a.ops * 1e6, 3),
            "spmd_us_per_op": round(s / a.ops * 1e6, 3),
            "spmd_us_per_rank_op": round(s / a.ops / n * 1e6, 3),
            "ratio": round(s / c, 3), "goal": GOAL,
            "binding": getattr(dtorch._lib, "BINDING", "ctypes"),
            "python": sys.version.split()[0]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
