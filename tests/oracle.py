"""The reference enumerator (tests/reference_model.py) applied to a geoplan Instance.

The tests that hold a solver against the true optimum build geoplan Instances; this
bridge hands the reference their canonical dict (``Instance.to_dict``) and returns
its answers as geoplan Plans. The one thing it takes from geoplan is the pair of
objective normalisers for 0 < lambda < 1 when the instance gives none: those come
from the Metis-default baseline (cost-model.md), which the reference does not
restate; tests/geoplan/test_reference.py prices that baseline plan independently.
"""

from __future__ import annotations

import reference_model as ref

from geoplan.cost import evaluate
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

__all__ = ["normalisers", "reference_optimum", "reference_space"]


def normalisers(inst: Instance) -> tuple[float | None, float | None]:
    """(t_ref_ms, e_ref_j) the objective of ``inst`` uses (None where it uses none)."""
    o = inst.objective
    if o.lam in (0.0, 1.0):
        return None, None
    if o.t_ref_ms is not None and o.e_ref_j is not None:
        return o.t_ref_ms, o.e_ref_j
    # Any plan reports the pair its evaluator resolved; a one-stage plan always parses.
    ev = evaluate(inst, Plan.from_pairs([(inst.gpu_ids[0], inst.layers)]))
    return ev.t_ref_ms, ev.e_ref_j


def reference_optimum(inst: Instance, orders: list[list[int]] | None = None
                      ) -> tuple[float, Plan | None, ref.RefOptimum]:
    """(optimum, an optimal plan, the reference's whole answer) by enumerating every plan.

    ``orders`` (lists of GPU indices) restricts the enumeration to every split of those
    GPU orders. The optimum is inf (and the plan None) when no plan is feasible.
    """
    t_ref, e_ref = normalisers(inst)
    ids = None if orders is None else [[inst.gpu_ids[g] for g in o] for o in orders]
    r = ref.optimum_ref(inst.to_dict(), t_ref, e_ref, orders=ids)
    return r.objective, None if r.plan is None else Plan.from_dict(r.plan), r


def reference_space(inst: Instance) -> ref.RefSpace:
    """Every plan of ``inst`` priced by the reference (small spaces)."""
    t_ref, e_ref = normalisers(inst)
    return ref.price_space(inst.to_dict(), t_ref, e_ref)
