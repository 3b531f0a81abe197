"""heuristics.hybrid.split (split and share) against brute force; heuristics.hybrid.groups."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from geoplan.cost.kernel import FEASIBLE
from geoplan.model.generators import cloud, cloud_node_of
from geoplan.model.hybrid import RECOMPUTE, HybridPlan, HybridStage, Replica
from geoplan.model.hybrid_validation import validate_hybrid
from geoplan.model.instance import Instance
from heuristics.hybrid.groups import device_classes, device_groups, node_labels, tp_groups
from heuristics.hybrid.split import (
    StageGroups,
    compositions,
    evaluator_of,
    solve_split,
    split_and_share,
)


def _instance(seed: int, lam: float = 1.0, mem_scale: float = 1.0, layers: int = 5) -> Instance:
    d = cloud(6, layers, seed, hidden=4096, batch_size=8, micro_batch_size=2, node_size=2,
              n_sites=2, lam=lam)
    d["training"]["recompute_choices"] = ["none", "full"]  # hybrid fields: tight memory loads
    if 0.0 < lam < 1.0:  # fixed normalisers: tight memory leaves Metis-default none to give
        d["objective"].update(t_ref_ms=500.0, e_ref_j=2000.0)
    for g in d["gpus"]:
        g["memory_util"] = round(g.get("memory_util", 1.0) * mem_scale, 3)
    return Instance.from_dict(d)


def _brute(instance: Instance, stages: list[StageGroups], u: int, zero: int) -> float:
    """Every split, every share vector, every recompute: the best kernel objective."""
    ev = evaluator_of(instance)
    ids = instance.gpu_ids
    n_layers, q_count = instance.layers, len(stages)
    best = math.inf
    for cut in itertools.combinations(range(1, n_layers), q_count - 1):
        ns = [b - a for a, b in zip((0, *cut), (*cut, n_layers), strict=True)]
        for shares in itertools.product(*[compositions(u, len(s.replicas)) for s in stages]):
            for recs in itertools.product(RECOMPUTE, repeat=q_count):
                plan = HybridPlan(tuple(
                    HybridStage(ns[q], st.tp, tuple(
                        Replica(tuple(ids[x] for x in r), shares[q][k])
                        for k, r in enumerate(st.replicas)), recs[q])
                    for q, st in enumerate(stages)), u, zero)
                status, _, _, obj = ev.price(plan)
                if status == FEASIBLE:
                    best = min(best, obj)
    return best


def _random_case(trial: int) -> tuple[Instance, list[StageGroups], int, int]:
    rng = random.Random(trial)
    inst = _instance(trial, rng.choice([1.0, 0.0, 0.5]), rng.choice([1.0, 0.5, 0.3, 0.2]))
    site = evaluator_of(inst).coefficients.site
    gpus = list(range(6))
    rng.shuffle(gpus)
    stages: list[StageGroups] = []
    pos = 0
    for _ in range(rng.choice([1, 2, 3])):
        t, d = rng.choice([1, 2]), rng.choice([1, 2])
        if pos + t * d > 6:
            t, d = 1, 1
        if pos >= 6:
            break
        reps = []
        for _ in range(d):
            reps.append(tuple(gpus[pos:pos + t]))
            pos += t
        if any(len({int(site[x]) for x in r}) > 1 for r in reps):
            t, reps = 1, [(r[0],) for r in reps]  # keep TP groups on one site
        stages.append(StageGroups(t, tuple(reps)))
    return inst, stages, rng.choice([2, 4]), rng.choice([0, 1, 2])


@pytest.mark.parametrize("trial", range(24))
def test_exact_split_equals_brute_force(trial: int) -> None:
    inst, stages, u, zero = _random_case(trial)
    got = solve_split(inst, stages, u, zero)
    best = _brute(inst, stages, u, zero)
    if got is None:
        assert best == math.inf
        return
    assert got.objective == pytest.approx(best, rel=1e-9, abs=1e-12)
    assert not validate_hybrid(inst, got.plan)
    fast = solve_split(inst, stages, u, zero, exact=False)
    assert fast is not None and fast.objective >= got.objective * (1 - 1e-12)
    assert not validate_hybrid(inst, fast.plan)


def test_memory_forces_recompute_and_none_when_nothing_fits() -> None:
    one = [StageGroups(1, ((0,),))]
    got = split_and_share(_instance(3, mem_scale=0.2), one, 2, 0)
    assert got is not None and got.stages[0].recompute == "full"  # 'none' does not fit
    small = _instance(3, mem_scale=0.1)
    assert split_and_share(small, one, 2, 0) is None and _brute(small, one, 2, 0) == math.inf
    two = [StageGroups(1, ((0,),)), StageGroups(1, ((1,),))]
    got = split_and_share(small, two, 2, 0)
    assert got is not None and not validate_hybrid(small, got)


def test_structural_errors_raise() -> None:
    inst = _instance(1)
    with pytest.raises(ValueError):
        solve_split(inst, [StageGroups(2, ((0,),))], 2, 0)
    with pytest.raises(ValueError):
        solve_split(inst, [StageGroups(1, ((0,),)), StageGroups(1, ((0,),))], 2, 0)
    with pytest.raises(ValueError):
        solve_split(inst, [StageGroups(1, ((0,),))], 3, 0)  # 3 does not divide 8
    assert solve_split(inst, [StageGroups(1, ((0,), (1,), (2,)))], 2, 0) is None  # d > u


def test_compositions() -> None:
    assert compositions(4, 2) == [(1, 3), (2, 2), (3, 1)]
    assert compositions(2, 3) == []
    assert len(compositions(8, 3)) == math.comb(7, 2)


def _renamed(seed: int) -> tuple[Instance, Instance]:
    d = cloud(12, 4, seed, node_size=4, n_sites=2)
    names = {g["id"]: f"x{k}" for k, g in enumerate(d["gpus"])}
    e = {**d, "gpus": [{**g, "id": names[g["id"]]} for g in d["gpus"]],
         "links": [{**x, "src": names[x["src"]], "dst": names[x["dst"]]} for x in d["links"]]}
    return Instance.from_dict(d), Instance.from_dict(e)


def test_nodes_from_ids_and_from_links_agree() -> None:
    by_id, by_links = _renamed(5)
    a, b = node_labels(by_id), node_labels(by_links)
    assert a.tolist() == b.tolist()
    assert a.tolist() == [cloud_node_of(g.id) for g in by_id.gpus]


def test_device_groups_and_tp_groups() -> None:
    inst, _ = _renamed(5)
    groups = device_groups(inst)
    assert sorted(x for g in groups for x in g.gpus) == list(range(inst.n))
    assert sum(len(c) for c in device_classes(inst)) == inst.n
    nodes = node_labels(inst)
    for g in groups:
        assert len({int(nodes[x]) for x in g.gpus}) == 1
        for t in (1, 2, 4):
            tps = tp_groups([g], t)
            assert all(len(x) == t for x in tps) and len(tps) == len(g.gpus) // t


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_method_on_wide_stages_is_valid_and_no_better_than_exact(seed: int) -> None:
    inst = _instance(seed, mem_scale=0.5)
    stages = [StageGroups(1, ((0,), (1,), (2,))), StageGroups(1, ((3,), (4,), (5,)))]
    exact = solve_split(inst, stages, 8, 1)  # C(7, 2) = 21 share vectors per stage
    fast = solve_split(inst, stages, 8, 1, exact=False)
    assert exact is not None and fast is not None
    assert fast.objective >= exact.objective * (1 - 1e-12)
    assert not validate_hybrid(inst, fast.plan)
