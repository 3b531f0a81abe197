"""Default objective normalisers T_ref / E_ref (cost-model.md, Objective).

Where the instance gives none, they are T_iter and E_iter of the deterministic
Metis-default plan (:mod:`geoplan.cost.baseline`), which ranks by time alone and
so does not depend on lambda: a lambda sweep shares one pair of normalisers.

They are resolved once, when an evaluator or a solve is set up
(:class:`geoplan.cost.Evaluator`, :func:`geoplan.solving.core.solve`): the
baseline prices its plan with the kernel directly, so nothing here calls the
evaluator and nothing is cached on the (immutable) instance.
"""

from __future__ import annotations

import numpy as np

from geoplan.cost import kernel
from geoplan.errors import InputError
from geoplan.model.instance import Instance

__all__ = ["baseline_normalisers", "needs_normalisers", "resolve_normalisers"]


def needs_normalisers(instance: Instance) -> bool:
    """Whether the objective lacks a normaliser (lambda in {0, 1} does not use them)."""
    o = instance.objective
    return o.t_ref_ms is None or o.e_ref_j is None


def baseline_normalisers(instance: Instance) -> tuple[float, float]:
    """(T_ref ms, E_ref J) of the Metis-default plan; InputError if it finds no plan."""
    from geoplan.cost.baseline import metis_default_plan

    plan = metis_default_plan(instance)
    if plan is None:
        raise InputError(
            "objective.t_ref_ms",
            None,
            "0 < lambda < 1 needs normalisers and the Metis-default baseline found no "
            "feasible plan to take them from; give t_ref_ms and e_ref_j",
        )
    c = instance.coefficients(plan.micro_batch_size)
    idx = np.asarray(plan.gpu_indices(instance), dtype=np.int64)
    counts = np.asarray(plan.layer_counts, dtype=np.int64)
    _, t_iter, e_iter, _ = kernel.price_stages(
        idx, counts, len(idx), *c.kernel_args, kernel.MODE_TIME, 1.0, 1.0, 1.0
    )
    return float(t_iter), float(e_iter)


def resolve_normalisers(instance: Instance) -> Instance:
    """The instance with t_ref_ms/e_ref_j filled in wherever the objective needs them.

    For lambda in {0, 1} the objective does not use them; they are still filled
    in when the baseline finds a plan, so that every result reports a pair.
    An instance that already has both is returned as it is.
    """
    if not needs_normalisers(instance):
        return instance
    o = instance.objective
    try:
        t_ref, e_ref = baseline_normalisers(instance)
    except InputError:
        if o.lam not in (0.0, 1.0):
            raise
        return instance
    return instance.with_objective(
        t_ref_ms=o.t_ref_ms if o.t_ref_ms is not None else t_ref,
        e_ref_j=o.e_ref_j if o.e_ref_j is not None else e_ref,
    )
