"""MILP formulation: exactness against an independent enumeration, validity of
every constraint and cut on every plan, warm starts, limits and the CLI."""

from __future__ import annotations

import itertools
import json
import math
import time
from typing import Any

import numpy as np
import pyomo.environ as pyo
import pytest
from oracle import reference_optimum, reference_space

from formulations import milp
from geoplan.cost import evaluate
from geoplan.cost.normalise import resolve_normalisers
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import Callbacks, solve

# --------------------------------------------------------------------------- instances


def _gpu(gid: str, tflops: float, mem: float, idle: float, active: float, site: str,
         util: float = 0.5) -> dict[str, Any]:
    return {"id": gid, "peak_tflops": tflops, "compute_util": util, "memory_gb": mem,
            "memory_util": 0.9, "idle_w": idle, "active_w": active, "site": site}


def _link(a: str, b: str, bw: float, lat: float) -> dict[str, Any]:
    return {"src": a, "dst": b, "bandwidth_gbps": bw, "latency_ms": lat}


def _instance(gpus: list[dict[str, Any]], links: list[dict[str, Any]], layers: int,
              lam: float = 1.0, hidden: int = 2048, name: str = "t") -> Instance:
    return Instance.from_dict({
        "name": name,
        "gpus": gpus,
        "links": links,
        "model": {"layers": layers, "hidden": hidden, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 32, "micro_batch_size": 1},
        "objective": {"lambda": lam},
    })


def memory_bound(lam: float = 1.0) -> Instance:
    """Two fast GPUs with little memory, a slow big one and a medium one; full mesh,
    asymmetric links. The fastest plans do not fit (memory binds)."""
    gpus = [
        _gpu("f0", 312, 8, 60, 400, "A"),
        _gpu("f1", 312, 8, 60, 400, "A"),
        _gpu("big", 100, 80, 40, 250, "B"),
        _gpu("mid", 150, 16, 25, 165, "B"),
    ]
    ids = [g["id"] for g in gpus]
    links = []
    for k, (a, b) in enumerate(itertools.permutations(ids, 2)):
        same = a[0] == b[0] or {a, b} == {"big", "mid"}
        links.append(_link(a, b, 40.0 if same else 5.0 + k % 3, 0.5 if same else 4.0 + k % 4))
    return _instance(gpus, links, layers=16, lam=lam, name="memory-bound")


def identical(lam: float = 1.0) -> Instance:
    """Four identical GPUs on one site (all links alike) plus one elsewhere."""
    gpus = [_gpu(f"x{k}", 156, 40, 40, 250, "A") for k in range(4)]
    gpus.append(_gpu("y0", 312, 80, 60, 400, "B", util=0.3))
    ids = [g["id"] for g in gpus]
    links = []
    for a, b in itertools.permutations(ids, 2):
        cross = "y0" in (a, b)
        links.append(_link(a, b, 5.0 if cross else 50.0, (3.0 if a == "y0" else 2.0) if cross
                           else 0.2))
    return _instance(gpus, links, layers=8, lam=lam, name="identical")


def geo5(lam: float = 1.0) -> Instance:
    return Instance.from_dict(by_family("geo", 5, 8, 3, lam=lam))


def metro5(lam: float = 1.0) -> Instance:
    return Instance.from_dict(by_family("metro", 5, 7, 1, lam=lam))


# --------------------------------------------------------------------------- enumeration


# Every plan (ordered distinct GPUs x compositions of L) comes priced from the reference
# enumerator (tests/reference_model.py): oracle.reference_space / reference_optimum.


def optimum(instance: Instance) -> tuple[float, Plan]:
    best, plan, _ = reference_optimum(instance)
    assert plan is not None and math.isfinite(best), "the test instance has no feasible plan"
    return best, plan


CASES = [
    ("three_gpu", None),
    ("memory_bound", memory_bound),
    ("identical", identical),
    ("geo5", geo5),
    ("metro5", metro5),
]


def _case(name: str, factory: Any, lam: float, three_gpu: Instance) -> Instance:
    inst = three_gpu.with_objective(lam=lam) if factory is None else factory(lam)
    return resolve_normalisers(inst)


# --------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("heuristic", [True, False], ids=["start", "nostart"])
@pytest.mark.parametrize("lam", [1.0, 0.5, 0.0])
@pytest.mark.parametrize(("name", "factory"), CASES, ids=[c[0] for c in CASES])
def test_milp_matches_enumeration(name: str, factory: Any, lam: float, heuristic: bool,
                                  three_gpu: Instance) -> None:
    """Without a start HiGHS must find the optimum itself (exercises polishing too).

    The parametric bound is off: it alone often proves these tiny optima, and then
    HiGHS would not run."""
    inst = _case(name, factory, lam, three_gpu)
    best, _ = optimum(inst)
    r = solve(inst, "milp", seed=1, time_limit=600, threads=1,
              params={"heuristic": heuristic, "parametric": False})
    assert r.status == "optimal", r.message
    # finish() already checked the model objective against the evaluator.
    assert r.objective == pytest.approx(best, rel=1e-6)
    assert r.info["highs"]["objective"] == pytest.approx(r.objective, rel=1e-6)
    assert r.lower_bound is not None and r.lower_bound <= best * (1 + 1e-12)
    assert r.gap is not None and r.gap <= 1e-5
    assert r.trace and all(row.bound is None or row.bound <= best for row in r.trace)


def test_memory_binds_in_memory_instance() -> None:
    """The memory instance is a real test: some memory-infeasible plan is faster."""
    inst = memory_bound(1.0)
    best, _ = optimum(inst)
    space = reference_space(inst)
    # Linked both ways but over memory, and faster than the optimum.
    assert np.any(space.links_ok & ~space.memory_ok & (space.t_iter_ms < best))


def test_milp_without_helpers_is_still_exact() -> None:
    """No heuristic start, no dominance, no cuts: the bare formulation is exact too."""
    inst = resolve_normalisers(memory_bound(0.5))
    best, _ = optimum(inst)
    r = solve(inst, "milp", seed=0, time_limit=600, threads=1,
              params={"heuristic": False, "symmetry": False, "cuts": False})
    assert r.status == "optimal"
    assert r.objective == pytest.approx(best, rel=1e-6)
    assert r.lower_bound <= best * (1 + 1e-12)


# --------------------------------------------------------------------------- validity


def _violated(model: pyo.ConcreteModel, values: Any, tol: float = 1e-7) -> list[str]:
    for var, x in values.items():
        var.set_value(x, skip_validation=True)
    bad = []
    for con in model.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(con.body)
        scale = 1.0 + abs(body)
        if con.has_lb() and body < pyo.value(con.lower) - tol * scale:
            bad.append(con.name)
        if con.has_ub() and body > pyo.value(con.upper) + tol * scale:
            bad.append(con.name)
    for var in model.component_data_objects(pyo.Var):
        if var.lb is not None and var.value < var.lb - tol * (1 + abs(var.lb)):
            bad.append(var.name)
        if var.ub is not None and var.value > var.ub + tol * (1 + abs(var.ub)):
            bad.append(var.name)
    return bad


@pytest.mark.parametrize("lam", [1.0, 0.5])
@pytest.mark.parametrize(("name", "factory"), CASES[1:4], ids=[c[0] for c in CASES[1:4]])
def test_every_plan_satisfies_model_and_cuts(name: str, factory: Any, lam: float) -> None:
    """Each feasible plan, in canonical (dominance) form, satisfies every constraint,
    cut and bound of the tightened model, and the model prices it as the evaluator does."""
    inst = resolve_normalisers(factory(lam))
    data = milp.prepare(inst)
    data, _ = milp.tighten(data, deadline=math.inf)
    model = milp.build_model(inst, data=data)
    space = reference_space(inst)
    feasible = np.flatnonzero(space.feasible)
    rng = np.random.default_rng(0)
    picks = set(rng.choice(feasible, size=min(150, len(feasible)), replace=False).tolist())
    picks.add(int(np.argmin(space.objective)))
    for k in sorted(picks):
        plan = Plan.from_dict(space.plan(k))
        canon = milp.canonical_plan(data, plan)
        price = evaluate(inst, canon)
        assert price.feasible and price.objective <= space.objective[k] * (1 + 1e-12)
        values = milp.start_values(model, canon)
        assert values is not None, f"plan {canon} not expressible"
        assert _violated(model, values) == [], f"plan {canon}"
        assert pyo.value(model.obj) == pytest.approx(price.objective, rel=1e-9)
        assert milp.read_plan(model) == canon


def test_incumbent_bounds_keep_better_plans() -> None:
    """With bounds from a known plan, every plan at least as good still fits the model."""
    inst = resolve_normalisers(geo5(1.0))
    space = reference_space(inst)
    order = np.argsort(space.objective)
    ref = float(space.objective[order[20]])  # a good, not optimal, plan
    data, _ = milp.tighten(milp.prepare(inst, ref), deadline=math.inf)
    model = milp.build_model(inst, data=data)
    assert data.tmax_ub < milp.prepare(inst).tmax_ub  # the bound did tighten something
    for k in order[:21]:
        canon = milp.canonical_plan(data, Plan.from_dict(space.plan(int(k))))
        values = milp.start_values(model, canon)
        assert values is not None and _violated(model, values) == []


def test_build_model_inspection(three_gpu: Instance) -> None:
    m = milp.build_model(three_gpu)
    d = m.data
    assert set(m.I) == {0, 1, 2}
    # a-c has no link: no arc either way.
    assert set(m.A) == {(0, 1), (1, 0), (1, 2), (2, 1)}
    # Stage time of b with arcs a->b and b->c: comp + comm[b,c] (forward) + comm[b,a] (backward).
    c = three_gpu.coefficients()
    expr = m.tau[1]
    coefs = {v.name: coef for v, coef in _linear_terms(expr)}
    assert coefs["n[1]"] == pytest.approx(c.comp_ms[1])
    assert coefs["a[1,2]"] == pytest.approx(c.comm_ms[1, 2])
    assert coefs["a[0,1]"] == pytest.approx(c.comm_ms[1, 0])
    assert d.kmax == 3


def _linear_terms(expr: Any) -> list[tuple[Any, float]]:
    from pyomo.repn import generate_standard_repn

    repn = generate_standard_repn(expr)
    return list(zip(repn.linear_vars, repn.linear_coefs, strict=True))


# --------------------------------------------------------------------------- starts, limits


def test_warm_start_accepted_and_traced() -> None:
    inst = resolve_normalisers(geo5(1.0))
    best, plan = optimum(inst)
    events: list[tuple[float, float | None, float | None]] = []

    class Rec(Callbacks):
        def on_improvement(self, seconds: float, incumbent: float | None,
                           bound: float | None) -> None:
            events.append((seconds, incumbent, bound))

    r = solve(inst, "milp", seed=0, time_limit=600, threads=1, warm_start=plan,
              params={"heuristic": False, "parametric": False}, callbacks=Rec())
    assert r.info["warm_start_accepted"] is True
    assert r.info["mip_start"]["accepted"] is True
    assert r.trace[0].incumbent == pytest.approx(best)
    assert events and events[0][1] == pytest.approx(best)
    assert r.status == "optimal" and r.objective == pytest.approx(best, rel=1e-6)
    secs = [row.seconds for row in r.trace]
    assert secs == sorted(secs)


def test_warm_start_worse_plan_and_infeasible_plan() -> None:
    inst = resolve_normalisers(memory_bound(1.0))
    space = reference_space(inst)
    worst = int(np.argmax(np.where(space.feasible, space.objective, -np.inf)))
    poor = Plan.from_dict(space.plan(worst))
    r = solve(inst, "milp", seed=0, time_limit=600, threads=1, warm_start=poor,
              params={"heuristic": False})
    assert r.info["warm_start_accepted"] is True
    assert r.status == "optimal" and r.objective < space.objective[worst]
    # A memory-infeasible plan cannot be a start.
    bad = Plan.from_pairs([("f0", 16)])
    assert not evaluate(inst, bad).feasible
    r = solve(inst, "milp", seed=0, time_limit=600, threads=1, warm_start=bad,
              params={"heuristic": False})
    assert r.info["warm_start_accepted"] is False
    assert r.status == "optimal"


def test_time_limit_without_incumbent_is_no_solution() -> None:
    inst = Instance.from_dict(by_family("geo", 8, 12, 0))
    r = solve(inst, "milp", seed=0, time_limit=0.01, threads=1,
              params={"heuristic": False, "highs.mip_heuristic_effort": 0})
    assert r.status == "no_solution"
    # Either HiGHS ran out of time or the model was abandoned before it could run.
    assert r.plan is None and ("HiGHS" in (r.message or "") or "abandoned" in (r.message or ""))


def test_time_limit_with_incumbent_is_feasible_with_valid_bound() -> None:
    """Stopped by the limit: a priced plan (model objective checked by the core),
    a bound below it, and a trace whose bounds never pass the final incumbent."""
    from geoplan.cost.baseline import metis_default_plan

    inst = Instance.from_dict(by_family("metro", 32, 32, 0))  # minutes to prove
    start = metis_default_plan(inst)
    assert start is not None
    # Without the site-subset search (it finds and proves the optimum here), site
    # branching (its share of 3 s would leave HiGHS little time under load) and the
    # narrowed model (it proves the optimum in about 3 s).
    r = solve(inst, "milp", seed=0, time_limit=3.0, threads=1, warm_start=start,
              params={"heuristic": False, "tighten": False, "site_subsets": False,
                      "site_branching": False, "narrow": False})
    assert r.status == "feasible", r.message
    assert r.objective <= evaluate(inst, start).objective
    assert r.lower_bound is not None and r.lower_bound < r.objective
    assert 0 < r.gap < 1
    assert "HiGHS stopped" in (r.message or "")
    assert all(row.bound is None or row.bound <= r.objective for row in r.trace)
    # The trace shows the proven bound: it rises to the parametric floor (the box
    # search's progress reports, then the floor) and never falls (HiGHS's own bound
    # starts below the floor).
    floor = r.info["parametric"]["bound"]
    shown = [row.bound for row in r.trace if row.bound is not None]
    assert any(b == pytest.approx(floor, rel=1e-12) for b in shown)
    assert shown == sorted(shown)


def test_highs_not_started_when_its_root_would_overrun_the_deadline() -> None:
    """The MIP root's analytic centre cannot be interrupted: with no time for it, HiGHS is
    not started at all (status stopped, reason not_started); without a deadline it runs."""
    from formulations.highs_tools import HighsSession

    inst = Instance.from_dict(by_family("geo", 6, 8, 0))
    model = milp.build_model(inst)
    session = HighsSession(model)
    assert session.is_mip
    session.set_options(time_limit=60, rel_gap=1e-9, abs_gap=1e-9, threads=1, seed=0)
    run = session.run(deadline=time.perf_counter() - 1.0)
    assert (run.status, run.reason, run.values, run.nodes) == ("stopped", "not_started", None, 0)
    run = session.run()
    assert run.status == "optimal" and run.values is not None


def test_highs_start_keeps_a_margin_over_the_root_estimate(monkeypatch: Any) -> None:
    """HiGHS starts only when SHARED_CORE_MARGIN times the root's estimate fits."""
    import formulations.highs_tools as ht

    monkeypatch.setattr(ht, "analytic_centre_estimate", lambda nnz: 100.0)
    inst = Instance.from_dict(by_family("geo", 6, 8, 0))
    session = ht.HighsSession(milp.build_model(inst))
    session.set_options(time_limit=60, rel_gap=1e-9, abs_gap=1e-9, threads=1, seed=0)
    short = time.perf_counter() + 0.5 * (1 + ht.SHARED_CORE_MARGIN) * 100.0
    assert session.run(deadline=short).reason == "not_started"
    run = session.run(deadline=time.perf_counter() + 1.1 * ht.SHARED_CORE_MARGIN * 100.0)
    assert run.status == "optimal"


def _stuck_highs(session: Any) -> Any:
    """Make ``session``'s HiGHS hang in its first log line, as in root work that looks at
    no interrupt, until the returned event is set."""
    import threading

    release = threading.Event()
    session.highs.cbLogging.subscribe(lambda _event: release.wait(60.0))
    return release


def test_highs_run_is_abandoned_past_its_deadline(monkeypatch: Any) -> None:
    """A run that does not return past its deadline (HiGHS stuck where no interrupt
    reaches it) is abandoned: no incumbent, the session refuses further use, and the
    global scheduler is kept until the abandoned thread returns."""
    import formulations.highs_tools as ht
    from geoplan.errors import SolverError
    from geoplan.solving.stop import abandoned_calls

    monkeypatch.setattr(ht, "ABANDON_AFTER_S", 0.05)
    inst = Instance.from_dict(by_family("geo", 6, 8, 0))
    session = ht.HighsSession(milp.build_model(inst))
    session.set_options(time_limit=60, rel_gap=1e-9, abs_gap=1e-9, threads=1, seed=0)
    release = _stuck_highs(session)
    resets: list[bool] = []
    monkeypatch.setattr(ht.highspy.Highs, "resetGlobalScheduler", lambda _b: resets.append(_b))
    run = session.run(deadline=time.perf_counter() + 0.1)
    assert (run.status, run.reason, run.objective, run.values) == (
        "stopped", "abandoned", None, None)
    assert session.abandoned and session.polish(np.zeros(session.num_cols)) is None
    with pytest.raises(SolverError, match="abandoned"):
        session.run()
    n_resets = len(resets)
    ht.reset_scheduler()  # the abandoned run still uses the scheduler: kept
    assert len(resets) == n_resets
    release.set()
    for th in abandoned_calls():
        th.join(60.0)
    ht.reset_scheduler()
    assert len(resets) == n_resets + 1


def test_milp_returns_the_start_plan_when_highs_is_abandoned(monkeypatch: Any) -> None:
    """The MILP answers near its budget with the plan and bound it had when HiGHS
    hangs past the deadline, and says so."""
    import formulations.highs_tools as ht
    from geoplan.cost.baseline import metis_default_plan
    from geoplan.solving.stop import abandoned_calls

    monkeypatch.setattr(ht, "ABANDON_AFTER_S", 0.05)
    original = ht.HighsSession.run
    released: list[Any] = []

    def hanging_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        released.append(_stuck_highs(self))
        kwargs["deadline"] = time.perf_counter() + 0.1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ht.HighsSession, "run", hanging_run)
    inst = Instance.from_dict(by_family("metro", 12, 16, 0))
    start = metis_default_plan(inst)
    assert start is not None
    try:
        r = solve(inst, "milp", seed=0, time_limit=30.0, threads=1, warm_start=start,
                  params={"heuristic": False, "parametric": False})
    finally:
        for ev in released:
            ev.set()
        for th in abandoned_calls():
            th.join(60.0)
    assert (r.status, r.plan) == ("feasible", start)
    assert "HiGHS abandoned" in (r.message or "")
    assert r.info["highs"]["status"] == "abandoned"


def test_analytic_centre_estimate_lies_above_the_measurements() -> None:
    """Pinned to what was measured on one core (formulations.highs_tools): a little high."""
    from formulations.highs_tools import analytic_centre_estimate

    for nnz, seconds in ((109_103, 0.78), (541_882, 5.85), (508_962, 6.62), (3_037_922, 46.8)):
        assert seconds <= analytic_centre_estimate(nnz) <= 1.6 * seconds
    sizes = [0, 10, 1_000, 10**5, 10**6, 10**7]
    est = [analytic_centre_estimate(k) for k in sizes]
    assert est == sorted(est) and est[0] == 0.0


def test_milp_returns_the_start_plan_when_highs_cannot_start(monkeypatch: Any) -> None:
    """No time for the uninterruptible root: the start plan, the parametric bound, and a
    message that says why."""
    import formulations.highs_tools as ht
    from geoplan.cost.baseline import metis_default_plan

    monkeypatch.setattr(ht, "analytic_centre_estimate", lambda nnz: 1e9)
    inst = Instance.from_dict(by_family("metro", 12, 16, 0))
    start = metis_default_plan(inst)
    assert start is not None
    r = solve(inst, "milp", seed=0, time_limit=30.0, threads=1, warm_start=start,
              params={"heuristic": False, "parametric": False})
    assert r.status == "feasible"
    assert r.plan == start
    assert "HiGHS not started" in (r.message or "")
    assert r.info["highs"]["status"] == "not_started"


def test_infeasible_links() -> None:
    """Each GPU holds only part of the model and they are not linked: no plan exists."""
    gpus = [_gpu("p", 312, 8, 60, 400, "A"), _gpu("q", 312, 8, 60, 400, "B"),
            _gpu("r", 100, 8, 60, 400, "C")]
    links = [_link("p", "r", 10, 5), _link("q", "r", 10, 5)]  # r -> p, r -> q missing
    inst = _instance(gpus, links, layers=16)
    assert not reference_space(inst).feasible.any()
    r = solve(inst, "milp", seed=0, time_limit=600, threads=1)
    assert r.status == "infeasible"
    assert r.plan is None and "no plan" in (r.message or "")


def test_infeasible_proven_by_highs() -> None:
    """p and q together would fit but are not linked; with r between them the third
    stage shrinks every cap below L. Only the MILP search can tell."""
    gpus = [_gpu("p", 312, 8, 60, 400, "A"), _gpu("q", 312, 8, 60, 400, "B"),
            _gpu("r", 100, 2, 60, 400, "C")]
    links = [_link(a, b, 10, 5) for a, b in (("p", "r"), ("r", "p"), ("q", "r"), ("r", "q"))]
    inst = _instance(gpus, links, layers=15)
    assert not reference_space(inst).feasible.any()
    data = milp.prepare(inst)
    assert data.gpus and math.isfinite(data.tmax_lb)  # not caught before the search
    r = solve(inst, "milp", seed=0, time_limit=600, threads=1)
    assert r.status == "infeasible"
    assert r.plan is None and "HiGHS proved" in (r.message or "")


def test_gap_target_stops_early_with_valid_bound() -> None:
    inst = Instance.from_dict(by_family("geo", 8, 12, 0))
    r = solve(inst, "milp", seed=0, time_limit=600, threads=1, gap=0.5,
              params={"tighten": False})
    assert r.status == "optimal"
    assert r.gap is not None and r.gap <= 0.5 + 1e-9
    exact = solve(inst, "milp", seed=0, time_limit=600, threads=1)
    assert r.lower_bound <= exact.objective * (1 + 1e-12)


def test_cli_solve_with_warm_start(tmp_path: Any, capsys: Any, three_gpu: Instance) -> None:
    from geoplan.cli import main

    inst_file = tmp_path / "inst.json"
    three_gpu.to_json(inst_file)
    plan_file = tmp_path / "plan.json"
    Plan.from_pairs([("a", 6), ("b", 6)]).to_json(plan_file)
    code = main(["solve", str(inst_file), "--solver", "milp", "--warm-start", str(plan_file),
                 "--time-limit", "60", "--json", "--quiet", "--threads", "1"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    best, _ = optimum(three_gpu)
    assert out["status"] == "optimal"
    assert out["objective"] == pytest.approx(best, rel=1e-6)
    assert out["lower_bound"] is not None and out["lower_bound"] <= best * (1 + 1e-12)
    assert out["gap"] is not None and 0 <= out["gap"] <= 1e-5
    assert out["info"]["warm_start_accepted"] is True


def test_the_narrowed_model_proves_its_slice_holds_no_better_plan(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """metro N=12 seed 0, lambda 1, with site branching splitting no revisit node of three
    sites (``_GAP_SITES`` 2; by default it proves this instance alone): the narrowed model
    with the incumbent as cutoff is infeasible, so the incumbent is B&B's optimum."""
    from geoplan.cost import site_branching
    from geoplan.cost.baseline import metis_default_plan

    monkeypatch.setattr(site_branching, "_GAP_SITES", 2)
    inst = Instance.from_dict(by_family("metro", 12, 12, 0, lam=1.0))
    params = {"heuristic": False, "site_subsets": False, "site_paths": False,
              "memetic_share": 0, "memetic_after_share": 0}
    res = solve(inst, "milp", seed=0, time_limit=600, threads=1,
                warm_start=metis_default_plan(inst), params=params)
    tree = solve(inst, "bnb", seed=0, time_limit=600, threads=1)
    assert "classes" in res.info["narrowed"]
    assert res.info["highs"]["status"] == "infeasible"
    assert res.status == tree.status == "optimal"
    assert res.objective == pytest.approx(tree.objective, rel=1e-9)


@pytest.mark.parametrize(("family", "n", "seed", "lam"), [
    ("metro", 8, 0, 1.0), ("metro", 8, 3, 0.5), ("metro", 10, 3, 1.0), ("metro", 12, 3, 1.0),
    ("metro", 12, 1, 0.5), ("metro", 12, 0, 0.0), ("cloud", 16, 5, 0.5)])
def test_the_narrowed_model_reaches_the_optimum(family: str, n: int, seed: int,
                                                 lam: float) -> None:
    """After site branching the model keeps one slice over the open boxes and the hull of
    the classes (``info["narrowed"]``); with the incumbent as cutoff HiGHS finds the
    optimum in it (the next test: or proves it holds no better plan). Either way the
    answer is B&B's optimum, and the plain model's."""
    from geoplan.cost.baseline import metis_default_plan

    inst = Instance.from_dict(by_family(family, n, n, seed, lam=lam))
    start = metis_default_plan(inst)
    assert start is not None
    params = {"heuristic": False, "site_subsets": False, "site_paths": False,
              "memetic_share": 0, "memetic_after_share": 0}
    narrowed = solve(inst, "milp", seed=0, time_limit=600, threads=1, warm_start=start,
                     params=params)
    plain = solve(inst, "milp", seed=0, time_limit=600, threads=1, warm_start=start,
                  params={**params, "narrow": False})
    tree = solve(inst, "bnb", seed=0, time_limit=600, threads=1)
    assert "narrowed" in narrowed.info
    if family == "metro":  # the cloud pool's bound leaves boxes, and branching no classes
        assert "classes" in narrowed.info["narrowed"]
    assert "narrowed" not in plain.info
    assert narrowed.status == plain.status == tree.status == "optimal"
    assert narrowed.objective == pytest.approx(tree.objective, rel=1e-9)
    assert plain.objective == pytest.approx(tree.objective, rel=1e-9)
    assert narrowed.lower_bound <= tree.objective * (1 + 1e-9)
    assert all(row.bound is None or row.bound <= narrowed.objective * (1 + 1e-12)
               for row in narrowed.trace)


# --------------------------------------------------------------------------- larger


@pytest.mark.slow
@pytest.mark.parametrize("lam", [1.0, 0.5])
@pytest.mark.parametrize("family", ["geo", "metro"])
def test_agrees_with_branch_and_bound(family: str, lam: float) -> None:
    inst = Instance.from_dict(by_family(family, 12, 12, 0, lam=lam))
    a = solve(inst, "milp", seed=0, time_limit=120, threads=2)
    b = solve(inst, "bnb", seed=0, time_limit=120, threads=2)
    assert a.status == b.status == "optimal"
    assert a.objective == pytest.approx(b.objective, rel=1e-6)
