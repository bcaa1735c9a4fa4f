"""dtorch.auto_redistribute() / dtorch.explicit_redistribute(): an op whose
inputs need a collective runs (and equals torch) under auto, raises
PlacementError under explicit; the contexts nest, restore the previous
mode on exit and on an exception, are per thread, and leave a
redistribution that needs no communication (or one asked for) alone."""
import threading

import pytest
import torch

import dtorch
from dtorch import PlacementError

X = torch.arange(16.0).reshape(4, 4)


def _mixed(mesh):
    """a Shard(0) and b Shard(1): a + b needs an all_to_all"""
    a = dtorch.Tensor(X, device_mesh=mesh, placements=[dtorch.Shard(0)])
    b = dtorch.Tensor(X * 2, device_mesh=mesh, placements=[dtorch.Shard(1)])
    return a, b


@pytest.fixture
def mesh():
    assert dtorch.redistribute_mode() == "default"
    yield dtorch.init_device_mesh("cpu", 2)
    assert dtorch.redistribute_mode() == "default"


def test_auto_runs_and_matches_torch(mesh):
    a, b = _mixed(mesh)
    with dtorch.auto_redistribute():
        assert dtorch.redistribute_mode() == "auto"
        c = a + b
    torch.testing.assert_close(c.to_torch(), X + X * 2)


def test_explicit_refuses_with_the_fix(mesh):
    a, b = _mixed(mesh)
    with dtorch.explicit_redistribute():
        assert dtorch.redistribute_mode() == "explicit"
        with pytest.raises(PlacementError, match=r"Tensor.__add__: .*cheapest fix.*\(dt_add\)"):
            a + b
        # the fix it names: redistribute first, then the op runs
        c = a + b.redistribute(mesh, [dtorch.Shard(0)])
        # pointwise on matching shards needs no collective: allowed
        d = a * 2.0
    torch.testing.assert_close(c.to_torch(), X + X * 2)
    torch.testing.assert_close(d.to_torch(), X * 2.0)


def test_nesting_and_restoring(mesh):
    a, b = _mixed(mesh)
    with dtorch.auto_redistribute():
        with dtorch.explicit_redistribute():
            with pytest.raises(PlacementError):
                a + b
            with dtorch.auto_redistribute():
                (a + b).to_torch()
            assert dtorch.redistribute_mode() == "explicit"
        assert dtorch.redistribute_mode() == "auto"
        (a + b).to_torch()


def test_restored_after_an_exception(mesh):
    with pytest.raises(KeyError):
        with dtorch.auto_redistribute():
            raise KeyError("inside")
    assert dtorch.redistribute_mode() == "default"
    a, b = _mixed(mesh)
    with pytest.raises(PlacementError):
        with dtorch.explicit_redistribute():
            a + b
    assert dtorch.redistribute_mode() == "default"


def test_enabled_false_is_the_opposite(mesh):
    with dtorch.auto_redistribute(enabled=False):
        assert dtorch.redistribute_mode() == "explicit"
    with dtorch.explicit_redistribute(enabled=False):
        assert dtorch.redistribute_mode() == "auto"
    with pytest.raises(TypeError, match="auto_redistribute: enabled must be a bool"):
        dtorch.auto_redistribute(enabled="yes")


def test_decorator(mesh):
    a, b = _mixed(mesh)

    @dtorch.auto_redistribute()
    def f():
        return a + b

    torch.testing.assert_close(f().to_torch(), X * 3)
    assert dtorch.redistribute_mode() == "default"


def test_per_thread(mesh):
    seen = []
    with dtorch.auto_redistribute():
        t = threading.Thread(target=lambda: seen.append(dtorch.redistribute_mode()))
        t.start()
        t.join()
        assert dtorch.redistribute_mode() == "auto"
    assert seen == ["default"]
