"""The bounds the MILP puts on its variables: upper bounds on T_iter (worst case,
or from a known plan's objective) and lower bounds on the bottleneck and T_iter.

Each is one of :mod:`geoplan.cost.bounds` (which holds the proofs), applied to
the GPUs that can hold a layer; :func:`~formulations.milp.data.prepare` turns
them into the bounds of ``tmax``, ``t`` and the layer counts, and
:mod:`formulations.milp.tightening` raises the bottleneck bound further with LPs.
"""

from __future__ import annotations

import math

import numpy as np

from formulations.milp.tolerances import BOUND_SLACK
from geoplan.cost import bounds
from geoplan.model.instance import Instance

__all__ = ["lower_bounds", "upper_bounds"]


def upper_bounds(
    instance: Instance, usable: list[int], kmax: int, incumbent_objective: float | None,
    c_t: float, c_e: float,
) -> tuple[float, float]:
    """(worst-case bottleneck, T_iter upper bound) in ms.

    The T_iter bound holds for every plan at least as good as
    ``incumbent_objective`` (objective weights ``c_t``, ``c_e``) or, without it,
    for every plan of at most ``kmax`` stages on the ``usable`` GPUs.
    """
    c = instance.coefficients()
    L = instance.layers
    M = float(c.micro_batches)
    comp = c.comp_ms
    finite = np.isfinite(c.comm_ms) & np.isfinite(c.comm_ms.T)
    max_comm = float(np.max(c.comm_ms[finite])) if finite.any() else 0.0

    # Worst case over all plans (geoplan.cost.bounds): every stage at most L
    # layers on the slowest GPU plus two transfers and the overhead.
    slowest = float(max(comp[usable]))
    o = float(c.overhead_ms)
    tmax_wc = bounds.tmax_worst(slowest, max_comm, L, o)
    t_ub = bounds.t_iter_worst(slowest, max_comm, L, kmax, M, o)
    if incumbent_objective is not None and math.isfinite(incumbent_objective):
        # objective >= c_t T + c_e (T idle_min + M L min(dyn comp)) / 1000.
        idle_min = float(min(c.idle_w[usable]))
        dyn_min = float(min(c.dyn_w[i] * comp[i] for i in usable))
        t_inc = bounds.t_iter_cap(incumbent_objective, c_t, c_e, idle_min, dyn_min, M, L)
        if math.isfinite(t_inc):
            t_ub = min(t_ub, t_inc * (1 + BOUND_SLACK) + 1e-9)
    return tmax_wc, t_ub


def lower_bounds(
    instance: Instance, usable: list[int], cap_any: np.ndarray, cap_last: np.ndarray,
    tmax_wc: float,
) -> tuple[float, float]:
    """Lower bounds (ms) on the bottleneck and on T_iter of every plan; (inf, inf) if none exists.

    The bottleneck bound is the larger of :func:`geoplan.cost.bounds.capacity_bound`
    and the smallest per-Q bound of :meth:`geoplan.cost.bounds.Relaxation.tmax_bounds`;
    the T_iter bound the smallest per-Q :func:`geoplan.cost.bounds.t_iter_bounds`.
    Both are valid for every plan (see those functions), overhead included.
    """
    c = instance.coefficients()
    L = instance.layers
    cap_b = bounds.capacity_bound(c.comp_ms, c.comm_ms, float(c.overhead_ms), usable, cap_any,
                                  cap_last[:, 1], L)
    relax = bounds.Relaxation.from_coefficients(c, L, bounds.clusters(instance))
    tlb = relax.tmax_bounds(tmax_wc)
    if not tlb:
        return math.inf, math.inf
    tmax_lb = max(cap_b, min(tlb.values())) if math.isfinite(cap_b) else min(tlb.values())
    t_lb = bounds.t_iter_bounds(tlb, relax.sum_bounds(sorted(tlb)), float(c.micro_batches))
    return float(tmax_lb), float(min(t_lb.values()))

