"""Interchangeable and dominated GPUs in the MILP (``symmetry=True``).

The rule itself, and why it keeps an optimal plan, is
:mod:`geoplan.cost.dominance` (shared with CP-SAT and B&B). Here it is applied:
:func:`dominance_pairs` restricts it to the model's GPUs (for
:class:`~formulations.milp.data.MilpData`), :func:`add_dominance_rows` adds its
rows ``y_j <= y_i`` and ``n_j <= n_i`` to the model, and :func:`canonical_plan`
rewrites a start plan so it satisfies those rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyomo.environ as pyo

from geoplan.cost.dominance import dominance_of
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

if TYPE_CHECKING:
    from formulations.milp.data import MilpData

__all__ = ["add_dominance_rows", "canonical_plan", "dominance_pairs"]


def dominance_pairs(
    instance: Instance, gpus: tuple[int, ...], energy: bool
) -> tuple[tuple[int, int, bool], ...]:
    """Pairs (i, j, identical) of the one dominance rule (:mod:`geoplan.cost.dominance`).

    y_j <= y_i for every pair; n_j <= n_i where ``identical``. The rule keeps an
    optimal plan (proof in that module); here restricted to the model's GPUs.
    """
    rule = dominance_of(instance.coefficients(), instance.layers, energy, gpus)
    ident = set(rule.identical)
    return tuple((i, j, (i, j) in ident) for i, j in rule.pairs)


def add_dominance_rows(m: pyo.ConcreteModel) -> None:
    """Add to ``m`` (built from ``m.data``) ``dom_y``: y_j <= y_i for every pair,
    and ``dom_n``: n_j <= n_i for the identical ones."""
    d: MilpData = m.data
    dom = [(i, j) for (i, j, _) in d.dominance]
    same = [(i, j) for (i, j, identical) in d.dominance if identical]
    m.dom_y = pyo.Constraint(
        range(len(dom)), rule=lambda _, k: m.y[dom[k][1]] <= m.y[dom[k][0]]
    )
    m.dom_n = pyo.Constraint(
        range(len(same)), rule=lambda _, k: m.n[same[k][1]] <= m.n[same[k][0]]
    )


def canonical_plan(data: MilpData, plan: Plan) -> Plan:
    """``plan`` rewritten to satisfy the dominance constraints, at no higher cost.

    A used GPU j with an unused dominator i is replaced by i in place; of two
    identical GPUs the lower-index one takes the larger layer count (the moves
    R and S of :mod:`geoplan.cost.dominance`).
    """
    inst = data.instance
    g = plan.gpu_indices(inst)
    n = list(plan.layer_counts)
    changed = True
    while changed:
        changed = False
        for i, j, identical in data.dominance:
            if j in g and i not in g:
                g[g.index(j)] = i
                changed = True
            elif identical and i in g and j in g:
                pi, pj = g.index(i), g.index(j)
                if n[pj] > n[pi]:
                    g[pi], g[pj] = j, i
                    changed = True
    return Plan.from_indices(inst, g, n, plan.micro_batch_size)

