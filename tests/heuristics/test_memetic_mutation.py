"""Contiguity-preserving mutations (paper 5.4, Alg. 3, Figure 5) and the memory revert."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from geoplan.cost.batch import BatchEvaluator
from geoplan.model.instance import Instance
from heuristics.memetic.encoding import decode, is_valid, to_stages
from heuristics.memetic.mutation import (
    REASSIGN,
    SHIFT,
    SWAP,
    apply_mutations,
    boundary_shift,
    draw_mutations,
    gpu_reassign,
    mutate,
    stage_swap,
)
from heuristics.memetic.population import sample_chromosomes


def _instance(mem_gb: list[float], layers: int = 8) -> Instance:
    n = len(mem_gb)
    d: dict[str, Any] = {
        "name": "mut",
        "gpus": [{"id": f"g{i}", "peak_tflops": 150.0, "memory_gb": m, "idle_w": 50.0,
                  "active_w": 300.0} for i, m in enumerate(mem_gb)],
        "links": [{"src": f"g{i}", "dst": f"g{j}", "bandwidth_gbps": 10.0, "latency_ms": 2.0}
                  for i in range(n) for j in range(n) if i != j],
        "model": {"layers": layers, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 32, "micro_batch_size": 1},
    }
    return Instance.from_dict(d)


# Figure 5 style parent: L = 8, stages (g0: 3), (g1: 2), (g2: 3).
PARENT = np.array([0, 0, 0, 1, 1, 2, 2, 2])


def test_boundary_shift_moves_the_left_stages_last_layer_right() -> None:
    assert boundary_shift(PARENT, 3).tolist() == [0, 0, 1, 1, 1, 2, 2, 2]
    assert boundary_shift(PARENT, 5).tolist() == [0, 0, 0, 1, 2, 2, 2, 2]
    # A one-layer left stage disappears; contiguity holds.
    assert boundary_shift(np.array([3, 1, 1]), 1).tolist() == [1, 1, 1]
    with pytest.raises(ValueError):
        boundary_shift(PARENT, 2)  # not a boundary


def test_stage_swap_exchanges_whole_stages() -> None:
    assert stage_swap(PARENT, 0, 2).tolist() == [2, 2, 2, 1, 1, 0, 0, 0]
    assert stage_swap(PARENT, 0, 1).tolist() == [1, 1, 0, 0, 0, 2, 2, 2]


def test_gpu_reassignment_uses_an_inactive_gpu() -> None:
    assert gpu_reassign(PARENT, 1, 3).tolist() == [0, 0, 0, 3, 3, 2, 2, 2]
    with pytest.raises(ValueError):
        gpu_reassign(PARENT, 1, 2)  # GPU 2 is active


def test_batch_moves_match_the_scalar_operators_and_preserve_validity() -> None:
    rng = np.random.default_rng(5)
    n, L = 6, 10
    X = sample_chromosomes(rng, 3000, n, L)
    S = to_stages(X)
    m = draw_mutations(rng, S, n)
    Y = apply_mutations(S, m, L)
    for r in range(X.shape[0]):
        x, y = X[r], Y[r]
        assert is_valid(y, n)
        q = len(decode(x)[0])
        if not m.active[r]:
            assert y.tolist() == x.tolist()
            assert (q == 1) if m.op[r] != REASSIGN else (q == n)
        elif m.op[r] == SHIFT:
            b = int(np.cumsum(decode(x)[1])[m.a[r]])  # position of the drawn boundary
            assert y.tolist() == boundary_shift(x, b).tolist()
        elif m.op[r] == SWAP:
            assert m.a[r] != m.b[r]
            assert y.tolist() == stage_swap(x, m.a[r], m.b[r]).tolist()
        else:
            assert m.b[r] not in decode(x)[0]
            assert y.tolist() == gpu_reassign(x, m.a[r], m.b[r]).tolist()
    # One operator drawn uniformly: about 1000 of each.
    counts = np.bincount(m.op, minlength=3)
    assert counts.min() > 850 and counts.max() < 1150


def test_reassignment_draws_inactive_gpus_uniformly() -> None:
    x = np.array([[0, 0, 1, 1]] * 6000)  # GPUs 2..5 inactive out of N = 6
    m = draw_mutations(np.random.default_rng(1), to_stages(x), 6)
    new = m.b[m.op == REASSIGN]
    counts = np.bincount(new, minlength=6)
    assert counts[:2].sum() == 0
    assert counts[2:].min() > 0.2 * new.size


def test_memory_violating_mutant_reverts_to_its_parent() -> None:
    # g3 cannot hold even one layer; every other GPU holds any stage of this plan.
    inst = _instance([80.0, 80.0, 80.0, 0.5])
    ev = BatchEvaluator(inst)
    X = np.tile(PARENT, (600, 1))
    obj = ev.evaluate(X).objective
    Y, yobj, m, reverted = mutate(np.random.default_rng(0), X, obj, ev)
    to_g3 = m.op == REASSIGN  # the only inactive GPU is g3
    assert to_g3.any() and np.array_equal(reverted, to_g3)
    assert np.array_equal(Y[to_g3], X[to_g3]) and np.array_equal(yobj[to_g3], obj[to_g3])
    kept = ~to_g3
    assert np.all(np.isfinite(yobj[kept]))
    assert np.allclose(ev.evaluate(Y).objective, yobj)


def test_single_stage_offspring_only_change_by_reassignment() -> None:
    inst = _instance([80.0, 80.0, 80.0])
    ev = BatchEvaluator(inst)
    X = np.zeros((300, 8), np.int64)
    obj = ev.evaluate(X).objective
    Y, _, m, _ = mutate(np.random.default_rng(3), X, obj, ev)
    changed = np.any(Y != X, axis=1)
    assert np.array_equal(changed, m.op == REASSIGN)
