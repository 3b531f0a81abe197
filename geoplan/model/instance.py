"""The planning instance: GPUs, directed links, model, training and objective.

An :class:`Instance` is immutable and checks itself when built; every solver,
the evaluators and the validator read the same precomputed
:class:`Coefficients` (per-layer compute time, link times, memory terms), so the
formulas of ``cost-model.md`` are written down exactly once, here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from geoplan.cost.coefficients import Coefficients, build_coefficients, memory_admits_pipeline
from geoplan.errors import InputError

__all__ = [
    "GPU",
    "Instance",
    "Link",
    "ModelSpec",
    "ObjectiveSpec",
    "TrainingSpec",
    "load_instance",
]


# --------------------------------------------------------------------------- parsing helpers


def _req(d: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(d, Mapping):
        raise InputError(where, d, "expected a JSON object")
    if key not in d or d[key] is None:
        raise InputError(f"{where}.{key}", None, "required field is missing")
    return d[key]


def _num(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(where, value, "expected a number")
    x = float(value)
    if not math.isfinite(x):
        raise InputError(where, value, "must be finite")
    return x


def _pos(value: Any, where: str) -> float:
    x = _num(value, where)
    if x <= 0:
        raise InputError(where, value, "must be positive")
    return x


def _nonneg(value: Any, where: str) -> float:
    x = _num(value, where)
    if x < 0:
        raise InputError(where, value, "must be non-negative")
    return x


def _unit(value: Any, where: str) -> float:
    x = _num(value, where)
    if not 0 < x <= 1:
        raise InputError(where, value, "must lie in (0, 1]")
    return x


def _posint(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise InputError(where, value, "expected a positive integer")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value <= 0:
        raise InputError(where, value, "expected a positive integer")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(where, value, "expected a non-empty string")
    return value


def _opt(d: Mapping[str, Any], key: str, default: Any) -> Any:
    v = d.get(key)
    return default if v is None else v


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class GPU:
    """One GPU: peak TFLOPS, memory (GB), power (W) and optional labels."""

    id: str
    peak_tflops: float
    memory_gb: float
    idle_w: float
    active_w: float
    compute_util: float = 1.0
    memory_util: float = 1.0
    type: str | None = None
    site: str | None = None

    @property
    def effective_tflops(self) -> float:
        return self.compute_util * self.peak_tflops

    @property
    def effective_memory_gb(self) -> float:
        return self.memory_util * self.memory_gb

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id}
        if self.type is not None:
            d["type"] = self.type
        if self.site is not None:
            d["site"] = self.site
        d.update(
            peak_tflops=self.peak_tflops,
            compute_util=self.compute_util,
            memory_gb=self.memory_gb,
            memory_util=self.memory_util,
            idle_w=self.idle_w,
            active_w=self.active_w,
        )
        return d


@dataclass(frozen=True)
class Link:
    """A directed link ``src -> dst``."""

    src: str
    dst: str
    bandwidth_gbps: float
    latency_ms: float
    util: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "dst": self.dst,
            "bandwidth_gbps": self.bandwidth_gbps,
            "util": self.util,
            "latency_ms": self.latency_ms,
        }


@dataclass(frozen=True)
class ModelSpec:
    """Decoder-only Transformer shape."""

    layers: int
    hidden: int
    seq_len: int
    vocab: int
    flops_per_token_per_layer: float | None = None

    @property
    def params_per_layer(self) -> float:
        """P_l = 12 H^2."""
        return 12.0 * self.hidden**2

    @property
    def params_lm_head(self) -> float:
        """P_lm = V H."""
        return float(self.vocab * self.hidden)

    @property
    def flops_per_token(self) -> float:
        """C_l = 24 H^2 + 4 T H forward FLOPs per token per layer, unless overridden."""
        if self.flops_per_token_per_layer is not None:
            return self.flops_per_token_per_layer
        return 24.0 * self.hidden**2 + 4.0 * self.seq_len * self.hidden

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "layers": self.layers,
            "hidden": self.hidden,
            "seq_len": self.seq_len,
            "vocab": self.vocab,
        }
        if self.flops_per_token_per_layer is not None:
            d["flops_per_token_per_layer"] = self.flops_per_token_per_layer
        return d


@dataclass(frozen=True)
class TrainingSpec:
    """Batch, micro-batch and the memory/compute factors of cost-model.md."""

    batch_size: int
    micro_batch_size: int
    bytes_per_value: float = 2.0
    activation_factor: float = 17.0
    backward_factor: float = 2.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "micro_batch_size": self.micro_batch_size,
            "bytes_per_value": self.bytes_per_value,
            "activation_factor": self.activation_factor,
            "backward_factor": self.backward_factor,
        }


@dataclass(frozen=True)
class ObjectiveSpec:
    """lambda and the normalisers (None: supplied by the metis-default baseline)."""

    lam: float = 1.0
    t_ref_ms: float | None = None
    e_ref_j: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"lambda": self.lam, "t_ref_ms": self.t_ref_ms, "e_ref_j": self.e_ref_j}


# --------------------------------------------------------------------------- instance


@dataclass(frozen=True, eq=False)
class Instance:
    """A validated planning instance (immutable).

    Build it with :meth:`from_dict` or :func:`load_instance`; both raise
    :class:`~geoplan.errors.InputError` on invalid input.
    """

    name: str
    gpus: tuple[GPU, ...]
    links: tuple[Link, ...]
    model: ModelSpec
    training: TrainingSpec
    objective: ObjectiveSpec = field(default_factory=ObjectiveSpec)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Instance:
        """Parse the canonical JSON dict (and the catalog/sites shorthands)."""
        if not isinstance(data, Mapping):
            raise InputError("instance", type(data).__name__, "expected a JSON object")
        try:
            from geoplan.model.catalog import expand_instance_dict
        except ImportError:  # pragma: no cover - catalog is part of the package
            expand_instance_dict = None
        if expand_instance_dict is not None:
            data = expand_instance_dict(dict(data))

        name = str(data.get("name") or "instance")
        raw_gpus = _req(data, "gpus", "instance")
        if not isinstance(raw_gpus, list) or not raw_gpus:
            raise InputError("gpus", raw_gpus, "expected a non-empty list of GPUs")
        gpus: list[GPU] = []
        seen: set[str] = set()
        for k, g in enumerate(raw_gpus):
            w = f"gpus[{k}]"
            gid = _str(_req(g, "id", w), f"{w}.id")
            if gid in seen:
                raise InputError(f"{w}.id", gid, "duplicate GPU id")
            seen.add(gid)
            w = f"gpus[{k}] ({gid})"
            idle = _nonneg(_req(g, "idle_w", w), f"{w}.idle_w")
            active = _pos(_req(g, "active_w", w), f"{w}.active_w")
            if idle > active:
                raise InputError(f"{w}.idle_w", idle, f"idle power exceeds active_w={active:g}")
            gpus.append(
                GPU(
                    id=gid,
                    peak_tflops=_pos(_req(g, "peak_tflops", w), f"{w}.peak_tflops"),
                    memory_gb=_pos(_req(g, "memory_gb", w), f"{w}.memory_gb"),
                    idle_w=idle,
                    active_w=active,
                    compute_util=_unit(_opt(g, "compute_util", 1.0), f"{w}.compute_util"),
                    memory_util=_unit(_opt(g, "memory_util", 1.0), f"{w}.memory_util"),
                    type=None if g.get("type") is None else str(g["type"]),
                    site=None if g.get("site") is None else str(g["site"]),
                )
            )

        raw_links = data.get("links")
        if raw_links is None:
            raw_links = []
        if not isinstance(raw_links, list):
            raise InputError("links", raw_links, "expected a list of links")
        links: list[Link] = []
        pairs: set[tuple[str, str]] = set()
        for k, e in enumerate(raw_links):
            w = f"links[{k}]"
            src = _str(_req(e, "src", w), f"{w}.src")
            dst = _str(_req(e, "dst", w), f"{w}.dst")
            if src not in seen:
                raise InputError(f"{w}.src", src, "unknown GPU id")
            if dst not in seen:
                raise InputError(f"{w}.dst", dst, "unknown GPU id")
            if src == dst:
                raise InputError(f"{w}.dst", dst, "a link must join two different GPUs")
            if (src, dst) in pairs:
                raise InputError(w, f"{src}->{dst}", "duplicate link")
            pairs.add((src, dst))
            w = f"links[{k}] ({src}->{dst})"
            links.append(
                Link(
                    src=src,
                    dst=dst,
                    bandwidth_gbps=_pos(_req(e, "bandwidth_gbps", w), f"{w}.bandwidth_gbps"),
                    latency_ms=_nonneg(_req(e, "latency_ms", w), f"{w}.latency_ms"),
                    util=_unit(_opt(e, "util", 1.0), f"{w}.util"),
                )
            )

        m = _req(data, "model", "instance")
        fpt = m.get("flops_per_token_per_layer") if isinstance(m, Mapping) else None
        model = ModelSpec(
            layers=_posint(_req(m, "layers", "model"), "model.layers"),
            hidden=_posint(_req(m, "hidden", "model"), "model.hidden"),
            seq_len=_posint(_req(m, "seq_len", "model"), "model.seq_len"),
            vocab=_posint(_req(m, "vocab", "model"), "model.vocab"),
            flops_per_token_per_layer=None
            if fpt is None
            else _pos(fpt, "model.flops_per_token_per_layer"),
        )

        t = _req(data, "training", "instance")
        training = TrainingSpec(
            batch_size=_posint(_req(t, "batch_size", "training"), "training.batch_size"),
            micro_batch_size=_posint(
                _req(t, "micro_batch_size", "training"), "training.micro_batch_size"
            ),
            bytes_per_value=_pos(_opt(t, "bytes_per_value", 2), "training.bytes_per_value"),
            activation_factor=_pos(
                _opt(t, "activation_factor", 17), "training.activation_factor"
            ),
            backward_factor=_nonneg(_opt(t, "backward_factor", 2), "training.backward_factor"),
        )
        if training.batch_size % training.micro_batch_size:
            raise InputError(
                "training.micro_batch_size",
                training.micro_batch_size,
                f"batch_size={training.batch_size} is not divisible by the micro-batch size",
            )

        o = data.get("objective") or {}
        if not isinstance(o, Mapping):
            raise InputError("objective", o, "expected a JSON object")
        lam = _num(_opt(o, "lambda", 1.0), "objective.lambda")
        if not 0 <= lam <= 1:
            raise InputError("objective.lambda", lam, "must lie in [0, 1]")
        t_ref = o.get("t_ref_ms")
        e_ref = o.get("e_ref_j")
        objective = ObjectiveSpec(
            lam=lam,
            t_ref_ms=None if t_ref is None else _pos(t_ref, "objective.t_ref_ms"),
            e_ref_j=None if e_ref is None else _pos(e_ref, "objective.e_ref_j"),
        )

        inst = cls(
            name=name,
            gpus=tuple(gpus),
            links=tuple(links),
            model=model,
            training=training,
            objective=objective,
        )
        inst.check_capacity()
        return inst

    def check_capacity(self) -> None:
        """Raise if no single GPU and no pipeline could hold the model's memory.

        A necessary condition only (links are ignored, see :func:`memory_admits_pipeline`);
        solvers report the remaining, link-induced infeasibility themselves.
        """
        c = self.coefficients()
        if memory_admits_pipeline(c.mem_cap, c.mem_w, c.mem_a, c.mem_last, self.layers):
            return
        L = self.layers
        need = c.stage_bytes(1, 1, last=True) / 1e9
        raise InputError(
            "gpus",
            f"{self.n} GPUs, largest effective memory "
            f"{max(g.effective_memory_gb for g in self.gpus):.3g} GB",
            f"no single GPU and no pipeline can hold the model's {L} layers "
            f"(a one-layer last stage alone needs {need:.3g} GB)",
        )

    # ------------------------------------------------------------------ basic views
    @property
    def n(self) -> int:
        """Number of GPUs N."""
        return len(self.gpus)

    @property
    def layers(self) -> int:
        """Number of layers L."""
        return self.model.layers

    @property
    def lam(self) -> float:
        return self.objective.lam

    @cached_property
    def gpu_index(self) -> dict[str, int]:
        return {g.id: k for k, g in enumerate(self.gpus)}

    @cached_property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(g.id for g in self.gpus)

    def index_of(self, gpu_id: str, where: str = "plan") -> int:
        try:
            return self.gpu_index[gpu_id]
        except KeyError:
            raise InputError(where, gpu_id, "unknown GPU id") from None

    @cached_property
    def latency_ms(self) -> np.ndarray:
        """L_ij in ms, NaN where no link."""
        a = np.full((self.n, self.n), np.nan)
        for e in self.links:
            a[self.gpu_index[e.src], self.gpu_index[e.dst]] = e.latency_ms
        a.flags.writeable = False
        return a

    @cached_property
    def eff_bandwidth_gbps(self) -> np.ndarray:
        """B~_ij = beta_ij B_ij in Gbps, 0 where no link."""
        a = np.zeros((self.n, self.n))
        for e in self.links:
            a[self.gpu_index[e.src], self.gpu_index[e.dst]] = e.util * e.bandwidth_gbps
        a.flags.writeable = False
        return a

    @cached_property
    def has_link(self) -> np.ndarray:
        a = self.eff_bandwidth_gbps > 0
        a.flags.writeable = False
        return a

    @cached_property
    def eff_tflops(self) -> np.ndarray:
        a = np.array([g.effective_tflops for g in self.gpus], dtype=float)
        a.flags.writeable = False
        return a

    @property
    def micro_batches(self) -> int:
        return self.training.batch_size // self.training.micro_batch_size

    # ------------------------------------------------------------------ coefficients
    @cached_property
    def _default_coefficients(self) -> Coefficients:
        return build_coefficients(self, self.training.micro_batch_size)

    def coefficients(self, micro_batch_size: int | None = None) -> Coefficients:
        """The model coefficients for micro-batch size ``u`` (default: the instance's)."""
        if micro_batch_size is None or micro_batch_size == self.training.micro_batch_size:
            return self._default_coefficients
        return build_coefficients(self, micro_batch_size)

    # ------------------------------------------------------------------ variants and I/O
    def with_objective(
        self,
        lam: float | None = None,
        t_ref_ms: float | None = None,
        e_ref_j: float | None = None,
    ) -> Instance:
        """A copy with a different lambda and/or normalisers."""
        o = self.objective
        new = ObjectiveSpec(
            lam=o.lam if lam is None else float(lam),
            t_ref_ms=o.t_ref_ms if t_ref_ms is None else float(t_ref_ms),
            e_ref_j=o.e_ref_j if e_ref_j is None else float(e_ref_j),
        )
        if not 0 <= new.lam <= 1:
            raise InputError("lambda", new.lam, "must lie in [0, 1]")
        return Instance(self.name, self.gpus, self.links, self.model, self.training, new)

    def subset(self, gpu_ids: list[str] | tuple[str, ...]) -> Instance:
        """The instance restricted to some GPUs (links among them kept)."""
        keep = set(gpu_ids)
        gpus = tuple(g for g in self.gpus if g.id in keep)
        links = tuple(e for e in self.links if e.src in keep and e.dst in keep)
        return Instance(self.name, gpus, links, self.model, self.training, self.objective)

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON dict of formats.md."""
        return {
            "name": self.name,
            "gpus": [g.to_dict() for g in self.gpus],
            "links": [e.to_dict() for e in self.links],
            "model": self.model.to_dict(),
            "training": self.training.to_dict(),
            "objective": self.objective.to_dict(),
        }

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent)
        if path is not None:
            Path(path).write_text(text + "\n")
        return text

    @cached_property
    def fingerprint(self) -> str:
        """A short stable hash of the canonical content (for result rows)."""
        import hashlib

        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def read_json(path: str | Path, what: str) -> Any:
    """Read a JSON file, turning every I/O or syntax problem into an InputError."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InputError(what, str(p), "file not found") from None
    except OSError as exc:
        raise InputError(what, str(p), f"cannot read file: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            what, str(p), f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


def load_instance(path: str | Path) -> Instance:
    """Load and validate an instance JSON file."""
    return Instance.from_dict(read_json(path, "instance"))
