"""The one validator: every way a plan can break the constraints of cost-model.md.

Infeasibility is reported as structured :class:`Violation` records, never
raised. Unknown GPU ids are invalid input and raise
:class:`~geoplan.errors.InputError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

__all__ = ["KINDS", "Violation", "ViolationKind", "validate"]

ViolationKind = Literal[
    "layer_sum",
    "empty_stage",
    "repeated_gpu",
    "stage_count",
    "missing_link",
    "memory",
    "micro_batch",
    # hybrid-model.md only
    "tp",
    "replica_size",
    "tp_site",
    "samples",
    "zero",
    "recompute",
]
KINDS: tuple[ViolationKind, ...] = get_args(ViolationKind)


@dataclass(frozen=True)
class Violation:
    """One broken constraint.

    ``kind`` is one of :data:`KINDS`; ``stage`` the 0-based stage index where
    it applies; ``amount`` how far over (GB for memory, layers for layer_sum).
    """

    kind: ViolationKind
    message: str
    stage: int | None = None
    gpu: str | None = None
    amount: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def validate(instance: Instance, plan: Plan) -> list[Violation]:
    """Every violation of ``plan`` on ``instance`` (empty list: feasible)."""
    out: list[Violation] = []
    idx = plan.gpu_indices(instance)  # raises on unknown ids
    counts = plan.layer_counts
    L = instance.layers
    q_count = len(idx)

    total = sum(counts)
    if total != L:
        out.append(
            Violation(
                "layer_sum",
                f"layer counts add up to {total}, the model has {L} layers",
                amount=float(total - L),
            )
        )
    for q, (s, n) in enumerate(zip(plan.stages, counts, strict=True)):
        if n < 1:
            out.append(
                Violation("empty_stage", f"stage {q + 1} ({s.gpu}) has {n} layers", q, s.gpu)
            )
    seen: dict[str, int] = {}
    for q, s in enumerate(plan.stages):
        if s.gpu in seen:
            out.append(
                Violation(
                    "repeated_gpu",
                    f"GPU {s.gpu} is used by stages {seen[s.gpu] + 1} and {q + 1}",
                    q,
                    s.gpu,
                )
            )
        else:
            seen[s.gpu] = q
    if not 1 <= q_count <= min(instance.n, L):
        out.append(
            Violation(
                "stage_count",
                f"{q_count} stages; allowed 1..{min(instance.n, L)} (min(N, L))",
                amount=float(q_count),
            )
        )
    for q in range(q_count - 1):
        a, b = idx[q], idx[q + 1]
        for src, dst, what in ((a, b, "activations"), (b, a, "gradients")):
            if not instance.has_link[src, dst]:
                out.append(
                    Violation(
                        "missing_link",
                        f"no link {instance.gpu_ids[src]} -> {instance.gpu_ids[dst]} "
                        f"for the {what} between stages {q + 1} and {q + 2}",
                        q,
                        instance.gpu_ids[src],
                    )
                )

    u = plan.micro_batch_size or instance.training.micro_batch_size
    B = instance.training.batch_size
    if B % u:
        out.append(
            Violation(
                "micro_batch",
                f"batch size {B} is not divisible by the micro-batch size {u}",
                amount=float(u),
            )
        )
        return out  # memory needs a valid micro-batch size

    c = instance.coefficients(u)
    for q, (g, n) in enumerate(zip(idx, counts, strict=True)):
        last = q == q_count - 1
        if n >= 1 and not c.fits(g, n, q_count, last):
            need = c.stage_bytes(n, q_count, last) / 1e9
            cap = float(c.mem_cap[g]) / 1e9
            out.append(
                Violation(
                    "memory",
                    f"stage {q + 1} on {plan.stages[q].gpu} needs {need:.3f} GB, "
                    f"limit {cap:.3f} GB ({need - cap:.3f} GB over)",
                    q,
                    plan.stages[q].gpu,
                    amount=need - cap,
                )
            )
    return out
