"""Branching on sites (geoplan.cost.site_branching) and the parametric search's forced
sites and start boxes it relies on: every bound stays below the plans it counts."""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import reference_optimum, reference_space

from geoplan.cost import bounds, kernel, parametric, site_branching
from geoplan.cost.evaluate import Evaluator
from geoplan.cost.normalise import resolve_normalisers
from geoplan.cost.parametric import instance_bound, parametric_bound, refine_by_sites
from geoplan.model import generators
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving import forkpool
from geoplan.solving.core import solve


def _instance(family: str, n: int, layers: int, seed: int, lam: float) -> Instance:
    return resolve_normalisers(Instance.from_dict(
        generators.by_family(family, n, layers, seed, lam=lam)))


def _relabelled(family: str, seed: int, lam: float, sites: str) -> Instance:
    """An N=7, L=6 instance whose GPUs' sites are ``sites`` (their links kept)."""
    d = generators.by_family(family, len(sites), 6, seed, lam=lam)
    for g, s in zip(d["gpus"], sites, strict=True):
        g["site"] = s
    return resolve_normalisers(Instance.from_dict(d))


@pytest.mark.parametrize(("family", "seed", "lam"), [
    ("metro", 0, 1.0), ("metro", 1, 0.5), ("metro", 2, 1.0), ("geo", 3, 1.0), ("geo", 4, 0.5),
])
def test_forced_bound_never_exceeds_the_best_plan_using_that_site(family: str, seed: int,
                                                                  lam: float) -> None:
    """N=6, three sites: the bound with site s forced is at most the best plan using s
    (enumerated by the reference over every GPU order that includes a GPU of s), and at
    least the bound without it."""
    inst = _instance(family, 6, 6, seed, lam)
    ev = Evaluator(inst)
    cl = bounds.clusters(inst)
    args = (inst.coefficients(), inst.layers, cl, ev.weights)
    plain = parametric_bound(*args, max_boxes=400)
    gpus = range(inst.n)
    for s in sorted(set(cl.tolist())):
        orders = [list(o) for k in range(1, inst.n + 1) for o in itertools.permutations(gpus, k)
                  if any(cl[g] == s for g in o)]
        best, _, _ = reference_optimum(inst, orders)
        forced = parametric_bound(*args, max_boxes=400, forced=(s,))
        assert forced.value >= plain.value
        if math.isfinite(best):
            assert forced.value <= best * (1 + 1e-12), (s, forced.value, best)
    assert parametric_bound(*args, max_boxes=400, forced=(99,)).value == math.inf


@pytest.mark.parametrize(("n", "seed", "lam"), [(8, 0, 1.0), (10, 1, 1.0), (10, 4, 0.5),
                                                (12, 2, 1.0)])
def test_site_branching_stays_below_the_optimum(n: int, seed: int, lam: float) -> None:
    """metro pools: B&B's proven optimum bounds the refined bound, which is at least the
    root's; so does a search started from the root's open boxes. (The deadline is far:
    these searches take well under a second.)"""
    inst = _instance("metro", n, n, seed, lam)
    opt = solve(inst, "bnb", seed=1, time_limit=600, threads=1, params={"parametric": False})
    assert opt.status == "optimal" and opt.objective is not None
    for incumbent in (None, opt.objective * 1.02):
        root = instance_bound(inst, incumbent, 1.0, 60.0)
        refined = refine_by_sites(inst, root, incumbent, 1.0, 60.0)
        assert root.value <= refined.value <= opt.objective * (1 + 1e-12)
        if refined.branching is not None:
            assert refined.branching["nodes"] >= 1  # type: ignore[operator]
        ev = Evaluator(inst)
        again = parametric_bound(inst.coefficients(), inst.layers, bounds.clusters(inst),
                                 ev.weights, incumbent=incumbent, start=root.open_boxes,
                                 deadline=time.perf_counter() + 60.0)
        assert again.value <= opt.objective * (1 + 1e-12)


def test_branching_proves_a_plan_the_root_bound_does_not() -> None:
    """metro N=20 L=20 seed 2: the root bound is 2 % below the best plan the MILP finds
    in 60 s without branching (342.953); branching on sites reaches that plan (it is
    optimal) and stays below it. (About a second: the deadline is never near.)"""
    inst = _instance("metro", 20, 20, 2, 1.0)
    plan = solve(inst, "milp", seed=0, time_limit=120, threads=1)
    assert plan.status == "optimal" and plan.objective is not None
    assert "site_branching" in plan.info["parametric"]
    root = instance_bound(inst, None, 1.0, 60.0)
    assert root.value < plan.objective * (1 - 0.01)
    refined = refine_by_sites(inst, root, None, 1.0, 60.0)
    assert root.value < refined.value <= plan.objective * (1 + 1e-12)
    assert parametric.proves(refined.value, plan.objective)


def _site_walk(order: list[int] | tuple[int, ...], cl) -> tuple[int, ...]:
    """The sites of a GPU order's runs (consecutive GPUs on one site are one run)."""
    walk: list[int] = []
    for g in order:
        if not walk or walk[-1] != cl[g]:
            walk.append(int(cl[g]))
    return tuple(walk)


def _orders_by_walk(inst: Instance, cl) -> dict[tuple[int, ...], list[list[int]]]:
    """Every GPU order of two or more GPUs, by the sites of its runs (:func:`_site_walk`)."""
    by_walk: dict[tuple[int, ...], list[list[int]]] = {}
    for k in range(2, inst.n + 1):
        for o in itertools.permutations(range(inst.n), k):
            by_walk.setdefault(_site_walk(o, cl), []).append(list(o))
    return by_walk


@pytest.mark.parametrize(("family", "seed", "lam", "n"), [
    ("metro", 0, 1.0, 6), ("metro", 1, 0.5, 6), ("geo", 3, 1.0, 6), ("geo", 4, 0.5, 6),
    ("metro", 5, 1.0, 7), ("geo", 2, 0.5, 7),
])
def test_path_and_revisit_bounds_never_exceed_the_plans_they_count(family: str, seed: int,
                                                                  lam: float, n: int) -> None:
    """N=6 and 7 (one site of three GPUs: walks visiting it three times), three sites:
    for each site walk (two or more sites, each at most three times, in order), the
    bound of the plans whose runs follow it is at most the best such plan (the
    reference over every GPU order whose runs follow the walk); for each used set,
    the revisit bounds (one to three steps back at least) are at most the best plan using
    exactly those sites with that many. A walk's relaxed minimisers are plans on that
    walk no better than its bound."""
    inst = _instance(family, n, 6, seed, lam)
    ev = Evaluator(inst)
    cl = bounds.clusters(inst)
    args = (inst.coefficients(), inst.layers, cl, ev.weights)
    by_walk = _orders_by_walk(inst, cl)
    checked = {"path": 0, "walk": 0, "walk3": 0, "revisits": 0, "revisits3": 0}
    revisit: dict[tuple[frozenset[int], int], list[list[int]]] = {}
    for walk, orders in by_walk.items():
        if len(walk) < 2:
            continue
        repeats = len(walk) - len(set(walk))
        for need in range(1, min(repeats, 3) + 1):
            revisit.setdefault((frozenset(walk), need), []).extend(orders)
        if max(walk.count(k) for k in walk) > parametric.MAX_VISITS:
            continue
        best, _, _ = reference_optimum(inst, orders)
        pb = parametric_bound(*args, max_boxes=400, path=walk)
        if math.isfinite(best):
            assert pb.value <= best * (1 + 1e-12), (walk, pb.value, best)
            checked["walk" if repeats else "path"] += 1
            checked["walk3"] += max(walk.count(k) for k in walk) == 3
        for config in pb.configs:
            pairs = parametric.path_plan(config, cl, walk)
            assert pairs is not None and sum(n for _, n in pairs) == inst.layers
            assert _site_walk([g for g, _ in pairs], cl) == walk
            e = ev.evaluate(Plan.from_indices(inst, [g for g, _ in pairs],
                                              [n for _, n in pairs]))
            if e.feasible:
                assert e.objective >= pb.value * (1 - 1e-12)
    for (used, need), orders in revisit.items():
        best, _, _ = reference_optimum(inst, orders)
        pb = parametric_bound(*args, max_boxes=400, forced=tuple(sorted(used)), revisits=need)
        if math.isfinite(best):
            assert pb.value <= best * (1 + 1e-12), (sorted(used), need, pb.value, best)
            checked["revisits"] += 1
            checked["revisits3"] += need == 3
    assert checked["path"] >= 6 and checked["walk"] >= 6 and checked["revisits"] >= 2, checked
    if n == 7:
        assert checked["walk3"] >= 1 and checked["revisits3"] >= 1, checked


@pytest.mark.parametrize(("family", "seed", "lam"), [
    ("metro", 0, 1.0), ("geo", 4, 0.5), ("metro", 5, 1.0),
])
def test_bounds_by_runs_per_site_never_exceed_the_plans_they_count(
        family: str, seed: int, lam: float) -> None:
    """N=7, three sites: for each used set and least runs per site (a site three or four
    times, or two sites twice each), the bound counting those runs (``apart_runs``, the
    counted DP from three runs up) is at most the best plan holding them (the reference
    over every GPU order), and with three runs on one site it rises above the bound of
    two on some."""
    inst = _instance(family, 7, 6, seed, lam)
    ev = Evaluator(inst)
    cl = bounds.clusters(inst)
    args = (inst.coefficients(), inst.layers, cl, ev.weights)
    walks = {w: os for w, os in _orders_by_walk(inst, cl).items() if len(w) > len(set(w))}
    specs = {(frozenset(w), tuple(sorted(need.items())))
             for w in walks for need in [
                 *({x: r} for x in set(w) for r in (3, 4) if w.count(x) >= r),
                 *({x: 2, y: 2} for x, y in itertools.combinations(sorted(set(w)), 2)
                   if w.count(x) >= 2 and w.count(y) >= 2)]}
    assert any(len(n) == 1 and n[0][1] == 3 for _, n in specs)
    assert any(len(n) == 2 for _, n in specs)
    raised = 0
    for used, need in sorted(specs, key=str):
        orders = [o for w, os in walks.items() if set(w) == used
                  and all(w.count(x) >= r for x, r in need) for o in os]
        best, _, _ = reference_optimum(inst, orders)
        forced = tuple(sorted(used))
        labels = tuple(x for x, _ in need)
        pb = parametric_bound(*args, max_boxes=400, forced=forced, keep_apart=labels,
                              apart_runs=tuple(r for _, r in need))
        assert pb.value <= best * (1 + 1e-12), (sorted(used), need, pb.value, best)
        if len(need) == 1 and need[0][1] == 3:
            two = parametric_bound(*args, max_boxes=400, forced=forced, keep_apart=labels)
            raised += pb.value > two.value * (1 + 1e-6)
    assert raised >= 1
    with pytest.raises(ValueError, match="two or more runs"):
        parametric_bound(*args, max_boxes=10, keep_apart=(0,), apart_runs=(1,))
    with pytest.raises(ValueError, match="needs keep_apart"):
        parametric_bound(*args, max_boxes=10, apart_runs=(3,))


@pytest.mark.parametrize(("family", "seed", "lam", "n"), [
    ("metro", 0, 1.0, 6), ("geo", 4, 0.5, 6), ("metro", 5, 1.0, 7),
])
def test_kept_apart_and_once_bounds_never_exceed_the_plans_they_count(
        family: str, seed: int, lam: float, n: int) -> None:
    """N=6 and 7, three sites: for each used set, steps back and site visited twice or
    more, the bound with that site's runs kept apart is at most the best such plan (the
    reference over every GPU order); for each used set, the bound of the plans visiting
    each site once is at most the best of those. Keeping runs apart raises some bounds
    above the plain revisit bound (it is not a no-op)."""
    inst = _instance(family, n, 6, seed, lam)
    ev = Evaluator(inst)
    cl = bounds.clusters(inst)
    args = (inst.coefficients(), inst.layers, cl, ev.weights)
    apart: dict[tuple[frozenset[int], int, int], list[list[int]]] = {}
    once: dict[frozenset[int], list[list[int]]] = {}
    for walk, orders in _orders_by_walk(inst, cl).items():
        repeats = len(walk) - len(set(walk))
        if len(walk) < 2:
            continue
        if not repeats:
            once.setdefault(frozenset(walk), []).extend(orders)
        for r in set(walk):
            if walk.count(r) >= 2:
                for need in range(1, min(repeats, 3) + 1):
                    apart.setdefault((frozenset(walk), need, r), []).extend(orders)
    raised = 0
    for (used, need, r), orders in sorted(apart.items(), key=str):
        best, _, _ = reference_optimum(inst, orders)
        forced = tuple(sorted(used))
        pb = parametric_bound(*args, max_boxes=400, forced=forced, revisits=need,
                              keep_apart=r)
        assert pb.value <= best * (1 + 1e-12), (sorted(used), need, r, pb.value, best)
        plain = parametric_bound(*args, max_boxes=400, forced=forced, revisits=need)
        raised += pb.value > plain.value * (1 + 1e-6)
    assert raised >= 3
    for used, orders in once.items():
        best, _, _ = reference_optimum(inst, orders)
        pb = parametric_bound(*args, max_boxes=400, forced=tuple(sorted(used)), once=True)
        assert pb.value <= best * (1 + 1e-12), (sorted(used), pb.value, best)
    with pytest.raises(ValueError, match="once"):
        parametric_bound(*args, max_boxes=10, once=True, revisits=1)


@pytest.mark.parametrize(("family", "seed", "lam", "sites"), [
    ("metro", 5, 1.0, "ABCDABC"), ("geo", 4, 0.5, "ABCDDCB"), ("metro", 0, 1.0, "ABCDABD"),
])
def test_prefix_bounds_never_exceed_the_plans_they_count(family: str, seed: int, lam: float,
                                                         sites: str) -> None:
    """N=7 on four sites (the GPUs' sites relabelled, links kept): for
    each site prefix, the bound of the plans visiting every site once, those first and in
    that order, is at most the best such plan (the reference over every GPU order); the
    least prefix bound of each length is at most the best once-each plan, and prefixes
    raise some bounds above the once-each bound (it is not a no-op)."""
    inst = _relabelled(family, seed, lam, sites)
    ev = Evaluator(inst)
    cl = bounds.clusters(inst)
    labels = sorted(set(cl.tolist()))
    args = (inst.coefficients(), inst.layers, cl, ev.weights)
    by_walk: dict[tuple[int, ...], list[list[int]]] = {}
    for k in range(len(labels), inst.n + 1):
        for o in itertools.permutations(range(inst.n), k):
            walk = _site_walk(o, cl)
            if len(walk) == len(set(walk)) == len(labels):
                by_walk.setdefault(walk, []).append(list(o))
    once = parametric_bound(*args, max_boxes=400, forced=tuple(labels), once=True).value
    raised = 0
    for j in range(1, len(labels) - 1):
        for prefix in itertools.permutations(labels, j):
            orders = [o for w, os in by_walk.items() if w[:j] == prefix for o in os]
            best = reference_optimum(inst, orders)[0] if orders else math.inf
            pb = parametric_bound(*args, max_boxes=400, prefix=prefix)
            assert pb.value <= best * (1 + 1e-12), (prefix, pb.value, best)
            raised += pb.value > once * (1 + 1e-6)
    assert raised >= 2
    with pytest.raises(ValueError, match="prefix"):
        parametric_bound(*args, max_boxes=10, prefix=tuple(labels[:1]), once=True)
    with pytest.raises(ValueError, match="prefix"):
        parametric_bound(*args, max_boxes=10, prefix=tuple(labels[:-1]))


@pytest.mark.parametrize("k", [3, 4, 6])
def test_prefix_parts_end_in_every_order_once(k: int) -> None:
    """Splitting a once-each node by prefixes, again and again, ends in path nodes: every
    order of its sites once."""
    allowed = frozenset("ABCDEFG"[:k])
    leaves: list[tuple[str, ...]] = []
    todo = [site_branching._ONCE]
    while todo:
        kind = todo.pop()
        prefix = () if kind == site_branching._ONCE else kind[1:]
        for a, f, child in site_branching._prefix_parts(allowed, prefix):
            assert a == f == allowed
            (todo if child[0] == site_branching._PREFIX else leaves).append(child)
    assert sorted(leaves) == sorted(itertools.permutations(sorted(allowed)))


@pytest.mark.parametrize(("family", "seed", "lam", "sites", "back"), [
    ("metro", 5, 1.0, "ABCDABC", 1), ("geo", 4, 0.5, "ABCDDCB", 1),
    ("metro", 0, 1.0, "ABCDABD", 1), ("metro", 5, 1.0, "ABCABCA", 2),
    ("geo", 4, 0.5, "ABCCBAB", 2),
])
def test_gapped_bounds_never_exceed_the_plans_they_count(family: str, seed: int, lam: float,
                                                         sites: str, back: int) -> None:
    """N=7 on four sites (three for two steps back; relabelled as above): every gapped
    node met when splitting the plans that step back once (twice: each site visited, one
    three times or two twice) bounds the best plan whose walk it holds (the reference over
    every GPU order), and so does each node's least child; gaps raise some bounds above
    the node of the sites visited more than once (not a no-op)."""
    inst = _relabelled(family, seed, lam, sites)
    ev = Evaluator(inst)
    cl = bounds.clusters(inst)
    names = bounds.site_names(inst)
    assert names is not None
    args = (inst.coefficients(), inst.layers, cl, ev.weights)
    by_walk: dict[tuple[str, ...], list[list[int]]] = {}
    for k in range(len(names) + 1, inst.n + 1):
        for o in itertools.permutations(range(inst.n), k):
            walk = tuple(names[x] for x in _site_walk(o, cl))
            if len(walk) == len(names) + back and len(set(walk)) == len(names):
                by_walk.setdefault(walk, []).append(list(o))
    allowed = frozenset(names)

    def holds(kind: tuple[str, ...], walk: tuple[str, ...]) -> bool:
        if kind[0] != site_branching._GAP:
            return kind == walk
        p, m, s = site_branching._gap_split(kind)
        return walk[:len(p)] == p and walk[len(walk) - len(s):] == s and \
            sorted(walk[len(p):len(walk) - len(s)]) == sorted(m)

    def bound(kind: tuple[str, ...]) -> float:
        label = {x: names.index(x) for x in names}
        if kind[0] != site_branching._GAP:
            return parametric_bound(*args, max_boxes=400, path=tuple(label[x] for x in kind)).value
        p, m, s = site_branching._gap_split(kind)
        return parametric_bound(*args, max_boxes=400, gapped=(
            tuple(label[x] for x in p), tuple(label[x] for x in m),
            tuple(label[x] for x in s))).value

    raised = 0
    for extra in itertools.combinations_with_replacement(names, back):
        if max(extra.count(x) for x in extra) >= parametric.MAX_VISITS:
            continue
        root = site_branching._gap_kind((), (*names, *extra), ())
        todo = [(root, bound(root))]
        top = todo[0][1]
        while todo:
            kind, value = todo.pop()
            orders = [o for w, os in by_walk.items() if holds(kind, w) for o in os]
            best = reference_optimum(inst, orders)[0] if orders else math.inf
            assert value <= best * (1 + 1e-12), (kind, value, best)
            raised += value > top * (1 + 1e-6)
            if kind[0] == site_branching._GAP:
                children = [(c, bound(c)) for _, _, c in site_branching._gap_parts(
                    allowed, *site_branching._gap_split(kind))]
                assert min(v for _, v in children) <= best * (1 + 1e-12)
                todo += children
    assert raised >= 4
    with pytest.raises(ValueError, match="gapped"):
        parametric_bound(*args, max_boxes=10, gapped=((0,), (), (1,)))
    with pytest.raises(ValueError, match="gapped"):
        parametric_bound(*args, max_boxes=10, gapped=((0,), (1, 2), (3,)), revisits=1)


@pytest.mark.parametrize(("family", "seed", "lam", "sites"), [
    ("metro", 5, 1.0, "AAAABCD"), ("geo", 4, 0.5, "AABACDA"), ("metro", 1, 0.5, "AAAAABCD"),
    ("geo", 2, 1.0, "AABAACDA"),
])
def test_joined_bounds_never_exceed_the_plans_they_count(family: str, seed: int, lam: float,
                                                         sites: str) -> None:
    """N=7 and 8 on four sites (L=8; relabelled as above), the plans stepping back three
    times that visit A four times (the walk DP holds three visits): every joined node met
    when splitting them (by first and last site) bounds the best such plan whose walk
    starts and ends as it says (the reference over every GPU order), and so does each
    node's least child; some rise above the kept-apart bound they replace (not a no-op)."""
    d = generators.by_family(family, len(sites), 8, seed, lam=lam)
    for g, x in zip(d["gpus"], sites, strict=True):
        g["site"] = x
    inst = resolve_normalisers(Instance.from_dict(d))
    cl = bounds.clusters(inst)
    names = bounds.site_names(inst)
    assert names is not None
    args = (inst.coefficients(), inst.layers, cl, Evaluator(inst).weights)
    label = {x: names.index(x) for x in names}
    by_walk: dict[tuple[str, ...], list[list[int]]] = {}
    for k in range(7, inst.n + 1):
        for o in itertools.permutations(range(inst.n), k):
            walk = tuple(names[x] for x in _site_walk(o, cl))
            if len(walk) == 7 and walk.count("A") == 4:
                by_walk.setdefault(walk, []).append(list(o))
    assert by_walk

    def bound(kind: tuple[str, ...]) -> float:
        p, m, s = site_branching._gap_split(kind)
        return parametric_bound(*args, max_boxes=400, joined=label["A"], gapped=tuple(
            tuple(label[x] for x in part) for part in (p, m, s))).value  # type: ignore[arg-type]

    def best_held(kind: tuple[str, ...]) -> float:
        p, _, s = site_branching._gap_split(kind)
        orders = [o for w, os in by_walk.items() if w[:len(p)] == p
                  and w[len(w) - len(s):] == s for o in os]
        return reference_optimum(inst, orders)[0] if orders else math.inf

    apart = parametric_bound(*args, max_boxes=400, forced=tuple(range(4)), revisits=3,
                             keep_apart=label["A"]).value
    allowed = frozenset(names)
    roots = [c for _, _, c in site_branching._gap_roots(allowed, 3, "A")]
    joined = [c for c in roots if c[0] == site_branching._JOINED]
    assert joined
    todo = [(c, bound(c)) for c in joined]
    raised = 0
    while todo:
        kind, value = todo.pop()
        best = best_held(kind)
        assert value <= best * (1 + 1e-12), (kind, value, best)
        raised += value > apart * (1 + 1e-6)
        children = [(c, bound(c)) for _, _, c in site_branching._gap_parts(
            allowed, *site_branching._gap_split(kind), kind[0])]
        if children:
            assert min(v for _, v in children) <= best * (1 + 1e-12)
        todo += children
    assert raised >= 2
    with pytest.raises(ValueError, match="joined"):
        parametric_bound(*args, max_boxes=10, joined=0)
    with pytest.raises(ValueError, match="joined"):
        parametric_bound(*args, max_boxes=10, gapped=((0,), (1, 2), (3,)), joined=0)


def _split_gapped(allowed: frozenset[str], kinds: list[tuple[str, ...]]
                  ) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """Gapped and joined nodes split again and again (:func:`_gap_parts`): the walks they
    end in, and the joined nodes that stop (those with a first and a last site)."""
    sb = site_branching
    leaves: list[tuple[str, ...]] = []
    joined: list[tuple[str, ...]] = []
    todo = list(kinds)
    while todo:
        kind = todo.pop()
        if kind[0] not in (sb._GAP, sb._JOINED):
            leaves.append(kind)
            continue
        parts = sb._gap_parts(allowed, *sb._gap_split(kind), kind[0])
        if kind[0] == sb._JOINED:
            p, _, s = sb._gap_split(kind)
            assert (parts == []) == (bool(p) and bool(s))
            if not parts:
                joined.append(kind)
        todo += [c for _, _, c in parts]
    return leaves, joined


@pytest.mark.parametrize("k", [4, 5])
def test_three_steps_back_parts_cover_every_walk(k: int) -> None:
    """The parts of a kept-apart node stepping back exactly three times (B kept apart):
    split again and again, the gapped ones end in every walk visiting B two or three times
    (no site more than three), and the joined ones hold every walk visiting B four times,
    as that walk with B's second and third visits joined; joined nodes stop at their first
    and last site."""
    sites = sorted("ABCDEFG"[:k])
    allowed = frozenset(sites)
    leaves, joined = _split_gapped(
        allowed, [c for _, _, c in site_branching._gap_roots(allowed, 3, "B")])
    walks = site_branching.walks_stepping_back(sites, 3)
    assert sorted(leaves) == [w for w in walks if 1 < w.count("B") <= 3
                              and max(map(w.count, w)) <= 3]
    four = [w for w in walks if w.count("B") == 4]
    assert four and all(c[0] == site_branching._JOINED for c in joined)
    for w in four:
        at = [i for i, x in enumerate(w) if x == "B"]
        pseudo = w[:at[2]] + w[at[2] + 1:]  # the third visit joined to the second
        assert any(_held(c, pseudo) for c in joined), w


@pytest.mark.parametrize(("sites", "back"), [("ABCD", 2), ("ABCD", 3), ("ABCDE", 3),
                                             ("ABC", 4)])
def test_more_runs_parts_cover_every_walk_stepping_back(sites: str, back: int) -> None:
    """Kept-apart nodes of a residual (one per site), split by the runs their plans hold
    (:func:`_more_runs`) until those runs step back as often as the residual: some leaf
    holds every walk stepping back that often (its sites hold at least the leaf's runs),
    and no leaf asks for more runs than ``back`` extra visits need."""
    sb = site_branching
    allowed = frozenset(sites)
    marker = next(k for k, v in sb._RESIDUALS.items() if v == back)[0]

    def extra(kind: tuple[str, ...]) -> int:
        return sum(r - 1 for r in sb._apart_runs(kind).values())

    def leaves(kind: tuple[str, ...]) -> list[tuple[str, ...]]:
        if extra(kind) >= back:
            return [kind]
        return [leaf for _, _, k in sb._more_runs(allowed, kind) for leaf in leaves(k)]

    found = [leaf for x in sorted(allowed) for leaf in leaves((sb._APART, x, marker))]
    assert all(extra(k) == back for k in found)
    assert len(set(found)) == len(found)  # each set of runs reached once
    runs = [sb._apart_runs(k) for k in found]
    walks = 0
    for n in range(len(sites) + back, len(sites) + back + 2):
        for w in itertools.product(sites, repeat=n):
            if set(w) != allowed or any(a == b for a, b in itertools.pairwise(w)):
                continue
            walks += 1
            assert any(all(w.count(x) >= r for x, r in need.items()) for need in runs), w
    assert walks


@pytest.mark.parametrize("runs", [{"B": 3, "C": 2}, {"B": 2, "C": 2, "D": 2}, {"C": 4}])
def test_runs_stepping_back_as_often_as_asked_split_by_their_walks(runs: dict[str, int]
                                                                     ) -> None:
    """A kept-apart node whose runs step back as often as its residual asks (three times),
    after its second search: split into the plans holding exactly those runs (gapped
    nodes; split on, their leaves are exactly the walks with those visits, and a site
    visited four times is a joined node holding each such walk with two visits joined)
    and the plans stepping back four times or more with the same runs."""
    sb = site_branching
    allowed = frozenset("ABCDE")
    kind = sb._apart_kind("<revisits3>", runs)
    assert sb._split(allowed, allowed, kind, allowed, [], ((), 0.0, True, False)) is None
    parts = sb._split(allowed, allowed, kind, allowed, [], ((), 0.0, True, True))
    assert parts is not None
    kinds = [k for _, _, k in parts]
    assert kinds[-1] == sb._apart_kind("<revisits4>", runs)
    leaves, joined = _split_gapped(allowed, kinds[:-1])
    walks = [w for w in sb.walks_stepping_back(sorted(allowed), 3)
             if all(w.count(x) == r for x, r in runs.items())]
    assert walks
    if max(runs.values()) <= 3:
        assert sorted(leaves) == sorted(walks) and not joined
    for w in walks if max(runs.values()) > 3 else []:
        at = [i for i, x in enumerate(w) if x == "C"]
        assert any(_held(c, w[:at[2]] + w[at[2] + 1:]) for c in joined), w


def test_kept_apart_nodes_stepping_back_three_times_split_when_asked() -> None:
    """With ``max_back=3`` a kept-apart node stepping back three times or more (after its
    second search) is split into gapped and joined nodes and the next residual; by
    default by the runs its plans hold (:func:`_more_runs`). Stepping back twice, it is
    split either way."""
    sb = site_branching
    a = frozenset("ABCDEF")
    deep = ((), 0.0, True, True)
    three = (sb._APART, "B", "<revisits3>")
    parts = sb._split(a, a, three, a, [], deep, 3)
    assert parts is not None
    kinds = [k for _, _, k in parts]
    assert (sb._APART, "B", "<revisits4>") in kinds
    assert any(k[0] == sb._JOINED for k in kinds) and any(k[0] == sb._GAP for k in kinds)
    assert sb._split(a, a, three, a, [], deep) == sb._more_runs(a, three)
    two = (sb._APART, "B", "<revisits2>")
    assert sb._split(a, a, two, a, [], deep, 3) == sb._split(a, a, two, a, [], deep)
    assert sb._split(a, a, two, a, [], deep) is not None
    # A joined node with its first and last site known is final.
    joined = sb._gap_kind(("A",), ("B", "B", "C", "D", "E", "F"), ("B",), sb._JOINED)
    assert sb._split(a, a, joined, a, [], deep, 3) is None
    inst = _instance("metro", 12, 12, 0, 1.0)
    root = instance_bound(inst, None, 1.0, 5.0)
    with pytest.raises(ValueError, match="apart_back"):
        site_branching.branch_on_sites(inst, root, None, time.perf_counter() + 1, apart_back=4)


def test_branching_with_three_steps_back_stays_below_the_optimum(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """metro N=9 L=10 on five sites (relabelled AAABBCCDE), no incumbent: branching that
    also splits kept-apart nodes stepping back three times searches joined nodes and
    stays below B&B's proven optimum, like the default (which searches none)."""
    d = generators.by_family("metro", 9, 10, 1, lam=1.0)
    for g, x in zip(d["gpus"], "AAABBCCDE", strict=True):
        g["site"] = x
    inst = resolve_normalisers(Instance.from_dict(d))
    opt = solve(inst, "bnb", seed=1, time_limit=600, threads=1, params={"parametric": False})
    assert opt.status == "optimal" and opt.objective is not None
    searched: list[tuple[str, ...]] = []
    node_bound = site_branching._node_bound

    def spy(instance: Instance, allowed: Any, forced: Any, kind: tuple[str, ...], *args: Any,
            **kw: Any) -> Any:
        searched.append(kind)
        return node_bound(instance, allowed, forced, kind, *args, **kw)

    monkeypatch.setattr(site_branching, "_node_bound", spy)
    root = instance_bound(inst, None, 1.0, 60.0)
    for back, joined in ((2, False), (3, True)):
        searched.clear()
        br = site_branching.branch_on_sites(inst, root, None, time.perf_counter() + 600,
                                            apart_back=back)
        assert root.value <= br.value <= opt.objective * (1 + 1e-12), (back, br.value)
        assert any(k and k[0] == site_branching._JOINED for k in searched) == joined


def _held(kind: tuple[str, ...], walk: tuple[str, ...]) -> bool:
    """Whether a gapped node holds ``walk`` (its prefix, suffix and middle's multiset)."""
    p, m, s = site_branching._gap_split(kind)
    return walk[:len(p)] == p and walk[len(walk) - len(s):] == s and \
        sorted(walk[len(p):len(walk) - len(s)]) == sorted(m)


@pytest.mark.parametrize(("k", "back", "twice"), [
    (3, 1, None), (4, 1, None), (5, 1, None), (3, 2, None), (4, 2, None), (3, 2, "B"),
    (5, 2, "C"),
])
def test_gap_parts_end_in_every_walk_stepping_back(k: int, back: int, twice: str | None
                                                   ) -> None:
    """Splitting the plans that step back once (twice) by gaps, again and again, ends in
    walks: every walk through each site stepping back that often, exactly once (with
    ``twice``: those visiting that site more than once, as a kept-apart node is split)."""
    sites = sorted("ABCDEFG"[:k])
    allowed = frozenset(sites)
    leaves: list[tuple[str, ...]] = []
    todo: list[tuple[str, ...]] = []
    for a, f, child in site_branching._gap_roots(allowed, back, twice):
        assert a == f == allowed
        (todo if child[0] == site_branching._GAP else leaves).append(child)
    assert todo
    while todo:
        kind = todo.pop()
        for a, f, child in site_branching._gap_parts(allowed, *site_branching._gap_split(kind)):
            assert a == f == allowed
            (todo if child[0] == site_branching._GAP else leaves).append(child)
    walks = site_branching.walks_stepping_back(sites, back)
    assert sorted(leaves) == [w for w in walks if twice is None or w.count(twice) > 1]


@pytest.mark.parametrize(("family", "n", "seed"), [("metro", 12, 0), ("geo", 12, 3)])
def test_a_gap_of_one_visit_is_its_walk(family: str, n: int, seed: int) -> None:
    """A gapped walk with one visit in the middle and a prefix and suffix is that walk:
    the same tables for the walk DP."""
    inst = _instance(family, n, n, seed, 1.0)
    cl = bounds.clusters(inst)
    sites = sorted(set(cl.tolist()))
    bx = parametric._Boxes(inst.coefficients(), inst.layers, cl, Evaluator(inst).weights)
    for walk in itertools.permutations(sites + sites[:1], len(sites) + 1):
        if any(a == b for a, b in itertools.pairwise(walk)):
            continue
        for i in range(1, len(walk) - 1):
            bx.follow_gapped(walk[:i], walk[i:i + 1], walk[i + 1:])
            assert bx.walk is not None
            gap = bx.walk
            ref = parametric._walk_tables(bx.comm, cl, bx.order, walk)
            for a, b in zip(gap, ref, strict=True):
                np.testing.assert_array_equal(a, b)


def test_a_run_state_never_shrinks() -> None:
    """The twin reduction moves a changed run only towards run 0 (``_canonical``): that
    holds because no role lowers a run's state code."""
    for q in range(parametric._RUN_STATES):
        for role in range(parametric._WALK_ROLES):
            nq = parametric._run_step(q, role)
            assert nq == -1 or nq >= q, (q, role, nq)


@pytest.mark.parametrize(("family", "n", "seed"), [("metro", 12, 0), ("geo", 12, 3),
                                                   ("metro", 16, 2)])
def test_twin_runs_reduce_the_walk_dp_exactly(family: str, n: int, seed: int) -> None:
    """Twin runs (a site's visits in a gap's middle: same neighbours and ends) take their
    states as a multiset; the reduced DP (untraced) and the full one (traced) agree on
    value and stage count on every box and multiplier tried."""
    inst = _instance(family, n, n, seed, 1.0)
    cl = bounds.clusters(inst)
    sites = sorted(set(cl.tolist()))
    bx = parametric._Boxes(inst.coefficients(), inst.layers, cl, Evaluator(inst).weights)
    x = sites[0]
    twins = compared = 0
    for prefix, middle, suffix in (((), (x, x, *sites[1:]), ()),
                                   ((sites[1],), (x, x, x, *sites[2:]), ()),
                                   ((), (x, x, *sites[1:], sites[-1]), (x,))):
        bx.follow_gapped(prefix, middle, suffix)
        assert bx.walk is not None
        twins += int(bx.walk[3].sum())
        for qa in (2, len(prefix) + len(middle) + len(suffix)):
            for z in (bx.zmin(qa, bx.q_max) * 1.5, bx.z_worst):
                for mu in (0.0, -2.0, 4.0):
                    args = (qa, z, 1.0, 0.3, 0.1, mu, 1)
                    reduced = bx._run_dp(*args, False)
                    full = bx._run_dp(*args, True)
                    assert math.isfinite(full[0]) == math.isfinite(reduced[0])
                    if math.isfinite(full[0]):
                        assert reduced[0] == pytest.approx(full[0], rel=1e-12), (middle, mu)
                        assert reduced[1] == full[1]
                        compared += 1
    assert twins > 0 and compared > 0


@pytest.mark.parametrize(("family", "n", "seed"), [("metro", 12, 0), ("geo", 12, 3),
                                                   ("metro", 16, 2)])
def test_walk_dp_on_a_path_is_the_site_dp(family: str, n: int, seed: int) -> None:
    """On a path (each site once) the walk DP and the site DP solve the same relaxation:
    their values and stage counts agree on every box and multiplier tried."""
    inst = _instance(family, n, n, seed, 1.0)
    cl = bounds.clusters(inst)
    c = inst.coefficients()
    sites = sorted(set(cl.tolist()))
    for path in (tuple(sites), tuple(reversed(sites)), tuple(sites[:2])):
        site = parametric._Boxes(c, inst.layers, cl, Evaluator(inst).weights)
        labels = np.unique(cl)
        site.follow_walk(path)
        site.force = site.site_last & np.isin(cl[site.order], np.asarray(path))
        index = {int(k): i for i, k in enumerate(labels)}
        site.restrict_ends(index[path[0]], index[path[-1]])
        walk = parametric._Boxes(c, inst.layers, cl, Evaluator(inst).weights)
        walk.walk = parametric._walk_tables(walk.comm, cl, walk.order, path)
        for qa in (2, len(path) + 1):
            for z in (site.zmin(qa, site.q_max) * 1.3, site.z_worst):
                for mu in (0.0, -3.0, 5.0):
                    a = site._dp(qa, z, 1.0, 0.0, 0.0, mu, 1)
                    b = walk._dp(qa, z, 1.0, 0.0, 0.0, mu, 1)
                    if math.isfinite(a[0]) or math.isfinite(b[0]):
                        assert b[0] == pytest.approx(a[0], rel=1e-12, abs=1e-9), (path, qa, z, mu)
                        assert b[1] == a[1]


def test_one_revisit_walks_are_counted() -> None:
    """On k sites: k (k + 1)! / 2 walks of k + 1 visits minus those with the repeated
    site twice in a row (k k!): 18 on 3 sites, 144 on 4, each visiting one site twice."""
    for sites, count in ((["a", "b", "c"], 18), (["a", "b", "c", "d"], 144)):
        walks = site_branching.walks_stepping_back(sites, 1)
        assert walks == sorted(walks)
        assert len(walks) == len(set(walks)) == count
        for w in walks:
            assert sorted(set(w)) == sites and len(w) == len(sites) + 1
            assert all(a != b for a, b in itertools.pairwise(w))


def test_walks_stepping_back_are_counted() -> None:
    """Two steps back on three sites: the 3 * 2^4 words of five letters with no letter
    twice in a row, less the 6 that miss a site."""
    walks = site_branching.walks_stepping_back(["a", "b", "c"], 2)
    assert len(walks) == len(set(walks)) == 42
    assert walks == sorted(walks)
    assert all(len(w) == 5 and set(w) == {"a", "b", "c"} for w in walks)
    assert max(max(w.count(x) for x in w) for w in walks) == 3


def test_site_paths_are_checked() -> None:
    inst = _instance("metro", 6, 6, 0, 1.0)
    args = (inst.coefficients(), inst.layers, bounds.clusters(inst), Evaluator(inst).weights)
    with pytest.raises(ValueError, match="two or more sites, none twice in a row"):
        parametric_bound(*args, path=(0, 0))
    with pytest.raises(ValueError, match="two or more sites, none twice in a row"):
        parametric_bound(*args, path=(0, 1, 1))
    with pytest.raises(ValueError, match="at most 3 times"):
        parametric_bound(*args, path=(0, 1, 0, 1, 0, 1, 0))
    assert parametric_bound(*args, path=(0, 99)).value == math.inf


def test_branching_finds_and_proves_the_path_optimum() -> None:
    """metro N=12 L=12 seed 1 (three sites): from a plan 3 % above B&B's optimum,
    branching on sites returns a plan from a path node's minimiser, priced by the
    evaluator as it says: the optimum, proven by the bound it returns."""
    inst = _instance("metro", 12, 12, 1, 1.0)
    opt = solve(inst, "bnb", seed=1, time_limit=600, threads=1, params={"parametric": False})
    assert opt.status == "optimal" and opt.objective is not None
    incumbent = opt.objective * 1.03
    root = instance_bound(inst, incumbent, 1.0, 600.0)
    refined = refine_by_sites(inst, root, incumbent, 1.0, 600.0)
    assert refined.plan is not None and refined.plan_objective is not None
    e = Evaluator(inst).evaluate(Plan.from_pairs(refined.plan))
    assert e.feasible and e.objective == pytest.approx(refined.plan_objective, rel=1e-12)
    assert refined.plan_objective == pytest.approx(opt.objective, rel=1e-9)
    assert root.value < refined.value <= refined.plan_objective * (1 + 1e-12)
    assert parametric.proves(refined.value, refined.plan_objective)


def _priced_space(family: str, seed: int, lam: float, sites: str) -> tuple[Any, ...]:
    """The relabelled instance, every plan priced, which are feasible, each GPU's site,
    an incumbent at the 2 % quantile of the feasible objectives, and the root bound."""
    inst = _relabelled(family, seed, lam, sites)
    space = reference_space(inst)
    ok = space.feasible & np.isfinite(space.objective)
    site = {g.id: g.site for g in inst.gpus}
    incumbent = float(np.quantile(space.objective[ok], 0.02))
    return inst, space, ok, site, incumbent, instance_bound(inst, incumbent, 1.0, 600.0)


@pytest.mark.parametrize(("family", "seed", "lam", "sites"), [
    ("metro", 5, 1.0, "ABCDABC"), ("geo", 4, 0.5, "ABCDDCB"), ("geo", 2, 0.5, "ABCABCA"),
])
def test_open_classes_hold_every_better_plan(family: str, seed: int, lam: float,
                                             sites: str) -> None:
    """N=7, L=6 (relabelled as above): whenever branching stops (after a number of calls
    of its stop rule: a deterministic stop; or at its end), every plan better than its
    incumbent (the reference prices all of them) uses a site walk some open class admits;
    the classes say something (some bound the sends) and such plans are left to check."""
    inst, space, ok, site, incumbent, root = _priced_space(family, seed, lam, sites)
    checked = informative = boxed = 0
    for limit in (1, 60, 400, 3000, 10**9):
        calls = itertools.count()
        br = site_branching.branch_on_sites(inst, root, incumbent, time.perf_counter() + 600,
                                            lambda: next(calls) >= limit)  # noqa: B023
        ub = incumbent if br.objective is None else br.objective
        # No class: no open node, or every open node's bound proves ub (within tolerance).
        assert bool(br.classes) or br.open_nodes == 0 or parametric.proves(br.value, ub)
        informative += any(c.min_sends > 0 or c.max_sends is not None for c in br.classes)
        for k in np.nonzero(ok & (space.objective < ub * (1 - 1e-9)))[0]:
            walk = [site[g] for g in space.orders[k]]
            assert any(_holds(inst, c, space, k, walk) for c in br.classes), (
                limit, walk, br.classes)
            boxed += any(c.boxes for c in br.classes)
            checked += 1
    assert checked > 0 and informative >= 1 and boxed > 0


def _holds(inst: Any, c: parametric.PlanClasses, space: Any, k: int, walk: list[str]) -> bool:
    """Whether class ``c`` holds plan ``k`` of the reference space: it admits its site walk
    and, when the class keeps its nodes' boxes, one of them holds its stage count and
    bottleneck (within rounding) and bounds its objective and stage-time sum."""
    if not c.admits(walk):
        return False
    if not c.boxes:
        return True
    cf = inst.coefficients()
    g = np.asarray([inst.gpu_index[x] for x in space.orders[k]], np.int64)
    n = np.asarray(space.counts[k], np.int64)
    q = len(g)
    terms = [kernel.stage_terms(j, g, n, q, cf.comp_ms, cf.comm_ms, cf.overhead_ms)
             for j in range(q)]
    tmax = max(t[3] for t in terms)
    obj = float(space.objective[k])
    tol = 1e-9
    return any(b.qa <= q <= b.qb and b.za * (1 - tol) - tol <= tmax <= b.zb * (1 + tol) + tol
               and b.bound <= obj * (1 + tol) for b in c.boxes)


def test_sends_of_each_node_kind() -> None:
    """The inter-site sends of a node's plans (visits - 1), by hand."""
    a, f = frozenset("ABCD"), frozenset("AB")
    sb = site_branching
    assert sb._sends(a, f, ()) == (1, None)
    assert sb._sends(a, frozenset(), ()) == (0, None)
    assert sb._sends(a, a, sb._REVISITS2) == (5, None)
    assert sb._sends(a, a, (sb._APART, "B", "<revisits3>")) == (6, None)
    assert sb._sends(a, a, sb._ONCE) == (3, 3)
    assert sb._sends(a, a, (sb._PREFIX, "C")) == (3, 3)
    assert sb._sends(a, a, ("A", "B", "A", "C", "D")) == (4, 4)
    assert sb._sends(a, a, sb._gap_kind(("A",), ("B", "C", "D"), ("B",))) == (4, 4)
    # A joined node's plans make one visit more than its walks: A B A C A D A.
    joined = sb._gap_kind(("A",), ("A", "B", "C", "D"), ("A",), sb._JOINED)
    assert sb._sends(a, a, joined) == (6, 6)


def test_few_path_nodes_are_classes_of_their_own() -> None:
    """Up to _PATH_CLASSES open path nodes (and nothing else that does not step back) are
    a class each, its order the steps ``admits`` allows; more are one class."""
    sb = site_branching
    a = frozenset("ABCD")
    paths = [(a, a, p) for p in (("B", "D", "A", "C"), ("C", "A", "D", "B"))]
    rest = (a, a, sb._REVISITS2)
    three = (frozenset("ABC"), frozenset("ABC"), ("A", "C", "B"))
    box = parametric.Box(1.0, 4, 5, 2.0, 3.0, 10.0)
    classes = sb._classes([(*n, (box,)) for n in [*paths, rest, three]])
    assert [c.orders for c in classes] == [
        (("A", "C", "B"),), (("B", "D", "A", "C"),), (("C", "A", "D", "B"),), ()]
    assert classes[1].admits(list("BBDAACC")) and not classes[1].admits(list("CADB"))
    assert not classes[1].admits(list("BDACA")) and not classes[1].admits(list("ABCD"))
    assert not classes[0].admits(list("ABC")) and classes[0].admits(list("ACCB"))
    assert classes[2].admits(list("CADB"))
    assert classes[3].revisits == 2 and classes[3].min_sends == 5
    assert all(c.boxes == (box,) for c in classes)  # each node's boxes go with its class
    many = [(a, a, p, (box,)) for p in itertools.permutations("ABCD")][:sb._PATH_CLASSES + 1]
    (lumped,) = sb._classes(many)
    assert lumped.orders == () and (lumped.min_sends, lumped.max_sends) == (3, 3)
    assert lumped.boxes == (box,) * len(many)
    mixed = sb._classes([*[(*n, (box,)) for n in paths], (a, frozenset("A"), (), ())])
    assert len(mixed) == 1 and mixed[0].orders == ()
    assert mixed[0].boxes == ()  # a node without boxes: the class has none


def test_open_sets_are_the_sites_of_open_nodes_not_stepping_back() -> None:
    """``_open_sets``: per open node that need not step back, its own sites where it fixes
    them (allowed = forced), else its minimiser's; distinct, two sites or more, least bound
    first. By hand."""
    sb = site_branching
    abcd, ab = frozenset("ABCD"), frozenset("AB")
    nodes = [
        (5.0, frozenset("ABC"), abcd, ab, ()),              # minimiser's sites: A B C
        (1.0, frozenset("AB"), abcd, abcd, sb._REVISITS2),  # steps back: left out
        (2.0, frozenset("AB"), abcd, abcd, ("D", "C", "B", "A")),  # a path: its sites
        (3.0, frozenset("B"), abcd, frozenset(), ()),       # one site: left out
        (4.0, frozenset("AB"), abcd, abcd, (sb._PREFIX, "C")),  # the same set again
        (6.0, frozenset("BD"), frozenset("BD"), frozenset("BD"), sb._ONCE),
    ]
    assert sb._open_sets(nodes) == (("A", "B", "C", "D"), ("A", "B", "C"), ("B", "D"))
    assert sb._open_sets([]) == ()


@pytest.mark.skipif(not forkpool.available(), reason="no fork here")
def test_branching_in_two_workers_proves_what_one_does() -> None:
    """The instance above, its node searches in two forked workers: the same proof, the
    bound between the root's and the plan's. (About a second: the deadline is never
    near.)"""
    inst = _instance("metro", 20, 20, 2, 1.0)
    plan = solve(inst, "milp", seed=0, time_limit=120, threads=1)
    assert plan.status == "optimal" and plan.objective is not None
    root = instance_bound(inst, None, 1.0, 60.0)
    refined = refine_by_sites(inst, root, None, 1.0, 60.0, workers=2)
    assert root.value < refined.value <= plan.objective * (1 + 1e-12)
    assert parametric.proves(refined.value, plan.objective)
    assert refined.branching is not None and refined.branching["nodes"] >= 2  # type: ignore[operator]


@pytest.mark.skipif(not forkpool.available(), reason="no fork here")
@pytest.mark.parametrize(("family", "seed", "lam", "sites"), [
    ("metro", 5, 1.0, "ABCDABC"), ("geo", 4, 0.5, "ABCDDCB")])
def test_open_classes_hold_every_better_plan_in_two_workers(family: str, seed: int,
                                                            lam: float, sites: str) -> None:
    """As above, branching to its end with two workers: every plan better than its
    incumbent lies in an open class, and its bound never exceeds the optimum."""
    inst, space, ok, site, incumbent, root = _priced_space(family, seed, lam, sites)
    br = site_branching.branch_on_sites(inst, root, incumbent, time.perf_counter() + 600,
                                        workers=2)
    ub = incumbent if br.objective is None else br.objective
    assert br.value <= float(space.objective[ok].min()) * (1 + 1e-12)
    better = np.nonzero(ok & (space.objective < ub * (1 - 1e-9)))[0]
    for k in better:
        walk = [site[g] for g in space.orders[k]]
        assert any(_holds(inst, c, space, k, walk) for c in br.classes), (walk, br.classes)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sets(st.sampled_from("ABCD"), min_size=1),
                          st.sets(st.sampled_from("ABCD")), st.integers(0, 4),
                          st.one_of(st.none(), st.integers(0, 5)), st.booleans()),
                min_size=1, max_size=4),
       st.lists(st.sampled_from("ABCD"), min_size=1, max_size=7))
def test_the_hull_admits_every_plan_of_its_classes(
        specs: list[tuple[set[str], set[str], int, int | None, bool]],
        walk: list[str]) -> None:
    """``PlanClasses.hull`` is a relaxation of the union (the MILP keeps only the hull):
    a plan some class admits, the hull admits."""
    classes = []
    for sites, forced, lo, hi, path in specs:
        order = tuple(sorted(sites))
        classes.append(parametric.PlanClasses(
            order, tuple(sorted(forced & sites)), lo, hi,
            orders=(order,) if path else ()))
    hull = parametric.PlanClasses.hull(classes)
    if any(c.admits(list(walk)) for c in classes):
        assert hull.admits(list(walk))
    assert set(hull.sites) == set().union(*(c.sites for c in classes))
