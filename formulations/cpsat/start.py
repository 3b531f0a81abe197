"""Known plans: which may cap the objective, and which becomes the search's hint.

:func:`_usable` says whether a known plan (baseline, warm start) is a valid cap;
:func:`_warm_plan` picks the best feasible warm start and makes it canonical
for the symmetry breaking, so that :meth:`CpsatModel.add_hint` can hint it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from geoplan.cost import evaluate
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.validation import validate

if TYPE_CHECKING:
    from formulations.cpsat.model import CpsatModel


def _usable(instance: Instance, plan: Plan, pairs: Sequence[tuple[int, int]]) -> bool:
    """Whether ``plan`` is feasible at the instance's micro-batch size (a valid cap)."""
    if plan.micro_batch_size not in (None, instance.training.micro_batch_size):
        return False
    try:
        if validate(instance, plan):
            return False
        idx = plan.gpu_indices(instance)
    except InputError:
        return False
    links = set(pairs)
    return all((idx[k], idx[k + 1]) in links for k in range(len(idx) - 1))


def _warm_plan(built: CpsatModel, plans: Sequence[Plan]) -> tuple[Plan | None, dict[str, Any]]:
    """The best feasible warm start, made canonical for the symmetry breaking."""
    inst = built.instance
    u = inst.training.micro_batch_size
    best: tuple[float, Plan] | None = None
    for p in plans:
        if p.micro_batch_size not in (None, u):
            continue
        try:
            ev = evaluate(inst, p)
        except InputError:
            continue
        if ev.feasible and (best is None or ev.objective < best[0]):
            best = (ev.objective, p)
    if best is None:
        return None, {"warm_start_reason": "no feasible warm-start plan at this micro-batch size"}
    plan = built.canonical(best[1])
    info: dict[str, Any] = {}
    if plan != best[1]:
        info["warm_start_canonical"] = plan.to_dict()
    if not built.is_model_feasible(plan):
        # Also when a better plan caps the objective below it (the start heuristic's).
        info["warm_start_reason"] = "warm start violates the model (or its objective cap)"
        return None, info
    return plan, info
