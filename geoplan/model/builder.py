"""A small builder of instances for Python users.

::

    inst = (
        InstanceBuilder("two-sites")
        .gpu("a0", "A100-SXM-80GB", site="A", compute_util=0.5)
        .gpu("a1", "A100-SXM-80GB", site="A")
        .gpu("b0", "A30", site="B")
        .links_within_site("A", bandwidth_gbps=100, latency_ms=0.1)
        .links_between_sites("A", "B", bandwidth_gbps=10, latency_ms=20)
        .model("gpt3-1.3b")
        .training(batch_size=32, micro_batch_size=1)
        .build()
    )

GPU types and model presets are the names of :mod:`geoplan.model.catalog` (explicit
values win over the catalog's); link helpers take the values of one directed link.
Link rules are applied in call order when :meth:`InstanceBuilder.build` runs, and a
later rule replaces an earlier link of the same ``(src, dst)`` pair, so
``.full_mesh(...)`` followed by ``.link("a0", "b0", ...)`` overrides one pair. Every
value is checked when given (the records check themselves) and the whole instance
when built; errors are :class:`~geoplan.errors.InputError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geoplan.errors import InputError
from geoplan.model.catalog import gpu_type, model_shape
from geoplan.model.instance import (
    GPU,
    GPU_KEYS,
    LINK_BOUNDS,
    Instance,
    LinkTable,
    ModelSpec,
    ObjectiveSpec,
    TrainingSpec,
    _within,
)
from geoplan.model.network import expand_network_arrays

__all__ = ["InstanceBuilder"]


@dataclass(frozen=True)
class _LinkValues:
    """Checked values of one directed link: bandwidth (Gbps), latency (ms), util."""

    bandwidth_gbps: float
    latency_ms: float
    util: float

    @classmethod
    def of(cls, where: str, bandwidth_gbps: Any, latency_ms: Any, util: Any) -> _LinkValues:
        return cls(
            LINK_BOUNDS["bandwidth_gbps"].check(bandwidth_gbps, f"{where}.bandwidth_gbps"),
            LINK_BOUNDS["latency_ms"].check(latency_ms, f"{where}.latency_ms"),
            LINK_BOUNDS["util"].check(util, f"{where}.util"),
        )


class InstanceBuilder:
    """Builds an :class:`~geoplan.model.instance.Instance` step by step (methods chain)."""

    def __init__(self, name: str = "instance") -> None:
        if not isinstance(name, str):
            raise InputError("name", name, "expected a string")
        self._name = name
        self._gpus: list[GPU] = []
        self._rules: list[tuple[Any, ...]] = []
        self._model: ModelSpec | None = None
        self._training: TrainingSpec | None = None
        self._objective = ObjectiveSpec()

    # ------------------------------------------------------------------ GPUs
    def gpu(
        self,
        id: str,
        type: str | None = None,
        *,
        site: str | None = None,
        peak_tflops: float | None = None,
        memory_gb: float | None = None,
        idle_w: float | None = None,
        active_w: float | None = None,
        compute_util: float = 1.0,
        memory_util: float = 1.0,
    ) -> InstanceBuilder:
        """Add one GPU; ``type`` (a catalog name) supplies the values not given."""
        where = f"gpus[{len(self._gpus)}] ({id})"
        values: dict[str, Any] = {}
        if type is not None:
            with _within(where):
                spec = gpu_type(type, where="type")
            values.update(spec.gpu_fields())
            type = spec.name
        given = {"peak_tflops": peak_tflops, "memory_gb": memory_gb, "idle_w": idle_w,
                 "active_w": active_w}
        values.update({k: v for k, v in given.items() if v is not None})
        for key in ("peak_tflops", "memory_gb", "idle_w", "active_w"):
            if key not in values:
                raise InputError(f"{where}.{key}", None,
                                 "required (give it, or a catalog GPU type)")
        with _within(where):
            self._gpus.append(
                GPU(id=id, type=type, site=site, compute_util=compute_util,
                    memory_util=memory_util, **values)
            )
        return self

    def gpus(self, prefix: str, type: str | None, count: int, **kw: Any) -> InstanceBuilder:
        """Add ``count`` GPUs ``prefix0 .. prefix{count-1}`` with the same values."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InputError("count", count, "expected a positive integer")
        unknown = sorted(set(kw) - set(GPU_KEYS))
        if unknown:
            raise InputError(unknown[0], kw[unknown[0]], "unknown GPU field")
        for k in range(count):
            self.gpu(f"{prefix}{k}", type, **kw)
        return self

    # ------------------------------------------------------------------ links
    def link(
        self,
        src: str,
        dst: str,
        *,
        bandwidth_gbps: float,
        latency_ms: float,
        util: float = 1.0,
        both_ways: bool = False,
    ) -> InstanceBuilder:
        """One directed link ``src -> dst`` (and ``dst -> src`` with ``both_ways``)."""
        where = f"link {src}->{dst}"
        if src == dst:
            raise InputError(f"{where}.dst", dst, "a link must join two different GPUs")
        v = _LinkValues.of(where, bandwidth_gbps, latency_ms, util)
        self._rules.append(("pair", src, dst, v))
        if both_ways:
            self._rules.append(("pair", dst, src, v))
        return self

    def links_between_sites(
        self,
        a: str,
        b: str,
        *,
        bandwidth_gbps: float,
        latency_ms: float,
        util: float = 1.0,
        bandwidth_ba_gbps: float | None = None,
        latency_ba_ms: float | None = None,
        util_ba: float | None = None,
    ) -> InstanceBuilder:
        """Links between every GPU of site ``a`` and every GPU of site ``b``, both ways.

        ``a -> b`` uses the given values; ``b -> a`` the ``*_ba`` ones where given.
        """
        if a == b:
            raise InputError("b", b, "two different sites needed (see links_within_site)")
        where = f"sites {a}-{b}"
        ab = _LinkValues.of(where, bandwidth_gbps, latency_ms, util)
        ba = _LinkValues.of(
            f"sites {b}-{a}",
            bandwidth_gbps if bandwidth_ba_gbps is None else bandwidth_ba_gbps,
            latency_ms if latency_ba_ms is None else latency_ba_ms,
            util if util_ba is None else util_ba,
        )
        self._rules.append(("sites", a, b, ab))
        self._rules.append(("sites", b, a, ba))
        return self

    def links_within_site(
        self, site: str, *, bandwidth_gbps: float, latency_ms: float, util: float = 1.0
    ) -> InstanceBuilder:
        """Links between every ordered pair of distinct GPUs of ``site``."""
        v = _LinkValues.of(f"site {site}", bandwidth_gbps, latency_ms, util)
        self._rules.append(("sites", site, site, v))
        return self

    def full_mesh(
        self,
        *,
        bandwidth_gbps: float,
        latency_ms: float,
        util: float = 1.0,
        gpus: Sequence[str] | None = None,
    ) -> InstanceBuilder:
        """Links between every ordered pair of distinct GPUs (of ``gpus``, default all)."""
        v = _LinkValues.of("full_mesh", bandwidth_gbps, latency_ms, util)
        self._rules.append(("mesh", None if gpus is None else tuple(gpus), v))
        return self

    def network(self, spec: Mapping[str, Any]) -> InstanceBuilder:
        """Links from the sites shorthand of :mod:`geoplan.model.network` (e.g.
        :func:`~geoplan.model.network.three_site`); every GPU needs a site then."""
        if not isinstance(spec, Mapping):
            raise InputError("network", spec, "expected an object (the sites shorthand)")
        self._rules.append(("network", dict(spec)))
        return self

    # ------------------------------------------------------------------ model, training, objective
    def model(
        self,
        preset: str | None = None,
        *,
        layers: int | None = None,
        hidden: int | None = None,
        seq_len: int | None = None,
        vocab: int | None = None,
        flops_per_token_per_layer: float | None = None,
    ) -> InstanceBuilder:
        """The model shape: a catalog preset (explicit values win) or explicit values."""
        values: dict[str, Any] = {}
        if preset is not None:
            values.update(model_shape(preset, where="model.preset").model_fields())
        given = {"layers": layers, "hidden": hidden, "seq_len": seq_len, "vocab": vocab}
        values.update({k: v for k, v in given.items() if v is not None})
        for key in ("layers", "hidden", "seq_len", "vocab"):
            if key not in values:
                raise InputError(f"model.{key}", None, "required (give it, or a preset)")
        with _within("model"):
            self._model = ModelSpec(flops_per_token_per_layer=flops_per_token_per_layer,
                                    **values)
        return self

    def training(self, batch_size: int, micro_batch_size: int, **optional: Any
                 ) -> InstanceBuilder:
        """Batch and micro-batch sizes, and any optional TrainingSpec field."""
        known = set(TrainingSpec.__dataclass_fields__) - {"batch_size", "micro_batch_size"}
        unknown = sorted(set(optional) - known)
        if unknown:
            import difflib

            hint = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            more = f" (did you mean {hint[0]}?)" if hint else ""
            raise InputError(f"training.{unknown[0]}", optional[unknown[0]],
                             f"unknown field training.{unknown[0]}{more}")
        with _within("training"):
            self._training = TrainingSpec(batch_size=batch_size,
                                          micro_batch_size=micro_batch_size, **optional)
        return self

    def objective(
        self, lam: float = 1.0, t_ref_ms: float | None = None, e_ref_j: float | None = None
    ) -> InstanceBuilder:
        """lambda and (optionally) the normalisers."""
        with _within("objective"):
            self._objective = ObjectiveSpec(lam=lam, t_ref_ms=t_ref_ms, e_ref_j=e_ref_j)
        return self

    # ------------------------------------------------------------------ build
    def _links(self) -> LinkTable:
        ids = [g.id for g in self._gpus]
        index = {g: k for k, g in enumerate(ids)}
        sites = np.array([g.site for g in self._gpus], dtype=object)
        n = len(ids)
        chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

        def add(src: np.ndarray, dst: np.ndarray, v: _LinkValues) -> None:
            m = src != dst
            src, dst = src[m], dst[m]
            k = len(src)
            chunks.append((src, dst, np.full(k, v.bandwidth_gbps), np.full(k, v.latency_ms),
                           np.full(k, v.util)))

        def pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return np.repeat(a, len(b)), np.tile(b, len(a))

        for rule in self._rules:
            kind = rule[0]
            if kind == "pair":
                _, s, d, v = rule
                for key, gid in (("src", s), ("dst", d)):
                    if gid not in index:
                        raise InputError(f"link {s}->{d}.{key}", gid, "unknown GPU id")
                add(np.array([index[s]]), np.array([index[d]]), v)
            elif kind == "sites":
                _, a, b, v = rule
                add(*pairs(np.flatnonzero(sites == a), np.flatnonzero(sites == b)), v)
            elif kind == "mesh":
                _, chosen, v = rule
                if chosen is None:
                    sel = np.arange(n)
                else:
                    for gid in chosen:
                        if gid not in index:
                            raise InputError("full_mesh.gpus", gid, "unknown GPU id")
                    sel = np.array([index[g] for g in chosen], dtype=np.int64)
                add(*pairs(sel, sel), v)
            else:  # network
                raw = [g.to_dict() for g in self._gpus]
                a = expand_network_arrays(raw, rule[1])
                chunks.append((a.src, a.dst, a.bandwidth_gbps, a.latency_ms, a.util))
        if not chunks:
            return LinkTable(ids, [], [], [], [], [])
        src, dst, bw, lat, util = (np.concatenate([c[j] for c in chunks]) for j in range(5))
        # A later rule replaces an earlier link of the same pair, keeping the earlier place.
        pair = src * n + dst
        _, last_rev = np.unique(pair[::-1], return_index=True)
        last = len(pair) - 1 - last_rev  # the last occurrence of each pair
        _, first = np.unique(pair, return_index=True)  # sorted by pair, as `last`
        order = np.argsort(first, kind="stable")
        take = last[order]
        return LinkTable(ids, src[first[order]], dst[first[order]], bw[take], lat[take],
                         util[take])

    def build(self) -> Instance:
        """The checked instance (InputError naming the field if something is wrong)."""
        if not self._gpus:
            raise InputError("gpus", [], "add at least one GPU with .gpu(...)")
        if self._model is None:
            raise InputError("model", None, "call .model(...) before .build()")
        if self._training is None:
            raise InputError("training", None, "call .training(...) before .build()")
        return Instance(
            name=self._name,
            gpus=tuple(self._gpus),
            links=self._links(),
            model=self._model,
            training=self._training,
            objective=self._objective,
        )
