"""parallelize_module (torch.distributed.tensor.parallel.api)."""
import fnmatch
import warnings

from ....distributed_spec import DeviceMesh, current_mesh
from .style import ParallelStyle

__all__ = ["parallelize_module"]


def parallelize_module(module, device_mesh=None, parallelize_plan=None, *,
                       src_data_rank=0):
    """Applies parallelize_plan to module on device_mesh (the open `with
    mesh:` one when None): a ParallelStyle for module itself, or a dict
    from submodule paths ("layers.0.attn.wq"; each dot-separated token may
    use fnmatch wildcards: "layers.*.mlp.w1") to styles. A key that
    matches no submodule is an error (torch warns and skips it)."""
    if device_mesh is None:
        device_mesh = current_mesh()
        if device_mesh is None:
            raise ValueError("parallelize_module: no device_mesh given and no "
                             "`with mesh:` block is open")
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError(f"parallelize_module: device_mesh {device_mesh!r} is not a "
                        f"DeviceMesh")
    if parallelize_plan is None:
        warnings.warn("parallelize_module: no parallelize_plan is given, so this "
                      "call does nothing", stacklevel=2)
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan.src_data_rank = src_data_rank
        return parallelize_plan._apply(module, device_mesh)
    if not isinstance(parallelize_plan, dict):
        raise TypeError(f"parallelize_module: parallelize_plan must be a "
                        f"ParallelStyle or a dict of submodule paths to "
                        f"ParallelStyles, not {type(parallelize_plan).__name__}")
    for path, style in parallelize_plan.items():
        if not isinstance(path, str):
            raise TypeError(f"parallelize_module: plan key {path!r} is not a str")
        if not isinstance(style, ParallelStyle):
            raise TypeError(f"parallelize_module: the plan's style for {path!r} is "
                            f"{type(style).__name__}, not a ParallelStyle "
                            f"(ColwiseParallel, RowwiseParallel, SequenceParallel, "
                            f"PrepareModuleInput, PrepareModuleOutput)")
    for path, style in parallelize_plan.items():
        targets = _resolve(module, path)
        for sub in targets:
            style.src_data_rank = src_data_rank
            style._apply(sub, device_mesh)
    return module


def _resolve(module, path):
    """The submodules path names (wildcards per token), in module order."""
    if path == "":
        return [module]
    found = [module]
    done = []
    for token in path.split("."):
        nxt = []
        for m in found:
            nxt += [c for name, c in m.named_children() if fnmatch.fnmatch(name, token)]
        if not nxt:
            have = [n for m in found for n, _ in m.named_children()]
            where = ".".join(done) or "the module"
            raise ValueError(f"parallelize_module: plan key {path!r}: no submodule "
                             f"of {where} matches {token!r} (its children: {have})")
        found = nxt
        done.append(token)
    return found
