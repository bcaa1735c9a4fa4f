"""The tensor-parallel styles (torch.distributed.tensor.parallel.style):
ColwiseParallel, RowwiseParallel, SequenceParallel, PrepareModuleInput,
PrepareModuleOutput, PrepareModuleInputOutput.

One controller holds every rank, so the layouts are claims about global
values: a plain tensor given to a style is "every rank's local" (see
DTensor.from_local), and a style's output stays a DTensor whatever
use_local_output says — one controller tensor cannot be each rank's
local at once. The next style takes a DTensor as it is and redistributes
it to what it wants, so chains of styles compute what torch's do.

On an n-d mesh the styles act on its tensor-parallel dim (the one named
"tp", else the last): parameters are Replicate() on the other dims, a
plain input is Replicate() there, and a DTensor input keeps its
placements there (a batch Shard(0) over "dp" stays), which gives DP x TP
in one program. torch's styles take the 1-d mesh (mesh["tp"]); so do
these.
"""
import functools

import torch

from ...._tensor import Tensor
from ....distributed_spec import DeviceMesh, Placement, Replicate, Shard
from .._api import DTensor, distribute_module, distribute_param, from_local
from .._spmd_api import active as _spmd_active

__all__ = ["ParallelStyle", "ColwiseParallel", "RowwiseParallel",
           "SequenceParallel", "PrepareModuleInput", "PrepareModuleOutput",
           "PrepareModuleInputOutput"]


def _nn():
    from .... import nn
    return nn


def tp_dim(mesh):
    """The mesh dim the styles shard along: "tp" when named, else the last."""
    names = mesh.mesh_dim_names or ()
    return names.index("tp") if "tp" in names else mesh.ndim - 1


def _on_tp(mesh, placement, rest=None):
    """Placements with `placement` on the tp dim and rest (Replicate())
    elsewhere; rest may be a DTensor's placements to keep."""
    d = tp_dim(mesh)
    out = list(rest) if rest is not None else [Replicate()] * mesh.ndim
    out[d] = placement
    return out


def _norm(p, ndim):
    if p is not None and p.is_shard() and p.dim < 0:
        return Shard(p.dim + ndim)
    return p


def _check_layout(p, who, what):
    if p is not None and not isinstance(p, Placement):
        raise TypeError(f"{who}: {what} {p!r} is not a Placement (Shard, Replicate, "
                        f"Partial) or None")


def _as_tuple(layouts, who, what):
    if layouts is None:
        return None
    t = (layouts,) if isinstance(layouts, Placement) else tuple(layouts)
    for p in t:
        _check_layout(p, who, what)
    return t


def _to_dtensor(x, mesh, layout, who):
    """x as a DTensor on mesh: a DTensor as it is (on that mesh), a plain
    tensor as every rank's local under layout."""
    if isinstance(x, DTensor):
        if x.device_mesh != mesh:
            raise ValueError(f"{who}: the input DTensor is on {x.device_mesh!r}, "
                             f"not on the module's {mesh!r}")
        return x
    if not isinstance(x, (Tensor, torch.Tensor)):
        raise TypeError(f"{who}: expecting a tensor input, got {type(x).__name__}")
    return from_local(x, mesh, _on_tp(mesh, layout), run_check=False)


def _local_output(x, use_local_output):
    """torch's use_local_output: inside an SPMD function (each rank its own
    shards) a style's DTensor output becomes the rank's local tensor
    (differentiable); one controller keeps the DTensor (module doc)."""
    if use_local_output and _spmd_active() and isinstance(x, DTensor):
        return x.to_local()
    return x


def _redistribute_tp(x, mesh, desired):
    """x with `desired` on the tp dim (the other dims kept)."""
    d = tp_dim(mesh)
    want = _norm(desired, x.ndim)
    if _norm(x.placements[d], x.ndim) == want:
        return x
    return x.redistribute(mesh, _on_tp(mesh, want, x.placements))


class ParallelStyle:
    """The base of the styles: _apply(module, mesh) installs the style."""

    src_data_rank = 0

    def _apply(self, module, device_mesh):
        raise NotImplementedError(f"{type(self).__name__}._apply")


def _partition(style, want, module, mesh):
    """Lays out module's weight (and bias) by want[type]: {"weight": p,
    "bias": p}; a module type the style does not know is refused."""
    nn = _nn()
    for cls, layout in want.items():
        if isinstance(module, getattr(nn, cls)):
            for name, p in layout.items():
                if module._parameters.get(name) is not None:
                    distribute_param(module, name, mesh, _on_tp(mesh, p),
                                     style.src_data_rank)
            return
    raise NotImplementedError(f"{type(style).__name__} only supports nn.Linear and "
                              f"nn.Embedding, not {type(module).__name__}")


class ColwiseParallel(ParallelStyle):
    """Linear: weight Shard(0), bias Shard(0), output Shard(-1);
    Embedding: weight Shard(1). The input is redistributed to
    Replicate(); the output to output_layouts (Shard(-1))."""

    def __init__(self, *, input_layouts=None, output_layouts=None,
                 use_local_output=True):
        _check_layout(input_layouts, "ColwiseParallel", "input_layouts")
        _check_layout(output_layouts, "ColwiseParallel", "output_layouts")
        self.input_layouts = (input_layouts or Replicate(),)
        self.output_layouts = (output_layouts or Shard(-1),)
        self.desired_input_layouts = (Replicate(),)
        self.use_local_output = use_local_output

    _params = {"Linear": {"weight": Shard(0), "bias": Shard(0)},
               "Embedding": {"weight": Shard(1)}}

    def _input_fn(self, desired, mod, inputs, mesh):
        x = _to_dtensor(inputs[0], mesh, self.input_layouts[0], type(self).__name__)
        return (_redistribute_tp(x, mesh, desired),) + tuple(inputs[1:])

    def _output_fn(self, mod, outputs, mesh):
        return _local_output(_redistribute_tp(outputs, mesh, self.output_layouts[0]),
                             self.use_local_output)

    def _desired_input(self, module):
        return self.desired_input_layouts[0]

    def _apply(self, module, device_mesh):
        _need_mesh(device_mesh, self)
        # the desired input is fixed per module (one Rowwise style may serve
        # a Linear and an Embedding through a wildcard)
        desired = self._desired_input(module)
        return distribute_module(
            module, device_mesh,
            lambda name, m, mesh: _partition(self, self._params, m, mesh) if name == "" else None,
            functools.partial(self._input_fn, desired), self._output_fn)

    def __repr__(self):
        return (f"{type(self).__name__}(input_layouts={self.input_layouts}, "
                f"output_layouts={self.output_layouts}, "
                f"use_local_output={self.use_local_output})")


class RowwiseParallel(ColwiseParallel):
    """Linear: weight Shard(1), bias Replicate(), input Shard(-1);
    Embedding: weight Shard(0), input Replicate(). The Partial output is
    redistributed to output_layouts (Replicate(): an all_reduce;
    Shard(d): a reduce_scatter)."""

    def __init__(self, *, input_layouts=None, output_layouts=None,
                 use_local_output=True):
        _check_layout(input_layouts, "RowwiseParallel", "input_layouts")
        _check_layout(output_layouts, "RowwiseParallel", "output_layouts")
        self.input_layouts = (input_layouts or Shard(-1),)
        self.output_layouts = (output_layouts or Replicate(),)
        self.use_local_output = use_local_output

    _params = {"Linear": {"weight": Shard(1), "bias": Replicate()},
               "Embedding": {"weight": Shard(0)}}

    def _desired_input(self, module):
        nn = _nn()
        if isinstance(module, nn.Linear):
            return Shard(-1)
        if isinstance(module, nn.Embedding):
            return Replicate()
        raise NotImplementedError(f"RowwiseParallel only supports nn.Linear and "
                                  f"nn.Embedding, not {type(module).__name__}")


class SequenceParallel(ParallelStyle):
    """Parameters Replicate() (LayerNorm, RMSNorm, Dropout...), the input
    sharded on sequence_dim: a DTensor is redistributed to Shard(
    sequence_dim), a plain tensor is every rank's sequence shard."""

    def __init__(self, *, sequence_dim=1, use_local_output=False):
        if not isinstance(sequence_dim, int):
            raise TypeError(f"SequenceParallel: sequence_dim {sequence_dim!r} is "
                            f"not an int")
        self.sequence_sharding = (Shard(sequence_dim),)
        self.use_local_output = use_local_output

    def _input_fn(self, mod, inputs, mesh):
        x = inputs[0]
        if not isinstance(x, (Tensor, torch.Tensor)):
            raise ValueError(f"SequenceParallel: expecting input of {type(mod).__name__} "
                             f"to be a tensor or DTensor, but got {x!r}")
        x = _to_dtensor(x, mesh, self.sequence_sharding[0], "SequenceParallel")
        return (_redistribute_tp(x, mesh, self.sequence_sharding[0]),) + tuple(inputs[1:])

    def _output_fn(self, mod, outputs, mesh):
        return _local_output(outputs, self.use_local_output)

    def _apply(self, module, device_mesh):
        _need_mesh(device_mesh, self)
        return distribute_module(module, device_mesh, None, self._input_fn,
                                 self._output_fn)

    def __repr__(self):
        return (f"SequenceParallel(sequence_dim={self.sequence_sharding[0].dim}, "
                f"use_local_output={self.use_local_output})")


class PrepareModuleInput(ParallelStyle):
    """Annotates the module's inputs (positional: input_layouts, one per
    input, None to leave one alone; keyword: input_kwarg_layouts by name)
    and redistributes them to the desired layouts before forward."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None,
                 input_kwarg_layouts=None, desired_input_kwarg_layouts=None,
                 use_local_output=False):
        who = "PrepareModuleInput"
        self.input_layouts = _as_tuple(input_layouts, who, "input_layouts")
        self.desired_input_layouts = _as_tuple(desired_input_layouts, who,
                                               "desired_input_layouts")
        self.use_local_output = use_local_output
        if self.input_layouts is not None:
            if self.desired_input_layouts is None:
                raise ValueError(f"{who}: input_layouts {self.input_layouts} given "
                                 f"without desired_input_layouts")
            if len(self.input_layouts) != len(self.desired_input_layouts):
                raise ValueError(f"{who}: input_layouts {self.input_layouts} and "
                                 f"desired_input_layouts {self.desired_input_layouts} "
                                 f"differ in length")
        self.with_kwargs = input_kwarg_layouts is not None
        self.input_kwarg_layouts = dict(input_kwarg_layouts or {})
        self.desired_input_kwarg_layouts = dict(desired_input_kwarg_layouts or {})
        for k, p in list(self.input_kwarg_layouts.items()) + \
                list(self.desired_input_kwarg_layouts.items()):
            _check_layout(p, who, f"kwarg layout {k!r}")
        if self.with_kwargs and (set(self.input_kwarg_layouts) !=
                                 set(self.desired_input_kwarg_layouts)):
            raise ValueError(f"{who}: input_kwarg_layouts {self.input_kwarg_layouts} "
                             f"and desired_input_kwarg_layouts "
                             f"{self.desired_input_kwarg_layouts} name different inputs")

    def _arg(self, x, mesh, layout, desired):
        if layout is None:
            return x
        x = _to_dtensor(x, mesh, layout, type(self).__name__)
        x = x if desired is None else _redistribute_tp(x, mesh, desired)
        return _local_output(x, self.use_local_output)

    def _args(self, inputs, mesh):
        if self.input_layouts is None:
            return inputs
        if len(inputs) != len(self.input_layouts):
            raise ValueError(f"PrepareModuleInput: the module got {len(inputs)} "
                             f"inputs but input_layouts has {len(self.input_layouts)}")
        return tuple(self._arg(x, mesh, p, d) for x, p, d in
                     zip(inputs, self.input_layouts, self.desired_input_layouts))

    def _kwargs(self, kwargs, mesh):
        return {k: self._arg(v, mesh, self.input_kwarg_layouts.get(k),
                             self.desired_input_kwarg_layouts.get(k))
                for k, v in kwargs.items()}

    def _apply(self, module, device_mesh):
        _need_mesh(device_mesh, self)
        if self.with_kwargs:
            module.register_forward_pre_hook(
                lambda _, args, kwargs: (self._args(args, device_mesh),
                                         self._kwargs(kwargs, device_mesh)),
                with_kwargs=True)
        else:
            module.register_forward_pre_hook(
                lambda _, args: self._args(args, device_mesh))
        return module

    def __repr__(self):
        return (f"PrepareModuleInput(input_layouts={self.input_layouts}, "
                f"desired_input_layouts={self.desired_input_layouts}, "
                f"input_kwarg_layouts={self.input_kwarg_layouts}, "
                f"desired_input_kwarg_layouts={self.desired_input_kwarg_layouts}, "
                f"use_local_output={self.use_local_output})")


class PrepareModuleOutput(ParallelStyle):
    """Annotates the module's outputs with output_layouts (None leaves one
    alone) and redistributes them to desired_output_layouts."""

    def __init__(self, *, output_layouts, desired_output_layouts,
                 use_local_output=True):
        who = "PrepareModuleOutput"
        self.output_layouts = _as_tuple(output_layouts, who, "output_layouts")
        self.desired_output_layouts = _as_tuple(desired_output_layouts, who,
                                                "desired_output_layouts")
        self.use_local_output = use_local_output
        if len(self.output_layouts) != len(self.desired_output_layouts):
            raise ValueError(f"{who}: output_layouts {self.output_layouts} and "
                             f"desired_output_layouts {self.desired_output_layouts} "
                             f"differ in length")

    def _outputs(self, outputs, mesh):
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        if len(outs) != len(self.output_layouts):
            raise ValueError(f"PrepareModuleOutput: the module returned {len(outs)} "
                             f"outputs but output_layouts has {len(self.output_layouts)}")
        done = []
        for x, p, d in zip(outs, self.output_layouts, self.desired_output_layouts):
            if p is not None:
                x = _to_dtensor(x, mesh, p, "PrepareModuleOutput")
                x = x if d is None else _redistribute_tp(x, mesh, d)
                x = _local_output(x, self.use_local_output)
            done.append(x)
        return done[0] if len(done) == 1 else tuple(done)

    def _apply(self, module, device_mesh):
        _need_mesh(device_mesh, self)
        module.register_forward_hook(
            lambda _, inputs, outputs: self._outputs(outputs, device_mesh))
        return module

    def __repr__(self):
        return (f"PrepareModuleOutput(output_layouts={self.output_layouts}, "
                f"desired_output_layouts={self.desired_output_layouts}, "
                f"use_local_output={self.use_local_output})")


class PrepareModuleInputOutput(ParallelStyle):
    """PrepareModuleInput and PrepareModuleOutput on one module."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None,
                 input_kwarg_layouts=None, desired_input_kwarg_layouts=None,
                 use_local_input=False, output_layouts, desired_output_layouts,
                 use_local_output=True):
        self.prepare_module_input = PrepareModuleInput(
            input_layouts=input_layouts, desired_input_layouts=desired_input_layouts,
            input_kwarg_layouts=input_kwarg_layouts,
            desired_input_kwarg_layouts=desired_input_kwarg_layouts,
            use_local_output=use_local_input)
        self.prepare_module_output = PrepareModuleOutput(
            output_layouts=output_layouts, desired_output_layouts=desired_output_layouts,
            use_local_output=use_local_output)

    def _apply(self, module, device_mesh):
        self.prepare_module_input._apply(module, device_mesh)
        self.prepare_module_output._apply(module, device_mesh)
        return module


def _need_mesh(mesh, style):
    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"{type(style).__name__}: device_mesh {mesh!r} is not a "
                        f"DeviceMesh")

