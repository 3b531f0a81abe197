"""Per-instance numbers of hybrid-model.md and the flat-array form of a hybrid plan.

Unlike :class:`~geoplan.cost.coefficients.Coefficients` these do not depend on
the micro-batch size: a hybrid plan chooses u itself, so u is an argument of
:func:`geoplan.cost.hybrid_kernel.price_hybrid`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.hybrid import RECOMPUTE, HybridPlan, gpu_index_array
from geoplan.model.instance import Instance

__all__ = ["HybridArrays", "HybridCoefficients", "encode"]


@dataclass(frozen=True, eq=False)
class HybridCoefficients:
    """Everything :func:`~geoplan.cost.hybrid_kernel.price_hybrid` needs of an instance."""

    tflops: np.ndarray  # effective TFLOPS per GPU
    lat_ms: np.ndarray  # latency, inf where no link
    bw_gbps: np.ndarray  # effective bandwidth, 0 where no link
    site: np.ndarray  # site number per GPU (a GPU without a label is a site of its own)
    idle_w: np.ndarray
    dyn_w: np.ndarray
    mem_cap: np.ndarray  # effective memory, bytes
    n_layers: int
    batch: int
    max_tp: int
    flop_ls: float  # C_l T: forward FLOPs of one layer for one sample
    gamma: float
    act_bytes: float  # kappa T H: one sample's activations at a boundary
    w_bytes: float  # P_l kappa
    lm_bytes: float  # P_lm kappa
    alpha: float
    logit_bytes: float  # kappa T V
    overhead_ms: float

    @classmethod
    def of(cls, instance: Instance) -> HybridCoefficients:
        return _coefficients(instance)

    @property
    def kernel_args(self) -> tuple[Any, ...]:
        """The instance arguments of ``price_hybrid``, in order."""
        return (self.tflops, self.lat_ms, self.bw_gbps, self.site, self.idle_w, self.dyn_w,
                self.mem_cap, self.n_layers, self.batch, self.max_tp, self.flop_ls,
                self.gamma, self.act_bytes, self.w_bytes, self.lm_bytes, self.alpha,
                self.logit_bytes, self.overhead_ms)


_CACHE: weakref.WeakKeyDictionary[Instance, HybridCoefficients] = weakref.WeakKeyDictionary()


def _coefficients(instance: Instance) -> HybridCoefficients:
    got = _CACHE.get(instance)
    if got is None:
        got = _CACHE[instance] = _build(instance)
    return got


def _build(instance: Instance) -> HybridCoefficients:
    m, t = instance.model, instance.training
    kappa = t.bytes_per_value
    sites: dict[str, int] = {}
    site = np.empty(instance.n, dtype=np.int64)
    for i, g in enumerate(instance.gpus):
        key = g.site if g.site is not None else f"\0{g.id}"
        site[i] = sites.setdefault(key, len(sites))
    lat = np.where(instance.has_link, instance.latency_ms, np.inf)
    idle = np.array([g.idle_w for g in instance.gpus], dtype=float)
    active = np.array([g.active_w for g in instance.gpus], dtype=float)
    arrays = {
        "tflops": np.array(instance.eff_tflops, dtype=float),
        "lat_ms": lat,
        "bw_gbps": np.array(instance.eff_bandwidth_gbps, dtype=float),
        "site": site,
        "idle_w": idle,
        "dyn_w": active - idle,
        "mem_cap": np.array([g.effective_memory_gb * 1e9 for g in instance.gpus]),
    }
    for a in arrays.values():
        a.flags.writeable = False
    return HybridCoefficients(
        n_layers=m.layers,
        batch=t.batch_size,
        max_tp=t.max_tp,
        flop_ls=m.flops_per_token * m.seq_len,
        gamma=t.backward_factor,
        act_bytes=kappa * m.seq_len * m.hidden,
        w_bytes=m.params_per_layer * kappa,
        lm_bytes=m.params_lm_head * kappa,
        alpha=t.activation_factor,
        logit_bytes=kappa * m.seq_len * m.vocab,
        overhead_ms=float(t.stage_overhead_ms),
        **arrays,
    )


@dataclass(frozen=True, eq=False)
class HybridArrays:
    """A hybrid plan as the kernel's flat arrays (see :mod:`geoplan.cost.hybrid_kernel`)."""

    q: int
    layers: np.ndarray
    tp: np.ndarray
    rec: np.ndarray
    rep0: np.ndarray
    samples: np.ndarray
    g0: np.ndarray
    gpus: np.ndarray
    u: int
    zero: int

    @property
    def plan_args(self) -> tuple[Any, ...]:
        return (self.q, self.layers, self.tp, self.rec, self.rep0, self.samples, self.g0,
                self.gpus, self.u, self.zero)


def encode(instance: Instance, plan: HybridPlan) -> HybridArrays:
    """The plan's arrays; u, zero and samples default to the instance's (unknown ids raise)."""
    p = plan.resolved(instance)
    assert p.micro_batch_size is not None and p.zero is not None
    reps = [r for s in p.stages for r in s.replicas]
    rep0 = np.cumsum([0] + [len(s.replicas) for s in p.stages]).astype(np.int64)
    g0 = np.cumsum([0] + [len(r.gpus) for r in reps]).astype(np.int64)
    return HybridArrays(
        q=p.q,
        layers=np.array([s.layers for s in p.stages], dtype=np.int64),
        tp=np.array([s.tp for s in p.stages], dtype=np.int64),
        rec=np.array([RECOMPUTE.index(s.recompute) if s.recompute in RECOMPUTE else -1
                      for s in p.stages], dtype=np.int64),
        rep0=rep0,
        samples=np.array([r.samples for r in reps], dtype=np.int64),
        g0=g0,
        gpus=np.array(gpu_index_array(instance, p), dtype=np.int64),
        u=int(p.micro_batch_size),
        zero=int(p.zero),
    )


def weights_args(instance: Instance) -> tuple[Any, ...]:
    """The objective arguments of ``price_hybrid`` (normalisers must be resolved)."""
    return ObjectiveWeights.from_instance(instance).args
