"""The benchmark runner: solvers x instances x seeds x budgets, isolated and resumable.

Every run executes in its own child process with a hard wall-clock kill at
``budget + grace``: a crash or time-out is recorded as a row, never fatal.
Rows are appended to ``OUT/results.jsonl`` as runs finish (one JSON object a
line), so an interrupted sweep resumes where it stopped (``resume=True`` skips
every run whose key is already in the file). Local runs fork from the runner
(the default, 1-2 processes); given a Dask scheduler address, runs are handed to
the cluster and each worker runs them in a fresh ``python -m bench.runner``
subprocess with the same kill.

Run rows carry the solver, its parameters, seed, budget, instance name, hash and
generator spec, the package version and git commit, status (the solver's, or
``timeout``, ``crashed``, ``error``, ``formulation-error``, ``skipped``),
objective, bound, gap, wall time, plan and trace.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing as mp
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, TextIO

from bench.experiments import WARM_UP_S, Experiment, InstanceSpec, RunSpec, hardware_key
from geoplan.errors import InputError

__all__ = [
    "FAILED",
    "RESULTS_NAME",
    "ResultsFile",
    "SweepSummary",
    "default_workers",
    "environment",
    "execute",
    "run_experiments",
]

RESULTS_NAME = "results.jsonl"
MANIFEST_NAME = "manifest.json"
#: Runner statuses besides the solver statuses of formats.md.
FAILED = ("timeout", "crashed", "error", "formulation-error")
#: Extra seconds a Dask-side subprocess gets for interpreter start-up and imports.
SUBPROCESS_STARTUP_S = 15.0
_MAX_TRACE = 1000
_MAX_INFO_CHARS = 2000
_PROTO = "@@geoplan-bench "


# --------------------------------------------------------------------------- environment


def default_workers() -> int:
    """1-2 worker processes: two when the machine has at least two cores."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():  # an installed copy, not a checkout: no commit to name
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head


def environment() -> dict[str, Any]:
    """Version, commit and machine facts recorded in every row."""
    import geoplan

    return {
        "version": geoplan.__version__,
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
    }


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- one run (child side)


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
    row["started_at"] = _now()
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
    row["finished_at"] = _now()
    return row


def _failure_row(task: Mapping[str, Any], status: str, message: str, elapsed: float,
                 events: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    row = dict(task["row"])
    trace = [[e["t"], e["incumbent"], e["bound"]] for e in events if e.get("event") == "improve"]
    row.update(status=status, message=message, elapsed_s=round(elapsed, 4), finished_at=_now(),
               objective=None, plan=None, trace=_thin(trace))
    if trace:
        row["unpriced_incumbent"] = trace[-1][1]
    return row


# --------------------------------------------------------------------------- local processes


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
        row = _failure_row(task, "crashed", f"{type(exc).__name__}: {exc}", 0.0)
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


def run_local(
    tasks: Sequence[dict[str, Any]],
    workers: int,
    on_row: Callable[[dict[str, Any]], None],
    log_dir: Path | None = None,
    poll: float = 0.2,
) -> None:
    """Run tasks in forked child processes, at most ``workers`` at a time.

    Each task is a dict with ``row`` (the row so far), ``instance`` (canonical dict) and
    ``limit`` (seconds to the hard kill). Completed rows go to ``on_row`` in finishing order.
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
            while pending and len(running) < workers:
                task = pending.popleft()
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
                        row = _failure_row(child.task, "crashed",
                                           f"run process died ({how}) without a result"
                                           + (f"; log tail: {tail[-300:]}" if tail else ""),
                                           elapsed, child.events)
                elif elapsed > child.limit:
                    child.kill()
                    child.drain()
                    _log_tail(child.log, keep=True)
                    row = _failure_row(
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


# --------------------------------------------------------------------------- subprocess / Dask


def run_subprocess(task: Mapping[str, Any], startup: float = SUBPROCESS_STARTUP_S
                   ) -> dict[str, Any]:
    """Run one task in a fresh ``python -m bench.runner --child`` with a hard kill.

    The kill comes at ``limit + startup`` seconds (start-up covers interpreter and
    imports). Used on Dask workers, where forking a threaded worker is unsafe.
    """
    t0 = time.perf_counter()
    limit = float(task["limit"]) + startup
    proc = subprocess.Popen([sys.executable, "-m", "bench.runner", "--child"],
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
        return _failure_row(task, "timeout", f"killed after {elapsed:.1f} s (budget "
                            f"{row['budget_s']:g} s + grace {row['grace_s']:g} s + start-up "
                            f"{startup:g} s)", elapsed, events)
    tail = err.decode(errors="replace")[-300:]
    return _failure_row(task, "crashed", f"run process died (exit status {proc.returncode}) "
                        f"without a result; stderr tail: {tail}", elapsed, events)


def _subprocess_child() -> int:
    """``python -m bench.runner --child``: read a task on stdin, write protocol lines."""
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
        row = _failure_row(task, "crashed", f"{type(exc).__name__}: {exc}", 0.0)
    emit({"event": "result", "row": row})
    return 0


def run_dask(
    tasks: Sequence[dict[str, Any]],
    address: str,
    on_row: Callable[[dict[str, Any]], None],
    connect_timeout: float = 20.0,
) -> None:
    """Hand tasks to the Dask cluster at ``address``; each runs in an isolated subprocess."""
    try:
        from distributed import Client, as_completed
    except ImportError as exc:
        raise InputError("--dask", address, "needs Dask distributed: pip install "
                         "'geoplan[dist]'") from exc
    try:
        client = Client(address, timeout=f"{connect_timeout}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError("--dask", address, f"cannot connect to the Dask scheduler: {exc}"
                         ) from None
    try:
        keyed: dict[str, dict[str, Any]] = {}
        futures = []
        for task in tasks:
            fut = client.submit(run_subprocess, task, pure=False)
            keyed[fut.key] = task
            futures.append(fut)
        for fut in as_completed(futures):
            task = keyed[fut.key]
            try:
                row = fut.result()
            except Exception as exc:  # the worker itself failed
                row = _failure_row(task, "crashed", f"Dask task failed: {type(exc).__name__}: "
                                   f"{exc}", 0.0)
            row["runner"] = f"dask:{address}"
            on_row(row)
    finally:
        client.close()


# --------------------------------------------------------------------------- results file


class ResultsFile:
    """An append-only JSON-lines results file that survives interruption."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def rows(self) -> list[dict[str, Any]]:
        """Every complete row (a torn last line from an interruption is ignored)."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def repair(self) -> None:
        """Cut a torn last line so that appends start on a fresh line."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with self.path.open("r+b") as f:
                f.truncate(cut)

    def append(self, row: Mapping[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row, default=str, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


# --------------------------------------------------------------------------- the sweep


@dataclass
class SweepSummary:
    """What a sweep did."""

    results: Path
    total: int
    executed: int
    resumed: int
    statuses: Counter[str]
    wall_s: float
    unavailable: dict[str, str]

    def line(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
        return (f"{self.executed} runs executed, {self.resumed} already in the results file "
                f"({self.total} in all) in {self.wall_s:.1f} s: {parts or 'nothing to do'}")


class Progress:
    """A one-line progress bar on a terminal, or one line per finished run elsewhere."""

    def __init__(self, total: int, workers: int, stream: TextIO | None, enabled: bool) -> None:
        self.total = total
        self.workers = max(1, workers)
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = self.enabled and self.stream.isatty()
        self.done = 0
        self.counts: Counter[str] = Counter()
        self.t0 = time.perf_counter()

    def update(self, row: Mapping[str, Any], remaining_s: float) -> None:
        self.done += 1
        self.counts[str(row.get("status"))] += 1
        if not self.enabled:
            return
        el = time.perf_counter() - self.t0
        left = remaining_s / self.workers
        if self.tty:
            width = 28
            fill = int(width * self.done / self.total)
            bad = sum(self.counts[s] for s in FAILED)
            self.stream.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total}"
                              f"  {bad} failed  {_hms(el)} elapsed, <= {_hms(left)} left ")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            obj = row.get("objective")
            val = "" if obj is None else f" {obj:.6g}"
            self.stream.write(
                f"[{self.done}/{self.total} {_hms(el)}] {row.get('experiment')} "
                f"{row.get('label')} {row.get('instance')} seed {row.get('seed')} "
                f"{row.get('budget_s'):g}s: {row.get('status')}{val}\n")
        self.stream.flush()


def _hms(s: float) -> str:
    s = max(0, round(s))
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _availability(names: Iterable[str]) -> dict[str, str]:
    """Solver name -> reason, for registered solvers that cannot be loaded."""
    from geoplan.errors import SolverError
    from geoplan.solving.core import get_solver

    out = {}
    for name in sorted(set(names)):
        try:
            get_solver(name).load()
        except SolverError as exc:
            out[name] = str(exc)
        except Exception as exc:  # a solver module failing at import time
            out[name] = f"solver {name!r} failed to import: {type(exc).__name__}: {exc}"
    return out


def _warm_up(names: Iterable[str], workers: int, limit: float = WARM_UP_S) -> None:
    """Run each solver once on a toy instance, isolated, so that its compiled code is cached.

    numba kernels are compiled with ``cache=True``: a throw-away run per solver writes
    the on-disk cache, and the measured runs load it instead of compiling on their
    budget. Each warm-up is a forked run with a hard kill; its result is discarded.
    """
    from geoplan.model.generators import paper_mix

    toy = paper_mix(3, 4, seed=0, hidden=512, seq_len=512, batch_size=8, n_sites=2,
                    name="warm-up")
    tasks = [{"instance": toy, "limit": limit,
              "row": {"run_key": f"warm-up-{name}", "solver": name, "seed": 0, "budget_s": 0.5,
                      "grace_s": limit - 0.5, "threads": 1, "warm_start": None, "params": {}}}
             for name in sorted(set(names))]
    run_local(tasks, workers, lambda row: None)


def _normalise(spec: InstanceSpec, data: dict[str, Any], budget: float, grace: float,
               unavailable: Mapping[str, str], log_dir: Path | None
               ) -> tuple[float | None, float | None, dict[str, Any]]:
    """T_ref/E_ref from ``spec.normalise_by``'s plan at lambda = 1 (an isolated run).

    Returns (t_ref_ms, e_ref_j, record); (None, None, ...) falls back to the default
    Metis-default normalisers, and the record says why.
    """
    from geoplan.model.instance import Instance

    solver = spec.normalise_by or ""
    if solver in unavailable:
        return None, None, {"by": f"metis-default (fallback: {solver} unavailable)"}
    plain = {**data, "objective": {"lambda": 1.0, "t_ref_ms": None, "e_ref_j": None}}
    inst = Instance.from_dict(plain)
    task = {"instance": plain, "limit": budget + grace,
            "row": {"run_key": f"normalise-{spec.key}", "solver": solver, "seed": 0,
                    "budget_s": budget, "grace_s": grace, "threads": 1, "warm_start": None,
                    "params": {}, "instance": inst.name}}
    rows: list[dict[str, Any]] = []
    run_local([task], 1, rows.append, log_dir)
    row = rows[0]
    record = {"by": solver, "status": row.get("status"), "plan": row.get("plan"),
              "t_iter_ms": row.get("t_iter_ms"), "e_iter_j": row.get("e_iter_j"),
              "budget_s": budget}
    if row.get("status") in ("optimal", "feasible") and row.get("t_iter_ms"):
        return row["t_iter_ms"], row["e_iter_j"], record
    why = f"{solver} {row.get('status')}" + (f": {row['message']}" if row.get("message") else "")
    record["by"] = f"metis-default (fallback: {why})"
    return None, None, record


def prepare_instances(
    experiments: Sequence[Experiment], out: Path, unavailable: Mapping[str, str],
    log_dir: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """Materialise every instance into ``out/instances`` (reused on resume).

    Returns spec key -> {"data", "hash", "file", "normalised_by"}. Each instance is
    stored with its normalisers resolved, so its hash is the runs' ``instance_hash``.
    """
    from geoplan.cost.normalise import resolve_normalisers
    from geoplan.model.instance import Instance

    inst_dir = out / "instances"
    inst_dir.mkdir(parents=True, exist_ok=True)
    index_path = inst_dir / "index.json"
    index: dict[str, Any] = json.loads(index_path.read_text()) if index_path.exists() else {}
    refs: dict[str, tuple[float | None, float | None, dict[str, Any]]] = {}
    out_map: dict[str, dict[str, Any]] = {}
    for exp in experiments:
        for spec in exp.instances:
            if spec.key in out_map:
                continue
            entry = index.get(spec.key)
            if entry and (inst_dir / entry["file"]).exists():
                data = json.loads((inst_dir / entry["file"]).read_text())
                out_map[spec.key] = {**entry, "data": data}
                continue
            data = json.loads(json.dumps(spec.data))
            record: dict[str, Any] = {"by": "metis-default"}
            if spec.normalise_by:
                hw = hardware_key(data)
                if hw not in refs:
                    refs[hw] = _normalise(spec, data, exp.normalise_budget, exp.grace,
                                          unavailable, log_dir)
                t_ref, e_ref, record = refs[hw]
                if t_ref is not None:
                    data["objective"] = {**data.get("objective", {}), "t_ref_ms": t_ref,
                                         "e_ref_j": e_ref}
            inst = Instance.from_dict(data)
            with contextlib.suppress(InputError):  # a run then reports the missing normalisers
                inst = resolve_normalisers(inst)
            # The canonical dict with the normalisers every run uses: its hash is the
            # SolveResult.instance_hash of every run on it.
            data = inst.to_dict()
            fname = f"{spec.name}__{inst.fingerprint}.json"
            (inst_dir / fname).write_text(json.dumps(data, indent=1) + "\n")
            entry = {"file": fname, "hash": inst.fingerprint, "name": spec.name,
                     "normalised_by": record["by"], "normaliser": record,
                     "spec": spec.describe()}
            index[spec.key] = entry
            out_map[spec.key] = {**entry, "data": data}
    index_path.write_text(json.dumps(index, indent=1) + "\n")
    return out_map


def _base_row(run: RunSpec, inst: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, Any]:
    data = inst["data"]
    return {
        "experiment": run.experiment,
        "profile": run.profile,
        "run_key": run.key,
        "label": run.solver.label,
        "solver": run.solver.name,
        "params": dict(run.solver.params),
        "warm_start": run.solver.warm_start,
        "seed": run.seed,
        "budget_s": run.budget,
        "grace_s": run.grace,
        "threads": run.threads,
        "instance": data.get("name", run.instance.name),
        "instance_hash": inst["hash"],
        "instance_file": inst["file"],
        "instance_spec": run.instance.describe(),
        "instance_tag": run.instance.tag,
        "n": len(data["gpus"]),
        "layers": data["model"]["layers"],
        "lambda": (data.get("objective") or {}).get("lambda", 1.0),
        "normalised_by": inst["normalised_by"],
        "normaliser": inst.get("normaliser"),
        **{k: env[k] for k in ("version", "git_commit", "python", "host")},
        "runner": "local",
    }


def write_manifest(out: Path, experiments: Sequence[Experiment], env: Mapping[str, Any]) -> None:
    """Record the experiment definitions next to the results (the report reads them)."""
    path = out / MANIFEST_NAME
    old = json.loads(path.read_text()) if path.exists() else {}
    exps = dict(old.get("experiments", {}))
    for e in experiments:
        exps[e.name] = e.to_manifest()
    order = list(dict.fromkeys([*old.get("order", []), *(e.name for e in experiments)]))
    path.write_text(json.dumps({"experiments": exps, "order": order, "environment": dict(env),
                                "updated_at": _now()}, indent=1) + "\n")


def run_experiments(
    experiments: Sequence[Experiment],
    out: str | Path,
    *,
    workers: int | None = None,
    dask: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    stream: TextIO | None = None,
    keep_logs: bool = True,
    warm_up: float | None = WARM_UP_S,
    dask_timeout: float = 20.0,
) -> SweepSummary:
    """Run every run of ``experiments``, appending rows to ``out/results.jsonl``.

    ``warm_up`` (seconds, None for none) first runs each solver once on a toy instance,
    isolated and killed after that long, so that compiled kernels are cached before
    the measured runs; local mode only.
    """
    t0 = time.perf_counter()
    out = Path(out)
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise InputError("--workers", workers, "expected a positive number of processes")
    results = ResultsFile(out / RESULTS_NAME)
    if results.path.exists() and results.path.stat().st_size > 0 and not (resume or overwrite):
        raise InputError("--out", str(out), "the results file already exists; pass --resume to "
                         "continue it or --overwrite to start again")
    out.mkdir(parents=True, exist_ok=True)
    if overwrite and not resume:
        results.path.unlink(missing_ok=True)
    results.repair()
    done = {r["run_key"] for r in results.rows()
            if r.get("run_key") and r.get("status") != "skipped"}

    env = environment()
    write_manifest(out, experiments, env)
    names = {s.name for e in experiments for s in e.solvers}
    names |= {s.warm_start for e in experiments for s in e.solvers if s.warm_start}
    names |= {i.normalise_by for e in experiments for i in e.instances if i.normalise_by}
    unavailable = _availability(names)
    log_dir = out / "logs" if keep_logs else None
    if log_dir is not None:
        log_dir.mkdir(exist_ok=True)
    instances = prepare_instances(experiments, out, unavailable, log_dir)

    runs = [r for e in experiments for r in e.runs()]
    todo: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    resumed = 0
    for run in runs:
        if run.key in done:
            resumed += 1
            continue
        row = _base_row(run, instances[run.instance.key], env)
        reason = run.skip_reason
        for name in (run.solver.name, run.solver.warm_start):
            if reason is None and name in unavailable:
                reason = f"solver unavailable: {unavailable[name]}"
        if reason is not None:
            row.update(status="skipped", message=reason, objective=None, plan=None, trace=[],
                       finished_at=_now())
            skipped.append(row)
            continue
        todo.append({"row": row, "instance": instances[run.instance.key]["data"],
                     "limit": run.hard_limit})
    todo.sort(key=lambda t: -t["limit"])  # longest first: a shorter makespan

    counts: Counter[str] = Counter()
    bar = Progress(len(todo), 1 if dask else workers, stream, progress)
    left = [sum(t["limit"] for t in todo)]

    def record(row: dict[str, Any]) -> None:
        results.append(row)
        counts[row["status"]] += 1
        if row["status"] != "skipped":
            left[0] -= float(row["budget_s"]) + float(row["grace_s"])
            bar.update(row, max(0.0, left[0]))

    for row in skipped:
        record(row)
    if todo:
        if dask:
            run_dask(todo, dask, record, dask_timeout)
        else:
            if warm_up:
                _warm_up({t["row"]["solver"] for t in todo}
                         | {t["row"]["warm_start"] for t in todo if t["row"]["warm_start"]},
                         workers, warm_up)
            run_local(todo, workers, record, log_dir)
    if log_dir is not None and log_dir.exists() and not any(log_dir.iterdir()):
        log_dir.rmdir()
    return SweepSummary(results.path, len(runs), len(todo), resumed, counts,
                        time.perf_counter() - t0, dict(unavailable))


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        sys.exit(_subprocess_child())
    print("usage: python -m bench.runner --child  (internal; use `geoplan bench`)",
          file=sys.stderr)
    sys.exit(2)
