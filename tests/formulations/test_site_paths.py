"""Plans read off the parametric bound's boxes on site paths (formulations.site_paths)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from formulations.site_paths import improve_on_site_paths, site_orders
from geoplan.cost import bounds, evaluate
from geoplan.cost.baseline import metis_default_plan
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.parametric import instance_bound, proves
from geoplan.model import generators
from geoplan.model.instance import Instance
from geoplan.solving.core import solve


def _instance(family: str, n: int, seed: int, lam: float) -> Instance:
    return resolve_normalisers(Instance.from_dict(
        generators.by_family(family, n, n, seed, lam=lam)))


def test_site_orders_cheapest_round_trips_first() -> None:
    # Hand-checked sums: 0-1-2 and 2-1-0 cost 1 + 2, 1-0-2 and 2-0-1 cost 1 + 5, the
    # orders through the pair (0, 2) then 1 cost 5 + 2; ties by the order itself.
    trip = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 2.0], [5.0, 2.0, 0.0]])
    assert site_orders(trip) == [(0, 1, 2), (2, 1, 0), (1, 0, 2), (2, 0, 1), (0, 2, 1),
                                 (1, 2, 0)]
    assert site_orders(trip, limit=2) == [(0, 1, 2), (2, 1, 0)]
    # No round trip between 0 and 2: only the orders that never step between them.
    trip[0, 2] = trip[2, 0] = math.inf
    assert site_orders(trip) == [(0, 1, 2), (2, 1, 0)]


def test_site_orders_of_many_sites_are_one_per_start() -> None:
    rng = np.random.default_rng(3)
    pts = rng.random((10, 2))
    trip = np.linalg.norm(pts[:, None] - pts[None], axis=2)
    orders = site_orders(trip)
    assert 1 <= len(orders) <= 10
    assert all(sorted(p) == list(range(10)) for p in orders)
    cost = [sum(trip[a, b] for a, b in itertools.pairwise(p)) for p in orders]
    assert cost == sorted(cost)


@pytest.mark.parametrize(("seed", "lam"), [(1, 1.0), (2, 0.5)])
def test_the_bound_s_boxes_on_paths_hold_the_optimum(seed: int, lam: float) -> None:
    """From the paper's Metis plan as incumbent, the path minimisers of the bound's least
    boxes hold a plan of B&B's proven optimum (metro N=10, lambda 1 and 0.5), priced on
    the whole instance; given that plan, nothing better is returned."""
    inst = _instance("metro", 10, seed, lam)
    opt = solve(inst, "bnb", seed=1, time_limit=600, threads=1)
    assert opt.status == "optimal" and opt.objective is not None
    start = metis_default_plan(inst)
    assert start is not None
    start_obj = evaluate(inst, start).objective
    assert start_obj > opt.objective * (1 + 1e-6)
    pb = instance_bound(inst, start_obj, 1.0, 600.0)
    assert pb.site_sets and len(pb.site_sets[0]) >= 2
    better, info = improve_on_site_paths(inst, pb, (start, start_obj), 600.0, lambda: False)
    assert better is not None
    assert better[1] == pytest.approx(opt.objective, rel=1e-9)
    assert better[1] == evaluate(inst, better[0]).objective
    assert info["objective"] == better[1]
    assert info["sets"] == 1 and info["orders"] == math.factorial(len(pb.site_sets[0]))
    assert info["searched"] == [list(pb.site_sets[0])]
    assert int(info["plans"]) >= 1  # type: ignore[call-overload]
    # Every plan found visits the sites of the set only.
    cl = bounds.clusters(inst)
    assert {int(cl[inst.gpu_index[st.gpu]]) for st in better[0].stages} <= set(pb.site_sets[0])
    again, _ = improve_on_site_paths(inst, pb, better, 600.0, lambda: False)
    assert again is None


def test_no_time_no_plan() -> None:
    inst = _instance("metro", 10, 1, 1.0)
    start = metis_default_plan(inst)
    assert start is not None
    start_obj = evaluate(inst, start).objective
    pb = instance_bound(inst, start_obj, 1.0, 600.0)
    found, info = improve_on_site_paths(inst, pb, (start, start_obj), 0.0, lambda: False)
    assert found is None and info["plans"] == 0 and info["searched"] == []
    found, info = improve_on_site_paths(inst, pb, (start, start_obj), 600.0, lambda: True)
    assert found is None and info["plans"] == 0


def test_milp_finds_the_optimum_through_site_paths() -> None:
    """From a poor warm start (no start heuristic), the MILP's bound does not prove the
    start, and the path minimisers give the optimum before branching or subsets run."""
    inst = _instance("metro", 10, 1, 1.0)
    opt = solve(inst, "bnb", seed=1, time_limit=600, threads=1)
    start = metis_default_plan(inst)
    assert start is not None and opt.objective is not None
    r = solve(inst, "milp", seed=0, time_limit=600, threads=1, warm_start=start,
              params={"heuristic": False, "memetic_share": 0, "memetic_after_share": 0})
    assert r.status == "optimal"
    assert r.objective == pytest.approx(opt.objective, rel=1e-9)
    assert r.info["site_paths"]["objective"] == pytest.approx(opt.objective, rel=1e-9)
    assert "site_subsets" not in r.info
    off = solve(inst, "milp", seed=0, time_limit=600, threads=1, warm_start=start,
                params={"heuristic": False, "site_paths": False})
    assert "site_paths" not in off.info


@pytest.mark.parametrize("seed", [1, 2])
def test_on_cloud_nodes_the_plan_is_found_and_proven(seed: int) -> None:
    """Cloud pools (two regions of two 4-GPU nodes) whose nodes hold unlike GPUs (one GPU
    of each node a little slower, so the node-run bound is not used): the least part of
    the two-level bound is one region, whose node sets the path plans follow; the better
    plan makes the bound run again, which then proves it (no MILP model needed)."""
    d = generators.by_family("cloud", 16, 16, seed, node_size=4, n_sites=2)
    for g in d["gpus"]:
        if g["id"].endswith("-g0"):
            g["compute_util"] = round(0.97 * g["compute_util"], 3)
    inst = Instance.from_dict(d)
    inst = resolve_normalisers(inst)
    start = metis_default_plan(inst)
    assert start is not None
    start_obj = evaluate(inst, start).objective
    pb = instance_bound(inst, start_obj, 1.0, 600.0)
    assert pb.levels is not None and pb.node_sets
    assert all(len(s) == 1 for s in pb.site_sets[:1])  # a single region first
    assert not pb.value >= start_obj * (1 - 1e-9)
    r = solve(inst, "milp", seed=0, time_limit=600, threads=1, warm_start=start,
              params={"heuristic": False, "memetic_share": 0, "memetic_after_share": 0})
    assert r.status == "optimal" and r.plan is not None and r.objective is not None
    assert r.objective == evaluate(inst, r.plan).objective
    assert r.info["site_paths"]["objective"] == r.objective
    assert "two_level" in r.info["parametric"]
    assert r.lower_bound is not None and proves(r.lower_bound, r.objective)
