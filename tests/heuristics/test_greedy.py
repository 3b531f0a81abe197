"""greedy: deterministic, optimises the instance's objective, exact split for its order."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from oracle import reference_optimum

import heuristics.greedy as greedy
from geoplan.cost import evaluate
from geoplan.cost.baseline import proportional_split
from geoplan.errors import InputError
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import SolveOptions, solve
from geoplan.solving.result import Outcome


def generated(family: str, n: int, layers: int, seed: int, **kw: Any) -> Instance:
    return Instance.from_dict(by_family(family, n, layers, seed, **kw))


def run(instance: Instance, seed: int = 0, **params: Any) -> Outcome:
    return greedy.solve(instance, SolveOptions(seed=seed, time_limit=60.0, params=params))


def test_deterministic_and_seed_free() -> None:
    inst = generated("paper", 10, 16, seed=3)
    a, b, c = run(inst, seed=0), run(inst, seed=0), run(inst, seed=99)
    assert a.plan == b.plan == c.plan
    assert [r.incumbent for r in a.trace] == [r.incumbent for r in c.trace]
    assert a.info["complete"] is True and a.info["starts_tried"] == inst.n


@pytest.mark.parametrize("lam", [1.0, 0.5, 0.0])
def test_no_worse_than_any_single_gpu_plan(lam: float) -> None:
    # Every start's one-stage chain is a candidate, so greedy beats every feasible
    # one-GPU plan on the instance's own objective (priced independently here).
    inst = generated("metro", 7, 12, seed=2, lam=lam)
    r = solve(inst, "greedy", seed=0)
    # evaluate() resolves the same Metis-default normalisers as solve() did.
    singles = [evaluate(inst, Plan.from_pairs([(g, inst.layers)])) for g in inst.gpu_ids]
    feasible = [e.objective for e in singles if e.feasible]
    assert feasible
    assert r.objective <= min(feasible) * (1 + 1e-12)


def test_energy_objective_changes_the_plan() -> None:
    # Greedy optimises the objective it is given, unlike the time-only Metis rules.
    fast = solve(generated("paper", 8, 12, seed=1, lam=1.0), "greedy", seed=0)
    green = solve(generated("paper", 8, 12, seed=1, lam=0.0), "greedy", seed=0)
    assert green.e_iter_j < fast.e_iter_j and fast.t_iter_ms < green.t_iter_ms


def test_exact_split_is_optimal_for_the_chosen_order(three_gpu: Instance) -> None:
    out = run(three_gpu)
    assert out.info["split"] == "exact" and out.plan is not None
    order = out.plan.gpu_indices(three_gpu)
    # The reference enumerator over every split of that GPU order.
    assert out.model_objective == pytest.approx(reference_optimum(three_gpu, [order])[0])
    assert out.model_objective == pytest.approx(evaluate(three_gpu, out.plan).objective)


def test_proportional_split_when_asked_or_when_exact_is_missing(
    three_gpu: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = run(three_gpu, split="proportional")
    exact = run(three_gpu)
    monkeypatch.setattr(greedy, "_exact_splitter", lambda instance: None)
    missing = run(three_gpu)  # as if formulations/split.py were absent
    assert asked.info["split"] == missing.info["split"] == "proportional"
    assert asked.plan == missing.plan and asked.plan is not None
    c = three_gpu.coefficients()
    order = asked.plan.gpu_indices(three_gpu)
    q = len(order)
    caps = [min(12, int(c.layer_caps(q, last=False)[g])) for g in order]
    caps[-1] = min(12, int(c.layer_caps(q, last=True)[order[-1]]))
    assert list(asked.plan.layer_counts) == proportional_split(1.0 / c.comp_ms[order], 12, caps)
    # On this instance the exact split wins overall: 1509.3 ms (a:7 b:2 c:3) vs 1693.2 (a:8 b:4).
    assert exact.model_objective < asked.model_objective * (1 - 1e-6)


def test_chains_follow_two_way_links(three_gpu: Instance) -> None:
    # three_gpu links a<->b and b<->c only: from a the chain must be a, b, c.
    split, _ = greedy.make_splitter(three_gpu)
    chains = greedy.greedy_chains(three_gpu, 0, split)
    assert [cand[1] for cand in chains] == [[0], [0, 1], [0, 1, 2]]
    for first in range(3):
        for _, order, counts in greedy.greedy_chains(three_gpu, first, split):
            assert sum(counts) == 12 and all(n >= 1 for n in counts)
            assert all(three_gpu.has_link[a, b] and three_gpu.has_link[b, a]
                       for a, b in itertools.pairwise(order))


def test_starts_parameter_and_time_budget() -> None:
    inst = generated("geo", 8, 12, seed=2)
    one = run(inst, starts=1)
    assert one.info["starts_tried"] == 1 and one.plan is not None
    spent = SolveOptions(seed=0, time_limit=0.5, start=time.perf_counter() - 1.0)
    late = greedy.solve(inst, spent)
    # The first (fastest) start always runs until it has a feasible plan (its chain stops
    # there: a whole chain costs seconds at N=256); the spent budget stops the rest.
    assert late.info["starts_tried"] == 1 and late.info["complete"] is False
    assert late.plan is not None


@pytest.mark.parametrize(("key", "bad"), [("split", "dp"), ("starts", 0), ("starts", "all")])
def test_bad_parameters(three_gpu: Instance, key: str, bad: Any) -> None:
    with pytest.raises(InputError):
        run(three_gpu, **{key: bad})
