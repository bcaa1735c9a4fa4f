"""nn.Module: PyTorch's module protocol on dtorch tensors.

Registration (__setattr__ / __getattr__ / __delattr__ and the register_*
methods), traversal (parameters, named_modules, ...), state_dict /
load_state_dict, train / eval, zero_grad, to / apply, and __call__ with
forward pre-hooks and forward hooks follow torch.nn.Module's code
(torch/nn/modules/module.py) step for step, error messages included:
tensor-parallel plans and user code rely on the hooks' order and on what
their return values replace. Hook handles are torch's own RemovableHandle.

What differs: no backward hooks, no global (all-module) hooks, no
state_dict hooks beyond load_state_dict post-hooks, no extra-state, no
swap_tensors; membership tests use object identity (dtorch's == is
elementwise, as torch's, so sets of tensors are keyed by id here).
"""
import itertools
from collections import OrderedDict
from collections.abc import Mapping

import torch
from torch.nn.modules.module import _IncompatibleKeys  # (missing, unexpected)
from torch.utils.hooks import RemovableHandle

from ... import _lib
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ..parameter import Buffer, Parameter, _copy_into, _leaf_alias, buffer_persistent


_typename = torch.typename


def _addindent(s_, num_spaces):
    s = s_.split("\n")
    if len(s) == 1:
        return s_
    first = s.pop(0)
    s = [(num_spaces * " ") + line if line.strip() else "" for line in s]
    return first + "\n" + "\n".join(s)


def _detached(t):
    """A no-grad alias of t's storage (torch's t.detach())."""
    return Tensor._from_handle(_leaf_alias(t, False))


def _is_leaf(t):
    return _lib.dt_tensor_grad_fn(t._h) is None


def _forward_unimplemented(self, *input):
    raise NotImplementedError(f'Module [{type(self).__name__}] is missing the '
                              'required "forward" function')


class Module:
    """Base class of every dtorch.nn module (torch.nn.Module)."""

    dump_patches = False
    _version = 1
    training: bool
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if self.call_super_init is False and kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected "
                            f"keyword argument '{next(iter(kwargs))}'")
        if self.call_super_init is False and args:
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional "
                            f"argument but {len(args) + 1} were given")
        # object.__setattr__: these exist before __setattr__'s rules apply
        s = super().__setattr__
        s("training", True)
        s("_parameters", {})
        s("_buffers", {})
        s("_non_persistent_buffers_set", set())
        s("_forward_hooks", OrderedDict())
        s("_forward_hooks_with_kwargs", OrderedDict())
        s("_forward_hooks_always_called", OrderedDict())
        s("_forward_pre_hooks", OrderedDict())
        s("_forward_pre_hooks_with_kwargs", OrderedDict())
        s("_load_state_dict_post_hooks", OrderedDict())
        s("_modules", {})
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    forward = _forward_unimplemented

    # ---- registration
    def register_buffer(self, name, tensor, persistent=True):
        """Adds a buffer (state that is not a parameter); persistent ones
        are in state_dict."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        elif not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {_typename(name)}")
        elif "." in name:
            raise KeyError('buffer name can\'t contain "."')
        elif name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        elif hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        elif tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer "
                            f"'{name}' (dtorch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        """Adds a parameter (a Parameter, or None: a named slot that
        state_dict and the optimisers skip)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        elif not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {_typename(name)}")
        elif "." in name:
            raise KeyError('parameter name can\'t contain "."')
        elif name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        elif hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter "
                            f"'{name}' (dtorch.nn.Parameter or None required)")
        elif not _is_leaf(param):
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' "
                             "as a function of another Tensor, compute the value in "
                             "the forward() method.")
        else:
            self._parameters[name] = param

    def add_module(self, name, module):
        """Adds a child module, reachable as attribute `name`."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        elif not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        elif hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        elif "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        elif name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    def register_module(self, name, module):
        """Alias of add_module."""
        self.add_module(name, module)

    def get_submodule(self, target):
        """The submodule at dotted path target ("" is self)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        """The parameter at dotted path target."""
        module_path, _, param_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, param_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + param_name + "`")
        param = getattr(mod, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + param_name + "` is not an nn.Parameter")
        return param

    def __getattr__(self, name):
        d = self.__dict__
        for where in ("_parameters", "_buffers", "_modules"):
            if where in d and name in d[where]:
                return d[where][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        def remove_from(*dicts_or_sets):
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules,
                        self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(dtorch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            self._setattr_module_or_buffer(name, value, remove_from)

    def _setattr_module_or_buffer(self, name, value, remove_from):
        modules = self.__dict__.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(self.__dict__, self._parameters, self._buffers,
                        self._non_persistent_buffers_set)
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module "
                                f"'{name}' (dtorch.nn.Module or None expected)")
            modules[name] = value
        else:
            buffers = self.__dict__.get("_buffers")
            if isinstance(value, Buffer) or buffers is not None and name in buffers:
                if value is not None and not isinstance(value, Tensor):
                    raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                    "(dtorch.nn.Buffer, dtorch.Tensor or None expected)")
                if isinstance(value, Buffer):
                    persistent = buffer_persistent(value)
                else:
                    persistent = name not in self._non_persistent_buffers_set
                self.register_buffer(name, value, persistent)
            else:
                object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            super().__delattr__(name)

    def __dir__(self):
        keys = (dir(self.__class__) + list(self.__dict__) + list(self._parameters)
                + list(self._modules) + list(self._buffers))
        return sorted(k for k in keys if not k[0].isdigit())

    # ---- traversal
    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or id(v) in memo:
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield module_prefix + ("." if module_prefix else "") + k, v

    def parameters(self, recurse=True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix=prefix,
                                       recurse=recurse, remove_duplicate=remove_duplicate)

    def buffers(self, recurse=True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix=prefix,
                                       recurse=recurse, remove_duplicate=remove_duplicate)

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_children(self):
        memo = set()
        for name, module in self._modules.items():
            if module is not None and module not in memo:
                memo.add(module)
                yield name, module

    def modules(self, remove_duplicate=True):
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self not in memo:
            if remove_duplicate:
                memo.add(self)
            yield prefix, self
            for name, module in self._modules.items():
                if module is None:
                    continue
                sub = prefix + ("." if prefix else "") + name
                yield from module.named_modules(memo, sub, remove_duplicate)

    # ---- modes and gradients
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drops (set_to_none) or zeroes every parameter's gradient."""
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    # ---- conversions
    def _apply(self, fn, recurse=True):
        """fn on every parameter, gradient and buffer; a parameter keeps
        its identity (its .data is replaced, as torch's default)."""
        if recurse:
            for module in self.children():
                module._apply(fn)
        for key, param in self._parameters.items():
            if param is None:
                continue
            # the grad first: new data of another dtype drops it
            grad = param.grad
            with no_grad():
                applied = fn(param)
            if applied is not param:
                param.data = applied
            if grad is not None:
                with no_grad():
                    g = fn(grad)
                if g is not grad:
                    param.grad = g
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    def apply(self, fn):
        """fn(module) on every submodule (children first), then self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """to(dtype), to(device), to(device, dtype), to(tensor): floating
        parameters and buffers cast to dtype; every tensor copied to a
        device (single-device tensors only: a DTensor is placed by
        redistribute)."""
        device, dtype = _parse_to(*args, **kwargs)
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError("nn.Module.to only accepts floating point or complex "
                            f"dtypes, but got desired dtype={dtype}")

        def convert(t):
            out = t
            if device is not None:
                out = _to_device(out, device)
            if dtype is not None and out.dtype.is_floating_point and out.dtype != dtype:
                out = out.to(dtype)
            return out
        return self._apply(convert)

    def float(self):
        return self._apply(lambda t: t.float() if t.dtype.is_floating_point else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.dtype.is_floating_point else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.dtype.is_floating_point else t)

    def bfloat16(self):
        return self._apply(lambda t: t.bfloat16() if t.dtype.is_floating_point else t)

    def cpu(self):
        return self.to("cpu")

    # ---- hooks and calls
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args (a non-tuple is wrapped);
        with_kwargs: hook(module, args, kwargs) -> None or (args, kwargs)."""
        handle = RemovableHandle(self._forward_pre_hooks,
                                 extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """hook(module, args, output) (with_kwargs: hook(module, args,
        kwargs, output)) -> None or a new output; always_call: also run
        when forward raises."""
        handle = RemovableHandle(self._forward_hooks,
                                 extra_dict=[self._forward_hooks_with_kwargs,
                                             self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def _unsupported_hook(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: dtorch.nn.Module has no "
                                  "backward hooks (register_full_backward_hook, "
                                  "register_backward_hook, register_full_backward_pre_hook)")

    register_full_backward_hook = _unsupported_hook
    register_backward_hook = _unsupported_hook
    register_full_backward_pre_hook = _unsupported_hook

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) after load_state_dict has loaded
        this module and its children; it may edit the key lists in place."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    def _call_impl(self, *args, **kwargs):
        if not (self._forward_hooks or self._forward_pre_hooks):
            return self.forward(*args, **kwargs)
        result = None
        called_always = set()

        def inner():
            nonlocal result, args, kwargs
            for hook_id, hook in list(self._forward_pre_hooks.items()):
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    out = hook(self, args, kwargs)
                    if out is not None:
                        if isinstance(out, tuple) and len(out) == 2:
                            args, kwargs = out
                        else:
                            raise RuntimeError("forward pre-hook must return None or a tuple "
                                               f"of (new_args, new_kwargs), but got {out}.")
                else:
                    out = hook(self, args)
                    if out is not None:
                        args = out if isinstance(out, tuple) else (out,)
            result = self.forward(*args, **kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called:
                    called_always.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    out = hook(self, args, kwargs, result)
                else:
                    out = hook(self, args, result)
                if out is not None:
                    result = out
            return result

        try:
            return inner()
        except Exception:
            self._run_always_called(args, kwargs, result, called_always)
            raise

    def _run_always_called(self, args, kwargs, result, called):
        """The always_call forward hooks not yet run, after forward raised;
        their own errors become warnings (the forward's error is raised)."""
        import warnings
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id not in self._forward_hooks_always_called or hook_id in called:
                continue
            try:
                if hook_id in self._forward_hooks_with_kwargs:
                    out = hook(self, args, kwargs, result)
                else:
                    out = hook(self, args, result)
                if out is not None:
                    result = out
            except Exception as e:
                warnings.warn("module forward hook with ``always_call=True`` raised an "
                              "exception that was silenced as another error was raised "
                              f"in forward: {str(e)}", stacklevel=2)

    __call__ = _call_impl

    # ---- state
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else _detached(param)
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else _detached(buf)

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of the parameters and persistent buffers by dotted
        name; each entry shares its tensor's storage (detached unless
        keep_vars), so it sees the optimiser's in-place steps."""
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = dict(version=self._version)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(),
                                                        persistent.items()) if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key in state_dict:
                _load_one(self, name, key, param, state_dict[key], assign, error_msgs)
            elif strict:
                missing_keys.append(key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies state_dict's tensors (dtorch or torch) into the
        parameters and buffers in place (assign: puts them in instead);
        returns (missing_keys, unexpected_keys), raising when strict and
        either is not empty or on a shape mismatch, as torch."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True,
                                         missing_keys, unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state_dict.items()
                                 if k.startswith(child_prefix)}, child_prefix)
            incompatible = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible) is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be "
                        "modified, it should be done inplace.")

        load(self, state_dict)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self.__class__.__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ---- printing
    def _get_name(self):
        return self.__class__.__name__

    def extra_repr(self):
        """The module's own line in repr() (override: e.g. Linear's sizes)."""
        return ""

    def __repr__(self):
        extra_lines = []
        extra = self.extra_repr()
        if extra:
            extra_lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            child_lines.append("(" + key + "): " + _addindent(repr(module), 2))
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        return main_str + ")"


def _load_one(module, name, key, param, input_param, assign, error_msgs):
    """One entry of load_state_dict: checks, then copy_ (or assignment)."""
    if not isinstance(input_param, (Tensor, torch.Tensor)):
        error_msgs.append(f'While copying the parameter named "{key}", expected '
                          "torch.Tensor or Tensor-like object from checkpoint but "
                          f"received {type(input_param)}")
        return
    if len(param.shape) == 0 and len(input_param.shape) == 1 and input_param.shape[0] == 1:
        input_param = input_param[0]
    if tuple(input_param.shape) != tuple(param.shape):
        error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                          f"{torch.Size(input_param.shape)} from checkpoint, the shape in "
                          f"current model is {param.shape}.")
        return
    try:
        with no_grad():
            src = _laid_out_like(input_param, param)
            if assign:
                if isinstance(param, Parameter):
                    src = Parameter(src, requires_grad=param.requires_grad)
                setattr(module, name, src)
            else:
                _copy_into(param, src)
    except Exception as ex:
        error_msgs.append(f'While copying the parameter named "{key}", whose dimensions '
                          f"in the model are {param.size()} and whose dimensions in the "
                          f"checkpoint are {torch.Size(input_param.shape)}, an exception "
                          f"occurred : {ex.args}.")


def _laid_out_like(src, like):
    """src (torch or dtorch) as a dtorch tensor of like's dtype, mesh and
    placements."""
    mesh = like.device_mesh
    if isinstance(src, torch.Tensor):
        return Tensor(src, dtype=like.dtype, device_mesh=mesh,
                      placements=like.placements if mesh is not None else None)
    if src.dtype != like.dtype:
        src = src.to(like.dtype)
    if mesh is not None and (src.device_mesh is None or src.placements != like.placements):
        src = src.redistribute(mesh, list(like.placements))
    return src


def _parse_to(*args, **kwargs):
    """(device, dtype) of Module.to's forms."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"nn.Module.to: unexpected keyword argument '{next(iter(kwargs))}'")
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, (str, torch.device, int)):
            device = a
        elif isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, bool):
            pass  # non_blocking
        else:
            raise TypeError(f"nn.Module.to: cannot convert to {a!r} (a dtype, a device "
                            "or a tensor expected)")
    if isinstance(device, int):
        device = f"cpu:{device}"
    return device, dtype


def _to_device(t, device):
    """A single-device tensor copied to device ("cpu", "cpu:N", "cuda"...)."""
    if t.is_dtensor():
        raise ValueError(f"nn.Module.to: a DTensor is placed on its mesh; "
                         f"redistribute it instead of moving it to {device!r}")
    return Tensor(t.to_torch(), device=str(device))
