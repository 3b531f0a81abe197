"""Chromosome encoding and decoding (paper 5.1, Figure 3)."""

from __future__ import annotations

import numpy as np
import pytest

from geoplan.model.plan import Plan
from heuristics.memetic.encoding import (
    boundaries,
    boundary_mask,
    decode,
    encode,
    from_stages,
    is_valid,
    row_keys,
    to_stages,
)
from heuristics.memetic.population import sample_chromosomes

# Figure 3 style: L = 8 layers, Q = 3 stages on GPUs 2, 0, 1 with 3, 2, 3 layers.
FIG3 = np.array([2, 2, 2, 0, 0, 1, 1, 1])


def test_decode_figure3() -> None:
    assert decode(FIG3) == ([2, 0, 1], [3, 2, 3])
    assert encode([2, 0, 1], [3, 2, 3]).tolist() == FIG3.tolist()
    assert boundaries(FIG3).tolist() == [3, 5]


def test_decode_matches_plan_from_chromosome(three_gpu) -> None:
    x = np.array([0] * 5 + [1] * 4 + [2] * 3)
    plan = Plan.from_chromosome(three_gpu, x)
    gpus, counts = decode(x)
    assert [three_gpu.gpu_ids[g] for g in gpus] == list(plan.gpus)
    assert counts == list(plan.layer_counts)


@pytest.mark.parametrize(
    ("x", "ok"),
    [
        ([0, 0, 1, 1], True),
        ([3, 3, 3, 3], True),
        ([0, 1, 0, 0], False),  # GPU 0 in two groups
        ([0, 0, 5, 5], False),  # GPU 5 out of range for N = 4
        ([-1, 0, 0, 0], False),
    ],
)
def test_is_valid(x: list[int], ok: bool) -> None:
    assert is_valid(np.array(x), 4) is ok


def test_encode_drops_zero_stages() -> None:
    assert encode([1, 0, 2], [2, 0, 1]).tolist() == [1, 1, 2]


def test_batch_round_trip() -> None:
    rng = np.random.default_rng(3)
    X = sample_chromosomes(rng, 500, 7, 13)
    S = to_stages(X)
    assert np.array_equal(from_stages(S, 13), X)
    for r in range(0, 500, 37):
        gpus, counts = decode(X[r])
        q = S.q[r]
        assert S.gpus[r, :q].tolist() == gpus
        assert S.counts[r, :q].tolist() == counts
        assert S.counts[r, q:].sum() == 0
    assert np.array_equal(boundary_mask(X)[5], np.isin(np.arange(1, 13), boundaries(X[5])))


def test_row_keys_detect_duplicates() -> None:
    X = np.array([[0, 0, 1], [0, 1, 1], [0, 0, 1]])
    keys = row_keys(X)
    assert keys[0] == keys[2] != keys[1]
