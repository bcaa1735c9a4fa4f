"""The process state a torchrun rank has to itself, given to each rank
thread of one process (python -m dtorch.run, dtorch.run.spawn).

While installed():
- ``os.environ`` is a RankEnviron: a mapping that reads the calling rank
  thread's overlay first (RANK, LOCAL_RANK, ... and whatever the rank
  set or deleted), then the process environment. Writes and deletes on
  a rank thread stay in its overlay (another rank never sees them); off
  a rank thread they go to the process environment as before.
  os.getenv reads os.environ, so it sees the overlay too.
- ``sys.stdout`` / ``sys.stderr`` are RankStreams: a rank's text is cut
  into lines, each written as "<prefix><line>" (prefix "[rank3]: ", as
  torch prints a rank's traceback), optionally kept per rank (capture).
- the ``random`` module's functions draw from a random.Random of the
  calling rank (seeded from os.urandom as a fresh process's is), so
  random.seed(rank) in one rank does not move another's.

What stays one for the whole process: the C environment (getenv in C
code, child processes' environments: RANK and LOCAL_RANK are not there;
WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and the other
common variables are), sys.modules (a module the script imports is
imported once, its globals shared by the ranks), sys.argv, sys.path, the
current directory, logging's configuration (the first rank's
basicConfig wins; its handlers write to the RankStreams, so lines are
still prefixed), numpy's global random state, atexit, signal handlers.
Threads a rank starts see the process's values (the overlay belongs to
the rank thread).
"""
import collections.abc
import contextlib
import os
import random
import sys
import threading

_tls = threading.local()
_DELETED = object()
_lock = threading.Lock()


def rank():
    """The calling thread's rank under the runner, or None."""
    return getattr(_tls, "rank", None)


class RankEnviron(collections.abc.MutableMapping):
    """os.environ with a per-rank-thread overlay (module doc)."""

    def __init__(self, base):
        self._base = base

    def _overlay(self):
        return getattr(_tls, "env", None)

    def __getitem__(self, key):
        o = self._overlay()
        if o is not None and key in o:
            v = o[key]
            if v is _DELETED:
                raise KeyError(key)
            return v
        return self._base[key]

    def __setitem__(self, key, value):
        o = self._overlay()
        if o is None:
            self._base[key] = value
            return
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"str expected, not {type(value if isinstance(key, str) else key).__name__}")
        o[key] = value

    def __delitem__(self, key):
        o = self._overlay()
        if o is None:
            del self._base[key]
            return
        if key not in self:
            raise KeyError(key)
        o[key] = _DELETED

    def __contains__(self, key):
        o = self._overlay()
        if o is not None and key in o:
            return o[key] is not _DELETED
        return key in self._base

    def __iter__(self):
        o = self._overlay() or {}
        for k in self._base:
            if o.get(k, None) is not _DELETED:
                yield k
        for k, v in list(o.items()):
            if v is not _DELETED and k not in self._base:
                yield k

    def __len__(self):
        return sum(1 for _ in self)

    def copy(self):
        return dict(self)

    def __or__(self, other):
        d = dict(self)
        d.update(other)
        return d

    def __ror__(self, other):
        d = dict(other)
        d.update(self)
        return d

    def __ior__(self, other):
        self.update(other)
        return self

    def __repr__(self):
        return f"environ({dict(self)!r})"


class RankStream:
    """sys.stdout / sys.stderr for rank threads: each complete line of a
    rank's text goes to the real stream with the rank's prefix; text off
    rank threads passes through."""

    def __init__(self, real, name, sink):
        self._real, self._name, self._sink = real, name, sink

    def write(self, text):
        r = rank()
        if r is None:
            return self._real.write(text)
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        bufs = _tls.bufs
        pending = bufs.get(self._name, "") + text
        lines = pending.split("\n")
        bufs[self._name] = lines.pop()
        if lines:
            self._sink.lines(r, self._name, lines, self._real)
        return len(text)

    def flush(self):
        if rank() is None:
            self._real.flush()

    def end_rank(self):
        """The calling rank's unfinished line, written out."""
        rest = _tls.bufs.pop(self._name, "")
        if rest:
            self._sink.lines(rank(), self._name, [rest], self._real)

    def writable(self):
        return True

    def isatty(self):
        return False

    def __getattr__(self, name):
        return getattr(self._real, name)


class Sink:
    """Where the ranks' lines go: the real stream, each with its prefix
    (template: {rank}, {local_rank}, {role_name}; "" for none), and, when
    capture, a per-rank record of the stdout lines (what --stress
    compares)."""

    def __init__(self, template, capture):
        self.template, self.capture = template, capture
        self.captured = collections.defaultdict(list)

    def prefix(self, r):
        return self.template.format(rank=r, local_rank=r, role_name="default")

    def lines(self, r, stream, lines, real):
        if self.capture and stream == "stdout":
            self.captured[r].extend(lines)
        pre = self.prefix(r)
        text = "".join(f"{pre}{line}\n" for line in lines)
        with _lock:
            real.write(text)
            real.flush()


_RANDOM = ("seed", "random", "uniform", "triangular", "randint", "choice",
           "randrange", "sample", "shuffle", "choices", "normalvariate",
           "lognormvariate", "expovariate", "vonmisesvariate", "gammavariate",
           "gauss", "betavariate", "paretovariate", "weibullvariate",
           "getstate", "setstate", "getrandbits", "randbytes", "binomialvariate")


def _rank_random(name):
    orig = getattr(random, name)

    def call(*args, **kwargs):
        rng = getattr(_tls, "random", None)
        return (getattr(rng, name) if rng is not None else orig)(*args, **kwargs)
    call.__name__ = name
    call.__doc__ = orig.__doc__
    return call, orig


def torchrun_env(r, n, master_addr, master_port, run_id):
    """The variables torchrun sets, the per-rank ones and the common ones."""
    common = {"WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n),
              "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
              "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_NAME": "default",
              "ROLE_WORLD_SIZE": str(n), "TORCHELASTIC_RESTART_COUNT": "0",
              "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": run_id,
              "TORCHELASTIC_USE_AGENT_STORE": "False"}
    if r is None:
        return common
    return {"RANK": str(r), "LOCAL_RANK": str(r), "ROLE_RANK": str(r)}


@contextlib.contextmanager
def installed(n, *, master_addr="127.0.0.1", master_port=29500, run_id="none",
              prefix="[rank{rank}]: ", capture=False):
    """Installs RankEnviron, RankStreams and the per-rank random module
    functions for a run of n ranks; yields (enter, leave, sink): each rank
    thread calls enter(rank) first and leave() last."""
    base = os.environ
    saved = {k: base.get(k) for k in torchrun_env(None, n, "", 0, "")}
    for k, v in torchrun_env(None, n, master_addr, master_port, run_id).items():
        base[k] = v
    sink = Sink(prefix, capture)
    out = RankStream(sys.stdout, "stdout", sink)
    err = RankStream(sys.stderr, "stderr", sink)
    real_out, real_err = sys.stdout, sys.stderr
    patched = {name: _rank_random(name) for name in _RANDOM if hasattr(random, name)}

    def enter(r):
        _tls.rank = r
        _tls.env = torchrun_env(r, n, master_addr, master_port, run_id)
        _tls.bufs = {}
        _tls.random = random.Random()

    def leave():
        out.end_rank()
        err.end_rank()
        for name in ("rank", "env", "bufs", "random"):
            _tls.__dict__.pop(name, None)

    os.environ = RankEnviron(base)
    sys.stdout, sys.stderr = out, err
    for name, (call, _) in patched.items():
        setattr(random, name, call)
    try:
        yield enter, leave, sink
    finally:
        for name, (_, orig) in patched.items():
            setattr(random, name, orig)
        sys.stdout, sys.stderr = real_out, real_err
        os.environ = base
        for k, v in saved.items():
            if v is None:
                base.pop(k, None)
            else:
                base[k] = v
