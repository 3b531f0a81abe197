"""The registered solver ``cpsat``: its parameters, :func:`solve` and :data:`SPEC`.

:class:`CpsatParams` parses ``--param``; :func:`solve` builds the model, hints a
plan, runs CP-SAT with the settings of docs/cpsat.md and reads the plan back;
:func:`_abandoned` answers when the build runs out of budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ortools.sat.python import cp_model

from formulations import site_subsets
from formulations.cpsat.build import build_model
from formulations.cpsat.callbacks import _Recorder
from formulations.cpsat.start import _warm_plan
from formulations.milp.start import deferred_start, heuristic_start
from formulations.site_subsets import SiteSearchParams
from geoplan.cost import evaluate, parametric
from geoplan.cost.parametric import DEFAULT_SHARE
from geoplan.errors import InputError, SolverError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions, record_bound
from geoplan.solving.params import param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, TraceRow
from geoplan.solving.stop import call_stoppable

#: CP-SAT workers not trusted with this model (see :func:`solve`).
UNSOUND_SUBSOLVERS = ("routing_path_lns", "routing_random_lns", "routing_full_path_lns")


@dataclass(frozen=True)
class CpsatParams(SiteSearchParams):
    """Parameters of ``cpsat`` (``--param KEY=VALUE``)."""

    LABEL: ClassVar[str] = "cpsat"

    precision: float | None = param(
        None, "target relative rounding error per coefficient (none: the finest that fits)",
        above=0.0, below=1.0)
    symmetry: bool = param(True, "dominance and identical-GPU symmetry breaking")
    bounds: bool = param(True, "per-Q bottleneck and sum bounds, other redundant constraints")
    baseline_cutoff: bool = param(True, "the Metis-default plan caps the objective")
    heuristic: bool = param(True, "the MILP's start heuristic (cheap plans, exact splits, a "
                            "local search) as hint and objective cap")
    heuristic_share: float = param(0.05, "budget share of that heuristic (at least 1 s, at "
                                   "most a quarter)", at_least=0.0, at_most=1.0)
    parametric: bool = param(True, "the bottleneck-parametric bound (geoplan.cost.parametric):"
                             " a constraint on the objective, and reported when stronger")
    parametric_share: float = param(DEFAULT_SHARE,
                                    "at most this budget share for that bound",
                                    at_least=0.0, at_most=1.0)
    log: bool = param(False, "CP-SAT search log on stdout")
    sat: Mapping[str, Any] = param(None, "any CP-SAT SatParameters field (value read as JSON)",
                                   prefix="sat.")


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``cpsat``: build, hint, solve, read the plan back."""
    params = CpsatParams.parse(options.params)
    uppers = list(options.warm_start)
    wants_warm = bool(options.warm_start) or options.deferred_start is not None
    base: Plan | None = None
    if params.baseline_cutoff:
        from geoplan.cost.baseline import metis_default_plan

        base = metis_default_plan(instance)
        if base is not None:
            uppers.append(base)
    start: Plan | None = None
    if params.heuristic:
        # One thread of CP-SAT finds poor plans on large pools (geo N=128: 3x the optimum
        # after 120 s from the Metis hint): give it the MILP's start plan instead.
        u = instance.training.micro_batch_size
        found = heuristic_start(instance, [p for p in options.warm_start
                                           if p.micro_batch_size in (None, u)],
                                params.heuristic_share, options.remaining(), options.stopped)
        if found is not None:
            start = found[0]
            uppers.append(start)
    from formulations.milp import BuildAbandoned, build_checker

    try:
        built = build_model(
            instance,
            precision=params.precision,
            symmetry=params.symmetry,
            bounds=params.bounds,
            upper_plans=uppers,
            check=build_checker(options, "cpsat model"),
        )
    except BuildAbandoned as exc:
        return _abandoned(instance, uppers, str(exc), options)
    sc = built.scaling
    info: dict[str, Any] = {
        "scaling": sc.to_dict(),
        "dominance_pairs": len(built.dominance),
        "identical_pairs": len(built.identical),
        "stage_counts": built.q_domain,
        "objective_cutoff": None if built.cutoff is None else built.cutoff / sc.obj_scale,
    }
    hint_obj: int | None = None
    hint_plan: Plan | None = None
    # The hint: the best of the warm starts, the start heuristic's plan (built from the
    # warm starts, so never worse) and the baseline that caps the objective, so that
    # CP-SAT has a plan from the start.
    warm_plan: Plan | None = None
    warm_obj: float | None = None  # the best feasible warm start's price
    if options.warm_start:
        warm_plan, extra = _warm_plan(built, options.warm_start)
        info.update(extra)
        warm_obj = min((e.objective for e in (_priced(instance, p) for p in options.warm_start)
                        if e is not None), default=None)
    candidates = [("heuristic", None if start is None else _warm_plan(built, [start])[0]),
                  ("warm_start", warm_plan),
                  ("metis-default", None if base is None else _warm_plan(built, [base])[0])]
    ranked = [(evaluate(instance, plan).objective, k, name, plan)
              for k, (name, plan) in enumerate(candidates) if plan is not None]
    hint_price: float | None = None  # the hinted plan's evaluated objective
    if ranked:
        hint_price, _, info["hint_source"], hint_plan = min(ranked)
    elif options.warm_start:
        info["hint_source"] = None
    # The hint is the warm start or a plan at least as good (the start heuristic's).
    hint_covers_warm = (warm_obj is not None and hint_price is not None
                        and hint_price <= warm_obj * (1 + 1e-12))
    if hint_plan is not None:
        hint_obj = built.add_hint(hint_plan)
    floor = -math.inf
    pre_trace: list[TraceRow] = []  # plans found before the search (site branching, subsets)

    def adopt(better: tuple[Plan, float] | None, known: tuple[Plan, float] | None,
              source: str) -> None:
        # A better plan found before the search becomes the hint and caps the objective.
        nonlocal hint_plan, hint_price, hint_obj, hint_covers_warm
        if better is not None and better is not known:
            new_plan, _ = _warm_plan(built, [better[0]])
            if new_plan is not None:
                hint_plan, info["hint_source"] = new_plan, source
                hint_price = evaluate(instance, new_plan).objective
                hint_obj = built.add_hint(new_plan)
                built.model.add(built.objective <= hint_obj)
        hint_covers_warm = (warm_obj is not None and hint_price is not None
                            and hint_price <= warm_obj * (1 + 1e-12))

    def hinted() -> tuple[Plan, float] | None:
        return None if hint_plan is None or hint_price is None else (hint_plan, hint_price)

    def take_warm() -> None:
        # The deferred warm start, once the model's own plans and bound prove nothing.
        nonlocal warm_obj
        known = hinted()
        better, taken = deferred_start(instance, options, known, pre_trace)
        if taken is not None:
            warm_obj = taken[1] if warm_obj is None else min(warm_obj, taken[1])
        adopt(better, known, "warm_start")

    if params.parametric:
        priced = (_priced(instance, p) for p in uppers)
        inc = min((e.objective for e in priced if e is not None), default=None)
        pb = parametric.instance_bound(instance, inc, params.parametric_share,
                                       options.remaining(), options.stopped,
                                       lambda b: record_bound(options, pre_trace, inc, b),
                                       workers=options.threads)
        floor, info["parametric"] = pb.floor, pb.summary()
        # The price of a plan the site searches proved optimal without the bound reaching
        # it (a site subset solved to the end holding every plan branching left open).
        proven_price: float | None = None

        def settled() -> bool:
            return hint_price is not None and (parametric.proves(floor, hint_price) or (
                proven_price is not None and hint_price <= proven_price * (1 + 1e-12)))

        if not settled():
            known = hinted()
            pb, better, by_sites = site_subsets.after_bound(
                instance, options, params, params.parametric_share, pb, known, pre_trace, info)
            floor = pb.floor
            adopt(better, known, "site_search")
            found = better or known
            if by_sites and found is not None:
                proven_price = found[1]
        if options.deferred_start is not None and not settled():
            take_warm()  # only now that the bound and site branching prove nothing
        if math.isfinite(floor) and floor > 0:
            # The floor as a constraint: CP-SAT's own bound starts there and it stops as
            # soon as a plan reaches it. In model integers, below the floor by the rounding
            # tolerance (a model objective is within it of the price), so no plan is cut.
            sc_ = built.scaling
            lb_int = math.floor(floor * sc_.obj_scale * (1 - sc_.tolerance) * (1 - 1e-12)) - 1
            if lb_int > 0:
                built.model.add(built.objective >= lb_int)
                info["parametric_cut"] = lb_int
        if settled() and hint_price is not None:
            # The bound reaches the hinted plan: it is optimal, no search needed.
            if wants_warm:
                info["warm_start_accepted"] = hint_covers_warm
            lb = min(floor, hint_price)
            options.callbacks.on_improvement(options.elapsed(), hint_price, lb)
            return Outcome(hint_plan, "optimal", lower_bound=lb, info=info,
                           trace=[*pre_trace, TraceRow(options.elapsed(), hint_price, lb)],
                           message="the parametric bound reaches the hinted plan"
                           if parametric.proves(floor, hint_price) else "a site subset "
                           "solved to the end holds every plan site branching left open")
    elif options.deferred_start is not None:
        take_warm()

    solver = cp_model.CpSolver()
    p = solver.parameters
    p.max_time_in_seconds = max(options.remaining(), 1e-3)
    p.random_seed = int(options.seed) % (2**31)
    p.num_workers = options.threads
    p.relative_gap_limit = options.gap
    p.log_search_progress = params.log
    # Interrupts reach CP-SAT through options.stop (stop_search below), SIGTERM too.
    p.catch_sigint_signal = False
    # CP-SAT 9.15's routing LNS workers sometimes end the whole search ("#Done") on this
    # circuit-with-optional-nodes model and report a suboptimal plan as OPTIMAL (seen on
    # metro-8-32: 6 of 40 runs with 2 workers, none with these workers ignored).
    p.ignore_subsolvers.extend(UNSOUND_SUBSOLVERS)
    for key, value in params.sat.items():  # expert pass-through, e.g. sat.linearization_level=2
        try:
            if isinstance(value, list):
                getattr(p, key).extend(value)
            else:
                setattr(p, key, value)
        except (AttributeError, TypeError, ValueError) as exc:
            raise InputError(f"params.sat.{key}", value, f"not a CP-SAT parameter: {exc}") \
                from None
    info["ignored_subsolvers"] = list(p.ignore_subsolvers)
    rec = _Recorder(built, options)
    rec.trace.extend(pre_trace)
    solver.best_bound_callback = rec.on_bound

    def run() -> Any:
        # In a helper thread, so that a signal handler runs at once and stops the
        # search through CP-SAT's own stop_search (never by killing it).
        return call_stoppable(lambda: solver.solve(built.model, rec), options.stop,
                              solver.stop_search)

    status = run()
    if status == cp_model.INFEASIBLE and hint_plan is not None and options.remaining() > 0:
        # The hinted plan satisfies the model, so INFEASIBLE is a solver fault (CP-SAT 9.15 has
        # known presolve bugs of this kind): solve again without presolve.
        info["presolve_retry"] = True
        p.cp_model_presolve = False
        p.max_time_in_seconds = max(options.remaining(), 1e-3)
        status = run()
    info["cpsat_status"] = solver.status_name(status)
    info["solutions"] = rec.solutions
    info["wall_s_cpsat"] = solver.wall_time
    if wants_warm:
        # Accepted: CP-SAT started from the hint, and the hint covers the warm start.
        accepted = (hint_obj is not None and rec.first_objective is not None
                    and rec.first_objective <= hint_obj and hint_covers_warm)
        info["warm_start_accepted"] = accepted
        if hint_plan is not None and rec.first_plan is not None:
            info["warm_start_first_is_hint"] = rec.first_plan == hint_plan

    if status == cp_model.MODEL_INVALID:
        raise SolverError(f"cpsat: invalid model: {built.model.validate()}")
    if status == cp_model.INFEASIBLE:
        return Outcome(None, "infeasible", trace=rec.trace, info=info,
                       message="no plan meets the memory caps with links in both directions "
                               "between consecutive stages (CP-SAT proved the model infeasible)")
    bound = rec.to_bound(solver.best_objective_bound)
    if math.isfinite(floor):
        bound = floor if bound is None else max(bound, floor)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if hint_plan is not None:  # the hinted plan is known feasible: never lose it
            return Outcome(hint_plan, "feasible", lower_bound=bound, trace=rec.trace, info=info,
                           message=f"CP-SAT found no plan within {options.time_limit:.3g} s "
                                   f"(status {solver.status_name(status)}); returning the "
                                   f"hinted plan ({info.get('hint_source')})")
        return Outcome(None, "no_solution", lower_bound=bound, trace=rec.trace, info=info,
                       message=f"CP-SAT found no plan within {options.time_limit:.3g} s "
                               f"(status {solver.status_name(status)})")
    plan = built.decode(solver.value)
    obj_int = int(solver.value(built.objective))
    # OPTIMAL is also reported when the relative-gap target is met: then check the proof
    # (with float slack, as the bound is a double).
    proven = status == cp_model.OPTIMAL and (
        options.gap == 0 or solver.best_objective_bound >= obj_int * (1 - 1e-15) - 0.5)
    if not proven and math.isfinite(floor):
        proven = parametric.proves(floor, evaluate(instance, plan).objective)
    info["model_objective_int"] = obj_int
    return Outcome(
        plan=plan,
        status="optimal" if proven else "feasible",
        lower_bound=bound,
        model_objective=obj_int / sc.obj_scale,
        model_tolerance=sc.tolerance,
        trace=rec.trace,
        info=info,
    )


def _priced(instance: Instance, plan: Plan) -> Any:
    """The plan's evaluation if it is feasible, else None (a warm start may be neither)."""
    try:
        ev = evaluate(instance, plan)
    except Exception:  # an unusable warm start is no incumbent
        return None
    return ev if ev.feasible else None


def _abandoned(instance: Instance, plans: Sequence[Plan], reason: str,
               options: SolveOptions) -> Outcome:
    """The model could not be built in the budget: the best known plan, as at a time-out."""
    best: tuple[float, Plan] | None = None
    for p in plans:
        try:
            ev = evaluate(instance, p)
        except InputError:
            continue
        if ev.feasible and (best is None or ev.objective < best[0]):
            best = (ev.objective, p)
    info: dict[str, Any] = {"model": f"abandoned: {reason}"}
    if options.warm_start:
        info["warm_start_accepted"] = False
    if best is None:
        return Outcome(None, "no_solution", info=info,
                       message=f"cpsat: model abandoned ({reason}) before any plan was found")
    row = TraceRow(options.elapsed(), best[0], None)
    options.callbacks.on_improvement(row.seconds, row.incumbent, None)
    return Outcome(best[1], "feasible", trace=[row], info=info,
                   message=f"cpsat: model abandoned ({reason}); the best known plan "
                   "(warm start or Metis default)")


SPEC = SolverSpec("cpsat", solve, "exact", "CP-SAT model in OR-Tools (integer-scaled times)",
                  warm_start=True, defers_warm_start=True, params=CpsatParams)
