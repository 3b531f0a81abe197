"""CP-SAT model of the planning problem (OR-Tools), registered as ``cpsat``.

The pipeline is a circuit through a depot over optional GPU nodes (a skipped GPU
takes its self-loop), layer counts are integers, the bottleneck is a max
constraint and the memory caps are element constraints on the stage count Q.
Times are integers at a scale of ``S`` units per millisecond; the rounding of
every coefficient is bounded relatively, so the model objective is within a
stated relative tolerance of the evaluator's price and the reported bound is
CP-SAT's bound shrunk by that tolerance. ``docs/cpsat.md`` writes the model out.

Parameters (:class:`CpsatParams`, ``--param KEY=VALUE``): ``precision`` (target
relative rounding error per coefficient; default: the finest of 1e-9, 1e-8, ... whose
integers fit, see :func:`choose_scaling`), ``symmetry`` (dominance and identical-GPU symmetry
breaking, default true), ``bounds`` (per-Q bottleneck and sum bounds and other
redundant constraints, default true), ``baseline_cutoff`` (the Metis-default
plan caps the objective, default true), ``log`` (CP-SAT search log on stdout,
default false) and ``sat.<field>`` (any CP-SAT ``SatParameters`` field).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from ortools.sat.python import cp_model

from geoplan.cost import evaluate
from geoplan.cost.bounds import Relaxation as _Relaxation
from geoplan.cost.bounds import clusters, layer_cap_table, t_iter_bounds
from geoplan.cost.dominance import Dominance, dominance_of
from geoplan.cost.weights import ObjectiveWeights
from geoplan.errors import InputError, SolverError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.validation import validate
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import SolverParams, param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome, TraceRow
from geoplan.solving.stop import call_stoppable

__all__ = [
    "SPEC",
    "UNSOUND_SUBSOLVERS",
    "CpsatModel",
    "CpsatParams",
    "Scaling",
    "build_model",
    "choose_scaling",
    "solve",
    "sum_bounds",
    "tmax_bounds",
]

#: Largest objective value reachable under the cap. Above 2**53 CP-SAT's float objective and
#: bound are rounded (relative 1e-16, far inside the tolerance); the plan's objective is read
#: back exactly as an integer.
OBJECTIVE_LIMIT = 2**60
#: Largest objective over the variables' domains (CP-SAT refuses possible int64 overflow).
DOMAIN_LIMIT = 2**61
#: Largest number of clusters (sites) whose subsets get their own bottleneck bounds.
MAX_CLUSTERS = 6
#: CP-SAT workers not trusted with this model (see :func:`solve`).
UNSOUND_SUBSOLVERS = ("routing_path_lns", "routing_random_lns", "routing_full_path_lns")
#: Precision targets tried in turn when none is given.
PRECISIONS = (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3)
#: Candidate objective scale factors, ascending: powers of two and of ten.
_FACTORS = tuple(sorted({2.0**m for m in range(-40, 64)} | {10.0**m for m in range(-12, 19)}))
#: Float round-off allowance added to the analytic error bound.
_EPS = 1e-12


# --------------------------------------------------------------------------- scaling


@dataclass(frozen=True)
class Scaling:
    """Integer scaling of the model and the relative rounding error it bounds.

    Times are integers in units of ``1/time_scale`` ms; the model objective is
    an integer in units of ``1/obj_scale`` evaluator objective units. Every time
    coefficient (per-layer compute time, link time) is off by at most
    ``time_rel_error`` relatively, every objective weight by ``obj_rel_error``;
    since T_iter and the objective are sums and maxima of positive terms, the
    model objective of any plan is within ``tolerance`` (relative) of its price.
    """

    time_scale: float
    obj_scale: float
    time_rel_error: float
    obj_rel_error: float
    target: float

    @property
    def tolerance(self) -> float:
        """Relative bound on |model objective - evaluator objective| / objective."""
        return (1 + self.time_rel_error) * (1 + self.obj_rel_error) - 1 + _EPS

    def to_dict(self) -> dict[str, float]:
        return {
            "time_units_per_ms": self.time_scale,
            "objective_units": self.obj_scale,
            "time_rel_error": self.time_rel_error,
            "obj_rel_error": self.obj_rel_error,
            "tolerance": self.tolerance,
            "target": self.target,
        }


def _rel_error(values: Sequence[float] | np.ndarray, scale: float) -> float:
    """Largest relative error of rounding ``scale * v`` to an integer (v > 0 only)."""
    v = np.asarray([x for x in values if x > 0], dtype=float) * scale
    if v.size == 0:
        return 0.0
    r = np.rint(v)
    if np.any(r == 0):
        return 1.0
    return float(np.max(np.abs(r - v) / v))


def _first_power(values: Sequence[float], target: float) -> int | None:
    """Smallest k in [-6, 18] with rounding error of 10^k * values <= target."""
    for k in range(-6, 19):
        if _rel_error(values, 10.0**k) <= target:
            return k
    return None


@dataclass(frozen=True)
class _Weights:
    """Objective = a0 T + sum_{i used} a[i] T + sum_i b[i] n_i (evaluator units, T in ms)."""

    a0: float
    a: np.ndarray
    b: np.ndarray


def _weights(instance: Instance) -> _Weights:
    c = instance.coefficients()
    ow = ObjectiveWeights.from_instance(instance)
    a0, we = ow.a, ow.b
    m = float(c.micro_batches)
    # Mirrors geoplan.cost.kernel.iteration_energy:
    # E_iter = T/1000 * sum idle + M * sum dyn * n * comp / 1000.
    a = we * c.idle_w / 1000.0
    b = we * m * c.dyn_w * c.comp_ms / 1000.0
    return _Weights(a0, np.asarray(a, dtype=float), np.asarray(b, dtype=float))


def choose_scaling(
    time_values: Sequence[float],
    weights: _Weights,
    t_ub_ms: float,
    n_ub: Sequence[int],
    precision: float | None = None,
    obj_ub: float | None = None,
) -> Scaling:
    """Scales for times (a power of ten) and objective: the finest precision that fits.

    ``t_ub_ms`` bounds T_iter over the model's domains and ``n_ub`` the layer
    counts; ``obj_ub`` (evaluator units) bounds the objective values the search
    can reach (a known plan's price). Values must stay below
    :data:`OBJECTIVE_LIMIT` and the objective over the whole domains below
    :data:`DOMAIN_LIMIT` (CP-SAT refuses models that might overflow int64).
    """
    targets = (precision,) if precision is not None else PRECISIONS
    time_only = weights.a0 == 1.0 and not np.any(weights.a) and not np.any(weights.b)
    for r in targets:
        ks = _first_power(time_values, r)
        if ks is None:
            continue
        s = 10.0**ks
        if time_only:
            k_obj, rc = s, 0.0
        else:
            # Integer weights a0 f, a_i f per time unit and b_i S f per layer, f the smallest
            # power of two or ten that meets the target: ten keeps decimal watts exact, two
            # wastes at most a factor 2 of the objective's range, which runs out first.
            vals = [weights.a0, *weights.a]

            def err(f: float, s: float = s, vals: list[float] = vals) -> float:
                return max(_rel_error(vals, f), _rel_error(weights.b, s * f))

            mk = next((f for f in _FACTORS if err(f) <= r), None)
            if mk is None:
                continue
            k_obj, rc = s * mk, err(mk)
        t_int = t_ub_ms * s * (1 + r) + len(n_ub)
        a_sum = round(weights.a0 * k_obj / s) + sum(round(x * k_obj / s) for x in weights.a)
        b_sum = sum(round(x * k_obj) * n for x, n in zip(weights.b, n_ub, strict=True))
        domain_max = max(t_int, a_sum * t_int + b_sum)
        value_max = domain_max if obj_ub is None else obj_ub * k_obj * (1 + 2 * r) + 1
        if value_max <= OBJECTIVE_LIMIT and domain_max <= DOMAIN_LIMIT:
            return Scaling(s, k_obj, _rel_error(time_values, s), rc, r)
    raise SolverError(
        "cpsat: no integer scaling keeps the model below 2**60 at precision "
        f"{targets[-1]:g}; the instance's time coefficients span too many orders of magnitude"
    )


# --------------------------------------------------------------------------- the model


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
        """An equally good or better plan that satisfies the symmetry breaking.

        Replaces a used GPU by an unused one that dominates it, and swaps the
        layer counts of identical GPUs into order, until neither applies (the
        moves that justify the symmetry-breaking constraints; they terminate).
        """
        # Moves R and S of the one rule (identical pairs are dominance pairs too).
        rule = Dominance(len(self.x), (*self.dominance, *self.identical), tuple(self.identical),
                         np.arange(len(self.x)))
        idx, counts = rule.canonical(plan.gpu_indices(self.instance), plan.layer_counts)
        return Plan.from_indices(self.instance, idx, counts, plan.micro_batch_size)


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


def _usable(instance: Instance, plan: Plan, pairs: Sequence[tuple[int, int]]) -> bool:
    """Whether ``plan`` is feasible at the instance's micro-batch size (a valid cap)."""
    if plan.micro_batch_size not in (None, instance.training.micro_batch_size):
        return False
    try:
        if validate(instance, plan):
            return False
        idx = plan.gpu_indices(instance)
    except InputError:
        return False
    links = set(pairs)
    return all((idx[k], idx[k + 1]) in links for k in range(len(idx) - 1))


def _caps(instance: Instance, q_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-Q layer caps (rows 0..Qmax, row 0 unused), clipped to [0, L]:
    :func:`geoplan.cost.bounds.layer_cap_table`."""
    return layer_cap_table(instance.coefficients(), instance.layers, q_max)


def _relaxation(
    instance: Instance, cc: Sequence[int], cm: Mapping[tuple[int, int], int], mid: np.ndarray,
    last: np.ndarray, overhead: int = 0,
) -> _Relaxation:
    """The stage-role relaxation of :mod:`geoplan.cost.bounds` in model integers."""
    return _Relaxation(np.asarray(cc, np.int64), cm, mid, last, instance.layers,
                       clusters(instance), overhead)


def tmax_bounds(
    instance: Instance,
    cc: Sequence[int],
    cm: Mapping[tuple[int, int], int],
    mid: np.ndarray,
    last: np.ndarray,
    ub: int,
    overhead: int = 0,
) -> dict[int, int]:
    """Lower bounds on the bottleneck (model integers) of every feasible stage count Q.

    :meth:`geoplan.cost.bounds.Relaxation.tmax_bounds` on the integer
    coefficients (its docstring proves it); stage counts missing from the
    result cannot hold the layers at all within ``ub``.
    """
    return {q: int(v) for q, v in
            _relaxation(instance, cc, cm, mid, last, overhead).tmax_bounds(ub).items()}


def sum_bounds(
    instance: Instance, cc: Sequence[int], cm: Mapping[tuple[int, int], int], mid: np.ndarray,
    q_dom: Sequence[int], overhead: int = 0,
) -> dict[int, int]:
    """Lower bounds on sum_q tau_q (model integers) per stage count Q:
    :meth:`geoplan.cost.bounds.Relaxation.sum_bounds` on the integer coefficients."""
    return {q: int(v) for q, v in
            _relaxation(instance, cc, cm, mid, mid, overhead).sum_bounds(q_dom).items()}


def _symmetry(
    instance: Instance, energy: bool
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Dominance pairs (i, j): x_j <= x_i; identical pairs (i, j): n_i >= n_j.

    The one rule of :mod:`geoplan.cost.dominance` (proof there), split into its
    non-identical pairs and its identical ones (n_i >= n_j implies x_j <= x_i).
    Tested on the float coefficients: the model's integers are rounded with
    one scale per kind, and rounding is monotone, so the conditions carry over.
    """
    rule = dominance_of(instance.coefficients(), instance.layers, energy)
    ident = list(rule.identical)
    same = set(ident)
    return [p for p in rule.pairs if p not in same], ident


def _add_cluster_bounds(
    md: cp_model.CpModel,
    relax: _Relaxation,
    x: Sequence[cp_model.IntVar],
    y: Mapping[int, cp_model.IntVar],
    tmax: cp_model.IntVar,
    tlb: Mapping[int, int],
    ub: int,
) -> None:
    """Bottleneck bounds per (stage count, set of clusters used).

    Literal u_c says cluster c holds a stage, v_S that the clusters used are
    exactly S (one of them is true), w_QS = y_Q and v_S. A plan using exactly S
    with Q stages has tmax >= tlb(Q, S), the relaxation of :func:`tmax_bounds`
    on S's GPUs with |S| - 1 crossings, or cannot exist. All bounds go into one
    linear constraint ``tmax >= sum tlb(Q) y_Q + sum (tlb(Q, S) - tlb(Q)) w_QS``:
    CP-SAT 9.15's presolve mishandled the same bounds written as copies of
    ``tmax >= b`` under different enforcement literals (it declared a feasible
    model infeasible). A linear encoding of w by its marginals measured no faster.
    """
    nc = relax.n_clusters
    u = [md.new_bool_var(f"cluster{c}") for c in range(nc)]
    for c in range(nc):
        md.add_max_equality(u[c], [x[int(i)] for i in np.flatnonzero(relax.cluster == c)])
    v: dict[tuple[int, ...], cp_model.IntVar] = {}
    for size in range(1, nc + 1):
        for subset in itertools.combinations(range(nc), size):
            vs = md.new_bool_var(f"sites{subset}")
            lits = [u[c] if c in subset else ~u[c] for c in range(nc)]
            md.add_bool_and(lits).only_enforce_if(vs)
            md.add_bool_or([vs, *(~lit for lit in lits)])
            v[subset] = vs
    md.add_exactly_one(v.values())
    terms = []
    for subset, vs in v.items():
        sb = relax.tmax_bounds(ub, clusters=subset, start=tlb)
        for q, yq in y.items():
            if q not in sb:
                md.add_bool_or([~yq, ~vs])
            elif sb[q] > tlb[q]:
                w = md.new_bool_var(f"w{q}_{subset}")
                md.add_bool_and([yq, vs]).only_enforce_if(w)
                md.add_bool_or([w, ~yq, ~vs])
                terms.append((sb[q] - tlb[q]) * w)
    if terms:
        md.add(tmax >= sum(tlb[q] * yq for q, yq in y.items()) + sum(terms))


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


# --------------------------------------------------------------------------- solving


class _Recorder(cp_model.CpSolverSolutionCallback):
    """Records incumbents (priced by the evaluator) and bounds, with timestamps."""

    def __init__(self, built: CpsatModel, options: SolveOptions) -> None:
        super().__init__()
        self.built = built
        self.options = options
        self.lock = threading.Lock()
        self.trace: list[TraceRow] = []
        self.incumbent: float | None = None
        self.bound: float | None = None
        self.first_objective: int | None = None
        self.first_plan: Plan | None = None
        self.solutions = 0

    def to_bound(self, raw: float) -> float | None:
        """CP-SAT's bound (model integers) as a valid bound on the true objective."""
        if not math.isfinite(raw):
            return None
        sc = self.built.scaling
        # (1 + 1e-15): the float bound may be rounded above 2**53.
        return max(0.0, raw / sc.obj_scale / (1 + sc.tolerance) / (1 + 1e-15))

    def _row(self) -> None:
        row = TraceRow(self.options.elapsed(), self.incumbent, self.bound)
        self.trace.append(row)
        self.options.callbacks.on_improvement(row.seconds, row.incumbent, row.bound)

    def on_solution_callback(self) -> None:
        plan = self.built.decode(self.value)
        price = evaluate(self.built.instance, plan).objective
        with self.lock:
            self.solutions += 1
            if self.first_objective is None:
                self.first_objective = int(self.value(self.built.objective))
                self.first_plan = plan
            b = self.to_bound(self.best_objective_bound)
            if b is not None and (self.bound is None or b > self.bound):
                self.bound = b
            if self.incumbent is None or price < self.incumbent:
                self.incumbent = price
            self._row()

    def on_bound(self, raw: float) -> None:
        b = self.to_bound(raw)
        with self.lock:
            if b is not None and (self.bound is None or b > self.bound):
                self.bound = b
                self._row()


@dataclass(frozen=True)
class CpsatParams(SolverParams):
    """Parameters of ``cpsat`` (``--param KEY=VALUE``)."""

    LABEL: ClassVar[str] = "cpsat"

    precision: float | None = param(
        None, "target relative rounding error per coefficient (none: the finest that fits)",
        above=0.0, below=1.0)
    symmetry: bool = param(True, "dominance and identical-GPU symmetry breaking")
    bounds: bool = param(True, "per-Q bottleneck and sum bounds, other redundant constraints")
    baseline_cutoff: bool = param(True, "the Metis-default plan caps the objective")
    log: bool = param(False, "CP-SAT search log on stdout")
    sat: Mapping[str, Any] = param(None, "any CP-SAT SatParameters field (value read as JSON)",
                                   prefix="sat.")


def _warm_plan(built: CpsatModel, plans: Sequence[Plan]) -> tuple[Plan | None, dict[str, Any]]:
    """The best feasible warm start, made canonical for the symmetry breaking."""
    inst = built.instance
    u = inst.training.micro_batch_size
    best: tuple[float, Plan] | None = None
    for p in plans:
        if p.micro_batch_size not in (None, u):
            continue
        try:
            ev = evaluate(inst, p)
        except InputError:
            continue
        if ev.feasible and (best is None or ev.objective < best[0]):
            best = (ev.objective, p)
    if best is None:
        return None, {"warm_start_reason": "no feasible warm-start plan at this micro-batch size"}
    plan = built.canonical(best[1])
    info: dict[str, Any] = {}
    if plan != best[1]:
        info["warm_start_canonical"] = plan.to_dict()
    if not built.is_model_feasible(plan):  # pragma: no cover - guards a model bug
        return None, {"warm_start_reason": "warm start violates the model"}
    return plan, info


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``cpsat``: build, hint, solve, read the plan back."""
    params = CpsatParams.parse(options.params)
    uppers = list(options.warm_start)
    base: Plan | None = None
    if params.baseline_cutoff:
        from geoplan.cost.baseline import metis_default_plan

        base = metis_default_plan(instance)
        if base is not None:
            uppers.append(base)
    from formulations.milp import BuildAbandoned, build_checker

    try:
        built = build_model(
            instance,
            precision=params.precision,
            symmetry=params.symmetry,
            bounds=params.bounds,
            upper_plans=uppers,
            check=build_checker(options, "cpsat model"),
        )
    except BuildAbandoned as exc:
        return _abandoned(instance, uppers, str(exc), options)
    sc = built.scaling
    info: dict[str, Any] = {
        "scaling": sc.to_dict(),
        "dominance_pairs": len(built.dominance),
        "identical_pairs": len(built.identical),
        "stage_counts": built.q_domain,
        "objective_cutoff": None if built.cutoff is None else built.cutoff / sc.obj_scale,
    }
    hint_obj: int | None = None
    hint_plan: Plan | None = None
    if options.warm_start:
        hint_plan, extra = _warm_plan(built, options.warm_start)
        info.update(extra)
        info["hint_source"] = "warm_start" if hint_plan is not None else None
    elif base is not None:
        # Without a warm start the baseline that caps the objective is also the hint, so
        # that CP-SAT has a plan from the start.
        hint_plan, _ = _warm_plan(built, (base,))
        info["hint_source"] = "metis-default" if hint_plan is not None else None
    if hint_plan is not None:
        hint_obj = built.add_hint(hint_plan)

    solver = cp_model.CpSolver()
    p = solver.parameters
    p.max_time_in_seconds = max(options.remaining(), 1e-3)
    p.random_seed = int(options.seed) % (2**31)
    p.num_workers = options.threads
    p.relative_gap_limit = options.gap
    p.log_search_progress = params.log
    # Interrupts reach CP-SAT through options.stop (stop_search below), SIGTERM too.
    p.catch_sigint_signal = False
    # CP-SAT 9.15's routing LNS workers sometimes end the whole search ("#Done") on this
    # circuit-with-optional-nodes model and report a suboptimal plan as OPTIMAL (seen on
    # metro-8-32: 6 of 40 runs with 2 workers, none with these workers ignored).
    p.ignore_subsolvers.extend(UNSOUND_SUBSOLVERS)
    for key, value in params.sat.items():  # expert pass-through, e.g. sat.linearization_level=2
        try:
            if isinstance(value, list):
                getattr(p, key).extend(value)
            else:
                setattr(p, key, value)
        except (AttributeError, TypeError, ValueError) as exc:
            raise InputError(f"params.sat.{key}", value, f"not a CP-SAT parameter: {exc}") \
                from None
    info["ignored_subsolvers"] = list(p.ignore_subsolvers)
    rec = _Recorder(built, options)
    solver.best_bound_callback = rec.on_bound

    def run() -> Any:
        # In a helper thread, so that a signal handler runs at once and stops the
        # search through CP-SAT's own stop_search (never by killing it).
        return call_stoppable(lambda: solver.solve(built.model, rec), options.stop,
                              solver.stop_search)

    status = run()
    if status == cp_model.INFEASIBLE and hint_plan is not None and options.remaining() > 0:
        # The hinted plan satisfies the model, so INFEASIBLE is a solver fault (CP-SAT 9.15 has
        # known presolve bugs of this kind): solve again without presolve.
        info["presolve_retry"] = True
        p.cp_model_presolve = False
        p.max_time_in_seconds = max(options.remaining(), 1e-3)
        status = run()
    info["cpsat_status"] = solver.status_name(status)
    info["solutions"] = rec.solutions
    info["wall_s_cpsat"] = solver.wall_time
    if options.warm_start:
        accepted = (hint_obj is not None and rec.first_objective is not None
                    and rec.first_objective <= hint_obj)
        info["warm_start_accepted"] = accepted
        if hint_plan is not None and rec.first_plan is not None:
            info["warm_start_first_is_hint"] = rec.first_plan == hint_plan

    if status == cp_model.MODEL_INVALID:
        raise SolverError(f"cpsat: invalid model: {built.model.validate()}")
    if status == cp_model.INFEASIBLE:
        return Outcome(None, "infeasible", trace=rec.trace, info=info,
                       message="no plan meets the memory caps with links in both directions "
                               "between consecutive stages (CP-SAT proved the model infeasible)")
    bound = rec.to_bound(solver.best_objective_bound)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if hint_plan is not None:  # the hinted plan is known feasible: never lose it
            return Outcome(hint_plan, "feasible", lower_bound=bound, trace=rec.trace, info=info,
                           message=f"CP-SAT found no plan within {options.time_limit:.3g} s "
                                   f"(status {solver.status_name(status)}); returning the "
                                   f"hinted plan ({info.get('hint_source')})")
        return Outcome(None, "no_solution", lower_bound=bound, trace=rec.trace, info=info,
                       message=f"CP-SAT found no plan within {options.time_limit:.3g} s "
                               f"(status {solver.status_name(status)})")
    plan = built.decode(solver.value)
    obj_int = int(solver.value(built.objective))
    # OPTIMAL is also reported when the relative-gap target is met: then check the proof
    # (with float slack, as the bound is a double).
    proven = status == cp_model.OPTIMAL and (
        options.gap == 0 or solver.best_objective_bound >= obj_int * (1 - 1e-15) - 0.5)
    info["model_objective_int"] = obj_int
    return Outcome(
        plan=plan,
        status="optimal" if proven else "feasible",
        lower_bound=bound,
        model_objective=obj_int / sc.obj_scale,
        model_tolerance=sc.tolerance,
        trace=rec.trace,
        info=info,
    )


def _abandoned(instance: Instance, plans: Sequence[Plan], reason: str,
               options: SolveOptions) -> Outcome:
    """The model could not be built in the budget: the best known plan, as at a time-out."""
    best: tuple[float, Plan] | None = None
    for p in plans:
        try:
            ev = evaluate(instance, p)
        except InputError:
            continue
        if ev.feasible and (best is None or ev.objective < best[0]):
            best = (ev.objective, p)
    info: dict[str, Any] = {"model": f"abandoned: {reason}"}
    if options.warm_start:
        info["warm_start_accepted"] = False
    if best is None:
        return Outcome(None, "no_solution", info=info,
                       message=f"cpsat: model abandoned ({reason}) before any plan was found")
    row = TraceRow(options.elapsed(), best[0], None)
    options.callbacks.on_improvement(row.seconds, row.incumbent, None)
    return Outcome(best[1], "feasible", trace=[row], info=info,
                   message=f"cpsat: model abandoned ({reason}); the best known plan "
                   "(warm start or Metis default)")


SPEC = SolverSpec("cpsat", solve, "exact", "CP-SAT model in OR-Tools (integer-scaled times)",
                  warm_start=True, params=CpsatParams)
