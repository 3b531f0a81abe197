"""random-restart: neighbourhoods, determinism, stopping, warm starts, quality."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from oracle import reference_optimum

from geoplan.cost import evaluate
from geoplan.cost.baseline import metis_default_plan
from geoplan.cost.batch import BatchEvaluator
from geoplan.errors import InputError
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import Callbacks, SolveOptions, solve
from geoplan.solving.result import Outcome
from heuristics import rrls


def generated(family: str, n: int, layers: int, seed: int, **kw: Any) -> Instance:
    return Instance.from_dict(by_family(family, n, layers, seed, **kw))


def run(instance: Instance, seed: int = 0, callbacks: Callbacks | None = None,
        warm: tuple[Plan, ...] = (), **params: Any) -> Outcome:
    options = SolveOptions(seed=seed, time_limit=60.0, params=params, warm_start=warm,
                           callbacks=callbacks or Callbacks())
    return rrls.solve(instance, options)


# ----------------------------------------------------------------------------- neighbourhood


def test_neighbourhood_counts_and_validity() -> None:
    # Stages (0:2, 1:3, 2:1) on N = 5 GPUs, L = 6:
    # shift: boundary 0|1 both ways (2), boundary 1|2 only rightwards (stage 2 has 1 layer) -> 3
    # swap: C(3, 2) = 3; replace: 3 stages x 2 unused = 6; drop: 1 + 2 + 1 = 4
    # add: stages with >= 2 layers (0 and 1) x 2 unused x 2 halves = 8
    x = np.array([0, 0, 1, 1, 1, 2])
    X, kinds = rrls.neighbourhood(x, 5)
    assert X.shape == (24, 6)
    assert np.bincount(kinds, minlength=5).tolist() == [3, 3, 6, 4, 8]
    for row in X:
        g = row[np.r_[True, row[1:] != row[:-1]]]
        assert len(set(g.tolist())) == len(g)  # contiguous, distinct GPUs
        assert not np.array_equal(row, x)
    rows = {tuple(r) for r in X.tolist()}
    assert len(rows) == 24
    assert (2, 1, 1, 1, 0, 0) in rows  # swap stages 0 and 2: (2:1, 1:3, 0:2)
    assert (0, 0, 3, 3, 3, 2) in rows  # replace stage 1 by GPU 3
    assert (0, 0, 1, 1, 1, 1) in rows  # drop stage 2 into stage 1
    assert (0, 0, 4, 1, 1, 2) in rows  # add GPU 4 on the first half of stage 1 (3 // 2 = 1)


def test_neighbourhood_respects_stage_limit() -> None:
    # Q = min(N, L) = 2 already: no add moves, nothing unused to replace with.
    X, kinds = rrls.neighbourhood(np.array([1, 1, 0]), 2)
    assert set(kinds.tolist()) == {0, 1, 3}
    assert all(len(set(r)) <= 2 for r in X.tolist())


def test_random_chromosomes_are_plans() -> None:
    rng = np.random.default_rng(3)
    X = rrls.random_chromosomes(rng, 6, 10, 200)
    stage_counts = set()
    for row in X:
        g = row[np.r_[True, row[1:] != row[:-1]]]
        assert len(set(g.tolist())) == len(g) and 0 <= row.min() and row.max() < 6
        stage_counts.add(len(g))
    assert stage_counts == set(range(1, 7))  # Q spans 1..min(N, L)


# ----------------------------------------------------------------------------- search


def test_deterministic_given_seed_and_restarts() -> None:
    inst = generated("paper", 9, 12, seed=2)
    a = run(inst, seed=11, max_restarts=6)
    b = run(inst, seed=11, max_restarts=6)
    assert a.plan == b.plan
    assert [r.incumbent for r in a.trace] == [r.incumbent for r in b.trace]
    for key in ("restarts", "descent_steps", "evaluations", "accepted_moves"):
        assert a.info[key] == b.info[key]
    assert a.info["restarts"] == 6 and a.info["timed_out"] is False


def test_first_improvement_is_deterministic_too() -> None:
    inst = generated("metro", 8, 12, seed=5)
    a = run(inst, seed=3, max_restarts=4, improvement="first")
    b = run(inst, seed=3, max_restarts=4, improvement="first")
    assert a.plan == b.plan and a.info["descent_steps"] == b.info["descent_steps"]


def test_result_is_a_local_optimum() -> None:
    inst = generated("geo", 8, 12, seed=1)
    out = run(inst, seed=0, max_restarts=3)
    assert out.plan is not None
    ev = BatchEvaluator(inst)
    x = out.plan.to_chromosome(inst)
    f = float(ev.evaluate(x).objective[0])
    X, _ = rrls.neighbourhood(x, inst.n)
    assert float(ev.evaluate(X).objective.min()) >= f * (1 - 1e-12)


def test_finds_the_optimum_of_a_small_space(three_gpu: Instance) -> None:
    # f(3, 12) = 3 + 11*6 + 55*6 = 399 plans, priced by the reference enumerator.
    best, _, r = reference_optimum(three_gpu)
    assert r.plans == 399
    out = run(three_gpu, seed=0, max_restarts=10)
    assert out.model_objective == pytest.approx(best, rel=1e-12)


def test_trace_and_callbacks_record_every_improvement() -> None:
    seen: list[float] = []

    class Spy(Callbacks):
        def on_improvement(self, seconds: float, incumbent: float | None,
                           bound: float | None) -> None:
            seen.append(incumbent)

    out = run(generated("paper", 10, 16, seed=3), seed=1, callbacks=Spy(), max_restarts=4)
    inc = [r.incumbent for r in out.trace]
    assert inc == seen and len(inc) >= 2
    assert all(b < a for a, b in itertools.pairwise(inc))  # strictly improving
    assert all(r.bound is None for r in out.trace)
    assert inc[-1] == out.model_objective


def test_stall_restarts_stops_the_search() -> None:
    out = run(generated("geo", 4, 8, seed=1), seed=0, stall_restarts=3)
    assert out.info["timed_out"] is False and out.info["restarts"] >= 3


def test_solve_prices_mixed_objective() -> None:
    inst = generated("metro", 6, 12, seed=4, lam=0.5)
    r = solve(inst, "random-restart", seed=2, params={"max_restarts": 3})
    assert r.status == "feasible" and r.t_ref_ms is not None and r.e_ref_j is not None
    # The core cross-checks model_objective against the shared evaluator.
    assert r.objective == pytest.approx(r.trace[-1].incumbent)


@pytest.mark.parametrize(("key", "bad"), [("improvement", "worst"), ("max_restarts", 0),
                                          ("stall_restarts", 1.5), ("start_tries", -1)])
def test_bad_parameters(three_gpu: Instance, key: str, bad: Any) -> None:
    with pytest.raises(InputError):
        run(three_gpu, **{key: bad})


# ----------------------------------------------------------------------------- warm starts


def test_warm_start_is_accepted_and_never_lost() -> None:
    inst = generated("paper", 10, 12, seed=6)
    warm = solve(inst, "metis-improved", seed=0, params={"samples": 50})
    r = solve(inst, "random-restart", seed=0, warm_start=warm.plan,
              params={"max_restarts": 1})
    assert r.info["warm_start_accepted"] is True and r.info["warm_start"]["accepted"] is True
    assert r.info["restarts"] == 1  # the one descent started from the warm plan
    assert r.objective <= warm.objective * (1 + 1e-12)


def test_infeasible_or_foreign_warm_starts_are_refused(three_gpu: Instance) -> None:
    bad = (
        Plan.from_pairs([("a", 6), ("c", 6)]),  # no a<->c link
        Plan.from_pairs([("a", 12)], micro_batch_size=2),  # another micro-batch size
        Plan.from_pairs([("zz", 12)]),  # unknown GPU
        Plan.from_pairs([("a", 5), ("b", 5)]),  # 10 of 12 layers
    )
    out = run(three_gpu, warm=bad, max_restarts=2)
    assert out.info["warm_start_accepted"] is False and out.info["warm_starts_used"] == 0
    assert out.plan is not None  # random starts still run


def test_metis_default_start_when_random_draws_all_fail(
    three_gpu: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every draw uses GPUs a and c next to each other, which have no link: infeasible.
    def no_luck(rng: np.random.Generator, n: int, layers: int, count: int) -> np.ndarray:
        return np.tile(np.repeat([0, 2], [6, 6]), (count, 1))

    monkeypatch.setattr(rrls, "random_chromosomes", no_luck)
    out = run(three_gpu, max_restarts=3, start_tries=128)
    # Restart 1 falls back to the Metis-default plan once; restarts 2 and 3 find no start.
    assert out.info["restarts"] == 3 and out.info["failed_starts"] == 2
    assert out.plan is not None and out.trace
    default = metis_default_plan(three_gpu)
    assert default is not None
    assert out.model_objective <= evaluate(three_gpu, default).objective
