"""The memetic algorithm in a second process, alongside an exact model (parallel portfolio).

:class:`MemeticPeer` forks a process that runs the ``memetic`` solver for the budget it
is given and sends each new best plan, then its result, back through a queue. The
parent reads them when it wants (:meth:`MemeticPeer.best` without waiting,
:meth:`MemeticPeer.result` at the end) and may ask the run to stop early
(:meth:`MemeticPeer.stop`: the run ends as at a time-out and still sends its result).

Fork, not spawn: a spawned process would import the project and load the numba kernels
again (seconds), more than a 1 s budget. ``os.fork`` itself, not
``multiprocessing.Process``, which refuses to start children of daemonic processes (the
bench's runs and Dask's workers are such). The child never prints or touches the
parent's display; SIGINT is ignored there, since the parent, which receives it too, stops
the child through :meth:`MemeticPeer.stop`; a child whose parent has died stops too.
After its first :data:`NICE_AFTER_S` seconds the child is niced (:data:`NICE`;
``nice_after`` sets when, None never): the exact model next to it has every thread, and
the memetic run takes the cycles it leaves idle.
Where fork is missing, :func:`available` is false and the portfolio runs its phases one
after the other.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import threading
import time
from typing import Any

from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import Callbacks
from geoplan.solving.forkpool import available, child_signals, reap
from geoplan.solving.params import SolverParams
from geoplan.solving.result import SolveResult
from geoplan.solving.stop import StopFlag

__all__ = ["MemeticPeer", "available"]

#: seconds the parent waits for a stopped or timed-out child's result beyond its deadline
GRACE_S = 2.0
#: the child's niceness increment: it runs on the cycles the exact model leaves idle
NICE = 10
#: seconds the child runs at its parent's priority first: the memetic run finds most of
#: its plans early, while the exact model runs its one-thread start heuristics and root
#: bound. Niced from the start, it lost to the memetic algorithm alone at 1 s budgets in
#: a sweep that ran two jobs at once (metro N=64 L=32: 333.54 against 327.74).
NICE_AFTER_S = 2.0


class _Publish(Callbacks):
    """Sends every new best plan to the parent: ("plan", perf_counter, objective, plan)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def on_plan(self, seconds: float, plan: Plan, objective: float) -> None:
        self.out.put(("plan", time.perf_counter(), objective, plan))


def _renice(tids: list[int]) -> None:
    """Raise these threads' niceness by :data:`NICE` (on Linux niceness is per thread)."""
    for tid in tids:
        with contextlib.suppress(OSError):  # not permitted here: it competes as an equal
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + NICE)


def _threads(known: list[int]) -> list[int]:
    """This process's threads (Linux: ``/proc/self/task``), else ``known``. Not
    ``threading.enumerate()``: after a fork the main thread's ``native_id`` is still the
    parent's. The queue's feeder thread, started at nice 0 by a plan sent before the
    renice, is one of them."""
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return known


def _child(instance: Instance, seed: int, time_limit: float, params: SolverParams | None,
           out: Any, stop_event: Any, parent: int, nice_after: float | None) -> None:
    """The peer's body: the memetic solver, stopped by ``stop_event``; its result on ``out``;
    niced after ``nice_after`` seconds (None: never)."""
    child_signals()
    if nice_after is not None and nice_after <= 0:
        _renice([threading.get_native_id()])  # the solve's thread inherits it
        nice_after = None
    os.environ.pop("GEOPLAN_TEST_STOP_AFTER_INCUMBENTS", None)  # the parent's test hook
    from geoplan.solving.core import solve

    flag = StopFlag()
    box: dict[str, Any] = {}

    def work() -> None:
        box["tid"] = threading.get_native_id()
        try:
            box["result"] = solve(instance, "memetic", seed=seed, time_limit=time_limit,
                                  threads=1, params=params, callbacks=_Publish(out),
                                  warm_up=False, stop=flag)
        except Exception as exc:  # reported to the parent, which decides
            box["error"] = f"{type(exc).__name__}: {exc}"

    # The solve runs off the main thread so that its stop scope leaves the signal
    # handlers alone (SIGINT stays ignored here).
    t = threading.Thread(target=work, daemon=True)
    t.start()
    renice_at = None if nice_after is None else time.perf_counter() + nice_after
    while t.is_alive():
        if stop_event.wait(0.02) or os.getppid() != parent:
            flag.set("the parallel portfolio's exact model ended")
            t.join()
        if renice_at is not None and time.perf_counter() >= renice_at and "tid" in box:
            renice_at = None
            _renice(_threads([threading.get_native_id(), box["tid"]]))
    out.put(("error", box["error"]) if "error" in box else ("done", box["result"]))
    out.close()
    out.join_thread()  # flushed before os._exit


class MemeticPeer:
    """A memetic run in a forked process (module docstring)."""

    def __init__(self, instance: Instance, seed: int, time_limit: float,
                 params: SolverParams | None = None, nice_after: float | None = NICE_AFTER_S
                 ) -> None:
        ctx = multiprocessing.get_context("fork")
        self.started = time.perf_counter()
        self.deadline = self.started + time_limit
        self._out = ctx.Queue()
        self._stop = ctx.Event()
        self._best: tuple[float, float, Plan] | None = None  # (perf_counter, objective, plan)
        self._final: SolveResult | None = None
        self.error: str | None = None
        #: Every plan's (``perf_counter`` when found, objective) as it was sent.
        self.sent: list[tuple[float, float]] = []
        parent = os.getpid()
        self._pid: int | None = os.fork()
        if self._pid == 0:  # the child
            code = 0
            try:
                _child(instance, seed, time_limit, params, self._out, self._stop, parent,
                       nice_after)
            except BaseException:
                code = 1
            finally:
                os._exit(code)

    def _take(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "plan":
            _, at, objective, plan = msg
            self.sent.append((at, objective))
            if self._best is None or objective < self._best[1]:
                self._best = (at, objective, plan)
        elif msg[0] == "done":
            self._final = msg[1]
        else:
            self.error = msg[1]

    def _drain(self, until: float | None = None) -> None:
        """Read what the child has sent; with ``until``, wait for its end until then."""
        while self._final is None and self.error is None:
            try:
                if until is None:
                    msg = self._out.get_nowait()
                else:
                    msg = self._out.get(timeout=max(0.0, until - time.perf_counter()))
            except (queue.Empty, OSError, ValueError):
                return
            self._take(msg)

    def best(self) -> tuple[float, float, Plan] | None:
        """The best plan sent so far: (``perf_counter`` when found, objective, plan)."""
        self._drain()
        return self._best

    def stop(self) -> None:
        """Ask the run to end now (it still sends its result)."""
        self._stop.set()

    def result(self, timeout: float | None = None) -> SolveResult | None:
        """The run's result, waiting for it until the deadline (plus a grace), or at most
        ``timeout`` seconds; None if the child failed or did not answer in time (then
        ``best()`` still holds what it sent). The child is ended either way."""
        until = max(self.deadline, time.perf_counter()) + GRACE_S
        if timeout is not None:
            until = min(until, time.perf_counter() + timeout)
        self._drain(until=until)
        self.close()
        return self._final

    def close(self) -> None:
        """End the child (at once if it has not answered) and reap it; what it sent before
        stays readable through :meth:`best`."""
        self._stop.set()
        if self._pid is None:
            return
        pid, self._pid = self._pid, None
        # A child that has answered exits at once; one that has not is not waited for.
        reap(pid, 0.5 if self._final is not None or self.error is not None else 0.0)
        self._drain()  # what it sent before it ended
        self._out.close()
