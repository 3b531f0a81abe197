"""What the two exact hybrid models share: the loop over micro-batch sizes and the Outcome.

Each model solves the restricted space (:data:`~formulations.hybrid.classes.RESTRICTED_SPACE`)
one *cell* at a time: a micro-batch size u and a stage count Q (:class:`USolve`);
:func:`run_restricted` runs the cells in the order of a quick valid bound, skips
those whose bound reaches the best plan, passes that plan's objective as a cutoff
to the others, and reports the
result honestly: status ``feasible`` (the restricted space does not cover the
whole hybrid space), no lower bound, and ``info["restricted"]`` with the bound
on the restricted space only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from formulations.hybrid.classes import (
    RESTRICTED_SPACE,
    Choice,
    NotClassStructured,
    Pool,
    choice_of_plan,
    class_pool,
)
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import SolverParams, param
from geoplan.solving.result import Outcome, TraceRow

__all__ = ["SolveCell", "USolve", "run_restricted"]


@dataclass
class USolve:
    """One model run: the plans with micro-batch size u and ``q`` stages (a *cell*).

    ``status``: ``optimal`` (proven for this cell), ``stopped`` (a limit), ``infeasible``
    (no plan of this cell in the space), ``cutoff`` (none better than the cutoff: the
    cell's bound proves it, or the model does). ``bound``: a valid lower bound on
    every plan of this cell in the space (inf: none)."""

    u: int
    q: int
    status: str
    choice: Choice | None
    model_objective: float | None
    bound: float
    seconds: float
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RestrictedParams(SolverParams):
    """Parameters both restricted-space models take."""

    pipeline_share: float = param(
        0.15, "budget share of a pipeline-space search first, whose plan is returned when "
        "it beats the restricted space's (0: the restricted space only)",
        at_least=0.0, below=1.0)


#: solve_cell(pool, u, q, cutoff, seconds, start, options) -> USolve
SolveCell = Callable[[Pool, int, int, float | None, float, Choice | None, SolveOptions], USolve]


def run_restricted(instance: Instance, options: SolveOptions, solve_cell: SolveCell, name: str,
                   tolerance: Callable[[USolve], float], pipeline_share: float = 0.0
                   ) -> Outcome:
    """Solve every cell (u, Q), cheapest quick bound first, and build the Outcome.

    ``pipeline_share`` > 0: a pipeline-space plan is searched first for that share of the
    budget (:func:`heuristics.hybrid.memetic.pipeline_plan`) and returned when it beats
    the restricted space's best, so that a ``--space hybrid`` result is never worse than
    the pipeline space's plan (the restricted space need not contain it)."""
    pipe = None
    if pipeline_share > 0:
        from heuristics.hybrid.memetic import pipeline_plan

        plan, pinfo, _, _ = pipeline_plan(instance, options.seed,
                                          pipeline_share * options.remaining(),
                                          stop=options.stop)
        pipe = (plan, pinfo)
    out = _run_restricted(instance, options, solve_cell, name, tolerance)
    if pipe is None:
        return out
    plan, pinfo = pipe
    out.info["pipeline_seed"] = pinfo
    value = pinfo.get("objective")
    if plan is None or value is None:
        return out
    mine = out.info.get("restricted", {}).get("objective")
    if mine is not None and mine <= value * (1 + 1e-12):
        return out
    # The pipeline plan is better (or the restricted space gave none): return it, priced by
    # the evaluator (no model value), the restricted result kept in info.
    out.trace.append(TraceRow(options.elapsed(), value, None))
    note = (f"the pipeline-space plan ({pinfo['solver']}, {value:.6g}) beats the restricted "
            f"space's best ({'none' if mine is None else f'{mine:.6g}'}) and is returned")
    return Outcome(plan, "feasible", lower_bound=None, trace=out.trace, info=out.info,
                   message=f"{name}: {note}; {out.message}" if out.message else note)


def _run_restricted(instance: Instance, options: SolveOptions, solve_cell: SolveCell,
                    name: str, tolerance: Callable[[USolve], float]) -> Outcome:
    try:
        pool = class_pool(instance)
    except NotClassStructured as exc:
        return Outcome(None, "no_solution", info={"restricted": {
            "space": RESTRICTED_SPACE, "refused": str(exc)}},
            message=f"{name}: the pool is not class-structured: {exc}")
    info: dict[str, Any] = {"classes": pool.summary(), "zero": pool.zero}
    starts: dict[tuple[int, int], Choice] = {}
    notes = []
    for k, plan in enumerate(options.hybrid_starts):
        got = choice_of_plan(pool, plan)
        if isinstance(got, str):
            notes.append(f"start {k} is outside the restricted space: {got}")
            continue
        key = (got.u, len(got.stages))
        best = starts.get(key)
        if best is None or pool.price(got)[2] < pool.price(best)[2]:
            starts[key] = got
    if options.hybrid_starts:
        info["warm_start_notes"] = notes
        info["warm_start_accepted"] = bool(starts)
        if not starts:
            info["warm_start_reason"] = "; ".join(notes)
    incumbent: tuple[float, Choice] | None = None
    for ch in starts.values():
        v = pool.price(ch)[2]
        if incumbent is None or v < incumbent[0]:
            incumbent = (v, ch)
    trace: list[TraceRow] = []
    if incumbent is not None:
        trace.append(TraceRow(options.elapsed(), incumbent[0], None))
        options.callbacks.on_improvement(options.elapsed(), incumbent[0], None)
    # Few stages first: long pipelines pay a message per boundary and a longer fill, so
    # the best plans have few stages, and their objective then cuts the long cells off.
    cells = sorted(((float(pool.quick_bound(u, q)), u, q) for u in pool.micro_batches
                    for q in range(1, pool.q_max + 1)), key=lambda c: (c[2], c[0], c[1]))
    cells = [c for c in cells if math.isfinite(c[0])]
    runs: list[USolve] = []

    def attempt(lb: float, u: int, q: int, share: int) -> USolve:
        nonlocal incumbent
        if incumbent is not None and lb >= incumbent[0]:
            return USolve(u, q, "cutoff", None, None, lb, 0.0, {"by": "quick bound"})
        left = options.remaining()
        if left <= 0 or options.stopped():
            return USolve(u, q, "stopped", None, None, lb, 0.0, {"skipped": True})
        cutoff = None if incumbent is None else incumbent[0]
        t0 = time.perf_counter()
        r = solve_cell(pool, u, q, cutoff, left / max(1, share), starts.get((u, q)), options)
        r.seconds = time.perf_counter() - t0
        r.bound = max(r.bound, lb)
        if r.choice is not None:
            v = pool.price(r.choice)[2]
            if incumbent is None or v < incumbent[0]:
                incumbent = (v, r.choice)
                trace.append(TraceRow(options.elapsed(), v, None))
                options.callbacks.on_improvement(options.elapsed(), v, None)
        return r

    def open_cells(rest: list[tuple[float, int, int]]) -> int:
        return sum(1 for c in rest if incumbent is None or c[0] < incumbent[0])

    for k, (lb, u, q) in enumerate(cells):
        runs.append(attempt(lb, u, q, open_cells(cells[k:])))
    # Cells stopped by their share of the budget get what is left, in turn.
    again = [k for k, r in enumerate(runs) if r.status == "stopped"]
    for j, k in enumerate(again):
        if options.remaining() <= 0 or options.stopped():
            break
        lb, u, q = cells[k]
        r = attempt(lb, u, q, len(again) - j)
        r.info["second_pass"] = True
        if r.status != "stopped" or r.bound > runs[k].bound:
            runs[k] = r
    info["cells"] = [
        {"u": r.u, "q": r.q, "status": r.status, "seconds": round(r.seconds, 4),
         "objective": r.model_objective,
         "bound": r.bound if math.isfinite(r.bound) else None, **r.info} for r in runs]
    info["cells_solved"] = sum(1 for r in runs if "by" not in r.info)
    proven = all(r.status in ("optimal", "infeasible", "cutoff") for r in runs)
    bound = min((r.bound for r in runs), default=math.inf)
    if incumbent is not None:
        bound = min(bound, incumbent[0])
    restricted: dict[str, Any] = {
        "space": RESTRICTED_SPACE,
        "bound": bound if math.isfinite(bound) else None,
        "optimal_in_restricted_space": proven,
    }
    info["restricted"] = restricted
    if incumbent is None:
        what = "holds no plan" if proven else "gave no plan within the budget"
        return Outcome(None, "no_solution", trace=trace, info=info,
                       message=f"{name}: the restricted space ({RESTRICTED_SPACE}) {what}")
    value, choice = incumbent
    plan = pool.decode(choice)
    # The model's own value of its plan (a warm start nothing beat: the tables' price).
    owner = next((r for r in runs if r.choice == choice and r.model_objective is not None),
                 None)
    model_value, tol = value, 1e-9
    if owner is not None and owner.model_objective is not None:
        model_value, tol = owner.model_objective, tolerance(owner)
    restricted["objective"] = value
    return Outcome(
        plan, "feasible", lower_bound=None, model_objective=model_value, model_tolerance=tol,
        trace=trace, info=info,
        message=(f"{name}: {'optimal' if proven else 'best found'} in the restricted space "
                 f"only (restricted bound {bound:.6g}); no bound on the whole hybrid space"))
