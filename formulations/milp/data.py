"""What the MILP is built from: :class:`MilpData` and :func:`prepare`.

:func:`prepare` computes the layer caps per stage count, the arcs, the variable
bounds (from :mod:`formulations.milp.bounds`), the dominance pairs (from
:mod:`formulations.milp.symmetry`) and the subtour-cut groups (from
:mod:`formulations.milp.cuts`). Model units: ms, J, layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from formulations.milp.bounds import lower_bounds, upper_bounds
from formulations.milp.cuts import cut_groups
from formulations.milp.symmetry import dominance_pairs
from geoplan.cost import bounds
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.instance import Instance

__all__ = ["MilpData", "prepare"]


@dataclass(frozen=True)
class MilpData:
    """Everything the model is built from (model units: ms, J, layers).

    ``cap_mid[i, k]`` / ``cap_last[i, k]`` are layer caps of GPU i in a k-stage
    pipeline (k = 1..kmax; column 0 unused), clipped to [0, L - k + 1].
    ``c_t``/``c_e`` weigh T_iter (ms) and E_iter (J) in the objective.
    ``groups``: GPU sets (sites and unions of sites) that get subtour cuts.
    ``tmax_lb`` may be raised by :func:`~formulations.milp.tightening.tighten`.
    """

    instance: Instance
    gpus: tuple[int, ...]
    arcs: tuple[tuple[int, int], ...]
    kmax: int
    cap_mid: np.ndarray
    cap_last: np.ndarray
    n_ub: dict[int, int]
    t_lb: float
    t_ub: float
    tmax_lb: float
    tmax_ub: float
    c_t: float
    c_e: float
    dominance: tuple[tuple[int, int, bool], ...]
    groups: tuple[tuple[int, ...], ...]
    incumbent_objective: float | None

    @property
    def energy(self) -> bool:
        return self.c_e > 0

    def arc_weight(self, i: int, j: int) -> float:
        """A lower bound on the bottleneck of any plan using arc i -> j (ms):
        :func:`geoplan.cost.bounds.arc_bottleneck` (overhead included)."""
        c = self.instance.coefficients()
        return bounds.arc_bottleneck(c.comp_ms, c.comm_ms, float(c.overhead_ms), i, j)


def _weights(instance: Instance) -> tuple[float, float]:
    """(c_t, c_e) with objective = c_t * T_iter[ms] + c_e * E_iter[J] (the kernel's weights)."""
    w = ObjectiveWeights.from_instance(instance)
    return w.a, w.b


def prepare(
    instance: Instance,
    incumbent_objective: float | None = None,
    *,
    site_unions: bool | None = None,
) -> MilpData:
    """Compute caps, arcs, bounds, dominance pairs and cut groups for
    :func:`~formulations.milp.model.build_model`.

    ``incumbent_objective`` (the evaluator's objective of a feasible plan) gives
    an upper bound on T_iter valid for every plan at least as good; without it
    the bounds come from a worst case.
    """
    c = instance.coefficients()
    n_gpu, L = instance.n, instance.layers
    M = float(c.micro_batches)
    c_t, c_e = _weights(instance)

    # Stage-count range: k stages need k GPUs that can hold a layer.
    kmax = 1
    for k in range(2, min(n_gpu, L) + 1):
        if int(np.sum(c.layer_caps(k, last=False) >= 1)) >= k and np.any(
            c.layer_caps(k, last=True) >= 1
        ):
            kmax = k
        else:
            break
    cap_mid = np.zeros((n_gpu, kmax + 1), dtype=np.int64)
    cap_last = np.zeros((n_gpu, kmax + 1), dtype=np.int64)
    for k in range(1, kmax + 1):
        cap_mid[:, k] = np.clip(c.layer_caps(k, last=False), 0, L - k + 1)
        cap_last[:, k] = np.clip(c.layer_caps(k, last=True), 0, L - k + 1)
    # A single stage is the last stage: with Q = 1 there is no middle stage.
    cap_mid[:, 1] = cap_last[:, 1]
    cap_any = cap_mid[:, 1:].max(axis=1)

    comp = c.comp_ms
    usable = [i for i in range(n_gpu) if cap_any[i] >= 1]
    finite = np.isfinite(c.comm_ms) & np.isfinite(c.comm_ms.T)
    tmax_wc, t_ub = upper_bounds(instance, usable, kmax, incumbent_objective, c_t, c_e)
    tmax_ub = t_ub / M  # T = sum tau + (M-1) max tau >= M max tau
    tmax_lb, t_lb = lower_bounds(instance, usable, cap_any, cap_last, tmax_wc)
    if not math.isfinite(tmax_lb):
        usable = []  # no GPU set can hold the layers: an empty (infeasible) model
        tmax_lb = t_lb = tmax_ub
    tmax_ub = max(tmax_ub, tmax_lb)
    t_lb = max(t_lb, M * tmax_lb)
    t_ub = max(t_ub, t_lb)

    n_ub: dict[int, int] = {}
    for i in usable:
        by_time = math.floor(tmax_ub / comp[i] * (1 + 1e-9))
        ub = int(min(L, cap_any[i], by_time))
        if ub >= 1:
            n_ub[i] = ub
    gpus = tuple(sorted(n_ub))
    data = MilpData(
        instance=instance,
        gpus=gpus,
        arcs=(),
        kmax=min(kmax, max(len(gpus), 1)),
        cap_mid=cap_mid,
        cap_last=cap_last,
        n_ub=n_ub,
        t_lb=t_lb,
        t_ub=t_ub,
        tmax_lb=tmax_lb,
        tmax_ub=tmax_ub,
        c_t=c_t,
        c_e=c_e,
        dominance=dominance_pairs(instance, gpus, c_e > 0),
        groups=cut_groups(instance, gpus, site_unions),
        incumbent_objective=incumbent_objective,
    )
    # An arc alone can push a stage above the bottleneck bound: drop it.
    arcs = tuple(
        (i, j)
        for i in gpus
        for j in gpus
        if i != j and finite[i, j] and data.arc_weight(i, j) <= tmax_ub
    )
    return replace(data, arcs=arcs)

