"""Default objective normalisers T_ref / E_ref (cost-model.md, Objective).

Where the instance gives none, they are T_iter and E_iter of the deterministic
Metis-default plan (:mod:`geoplan.cost.baseline`), which ranks by time alone and so
does not depend on lambda: a lambda sweep shares one pair of normalisers.
"""

from __future__ import annotations

from geoplan.errors import InputError
from geoplan.model.instance import Instance

__all__ = ["baseline_normalisers", "resolve_normalisers"]


def baseline_normalisers(instance: Instance) -> tuple[float, float]:
    """(T_ref ms, E_ref J) of the Metis-default plan; InputError if it finds no plan."""
    cached = instance.__dict__.get("_baseline_refs")
    if cached is not None:
        return cached
    from geoplan.cost import evaluate
    from geoplan.cost.baseline import metis_default_plan

    plan = metis_default_plan(instance)
    if plan is None:
        raise InputError(
            "objective.t_ref_ms",
            None,
            "0 < lambda < 1 needs normalisers and the Metis-default baseline found no "
            "feasible plan to take them from; give t_ref_ms and e_ref_j",
        )
    # Placeholder normalisers stop evaluate() from resolving them again (recursion).
    ev = evaluate(instance.with_objective(lam=1.0, t_ref_ms=1.0, e_ref_j=1.0), plan)
    refs = (ev.t_iter_ms, ev.e_iter_j)
    instance.__dict__["_baseline_refs"] = refs
    return refs


def resolve_normalisers(instance: Instance) -> Instance:
    """The instance with t_ref_ms/e_ref_j filled in wherever the objective needs them.

    For lambda in {0, 1} the objective does not use them; they are still filled
    in when the baseline finds a plan, so that every result reports a pair.
    """
    # Cached on the instance: evaluate() resolves on every call, and a fresh copy
    # per call would rebuild the instance's cached views (or rerun a failing baseline).
    cached = instance.__dict__.get("_resolved")
    if cached is not None:
        return cached
    o = instance.objective
    resolved = instance
    if o.t_ref_ms is None or o.e_ref_j is None:
        try:
            t_ref, e_ref = baseline_normalisers(instance)
        except InputError:
            if o.lam not in (0.0, 1.0):
                raise
        else:
            resolved = instance.with_objective(
                t_ref_ms=o.t_ref_ms if o.t_ref_ms is not None else t_ref,
                e_ref_j=o.e_ref_j if o.e_ref_j is not None else e_ref,
            )
    instance.__dict__["_resolved"] = resolved
    resolved.__dict__["_resolved"] = resolved
    return resolved
