"""Stage-boundary-aware best-cut crossover (paper 5.3, Alg. 2, Figure 4)."""

from __future__ import annotations

from typing import Any

import numpy as np

from geoplan.cost import evaluate
from geoplan.cost.batch import BatchEvaluator
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from heuristics.memetic.crossover import best_cut_crossover, candidate_cuts, crossover_pair
from heuristics.memetic.encoding import boundaries, is_valid
from heuristics.memetic.population import initial_population


def _four_gpus(layers: int = 6) -> Instance:
    """Four GPUs of different speeds, all linked, roomy memory."""
    d: dict[str, Any] = {
        "name": "x4",
        "gpus": [{"id": f"g{i}", "peak_tflops": t, "memory_gb": 80.0, "idle_w": 50.0,
                  "active_w": 300.0} for i, t in enumerate([300.0, 200.0, 120.0, 80.0])],
        "links": [{"src": f"g{i}", "dst": f"g{j}", "bandwidth_gbps": 5.0 + i + 2 * j,
                   "latency_ms": 1.0 + i} for i in range(4) for j in range(4) if i != j],
        "model": {"layers": layers, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 32, "micro_batch_size": 1},
    }
    return Instance.from_dict(d)


def _price(inst: Instance, x: np.ndarray) -> float:
    if not is_valid(x, inst.n):
        return float("inf")
    e = evaluate(inst, Plan.from_chromosome(inst, x))
    return e.objective if e.feasible else float("inf")


# Figure 4: L = 6, B1 = {2}, B2 = {3}, candidate cuts B1 ∪ B2 = {2, 3}.
P1 = np.array([0, 0, 1, 1, 1, 1])
P2 = np.array([2, 2, 2, 3, 3, 3])


def test_candidate_cuts_figure4() -> None:
    assert candidate_cuts(P1, P2).tolist() == [2, 3]
    assert candidate_cuts(P1, P2, full=True).tolist() == [1, 2, 3, 4, 5]


def test_best_cut_is_chosen_in_both_directions_figure4() -> None:
    inst = _four_gpus()
    ev = BatchEvaluator(inst)
    children, obj = crossover_pair(P1, P2, ev)
    assert children.shape == (2, 6)
    for d, (first, second) in enumerate(((P1, P2), (P2, P1))):
        cands = [np.concatenate([first[:b], second[b:]]) for b in (2, 3)]
        prices = [_price(inst, c) for c in cands]
        best = int(np.argmin(prices))
        assert children[d].tolist() == cands[best].tolist()
        assert np.isclose(obj[d], prices[best])


def test_full_scan_considers_cuts_off_the_boundaries() -> None:
    inst = _four_gpus()
    ev = BatchEvaluator(inst)
    children, obj = crossover_pair(P1, P2, ev, full=True)
    for d, (first, second) in enumerate(((P1, P2), (P2, P1))):
        cands = [np.concatenate([first[:b], second[b:]]) for b in range(1, 6)]
        prices = [_price(inst, c) for c in cands]
        assert np.isclose(obj[d], min(prices))
        assert children[d].tolist() == cands[int(np.argmin(prices))].tolist()


def test_children_that_break_distinctness_are_rejected() -> None:
    inst = _four_gpus(4)
    ev = BatchEvaluator(inst)
    p1, p2 = np.array([0, 1, 1, 1]), np.array([1, 1, 1, 0])
    # p1 | p2 at either cut (1 or 3) repeats GPU 0: [0, 1, 1, 0]; no repair, no child.
    children, obj = crossover_pair(p1, p2, ev)
    assert np.isinf(obj[0])
    assert children[1].tolist() == [1, 1, 1, 1] and np.isfinite(obj[1])


def test_single_stage_parents_without_cuts_give_no_children() -> None:
    ev = BatchEvaluator(_four_gpus(4))
    children, obj = crossover_pair(np.zeros(4, np.int64), np.ones(4, np.int64), ev)
    assert children.shape == (0, 4) and obj.shape == (0,)


def test_batch_children_are_the_best_feasible_cuts_of_their_pair() -> None:
    inst = Instance.from_dict(by_family("metro", 8, 16, 3))
    ev = BatchEvaluator(inst)
    rng = np.random.default_rng(0)
    pop = initial_population(rng, ev, 60, 100_000)
    pairs = rng.integers(0, pop.size, size=(40, 2))
    full = rng.random(40) < 0.3
    children, obj, pair = best_cut_crossover(pop.X, pairs, full, ev)
    expected_rows = 0
    for p in range(40):
        a, b = pop.X[pairs[p, 0]], pop.X[pairs[p, 1]]
        cuts = np.arange(1, 16) if full[p] else np.union1d(boundaries(a), boundaries(b))
        if cuts.size == 0:
            assert p not in pair
            continue
        expected_rows += 2
        got = np.flatnonzero(pair == p)
        assert got.size == 2
        for row, (f, s) in zip(got, ((a, b), (b, a)), strict=True):
            prices = [_price(inst, np.concatenate([f[:c], s[c:]])) for c in cuts]
            assert np.isclose(obj[row], min(prices)) or (np.isinf(obj[row]) and
                                                        np.isinf(min(prices)))
            if np.isfinite(obj[row]):
                assert is_valid(children[row], inst.n)
                assert np.isclose(_price(inst, children[row]), obj[row])
    assert children.shape[0] == expected_rows
