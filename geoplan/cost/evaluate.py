"""The scalar evaluator: what one plan costs under cost-model.md, explained.

:class:`Evaluator` resolves the objective normalisers once, when it is built
(as PyVRP builds its CostEvaluator), then explains plans: per-stage compute,
both sends, tau, memory against its limit, T_iter, E_iter, objective,
violations. Its totals come from :func:`geoplan.cost.kernel.price_stages`, the
same function the compiled pricers inline, so every pricer agrees to the bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from geoplan.cost import kernel
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.weights import ObjectiveWeights, objective_units
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.validation import Violation, validate

__all__ = [
    "Evaluation",
    "Evaluator",
    "StageCost",
    "evaluate",
    "objective_units",
    "objective_value",
]


@dataclass(frozen=True)
class StageCost:
    """The explained cost of one stage (ms, GB)."""

    gpu: str
    layers: int
    compute_ms: float
    comm_fwd_ms: float
    comm_bwd_ms: float
    tau_ms: float
    memory_gb: float
    memory_limit_gb: float

    def to_dict(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Evaluation:
    """Everything the evaluator says about one plan."""

    plan: Plan
    t_iter_ms: float
    e_iter_j: float
    objective: float
    feasible: bool
    violations: tuple[Violation, ...]
    stages: tuple[StageCost, ...]
    lam: float
    t_ref_ms: float | None
    e_ref_j: float | None

    @property
    def bottleneck_stage(self) -> int:
        """Index of the stage with the largest tau (first on ties)."""
        taus = [s.tau_ms for s in self.stages]
        return taus.index(max(taus))

    def to_dict(self) -> dict[str, Any]:
        """The ``geoplan evaluate --json`` object of formats.md (non-finite numbers as null)."""
        return {
            "t_iter_ms": _jsonable(self.t_iter_ms),
            "e_iter_j": _jsonable(self.e_iter_j),
            "objective": _jsonable(self.objective),
            "feasible": self.feasible,
            "violations": [v.message for v in self.violations],
            "violation_records": [v.to_dict() for v in self.violations],
            "stages": [s.to_dict() for s in self.stages],
            "lambda": self.lam,
            "t_ref_ms": self.t_ref_ms,
            "e_ref_j": self.e_ref_j,
            "plan": self.plan.to_dict(),
        }


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def objective_value(instance: Instance, t_iter_ms: float, e_iter_j: float) -> float:
    """Eq. 16 on ``instance``'s objective (normalisers must be resolved where lambda needs them)."""
    return ObjectiveWeights.from_instance(instance).value(t_iter_ms, e_iter_j)


class Evaluator:
    """Prices and explains plans of one instance; normalisers resolved once, here."""

    def __init__(self, instance: Instance) -> None:
        self.instance = resolve_normalisers(instance)
        self.weights = ObjectiveWeights.from_instance(self.instance)

    def evaluate(self, plan: Plan) -> Evaluation:
        """Price and explain ``plan``.

        Infeasible plans are priced as far as the model allows and reported with
        their violations; a missing link makes its communication time infinite.
        Unknown GPU ids raise :class:`~geoplan.errors.InputError`.
        """
        instance = self.instance
        violations = tuple(validate(instance, plan))
        idx = np.asarray(plan.gpu_indices(instance), dtype=np.int64)
        counts = np.asarray(plan.layer_counts, dtype=np.int64)
        c = instance.coefficients(plan.micro_batch_size)
        q_count = len(idx)
        per = c.per_layer_bytes(q_count)
        stages: list[StageCost] = []
        for q in range(q_count):
            comp, fwd, bwd, tau = kernel.stage_terms(
                q, idx, counts, q_count, c.comp_ms, c.comm_ms, c.overhead_ms
            )
            g = int(idx[q])
            stages.append(
                StageCost(
                    gpu=plan.stages[q].gpu,
                    layers=int(counts[q]),
                    compute_ms=float(comp),
                    comm_fwd_ms=float(fwd),
                    comm_bwd_ms=float(bwd),
                    tau_ms=float(tau),
                    memory_gb=float(
                        kernel.stage_bytes(counts[q], per, q == q_count - 1, c.mem_last)
                    ) / 1e9,
                    memory_limit_gb=float(c.mem_cap[g]) / 1e9,
                )
            )
        # A missing link prices at inf and inf * 0 W is nan, as in the compiled
        # pricers; numpy would also warn about it, numba does not.
        with np.errstate(invalid="ignore", over="ignore"):
            _, t_iter, e_iter, _ = kernel.price_stages(idx, counts, q_count, *c.kernel_args,
                                                       *self.weights.args)
            objective = self.weights.value(t_iter, e_iter)
        return Evaluation(
            plan=plan,
            t_iter_ms=float(t_iter),
            e_iter_j=float(e_iter),
            objective=objective,
            feasible=not violations,
            violations=violations,
            stages=tuple(stages),
            lam=instance.lam,
            t_ref_ms=instance.objective.t_ref_ms,
            e_ref_j=instance.objective.e_ref_j,
        )


def evaluate(instance: Instance, plan: Plan) -> Evaluation:
    """Price and explain ``plan`` on ``instance`` (builds an :class:`Evaluator`)."""
    return Evaluator(instance).evaluate(plan)
