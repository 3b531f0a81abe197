"""MILP model of the planning problem, built in Pyomo and solved by HiGHS.

GPU-indexed formulation (written out in ``docs/milp.md``): selection ``y_i``,
integer layer counts ``n_i``, successor arcs ``a_ij`` whose in/out degrees are
tied to ``y_i`` with first/last markers, Desrochers-Laporte order variables
against subtours, cumulative stage-count indicators ``z_k = [Q >= k]`` that
carry the Q-dependent memory caps, a bottleneck variable above every stage time
and, for lambda < 1, a linearised ``T_iter * y_i`` for the idle energy. Times
are milliseconds inside the model. Bounds derived from a known plan (warm start
or a cheap heuristic) tighten the layer bounds and big-Ms without cutting off
any plan at least as good as it.

Public API: :func:`solve` (registered as ``milp``); for inspection and reuse
:func:`prepare` / :func:`tighten` (data and bounds), :func:`build_model`,
:func:`start_values` / :func:`canonical_plan` (plans to variable values),
:func:`read_plan`, :func:`heuristic_plans` / :func:`improve_plan` (start plans).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from geoplan.cost import bounds, evaluate, kernel
from geoplan.cost.dominance import dominance_of
from geoplan.cost.weights import ObjectiveWeights
from geoplan.errors import FormulationError, InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, Status, TraceRow

__all__ = [
    "SPEC",
    "BuildAbandoned",
    "MilpData",
    "MilpParams",
    "build_checker",
    "build_model",
    "canonical_plan",
    "heuristic_plans",
    "improve_plan",
    "prepare",
    "read_plan",
    "solve",
    "start_values",
    "tighten",
]

# Relative slack on bounds derived from a known plan, so that plan (priced in
# floating point) stays feasible for the model.
_BOUND_SLACK = 1e-7
# HiGHS tolerances used for every solve (tighter than the defaults, so that the
# model's objective and the evaluator's price of the rounded plan agree to
# MODEL_TOLERANCE; see docs/milp.md, "Tolerances").
_HIGHS_TOLERANCES = {
    "mip_feasibility_tolerance": 1e-9,
    "primal_feasibility_tolerance": 1e-9,
    "dual_feasibility_tolerance": 1e-9,
}
MODEL_TOLERANCE = 1e-6  # relative; what the core checks model_objective against
_PREPARE_S_PER_GPU2 = 2.7e-5  # seconds per N^2 that prepare() takes (measured, N=128..256)
# Building the Pyomo model and translating it to HiGHS (neither interruptible as a
# whole): about 2e-4 s per arc plus GPU (3 s for 8k arcs at N=256; measured on one core).
_BUILD_S_PER_ITEM = 2e-4


def _build_estimate(data: MilpData) -> float:
    """Seconds to build the model of ``data`` and translate it to HiGHS (a rough guide)."""
    return _BUILD_S_PER_ITEM * (len(data.arcs) + 20 * len(data.gpus))
_LP_TOLERANCE = 1e-6  # relative margin taken off LP optima before they become bounds


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class MilpData:
    """Everything the model is built from (model units: ms, J, layers).

    ``cap_mid[i, k]`` / ``cap_last[i, k]`` are layer caps of GPU i in a k-stage
    pipeline (k = 1..kmax; column 0 unused), clipped to [0, L - k + 1].
    ``c_t``/``c_e`` weigh T_iter (ms) and E_iter (J) in the objective.
    ``groups``: GPU sets (sites and unions of sites) that get subtour cuts.
    ``tmax_lb`` may be raised by :func:`tighten`.
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
    """Compute caps, arcs, bounds, dominance pairs and cut groups for :func:`build_model`.

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
    max_comm = float(np.max(c.comm_ms[finite])) if finite.any() else 0.0

    # Worst case over all plans (geoplan.cost.bounds): every stage at most L
    # layers on the slowest GPU plus two transfers and the overhead.
    slowest = float(max(comp[usable]))
    o = float(c.overhead_ms)
    tmax_wc = bounds.tmax_worst(slowest, max_comm, L, o)
    t_ub = bounds.t_iter_worst(slowest, max_comm, L, kmax, M, o)
    if incumbent_objective is not None and math.isfinite(incumbent_objective):
        # objective >= c_t T + c_e (T idle_min + M L min(dyn comp)) / 1000.
        idle_min = float(min(c.idle_w[usable]))
        dyn_min = float(min(c.dyn_w[i] * comp[i] for i in usable))
        t_inc = bounds.t_iter_cap(incumbent_objective, c_t, c_e, idle_min, dyn_min, M, L)
        if math.isfinite(t_inc):
            t_ub = min(t_ub, t_inc * (1 + _BOUND_SLACK) + 1e-9)
    tmax_ub = t_ub / M  # T = sum tau + (M-1) max tau >= M max tau
    tmax_lb, t_lb = _lower_bounds(instance, usable, cap_any, cap_last, tmax_wc)
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
        dominance=_dominance(instance, gpus, c_e > 0),
        groups=_groups(instance, gpus, site_unions),
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


def _lower_bounds(
    instance: Instance, usable: list[int], cap_any: np.ndarray, cap_last: np.ndarray,
    tmax_wc: float,
) -> tuple[float, float]:
    """Lower bounds (ms) on the bottleneck and on T_iter of every plan; (inf, inf) if none exists.

    The bottleneck bound is the larger of :func:`geoplan.cost.bounds.capacity_bound`
    and the smallest per-Q bound of :meth:`geoplan.cost.bounds.Relaxation.tmax_bounds`;
    the T_iter bound the smallest per-Q :func:`geoplan.cost.bounds.t_iter_bounds`.
    Both are valid for every plan (see those functions), overhead included.
    """
    c = instance.coefficients()
    L = instance.layers
    cap_b = bounds.capacity_bound(c.comp_ms, c.comm_ms, float(c.overhead_ms), usable, cap_any,
                                  cap_last[:, 1], L)
    relax = bounds.Relaxation.from_coefficients(c, L, bounds.clusters(instance))
    tlb = relax.tmax_bounds(tmax_wc)
    if not tlb:
        return math.inf, math.inf
    tmax_lb = max(cap_b, min(tlb.values())) if math.isfinite(cap_b) else min(tlb.values())
    t_lb = bounds.t_iter_bounds(tlb, relax.sum_bounds(sorted(tlb)), float(c.micro_batches))
    return float(tmax_lb), float(min(t_lb.values()))


def _groups(
    instance: Instance, gpus: tuple[int, ...], unions: bool | None = None
) -> tuple[tuple[int, ...], ...]:
    """GPU sets for subtour cuts: each site and, if ``unions`` (default: at most 5
    sites and 16 GPUs), every union of sites."""
    sites: dict[str, list[int]] = {}
    for i in gpus:
        site = instance.gpus[i].site
        if site is not None:
            sites.setdefault(site, []).append(i)
    keys = sorted(sites)
    if len(keys) < 2:
        return ()
    if unions is None:
        # Unions pay off on small instances; on large ones their dense rows slow
        # presolve and every LP more than they tighten.
        unions = len(keys) <= 5 and len(gpus) <= 16
    sizes = range(1, len(keys)) if unions else range(1, 2)
    out: list[tuple[int, ...]] = []
    for r in sizes:
        for comb in itertools.combinations(keys, r):
            group = tuple(sorted(i for k in comb for i in sites[k]))
            if len(group) >= 2:
                out.append(group)
    return tuple(out)


def _dominance(
    instance: Instance, gpus: tuple[int, ...], energy: bool
) -> tuple[tuple[int, int, bool], ...]:
    """Pairs (i, j, identical) of the one dominance rule (:mod:`geoplan.cost.dominance`).

    y_j <= y_i for every pair; n_j <= n_i where ``identical``. The rule keeps an
    optimal plan (proof in that module); here restricted to the model's GPUs.
    """
    rule = dominance_of(instance.coefficients(), instance.layers, energy, gpus)
    ident = set(rule.identical)
    return tuple((i, j, (i, j) in ident) for i, j in rule.pairs)


# --------------------------------------------------------------------------- model


class BuildAbandoned(Exception):
    """Building the model ran out of budget or was interrupted (the message says which)."""


def build_checker(options: SolveOptions, what: str) -> Callable[[str], None]:
    """A ``check`` for :func:`build_model`: progress on ``options.callbacks``, and
    :class:`BuildAbandoned` once ``options`` has no time left (or was stopped)."""

    def check(step: str) -> None:
        options.callbacks.on_progress({"building": what, "step": step,
                                       "elapsed": round(options.elapsed(), 3)})
        if options.remaining() <= 0:
            raise BuildAbandoned(options.stop.reason if options.stopped()
                                 else "building exceeded the budget")

    return check


def build_model(
    instance: Instance,
    incumbent_objective: float | None = None,
    *,
    data: MilpData | None = None,
    symmetry: bool = True,
    cuts: bool = True,
    check: Callable[[str], None] | None = None,
) -> pyo.ConcreteModel:
    """The Pyomo model (objective in evaluator units); ``model.data`` holds its :class:`MilpData`.

    ``check(step)`` is called between the blocks of constraints (progress, and
    :class:`BuildAbandoned` to give up when the budget has run out).

    ``incumbent_objective``: the evaluator's objective of a known feasible plan;
    bounds are then tightened to plans at least as good (see :func:`prepare`).
    ``symmetry``: add the dominance constraints. ``cuts``: add the valid
    inequalities of docs/milp.md (perspective, arc and subtour cuts); the model
    is exact without them.
    """
    d = prepare(instance, incumbent_objective) if data is None else data
    c = instance.coefficients()
    comp, comm = c.comp_ms, c.comm_ms
    L, M, K = instance.layers, float(c.micro_batches), d.kmax
    m = pyo.ConcreteModel(name=f"geoplan-milp-{instance.name}")
    m.data = d
    ck = check or (lambda _step: None)

    m.I = pyo.Set(initialize=d.gpus, ordered=True)
    m.A = pyo.Set(initialize=d.arcs, dimen=2, ordered=True)
    m.K = pyo.Set(initialize=range(2, K + 1), ordered=True)
    succ = {i: [j for (a, j) in d.arcs if a == i] for i in d.gpus}
    pred = {i: [a for (a, j) in d.arcs if j == i] for i in d.gpus}
    arc_set = set(d.arcs)

    m.y = pyo.Var(m.I, domain=pyo.Binary)
    m.n = pyo.Var(m.I, domain=pyo.NonNegativeIntegers, bounds=lambda _, i: (0, d.n_ub[i]))
    m.first = pyo.Var(m.I, domain=pyo.Binary)
    m.last = pyo.Var(m.I, domain=pyo.Binary)
    m.a = pyo.Var(m.A, domain=pyo.Binary)
    m.z = pyo.Var(m.K, domain=pyo.Binary)  # z[k] = 1 iff Q >= k
    m.pos = pyo.Var(m.I, bounds=(0, K - 1))
    m.tmax = pyo.Var(bounds=(d.tmax_lb, d.tmax_ub))
    m.t = pyo.Var(bounds=(d.t_lb, d.t_ub))
    ck("variables")

    overhead = float(c.overhead_ms)

    def tau(_: Any, i: int) -> Any:
        # Mirrors geoplan.cost.kernel.stage_terms (tau = compute + sends + overhead).
        return (
            comp[i] * m.n[i]
            + sum(float(comm[i, j]) * m.a[i, j] for j in succ[i])  # forward, to successor
            + sum(float(comm[i, j]) * m.a[j, i] for j in pred[i])  # backward, to predecessor
            + overhead * m.y[i]
        )

    m.tau = pyo.Expression(m.I, rule=tau)
    q_minus_1 = sum(m.z[k] for k in m.K)

    # Partition and selection.
    m.layers = pyo.Constraint(expr=sum(m.n[i] for i in m.I) == L)
    m.n_lo = pyo.Constraint(m.I, rule=lambda _, i: m.n[i] >= m.y[i])
    m.n_hi = pyo.Constraint(m.I, rule=lambda _, i: m.n[i] <= d.n_ub[i] * m.y[i])
    # Path: one first and one last stage; degrees tied to selection.
    m.one_first = pyo.Constraint(expr=sum(m.first[i] for i in m.I) == 1)
    m.one_last = pyo.Constraint(expr=sum(m.last[i] for i in m.I) == 1)
    m.out_deg = pyo.Constraint(
        m.I, rule=lambda _, i: sum(m.a[i, j] for j in succ[i]) + m.last[i] == m.y[i]
    )
    m.in_deg = pyo.Constraint(
        m.I, rule=lambda _, i: sum(m.a[j, i] for j in pred[i]) + m.first[i] == m.y[i]
    )
    # Stage count Q = sum y = 1 + sum_k z_k with z non-increasing.
    m.count = pyo.Constraint(expr=sum(m.y[i] for i in m.I) == 1 + q_minus_1)
    ks = list(range(2, K + 1))
    m.z_mono = pyo.Constraint(ks[:-1], rule=lambda _, k: m.z[k + 1] <= m.z[k])
    # Order variables (Desrochers-Laporte lifted MTZ): no subtours, no 2-cycles.
    m.order = pyo.Constraint(
        m.A,
        rule=lambda _, i, j: m.pos[j] - m.pos[i]
        >= 1 - K + K * m.a[i, j] + ((K - 2) * m.a[j, i] if (j, i) in arc_set else 0),
    )
    ck("order")
    m.pos_sel = pyo.Constraint(m.I, rule=lambda _, i: m.pos[i] <= (K - 1) * m.y[i])
    m.pos_q = pyo.Constraint(m.I, rule=lambda _, i: m.pos[i] <= q_minus_1)
    m.pos_first = pyo.Constraint(m.I, rule=lambda _, i: m.pos[i] <= (K - 1) * (1 - m.first[i]))
    m.pos_later = pyo.Constraint(m.I, rule=lambda _, i: m.pos[i] >= m.y[i] - m.first[i])
    m.pos_last = pyo.Constraint(
        m.I, rule=lambda _, i: m.pos[i] >= q_minus_1 - (K - 1) * (1 - m.last[i])
    )

    # Memory: n_i <= cap_i(Q), written with the cumulative indicators
    # cap(Q) = cap(1) + sum_{k=2..Q} (cap(k) - cap(k-1)).
    def cap_expr(cap: np.ndarray, i: int) -> Any:
        return int(cap[i, 1]) + sum(int(cap[i, k] - cap[i, k - 1]) * m.z[k] for k in ks)

    def mem_mid(_: Any, i: int) -> Any:
        if all(d.cap_mid[i, k] >= d.n_ub[i] for k in range(1, K + 1)):
            return pyo.Constraint.Skip
        return m.n[i] <= cap_expr(d.cap_mid, i)

    def mem_last(_: Any, i: int) -> Any:
        # Only binding when i is last; a non-last stage is held by mem_mid and n_ub.
        big = max(
            int(min(d.cap_mid[i, k], d.n_ub[i])) - int(d.cap_last[i, k]) for k in range(1, K + 1)
        )
        if big <= 0:
            return pyo.Constraint.Skip
        return m.n[i] <= cap_expr(d.cap_last, i) + big * (1 - m.last[i])

    m.mem_mid = pyo.Constraint(m.I, rule=mem_mid)
    m.mem_last = pyo.Constraint(m.I, rule=mem_last)
    ck("memory")

    # Bottleneck and iteration time.
    m.bottleneck = pyo.Constraint(m.I, rule=lambda _, i: m.tmax >= m.tau[i])
    # Mirrors geoplan.cost.kernel.iteration_time (exact for M = 1 too: (M - 1) = 0).
    m.t_def = pyo.Constraint(expr=m.t == sum(m.tau[i] for i in m.I) + (M - 1) * m.tmax)

    ck("stage times")
    if symmetry:
        dom = [(i, j) for (i, j, _) in d.dominance]
        same = [(i, j) for (i, j, identical) in d.dominance if identical]
        m.dom_y = pyo.Constraint(
            range(len(dom)), rule=lambda _, k: m.y[dom[k][1]] <= m.y[dom[k][0]]
        )
        m.dom_n = pyo.Constraint(
            range(len(same)), rule=lambda _, k: m.n[same[k][1]] <= m.n[same[k][0]]
        )

    ck("symmetry")
    if cuts:
        # Perspective of tau_i <= tmax <= tmax_ub (tau_i = 0 when i is unused).
        m.tau_sel = pyo.Constraint(m.I, rule=lambda _, i: m.tau[i] <= d.tmax_ub * m.y[i])
        # Subtour elimination on sites (cut-set form of the generalised subtour
        # constraints): if k in S is used, the path leaves S or ends in S.
        rows = [(frozenset(g), k) for g in d.groups for k in g]
        m.gsec = pyo.Constraint(
            range(len(rows)),
            rule=lambda _, r: sum(
                m.a[i, j] for i in rows[r][0] for j in succ[i] if j not in rows[r][0]
            )
            + sum(m.last[i] for i in rows[r][0])
            >= m.y[rows[r][1]],
        )
        ck("subtour cuts")
        _add_lb_cuts(m, d.tmax_lb)
    ck("cuts")

    obj: Any = d.c_t * m.t if d.c_t > 0 else 0.0
    if d.energy:
        idle = {i: float(c.idle_w[i]) for i in d.gpus if c.idle_w[i] > 0}
        m.IW = pyo.Set(initialize=sorted(idle), ordered=True)
        # w[i] = T_iter * y_i (McCormick with T in [t_lb, t_ub], y binary; exact at
        # integer y because the objective pushes w down), plus w_i >= M tau_i
        # (T >= M max tau).
        m.w = pyo.Var(m.IW, bounds=(0, d.t_ub))
        m.w_big = pyo.Constraint(m.IW, rule=lambda _, i: m.w[i] >= m.t - d.t_ub * (1 - m.y[i]))
        m.w_low = pyo.Constraint(m.IW, rule=lambda _, i: m.w[i] >= d.t_lb * m.y[i])
        m.w_tau = pyo.Constraint(m.IW, rule=lambda _, i: m.w[i] >= M * m.tau[i])
        # Mirrors geoplan.cost.kernel.iteration_energy with T_iter * idle linearised.
        energy = sum(idle[i] * m.w[i] for i in m.IW) / 1e3 + M / 1e3 * sum(
            float(c.dyn_w[i] * comp[i]) * m.n[i] for i in m.I
        )
        m.energy = pyo.Expression(expr=energy)
        obj = obj + d.c_e * m.energy
    m.time = pyo.Expression(expr=m.t)
    m.obj = pyo.Objective(expr=obj, sense=pyo.minimize)
    return m


def _add_lb_cuts(m: pyo.ConcreteModel, lb: float) -> None:
    """Cuts that use the bottleneck lower bound ``lb`` (in block ``m.lb_cuts``).

    * tau_i <= tmax - lb (1 - y_i): the other half of the perspective hull;
    * tmax >= lb + sum_j (w_ij - lb)^+ a_ij over the out-arcs of i (at most one
      is used; w_ij = arc_weight), and the same over the in-arcs of i.
    """
    d: MilpData = m.data
    if hasattr(m, "lb_cuts"):
        m.del_component(m.lb_cuts)
    b = pyo.Block()
    m.lb_cuts = b
    w = {(i, j): d.arc_weight(i, j) for (i, j) in d.arcs}
    succ = {i: [j for (a, j) in d.arcs if a == i] for i in d.gpus}
    pred = {i: [a for (a, j) in d.arcs if j == i] for i in d.gpus}
    b.persp = pyo.Constraint(m.I, rule=lambda _, i: m.tau[i] <= m.tmax - lb * (1 - m.y[i]))

    def arc_cut(arcs: list[tuple[int, int]]) -> Any:
        terms = [(w[e] - lb) * m.a[e] for e in arcs if w[e] > lb]
        return m.tmax >= lb + sum(terms) if terms else pyo.Constraint.Skip

    b.arc_out = pyo.Constraint(m.I, rule=lambda _, i: arc_cut([(i, j) for j in succ[i]]))
    b.arc_in = pyo.Constraint(m.I, rule=lambda _, i: arc_cut([(j, i) for j in pred[i]]))


def tighten(
    data: MilpData,
    deadline: float,
    max_rounds: int = 60,
    min_gain: float = 1e-3,
    threads: int = 1,
    probe: bool = True,
    check: Callable[[str], None] | None = None,
    stopped: Callable[[], bool] | None = None,
) -> tuple[MilpData, int]:
    """Raise ``tmax_lb`` with LPs over the relaxation of the model.

    1. Rounds: minimise tmax over the LP with cuts built from the current valid
       bound; the optimum (less a tolerance) is again a valid bound for every
       plan the model admits. Until a round gains less than ``min_gain``.
    2. Probing (``probe``): bisect on theta, asking whether the LP stays
       feasible when tmax <= theta, with the integer consequences of that
       added: GPU i then holds at most floor((theta - c_i) / comp_i) layers
       (c_i its cheapest link, or its two cheapest if it is neither first nor
       last) and arcs of weight above theta are unused. Feasibility only grows
       with theta, so an infeasible theta is a valid bound. Then rounds again.

    Stops after ``max_rounds`` LPs, at ``deadline`` (``time.perf_counter()``) or
    once ``stopped()``; ``check`` goes to :func:`build_model` (an abandoned build
    returns ``data`` unchanged). Returns the tightened data and the number of LPs
    solved.
    """
    from pyomo.contrib.solver.solvers.highs import Highs as PyomoHighs

    from formulations.highs_tools import reset_scheduler

    if deadline - time.perf_counter() < _build_estimate(data):
        return data, 0  # the LP model would not even be built and translated in time
    try:
        m = build_model(data.instance, data=data, symmetry=True, cuts=True, check=check)
    except BuildAbandoned:
        return data, 0
    pyo.TransformationFactory("core.relax_integer_vars").apply_to(m)
    m.obj.deactivate()
    m.lp_obj = pyo.Objective(expr=m.tmax)
    opt = PyomoHighs()
    lb = data.tmax_lb
    rounds = 0
    reset_scheduler()

    def lp() -> Any:
        nonlocal rounds
        rounds += 1
        return opt.solve(
            m,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            time_limit=max(deadline - time.perf_counter(), 1e-3),
            threads=threads,
        )

    def more() -> bool:
        return (rounds < max_rounds and time.perf_counter() < deadline
                and not (stopped is not None and stopped()))

    def raise_to(new: float) -> None:
        nonlocal lb
        lb = min(new, data.tmax_ub)
        m.tmax.setlb(lb)
        _add_lb_cuts(m, lb)

    def lp_rounds() -> None:
        while more():
            res = lp()
            if (
                res.termination_condition.name != "convergenceCriteriaSatisfied"
                or res.incumbent_objective is None
            ):
                # Infeasible, out of time, or no value reported: keep the last valid bound.
                return
            value = float(res.incumbent_objective)
            new = value - _LP_TOLERANCE * max(1.0, abs(value))
            if new <= lb * (1 + min_gain):
                if new > lb:
                    raise_to(new)
                return
            raise_to(new)

    lp_rounds()
    if probe and more():
        found = _probe(m, data, lb, lp, more)
        if found > lb * (1 + min_gain):
            raise_to(found)
            lp_rounds()
    if hasattr(m, "probe"):
        m.del_component(m.probe)
    if lb <= data.tmax_lb:
        return data, rounds
    M = float(data.instance.coefficients().micro_batches)
    return replace(data, tmax_lb=lb, t_lb=max(data.t_lb, M * lb)), rounds


def _probe(m: pyo.ConcreteModel, data: MilpData, lb: float, lp: Any, more: Any) -> float:
    """Bisection of :func:`tighten`, step 2; returns the largest theta proved infeasible."""
    inst = data.instance
    c = inst.coefficients()
    comp, L = c.comp_ms, inst.layers
    both = np.isfinite(c.comm_ms) & np.isfinite(c.comm_ms.T)
    cheap1: dict[int, float] = {}
    cheap2: dict[int, float] = {}
    for i in data.gpus:
        links = np.sort(c.comm_ms[i, both[i]])
        cheap1[i] = float(links[0]) if links.size else math.inf
        cheap2[i] = float(links[:2].sum()) if links.size >= 2 else math.inf
    o = float(c.overhead_ms)
    # A single-GPU plan with a bottleneck <= theta answers "feasible" without an LP.
    single = min(
        (L * comp[i] + o for i in data.gpus if data.cap_last[i, 1] >= L), default=math.inf
    )

    def cap(theta: float, extra: float, i: int) -> int:
        # geoplan.cost.bounds.layers_within, its links at least ``extra``, plus o; a
        # 1e-9 relative slack on theta keeps the cap on the generous (valid) side.
        return bounds.layers_within(theta * (1 + 1e-9), extra + o, float(comp[i]), data.n_ub[i])

    def feasible(theta: float) -> bool | None:
        if theta >= single:
            return True
        if hasattr(m, "probe"):
            m.del_component(m.probe)
        b = pyo.Block()
        m.probe = b
        h1 = {i: cap(theta, cheap1[i], i) for i in data.gpus}
        h2 = {i: cap(theta, cheap2[i], i) for i in data.gpus}
        # Every plan with tmax <= theta has at least two stages here.
        b.ends = pyo.Constraint(m.I, rule=lambda _, i: m.n[i] <= h1[i] * m.y[i])
        b.middle = pyo.Constraint(
            m.I, rule=lambda _, i: m.n[i] <= h2[i] + (h1[i] - h2[i]) * (m.first[i] + m.last[i])
        )
        b.top = pyo.Constraint(expr=m.tmax <= theta)
        heavy = [e for e in data.arcs if data.arc_weight(*e) > theta]
        b.arcs = pyo.Constraint(heavy, rule=lambda _, i, j: m.a[i, j] == 0)
        res = lp()
        name = res.termination_condition.name
        if name == "convergenceCriteriaSatisfied":
            return True
        if name in ("provenInfeasible", "infeasibleOrUnbounded"):
            return False
        return None  # out of time or trouble: decide nothing

    lo, hi = lb, data.tmax_ub
    while more() and hi - lo > 1e-4 * max(1.0, lo):
        mid = 0.5 * (lo + hi)
        ok = feasible(mid)
        if ok is None:
            break
        if ok:
            hi = mid
        else:
            lo = mid
    return lo * (1 - _LP_TOLERANCE)


# --------------------------------------------------------------------------- plans <-> values


def canonical_plan(data: MilpData, plan: Plan) -> Plan:
    """``plan`` rewritten to satisfy the dominance constraints, at no higher cost.

    A used GPU j with an unused dominator i is replaced by i in place; of two
    identical GPUs the lower-index one takes the larger layer count.
    """
    inst = data.instance
    g = plan.gpu_indices(inst)
    n = list(plan.layer_counts)
    changed = True
    while changed:
        changed = False
        for i, j, identical in data.dominance:
            if j in g and i not in g:
                g[g.index(j)] = i
                changed = True
            elif identical and i in g and j in g:
                pi, pj = g.index(i), g.index(j)
                if n[pj] > n[pi]:
                    g[pi], g[pj] = j, i
                    changed = True
    return Plan.from_indices(inst, g, n, plan.micro_batch_size)


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


# --------------------------------------------------------------------------- heuristics


def heuristic_plans(instance: Instance, deadline: float | None = None) -> list[Plan]:
    """Cheap plans from the baseline's rules (infeasible ones are filtered by the caller).

    Every single-GPU plan, the Metis-default plan, and for each site (and for
    all GPUs together) its k fastest GPUs with a FLOPS-proportional split over
    the baseline's ordering rules; the last part ends at ``deadline``
    (``time.perf_counter()``; seconds at N=256).
    """
    from geoplan.cost.baseline import best_order_plan, metis_default_plan

    c = instance.coefficients()
    L = instance.layers
    plans: list[Plan] = []
    for i in range(instance.n):
        if c.fits(i, L, 1, last=True):
            plans.append(Plan.from_indices(instance, [i], [L]))
    base = metis_default_plan(instance)
    if base is not None:
        plans.append(base)
    for members in _site_groups(instance):
        ranked = sorted(members, key=lambda i: (c.comp_ms[i], i))
        for k in range(2, min(len(ranked), L) + 1):
            if deadline is not None and time.perf_counter() >= deadline:
                return plans
            found = best_order_plan(instance, ranked[:k], c)
            if found is not None:
                plans.append(Plan.from_indices(instance, found[1], found[2]))
    return plans


def _site_groups(instance: Instance) -> list[list[int]]:
    groups: dict[str | None, list[int]] = {None: list(range(instance.n))}
    for i, g in enumerate(instance.gpus):
        groups.setdefault(f"site:{g.site}", []).append(i)
    return list(groups.values())


def improve_plan(
    instance: Instance, plans: list[Plan], deadline: float,
    stopped: Callable[[], bool] | None = None,
) -> tuple[Plan, float] | None:
    """The best of ``plans``, then better sequences with exact splits.

    Uses :class:`geoplan.cost.split.Splitter` (optimal layer split of a fixed GPU
    sequence) when available: the baseline's GPU orders for each site's k fastest
    GPUs (always, a few thousand splits at most), then until ``deadline`` a
    first-improvement local search that removes, inserts, replaces or swaps GPUs
    in the sequence. Returns (plan, evaluator objective). ``deadline`` (and
    ``stopped()``, an interrupt) also end the first part.
    """
    best = _best_plan(instance, plans)
    try:
        from geoplan.cost.split import Splitter
    except ImportError:  # pragma: no cover - split is part of the package
        return best
    from geoplan.cost.baseline import candidate_orders

    sp = Splitter(instance)
    c = instance.coefficients()
    sites = [g.site for g in instance.gpus]

    def over() -> bool:
        return time.perf_counter() >= deadline or (stopped is not None and stopped())
    top: tuple[tuple[int, ...], float] | None = None

    def consider(seq: list[int] | tuple[int, ...]) -> bool:
        nonlocal top
        res = sp.split(list(seq))
        if res is not None and (top is None or res.objective < top[1] * (1 - 1e-12)):
            top = (tuple(res.gpus), res.objective)
            return True
        return False

    if best is not None:
        consider(best[0].gpu_indices(instance))
    for members in _site_groups(instance):
        ranked = sorted(members, key=lambda i: (c.comp_ms[i], i))
        for k in range(1, min(len(ranked), instance.layers) + 1):
            if over():
                break
            for order in candidate_orders(c, ranked[:k], sites):
                consider(order)
    improved = top is not None
    while improved and top is not None and not over():
        improved = False
        seq = list(top[0])
        unused = [i for i in range(instance.n) if i not in seq]
        moves: list[list[int]] = []
        moves += [seq[:k] + seq[k + 1 :] for k in range(len(seq)) if len(seq) > 1]
        if len(seq) < instance.layers:
            moves += [[*seq[:k], g, *seq[k:]] for g in unused for k in range(len(seq) + 1)]
        moves += [[*seq[:k], g, *seq[k + 1:]] for g in unused for k in range(len(seq))]
        moves += [
            [*seq[:k], seq[k + 1], seq[k], *seq[k + 2:]] for k in range(len(seq) - 1)
        ]
        for move in moves:
            if consider(move):
                improved = True
                break
            if over():
                break
    if top is None:
        return best
    res = sp.split(list(top[0]))
    assert res is not None
    found = _best_plan(instance, [res.to_plan(instance)])
    if found is not None and (best is None or found[1] < best[1]):
        return found
    return best


# --------------------------------------------------------------------------- solve


def _best_plan(instance: Instance, plans: list[Plan]) -> tuple[Plan, float] | None:
    best: tuple[Plan, float] | None = None
    for p in plans:
        try:
            ev = evaluate(instance, p)
        except InputError:  # unknown ids in a user plan: simply not usable as a start
            continue
        if ev.feasible and (best is None or ev.objective < best[1]):
            best = (p, ev.objective)
    return best


@dataclass(frozen=True)
class MilpParams(SolverParams):
    """Parameters of ``milp`` (``--param KEY=VALUE``)."""

    LABEL: ClassVar[str] = "milp"

    heuristic: bool = param(True, "seed with cheap plans improved by exact splits and a "
                            "local search")
    heuristic_share: float = param(0.05, "budget share of that heuristic (at least 1 s, at "
                                   "most a quarter)", at_least=0.0, at_most=1.0)
    symmetry: bool = param(True, "dominance constraints between interchangeable GPUs")
    cuts: bool = param(True, "valid inequalities")
    site_unions: bool | None = param(None, "subtour cuts on unions of sites (none: when at "
                                     "most 5 sites and 16 GPUs)")
    tighten: bool = param(True, "LP bound tightening of the bottleneck")
    tighten_share: float = param(0.25, "at most this budget share for the tightening",
                                 at_least=0.0, at_most=1.0)
    highs_log: bool = param(False, "HiGHS log on the console")
    highs: Mapping[str, Any] = param(None, "any HiGHS option, passed unchanged (value read "
                                     "as JSON)", prefix="highs.")


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``milp``: build the model, run HiGHS, read the plan back.

    ``options.params`` (:class:`MilpParams`): ``heuristic`` (default true: seed with cheap plans
    improved by exact splits and a local search given ``heuristic_share`` of the
    budget, default 0.05, at least 1 s, at most a quarter),
    ``symmetry`` (dominance constraints, default true), ``cuts`` (valid
    inequalities, default true), ``tighten`` (LP bound tightening of the
    bottleneck, default true) with ``tighten_share`` (at most this share of the
    budget, default 0.25), ``highs_log`` (default false: HiGHS log to the
    console), and any ``highs.<option>`` passed to HiGHS unchanged.
    """
    from formulations.highs_tools import HighsSession

    params = MilpParams.parse(options.params)
    info: dict[str, Any] = {}
    trace: list[TraceRow] = []
    t_start = time.perf_counter()

    # The model fixes the instance's micro-batch size: other starts cannot be used.
    u = instance.training.micro_batch_size
    usable_starts = [p for p in options.warm_start if p.micro_batch_size in (None, u)]
    warm = _best_plan(instance, usable_starts) if usable_starts else None
    best = warm
    if params.heuristic:
        share = params.heuristic_share
        budget = min(max(share * options.remaining(), 1.0), 0.25 * options.remaining())
        h_deadline = time.perf_counter() + budget
        candidates = usable_starts + heuristic_plans(instance, h_deadline)
        best = improve_plan(instance, candidates, h_deadline, options.stopped)
        info["heuristic_s"] = round(time.perf_counter() - t_start, 4)
    if best is not None:
        trace.append(TraceRow(options.elapsed(), best[1], None))
        options.callbacks.on_improvement(options.elapsed(), best[1], None)

    t_build = time.perf_counter()
    symmetry = params.symmetry
    cuts = params.cuts
    check = build_checker(options, "milp model")

    def abandoned(reason: str) -> Outcome:
        # The model could not be built within the budget (or an interrupt came first):
        # the best plan known so far, as at a time-out.
        info["model"] = f"abandoned: {reason}"
        info["build_s"] = round(time.perf_counter() - t_build, 4)
        if best is None:
            return Outcome(None, "no_solution", trace=trace, info=info,
                           message=f"milp: model abandoned ({reason}) before any plan was found")
        return Outcome(best[0], "feasible", trace=trace, info=info,
                       message=f"milp: model abandoned ({reason}); the best heuristic plan")

    try:
        check("data")
        # prepare() (bounds, dominance, arcs) cannot be interrupted: about 2.7e-5 N^2 s
        # (1.75 s at N=256 on one core); do not start it without that time.
        if options.remaining() < _PREPARE_S_PER_GPU2 * instance.n ** 2:
            raise BuildAbandoned(options.stop.reason if options.stopped()
                                 else "building exceeded the budget")
        data = prepare(
            instance,
            None if best is None else best[1],
            site_unions=params.site_unions,
        )
        check("bounds")
    except BuildAbandoned as exc:
        return abandoned(str(exc))
    if not data.gpus:
        return Outcome(
            None,
            "infeasible",
            info=info,
            message="no plan: no single GPU holds all layers and no set of GPUs linked "
            "both ways has the memory and links to hold them",
        )
    info["tmax_lb"] = {"initial": data.tmax_lb}
    if cuts and symmetry and params.tighten:
        budget = params.tighten_share * options.remaining()
        data, rounds = tighten(data, time.perf_counter() + budget, threads=options.threads,
                               check=check, stopped=options.stopped)
        info["tmax_lb"].update(tightened=data.tmax_lb, lp_rounds=rounds)
    try:
        if options.remaining() < _build_estimate(data):
            raise BuildAbandoned(options.stop.reason if options.stopped()
                                 else "building exceeded the budget")
        t_model = time.perf_counter()
        model = build_model(instance, data=data, symmetry=symmetry, cuts=cuts, check=check)
        # Pyomo's translation to HiGHS cannot be interrupted and takes about twice as
        # long as building the model: start it only if it fits in what is left.
        if options.remaining() < 2.0 * (time.perf_counter() - t_model) + 0.05:
            raise BuildAbandoned(options.stop.reason if options.stopped()
                                 else "building exceeded the budget")
        options.callbacks.on_progress({"building": "milp model", "step": "HiGHS translation",
                                       "elapsed": round(options.elapsed(), 3)})
        session = HighsSession(model)
    except BuildAbandoned as exc:
        return abandoned(str(exc))
    info["build_s"] = round(time.perf_counter() - t_build, 4)
    info["model"] = {
        "gpus": len(data.gpus),
        "arcs": len(data.arcs),
        "kmax": data.kmax,
        "cols": session.num_cols,
        "rows": int(session.highs.getNumRow()),
        "dominance_pairs": len(data.dominance),
    }

    scale = max(1.0, abs(best[1])) if best is not None else 1.0
    rel_gap = options.gap if options.gap > 0 else 1e-9
    abs_gap = 1e-9 * scale if options.gap == 0 else 1e-6 * scale
    extra: dict[str, Any] = dict(_HIGHS_TOLERANCES)
    extra.update(params.highs)
    if params.highs_log:
        extra["log_to_console"] = True
    session.set_options(
        time_limit=options.remaining(),
        rel_gap=rel_gap,
        abs_gap=abs_gap,
        threads=options.threads,
        seed=options.seed,
        extra=extra,
    )

    start_plan: Plan | None = None
    if best is not None and symmetry:
        canon = canonical_plan(data, best[0])
        if canon != best[0]:
            ev = evaluate(instance, canon)
            if ev.feasible and ev.objective <= best[1]:
                best = (canon, ev.objective)
    if best is not None:
        vals = start_values(model, best[0])
        if vals is not None and session.set_start(vals):
            start_plan = best[0]
            if not trace or trace[-1].incumbent != best[1]:
                trace.append(TraceRow(options.elapsed(), best[1], None))
                options.callbacks.on_improvement(options.elapsed(), best[1], None)
    info["mip_start"] = None if start_plan is None else {
        "objective": best[1] if best else None,
        "source": "warm_start" if warm is not None and best is not None
        and best[1] >= warm[1] else "heuristic",
    }

    first_incumbent: list[float] = []

    def lower(bound: float) -> float:
        # HiGHS's dual bound holds up to its tolerances; keep it on the safe side.
        return bound - MODEL_TOLERANCE * max(1.0, abs(bound))

    def on_incumbent(_: float, obj: float, bound: float) -> None:
        first_incumbent.append(obj)
        b = lower(bound) if math.isfinite(bound) else None
        trace.append(TraceRow(options.elapsed(), obj, b))
        options.callbacks.on_improvement(options.elapsed(), obj, b)

    def on_bound(_: float, bound: float) -> None:
        inc = trace[-1].incumbent if trace else None
        trace.append(TraceRow(options.elapsed(), inc, lower(bound)))
        options.callbacks.on_improvement(options.elapsed(), inc, lower(bound))

    run = session.run(on_incumbent, on_bound, stop=options.stop)
    info["highs"] = {
        "status": run.reason,
        "seconds": round(run.seconds, 4),
        "nodes": run.nodes,
        "objective": run.objective,
        "dual_bound": run.dual_bound,
    }

    accepted = run.start_accepted
    if start_plan is not None and accepted is None and best is not None:
        # Presolve may swallow the log line; the first incumbent tells instead.
        accepted = bool(first_incumbent) and abs(first_incumbent[0] - best[1]) <= (
            MODEL_TOLERANCE * max(1.0, abs(best[1]))
        )
    if start_plan is not None:
        info["mip_start"]["accepted"] = bool(accepted)
    if options.warm_start:
        # The warm start counts as accepted when HiGHS started from it or from a
        # plan at least as good.
        info["warm_start_accepted"] = bool(
            warm is not None and start_plan is not None and accepted and best is not None
            and best[1] <= warm[1]
        )

    bound = lower(run.dual_bound) if run.dual_bound is not None else None
    if run.status == "infeasible":
        if best is not None:
            raise FormulationError(
                f"milp: HiGHS proved the model infeasible although plan {best[0]} is feasible"
            )
        return Outcome(
            None,
            "infeasible",
            trace=trace,
            info=info,
            message="no plan satisfies the memory and link constraints "
            "(HiGHS proved the MILP infeasible)",
        )
    if run.values is not None:
        values, model_objective = run.values, run.objective
        polished = session.polish(run.values)
        if polished is not None:
            model_objective, values = polished
        info["highs"]["polished_objective"] = None if polished is None else polished[0]
        session.load(values)
        plan = read_plan(model)
        status: Status = "optimal" if run.status == "optimal" else "feasible"
        return Outcome(
            plan,
            status,
            lower_bound=bound,
            model_objective=model_objective,
            model_tolerance=MODEL_TOLERANCE,
            trace=trace,
            info=info,
            message=None if status == "optimal" else f"HiGHS stopped: {run.reason}",
        )
    if best is not None:
        # HiGHS kept no incumbent (start rejected); the known plan is still valid.
        return Outcome(
            best[0],
            "feasible",
            lower_bound=bound,
            trace=trace,
            info=info,
            message=f"HiGHS found no solution ({run.reason}); returning the start plan",
        )
    return Outcome(
        None,
        "no_solution",
        lower_bound=bound,
        trace=trace,
        info=info,
        message=f"HiGHS found no plan before stopping ({run.reason})",
    )


SPEC = SolverSpec("milp", solve, "exact", "MILP in Pyomo solved by HiGHS", warm_start=True,
                  params=MilpParams)
