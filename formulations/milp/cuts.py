"""The MILP's valid inequalities (``cuts=True``; the model is exact without them).

:func:`cut_groups` chooses the GPU sets that get subtour cuts (sites, and unions
of sites on small instances); :func:`add_cuts` adds the perspective rows, those
subtour cuts and the lower-bound cuts; :func:`add_lb_cuts` (re)builds the cuts
that depend on the bottleneck lower bound, which
:func:`~formulations.milp.tightening.tighten` raises round by round.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyomo.environ as pyo

from geoplan.model.instance import Instance

if TYPE_CHECKING:
    from formulations.milp.data import MilpData

__all__ = ["add_cuts", "add_lb_cuts", "cut_groups"]


def cut_groups(
    instance: Instance, gpus: tuple[int, ...], unions: bool | None = None
) -> tuple[tuple[int, ...], ...]:
    """GPU sets for subtour cuts: each site and, if ``unions`` (default: at most 5
    sites and 16 GPUs), every union of sites."""
    sites: dict[str, list[int]] = {}
    for i in gpus:
        site = instance.gpus[i].site
        if site is not None:
            sites.setdefault(site, []).append(i)
    keys = sorted(sites)
    if len(keys) < 2:
        return ()
    if unions is None:
        # Unions pay off on small instances; on large ones their dense rows slow
        # presolve and every LP more than they tighten.
        unions = len(keys) <= 5 and len(gpus) <= 16
    sizes = range(1, len(keys)) if unions else range(1, 2)
    out: list[tuple[int, ...]] = []
    for r in sizes:
        for comb in itertools.combinations(keys, r):
            group = tuple(sorted(i for k in comb for i in sites[k]))
            if len(group) >= 2:
                out.append(group)
    return tuple(out)


def add_cuts(
    m: pyo.ConcreteModel, succ: dict[int, list[int]], check: Callable[[str], None]
) -> None:
    """Add the cuts of docs/milp.md to ``m`` (built from ``m.data``; ``succ[i]``: the
    heads of the arcs out of i); ``check`` as in
    :func:`~formulations.milp.model.build_model`."""
    d: MilpData = m.data
    # Perspective of tau_i <= tmax <= tmax_ub (tau_i = 0 when i is unused).
    m.tau_sel = pyo.Constraint(m.I, rule=lambda _, i: m.tau[i] <= d.tmax_ub * m.y[i])
    # Subtour elimination on sites (cut-set form of the generalised subtour
    # constraints): if k in S is used, the path leaves S or ends in S.
    rows = [(frozenset(g), k) for g in d.groups for k in g]
    m.gsec = pyo.Constraint(
        range(len(rows)),
        rule=lambda _, r: sum(
            m.a[i, j] for i in rows[r][0] for j in succ[i] if j not in rows[r][0]
        )
        + sum(m.last[i] for i in rows[r][0])
        >= m.y[rows[r][1]],
    )
    check("subtour cuts")
    add_lb_cuts(m, d.tmax_lb)


def add_lb_cuts(m: pyo.ConcreteModel, lb: float) -> None:
    """Cuts that use the bottleneck lower bound ``lb`` (in block ``m.lb_cuts``).

    * tau_i <= tmax - lb (1 - y_i): the other half of the perspective hull;
    * tmax >= lb + sum_j (w_ij - lb)^+ a_ij over the out-arcs of i (at most one
      is used; w_ij = arc_weight), and the same over the in-arcs of i.
    """
    d: MilpData = m.data
    if hasattr(m, "lb_cuts"):
        m.del_component(m.lb_cuts)
    b = pyo.Block()
    m.lb_cuts = b
    w = {(i, j): d.arc_weight(i, j) for (i, j) in d.arcs}
    succ = {i: [j for (a, j) in d.arcs if a == i] for i in d.gpus}
    pred = {i: [a for (a, j) in d.arcs if j == i] for i in d.gpus}
    b.persp = pyo.Constraint(m.I, rule=lambda _, i: m.tau[i] <= m.tmax - lb * (1 - m.y[i]))

    def arc_cut(arcs: list[tuple[int, int]]) -> Any:
        terms = [(w[e] - lb) * m.a[e] for e in arcs if w[e] > lb]
        return m.tmax >= lb + sum(terms) if terms else pyo.Constraint.Skip

    b.arc_out = pyo.Constraint(m.I, rule=lambda _, i: arc_cut([(i, j) for j in succ[i]]))
    b.arc_in = pyo.Constraint(m.I, rule=lambda _, i: arc_cut([(j, i) for j in pred[i]]))

