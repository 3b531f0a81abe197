"""The registered solver ``milp``: :class:`MilpParams`, :func:`solve` and :data:`SPEC`.

:func:`solve` runs the parts in order: start plans (:mod:`formulations.milp.start`),
data and bounds (:mod:`formulations.milp.data`), the parametric bound and the
site-subset search it guides (:mod:`formulations.site_subsets`), LP tightening
(:mod:`formulations.milp.tightening`), the model (:mod:`formulations.milp.model`),
the MIP start (:mod:`formulations.milp.values`), HiGHS
(:mod:`formulations.highs_tools`), and reads the plan back; it gives up the
build, with the best plan known, when the budget cannot pay for it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from formulations import site_subsets
from formulations.milp.data import prepare
from formulations.milp.model import BuildAbandoned, build_checker, build_model
from formulations.milp.slices import (
    Slice,
    add_slice_rows,
    class_slice,
    in_slice,
    make_slices,
    slice_data,
)
from formulations.milp.start import best_plan, deferred_start, heuristic_start
from formulations.milp.symmetry import canonical_plan
from formulations.milp.tightening import tighten
from formulations.milp.tolerances import (
    HIGHS_TOLERANCES,
    MODEL_TOLERANCE,
    PREPARE_S_PER_GPU2,
    below_tolerance,
    build_estimate,
)
from formulations.milp.values import read_plan, start_values
from formulations.site_subsets import SiteSearchParams
from geoplan.cost import evaluate, parametric
from geoplan.cost.parametric import DEFAULT_SHARE, PlanClasses
from geoplan.errors import FormulationError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions, record_bound
from geoplan.solving.params import param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, Status, TraceRow

__all__ = ["SPEC", "MilpParams", "solve"]


@dataclass(frozen=True)
class MilpParams(SiteSearchParams):
    """Parameters of ``milp`` (``--param KEY=VALUE``)."""

    LABEL: ClassVar[str] = "milp"

    heuristic: bool = param(True, "seed with cheap plans improved by exact splits and a "
                            "local search")
    heuristic_share: float = param(0.05, "budget share of that heuristic (at least 1 s, at "
                                   "most a quarter)", at_least=0.0, at_most=1.0)
    symmetry: bool = param(True, "dominance constraints between interchangeable GPUs")
    cuts: bool = param(True, "valid inequalities")
    site_unions: bool | None = param(None, "subtour cuts on unions of sites (none: when at "
                                     "most 5 sites and 16 GPUs)")
    tighten: bool = param(True, "LP bound tightening of the bottleneck")
    tighten_share: float = param(0.25, "at most this budget share for the tightening",
                                 at_least=0.0, at_most=1.0)
    parametric: bool = param(True, "the bottleneck-parametric bound (geoplan.cost.parametric) "
                             "as the objective's floor in the model and in the bound reported")
    parametric_share: float = param(DEFAULT_SHARE,
                                    "at most this budget share for that bound",
                                    at_least=0.0, at_most=1.0)
    narrow: bool = param(True, "restrict the model to the bound's open boxes and site "
                         "branching's classes (one slice, formulations.milp.slices)")
    highs_log: bool = param(False, "HiGHS log on the console")
    highs: Mapping[str, Any] = param(None, "any HiGHS option, passed unchanged (value read "
                                     "as JSON)", prefix="highs.")


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``milp``: build the model, run HiGHS, read the plan back.

    ``options.params`` (:class:`MilpParams`): ``heuristic`` (default true: seed with cheap plans
    improved by exact splits and a local search given ``heuristic_share`` of the
    budget, default 0.05, at least 1 s, at most a quarter),
    ``symmetry`` (dominance constraints, default true), ``cuts`` (valid
    inequalities, default true), ``tighten`` (LP bound tightening of the
    bottleneck, default true) with ``tighten_share`` (at most this share of the
    budget, default 0.25), ``site_subsets`` (default true: a ``milp`` run on the sites
    the parametric bound points at, :mod:`formulations.site_subsets`, within
    ``site_subsets_share`` of the budget left, default 0.25), ``highs_log`` (default
    false: HiGHS log to the console), and any ``highs.<option>`` passed to HiGHS unchanged.
    """
    from formulations.highs_tools import HighsSession

    params = MilpParams.parse(options.params)
    info: dict[str, Any] = {}
    trace: list[TraceRow] = []
    t_start = time.perf_counter()

    # The model fixes the instance's micro-batch size: other starts cannot be used.
    u = instance.training.micro_batch_size
    usable_starts = [p for p in options.warm_start if p.micro_batch_size in (None, u)]
    warm = best_plan(instance, usable_starts) if usable_starts else None
    best = warm
    wants_warm = bool(options.warm_start) or options.deferred_start is not None
    if params.heuristic:
        best = heuristic_start(instance, usable_starts, params.heuristic_share,
                               options.remaining(), options.stopped)
        info["heuristic_s"] = round(time.perf_counter() - t_start, 4)
    if best is not None:
        trace.append(TraceRow(options.elapsed(), best[1], None))
        options.callbacks.on_improvement(options.elapsed(), best[1], None)

    t_build = time.perf_counter()
    symmetry = params.symmetry
    cuts = params.cuts
    check = build_checker(options, "milp model")

    floor = -math.inf  # the parametric bound, once known
    # The open boxes and branching's classes, once known (with a plan): every better plan
    # lies in this slice.
    narrow: Slice | None = None

    def abandoned(reason: str) -> Outcome:
        # The model could not be built within the budget (or an interrupt came first):
        # the best plan known so far and the bound proven so far, as at a time-out.
        info["model"] = f"abandoned: {reason}"
        info["build_s"] = round(time.perf_counter() - t_build, 4)
        lb = floor if math.isfinite(floor) else None
        if best is None:
            return Outcome(None, "no_solution", lower_bound=lb, trace=trace, info=info,
                           message=f"milp: model abandoned ({reason}) before any plan was found")
        return Outcome(best[0], "feasible", lower_bound=None if lb is None else min(lb, best[1]),
                       trace=trace, info=info,
                       message=f"milp: model abandoned ({reason}); the best plan found before")

    try:
        check("data")
        # prepare() (bounds, dominance, arcs) cannot be interrupted: about 2.7e-5 N^2 s
        # (1.75 s at N=256 on one core); do not start it without that time.
        if options.remaining() < PREPARE_S_PER_GPU2 * instance.n ** 2:
            raise BuildAbandoned(options.stop.reason if options.stopped()
                                 else "building exceeded the budget")
        data = prepare(
            instance,
            None if best is None else best[1],
            site_unions=params.site_unions,
        )
        check("bounds")
    except BuildAbandoned as exc:
        return abandoned(str(exc))
    if not data.gpus:
        return Outcome(
            None,
            "infeasible",
            info=info,
            message="no plan: no single GPU holds all layers and no set of GPUs linked "
            "both ways has the memory and links to hold them",
        )
    info["tmax_lb"] = {"initial": data.tmax_lb}
    if params.parametric:
        inc = None if best is None else best[1]
        pb = parametric.instance_bound(instance, inc, params.parametric_share,
                                       options.remaining(), options.stopped,
                                       lambda b: record_bound(options, trace, inc, b),
                                       workers=options.threads)
        floor, info["parametric"] = pb.floor, pb.summary()
        if math.isfinite(floor):
            record_bound(options, trace, None if best is None else best[1], floor)
        if best is not None and parametric.proves(floor, best[1]):
            # The bound reaches the best plan: it is optimal, no model needed.
            if wants_warm:
                info["warm_start_accepted"] = warm is not None and best[1] <= warm[1]
            return Outcome(best[0], "optimal", lower_bound=min(floor, best[1]), trace=trace,
                           info=info, message="the parametric bound reaches the best plan")
        pb, best, proven = site_subsets.after_bound(
            instance, options, params, params.parametric_share, pb, best, trace, info)
        floor = pb.floor
        if proven and best is not None:
            if wants_warm:
                info["warm_start_accepted"] = warm is not None and best[1] <= warm[1]
            return Outcome(best[0], "optimal", lower_bound=min(floor, best[1]),
                           trace=trace, info=info, message="the parametric bound reaches "
                           "the best plan (after the site-subset search and site branching)")
        if best is not None and (data.incumbent_objective is None
                                 or best[1] < data.incumbent_objective) \
                and options.remaining() > 2 * PREPARE_S_PER_GPU2 * instance.n ** 2:
            # The caps, arcs and bounds of the data follow the incumbent: the bound phase
            # found a better one (at N=64, 0.1 s; not interruptible, hence the margin).
            data = prepare(instance, best[1], site_unions=params.site_unions)
        if params.narrow and best is not None and pb.open_boxes:
            # Every plan better than the incumbent lies in an open box and in one of
            # branching's classes: the model keeps one slice over all the boxes (their
            # ranges and least floors) and the classes' hull (a relaxation of their
            # union), as the sliced MILP does per slice. At metro N=64 L=48 lambda 1
            # (instance seed 461) one class was left, the plans on 7 of 8 sites stepping
            # back 3 times or more; the whole model was 0.26 % short after 44 s of HiGHS,
            # and with the class's rows alone as well; the sliced MILP closed it in 33 s.
            narrow = (class_slice(pb.open_boxes, PlanClasses.hull(pb.classes)) if pb.classes
                      else make_slices(pb.open_boxes, 1))[0]
            info["narrowed"] = {**narrow.summary(), **({} if narrow.classes is None else {
                "classes": narrow.classes.summary()})}
            restricted = slice_data(data, narrow)
            if restricted is None:
                return Outcome(best[0], "optimal", lower_bound=best[1], trace=trace,
                               info=info, message="the open boxes and site branching's "
                               "classes hold no plan: none is better than the best plan")
            data = restricted
        if narrow is None and data.c_e == 0 and data.c_t > 0 and math.isfinite(floor):
            # objective = c_t T: the floor is a bound on T (kept below HiGHS's tolerances).
            # Not on a narrowed model: its own floor row links T to the bottleneck, and a
            # bound on T close to the cutoff leaves every LP below it at the same value,
            # with nothing for HiGHS's pseudo-costs to learn. At metro N=64 L=48 lambda 1
            # (instance seed 461) the slice's MILP closed in 33 s without this bound and
            # was still open after 60 s with it.
            t_floor = floor / data.c_t * (1 - 10 * MODEL_TOLERANCE)
            data = replace(data, t_lb=max(data.t_lb, t_floor), t_ub=max(data.t_ub, t_floor))
    if options.deferred_start is not None:
        # The deferred warm start runs only now that the start plans, the bound and site
        # branching have proven nothing: a proof that needs none is not delayed by it.
        best, warm = deferred_start(instance, options, best, trace)
        if best is not None and parametric.proves(floor, best[1]):
            info["warm_start_accepted"] = best[1] <= warm[1] if warm is not None else False
            return Outcome(best[0], "optimal", lower_bound=min(floor, best[1]), trace=trace,
                           info=info, message="the parametric bound reaches the warm start")
    if cuts and symmetry and params.tighten:
        budget = params.tighten_share * options.remaining()
        t_tighten = time.perf_counter()
        data, rounds = tighten(data, t_tighten + budget, threads=options.threads,
                               check=check, stopped=options.stopped)
        info["tmax_lb"].update(tightened=data.tmax_lb, lp_rounds=rounds,
                               seconds=round(time.perf_counter() - t_tighten, 3))
    try:
        if options.remaining() < build_estimate(data):
            raise BuildAbandoned(options.stop.reason if options.stopped()
                                 else "building exceeded the budget")
        t_model = time.perf_counter()
        model = build_model(instance, data=data, symmetry=symmetry, cuts=cuts, check=check)
        if narrow is not None and best is not None:
            # Only a better plan is sought (the slice holds no other): a cutoff.
            add_slice_rows(model, instance, data, narrow, best[1])
        # Pyomo's translation to HiGHS cannot be interrupted and takes about twice as
        # long as building the model: start it only if it fits in what is left.
        if options.remaining() < 2.0 * (time.perf_counter() - t_model) + 0.05:
            raise BuildAbandoned(options.stop.reason if options.stopped()
                                 else "building exceeded the budget")
        options.callbacks.on_progress({"building": "milp model", "step": "HiGHS translation",
                                       "elapsed": round(options.elapsed(), 3)})
        session = HighsSession(model)
    except BuildAbandoned as exc:
        return abandoned(str(exc))
    info["build_s"] = round(time.perf_counter() - t_build, 4)
    info["model"] = {
        "gpus": len(data.gpus),
        "arcs": len(data.arcs),
        "kmax": data.kmax,
        "cols": session.num_cols,
        "rows": int(session.highs.getNumRow()),
        "dominance_pairs": len(data.dominance),
    }

    scale = max(1.0, abs(best[1])) if best is not None else 1.0
    rel_gap = options.gap if options.gap > 0 else 1e-9
    abs_gap = 1e-9 * scale if options.gap == 0 else 1e-6 * scale
    extra: dict[str, Any] = dict(HIGHS_TOLERANCES)
    extra.update(params.highs)
    if params.highs_log:
        extra["log_to_console"] = True
    session.set_options(
        time_limit=options.remaining(),
        rel_gap=rel_gap,
        abs_gap=abs_gap,
        threads=options.threads,
        seed=options.seed,
        extra=extra,
    )

    start_plan: Plan | None = None
    # Outside the slice the incumbent is no start (HiGHS would only reject it).
    startable = best is not None and (narrow is None or in_slice(instance, best[0], narrow))
    if startable and best is not None and symmetry:
        canon = canonical_plan(data, best[0])
        if canon != best[0]:
            ev = evaluate(instance, canon)
            if ev.feasible and ev.objective <= best[1]:
                best = (canon, ev.objective)
    if startable and best is not None:
        vals = start_values(model, best[0])
        if vals is not None and session.set_start(vals):
            start_plan = best[0]
            if not trace or trace[-1].incumbent != best[1]:
                trace.append(TraceRow(options.elapsed(), best[1], None))
                options.callbacks.on_improvement(options.elapsed(), best[1], None)
    info["mip_start"] = None if start_plan is None else {
        "objective": best[1] if best else None,
        "source": "warm_start" if warm is not None and best is not None
        and best[1] >= warm[1] else "heuristic",
    }

    first_incumbent: list[float] = []

    shown = [r.bound for r in trace if r.bound is not None]
    best_shown = max(shown) if shown else None

    def proven_bound(bound: float) -> float | None:
        # The trace and the progress line show the proven bound, which never falls:
        # HiGHS's own bound starts below the parametric floor the model was given.
        nonlocal best_shown
        b = below_tolerance(bound) if math.isfinite(bound) else None
        for known in (floor if math.isfinite(floor) else None, best_shown):
            if known is not None:
                b = known if b is None else max(b, known)
        if narrow is not None and best is not None and b is not None:
            b = min(b, best[1])  # the model holds only plans better than best
        best_shown = b
        return b

    def on_incumbent(_: float, obj: float, bound: float) -> None:
        first_incumbent.append(obj)
        b = proven_bound(bound)
        trace.append(TraceRow(options.elapsed(), obj, b))
        options.callbacks.on_improvement(options.elapsed(), obj, b)

    def on_bound(_: float, bound: float) -> None:
        inc = trace[-1].incumbent if trace else None
        before = best_shown
        b = proven_bound(bound)
        if b is None or (before is not None and b <= before):
            return  # the proven bound did not rise
        trace.append(TraceRow(options.elapsed(), inc, b))
        options.callbacks.on_improvement(options.elapsed(), inc, b)

    run = session.run(on_incumbent, on_bound, stop=options.stop, deadline=options.deadline)
    info["highs"] = {
        "status": run.reason,
        "seconds": round(run.seconds, 4),
        "nodes": run.nodes,
        "objective": run.objective,
        "dual_bound": run.dual_bound,
    }

    accepted = run.start_accepted
    if start_plan is not None and accepted is None and best is not None:
        # Presolve may swallow the log line; the first incumbent tells instead.
        accepted = bool(first_incumbent) and abs(first_incumbent[0] - best[1]) <= (
            MODEL_TOLERANCE * max(1.0, abs(best[1]))
        )
    if start_plan is not None:
        info["mip_start"]["accepted"] = bool(accepted)
    if wants_warm:
        # The warm start counts as accepted when HiGHS started from it or from a
        # plan at least as good.
        info["warm_start_accepted"] = bool(
            warm is not None and start_plan is not None and accepted and best is not None
            and best[1] <= warm[1]
        )

    bound = below_tolerance(run.dual_bound) if run.dual_bound is not None else None
    if math.isfinite(floor):
        bound = floor if bound is None else max(bound, floor)
    if narrow is not None and best is not None:
        if bound is not None:
            bound = min(bound, best[1])
        if run.status == "infeasible":
            trace.append(TraceRow(options.elapsed(), best[1], best[1]))
            options.callbacks.on_improvement(options.elapsed(), best[1], best[1])
            return Outcome(best[0], "optimal", lower_bound=best[1], trace=trace, info=info,
                           message="HiGHS proved that the narrowed model (the open boxes "
                           "and site branching's classes) holds no better plan")
    if run.status == "infeasible":
        if best is not None:
            raise FormulationError(
                f"milp: HiGHS proved the model infeasible although plan {best[0]} is feasible"
            )
        return Outcome(
            None,
            "infeasible",
            trace=trace,
            info=info,
            message="no plan satisfies the memory and link constraints "
            "(HiGHS proved the MILP infeasible)",
        )
    if run.values is not None:
        values, model_objective = run.values, run.objective
        polished = session.polish(run.values)
        if polished is not None:
            model_objective, values = polished
        info["highs"]["polished_objective"] = None if polished is None else polished[0]
        session.load(values)
        plan = read_plan(model)
        status: Status = "optimal" if run.status == "optimal" else "feasible"
        if narrow is not None and best is not None and model_objective is not None \
                and model_objective >= best[1]:
            # The cutoff allows the incumbent's own objective, no better: keep it.
            plan, model_objective = best[0], None
            if bound is not None and bound >= best[1] * (1 - 1e-9):
                status = "optimal"
        if bound is not None and model_objective is not None \
                and bound >= model_objective * (1 - 1e-9):
            status = "optimal"
        return Outcome(
            plan,
            status,
            lower_bound=bound,
            model_objective=model_objective,
            model_tolerance=MODEL_TOLERANCE,
            trace=trace,
            info=info,
            message=None if status == "optimal" else f"HiGHS stopped: {run.reason}",
        )
    if best is not None and narrow is not None and bound is not None \
            and bound >= best[1] * (1 - 1e-9):
        return Outcome(best[0], "optimal", lower_bound=bound, trace=trace, info=info,
                       message="HiGHS's bound on the narrowed model reaches the best plan")
    if best is not None:
        # HiGHS kept no incumbent (start rejected, or not started); the known plan is valid.
        why = ("HiGHS not started: its root's analytic centre cannot be interrupted and "
               "would end past the budget" if run.reason == "not_started"
               else "HiGHS abandoned past the budget, in root work it does not interrupt"
               if run.reason == "abandoned" else f"HiGHS found no solution ({run.reason})")
        return Outcome(
            best[0],
            "feasible",
            lower_bound=bound,
            trace=trace,
            info=info,
            message=f"{why}; returning the start plan",
        )
    return Outcome(
        None,
        "no_solution",
        lower_bound=bound,
        trace=trace,
        info=info,
        message=f"HiGHS found no plan before stopping ({run.reason})",
    )


SPEC = SolverSpec("milp", solve, "exact", "MILP in Pyomo solved by HiGHS", warm_start=True,
                  defers_warm_start=True,
                  params=MilpParams)
