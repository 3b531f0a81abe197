"""A primal search guided by the parametric bound: the relaxed minimisers of its least
boxes, restricted to one order of the sites (or nodes) they use.

The root search of :mod:`geoplan.cost.parametric` ends with open boxes (a stage-count
range and a narrow bottleneck range each) and the sites its least boxes' minimisers
use (``ParametricBound.site_sets``). Restricted to the plans that visit those sites
once each in a given order, a box's relaxed minimiser is a pipeline
(:func:`~geoplan.cost.parametric.path_plan`): one run per site, every send priced by
the site it goes to, every stage within the box's bottleneck cap. One multiplier
search per (box, order) gives such a plan, priced here by the evaluator.

Why: on metro N=128 L=96 lambda 0.5 (instance seed 109) the MILP, the sliced MILP and
CP-SAT all ended at 0.508578 after 120 s, 1.5 % above their bound, and so did the
MILP on the four sites of the least box (the site-subset search), while the minimisers
of the 16 least boxes over the 24 orders of those four sites held a plan of 0.502314
(0.33 % above the same bound). A plan that good also lets branching close more.

Where the bound ran on two levels (:func:`~geoplan.cost.parametric.two_level_bound`, sites
that hold nodes) and its least part is one site, the same is done one level down: the
node groups that part's minimisers use, in each order (``ParametricBound.node_sets``).
On cloud N=512 L=128 lambda 1 (instance seed 5) every solver's plan was 158.048; the 120
orders of the five nodes of the least region held 157.509 (3.4 s), which the bound, run
again with it, proved optimal.

Orders are tried cheapest round trip first (at most :data:`MAX_ORDERS`), and boxes
least first, each box over every order before the next box, so that a short budget
covers the most promising boxes.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator

import numpy as np

from geoplan.cost import bounds, transitions
from geoplan.cost.evaluate import evaluate
from geoplan.cost.parametric import ParametricBound, box_tables, path_minimisers, path_plan
from geoplan.cost.weights import ObjectiveWeights
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

__all__ = ["MAX_BOXES", "MAX_ORDERS", "improve_on_site_paths", "site_orders"]

#: At most this many orders of one site set are tried.
MAX_ORDERS = 120
#: At most this many of the least open boxes are read.
MAX_BOXES = 16
#: At most this many of the bound's site sets are tried.
MAX_SETS = 2


def site_orders(trip: np.ndarray, limit: int = MAX_ORDERS) -> list[tuple[int, ...]]:
    """The orders of the sites 0..k-1 (k = ``trip``'s size), by the sum of the round
    trips (``trip[a, b]``) along each, cheapest first (ties by order), at most ``limit``;
    orders through a pair with no round trip are left out."""
    k = trip.shape[0]
    if k > 8:  # 9! orders: rank only the orders of the nearest-neighbour kind
        perms: Iterator[tuple[int, ...]] = (_nearest_first(trip, s) for s in range(k))
    else:
        perms = itertools.permutations(range(k))
    scored = []
    for p in perms:
        cost = float(sum(trip[a, b] for a, b in itertools.pairwise(p)))
        if math.isfinite(cost):
            scored.append((cost, p))
    scored.sort()
    out: list[tuple[int, ...]] = []
    for _, p in scored:
        if p not in out:
            out.append(p)
        if len(out) >= limit:
            break
    return out


def _nearest_first(trip: np.ndarray, start: int) -> tuple[int, ...]:
    """The order from ``start`` that always goes on to the nearest unvisited site."""
    order = [start]
    left = set(range(trip.shape[0])) - {start}
    while left:
        nxt = min(left, key=lambda b: (trip[order[-1], b], b))
        order.append(nxt)
        left.remove(nxt)
    return tuple(order)


def _pools(instance: Instance, pb: ParametricBound
           ) -> list[tuple[tuple[int, ...], Instance, np.ndarray]]:
    """Per site set of ``pb`` (two or more sites), or per node set of one site
    (``pb.node_sets``, the two-level search's), the set, the pool restricted to it and the
    cluster label of each of its GPUs (its site, or its node group)."""
    names = bounds.site_names(instance)
    if names is None:
        return []
    cluster = bounds.clusters(instance)
    groups: np.ndarray | None = None
    nodes = dict(pb.node_sets)
    out: list[tuple[tuple[int, ...], Instance, np.ndarray]] = []
    for labels in pb.site_sets:
        if len(labels) >= 2:
            keep = np.isin(cluster, np.asarray(labels, np.int64))
        elif labels and nodes.get(labels[0]) and len(nodes[labels[0]][0]) >= 2:
            if groups is None:
                groups = bounds.node_groups(np.asarray(instance.coefficients().comm_ms),
                                            cluster)
            if groups is None:
                continue
            keep = (cluster == labels[0]) & np.isin(
                groups, np.asarray(nodes[labels[0]][0], np.int64))
        else:
            continue
        try:
            sub = instance if keep.all() else instance.subset(
                [g.id for g, k in zip(instance.gpus, keep, strict=True) if k])
        except InputError:  # those GPUs cannot hold the model
            continue
        if len(labels) >= 2:
            out.append((labels, sub, bounds.clusters(sub)))
        else:
            assert groups is not None
            out.append((labels, sub,
                        np.unique(groups[keep], return_inverse=True)[1].astype(np.int64)))
    return out


def improve_on_site_paths(
    instance: Instance,
    pb: ParametricBound,
    incumbent: tuple[Plan, float] | None,
    seconds: float,
    stopped: Callable[[], bool],
) -> tuple[tuple[Plan, float] | None, dict[str, object]]:
    """The best plan the path-restricted minimisers of ``pb``'s least open boxes form
    (module docstring), if better than ``incumbent``, within ``seconds``; and a summary
    for the caller's info (site sets begun, those searched to the end (``searched``,
    cluster labels), orders, minimisers read, plans priced, seconds).

    Each site set is searched on the pool restricted to its sites (the same plans,
    priced on the whole instance)."""
    t0 = time.perf_counter()
    end = t0 + max(seconds, 0.0)

    def out_of_time() -> bool:
        return time.perf_counter() >= end or stopped()

    best = incumbent
    n_sets = n_orders = n_minimisers = n_plans = 0
    boxes = pb.open_boxes[:MAX_BOXES]
    pools = _pools(instance, pb) if boxes else []
    searched: list[list[int]] = []
    for labels, sub, cluster in pools[:MAX_SETS]:
        if out_of_time():
            break
        c = sub.coefficients()
        trip, _, _ = transitions.site_links(np.asarray(c.comm_ms), cluster)
        orders = site_orders(trip)
        n_sets += 1
        n_orders += len(orders)
        tables = box_tables(c, sub.layers, cluster)
        weights = ObjectiveWeights.from_instance(sub)
        # One generator per order, advanced in turn: each box over every order first.
        searches = [(p, path_minimisers(c, sub.layers, cluster, weights, p, boxes, tables))
                    for p in orders]
        while searches and not out_of_time():
            alive = []
            for p, gen in searches:
                config = None if out_of_time() else next(gen, None)
                if config is None:
                    continue
                alive.append((p, gen))
                n_minimisers += 1
                pairs = path_plan(config, cluster, p)
                if pairs is None:
                    continue
                plan = Plan.from_indices(sub, [g for g, _ in pairs], [n for _, n in pairs])
                ev = evaluate(instance, plan)
                n_plans += 1
                if ev.feasible and (best is None or ev.objective < best[1]):
                    best = (plan, float(ev.objective))
            searches = alive
        if not searches:  # every order's minimisers read: not cut off by the clock
            searched.append(list(labels))
    summary: dict[str, object] = {"sets": n_sets, "searched": searched, "orders": n_orders,
                                  "minimisers": n_minimisers, "plans": n_plans,
                                  "seconds": round(time.perf_counter() - t0, 3)}
    if best is not incumbent and best is not None:
        summary["objective"] = best[1]
    return (best if best is not incumbent else None), summary
