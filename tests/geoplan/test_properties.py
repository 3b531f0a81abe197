"""Property-based tests (hypothesis) of the cost model and its structure.

Instances and plans are drawn field by field by tests/strategies.py (asymmetric and
missing links, tight memory, optional fields left out, every lambda, optionally the
stage overhead), so a failure shrinks to a small instance and plan, not to an
unrelated seed. The independent reference is tests/reference_model.py.
"""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import pytest
import reference_model as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import cases, chromosomes, instances

from geoplan.cost import Evaluation, evaluate
from geoplan.cost.batch import BatchEvaluator
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import solve


def profile(examples: int) -> settings:
    """Deterministic (derandomised, no example database) and without deadlines."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


PROFILE = profile(80)
REL = 1e-9


def same(a: float, b: float, rel: float = REL) -> bool:
    if math.isfinite(a) or math.isfinite(b):
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)
    # Both inf (a missing link) or undefined (inf * 0 W idle power): the contract leaves
    # the price of a plan with a missing link at "not finite".
    return True


def kinds(ev: Evaluation) -> list[str]:
    return sorted(v.kind for v in ev.violations)


def head_bytes(d: dict, q_stages: int, u: int) -> float:
    """The LM-head term of the last stage (zero layers, last=True) by the reference model."""
    return ref.stage_memory_bytes(d, 0, q_stages, True, u)


def check_scalar_against_reference(d: dict, p: dict) -> None:
    inst, plan = Instance.from_dict(d), Plan.from_dict(p)
    ev = evaluate(inst, plan)
    r = ref.evaluate_ref(d, p)
    assert same(ev.t_iter_ms, r.t_iter_ms), (ev.t_iter_ms, r.t_iter_ms)
    assert same(ev.e_iter_j, r.e_iter_j), (ev.e_iter_j, r.e_iter_j)
    assert r.objective is not None  # the strategies give normalisers for mixed lambdas
    assert same(ev.objective, r.objective), (ev.objective, r.objective)
    assert kinds(ev) == sorted(r.violations)
    assert ev.feasible == r.feasible
    assert len(ev.stages) == len(r.stages)
    for s, t in zip(ev.stages, r.stages, strict=True):
        assert (s.gpu, s.layers) == (t.gpu, t.layers)
        assert same(s.compute_ms, t.compute_s * 1e3)
        assert same(s.comm_fwd_ms, t.fwd_s * 1e3) and same(s.comm_bwd_ms, t.bwd_s * 1e3)
        assert same(s.tau_ms, t.tau_s * 1e3)
        assert same(s.memory_gb, t.mem_bytes / 1e9) and same(s.memory_limit_gb, t.cap_bytes / 1e9)


# --------------------------------------------------------------------------- against the reference


@profile(150)
@given(cases(shape_errors=True, micro_batch=True))
def test_scalar_evaluator_matches_reference(case: tuple[dict, dict]) -> None:
    check_scalar_against_reference(*case)


@profile(150)
@given(cases(shape_errors=True, overhead=True, tight_memory=True))
def test_scalar_evaluator_matches_reference_with_stage_overhead(case: tuple[dict, dict]) -> None:
    check_scalar_against_reference(*case)


@PROFILE
@given(cases(shape_errors=True, micro_batch=True))
def test_validator_says_feasible_iff_the_reference_does(case: tuple[dict, dict]) -> None:
    d, p = case
    r = ref.evaluate_ref(d, p)
    ev = evaluate(Instance.from_dict(d), Plan.from_dict(p))
    assert ev.feasible == r.feasible, (kinds(ev), r.violations)
    assert ev.feasible == (not ev.violations)
    if ev.feasible:
        assert math.isfinite(ev.objective) and math.isfinite(ev.t_iter_ms)


@st.composite
def batch_cases(draw: st.DrawFn) -> tuple[dict, list[list[int]], int | None]:
    """An instance, a few chromosomes (mostly decodable) and the micro-batch size to use."""
    d = draw(instances(overhead=draw(st.booleans())))
    rows = draw(st.lists(st.one_of(chromosomes(d), chromosomes(d, decodable=False)),
                         min_size=1, max_size=6))
    B = d["training"]["batch_size"]
    u = draw(st.sampled_from([None, *[v for v in range(1, B + 1) if B % v == 0]]))
    return d, rows, u


@PROFILE
@given(batch_cases())
def test_batch_evaluator_matches_scalar(case: tuple[dict, list[list[int]], int | None]) -> None:
    d, rows, u = case
    inst = Instance.from_dict(d)
    r = BatchEvaluator(inst, micro_batch_size=u).evaluate(np.array(rows, dtype=np.int64))
    for k, x in enumerate(rows):
        try:
            plan = Plan.from_chromosome(inst, x, micro_batch_size=u)
        except InputError:  # non-contiguous GPU groups: no plan
            assert not r.feasible[k] and math.isinf(r.objective[k])
            continue
        ev = evaluate(inst, plan)
        assert bool(r.feasible[k]) == ev.feasible, (x, kinds(ev))
        assert same(float(r.t_iter_ms[k]), ev.t_iter_ms), (x, r.t_iter_ms[k], ev.t_iter_ms)
        assert same(float(r.e_iter_j[k]), ev.e_iter_j), (x, r.e_iter_j[k], ev.e_iter_j)
        if ev.feasible:
            assert same(float(r.objective[k]), ev.objective)
        else:
            assert np.isinf(r.objective[k]) and r.objective[k] > 0


def check_bruteforce_against_reference(d: dict) -> None:
    inst = Instance.from_dict(d)
    want = ref.optimum_ref(d)
    assert want.plans == ref.space_size(len(d["gpus"]), d["model"]["layers"])
    res = solve(inst, "bruteforce", seed=0, time_limit=600, threads=1)
    if want.plan is None:
        assert res.status == "infeasible" and res.plan is None
        return
    assert res.status == "optimal", res.message
    assert same(res.objective, want.objective), (res.objective, want.objective, want.plan)
    # The plan brute force returns is optimal by the reference's own price too.
    got = ref.evaluate_ref(d, res.plan.to_dict())
    assert got.feasible and got.objective is not None
    assert same(got.objective, want.objective), (res.plan.to_dict(), got.objective, want.plan)


# f(N, L) <= f(4, 6) = 544 plans; tight memory, so that the optimum is often a pipeline.
TINY = {"min_gpus": 2, "min_layers": 2, "max_gpus": 4, "max_layers": 6, "tight_memory": True}


@profile(80)
@given(instances(**TINY))
def test_bruteforce_matches_the_reference_enumerator(d: dict) -> None:
    check_bruteforce_against_reference(d)


@profile(40)
@given(instances(overhead=True, **TINY))
def test_bruteforce_matches_the_reference_enumerator_with_stage_overhead(d: dict) -> None:
    check_bruteforce_against_reference(d)


@profile(40)
@given(instances(max_gpus=3, max_layers=5, overhead=True))
def test_reference_enumerator_is_the_minimum_of_the_reference_evaluator(d: dict) -> None:
    """The enumerator (numpy over the splits of each GPU order) against evaluate_ref
    plan by plan: the same plans, the same prices, the same optimum."""
    space = ref.price_space(d)
    plans = list(ref.all_plans(d))
    assert len(space) == len(plans) == ref.space_size(len(d["gpus"]), d["model"]["layers"])
    best = math.inf
    for k, p in enumerate(plans):
        assert space.plan(k) == p
        r = ref.evaluate_ref(d, p)
        assert bool(space.feasible[k]) == r.feasible
        assert same(float(space.t_iter_ms[k]), r.t_iter_ms, 1e-12)
        assert same(float(space.e_iter_j[k]), r.e_iter_j, 1e-12)
        if r.feasible:
            assert same(float(space.objective[k]), r.objective, 1e-12)
            best = min(best, r.objective)
    assert same(ref.optimum_ref(d).objective, best, 1e-12)


@profile(40)
@given(instances(max_gpus=4, max_layers=5, overhead=True), st.randoms(use_true_random=False))
def test_reference_enumerator_blocks_price_each_order_as_alone(d: dict,
                                                              rnd: random.Random) -> None:
    """The enumerator prices many GPU orders of one length at once (numpy blocks); every
    row is what price_order gives for its order alone, and optimum_ref over a list of
    orders (mixed lengths, any sequence) is the first least plan of that list."""
    space = ref.price_space(d)
    k = 0
    orders = list(ref.gpu_orders(d))
    for order in orders:
        r = ref.price_order(d, order)
        K = len(r.objective)
        assert space.orders[k:k + K] == [order] * K
        assert space.counts[k:k + K] == [tuple(int(c) for c in row) for row in r.counts]
        for got, want in ((space.t_iter_ms, r.t_iter_ms), (space.e_iter_j, r.e_iter_j),
                          (space.objective, r.objective), (space.memory_ok, r.memory_ok)):
            assert np.array_equal(got[k:k + K], want, equal_nan=True), (order, got, want)
        assert (space.links_ok[k:k + K] == r.links_ok).all()
        k += K
    assert k == len(space)
    some = rnd.sample(orders, rnd.randint(1, len(orders)))
    best, plan = math.inf, None
    for order in some:
        r = ref.price_order(d, order)
        if len(r.objective) and r.objective.min() < best:
            j = int(np.argmin(r.objective))
            best, plan = float(r.objective[j]), ref.plan_dict(order, r.counts[j])
    got = ref.optimum_ref(d, orders=some)
    assert (got.objective, got.plan) == (best, plan)


# --------------------------------------------------------------------------- structure


@PROFILE
@given(cases())
def test_reversal_moves_only_the_lm_head_memory(case: tuple[dict, dict]) -> None:
    d, p = case
    inst, plan = Instance.from_dict(d), Plan.from_dict(p)
    ev, rv = evaluate(inst, plan), evaluate(inst, plan.reversed())
    Q = plan.q
    u = inst.training.micro_batch_size
    head = head_bytes(d, Q, u) / 1e9
    for k in range(Q):
        j = Q - 1 - k  # stage k of the reversed plan is stage j of the original
        assert rv.stages[k].gpu == ev.stages[j].gpu
        assert rv.stages[k].compute_ms == pytest.approx(ev.stages[j].compute_ms, rel=1e-12)
        original = ev.stages[j].memory_gb - (head if j == Q - 1 else 0.0)
        reversed_ = rv.stages[k].memory_gb - (head if k == Q - 1 else 0.0)
        assert reversed_ == pytest.approx(original, rel=1e-12)
    if Q == 1:
        assert rv.t_iter_ms == ev.t_iter_ms and rv.stages == ev.stages


@PROFILE
@given(cases())
def test_reversal_keeps_every_stage_time(case: tuple[dict, dict]) -> None:
    """tau_q = compute + comm(g_q -> next) + comm(g_q -> previous): every stage sends from its
    own GPU to its neighbours, and reversing keeps each GPU's neighbours and send direction.
    So each GPU's tau, hence T_iter and E_iter, are unchanged: only the link directions a
    stage uses could change time, and reversal changes none of them."""
    d, p = case
    inst, plan = Instance.from_dict(d), Plan.from_dict(p)
    ev, rv = evaluate(inst, plan), evaluate(inst, plan.reversed())
    by_gpu = {s.gpu: s for s in ev.stages}
    for s in rv.stages:
        o = by_gpu[s.gpu]
        assert same(s.tau_ms, o.tau_ms, 1e-12)
        assert {s.comm_fwd_ms, s.comm_bwd_ms} == {o.comm_fwd_ms, o.comm_bwd_ms}
    assert same(rv.t_iter_ms, ev.t_iter_ms, 1e-12) and same(rv.e_iter_j, ev.e_iter_j, 1e-12)


@PROFILE
@given(cases())
def test_turning_the_links_around_swaps_the_directions_used(case: tuple[dict, dict]) -> None:
    """On the instance with every link reversed, a stage's forward send takes the time of the
    original backward link from its successor (and vice versa)."""
    d, p = case
    inst, plan = Instance.from_dict(d), Plan.from_dict(p)
    turned = copy.deepcopy(d)
    for e in turned["links"]:
        e["src"], e["dst"] = e["dst"], e["src"]
    ev, tv = evaluate(inst, plan), evaluate(Instance.from_dict(turned), plan)
    for q in range(plan.q - 1):
        assert tv.stages[q].comm_fwd_ms == ev.stages[q + 1].comm_bwd_ms
        assert tv.stages[q + 1].comm_bwd_ms == ev.stages[q].comm_fwd_ms
    assert [s.compute_ms for s in tv.stages] == [s.compute_ms for s in ev.stages]


@st.composite
def with_unused_gpu(draw: st.DrawFn) -> tuple[dict, dict, dict]:
    """A case and the same instance with one more GPU (anywhere in the list, linked at
    random), which the plan does not use."""
    d, p = draw(cases(shape_errors=True))
    bigger = copy.deepcopy(d)
    new = {"id": "new", "peak_tflops": draw(st.sampled_from([50.0, 1.0, 2000.0])),
           "memory_gb": draw(st.sampled_from([80.0, 1.0, 500.0])), "idle_w": 1.0,
           "active_w": draw(st.sampled_from([300.0, 1.0, 1000.0]))}
    bigger["gpus"].insert(draw(st.integers(0, len(d["gpus"]))), new)  # shifts indices too
    for g in d["gpus"]:
        for s, t in ((g["id"], "new"), ("new", g["id"])):
            if draw(st.booleans()):
                bigger["links"].append({"src": s, "dst": t,
                                        "bandwidth_gbps": draw(st.sampled_from([10.0, 400.0])),
                                        "latency_ms": draw(st.sampled_from([1.0, 0.0, 50.0]))})
    return d, bigger, p


@PROFILE
@given(with_unused_gpu())
def test_adding_an_unused_gpu_changes_nothing(case: tuple[dict, dict, dict]) -> None:
    """A GPU the plan does not use cannot change its cost (nor its violations)."""
    d, bigger, p = case
    plan = Plan.from_dict(p)
    ev = evaluate(Instance.from_dict(d), plan)
    ev2 = evaluate(Instance.from_dict(bigger), plan)
    assert same(ev.t_iter_ms, ev2.t_iter_ms, 1e-12) and same(ev.e_iter_j, ev2.e_iter_j, 1e-12)
    assert same(ev.objective, ev2.objective, 1e-12)
    assert [s.tau_ms for s in ev.stages] == [s.tau_ms for s in ev2.stages]
    # The stage-count bound min(N, L) may grow with N; every other verdict is the same.
    assert [k for k in kinds(ev) if k != "stage_count"] == [
        k for k in kinds(ev2) if k != "stage_count"]


@PROFILE
@given(cases(), st.sampled_from([2.0, 0.5, 3.0, 10.0]))
def test_scaling_flops_scales_compute_only(case: tuple[dict, dict], k: float) -> None:
    d, p = case
    inst, plan = Instance.from_dict(d), Plan.from_dict(p)
    fast = copy.deepcopy(d)
    for g in fast["gpus"]:
        g["peak_tflops"] *= k
    ev, ev2 = evaluate(inst, plan), evaluate(Instance.from_dict(fast), plan)
    for s, s2 in zip(ev.stages, ev2.stages, strict=True):
        assert s2.compute_ms == pytest.approx(s.compute_ms / k, rel=1e-12)
        assert s2.comm_fwd_ms == s.comm_fwd_ms and s2.comm_bwd_ms == s.comm_bwd_ms
        assert s2.memory_gb == s.memory_gb
    assert kinds(ev) == kinds(ev2)
    if plan.q == 1:  # no communication: T_iter is compute alone
        assert ev2.t_iter_ms == pytest.approx(ev.t_iter_ms / k, rel=1e-12)


@PROFILE
@given(cases(overhead=True))
def test_iteration_time_bounds(case: tuple[dict, dict]) -> None:
    """M * max tau <= T_iter <= M * sum tau, and E_iter >= T_iter * sum idle."""
    d, p = case
    inst, plan = Instance.from_dict(d), Plan.from_dict(p)
    ev = evaluate(inst, plan)
    if not math.isfinite(ev.t_iter_ms):
        assert any(v.kind == "missing_link" for v in ev.violations)
        return
    M = inst.micro_batches
    taus = [s.tau_ms for s in ev.stages]
    assert ev.t_iter_ms >= M * max(taus) * (1 - 1e-12)
    assert ev.t_iter_ms <= M * sum(taus) * (1 + 1e-12)
    idle = sum(g["idle_w"] for g in d["gpus"] if g["id"] in plan.gpus)
    assert ev.e_iter_j >= ev.t_iter_ms / 1e3 * idle * (1 - 1e-12)
    assert ev.bottleneck_stage == taus.index(max(taus))


@PROFILE
@given(cases())
def test_more_bandwidth_never_slows_a_plan(case: tuple[dict, dict]) -> None:
    d, p = case
    wide = copy.deepcopy(d)
    for e in wide["links"]:
        e["bandwidth_gbps"] *= 2
    plan = Plan.from_dict(p)
    t1 = evaluate(Instance.from_dict(d), plan).t_iter_ms
    t2 = evaluate(Instance.from_dict(wide), plan).t_iter_ms
    assert not t2 > t1
    if math.isfinite(t1) and plan.q > 1:
        assert t2 < t1  # every boundary transfer has a bandwidth term, which halves


@PROFILE
@given(cases())
def test_more_memory_never_breaks_a_plan(case: tuple[dict, dict]) -> None:
    d, p = case
    roomy = copy.deepcopy(d)
    for g in roomy["gpus"]:
        g["memory_gb"] *= 1.5
    plan = Plan.from_dict(p)
    before = evaluate(Instance.from_dict(d), plan).violations
    after = evaluate(Instance.from_dict(roomy), plan).violations
    assert [v.kind for v in before if v.kind != "memory"] == [
        v.kind for v in after if v.kind != "memory"]
    # Memory violations can only disappear; the ones left are smaller.
    over = {v.stage: v.amount for v in before if v.kind == "memory"}
    for v in after:
        if v.kind == "memory":
            assert v.stage in over and v.amount < over[v.stage]


@PROFILE
@given(cases())
def test_chromosome_round_trip(case: tuple[dict, dict]) -> None:
    d, p = case
    inst, plan = Instance.from_dict(d), Plan.from_dict(p)
    x = plan.to_chromosome(inst)
    assert len(x) == inst.layers
    assert Plan.from_chromosome(inst, x) == plan


@PROFILE
@given(instances(overhead=True))
def test_instance_round_trip(d: dict) -> None:
    inst = Instance.from_dict(d)
    again = Instance.from_dict(inst.to_dict())
    assert again.to_dict() == inst.to_dict() and again.fingerprint == inst.fingerprint
    c, c2 = inst.coefficients(), again.coefficients()
    np.testing.assert_array_equal(c.comp_ms, c2.comp_ms)
    np.testing.assert_array_equal(c.comm_ms, c2.comm_ms)
