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

import functools
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from geoplan.cost.hybrid_evaluate import evaluate_any
from geoplan.cost.normalise import resolve_normalisers
from geoplan.errors import FormulationError, InputError, SolverError
from geoplan.model.hybrid import HybridPlan, as_hybrid
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.params import SolverParams
from geoplan.solving.registry import (
    _REGISTRY as _REGISTRY,  # re-exported: tests add a solver for one test (monkeypatch)
)
from geoplan.solving.registry import (
    Solver,
    SolverSpec,
    SolverUnavailable,
    available_solvers,
    get_solver,
    register,
    solver_for_space,
    solver_names,
)
from geoplan.solving.result import STATUSES, Outcome, SolveResult, TraceRow
from geoplan.solving.stop import StopFlag, current_stop, stop_scope, test_stop_after

__all__ = [
    "Callbacks",
    "SolveOptions",
    "SolverSpec",
    "SolverUnavailable",
    "StopFlag",
    "available_solvers",
    "get_solver",
    "record_bound",
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

    def on_plan(self, seconds: float, plan: Plan, objective: float) -> None:
        """Called with each new best plan by solvers that have it at hand (the memetic
        algorithm), for a caller that hands plans on (the parallel portfolio)."""

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
    ``stop`` (:mod:`geoplan.solving.stop`): once set (SIGINT, SIGTERM or a
    caller), :attr:`deadline` is the moment it was set and :meth:`remaining` is
    0, so a solver's budget checks end it as at a time-out. ``hybrid_starts``:
    the warm starts of a hybrid-space solver, every one as a
    :class:`~geoplan.model.hybrid.HybridPlan` (pipeline plans converted).
    ``deferred_start``: a warm-start solver not yet run, for a solver whose spec
    ``defers_warm_start``; it runs when the solver calls :meth:`deferred_plans`.
    """

    seed: int
    time_limit: float = 60.0
    threads: int = 1
    gap: float = 0.0
    warm_start: tuple[Plan, ...] = ()
    hybrid_starts: tuple[HybridPlan, ...] = ()
    params: Mapping[str, Any] | SolverParams = field(default_factory=dict)
    callbacks: Callbacks = field(default_factory=Callbacks)
    start: float = field(default_factory=time.perf_counter)
    stop: StopFlag = field(default_factory=current_stop)
    deferred_start: DeferredStart | None = None

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
        """``time.perf_counter()`` value at which the budget runs out (or ran: a stop)."""
        at = self.stop.at
        end = self.start + self.time_limit
        return end if at is None else min(end, at)

    def stopped(self) -> bool:
        """Whether a stop (an interrupt) was requested."""
        return self.stop.is_set()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.perf_counter())

    def deferred_plans(self) -> tuple[Plan, ...]:
        """The deferred warm start's plans, running it now (once); () without one.

        A solver calls this once its own start plans and first bound have not proven
        optimality, so that a proof that needs no warm start is not delayed by one.
        """
        return () if self.deferred_start is None else self.deferred_start.plans(self)


@dataclass
class DeferredStart:
    """A warm-start solver run when the solver asks for it, at most once.

    ``run`` takes the seconds it may use: ``fraction`` of the solver's budget, at most
    what is left. ``started`` is its ``time.perf_counter()`` start, ``result`` its result.
    """

    run: Callable[[float], SolveResult]
    fraction: float
    source: str = "deferred"
    started: float | None = None
    result: SolveResult | None = None

    def plans(self, options: SolveOptions) -> tuple[Plan, ...]:
        if self.result is None:
            self.started = time.perf_counter()
            share = min(self.fraction * options.time_limit, options.remaining())
            self.result = self.run(max(share, 1e-3))
        plan = self.result.plan
        return (plan,) if isinstance(plan, Plan) else ()


def record_bound(options: SolveOptions, trace: list[TraceRow], incumbent: float | None,
                 bound: float) -> None:
    """A bound proven now enters the trace and the callbacks (capped at the incumbent),
    so that the gap at that moment is certified, not only the final one."""
    shown = bound if incumbent is None else min(bound, incumbent)
    trace.append(TraceRow(options.elapsed(), incumbent, shown))
    options.callbacks.on_improvement(options.elapsed(), incumbent, shown)


def default_threads() -> int:
    """Threads used when none are given: the machine's cores, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


class _SelfSignal(Callbacks):
    """The test hook of :mod:`geoplan.solving.stop`: signal this process after K improvements."""

    def __init__(self, inner: Callbacks, k: int, signum: int) -> None:
        self.inner, self.k, self.signum, self.seen = inner, k, signum, 0

    def on_start(self, solver: str, instance: Instance, options: SolveOptions) -> None:
        self.inner.on_start(solver, instance, options)

    def on_improvement(self, seconds: float, incumbent: float | None, bound: float | None) -> None:
        self.inner.on_improvement(seconds, incumbent, bound)
        if incumbent is not None:
            self.seen += 1
            if self.seen == self.k:
                os.kill(os.getpid(), self.signum)

    def on_progress(self, info: Mapping[str, Any]) -> None:
        self.inner.on_progress(info)

    def on_plan(self, seconds: float, plan: Plan, objective: float) -> None:
        self.inner.on_plan(seconds, plan, objective)

    def on_end(self, result: SolveResult) -> None:
        self.inner.on_end(result)


_nesting = threading.local()


def _in_stop_scope(fn: Callable[..., SolveResult]) -> Callable[..., SolveResult]:
    """Run :func:`solve` in a :func:`~geoplan.solving.stop.stop_scope` (SIGINT/SIGTERM stop it)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> SolveResult:
        depth = getattr(_nesting, "depth", 0)
        _nesting.depth = depth + 1
        try:
            with stop_scope(kwargs.get("stop")):
                hook = test_stop_after() if depth == 0 else None  # not in warm-ups, phases
                if hook is not None:
                    kwargs["callbacks"] = _SelfSignal(kwargs.get("callbacks") or Callbacks(),
                                                      *hook)
                return fn(*args, **kwargs)
        finally:
            _nesting.depth = depth

    return wrapper


@_in_stop_scope
def solve(
    instance: Instance,
    solver: str,
    *,
    seed: int,
    time_limit: float = 60.0,
    threads: int | None = None,
    gap: float = 0.0,
    warm_start: str | Plan | HybridPlan | Sequence[Plan | HybridPlan] | DeferredStart | None = None,
    warm_start_fraction: float = 0.2,
    params: Mapping[str, Any] | SolverParams | None = None,
    warm_start_params: Mapping[str, Any] | SolverParams | None = None,
    callbacks: Callbacks | None = None,
    warm_up: bool = True,
    stop: StopFlag | None = None,
    space: str = "pipeline",
) -> SolveResult:
    """Run ``solver`` on ``instance`` and return its priced, checked result.

    ``stop``: a :class:`~geoplan.solving.stop.StopFlag` the caller may set to end
    the solve early; SIGINT and SIGTERM set it too (in the main thread). Either
    way the solver returns its best plan and bound as at a time-out
    (``info["stopped"]`` says why); a stop during the warm-up gives ``no_solution``.

    ``warm_up``: first compile the solver's numba kernels on a tiny instance
    (:mod:`geoplan.solving.warmup`, once per process); those seconds are
    reported as ``info["warmup_s"]`` and not charged to ``time_limit``.

    ``space``: ``"hybrid"`` runs the hybrid-space variant of ``solver``
    (``hybrid-NAME``, hybrid-model.md) unless ``solver`` is a hybrid solver itself.

    ``warm_start`` is a plan, a list of plans, or the name of another solver;
    a solver name runs that solver for ``warm_start_fraction`` of the budget (with
    ``warm_start_params``, over its spec's ``as_warm_start`` defaults) and hands
    its plan over, all within ``time_limit``: first, or, for a solver that
    ``defers_warm_start``, when that solver's own quick proof attempt has failed
    (``info["warm_start"]["deferred"]``; not at all if it never asks). A
    :class:`DeferredStart` is such a source made by the caller (the parallel
    portfolio's: the plan a memetic run in another process has found by then).
    ``params`` are the solver's parameters (a mapping of ``--param`` strings or
    values, or its parameter dataclass); they and the other arguments are
    checked before any work starts.
    """
    threads = default_threads() if threads is None else threads
    SolveOptions(seed=seed, time_limit=time_limit, threads=threads, gap=gap)  # checks them
    spec = solver_for_space(solver, space)
    solver = spec.name
    hybrid = spec.space == "hybrid"
    fn = spec.load()
    typed, given = spec.parse_params(params)
    ws_typed: SolverParams | None = None
    ws_given: dict[str, Any] = {}
    if isinstance(warm_start, str):
        ws_spec = solver_for_space(warm_start, spec.space)
        warm_start = ws_spec.name
        if warm_start == solver:
            raise InputError("warm_start", warm_start, "a solver cannot warm-start itself")
        ws_spec.load()
        ws_raw: Mapping[str, Any] | SolverParams | None = warm_start_params
        if ws_spec.as_warm_start and not isinstance(ws_raw, SolverParams):
            ws_raw = {**dict(ws_spec.as_warm_start), **(ws_raw or {})}
        ws_typed, ws_given = ws_spec.parse_params(ws_raw, where="warm_start_params")
    elif warm_start_params:
        raise InputError("warm_start_params", dict(warm_start_params) if isinstance(
            warm_start_params, Mapping) else warm_start_params,
            "warm-start parameters need a warm-start solver (not a plan)")
    info: dict[str, Any] = {}
    if warm_up:
        from geoplan.solving.warmup import warm_up as _warm_up

        spent = _warm_up(spec.name) + sum(_warm_up(other) for other in typed.runs_solvers())
        if isinstance(warm_start, str):
            spent += _warm_up(warm_start)
        info["warmup_s"] = round(spent, 6)
    start = time.perf_counter()  # the budget counts from here: normalisers included
    instance = resolve_normalisers(instance)
    callbacks = callbacks or Callbacks()
    flag = current_stop()
    if flag.is_set():  # interrupted before the budget started (warm-up, loading): no plan
        early = SolveOptions(seed=seed, time_limit=time_limit, threads=threads, gap=gap,
                             params=typed, callbacks=callbacks)
        outcome = Outcome(None, "no_solution", info={"stopped": flag.reason},
                          message=f"{flag.reason} before {spec.name} started")
        result = finish(instance, spec.name, outcome, time.perf_counter() - start, seed, early,
                        info, given)
        callbacks.on_end(result)
        return result

    starts: tuple[Plan | HybridPlan, ...] = ()
    prefix: list[TraceRow] = []
    deferred: DeferredStart | None = None
    if isinstance(warm_start, str) and not 0 < warm_start_fraction < 1:
        raise InputError("warm_start_fraction", warm_start_fraction, "must lie in (0, 1)")
    if isinstance(warm_start, DeferredStart):
        if not spec.defers_warm_start or hybrid:
            raise InputError("warm_start", warm_start.source,
                             f"{spec.name} does not defer its warm start")
        deferred = warm_start
        info["warm_start"] = {"source": warm_start.source, "deferred": True}
    elif isinstance(warm_start, str) and spec.defers_warm_start and not hybrid:
        source = warm_start

        def run_source(limit: float) -> SolveResult:
            return solve(instance, source, seed=seed, time_limit=limit, threads=threads,
                         params=ws_typed, callbacks=None, warm_up=False)

        deferred = DeferredStart(run_source, warm_start_fraction)
        info["warm_start"] = {"source": source, **({"params": ws_given} if ws_given else {}),
                              "deferred": True}
    elif isinstance(warm_start, str):
        ws = solve(
            instance,
            warm_start,
            seed=seed,
            time_limit=time_limit * warm_start_fraction,
            threads=threads,
            params=ws_typed,
            callbacks=None,
            warm_up=False,
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
    elif isinstance(warm_start, Plan | HybridPlan):
        starts = (warm_start,)
        info["warm_start"] = {"source": "plan"}
    elif warm_start is not None:
        starts = tuple(warm_start)
        info["warm_start"] = {"source": "plans", "count": len(starts)}
    best_start = _check_warm_starts(instance, spec, starts, info) \
        if warm_start is not None and deferred is None else None

    remaining = time_limit - (time.perf_counter() - start)
    options = SolveOptions(
        seed=seed,
        time_limit=max(remaining, 1e-3),
        threads=threads,
        gap=gap,
        warm_start=_pipeline_starts(starts, info) if not hybrid else (),
        hybrid_starts=tuple(as_hybrid(p) for p in starts) if hybrid else (),
        params=typed,
        callbacks=callbacks,
        deferred_start=deferred,
    )
    callbacks.on_start(solver, instance, options)
    outcome = fn(instance, options)
    wall = time.perf_counter() - start
    if options.stopped():  # an interrupt ends a solve as a time-out does; say so
        outcome.info.setdefault("stopped", options.stop.reason)
        if outcome.status != "optimal":
            outcome.message = f"{options.stop.reason}" + (
                f"; {outcome.message}" if outcome.message else "")
    # Trace rows count from the start of this call, warm start included.
    offset = options.start - start
    outcome.trace = prefix + [
        TraceRow(r.seconds + offset, r.incumbent, r.bound) for r in outcome.trace
    ]
    opening = len(prefix) if prefix else None
    if deferred is not None:
        best_start, opening = _deferred_outcome(instance, spec, deferred, start, outcome, info)
    if warm_start is not None:
        outcome = _settle_warm_start(instance, spec, outcome, best_start, info, opening)
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
        # solve() has set the common meaning already (feasible and used); direct calls
        # get the solver's own flag.
        info["warm_start"].setdefault("accepted", outcome.info["warm_start_accepted"])
    o = instance.objective
    objective = t_iter = e_iter = None
    lower = outcome.lower_bound
    status = outcome.status
    plan = outcome.plan
    if plan is not None:
        ev = evaluate_any(instance, plan)
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


# --------------------------------------------------------------------------- warm starts
#
# A warm start is never lost: solve() prices the warm starts before the solver runs,
# says in info["warm_start"]["note"] (one line) what cannot be used and why, sets
# info["warm_start"]["accepted"] to the same meaning for every solver (a warm-start plan
# was feasible and the solver used it), and returns the best feasible warm-start plan
# when the solver's own plan is worse or missing ("returned": true).

_WS_TOL = 1e-9  # relative: objectives this close are equal, bounds this close prove


def _note(ws: dict[str, Any], text: str) -> None:
    ws["note"] = f"{ws['note']}; {text}" if ws.get("note") else text


def _pipeline_starts(starts: tuple[Plan | HybridPlan, ...], info: dict[str, Any]
                     ) -> tuple[Plan, ...]:
    """The warm starts a pipeline-space solver can take (hybrid plans in the GeoTrain form
    converted); the others are noted and left to the final comparison."""
    out: list[Plan] = []
    for p in starts:
        if isinstance(p, Plan):
            out.append(p)
        elif p.is_pipeline:
            out.append(p.to_pipeline())
    if len(out) < len(starts):
        _note(info.setdefault("warm_start", {}), "a hybrid plan cannot start a pipeline-space "
              "solver: it is only compared with the solver's plan")
    return tuple(out)


def _check_warm_starts(instance: Instance, spec: Solver, starts: tuple[Plan | HybridPlan, ...],
                       info: dict[str, Any]) -> tuple[Plan | HybridPlan, float] | None:
    """Price the warm starts, note the unusable ones; the best feasible (plan, objective)."""
    ws = info.setdefault("warm_start", {})
    best: tuple[Plan | HybridPlan, float] | None = None
    if not starts:
        ws.setdefault("feasible", [])
        _note(ws, f"the warm-start solver {ws.get('source')} found no plan")
        return None
    evs = [evaluate_any(instance, p) for p in starts]
    ws["objective"] = min((e.objective for e in evs if e.feasible), default=None)
    ws["feasible"] = [e.feasible for e in evs]
    bad = [k for k, e in enumerate(evs) if not e.feasible]
    if bad:
        first = evs[bad[0]]
        why = first.violations[0].message if first.violations else "infeasible"
        what = ("the warm-start plan is" if len(starts) == 1 else
                f"{len(bad)} of {len(starts)} warm-start plans are")
        _note(ws, f"{what} infeasible ({why}) and not accepted")
    for p, e in zip(starts, evs, strict=True):
        if e.feasible and (best is None or e.objective < best[1]):
            best = (p, e.objective)
    if not spec.warm_start:
        _note(ws, f"{spec.name} cannot use a warm start: its plan is compared with the "
                  "warm start's and the better one returned")
    return best


def _deferred_outcome(instance: Instance, spec: Solver, deferred: DeferredStart, start: float,
                      outcome: Outcome, info: dict[str, Any]
                      ) -> tuple[tuple[Plan | HybridPlan, float] | None, int]:
    """Record what a deferred warm start did; its best plan and the trace rows before it.

    Its incumbents join the trace at the moment it ran (``outcome.trace`` counts from
    ``start``); the rows up to them are the ones its plan cannot have improved.
    """
    ws = info["warm_start"]
    res = deferred.result
    if res is None or deferred.started is None:
        _note(ws, f"not run: {spec.name} settled the instance before it asked for a warm start")
        ws["ran"] = False
        return None, len(outcome.trace)
    at = deferred.started - start
    ws.update(ran=True, objective=res.objective, wall_s=round(res.wall_s, 6),
              started_s=round(at, 6))
    rows = [TraceRow(at + r.seconds, r.incumbent, None) for r in res.trace]
    before = [r for r in outcome.trace if r.seconds <= at]
    outcome.trace = before + rows + outcome.trace[len(before):]
    best = _check_warm_starts(instance, spec, () if res.plan is None else (res.plan,), info)
    return best, len(before) + len(rows)


def _settle_warm_start(instance: Instance, spec: Solver, outcome: Outcome,
                       best: tuple[Plan | HybridPlan, float] | None, info: dict[str, Any],
                       opening: int | None) -> Outcome:
    """Set ``accepted``; return the warm-start plan if the solver's is worse or missing.

    ``opening``: how many leading trace rows came before the warm start's plan was known
    (the warm-start solver's own rows included; None: the warm start was a plan, whose
    row opens the trace at 0 s if it is returned).
    """
    ws = info.setdefault("warm_start", {})
    used = bool(spec.warm_start and outcome.info.get("warm_start_accepted"))
    ws["accepted"] = best is not None and used
    if best is not None and spec.warm_start and not used:
        reason = outcome.info.get("warm_start_reason")
        _note(ws, f"{spec.name} did not use the warm start" + (f" ({reason})" if reason else ""))
    if best is None:
        return outcome
    plan, value = best
    mine: float | None = None
    if outcome.plan is not None:
        ev = evaluate_any(instance, outcome.plan)
        if not ev.feasible:
            return outcome  # finish() reports the solver's infeasible plan as the bug it is
        mine = ev.objective
        if mine <= value + _WS_TOL * max(1.0, abs(value)):
            return outcome
    # The solver's plan is worse, or it has none: return the warm start's.
    lower = None if outcome.status == "infeasible" else outcome.lower_bound
    if lower is None and outcome.status == "optimal":
        lower = mine
    dropped = lower is not None and lower > value + _WS_TOL * max(1.0, abs(value))
    if dropped:
        lower = None  # a "bound" above a feasible plan proves nothing about it
    proven = lower is not None and lower >= value * (1 - _WS_TOL)
    head = 0 if opening is None else opening
    rows = [] if opening is not None else [TraceRow(0.0, value, None)]
    rows += outcome.trace[:head]
    for r in outcome.trace[head:]:
        row = TraceRow(r.seconds, value if r.incumbent is None else min(r.incumbent, value),
                       None if dropped else r.bound)
        if not rows or (rows[-1].incumbent, rows[-1].bound) != (row.incumbent, row.bound):
            rows.append(row)  # rows the warm start makes identical are left out
    found = ("found no plan" if mine is None else f"found {mine:.6g}")
    if outcome.status == "infeasible":
        found = "reported the instance infeasible"
    note = (f"{spec.name} {found}, not better than the warm start ({value:.6g}): "
            "the warm-start plan is returned")
    if dropped:
        note += " (the solver's bound exceeds it and is dropped)"
    _note(ws, note)
    ws["returned"] = True
    ws["solver_objective"] = mine
    ws["solver_status"] = outcome.status
    return Outcome(plan, "optimal" if proven else "feasible", lower_bound=lower, trace=rows,
                   info=outcome.info,
                   message=note if not outcome.message else f"{outcome.message}; {note}")
