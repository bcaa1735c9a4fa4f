"""Debugging (debug.h and the counters of dtorch.h): communication counts
(PyTorch's CommDebugMode), the sharding cache, shadow comparison with the
single device, labels, communication reports, inspection text, timelines,
and op interception (TorchDispatchMode's C form: hooks, the op printer,
the op counter). All of them are per thread, as in C.

The C functions that write to a FILE * get one from libc's open_memstream;
the Python functions return the text."""
import collections
import ctypes
import json
import threading

from . import _errors, _lib

_libc = ctypes.CDLL(None, use_errno=True)
_libc.open_memstream.restype = ctypes.c_void_p
_libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_size_t)]
_libc.fclose.restype = ctypes.c_int
_libc.fclose.argtypes = [ctypes.c_void_p]
_libc.free.restype = None
_libc.free.argtypes = [ctypes.c_void_p]


class _MemStream:
    """A FILE * whose text is read back after fclose."""

    def __init__(self):
        self._buf, self._len = ctypes.c_void_p(), ctypes.c_size_t()
        self.file = _libc.open_memstream(ctypes.byref(self._buf), ctypes.byref(self._len))
        if not self.file:
            raise OSError(ctypes.get_errno(), "open_memstream failed")

    def close(self):
        """fclose; the text written."""
        f, self.file = self.file, None
        if f:
            _libc.fclose(f)
        if not self._buf.value:
            return ""
        text = ctypes.string_at(self._buf.value, self._len.value).decode("utf-8", "replace")
        _libc.free(self._buf)
        self._buf = ctypes.c_void_p()
        return text


def capture(call):
    """Runs call(FILE *) (a dt_status) and returns what it wrote."""
    m = _MemStream()
    try:
        st = call(m.file)
    finally:
        text = m.close()
    _errors.check(st)
    return text


# ---- communication counts and the sharding cache
CommCounts = collections.namedtuple(
    "CommCounts", "all_reduce all_gather reduce_scatter all_to_all broadcast other bytes")
CacheStats = collections.namedtuple("CacheStats", "hits misses entries evictions")


class comm_count:
    """with dtorch.comm_count() as c: ...; then c.counts is a CommCounts
    of the collectives this thread's calls issued (dt_comm_count_begin /
    _end; counted at issue, so independent of timing)."""

    def __init__(self):
        self.counts = None

    def __enter__(self):
        _lib.dt_comm_count_begin()
        return self

    def __exit__(self, *exc):
        c = _lib.dt_comm_count_end()
        self.counts = CommCounts(*(getattr(c, f) for f in CommCounts._fields))

    def __getattr__(self, name):  # c.all_reduce after the block
        counts = self.__dict__.get("counts")
        if counts is not None and name in CommCounts._fields:
            return getattr(counts, name)
        raise AttributeError(name)


def sharding_cache_stats():
    """This thread's sharding cache: CacheStats(hits, misses, entries,
    evictions)."""
    s = _lib.dt_sharding_cache_stats()
    return CacheStats(s.hits, s.misses, s.entries, s.evictions)


def sharding_cache_evictions():
    return _lib.dt_sharding_cache_evictions()


def sharding_cache_clear():
    """Empties this thread's sharding cache and zeroes its counts."""
    _lib.dt_sharding_cache_clear()


# ---- labels (one stack per thread, shared by shadow and comm reports)
_labels = threading.local()


def _label_stack():
    if not hasattr(_labels, "stack"):
        _labels.stack = []
    return _labels.stack


class label:
    """with dtorch.label("layer1.mlp"): ... names this part of the program
    in shadow and communication reports (dt_label_push / dt_label_pop;
    the C library borrows the string: it is kept here until the pop)."""

    def __init__(self, name):
        if not isinstance(name, str):
            raise TypeError(f"label: name {name!r} is not a str")
        self._b = name.encode()

    def __enter__(self):
        _label_stack().append(self._b)
        _lib.dt_label_push(self._b)
        return self

    def __exit__(self, *exc):
        _lib.dt_label_pop()
        _label_stack().pop()


ShadowReport = collections.namedtuple(
    "ShadowReport", "ops_checked first_divergence max_diff failed message")


class shadow:
    """with dtorch.shadow(tolerance=0) as s: every DTensor op this thread
    runs is also run on one device and compared (dt_shadow_begin); after
    the block s.report is a ShadowReport (first_divergence 0: all agreed).
    tolerance 0: 1e-4."""

    def __init__(self, tolerance=0.0):
        self.tolerance = float(tolerance)
        self.report = None

    def __enter__(self):
        _errors.check(_lib.dt_shadow_begin(self.tolerance))
        return self

    def __exit__(self, *exc):
        r = _lib.ShadowReport()
        _errors.check(_lib.dt_shadow_end(ctypes.byref(r)))
        self.report = ShadowReport(r.ops_checked, r.first_divergence, r.max_diff,
                                   bool(r.failed), r.message.decode("utf-8", "replace"))


class comm_debug:
    """with dtorch.comm_debug() as d: every collective this thread's calls
    run is attributed to the public function that caused it, under the
    label path (dt_comm_debug_begin); after the block d.table is the text
    table and d.json the parsed JSON object (dt_comm_debug_end)."""

    def __init__(self):
        self.table = self.json = None

    def __enter__(self):
        _errors.check(_lib.dt_comm_debug_begin())
        return self

    def __exit__(self, *exc):
        t, j = _MemStream(), _MemStream()
        try:
            st = _lib.dt_comm_debug_end(t.file, j.file)
        finally:
            self.table, text = t.close(), j.close()
        _errors.check(st)
        self.json = json.loads(text) if text.strip() else None


class comm_debug_label(label):
    """The same stack as label (dt_comm_debug_label_push / _pop)."""

    def __enter__(self):
        _label_stack().append(self._b)
        _lib.dt_comm_debug_label_push(self._b)
        return self

    def __exit__(self, *exc):
        _lib.dt_comm_debug_label_pop()
        _label_stack().pop()


# ---- inspection (text for people) and timelines
def visualize_sharding(t, *, ascii=False, max_width=0):
    """Which ranks hold which block of a 1-D or 2-D tensor, as text
    (jax.debug.visualize_array_sharding; dt_visualize_sharding_ex)."""
    o = _lib.VisualizeOptions()
    o.ascii, o.max_width = bool(ascii), int(max_width)
    return capture(lambda f: _lib.dt_visualize_sharding_ex(t._h, f, ctypes.byref(o)))


def describe(t):
    """dtype, shape, grad, mesh, placements and each rank's shard, as text
    (dt_tensor_describe)."""
    return capture(lambda f: _lib.dt_tensor_describe(t._h, f))


def memory_report(runtime=None):
    """Per rank: bytes in use, peak, cached, largest blocks (text)."""
    from ._runtime import Runtime
    return (runtime or Runtime.current()).memory_report()


class Trace:
    """Records a runtime's timeline into a Chrome trace-event JSON file at
    path while open (dt_trace_begin; dt_trace_end waits for the issued
    work and writes the file). A context manager, or start() / stop()."""

    def __init__(self, runtime, path):
        self.runtime, self.path = runtime, str(path)
        self._on = False

    def start(self):
        _errors.check(_lib.dt_trace_begin(self.runtime._handle(), self.path.encode()))
        self._on = True
        return self

    def stop(self):
        if self._on:
            self._on = False
            _errors.check(_lib.dt_trace_end(self.runtime._handle()))

    __enter__ = start

    def __exit__(self, *exc):
        self.stop()


def trace(path, runtime=None):
    """with dtorch.trace("run.json"): records the current runtime's
    timeline (open it in ui.perfetto.dev)."""
    from ._runtime import Runtime
    return Trace(runtime or Runtime.current(), path)


# ---- interception
def _format(fn, h):
    """fn(h, buf, len) truncates to len - 1 characters: grow until it fits."""
    size = 1024
    while True:
        buf = ctypes.create_string_buffer(size)
        n = fn(h, buf, size)
        if n < 0:
            raise _errors.last()
        if n < size - 1:
            return buf.value.decode()
        size *= 4


class OpCall:
    """The op a hook sees (valid only inside the hook): name, inputs,
    outputs (after run()), format()."""

    def __init__(self, call):
        self._c = call

    @property
    def name(self):
        return _lib.dt_op_call_name(self._c).decode()

    def _tensors(self, count, get):
        from ._tensor import Tensor
        out = []
        for i in range(count(self._c)):
            h = get(self._c, i)
            out.append(Tensor._from_handle(_lib.dt_tensor_retain(h)) if h else None)
        return out

    @property
    def inputs(self):
        """The tensor inputs (None for an optional tensor not given)."""
        return self._tensors(_lib.dt_op_call_num_inputs, _lib.dt_op_call_input)

    @property
    def outputs(self):
        return self._tensors(_lib.dt_op_call_num_outputs, _lib.dt_op_call_output)

    def run(self):
        """Runs the op below this hook (dt_op_call_run)."""
        _errors.check(_lib.dt_op_call_run(self._c))

    def format(self):
        """"add(float32[4, 8], float32[4, 8]) -> float32[4, 8]" """
        return _format(_lib.dt_op_call_format, self._c)


class intercept:
    """with dtorch.intercept(fn): fn(call: OpCall) sees every op this
    thread calls (innermost hook first) and must call call.run() to run
    it; an exception fn raises fails the op with its message
    (dt_intercept_push / dt_intercept_pop)."""

    def __init__(self, fn):
        self.fn = fn
        self.errors = []

        def hook(call, _user):
            try:
                self.fn(OpCall(call))
                return 0
            except _errors.DTorchError as e:
                return _errors.STATUS_NAMES.index(e.status) if e.status in _errors.STATUS_NAMES else 13
            except Exception as e:  # noqa: BLE001 (reported as the op's error)
                self.errors.append(e)
                return 13  # DT_ERR_INTERNAL
        self._hook = _lib.InterceptFn(hook)  # alive while pushed

    def __enter__(self):
        _errors.check(_lib.dt_intercept_push(self._hook, None))
        return self

    def __exit__(self, *exc):
        _errors.check(_lib.dt_intercept_pop())


class op_counter:
    """with dtorch.op_counter() as c: counts ops by name; c["add"],
    c.total, str(c) (most frequent first) (dt_op_counter_*)."""

    def __init__(self):
        self._c = None

    def __enter__(self):
        self._c = _errors.handle(_lib.dt_op_counter_push())
        return self

    def __exit__(self, *exc):
        _errors.check(_lib.dt_op_counter_pop(self._c))

    def __del__(self):
        c, self._c = getattr(self, "_c", None), None
        if c and _lib is not None and _lib.dt_op_counter_free is not None:
            _lib.dt_op_counter_free(c)

    def __getitem__(self, op):
        n = _lib.dt_op_counter_get(self._c, op.encode())
        if n < 0:
            raise _errors.last()
        return n

    @property
    def total(self):
        return _lib.dt_op_counter_total(self._c)

    def __str__(self):
        return _format(_lib.dt_op_counter_format, self._c)


class op_printer:
    """with dtorch.op_printer() as p: each op this thread runs is printed
    as it completes (dt_op_printer_push, popped with dt_intercept_pop);
    after the block p.text holds the lines."""

    def __init__(self):
        self.text = None
        self._m = None

    def __enter__(self):
        self._m = _MemStream()
        st = _lib.dt_op_printer_push(self._m.file)
        if st != 0:
            self._m.close()
            raise _errors.error(st)
        return self

    def __exit__(self, *exc):
        st = _lib.dt_intercept_pop()
        self.text = self._m.close()
        _errors.check(st)
