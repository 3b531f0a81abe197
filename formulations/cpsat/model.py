"""The built model: :class:`CpsatModel`, its variables and integer data, plan <-> model.

A built model decodes a solution into a plan, computes a plan's integer values
(:func:`_int_values`, the kernel's formulas in model units), checks a plan
against the model and hints a plan into it. :func:`formulations.cpsat.build.build_model`
builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from formulations.cpsat.scaling import Scaling
from formulations.cpsat.symmetry import _canonical
from geoplan.cost.bounds import Relaxation as _Relaxation
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.validation import validate


@dataclass
class CpsatModel:
    """The built CP-SAT model, its variables and the integer data (for inspection).

    GPU i is node ``i + 1`` of the circuit; node 0 is the depot. ``arcs[(i, j)]``
    is true when GPU i directly precedes GPU j (both links exist).
    """

    instance: Instance
    model: cp_model.CpModel
    scaling: Scaling
    comp_int: list[int]
    comm_int: dict[tuple[int, int], int]
    x: list[cp_model.IntVar]
    first: list[cp_model.IntVar]
    last: list[cp_model.IntVar]
    arcs: dict[tuple[int, int], cp_model.IntVar]
    n: list[cp_model.IntVar]
    q: cp_model.IntVar
    q1: cp_model.IntVar
    cap_mid: list[cp_model.IntVar]
    cap_last: list[cp_model.IntVar]
    tau: list[cp_model.IntVar]
    tmax: cp_model.IntVar
    t_iter: cp_model.IntVar
    z: dict[int, cp_model.IntVar]
    objective: cp_model.LinearExpr
    obj_coef: tuple[int, dict[int, int], list[int]]
    micro_batches: int
    q_domain: list[int]
    mid_caps: np.ndarray  # (Qmax + 1, N), row Q
    last_caps: np.ndarray
    tmax_lb: dict[int, int]
    sum_lb: dict[int, int]
    dominance: list[tuple[int, int]] = field(default_factory=list)
    identical: list[tuple[int, int]] = field(default_factory=list)
    cutoff: int | None = None
    q_lits: dict[int, cp_model.IntVar] = field(default_factory=dict)
    relaxation: _Relaxation | None = None
    tmax_ub: int = 0
    overhead_int: int = 0  # the stage overhead o in model time units

    # ------------------------------------------------------------------ plan <-> model
    def decode(self, value: Callable[[Any], int]) -> Plan:
        """The plan of a solution (``value`` reads a variable): follow arcs from the depot."""
        succ = {i: j for (i, j), a in self.arcs.items() if value(a)}
        cur = next(i for i, f in enumerate(self.first) if value(f))
        gpus: list[int] = []
        while True:
            gpus.append(cur)
            if cur not in succ or len(gpus) > len(self.x):
                break
            cur = succ[cur]
        return Plan.from_indices(self.instance, gpus, [value(self.n[g]) for g in gpus])

    def values_of(self, plan: Plan) -> dict[str, Any]:
        """The model's integer values for ``plan`` (tau, T, objective, ...); links must exist."""
        return _int_values(plan.gpu_indices(self.instance), plan.layer_counts, self.comp_int,
                           self.comm_int, self.micro_batches, self.obj_coef,
                           self.overhead_int)

    def is_model_feasible(self, plan: Plan) -> bool:
        """Whether ``plan`` satisfies the model (links, memory, symmetry breaking)."""
        try:
            idx = plan.gpu_indices(self.instance)
        except InputError:
            return False
        counts = plan.layer_counts
        qn = len(idx)
        if qn not in self.q_domain or validate(self.instance, plan):
            return False
        if any((idx[k], idx[k + 1]) not in self.arcs for k in range(qn - 1)):
            return False
        used = dict(zip(idx, counts, strict=True))
        if any(j in used and i not in used for i, j in self.dominance):
            return False
        if any(used.get(i, 0) < used.get(j, 0) for i, j in self.identical):
            return False
        v = self.values_of(plan)
        return v["tmax"] >= self.tmax_lb.get(qn, 0) and sum(v["tau"]) >= self.sum_lb.get(qn, 0)

    def add_hint(self, plan: Plan) -> int:
        """Hint every variable from ``plan`` (assumed model-feasible); its model objective."""
        v = self.values_of(plan)
        idx, counts = v["idx"], v["counts"]
        qn = len(idx)
        pos = {g: k for k, g in enumerate(idx)}
        cnt = dict(zip(idx, counts, strict=True))
        m = self.model
        m.clear_hints()
        for i in range(len(self.x)):
            m.add_hint(self.x[i], i in pos)
            m.add_hint(self.first[i], pos.get(i) == 0)
            m.add_hint(self.last[i], pos.get(i) == qn - 1)
            m.add_hint(self.n[i], cnt.get(i, 0))
            m.add_hint(self.tau[i], v["tau"][i])
            m.add_hint(self.cap_mid[i], int(self.mid_caps[qn, i]))
            m.add_hint(self.cap_last[i], int(self.last_caps[qn, i]))
        for (i, j), a in self.arcs.items():
            m.add_hint(a, i in pos and j in pos and pos[j] == pos[i] + 1)
        for i, zi in self.z.items():
            m.add_hint(zi, v["t_iter"] if i in pos else 0)
        m.add_hint(self.q, qn)
        m.add_hint(self.q1, qn == 1)
        for q, yq in self.q_lits.items():
            m.add_hint(yq, q == qn)
        m.add_hint(self.tmax, v["tmax"])
        m.add_hint(self.t_iter, v["t_iter"])
        return int(v["objective"])

    def canonical(self, plan: Plan) -> Plan:
        """An equally good or better plan that satisfies the symmetry breaking
        (:func:`formulations.cpsat.symmetry._canonical`)."""
        return _canonical(self.instance, self.dominance, self.identical, plan)


def _int_values(
    idx: Sequence[int],
    counts: Sequence[int],
    cc: Sequence[int],
    cm: Mapping[tuple[int, int], int],
    m_count: int,
    obj_coef: tuple[int, dict[int, int], list[int]],
    overhead: int = 0,
) -> dict[str, Any]:
    """Integer tau per GPU, bottleneck, T_iter and objective of a stage list (model units).

    Mirrors geoplan.cost.kernel.stage_terms and iteration_time in integer units.
    """
    qn = len(idx)
    tau = [0] * len(cc)
    for k, (g, nk) in enumerate(zip(idx, counts, strict=True)):
        t = cc[g] * nk
        if k + 1 < qn:
            t += cm[(g, idx[k + 1])]
        if k > 0:
            t += cm[(g, idx[k - 1])]
        tau[g] = t + overhead
    tmax = max(tau)
    t_iter = sum(tau) + (m_count - 1) * tmax
    a0, a, b = obj_coef
    obj = a0 * t_iter + sum(a.get(g, 0) * t_iter for g in idx)
    obj += sum(b[g] * nk for g, nk in zip(idx, counts, strict=True))
    return {"idx": list(idx), "counts": list(counts), "tau": tau, "tmax": tmax,
            "t_iter": t_iter, "objective": obj}
