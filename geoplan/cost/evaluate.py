"""The one cost evaluator: what a plan costs under cost-model.md.

:func:`evaluate` explains one plan (per-stage compute, both communication
terms, tau, memory against its limit, T_iter, E_iter, objective, violations).
:mod:`geoplan.cost.batch` prices whole populations of chromosomes at once; a test
pins the two together. Both read the same :class:`~geoplan.model.instance.Coefficients`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.validation import Violation, validate

__all__ = ["Evaluation", "StageCost", "evaluate", "objective_units", "objective_value"]


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


def objective_units(lam: float) -> str:
    """The unit of the objective value: ms (lambda=1), J (lambda=0), else dimensionless."""
    return "ms" if lam == 1.0 else "J" if lam == 0.0 else "1"


def objective_value(instance: Instance, t_iter_ms: float, e_iter_j: float) -> float:
    """Eq. 16: T_iter alone (ms) at lambda=1, E_iter alone (J) at lambda=0, else the mix.

    Normalisers must be resolved first (:func:`geoplan.cost.normalise.resolve_normalisers`).
    """
    o = instance.objective
    if o.lam == 1.0:
        return t_iter_ms
    if o.lam == 0.0:
        return e_iter_j
    if o.t_ref_ms is None or o.e_ref_j is None:
        raise ValueError("normalisers not resolved: call resolve_normalisers(instance) first")
    return o.lam * t_iter_ms / o.t_ref_ms + (1.0 - o.lam) * e_iter_j / o.e_ref_j


def evaluate(instance: Instance, plan: Plan) -> Evaluation:
    """Price and explain ``plan`` on ``instance``.

    Infeasible plans are priced as far as the model allows and reported with
    their violations; a missing link makes its communication time infinite.
    Unknown GPU ids raise :class:`~geoplan.errors.InputError`.
    """
    from geoplan.cost.normalise import resolve_normalisers

    instance = resolve_normalisers(instance)
    violations = tuple(validate(instance, plan))
    idx = plan.gpu_indices(instance)
    c = instance.coefficients(plan.micro_batch_size)
    q_count = len(idx)
    stages: list[StageCost] = []
    sum_tau = 0.0
    max_tau = 0.0
    idle = 0.0
    active_ms_w = 0.0
    for q, (g, n) in enumerate(zip(idx, plan.layer_counts, strict=True)):
        comp = n * c.comp_ms[g]
        fwd = c.comm_ms[g, idx[q + 1]] if q + 1 < q_count else 0.0
        bwd = c.comm_ms[g, idx[q - 1]] if q > 0 else 0.0
        tau = comp + fwd + bwd
        sum_tau += tau
        max_tau = max(max_tau, tau)
        idle += c.idle_w[g]
        active_ms_w += (c.active_w[g] - c.idle_w[g]) * comp
        stages.append(
            StageCost(
                gpu=plan.stages[q].gpu,
                layers=n,
                compute_ms=float(comp),
                comm_fwd_ms=float(fwd),
                comm_bwd_ms=float(bwd),
                tau_ms=float(tau),
                memory_gb=c.stage_bytes(n, q_count, last=q == q_count - 1) / 1e9,
                memory_limit_gb=float(c.mem_cap[g]) / 1e9,
            )
        )
    # M = 1 has no steady phase; skipping the product keeps a missing link at inf, not 0*inf=nan.
    t_iter = sum_tau + (c.micro_batches - 1) * max_tau if c.micro_batches > 1 else sum_tau
    e_iter = t_iter / 1e3 * idle + c.micro_batches * active_ms_w / 1e3
    return Evaluation(
        plan=plan,
        t_iter_ms=float(t_iter),
        e_iter_j=float(e_iter),
        objective=float(objective_value(instance, t_iter, e_iter)),
        feasible=not violations,
        violations=violations,
        stages=tuple(stages),
        lam=instance.lam,
        t_ref_ms=instance.objective.t_ref_ms,
        e_ref_j=instance.objective.e_ref_j,
    )
