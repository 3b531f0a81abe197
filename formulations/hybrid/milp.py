"""``hybrid-milp``: the restricted hybrid space as a MILP (Pyomo + HiGHS), one model per u.

Slots run backwards: slot 1 is the last stage, slot q+1 precedes slot q, and the
used slots are a prefix (y_1 = 1 >= y_2 >= ...), so the stage count is
Q = sum y and "last" is fixed to slot 1. docs/hybrid-exact.md writes the model out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pyomo.environ as pyo

from formulations.highs_tools import HighsSession
from formulations.hybrid.classes import Choice, Config, Pool, StageChoice
from formulations.hybrid.common import RestrictedParams, USolve, run_restricted
from formulations.milp.tolerances import HIGHS_TOLERANCES, MODEL_TOLERANCE, below_tolerance
from geoplan.cost.weights import ObjectiveWeights
from geoplan.errors import FormulationError
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome

__all__ = ["SPEC", "HybridMilpParams", "UModel", "build", "solve"]


@dataclass(frozen=True)
class HybridMilpParams(RestrictedParams):
    """Parameters of ``hybrid-milp`` (``--param KEY=VALUE``)."""

    LABEL: ClassVar[str] = "hybrid-milp"

    node_limit: int | None = param(None, "HiGHS branch-and-bound node limit per micro-batch "
                                   "size (tests: a status independent of the clock)", at_least=0)
    highs_log: bool = param(False, "HiGHS log on the console")
    highs: Mapping[str, Any] = param(None, "any HiGHS option, passed unchanged (value read "
                                     "as JSON)", prefix="highs.")


@dataclass
class UModel:
    """The Pyomo model of one u and the keys needed to read it back."""

    model: pyo.ConcreteModel
    configs: list[Config]
    slots: int
    u: int


def _t_upper(pool: Pool, u: int, q_count: int, configs: list[Config],
             caps: dict[tuple[int, int], int], coefs: dict[Config, Any], sends: float) -> float:
    """T_iter over the model's whole domain is below this (the energy rows' big-M)."""
    m = pool.instance.training.batch_size / u
    o = pool.hc.overhead_ms
    taus = [max((coefs[c].comp1 * caps[q, k] for k, c in enumerate(configs) if caps[q, k] > 0),
                default=0.0) + o + 2 * sends for q in range(1, q_count + 1)]
    sync = max((max(coefs[c].a0_last + coefs[c].a1_last * caps[q, k],
                    coefs[c].a0 + coefs[c].a1 * caps[q, k])
                for q in range(1, q_count + 1) for k, c in enumerate(configs)), default=0.0)
    return (sum(taus) + (m - 1) * max(taus) + sync) * (1 + 1e-6) + 1.0


class OutOfTime(Exception):
    """Building the model would pass the deadline (Pyomo builds cannot be interrupted)."""


def build(pool: Pool, u: int, q_count: int, cutoff: float | None = None,
          deadline: float | None = None) -> UModel | None:
    """The model of the plans with ``q_count`` stages at micro-batch size u (None: none fits).

    ``cutoff``: only plans whose objective is at most this matter. Then objective >=
    (a + b Q idle_min / 1000) T bounds T, hence tmax (given the cell's bound on sum tau),
    hence every stage's layers: comp1 n + o <= tau <= tmax (the pipeline MILP's nub)."""
    inst = pool.instance
    L = inst.layers
    cell = pool.cell(u, q_count)
    if cell is None:
        return None
    configs = cell.configs
    coefs = cell.coefs
    caps = {(q, k): cell.cap(c, q) for q in range(1, q_count + 1) for k, c in enumerate(configs)}
    _, tmax_lb, sum_lb = pool.cell_bounds(u, q_count)
    w = ObjectiveWeights.from_instance(inst)
    m_count = inst.training.batch_size / u
    o = pool.hc.overhead_ms
    t_cut = math.inf
    if cutoff is not None:
        slope = w.a + w.b * q_count * min(coefs[c].idle for c in configs) / 1e3
        if slope > 0:
            t_cut = cutoff / slope * (1 + 1e-9)
            tmax_cut = (t_cut - sum_lb) / (m_count - 1) if m_count > 1 else t_cut
            for (q, k), cap in caps.items():
                room = (tmax_cut - o) / coefs[configs[k]].comp1 * (1 + 1e-9)
                caps[q, k] = max(0, min(cap, math.floor(room) if room < cap else cap))
    allowed = [(q, k) for (q, k), n in caps.items() if n >= 1]
    by_slot = {q: [k for (qq, k) in allowed if qq == q] for q in range(1, q_count + 1)}
    if any(not ks for ks in by_slot.values()):
        return None
    if sum(max(caps[q, k] for k in by_slot[q]) for q in by_slot) < L:
        return None
    blocks, fwd, bwd, linked = cell.blocks, cell.fwd, cell.bwd, cell.linked
    link_set = set(linked)
    sends = max((fwd[p] + bwd[p] for p in linked), default=0.0)

    md = pyo.ConcreteModel()
    Q = range(1, q_count + 1)
    md.x = pyo.Var(allowed, domain=pyo.Binary)
    md.n = pyo.Var(allowed, domain=pyo.NonNegativeIntegers,
                   bounds=lambda _m, q, k: (0, caps[q, k]))
    bnd = [(q, a, b) for q in range(1, q_count) for (a, b) in linked]
    md.p = pyo.Var(bnd, bounds=(0, 1))
    # The cell's quick bounds (Pool.cell_bounds), lowered off HiGHS's tolerances.
    md.tmax = pyo.Var(bounds=(tmax_lb * (1 - 1e-9), None))
    md.amax = pyo.Var(bounds=(0, None))
    md.c = pyo.ConstraintList()
    add = md.c.add

    def X(q: int, blk: tuple[int, int]) -> Any:
        return sum(md.x[q, k] for k in by_slot[q] if configs[k].block == blk)

    add(sum(md.n[q, k] for (q, k) in allowed) == L)
    for q in Q:
        add(sum(md.x[q, k] for k in by_slot[q]) == 1)
        for k in by_slot[q]:
            add(md.n[q, k] >= md.x[q, k])
            add(md.n[q, k] <= caps[q, k] * md.x[q, k])
    for cl in pool.classes:
        mine = [(q, k) for (q, k) in allowed if configs[k].cls == cl.index]
        if mine and q_count * max(configs[k].nodes for _, k in mine) > cl.n_nodes:
            add(sum(configs[k].nodes * md.x[q, k] for (q, k) in mine) <= cl.n_nodes)
    # Boundary q: slot q+1 (earlier, block a) -> slot q (later, block b); p is the product
    # of the two block choices (a transportation polytope: integral at integral x).
    for q in range(1, q_count):
        if deadline is not None and time.perf_counter() > deadline:
            raise OutOfTime
        for a in blocks:
            add(sum(md.p[q, a, b] for b in blocks if (a, b) in link_set) == X(q + 1, a))
        for b in blocks:
            add(sum(md.p[q, a, b] for a in blocks if (a, b) in link_set) == X(q, b))
    cross = [(a, b) for (a, b) in linked if cell.site[a[0]] != cell.site[b[0]]]
    if cell.crossings:  # valid: see Pool.cell
        add(sum(md.p[q, a, b] for q in range(1, q_count) for (a, b) in cross)
            >= cell.crossings)
    taus = []
    for q in Q:
        tau = sum(coefs[configs[k]].comp1 * md.n[q, k] for k in by_slot[q]) + o
        if q > 1:  # slot q sends forward to slot q-1
            tau += sum(fwd[a, b] * md.p[q - 1, a, b] for (a, b) in linked)
        if q < q_count:  # and back to slot q+1
            tau += sum(bwd[a, b] * md.p[q, a, b] for (a, b) in linked)
        taus.append(tau)
        add(md.tmax >= tau)
        sync = sum((coefs[configs[k]].a0_last if q == 1 else coefs[configs[k]].a0) * md.x[q, k]
                   + (coefs[configs[k]].a1_last if q == 1 else coefs[configs[k]].a1)
                   * md.n[q, k] for k in by_slot[q] if configs[k].d > 1)
        if not isinstance(sync, int):
            add(md.amax >= sync)
    t_ub = min(_t_upper(pool, u, q_count, configs, caps, coefs, sends), t_cut)
    md.t = pyo.Var(bounds=(0, t_ub))
    add(md.t == sum(taus) + (m_count - 1) * md.tmax + md.amax)
    add(sum(taus) >= sum_lb * (1 - 1e-9))
    energy: Any = 0
    if w.b > 0:
        # W_q >= T * (idle of slot q): for each idle value v,
        # W_q >= v (T - t_ub (1 - [idle >= v])).
        md.wq = pyo.Var(Q, bounds=(0, None))
        for q in Q:
            vals = sorted({coefs[configs[k]].idle for k in by_slot[q]})
            for v in vals:
                ge = sum(md.x[q, k] for k in by_slot[q] if coefs[configs[k]].idle >= v)
                add(md.wq[q] >= v * (md.t - t_ub * (1 - ge)))
        energy = (sum(md.wq[q] for q in Q) / 1e3
                  + m_count / 1e3 * sum(coefs[configs[k]].dyn1 * md.n[q, k]
                                        for (q, k) in allowed))
    md.obj = pyo.Objective(expr=w.a * md.t + w.b * energy, sense=pyo.minimize)
    return UModel(md, configs, q_count, u)


def read_choice(um: UModel, zero: int) -> Choice:
    """The choice in the model's current values (stages first to last)."""
    md = um.model
    stages = []
    for q in range(um.slots, 0, -1):
        ks = [k for (qq, k) in md.x if qq == q and pyo.value(md.x[q, k]) > 0.5]
        if len(ks) != 1:
            raise FormulationError(f"hybrid-milp: slot {q} has {len(ks)} configurations")
        k = ks[0]
        stages.append(StageChoice(um.configs[k], round(pyo.value(md.n[q, k]))))
    return Choice(um.u, zero, tuple(stages))


def _start(session: HighsSession, um: UModel, choice: Choice) -> bool:
    """Pass the start's integer columns (HiGHS completes the continuous ones by an LP).

    False when a stage's configuration was dropped as dominated (the start still
    gives the cutoff)."""
    import highspy
    import numpy as np

    md = um.model
    slot = {len(choice.stages) - i: st for i, st in enumerate(choice.stages)}
    if any(st.config not in um.configs or (q, um.configs.index(st.config)) not in md.x
           for q, st in slot.items()):
        return False
    cols: list[int] = []
    vals: list[float] = []
    for (q, k) in md.x:
        st = slot[q]
        on = st.config == um.configs[k]
        cols += [session.column(md.x[q, k]), session.column(md.n[q, k])]
        vals += [1.0 if on else 0.0, float(st.layers) if on else 0.0]
    idx = np.array(cols, dtype=np.int32)
    val = np.array(vals, dtype=np.float64)
    return bool(session.highs.setSolution(len(idx), idx, val) == highspy.HighsStatus.kOk)


def solve_cell(pool: Pool, u: int, q: int, cutoff: float | None, seconds: float,
               start: Choice | None, options: SolveOptions, params: HybridMilpParams) -> USolve:
    """Solve the cell (u, q) with HiGHS; ``cutoff``: only plans below it are of interest."""
    t0 = time.perf_counter()
    try:
        um = build(pool, u, q, cutoff, deadline=t0 + seconds)
    except OutOfTime:
        return USolve(u, q, "stopped", None, None, 0.0, 0.0,
                      {"reason": "the model did not build within the cell's time"})
    # The translation to HiGHS cannot be interrupted either: about as long as the build.
    if um is not None and time.perf_counter() - t0 > seconds / 2:
        return USolve(u, q, "stopped", None, None, 0.0, 0.0,
                      {"reason": "no time left to translate the model to HiGHS"})
    if um is None:
        if cutoff is not None:  # nothing of the cell beats the cutoff (if it has a plan)
            return USolve(u, q, "cutoff", None, None, cutoff, 0.0,
                          {"reason": "no layers fit below the cutoff"})
        return USolve(u, q, "infeasible", None, None, math.inf, 0.0,
                      {"reason": "the layers do not fit"})
    session = HighsSession(um.model)
    extra: dict[str, Any] = dict(HIGHS_TOLERANCES)
    if params.node_limit is not None:
        extra["mip_max_nodes"] = params.node_limit
    if cutoff is not None:
        extra["objective_bound"] = cutoff * (1 + 1e-9)
    extra.update(params.highs)
    if params.highs_log:
        extra["log_to_console"] = True
    session.set_options(time_limit=min(seconds, options.remaining()), rel_gap=1e-9,
                        abs_gap=1e-9, threads=options.threads, seed=options.seed, extra=extra)
    info: dict[str, Any] = {"cols": session.num_cols, "rows": int(session.highs.getNumRow()),
                            "configs": len(um.configs)}
    if start is not None:
        info["mip_start"] = _start(session, um, start)
    run = session.run(stop=options.stop, deadline=options.deadline)
    info.update(highs=run.reason, nodes=run.nodes)
    dual = run.dual_bound
    if run.values is None:
        if run.status in ("infeasible", "stopped") and cutoff is not None and (
                run.status == "infeasible" or run.reason == "objective_bound"):
            return USolve(u, q, "cutoff", None, None, cutoff, 0.0, info)
        if run.status == "infeasible":
            return USolve(u, q, "infeasible", None, None, math.inf, 0.0, info)
        b = below_tolerance(dual) if dual is not None else 0.0
        return USolve(u, q, "stopped", None, None, b, 0.0, info)
    polished = session.polish(run.values)
    values, obj = (run.values, run.objective) if polished is None else (polished[1], polished[0])
    session.load(values)
    choice = read_choice(um, pool.zero)
    table = pool.price(choice)[2]
    assert obj is not None
    if abs(obj - table) > MODEL_TOLERANCE * max(1.0, abs(table)):
        raise FormulationError(f"hybrid-milp: model objective {obj!r} differs from the "
                               f"tables' price {table!r} of {choice}")
    proven = run.status == "optimal"
    bound = below_tolerance(obj if proven else (dual if dual is not None else 0.0))
    if cutoff is not None:
        bound = min(bound, obj)
    return USolve(u, q, "optimal" if proven else "stopped", choice, obj, bound, 0.0, info)


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``hybrid-milp`` (docs/hybrid-exact.md)."""
    params = HybridMilpParams.parse(options.params)

    def one(pool: Pool, u: int, q: int, cutoff: float | None, seconds: float,
            start: Choice | None, opts: SolveOptions) -> USolve:
        return solve_cell(pool, u, q, cutoff, seconds, start, opts, params)

    return run_restricted(instance, options, one, "hybrid-milp", lambda _r: MODEL_TOLERANCE,
                          params.pipeline_share)


SPEC = SolverSpec("hybrid-milp", solve, "exact",
                  "MILP (Pyomo + HiGHS) of a restricted hybrid space on class-structured pools "
                  "(one class per stage, equal shares, whole nodes); feasible status, the bound "
                  "in info['restricted']", warm_start=True, params=HybridMilpParams,
                  space="hybrid")
