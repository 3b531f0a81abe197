"""The ``sliced`` solver: the MILP solved per bottleneck slice, slices skipped by the bound.

1. Start plans: the MILP's start heuristic (and any warm start) give an incumbent.
2. :func:`geoplan.cost.parametric.parametric_bound` with that incumbent leaves
   the *open boxes* (stage count x bottleneck ranges) that can still hold a
   better plan; every other plan is proven no better. The sites its least boxes'
   minimisers use are solved on their own (:mod:`formulations.site_subsets`) for a
   better incumbent.
3. The open boxes are grouped into slices (consecutive in the bottleneck). A
   slice's MILP is the full model of :mod:`formulations.milp` with the
   bottleneck restricted to the slice (so fewer layers per GPU and fewer arcs),
   the stage count restricted, the parametric floor as a cut
   (``t >= S_floor + (M - 1) tmax`` at lambda = 1, ``objective >= bound``
   otherwise) and the incumbent as a cutoff (``objective <= incumbent``).
   After branching on sites (:mod:`geoplan.cost.site_branching`), the plans still
   open are in a few *classes* (:class:`~geoplan.cost.parametric.PlanClasses`: the
   sites they may use and must use, and how many inter-site sends they make); each
   class is a set of slices with those as rows (:func:`class_slices`). A class of
   plans stepping back to a visited site is one slice over the whole bottleneck
   range: its many inter-site sends make the MILP's LP strong (at metro N=64 L=48
   lambda 1, instance seed 179 on its six best sites, the plans stepping back three
   times or more are closed in 12 s, where the MILP on all the plans is 2.4 % short
   after 60 s), while branching does well on the rest. A path node left open (when only
   a few are) is a class of its own, whose model keeps only its order's inter-site arcs: at
   metro N=32 L=32 lambda 0.5 (instance seed 269) branching left two such nodes of four
   sites 2e-5 below the best plan, which the MILP on all the plans did not close in 120
   s; with their orders as arcs their slices closed in 31 s.
4. Slices run least bound first, in this process or in worker processes
   (``workers``) or on a Dask cluster (``dask=ADDRESS``); a slice proven
   (optimal, or infeasible under the cutoff) is closed.

Why it is exact: every plan better than the incumbent lies in an open box and in an
open class, each box lies inside the ranges of one of its class's slices, and in it
the floor cut holds (the box's bounds) and the dominance rows of the MILP keep a
no-worse plan (which lies in some open box and class too, hence in some slice; a
single slice's bound alone may not hold for a plan that dominance moves to another
class, the least over the slices does). The bound reported is the least of
the open slices' bounds (HiGHS's dual bound or the boxes' bound) and the
incumbent.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from formulations import site_subsets
from formulations.milp.data import MilpData, prepare
from formulations.milp.model import build_model
from formulations.milp.slices import (
    Slice,
    add_slice_rows,
    class_slices,
    in_slice,
    make_slices,
    slice_data,
)
from formulations.milp.start import best_plan, deferred_start, heuristic_start, search_from
from formulations.milp.symmetry import canonical_plan
from formulations.milp.tolerances import HIGHS_TOLERANCES, MODEL_TOLERANCE, below_tolerance
from formulations.milp.values import read_plan, start_values
from formulations.site_subsets import SiteSearchParams
from geoplan.cost import evaluate
from geoplan.cost.parametric import DEFAULT_SHARE, instance_bound, proves
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions, record_bound
from geoplan.solving.params import param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, Status, TraceRow

__all__ = ["SPEC", "Slice", "SlicedParams", "class_slices", "make_slices", "slice_data", "solve",
           "solve_slice"]


@dataclass(frozen=True)
class SlicedParams(SiteSearchParams):
    """Parameters of ``sliced`` (``--param KEY=VALUE``)."""

    LABEL: ClassVar[str] = "sliced"

    slices: int = param(6, "how many bottleneck slices the open boxes are grouped into",
                        at_least=1)
    workers: int = param(1, "worker processes solving slices at once (1: in this process)",
                         at_least=1)
    dask: str | None = param(None, "a Dask scheduler address: slices run on its workers")
    bound_share: float = param(DEFAULT_SHARE,
                               "at most this budget share for the parametric bound",
                               at_least=0.0, at_most=1.0)
    search_share: float = param(
        0.1, "share of the budget left for the sequence search (heuristics.sequence_ils) from "
        "the best plan once the bound and site branching have proven nothing", at_least=0.0,
        at_most=1.0)
    heuristic_share: float = param(0.05, "budget share of the start heuristic (at least 1 s, "
                                   "at most a quarter)", at_least=0.0, at_most=1.0)


@dataclass(frozen=True)
class SliceResult:
    """What one slice's MILP proved: ``closed`` (no better plan left in it), its bound."""

    closed: bool
    bound: float
    plan: dict[str, Any] | None
    objective: float | None
    seconds: float
    nodes: int
    reason: str
    #: When HiGHS was not started (reason ``not_started``): the share the slice would
    #: have needed, its model's building plus HiGHS's uninterruptible root estimate.
    needed: float = 0.0


def solve_slice(instance: Instance, sl: Slice, incumbent: dict[str, Any] | None,
                cutoff: float | None, time_limit: float, seed: int, threads: int = 1,
                until: float | None = None, data: MilpData | None = None) -> SliceResult:
    """Solve one slice's MILP within ``time_limit`` s and before the epoch time ``until``
    (``time.time()``: comparable across processes and hosts; a queued task may start
    late). ``data``: ``prepare(instance, cutoff)`` when the caller has it (it costs
    O(N^2) and is the same for every slice). Picklable in and out, for worker
    processes and Dask."""
    from formulations.highs_tools import HighsSession

    t0 = time.perf_counter()
    if until is not None:
        time_limit = min(time_limit, until - time.time())
        if time_limit <= 0.05:
            return SliceResult(False, sl.bound, None, None, 0.0, 0, "not started: no time left")
    restricted = slice_data(prepare(instance, cutoff) if data is None else data, sl)
    if restricted is None:
        return SliceResult(True, math.inf, None, None, time.perf_counter() - t0, 0, "empty")
    data = restricted
    m = build_model(instance, data=data, symmetry=True, cuts=True)
    add_slice_rows(m, instance, data, sl, cutoff)
    session = HighsSession(m)
    scale = max(1.0, abs(cutoff)) if cutoff is not None and math.isfinite(cutoff) else 1.0
    session.set_options(time_limit=max(time_limit - (time.perf_counter() - t0), 1e-3),
                        rel_gap=1e-9, abs_gap=1e-9 * scale, threads=threads, seed=seed,
                        extra=dict(HIGHS_TOLERANCES))
    if incumbent is not None:
        plan = canonical_plan(data, Plan.from_dict(incumbent))
        if in_slice(instance, plan, sl):
            vals = start_values(m, plan)
            if vals is not None:
                session.set_start(vals)
    run = session.run(deadline=t0 + time_limit)
    seconds = time.perf_counter() - t0
    if run.reason == "not_started":
        return SliceResult(False, sl.bound, None, None, seconds, 0, run.reason,
                           seconds + session.root_wait())
    lower = below_tolerance(run.dual_bound) if run.dual_bound is not None else -math.inf
    if run.status == "infeasible":
        # No plan of the slice beats the cutoff (up to HiGHS's feasibility tolerance).
        cut = math.inf if cutoff is None else cutoff * (1 - MODEL_TOLERANCE)
        return SliceResult(True, cut, None, None, seconds, run.nodes, "closed by the cutoff")
    if run.values is not None:
        session.load(run.values)
        found = read_plan(m)
        ev = evaluate(instance, found)
        closed = run.status == "optimal"
        bound = ev.objective * (1 - MODEL_TOLERANCE) if closed else max(lower, sl.bound)
        return SliceResult(closed, bound, found.to_dict(), float(ev.objective), seconds,
                           run.nodes, run.reason)
    return SliceResult(False, max(lower, sl.bound), None, None, seconds, run.nodes, run.reason)


def _submit_all(slices: list[Slice], instance: Instance, inc: dict[str, Any] | None,
                cutoff: float | None, deadline: float, seed: int,
                params: SlicedParams) -> list[SliceResult]:
    data = prepare(instance, cutoff)
    left = max(deadline - time.perf_counter(), 1e-3)
    until = time.time() + left
    # Equal shares of the workers' time; a task that starts late still ends by `until`.
    share = left * (1 if params.dask else params.workers) / max(len(slices), 1)
    share = max(share, min(left, 1.0))
    if params.dask:
        from distributed import Client

        with Client(params.dask) as client:
            futs = [client.submit(solve_slice, instance, sl, inc, cutoff, left, seed + k, 1,
                                  until, data, pure=False) for k, sl in enumerate(slices)]
            return list(client.gather(futs))
    # Workers come from a fork server, not forks of this process: a fork inherits
    # HiGHS's global thread pool from any earlier run here, and resetting it in the
    # child then fails ("Invalid argument").
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=params.workers, mp_context=ctx) as pool:
        fs: list[Future[SliceResult]] = [
            pool.submit(solve_slice, instance, sl, inc, cutoff, share, seed + k, 1, until, data)
            for k, sl in enumerate(slices)]
        return [f.result() for f in fs]


def _sequential(instance: Instance, slices: list[Slice], best: tuple[Plan, float] | None,
                options: SolveOptions, trace: list[TraceRow], info: dict[str, Any],
                ) -> list[tuple[Slice, SliceResult | None]]:
    """Rounds over the open slices, least bound first, each taking an equal share of
    what is left (so quickly closed slices leave more to the next); a slice left open
    is solved again in another round while a quarter of the budget is left, or while
    its share would be at least twice the time it had."""
    state: dict[int, SliceResult | None] = dict.fromkeys(range(len(slices)))
    inc_obj = math.inf if best is None else best[1]
    rounds = 0
    # The least share a slice was refused HiGHS's start with needed (SliceResult.needed):
    # a slice given less is skipped, since building its model (9-20 s each at N=256)
    # would only end with the same refusal, past the budget at the end.
    need: float | None = None
    prepared: tuple[float, MilpData] | None = None  # prepare() for the current cutoff

    def bound_of(k: int) -> float:
        r = state[k]
        return slices[k].bound if r is None else max(r.bound, slices[k].bound)

    while not options.stopped():
        todo = sorted((k for k, r in state.items() if not (r is not None and r.closed)
                       and bound_of(k) < inc_obj), key=bound_of)
        if not todo:
            break
        # Another round restarts HiGHS from scratch: worth it with a quarter of the budget
        # left, or when each open slice gets twice the time it had (slices closed early
        # left it: metro N=64 L=48 lambda 1 seed 149 stopped with 24 s of 120 s unused).
        had = max((r.seconds for k in todo if (r := state[k]) is not None), default=0.0)
        left = options.remaining()
        if rounds and not (left > max(1.0, 0.25 * options.time_limit)
                           or left / len(todo) >= max(1.0, 2 * had)):
            break
        rounds += 1
        tried = False
        for n, k in enumerate(todo):
            left = options.remaining()
            if left <= 0.5 or options.stopped():
                break
            share = left / (len(todo) - n)
            if bound_of(k) >= inc_obj or (need is not None and share < need):
                continue
            tried = True
            prev = state[k]
            cutoff = inc_obj if best else None
            if prepared is None or prepared[0] != inc_obj:
                prepared = (inc_obj, prepare(instance, cutoff))
            r = solve_slice(instance, slices[k], None if best is None else best[0].to_dict(),
                            cutoff, share, options.seed + k + 1000 * rounds,
                            options.threads, data=prepared[1])
            if r.reason == "not_started":
                need = r.needed if need is None else min(need, r.needed)
            if prev is not None and not r.closed:
                r = replace(r, bound=max(r.bound, prev.bound))
            state[k] = r
            if r.objective is not None and r.objective < inc_obj and r.plan is not None:
                best = (Plan.from_dict(r.plan), r.objective)
                inc_obj = r.objective
                trace.append(TraceRow(options.elapsed(), inc_obj, None))
                options.callbacks.on_improvement(options.elapsed(), inc_obj, None)
        if not tried:
            rounds -= 1  # a round that solved no slice
            break
    info["rounds"] = rounds
    return [(slices[k], state[k]) for k in range(len(slices))]


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``sliced`` (module docstring)."""
    params = SlicedParams.parse(options.params)
    info: dict[str, Any] = {}
    trace: list[TraceRow] = []
    u = instance.training.micro_batch_size
    starts = [p for p in options.warm_start if p.micro_batch_size in (None, u)]
    best = heuristic_start(instance, starts, params.heuristic_share, options.remaining(),
                           options.stopped)
    if starts:
        warm = best_plan(instance, starts)
        info["warm_start_accepted"] = warm is not None
    if best is not None:
        trace.append(TraceRow(options.elapsed(), best[1], None))
        options.callbacks.on_improvement(options.elapsed(), best[1], None)
    inc = None if best is None else best[1]
    pb = instance_bound(instance, inc, params.bound_share, options.remaining(), options.stopped,
                        lambda b: record_bound(options, trace, inc, b), workers=options.threads)
    info["parametric"] = pb.summary()
    if math.isfinite(pb.value):
        record_bound(options, trace, None if best is None else best[1], pb.value)
    if best is None and not math.isfinite(pb.value):
        return Outcome(None, "infeasible", info=info, trace=trace,
                       message="no plan: the bound proves no stage count admits one")
    if best is not None and proves(pb.value, best[1]):
        # The bound reaches the start plan: it is optimal, no slice needed.
        return Outcome(best[0], "optimal", lower_bound=min(pb.value, best[1]), trace=trace,
                       info=info, message="the parametric bound reaches the start plan")
    pb, best, proven = site_subsets.after_bound(
        instance, options, params, params.bound_share, pb, best, trace, info,
        classes_solved=True)
    if options.deferred_start is not None and not proven:
        # Only now that the bound and site branching prove nothing.
        best, warm = deferred_start(instance, options, best, trace)
        info["warm_start_accepted"] = warm is not None
        proven = best is not None and proves(pb.value, best[1])
    if not proven and best is not None and params.search_share > 0 and options.remaining() > 0:
        # A better incumbent is a tighter cutoff for the slices (and a better answer if
        # they prove nothing); on metro pools the search finds plans that visit a site
        # twice, which the start heuristics do not build.
        before = best[1]
        t0 = time.perf_counter()
        best = search_from(instance, options, best, params.search_share * options.remaining(),
                           trace)
        info["sequence_search"] = {"seconds": round(time.perf_counter() - t0, 6),
                                   "from": before, "to": best[1]}
        proven = proves(pb.value, best[1])
    if proven and best is not None:
        return Outcome(best[0], "optimal", lower_bound=min(pb.value, best[1]), trace=trace,
                       info=info, message="the parametric bound reaches the best plan (after "
                       "the site-subset search and site branching)")
    slices = class_slices(pb.open_boxes, params.slices, pb.classes)
    if pb.classes:
        info["classes"] = [c.summary() for c in pb.classes]
    inc_obj = math.inf if best is None else best[1]
    results: list[tuple[Slice, SliceResult | None]] = [(s, None) for s in slices]
    if params.workers > 1 or params.dask:
        if slices and options.remaining() > 0:
            start = None if best is None else best[0].to_dict()
            res = _submit_all(slices, instance, start, inc_obj if best else None,
                              options.deadline, options.seed, params)
            results = list(zip(slices, res, strict=True))
    else:
        results = _sequential(instance, slices, best, options, trace, info)
    for _, r in results:
        if r is not None and r.objective is not None and r.objective < inc_obj and r.plan:
            best = (Plan.from_dict(r.plan), r.objective)
            inc_obj = r.objective
    open_bounds = []
    for sl, r in results:
        if r is None:
            if sl.bound < inc_obj:
                open_bounds.append(sl.bound)
        elif not r.closed:
            open_bounds.append(max(r.bound, sl.bound))
        else:
            open_bounds.append(r.bound)
    lb = min([inc_obj, *open_bounds]) if best is not None else min(open_bounds, default=pb.value)
    # Site branching may have raised the global bound above the slices' own box bounds.
    lb = max(lb, pb.value) if math.isfinite(pb.value) else lb
    info["slices"] = [
        {**sl.summary(),
         **({} if r is None else {"closed": r.closed, "final_bound": r.bound,
                                  "seconds": round(r.seconds, 3), "nodes": r.nodes,
                                  "reason": r.reason})}
        for sl, r in results]
    if best is None:
        return Outcome(None, "no_solution", lower_bound=lb if math.isfinite(lb) else None,
                       trace=trace, info=info, message="no plan found in the budget")
    proven = lb >= inc_obj * (1 - 2 * MODEL_TOLERANCE)
    status: Status = "optimal" if proven else "feasible"
    lb = min(lb, inc_obj)
    trace.append(TraceRow(options.elapsed(), inc_obj, lb))
    options.callbacks.on_improvement(options.elapsed(), inc_obj, lb)
    return Outcome(best[0], status, lower_bound=lb, trace=trace, info=info,
                   message=None if proven else "slices left open at the time limit")


SPEC = SolverSpec("sliced", solve, "exact",
                  "MILP per bottleneck slice, slices skipped by the parametric bound",
                  warm_start=True, defers_warm_start=True, params=SlicedParams)
