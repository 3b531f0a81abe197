"""Initial population: sampling law, feasibility, distinctness, warm starts, bounded tries."""

from __future__ import annotations

from typing import Any

import numpy as np

from geoplan.cost import evaluate
from geoplan.cost.batch import BatchEvaluator
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from heuristics.memetic.encoding import decode, is_valid
from heuristics.memetic.population import initial_population, sample_chromosomes


def _instance(mem_gb: list[float], links: list[tuple[int, int]] | None = None,
              layers: int = 12) -> Instance:
    """Equal GPUs with the given memories; all links, or only ``links`` (both directions)."""
    n = len(mem_gb)
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j] if links is None else \
        [p for i, j in links for p in ((i, j), (j, i))]
    d: dict[str, Any] = {
        "name": "pop",
        "gpus": [{"id": f"g{i}", "peak_tflops": 100.0 + 10 * i, "memory_gb": m,
                  "idle_w": 50.0, "active_w": 300.0} for i, m in enumerate(mem_gb)],
        "links": [{"src": f"g{i}", "dst": f"g{j}", "bandwidth_gbps": 10.0, "latency_ms": 2.0}
                  for i, j in pairs],
        "model": {"layers": layers, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 32, "micro_batch_size": 1},
    }
    return Instance.from_dict(d)


def test_samples_are_contiguous_and_follow_the_stage_count_law() -> None:
    rng = np.random.default_rng(0)
    n, L, k = 5, 9, 6000
    X = sample_chromosomes(rng, k, n, L)
    assert X.shape == (k, L)
    assert all(is_valid(x, n) for x in X[:500])
    q = np.array([len(decode(x)[0]) for x in X])
    # Q uniform on 1..min(L, N) = 1..5: each about k/5 = 1200.
    counts = np.bincount(q, minlength=6)[1:]
    assert counts.min() > 1000 and counts.max() < 1400
    # Every GPU appears as first stage about equally often (random order).
    first = np.bincount(X[:, 0], minlength=n)
    assert first.min() > 1000


def test_population_is_feasible_distinct_and_sorted(three_gpu) -> None:
    ev = BatchEvaluator(three_gpu)
    pop = initial_population(np.random.default_rng(1), ev, 20, 10_000)
    assert pop.size == 20
    assert len({x.tobytes() for x in pop.X}) == 20
    assert np.all(np.diff(pop.objective) >= 0)
    for x, obj in zip(pop.X, pop.objective, strict=True):
        e = evaluate(three_gpu, Plan.from_chromosome(three_gpu, x))
        assert e.feasible and np.isclose(e.objective, obj)
    # The a-b-c chain has no a-c link: such samples were rejected.
    assert pop.rejected["missing link"] > 0


def test_small_plan_space_gives_a_smaller_population_not_a_hang(three_gpu) -> None:
    ev = BatchEvaluator(three_gpu)
    pop = initial_population(np.random.default_rng(1), ev, 10_000, 20_000)
    # The three_gpu space (a-b-c chain, L=12) has fewer feasible plans than 10,000.
    assert 0 < pop.size < 10_000
    assert pop.exhausted and pop.samples == 20_000
    # With the default patience the sampler notices that only duplicates come back.
    sat = initial_population(np.random.default_rng(1), ev, 200, 10**7)
    assert sat.saturated and not sat.exhausted and sat.samples < 100_000
    assert sat.size == pop.size  # every feasible plan was found either way


def test_warm_starts_go_first_and_infeasible_ones_are_rejected(three_gpu) -> None:
    ev = BatchEvaluator(three_gpu)
    good = Plan.from_pairs([("a", 6), ("b", 6)]).to_chromosome(three_gpu)
    bad = Plan.from_pairs([("a", 6), ("c", 6)]).to_chromosome(three_gpu)  # no a-c link
    pop = initial_population(np.random.default_rng(2), ev, 5, 10_000, np.stack([bad, good]))
    assert pop.warm_offered == 2 and pop.warm_accepted == 1
    assert any(np.array_equal(x, good) for x in pop.X)
    assert not any(np.array_equal(x, bad) for x in pop.X)


def test_almost_infeasible_instance_has_a_clear_outcome() -> None:
    # Each GPU holds at most ~8 layers, and only g0-g1 are linked: the only feasible
    # plans are two-stage pipelines on g0, g1 (a handful among f(6, 12) = 636,576).
    inst = _instance([6.0] * 6, links=[(0, 1)])
    ev = BatchEvaluator(inst)
    few = initial_population(np.random.default_rng(0), ev, 200, 100_000)
    assert 0 < few.size < 200 and few.exhausted
    assert all(set(decode(x)[0]) == {0, 1} for x in few.X)
    none = initial_population(np.random.default_rng(0), ev, 200, 50)
    assert none.size == 0
    msg = none.failure_message()
    assert "no feasible plan among 50 sampled chromosomes" in msg and "memory" in msg


def test_deadline_stops_sampling(three_gpu) -> None:
    ev = BatchEvaluator(three_gpu)
    pop = initial_population(np.random.default_rng(0), ev, 200, 10**9, deadline=0.0)
    assert pop.size == 0 and pop.timed_out
    assert "time limit" in pop.failure_message()
