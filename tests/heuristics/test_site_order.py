"""Site-order plans: Held-Karp over sites, block layouts, exact splits, shared pricing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracle import reference_optimum

from geoplan import InstanceBuilder
from geoplan.cost import evaluate
from geoplan.cost.split import Splitter
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from heuristics.site_order import (
    block_layout,
    held_karp,
    polish_sequence,
    site_groups,
    site_order_plans,
)

INF = math.inf


def _base(name: str) -> InstanceBuilder:
    return InstanceBuilder(name).model(layers=8, hidden=1024, seq_len=1024, vocab=1000) \
        .training(batch_size=8, micro_batch_size=1)


def test_held_karp_by_hand() -> None:
    # 0-1 and 1-2 cost 1, 0-2 costs 10 (both ways): the full tour is 0-1-2 (or reversed).
    c = np.array([[INF, 1.0, 10.0], [1.0, INF, 1.0], [10.0, 1.0, INF]])
    dp, parent = held_karp(c)
    assert dp[0b111].tolist() == [2.0, 11.0, 2.0]  # ending at 1 needs the 0-2 leg
    assert dp[0b101].tolist() == [10.0, INF, 10.0]
    assert dp[0b010].tolist() == [INF, 0.0, INF]  # one site: a start
    assert parent[0b111, 2] == 1 and parent[0b011, 1] == 0
    # No link between 0 and 2 at all: {0, 2} cannot be joined, {0, 1, 2} only through 1.
    c[0, 2] = c[2, 0] = INF
    dp, _ = held_karp(c)
    assert dp[0b101].tolist() == [INF, INF, INF]
    assert dp[0b111].tolist() == [2.0, INF, 2.0]


def test_block_layouts() -> None:
    g = [10, 11, 12, 13]  # fastest first
    assert block_layout(g, 4, "only") == [10, 12, 13, 11]  # the two fastest at the two ends
    assert block_layout(g, 4, "first") == [10, 11, 12, 13]  # start fastest, exit slowest
    assert block_layout(g, 4, "last") == [13, 12, 11, 10]
    assert block_layout(g, 4, "middle") == [13, 10, 11, 12]  # two slowest at the boundaries
    assert block_layout(g, 2, "only") == [10, 11]
    assert block_layout(g, 1, "middle") == [10]
    assert block_layout(g, 3, "first") == [10, 11, 12]  # k fastest
    with pytest.raises(ValueError):
        block_layout(g, 2, "elsewhere")


def test_groups_fastest_first_and_instances_without_sites() -> None:
    inst = (_base("nosites").gpu("slow", peak_tflops=50, memory_gb=40, idle_w=50, active_w=200)
            .gpu("fast", peak_tflops=200, memory_gb=40, idle_w=50, active_w=300)
            .gpu("mid", peak_tflops=100, memory_gb=40, idle_w=50, active_w=250)
            .full_mesh(bandwidth_gbps=100, latency_ms=0.1).build())
    sp = Splitter(inst)
    labels, groups = site_groups(inst, sp.comp, sp.mem_cap)
    assert labels == [None] and groups == [[1, 2, 0]]
    res = site_order_plans(inst)
    assert res.sites == (None,) and res.best is not None
    # One site: the best over k of the exact split of the 'only' layout of the k fastest.
    best = min(s.objective for k in (1, 2, 3)
                if (s := sp.split(block_layout([1, 2, 0], k, "only"))) is not None)
    assert res.best.objective == pytest.approx(best, rel=1e-12)


def test_a_far_site_is_left_out() -> None:
    # Two fast GPUs in A, one in B, 1000 ms between the sites: the best plan stays in A,
    # and it is the optimum over every plan (all 3 GPUs, any order, any split).
    inst = (_base("far").gpus("a", "A100-SXM-80GB", 2, site="A")
            .gpu("b0", "A100-SXM-80GB", site="B")
            .links_within_site("A", bandwidth_gbps=100, latency_ms=0.1)
            .links_between_sites("A", "B", bandwidth_gbps=1, latency_ms=1000).build())
    res = site_order_plans(inst)
    assert res.best is not None and res.best.sites == ("A",)
    opt, _, _ = reference_optimum(inst)
    assert res.best.objective == pytest.approx(opt, rel=1e-12)
    assert {p.sites for p in res.plans} >= {("A",), ("B",)}  # the best of every size


def test_the_order_follows_the_cheap_links() -> None:
    # Three one-GPU sites; memory forces all three stages (two hold at most 6 of the 8
    # layers); X-Y and Y-Z are cheap, X-Z dear: Y must be in the middle.
    b = _base("chain")
    for s in "XYZ":
        b = b.gpu(s.lower(), peak_tflops=100, memory_gb=0.75, idle_w=50, active_w=250, site=s)
    inst = (b.links_between_sites("X", "Y", bandwidth_gbps=100, latency_ms=1)
            .links_between_sites("Y", "Z", bandwidth_gbps=100, latency_ms=1)
            .links_between_sites("X", "Z", bandwidth_gbps=100, latency_ms=100).build())
    res = site_order_plans(inst)
    assert res.best is not None and res.best.sites[1] == "Y" and len(res.best.sites) == 3
    assert res.best.gpus_per_site == (1, 1, 1)
    opt, _, _ = reference_optimum(inst)
    assert res.best.objective == pytest.approx(opt, rel=1e-12)
    assert all(len(p.sites) == 3 for p in res.plans)  # nothing smaller fits


@pytest.mark.parametrize("lam", [1.0, 0.5])
def test_plans_are_priced_by_the_shared_evaluator(lam: float) -> None:
    inst = Instance.from_dict(by_family("geo", 12, 16, 3, lam=lam))
    res = site_order_plans(inst, limit=5)
    assert 1 <= len(res.plans) <= 5
    objs = [p.objective for p in res.plans]
    assert objs == sorted(objs) and len({p.plan for p in res.plans}) == len(res.plans)
    for p in res.plans:
        e = evaluate(inst, p.plan)  # resolves the same normalisers
        assert e.feasible and e.objective == p.objective
        assert (e.t_iter_ms, e.e_iter_j) == (p.t_iter_ms, p.e_iter_j)
        assert sum(p.gpus_per_site) == len(p.plan.stages)
    again = site_order_plans(inst, limit=5)
    assert [p.plan for p in again.plans] == [p.plan for p in res.plans]  # deterministic


def test_more_sites_than_max_sites() -> None:
    b = _base("many")
    for k in range(5):
        b = b.gpu(f"g{k}", peak_tflops=50 + 10 * k, memory_gb=40, idle_w=50, active_w=250,
                  site=f"S{k}")
    inst = b.full_mesh(bandwidth_gbps=10, latency_ms=5).build()
    res = site_order_plans(inst, max_sites=3)
    assert res.sites == ("S2", "S3", "S4") and res.dropped_sites == ("S0", "S1")
    assert res.best is not None
    assert {s.gpu for s in res.best.plan.stages} <= {"g2", "g3", "g4"}


def test_generated_instance_near_its_proven_optimum() -> None:
    # geo N=16 L=32 seed 0: milp proves 867.0402566706517 (bench/results/memetic-optima).
    inst = Instance.from_dict(by_family("geo", 16, 32, 0))
    res = site_order_plans(inst)
    assert res.best is not None
    assert res.best.objective == pytest.approx(867.0402566706517, rel=1e-9)
    # Ordered subsets: 3 single sites, 3 pairs and 1 triple in both directions, and the
    # wrapped orders: 2 per pair, 4 for the triple.
    assert res.sites == ("A", "B", "C") and res.subsets == 3 + 3 * 2 + 2 + 3 * 2 + 4
    assert site_order_plans(inst, wrap=False).subsets == 3 + 3 * 2 + 2


def test_wrapped_order_and_polish_reach_a_metro_optimum() -> None:
    # metro N=16 L=32 seed 0: the optimum (milp, 560.4879507682491) starts and ends in
    # site B; a wrapped order, polished, finds it; without polish or wrap it is missed.
    inst = Instance.from_dict(by_family("metro", 16, 32, 0))
    res = site_order_plans(inst)
    assert res.best is not None and res.best.objective == pytest.approx(560.4879507682491,
                                                                        rel=1e-9)
    assert res.best.sites[0] == res.best.sites[-1] == "B"
    for kw in ({"polish": 0}, {"wrap": False}):
        other = site_order_plans(inst, **kw)  # type: ignore[arg-type]
        assert other.best is not None and other.best.objective > 560.4879507682491 * 1.001


def test_a_passed_deadline_keeps_the_start_allocations_only() -> None:
    """With its deadline passed at the call, no subset descends and nothing is polished:
    the plans are the chosen subsets' start allocations, worse than the full search's
    (deterministic: the clock only says "late")."""
    inst = Instance.from_dict(by_family("metro", 16, 32, 0))
    full = site_order_plans(inst)
    late = site_order_plans(inst, deadline=0.0)
    assert late.plans and late.best is not None and full.best is not None
    assert late.best.objective > full.best.objective * 1.001
    assert (late.subsets, late.refined) == (full.subsets, full.refined)
    assert late.splits < full.splits
    assert [p.plan for p in site_order_plans(inst, deadline=0.0).plans] == \
        [p.plan for p in late.plans]


def test_polish_sequence_by_hand() -> None:
    # Three GPUs, the slow one first and the fast ones unused: the descent brings in the
    # fast GPUs and ends at the optimum over every plan (reference enumeration).
    inst = (_base("polish").gpu("slow", peak_tflops=20, memory_gb=40, idle_w=50, active_w=200)
            .gpu("f1", peak_tflops=200, memory_gb=40, idle_w=50, active_w=300)
            .gpu("f2", peak_tflops=180, memory_gb=40, idle_w=50, active_w=300)
            .full_mesh(bandwidth_gbps=50, latency_ms=0.5).build())
    sp = Splitter(inst)
    start = sp.split([0])
    assert start is not None
    seq, value, splits = polish_sequence(sp, [0])
    opt, plan, _ = reference_optimum(inst)
    assert value == pytest.approx(opt, rel=1e-12) and value < start.objective
    assert plan is not None and 0 not in seq and splits > 1
    # With no unused candidates allowed, a one-GPU sequence cannot move at all.
    assert polish_sequence(sp, [0], unused=[]) == ([0], start.objective, 1)
