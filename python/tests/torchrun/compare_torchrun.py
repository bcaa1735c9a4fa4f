"""The corpus under real torchrun and under python -m dtorch.run, loss
by loss (a developer-side check: real torchrun starts 4 gloo processes
and takes about 10 s a script on 2 cores, too slow for every CI run;
python/tests/test_run.py checks the same scripts against one device in
CI, and runs this comparison when DTORCH_TEST_TORCHRUN=1).

    python python/tests/torchrun/compare_torchrun.py [name ...] [--nproc 4]

Each script runs unchanged under `torchrun --standalone --nproc-per-node
4` (torch's gloo backend on CPU) and, with its torch imports made
dtorch's (examples/python/torch_on_dtorch.py), under `python -m
dtorch.run --nproc-per-node 4`; every rank's every loss must agree to
1e-5 relative. Prints one JSON line per script; exits 1 on a mismatch.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
NAMES = ("tp_mlp", "sequence_parallel", "dp_tp", "ddp_loop")
LOSS = re.compile(r"^\[(?:rank|default)(\d+)\]: ?loss (\d+) (\S+)$")
RTOL = 1e-5


def _losses(text):
    got = {}
    for line in text.splitlines():
        m = LOSS.match(line.strip())
        if m:
            got.setdefault(int(m.group(1)), {})[int(m.group(2))] = float(m.group(3))
    return {r: [v[k] for k in sorted(v)] for r, v in got.items()}


def _torchrun():
    exe = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or \
        shutil.which("torchrun")
    return [exe] if exe else [sys.executable, "-m", "torch.distributed.run"]


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    pkg = str(ROOT / "python")
    env["PYTHONPATH"] = os.pathsep.join([pkg] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    return env


def _run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=_env(), timeout=600)
    return p.returncode, p.stdout


def compare(name, tmp, nproc=4):
    """{"name", "ok", "max_rel", "torchrun_rc", "dtorch_rc", ...} for one script."""
    sys.path.insert(0, str(ROOT / "examples" / "python"))
    import torch_on_dtorch as tod
    src = HERE / f"{name}.py"
    rewritten = Path(tmp) / f"{name}.py"
    rewritten.write_text(tod.rewrite_imports(src.read_text(), str(src))[0])
    trc, tout = _run(_torchrun() + ["--standalone", "--nproc-per-node", str(nproc),
                                    "--tee", "3", str(src)])
    drc, dout = _run([sys.executable, "-m", "dtorch.run", "--nproc-per-node", str(nproc),
                      str(rewritten)])
    want, got = _losses(tout), _losses(dout)
    report = {"name": name, "torchrun_rc": trc, "dtorch_rc": drc,
              "ranks": sorted(got), "steps": len(want.get(0, []))}
    ok = trc == 0 and drc == 0 and sorted(want) == list(range(nproc)) and \
        sorted(got) == sorted(want)
    worst = 0.0
    for r in want:
        if not ok or len(got.get(r, [])) != len(want[r]):
            ok = False
            break
        for g, w in zip(got[r], want[r]):
            worst = max(worst, abs(g - w) / max(abs(w), 1e-30))
    report["max_rel"] = worst
    report["ok"] = ok and worst <= RTOL
    if not report["ok"]:
        report["torchrun_tail"] = tout[-1500:]
        report["dtorch_tail"] = dout[-1500:]
    return report


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", default=list(NAMES))
    p.add_argument("--nproc", type=int, default=4)
    a = p.parse_args(argv)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="dtorch-torchrun-") as tmp:
        for name in a.names:
            r = compare(name, tmp, a.nproc)
            bad += not r["ok"]
            print(json.dumps(r), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
