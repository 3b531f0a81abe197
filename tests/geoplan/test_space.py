"""Size of the plan space f(N, L) (paper 6.5) against the contract and brute force."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import reference_model as ref

from geoplan.cost.batch import INVALID, BatchEvaluator
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.model.space import plan_space_size


@pytest.mark.parametrize(
    ("n", "layers", "size"),
    [
        (2, 12, 24),
        (4, 12, 5416),
        (6, 12, 636576),
        (8, 12, 43761264),
        (12, 12, 40864292184),
        (1, 1, 1),
        (1, 12, 1),  # one GPU: one plan
        (3, 1, 3),  # one layer: pick its GPU
    ],
)
def test_values_from_cost_model(n: int, layers: int, size: int) -> None:
    assert plan_space_size(n, layers) == size


def _brute(n: int, layers: int) -> int:
    """Count chromosomes [x_1..x_L] in which every used GPU's layers are contiguous."""
    count = 0
    for x in itertools.product(range(n), repeat=layers):
        groups = [g for g, _ in itertools.groupby(x)]
        count += len(groups) == len(set(groups))
    return count


@pytest.mark.parametrize(("n", "layers"), [(1, 4), (2, 5), (3, 3), (3, 6), (4, 5), (5, 4),
                                           (4, 7), (6, 3)])
def test_matches_brute_enumeration(n: int, layers: int) -> None:
    assert plan_space_size(n, layers) == _brute(n, layers)


def test_stage_enumeration_agrees() -> None:
    # Independently: ordered choices of Q distinct GPUs times compositions of L into Q parts.
    for n in range(1, 6):
        for layers in range(1, 8):
            total = sum(
                len(list(itertools.permutations(range(n), q))) * len(ref.compositions(layers, q))
                for q in range(1, min(n, layers) + 1)
            )
            assert plan_space_size(n, layers) == total


def test_decoders_accept_exactly_the_plan_space() -> None:
    """Every chromosome of a small instance: the batch decoder and Plan.from_chromosome
    accept exactly f(N, L) of them (the contiguous ones)."""
    d = ref.random_instance(random.Random(3), n_gpus=3, layers=6, tight_memory=False)
    inst = Instance.from_dict(d)
    X = np.array(list(itertools.product(range(3), repeat=6)), dtype=np.int64)
    res = BatchEvaluator(inst).evaluate(X)
    assert int(np.sum(res.status != INVALID)) == plan_space_size(3, 6)
    decoded = 0
    for x in X:
        try:
            Plan.from_chromosome(inst, x)
        except ValueError:
            continue
        decoded += 1
    assert decoded == plan_space_size(3, 6)


@pytest.mark.parametrize(("n", "layers"), [(0, 3), (3, 0), (-1, 2)])
def test_non_positive_arguments_raise(n: int, layers: int) -> None:
    with pytest.raises(ValueError):
        plan_space_size(n, layers)
