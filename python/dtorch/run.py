"""torchrun for one process: a per-rank script runs once per rank, each
on its rank's own thread of one dtorch runtime (docs/python-run.md).

    python -m dtorch.run --nproc-per-node 4 train.py --lr 0.1
    python -m dtorch.run --nproc-per-node 4 --chaos 7 train.py
    python -m dtorch.run --nproc-per-node 4 --stress 20 train.py

    import dtorch.run
    dtorch.run.spawn(fn, args=(x,), nprocs=4)   # fn(rank, x) on every rank

Each rank sees the environment torchrun gives it (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ... in
os.environ), runs the script in its own __main__ globals, prints lines
prefixed "[rank3]: " and draws from its own random streams (dtorch's and
the random module's). dtorch.distributed answers per rank (get_rank(),
init_process_group, dist.all_reduce(t), DeviceMesh, DTensor.from_local,
parallelize_module: each rank holds its own shards).

A failure is reported once: a rank's exception with its traceback (the
others stop at their next collective, naming it), a desync with every
rank's call and Python file:line, a rank that never arrives with where
it is; the exit status is then non-zero. --chaos SEED shakes the ranks'
interleaving at dtorch's scheduling points; --stress K runs the script
under K seeds and reports the first whose printed output differs from
the run without chaos.
"""
import argparse
import builtins
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import types

from . import _errors, _rank_env, _runner

__all__ = ["spawn", "stress", "main", "RankFailedError"]

DEFAULT_TIMEOUT_S = 30.0


class RankFailedError(RuntimeError):
    """A rank of spawn() failed: str(e) is the runner's report; failures
    maps each failed rank to its exception."""

    def __init__(self, report, failures, exit_code=1):
        super().__init__(report)
        self.failures, self.exit_code = failures, exit_code


# ---- running a function
def _execute(body, nprocs, *, chaos=None, timeout=DEFAULT_TIMEOUT_S, device=None,
             prefix="[rank{rank}]: ", capture=False):
    run = _runner.Run(int(nprocs), chaos=chaos or 0, timeout_s=timeout, device=device,
                      prefix=prefix, capture=capture)
    run.execute(body)
    return run


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn", *,
          chaos=None, timeout=DEFAULT_TIMEOUT_S, device=None, prefix="[rank{rank}]: "):
    """torch.multiprocessing.spawn's form: fn(rank, *args) on each of
    nprocs ranks, each its rank's thread of one new runtime, with
    torchrun's environment per rank. Returns the ranks' return values (a
    list in rank order; torch's returns None), their dtorch tensors
    copied out as torch.Tensors (a DTensor: the rank's shard), since the
    runtime ends with the run. A failure raises
    RankFailedError with the report. join=False, daemon and start_method
    have no processes to act on (join=False is refused). chaos: a seed
    for dtorch's chaos scheduling; timeout: the collective timeout in
    seconds (None or 0: none); prefix: the template of each output
    line's prefix ({rank}; "" for none)."""
    if not join:
        raise NotImplementedError("dtorch.run.spawn: join=False: the ranks are "
                                  "threads of this process; spawn returns when "
                                  "they finish")
    if not callable(fn):
        raise TypeError(f"dtorch.run.spawn: fn {fn!r} is not callable")
    if not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"dtorch.run.spawn: nprocs {nprocs!r} is not a positive int")
    args = tuple(args)
    run = _execute(lambda rank: _host(fn(rank, *args)), nprocs, chaos=chaos,
                   timeout=timeout, device=device, prefix=prefix)
    if not run.ok():
        raise RankFailedError(run.report(), {r: f.exc for r, f in run.failures.items()},
                              run.exit_code())
    return [run.results.get(r) for r in range(nprocs)]


def _host(x):
    """A rank's return value with its dtorch tensors copied out as
    torch.Tensors (a DTensor: the rank's shard), containers item by
    item: the run's runtime, which holds their memory, ends with it."""
    if hasattr(x, "to_torch") and hasattr(x, "is_dtensor"):
        x = x.detach()
        return (x.to_local() if x.is_dtensor() else x).to_torch()
    if isinstance(x, dict):
        return {k: _host(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
        return type(x)(_host(v) for v in x)
    return x


def _same(a, b):
    """Results equal: tensors element for element (dtorch's and torch's),
    containers item by item, the rest by ==."""
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and \
            a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def stress(fn, args=(), nprocs=1, seeds=10, *, first_seed=1,
           timeout=DEFAULT_TIMEOUT_S, prefix=""):
    """Runs spawn(fn, args, nprocs) without chaos, then under chaos seeds
    first_seed .. first_seed + seeds - 1; the results are the ranks'
    return values. Returns None when every seed's equal the unshaken
    run's, else (seed, rank, unshaken value, that seed's value) of the
    first difference. A failing run raises its RankFailedError (its
    report names the seed)."""
    want = spawn(fn, args, nprocs, timeout=timeout, prefix=prefix)
    for seed in range(first_seed, first_seed + seeds):
        got = spawn(fn, args, nprocs, chaos=seed, timeout=timeout, prefix=prefix)
        for r in range(nprocs):
            if not _same(got[r], want[r]):
                return seed, r, want[r], got[r]
    return None


# ---- running a script
class _MainProxy(types.ModuleType):
    """sys.modules["__main__"] while a script runs on the ranks: attribute
    lookups go to the calling rank's own __main__ (pickle finds a class
    the script defined in the rank that defined it)."""

    def __init__(self, fallback, mains):
        super().__init__("__main__")
        self._fallback, self._mains = fallback, mains

    def __getattr__(self, name):
        r = _rank_env.rank()
        mod = self._mains.get(r) if r is not None else None
        try:
            return getattr(mod if mod is not None else self._fallback, name)
        except AttributeError:
            raise AttributeError(f"module '__main__' has no attribute {name!r}") from None


def _load(a):
    """(code, file name) of the script or module to run."""
    if a.module:
        spec = importlib.util.find_spec(a.script)
        if spec is None or spec.loader is None:
            raise SystemExit(f"dtorch.run: no module named {a.script!r}")
        return spec.loader.get_code(a.script), spec.origin
    path = a.script
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise SystemExit(f"dtorch.run: cannot read {path}: {e.strerror}") from None
    return compile(source, path, "exec"), path


def _script_body(code, path, mains):
    def body(rank):
        mod = types.ModuleType("__main__")
        mod.__dict__.update({"__file__": path, "__builtins__": builtins,
                             "__loader__": None, "__spec__": None,
                             "__package__": None, "__cached__": None})
        mains[rank] = mod
        exec(code, mod.__dict__)
    return body


def _parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m dtorch.run", description=__doc__.split("\n\n")[0],
        epilog="torchrun's launcher options (--nnodes 1, --node-rank 0, "
               "--standalone, --rdzv-*, --max-restarts 0, --tee, --redirects, "
               "--log-dir) are accepted: one process has nothing to connect.")
    add = p.add_argument
    add("--nproc-per-node", "--nproc_per_node", dest="nproc", type=int, default=1,
        help="ranks (threads of one runtime)")
    add("--chaos", type=int, default=0, metavar="SEED",
        help="chaos scheduling with this seed (0: none)")
    add("--stress", type=int, default=0, metavar="K",
        help="run without chaos, then under K chaos seeds (from --chaos, or 1); "
             "report the first seed whose printed output differs")
    add("--stress-match", default=None, metavar="REGEX",
        help="--stress compares only the stdout lines matching REGEX (default: all)")
    add("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SEC",
        help=f"collective timeout: a rank waiting longer fails, naming the "
             f"missing ranks and where they are ({DEFAULT_TIMEOUT_S:g}; 0: none)")
    add("--device", choices=("cpu", "cuda"), default=None,
        help="the ranks' device (default: dtorch's, DTORCH_DEVICE or cpu)")
    add("--log-line-prefix-template", "--log_line_prefix_template",
        dest="prefix", default="[rank${rank}]: ",
        help="each output line's prefix (${rank}, ${local_rank}, ${role_name})")
    add("--no-prefix", action="store_true", help="no prefix on output lines")
    add("--master-addr", "--master_addr", default="127.0.0.1")
    add("--master-port", "--master_port", type=int, default=29500)
    add("-m", "--module", action="store_true",
        help="run a module (python -m) instead of a script")
    add("--results-file", default=None, help=argparse.SUPPRESS)
    for opt, kw in (("--nnodes", {"default": "1"}), ("--node-rank", {"default": "0"}),
                    ("--node_rank", {"default": "0"}), ("--rdzv-backend", {}),
                    ("--rdzv_backend", {}), ("--rdzv-endpoint", {}),
                    ("--rdzv_endpoint", {}), ("--rdzv-id", {}), ("--rdzv_id", {}),
                    ("--max-restarts", {"default": "0"}),
                    ("--max_restarts", {"default": "0"}), ("--tee", {}),
                    ("--redirects", {}), ("--log-dir", {}), ("--log_dir", {})):
        add(opt, dest="ignored_" + opt.strip("-").replace("-", "_"), help=argparse.SUPPRESS,
            **kw)
    add("--standalone", action="store_true", help=argparse.SUPPRESS)
    add("script", help="the training script (or module, with -m)")
    add("args", nargs=argparse.REMAINDER, help="the script's arguments")
    a = p.parse_args(argv)
    if str(a.ignored_nnodes) not in ("1", "1:1"):
        p.error(f"--nnodes {a.ignored_nnodes}: dtorch.run runs one node (one process)")
    if a.nproc < 1:
        p.error(f"--nproc-per-node {a.nproc}: at least 1")
    return a


def _template(a):
    if a.no_prefix:
        return ""
    escaped = a.prefix.replace("{", "{{").replace("}", "}}")
    return re.sub(r"\$\{\{(\w+)\}\}", r"{\1}", escaped)


def _run_script(a):
    code, path = _load(a)
    sys.argv = [path] + list(a.args)
    if not a.module:
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    mains = {}
    fallback = sys.modules.get("__main__")
    sys.modules["__main__"] = _MainProxy(fallback, mains)
    try:
        run = _execute(_script_body(code, path, mains), a.nproc, chaos=a.chaos,
                       timeout=a.timeout, device=a.device, prefix=_template(a),
                       capture=a.results_file is not None)
    finally:
        sys.modules["__main__"] = fallback
    sys.stdout.flush()
    if a.results_file:
        with open(a.results_file, "w") as f:
            json.dump({"exit": run.exit_code(),
                       "stdout": {str(r): run.sink.captured.get(r, []) for r in range(a.nproc)}},
                      f)
    if not run.ok():
        print(run.report(), file=sys.stderr, flush=True)
    return run


# ---- --stress: the script in fresh processes, one per seed
def _child(a, seed, results):
    cmd = [sys.executable, "-m", "dtorch.run", "--nproc-per-node", str(a.nproc),
           "--chaos", str(seed), "--timeout", str(a.timeout), "--results-file", results]
    if a.device:
        cmd += ["--device", a.device]
    if a.module:
        cmd.append("-m")
    cmd += [a.script] + list(a.args)
    env = dict(os.environ)
    env.pop("DTORCH_CHAOS", None)  # the seed is the option's (none: 0)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env)
    try:
        with open(results) as f:
            got = json.load(f)
    except (OSError, ValueError):
        got = {"exit": p.returncode or 1, "stdout": {}}
    return got, p


def _lines(got, nproc, match):
    keep = re.compile(match) if match else None
    return {r: [ln for ln in got["stdout"].get(str(r), [])
                if keep is None or keep.search(ln)] for r in range(nproc)}


def _first_difference(want, got, nproc):
    for r in range(nproc):
        a, b = want[r], got[r]
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else "<no line>"
            y = b[i] if i < len(b) else "<no line>"
            if x != y:
                return r, i, x, y
    return None


def _replay(a, seed):
    return " ".join(["python -m dtorch.run", f"--nproc-per-node {a.nproc}",
                     f"--chaos {seed}"] + (["-m"] if a.module else []) +
                    [a.script] + list(a.args))


def _stress(a):
    first = a.chaos or 1
    with tempfile.TemporaryDirectory(prefix="dtorch-stress-") as tmp:
        base, p = _child(a, 0, os.path.join(tmp, "0.json"))
        if base["exit"] != 0:
            sys.stderr.write(p.stderr)
            print(f"dtorch.run --stress: the run without chaos failed (exit "
                  f"{base['exit']})", file=sys.stderr)
            return base["exit"] or 1
        want = _lines(base, a.nproc, a.stress_match)
        for seed in range(first, first + a.stress):
            got, p = _child(a, seed, os.path.join(tmp, f"{seed}.json"))
            if got["exit"] != 0:
                sys.stderr.write(p.stderr)
                print(f"dtorch.run --stress: chaos seed {seed} failed (exit "
                      f"{got['exit']}); replay: {_replay(a, seed)}", file=sys.stderr)
                return got["exit"] or 1
            diff = _first_difference(want, _lines(got, a.nproc, a.stress_match), a.nproc)
            if diff:
                r, i, x, y = diff
                print(f"dtorch.run --stress: chaos seed {seed} differs from the run "
                      f"without chaos: rank {r}, line {i + 1}: {x!r} without chaos, "
                      f"{y!r} with seed {seed}; replay: {_replay(a, seed)}",
                      file=sys.stderr)
                return 1
    n = sum(len(v) for v in want.values())
    print(f"dtorch.run --stress: {a.stress} chaos seeds ({first}..{first + a.stress - 1}): "
          f"every rank printed what it prints without chaos ({n} lines compared)")
    return 0


def main(argv=None):
    a = _parse(sys.argv[1:] if argv is None else argv)
    if a.stress:
        return _stress(a)
    try:
        run = _run_script(a)
    except _errors.DTorchError as e:   # the runtime could not be made
        print(f"dtorch.run: {e}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        # the ranks are threads that cannot be stopped: end the process
        print("dtorch.run: interrupted", file=sys.stderr, flush=True)
        os._exit(130)
    if run.stuck:
        sys.stderr.flush()
        os._exit(run.exit_code())  # the stuck ranks' threads cannot be joined
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
