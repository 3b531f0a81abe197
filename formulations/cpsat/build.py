"""Building the CP-SAT model: :func:`build_model` (docs/cpsat.md writes it out).

Scales the instance's coefficients (:mod:`.scaling`), states the circuit, layers,
memory, stage times, bottleneck and energy, adds the redundant bounds
(:mod:`.bounds`) and the symmetry breaking (:mod:`.symmetry`), and caps the
objective by the best known plan (:mod:`.start`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from formulations.cpsat.bounds import MAX_CLUSTERS, _add_cluster_bounds, _caps, _relaxation
from formulations.cpsat.model import CpsatModel, _int_values
from formulations.cpsat.scaling import _weights, choose_scaling
from formulations.cpsat.start import _usable
from formulations.cpsat.symmetry import _symmetry
from geoplan.cost import evaluate
from geoplan.cost.bounds import t_iter_bounds
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan


def build_model(
    instance: Instance,
    *,
    precision: float | None = None,
    symmetry: bool = True,
    bounds: bool = True,
    upper_plans: Sequence[Plan] = (),
    check: Callable[[str], None] | None = None,
) -> CpsatModel:
    """Build the CP-SAT model of ``instance`` (normalisers must be resolved for 0<lambda<1).

    ``upper_plans``: known plans (a baseline, warm starts); the best feasible one
    caps the objective (a valid cut: the optimum is no worse), which bounds
    T_iter and lets the scaling be finer. ``check(step)`` is called between
    blocks of constraints (progress; it may raise to abandon the build, see
    :func:`formulations.milp.build_checker`).
    """
    ck = check or (lambda _step: None)
    c = instance.coefficients()
    nn, L = instance.n, instance.layers
    m_count = round(c.micro_batches)
    q_max = min(nn, L)
    comp = np.asarray(c.comp_ms, dtype=float)
    comm = np.asarray(c.comm_ms, dtype=float)
    pairs = [(i, j) for i in range(nn) for j in range(nn)
             if i != j and math.isfinite(comm[i, j]) and math.isfinite(comm[j, i])]
    # Neighbours in the order of ``pairs`` (linear-time lists; the order of the terms
    # below matters to CP-SAT's search and is that of ``pairs``).
    succ: list[list[int]] = [[] for _ in range(nn)]
    pred: list[list[int]] = [[] for _ in range(nn)]
    for i, j in pairs:
        succ[i].append(j)
        pred[j].append(i)
    mid, last = _caps(instance, q_max)
    n_ub = [int(min(L, mid[1:, i].max())) for i in range(nn)]
    w = _weights(instance)

    # Bounds on times in ms, used for the scaling and for the variable domains.
    o_ms = float(c.overhead_ms)
    comm_from = {i: sorted(comm[i, j] for j in succ[i]) for i in range(nn)}
    tau_ub_ms = max(comp[i] * n_ub[i] + sum(comm_from[i][-2:]) for i in range(nn)) + o_ms
    sum_ub_ms = L * comp.max() + 2 * (q_max - 1) * max((comm[p] for p in pairs), default=0.0)
    sum_ub_ms += q_max * o_ms
    t_ub_ms = sum_ub_ms + (m_count - 1) * tau_ub_ms
    # A known plan caps the objective; objective >= (a0 + min_i a_i) T_iter caps T_iter.
    known = [p for p in upper_plans if _usable(instance, p, pairs)]
    prices = [evaluate(instance, p).objective for p in known]
    obj_ub = min(prices, default=None)
    a_min = w.a0 + float(w.a.min())
    if obj_ub is not None and a_min > 0:
        t_ub_ms = min(t_ub_ms, obj_ub / a_min * (1 + 1e-3))
    time_values = [*comp, *(comm[p] for p in pairs), *([o_ms] if o_ms > 0 else [])]
    sc = choose_scaling(time_values, w, t_ub_ms, n_ub, precision, obj_ub)
    s, k = sc.time_scale, sc.obj_scale

    cc = [round(v * s) for v in comp]
    cm = {p: round(comm[p] * s) for p in pairs}
    ov = round(o_ms * s)
    a0 = round(w.a0 * k / s)
    a_int = {i: round(w.a[i] * k / s) for i in range(nn) if round(w.a[i] * k / s) != 0}
    b_int = [round(w.b[i] * k) for i in range(nn)]
    obj_coef = (a0, a_int, b_int)
    cutoff = min((_int_values(p.gpu_indices(instance), p.layer_counts, cc, cm, m_count,
                              obj_coef, ov)["objective"] for p in known), default=None)

    md = cp_model.CpModel()
    md.name = f"geoplan-{instance.name}"
    x = [md.new_bool_var(f"x{i}") for i in range(nn)]
    first = [md.new_bool_var(f"first{i}") for i in range(nn)]
    lastv = [md.new_bool_var(f"last{i}") for i in range(nn)]
    arcs = {(i, j): md.new_bool_var(f"a{i}_{j}") for (i, j) in pairs}

    # The pipeline: one circuit through the depot (node 0); skipped GPUs take a self-loop.
    circuit: list[tuple[int, int, Any]] = [(0, i + 1, first[i]) for i in range(nn)]
    circuit += [(i + 1, 0, lastv[i]) for i in range(nn)]
    circuit += [(i + 1, i + 1, ~x[i]) for i in range(nn)]
    circuit += [(i + 1, j + 1, a) for (i, j), a in arcs.items()]
    md.add_circuit(circuit)
    # Degree equalities (implied by the circuit; stated for the LP relaxation).
    md.add(sum(first) == 1)
    md.add(sum(lastv) == 1)
    for i in range(nn):
        md.add(first[i] + sum(arcs[(u, i)] for u in pred[i]) == x[i])
        md.add(lastv[i] + sum(arcs[(i, v)] for v in succ[i]) == x[i])
    ck("circuit")

    # Stage count and the layers.
    tau_ub = [cc[i] * n_ub[i] + sum(sorted(cm[(i, j)] for j in succ[i])[-2:]) + ov
              for i in range(nn)]
    # sum tau <= L max(cc) + 2 max(cm) + Q o: the bound the scaling was chosen for.
    t_ub = L * max(cc) + 2 * (q_max - 1) * max(cm.values(), default=0) + q_max * ov
    t_ub += (m_count - 1) * max(tau_ub)
    a_min_int = a0 + min(a_int.get(i, 0) for i in range(nn))
    if cutoff is not None and a_min_int > 0:
        t_ub = min(t_ub, cutoff // a_min_int)
    # T_iter >= M tau_i for every stage.
    tmax_ub = min(max(tau_ub), t_ub // m_count)
    tau_ub = [min(t, tmax_ub) for t in tau_ub]
    n_ub = [min(n_ub[i], tmax_ub // cc[i]) if cc[i] > 0 else n_ub[i] for i in range(nn)]
    ck("scaling")
    relax = _relaxation(instance, cc, cm, mid, last, ov)
    ck("relaxation")
    tlb = {q: int(v) for q, v in relax.tmax_bounds(tmax_ub).items()}
    q_dom = sorted(tlb)
    infeasible = not q_dom
    if infeasible:
        q_dom = [1]  # no stage count can hold the layers: keep a domain, forbid it below
    qv = md.new_int_var_from_domain(cp_model.Domain.from_values(q_dom), "Q")
    if infeasible:
        md.add(qv == 0)
    md.add(sum(x) == qv)
    q1 = md.new_bool_var("Q_is_1")
    md.add(qv == 1).only_enforce_if(q1)
    md.add(qv >= 2).only_enforce_if(~q1)

    n = [md.new_int_var(0, n_ub[i], f"n{i}") for i in range(nn)]
    md.add(sum(n) == L)
    cap_mid, cap_last = [], []
    for i in range(nn):
        md.add(n[i] >= x[i])
        md.add(n[i] <= n_ub[i] * x[i])
        # Memory: caps depend on Q (activations grow with Q+1) and on being the last stage.
        cm_i = md.new_int_var(0, L, f"capmid{i}")
        cl_i = md.new_int_var(0, L, f"caplast{i}")
        md.add_element(qv - 1, [int(v) for v in mid[1:, i]], cm_i)
        md.add_element(qv - 1, [int(v) for v in last[1:, i]], cl_i)
        md.add(n[i] <= cm_i)
        md.add(n[i] <= cl_i).only_enforce_if(lastv[i])
        cap_mid.append(cm_i)
        cap_last.append(cl_i)

    # Stage times: arc i->j charges comm[i,j] to i (forward) and comm[j,i] to j (backward),
    # so both arc directions between i and j charge comm[i, j] to i.
    ck("memory")
    tau = []
    for i in range(nn):
        ti = md.new_int_var(0, tau_ub[i], f"tau{i}")
        links = [cm[(i, j)] * (arcs[(i, j)] + arcs[(j, i)]) for j in succ[i]]
        # Mirrors geoplan.cost.kernel.stage_terms (compute + sends + overhead).
        md.add(ti == cc[i] * n[i] + sum(links) + ov * x[i])
        tau.append(ti)
    tmax = md.new_int_var(0, tmax_ub, "tmax")
    md.add_max_equality(tmax, tau)
    t_iter = md.new_int_var(0, t_ub, "T_iter")
    md.add(t_iter == sum(tau) + (m_count - 1) * tmax)  # mirrors kernel.iteration_time

    slb: dict[int, int] = {}
    t_lb: dict[int, int] = {}
    y: dict[int, cp_model.IntVar] = {}
    if bounds and not infeasible:
        # Bottleneck lower bound per stage count (tmax_bounds), with one literal per stage
        # count so that the LP relaxation sees it; the endpoints of a multi-stage pipeline
        # are distinct GPUs.
        y = {q: md.new_bool_var(f"Q_is_{q}") for q in q_dom}
        md.add_exactly_one(y.values())
        md.add(sum(q * yq for q, yq in y.items()) == qv)
        md.add(tmax >= sum(tlb[q] * yq for q, yq in y.items()))
        slb = {q: int(v) for q, v in relax.sum_bounds(q_dom).items()}
        md.add(sum(tau) >= sum(slb[q] * yq for q, yq in y.items()))
        # geoplan.cost.bounds.t_iter_bounds: T >= max(slb, tlb) + (M - 1) tlb.
        t_lb = {q: int(v) for q, v in t_iter_bounds(tlb, slb, m_count).items()}
        md.add(t_iter >= sum(t_lb[q] * yq for q, yq in y.items()))
        md.add(t_iter >= min(t_lb.values()))
        md.add(tmax >= min(tlb.values()))
        for i in range(nn):
            md.add(first[i] + lastv[i] <= 1 + q1)
        # T_iter >= M * tau_i, a cut the LP would not find from the max alone.
        md.add(t_iter >= m_count * tmax)

    # Idle energy: z_i = T_iter when GPU i is used, else 0.
    ck("bounds")
    z: dict[int, cp_model.IntVar] = {}
    for i in a_int:
        zi = md.new_int_var(0, t_ub, f"z{i}")
        md.add(zi == t_iter).only_enforce_if(x[i])
        md.add(zi == 0).only_enforce_if(~x[i])
        md.add(zi <= t_iter)
        if bounds:
            md.add(zi >= m_count * tau[i])
        z[i] = zi
    if z and y:
        # With Q = q stages the idle weights of the used GPUs add up to at least the q
        # smallest ones, and T_iter >= t_lb(q): a linear bound on the idle-energy term.
        weights = sorted(a_int.get(i, 0) for i in range(nn))
        md.add(sum(a * z[i] for i, a in a_int.items())
               >= sum(sum(weights[:q]) * t_lb[q] * yq for q, yq in y.items()))
        for i, zi in z.items():
            md.add(zi >= min(t_lb.values()) * x[i])
    if y and 2 <= relax.n_clusters <= MAX_CLUSTERS:
        _add_cluster_bounds(md, relax, x, y, tmax, tlb, tmax_ub)

    ck("energy")
    dom: list[tuple[int, int]] = []
    ident: list[tuple[int, int]] = []
    if symmetry:
        dom, ident = _symmetry(instance, energy=bool(a_int) or any(b_int))
        for i, j in dom:
            md.add_implication(x[j], x[i])
        for i, j in ident:
            md.add(n[i] >= n[j])

    objective = a0 * t_iter + sum(a * z[i] for i, a in a_int.items())
    objective += sum(b_int[i] * n[i] for i in range(nn) if b_int[i])
    if cutoff is not None:
        md.add(objective <= cutoff)
    md.minimize(objective)
    return CpsatModel(
        instance=instance, model=md, scaling=sc, comp_int=cc, comm_int=cm, x=x, first=first,
        last=lastv, arcs=arcs, n=n, q=qv, q1=q1, cap_mid=cap_mid, cap_last=cap_last, tau=tau,
        tmax=tmax, t_iter=t_iter, z=z, objective=objective, obj_coef=obj_coef,
        micro_batches=m_count, q_domain=q_dom, mid_caps=mid, last_caps=last, tmax_lb=tlb,
        sum_lb=slb,
        dominance=dom, identical=ident, cutoff=cutoff, q_lits=y, relaxation=relax,
        tmax_ub=tmax_ub, overhead_int=ov,
    )
