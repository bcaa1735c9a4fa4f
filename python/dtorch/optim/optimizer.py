"""optim.Optimizer: torch.optim.Optimizer's protocol on dtorch tensors.

param_groups is a list of dicts (params plus each hyperparameter, the
defaults filled in), state a dict per parameter with torch's keys, and
state_dict() / load_state_dict() use torch's format (state keyed by the
parameter's index over all groups, each group's "params" the list of its
indices): a torch optimiser's state_dict loads into a dtorch one, and a
dtorch one's, written by dtorch.save, is read back by torch.load as torch
tensors for a torch optimiser (whose load_state_dict takes no dtorch
tensors).

A step runs with grad mode off and writes each parameter IN PLACE
(Tensor.copy_), so every holder of the Parameter (a module, a state_dict
entry) sees the new value. The state buffers (exp_avg, momentum_buffer)
are replaced by new tensors each step instead (one pass fewer per
buffer). state_dict() holds each parameter's state dict itself, as
torch's does, so it follows later steps: copy.deepcopy it (or
dtorch.save it) to keep the state of one step.
"""
from collections import defaultdict
from copy import deepcopy

import torch
from torch.optim.optimizer import required as _required  # "no default": a group must give it

from .. import _errors
from .._grad_mode import no_grad
from .._tensor import Tensor
from ..nn.modules.module import _laid_out_like


class Optimizer:
    """Optimizer(params, defaults): params an iterable of tensors or of
    dicts (parameter groups)."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, (Tensor, torch.Tensor)):
            raise TypeError("params argument given to the optimizer should be an iterable "
                            "of Tensors or dicts, but got " + torch.typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self):
        out = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            out += "\n" + f"Parameter Group {i}"
            for key in sorted(group.keys()):
                if key != "params":
                    out += "\n" + f"    {key}: {group[key]}"
        return out + "\n)"

    def add_param_group(self, param_group):
        """Adds a group: its params, and each hyperparameter it does not
        give from the defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                "is " + torch.typename(param))
            if param.grad_fn is not None:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is _required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            import warnings
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error", stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Drops (set_to_none) or zeroes every parameter's gradient."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.zero_()

    def step(self, closure=None):
        """One update; closure (re-evaluates the loss) is called with grad
        mode on first and its loss returned."""
        loss = None
        if closure is not None:
            from .._grad_mode import enable_grad
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _step_group(self, group):
        raise NotImplementedError(f"{type(self).__name__}: the optimiser's update")

    # ---- checkpoints, in torch's format
    def state_dict(self):
        """{"state": {index: {key: value}}, "param_groups": [{..., "params":
        [indices]}]}; the values are the state's tensors (not copies),
        except a sharded step's entries on the flat view of their shards
        (optim/_sharded.py), given laid out like their parameter."""
        from ._sharded import param_layout
        mapping = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            mapping.update({id(p): i for i, p in enumerate(group["params"], start)
                            if id(p) not in mapping})
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed
        groups = [pack(g) for g in self.param_groups]
        # a key that is no parameter (a loaded state's index with none) as is
        state = {mapping[id(k)] if isinstance(k, Tensor) else k:
                 {key: param_layout(val, k) for key, val in v.items()}
                 if isinstance(k, Tensor) and isinstance(v, dict) else v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Loads a state_dict (of a dtorch or a torch optimiser over the
        same parameter layout): hyperparameters per group, and each state
        tensor as its parameter's dtype, mesh and placements ("step"
        copied as it is)."""
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't "
                             "match the size of optimizer's group")
        id_map = {old: p for g, s in zip(groups, saved_groups)
                  for old, p in zip(s["params"], g["params"])}
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k not in id_map:
                state[k] = v
                continue
            param = id_map[k]
            state[param] = {key: _state_value(key, val, param) for key, val in v.items()}
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            new_groups.append(s)
        self.state = state
        self.param_groups = new_groups


def _state_value(key, value, param):
    """A loaded state entry: "step" as saved; a tensor laid out like its
    parameter (torch's: cast to the parameter's dtype when floating)."""
    if key == "step":
        # a copy: the saved step may be another optimiser's live counter
        return value.clone() if isinstance(value, torch.Tensor) else value
    if not isinstance(value, (Tensor, torch.Tensor)):
        return value
    if isinstance(value, torch.Tensor):
        value = value.detach()
    with no_grad():
        if isinstance(value, Tensor) and value.device_mesh is None and param.device_mesh is None \
                and value.dtype == param.dtype:
            return value.clone()
        return _laid_out_like(value, param) if value.dtype.is_floating_point else value


def _check(cond, msg):
    if not cond:
        raise ValueError(msg)


def _grad_like(p):
    """p's gradient with p's placements (a Partial(sum) gradient of a
    Replicate parameter all-reduced: data parallelism); None if none."""
    g = p.grad
    if g is None:
        return None
    mesh = p.device_mesh
    if mesh is None and g.device_mesh is not None:
        raise _errors.PlacementError(
            "optimizer step: a single-device parameter has a DTensor gradient",
            "DT_ERR_PLACEMENT")
    if mesh is not None and tuple(g.placements) != tuple(p.placements):
        g = g.redistribute(mesh, list(p.placements))
    return g
