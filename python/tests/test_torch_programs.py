"""PyTorch programs run on dtorch with only their imports changed.

Each program in programs/ is written once, for torch. It is loaded twice
by examples/python/torch_on_dtorch.py: with its torch imports rewritten
to dtorch's (run on a mesh of 4, or 2 x 4, ranks in this process) and
unchanged (real torch, one process: a one-rank gloo group and a one-rank
mesh, so parallelize_module and DTensor are torch's own). The torch run
starts from the dtorch run's initial weights and inputs; every loss and
every trained parameter must agree to 1e-5 relative."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import dtorch

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "programs"
sys.path.insert(0, str(ROOT / "examples" / "python"))
import torch_on_dtorch as tod  # noqa: E402

N = dtorch._lib.dt_runtime_num_ranks(dtorch._lib.dt_runtime_default())
needs = lambda k: pytest.mark.skipif(N < k, reason=f"needs {k} ranks (the runtime has {N})")  # noqa: E731


@pytest.fixture(scope="module")
def one_rank_torch():
    """Real torch's default group as one gloo rank (an earlier test file
    may have left a fake group of another size: it is replaced, and
    dropped again afterwards so a later fixture makes its own)."""
    import torch.distributed as dist
    if dist.is_initialized() and (dist.get_backend() != "gloo" or
                                  dist.get_world_size() != 1):
        dist.destroy_process_group()
    tod.init_torch_one_rank()
    yield
    dist.destroy_process_group()


def both(name, fn="train", dtorch_kw=None, torch_kw=None):
    """(dtorch's results, torch's results, dtorch's log lines) of
    programs/name, the torch run fed the dtorch run's init and inputs."""
    logged = []
    d = tod.load_program(str(PROGRAMS / name), "dtorch")
    got = tod.host(getattr(d, fn)(log=logged.append, **(dtorch_kw or {})))
    t = tod.load_program(str(PROGRAMS / name), "torch")
    kw = dict(torch_kw or {}, inputs=got["inputs"])
    if "init" in got:
        kw["init"] = got["init"]
    want = tod.host(getattr(t, fn)(log=lambda m: None, **kw))
    return got, want, logged


def changed(result):
    """The parameters that training moved away from their start."""
    return [k for k, v in result["params"].items()
            if not torch.equal(v, result["init"][k])]


# ---- the import rewrite
def test_rewrite_makes_each_torch_import_dtorchs():
    src = ("import os, torch\n"
           "import torch.nn as nn\n"
           "import torch.nn.functional as F\n"
           "import torch.distributed\n"
           "from torch import optim\n"
           "from torch.distributed.tensor.parallel import (\n"
           "    ColwiseParallel,\n    RowwiseParallel)\n"
           "if True:\n    import torch as th; x = 1\n"
           "s = 'import torch'  # import torch\n")
    new, changes = tod.rewrite_imports(src)
    assert new == ("import os; import dtorch as torch\n"
                   "import dtorch.nn as nn\n"
                   "import dtorch.nn.functional as F\n"
                   "import dtorch as torch; import dtorch.distributed\n"
                   "from dtorch import optim\n"
                   "from dtorch.distributed.tensor.parallel import (\n"
                   "    ColwiseParallel,\n    RowwiseParallel)\n"
                   "if True:\n    import dtorch as th; x = 1\n"
                   "s = 'import torch'  # import torch\n")
    assert [c[0] for c in changes] == [1, 2, 3, 4, 5, 6, 10]
    ns = {}
    exec(compile(new, "<rewritten>", "exec"), ns)
    assert ns["torch"] is dtorch and ns["nn"] is dtorch.nn
    assert ns["F"] is dtorch.nn.functional and ns["th"] is dtorch
    assert ns["ColwiseParallel"].__module__.startswith("dtorch.")


def test_rewrite_refuses_a_module_dtorch_lacks():
    with pytest.raises(ImportError, match=r"prog.py:2 imports torch.utils.data, "
                                          r"which dtorch does not provide"):
        tod.rewrite_imports("import torch\nfrom torch.utils.data import DataLoader\n",
                            "prog.py")
    with pytest.raises(ValueError, match="load_program: backend 'jax'"):
        tod.load_program(str(PROGRAMS / "tp_mlp.py"), "jax")


def test_the_command_line_runs_a_script_as_main(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("import sys\nimport torch\nimport torch.nn as nn\n"
                      "if __name__ == '__main__':\n"
                      "    y = nn.Linear(3, 2)(torch.ones(4, 3))\n"
                      "    print(type(torch).__name__, torch.__name__, tuple(y.shape), sys.argv[1:])\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "python")] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    tool = str(ROOT / "examples" / "python" / "torch_on_dtorch.py")
    out = subprocess.run([sys.executable, tool, str(script), "a", "b"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "module dtorch (4, 2) ['a', 'b']"
    shown = subprocess.run([sys.executable, tool, "--show", str(script)], env=env,
                           capture_output=True, text=True, timeout=120)
    assert "import torch.nn as nn\n    -> import dtorch.nn as nn" in shown.stdout


# ---- the programs, dtorch against torch
@needs(4)
def test_tp_mlp_optimizer_after_parallelize(one_rank_torch):
    got, want, logged = both("tp_mlp.py", dtorch_kw={"tp_size": 4},
                             torch_kw={"tp_size": 1})
    assert tod.mismatches(got, want) == []
    assert len(got["losses"]) == 10 and got["losses"][-1] < got["losses"][0]
    assert sorted(changed(want)) == sorted(want["params"])   # torch trained them all
    # rank 0 logs once per step: one controller, not one process per rank
    assert len(logged) == 10 and logged[0].startswith("TP step 0: loss ")


@needs(4)
def test_tp_mlp_optimizer_before_parallelize_trains_nothing(one_rank_torch):
    """parallelize_module replaces each parameter by a new DTensor
    Parameter; an optimizer made before holds the old ones, which get no
    gradient, so its step changes nothing: real torch (on its own
    parallelize_module) and dtorch agree."""
    got, want, _ = both("tp_mlp.py", dtorch_kw={"tp_size": 4, "optimizer_first": True},
                        torch_kw={"tp_size": 1, "optimizer_first": True})
    assert tod.mismatches(got, want) == []
    assert changed(want) == [] and changed(got) == []
    assert got["losses"][1] != got["losses"][0]            # the inputs still vary


@needs(4)
def test_sequence_parallel_block(one_rank_torch):
    got, want, _ = both("sequence_parallel.py", dtorch_kw={"tp_size": 4},
                        torch_kw={"tp_size": 1})
    assert tod.mismatches(got, want) == []
    assert sorted(changed(got)) == sorted(got["params"])
    assert got["losses"][-1] < got["losses"][0]


def test_plain_training_loop(one_rank_torch):
    got, want, logged = both("plain_train.py")
    assert tod.mismatches(got, want) == []
    assert got["lrs"][:3] == pytest.approx([1e-3, 2e-3, 3e-3])
    assert len(logged) == 12


@needs(4)
def test_dtensor_basics(one_rank_torch):
    got, want, logged = both("dtensor_basics.py", fn="run", dtorch_kw={"mesh_size": 4},
                        torch_kw={"mesh_size": 1})
    assert tod.mismatches(got["same"], want["same"]) == []
    assert got["same"]["placements"] == ["Shard(dim=0)", "Shard(dim=1)", "Replicate()"]
    for run in (got, want):
        for what, (a, b) in run["pairs"].items():
            assert torch.equal(a, b), what
    # the shapes that depend on the mesh: rank 0's shard of 8 rows
    assert got["pairs"]["to_local is my chunk"][0].shape == (2, 6)
    assert want["pairs"]["to_local is my chunk"][0].shape == (8, 6)
    assert logged == ["rank 0 of 4: my shard (2, 6) of (8, 6)"]


@needs(8)
def test_dp_by_tp(one_rank_torch):
    got, want, logged = both("dp_tp.py", dtorch_kw={"mesh_shape": (2, 4)},
                             torch_kw={"mesh_shape": (1, 1)})
    assert tod.mismatches(got, want) == []
    assert sorted(changed(got)) == sorted(got["params"])
    assert "dp=2 tp=4" in logged[0]


def test_mismatches_reports_what_differs():
    a = {"losses": [1.0, 2.0], "params": {"w": torch.ones(3)}}
    b = {"losses": [1.0, 2.0001], "params": {"w": torch.ones(3) * 1.001}}
    assert tod.mismatches(a, a) == []
    got = tod.mismatches(a, b)
    assert got[0] == "result['losses'][1]: 2.0 != 2.0001"
    assert got[1].startswith("result['params']['w']: relative error 0.000999")
    assert tod.mismatches({"w": torch.ones(2)}, {"w": torch.ones(3)}) == \
        ["result['w']: torch.Size([2]) != shape (3,)"]
