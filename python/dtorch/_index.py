"""dtorch.Tensor's indexing (t[0], t[:, 1:3], t[..., None], t[idx],
t[mask]) and repr, as torch.Tensor's. Basic indexing gives views
(dt_select, dt_slice, dt_unsqueeze); an integer index tensor gathers
with dt_index_select; a boolean mask reads the mask (its selected count
decides the shape, as in torch) and gathers the selected positions."""
import numbers

import torch

from . import _errors, _lib


def _T():
    from ._tensor import Tensor
    return Tensor


def _wrap(h):
    from ._tensor import _wrap as w
    return w(h)


def _is_array(i):
    if isinstance(i, (_T(), torch.Tensor)):
        return True
    return isinstance(i, (list, tuple)) and not isinstance(i, str)


def _host(i):
    """An index array as a torch.Tensor (a list of bools: a mask)."""
    if isinstance(i, _T()):
        return i.to_torch()
    return i if isinstance(i, torch.Tensor) else torch.as_tensor(i)


def _consumes(i):
    if i is None or i is Ellipsis:
        return 0
    if _is_array(i):
        h = _host(i)
        return h.dim() if h.dtype == torch.bool else 1
    return 1


def _expand(t, idx):
    """idx as a tuple with the Ellipsis replaced by full slices."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    if sum(1 for i in idx if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumes(i) for i in idx)
    if used > t.dim():
        raise IndexError(f"too many indices for tensor of dimension {t.dim()}")
    out = []
    for i in idx:
        if i is Ellipsis:
            out += [slice(None)] * (t.dim() - used)
        else:
            out.append(i)
    return out


def _take(out, dim, flat, shape):
    """out.index_select(dim, flat) with the index's shape in place of dim."""
    from ._methods import _as_index
    size = out.shape[dim]
    if flat.numel() and (int(flat.max()) >= size or int(flat.min()) < -size):
        bad = int(flat.max()) if int(flat.max()) >= size else int(flat.min())
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
    flat = torch.where(flat < 0, flat + size, flat)
    idx = _as_index(flat, out)  # held: its handle must outlive the call
    res = _wrap(_lib.dt_index_select(out._h, dim, idx._h))
    new = tuple(res.shape[:dim]) + tuple(shape) + tuple(res.shape[dim + 1:])
    return res.reshape(*new)


def getitem(t, idx):
    idx = _expand(t, idx)
    if sum(1 for i in idx if _is_array(i)) > 1:
        raise NotImplementedError("dtorch: one index tensor (or mask) per subscript; "
                                  "index in two steps (t[i][:, j])")
    out, dim, src = t, 0, 0  # dim in out; src: the dim of t it came from
    for i in idx:
        if i is None:
            out = out.unsqueeze(dim)
            dim += 1
        elif isinstance(i, bool):
            raise TypeError("dtorch: a bool index (t[True]); use a mask tensor")
        elif isinstance(i, numbers.Integral):
            size = out.shape[dim]
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {src} "
                                 f"with size {size}")
            out = _wrap(_lib.dt_select(out._h, dim, int(i)))
            src += 1
        elif isinstance(i, slice):
            if i.step is not None and i.step <= 0:
                raise ValueError("step must be greater than zero")
            start, stop, step = i.indices(out.shape[dim])
            out = _wrap(_lib.dt_slice(out._h, dim, start, max(start, stop), step))
            dim, src = dim + 1, src + 1
        elif _is_array(i):
            h = _host(i)
            if h.dtype == torch.bool:
                out, dim = _mask(out, dim, h, src)
                src += h.dim()
            elif h.dtype.is_floating_point:
                raise IndexError("tensors used as indices must be long, int, byte or "
                                 f"bool tensors, got {h.dtype}")
            else:
                h = h.to(torch.int64)
                out = _take(out, dim, h.reshape(-1), h.shape)
                dim, src = dim + h.dim(), src + 1
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and "
                             f"long or bool tensors are valid indices (got "
                             f"{type(i).__name__})")
    return out


def _mask(out, dim, m, src):
    """out[..., m] at dim: the selected positions, flattened into one dim."""
    k = m.dim()
    if k == 0:
        out = out.unsqueeze(dim)
        return _take(out, dim, torch.zeros(1 if bool(m) else 0, dtype=torch.int64),
                     (1 if bool(m) else 0,)), dim + 1
    have = tuple(out.shape[dim:dim + k])
    for j in range(k):
        if j >= len(have) or have[j] != m.shape[j]:
            raise IndexError(f"The shape of the mask {list(m.shape)} at index {j} does not "
                             f"match the shape of the indexed tensor {list(out.shape)} at "
                             f"index {src + j}")
    if k > 1:
        out = out.flatten(dim, dim + k - 1)
    sel = m.reshape(-1).nonzero().reshape(-1)
    return _take(out, dim, sel, sel.shape), dim + 1


def tensor_repr(t):
    """torch's text for the value ("tensor([1., 2.])", the dtype where
    torch shows it, requires_grad / grad_fn), in DTensor(...) with the
    mesh and placements for a DTensor (the full value, not one shard)."""
    try:
        text = repr(t.to_torch())
    except _errors.DTorchError as e:
        return f"dtorch.Tensor(<error: {e}>, shape={tuple(t.shape)}, dtype={t.dtype})"
    fn = _lib.dt_tensor_grad_fn(t._h)
    if fn:
        text = text[:-1] + f", grad_fn=<{fn.decode()}>)"
    elif t.requires_grad:
        text = text[:-1] + ", requires_grad=True)"
    if t.is_dtensor():
        return (f"DTensor(full_tensor={text}, device_mesh={t.device_mesh!r}, "
                f"placements={tuple(t.placements)!r})")
    return text
