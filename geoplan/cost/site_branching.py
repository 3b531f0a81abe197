"""Branching on sites: the parametric bound on parts of the plan space by the sites used.

The relaxation of :mod:`geoplan.cost.parametric` prices every run end's send at its
GPU's cheapest inter-site link and caps the stage by it, whatever sites the rest of
the configuration uses. Its minimiser may lean on a site it does not use: at metro
N=128 L=96 lambda 1 (instance seed 71) the least box's minimiser used three sites,
whose end GPUs' cheapest links lead to two others; the bound was 399.5, and 405.1
with those two sites removed, against a best plan of 407.2.

So the plans are partitioned by sites. A node is (allowed sites A, forced sites F):
the plans whose sites lie in A and include F. Its bound is the parametric search on
the pool restricted to A (prices from A's links only) with F forced (each must be
used); both are exact restrictions of the plans counted, so the bound holds for
every plan of the node, and a child keeps its parent's bound when its own search
finds less. A node whose minimiser leaves sites s_1..s_k of A unused and unforced
(ordered by their cheapest round trip to the minimiser's sites: the likeliest to
lend it a cheap link first) splits into k + 1 parts: the plans using none of them
(A - {s_1..s_k}, F), and for each i those whose first used one is s_i
(A - {s_1..s_(i-1)}, F + s_i). A child's search starts from its parent's open boxes
(they hold every plan of the child better than the incumbent). Nodes are taken
least bound first; the bound is the least over the open nodes.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from geoplan.cost import bounds, transitions
from geoplan.cost.parametric import Box, ParametricBound, parametric_bound, proves
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.instance import Instance

__all__ = ["SiteBranching", "branch_on_sites"]

#: A child search gets at least this many seconds, or it is not started.
_MIN_NODE_S = 0.5


@dataclass(frozen=True)
class SiteBranching:
    """What :func:`branch_on_sites` proved: every plan's objective is >= ``value``."""

    value: float
    nodes: int  #: node searches run (the root's not counted)
    open_nodes: int
    seconds: float
    #: The sites (names) of the least open node's minimiser, for primal searches.
    sites: tuple[str, ...] = ()

    def summary(self) -> dict[str, object]:
        return {"bound": self.value, "nodes": self.nodes, "open_nodes": self.open_nodes,
                "seconds": round(self.seconds, 3)}


def _node_bound(instance: Instance, allowed: frozenset[str], forced: frozenset[str],
                incumbent: float | None, deadline: float, stop: Callable[[], bool] | None,
                start: tuple[Box, ...] | None) -> tuple[ParametricBound, list[str]]:
    """The parametric search on the plans of one node; and the subset's site names by label."""
    ids = [g.id for g in instance.gpus if g.site in allowed]
    sub = instance.subset(ids)
    names = bounds.site_names(sub) or []  # cluster label k is names[k]
    pb = parametric_bound(sub.coefficients(), sub.layers, bounds.clusters(sub),
                          ObjectiveWeights.from_instance(sub), incumbent=incumbent,
                          deadline=deadline, stop=stop,
                          forced=tuple(names.index(s) for s in sorted(forced)), start=start)
    return pb, names


def branch_on_sites(instance: Instance, root: ParametricBound, incumbent: float | None,
                    deadline: float, stop: Callable[[], bool] | None = None) -> SiteBranching:
    """Refine ``root`` (the search on the whole instance) by branching on sites until
    ``deadline`` (``time.perf_counter()``) or ``stop()``; the value is proven, and at
    least ``root.value``."""
    t0 = time.perf_counter()
    root_names = bounds.site_names(instance)  # cluster label k is root_names[k]
    if root_names is None or len(root_names) < 3 or not root.site_sets:
        return SiteBranching(root.value, 0, 1, 0.0)
    all_sites = frozenset(root_names)
    ub = math.inf if incumbent is None else float(incumbent)
    # Round trips between sites (least over their GPUs), for the choice of the split site.
    trip, _, _ = transitions.site_links(np.asarray(instance.coefficients().comm_ms),
                                        bounds.clusters(instance))

    def used_sites(pb: ParametricBound, names: list[str]) -> frozenset[str]:
        return frozenset(names[k] for k in pb.site_sets[0]) if pb.site_sets else frozenset()

    # Heap entries: (bound, tie, allowed, forced, the minimiser's sites).
    heap: list[tuple[float, int, frozenset[str], frozenset[str], frozenset[str]]] = []
    counter = 0
    heapq.heappush(heap, (root.value, counter, all_sites, frozenset(),
                          used_sites(root, root_names)))
    nodes = 0
    final: list[tuple[float, frozenset[str]]] = []  # nodes that cannot be split
    boxes: dict[int, tuple[Box, ...]] = {0: root.open_boxes}  # open boxes by heap tie
    idx = {s: k for k, s in enumerate(root_names)}
    while heap:
        value, tie, allowed, forced, used = heap[0]
        if value >= ub or proves(value, ub):
            break
        free = sorted(allowed - used - forced,
                      key=lambda x: (min((trip[idx[u], idx[x]] for u in used), default=0.0), x))
        if not used or not free:
            heapq.heappop(heap)
            final.append((value, used))
            continue
        if (stop is not None and stop()) or deadline - time.perf_counter() < 2 * _MIN_NODE_S:
            break
        heapq.heappop(heap)
        start = boxes.pop(tie, None)
        parts = [(allowed - set(free), forced)]
        parts += [(allowed - set(free[:i]), forced | {x}) for i, x in enumerate(free)]
        for child_allowed, child_forced in parts:
            counter += 1
            if deadline - time.perf_counter() < _MIN_NODE_S:
                # No time for this child: it keeps its parent's bound.
                heapq.heappush(heap, (value, counter, child_allowed, child_forced, frozenset()))
                continue
            pb, names = _node_bound(instance, child_allowed, child_forced,
                                    None if not math.isfinite(ub) else ub, deadline, stop,
                                    start)
            nodes += 1
            v = max(pb.value, value)
            if v < ub:
                heapq.heappush(heap, (v, counter, child_allowed, child_forced,
                                      used_sites(pb, names)))
                boxes[counter] = pb.open_boxes
    leaves = [v for v, *_ in heap] + [v for v, _ in final]
    value = min(leaves, default=ub)
    least_sites: frozenset[str] = frozenset()
    if heap or final:
        pool = [(v, u) for v, _, _, _, u in heap] + final
        least_sites = min(pool, key=lambda t: t[0])[1]
    return SiteBranching(float(max(value, root.value)), nodes, len(leaves),
                         time.perf_counter() - t0, tuple(sorted(least_sites)))
