"""LP bound tightening of the bottleneck (``tighten=True``): :func:`tighten`.

Rounds of LPs over the relaxation of the full model, each raising ``tmax_lb``
and rebuilding the cuts of :func:`~formulations.milp.cuts.add_lb_cuts` from it,
then probing (:func:`_probe`) with the integer consequences of a cap on the
bottleneck. Every raised bound is valid for every plan the model admits.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pyomo.environ as pyo

from formulations.milp.cuts import add_lb_cuts
from formulations.milp.data import MilpData
from formulations.milp.model import BuildAbandoned, build_model
from formulations.milp.tolerances import LP_TOLERANCE, build_estimate
from geoplan.cost import bounds

__all__ = ["tighten"]


def tighten(
    data: MilpData,
    deadline: float,
    max_rounds: int = 60,
    min_gain: float = 1e-3,
    threads: int = 1,
    probe: bool = True,
    check: Callable[[str], None] | None = None,
    stopped: Callable[[], bool] | None = None,
) -> tuple[MilpData, int]:
    """Raise ``tmax_lb`` with LPs over the relaxation of the model.

    1. Rounds: minimise tmax over the LP with cuts built from the current valid
       bound; the optimum (less a tolerance) is again a valid bound for every
       plan the model admits. Until a round gains less than ``min_gain``.
    2. Probing (``probe``): bisect on theta, asking whether the LP stays
       feasible when tmax <= theta, with the integer consequences of that
       added: GPU i then holds at most floor((theta - c_i) / comp_i) layers
       (c_i its cheapest link, or its two cheapest if it is neither first nor
       last) and arcs of weight above theta are unused. Feasibility only grows
       with theta, so an infeasible theta is a valid bound. Then rounds again.

    Stops after ``max_rounds`` LPs, at ``deadline`` (``time.perf_counter()``) or
    once ``stopped()``; ``check`` goes to :func:`build_model` (an abandoned build
    returns ``data`` unchanged). Returns the tightened data and the number of LPs
    solved.
    """
    from pyomo.contrib.solver.solvers.highs import Highs as PyomoHighs

    from formulations.highs_tools import reset_scheduler

    if deadline - time.perf_counter() < build_estimate(data):
        return data, 0  # the LP model would not even be built and translated in time
    try:
        m = build_model(data.instance, data=data, symmetry=True, cuts=True, check=check)
    except BuildAbandoned:
        return data, 0
    pyo.TransformationFactory("core.relax_integer_vars").apply_to(m)
    m.obj.deactivate()
    m.lp_obj = pyo.Objective(expr=m.tmax)
    opt = PyomoHighs()
    lb = data.tmax_lb
    rounds = 0
    reset_scheduler()

    def lp() -> Any:
        nonlocal rounds
        rounds += 1
        return opt.solve(
            m,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            time_limit=max(deadline - time.perf_counter(), 1e-3),
            threads=threads,
        )

    def more() -> bool:
        return (rounds < max_rounds and time.perf_counter() < deadline
                and not (stopped is not None and stopped()))

    def raise_to(new: float) -> None:
        nonlocal lb
        lb = min(new, data.tmax_ub)
        m.tmax.setlb(lb)
        add_lb_cuts(m, lb)

    def lp_rounds() -> None:
        while more():
            res = lp()
            if (
                res.termination_condition.name != "convergenceCriteriaSatisfied"
                or res.incumbent_objective is None
            ):
                # Infeasible, out of time, or no value reported: keep the last valid bound.
                return
            value = float(res.incumbent_objective)
            new = value - LP_TOLERANCE * max(1.0, abs(value))
            if new <= lb * (1 + min_gain):
                if new > lb:
                    raise_to(new)
                return
            raise_to(new)

    lp_rounds()
    if probe and more():
        found = _probe(m, data, lb, lp, more)
        if found > lb * (1 + min_gain):
            raise_to(found)
            lp_rounds()
    if hasattr(m, "probe"):
        m.del_component(m.probe)
    if lb <= data.tmax_lb:
        return data, rounds
    M = float(data.instance.coefficients().micro_batches)
    return replace(data, tmax_lb=lb, t_lb=max(data.t_lb, M * lb)), rounds


def _probe(m: pyo.ConcreteModel, data: MilpData, lb: float, lp: Any, more: Any) -> float:
    """Bisection of :func:`tighten`, step 2; returns the largest theta proved infeasible."""
    inst = data.instance
    c = inst.coefficients()
    comp, L = c.comp_ms, inst.layers
    both = np.isfinite(c.comm_ms) & np.isfinite(c.comm_ms.T)
    cheap1: dict[int, float] = {}
    cheap2: dict[int, float] = {}
    for i in data.gpus:
        links = np.sort(c.comm_ms[i, both[i]])
        cheap1[i] = float(links[0]) if links.size else math.inf
        cheap2[i] = float(links[:2].sum()) if links.size >= 2 else math.inf
    o = float(c.overhead_ms)
    # A single-GPU plan with a bottleneck <= theta answers "feasible" without an LP.
    single = min(
        (L * comp[i] + o for i in data.gpus if data.cap_last[i, 1] >= L), default=math.inf
    )

    def cap(theta: float, extra: float, i: int) -> int:
        # geoplan.cost.bounds.layers_within, its links at least ``extra``, plus o; a
        # 1e-9 relative slack on theta keeps the cap on the generous (valid) side.
        return bounds.layers_within(theta * (1 + 1e-9), extra + o, float(comp[i]), data.n_ub[i])

    def feasible(theta: float) -> bool | None:
        if theta >= single:
            return True
        if hasattr(m, "probe"):
            m.del_component(m.probe)
        b = pyo.Block()
        m.probe = b
        h1 = {i: cap(theta, cheap1[i], i) for i in data.gpus}
        h2 = {i: cap(theta, cheap2[i], i) for i in data.gpus}
        # Every plan with tmax <= theta has at least two stages here.
        b.ends = pyo.Constraint(m.I, rule=lambda _, i: m.n[i] <= h1[i] * m.y[i])
        b.middle = pyo.Constraint(
            m.I, rule=lambda _, i: m.n[i] <= h2[i] + (h1[i] - h2[i]) * (m.first[i] + m.last[i])
        )
        b.top = pyo.Constraint(expr=m.tmax <= theta)
        heavy = [e for e in data.arcs if data.arc_weight(*e) > theta]
        b.arcs = pyo.Constraint(heavy, rule=lambda _, i, j: m.a[i, j] == 0)
        res = lp()
        name = res.termination_condition.name
        if name == "convergenceCriteriaSatisfied":
            return True
        if name in ("provenInfeasible", "infeasibleOrUnbounded"):
            return False
        return None  # out of time or trouble: decide nothing

    lo, hi = lb, data.tmax_ub
    while more() and hi - lo > 1e-4 * max(1.0, lo):
        mid = 0.5 * (lo + hi)
        ok = feasible(mid)
        if ok is None:
            break
        if ok:
            hi = mid
        else:
            lo = mid
    return lo * (1 - LP_TOLERANCE)
