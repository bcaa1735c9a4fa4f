"""TensorFuture: the value of to_torch_async(). get() blocks (without the
GIL); ``await`` parks the coroutine on the future's eventfd with the event
loop's add_reader, so many futures are awaited at once without polling."""
import asyncio

from . import _errors, _lib


class TensorFuture:
    def __init__(self, handle, out, source):
        self._f = handle
        self._out = out          # the destination torch.Tensor
        self._source = source    # the dtorch.Tensor, alive until done

    def __del__(self):
        f, self._f = getattr(self, "_f", None), None
        if f and _lib is not None and _lib.dt_future_release is not None:
            # dtorch writes into self._out until the future completes: a
            # future dropped early waits for that before the buffer goes
            _lib.dt_future_wait(f, -1)
            _lib.dt_future_release(f)

    def is_ready(self):
        return bool(_lib.dt_future_ready(self._f))

    done = is_ready

    def get(self, timeout=None):
        """The torch.Tensor, waiting for it (timeout in seconds; None:
        forever). Raises dtorch's error if the computation failed, and
        DTorchTimeoutError if the timeout passes first."""
        ns = -1 if timeout is None else int(timeout * 1e9)
        _errors.check(_lib.dt_future_wait(self._f, ns))
        self._source = None
        return self._out

    result = get

    def fileno(self):
        """An eventfd that is readable once the value is ready (owned by the
        future)."""
        fd = _lib.dt_future_fd(self._f)
        if fd < 0:
            raise _errors.last()
        return fd

    def __await__(self):
        if not self.is_ready():
            loop = asyncio.get_running_loop()
            fd = self.fileno()
            waiter = loop.create_future()

            def ready():
                loop.remove_reader(fd)
                if not waiter.done():
                    waiter.set_result(None)
            loop.add_reader(fd, ready)
            try:
                yield from waiter.__await__()
            finally:
                loop.remove_reader(fd)
        return self.get(0)

    def __repr__(self):
        return f"TensorFuture({'ready' if self.is_ready() else 'pending'}, shape={tuple(self._out.shape)})"
