"""A hybrid-parallel plan (hybrid-model.md): stages that are groups of GPUs.

Stage q holds ``layers`` consecutive layers, has a tensor-parallel degree ``tp``
and data-parallel ``replicas``; each replica is a TP group (its GPUs in ring
order, the first is its *lead*) processing ``samples`` of every micro-batch.
Plan-level ``micro_batch_size`` and ``zero`` default to the instance's.

Parsing checks only shape and types (wrong types are input errors, exit 2);
values outside their ranges (tp 3, zero 5, recompute "partial", shares that do
not sum to u) are kept as given so that the validator can report them as
violations. A GeoTrain stage ``{"gpu", "layers"}`` parses as one replica of one
GPU with tp 1 whose samples are the whole micro-batch (``samples`` None), and a
plan whose stages all have that form converts to :class:`~geoplan.model.plan.Plan`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geoplan.errors import InputError
from geoplan.model.plan import (
    Plan,
    Stage,
    json_int,
    micro_batch_of,
    plan_json,
    read_plan_data,
    stage_list,
)

if TYPE_CHECKING:
    from geoplan.model.instance import Instance

__all__ = [
    "RECOMPUTE",
    "HybridPlan",
    "HybridStage",
    "Replica",
    "any_plan_from_dict",
    "as_hybrid",
    "load_any_plan",
]

#: The recompute values of hybrid-model.md, in the order of their kernel codes.
RECOMPUTE: tuple[str, ...] = ("none", "full")

_HYBRID_STAGE_KEYS = frozenset({"tp", "replicas", "recompute"})


@dataclass(frozen=True)
class Replica:
    """A TP group: its GPUs in ring order (the first is the lead) and its samples.

    ``samples`` None means the whole micro-batch (the GeoTrain form)."""

    gpus: tuple[str, ...]
    samples: int | None = None

    @property
    def lead(self) -> str:
        return self.gpus[0]


@dataclass(frozen=True)
class HybridStage:
    """One stage: consecutive layers, a TP degree, replicas and the recompute choice."""

    layers: int
    tp: int
    replicas: tuple[Replica, ...]
    recompute: str = "none"

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(g for r in self.replicas for g in r.gpus)

    @property
    def is_single(self) -> bool:
        """One replica of one GPU with tp 1, the whole micro-batch, no recomputation."""
        return (self.tp == 1 and len(self.replicas) == 1 and len(self.replicas[0].gpus) == 1
                and self.recompute == "none")


@dataclass(frozen=True)
class HybridPlan:
    """An ordered hybrid plan; ``micro_batch_size``/``zero`` None mean the instance's."""

    stages: tuple[HybridStage, ...]
    micro_batch_size: int | None = None
    zero: int | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_pipeline(cls, plan: Plan, zero: int | None = None) -> HybridPlan:
        """The GeoTrain plan as a hybrid plan (same price)."""
        return cls(
            tuple(HybridStage(s.layers, 1, (Replica((s.gpu,)),)) for s in plan.stages),
            plan.micro_batch_size,
            zero,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HybridPlan:
        """Parse the plan JSON of hybrid-model.md (either stage form; shape and types only)."""
        stages = tuple(_stage(s, f"plan.stages[{k}]") for k, s in enumerate(stage_list(data)))
        u = micro_batch_of(data)
        z = data.get("zero")
        if z is not None:
            z = json_int(z, "plan.zero")
        return cls(stages, u, z)

    # ------------------------------------------------------------------ views
    @property
    def q(self) -> int:
        return len(self.stages)

    @property
    def gpus(self) -> tuple[str, ...]:
        """Every GPU of the plan, stage by stage, replica by replica, in ring order."""
        return tuple(g for s in self.stages for g in s.gpus)

    @property
    def layer_counts(self) -> tuple[int, ...]:
        return tuple(s.layers for s in self.stages)

    @property
    def is_pipeline(self) -> bool:
        """Whether every stage has the GeoTrain form (then :meth:`to_pipeline` is exact)."""
        return all(s.is_single for s in self.stages)

    def to_pipeline(self) -> Plan:
        """The GeoTrain plan of a plan whose stages are all single GPUs."""
        if not self.is_pipeline:
            raise ValueError("the plan has hybrid stages")
        return Plan(tuple(Stage(s.replicas[0].gpus[0], s.layers) for s in self.stages),
                    self.micro_batch_size)

    def resolved(self, instance: Instance) -> HybridPlan:
        """The same plan with u, zero and every replica's samples made explicit."""
        u = self.micro_batch_size or instance.training.micro_batch_size
        z = instance.training.zero if self.zero is None else self.zero
        stages = tuple(
            replace(s, replicas=tuple(
                r if r.samples is not None else Replica(r.gpus, u) for r in s.replicas))
            for s in self.stages
        )
        return HybridPlan(stages, u, z)

    def to_dict(self) -> dict[str, Any]:
        """The plan JSON; written in the GeoTrain form when every stage has it."""
        d: dict[str, Any]
        if self.is_pipeline and all(s.replicas[0].samples in (None, self.micro_batch_size)
                                    for s in self.stages):
            d = self.to_pipeline().to_dict()
        else:
            d = {"stages": [_stage_dict(s) for s in self.stages]}
            if self.micro_batch_size is not None:
                d["micro_batch_size"] = self.micro_batch_size
        if self.zero is not None:
            d["zero"] = self.zero
        return d

    def to_json(self, path: str | Path | None = None, indent: int | None = None) -> str:
        return plan_json(self.to_dict(), path, indent)

    def __str__(self) -> str:
        parts = []
        for s in self.stages:
            reps = " ".join("[" + ",".join(r.gpus) + "]" + (f"x{r.samples}" if r.samples else "")
                            for r in s.replicas)
            extra = f" tp{s.tp}" + (" rc" if s.recompute != "none" else "")
            parts.append(f"{s.layers}L{extra} {reps}")
        return " | ".join(parts)


def _stage(s: Any, where: str) -> HybridStage:
    if not isinstance(s, Mapping):
        raise InputError(where, s, "expected a JSON object")
    n = json_int(s.get("layers"), f"{where}.layers")
    if "gpu" in s and not _HYBRID_STAGE_KEYS & s.keys():
        gpu = s.get("gpu")
        if not isinstance(gpu, str) or not gpu:
            raise InputError(f"{where}.gpu", gpu, "expected a GPU id")
        return HybridStage(n, 1, (Replica((gpu,)),))
    if "gpu" in s:
        raise InputError(f"{where}.gpu", s.get("gpu"),
                         "a stage has either 'gpu' (one GPU) or 'replicas', not both")
    tp = json_int(s.get("tp", 1), f"{where}.tp")
    rc = s.get("recompute", "none")
    if not isinstance(rc, str):
        raise InputError(f"{where}.recompute", rc, "expected a string (none or full)")
    raw = s.get("replicas")
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where}.replicas", raw, "expected a non-empty list of replicas")
    reps = []
    for k, r in enumerate(raw):
        w = f"{where}.replicas[{k}]"
        if not isinstance(r, Mapping):
            raise InputError(w, r, "expected a JSON object")
        gpus = r.get("gpus")
        if not isinstance(gpus, list) or not gpus:
            raise InputError(f"{w}.gpus", gpus, "expected a non-empty list of GPU ids")
        for j, g in enumerate(gpus):
            if not isinstance(g, str) or not g:
                raise InputError(f"{w}.gpus[{j}]", g, "expected a GPU id")
        samples = r.get("samples")
        reps.append(Replica(tuple(gpus), None if samples is None else
                            json_int(samples, f"{w}.samples")))
    return HybridStage(n, tp, tuple(reps), rc)


def _stage_dict(s: HybridStage) -> dict[str, Any]:
    return {
        "layers": s.layers,
        "tp": s.tp,
        "recompute": s.recompute,
        "replicas": [{"gpus": list(r.gpus), **({} if r.samples is None else
                                               {"samples": r.samples})}
                     for r in s.replicas],
    }


def any_plan_from_dict(data: Mapping[str, Any]) -> Plan | HybridPlan:
    """A :class:`Plan` when every stage has the GeoTrain form (and no plan-level
    ``zero``), else a :class:`HybridPlan`."""
    hybrid = HybridPlan.from_dict(data)
    if hybrid.is_pipeline and hybrid.zero is None:
        return hybrid.to_pipeline()
    return hybrid


def as_hybrid(plan: Plan | HybridPlan) -> HybridPlan:
    return plan if isinstance(plan, HybridPlan) else HybridPlan.from_pipeline(plan)


def load_any_plan(path: str | Path) -> Plan | HybridPlan:
    """Load a plan file of either space (a solve-result JSON with ``plan`` is accepted)."""
    return any_plan_from_dict(read_plan_data(path))


def gpu_index_array(instance: Instance, plan: HybridPlan) -> Sequence[int]:
    """GPU indices of :attr:`HybridPlan.gpus` (unknown ids raise naming the field)."""
    out = []
    for q, s in enumerate(plan.stages):
        for r, rep in enumerate(s.replicas):
            for j, g in enumerate(rep.gpus):
                out.append(instance.index_of(g, f"plan.stages[{q}].replicas[{r}].gpus[{j}]"))
    return out
