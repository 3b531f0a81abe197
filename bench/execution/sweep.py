"""The sweep: solvers x instances x seeds x budgets, isolated and resumable.

Every run executes in its own process with a hard wall-clock kill at
``budget + grace``: a crash or time-out is recorded as a row, never fatal. Rows
are appended to ``OUT/results.jsonl`` as runs finish, so an interrupted sweep
resumes where it stopped (``resume=True`` skips every run whose key is already in
the file). Local runs fork from the sweep (:mod:`bench.execution.pool`, 1-2
processes); given a Dask scheduler address, runs go to the cluster
(:mod:`bench.execution.dask`), each in a fresh subprocess with the same kill.

Run rows carry the solver, its parameters, seed, budget, instance name, hash and
generator spec, the package version and git commit, status (the solver's, or
``timeout``, ``crashed``, ``error``, ``formulation-error``, ``skipped``),
objective, bound, gap, wall time, plan and trace.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from bench.execution.dask import run_dask
from bench.execution.env import default_workers, environment, now
from bench.execution.pool import run_local
from bench.execution.progress import Progress
from bench.execution.results import RESULTS_NAME, ResultsFile, write_manifest
from bench.experiments import WARM_UP_S, Experiment, InstanceSpec, RunSpec, hardware_key
from geoplan.errors import InputError

__all__ = ["SweepSummary", "availability", "prepare_instances", "run_experiments"]


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



def availability(names: Iterable[str]) -> dict[str, str]:
    """Solver name -> reason, for registered solvers whose backend is not installed.

    Only a missing backend (SolverUnavailable) makes a solver's runs "skipped"; a
    broken solver module raises here and stops the sweep.
    """
    from geoplan.solving.core import get_solver
    from geoplan.solving.registry import SolverUnavailable

    out = {}
    for name in sorted(set(names)):
        try:
            get_solver(name).load()
        except SolverUnavailable as exc:
            out[name] = str(exc)
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
    unavailable = availability(names)
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
                       finished_at=now())
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

