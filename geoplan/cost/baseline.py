"""The deterministic Metis-default baseline (paper 6.2) and its building blocks.

Rules, in the spirit of Metis restricted to pipeline parallelism (one GPU per
stage, network-agnostic partitioning, energy off):

1. Use every usable GPU, as many as the layers allow: the min(N, L) GPUs of
   highest effective FLOPS (ties by input order).
2. Split the layers in proportion to effective FLOPS (largest remainder, at
   least one layer each), then repair for memory by moving excess layers to the
   GPU with headroom whose stage would then be the fastest.
3. Order the stages by a few fixed rules (site-grouped by FLOPS; greedy
   nearest-neighbour chains on link time from every start; each also
   reversed) and keep the order with the smallest T_iter.
4. If no order is feasible, drop the slowest GPU and repeat.

The improved variant (GPU-subset search) lives in :mod:`heuristics.metis` and
reuses :func:`proportional_split` and :func:`best_order_plan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from geoplan.cost import kernel
from geoplan.cost.coefficients import Coefficients
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

if TYPE_CHECKING:
    from geoplan.solving.result import Outcome

__all__ = [
    "best_order_plan",
    "candidate_orders",
    "metis_default_plan",
    "proportional_split",
    "time_only_cost",
]


def proportional_split(
    weights: Sequence[float] | np.ndarray, layers: int, caps: Sequence[int] | None = None
) -> list[int] | None:
    """Layer counts proportional to ``weights`` (>= 1 each), repaired to ``caps``.

    Returns None when the caps cannot hold ``layers`` with one layer each.
    """
    w = np.asarray(weights, dtype=float)
    k = len(w)
    if k == 0 or k > layers:
        return None
    cap = np.full(k, layers, dtype=np.int64) if caps is None else np.asarray(caps, np.int64)
    if np.any(cap < 1) or int(cap.sum()) < layers:
        return None
    # One layer each, the rest by largest remainder.
    share = w / w.sum() * (layers - k)
    n = np.floor(share).astype(np.int64)
    rest = layers - k - int(n.sum())
    order = np.lexsort((np.arange(k), -(share - n)))
    n[order[:rest]] += 1
    n += 1
    # Memory repair: move each excess layer to where it would run fastest.
    while True:
        over = np.flatnonzero(n > cap)
        if over.size == 0:
            break
        i = int(over[0])
        excess = int(n[i] - cap[i])
        n[i] = cap[i]
        for _ in range(excess):
            room = np.flatnonzero(n < cap)
            t_after = (n[room] + 1) / w[room]
            n[int(room[int(np.argmin(t_after))])] += 1
    return [int(x) for x in n]


def time_only_cost(c: Coefficients, gpus: Sequence[int], counts: Sequence[int]) -> float:
    """T_iter (ms) of a stage list, inf if a link is missing or memory is exceeded.

    Metis ranks candidates by time alone ("energy off"): the kernel's price at
    lambda = 1. The final plan is still priced by :func:`geoplan.cost.evaluate`.
    """
    g = np.asarray(gpus, dtype=np.int64)
    n = np.asarray(counts, dtype=np.int64)
    _, _, _, obj = kernel.price_stages_compiled(g, n, len(g), *c.kernel_args,
                                                kernel.MODE_TIME, 1.0, 1.0, 1.0)
    return float(obj)


def candidate_orders(c: Coefficients, gpus: Sequence[int], sites: Sequence[str | None]) -> list[
    list[int]
]:
    """The fixed ordering rules: site-grouped by FLOPS, and greedy link-time chains."""
    gpus = list(gpus)
    speed = 1.0 / c.comp_ms
    site_of = {g: sites[g] or "" for g in gpus}
    site_total: dict[str, float] = {}
    for g in gpus:
        site_total[site_of[g]] = site_total.get(site_of[g], 0.0) + speed[g]
    grouped = sorted(gpus, key=lambda g: (-site_total[site_of[g]], site_of[g], -speed[g], g))
    orders = [grouped]
    link = c.comm_ms + c.comm_ms.T  # both directions are used by a pipeline edge
    if len(gpus) > 1:
        for start in gpus:
            chain = [start]
            left = set(gpus) - {start}
            while left:
                cand = sorted(left)
                nxt = cand[int(np.argmin(link[chain[-1], cand]))]
                chain.append(nxt)
                left.remove(nxt)
            orders.append(chain)
    out: list[list[int]] = []
    seen: set[tuple[int, ...]] = set()
    for o in orders:
        for cand in (o, o[::-1]):
            if tuple(cand) not in seen:
                seen.add(tuple(cand))
                out.append(cand)
    return out


def best_order_plan(
    instance: Instance, gpus: Sequence[int], c: Coefficients | None = None
) -> tuple[float, list[int], list[int]] | None:
    """Best (T_iter, order, counts) over the ordering rules for a fixed GPU set."""
    c = instance.coefficients() if c is None else c
    q_count = len(gpus)
    L = instance.layers
    best: tuple[float, list[int], list[int]] | None = None
    sites = [g.site for g in instance.gpus]
    mid_caps = c.layer_caps(q_count, last=False)
    last_caps = c.layer_caps(q_count, last=True)
    for order in candidate_orders(c, gpus, sites):
        caps = [min(L, int(mid_caps[g])) for g in order]
        caps[-1] = min(L, int(last_caps[order[-1]]))
        counts = proportional_split(1.0 / c.comp_ms[order], L, caps)
        if counts is None:
            continue
        t = time_only_cost(c, order, counts)
        if np.isfinite(t) and (best is None or t < best[0]):
            best = (t, order, counts)
    return best


def metis_default_plan(instance: Instance) -> Plan | None:
    """The Metis-default plan of the rules above, or None if it finds no feasible plan."""
    c = instance.coefficients()
    speed_rank = sorted(range(instance.n), key=lambda g: (c.comp_ms[g], g))
    gpus = speed_rank[: min(instance.n, instance.layers)]
    while gpus:
        found = best_order_plan(instance, gpus, c)
        if found is not None:
            _, order, counts = found
            return Plan.from_indices(instance, order, counts)
        gpus = gpus[:-1]  # drop the slowest GPU
    return None


def solve_metis_default(instance: Instance, options: object) -> Outcome:
    """Registered solver ``metis-default`` (deterministic; ignores seed and budget)."""
    from geoplan.solving.result import Outcome

    plan = metis_default_plan(instance)
    if plan is None:
        return Outcome(None, "no_solution", message="no feasible plan by the Metis-default rules")
    return Outcome(plan, "feasible")
