"""Local run processes: forked children, their threads at most ``workers`` at a time, each killed
at its limit.

Each child makes its own process group (so that the kill reaches anything the
solver started), sends improvement events and its result row through a pipe, and
writes its output to the run's log, kept only when the run failed.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from bench.execution.protocol import execute, failure_row, run_subprocess
from bench.execution.results import FAILED

__all__ = ["run_local"]


def _child_main(conn: Connection, task: Mapping[str, Any], log_path: str | None) -> None:
    """Entry point of a forked run: own process group, output to the run's log."""
    os.setpgrp()
    if log_path is not None:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    try:
        row = execute(task, conn.send)
    except BaseException as exc:  # report even interrupts of the child itself
        row = failure_row(task, "crashed", f"{type(exc).__name__}: {exc}", 0.0)
    conn.send({"event": "result", "row": row})
    conn.close()


@dataclass
class _Child:
    task: dict[str, Any]
    proc: Any
    conn: Connection
    start: float
    limit: float
    log: Path | None
    events: list[dict[str, Any]] = field(default_factory=list)
    row: dict[str, Any] | None = None
    closed: bool = False

    def drain(self) -> None:
        while not self.closed:
            try:
                if not self.conn.poll():
                    return
                msg = self.conn.recv()
            except (EOFError, OSError):
                self.closed = True
                return
            if msg.get("event") == "result":
                self.row = msg["row"]
            else:
                self.events.append(msg)

    def kill(self) -> None:
        """SIGKILL the run's process group (the child made one), or the child alone."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.join(5)


def _log_tail(path: Path | None, keep: bool) -> str:
    if path is None or not path.exists():
        return ""
    text = path.read_text(errors="replace")
    if not keep or not text.strip():
        path.unlink(missing_ok=True)
    return text[-1500:]


def _mp_context() -> Any:
    return mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None


def slots(task: Mapping[str, Any], workers: int) -> int:
    """The worker slots a run takes: its solver's threads (the row's ``threads``; at least
    one, at most ``workers``)."""
    threads = task["row"].get("threads") or 1
    return max(1, min(workers, int(threads)))


def _next_fitting(pending: deque[dict[str, Any]], free: int, workers: int) -> int | None:
    """The index of the first pending task whose threads fit in ``free`` slots."""
    for k, task in enumerate(pending):
        if slots(task, workers) <= free:
            return k
    return None


def run_local(
    tasks: Sequence[dict[str, Any]],
    workers: int,
    on_row: Callable[[dict[str, Any]], None],
    log_dir: Path | None = None,
    poll: float = 0.2,
) -> None:
    """Run tasks in forked child processes whose threads add up to at most ``workers``.

    Each task is a dict with ``row`` (the row so far; its ``threads``: the slots the run
    takes, :func:`slots`), ``instance`` (canonical dict) and ``limit`` (seconds to the
    hard kill). A task that does not fit in the free slots waits, and the first later one
    that fits starts instead. Why: a two-thread run next to a one-thread run put three
    busy threads on two cores; in the anytime-portfolio sweep (workers 2) the portfolio
    on one and on two threads always ran as a pair, and their bounds at 1-5 s were
    below the MILP's alone (run next to a one-thread job) in 9 of 47 cells and above in
    1-2 (``bench/results/anytime-portfolio-ce85a4b``).
    Completed rows go to ``on_row`` in finishing order.
    """
    ctx = _mp_context()
    if ctx is None:  # no fork on this platform: fresh interpreters, as on Dask workers
        for task in tasks:
            on_row(run_subprocess(task))
        return
    pending = deque(tasks)
    running: list[_Child] = []
    try:
        while pending or running:
            while pending:
                k = _next_fitting(pending, workers - sum(slots(c.task, workers)
                                                         for c in running), workers)
                if k is None:
                    break
                task = pending[k]
                del pending[k]
                rx, tx = ctx.Pipe(duplex=False)
                log = None if log_dir is None else log_dir / f"{task['row']['run_key']}.log"
                proc = ctx.Process(target=_child_main, args=(tx, task, None if log is None
                                                             else str(log)), daemon=True)
                proc.start()
                tx.close()
                running.append(_Child(task, proc, rx, time.perf_counter(), task["limit"], log))
            deadline = min(c.start + c.limit for c in running)
            timeout = max(0.0, min(poll, deadline - time.perf_counter()))
            wait([c.conn for c in running if not c.closed] + [c.proc.sentinel for c in running],
                 timeout)
            now = time.perf_counter()
            for child in list(running):
                child.drain()
                elapsed = now - child.start
                if child.proc.exitcode is not None:
                    child.drain()
                    child.proc.join()
                    if child.row is not None:
                        row = child.row
                        _log_tail(child.log, keep=row.get("status") in FAILED)
                    else:
                        code = child.proc.exitcode
                        how = f"signal {-code}" if code < 0 else f"exit status {code}"
                        tail = _log_tail(child.log, keep=True)
                        row = failure_row(child.task, "crashed",
                                           f"run process died ({how}) without a result"
                                           + (f"; log tail: {tail[-300:]}" if tail else ""),
                                           elapsed, child.events)
                elif elapsed > child.limit:
                    child.kill()
                    child.drain()
                    _log_tail(child.log, keep=True)
                    row = failure_row(
                        child.task, "timeout",
                        f"killed after {elapsed:.1f} s (budget {child.task['row']['budget_s']:g} s "
                        f"+ grace {child.task['row']['grace_s']:g} s)", elapsed, child.events)
                else:
                    continue
                child.conn.close()
                running.remove(child)
                on_row(row)
    finally:
        for child in running:  # interrupted: end our own children, record nothing
            child.kill()
            _log_tail(child.log, keep=False)

