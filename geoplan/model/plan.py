"""A pipeline plan: an ordered list of (GPU, layer count) stages.

Two equivalent forms: the stage list of ``formats.md`` and the paper's
chromosome ``[x_1..x_L]`` (x_l = GPU index of layer l, section 5.1). Converting
a chromosome whose GPU groups are not contiguous raises, since such a
chromosome encodes no plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from geoplan.errors import InputError

if TYPE_CHECKING:
    from geoplan.model.instance import Instance

__all__ = ["Plan", "Stage", "load_plan"]


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: a GPU id and its number of consecutive layers."""

    gpu: str
    layers: int


@dataclass(frozen=True)
class Plan:
    """An ordered pipeline plan; ``micro_batch_size`` None means the instance's."""

    stages: tuple[Stage, ...]
    micro_batch_size: int | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_pairs(
        cls, pairs: Iterable[tuple[str, int]], micro_batch_size: int | None = None
    ) -> Plan:
        return cls(tuple(Stage(g, int(n)) for g, n in pairs), micro_batch_size)

    @classmethod
    def from_indices(
        cls,
        instance: Instance,
        gpus: Sequence[int] | np.ndarray,
        layers: Sequence[int] | np.ndarray,
        micro_batch_size: int | None = None,
    ) -> Plan:
        """From GPU indices and layer counts (as exact models produce them)."""
        ids = instance.gpu_ids
        return cls(
            tuple(Stage(ids[int(g)], int(n)) for g, n in zip(gpus, layers, strict=True)),
            micro_batch_size,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        """Parse the plan JSON of formats.md (shape only; ids are checked by the validator)."""
        stages = []
        for k, s in enumerate(stage_list(data)):
            if not isinstance(s, Mapping):
                raise InputError(f"plan.stages[{k}]", s, "expected a JSON object")
            gpu = s.get("gpu")
            if not isinstance(gpu, str) or not gpu:
                raise InputError(f"plan.stages[{k}].gpu", gpu, "expected a GPU id")
            stages.append(Stage(gpu, json_int(s.get("layers"), f"plan.stages[{k}].layers")))
        return cls(tuple(stages), micro_batch_of(data))

    @classmethod
    def from_chromosome(
        cls, instance: Instance, chromosome: Sequence[int] | np.ndarray,
        micro_batch_size: int | None = None,
    ) -> Plan:
        """Decode ``[x_1..x_L]`` by one linear scan (paper 5.1)."""
        x = [int(v) for v in chromosome]
        if not x:
            raise InputError("chromosome", x, "empty chromosome")
        gpus: list[int] = []
        counts: list[int] = []
        for v in x:
            if not 0 <= v < instance.n:
                raise InputError("chromosome", v, f"GPU index outside 0..{instance.n - 1}")
            if gpus and gpus[-1] == v:
                counts[-1] += 1
            else:
                gpus.append(v)
                counts.append(1)
        if len(set(gpus)) != len(gpus):
            raise InputError("chromosome", x, "a GPU's layers are not contiguous")
        return cls.from_indices(instance, gpus, counts, micro_batch_size)

    # ------------------------------------------------------------------ views
    @property
    def q(self) -> int:
        """Number of stages Q."""
        return len(self.stages)

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(s.gpu for s in self.stages)

    @property
    def layer_counts(self) -> tuple[int, ...]:
        return tuple(s.layers for s in self.stages)

    def gpu_indices(self, instance: Instance) -> list[int]:
        """GPU indices in stage order; unknown ids raise InputError."""
        return [instance.index_of(s.gpu, f"plan.stages[{k}].gpu") for k, s in
                enumerate(self.stages)]

    def to_chromosome(self, instance: Instance) -> np.ndarray:
        """Encode as ``[x_1..x_L]`` (int64 GPU indices)."""
        idx = self.gpu_indices(instance)
        return np.repeat(np.asarray(idx, dtype=np.int64), [max(n, 0) for n in self.layer_counts])

    def reversed(self) -> Plan:
        return Plan(tuple(reversed(self.stages)), self.micro_batch_size)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"stages": [{"gpu": s.gpu, "layers": s.layers} for s in self.stages]}
        if self.micro_batch_size is not None:
            d["micro_batch_size"] = self.micro_batch_size
        return d

    def to_json(self, path: str | Path | None = None, indent: int | None = None) -> str:
        return plan_json(self.to_dict(), path, indent)

    def __str__(self) -> str:
        return " | ".join(f"{s.gpu}:{s.layers}" for s in self.stages)


def plan_json(d: Mapping[str, Any], path: str | Path | None, indent: int | None) -> str:
    """A plan dict as JSON text, also written to ``path`` (with a final newline) if given."""
    text = json.dumps(d, indent=indent)
    if path is not None:
        Path(path).write_text(text + "\n")
    return text


def stage_list(data: Any) -> list[Any]:
    """The non-empty ``stages`` list of a plan JSON object (InputError otherwise)."""
    if not isinstance(data, Mapping):
        raise InputError("plan", type(data).__name__, "expected a JSON object")
    raw = data.get("stages")
    if not isinstance(raw, list) or not raw:
        raise InputError("plan.stages", raw, "expected a non-empty list of stages")
    return raw


def json_int(v: Any, where: str) -> int:
    """An integer field of a plan (an integral float such as 5.0 is accepted)."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(where, v, "expected an integer")
    return v


def micro_batch_of(data: Mapping[str, Any]) -> int | None:
    """The plan's optional ``micro_batch_size`` (a positive integer, or None)."""
    u = data.get("micro_batch_size")
    if u is not None and (isinstance(u, bool) or not isinstance(u, int) or u <= 0):
        raise InputError("plan.micro_batch_size", u, "expected a positive integer")
    return u


def read_plan_data(path: str | Path) -> Any:
    """A plan file's JSON (a solve-result JSON with a ``plan`` key gives that plan)."""
    from geoplan.model.instance import read_json

    data = read_json(path, "plan")
    if isinstance(data, Mapping) and "stages" not in data and isinstance(data.get("plan"), Mapping):
        data = data["plan"]
    return data


def load_plan(path: str | Path) -> Plan:
    """Load a plan JSON file (a solve-result JSON with a ``plan`` key is accepted too)."""
    return Plan.from_dict(read_plan_data(path))
