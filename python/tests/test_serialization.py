"""dtorch.save / dtorch.load: round trips of a model-like and an
optimiser-like state dict (nested dicts and lists, ints, floats, every
tensor dtype, DTensors with Shard / Replicate / Partial), interop with
real torch.save / torch.load in both directions, and the errors (a
missing file, a file of another format, a mesh of another shape, objects
beyond weights_only)."""
import collections
import io

import pytest
import torch

import dtorch


def _model_like(mesh):
    torch.manual_seed(0)
    w = torch.randn(4, 6)
    return collections.OrderedDict([
        ("embed.weight", dtorch.Tensor(torch.randn(8, 4))),
        ("fc.weight", dtorch.Tensor(w, device_mesh=mesh, placements=[dtorch.Shard(0)])),
        ("fc.bias", dtorch.Tensor(torch.randn(4), device_mesh=mesh,
                                  placements=[dtorch.Replicate()])),
        ("grad_acc", dtorch.Tensor(w, device_mesh=mesh, placements=[dtorch.Partial()])),
        ("half", dtorch.Tensor(torch.randn(3).to(torch.bfloat16))),
        ("mask", dtorch.Tensor(torch.tensor([True, False]))),
        ("steps", dtorch.Tensor(torch.tensor([3, 4], dtype=torch.int64))),
        ("plain", torch.arange(3)),
    ])


def _optim_like():
    return {"state": {0: {"step": 7, "exp_avg": dtorch.Tensor(torch.full((3,), 0.5)),
                          "exp_avg_sq": dtorch.Tensor(torch.full((3,), 0.25))},
                      1: {"step": 7, "momentum_buffer": None}},
            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8,
                              "weight_decay": 0.0, "amsgrad": False,
                              "params": [0, 1], "name": "default"}]}


def _plain(obj):
    """the same structure with torch tensors, for comparisons"""
    if isinstance(obj, dtorch.Tensor):
        return obj.to_torch()
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
    return obj


def _assert_same(got, want):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype
        assert torch.equal(got, want)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            _assert_same(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_same(g, w)
    else:
        assert got == want and type(got) is type(want)


@pytest.fixture
def mesh():
    return dtorch.init_device_mesh("cpu", 2, mesh_dim_names=["dp"])


def test_model_round_trip_with_a_mesh(tmp_path, mesh):
    sd = _model_like(mesh)
    dtorch.save(sd, tmp_path / "m.pt")
    back = dtorch.load(tmp_path / "m.pt", device_mesh=mesh)
    assert type(back) is collections.OrderedDict and list(back) == list(sd)
    for k, v in sd.items():
        got = back[k]
        assert isinstance(got, dtorch.Tensor)
        want_pl = v.placements if isinstance(v, dtorch.Tensor) else None
        assert got.placements == want_pl
        assert (got.device_mesh is None) == (want_pl is None)
        want = v.to_torch() if isinstance(v, dtorch.Tensor) else v
        assert got.dtype == want.dtype and torch.equal(got.to_torch(), want)


def test_model_round_trip_without_a_mesh(tmp_path, mesh):
    sd = _model_like(mesh)
    dtorch.save(sd, tmp_path / "m.pt")
    back = dtorch.load(tmp_path / "m.pt")
    assert all(t.device_mesh is None for t in back.values())
    _assert_same(_plain(back), _plain(sd))


def test_optimizer_round_trip(tmp_path):
    sd = _optim_like()
    buf = io.BytesIO()
    dtorch.save(sd, buf)
    buf.seek(0)
    back = dtorch.load(buf)
    _assert_same(_plain(back), _plain(sd))
    assert back["state"][1]["momentum_buffer"] is None
    assert back["param_groups"][0]["betas"] == (0.9, 0.999)


def test_real_torch_loads_what_dtorch_saved(tmp_path, mesh):
    sd = _model_like(mesh)
    sd["optim"] = _optim_like()
    dtorch.save(sd, tmp_path / "m.pt")
    loaded = torch.load(tmp_path / "m.pt", weights_only=True)
    _assert_same(loaded, _plain(sd))
    # the Partial DTensor is saved as its reduced (global) value
    torch.testing.assert_close(loaded["grad_acc"], sd["grad_acc"].to_torch())
    # and a real optimiser accepts the optimiser state
    p = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(3))]
    opt = torch.optim.Adam(p)
    opt.load_state_dict(loaded["optim"])
    assert opt.state_dict()["state"][0]["step"] == 7


def test_dtorch_loads_what_real_torch_saved(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, tmp_path / "t.pt")
    back = dtorch.load(tmp_path / "t.pt")
    assert isinstance(back["model"]["weight"], dtorch.Tensor)
    _assert_same(_plain(back), torch.load(tmp_path / "t.pt", weights_only=True))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"dtorch.load: no such file: .*nope.pt"):
        dtorch.load(tmp_path / "nope.pt")


def test_wrong_format(tmp_path):
    (tmp_path / "x.txt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match=r"dtorch.load: .*x.txt is not a checkpoint "
                                         r"dtorch.save or torch.save wrote"):
        dtorch.load(tmp_path / "x.txt")
    from safetensors.torch import save_file
    save_file({"a": torch.ones(2)}, str(tmp_path / "s.safetensors"))
    with pytest.raises(ValueError, match="is not a checkpoint"):
        dtorch.load(tmp_path / "s.safetensors")


def test_wrong_mesh_shape(tmp_path, mesh):
    dtorch.save(_model_like(mesh), tmp_path / "m.pt")
    other = dtorch.init_device_mesh("cpu", 4)
    with pytest.raises(ValueError, match=r"dtorch.load: \['fc.weight'\] was saved on a mesh "
                                         r"of shape \(2,\); device_mesh has shape \(4,\)"):
        dtorch.load(tmp_path / "m.pt", device_mesh=other)
    with pytest.raises(TypeError, match="device_mesh 'cpu' is not a DeviceMesh"):
        dtorch.load(tmp_path / "m.pt", device_mesh="cpu")


class _Custom:
    pass


def test_weights_only(tmp_path):
    dtorch.save({"obj": _Custom()}, tmp_path / "c.pt")
    with pytest.raises(ValueError, match="holds objects beyond tensors and plain values"):
        dtorch.load(tmp_path / "c.pt")
    assert isinstance(dtorch.load(tmp_path / "c.pt", weights_only=False)["obj"], _Custom)


def test_bad_keys(tmp_path):
    with pytest.raises(TypeError, match=r"dtorch.save: key \(1, 2\) at the top"):
        dtorch.save({(1, 2): 3}, tmp_path / "k.pt")


_Pair = collections.namedtuple("_Pair", "tensor count")


def test_tuple_kinds_round_trip_as_torch(tmp_path, mesh):
    """A torch.Size (a tuple subclass that is no namedtuple) is saved as
    torch.save saves it; a namedtuple's tensors come back as dtorch
    tensors (laid out again), as a plain tuple's do."""
    sd = {"shape": torch.Size([2, 3]), "pair": _Pair(dtorch.Tensor(torch.arange(4.0),
                                                                   device_mesh=mesh,
                                                                   placements=[dtorch.Shard(0)]), 5),
          "tup": (dtorch.Tensor(torch.ones(2)), 1)}
    dtorch.save(sd, tmp_path / "s.pt")
    ref = tmp_path / "r.pt"
    torch.save({"shape": torch.Size([2, 3])}, ref)
    assert torch.load(tmp_path / "s.pt", weights_only=False)["shape"] == \
        torch.load(ref, weights_only=True)["shape"]
    back = dtorch.load(tmp_path / "s.pt", weights_only=False, device_mesh=mesh)
    assert type(back["shape"]) is torch.Size and back["shape"] == (2, 3)
    assert type(back["pair"]) is _Pair and back["pair"].count == 5
    assert isinstance(back["pair"].tensor, dtorch.Tensor)
    assert back["pair"].tensor.placements == (dtorch.Shard(0),)
    assert isinstance(back["tup"][0], dtorch.Tensor)
