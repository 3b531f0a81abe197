"""Every bound of geoplan.cost.bounds holds for every plan (the independent reference prices them).

Small random instances (N <= 4, L <= 7) are enumerated completely by the
reference model of ``tests/reference_model.py``; half of them carry a stage
overhead o > 0 (``training.stage_overhead_ms``). A lower bound must stay below
the value of every feasible plan, an upper bound above it. The solvers that use
the bounds must still reach the reference optimum with o > 0.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
import reference_model as ref

from formulations import bnb, milp
from geoplan.cost import bounds
from geoplan.cost.split import Splitter
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model.instance import Instance
from geoplan.solving.core import solve

CASES = [(seed, o) for seed in range(20) for o in (0.0, 2.5)] + [(s, 40.0) for s in range(20, 26)]


def _case(seed: int, o: float) -> tuple[dict, Instance]:
    rng = random.Random(1000 + seed)
    d = ref.random_instance(rng, n_gpus=rng.randint(2, 4), layers=rng.randint(2, 7))
    if o:
        d["training"]["stage_overhead_ms"] = o
    inst = Instance.from_dict(d)
    assert inst.coefficients().overhead_ms == o
    return d, inst


def _plans(d: dict, inst: Instance) -> list[tuple]:
    """(GPU indices, counts, tmax ms, sum tau ms, T ms, E J, objective) of every feasible plan."""
    index = {g: k for k, g in enumerate(inst.gpu_ids)}
    out = []
    for p in ref.all_plans(d):
        r = ref.evaluate_ref(d, p)
        if r.feasible:
            taus = [s.tau_ms for s in r.stages]
            gpus = [index[s["gpu"]] for s in p["stages"]]
            counts = [s["layers"] for s in p["stages"]]
            out.append((gpus, counts, max(taus), sum(taus), r.t_iter_ms, r.e_iter_j,
                        r.objective))
    assert out  # GPU 0 of the random instances always holds the whole model
    return out


def _worst(inst: Instance) -> tuple[float, float]:
    c = inst.coefficients()
    comm = c.comm_ms[np.isfinite(c.comm_ms)]
    args = (float(c.comp_ms.max()), float(comm.max()) if comm.size else 0.0, inst.layers)
    q_max = min(inst.n, inst.layers)
    return (bounds.tmax_worst(*args, c.overhead_ms),
            bounds.t_iter_worst(*args, q_max, c.micro_batches, c.overhead_ms))


@pytest.mark.parametrize(("seed", "o"), CASES)
def test_float_relaxation_and_worst_cases_hold_for_every_plan(seed: int, o: float) -> None:
    d, inst = _case(seed, o)
    c = inst.coefficients()
    relax = bounds.Relaxation.from_coefficients(c, inst.layers, bounds.clusters(inst))
    tw, t_w = _worst(inst)
    tlb = relax.tmax_bounds(tw)
    slb = relax.sum_bounds(sorted(tlb))
    tib = bounds.t_iter_bounds(tlb, slb, c.micro_batches)
    plans = _plans(d, inst)
    for gpus, _counts, tmax, s, t, _e, _obj in plans:
        q = len(gpus)
        assert q in tlb, (gpus, tlb)  # a missing Q would claim no Q-stage plan exists
        assert tmax >= tlb[q] and s >= slb[q] and t >= tib[q], (gpus, tmax, tlb[q])
        assert tmax <= tw and t <= t_w
        # The bounds for the exact set of clusters the plan uses.
        used = sorted({int(relax.cluster[g]) for g in gpus})
        sub = relax.tmax_bounds(tw, clusters=used)
        assert q in sub and tmax >= sub[q]
    # Not vacuous: the smallest per-Q bound is attained up to the bisection width
    # whenever the best bottleneck plan has a single stage (no links involved).
    best = min(plans, key=lambda p: p[2])
    if len(best[0]) == 1:
        assert tlb[1] == pytest.approx(best[2], rel=1e-9)


@pytest.mark.parametrize(("seed", "o"), CASES[::3])
def test_integer_relaxation_holds_for_the_integer_model(seed: int, o: float) -> None:
    """CP-SAT's use: integer-rounded coefficients, bounds valid for plans priced in integers."""
    d, inst = _case(seed, o)
    c = inst.coefficients()
    s = 1e4  # units per ms
    cc = np.array([max(1, round(v * s)) for v in c.comp_ms], np.int64)
    both = np.isfinite(c.comm_ms) & np.isfinite(c.comm_ms.T)
    cm = {(i, j): round(c.comm_ms[i, j] * s) for i in range(inst.n) for j in range(inst.n)
          if i != j and both[i, j]}
    ov = round(o * s)
    mid, last = bounds.layer_cap_table(c, inst.layers, min(inst.n, inst.layers))
    relax = bounds.Relaxation(cc, cm, mid, last, inst.layers, bounds.clusters(inst), ov)
    tlb = relax.tmax_bounds(10**15)
    slb = relax.sum_bounds(sorted(tlb))
    assert all(isinstance(v, int) for v in (*tlb.values(), *slb.values()))
    for gpus, counts, *_ in _plans(d, inst):
        q = len(gpus)
        taus = []
        for k, (g, n) in enumerate(zip(gpus, counts, strict=True)):
            t = int(cc[g]) * n + ov
            t += cm[(g, gpus[k + 1])] if k + 1 < q else 0
            t += cm[(g, gpus[k - 1])] if k > 0 else 0
            taus.append(t)
        assert max(taus) >= tlb[q] and sum(taus) >= slb[q]


@pytest.mark.parametrize(("seed", "o"), CASES)
def test_capacity_objective_and_t_iter_cap_bounds(seed: int, o: float) -> None:
    d, inst = _case(seed, o)
    c = inst.coefficients()
    L = inst.layers
    plans = _plans(d, inst)
    q_max = min(inst.n, L)
    mid, last = bounds.layer_cap_table(c, L, q_max)
    cap_any = mid[1:].max(axis=0)
    usable = [i for i in range(inst.n) if max(cap_any[i], last[1, i]) >= 1]
    cap_b = bounds.capacity_bound(c.comp_ms, c.comm_ms, o, usable, np.maximum(cap_any, last[1]),
                                  last[1], L)
    assert cap_b <= min(p[2] for p in plans)
    relax = bounds.Relaxation.from_coefficients(c, L, bounds.clusters(inst))
    tlb = relax.tmax_bounds(_worst(inst)[0])
    # The relaxation implies the capacity bound (up to the bisection width).
    assert cap_b <= min(tlb.values()) * (1 + 1e-9)

    w = ObjectiveWeights.from_instance(inst)
    slb = relax.sum_bounds(sorted(tlb))
    opt = min(p[6] for p in plans)
    lb = bounds.objective_lower_bound(c, L, w.a, w.b, tlb, slb, relax.mid)
    assert lb <= opt
    assert bnb.root_bound(Splitter(inst), bounds.clusters(inst)) <= opt

    idle_min = float(c.idle_w.min())
    dyn_min = float((c.dyn_w * c.comp_ms).min())
    for x in (opt, 1.5 * opt, 10 * opt):
        cap = bounds.t_iter_cap(x, w.a, w.b, idle_min, dyn_min, c.micro_batches, L)
        for p in plans:
            if p[6] <= x:
                assert p[4] <= cap * (1 + 1e-12)


@pytest.mark.parametrize(("seed", "o"), CASES[::2])
def test_milp_prepare_bounds_hold(seed: int, o: float) -> None:
    """MILP's tmax/T bounds without and with the optimum as incumbent; arcs of optimal plans
    kept."""
    d, inst = _case(seed, o)
    plans = _plans(d, inst)
    data = milp.prepare(inst)
    assert data.tmax_lb <= min(p[2] for p in plans)
    assert data.t_lb <= min(p[4] for p in plans)
    opt = min(p[6] for p in plans)
    tight = milp.prepare(inst, opt)
    for gpus, counts, tmax, _s, t, _e, obj in plans:
        if obj > opt * (1 + 1e-12):
            continue
        assert tight.tmax_lb <= tmax <= tight.tmax_ub and tight.t_lb <= t <= tight.t_ub
        assert all(g in tight.n_ub and n <= tight.n_ub[g] for g, n in zip(gpus, counts,
                                                                          strict=True))
        assert all((a, b) in tight.arcs for a, b in itertools.pairwise(gpus))


def test_layers_within_is_the_exact_inverse() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        comp, fixed = rng.uniform(0.01, 5), rng.uniform(0, 10)
        cap = rng.randint(0, 30)
        theta = rng.uniform(0, 120)
        n = bounds.layers_within(theta, fixed, comp, cap)
        assert 0 <= n <= cap
        if n:
            assert n * comp + fixed <= theta
        if n < cap:
            assert (n + 1) * comp + fixed > theta
    assert bounds.layers_within(100.0, math.inf, 1.0, 5) == 0


OVERHEAD_SOLVES = [(s, o) for s in range(4) for o in (2.5, 40.0)]


@pytest.mark.parametrize(("seed", "o"), OVERHEAD_SOLVES)
@pytest.mark.parametrize("solver", ["milp", "cpsat", "bnb"])
def test_exact_solvers_reach_the_reference_optimum_with_overhead(
    seed: int, o: float, solver: str
) -> None:
    rng = random.Random(2000 + seed)
    d = ref.random_instance(rng, n_gpus=5, layers=rng.randint(5, 8), tight_memory=seed % 2 == 0)
    d["training"]["stage_overhead_ms"] = o
    inst = Instance.from_dict(d)
    want = ref.optimum_ref(d).objective
    res = solve(inst, solver, seed=0, time_limit=600, threads=1)
    assert res.status == "optimal"
    assert res.objective == pytest.approx(want, rel=1e-6)
    assert res.lower_bound is None or res.lower_bound <= want * (1 + 1e-9)
