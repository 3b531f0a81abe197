"""The MA finds the exact optimum (10 of 10 seeds) wherever f(N, L) <= 2e6.

The optimum comes from the independent reference enumerator
(tests/reference_model.py: every ordered GPU tuple and composition priced), its
plan re-priced by the scalar evaluator. Each MA run uses the default parameters and stopping
rules, plus a stop at the known optimum, which only cuts a run short once it
has succeeded (the criteria draw no random numbers).
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import reference_optimum

from geoplan.cost import evaluate
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.space import plan_space_size
from heuristics.memetic import MemeticParams, run_memetic
from heuristics.memetic.stop import TargetObjective

SEEDS = range(10)


def brute_force(inst: Instance) -> tuple[float, Plan, int]:
    """(optimum, an optimal plan, number of plans enumerated) by the reference enumerator."""
    best, plan, r = reference_optimum(inst)
    assert plan is not None, "instance without a feasible plan"
    assert np.isclose(evaluate(inst, plan).objective, best)
    return best, plan, r.plans


def _hits(inst: Instance, optimum: float) -> list[float]:
    params = MemeticParams()
    misses = []
    for seed in SEEDS:
        r = run_memetic(inst, seed, params, stop_when=TargetObjective(optimum))
        assert r.objective >= optimum * (1 - 1e-9)  # nothing beats the enumerator
        if r.objective > optimum * (1 + 1e-9):
            misses.append(r.objective / optimum - 1)
    return misses


def _generated(family: str, n: int, layers: int, seed: int, lam: float) -> Instance:
    return Instance.from_dict(by_family(family, n, layers, seed, lam=lam))


def test_enumerator_counts_the_whole_space(three_gpu: Instance) -> None:
    _, _, total = brute_force(three_gpu)
    assert total == plan_space_size(3, 12)


def test_three_gpu_optimum(three_gpu: Instance) -> None:
    optimum, _, _ = brute_force(three_gpu)
    assert _hits(three_gpu, optimum) == []


# Quick set: the cases that were hardest while the MA was developed (f <= 636,576).
QUICK = [
    ("metro", 5, 16, 1, 1.0),
    ("paper", 5, 16, 4, 1.0),
    ("metro", 7, 9, 1, 0.5),
    ("geo", 6, 12, 2, 0.5),
    ("paper", 6, 12, 3, 0.0),
]


@pytest.mark.parametrize(("family", "n", "layers", "seed", "lam"), QUICK)
def test_optimum_ten_of_ten_quick(family: str, n: int, layers: int, seed: int,
                                  lam: float) -> None:
    inst = _generated(family, n, layers, seed, lam)
    assert plan_space_size(n, layers) <= 2e6
    optimum, _, _ = brute_force(inst)
    assert _hits(inst, optimum) == []


SWEEP = [
    (family, n, layers, seed, lam)
    for family in ("geo", "metro", "paper")
    for n, layers in ((6, 12), (7, 9), (5, 16), (8, 8), (4, 24))
    for seed in (1, 2, 3, 4)
    for lam in (1.0, 0.5, 0.0)
]


@pytest.mark.slow
@pytest.mark.parametrize(("family", "n", "layers", "seed", "lam"), SWEEP)
def test_optimum_ten_of_ten_sweep(family: str, n: int, layers: int, seed: int,
                                  lam: float) -> None:
    inst = _generated(family, n, layers, seed, lam)
    assert plan_space_size(n, layers) <= 2e6
    optimum, _, _ = brute_force(inst)
    assert _hits(inst, optimum) == []
