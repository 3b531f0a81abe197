"""Start plans for the MILP (``heuristic=True``): cheap plans from the baseline's
rules (:func:`heuristic_plans`), improved with exact layer splits and a local
search (:func:`improve_plan`); :func:`best_plan` picks the best feasible plan of
a list (warm starts included).

The best start becomes the MIP start and its objective bounds the model
(:func:`~formulations.milp.data.prepare`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from geoplan.cost import evaluate
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.result import TraceRow

if TYPE_CHECKING:
    from geoplan.solving.core import SolveOptions

__all__ = ["best_plan", "deferred_start", "heuristic_plans", "heuristic_start", "improve_plan",
           "search_from"]

#: kicks of :func:`search_from` at most, and kicks in a row without a better plan that
#: end it (so that a small pool with a long budget does not spend a share of it)
SEARCH_KICKS = 5_000
SEARCH_PATIENCE = 200


def best_plan(instance: Instance, plans: list[Plan]) -> tuple[Plan, float] | None:
    best: tuple[Plan, float] | None = None
    """The feasible plan of ``plans`` with the lowest evaluator objective, and that
    objective; None if there is none."""
    for p in plans:
        try:
            ev = evaluate(instance, p)
        except InputError:  # unknown ids in a user plan: simply not usable as a start
            continue
        if ev.feasible and (best is None or ev.objective < best[1]):
            best = (p, ev.objective)
    return best


def deferred_start(
    instance: Instance, options: SolveOptions, best: tuple[Plan, float] | None,
    trace: list[TraceRow],
) -> tuple[tuple[Plan, float] | None, tuple[Plan, float] | None]:
    """Run the deferred warm start (:meth:`SolveOptions.deferred_plans`): (best, warm).

    ``warm`` is its best plan the model can take (the instance's micro-batch size), None
    if there is none; ``best`` the better of that and the given ``best``. A better plan
    enters ``trace`` and the callbacks.
    """
    u = instance.training.micro_batch_size
    plans = [p for p in options.deferred_plans() if p.micro_batch_size in (None, u)]
    warm = best_plan(instance, plans) if plans else None
    if warm is not None and (best is None or warm[1] < best[1]):
        best = warm
        trace.append(TraceRow(options.elapsed(), warm[1], None))
        options.callbacks.on_improvement(options.elapsed(), warm[1], None)
    return best, warm


def search_from(
    instance: Instance, options: SolveOptions, best: tuple[Plan, float], seconds: float,
    trace: list[TraceRow],
) -> tuple[Plan, float]:
    """The iterated local search of :mod:`heuristics.sequence_ils` from ``best`` for
    ``seconds`` (generator from ``options.seed``; at most ``SEARCH_KICKS`` kicks, and
    ``SEARCH_PATIENCE`` in a row without a better plan); the better of its plan, priced by the
    shared evaluator, and ``best``. A better plan enters ``trace`` and the callbacks.

    For an exact model whose quick proof attempts failed: a better incumbent is a
    tighter cutoff for the search that follows, and on metro pools the search often
    finds plans that visit a site twice, which the start heuristics do not build.
    """
    import numpy as np

    from geoplan.cost.split import Splitter
    from heuristics.sequence_ils import iterated_polish
    from heuristics.site_order import site_groups

    sp = Splitter(instance)
    groups = site_groups(instance, sp.comp, sp.mem_cap)[1]
    out = iterated_polish(sp, best[0].gpu_indices(instance), groups,
                          np.random.default_rng(options.seed), SEARCH_KICKS,
                          deadline=time.perf_counter() + seconds, stopped=options.stopped,
                          patience=SEARCH_PATIENCE)
    split = sp.split(out.sequence)
    found = None if split is None else best_plan(instance, [split.to_plan(instance)])
    if found is None or not found[1] < best[1]:
        return best
    trace.append(TraceRow(options.elapsed(), found[1], None))
    options.callbacks.on_improvement(options.elapsed(), found[1], None)
    return found


def heuristic_plans(instance: Instance, deadline: float | None = None) -> list[Plan]:
    """Cheap plans from the baseline's rules (infeasible ones are filtered by the caller).

    Every single-GPU plan, the Metis-default plan, the site-order plans of
    :mod:`heuristics.site_order` (Held-Karp over sites with exact splits; about
    0.5 s at N=256), and for each site (and for all GPUs together) its k fastest
    GPUs with a FLOPS-proportional split over the baseline's ordering rules; the
    last part ends at ``deadline`` (``time.perf_counter()``; seconds at N=256).
    """
    from geoplan.cost.baseline import best_order_plan, metis_default_plan
    from heuristics.site_order import site_order_plans

    c = instance.coefficients()
    L = instance.layers
    plans: list[Plan] = []
    for i in range(instance.n):
        if c.fits(i, L, 1, last=True):
            plans.append(Plan.from_indices(instance, [i], [L]))
    base = metis_default_plan(instance)
    if base is not None:
        plans.append(base)
    if deadline is None or time.perf_counter() < deadline:
        plans.extend(p.plan for p in site_order_plans(instance).plans)
    for members in _site_groups(instance):
        ranked = sorted(members, key=lambda i: (c.comp_ms[i], i))
        for k in range(2, min(len(ranked), L) + 1):
            if deadline is not None and time.perf_counter() >= deadline:
                return plans
            found = best_order_plan(instance, ranked[:k], c)
            if found is not None:
                plans.append(Plan.from_indices(instance, found[1], found[2]))
    return plans


def _site_groups(instance: Instance) -> list[list[int]]:
    """All GPUs, then each site's GPUs: the sets whose fastest GPUs the heuristics try."""
    groups: dict[str | None, list[int]] = {None: list(range(instance.n))}
    for i, g in enumerate(instance.gpus):
        groups.setdefault(f"site:{g.site}", []).append(i)
    return list(groups.values())


def improve_plan(
    instance: Instance, plans: list[Plan], deadline: float,
    stopped: Callable[[], bool] | None = None,
) -> tuple[Plan, float] | None:
    """The best of ``plans``, then better sequences with exact splits.

    Uses :class:`geoplan.cost.split.Splitter` (optimal layer split of a fixed GPU
    sequence) when available: the baseline's GPU orders for each site's k fastest
    GPUs (always, a few thousand splits at most), then until ``deadline`` a
    first-improvement local search that removes, inserts, replaces or swaps GPUs
    in the sequence. Returns (plan, evaluator objective). ``deadline`` (and
    ``stopped()``, an interrupt) also end the first part.
    """
    best = best_plan(instance, plans)
    try:
        from geoplan.cost.split import Splitter
    except ImportError:  # pragma: no cover - split is part of the package
        return best
    from geoplan.cost.baseline import candidate_orders

    sp = Splitter(instance)
    c = instance.coefficients()
    sites = [g.site for g in instance.gpus]

    def over() -> bool:
        return time.perf_counter() >= deadline or (stopped is not None and stopped())
    top: tuple[tuple[int, ...], float] | None = None

    def consider(seq: list[int] | tuple[int, ...]) -> bool:
        nonlocal top
        res = sp.split(list(seq))
        if res is not None and (top is None or res.objective < top[1] * (1 - 1e-12)):
            top = (tuple(res.gpus), res.objective)
            return True
        return False

    if best is not None:
        consider(best[0].gpu_indices(instance))
    for members in _site_groups(instance):
        ranked = sorted(members, key=lambda i: (c.comp_ms[i], i))
        for k in range(1, min(len(ranked), instance.layers) + 1):
            if over():
                break
            for order in candidate_orders(c, ranked[:k], sites):
                consider(order)
    improved = top is not None
    while improved and top is not None and not over():
        improved = False
        seq = list(top[0])
        unused = [i for i in range(instance.n) if i not in seq]
        moves: list[list[int]] = []
        moves += [seq[:k] + seq[k + 1 :] for k in range(len(seq)) if len(seq) > 1]
        if len(seq) < instance.layers:
            moves += [[*seq[:k], g, *seq[k:]] for g in unused for k in range(len(seq) + 1)]
        moves += [[*seq[:k], g, *seq[k + 1:]] for g in unused for k in range(len(seq))]
        moves += [
            [*seq[:k], seq[k + 1], seq[k], *seq[k + 2:]] for k in range(len(seq) - 1)
        ]
        for move in moves:
            if consider(move):
                improved = True
                break
            if over():
                break
    if top is None:
        return best
    res = sp.split(list(top[0]))
    assert res is not None
    found = best_plan(instance, [res.to_plan(instance)])
    if found is not None and (best is None or found[1] < best[1]):
        return found
    return best


def heuristic_start(
    instance: Instance, starts: list[Plan], share: float, remaining: float,
    stopped: Callable[[], bool] | None = None,
) -> tuple[Plan, float] | None:
    """The best start plan: ``starts`` and :func:`heuristic_plans`, improved by
    :func:`improve_plan` within ``share`` of ``remaining`` seconds (at least 1 s,
    at most a quarter)."""
    budget = min(max(share * remaining, 1.0), 0.25 * remaining)
    deadline = time.perf_counter() + budget
    return improve_plan(instance, starts + heuristic_plans(instance, deadline), deadline,
                        stopped)
