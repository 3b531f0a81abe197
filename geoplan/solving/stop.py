"""One stop mechanism for every solver: interrupts end a solve like a time-out.

A :class:`StopFlag` travels on :class:`~geoplan.solving.core.SolveOptions`
(``options.stop``). Once set, ``options.deadline`` is the moment it was set and
``options.remaining()`` is 0, so every budget check a solver already makes
also ends it on an interrupt; the solver then returns its best plan and bound
exactly as at a time-out. Native solvers are stopped through their own
mechanism (:meth:`StopFlag.on_stop` hooks: HiGHS's user interrupt, CP-SAT's
``stop_search``), never by an exception thrown through their C++ frames.

:func:`stop_scope` makes a flag the active one of the calling thread (nested
solves, a warm-start solver and the portfolio's phases share it) and, in the
main thread, turns SIGINT and SIGTERM into :meth:`StopFlag.set` for its
duration. A third signal exits at once (status 130), for a solve that no
longer responds.

Test hook: with the environment variable ``GEOPLAN_TEST_STOP_AFTER_INCUMBENTS=K``
(K >= 1) a solve sends itself SIGINT (``GEOPLAN_TEST_STOP_SIGNAL=TERM``: SIGTERM)
after its K-th reported improvement, so interrupt tests do not depend on timing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["NativeCallAbandoned", "StopFlag", "abandoned_calls", "active_stop", "call_stoppable",
           "current_stop", "exit_status", "stop_scope", "test_stop_after"]

T = TypeVar("T")

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopFlag:
    """A thread-safe, set-once request to stop, with the reason and the moment."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []
        self.reason: str | None = None
        self.at: float | None = None  # time.perf_counter() when set

    def is_set(self) -> bool:
        return self._event.is_set()

    def __bool__(self) -> bool:  # pragma: no cover - a flag is always an object
        return True

    def set(self, reason: str = "stopped") -> None:
        """Request a stop (first reason wins) and run the registered hooks."""
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self.at = time.perf_counter()
            self._event.set()
            hooks = list(self._hooks)
        for hook in hooks:
            with contextlib.suppress(Exception):
                hook()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    @contextlib.contextmanager
    def on_stop(self, hook: Callable[[], None]) -> Iterator[None]:
        """Call ``hook()`` when the flag is set while inside the block (at once if it is)."""
        with self._lock:
            self._hooks.append(hook)
            already = self._event.is_set()
        if already:
            with contextlib.suppress(Exception):
                hook()
        try:
            yield
        finally:
            with self._lock:
                self._hooks.remove(hook)


_local = threading.local()


def active_stop() -> StopFlag | None:
    """The flag of this thread's active :func:`stop_scope`, or None outside one."""
    return getattr(_local, "flag", None)


def current_stop() -> StopFlag:
    """The active flag of this thread's :func:`stop_scope`, else a fresh (never set) one."""
    flag = getattr(_local, "flag", None)
    return flag if flag is not None else StopFlag()


@contextlib.contextmanager
def stop_scope(flag: StopFlag | None = None, *, signals: bool = True) -> Iterator[StopFlag]:
    """Make ``flag`` (default: a new one) this thread's active stop flag.

    Nested scopes reuse the outer flag. The outermost scope in the main thread
    (with ``signals``) handles SIGINT and SIGTERM by setting the flag, and
    restores the previous handlers on exit.
    """
    outer = getattr(_local, "flag", None)
    if outer is not None:
        if flag is not None and flag is not outer:
            # A caller's own flag inside an active scope: either one stops the solve.
            with outer.on_stop(lambda: flag.set(outer.reason or "stopped")):
                _local.flag = flag
                try:
                    yield flag
                finally:
                    _local.flag = outer
            return
        yield outer
        return
    flag = flag or StopFlag()
    previous: dict[int, Any] = {}
    if signals and threading.current_thread() is threading.main_thread():
        count = [0]

        def handler(signum: int, _frame: Any) -> None:
            count[0] += 1
            name = signal.Signals(signum).name
            if count[0] == 1:
                flag.set(f"interrupted by {name}")
            elif count[0] == 2:
                print(f"geoplan: {name}: stopping the solver (a third signal exits at once)",
                      file=sys.stderr, flush=True)
            else:
                os._exit(130)

        for sig in _SIGNALS:
            with contextlib.suppress(ValueError, OSError):  # not the main interpreter
                previous[sig] = signal.signal(sig, handler)
    _local.flag = flag
    try:
        yield flag
    finally:
        _local.flag = None
        for signum, old in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, old)


#: Helper threads of abandoned native calls (:func:`call_stoppable`), until they return.
_left_behind: list[threading.Thread] = []


def abandoned_calls() -> list[threading.Thread]:
    """The helper threads of abandoned native calls that are still running."""
    _left_behind[:] = [t for t in _left_behind if t.is_alive()]
    return list(_left_behind)


def exit_status(code: int) -> int:
    """``code``, for a process about to exit with it. While an abandoned native call still
    runs, the process ends here instead (streams flushed, ``os._exit``): tearing down the
    interpreter and the native library's static state under a running thread may crash."""
    if abandoned_calls():
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    return code


class NativeCallAbandoned(Exception):
    """A native call did not return by its ``abandon_at`` moment; ``thread`` still runs it."""

    def __init__(self, thread: threading.Thread) -> None:
        super().__init__("native call abandoned")
        self.thread = thread


def call_stoppable(fn: Callable[[], T], stop: StopFlag, cancel: Callable[[], None],
                   poll: float = 0.05, abandon_at: float | None = None) -> T:
    """Run the blocking native call ``fn()`` in a helper thread; ``cancel()`` on a stop.

    The calling thread waits in Python, so signal handlers run at once even
    while ``fn`` is deep in C++; ``cancel`` must ask the native solver to
    return (it is never killed). ``fn``'s result is returned, its exception
    re-raised. ``abandon_at`` (``time.perf_counter()``): if ``fn`` is still
    running then, ``cancel()`` is called and :class:`NativeCallAbandoned` raised;
    the helper thread (a daemon) goes on until the native code next looks at its
    interrupt, and the caller must not touch what it uses.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc

    th = threading.Thread(target=target, name="geoplan-native", daemon=True)
    with stop.on_stop(cancel):
        th.start()
        while th.is_alive():
            if abandon_at is not None and time.perf_counter() >= abandon_at:
                cancel()
                _left_behind.append(th)
                raise NativeCallAbandoned(th)
            th.join(poll)
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_stop_after() -> tuple[int, int] | None:
    """(K, signal) of the test hook ``GEOPLAN_TEST_STOP_AFTER_INCUMBENTS``, or None."""
    raw = os.environ.get("GEOPLAN_TEST_STOP_AFTER_INCUMBENTS")
    if not raw:
        return None
    try:
        k = int(raw)
    except ValueError:
        return None
    if k < 1:
        return None
    sig = signal.SIGTERM if os.environ.get("GEOPLAN_TEST_STOP_SIGNAL", "").upper() in (
        "TERM", "SIGTERM") else signal.SIGINT
    return k, int(sig)
