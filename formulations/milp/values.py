"""Plans to model variables and back: :func:`start_values` (a plan as a full
variable assignment, the MIP start) and :func:`read_plan` (the plan in the
model's current values).

:func:`start_values` prices the plan with the cost kernel itself
(``stage_terms``, ``iteration_time``), so the start's ``tmax`` and ``t`` are
the evaluator's.
"""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from formulations.milp.data import MilpData
from geoplan.cost import kernel
from geoplan.errors import FormulationError
from geoplan.model.plan import Plan

__all__ = ["read_plan", "start_values"]


def start_values(model: pyo.ConcreteModel, plan: Plan) -> ComponentMap | None:
    """A full assignment of the model's variables that encodes ``plan`` (a MIP start).

    None when the plan cannot be expressed (a GPU or arc the model dropped, or
    bounds derived from a better plan exclude it).
    """
    d: MilpData = model.data
    inst = d.instance
    c = inst.coefficients()
    g = plan.gpu_indices(inst)
    counts = plan.layer_counts
    q = len(g)
    if plan.micro_batch_size not in (None, inst.training.micro_batch_size):
        return None
    if q > d.kmax or any(i not in d.n_ub or counts[k] > d.n_ub[i] for k, i in enumerate(g)):
        return None
    arcs = set(d.arcs)
    if any((g[k], g[k + 1]) not in arcs for k in range(q - 1)):
        return None
    ga = np.asarray(g, dtype=np.int64)
    na = np.asarray(counts, dtype=np.int64)
    tau = {
        i: kernel.stage_terms(k, ga, na, q, c.comp_ms, c.comm_ms, c.overhead_ms)[3]
        for k, i in enumerate(g)
    }
    tmax = max(tau.values())
    t_iter = kernel.iteration_time(sum(tau.values()), tmax, c.micro_batches)
    if not (d.tmax_lb <= tmax <= d.tmax_ub and d.t_lb <= t_iter <= d.t_ub):
        return None
    pos = {i: k for k, i in enumerate(g)}
    vals = ComponentMap()
    for i in d.gpus:
        used = i in pos
        vals[model.y[i]] = float(used)
        vals[model.n[i]] = float(counts[pos[i]]) if used else 0.0
        vals[model.first[i]] = float(used and pos[i] == 0)
        vals[model.last[i]] = float(used and pos[i] == q - 1)
        vals[model.pos[i]] = float(pos[i]) if used else 0.0
    for i, j in d.arcs:
        vals[model.a[i, j]] = float(i in pos and j in pos and pos[j] == pos[i] + 1)
    for k in model.K:
        vals[model.z[k]] = float(q >= k)
    vals[model.tmax] = float(tmax)
    vals[model.t] = float(t_iter)
    if d.energy:
        for i in model.IW:
            vals[model.w[i]] = float(t_iter) if i in pos else 0.0
    return vals


def read_plan(model: pyo.ConcreteModel) -> Plan:
    """The plan encoded by the model's current variable values (successor arcs -> order)."""
    d: MilpData = model.data
    chosen = [i for i in d.gpus if pyo.value(model.y[i]) > 0.5]
    firsts = [i for i in chosen if pyo.value(model.first[i]) > 0.5]
    if len(firsts) != 1:
        raise FormulationError(f"milp: solution has {len(firsts)} first stages")
    succ = {i: j for (i, j) in d.arcs if pyo.value(model.a[i, j]) > 0.5}
    order = [firsts[0]]
    while order[-1] in succ and len(order) <= len(chosen):
        order.append(succ[order[-1]])
    if sorted(order) != sorted(chosen):
        raise FormulationError(f"milp: arcs {succ} do not form one path over GPUs {chosen}")
    counts = [round(pyo.value(model.n[i])) for i in order]
    return Plan.from_indices(d.instance, order, counts)

