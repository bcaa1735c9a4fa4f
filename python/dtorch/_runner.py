"""One run of a per-rank program on every rank thread of a fresh
runtime (python -m dtorch.run, dtorch.run.spawn): the torchrun
environment and output of each rank (_rank_env.py), the ranks' outcomes,
and the one report a failure gives.

Failures. A rank that raises leaves its function (dtorch._spmd.run_ranks
records the exception first, with its traceback); dtorch then fails its
peers at their next collective naming it, and the message hook below
adds what it raised and where, so a peer's own exception says why it
stopped. A desync (ranks calling different collectives) fails every
member at once with each rank's call and, for the collectives of
dtorch.distributed, its Python file:line. A rank that waits longer than
the collective timeout fails naming the missing ranks; the hook adds
where each of those is in its Python code (sys._current_frames). Once
some rank has failed, the others get `grace` seconds to finish (reach
their next collective, or return); what is still running after that is
reported where it is, and the caller decides (the command line exits,
as torchrun kills the remaining workers).
"""
import os
import re
import sys
import threading
import time
import traceback

from . import _errors, _rank_env, _spmd

_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBS = tuple(p + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}
              if p) + (os.path.dirname(os.__file__) + os.sep,)
_LEFT = re.compile(r"rank (\d+) left its SPMD function \(it (?:failed:|raised) ")
# the runner's own frames, left out of a rank's traceback
_OWN = tuple(_PKG + n for n in ("_runner.py", "_spmd.py", "run.py"))
_MISSING = re.compile(r"missing: ranks? ([\d, ]+)")


def _left(message):
    """(rank, start, end) of "rank K left its SPMD function (it failed:
    ...)" in message (the parenthesis matched), or None."""
    m = _LEFT.search(message)
    if not m:
        return None
    depth, i = 0, message.index("(", m.start())
    for j in range(i, len(message)):
        depth += {"(": 1, ")": -1}.get(message[j], 0)
        if depth == 0:
            return int(m.group(1)), m.start(), j + 1
    return int(m.group(1)), m.start(), len(message)


def _user(filename):
    return not filename.startswith(_PKG) and not filename.startswith(_LIBS)


def site_of_frames(frames):
    """'file:line (in fn)' of the innermost frame of the program's own code
    (outside dtorch and the Python installation; else outside dtorch)."""
    frames = list(frames)
    for test in (_user, lambda f: not f.startswith(_PKG)):
        for f in reversed(frames):
            if test(f.filename):
                return f"{os.path.basename(f.filename)}:{f.lineno} (in {f.name})"
    return "an unknown place"


class Failure:
    """What a rank raised: the exception, its traceback text (the
    runner's own frames left out), where in the program, and whether it
    only reports another rank's failure (it stopped because a peer left)."""

    def __init__(self, rank, exc):
        self.rank, self.exc = rank, exc
        frames = traceback.extract_tb(exc.__traceback__)
        frames = [f for f in frames if not f.filename.startswith(_OWN)]
        self.site = site_of_frames(frames)
        self.text = "".join(traceback.format_list(frames)) + "".join(
            traceback.format_exception_only(type(exc), exc))
        if frames:
            self.text = "Traceback (most recent call last):\n" + self.text
        m = _left(str(exc)) if isinstance(exc, _errors.DTorchError) else None
        self.peer = m[0] if m and m[0] != rank else None
        code = exc.code if isinstance(exc, SystemExit) else None
        self.exit_code = code if isinstance(code, int) and code else 1

    def summary(self):
        if isinstance(self.exc, SystemExit):
            return f"sys.exit({self.exc.code!r}) at {self.site}"
        first = (str(self.exc).splitlines() or [""])[0]
        return f"{type(self.exc).__name__}: {first[:300]} at {self.site}"


class Run:
    """A run of body(rank) on each of n rank threads of a new runtime."""

    def __init__(self, n, *, chaos=0, timeout_s=30.0, device=None,
                 prefix="[rank{rank}]: ", capture=False, grace_s=2.0,
                 master_addr="127.0.0.1", master_port=29500):
        self.n, self.chaos, self.timeout_s, self.device = n, chaos, timeout_s, device
        self.prefix, self.capture, self.grace_s = prefix, capture, grace_s
        self.master = (master_addr, master_port)
        self.failures, self.results, self.threads = {}, {}, {}
        self.finished = set()
        self.stuck = {}
        self.sink = None
        self.status = None
        self.first_failure_at = None

    # ---- what the ranks' errors say
    def _hook(self, message):
        m = _left(message)
        f = self.failures.get(m[0]) if m else None
        if f is not None and "traceback of rank" not in message:
            message = (message[:m[1]] + f"rank {f.rank} left its SPMD function "
                       f"(it raised {f.summary()})" + message[m[2]:] +
                       f"\n-- the traceback of rank {f.rank}:\n" + f.text.rstrip())
        m = _MISSING.search(message)
        if m and "is at " not in message:
            where = [f"rank {r} is at {self.where(int(r))}"
                     for r in m.group(1).replace(" ", "").split(",") if r]
            message += "; " + "; ".join(where)
        return message

    def where(self, rank):
        """Where rank's Python code is now, or why not known."""
        ident = self.threads.get(rank)
        if rank in self.finished:
            return "the end of its function"
        frame = sys._current_frames().get(ident) if ident else None
        if frame is None:
            return "a place not known (not started)"
        return site_of_frames(traceback.extract_stack(frame))

    def _on_raise(self, rank, exc):
        self.failures[rank] = Failure(rank, exc)
        if self.first_failure_at is None:
            self.first_failure_at = time.monotonic()

    # ---- running
    def execute(self, body):
        """Runs body(rank) on every rank; returns True when every rank
        finished (False: some are still running after a failure and the
        grace period: self.stuck names where)."""
        from ._runtime import Runtime
        run_id = f"dtorch-{os.getpid()}-{time.monotonic_ns()}"
        ms = -1 if self.timeout_s is None or self.timeout_s <= 0 else \
            max(1, int(self.timeout_s * 1000))
        rt = Runtime(self.n, chaos_seed=int(self.chaos or 0),
                     collective_timeout_ms=ms, device=self.device)
        with _rank_env.installed(self.n, master_addr=self.master[0],
                                 master_port=self.master[1], run_id=run_id,
                                 prefix=self.prefix, capture=self.capture) as env:
            enter, leave, self.sink = env
            done = self._drive(rt, body, enter, leave)
        if done:
            rt.destroy()
        return done

    def _drive(self, rt, body, enter, leave):
        def rank_fn(ctx):
            enter(ctx.rank)
            self.threads[ctx.rank] = threading.get_ident()
            try:
                return body(ctx.rank)
            except SystemExit as e:
                if e.code in (None, 0):
                    return None
                raise
            finally:
                leave()
                self.finished.add(ctx.rank)

        def drive():
            st, self.results, _ = _spmd.run_ranks(rank_fn, rt, self._on_raise)
            self.status = st
        saved_hook, saved_main = _errors.message_hook, sys.modules.get("__main__")
        _errors.message_hook = self._hook
        t = threading.Thread(target=drive, name="dtorch.run", daemon=True)
        try:
            t.start()
            while t.is_alive():
                t.join(0.05)
                if self.first_failure_at is not None and \
                        time.monotonic() - self.first_failure_at > self.grace_s:
                    break
            if t.is_alive():
                self.stuck = {r: self.where(r) for r in range(self.n)
                              if r not in self.finished}
                return False
            return True
        finally:
            _errors.message_hook = saved_hook
            if saved_main is not None:
                sys.modules["__main__"] = saved_main

    # ---- the report
    def ok(self):
        return not self.failures and not self.stuck and self.status == 0

    def exit_code(self):
        if self.ok():
            return 0
        causes = [f for f in self.failures.values() if f.peer is None]
        return causes[0].exit_code if causes else 1

    def report(self):
        """The failure, once: each cause's traceback (a message several
        ranks share, such as a desync, once with each rank's place), the
        ranks that stopped because of another, the ranks still running."""
        out = []
        pre = self.sink.prefix if self.sink else (lambda r: f"[rank{r}]: ")
        causes = sorted((f for f in self.failures.values() if f.peer is None),
                        key=lambda f: f.rank)
        shared = {}
        for f in causes:
            # a shared message (a desync) differs only in the API name
            # in front ("all_gather: all_reduce on group ...")
            key = str(f.exc).split(": ", 1)[-1] if isinstance(
                f.exc, _errors.DTorchError) else id(f)
            shared.setdefault(key, []).append(f)
        for group in shared.values():
            if len(group) == 1:
                f = group[0]
                out.append(f"dtorch.run: rank {f.rank} failed at {f.site}:")
                out += [pre(f.rank) + line for line in f.text.rstrip().splitlines()]
            else:
                out.append(f"dtorch.run: {_ranks(group)} failed with:")
                out += ["  " + line for line in str(group[0].exc).splitlines()]
                out += [f"  rank {f.rank} at {f.site}" for f in group]
        peers = sorted((f for f in self.failures.values() if f.peer is not None),
                       key=lambda f: f.rank)
        for peer in sorted({f.peer for f in peers}):
            group = [f for f in peers if f.peer == peer]
            out.append(f"dtorch.run: {_ranks(group)} stopped at their next "
                       f"collective because rank {peer} failed:")
            out += [f"  rank {f.rank} at {f.site}" for f in group]
        if self.stuck:
            out.append(f"dtorch.run: still running {self.grace_s:g} s after the "
                       f"first failure:")
            out += [f"  rank {r} at {w}" for r, w in sorted(self.stuck.items())]
        n = len(causes) + len(self.stuck)
        out.append(f"dtorch.run: {n} of {self.n} ranks failed"
                   + (f", {len(peers)} stopped because of it" if peers else "")
                   + (f" (chaos seed {self.chaos}: replay with --chaos {self.chaos})"
                      if self.chaos else ""))
        return "\n".join(out)


def _ranks(failures):
    rs = [str(f.rank) for f in failures]
    return ("rank " if len(rs) == 1 else "ranks ") + ", ".join(rs)
