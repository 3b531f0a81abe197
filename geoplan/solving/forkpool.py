"""Forked worker processes for a solver's independent searches (site branching's nodes).

:class:`ForkPool` forks its workers once, when it is made, so they start with
everything the parent has built (the instance, compiled kernels, cached tables) and
each task costs a pipe round trip, not a process start: a node search of site branching
takes about 10 ms at N=64. ``os.fork`` itself rather than ``multiprocessing.Process``,
which refuses children of daemonic processes (the bench's runs, Dask's workers). A
worker ignores SIGINT (the parent, which receives it too, decides) and exits when the
parent closes its pipe or dies. Where fork is missing, :func:`available` is false and
callers search in their own process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

__all__ = ["ForkPool", "available", "child_signals", "reap"]


def available() -> bool:
    """Whether this platform can fork workers."""
    return hasattr(os, "fork") and "fork" in multiprocessing.get_all_start_methods()


def child_signals() -> None:
    """In a forked child: SIGINT ignored (the parent, which gets it too, decides), SIGTERM
    back to its default (the parent's handler would set the parent's stop flag's copy)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def reap(pid: int, wait_s: float) -> None:
    """Wait up to ``wait_s`` seconds for child ``pid`` to exit, then kill it; reap it."""
    end = time.perf_counter() + wait_s
    while time.perf_counter() < end:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return
        time.sleep(0.002)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _serve(conn: Connection, fn: Callable[[Any], Any]) -> None:
    """A worker's loop: (key, argument) in, (key, ok, result or error text) out."""
    child_signals()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        key, arg = msg
        try:
            out = (key, True, fn(arg))
        except Exception as exc:  # the parent raises it
            out = (key, False, f"{type(exc).__name__}: {exc}")
        try:
            conn.send(out)
        except (BrokenPipeError, OSError):
            return


class ForkPool:
    """``workers`` forked processes, each running ``fn`` on the arguments sent to it."""

    def __init__(self, workers: int, fn: Callable[[Any], Any]) -> None:
        self._idle: list[Connection] = []
        self._busy: dict[Connection, Any] = {}
        self._pids: list[int] = []
        for _ in range(workers):
            mine, theirs = multiprocessing.Pipe()
            pid = os.fork()
            if pid == 0:  # the worker
                mine.close()
                for other in self._idle:  # the parent's ends to the workers before it
                    other.close()
                try:
                    _serve(theirs, fn)
                finally:
                    os._exit(0)
            theirs.close()
            self._idle.append(mine)
            self._pids.append(pid)

    @property
    def idle(self) -> int:
        """Workers free for a task."""
        return len(self._idle)

    @property
    def running(self) -> int:
        return len(self._busy)

    def submit(self, key: Any, arg: Any) -> None:
        """Send ``fn(arg)`` to an idle worker; its result comes back under ``key``."""
        conn = self._idle.pop()
        conn.send((key, arg))
        self._busy[conn] = key

    def results(self, timeout: float | None) -> list[tuple[Any, Any]]:
        """Finished tasks, (key, result), waiting up to ``timeout`` seconds for the first.

        A task that raised raises here (RuntimeError with the worker's message)."""
        out = []
        for conn in wait(list(self._busy), timeout):
            assert isinstance(conn, Connection)
            key, ok, value = conn.recv()
            del self._busy[conn]
            self._idle.append(conn)
            if not ok:
                raise RuntimeError(f"a forked worker failed on {key!r}: {value}")
            out.append((key, value))
        return out

    def close(self) -> None:
        """End the workers: idle ones at once, busy ones killed (their tasks are lost)."""
        for conn in [*self._idle, *self._busy]:
            conn.close()
        busy = bool(self._busy)
        self._idle, self._busy = [], {}
        end = time.perf_counter() + (0.0 if busy else 0.5)
        for pid in self._pids:
            reap(pid, end - time.perf_counter())
        self._pids = []

    def __enter__(self) -> ForkPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
