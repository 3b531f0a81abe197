"""The scalar evaluator of hybrid plans: what one plan costs under hybrid-model.md, explained.

Per stage and per replica: GPUs, tp, samples, compute, TP communication, the
boundary sends, the gradient synchronisation and the memory of each GPU against
its limit. The totals come from :func:`geoplan.cost.hybrid_kernel.price_hybrid`,
the function the batch evaluator compiles, so both agree to the bit. A plan in
the GeoTrain form is priced by the GeoTrain evaluator instead (its exact price),
and the two forms of such a plan agree to rounding (a test pins it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from geoplan.cost import hybrid_kernel as hk
from geoplan.cost.evaluate import Evaluation, evaluate
from geoplan.cost.hybrid_coefficients import HybridCoefficients, encode
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.hybrid import HybridPlan
from geoplan.model.hybrid_validation import validate_hybrid
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.validation import Violation

__all__ = ["HybridEvaluation", "HybridEvaluator", "ReplicaCost", "StageGroupCost",
           "evaluate_any", "evaluate_hybrid"]


def _j(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


@dataclass(frozen=True)
class ReplicaCost:
    """One replica (TP group) of a stage: ms per micro-batch, GB per GPU."""

    gpus: tuple[str, ...]
    samples: int
    compute_ms: float
    tp_comm_ms: float
    memory_gb: float
    memory_limit_gb: float

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": list(self.gpus), "samples": self.samples,
                "compute_ms": _j(self.compute_ms), "tp_comm_ms": _j(self.tp_comm_ms),
                "memory_gb": _j(self.memory_gb), "memory_limit_gb": self.memory_limit_gb}


@dataclass(frozen=True)
class StageGroupCost:
    """One hybrid stage: tau^comp (max over replicas of compute + TP), sends, tau, A_q."""

    layers: int
    tp: int
    recompute: str
    replicas: tuple[ReplicaCost, ...]
    compute_ms: float
    comm_fwd_ms: float
    comm_bwd_ms: float
    tau_ms: float
    grad_sync_ms: float

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(g for r in self.replicas for g in r.gpus)

    @property
    def memory_gb(self) -> float:
        """The largest need of a GPU of the stage."""
        return max(r.memory_gb for r in self.replicas)

    @property
    def memory_limit_gb(self) -> float:
        """The smallest limit of a GPU of the stage."""
        return min(r.memory_limit_gb for r in self.replicas)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.replicas[0].gpus[0],
            "gpus": list(self.gpus),
            "layers": self.layers,
            "tp": self.tp,
            "recompute": self.recompute,
            "compute_ms": _j(self.compute_ms),
            "comm_fwd_ms": _j(self.comm_fwd_ms),
            "comm_bwd_ms": _j(self.comm_bwd_ms),
            "tau_ms": _j(self.tau_ms),
            "grad_sync_ms": _j(self.grad_sync_ms),
            "memory_gb": _j(self.memory_gb),
            "memory_limit_gb": self.memory_limit_gb,
            "replicas": [r.to_dict() for r in self.replicas],
        }


@dataclass(frozen=True)
class HybridEvaluation:
    """Everything the evaluator says about one hybrid plan."""

    plan: HybridPlan
    t_iter_ms: float
    e_iter_j: float
    objective: float
    feasible: bool
    violations: tuple[Violation, ...]
    stages: tuple[StageGroupCost, ...]
    micro_batch_size: int
    zero: int
    lam: float
    t_ref_ms: float | None
    e_ref_j: float | None

    @property
    def grad_sync_ms(self) -> float:
        return max((s.grad_sync_ms for s in self.stages), default=0.0)

    @property
    def bottleneck_stage(self) -> int:
        taus = [s.tau_ms for s in self.stages]
        return taus.index(max(taus))

    def to_dict(self) -> dict[str, Any]:
        """The ``geoplan evaluate --json`` object (formats.md keys plus the hybrid ones)."""
        return {
            "space": "hybrid",
            "t_iter_ms": _j(self.t_iter_ms),
            "e_iter_j": _j(self.e_iter_j),
            "objective": _j(self.objective),
            "feasible": self.feasible,
            "violations": [v.message for v in self.violations],
            "violation_records": [v.to_dict() for v in self.violations],
            "grad_sync_ms": _j(self.grad_sync_ms),
            "micro_batch_size": self.micro_batch_size,
            "zero": self.zero,
            "stages": [s.to_dict() for s in self.stages],
            "lambda": self.lam,
            "t_ref_ms": self.t_ref_ms,
            "e_ref_j": self.e_ref_j,
            "plan": self.plan.to_dict(),
        }


class HybridEvaluator:
    """Prices and explains hybrid plans of one instance; normalisers resolved once, here."""

    def __init__(self, instance: Instance) -> None:
        self.instance = resolve_normalisers(instance)
        self.weights = ObjectiveWeights.from_instance(self.instance)
        self.coefficients = HybridCoefficients.of(self.instance)

    def price(self, plan: HybridPlan) -> tuple[int, float, float, float]:
        """(status, T_iter, E_iter, objective) by the kernel (no explanation)."""
        a = encode(self.instance, plan)
        with np.errstate(invalid="ignore", over="ignore"):
            args = (*a.plan_args, *self.coefficients.kernel_args, *self.weights.args)
            st, t, e, obj = hk.price_hybrid(*args)
        return int(st), float(t), float(e), float(obj)

    def evaluate(self, plan: HybridPlan) -> HybridEvaluation:
        """Price and explain ``plan``; infeasible plans are priced as far as the model allows
        (nan where it does not: a replica without tp GPUs, an unknown recompute or ZeRO)."""
        instance, c = self.instance, self.coefficients
        violations = tuple(validate_hybrid(instance, plan))
        a = encode(instance, plan)
        ok = hk.structure_ok(a.q, a.layers, a.tp, a.rec, a.rep0, a.samples, a.g0, a.zero)
        ids = instance.gpu_ids
        stages: list[StageGroupCost] = []
        nan = float("nan")
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            for q, s in enumerate(plan.stages):
                r0, r1 = int(a.rep0[q]), int(a.rep0[q + 1])
                d = r1 - r0
                t = int(a.tp[q])
                last = q == a.q - 1
                reps = []
                comp = 0.0
                for r in range(r0, r1):
                    g = a.gpus[a.g0[r]:a.g0[r + 1]]
                    cap = float(min(c.mem_cap[g])) / 1e9
                    smp = int(a.samples[r])
                    if ok:
                        cm = hk.replica_compute_ms(s.layers, t, smp,
                                                   hk.compute_factor(a.rec[q], c.gamma),
                                                   float(min(c.tflops[g])), c.flop_ls)
                        tpm = hk.replica_tp_ms(a.gpus, a.g0[r], t, s.layers, smp, a.rec[q],
                                               c.act_bytes, c.lat_ms, c.bw_gbps)
                        mem = hk.replica_bytes(s.layers, t, d, a.zero, a.rec[q], smp, a.q,
                                               last, c.w_bytes, c.lm_bytes, c.alpha,
                                               c.act_bytes, c.logit_bytes) / 1e9
                        comp = max(comp, cm + tpm)
                    else:
                        cm = tpm = mem = comp = nan
                    reps.append(ReplicaCost(tuple(ids[int(x)] for x in g), smp, float(cm),
                                            float(tpm), float(mem), cap))
                if ok:
                    fwd = (hk.stage_boundary_ms(q, a.rep0, a.samples, a.g0, a.gpus,
                                                c.act_bytes, c.lat_ms, c.bw_gbps)[0]
                           if q + 1 < a.q else 0.0)
                    bwd = (hk.stage_boundary_ms(q - 1, a.rep0, a.samples, a.g0, a.gpus,
                                                c.act_bytes, c.lat_ms, c.bw_gbps)[1]
                           if q > 0 else 0.0)
                    sync = hk.grad_sync_ms(s.layers, t, r0, d, last, a.g0, a.gpus, c.w_bytes,
                                           c.lm_bytes, c.lat_ms, c.bw_gbps)
                    tau = comp + fwd + bwd + c.overhead_ms
                else:
                    fwd = bwd = sync = tau = nan
                stages.append(StageGroupCost(s.layers, s.tp, s.recompute, tuple(reps),
                                             float(comp), float(fwd), float(bwd), float(tau),
                                             float(sync)))
            args = (*a.plan_args, *c.kernel_args, *self.weights.args)
            _, t_iter, e_iter, _ = hk.price_hybrid(*args)
            objective = self.weights.value(t_iter, e_iter) if ok else nan
        return HybridEvaluation(
            plan=plan, t_iter_ms=float(t_iter), e_iter_j=float(e_iter),
            objective=float(objective), feasible=not violations, violations=violations,
            stages=tuple(stages), micro_batch_size=a.u, zero=a.zero, lam=instance.lam,
            t_ref_ms=instance.objective.t_ref_ms, e_ref_j=instance.objective.e_ref_j,
        )


def evaluate_hybrid(instance: Instance, plan: HybridPlan) -> HybridEvaluation:
    """Price and explain ``plan`` on ``instance`` (builds a :class:`HybridEvaluator`)."""
    return HybridEvaluator(instance).evaluate(plan)


def evaluate_any(instance: Instance, plan: Plan | HybridPlan) -> Evaluation | HybridEvaluation:
    """The GeoTrain evaluator for a :class:`Plan`, the hybrid one for a :class:`HybridPlan`."""
    if isinstance(plan, HybridPlan):
        return evaluate_hybrid(instance, plan)
    return evaluate(instance, plan)
