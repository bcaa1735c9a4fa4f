"""python -m dtorch.run and dtorch.run.spawn: a per-rank program once per
rank on its rank thread. Each rank's torchrun environment, output prefix,
random streams and process group; torch.distributed's collectives on
plain tensors against values computed here from every rank's inputs;
DTensors holding only the rank's shards; the torchrun corpus
(python/tests/torchrun/, written for torch, imports rewritten) against
the same models trained on one device by plain torch; planted desyncs,
exceptions and hangs reported with their Python lines, quickly, with a
non-zero exit; chaos and --stress."""
import importlib.util
import os
import random
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import dtorch
import dtorch.distributed as dist
import dtorch.run
from dtorch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "torchrun"
sys.path.insert(0, str(ROOT / "examples" / "python"))
import torch_on_dtorch as tod  # noqa: E402

LOSS = re.compile(r"^\[rank(\d+)\]: loss (\d+) (\S+)$")


def run_cli(args, script_text=None, tmp_path=None, name="prog.py", timeout=120):
    """(returncode, stdout, stderr, seconds) of python -m dtorch.run args
    [script]; script_text is written to tmp_path/name first."""
    cmd = [sys.executable, "-m", "dtorch.run"] + list(args)
    if script_text is not None:
        path = tmp_path / name
        path.write_text(textwrap.dedent(script_text))
        cmd.append(str(path))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(dtorch.__file__).parents[1])] +
                                        env.get("PYTHONPATH", "").split(os.pathsep))
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


# ---- each rank's process state
def test_spawn_gives_each_rank_torchruns_environment():
    before = os.environ
    had_rank = "RANK" in os.environ
    was_initialized = dist.is_initialized()   # the controller's own group

    def fn(rank, tag):
        dist.init_process_group("gloo")
        os.environ["MINE"] = str(rank)          # a rank's write stays its own
        if rank == 1:
            del os.environ["WORLD_SIZE"]          # and so does a delete
        dist.barrier()
        return {"tag": tag, "env": {k: os.environ.get(k) for k in (
                    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                    "MASTER_ADDR", "MASTER_PORT", "MINE")},
                "getenv": os.getenv("RANK"), "rank": dist.get_rank(),
                "world": dist.get_world_size(), "main": __name__,
                "has_ws": "WORLD_SIZE" in os.environ, "keys": "RANK" in dict(os.environ)}
    res = dtorch.run.spawn(fn, args=("x",), nprocs=4)
    for r, got in enumerate(res):
        assert got["tag"] == "x" and got["rank"] == r and got["world"] == 4
        assert got["getenv"] == str(r) and got["keys"]
        want_ws = None if r == 1 else "4"
        assert got["env"] == {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": want_ws,
                              "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1",
                              "MASTER_PORT": "29500", "MINE": str(r)}
        assert got["has_ws"] == (r != 1)
    assert os.environ is before and ("RANK" in os.environ) == had_rank
    assert "MINE" not in os.environ and dist.is_initialized() == was_initialized


def test_each_rank_has_its_own_random_streams():
    """rank r seeds with r, the ranks draw in turns (barriers between), and
    each rank's numbers are what that seed gives alone."""
    def fn(rank):
        dist.init_process_group()
        dtorch.manual_seed(rank)
        random.seed(rank)
        got = []
        for _ in range(3):
            got.append((dtorch.rand(4).tolist(), random.random()))
            dist.barrier()
        return got
    res = dtorch.run.spawn(fn, nprocs=4)
    for r in range(4):
        dtorch.manual_seed(r)
        py = random.Random(r)
        want = [(dtorch.rand(4).tolist(), py.random()) for _ in range(3)]
        assert res[r] == want
    assert res[0] != res[1]


def test_output_lines_are_prefixed_with_the_rank(tmp_path):
    rc, out, err, _ = run_cli(["--nproc-per-node", "3"], """
        import sys
        import dtorch.distributed as dist
        dist.init_process_group()
        print("a", dist.get_rank(), end="")
        print(" b")
        print("to stderr", file=sys.stderr)
        """, tmp_path)
    assert rc == 0, err
    assert sorted(out.splitlines()) == [f"[rank{r}]: a {r} b" for r in range(3)]
    assert sorted(line for line in err.splitlines() if "stderr" in line) == [
        f"[rank{r}]: to stderr" for r in range(3)]
    rc, out, _, _ = run_cli(["--nproc-per-node", "2", "--no-prefix"],
                            "print('plain')\n", tmp_path)
    assert rc == 0 and out.splitlines() == ["plain", "plain"]


def test_scripts_get_their_own_main_and_argv(tmp_path):
    rc, out, err, _ = run_cli(["--nproc-per-node", "2", "-m", "json.tool", "--help"])
    assert rc == 0 and "[rank1]: usage:" in out
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        import dtorch.distributed as dist

        class Box:                      # pickled by all_gather_object
            def __init__(self, v):
                self.v = v

        COUNT = []                      # each rank's own globals
        COUNT.append(1)
        if __name__ == "__main__":
            dist.init_process_group()
            got = [None] * dist.get_world_size()
            dist.all_gather_object(got, Box(dist.get_rank() * 10))
            print(sys.argv[1:], len(COUNT), [b.v for b in got], os.path.basename(__file__))
        """))
    rc, out, err, _ = run_cli(["--nproc-per-node", "2", str(script), "--lr", "3"])
    assert rc == 0, err
    assert sorted(out.splitlines()) == [
        f"[rank{r}]: ['--lr', '3'] 1 [0, 10] s.py" for r in range(2)]


# ---- torch.distributed's collectives on plain tensors
def _collectives(rank):
    n = 4
    dist.init_process_group("gloo")
    out = {}
    t = dtorch.tensor([1.0, 2.0, 3.0]) * (rank + 1)
    view = t[1:]
    dist.all_reduce(t)
    out["sum"], out["view"] = t.tolist(), view.tolist()    # in place: views see it
    for op in ("MAX", "MIN", "PRODUCT", "AVG"):
        x = dtorch.tensor([float(rank + 1), -float(rank)])
        w = dist.all_reduce(x, op=getattr(dist.ReduceOp, op), async_op=True)
        out[op] = (w.is_completed(), w.wait(), x.tolist())
    lst = [dtorch.zeros(2) for _ in range(n)]
    dist.all_gather(lst, dtorch.tensor([rank, 10.0 * rank]))
    out["all_gather"] = [x.tolist() for x in lst]
    cat, stk = dtorch.zeros(2 * n), dtorch.zeros(n, 2)
    dist.all_gather_into_tensor(cat, dtorch.tensor([rank, rank + 0.5]))
    dist.all_gather_into_tensor(stk, dtorch.tensor([rank, rank + 0.5]))
    out["into"] = (cat.tolist(), stk.tolist())
    o = dtorch.zeros(2)
    dist.reduce_scatter(o, [dtorch.full((2,), 100.0 * j + rank) for j in range(n)])
    out["reduce_scatter"] = o.tolist()
    o2 = dtorch.zeros(2)
    dist.reduce_scatter_tensor(o2, dtorch.arange(2.0 * n) + rank)
    out["reduce_scatter_tensor"] = o2.tolist()
    b = dtorch.full((3,), float(rank))
    dist.broadcast(b, src=2)
    b2 = dtorch.full((1,), float(rank))
    dist.broadcast(b2, group_src=3)
    out["broadcast"] = (b.tolist(), b2.tolist())
    outs = [dtorch.zeros(2) for _ in range(n)]
    dist.all_to_all(outs, [dtorch.tensor([10.0 * rank + j, -1.0]) for j in range(n)])
    out["all_to_all"] = [x.tolist() for x in outs]
    single = dtorch.zeros(n)
    dist.all_to_all_single(single, dtorch.arange(float(n)) + 10.0 * rank)
    out["all_to_all_single"] = single.tolist()
    red = dtorch.full((2,), float(rank + 1))
    dist.reduce(red, dst=1)
    out["reduce"] = red.tolist()
    pair = dist.new_group([1, 3])
    out["group"] = (pair if isinstance(pair, int) else (pair.rank(), pair.size()))
    if rank in (1, 3):
        g = dtorch.full((1,), float(rank))
        dist.all_reduce(g, group=pair)
        out["pair_sum"] = g.tolist()
        out["pair_rank"] = (dist.get_rank(pair), dist.get_world_size(pair),
                            dist.get_global_rank(pair, 1))
    if rank == 0:
        dist.send(dtorch.tensor([7.0, 8.0]), dst=3)
    if rank == 3:
        r = dtorch.zeros(2)
        out["recv"] = (dist.recv(r, src=0), r.tolist())
    objs = [{"r": rank}] if rank == 0 else [None]
    dist.broadcast_object_list(objs, src=0)
    out["objects"] = objs
    dist.barrier()
    return out


def test_collectives_against_every_ranks_inputs():
    n = 4
    res = dtorch.run.spawn(_collectives, nprocs=n)
    ins = [[1.0 * (r + 1), 2.0 * (r + 1), 3.0 * (r + 1)] for r in range(n)]
    for r, got in enumerate(res):
        assert got["sum"] == [sum(x[i] for x in ins) for i in range(3)]
        assert got["view"] == got["sum"][1:]
        assert got["MAX"] == (True, True, [4.0, 0.0])
        assert got["MIN"] == (True, True, [1.0, -3.0])
        assert got["PRODUCT"] == (True, True, [24.0, 0.0])
        assert got["AVG"] == (True, True, [2.5, -1.5])
        assert got["all_gather"] == [[float(j), 10.0 * j] for j in range(n)]
        assert got["into"] == ([v for j in range(n) for v in (j, j + 0.5)],
                               [[j, j + 0.5] for j in range(n)])
        assert got["reduce_scatter"] == [sum(100.0 * r + j for j in range(n))] * 2
        base = list(range(2 * n))
        assert got["reduce_scatter_tensor"] == [
            sum(base[i] + j for j in range(n)) for i in (2 * r, 2 * r + 1)]
        assert got["broadcast"] == ([2.0] * 3, [3.0])
        assert got["all_to_all"] == [[10.0 * j + r, -1.0] for j in range(n)]
        assert got["all_to_all_single"] == [r + 10.0 * j for j in range(n)]
        assert got["reduce"] == ([10.0, 10.0] if r == 1 else [float(r + 1)] * 2)
        assert got["objects"] == [{"r": 0}]
        if r in (1, 3):
            assert got["group"] == ([1, 3].index(r), 2)
            assert got["pair_sum"] == [4.0] and got["pair_rank"] == ([1, 3].index(r), 2, 3)
        else:
            assert got["group"] == dist.GroupMember.NON_GROUP_MEMBER
    assert res[3]["recv"] == (0, [7.0, 8.0])


def test_collectives_refused_outside_a_rank():
    mine = not dist.is_initialized()
    if mine:
        dist.init_process_group()
    try:
        with pytest.raises(RuntimeError, match="python -m dtorch.run"):
            dist.all_reduce(dtorch.ones(2))
    finally:
        if mine:
            dist.destroy_process_group()

    def bad(rank):
        dist.init_process_group()
        dist.all_reduce(torch.ones(2))           # a torch.Tensor, not dtorch's
    with pytest.raises(dtorch.run.RankFailedError, match="not a dtorch.Tensor"):
        dtorch.run.spawn(bad, nprocs=2)


# ---- DTensors: each rank its own shards
def _dtensors(rank):
    from dtorch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    out = {"mesh": (mesh.get_rank(), mesh.get_coordinate(), mesh["tp"].get_local_rank(),
                    mesh.get_group("dp").ranks)}
    local = dtorch.full((1, 3), float(rank))
    d = DTensor.from_local(local, mesh, [Shard(0), Shard(0)])
    out["from_local"] = (tuple(d.shape), isinstance(d, DTensor),
                         d.to_local().tolist(), d.full_tensor().tolist())
    value = torch.arange(8.0).reshape(4, 2) + 100 * rank     # differs per rank
    out["src0"] = distribute_tensor(value, mesh, [Shard(0), Replicate()]).to_local().tolist()
    out["own"] = distribute_tensor(value, mesh, [Shard(0), Replicate()],
                                   src_data_rank=None).to_local().tolist()
    w = distribute_tensor(dtorch.ones(4, 2, requires_grad=True), mesh, [Shard(0), Shard(1)])
    (w.to_local() * float(rank + 1)).sum().backward()
    out["grad"] = (w.is_leaf, w.grad.to_local().tolist())
    return out


def test_dtensors_hold_the_ranks_own_shards():
    res = dtorch.run.spawn(_dtensors, nprocs=4)
    for r, got in enumerate(res):
        assert got["mesh"] == (r, (r // 2, r % 2), r % 2, (r % 2, r % 2 + 2))
        assert got["from_local"] == ((4, 3), True, [[float(r)] * 3],
                                     [[float(j)] * 3 for j in range(4)])
        rows = torch.arange(8.0).reshape(4, 2)[2 * (r // 2):2 * (r // 2) + 2]
        assert got["src0"] == rows.tolist()                    # rank 0's value
        assert got["own"] == (rows + 100 * r).tolist()
        assert got["grad"] == (True, [[float(r + 1)]] * 2)


# ---- the corpus: torchrun scripts, imports rewritten, against one device
def _load_plain(name):
    spec = importlib.util.spec_from_file_location(f"plain_{name}", CORPUS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _reference_tp_mlp(m):
    model = m.MLP()
    m.fill_(model)
    opt = torch.optim.AdamW(model.parameters(), lr=m.LR)
    out = []
    for step in range(m.STEPS):
        x, target = m.batch(step)
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        out.append(loss.item())
    return out


def _reference_sequence_parallel(m):
    model = m.Block()
    m.fill_(model)
    opt = torch.optim.SGD(model.parameters(), lr=m.LR)
    out = []
    for step in range(m.STEPS):
        x = m.sequence(step)
        loss = ((model(x) + x) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        out.append(loss.item())
    return out


def _reference_dp_tp(m):
    model = m.MLP()
    m.fill_(model)
    opt = torch.optim.AdamW(model.parameters(), lr=m.LR)
    out = []
    for step in range(m.STEPS):
        losses = [((model(x) - t) ** 2).mean() for x, t in (m.batch(step, d) for d in (0, 1))]
        loss = (losses[0] + losses[1]) / 2
        loss.backward()
        opt.step()
        opt.zero_grad()
        out.append(loss.item())
    return out


def _reference_ddp_loop(m, world=4):
    model = torch.nn.Sequential(torch.nn.Linear(m.DIM, m.HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(m.HIDDEN, m.OUT))
    m.start(model, 0)
    opt = torch.optim.SGD(model.parameters(), lr=m.LR, momentum=0.9)
    out = []
    for step in range(m.STEPS):
        losses = [((model(x) - t) ** 2).mean() for x, t in (m.batch(step, r)
                                                          for r in range(world))]
        loss = sum(losses) / world
        loss.backward()
        opt.step()
        opt.zero_grad()
        out.append(loss.item())
    return out


REFERENCES = {"tp_mlp": _reference_tp_mlp, "sequence_parallel": _reference_sequence_parallel,
              "dp_tp": _reference_dp_tp, "ddp_loop": _reference_ddp_loop}


def losses_by_rank(stdout):
    got = {}
    for line in stdout.splitlines():
        m = LOSS.match(line)
        if m:
            got.setdefault(int(m.group(1)), {})[int(m.group(2))] = float(m.group(3))
    return {r: [v[k] for k in sorted(v)] for r, v in got.items()}


def rewritten(name, tmp_path):
    """The corpus script with its torch imports made dtorch's (and only
    those: the rest of the text is the torch script's)."""
    src = (CORPUS / f"{name}.py").read_text()
    new, changes = tod.rewrite_imports(src, f"{name}.py")
    assert changes and all(old.lstrip().startswith(("import torch", "from torch"))
                           for _, old, _ in changes)
    path = tmp_path / f"{name}.py"
    path.write_text(new)
    return path


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_corpus_against_one_device(name, tmp_path):
    path = rewritten(name, tmp_path)
    rc, out, err, _ = run_cli(["--nproc-per-node", "4", str(path)])
    assert rc == 0, err[-3000:]
    got = losses_by_rank(out)
    want = REFERENCES[name](_load_plain(name))
    assert sorted(got) == [0, 1, 2, 3], out
    for r in range(4):
        assert len(got[r]) == len(want)
        for step, (g, w) in enumerate(zip(got[r], want)):
            assert abs(g - w) <= 1e-5 * abs(w), f"rank {r} step {step}: {g} vs {w}"
    assert want[-1] < want[0]                                   # it trains
    if name == "tp_mlp":   # logged on rank 0 only, through device_mesh.get_rank()
        logged = [ln for ln in err.splitlines() if ": step " in ln]
        assert len(logged) == len(want) and all(ln.startswith("[rank0]: ") for ln in logged)


@pytest.mark.skipif(not os.environ.get("DTORCH_TEST_TORCHRUN"),
                    reason="real torchrun (gloo, 4 processes, ~10 s a script): "
                           "set DTORCH_TEST_TORCHRUN=1, or run "
                           "python/tests/torchrun/compare_torchrun.py")
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_corpus_against_real_torchrun(name, tmp_path):
    sys.path.insert(0, str(CORPUS))
    import compare_torchrun
    report = compare_torchrun.compare(name, tmp_path)
    assert report["ok"], report


# ---- failures become reports
DESYNC = """
    import dtorch as torch
    import dtorch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(4)
    if dist.get_rank() == 2:
        dist.all_gather([torch.zeros(4) for _ in range(4)], t)
    else:
        dist.all_reduce(t)
    print("not reached")
    """

RAISES = """
    import dtorch as torch
    import dtorch.distributed as dist

    def step(rank):
        if rank == 1:
            raise ValueError("planted in rank 1")
        dist.all_reduce(torch.ones(4))

    dist.init_process_group("gloo")
    dist.all_reduce(torch.ones(2))
    step(dist.get_rank())
    """


def test_planted_desync_is_reported_with_python_lines(tmp_path):
    rc, out, err, _ = run_cli(["--nproc-per-node", "4"], DESYNC, tmp_path, "desync.py")
    assert rc != 0 and "not reached" not in out
    assert err.count("members disagree") == 1, err           # printed once
    assert "ranks 0, 1, 3 called all_reduce(float32[4], sum) at desync.py:9" in err
    assert "rank 2 called all_gather(float32[16] in blocks) at desync.py:7" in err
    assert "rank 2 at desync.py:7" in err and "rank 0 at desync.py:9" in err


def test_planted_exception_is_reported_once(tmp_path):
    rc, out, err, _ = run_cli(["--nproc-per-node", "4"], RAISES, tmp_path, "raises.py")
    assert rc != 0
    assert err.count("ValueError: planted in rank 1") == 1, err
    assert "rank 1 failed at raises.py:7 (in step)" in err
    assert '[rank1]:   File "' in err and "raises.py\", line 7, in step" in err
    assert "ranks 0, 2, 3 stopped at their next collective because rank 1 failed" in err
    assert "rank 3 at raises.py:8 (in step)" in err


def test_a_dtensor_desync_names_each_ranks_python_line(tmp_path):
    rc, _, err, _ = run_cli(["--nproc-per-node", "4"], """
        import dtorch as torch
        import dtorch.distributed as dist
        from dtorch.distributed.device_mesh import init_device_mesh
        from dtorch.distributed.tensor import DTensor, Shard
        mesh = init_device_mesh("cpu", (4,))
        x = DTensor.from_local(torch.ones(2, 4), mesh, [Shard(0)])
        if dist.get_rank() == 2:
            y = x.redistribute(mesh, [Shard(1)])
        else:
            y = x.full_tensor()
        """, tmp_path, "dtd.py")
    assert rc != 0
    assert "ranks 0, 1, 3 called all_gather(float32[32] in blocks) at dtd.py:11" in err
    assert ") at dtd.py:9" in err and "rank 2 at dtd.py:9" in err
    assert "dtorch.run: ranks 0, 1, 2, 3 failed with:" in err     # each rank's call fails


def _spawn_script(text):
    """The script as a function of the rank (its source run by exec)."""
    code = compile(textwrap.dedent(text), "planted.py", "exec")
    return lambda rank: exec(code, {"__name__": "__main__"})


@pytest.mark.parametrize("text,what", [(DESYNC, "members disagree"),
                                       (RAISES, "planted in rank 1")])
def test_planted_failures_are_reported_within_a_second(text, what):
    fn = _spawn_script(text)
    t0 = time.monotonic()
    with pytest.raises(dtorch.run.RankFailedError, match=what) as e:
        dtorch.run.spawn(fn, nprocs=4)
    took = time.monotonic() - t0
    assert took < 1.0, took
    assert e.value.exit_code == 1 and len(e.value.failures) == 4
    peer = e.value.failures.get(0)
    if what.startswith("planted"):     # a peer's error carries rank 1's traceback
        assert "the traceback of rank 1" in str(peer) and "planted.py" in str(peer)


def test_a_stuck_rank_is_named_where_it_is(tmp_path):
    rc, out, err, took = run_cli(["--nproc-per-node", "3", "--timeout", "0.5"], """
        import time
        import dtorch as torch
        import dtorch.distributed as dist
        dist.init_process_group()
        if dist.get_rank() == 2:
            while True:
                time.sleep(0.01)
        dist.all_reduce(torch.ones(1))
        """, tmp_path, "stuck.py")
    assert rc != 0
    # rank 2 is in its loop: at the sleep (line 8) or the loop's test (line 7)
    assert re.search(r"missing: rank 2; rank 2 is in its SPMD function; rank 2 is at "
                     r"stuck\.py:[78] \(in <module>\)", err), err
    assert re.search(r"still running 2 s after the first failure:\n  rank 2 at "
                     r"stuck\.py:[78]", err), err
    assert took < 30


def test_sys_exit_codes(tmp_path):
    rc, _, err, _ = run_cli(["--nproc-per-node", "2"], """
        import sys, os
        sys.exit(0 if os.environ["RANK"] == "0" else 3)
        """, tmp_path)
    assert rc == 3 and "rank 1 failed" in err and "SystemExit: 3" in err
    rc, _, _, _ = run_cli(["--nproc-per-node", "2"], "import sys; sys.exit(0)\n", tmp_path)
    assert rc == 0


# ---- chaos and --stress
def test_chaos_leaves_the_results_alone(tmp_path):
    path = rewritten("ddp_loop", tmp_path)
    _, plain, _, _ = run_cli(["--nproc-per-node", "4", str(path)])
    rc, shaken, err, _ = run_cli(["--nproc-per-node", "4", "--chaos", "11", str(path)])
    assert rc == 0, err
    assert losses_by_rank(shaken) == losses_by_rank(plain) != {}


def test_stress_compares_what_the_ranks_print(tmp_path):
    path = rewritten("tp_mlp", tmp_path)
    rc, out, err, _ = run_cli(["--nproc-per-node", "4", "--stress", "3", str(path)])
    assert rc == 0, err
    assert "3 chaos seeds (1..3): every rank printed what it prints without chaos" in out
    racy = """
        import random
        print("draw", random.random())     # unseeded: differs from run to run
        print("fixed")
        """
    rc, out, err, _ = run_cli(["--nproc-per-node", "2", "--stress", "2", "--chaos", "5"],
                              racy, tmp_path, "racy.py")
    assert rc == 1
    assert "chaos seed 5 differs from the run without chaos: rank 0, line 1" in err
    assert "replay: python -m dtorch.run --nproc-per-node 2 --chaos 5" in err
    rc, out, err, _ = run_cli(["--nproc-per-node", "2", "--stress", "2",
                               "--stress-match", "^fixed"], racy, tmp_path, "racy.py")
    assert rc == 0, err


def test_stress_of_a_function():
    def fn(rank):
        dist.init_process_group()
        t = dtorch.full((3,), float(rank))
        dist.all_reduce(t)
        return t
    assert dtorch.run.stress(fn, nprocs=3, seeds=3) is None
    calls = []

    def racy(rank):
        calls.append(rank)
        return len(calls) if rank == 0 else 0   # depends on earlier runs
    seed, rank, want, got = dtorch.run.stress(racy, nprocs=2, seeds=2)
    assert (seed, rank) == (1, 0) and want != got
