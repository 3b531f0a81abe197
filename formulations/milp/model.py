"""The MILP model itself: :func:`build_model` (variables, the rows of docs/milp.md
and the objective) and the build budget (:func:`build_checker`,
:class:`BuildAbandoned`).

The dominance rows come from :mod:`formulations.milp.symmetry`, the valid
inequalities from :mod:`formulations.milp.cuts`; where the rows restate the
cost kernel (``tau``, ``t_def``, the energy) a comment names the kernel
function and ``tests/formulations/test_kernel_pins.py`` pins the two together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyomo.environ as pyo

from formulations.milp.cuts import add_cuts
from formulations.milp.data import MilpData, prepare
from formulations.milp.symmetry import add_dominance_rows
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions

__all__ = ["BuildAbandoned", "build_checker", "build_model"]


class BuildAbandoned(Exception):
    """Building the model ran out of budget or was interrupted (the message says which)."""


def build_checker(options: SolveOptions, what: str) -> Callable[[str], None]:
    """A ``check`` for :func:`build_model`: progress on ``options.callbacks``, and
    :class:`BuildAbandoned` once ``options`` has no time left (or was stopped)."""

    def check(step: str) -> None:
        options.callbacks.on_progress({"building": what, "step": step,
                                       "elapsed": round(options.elapsed(), 3)})
        if options.remaining() <= 0:
            raise BuildAbandoned(options.stop.reason if options.stopped()
                                 else "building exceeded the budget")

    return check


def build_model(
    instance: Instance,
    incumbent_objective: float | None = None,
    *,
    data: MilpData | None = None,
    symmetry: bool = True,
    cuts: bool = True,
    check: Callable[[str], None] | None = None,
) -> pyo.ConcreteModel:
    """The Pyomo model (objective in evaluator units); ``model.data`` holds its :class:`MilpData`.

    ``check(step)`` is called between the blocks of constraints (progress, and
    :class:`BuildAbandoned` to give up when the budget has run out).

    ``incumbent_objective``: the evaluator's objective of a known feasible plan;
    bounds are then tightened to plans at least as good (see :func:`prepare`).
    ``symmetry``: add the dominance constraints. ``cuts``: add the valid
    inequalities of docs/milp.md (perspective, arc and subtour cuts); the model
    is exact without them.
    """
    d = prepare(instance, incumbent_objective) if data is None else data
    c = instance.coefficients()
    comp, comm = c.comp_ms, c.comm_ms
    L, M, K = instance.layers, float(c.micro_batches), d.kmax
    m = pyo.ConcreteModel(name=f"geoplan-milp-{instance.name}")
    m.data = d
    ck = check or (lambda _step: None)

    m.I = pyo.Set(initialize=d.gpus, ordered=True)
    m.A = pyo.Set(initialize=d.arcs, dimen=2, ordered=True)
    m.K = pyo.Set(initialize=range(2, K + 1), ordered=True)
    succ = {i: [j for (a, j) in d.arcs if a == i] for i in d.gpus}
    pred = {i: [a for (a, j) in d.arcs if j == i] for i in d.gpus}
    arc_set = set(d.arcs)

    m.y = pyo.Var(m.I, domain=pyo.Binary)
    m.n = pyo.Var(m.I, domain=pyo.NonNegativeIntegers, bounds=lambda _, i: (0, d.n_ub[i]))
    m.first = pyo.Var(m.I, domain=pyo.Binary)
    m.last = pyo.Var(m.I, domain=pyo.Binary)
    m.a = pyo.Var(m.A, domain=pyo.Binary)
    m.z = pyo.Var(m.K, domain=pyo.Binary)  # z[k] = 1 iff Q >= k
    m.pos = pyo.Var(m.I, bounds=(0, K - 1))
    m.tmax = pyo.Var(bounds=(d.tmax_lb, d.tmax_ub))
    m.t = pyo.Var(bounds=(d.t_lb, d.t_ub))
    ck("variables")

    overhead = float(c.overhead_ms)

    def tau(_: Any, i: int) -> Any:
        # Mirrors geoplan.cost.kernel.stage_terms (tau = compute + sends + overhead).
        return (
            comp[i] * m.n[i]
            + sum(float(comm[i, j]) * m.a[i, j] for j in succ[i])  # forward, to successor
            + sum(float(comm[i, j]) * m.a[j, i] for j in pred[i])  # backward, to predecessor
            + overhead * m.y[i]
        )

    m.tau = pyo.Expression(m.I, rule=tau)
    q_minus_1 = sum(m.z[k] for k in m.K)

    # Partition and selection.
    m.layers = pyo.Constraint(expr=sum(m.n[i] for i in m.I) == L)
    m.n_lo = pyo.Constraint(m.I, rule=lambda _, i: m.n[i] >= m.y[i])
    m.n_hi = pyo.Constraint(m.I, rule=lambda _, i: m.n[i] <= d.n_ub[i] * m.y[i])
    # Path: one first and one last stage; degrees tied to selection.
    m.one_first = pyo.Constraint(expr=sum(m.first[i] for i in m.I) == 1)
    m.one_last = pyo.Constraint(expr=sum(m.last[i] for i in m.I) == 1)
    m.out_deg = pyo.Constraint(
        m.I, rule=lambda _, i: sum(m.a[i, j] for j in succ[i]) + m.last[i] == m.y[i]
    )
    m.in_deg = pyo.Constraint(
        m.I, rule=lambda _, i: sum(m.a[j, i] for j in pred[i]) + m.first[i] == m.y[i]
    )
    # Stage count Q = sum y = 1 + sum_k z_k with z non-increasing.
    m.count = pyo.Constraint(expr=sum(m.y[i] for i in m.I) == 1 + q_minus_1)
    ks = list(range(2, K + 1))
    m.z_mono = pyo.Constraint(ks[:-1], rule=lambda _, k: m.z[k + 1] <= m.z[k])
    # Order variables (Desrochers-Laporte lifted MTZ): no subtours, no 2-cycles.
    m.order = pyo.Constraint(
        m.A,
        rule=lambda _, i, j: m.pos[j] - m.pos[i]
        >= 1 - K + K * m.a[i, j] + ((K - 2) * m.a[j, i] if (j, i) in arc_set else 0),
    )
    ck("order")
    m.pos_sel = pyo.Constraint(m.I, rule=lambda _, i: m.pos[i] <= (K - 1) * m.y[i])
    m.pos_q = pyo.Constraint(m.I, rule=lambda _, i: m.pos[i] <= q_minus_1)
    m.pos_first = pyo.Constraint(m.I, rule=lambda _, i: m.pos[i] <= (K - 1) * (1 - m.first[i]))
    m.pos_later = pyo.Constraint(m.I, rule=lambda _, i: m.pos[i] >= m.y[i] - m.first[i])
    m.pos_last = pyo.Constraint(
        m.I, rule=lambda _, i: m.pos[i] >= q_minus_1 - (K - 1) * (1 - m.last[i])
    )

    # Memory: n_i <= cap_i(Q), written with the cumulative indicators
    # cap(Q) = cap(1) + sum_{k=2..Q} (cap(k) - cap(k-1)).
    def cap_expr(cap: np.ndarray, i: int) -> Any:
        return int(cap[i, 1]) + sum(int(cap[i, k] - cap[i, k - 1]) * m.z[k] for k in ks)

    def mem_mid(_: Any, i: int) -> Any:
        if all(d.cap_mid[i, k] >= d.n_ub[i] for k in range(1, K + 1)):
            return pyo.Constraint.Skip
        return m.n[i] <= cap_expr(d.cap_mid, i)

    def mem_last(_: Any, i: int) -> Any:
        # Only binding when i is last; a non-last stage is held by mem_mid and n_ub.
        big = max(
            int(min(d.cap_mid[i, k], d.n_ub[i])) - int(d.cap_last[i, k]) for k in range(1, K + 1)
        )
        if big <= 0:
            return pyo.Constraint.Skip
        return m.n[i] <= cap_expr(d.cap_last, i) + big * (1 - m.last[i])

    m.mem_mid = pyo.Constraint(m.I, rule=mem_mid)
    m.mem_last = pyo.Constraint(m.I, rule=mem_last)
    ck("memory")

    # Bottleneck and iteration time.
    m.bottleneck = pyo.Constraint(m.I, rule=lambda _, i: m.tmax >= m.tau[i])
    # Mirrors geoplan.cost.kernel.iteration_time (exact for M = 1 too: (M - 1) = 0).
    m.t_def = pyo.Constraint(expr=m.t == sum(m.tau[i] for i in m.I) + (M - 1) * m.tmax)

    ck("stage times")
    if symmetry:
        add_dominance_rows(m)
    ck("symmetry")
    if cuts:
        add_cuts(m, succ, ck)
    ck("cuts")

    obj: Any = d.c_t * m.t if d.c_t > 0 else 0.0
    if d.energy:
        idle = {i: float(c.idle_w[i]) for i in d.gpus if c.idle_w[i] > 0}
        m.IW = pyo.Set(initialize=sorted(idle), ordered=True)
        # w[i] = T_iter * y_i (McCormick with T in [t_lb, t_ub], y binary; exact at
        # integer y because the objective pushes w down), plus w_i >= M tau_i
        # (T >= M max tau).
        m.w = pyo.Var(m.IW, bounds=(0, d.t_ub))
        m.w_big = pyo.Constraint(m.IW, rule=lambda _, i: m.w[i] >= m.t - d.t_ub * (1 - m.y[i]))
        m.w_low = pyo.Constraint(m.IW, rule=lambda _, i: m.w[i] >= d.t_lb * m.y[i])
        m.w_tau = pyo.Constraint(m.IW, rule=lambda _, i: m.w[i] >= M * m.tau[i])
        # Mirrors geoplan.cost.kernel.iteration_energy with T_iter * idle linearised.
        energy = sum(idle[i] * m.w[i] for i in m.IW) / 1e3 + M / 1e3 * sum(
            float(c.dyn_w[i] * comp[i]) * m.n[i] for i in m.I
        )
        m.energy = pyo.Expression(expr=energy)
        obj = obj + d.c_e * m.energy
    m.time = pyo.Expression(expr=m.t)
    m.obj = pyo.Objective(expr=obj, sense=pyo.minimize)
    return m

