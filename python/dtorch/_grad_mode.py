"""Autograd's grad mode as PyTorch's switches: no_grad, enable_grad,
set_grad_enabled, inference_mode, is_grad_enabled.

The mode is the C library's (dt_grad_enabled / dt_set_grad_enabled), so it
is per thread, as in PyTorch: a thread starts with grad mode on, and a
context entered on one thread does not change another's. Every switch is
a context manager and a decorator (of functions and of generators, whose
body then runs under the mode at each resumption, as torch's do).
"""
import functools
import inspect

from . import _lib


def is_grad_enabled():
    """True when ops on this thread record the autograd graph."""
    return bool(_lib.dt_grad_enabled())


def _set(mode):
    """Sets this thread's mode; returns the previous one."""
    return bool(_lib.dt_set_grad_enabled(bool(mode)))


class _DecoratorContextManager:
    """A context manager that also decorates: each call of the decorated
    function (each step of a decorated generator) runs inside a fresh copy
    of the context (clone())."""

    def __call__(self, func):
        if inspect.isclass(func):
            raise TypeError(f"{type(self).__name__}: cannot decorate a class ({func.__name__})")
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)

        @functools.wraps(func)
        def decorated(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return decorated

    def _wrap_generator(self, func):
        @functools.wraps(func)
        def decorated(*args, **kwargs):
            gen = func(*args, **kwargs)
            try:
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as e:
                        with self.clone():
                            response = gen.throw(e)
                    else:
                        with self.clone():
                            response = gen.send(request)
            except StopIteration as e:
                return e.value
        return decorated

    def clone(self):
        return self.__class__()


class _NoParamDecorator(_DecoratorContextManager):
    """@no_grad and @no_grad() both decorate, as torch's."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecorator):
    """Ops inside record no graph (their results do not require grad)."""

    def __init__(self):
        self.prev = False

    def __enter__(self):
        self.prev = _set(False)

    def __exit__(self, exc_type, exc_value, traceback):
        _set(self.prev)


class enable_grad(_NoParamDecorator):
    """Grad mode on inside (e.g. within a no_grad block)."""

    def __init__(self):
        self.prev = False

    def __enter__(self):
        self.prev = _set(True)

    def __exit__(self, exc_type, exc_value, traceback):
        _set(self.prev)


class set_grad_enabled(_DecoratorContextManager):
    """set_grad_enabled(mode): sets the mode at once (so a plain call
    `set_grad_enabled(False)` switches it), and as a context manager
    restores the previous mode on exit."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled: mode must be a bool, got {mode!r}")
        self.prev = _set(mode)
        self.mode = mode

    def __call__(self, func):
        # as a decorator the mode applies to the calls, not from now on
        _set(self.prev)
        return super().__call__(func)

    def __enter__(self):
        pass

    def __exit__(self, exc_type, exc_value, traceback):
        _set(self.prev)

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """inference_mode(mode=True): dtorch has no inference tensors, so
    mode=True is no_grad; mode=False leaves the grad mode as it is (as
    torch's inference_mode(False) does outside an inference block)."""

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        if callable(mode):  # @inference_mode without parentheses
            return cls()(mode)
        raise TypeError(f"inference_mode: mode must be a bool, got {mode!r}")

    def __init__(self, mode=True):
        self.mode = mode
        self.prev = None

    def __enter__(self):
        if self.mode:
            self.prev = _set(False)

    def __exit__(self, exc_type, exc_value, traceback):
        if self.mode:
            _set(self.prev)

    def clone(self):
        return self.__class__(self.mode)


def is_inference_mode_enabled():
    """dtorch has no inference tensors: always False."""
    return False
