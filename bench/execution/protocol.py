"""One run, and the protocol between a run process and the sweep.

:func:`execute` runs one task in the current process and returns its result row
(a crash or a solver error becomes a row, never an exception). A fresh
interpreter (``python -m bench.execution.child --child``, used on Dask workers
and where fork is unavailable) reads a task as JSON on stdin and writes protocol
lines on stdout: ``@@geoplan-bench {"event": "improve", ...}`` while the solver
improves, then one ``{"event": "result", "row": ...}``. :func:`run_subprocess`
starts one, kills its process group at the hard limit, and reads the lines back.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.execution.env import now
from geoplan.errors import InputError

__all__ = [
    "SUBPROCESS_STARTUP_S", "execute", "failure_row", "run_subprocess", "subprocess_child",
]

#: Extra seconds a subprocess gets for interpreter start-up and imports.
SUBPROCESS_STARTUP_S = 15.0
_MAX_TRACE = 1000
_MAX_INFO_CHARS = 2000
_PROTO = "@@geoplan-bench "


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _thin(trace: list[list[Any]]) -> list[list[Any]]:
    if len(trace) <= _MAX_TRACE:
        return trace
    step = (len(trace) - 1) / (_MAX_TRACE - 1)
    return [trace[round(k * step)] for k in range(_MAX_TRACE)]


def _small_info(info: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in info.items():
        try:
            text = json.dumps(v, default=str)
        except (TypeError, ValueError):
            continue
        if len(text) <= _MAX_INFO_CHARS:
            out[k] = json.loads(text)
    return out


def execute(task: Mapping[str, Any], emit: Callable[[dict[str, Any]], None] | None = None
            ) -> dict[str, Any]:
    """Run one task (in the current process) and return its result row.

    ``emit`` receives ``{"event": "improve", ...}`` messages as the solver improves,
    so that a killed run still leaves its partial trace.
    """
    from geoplan.errors import FormulationError, SolverError
    from geoplan.model.instance import Instance
    from geoplan.solving.core import Callbacks, solve

    row: dict[str, Any] = dict(task["row"])
    row["started_at"] = now()
    t0 = time.perf_counter()

    class Relay(Callbacks):
        def __init__(self) -> None:
            self.last = -1.0

        def on_improvement(self, seconds: float, incumbent: float | None,
                           bound: float | None) -> None:
            now = time.perf_counter()
            if emit is not None and now - self.last >= 0.02:
                self.last = now
                emit({"event": "improve", "t": float(seconds), "incumbent": _finite(incumbent),
                      "bound": _finite(bound)})

    threads = int(row["threads"])
    if "numba" in sys.modules:
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    try:
        inst = Instance.from_dict(task["instance"])
        res = solve(inst, row["solver"], seed=int(row["seed"]), time_limit=float(row["budget_s"]),
                    threads=threads, warm_start=row.get("warm_start"),
                    params=dict(row.get("params") or {}), callbacks=Relay())
    except FormulationError as exc:
        row.update(status="formulation-error", message=str(exc))
    except (SolverError, InputError) as exc:
        row.update(status="error", message=str(exc))
    except Exception as exc:
        tb = traceback.format_exc(limit=8)
        row.update(status="crashed", message=f"{type(exc).__name__}: {exc}", traceback=tb[-4000:])
    else:
        d = res.to_dict()
        trace = d["trace"]
        if len(trace) > _MAX_TRACE:
            row["trace_length"] = len(trace)
        row.update(
            status=d["status"], objective=d["objective"], t_iter_ms=d["t_iter_ms"],
            e_iter_j=d["e_iter_j"], lower_bound=d["lower_bound"], gap=d["gap"],
            wall_s=d["wall_s"], t_ref_ms=d["t_ref_ms"], e_ref_j=d["e_ref_j"], plan=d["plan"],
            trace=_thin(trace), message=d["message"], info=_small_info(d["info"]),
            result_params=d["params"],
        )
        if d.get("instance_hash") and d["instance_hash"] != row.get("instance_hash"):
            row["instance_hash_prepared"] = row.get("instance_hash")
            row["instance_hash"] = d["instance_hash"]
    row["elapsed_s"] = round(time.perf_counter() - t0, 4)
    row["finished_at"] = now()
    return row


def failure_row(task: Mapping[str, Any], status: str, message: str, elapsed: float,
                events: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The row of a run that left no result: killed, died, or failed outside the solver."""
    row = dict(task["row"])
    trace = [[e["t"], e["incumbent"], e["bound"]] for e in events if e.get("event") == "improve"]
    row.update(status=status, message=message, elapsed_s=round(elapsed, 4), finished_at=now(),
               objective=None, plan=None, trace=_thin(trace))
    if trace:
        row["unpriced_incumbent"] = trace[-1][1]
    return row



def run_subprocess(task: Mapping[str, Any], startup: float = SUBPROCESS_STARTUP_S
                   ) -> dict[str, Any]:
    """Run one task in a fresh ``python -m bench.execution.child --child`` with a hard kill.

    The kill comes at ``limit + startup`` seconds (start-up covers interpreter and
    imports). Used on Dask workers, where forking a threaded worker is unsafe.
    """
    t0 = time.perf_counter()
    limit = float(task["limit"]) + startup
    proc = subprocess.Popen([sys.executable, "-m", "bench.execution.child", "--child"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    payload = json.dumps(task).encode()
    timed_out = False
    try:
        out, err = proc.communicate(payload, timeout=limit)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        out, err = proc.communicate()
    elapsed = time.perf_counter() - t0
    events: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    for line in out.decode(errors="replace").splitlines():
        if not line.startswith(_PROTO):
            continue
        try:
            msg = json.loads(line[len(_PROTO):])
        except json.JSONDecodeError:
            continue
        if msg.get("event") == "result":
            result = msg["row"]
        else:
            events.append(msg)
    if result is not None:
        return result
    row = task["row"]
    if timed_out:
        return failure_row(task, "timeout", f"killed after {elapsed:.1f} s (budget "
                            f"{row['budget_s']:g} s + grace {row['grace_s']:g} s + start-up "
                            f"{startup:g} s)", elapsed, events)
    tail = err.decode(errors="replace")[-300:]
    return failure_row(task, "crashed", f"run process died (exit status {proc.returncode}) "
                        f"without a result; stderr tail: {tail}", elapsed, events)


def subprocess_child() -> int:
    """``python -m bench.execution.child --child``: a task on stdin, protocol lines out."""
    task = json.loads(sys.stdin.read())
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # solver chatter on stdout goes to stderr, away from the protocol
    sys.stdout = sys.stderr

    def emit(msg: dict[str, Any]) -> None:
        proto.write(_PROTO + json.dumps(msg) + "\n")
        proto.flush()

    try:
        row = execute(task, emit)
    except BaseException as exc:
        row = failure_row(task, "crashed", f"{type(exc).__name__}: {exc}", 0.0)
    emit({"event": "result", "row": row})
    return 0


