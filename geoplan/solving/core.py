"""The one entry point that runs, prices and checks a solver.

Every solver is a function ``solve(instance, options) -> Outcome`` registered
by name (:mod:`geoplan.solving.registry`, from the ``geoplan.solvers`` entry
points), with its parameters in a dataclass (:mod:`geoplan.solving.params`).
:func:`solve` checks the arguments and parameters, resolves the normalisers,
runs an optional warm-start solver for a slice of the budget, calls the solver,
then prices the returned plan with the shared evaluator and validator, checks
the model's own objective and bound against that price, and returns a
:class:`SolveResult`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from geoplan.cost import evaluate
from geoplan.cost.normalise import resolve_normalisers
from geoplan.errors import FormulationError, InputError, SolverError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.params import SolverParams
from geoplan.solving.registry import (
    _REGISTRY as _REGISTRY,  # re-exported: tests add a solver for one test (monkeypatch)
)
from geoplan.solving.registry import (
    SolverSpec,
    SolverUnavailable,
    available_solvers,
    get_solver,
    register,
    solver_names,
)
from geoplan.solving.result import STATUSES, Outcome, SolveResult, TraceRow

__all__ = [
    "Callbacks",
    "SolveOptions",
    "SolverSpec",
    "SolverUnavailable",
    "available_solvers",
    "get_solver",
    "register",
    "solve",
    "solver_names",
]


class Callbacks:
    """Hooks a solver calls; all do nothing by default (progress bars, traces)."""

    def on_start(self, solver: str, instance: Instance, options: SolveOptions) -> None:
        """Called once before the solver runs."""

    def on_improvement(self, seconds: float, incumbent: float | None, bound: float | None) -> None:
        """Called when the incumbent or the bound improves."""

    def on_progress(self, info: Mapping[str, Any]) -> None:
        """Called now and then with solver-specific progress (generation, nodes, ...)."""

    def on_end(self, result: SolveResult) -> None:
        """Called once with the final result."""


@dataclass(frozen=True)
class SolveOptions:
    """Options every solver receives.

    ``time_limit`` seconds (wall clock, measured with ``time.perf_counter``);
    ``seed`` required; ``threads`` the worker/thread count handed to backends;
    ``gap`` the relative-gap target at which an exact solver may stop (0 means
    prove optimality to the backend's tightest tolerance); ``warm_start`` plans
    to start from; ``params`` the solver's parameters: its
    :class:`~geoplan.solving.params.SolverParams` dataclass (what :func:`solve`
    hands over), or a mapping that the solver parses with it (direct calls).
    """

    seed: int
    time_limit: float = 60.0
    threads: int = 1
    gap: float = 0.0
    warm_start: tuple[Plan, ...] = ()
    params: Mapping[str, Any] | SolverParams = field(default_factory=dict)
    callbacks: Callbacks = field(default_factory=Callbacks)
    start: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InputError("seed", self.seed, "expected an integer seed")
        if self.seed < 0:
            raise InputError("seed", self.seed, "expected a non-negative integer seed")
        if not self.time_limit > 0:
            raise InputError("time_limit", self.time_limit, "must be positive")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise InputError("threads", self.threads, "expected a positive integer")
        if not 0 <= self.gap < 1:
            raise InputError("gap", self.gap, "must lie in [0, 1)")

    @property
    def deadline(self) -> float:
        """``time.perf_counter()`` value at which the budget runs out."""
        return self.start + self.time_limit

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.perf_counter())


def default_threads() -> int:
    """Threads used when none are given: the machine's cores, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def solve(
    instance: Instance,
    solver: str,
    *,
    seed: int,
    time_limit: float = 60.0,
    threads: int | None = None,
    gap: float = 0.0,
    warm_start: str | Plan | Sequence[Plan] | None = None,
    warm_start_fraction: float = 0.2,
    params: Mapping[str, Any] | SolverParams | None = None,
    warm_start_params: Mapping[str, Any] | SolverParams | None = None,
    callbacks: Callbacks | None = None,
) -> SolveResult:
    """Run ``solver`` on ``instance`` and return its priced, checked result.

    ``warm_start`` is a plan, a list of plans, or the name of another solver;
    a solver name runs that solver first for ``warm_start_fraction`` of the
    budget (with ``warm_start_params``) and hands its plan over, all within
    ``time_limit``. ``params`` are the solver's parameters (a mapping of
    ``--param`` strings or values, or its parameter dataclass); they and the
    other arguments are checked before any work starts.
    """
    threads = default_threads() if threads is None else threads
    SolveOptions(seed=seed, time_limit=time_limit, threads=threads, gap=gap)  # checks them
    spec = get_solver(solver)
    fn = spec.load()
    typed, given = spec.parse_params(params)
    ws_typed: SolverParams | None = None
    ws_given: dict[str, Any] = {}
    if isinstance(warm_start, str):
        if warm_start == solver:
            raise InputError("warm_start", warm_start, "a solver cannot warm-start itself")
        ws_spec = get_solver(warm_start)
        ws_spec.load()
        ws_typed, ws_given = ws_spec.parse_params(warm_start_params, where="warm_start_params")
    elif warm_start_params:
        raise InputError("warm_start_params", dict(warm_start_params) if isinstance(
            warm_start_params, Mapping) else warm_start_params,
            "warm-start parameters need a warm-start solver (not a plan)")
    instance = resolve_normalisers(instance)
    callbacks = callbacks or Callbacks()
    start = time.perf_counter()
    info: dict[str, Any] = {}

    starts: tuple[Plan, ...] = ()
    prefix: list[TraceRow] = []
    if isinstance(warm_start, str):
        if not 0 < warm_start_fraction < 1:
            raise InputError("warm_start_fraction", warm_start_fraction, "must lie in (0, 1)")
        ws = solve(
            instance,
            warm_start,
            seed=seed,
            time_limit=time_limit * warm_start_fraction,
            threads=threads,
            params=ws_typed,
            callbacks=None,
        )
        info["warm_start"] = {
            "source": warm_start,
            **({"params": ws_given} if ws_given else {}),
            "objective": ws.objective,
            "wall_s": round(ws.wall_s, 6),
        }
        if ws.plan is not None:
            starts = (ws.plan,)
        # The warm start's incumbents open the anytime curve (no bound is proven there).
        prefix = [TraceRow(r.seconds, r.incumbent, None) for r in ws.trace]
    elif isinstance(warm_start, Plan):
        starts = (warm_start,)
        info["warm_start"] = {"source": "plan"}
    elif warm_start is not None:
        starts = tuple(warm_start)
        info["warm_start"] = {"source": "plans", "count": len(starts)}
    if starts:
        evs = [evaluate(instance, p) for p in starts]
        info.setdefault("warm_start", {})["objective"] = min(
            (e.objective for e in evs if e.feasible), default=None
        )
        info["warm_start"]["feasible"] = [e.feasible for e in evs]

    remaining = time_limit - (time.perf_counter() - start)
    options = SolveOptions(
        seed=seed,
        time_limit=max(remaining, 1e-3),
        threads=threads,
        gap=gap,
        warm_start=starts,
        params=typed,
        callbacks=callbacks,
    )
    callbacks.on_start(solver, instance, options)
    outcome = fn(instance, options)
    wall = time.perf_counter() - start
    # Trace rows count from the start of this call, warm start included.
    offset = options.start - start
    outcome.trace = prefix + [
        TraceRow(r.seconds + offset, r.incumbent, r.bound) for r in outcome.trace
    ]
    result = finish(instance, spec.name, outcome, wall, seed, options, info, given)
    callbacks.on_end(result)
    return result


def finish(
    instance: Instance,
    solver: str,
    outcome: Outcome,
    wall_s: float,
    seed: int | None,
    options: SolveOptions | None = None,
    info: dict[str, Any] | None = None,
    given_params: Mapping[str, Any] | None = None,
) -> SolveResult:
    """Price ``outcome`` with the shared evaluator and check it; build the result.

    ``given_params`` are the solver parameters the caller set (canonical keys, typed
    values), recorded in the result; by default the mapping in ``options.params``.
    Without a plan, a bound that proves nothing (not positive, or not finite) is
    reported as null, and an ``infeasible`` result has no bound.
    """
    if outcome.status not in STATUSES:
        raise SolverError(f"{solver}: unknown status {outcome.status!r}")
    info = {**(info or {}), **outcome.info}
    if "warm_start" in info and "warm_start_accepted" in outcome.info:
        info["warm_start"]["accepted"] = outcome.info["warm_start_accepted"]
    o = instance.objective
    objective = t_iter = e_iter = None
    lower = outcome.lower_bound
    status = outcome.status
    plan = outcome.plan
    if plan is not None:
        ev = evaluate(instance, plan)
        if not ev.feasible:
            raise FormulationError(
                f"{solver} returned an infeasible plan ({plan}): "
                + "; ".join(v.message for v in ev.violations)
            )
        objective, t_iter, e_iter = ev.objective, ev.t_iter_ms, ev.e_iter_j
        if outcome.model_objective is not None:
            tol = outcome.model_tolerance * max(1.0, abs(objective))
            if abs(outcome.model_objective - objective) > tol:
                raise FormulationError(
                    f"{solver}: model objective {outcome.model_objective!r} differs from the "
                    f"evaluator's {objective!r} for plan {plan} (tolerance {tol:.3g})"
                )
        if status == "optimal" and lower is None:
            lower = objective
        if lower is not None and lower > objective * (1 + 1e-9) + 1e-12:
            raise FormulationError(
                f"{solver}: lower bound {lower!r} exceeds the objective {objective!r} of its "
                f"own plan {plan}; the bound is invalid"
            )
    elif status in ("optimal", "feasible"):
        raise SolverError(f"{solver}: status {status!r} but no plan")
    elif status == "infeasible" or (lower is not None and not 0 < lower < math.inf):
        lower = None  # every objective is positive: a zero bound proves nothing
    gap = None
    if objective is not None and lower is not None:
        gap = max(0.0, (objective - lower) / objective) if objective > 0 else 0.0
    trace = list(outcome.trace)
    if objective is not None and (not trace or trace[-1].incumbent != objective):
        trace.append(TraceRow(wall_s, objective, lower))
    params: dict[str, Any] = {}
    if options is not None:
        params = {
            "time_limit": options.time_limit,
            "threads": options.threads,
            "gap": options.gap,
        }
        if given_params is None and isinstance(options.params, Mapping):
            given_params = options.params
        params.update({k: v for k, v in (given_params or {}).items() if _jsonish(v)})
    return SolveResult(
        solver=solver,
        status=status,
        plan=plan,
        objective=objective,
        t_iter_ms=t_iter,
        e_iter_j=e_iter,
        lower_bound=lower,
        gap=gap,
        wall_s=wall_s,
        t_ref_ms=o.t_ref_ms,
        e_ref_j=o.e_ref_j,
        lam=o.lam,
        seed=seed,
        trace=trace,
        params=params,
        info=info,
        message=outcome.message,
        instance_name=instance.name,
        instance_hash=instance.fingerprint,
    )


def _jsonish(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool | list | tuple | dict)
