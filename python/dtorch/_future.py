"""Futures. Future wraps a dt_future (events, checkpoint loads):
wait(), status, error, add_done_callback() (dtorch's completion thread
calls it), notify_ring() (a CQE in the caller's io_uring). TensorFuture is
the value of to_torch_async(): get() blocks (without the GIL); ``await``
parks the coroutine on the future's eventfd with the event loop's
add_reader, so many futures are awaited at once without polling."""
import asyncio
import atexit
import threading
import time
import traceback

from . import _errors, _lib

# each pending add_done_callback's C function and future reference, by id:
# alive until dtorch calls it (a collected CFUNCTYPE would crash the
# completion thread)
_pending = {}
_pending_lock = threading.Lock()
_next_id = [0]


@atexit.register
def _drain_callbacks(timeout=10.0):
    # a callback must not run after the interpreter is gone: wait for the
    # pending ones (their futures complete as the runtime finishes)
    end = time.monotonic() + timeout
    while _pending and time.monotonic() < end:
        time.sleep(0.001)


class Future:
    """A dtorch future (dt_future): the completion of asynchronous work."""

    def __init__(self, handle):
        self._f = handle

    def __del__(self):
        f, self._f = getattr(self, "_f", None), None
        if f and _lib is not None and _lib.dt_future_release is not None:
            _lib.dt_future_release(f)

    def is_ready(self):
        """True once the work completed (successfully or not)."""
        return bool(_lib.dt_future_ready(self._f))

    done = is_ready

    def wait(self, timeout=None):
        """Blocks until complete (timeout in seconds; None: forever).
        Raises the work's error, or DTorchTimeoutError if it is still
        pending when the timeout passes (the future stays valid)."""
        ns = -1 if timeout is None else int(timeout * 1e9)
        _errors.check(_lib.dt_future_wait(self._f, ns))

    @property
    def status(self):
        """"DT_OK", the error's status name, or "DT_ERR_TIMEOUT" while
        pending (dt_future_status)."""
        st = _lib.dt_future_status(self._f)
        return _errors.STATUS_NAMES[st] if 0 <= st < len(_errors.STATUS_NAMES) else str(st)

    @property
    def error(self):
        """The failure's message, "" if none (dt_future_error)."""
        return (_lib.dt_future_error(self._f) or b"").decode("utf-8", "replace")

    def add_done_callback(self, fn):
        """Calls fn(self) once, when the future completes: on dtorch's
        completion thread (never a rank thread), or at once here if it is
        complete already (dt_future_then). An exception fn raises is
        printed, as concurrent.futures does."""
        with _pending_lock:
            key = _next_id[0]
            _next_id[0] += 1

        def call(_f, _status, _user):
            try:
                fn(self)
            except BaseException:  # noqa: B902 (no caller to raise into)
                traceback.print_exc()
            finally:
                with _pending_lock:
                    held = _pending.pop(key, None)
                if held is not None:
                    _lib.dt_future_release(held[1])
        cb = _lib.FutureCallback(call)
        with _pending_lock:
            _pending[key] = (cb, _lib.dt_future_retain(self._f))
        st = _lib.dt_future_then(self._f, cb, None)
        if st != 0:
            with _pending_lock:
                held = _pending.pop(key, None)
            if held is not None:
                _lib.dt_future_release(held[1])
            raise _errors.error(st)

    def notify_ring(self, ring_fd, user_data):
        """When complete, a CQE {user_data, res} (res 0, or -status) appears
        in the io_uring whose fd is ring_fd (dt_future_notify_ring)."""
        _errors.check(_lib.dt_future_notify_ring(self._f, int(ring_fd),
                                                 int(user_data) & (2**64 - 1)))

    def fileno(self):
        """An eventfd that is readable once the future completes (owned by
        the future)."""
        fd = _lib.dt_future_fd(self._f)
        if fd < 0:
            raise _errors.last()
        return fd

    async def _ready(self):
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
                await waiter
            finally:
                loop.remove_reader(fd)

    def __await__(self):
        yield from self._ready().__await__()
        return self.wait(0)

    def __repr__(self):
        return f"Future({'ready' if self.is_ready() else 'pending'})"


class TensorFuture(Future):
    def __init__(self, handle, out, source):
        super().__init__(handle)
        self._out = out          # the destination torch.Tensor
        self._source = source    # the dtorch.Tensor, alive until done

    def __del__(self):
        f, self._f = getattr(self, "_f", None), None
        if f and _lib is not None and _lib.dt_future_release is not None:
            # dtorch writes into self._out until the future completes: a
            # future dropped early waits for that before the buffer goes
            _lib.dt_future_wait(f, -1)
            _lib.dt_future_release(f)

    def get(self, timeout=None):
        """The torch.Tensor, waiting for it (timeout in seconds; None:
        forever). Raises dtorch's error if the computation failed, and
        DTorchTimeoutError if the timeout passes first."""
        ns = -1 if timeout is None else int(timeout * 1e9)
        _errors.check(_lib.dt_future_wait(self._f, ns))
        self._source = None
        return self._out

    result = get

    def __await__(self):
        yield from self._ready().__await__()
        return self.get(0)

    def __repr__(self):
        return f"TensorFuture({'ready' if self.is_ready() else 'pending'}, shape={tuple(self._out.shape)})"
