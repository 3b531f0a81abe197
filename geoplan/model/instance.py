"""The planning instance: GPUs, directed links, model, training and objective.

An :class:`Instance` is immutable and checks itself when built, however it is
built (its records check themselves too; the sanity ranges are :class:`Bound`
tables documented in docs/formats.md); every solver, the evaluators and the
validator read the same precomputed :class:`Coefficients` (per-layer compute time,
link times, memory terms). Links are held as columns (:class:`LinkTable`), and big
files are read by a byte scanner (:func:`split_links`), so that millions of links
load in seconds.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from geoplan.cost.coefficients import Coefficients, build_coefficients, memory_admits_pipeline
from geoplan.errors import InputError

__all__ = [
    "GPU",
    "Bound",
    "Instance",
    "Link",
    "LinkTable",
    "ModelSpec",
    "ObjectiveSpec",
    "TrainingSpec",
    "load_instance",
]


# --------------------------------------------------------------------------- sanity ranges


def _fmt(x: float) -> str:
    if x != 0 and abs(x) >= 1e4:
        k = round(math.log10(abs(x)))
        if abs(x) == 10.0**k:
            return f"1e{k}"
    return f"{x:g}"


@dataclass(frozen=True)
class Bound:
    """The physical sanity range of one number (documented in docs/formats.md)."""

    lo: float
    hi: float
    lo_open: bool = False
    integer: bool = False

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{_fmt(self.lo)}, {_fmt(self.hi)}]"

    def admits(self, a: np.ndarray) -> np.ndarray:
        """Vectorised: True where a value lies in the range (NaN never does)."""
        low = a > self.lo if self.lo_open else a >= self.lo
        return low & (a <= self.hi)

    def check(self, value: Any, where: str) -> Any:
        """The value as float (int for counts), or InputError naming ``where``."""
        kind = "an integer" if self.integer else "a number"
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            raise InputError(where, value, f"expected {kind}")
        if isinstance(value, float | np.floating) and not math.isfinite(value):
            raise InputError(where, value, "must be finite")
        if self.integer:
            if isinstance(value, float | np.floating) and not float(value).is_integer():
                raise InputError(where, value, "expected an integer (a count)")
            x: Any = int(value)
        else:
            try:
                x = float(value)
            except OverflowError:  # an int too large for a float
                raise InputError(where, value, f"too large; allowed range {self}") from None
        ok = (x > self.lo if self.lo_open else x >= self.lo) and x <= self.hi
        if not ok:
            if x > self.hi:
                reason = "too large"
            elif self.integer and self.lo == 1:
                reason = "expected a positive integer"
            elif self.lo == 0:
                reason = "must be positive" if self.lo_open else "must be non-negative"
            else:
                reason = "too small"
            raise InputError(where, value, f"{reason}; allowed range {self}")
        return x


#: Sanity ranges of every number of an instance, by record (docs/formats.md).
GPU_BOUNDS: dict[str, Bound] = {
    "peak_tflops": Bound(1e-6, 1e5),  # a floor: 5e-324 overflowed the compute times
    "memory_gb": Bound(0, 1e5, lo_open=True),
    "idle_w": Bound(0, 1e5),
    "active_w": Bound(0, 1e5, lo_open=True),
    "compute_util": Bound(1e-6, 1),
    "memory_util": Bound(1e-6, 1),
}
LINK_BOUNDS: dict[str, Bound] = {
    "bandwidth_gbps": Bound(1e-6, 1e7),
    "latency_ms": Bound(0, 1e6),
    "util": Bound(1e-6, 1),
}
MODEL_BOUNDS: dict[str, Bound] = {
    "layers": Bound(1, 1e5, integer=True),
    "hidden": Bound(1, 1e6, integer=True),
    "seq_len": Bound(1, 1e8, integer=True),
    "vocab": Bound(1, 1e8, integer=True),
    "flops_per_token_per_layer": Bound(1, 1e18),
}
TRAINING_BOUNDS: dict[str, Bound] = {
    "batch_size": Bound(1, 1e9, integer=True),
    "micro_batch_size": Bound(1, 1e9, integer=True),
    "bytes_per_value": Bound(0.125, 64),  # one bit at least (1e-30: an invalid cast)
    "activation_factor": Bound(0, 1e4, lo_open=True),
    "backward_factor": Bound(0, 1e3),
    "stage_overhead_ms": Bound(0, 1e6),
    "zero": Bound(0, 2, integer=True),
    "max_tp": Bound(1, 1024, integer=True),
}
OBJECTIVE_BOUNDS: dict[str, Bound] = {
    "lambda": Bound(0, 1),
    "t_ref_ms": Bound(0, 1e30, lo_open=True),
    "e_ref_j": Bound(0, 1e30, lo_open=True),
}
RECOMPUTE_KINDS = ("none", "full")

#: The keys each part of the canonical instance accepts (after the shorthands of
#: :func:`geoplan.model.catalog.expand_instance_dict` are expanded).
TOP_KEYS = ("name", "gpus", "links", "model", "training", "objective", "network")
GPU_KEYS = ("id", "type", "site", *GPU_BOUNDS)
LINK_KEYS = ("src", "dst", "bandwidth_gbps", "util", "latency_ms")
MODEL_KEYS = (*MODEL_BOUNDS, "preset")
TRAINING_KEYS = (
    *TRAINING_BOUNDS,
    "zero_choices",
    "micro_batch_choices",
    "recompute_choices",
)
OBJECTIVE_KEYS = tuple(OBJECTIVE_BOUNDS)

#: More links than this print one progress line on stderr while loading.
PROGRESS_LINKS = 200_000


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def _check_fields(obj: Any, bounds: Mapping[str, Bound], aliases: Mapping[str, str] | None = None
                  ) -> None:
    """Check and normalise every bounded field of a frozen record in place."""
    for key, bound in bounds.items():
        attr = (aliases or {}).get(key, key)
        if not hasattr(obj, attr):
            continue
        value = getattr(obj, attr)
        if value is None and key in _OPTIONAL_NONE:
            continue
        _set(obj, attr, bound.check(value, key))


_OPTIONAL_NONE = frozenset({"flops_per_token_per_layer", "t_ref_ms", "e_ref_j"})


def _label(value: Any, where: str) -> None:
    if value is not None and not isinstance(value, str):
        raise InputError(where, value, "expected a string label or null")


def _int_choices(value: Any, where: str, bound: Bound) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise InputError(where, value, "expected a non-empty list")
    if not value:
        raise InputError(where, value, "expected a non-empty list")
    return tuple(bound.check(v, f"{where}[{k}]") for k, v in enumerate(value))


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class GPU:
    """One GPU: peak TFLOPS, memory (GB), power (W) and optional labels.

    Checks itself when built (ranges of docs/formats.md, idle <= active power);
    raises :class:`~geoplan.errors.InputError` naming the field.
    """

    id: str
    peak_tflops: float
    memory_gb: float
    idle_w: float
    active_w: float
    compute_util: float = 1.0
    memory_util: float = 1.0
    type: str | None = None
    site: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InputError("id", self.id, "expected a non-empty string")
        _check_fields(self, GPU_BOUNDS)
        _label(self.type, "type")
        _label(self.site, "site")
        if self.idle_w > self.active_w:
            raise InputError(
                "idle_w", self.idle_w, f"idle power exceeds active_w={self.active_w:g}"
            )

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
    """A directed link ``src -> dst`` (checks itself when built)."""

    src: str
    dst: str
    bandwidth_gbps: float
    latency_ms: float
    util: float = 1.0

    def __post_init__(self) -> None:
        for key in ("src", "dst"):
            v = getattr(self, key)
            if not isinstance(v, str) or not v:
                raise InputError(key, v, "expected a non-empty string")
        if self.src == self.dst:
            raise InputError("dst", self.dst, "a link must join two different GPUs")
        _check_fields(self, LINK_BOUNDS)

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
    """Decoder-only Transformer shape (checks itself when built)."""

    layers: int
    hidden: int
    seq_len: int
    vocab: int
    flops_per_token_per_layer: float | None = None

    def __post_init__(self) -> None:
        _check_fields(self, MODEL_BOUNDS)

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
    """Batch, micro-batch and the memory/compute factors of cost-model.md.

    ``stage_overhead_ms`` is cost-model.md's fixed time per stage and micro-batch;
    ``zero`` .. ``recompute_choices`` are the optional fields of hybrid-model.md
    (``None``: absent, meaning the single value the contract names as default).
    Checks itself when built, including B mod u == 0.
    """

    batch_size: int
    micro_batch_size: int
    bytes_per_value: float = 2.0
    activation_factor: float = 17.0
    backward_factor: float = 2.0
    stage_overhead_ms: float = 0.0
    zero: int = 0
    zero_choices: tuple[int, ...] | None = None
    max_tp: int = 8
    micro_batch_choices: tuple[int, ...] | None = None
    recompute_choices: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _check_fields(self, TRAINING_BOUNDS)
        B = self.batch_size
        if B % self.micro_batch_size:
            raise InputError(
                "micro_batch_size",
                self.micro_batch_size,
                f"batch_size={B} is not divisible by the micro-batch size",
            )
        if self.max_tp & (self.max_tp - 1):
            raise InputError("max_tp", self.max_tp, "must be a power of two")
        zb = TRAINING_BOUNDS["zero"]
        _set(self, "zero_choices", _int_choices(self.zero_choices, "zero_choices", zb))
        mb = TRAINING_BOUNDS["micro_batch_size"]
        choices = _int_choices(self.micro_batch_choices, "micro_batch_choices", mb)
        for k, u in enumerate(choices or ()):
            if B % u:
                raise InputError(
                    f"micro_batch_choices[{k}]", u, f"does not divide batch_size={B}"
                )
        _set(self, "micro_batch_choices", choices)
        rc = self.recompute_choices
        if rc is not None:
            if isinstance(rc, str) or not isinstance(rc, list | tuple) or not rc:
                raise InputError("recompute_choices", rc, "expected a non-empty list")
            for k, v in enumerate(rc):
                if v not in RECOMPUTE_KINDS:
                    raise InputError(
                        f"recompute_choices[{k}]", v, f"expected one of {list(RECOMPUTE_KINDS)}"
                    )
            _set(self, "recompute_choices", tuple(rc))

    @property
    def declares_hybrid(self) -> bool:
        """Whether any optional field of hybrid-model.md is given (the instance is meant
        for the hybrid space too, so plans of one-GPU stages need not fit it)."""
        return (self.zero != 0 or self.max_tp != 8 or self.zero_choices is not None
                or self.micro_batch_choices is not None or self.recompute_choices is not None)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "batch_size": self.batch_size,
            "micro_batch_size": self.micro_batch_size,
            "bytes_per_value": self.bytes_per_value,
            "activation_factor": self.activation_factor,
            "backward_factor": self.backward_factor,
        }
        if self.stage_overhead_ms:
            d["stage_overhead_ms"] = self.stage_overhead_ms
        if self.zero:
            d["zero"] = self.zero
        if self.max_tp != 8:
            d["max_tp"] = self.max_tp
        for key in ("zero_choices", "micro_batch_choices", "recompute_choices"):
            v = getattr(self, key)
            if v is not None:
                d[key] = list(v)
        return d


@dataclass(frozen=True)
class ObjectiveSpec:
    """lambda and the normalisers (None: supplied by the metis-default baseline)."""

    lam: float = 1.0
    t_ref_ms: float | None = None
    e_ref_j: float | None = None

    def __post_init__(self) -> None:
        _check_fields(self, OBJECTIVE_BOUNDS, aliases={"lambda": "lam"})

    def to_dict(self) -> dict[str, Any]:
        return {"lambda": self.lam, "t_ref_ms": self.t_ref_ms, "e_ref_j": self.e_ref_j}


# --------------------------------------------------------------------------- links as columns


def _ro(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class LinkTable(Sequence[Link]):
    """The directed links of an instance as columns (numpy arrays).

    ``src``/``dst`` are GPU indices into ``ids``. It is a read-only sequence of
    :class:`Link` records, built one at a time only when asked for, so that an
    instance with millions of links loads and checks itself with array operations.
    """

    __slots__ = ("_checked", "bandwidth_gbps", "dst", "ids", "latency_ms", "src", "util")

    def __init__(
        self,
        ids: Sequence[str],
        src: Any,
        dst: Any,
        bandwidth_gbps: Any,
        latency_ms: Any,
        util: Any = None,
    ) -> None:
        self.ids = tuple(ids)
        self.src = _ro(np.array(src, dtype=np.int64).reshape(-1))
        self.dst = _ro(np.array(dst, dtype=np.int64).reshape(-1))
        self.bandwidth_gbps = _ro(np.array(bandwidth_gbps, dtype=np.float64).reshape(-1))
        self.latency_ms = _ro(np.array(latency_ms, dtype=np.float64).reshape(-1))
        m = len(self.src)
        self.util = _ro(
            np.ones(m) if util is None else np.array(util, dtype=np.float64).reshape(-1)
        )
        if not all(len(a) == m for a in (self.dst, self.bandwidth_gbps, self.latency_ms,
                                            self.util)):
            raise InputError("links", m, "link columns of different lengths")
        self._checked = False

    @classmethod
    def from_links(cls, ids: Sequence[str], links: Iterable[Any]) -> LinkTable:
        """A table from :class:`Link` records (InputError for an unknown GPU id)."""
        index = {g: k for k, g in enumerate(ids)}
        rows: list[tuple[int, int, float, float, float]] = []
        for k, e in enumerate(links):
            if not isinstance(e, Link):
                raise InputError(f"links[{k}]", e, "expected a Link record")
            s, d = index.get(e.src), index.get(e.dst)
            if s is None:
                raise InputError(f"links[{k}].src", e.src, "unknown GPU id")
            if d is None:
                raise InputError(f"links[{k}].dst", e.dst, "unknown GPU id")
            rows.append((s, d, e.bandwidth_gbps, e.latency_ms, e.util))
        if not rows:
            return cls(ids, [], [], [], [], [])
        s_, d_, b_, l_, u_ = zip(*rows, strict=True)
        return cls(ids, s_, d_, b_, l_, u_)

    # ------------------------------------------------------------------ sequence protocol
    def __len__(self) -> int:
        return len(self.src)

    def _link(self, k: int) -> Link:
        return Link(
            self.ids[self.src[k]],
            self.ids[self.dst[k]],
            float(self.bandwidth_gbps[k]),
            float(self.latency_ms[k]),
            float(self.util[k]),
        )

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self._link(i) for i in range(*k.indices(len(self)))]
        n = len(self)
        k = int(k)
        if not -n <= k < n:
            raise IndexError("link index out of range")
        return self._link(k % n)

    def __iter__(self) -> Iterator[Link]:
        ids = self.ids
        for s, d, b, lat, u in zip(
            self.src.tolist(),
            self.dst.tolist(),
            self.bandwidth_gbps.tolist(),
            self.latency_ms.tolist(),
            self.util.tolist(),
            strict=True,
        ):
            yield Link(ids[s], ids[d], b, lat, u)

    def __repr__(self) -> str:
        return f"LinkTable({len(self)} links over {len(self.ids)} GPUs)"

    # ------------------------------------------------------------------ views
    def to_dicts(self) -> list[dict[str, Any]]:
        """The canonical link dicts (without building Link records)."""
        ids = self.ids
        return [
            {"src": ids[s], "dst": ids[d], "bandwidth_gbps": b, "util": u, "latency_ms": lat}
            for s, d, b, lat, u in zip(
                self.src.tolist(),
                self.dst.tolist(),
                self.bandwidth_gbps.tolist(),
                self.latency_ms.tolist(),
                self.util.tolist(),
                strict=True,
            )
        ]

    def restricted(self, keep: Sequence[int]) -> LinkTable:
        """The links among the GPUs ``keep`` (indices), renumbered in that order."""
        new = np.full(len(self.ids), -1, dtype=np.int64)
        new[np.asarray(keep, dtype=np.int64)] = np.arange(len(keep))
        s, d = new[self.src], new[self.dst]
        m = (s >= 0) & (d >= 0)
        t = LinkTable(
            [self.ids[k] for k in keep],
            s[m],
            d[m],
            self.bandwidth_gbps[m],
            self.latency_ms[m],
            self.util[m],
        )
        t._checked = self._checked
        return t

    def _path(self, k: int) -> str:
        return f"links[{k}] ({self.ids[self.src[k]]}->{self.ids[self.dst[k]]})"

    def check(self) -> None:
        """Vectorised checks: known GPUs, no self-links, no duplicates, sanity ranges."""
        if self._checked:
            return
        n = len(self.ids)
        for key, col in (("src", self.src), ("dst", self.dst)):
            bad = np.flatnonzero((col < 0) | (col >= n))
            if len(bad):
                raise InputError(f"links[{bad[0]}].{key}", int(col[bad[0]]), "unknown GPU index")
        bad = np.flatnonzero(self.src == self.dst)
        if len(bad):
            k = int(bad[0])
            raise InputError(f"links[{k}].dst", self.ids[self.dst[k]],
                             "a link must join two different GPUs")
        for key, bound in LINK_BOUNDS.items():
            col = getattr(self, key)
            bad = np.flatnonzero(~bound.admits(col))
            if len(bad):
                k = int(bad[0])
                bound.check(float(col[k]), f"{self._path(k)}.{key}")
        if len(self):
            pair = self.src * n + self.dst
            if n * n <= 64_000_000:
                repeated = np.bincount(pair, minlength=n * n) > 1
                dup = bool(repeated.any())
            else:
                order = np.argsort(pair, kind="stable")
                dup = bool((pair[order][1:] == pair[order][:-1]).any())
            if dup:
                # the first link that repeats an earlier one
                _, first = np.unique(pair, return_index=True)
                later = np.ones(len(pair), dtype=bool)
                later[first] = False
                k = int(np.flatnonzero(later)[0])
                s, d = self.ids[self.src[k]], self.ids[self.dst[k]]
                raise InputError(f"links[{k}]", f"{s}->{d}", "duplicate link")
        self._checked = True


def _progress(n_links: int) -> None:
    if n_links > PROGRESS_LINKS:
        print(f"loading {n_links:,} links...", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- instance


@contextmanager
def _within(prefix: str) -> Iterator[None]:
    """Re-raise an InputError of a record with its field path prefixed by ``prefix``."""
    try:
        yield
    except InputError as exc:
        if str(exc.field).startswith(f"{prefix}."):  # a _req() inside: already prefixed
            raise
        raise InputError(f"{prefix}.{exc.field}", exc.value, exc.message) from None


def _obj(d: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(d, Mapping):
        raise InputError(where, d, "expected a JSON object")
    return d


def _req(d: Mapping[str, Any], key: str, where: str) -> Any:
    _obj(d, where)
    if key not in d or d[key] is None:
        raise InputError(f"{where}.{key}", None, "required field is missing")
    return d[key]


def _check_keys(d: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    """Reject a key not in ``known``, with a "did you mean" hint."""
    for key in d:
        if key in known:
            continue
        path = f"{where}.{key}" if where else str(key)
        hint = difflib.get_close_matches(str(key), known, n=1)
        more = f" (did you mean {hint[0]}?)" if hint else f"; known: {', '.join(known)}"
        raise InputError(path, d[key], f"unknown field {path}{more}")


def _given(d: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {k: d[k] for k in keys if d.get(k) is not None}


_LINK_KEYSET = frozenset(LINK_KEYS)
_LINK_KEYSET_NO_UTIL = frozenset(LINK_KEYS) - {"util"}


def _numeric_column(col: list[Any]) -> np.ndarray | None:
    """``col`` as a float array, or None if some entry is not a plain int/float."""
    if not set(map(type, col)) <= {int, float}:
        return None
    try:
        return np.array(col, dtype=np.float64)
    except OverflowError:
        return None


def _columns_fast(raw: list[Any], index: Mapping[str, int]) -> tuple[np.ndarray, ...] | None:
    """Columns of well-formed canonical link dicts, or None (then the record path explains)."""
    if not all(
        type(e) is dict and (e.keys() == _LINK_KEYSET or e.keys() == _LINK_KEYSET_NO_UTIL)
        for e in raw
    ):
        return None
    try:
        src = np.fromiter((index[e["src"]] for e in raw), dtype=np.int64, count=len(raw))
        dst = np.fromiter((index[e["dst"]] for e in raw), dtype=np.int64, count=len(raw))
    except (KeyError, TypeError):
        return None
    bw = _numeric_column([e["bandwidth_gbps"] for e in raw])
    lat = _numeric_column([e["latency_ms"] for e in raw])
    util = _numeric_column([e.get("util", 1.0) for e in raw])
    if bw is None or lat is None or util is None:
        return None
    return src, dst, bw, lat, util


def _parse_links(raw: Any, ids: Sequence[str]) -> LinkTable:
    """The ``links`` of an instance dict (a list of dicts, or network-generated columns)."""
    from geoplan.model.network import LinkArrays

    generated: LinkArrays | None = None
    if isinstance(raw, LinkArrays):
        generated, raw = raw, raw.explicit or []
    elif raw is None:
        raw = []
    if not isinstance(raw, list):
        raise InputError("links", raw, "expected a list of links")
    if generated is None:
        _progress(len(raw))
    index = {g: k for k, g in enumerate(ids)}
    cols = _columns_fast(raw, index)
    if cols is not None:
        table = LinkTable(ids, *cols)
    else:
        links = []
        for k, e in enumerate(raw):
            w = f"links[{k}]"
            _obj(e, w)
            _check_keys(e, LINK_KEYS, w)
            src, dst = _req(e, "src", w), _req(e, "dst", w)
            if isinstance(src, str) and isinstance(dst, str) and src in index and dst in index:
                w = f"links[{k}] ({src}->{dst})"
            with _within(w):
                links.append(
                    Link(
                        src=src,
                        dst=dst,
                        **{key: _req(e, key, w) for key in ("bandwidth_gbps", "latency_ms")},
                        **_given(e, ("util",)),
                    )
                )
        table = LinkTable.from_links(ids, links)
    if generated is None:
        return table
    if not len(table):
        return LinkTable(ids, generated.src, generated.dst, generated.bandwidth_gbps,
                         generated.latency_ms, generated.util)
    return LinkTable(
        ids,
        np.concatenate([generated.src, table.src]),
        np.concatenate([generated.dst, table.dst]),
        np.concatenate([generated.bandwidth_gbps, table.bandwidth_gbps]),
        np.concatenate([generated.latency_ms, table.latency_ms]),
        np.concatenate([generated.util, table.util]),
    )


# --------------------------------------------------------------------------- instance


@dataclass(frozen=True, eq=False)
class Instance:
    """A validated planning instance (immutable).

    It checks itself when built, however it is built (:meth:`from_dict`,
    :func:`load_instance`, :class:`~geoplan.model.builder.InstanceBuilder` or the
    constructor): unique GPU ids, links between known and distinct GPUs, no
    duplicate link, the sanity ranges of every number, B mod u == 0 and
    :meth:`check_capacity`; it raises :class:`~geoplan.errors.InputError` naming
    the field. ``links`` may be given as :class:`Link` records or a
    :class:`LinkTable`; it is stored as a :class:`LinkTable` (columns), which is a
    sequence of :class:`Link`.
    """

    name: str
    gpus: tuple[GPU, ...]
    links: Sequence[Link]
    model: ModelSpec
    training: TrainingSpec
    objective: ObjectiveSpec = field(default_factory=ObjectiveSpec)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InputError("name", self.name, "expected a string")
        gpus = tuple(self.gpus)
        if not gpus:
            raise InputError("gpus", list(gpus), "expected a non-empty list of GPUs")
        seen: dict[str, int] = {}
        for k, g in enumerate(gpus):
            if not isinstance(g, GPU):
                raise InputError(f"gpus[{k}]", g, "expected a GPU record")
            if g.id in seen:
                raise InputError(f"gpus[{k}].id", g.id, "duplicate GPU id")
            seen[g.id] = k
        _set(self, "gpus", gpus)
        ids = tuple(seen)
        links = self.links
        if isinstance(links, LinkTable):
            if links.ids != ids:
                remap = np.array([seen.get(i, -1) for i in links.ids] or [0], dtype=np.int64)
                for key, col in (("src", links.src), ("dst", links.dst)):
                    bad = np.flatnonzero(remap[col] < 0)
                    if len(bad):
                        k = int(bad[0])
                        raise InputError(f"links[{k}].{key}", links.ids[col[k]], "unknown GPU id")
                links = LinkTable(ids, remap[links.src], remap[links.dst], links.bandwidth_gbps,
                                  links.latency_ms, links.util)
        elif isinstance(links, str | bytes | Mapping) or not isinstance(links, Iterable):
            raise InputError("links", links, "expected a sequence of Link records")
        else:
            links = LinkTable.from_links(ids, links)
        links.check()
        _set(self, "links", links)
        for key, kind in (("model", ModelSpec), ("training", TrainingSpec),
                          ("objective", ObjectiveSpec)):
            if not isinstance(getattr(self, key), kind):
                raise InputError(key, getattr(self, key), f"expected a {kind.__name__}")
        self.check_capacity()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Instance:
        """Parse the canonical JSON dict (and the catalog/sites shorthands).

        Only types and structure are read here (required and unknown keys); every
        value is checked by the records and the Instance constructor.
        """
        if not isinstance(data, Mapping):
            raise InputError("instance", type(data).__name__, "expected a JSON object")
        from geoplan.model.catalog import expand_instance_dict

        data = expand_instance_dict(data, columnar=True)
        _check_keys(data, TOP_KEYS, "")
        name = data.get("name")
        name = "instance" if name is None or name == "" else str(name)

        raw_gpus = _req(data, "gpus", "instance")
        if not isinstance(raw_gpus, list) or not raw_gpus:
            raise InputError("gpus", raw_gpus, "expected a non-empty list of GPUs")
        gpus: list[GPU] = []
        for k, g in enumerate(raw_gpus):
            w = f"gpus[{k}]"
            _obj(g, w)
            _check_keys(g, GPU_KEYS, w)
            gid = _req(g, "id", w)
            if not isinstance(gid, str) or not gid:
                raise InputError(f"{w}.id", gid, "expected a non-empty string")
            w = f"gpus[{k}] ({gid})"
            fields = {key: _req(g, key, w) for key in ("peak_tflops", "memory_gb", "idle_w",
                                                        "active_w")}
            fields.update(_given(g, ("compute_util", "memory_util")))
            fields.update({key: str(v) for key, v in _given(g, ("type", "site")).items()})
            with _within(w):
                gpus.append(GPU(id=gid, **fields))
        ids = [g.id for g in gpus]
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            for k, gid in enumerate(ids):
                if gid in seen:
                    raise InputError(f"gpus[{k}].id", gid, "duplicate GPU id")
                seen.add(gid)
        links = _parse_links(data.get("links"), ids)

        m = _obj(_req(data, "model", "instance"), "model")
        _check_keys(m, MODEL_KEYS, "model")
        with _within("model"):
            model = ModelSpec(
                **{key: _req(m, key, "model") for key in ("layers", "hidden", "seq_len", "vocab")
                   },
                **_given(m, ("flops_per_token_per_layer",)),
            )

        t = _obj(_req(data, "training", "instance"), "training")
        _check_keys(t, TRAINING_KEYS, "training")
        with _within("training"):
            training = TrainingSpec(
                batch_size=_req(t, "batch_size", "training"),
                micro_batch_size=_req(t, "micro_batch_size", "training"),
                **_given(t, (k for k in TRAINING_KEYS if k not in ("batch_size",
                                                                     "micro_batch_size"))),
            )

        o = data.get("objective")
        o = _obj({} if o is None else o, "objective")
        _check_keys(o, OBJECTIVE_KEYS, "objective")
        with _within("objective"):
            objective = ObjectiveSpec(
                lam=1.0 if o.get("lambda") is None else o["lambda"],
                t_ref_ms=o.get("t_ref_ms"),
                e_ref_j=o.get("e_ref_j"),
            )

        return cls(
            name=name,
            gpus=tuple(gpus),
            links=links,
            model=model,
            training=training,
            objective=objective,
        )

    def check_capacity(self) -> None:
        """Raise if no single GPU and no pipeline could hold the model's memory.

        A necessary condition only (links are ignored, see :func:`memory_admits_pipeline`);
        solvers report the remaining, link-induced infeasibility themselves.
        """
        c = self.coefficients()
        if memory_admits_pipeline(c.mem_cap, c.mem_w, c.mem_a, c.mem_last, self.layers):
            return
        if self.training.declares_hybrid:
            # Stages of GPU groups divide a stage's memory (TP) and shard its state
            # (ZeRO); all a group pool must hold is d + 3 >= 4 copies of kappa per
            # parameter over its d replicas (hybrid-model.md, sigma), activations aside.
            need = 4.0 * (self.layers * self.model.params_per_layer + self.model.params_lm_head
                          ) * self.training.bytes_per_value
            if float(np.sum(c.mem_cap)) >= need:
                return
            raise InputError(
                "gpus", f"{self.n} GPUs, {float(np.sum(c.mem_cap)) / 1e9:.4g} GB in all",
                f"even hybrid stages cannot hold the model: its weights, gradients and "
                f"optimizer state need at least {need / 1e9:.4g} GB")
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
        t = self.link_table
        a[t.src, t.dst] = t.latency_ms
        a.flags.writeable = False
        return a

    @cached_property
    def eff_bandwidth_gbps(self) -> np.ndarray:
        """B~_ij = beta_ij B_ij in Gbps, 0 where no link."""
        a = np.zeros((self.n, self.n))
        t = self.link_table
        a[t.src, t.dst] = t.util * t.bandwidth_gbps
        a.flags.writeable = False
        return a

    @property
    def link_table(self) -> LinkTable:
        """The links as columns (GPU indices and float arrays)."""
        return self.links  # type: ignore[return-value]  # __post_init__ stores a LinkTable

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
            lam=o.lam if lam is None else lam,
            t_ref_ms=o.t_ref_ms if t_ref_ms is None else t_ref_ms,
            e_ref_j=o.e_ref_j if e_ref_j is None else e_ref_j,
        )
        return Instance(self.name, self.gpus, self.links, self.model, self.training, new)

    def subset(self, gpu_ids: list[str] | tuple[str, ...]) -> Instance:
        """The instance restricted to some GPUs (links among them kept)."""
        keep = set(gpu_ids)
        idx = [k for k, g in enumerate(self.gpus) if g.id in keep]
        gpus = tuple(self.gpus[k] for k in idx)
        links = self.link_table.restricted(idx)
        return Instance(self.name, gpus, links, self.model, self.training, self.objective)

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON dict of formats.md."""
        d = self.to_dict_without_links()
        return {"name": d.pop("name"), "gpus": d.pop("gpus"),
                "links": self.link_table.to_dicts(), **d}

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent)
        if path is not None:
            Path(path).write_text(text + "\n")
        return text

    @cached_property
    def fingerprint(self) -> str:
        """A short stable hash of the canonical content (for result rows)."""
        import hashlib

        d = self.to_dict_without_links()
        d["links"] = []
        text = json.dumps(d, sort_keys=True)
        # The same text as json.dumps(self.to_dict(), sort_keys=True), with the links
        # written straight from the columns (9 s -> about 2 s for 4 million links).
        # "gpus" sorts before "links" and holds no such key, so the first match is it.
        at = text.index('"links": []') + len('"links": [')
        h = hashlib.sha256(text[:at].encode())
        t = self.link_table
        name = [json.dumps(g) for g in t.ids]
        step = 1 << 16
        for a in range(0, len(t), step):
            b = min(a + step, len(t))
            h.update(("" if a == 0 else ", ").encode())
            h.update(", ".join(
                f'{{"bandwidth_gbps": {bw!r}, "dst": {name[d_]}, "latency_ms": {lat!r}, '
                f'"src": {name[s_]}, "util": {u!r}}}'
                for s_, d_, bw, lat, u in zip(
                    t.src[a:b].tolist(), t.dst[a:b].tolist(), t.bandwidth_gbps[a:b].tolist(),
                    t.latency_ms[a:b].tolist(), t.util[a:b].tolist(), strict=True)
            ).encode())
        h.update(text[at:].encode())
        return h.hexdigest()[:16]

    def to_dict_without_links(self) -> dict[str, Any]:
        """:meth:`to_dict` except ``links`` (cheap for instances with millions of links)."""
        return {
            "name": self.name,
            "gpus": [g.to_dict() for g in self.gpus],
            "model": self.model.to_dict(),
            "training": self.training.to_dict(),
            "objective": self.objective.to_dict(),
        }


# --------------------------------------------------------------------------- big files
#
# A JSON parser builds one dict, two strings and three floats per link: about 7 s and
# 2 GB for 4 million links before any check runs. Big instance files therefore go
# through a byte scanner (numba) that reads the top-level "links" array straight
# into columns. It accepts only what it fully understands (flat objects of link
# keys, string ids without escapes that name known GPUs, JSON numbers) and returns
# "not mine" for anything else, so the JSON parser reads that file as usual and its
# messages stay the same.

_LINKS_OPEN = re.compile(rb'"links"\s*:\s*\[')
_POW10 = np.array([10.0**k for k in range(23)])


@njit(cache=True)
def _skip_ws(buf: np.ndarray, p: int) -> int:  # pragma: no cover - compiled
    n = len(buf)
    while p < n and (buf[p] == 32 or buf[p] == 10 or buf[p] == 13 or buf[p] == 9):
        p += 1
    return p


@njit(cache=True)
def _string_end(buf: np.ndarray, a: int) -> int:  # pragma: no cover - compiled
    """Position of the '"' closing a string that starts at ``a``; -1 for an escape or end."""
    n = len(buf)
    while a < n and buf[a] != 34:
        if buf[a] == 92 or buf[a] < 32:
            return -1
        a += 1
    return a if a < n else -1


@njit(cache=True)
def _find(buf, a, q, hashes, index, table, start, length):  # pragma: no cover - compiled
    """Index of the table entry equal to buf[a:q] (binary search on FNV-1a hashes), or -1."""
    h = np.uint64(14695981039346656037)
    for k in range(a, q):
        h = (h ^ np.uint64(buf[k])) * np.uint64(1099511628211)
    lo, hi = 0, len(hashes)
    while lo < hi:
        mid = (lo + hi) // 2
        if hashes[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    while lo < len(hashes) and hashes[lo] == h:
        g = index[lo]
        if length[g] == q - a:
            j = 0
            while j < q - a and table[start[g] + j] == buf[a + j]:
                j += 1
            if j == q - a:
                return g
        lo += 1
    return -1


@njit(cache=True)
def _number(buf, p, pow10):  # pragma: no cover - compiled
    """Parse a JSON number at p: (end, value, exact); end -1 if it is not one.

    ``exact`` is False where the value needs Python's float (over 15 digits or a
    large exponent); the value is then meaningless.
    """
    n = len(buf)
    neg = p < n and buf[p] == 45
    if neg:
        p += 1
    if p >= n or buf[p] < 48 or buf[p] > 57:
        return -1, 0.0, False
    mant = 0
    digits = 0
    if buf[p] == 48:
        p += 1
        if p < n and 48 <= buf[p] <= 57:
            return -1, 0.0, False
    else:
        while p < n and 48 <= buf[p] <= 57:
            if digits < 18:
                mant = mant * 10 + (np.int64(buf[p]) - 48)
            digits += 1
            p += 1
    frac = 0
    is_int = True
    if p < n and buf[p] == 46:
        is_int = False
        p += 1
        if p >= n or buf[p] < 48 or buf[p] > 57:
            return -1, 0.0, False
        while p < n and 48 <= buf[p] <= 57:
            if digits < 18:
                mant = mant * 10 + (np.int64(buf[p]) - 48)
            digits += 1
            frac += 1
            p += 1
    ex = 0
    ex_digits = 0
    if p < n and (buf[p] == 101 or buf[p] == 69):
        is_int = False
        p += 1
        ex_neg = False
        if p < n and (buf[p] == 43 or buf[p] == 45):
            ex_neg = buf[p] == 45
            p += 1
        if p >= n or buf[p] < 48 or buf[p] > 57:
            return -1, 0.0, False
        while p < n and 48 <= buf[p] <= 57:
            if ex_digits < 6:
                ex = ex * 10 + (np.int64(buf[p]) - 48)
            ex_digits += 1
            p += 1
        if ex_neg:
            ex = -ex
    e10 = ex - frac
    if digits > 15 or ex_digits > 6 or e10 < -22 or e10 > 22:
        return p, 0.0, False
    v = float(mant)
    v = v * pow10[e10] if e10 >= 0 else v / pow10[-e10]
    if neg and not (is_int and mant == 0):  # "-0" is the integer 0
        v = -v
    return p, v, True


@njit(cache=True)
def _scan_links(buf, p, keys, key_start, key_len, id_hash, id_index, id_bytes, id_start,
                id_len, pow10, src, dst, vals, slow, out):  # pragma: no cover - compiled
    """Parse the link objects of the JSON array whose '[' ends just before ``p``.

    Fills src, dst (GPU indices) and vals (bandwidth_gbps, util, latency_ms rows);
    ``slow`` gets (link, row, start, stop) of numbers Python must convert. Returns the
    number of links (out[0] = position of the closing ']', out[1] = slow count), or -1
    where the text is anything but such an array.
    """
    n_buf = len(buf)
    n = 0
    n_slow = 0
    cap = len(src)
    p = _skip_ws(buf, p)
    if p < n_buf and buf[p] == 93:
        out[0] = p
        out[1] = 0
        return 0
    while True:
        if p >= n_buf or buf[p] != 123 or n >= cap:
            return -1
        p = _skip_ws(buf, p + 1)
        seen = 0
        while True:
            if p >= n_buf or buf[p] != 34:
                return -1
            q = _string_end(buf, p + 1)
            if q < 0:
                return -1
            code = -1
            for k in range(len(key_len)):
                if key_len[k] == q - p - 1:
                    j = 0
                    while j < key_len[k] and keys[key_start[k] + j] == buf[p + 1 + j]:
                        j += 1
                    if j == key_len[k]:
                        code = k
                        break
            if code < 0 or seen & (1 << code):
                return -1
            seen |= 1 << code
            p = _skip_ws(buf, q + 1)
            if p >= n_buf or buf[p] != 58:
                return -1
            p = _skip_ws(buf, p + 1)
            if p >= n_buf:
                return -1
            if code <= 1:  # src or dst: a known GPU id
                if buf[p] != 34:
                    return -1
                q = _string_end(buf, p + 1)
                if q < 0:
                    return -1
                g = _find(buf, p + 1, q, id_hash, id_index, id_bytes, id_start, id_len)
                if g < 0:
                    return -1
                if code == 0:
                    src[n] = g
                else:
                    dst[n] = g
                p = q + 1
            else:
                end, v, exact = _number(buf, p, pow10)
                if end < 0:
                    return -1
                if exact:
                    vals[code - 2, n] = v
                else:
                    slow[n_slow, 0] = n
                    slow[n_slow, 1] = code - 2
                    slow[n_slow, 2] = p
                    slow[n_slow, 3] = end
                    n_slow += 1
                p = end
            p = _skip_ws(buf, p)
            if p >= n_buf:
                return -1
            if buf[p] == 44:
                p = _skip_ws(buf, p + 1)
                continue
            if buf[p] == 125:
                break
            return -1
        if (seen & 0b10111) != 0b10111:  # src, dst, bandwidth_gbps, latency_ms are required
            return -1
        n += 1
        p = _skip_ws(buf, p + 1)
        if p >= n_buf:
            return -1
        if buf[p] == 44:
            p = _skip_ws(buf, p + 1)
            continue
        if buf[p] == 93:
            out[0] = p
            out[1] = n_slow
            return n
        return -1


def _fnv(data: bytes) -> int:
    h = 14695981039346656037
    for c in data:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def _concat(items: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.array([len(x) for x in items], dtype=np.int64)
    starts = np.zeros(len(items), dtype=np.int64)
    if len(items) > 1:
        starts[1:] = np.cumsum(lengths)[:-1]
    return np.frombuffer(b"".join(items) + b"\0", np.uint8), starts, lengths


def split_links(raw: bytes, progress: Any = None) -> tuple[dict[str, Any], Any] | None:
    """Read the ``links`` array of a big instance file straight into columns.

    Returns ``(the instance dict with "links": [], LinkArrays)``, or None where the
    file is not in the form this reader knows (then the JSON parser reads it): one
    top-level ``"links"`` array of flat objects with link keys only, ``src``/``dst``
    strings without escapes naming GPUs of the file, and JSON numbers.
    """
    from geoplan.model.network import LinkArrays

    m = _LINKS_OPEN.search(raw)
    if m is None:
        return None
    begin = m.end()
    stop = raw.find(b"]", begin)
    if stop < 0:
        return None
    # Exactly one "links" outside the array (inside it the scanner admits link keys only).
    if raw.count(b'"links"', 0, begin) + raw.count(b'"links"', stop) != 1:
        return None
    try:
        data = json.loads((raw[:begin] + raw[stop:]).decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("links") != [] or "network" in data:
        return None
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or not gpus:
        return None
    ids = [g.get("id") if isinstance(g, dict) else None for g in gpus]
    if not all(isinstance(i, str) and i for i in ids) or len(set(ids)) != len(ids):
        return None
    encoded = [str(i).encode() for i in ids]
    cap = max(raw.count(b"{", begin, stop), 1)
    if progress is not None:
        progress(cap)
    hashes = np.array([_fnv(x) for x in encoded], dtype=np.uint64)
    order = np.argsort(hashes, kind="stable")
    id_bytes, id_start, id_len = _concat(encoded)
    keys, key_start, key_len = _concat([k.encode() for k in LINK_KEYS])
    src = np.full(cap, -1, dtype=np.int64)
    dst = np.full(cap, -1, dtype=np.int64)
    vals = np.ones((3, cap))  # bandwidth_gbps, util, latency_ms (LINK_KEYS[2:])
    slow = np.zeros((3 * cap, 4), dtype=np.int64)
    out = np.zeros(2, dtype=np.int64)
    n = _scan_links(np.frombuffer(raw, np.uint8), begin, keys, key_start, key_len,
                    hashes[order], order.astype(np.int64), id_bytes, id_start, id_len, _POW10,
                    src, dst, vals, slow, out)
    if n < 0 or out[0] != stop:
        return None
    for link, row, a, b in slow[: out[1]].tolist():
        tok = raw[a:b]
        try:
            vals[row, link] = float(int(tok)) if tok.isdigit() or tok[1:].isdigit() else float(tok)
        except (ValueError, OverflowError):
            return None
    return data, LinkArrays(src[:n], dst[:n], vals[0, :n], vals[2, :n], vals[1, :n])


def warm_up_loader() -> None:
    """Compile the big-file links scanner now (or load it from numba's disk cache).

    Loading a big file compiles it on first use (about 1-2 s, once per install);
    call this where that time must not count, e.g. before a timed run.
    """
    split_links(
        b'{"gpus": [{"id": "a"}, {"id": "b"}], "links": [{"src": "a", "dst": "b", '
        b'"bandwidth_gbps": 1.5, "util": 1, "latency_ms": 1e-3}]}'
    )


def _read_bytes(path: str | Path, what: str) -> bytes:
    p = Path(path)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise InputError(what, str(p), "file not found") from None
    except IsADirectoryError:
        raise InputError(what, str(p), "is a directory, not a file") from None
    except OSError as exc:
        raise InputError(what, str(p), f"cannot read file: {exc.strerror}") from None


def _decode(raw: bytes, path: str | Path, what: str) -> str:
    """UTF-8 text (a UTF-8 byte-order mark is allowed), else an InputError saying why."""
    p = str(path)
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InputError(what, p, "not UTF-8 text (looks like UTF-16); save it as UTF-8")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1]
        kind = "binary data" if b"\x00" in raw[:4096] else "text in another encoding"
        raise InputError(
            what,
            p,
            f"not UTF-8 text (byte 0x{bad.hex()} at offset {exc.start}; {kind}, "
            "e.g. Latin-1?); save it as UTF-8 JSON",
        ) from None
    if "\x00" in text:
        raise InputError(what, p, "not a text file (contains NUL bytes)")
    return text


def _parse_json(text: str, path: str | Path, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            what, str(path), f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise InputError(what, str(path), "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal with too many digits
        raise InputError(what, str(path), f"invalid JSON: {exc}") from None


def read_json(path: str | Path, what: str) -> Any:
    """Read a JSON file, turning every I/O, encoding or syntax problem into an InputError."""
    return _parse_json(_decode(_read_bytes(path, what), path, what), path, what)


#: Instance files at least this large try the columnar links reader first.
FAST_LINKS_MIN_BYTES = 4_000_000


def load_instance(path: str | Path) -> Instance:
    """Load and validate an instance JSON file.

    Large files (many links) go through :func:`split_links`, which reads the
    ``links`` array straight into columns; where that reader does not recognise the
    layout it steps aside and the ordinary JSON parser runs (same result, slower).
    """
    raw = _read_bytes(path, "instance")
    if len(raw) >= FAST_LINKS_MIN_BYTES:
        # The scanner admits only ASCII structure and the GPU ids (decoded with the
        # rest of the file), so an accepted file is valid UTF-8: no need to decode it all.
        found = split_links(raw, progress=_progress)
        if found is not None:
            data, arrays = found
            return Instance.from_dict({**data, "links": arrays})
    return Instance.from_dict(_parse_json(_decode(raw, path, "instance"), path, "instance"))
