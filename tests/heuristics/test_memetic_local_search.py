"""Capacity-rebalancing local search (paper 5.5, Alg. 4, Figure 6)."""

from __future__ import annotations

from typing import Any

import numpy as np

from geoplan.cost.batch import BatchEvaluator
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from heuristics.memetic.encoding import StageForm, encode, from_stages, to_stages
from heuristics.memetic.local_search import CapacityTable, local_search, rebalance
from heuristics.memetic.population import initial_population


def _two_gpus(mem_gb: tuple[float, float] = (80.0, 80.0), latency: tuple[float, float] = (2.0, 2.0)
              ) -> Instance:
    """g0 twice as fast as g1 (per-layer compute 1 : 2), L = 12."""
    d: dict[str, Any] = {
        "name": "fig6",
        "gpus": [
            {"id": "g0", "peak_tflops": 200.0, "memory_gb": mem_gb[0], "idle_w": 50.0,
             "active_w": 300.0},
            {"id": "g1", "peak_tflops": 100.0, "memory_gb": mem_gb[1], "idle_w": 50.0,
             "active_w": 300.0},
        ],
        "links": [
            {"src": "g0", "dst": "g1", "bandwidth_gbps": 10.0, "latency_ms": latency[0]},
            {"src": "g1", "dst": "g0", "bandwidth_gbps": 10.0, "latency_ms": latency[1]},
        ],
        "model": {"layers": 12, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 32, "micro_batch_size": 1},
    }
    return Instance.from_dict(d)


def _stages(gpus: list[int], counts: list[int]) -> StageForm:
    return to_stages(encode(gpus, counts)[None, :])


def test_figure6_two_stage_rebalance() -> None:
    inst = _two_gpus()
    # Loads 4c and 8 * 2c = 16c: move floor((16 - 4) / (1 + 2)) = 4 layers -> 8c and 8c.
    for links in (False, True):  # symmetric links: both loads shift equally
        table = CapacityTable.build(inst.coefficients(), 12, links=links)
        T, steps = rebalance(_stages([0, 1], [4, 8]), table)
        assert T.counts[0].tolist() == [8, 4]
        assert steps[0] == 1


def test_memory_headroom_limits_the_transfer() -> None:
    inst = _two_gpus(mem_gb=(5.0, 80.0))
    c = inst.coefficients()
    cap0 = int(c.layer_caps(2, last=False)[0])
    assert 4 < cap0 < 8
    table = CapacityTable.build(c, 12, links=False)
    T, _ = rebalance(_stages([0, 1], [4, 8]), table)
    assert T.counts[0].tolist() == [cap0, 12 - cap0]
    assert c.fits(0, cap0, 2, last=False)


def test_link_aware_load_sees_the_communication_bottleneck() -> None:
    # g0 -> g1 costs 40 ms more than g1 -> g0: with link times, stage 1 is loaded by them.
    inst = _two_gpus(latency=(42.0, 2.0))
    c = inst.coefficients()
    compute = rebalance(_stages([0, 1], [8, 4]), CapacityTable.build(c, 12, links=False))[0]
    tau = rebalance(_stages([0, 1], [8, 4]), CapacityTable.build(c, 12, links=True))[0]
    assert compute.counts[0].tolist() == [8, 4]  # compute already balanced
    n0 = tau.counts[0, 0]
    assert n0 < 8  # layers leave the stage that also pays the slow link
    load = lambda n: np.array([n * c.comp_ms[0] + c.comm_ms[0, 1],  # noqa: E731
                               (12 - n) * c.comp_ms[1] + c.comm_ms[1, 0]])
    assert load(n0).max() < load(8).max()


def test_local_search_converges_and_never_worsens_the_bottleneck() -> None:
    inst = Instance.from_dict(by_family("paper", 8, 24, 2))
    c = inst.coefficients()
    ev = BatchEvaluator(inst)
    pop = initial_population(np.random.default_rng(4), ev, 300, 100_000)
    for links in (False, True):
        table = CapacityTable.build(c, 24, links=links)
        S = to_stages(pop.X)
        T, steps = rebalance(S, table)
        assert steps.max() >= 1
        assert np.array_equal(T.gpus, S.gpus) and np.array_equal(T.q, S.q)
        assert np.all(T.counts.sum(axis=1) == 24)
        valid = np.arange(S.gpus.shape[1])[None, :] < S.q[:, None]
        assert np.all(T.counts[valid] >= 1)
        assert np.all(T.counts <= table.caps(T))  # memory kept
        comp = c.comp_ms[S.gpus]
        off = np.zeros(comp.shape)
        if links:  # each stage's fixed link times to its neighbours
            for r in range(S.q.shape[0]):
                g, q = S.gpus[r], int(S.q[r])
                for j in range(q):
                    off[r, j] = (c.comm_ms[g[j], g[j + 1]] if j + 1 < q else 0.0) + (
                        c.comm_ms[g[j], g[j - 1]] if j > 0 else 0.0)
        before = np.where(valid, S.counts * comp + off, 0).max(axis=1)
        after = np.where(valid, T.counts * comp + off, 0).max(axis=1)
        assert np.all(after <= before + 1e-9)  # the bottleneck load never grows
        assert np.any(after < before - 1e-9)
        again, more = rebalance(T, table)
        assert more.max() == 0 and np.array_equal(again.counts, T.counts)  # a fixed point
        # Every rebalanced plan stays feasible for the shared evaluator.
        assert np.all(ev.evaluate(from_stages(T, 24)).feasible)


def test_local_search_keeps_only_plans_the_evaluator_finds_no_worse() -> None:
    inst = Instance.from_dict(by_family("metro", 8, 24, 1, lam=0.5))
    ev = BatchEvaluator(inst)
    pop = initial_population(np.random.default_rng(0), ev, 200, 100_000)
    table = CapacityTable.build(inst.coefficients(), 24)
    Y, obj, improved = local_search(pop.X, pop.objective, ev, table)
    assert np.all(obj <= pop.objective)
    assert improved.any()
    assert np.allclose(ev.evaluate(Y).objective, obj)
