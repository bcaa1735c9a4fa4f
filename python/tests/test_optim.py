"""dtorch.optim against torch.optim: the parameters after N steps of SGD /
Adam / AdamW (each option) from the same start and gradients, state and
state_dict in torch's format (and loading torch's), the schedulers' lr
sequences, clip_grad_norm_, the grad modes, and a plain training loop
written once for both libraries, single-device and data-parallel."""
import math
import threading

import pytest
import torch

import dtorch

RTOL, ATOL = 1e-5, 1e-6


def close(d, t, rtol=RTOL, atol=ATOL):
    torch.testing.assert_close(d.to_torch() if isinstance(d, dtorch.Tensor) else d,
                               t.detach(), rtol=rtol, atol=atol)


def run_steps(ns, opt_name, kwargs, steps=5, groups=False):
    """Two parameters, a quadratic loss with fixed targets; returns the
    parameters and the optimiser after `steps` steps."""
    torch.manual_seed(0)
    w0, b0 = torch.randn(4, 3), torch.randn(3)
    x, y = torch.randn(6, 4), torch.randn(6, 3)
    nn = ns.nn
    w, b = nn.Parameter(ns.tensor(w0)), nn.Parameter(ns.tensor(b0))
    params = [{"params": [w]}, {"params": [b], "lr": 0.05}] if groups else [w, b]
    opt = getattr(ns.optim, opt_name)(params, **kwargs)
    xs, ys = ns.tensor(x), ns.tensor(y)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((xs @ w + b - ys) ** 2).mean()
        loss.backward()
        opt.step()
    return (w, b), opt


CASES = [("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9)),
         ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01)),
         ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
         ("Adam", dict(lr=0.01)), ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
         ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, maximize=True)),
         ("AdamW", dict(lr=0.01)), ("AdamW", dict(lr=0.02, weight_decay=0.1, amsgrad=True))]


@pytest.mark.parametrize("name,kwargs", CASES)
def test_steps_match_torch(name, kwargs):
    for groups in (False, True):
        (tw, tb), topt = run_steps(torch, name, kwargs, groups=groups)
        (dw, db), dopt = run_steps(dtorch, name, kwargs, groups=groups)
        close(dw, tw)
        close(db, tb)
        tsd, dsd = topt.state_dict(), dopt.state_dict()
        assert dsd["param_groups"] == tsd["param_groups"]
        assert dsd["state"].keys() == tsd["state"].keys()
        for i, st in tsd["state"].items():
            assert dsd["state"][i].keys() == st.keys()
            for k, v in st.items():
                close(dsd["state"][i][k], v)


def test_parameters_are_updated_in_place():
    nn = dtorch.nn
    m = nn.Linear(3, 2)
    w = m.weight
    entry = m.state_dict()["weight"]
    before = w.to_torch()
    opt = dtorch.optim.SGD(m.parameters(), lr=0.5)
    m(dtorch.ones(4, 3)).sum().backward()
    g = w.grad.to_torch()
    opt.step()
    assert m.weight is w
    close(w, before - 0.5 * g)
    close(entry, before - 0.5 * g)  # the state_dict entry aliases the parameter
    opt.zero_grad()
    assert w.grad is None
    m(dtorch.ones(4, 3)).sum().backward()
    opt.zero_grad(set_to_none=False)
    close(w.grad, torch.zeros(2, 3))


def test_load_state_dict_from_torch_continues_the_same():
    (tw, tb), topt = run_steps(torch, "AdamW", dict(lr=0.01), steps=3)
    (dw, db), dopt = run_steps(dtorch, "AdamW", dict(lr=0.01), steps=3)
    # a fresh dtorch optimiser on dtorch's parameters, given torch's state
    fresh = dtorch.optim.AdamW([dw, db], lr=0.5)
    fresh.load_state_dict(topt.state_dict())
    assert fresh.param_groups[0]["lr"] == 0.01 and fresh.param_groups[0]["params"][0] is dw
    assert isinstance(fresh.state[dw]["exp_avg"], dtorch.Tensor)
    for opt_t, opt_d in [(topt, fresh)]:
        x = torch.ones(6, 4)
        for ns, (w, b), opt in [(torch, (tw, tb), opt_t), (dtorch, (dw, db), opt_d)]:
            opt.zero_grad()
            ((ns.tensor(x) @ w + b) ** 2).mean().backward()
            opt.step()
    close(dw, tw)
    close(db, tb)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        fresh.load_state_dict({"state": {}, "param_groups": []})



@pytest.mark.parametrize("name,kwargs", CASES)
def test_state_dict_into_a_fresh_optimizer_continues_as_torch(name, kwargs):
    """dtorch's own state_dict loaded into a new optimiser, then more steps:
    the parameters torch reaches doing the same; state kept for an index
    with no parameter (torch keeps it) comes back in the next state_dict."""
    out = []
    for ns in (torch, dtorch):
        (w, b), opt = run_steps(ns, name, kwargs, steps=3, groups=True)
        sd = opt.state_dict()
        sd["state"][7] = {"note": 1}
        fresh = getattr(ns.optim, name)([{"params": [w]}, {"params": [b]}], **kwargs)
        fresh.load_state_dict(sd)
        x, y = torch.ones(6, 4), torch.full((6, 3), 0.5)
        for _ in range(2):
            fresh.zero_grad()
            ((ns.tensor(x) @ w + b - ns.tensor(y)) ** 2).mean().backward()
            fresh.step()
        out.append((w, b, sorted(fresh.state_dict()["state"]), fresh.param_groups[1]["lr"]))
    (tw, tb, tkeys, tlr), (dw, db, dkeys, dlr) = out
    close(dw, tw)
    close(db, tb)
    assert (dkeys, dlr) == (tkeys, tlr) and 7 in tkeys and tlr == 0.05

def test_optimizer_errors_match_torch():
    p = dtorch.nn.Parameter(dtorch.ones(2))
    tp = torch.nn.Parameter(torch.ones(2))
    for kwargs, msg in [(dict(lr=-1), "Invalid learning rate: -1"),
                        (dict(lr=0.1, momentum=-1), "Invalid momentum value: -1"),
                        (dict(lr=0.1, nesterov=True), "Nesterov momentum requires")]:
        with pytest.raises(ValueError, match=msg):
            torch.optim.SGD([tp], **kwargs)
        with pytest.raises(ValueError, match=msg):
            dtorch.optim.SGD([p], **kwargs)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        dtorch.optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts"):
        dtorch.optim.Adam(p)
    with pytest.raises(ValueError, match="some parameters appear in more than one"):
        dtorch.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        dtorch.optim.SGD([dtorch.ones(2, requires_grad=True) * 2], lr=0.1)
    opt = dtorch.optim.SGD([p], lr=0.1)
    opt.add_param_group({"params": dtorch.nn.Parameter(dtorch.ones(1)), "momentum": 0.5})
    assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[1]["momentum"] == 0.5


SCHEDULERS = [("LambdaLR", dict(lr_lambda=lambda e: 0.9 ** e)),
              ("StepLR", dict(step_size=3, gamma=0.5)),
              ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3)),
              ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001)),
              ("LinearLR", dict(start_factor=0.25, total_iters=6)),
              ("ConstantLR", dict(factor=0.5, total_iters=4)),
              ("ExponentialLR", dict(gamma=0.95))]


@pytest.mark.parametrize("name,kwargs", SCHEDULERS)
def test_scheduler_sequences_equal_torch(name, kwargs):
    seqs = []
    for ns in (torch, dtorch):
        p = ns.nn.Parameter(ns.ones(1))
        opt = ns.optim.SGD([{"params": [p]}, {"params": [ns.nn.Parameter(ns.ones(1))],
                                               "lr": 0.3}], lr=0.1)
        sched = getattr(ns.optim.lr_scheduler, name)(opt, **kwargs)
        seq = [sched.get_last_lr()]
        for _ in range(20):
            opt.step()
            sched.step()
            seq.append(sched.get_last_lr())
        seq.append([g["lr"] for g in opt.param_groups])
        seqs.append((seq, sched.state_dict()))
    (tseq, tsd), (dseq, dsd) = seqs
    assert dseq == tseq  # the same floats, exactly
    skip = {"lr_lambdas", "_get_lr_called_within_step", "_is_initial"}
    assert {k: v for k, v in dsd.items() if k not in skip} == \
        {k: v for k, v in tsd.items() if k not in skip}



@pytest.mark.parametrize("name,kwargs", SCHEDULERS + [
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.95))])
def test_scheduler_resume_epoch_steps_and_state_equal_torch(name, kwargs):
    """A scheduler made with last_epoch (resuming), stepped with explicit
    epochs (the closed forms, epoch 0 included), and one loaded from a
    state_dict: the same rates as torch's."""
    seqs = []
    for ns in (torch, dtorch):
        def make(last_epoch=-1):
            opt = ns.optim.SGD([{"params": [ns.nn.Parameter(ns.ones(1))]},
                                {"params": [ns.nn.Parameter(ns.ones(1))], "lr": 0.3}],
                               lr=0.1)
            if last_epoch >= 0:
                for g in opt.param_groups:
                    g["initial_lr"] = g["lr"]
            return opt, getattr(ns.optim.lr_scheduler, name)(opt, last_epoch=last_epoch,
                                                              **kwargs)
        opt, sched = make(last_epoch=5)
        seq = [sched.get_last_lr(), sched.last_epoch]
        for _ in range(4):
            opt.step()
            sched.step()
            seq.append(sched.get_last_lr())
        with pytest.warns(UserWarning, match="epoch parameter"):
            for epoch in (3, 0, 8, 1):
                sched.step(epoch)
                seq.append(sched.get_last_lr())
        opt2, sched2 = make()
        sched2.load_state_dict(sched.state_dict())
        opt2.step()
        sched2.step()
        seq += [sched2.get_last_lr(), sched2.last_epoch]
        seqs.append(seq)
    assert seqs[1] == seqs[0]

def test_scheduler_warns_when_stepped_first():
    opt = dtorch.optim.SGD([dtorch.nn.Parameter(dtorch.ones(1))], lr=0.1)
    sched = dtorch.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_matches_torch(norm_type):
    torch.manual_seed(1)
    vals = [torch.randn(4, 3), torch.randn(5)]
    res = []
    for ns in (torch, dtorch):
        ps = [ns.nn.Parameter(ns.tensor(v)) for v in vals]
        (sum((p * p * 3).sum() for p in ps)).backward()
        total = ns.nn.utils.clip_grad_norm_(ps, 1.5, norm_type=norm_type)
        res.append((total, [p.grad for p in ps]))
    (tt, tg), (dt, dg) = res
    close(dt, tt)
    for d, t in zip(dg, tg):
        close(d, t)
    p = dtorch.nn.Parameter(dtorch.ones(2))
    (p * float("inf")).sum().backward()
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        dtorch.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert dtorch.nn.utils.clip_grad_norm_([dtorch.nn.Parameter(dtorch.ones(1))], 1.0).item() == 0


def test_grad_modes():
    x = dtorch.ones(2, requires_grad=True)
    assert dtorch.is_grad_enabled()
    with dtorch.no_grad():
        assert not dtorch.is_grad_enabled() and not (x * 2).requires_grad
        with dtorch.enable_grad():
            assert (x * 2).requires_grad
        assert not dtorch.is_grad_enabled()
    assert (x * 2).requires_grad

    @dtorch.no_grad()
    def f():
        return (x * 2).requires_grad

    @dtorch.no_grad
    def g():
        yield dtorch.is_grad_enabled()
        yield dtorch.is_grad_enabled()
    assert f() is False and list(g()) == [False, False] and dtorch.is_grad_enabled()
    dtorch.set_grad_enabled(False)  # the function form switches at once
    assert not dtorch.is_grad_enabled()
    dtorch.set_grad_enabled(True)
    with dtorch.set_grad_enabled(False):
        assert not dtorch.is_grad_enabled()
    assert dtorch.is_grad_enabled()
    with dtorch.inference_mode():
        assert not dtorch.is_grad_enabled()
    with dtorch.inference_mode(False):
        assert dtorch.is_grad_enabled()

    @dtorch.set_grad_enabled(False)
    def h():
        return dtorch.is_grad_enabled()
    assert dtorch.is_grad_enabled() and h() is False and dtorch.is_grad_enabled()
    # per thread, as torch: another thread's mode is its own
    seen = []
    with dtorch.no_grad():
        t = threading.Thread(target=lambda: seen.append(dtorch.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]
    with pytest.raises(TypeError, match="set_grad_enabled: mode must be a bool"):
        dtorch.set_grad_enabled(1)


# ---- a plain training loop, written once for both libraries
def make_model(ns):
    nn, F = ns.nn, ns.nn.functional

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 32)
            self.norm = nn.LayerNorm(32)
            self.fc2 = nn.Linear(32, 5)

        def forward(self, x):
            return self.fc2(F.gelu(self.norm(self.fc1(x))))
    return MLP()


def train(ns, model, data, steps=20, to_input=None):
    """pytorch/examples style: CrossEntropyLoss, AdamW, LambdaLR (warm-up
    then decay), clip_grad_norm_; returns the losses."""
    nn, optim = ns.nn, ns.optim
    criterion = nn.CrossEntropyLoss(label_smoothing=0.05)
    optimizer = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    scheduler = optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 5) * 0.97 ** s)
    model.train()
    losses = []
    for step in range(steps):
        x, y = data[step % len(data)]
        if to_input is not None:
            x, y = to_input(x, y)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses


def _data():
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(16, 8, generator=g), torch.randint(0, 5, (16,), generator=g))
            for _ in range(4)]


def test_training_loop_matches_torch():
    torch.manual_seed(0)
    tmodel = make_model(torch)
    dmodel = make_model(dtorch)
    dmodel.load_state_dict(tmodel.state_dict())
    data = _data()
    tl = train(torch, tmodel, data)
    dl = train(dtorch, dmodel, data, to_input=lambda x, y: (dtorch.tensor(x), dtorch.tensor(y)))
    torch.testing.assert_close(torch.tensor(dl), torch.tensor(tl), rtol=1e-5, atol=0)
    assert tl[-1] < tl[0]
    for (n, p), (_, q) in zip(dmodel.named_parameters(), tmodel.named_parameters()):
        close(p, q, rtol=1e-4, atol=1e-5)


def test_training_loop_data_parallel_on_a_mesh():
    """The same loop with every parameter Replicate on a 1-D mesh of 4 and
    the batch Shard(0): the gradients come out Partial and the optimiser
    reduces them (DDP's all-reduce); the losses are torch's."""
    mesh = dtorch.init_device_mesh("cpu", (4,))
    torch.manual_seed(0)
    tmodel = make_model(torch)
    dmodel = make_model(dtorch)
    sd = {k: dtorch.Tensor(v, device_mesh=mesh, placements=[dtorch.Replicate()])
          for k, v in tmodel.state_dict().items()}
    dmodel.load_state_dict(sd, assign=True)
    assert all(p.placements == (dtorch.Replicate(),) and isinstance(p, dtorch.nn.Parameter)
               for p in dmodel.parameters())
    data = _data()
    tl = train(torch, tmodel, data)

    def shard(x, y):
        return (dtorch.Tensor(x, device_mesh=mesh, placements=[dtorch.Shard(0)]),
                dtorch.Tensor(y, device_mesh=mesh, placements=[dtorch.Replicate()]))
    dl = train(dtorch, dmodel, data, to_input=shard)
    torch.testing.assert_close(torch.tensor(dl), torch.tensor(tl), rtol=1e-5, atol=0)
    for p, q in zip(dmodel.parameters(), tmodel.parameters()):
        assert p.placements == (dtorch.Replicate(),)
        close(p, q, rtol=1e-4, atol=1e-5)


def _dp_tp_steps(opt_cls, kwargs, sharded, monkeypatch, steps=3):
    """A [8, 6] weight [Replicate, Shard(0)] and a [6] bias [Replicate,
    Replicate] on a dp 2 x tp 2 mesh, trained on batches Shard(0) on dp:
    (final values, the collectives of the last step, the loss values)."""
    from dtorch.distributed.tensor.debug import CommDebugMode
    if sharded is None:  # the default: shards under 8 KiB all-reduce
        monkeypatch.delenv("DTORCH_SHARDED_OPTIMIZER", raising=False)
    else:
        monkeypatch.setenv("DTORCH_SHARDED_OPTIMIZER", "1" if sharded else "0")  # 1: any size
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    g = torch.Generator().manual_seed(3)
    w0, b0 = torch.randn(8, 6, generator=g), torch.randn(6, generator=g)
    w = dtorch.nn.Parameter(dtorch.Tensor(w0, device_mesh=mesh,
                                          placements=[dtorch.Replicate(), dtorch.Shard(0)]))
    b = dtorch.nn.Parameter(dtorch.Tensor(b0, device_mesh=mesh,
                                          placements=[dtorch.Replicate(), dtorch.Replicate()]))
    opt = opt_cls([w, b], **kwargs)
    losses = []
    for k in range(steps):
        x = torch.randn(4, 8, generator=g)
        dx = dtorch.Tensor(x, device_mesh=mesh, placements=[dtorch.Shard(0), dtorch.Replicate()])
        opt.zero_grad()
        y = (dx @ w).redistribute(mesh, [dtorch.Shard(0), dtorch.Replicate()])  # the tp all-reduce
        loss = ((y + b) ** 2).mean()
        loss.backward()
        with CommDebugMode() as comm:
            opt.step()
        losses.append(loss.item())
    return (torch.from_numpy(w.full_tensor().numpy()), torch.from_numpy(b.full_tensor().numpy()),
            {str(k).split(".")[-1]: v for k, v in comm.get_comm_counts().items()}, losses,
            (w0, b0), opt)


@pytest.mark.parametrize("name,kwargs", [("AdamW", dict(lr=0.05)),
                                         ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01))])
def test_data_parallel_step_sharded_over_replicas(name, kwargs, monkeypatch):
    """The sharded step (ZeRO-1: reduce-scatter, 1/dp of the update per
    replica, all-gather) is bitwise the replicated one; its collectives are
    a reduce-scatter and an all-gather per parameter (the weight shards its
    dim 1 over dp, the bias its dim 0) where the replicated step all-reduces;
    the state is sharded over dp; it trains as torch does on one device."""
    cls = getattr(dtorch.optim, name)
    ws, bs, comm_s, ls, (w0, b0), opt = _dp_tp_steps(cls, kwargs, True, monkeypatch)
    wr, br, comm_r, lr_, _, _ = _dp_tp_steps(cls, kwargs, False, monkeypatch)
    assert torch.equal(ws, wr) and torch.equal(bs, br) and ls == lr_
    assert comm_s.get("reduce_scatter_tensor", 0) == 2 and comm_s.get("all_gather_into_tensor", 0) == 2
    assert comm_s.get("all_reduce", 0) == 0
    assert comm_r.get("all_reduce", 0) == 2 and comm_r.get("reduce_scatter_tensor", 0) == 0
    # the state is sharded over dp: each buffer is Shard on the dp dim
    bufs = [v for st in opt.state.values() for k, v in st.items() if k != "step"]
    assert bufs and all(isinstance(t.placements[0], dtorch.Shard) for t in bufs)
    # torch on one device from the same values and batches
    g = torch.Generator().manual_seed(3)
    torch.randn(8, 6, generator=g), torch.randn(6, generator=g)
    tw, tb = torch.nn.Parameter(w0.clone()), torch.nn.Parameter(b0.clone())
    topt = getattr(torch.optim, name)([tw, tb], **kwargs)
    for k in range(3):
        x = torch.randn(4, 8, generator=g)
        topt.zero_grad()
        ((x @ tw + tb) ** 2).mean().backward()
        topt.step()
    torch.testing.assert_close(ws, tw.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bs, tb.detach(), rtol=1e-5, atol=1e-6)
    # the weight's step ran on the flat view of its shards ([2, 24]); its
    # state_dict entries are laid out like the weight, equal to torch's
    assert any(tuple(t.shape) == (2, 24) for t in bufs)
    sd, tsd = opt.state_dict(), topt.state_dict()
    for i, shape in ((0, (8, 6)), (1, (6,))):
        for key, want in tsd["state"][i].items():
            if key == "step":
                continue
            got = sd["state"][i][key]
            assert tuple(got.shape) == shape, (key, tuple(got.shape))
            torch.testing.assert_close(torch.from_numpy(got.full_tensor().numpy()), want,
                                       rtol=1e-5, atol=1e-7)


def test_sharded_step_threshold(monkeypatch):
    """By default a replica's shard under 8 KiB takes the replicated step
    (the [8, 6] float32 weight here: 48 B), as the C optimisers decide."""
    *_, comm, _, _, _ = _dp_tp_steps(dtorch.optim.AdamW, dict(lr=0.05), None, monkeypatch,
                                     steps=1)
    assert comm.get("all_reduce", 0) == 2 and comm.get("reduce_scatter_tensor", 0) == 0
    monkeypatch.setenv("DTORCH_SHARDED_OPTIMIZER", "16")  # bytes: the weight's 48 B shards
    from dtorch.optim._sharded import _min_bytes
    assert _min_bytes() == 16
