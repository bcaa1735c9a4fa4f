"""dtorch.save / dtorch.load for state dicts: a dict (nested dicts, lists
and tuples of ints, floats, strings, as optimiser state dicts are) of
dtorch tensors, DTensors, torch tensors and plain values.

The file is PyTorch's own: torch.save's zip archive of the object with
every dtorch tensor replaced by a torch.Tensor of its (global) value, so
real ``torch.load(path, weights_only=True)`` reads a dtorch checkpoint as
plain torch tensors, and ``dtorch.load`` reads what torch.save wrote
(torch tensors become dtorch tensors). A DTensor's layout (its mesh's
shape and dim names, its placements) is one more archive record,
``<archive>/dtorch_layout.json``, which torch.load does not read:
``dtorch.load(path, device_mesh=mesh)`` lays those tensors out on
``mesh`` again (its shape must be the recorded one); without a mesh they
come back single-device. A Partial DTensor is saved reduced, its global
value, and comes back Partial on the mesh (dtorch.Tensor's rule for
Partial data).

(The C library's safetensors checkpoints, dt_checkpoint_save and
friends in dtorch.h / docs/io.md, hold flat name -> tensor maps; a state
dict's nesting and plain values need the pickle torch's format carries,
and torch.load cannot read safetensors, so they are not used here.)"""
import copy
import io
import json
import os
import zipfile

import torch

from .distributed_spec import DeviceMesh, Partial, Replicate, Shard
from ._tensor import Tensor

_LAYOUT = "dtorch_layout.json"
_VERSION = 1


def _placement_str(p):
    if isinstance(p, Shard):
        return f"S({p.dim})"
    if isinstance(p, Partial):
        return f"P({p.reduce_op})"
    return "R"


def _placement_of(s, path):
    if s == "R":
        return Replicate()
    if s.startswith("S(") and s.endswith(")"):
        return Shard(int(s[2:-1]))
    if s.startswith("P(") and s.endswith(")"):
        return Partial(s[2:-1])
    raise ValueError(f"dtorch.load: placement {s!r} of {path} is not R, S(d) or P(op)")


def _to_torch(obj, path, layouts):
    """obj with dtorch tensors as torch tensors; DTensors' layouts into
    `layouts` under their path (a list of keys and indices)."""
    if isinstance(obj, Tensor):
        mesh = obj.device_mesh
        if mesh is not None:
            layouts.append({"path": list(path), "mesh_shape": list(mesh.shape),
                            "mesh_dim_names": mesh.mesh_dim_names,
                            "placements": [_placement_str(p) for p in obj.placements]})
        return obj.to_torch()
    if isinstance(obj, dict):
        out = copy.copy(obj)  # the same mapping type (OrderedDict stays)
        for k, v in obj.items():
            out[k] = _to_torch(v, path + [k], layouts)
        return out
    if isinstance(obj, (list, tuple)):
        items = [_to_torch(v, path + [i], layouts) for i, v in enumerate(obj)]
        return _same_sequence(obj, items)
    return obj


def _same_sequence(obj, items):
    """items in obj's sequence type: a namedtuple takes them as
    arguments, a list, tuple or other subclass (torch.Size) as one."""
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        return type(obj)(*items)
    return type(obj)(items)


def _check_keys(obj, path):
    # a layout's path is written as JSON: keys must be JSON-able as keys
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"dtorch.save: key {k!r} at {path or 'the top'} "
                                "is not a str or int")
            _check_keys(v, path + [k])
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _check_keys(v, path + [i])


def save(obj, f):
    """Writes obj (a state dict) to f, a path or a writable binary file,
    in PyTorch's format: torch.load reads it (weights_only=True included),
    DTensors as their full values."""
    layouts = []
    _check_keys(obj, [])
    data = _to_torch(obj, [], layouts)
    buf = io.BytesIO()
    torch.save(data, buf)
    with zipfile.ZipFile(buf, "a") as z:
        prefix = z.namelist()[0].split("/")[0]
        z.writestr(f"{prefix}/{_LAYOUT}",
                   json.dumps({"version": _VERSION, "dtensors": layouts}))
    if hasattr(f, "write"):
        f.write(buf.getvalue())
        return
    with open(os.fspath(f), "wb") as out:
        out.write(buf.getvalue())


def _read_layout(raw, name):
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            names = z.namelist()
            prefix = names[0].split("/")[0] if names else ""
            if f"{prefix}/{_LAYOUT}" not in names:
                return []  # written by torch.save
            meta = json.loads(z.read(f"{prefix}/{_LAYOUT}"))
    except zipfile.BadZipFile:
        return []  # torch.load explains
    if meta.get("version") != _VERSION:
        raise ValueError(f"dtorch.load: {name} has layout version "
                         f"{meta.get('version')!r}; this dtorch reads {_VERSION}")
    return meta["dtensors"]


def _from_torch(obj, path, layouts, mesh):
    if isinstance(obj, torch.Tensor):
        lay = layouts.get(tuple(path))
        if lay is None or mesh is None:
            return Tensor(obj)
        if list(mesh.shape) != lay["mesh_shape"]:
            raise ValueError(f"dtorch.load: {path} was saved on a mesh of shape "
                             f"{tuple(lay['mesh_shape'])}; device_mesh has shape "
                             f"{tuple(mesh.shape)}")
        pl = [_placement_of(p, path) for p in lay["placements"]]
        return Tensor(obj, device_mesh=mesh, placements=pl)
    if isinstance(obj, dict):
        out = copy.copy(obj)
        for k, v in obj.items():
            out[k] = _from_torch(v, path + [k], layouts, mesh)
        return out
    if isinstance(obj, list) or type(obj) is tuple or \
            isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        return _same_sequence(obj, [_from_torch(v, path + [i], layouts, mesh)
                                    for i, v in enumerate(obj)])
    return obj  # torch.Size and the like hold no tensors


def load(f, map_location=None, weights_only=True, *, device_mesh=None):
    """Reads what dtorch.save or torch.save wrote to f (a path or a
    readable binary file): torch tensors come back as dtorch tensors, the
    rest as saved. With device_mesh, the tensors that were DTensors come
    back as DTensors on it with their recorded placements (the mesh's
    shape must match); without, single-device. weights_only=True (as
    torch.load's default) unpickles only tensors and plain containers
    and values; False unpickles anything (only for files you trust).
    map_location is torch.load's (the data lands on dtorch's ranks
    whatever it says)."""
    if device_mesh is not None and not isinstance(device_mesh, DeviceMesh):
        raise TypeError(f"dtorch.load: device_mesh {device_mesh!r} is not a DeviceMesh")
    if hasattr(f, "read"):
        raw, name = f.read(), getattr(f, "name", "the file")
    else:
        name = os.fspath(f)
        if not os.path.isfile(name):
            raise FileNotFoundError(f"dtorch.load: no such file: {name!r}")
        with open(name, "rb") as fh:
            raw = fh.read()
    if not zipfile.is_zipfile(io.BytesIO(raw)) and not raw.startswith(b"\x80"):
        # neither torch's zip archive nor its older pickle stream
        raise ValueError(f"dtorch.load: {name} is not a checkpoint dtorch.save or "
                         f"torch.save wrote (it starts with {raw[:8]!r})")
    try:
        data = torch.load(io.BytesIO(raw), map_location=map_location,
                          weights_only=weights_only)
    except Exception as e:
        if weights_only and "Weights only load failed" in str(e):
            raise ValueError(f"dtorch.load: {name} holds objects beyond tensors "
                             "and plain values; pass weights_only=False only if "
                             f"you trust the file ({str(e).splitlines()[0]})") from e
        raise ValueError(f"dtorch.load: {name} is not a checkpoint dtorch.save "
                         f"or torch.save wrote ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''})") from e
    layouts = {tuple(d["path"]): d for d in _read_layout(raw, name)}
    return _from_torch(data, [], layouts, device_mesh)
