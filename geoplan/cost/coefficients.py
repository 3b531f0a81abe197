"""Per-instance coefficients of the cost model, in model units.

The per-layer compute time, the link times, the memory terms and the powers of
cost-model.md are computed here once per (instance, micro-batch size); the
formulas that combine them are in :mod:`geoplan.cost.kernel`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from geoplan.cost import kernel
from geoplan.errors import InputError

if TYPE_CHECKING:
    from geoplan.model.instance import Instance

__all__ = ["Coefficients", "build_coefficients", "layer_caps", "memory_admits_pipeline"]


@dataclass(frozen=True, eq=False)
class Coefficients:
    """Everything a solver needs, in model units, for one micro-batch size ``u``.

    Times are milliseconds, memory bytes, power watts. ``comm_ms[i, j]`` is the
    activation (or gradient) transfer time from GPU i to GPU j, ``inf`` where no
    link exists. A stage of ``n`` layers on GPU ``i`` in a ``Q``-stage pipeline
    needs ``n * (mem_w + (Q + 1) * mem_a)`` bytes, plus ``mem_last`` on the last
    stage, against ``mem_cap[i]``.
    """

    u: int
    micro_batches: float  # B / u; integral whenever u divides B (the validator checks)
    comp_ms: np.ndarray
    comm_ms: np.ndarray
    mem_w: float
    mem_a: float
    mem_last: float
    mem_cap: np.ndarray
    idle_w: np.ndarray
    active_w: np.ndarray
    dyn_w: np.ndarray  # active_w - idle_w: the power a stage adds while it computes
    overhead_ms: float = 0.0  # o of cost-model.md: fixed time per stage and micro-batch

    @property
    def n(self) -> int:
        return int(self.comp_ms.shape[0])

    @property
    def kernel_args(
        self,
    ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray, float, float, float,
               np.ndarray, float]:
        """The coefficient arguments of :func:`geoplan.cost.kernel.price_stages`, in order."""
        return (self.comp_ms, self.comm_ms, self.overhead_ms, self.idle_w, self.dyn_w,
                self.mem_w, self.mem_a, self.mem_last, self.mem_cap, self.micro_batches)

    def per_layer_bytes(self, q_stages: int) -> float:
        return float(kernel.per_layer_bytes(self.mem_w, self.mem_a, q_stages))

    def stage_bytes(self, layers: int, q_stages: int, last: bool) -> float:
        """Mem_q of cost-model.md (bytes): :func:`geoplan.cost.kernel.stage_bytes`."""
        return float(
            kernel.stage_bytes(layers, self.per_layer_bytes(q_stages), last, self.mem_last)
        )

    def fits(self, gpu: int, layers: int, q_stages: int, last: bool) -> bool:
        """The single memory test: Mem_q <= M~."""
        return self.stage_bytes(layers, q_stages, last) <= self.mem_cap[gpu]

    def layer_caps(self, q_stages: int, last: bool) -> np.ndarray:
        """Largest layer count each GPU can hold as a (last) stage of a Q-stage pipeline.

        Computed by division, then corrected with the exact test of :meth:`fits`
        so that rounding can never make the two disagree. May be negative (0 or
        less means the GPU cannot take that position at all).
        """
        return layer_caps(self.mem_cap, self.per_layer_bytes(q_stages),
                          self.mem_last if last else 0.0)


def layer_caps(mem_cap: np.ndarray, per: float, extra: float) -> np.ndarray:
    """Largest n with ``n * per + extra <= mem_cap``: the inverse of
    :func:`geoplan.cost.kernel.stage_bytes` (the exact test decides ties)."""
    caps = np.floor((mem_cap - extra) / per).astype(np.int64)
    # Fix off-by-one from floating point with the exact comparison.
    caps = caps + ((caps + 1) * per + extra <= mem_cap)
    return caps - ((caps * per + extra > mem_cap) & (caps > 0))


def memory_admits_pipeline(
    mem_cap: np.ndarray, mem_w: float, mem_a: float, mem_last: float, layers: int
) -> bool:
    """Whether memory alone admits some plan (links ignored).

    Per-layer bytes are the same on every GPU, so for each stage count Q the Q
    GPUs with the most memory are best; each of them is tried as the last stage.
    """
    cap = np.sort(np.asarray(mem_cap, dtype=float))[::-1]
    for q in range(1, min(len(cap), layers) + 1):
        per = kernel.per_layer_bytes(mem_w, mem_a, q)
        mid = layer_caps(cap[:q], per, 0.0)
        if mid[q - 1] < 1:
            return False  # the q-th largest holds no layer; more stages only shrink caps
        last = layer_caps(cap[:q], per, mem_last)
        if np.any((last >= 1) & (mid.sum() - mid + last >= layers)):
            return True
    return False


def build_coefficients(instance: Instance, u: int) -> Coefficients:
    """The coefficients of ``instance`` for micro-batch size ``u`` (cost-model.md)."""
    if isinstance(u, bool) or not isinstance(u, int) or u <= 0:
        raise InputError("micro_batch_size", u, "expected a positive integer")
    m, t = instance.model, instance.training
    kappa, T, H, V = t.bytes_per_value, m.seq_len, m.hidden, m.vocab
    flops = np.array([g.effective_tflops * 1e12 for g in instance.gpus])
    # tau_comp per layer (seconds) = (1 + gamma) C_l u T / F~ ; stored in ms.
    comp_ms = (1.0 + t.backward_factor) * m.flops_per_token * u * T / flops * 1e3
    s_act_bits = 8.0 * kappa * u * T * H
    with np.errstate(divide="ignore"):
        transfer_ms = np.where(
            instance.has_link, s_act_bits / (instance.eff_bandwidth_gbps * 1e9) * 1e3, np.inf
        )
    comm_ms = np.where(instance.has_link, instance.latency_ms + transfer_ms, np.inf)
    mem_cap = np.array([g.effective_memory_gb * 1e9 for g in instance.gpus])
    arrays = {
        "comp_ms": comp_ms,
        "comm_ms": comm_ms,
        "mem_cap": mem_cap,
        "idle_w": np.array([g.idle_w for g in instance.gpus], dtype=float),
        "active_w": np.array([g.active_w for g in instance.gpus], dtype=float),
    }
    arrays["dyn_w"] = arrays["active_w"] - arrays["idle_w"]
    arrays["dyn_w"].flags.writeable = False
    for a in arrays.values():
        a.flags.writeable = False
    return Coefficients(
        u=u,
        micro_batches=t.batch_size / u,
        mem_w=4.0 * m.params_per_layer * kappa,
        mem_a=t.activation_factor * kappa * u * T * H,
        mem_last=4.0 * m.params_lm_head * kappa + 2.0 * kappa * u * T * V,
        overhead_ms=float(t.stage_overhead_ms),
        **arrays,
    )

