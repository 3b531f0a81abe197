"""A primal search guided by the parametric bound: the exact MILP on the sites it points at.

Where the bottleneck-parametric bound (:mod:`geoplan.cost.parametric`) does not
prove the incumbent, the relaxed minimisers of its least open boxes say which sites
a plan near the bound would use (``ParametricBound.site_sets``). The pool restricted
to those sites is a fraction of the instance, small enough for the ``milp`` solver
to solve well in seconds, and each of its plans is a plan of the whole instance at
the same price (a subset keeps every GPU, link and normaliser).

Why: at N=128 the full model is too large for HiGHS to improve on its start plan.
On metro N=128 L=96 lambda 1 (instance seed 71) every solver ended at 412.00 after
120 s and the memetic algorithm at 410.74; the MILP on the three sites of the least
box's minimiser (48 of 128 GPUs) found 407.17 in 20 s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from formulations.site_paths import improve_on_site_paths
from geoplan.cost import bounds, evaluate
from geoplan.cost.normalise import needs_normalisers
from geoplan.cost.parametric import ParametricBound, instance_bound, proves, refine_by_sites
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import SolverParams, param
from geoplan.solving.result import TraceRow

__all__ = ["SiteSearchParams", "after_bound", "improve_on_site_subsets", "subset_instance"]


@dataclass(frozen=True)
class SiteSearchParams(SolverParams):
    """The parameters every exact solver that runs :func:`after_bound` shares."""

    site_subsets: bool = param(True, "where the parametric bound does not prove the start "
                               "plan, solve the pool restricted to the sites its least boxes' "
                               "minimisers use (formulations.site_subsets) for a better start")
    site_subsets_share: float = param(0.25, "at most this share of the budget left for that",
                                      at_least=0.0, at_most=1.0)
    site_paths: bool = param(True, "first read plans off the parametric bound's least boxes, "
                             "restricted to each order of the sites their minimisers use "
                             "(formulations.site_paths); again after site branching, on "
                             "the sites of its open nodes, when it proves nothing")
    site_paths_share: float = param(0.3, "at most this share of the budget left for that",
                                    at_least=0.0, at_most=1.0)
    site_branching: bool = param(True, "then raise the parametric bound by branching on "
                                 "the sites used and their order (geoplan.cost.site_branching; "
                                 "its path nodes also yield plans), within "
                                 "site_branching_share of the budget left")
    site_branching_share: float = param(0.75, "at most this share of the budget left for "
                                        "site branching", at_least=0.0, at_most=1.0)
    site_branching_back: int = param(2, "kept-apart nodes stepping back up to this often "
                                     "are split by their steps back; 3 also splits those "
                                     "stepping back three times (joined nodes for a site "
                                     "visited four times); slower where HiGHS would close "
                                     "those nodes, and no gap moved beyond noise in "
                                     "bench/milp_three_back.py",
                                     at_least=2, at_most=3)
    memetic_share: float = param(0.0, "before site branching, the memetic algorithm (the "
                                 "paper's stop) from the best plan for at most this share of "
                                 "the budget left (0: none; bench/milp_memetic.py)",
                                 at_least=0.0, at_most=1.0)

    memetic_after_share: float = param(0.25, "after site branching leaves the best plan "
                                       "unproven, the memetic algorithm (the paper's stop, "
                                       "then its sequence search) from it for at most this "
                                       "share of the budget left (0: none; "
                                       "bench/milp_after_share.py)", at_least=0.0,
                                       at_most=1.0)

    def runs_solvers(self) -> tuple[str, ...]:
        return ("memetic",) if self.memetic_share > 0 or self.memetic_after_share > 0 else ()


#: The parametric search runs again after the site-path plans improve on the incumbent
#: when it took at most this share of the budget left.
_RERUN_SHARE = 0.25
#: Before site branching, the site-subset search on the root's first site set gets at
#: most this share of the budget left: branching closes nodes sooner under a better
#: incumbent. At metro N=64 L=48 lambda 1 (instance seed 149) the start plan was 337.74;
#: the MILP on the root's four sites (32 GPUs) found 336.37 in 3 s, and branching proved
#: it in 68 s, against 108 s from 337.74 (it found 336.37 itself after 23 s).
_FIRST_SUBSET_SHARE = 0.05
#: A site-subset search that ended on sites holding every class site branching left open
#: proves the best plan (:func:`subsets_close_classes`); a switch for bench/subset_proof.py.
_CLOSE_BY_SUBSETS = True
#: A solver that solves site branching's classes itself (``classes_solved``) skips the
#: site-subset search after branching when every class has at most this many sites: the
#: class's own MILP holds every better plan on them. At metro N=32 L=32 lambda 1 (instance
#: seed 293) that search took 28 s of a 36 s proof and found nothing; the class closed
#: in 1 s.
_CLASS_SITES = 4
#: After site branching leaves the best plan unproven, the site-path search runs again on
#: the site sets of branching's open nodes (``ParametricBound.open_sets``) not searched
#: before, within ``site_paths_share`` of the budget left; a switch for
#: bench/paths_after.py.
_PATHS_AFTER_BRANCHING = True


def memetic_from(instance: Instance, options: SolveOptions, best: tuple[Plan, float],
                 seconds: float) -> tuple[tuple[Plan, float] | None, dict[str, Any]]:
    """The memetic algorithm (the paper's no-improvement stop) from ``best`` for at most
    ``seconds``, on this process's thread: its plan if better than ``best`` (priced by the
    evaluator), and a summary for ``info``.

    Run after site branching when that leaves the best plan unproven
    (``memetic_after_share``, on by default), and optionally before it
    (``memetic_share``), whose nodes close sooner under a better incumbent, and
    before the site-path plans: at metro N=64 L=48 (instance seeds 401 at lambda 0.5 and
    179 at lambda 1) the start plans were 0.677159 and 515.707; the MILP's bound phase,
    branching and HiGHS ended 60 s at 0.674251 and 512.443, while this found 0.669474 and
    511.370 in 3.2 s and 2.7 s (the sequence search of
    :func:`formulations.milp.start.search_from` stopped at 0.67047 and 512.972). From the
    site-path plan of 512.443 instead, it found nothing better, with restarts or without.

    Off by default (``memetic_share=0``): in 120 s runs the MILP without it ended with the
    same plans and gaps on those two instances (branching and HiGHS found the plans later),
    and it proved four others 4-12 s later with it (``bench/milp_memetic.py``).
    """
    from formulations.milp.start import best_plan  # formulations.milp imports this module
    from geoplan.solving.core import solve

    t0 = time.perf_counter()
    res = solve(instance, "memetic", seed=options.seed, time_limit=max(seconds, 1e-3),
                threads=1, params={"stop": "paper"}, warm_start=[best[0]], callbacks=None,
                warm_up=False)
    summary: dict[str, Any] = {"seconds": round(time.perf_counter() - t0, 4), "from": best[1],
                               "to": res.objective}
    if not isinstance(res.plan, Plan) \
            or res.plan.micro_batch_size not in (None, instance.training.micro_batch_size):
        return None, summary
    found = best_plan(instance, [res.plan])  # priced (and checked) by the evaluator
    return (found if found is not None and found[1] < best[1] else None), summary


def subset_instance(instance: Instance, labels: Sequence[int]) -> Instance | None:
    """The instance restricted to the GPUs of the given clusters (site labels of
    :func:`geoplan.cost.bounds.clusters`); None unless that is a proper, non-empty part."""
    cl = bounds.clusters(instance)
    keep = np.isin(cl, np.asarray(labels, np.int64))
    if not keep.any() or keep.all():
        return None
    try:
        return instance.subset([g.id for g, k in zip(instance.gpus, keep, strict=True) if k])
    except InputError:  # those GPUs cannot hold the model
        return None


def improve_on_site_subsets(
    instance: Instance,
    site_sets: Sequence[Sequence[int]],
    incumbent: tuple[Plan, float] | None,
    seconds: float,
    *,
    seed: int,
    threads: int,
    stopped: Callable[[], bool],
    max_sets: int = 2,
) -> tuple[tuple[Plan, float] | None, dict[str, list[dict[str, object]]]]:
    """The best plan of the ``milp`` solver on each site subset (at most ``max_sets``,
    in order, within ``seconds`` in all), if better than ``incumbent``; and a summary
    for the caller's info (per set: its sites, GPUs, status, objective, lower bound,
    seconds).

    A set proven optimal (or found no better) hands its unused time to the next.
    The plan returned is priced on the whole instance.
    """
    from geoplan.solving.core import solve

    end = time.perf_counter() + max(seconds, 0.0)
    best = incumbent
    tried: list[dict[str, object]] = []
    names = bounds.site_names(instance) or []
    subsets = [(sub, [names[x] for x in s]) for sub, s in (
        (subset_instance(instance, s), s) for s in site_sets[:max_sets]) if sub is not None]
    for k, (sub, sites) in enumerate(subsets):
        left = end - time.perf_counter()
        share = left / (len(subsets) - k)
        if share < 0.5 or stopped():
            break
        starts = [] if best is None else [best[0]]
        starts = [p for p in starts if all(st.gpu in sub.gpu_index for st in p.stages)]
        t = time.perf_counter()
        r = solve(sub, "milp", seed=seed, time_limit=share, threads=threads, warm_up=False,
                  warm_start=starts or None, params={"site_subsets": False})
        row: dict[str, object] = {"sites": sites, "gpus": sub.n, "status": r.status,
                                  "objective": r.objective, "lower_bound": r.lower_bound,
                                  "seconds": round(time.perf_counter() - t, 3)}
        tried.append(row)
        if r.plan is None or not isinstance(r.plan, Plan):
            continue
        ev = evaluate(instance, r.plan)
        if ev.feasible and (best is None or ev.objective < best[1]):
            best = (r.plan, float(ev.objective))
            row["improved"] = True
    return (best if best is not incumbent else None), {"sets": tried}


def after_bound(instance: Instance, options: SolveOptions, params: SiteSearchParams,
                bound_share: float, pb: ParametricBound, best: tuple[Plan, float] | None,
                trace: list[TraceRow], info: dict[str, Any], classes_solved: bool = False,
                ) -> tuple[ParametricBound, tuple[Plan, float] | None, bool]:
    """An exact solver's steps after its parametric bound ``pb`` (which does not prove
    ``best``): when site branching is to follow, the memetic algorithm from ``best``
    (:func:`memetic_from`) within ``params.memetic_share`` of the budget left; plans from
    its least boxes on site paths (``params.site_paths``;
    :func:`formulations.site_paths.improve_on_site_paths`) within
    ``params.site_paths_share`` of the budget left; the site-subset search
    (``params.site_subsets``) on the bound's first site set within
    :data:`_FIRST_SUBSET_SHARE` of the budget left; branching on sites
    (``params.site_branching``; :func:`geoplan.cost.parametric.refine_by_sites`) within
    ``params.site_branching_share`` of the budget left (node searches in ``options.threads``
    processes), which may also find a better plan; then, unless that proves the best plan,
    the memetic algorithm from the best plan within ``params.memetic_after_share`` of the
    budget left, the site-path search again on branching's open site sets not searched
    before (``ParametricBound.open_sets``) within ``params.site_paths_share`` of the budget
    left, and the site-subset search on the other site sets within
    ``params.site_subsets_share`` of what is left (skipped by a solver that solves
    branching's classes itself, ``classes_solved``, when each has at most
    :data:`_CLASS_SITES` sites). Improvements are traced and ``info`` gets ``memetic``,
    ``memetic_after``, ``site_paths``, ``site_paths_after``, ``site_subsets`` (the sets
    searched before branching marked ``before_branching``) and the bound's summary.
    Returns (the bound, the best plan, whether the bound proves it)."""
    subset_share = params.site_subsets_share if params.site_subsets else 0.0
    rerun_share = bound_share
    branch_share = params.site_branching_share if params.site_branching else 0.0
    subset_rows: list[dict[str, object]] = []
    solved: list[tuple[int, ...]] = []  # the site sets solved to the end before branching

    def record() -> None:  # the best plan and bound now, in the trace and the callbacks
        inc = None if best is None else best[1]
        shown = pb.floor if math.isfinite(pb.floor) else None
        trace.append(TraceRow(options.elapsed(), inc, shown))
        options.callbacks.on_improvement(options.elapsed(), inc, shown)

    def rerun() -> None:
        """``pb`` replaced by a search run again with the better ``best`` if ``pb``'s was
        cheap (traced):
        close to the incumbent it splits finer, and the last digits decide a proof (cloud
        N=512 L=128 seed 5: 1.3e-7 short, then proven, in 11 s). Its open boxes are kept
        when it ends (each plan better than the incumbent lies in one of them; branching
        starts from them), with the higher of the two values: at metro N=64 L=48 lambda 1
        (instance seed 149) branching from the boxes of the first search, split for a
        0.4 % worse plan, was 0.18 % short after 83 s, from the second's it proves in
        67 s, though the second's value was lower in the seventh digit."""
        nonlocal pb
        if best is None or pb.seconds > _RERUN_SHARE * options.remaining():
            return
        again = instance_bound(instance, best[1], rerun_share, options.remaining(),
                               options.stopped, workers=options.threads)
        if again.value > pb.value or again.exhausted:
            pb = replace(again, value=max(again.value, pb.value))
            info["parametric"] = pb.summary()
            record()

    def take(found: tuple[Plan, float]) -> bool:
        """``found`` (better) becomes the best plan, traced; whether the bound proves it,
        run again first if that is cheap (:func:`rerun`)."""
        nonlocal best
        best = found
        record()
        if proves(pb.floor, best[1]):
            return True
        rerun()
        return proves(pb.floor, best[1])

    if pb.plan is not None:
        # A plan the bound's own search found (the node-run bound's minimisers are plans).
        plan = Plan.from_pairs(pb.plan)
        ev = evaluate(instance, plan)
        if ev.feasible and (best is None or ev.objective < best[1]):
            best = (plan, float(ev.objective))
            record()
            if proves(pb.floor, best[1]):
                return pb, best, True
    if branch_share > 0 and params.memetic_share > 0 and best is not None \
            and not options.stopped():
        better, info["memetic"] = memetic_from(instance, options, best,
                                               params.memetic_share * options.remaining())
        if better is not None and take(better):
            return pb, best, True
    paths_tried: set[tuple[int, ...]] = set()  # site sets the path search read to the end
    if params.site_paths and pb.site_sets and not options.stopped():
        found, info["site_paths"] = improve_on_site_paths(
            instance, pb, best, params.site_paths_share * options.remaining(), options.stopped)
        paths_tried = {tuple(x) for x in info["site_paths"]["searched"]}
        if found is not None and take(found):
            return pb, best, True
    if branch_share > 0 and subset_share > 0 and pb.site_sets and not options.stopped():
        better, first = improve_on_site_subsets(
            instance, pb.site_sets[:1], best, _FIRST_SUBSET_SHARE * options.remaining(),
            seed=options.seed, threads=options.threads, stopped=options.stopped, max_sets=1)
        subset_rows += [{**row, "before_branching": True} for row in first["sets"]]
        if any(row["status"] in ("optimal", "infeasible") for row in first["sets"]):
            # Cut by its short time, it is searched again after branching, with more:
            # geo N=128 L=96 lambda 0.5 (instance seed 113), CP-SAT ended 5.5e-4 short
            # when its 16 GPUs' search stopped at 5.7 s and was not taken up again.
            solved.append(tuple(pb.site_sets[0]))
        info["site_subsets"] = {"sets": subset_rows}
        if better is not None:
            best = better
            record()
            rerun()  # its open boxes are where branching starts
            if proves(pb.floor, best[1]):
                return pb, best, True

    def closed_by_subsets() -> bool:
        """Whether a site subset solved to the end holds every class branching left open
        (:func:`subsets_close_classes`); if so, ``pb`` takes its bound (traced)."""
        nonlocal pb
        if not _CLOSE_BY_SUBSETS:
            return False
        bound = subsets_close_classes(instance, pb, subset_rows)
        if bound is None or best is None:
            return False
        value = min(best[1], bound)
        if value > pb.value:
            pb = replace(pb, value=value)
            record()
        info["parametric"] = {**pb.summary(), "closed_by_site_subset": True}
        return True

    if branch_share > 0 and not options.stopped():
        refined = refine_by_sites(instance, pb, None if best is None else best[1],
                                  branch_share, options.remaining(), options.stopped,
                                  workers=options.threads,
                                  apart_back=params.site_branching_back)
        found = None
        if refined.plan is not None:
            plan = Plan.from_pairs(refined.plan)
            ev = evaluate(instance, plan)
            if ev.feasible and (best is None or ev.objective < best[1]):
                found = (plan, float(ev.objective))
        if refined.value > pb.value or found is not None or refined.classes:
            # The classes too: they hold every better plan even when the bound stays.
            pb = refined
            info["parametric"] = pb.summary()
            best = found or best
            record()
        if (best is not None and proves(pb.floor, best[1])) or closed_by_subsets():
            return pb, best, True
        if params.memetic_after_share > 0 and best is not None and not options.stopped():
            # Unproven after branching, the gap is often the plan's: at metro N=64 L=48
            # lambda 0.5 (instance seed 401) the MILP ended at 0.674251 against a bound of
            # 0.666972 (1.08 %), where this finds 0.669474 in about 3 s; a proof before it
            # pays nothing (bench/milp_memetic.py measured the step before branching,
            # which delayed proofs by 4-12 s).
            better, info["memetic_after"] = memetic_from(
                instance, options, best, params.memetic_after_share * options.remaining())
            if better is not None and take(better):
                return pb, best, True
        fresh = tuple(x for x in pb.open_sets if x not in paths_tried)
        if _PATHS_AFTER_BRANCHING and params.site_paths and fresh and not options.stopped():
            # Branching says where better plans can still be; its open sets may use sites
            # no root minimiser does (see site_branching._open_sets: seed 179). After the
            # memetic run: before it, its share of the time left was cut by this one's, and
            # on seed 401 at lambda 0.5 it then missed 0.669474 (0.68 % short, not 0.39 %).
            found, info["site_paths_after"] = improve_on_site_paths(
                instance, replace(pb, site_sets=fresh, node_sets=()), best,
                params.site_paths_share * options.remaining(), options.stopped)
            if found is not None and take(found):
                return pb, best, True
    sets = [x for x in pb.site_sets if tuple(x) not in solved]
    if pb.classes:
        # A set missing a forced site of every class holds no better plan: at metro N=64
        # L=48 lambda 1 (instance seed 461) the one class left used 7 of 8 sites and the
        # search on a set of 6 took 9 s for nothing.
        names = bounds.site_names(instance) or []
        sets = [x for x in sets if any(set(c.forced) <= {names[k] for k in x}
                                       for c in pb.classes)]
    if classes_solved and pb.classes and all(len(c.sites) <= _CLASS_SITES
                                             for c in pb.classes):
        sets = []
    if sets and subset_share > 0 and not options.stopped():
        better, later = improve_on_site_subsets(
            instance, sets, best, subset_share * options.remaining(),
            seed=options.seed, threads=options.threads, stopped=options.stopped)
        subset_rows += later["sets"]
        info["site_subsets"] = {"sets": subset_rows}
        if better is not None:
            best = better
            record()
        if closed_by_subsets():
            return pb, best, True
    return pb, best, best is not None and proves(pb.floor, best[1])


def subsets_close_classes(instance: Instance, pb: ParametricBound,
                          rows: Sequence[dict[str, Any]]) -> float | None:
    """A bound on every plan site branching left open (``pb.classes``: every plan better
    than its incumbent) when a site-subset search solved to the end
    (:func:`improve_on_site_subsets`'s rows: status optimal, or infeasible: no plan) was on
    sites holding every class's: those plans are plans of that subset, bounded by its
    proven bound (its optimum, up to HiGHS's tolerance). None otherwise. At geo N=32 L=32
    lambda 0.5 (instance seed 869) the one class left was on the two sites the search had
    just solved, and CP-SAT then spent 48 s on the whole model without closing it.

    The subset's plans cost what they cost on the whole pool: its objective is the
    instance's, normalisers included (resolved before any solver runs)."""
    if not pb.classes or (needs_normalisers(instance) and 0 < instance.objective.lam < 1):
        return None
    held = set().union(*(c.sites for c in pb.classes))
    bound: float | None = None
    for row in rows:
        sites = row.get("sites")
        if not isinstance(sites, list) or not held <= set(sites):
            continue
        if row["status"] == "infeasible":
            value = math.inf
        elif row["status"] == "optimal" and isinstance(row.get("lower_bound"), float):
            value = float(row["lower_bound"])
        else:
            continue
        bound = value if bound is None else max(bound, value)
    return bound
