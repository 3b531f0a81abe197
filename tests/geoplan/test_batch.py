"""The batch evaluator against the scalar evaluator and the validator."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import reference_model as ref

from geoplan.cost import evaluate
from geoplan.cost.batch import FEASIBLE, INVALID, MEMORY, NO_LINK, BatchEvaluator
from geoplan.errors import InputError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan

REL = 1e-9


def random_chromosomes(rng: random.Random, d: dict, count: int) -> np.ndarray:
    """Half decodable plans (distinct GPUs, contiguous), half arbitrary GPU strings."""
    L = d["model"]["layers"]
    ids = [g["id"] for g in d["gpus"]]
    rows = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.6:
            p = ref.random_plan(rng, d)
            row = [ids.index(s["gpu"]) for s in p["stages"] for _ in range(s["layers"])]
        elif kind < 0.95:
            row = [rng.randrange(len(ids)) for _ in range(L)]
        else:
            row = [rng.randrange(len(ids)) for _ in range(L)]
            row[rng.randrange(L)] = rng.choice([-1, len(ids)])  # out of range
        rows.append(row)
    return np.array(rows, dtype=np.int64)


def expected_status(violations: list[str]) -> int:
    if "missing_link" in violations:
        return NO_LINK
    if "memory" in violations:
        return MEMORY
    assert not violations, violations  # a decodable chromosome breaks nothing else
    return FEASIBLE


def close(a: float, b: float) -> bool:
    if not (math.isfinite(a) and math.isfinite(b)):
        return not math.isfinite(a) and not math.isfinite(b)
    return math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


def check_against_scalar(inst: Instance, X: np.ndarray, u: int | None = None) -> dict[int, int]:
    res = BatchEvaluator(inst, micro_batch_size=u).evaluate(X)
    seen = {FEASIBLE: 0, INVALID: 0, NO_LINK: 0, MEMORY: 0}
    for k, x in enumerate(X):
        st = int(res.status[k])
        seen[st] += 1
        try:
            plan = Plan.from_chromosome(inst, x, micro_batch_size=u)
        except InputError:
            assert st == INVALID, x
            assert math.isinf(res.objective[k])
            continue
        ev = evaluate(inst, plan)
        assert st == expected_status([v.kind for v in ev.violations]), (x, ev.violations)
        assert bool(res.feasible[k]) == ev.feasible
        assert close(float(res.t_iter_ms[k]), ev.t_iter_ms), (x, res.t_iter_ms[k], ev.t_iter_ms)
        assert close(float(res.e_iter_j[k]), ev.e_iter_j), (x, res.e_iter_j[k], ev.e_iter_j)
        if ev.feasible:
            assert close(float(res.objective[k]), ev.objective)
        else:
            assert math.isinf(res.objective[k]) and res.objective[k] > 0
    return seen


def test_batch_agrees_with_scalar_on_thousands_of_plans() -> None:
    rng = random.Random(2024)
    total = {FEASIBLE: 0, INVALID: 0, NO_LINK: 0, MEMORY: 0}
    for k in range(40):
        d = ref.random_instance(rng, lam=[0.0, 1.0, 0.5, 0.3][k % 4])
        inst = Instance.from_dict(d)
        seen = check_against_scalar(inst, random_chromosomes(rng, d, 100))
        for s, n in seen.items():
            total[s] += n
    assert sum(total.values()) == 4000
    # Every status occurs often enough for the agreement to mean something.
    assert min(total.values()) >= 200, total


def test_batch_with_baseline_normalisers(hand3: Instance) -> None:
    # lambda 0.5 and no normalisers: both evaluators must take the same baseline pair.
    inst = hand3.with_objective(lam=0.5)
    d = inst.to_dict()
    seen = check_against_scalar(inst, random_chromosomes(random.Random(1), d, 300))
    assert seen[FEASIBLE] > 0
    be = BatchEvaluator(inst)
    ev = evaluate(inst, Plan.from_pairs([("a", 4), ("b", 2)]))
    assert (be.instance.objective.t_ref_ms, be.instance.objective.e_ref_j) == (
        ev.t_ref_ms, ev.e_ref_j)


def test_hand_worked_rows(hand3: Instance) -> None:
    # Rows: [a:4, b:2] (T 62 ms, E 14.56 J); [a:3, b:2, c:1] (86 ms, 19.16 J);
    # [b:2, a:4] (memory); [a:3, c:3] (no link); [a, b, a, ...] (non-contiguous).
    X = np.array([[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 2], [1, 1, 0, 0, 0, 0],
                  [0, 0, 0, 2, 2, 2], [0, 1, 0, 0, 0, 0]])
    r = BatchEvaluator(hand3).evaluate(X)
    assert r.status.tolist() == [FEASIBLE, FEASIBLE, MEMORY, NO_LINK, INVALID]
    assert r.t_iter_ms[:3] == pytest.approx([62.0, 86.0, 62.0], rel=1e-12)
    assert r.e_iter_j[:3] == pytest.approx([14.56, 19.16, 14.56], rel=1e-12)
    assert r.objective[:2] == pytest.approx([62.0, 86.0], rel=1e-12)
    assert np.isinf(r.objective[2:]).all()
    assert r.feasible.tolist() == [True, True, False, False, False]


def test_micro_batch_size_argument(hand_u2: Instance) -> None:
    d = hand_u2.to_dict()
    X = random_chromosomes(random.Random(9), d, 200)
    check_against_scalar(hand_u2, X, u=4)
    # [x:3, y:1] at u = 4 (see test_cost.py): 40.5 ms, 3.495 J, both stages over memory.
    r = BatchEvaluator(hand_u2, micro_batch_size=4).evaluate(np.array([[0, 0, 0, 1]]))
    assert r.t_iter_ms[0] == pytest.approx(40.5) and r.e_iter_j[0] == pytest.approx(3.495)
    assert r.status[0] == MEMORY


def test_micro_batch_size_not_dividing_the_batch_is_refused(hand_u2: Instance) -> None:
    # B = 12 and u = 5: no plan is feasible at that micro-batch size (validator: micro_batch),
    # so the batch evaluator must not price rows as feasible.
    with pytest.raises(InputError) as exc:
        BatchEvaluator(hand_u2, micro_batch_size=5)
    assert "micro_batch_size" in exc.value.field


def test_parallel_path_equals_serial(hand3: Instance) -> None:
    rng = random.Random(4)
    X = random_chromosomes(rng, hand3.to_dict(), 5000)
    serial = BatchEvaluator(hand3, parallel_threshold=10**9).evaluate(X)
    par = BatchEvaluator(hand3, parallel_threshold=1).evaluate(X)
    np.testing.assert_array_equal(serial.status, par.status)
    np.testing.assert_array_equal(serial.objective, par.objective)
    np.testing.assert_array_equal(serial.t_iter_ms, par.t_iter_ms)
    np.testing.assert_array_equal(serial.e_iter_j, par.e_iter_j)


def test_stage_form_equals_chromosome_form() -> None:
    rng = random.Random(8)
    for _ in range(20):
        d = ref.random_instance(rng)
        inst = Instance.from_dict(d)
        plans = [ref.random_plan(rng, d) for _ in range(50)]
        qmax = max(len(p["stages"]) for p in plans)
        ids = [g["id"] for g in d["gpus"]]
        G = np.zeros((50, qmax), np.int64)
        C = np.zeros((50, qmax), np.int64)
        Q = np.array([len(p["stages"]) for p in plans])
        for k, p in enumerate(plans):
            for j, s in enumerate(p["stages"]):
                G[k, j], C[k, j] = ids.index(s["gpu"]), s["layers"]
        X = np.array([np.repeat(G[k, : Q[k]], C[k, : Q[k]]) for k in range(50)])
        be = BatchEvaluator(inst)
        a, b = be.evaluate_stages(G, C, Q), be.evaluate(X)
        np.testing.assert_array_equal(a.status, b.status)
        np.testing.assert_allclose(a.objective, b.objective, rtol=1e-12)
        np.testing.assert_allclose(a.t_iter_ms, b.t_iter_ms, rtol=1e-12)
        assert be.evaluations == 100


def test_shapes(hand3: Instance) -> None:
    be = BatchEvaluator(hand3)
    one = be.evaluate(np.array([0, 0, 0, 0, 1, 1]))  # a 1-D chromosome is one row
    assert one.objective.shape == (1,) and one.objective[0] == pytest.approx(62.0)
    with pytest.raises(ValueError):
        be.evaluate(np.zeros((3, 5), np.int64))  # L = 6
    empty = be.evaluate(np.zeros((0, 6), np.int64))
    assert empty.objective.shape == (0,)


def test_single_micro_batch_missing_link_is_infinite_not_nan(hand3_dict: dict) -> None:
    # B = u = 1 (M = 1): T_iter = sum tau, with no (M - 1) * max tau term. A missing link makes
    # it inf in both evaluators; 0 * inf must not turn it into nan.
    hand3_dict["training"] = {"batch_size": 1, "micro_batch_size": 1}
    inst = Instance.from_dict(hand3_dict)
    ev = evaluate(inst, Plan.from_pairs([("a", 3), ("c", 3)]))
    r = BatchEvaluator(inst).evaluate(np.array([[0, 0, 0, 2, 2, 2], [0, 0, 0, 0, 1, 1]]))
    assert ev.t_iter_ms == math.inf and r.t_iter_ms[0] == math.inf
    assert r.status[0] == NO_LINK
    # A feasible plan at M = 1: T = tau_1 + tau_2 = 7 + 6 = 13 ms (see test_cost.py).
    assert r.t_iter_ms[1] == pytest.approx(13.0)
    assert evaluate(inst, Plan.from_pairs([("a", 4), ("b", 2)])).t_iter_ms == pytest.approx(13.0)


def test_throughput_bench_samples_decodable_plans_and_runs() -> None:
    """bench/throughput.py: its MA-style sampler yields only contiguous, distinct-GPU
    chromosomes (so the rate is measured on real plans), and a tiny measurement runs."""
    from bench.throughput import measure, sample_population

    rng = np.random.default_rng(0)
    X = sample_population(rng, 8, 12, 300)
    qs = set()
    for x in X:
        groups = [int(g) for k, g in enumerate(x) if k == 0 or x[k - 1] != g]
        assert len(groups) == len(set(groups)) and all(0 <= g < 8 for g in groups)
        qs.add(len(groups))
    assert min(qs) == 1 and max(qs) == 8  # every stage count occurs
    r = measure(n_gpus=8, layers=12, population=32, runs=3, pools=2, min_seconds=0.01,
                scalar_plans=10)
    assert (r["n_gpus"], r["layers"], r["population"], r["runs"]) == (8, 12, 32, 3)
    assert r["batch_plans_per_s"] > 0 and r["scalar_plans_per_s"] > 0
    # The median of the runs lies between their extremes.
    assert r["batch_min_plans_per_s"] <= r["batch_plans_per_s"] <= r["batch_max_plans_per_s"]
    # The compiled kernel beats the explaining scalar evaluator (by orders of magnitude;
    # 1x leaves room for a loaded machine).
    assert r["ratio"] > 1
    # Sampled plans are real ones: some fit, and the fraction is a fraction.
    assert 0 < r["feasible_fraction"] <= 1


@pytest.mark.parametrize(("cap_bytes", "fits"), [(516e6, True), (516e6 - 1.0, False),
                                                 (516e6 + 1.0, True)])
def test_memory_boundary_is_inclusive_in_both_evaluators(hand3_dict: dict, cap_bytes: float,
                                                         fits: bool) -> None:
    # [a:4, b:2]: b is the last stage and needs 2 * 198e6 + 120e6 = 516e6 bytes exactly
    # (test_cost.py). Mem_q <= M~ is feasible: equality fits, one byte less does not.
    hand3_dict["gpus"][1].update(memory_gb=cap_bytes / 1e9, memory_util=1.0)
    inst = Instance.from_dict(hand3_dict)
    cap = float(inst.coefficients().mem_cap[1])
    assert (cap >= 516e6) == fits  # the GB round trip keeps the boundary's side
    r = BatchEvaluator(inst).evaluate(np.array([[0, 0, 0, 0, 1, 1]]))
    ev = evaluate(inst, Plan.from_pairs([("a", 4), ("b", 2)]))
    assert ev.feasible is fits
    assert int(r.status[0]) == (FEASIBLE if fits else MEMORY)
    stages = BatchEvaluator(inst).evaluate_stages(np.array([[0, 1]]), np.array([[4, 2]]),
                                                  np.array([2]))
    assert int(stages.status[0]) == int(r.status[0])
