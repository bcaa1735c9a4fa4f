"""python -m dtorch.bench's lines (bench.py): the JSON each case prints,
with the ratios computed from the times it reports. The figures themselves
are measured, not asserted (speed goals live in the benchmark)."""
import json
import os
import subprocess
import sys

import pytest


def _run(*args):
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "dtorch.bench", *args],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


def test_micro_cases_report_consistent_ratios():
    lines = _run("--ops", "300", "--reps", "1", "--only", "add")
    assert [l["case"] for l in lines] == ["add"]
    (l,) = lines
    assert l["ops"] == 300 and l["goal"] == 1.0
    assert l["dtorch_s"] > 0 and l["torch_s"] > 0
    assert l["dtorch_issue_us_per_op"] <= l["dtorch_us_per_op"] + 1e-3
    assert l["ratio"] == pytest.approx(l["dtorch_s"] / l["torch_s"], rel=1e-2, abs=2e-3)


def _cli():
    lib = os.environ.get("DTORCH_LIBRARY", "")
    near = os.path.join(os.path.dirname(lib), "dtorch")
    return near if lib and os.access(near, os.X_OK) else None


def test_mlp_step_against_the_c_step():
    cli = _cli()
    args = ["--only", "mlp_step", "--steps", "1"] + (["--cli", cli] if cli else [])
    (l,) = _run(*args)
    assert l["case"] == "mlp_step" and (l["dp"], l["tp"]) == (2, 4)
    assert (l["hidden"], l["batch"], l["goal"]) == (1024, 64, 1.1)
    assert 0 < l["python_best_ms"] <= l["python_ms"]
    if cli is None:
        pytest.skip("no dtorch CLI next to DTORCH_LIBRARY: the C side is not run")
    assert l["cli"] == cli and len(l["c_runs_ms"]) == 2
    assert l["c_ms"] == min(l["c_runs_ms"])
    assert l["ratio"] == pytest.approx(l["python_ms"] / l["c_ms"], rel=1e-2)
