"""``hybrid-cpsat``: the restricted hybrid space as a CP-SAT model, one model per cell (u, Q).

The same variables and rows as :mod:`formulations.hybrid.milp` (docs/hybrid-exact.md),
in integers: times at ``ts`` units per ms, watts at ``iw`` units per W, and the
objective at ``k`` units per evaluator unit. Every time is an exact function of
the discrete choices (equalities, max and product constraints, no slack), so
the model objective of any solution is its rounded price; :class:`Scale` bounds
the relative rounding error, which is the tolerance against the evaluator and
shrinks CP-SAT's bound into a valid one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ortools.sat.python import cp_model

from formulations.hybrid.classes import Choice, Coef, Config, Pool, StageChoice
from formulations.hybrid.common import RestrictedParams, USolve, run_restricted
from geoplan.cost.weights import ObjectiveWeights
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.solving.core import SolveOptions
from geoplan.solving.params import param
from geoplan.solving.registry import SolverSpec
from geoplan.solving.result import Outcome
from geoplan.solving.stop import call_stoppable

__all__ = ["SPEC", "HybridCpsatParams", "Scale", "solve"]

_LIMIT = 2**61  # largest integer any variable's domain may reach
_EPS = 1e-12


@dataclass(frozen=True)
class HybridCpsatParams(RestrictedParams):
    """Parameters of ``hybrid-cpsat`` (``--param KEY=VALUE``)."""

    LABEL: ClassVar[str] = "hybrid-cpsat"

    conflict_limit: int | None = param(None, "CP-SAT conflict limit per cell (tests: a status "
                                       "independent of the clock)", at_least=0)
    log: bool = param(False, "CP-SAT search log on stdout")
    sat: Mapping[str, Any] = param(None, "any CP-SAT SatParameters field (value read as JSON)",
                                   prefix="sat.")


@dataclass(frozen=True)
class Scale:
    """Integer scales and the relative rounding error they leave."""

    ts: float  # time units per ms
    iw: float  # idle-power units per W
    k: float  # objective units per evaluator unit
    a: int  # objective = a T + b W + sum c n (integers)
    b: int
    err_time: float
    err_obj: float

    @property
    def tolerance(self) -> float:
        return (1 + self.err_time) * (1 + self.err_obj) - 1 + _EPS


def _rel(values: Sequence[float], scale: float) -> float:
    err = 0.0
    for v in values:
        if v > 0:
            r = round(v * scale)
            if r == 0:
                return 1.0
            err = max(err, abs(r - v * scale) / (v * scale))
    return err


def _scale(times: Sequence[float], idles: Sequence[float], dyns: Sequence[float],
           t_ub: float, idle_ub: float, w: ObjectiveWeights, m: float) -> Scale:
    """The finest power-of-ten scales whose integers stay below :data:`_LIMIT`."""
    energy = w.b > 0
    iw = next((10.0**j for j in range(0, 7) if _rel(idles, 10.0**j) <= 1e-12), 1e6) \
        if energy else 1.0
    best: Scale | None = None
    for j in range(0, 13):
        ts = 10.0**j
        t_int = t_ub * ts + 1
        if not energy:
            if t_int > _LIMIT:
                break
            best = Scale(ts, 1.0, ts, 1, 0, _rel(times, ts), 0.0)
            if best.err_time <= 1e-10:
                break
            continue
        # objective units: b = f per (ms * idle unit / 1000), a, c rounded at that scale.
        w_int = t_int * idle_ub * iw
        for f in (1, 10, 100, 1000, 10_000):
            k = f * 1000.0 * ts * iw / w.b
            a_f = w.a * k / ts
            c_f = [w.b * k * m * d / 1e3 for d in dyns]
            dom = (a_f + 1) * t_int + f * w_int + sum(c_f) * 1e3
            if dom > _LIMIT:
                break
            err_o = max(_rel([a_f], 1.0) if a_f > 0 else 0.0, _rel(c_f, 1.0))
            cand = Scale(ts, iw, k, round(a_f), f, _rel(times, ts), err_o)
            if best is None or cand.tolerance < best.tolerance:
                best = cand
    if best is None:
        raise InputError("instance", "times", "hybrid-cpsat: no integer scaling fits int64")
    return best


def solve_cell(pool: Pool, u: int, q_count: int, cutoff: float | None, seconds: float,
               start: Choice | None, options: SolveOptions, params: HybridCpsatParams) -> USolve:
    """Solve the cell (u, q_count) with CP-SAT."""
    inst = pool.instance
    L = inst.layers
    cell = pool.cell(u, q_count)
    none = USolve(u, q_count, "infeasible", None, None, math.inf, 0.0,
                  {"reason": "the layers do not fit"})
    if cell is None:
        return none
    configs = cell.configs
    coefs: dict[Config, Coef] = cell.coefs
    caps = {(q, k): cell.cap(c, q) for q in range(1, q_count + 1) for k, c in enumerate(configs)}
    allowed = [(q, k) for (q, k), n in caps.items() if n >= 1]
    by_slot = {q: [k for (qq, k) in allowed if qq == q] for q in range(1, q_count + 1)}
    if any(not ks for ks in by_slot.values()) or \
            sum(max(caps[q, k] for k in by_slot[q]) for q in by_slot) < L:
        return none
    blocks, fwd, bwd, linked = cell.blocks, cell.fwd, cell.bwd, cell.linked
    link_set = set(linked)
    w = ObjectiveWeights.from_instance(inst)
    m = inst.training.batch_size // u
    o = pool.hc.overhead_ms

    def a_of(q: int, k: int) -> tuple[float, float]:
        c = coefs[configs[k]]
        if configs[k].d == 1:
            return 0.0, 0.0
        return (c.a0_last, c.a1_last) if q == 1 else (c.a0, c.a1)

    times = [coefs[c].comp1 for c in configs] + [o] + [fwd[p] for p in linked] \
        + [bwd[p] for p in linked] + [v for (q, k) in allowed for v in a_of(q, k)]
    tau_ub = max(max(coefs[configs[k]].comp1 * caps[q, k] for k in by_slot[q])
                 for q in by_slot) + o + 2 * max((fwd[p] + bwd[p] for p in linked), default=0.0)
    a_ub = max((a0 + a1 * caps[q, k] for (q, k) in allowed for a0, a1 in [a_of(q, k)]),
               default=0.0)
    t_ub = (q_count + m - 1) * tau_ub + a_ub
    idle_ub = q_count * max(coefs[c].idle for c in configs)
    sc = _scale(times, [coefs[c].idle for c in configs], [coefs[c].dyn1 for c in configs],
                t_ub * (1 + 1e-6) + 1, idle_ub, w, m)

    def ti(v: float) -> int:
        return round(v * sc.ts)

    md = cp_model.CpModel()
    x = {qk: md.new_bool_var(f"x{qk}") for qk in allowed}
    n = {qk: md.new_int_var(0, caps[qk], f"n{qk}") for qk in allowed}
    md.add(sum(n.values()) == L)
    for q, ks in by_slot.items():
        md.add_exactly_one(x[q, k] for k in ks)
        for k in ks:
            md.add(n[q, k] >= x[q, k])
            md.add(n[q, k] <= caps[q, k] * x[q, k])
    for cl in pool.classes:
        mine = [(q, k) for (q, k) in allowed if configs[k].cls == cl.index]
        if mine:
            md.add(sum(configs[k].nodes * x[q, k] for (q, k) in mine) <= cl.n_nodes)

    def X(q: int, blk: tuple[int, int]) -> Any:
        return sum(x[q, k] for k in by_slot[q] if configs[k].block == blk)

    p = {(q, a, b): md.new_bool_var(f"p{q}{a}{b}") for q in range(1, q_count) for (a, b) in linked}
    for q in range(1, q_count):
        for a in blocks:
            md.add(sum(p[q, a, b] for b in blocks if (a, b) in link_set) == X(q + 1, a))
        for b in blocks:
            md.add(sum(p[q, a, b] for a in blocks if (a, b) in link_set) == X(q, b))
    cross = [(a, b) for (a, b) in linked if cell.site[a[0]] != cell.site[b[0]]]
    if cell.crossings:  # valid: see Pool.cell
        md.add(sum(p[q, a, b] for q in range(1, q_count) for (a, b) in cross)
               >= cell.crossings)
    tau_hi = ti(tau_ub) + 4 * q_count + 4
    taus, syncs = [], []
    for q in by_slot:
        expr = sum(ti(coefs[configs[k]].comp1) * n[q, k] for k in by_slot[q]) + ti(o)
        if q > 1:
            expr += sum(ti(fwd[a, b]) * p[q - 1, a, b] for (a, b) in linked)
        if q < q_count:
            expr += sum(ti(bwd[a, b]) * p[q, a, b] for (a, b) in linked)
        tau = md.new_int_var(0, tau_hi, f"tau{q}")
        md.add(tau == expr)
        taus.append(tau)
        s = md.new_int_var(0, ti(a_ub) + 2 * L + 2, f"a{q}")
        md.add(s == sum(ti(a_of(q, k)[0]) * x[q, k] + ti(a_of(q, k)[1]) * n[q, k]
                        for k in by_slot[q]))
        syncs.append(s)
    # The cell's quick bounds (Pool.cell_bounds), lowered off the rounding.
    _, tmax_lb, sum_lb = pool.cell_bounds(u, q_count)
    shrink = 1 - 2 * sc.tolerance - 1e-9
    tmax = md.new_int_var(min(tau_hi, math.floor(tmax_lb * sc.ts * shrink)), tau_hi, "tmax")
    md.add(sum(taus) >= math.floor(sum_lb * sc.ts * shrink))
    md.add_max_equality(tmax, taus)
    amax = md.new_int_var(0, ti(a_ub) + 2 * L + 2, "amax")
    md.add_max_equality(amax, syncs)
    t_hi = (q_count + m) * tau_hi + ti(a_ub) + 2 * L + 2
    t = md.new_int_var(0, t_hi, "T")
    md.add(t == sum(taus) + (m - 1) * tmax + amax)
    obj: Any = sc.a * t
    if sc.b:
        idle_int = {c: round(coefs[c].idle * sc.iw) for c in configs}
        i_var = md.new_int_var(0, sum(max(idle_int.values()) for _ in by_slot), "I")
        md.add(i_var == sum(idle_int[configs[k]] * x[q, k] for (q, k) in allowed))
        wv = md.new_int_var(0, t_hi * (sum(max(idle_int.values()) for _ in by_slot)), "W")
        md.add_multiplication_equality(wv, [t, i_var])
        obj += sc.b * wv + sum(round(w.b * sc.k * m * coefs[configs[k]].dyn1 / 1e3) * n[q, k]
                               for (q, k) in allowed)
    if cutoff is not None:
        md.add(obj <= math.ceil(cutoff * sc.k * (1 + sc.tolerance)) + 1)
    md.minimize(obj)
    info: dict[str, Any] = {"configs": len(configs), "scale": {
        "time_units_per_ms": sc.ts, "objective_units": sc.k, "tolerance": sc.tolerance}}
    if start is not None and len(start.stages) == q_count:
        slot = {q_count - i: st for i, st in enumerate(start.stages)}
        for (q, k), var in x.items():
            on = slot[q].config == configs[k]
            md.add_hint(var, on)
            md.add_hint(n[q, k], slot[q].layers if on else 0)
        info["hint"] = True

    solver = cp_model.CpSolver()
    sp = solver.parameters
    sp.max_time_in_seconds = max(min(seconds, options.remaining()), 1e-3)
    sp.num_workers = options.threads
    sp.random_seed = int(options.seed) % (2**31)
    sp.log_search_progress = params.log
    sp.catch_sigint_signal = False
    if params.conflict_limit is not None:
        sp.max_number_of_conflicts = params.conflict_limit
    for key, value in params.sat.items():
        try:
            setattr(sp, key, value)
        except (AttributeError, TypeError, ValueError) as exc:
            raise InputError(f"params.sat.{key}", value, f"not a CP-SAT parameter: {exc}") \
                from None
    status = call_stoppable(lambda: solver.solve(md), options.stop, solver.stop_search)
    info["cpsat"] = solver.status_name(status)
    raw = solver.best_objective_bound
    bound = raw / sc.k / (1 + sc.tolerance) / (1 + 1e-15) if math.isfinite(raw) else 0.0
    if status == cp_model.INFEASIBLE:
        if cutoff is not None:
            return USolve(u, q_count, "cutoff", None, None, cutoff, 0.0, info)
        return USolve(u, q_count, "infeasible", None, None, math.inf, 0.0, info)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return USolve(u, q_count, "stopped", None, None, max(bound, 0.0), 0.0, info)
    stages = []
    for q in range(q_count, 0, -1):
        k = next(k for k in by_slot[q] if solver.value(x[q, k]))
        stages.append(StageChoice(configs[k], int(solver.value(n[q, k]))))
    choice = Choice(u, pool.zero, tuple(stages))
    value = solver.objective_value / sc.k
    proven = status == cp_model.OPTIMAL
    if proven:
        bound = value / (1 + sc.tolerance)
    if cutoff is not None:
        bound = min(bound, value)
    info["objective_int"] = int(solver.objective_value)
    return USolve(u, q_count, "optimal" if proven else "stopped", choice, value, bound, 0.0,
                  info)


def solve(instance: Instance, options: SolveOptions) -> Outcome:
    """Registered solver ``hybrid-cpsat`` (docs/hybrid-exact.md)."""
    params = HybridCpsatParams.parse(options.params)

    def one(pool: Pool, u: int, q: int, cutoff: float | None, seconds: float,
            start: Choice | None, opts: SolveOptions) -> USolve:
        return solve_cell(pool, u, q, cutoff, seconds, start, opts, params)

    return run_restricted(instance, options, one, "hybrid-cpsat",
                          lambda r: float(r.info["scale"]["tolerance"]), params.pipeline_share)


SPEC = SolverSpec("hybrid-cpsat", solve, "exact",
                  "CP-SAT model of a restricted hybrid space on class-structured pools (one "
                  "class per stage, equal shares, whole nodes); feasible status, the bound in "
                  "info['restricted']", warm_start=True, params=HybridCpsatParams,
                  space="hybrid")
