"""The node-run bound (geoplan.cost.node_runs) against the reference enumerator.

On one site whose GPUs come in nodes of identical GPUs with one link price inside each
node and one between nodes (the ``cloud`` generator's regions), node prices are the
plans' own prices and the bound is the optimum itself; on nodes of unlike GPUs and
uneven links it stays a bound. The optimum comes from the independent reference
enumerator (``tests/reference_model.py``); searches stop on their own or by a box count,
never by the clock.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from oracle import reference_optimum

from geoplan.cost import bounds, node_runs, parametric
from geoplan.cost.evaluate import Evaluator
from geoplan.cost.weights import ObjectiveWeights
from geoplan.model import generators
from geoplan.model.builder import InstanceBuilder
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import solve


def _region(seed: int, lam: float, n: int = 8, node_size: int = 2,
            layers: int = 6) -> Instance:
    """One cloud region (normalisers resolved)."""
    inst = Instance.from_dict(generators.by_family("cloud", n, layers, seed,
                                                   node_size=node_size, n_sites=1, lam=lam))
    return Evaluator(inst).instance


def _search(inst: Instance, incumbent: float | None = None,
            max_boxes: int | None = None) -> tuple[node_runs.NodeRunResult,
                                                   node_runs.NodeTables]:
    c = inst.coefficients()
    groups = bounds.node_groups(np.asarray(c.comm_ms), bounds.clusters(inst))
    assert groups is not None
    tab = node_runs.node_tables(c, inst.layers, groups)
    res = node_runs.node_run_bound(tab, inst.layers, c.micro_batches,
                                   ObjectiveWeights.from_instance(inst),
                                   incumbent=incumbent, max_boxes=max_boxes)
    return res, tab


def _plan(inst: Instance, tab: node_runs.NodeTables, res: node_runs.NodeRunResult) -> Plan:
    assert res.runs
    pairs = node_runs.run_plan(tab, res.runs, res.q, res.z, inst.layers)
    assert pairs is not None
    return Plan.from_indices(inst, [g for g, _ in pairs], [k for _, k in pairs])


def test_node_prices_by_hand() -> None:
    """Two nodes of two GPUs: in-node links 0.1 ms, between nodes 2 ms one way and 1 ms
    the other (node prices take each sender's cheapest); unlike GPUs break uniformity."""
    def build(util: float) -> Instance:
        b = InstanceBuilder("hand")
        for k, name in enumerate(("a0", "a1", "b0", "b1")):
            b.gpu(name, "A100-SXM-80GB", site="S",
                  compute_util=util if k == 3 else 1.0)
        for x, y in (("a0", "a1"), ("b0", "b1")):
            b.link(x, y, bandwidth_gbps=1e6, latency_ms=0.1)
            b.link(y, x, bandwidth_gbps=1e6, latency_ms=0.1)
        for x in ("a0", "a1"):
            for y in ("b0", "b1"):
                b.link(x, y, bandwidth_gbps=1e6, latency_ms=2.0)
                b.link(y, x, bandwidth_gbps=1e6, latency_ms=1.0)
        return (b.model("gpt3-1.3b").training(batch_size=8, micro_batch_size=1)
                .build())

    inst = build(1.0)
    c = inst.coefficients()
    tab = node_runs.node_tables(c, inst.layers, np.array([0, 0, 1, 1]))
    comm = np.asarray(c.comm_ms)
    assert tab.size.tolist() == [2, 2]
    assert tab.intra.tolist() == pytest.approx([comm[0, 1], comm[2, 3]])
    assert tab.inter.tolist() == pytest.approx([comm[0, 2], comm[2, 0]])
    assert comm[0, 2] > comm[2, 0] > comm[0, 1]  # 2 ms + transfer, 1 ms + transfer
    assert tab.uniform
    slow = build(0.5)
    mixed = node_runs.node_tables(slow.coefficients(), slow.layers, np.array([0, 0, 1, 1]))
    assert not mixed.uniform
    # A node takes its best GPU's per-layer time.
    assert mixed.comp[1] == pytest.approx(tab.comp[1])


@pytest.mark.parametrize("lam", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("seed", range(8))
def test_bound_is_the_optimum_on_uniform_nodes(seed: int, lam: float) -> None:
    rng = random.Random(seed)
    inst = _region(seed, lam, node_size=rng.choice([2, 4]), layers=rng.choice([5, 6]))
    opt, _, _ = reference_optimum(inst)
    res, tab = _search(inst)
    assert tab.uniform and res.exhausted
    assert res.value <= opt * (1 + 1e-12)
    plan = _plan(inst, tab, res)
    ev = Evaluator(inst).evaluate(plan)
    assert ev.feasible and ev.objective == pytest.approx(opt, rel=1e-12)
    assert res.value >= opt * (1 - 1e-9)


@pytest.mark.parametrize("lam", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("seed", range(6))
def test_bound_holds_on_unlike_nodes(seed: int, lam: float) -> None:
    """GPUs of a node made unlike (compute and memory fractions) and links uneven: node
    prices take each node's best, so the bound never exceeds the optimum."""
    rng = random.Random(100 + seed)
    d = generators.by_family("cloud", 8, 6, seed, node_size=rng.choice([2, 4]), n_sites=1,
                             lam=lam)
    for g in d["gpus"]:
        g["compute_util"] = round(rng.uniform(0.5, 1.0), 3)
        g["memory_util"] = round(rng.uniform(0.3, 1.0), 3)
    for link in d["links"]:
        link["latency_ms"] *= rng.uniform(1.0, 3.0)
    try:
        inst = Evaluator(Instance.from_dict(d)).instance
    except Exception:  # no baseline plan to take lambda 0.5's normalisers from
        pytest.skip("no normalisers")
    opt, _, _ = reference_optimum(inst)
    res, tab = _search(inst)
    assert not tab.uniform
    if not math.isfinite(opt):
        assert res.value == math.inf or res.runs is None or res.value <= opt
        return
    assert res.value <= opt * (1 + 1e-12)


def test_incumbent_and_box_budget_keep_the_bound_valid() -> None:
    inst = _region(3, 1.0, n=8, node_size=4, layers=8)
    opt, _, _ = reference_optimum(inst)
    full, _ = _search(inst)
    assert full.value == pytest.approx(opt, rel=1e-9)
    # An incumbent above the optimum: the search still reaches the optimum.
    assert _search(inst, incumbent=opt * 1.05)[0].value == pytest.approx(opt, rel=1e-9)
    # An incumbent at the optimum: the bound proves it (and never passes it).
    at = _search(inst, incumbent=opt)[0].value
    assert parametric.proves(at, opt) and at <= opt
    # Stopped after one box: a weaker bound, still valid.
    cut, _ = _search(inst, max_boxes=1)
    assert cut.value <= opt * (1 + 1e-12)


@pytest.mark.parametrize("lam", [1.0, 0.5])
def test_two_level_bound_proves_small_clouds_by_node_runs(lam: float) -> None:
    """Two regions of two 4-GPU nodes: each region's part is the node-run bound, the plan
    it finds is returned with the bound, and the MILP proves it without a model."""
    inst = Evaluator(Instance.from_dict(generators.by_family(
        "cloud", 16, 12, 2, node_size=4, n_sites=2, lam=lam))).instance
    pb = parametric.instance_bound(inst, None, 1.0, math.inf)
    assert pb.levels is not None and pb.levels["node_runs"] == 2
    assert pb.plan is not None and pb.plan_objective is not None
    ev = Evaluator(inst).evaluate(Plan.from_pairs(pb.plan))
    assert ev.objective == pb.plan_objective
    r = solve(inst, "milp", seed=0, time_limit=600, threads=1)
    assert r.status == "optimal" and r.objective is not None and r.lower_bound is not None
    assert parametric.proves(r.lower_bound, r.objective)
    assert r.info["parametric"]["two_level"]["node_runs"] == 2
