"""The main loop: parameters, determinism, trace and callbacks, warm starts, solver entry."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from geoplan.cli import main as cli_main
from geoplan.cost import evaluate
from geoplan.errors import InputError
from geoplan.model.generators import by_family
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving import core as solvers
from geoplan.solving.core import Callbacks, SolverSpec, solve
from geoplan.solving.result import Outcome
from heuristics.memetic import MemeticParams, run_memetic
from heuristics.memetic.stop import TargetObjective

# Random initialisation (no site-order seeds), so that the GA itself has work to do.
SHORT = MemeticParams(population=40, max_generations=25, no_improvement=1000, site_order=False,
                      ils=0)


@pytest.fixture(scope="module")
def metro() -> Instance:
    return Instance.from_dict(by_family("metro", 8, 16, 5))


def test_params_defaults_are_the_papers() -> None:
    p = MemeticParams()
    assert (p.population, p.tournament, p.elite, p.ls_rate) == (200, 4, 2, 0.5)
    assert (p.time_limit, p.no_improvement, p.max_generations) == (120.0, 100, None)
    assert p.n_offspring == 198
    # Our deviations (docs/memetic.md): seeded populations, restarts until a stall or T_max.
    assert (p.stop, p.stall_restarts, p.site_order, p.restarts) == ("adaptive", 100, True, 0)
    assert p.seeding == "alternate"
    assert p.generations_per_run is None
    paper = MemeticParams(stop="paper", site_order=False)
    assert paper.generations_per_run == 500  # G_max of the paper, per run
    assert MemeticParams(stop="paper", max_generations=7).generations_per_run == 7


def test_params_overrides_and_checks() -> None:
    p = MemeticParams.from_mapping({"P": 50, "k": 2, "r_ls": 1, "p_fall": 0.5})
    assert (p.population, p.tournament, p.ls_rate, p.p_fall) == (50, 2, 1.0, 0.5)
    assert MemeticParams.from_mapping({"population": 10.0}).population == 10
    for bad in ({"population": 1}, {"elite": 200}, {"ls_rate": 1.5}, {"p_fall": -0.1},
                {"tournament": 0}, {"no_improvement": 0}, {"replacement": "random"},
                {"ls_load": "energy"}, {"population": "many"}, {"offspring": 0},
                {"stop": "never"}, {"stall_restarts": 0}, {"site_order": "maybe"}):
        with pytest.raises(InputError):
            MemeticParams.from_mapping(bad)
    with pytest.raises(InputError, match="unknown memetic parameter"):
        MemeticParams.from_mapping({"mutation_rate": 0.3})


def test_same_seed_same_run_different_seed_different_run(metro: Instance) -> None:
    a = run_memetic(metro, 11, SHORT)
    b = run_memetic(metro, 11, SHORT)
    c = run_memetic(metro, 12, SHORT)

    def rows(r: Any) -> list[tuple]:
        return [(h.generation, h.restart, h.best, h.population_best, h.offspring, h.entered,
                 h.mutated, h.reverted, h.ls_improved, h.evaluations) for h in r.history]

    assert len(a.history) == 25
    assert rows(a) == rows(b)
    assert [t.incumbent for t in a.trace] == sorted({h.best for h in a.history} |
                                                   {a.trace[0].incumbent}, reverse=True)
    assert [t.incumbent for t in a.trace] == [t.incumbent for t in b.trace]
    assert np.array_equal(a.best, b.best)
    assert rows(a) != rows(c)


def test_trace_records_every_improvement_and_callbacks_fire(metro: Instance) -> None:
    class Recorder(Callbacks):
        def __init__(self) -> None:
            self.improvements: list[tuple[float, float | None, float | None]] = []
            self.progress: list[dict[str, Any]] = []

        def on_improvement(self, seconds: float, incumbent: float | None,
                           bound: float | None) -> None:
            self.improvements.append((seconds, incumbent, bound))

        def on_progress(self, info: Mapping[str, Any]) -> None:
            self.progress.append(dict(info))

    rec = Recorder()
    r = run_memetic(metro, 3, SHORT, callbacks=rec)
    objs = [t.incumbent for t in r.trace]
    assert len(objs) >= 2 and all(x > y for x, y in itertools.pairwise(objs))
    assert [(t.seconds, t.incumbent, t.bound) for t in r.trace] == rec.improvements
    assert [p["generation"] for p in rec.progress] == list(range(1, 26))
    assert {"generation", "best", "elapsed"} <= set(rec.progress[0])
    assert objs[-1] == r.objective == min(h.best for h in r.history)
    assert r.time_to_best_s == r.trace[-1].seconds
    assert np.isclose(evaluate(metro, r.plan).objective, r.objective)


def test_stopping_rules(metro: Instance) -> None:
    r = run_memetic(metro, 0, MemeticParams(population=30, no_improvement=5, stop="paper"))
    assert r.stop_reason == "NoImprovement" and r.generations < 500 and r.restarts == 0
    stale = [h.best for h in r.history[-5:]]
    assert len(set(stale)) == 1
    t = run_memetic(metro, 0, MemeticParams(time_limit=0.2, max_generations=10**6,
                                            no_improvement=10**6))
    assert t.stop_reason == "MaxRuntime" and t.runtime_s < 1.0
    # An extra criterion (here: a target) ends the run early, and only then.
    full = run_memetic(metro, 0, SHORT)
    target = full.history[9].best
    s = run_memetic(metro, 0, SHORT, stop_when=TargetObjective(target))
    assert s.stop_reason == "TargetObjective"
    assert s.objective <= target and s.generations <= 10
    assert [h.best for h in s.history] == [h.best for h in full.history[: s.generations]]


def test_warm_start_seeds_the_population(metro: Instance, three_gpu: Instance) -> None:
    best = run_memetic(metro, 1, SHORT)
    r = run_memetic(metro, 2, MemeticParams(population=20, max_generations=0, site_order=False,
                                            ils=0), warm_start=[best.plan])
    assert r.warm_start_accepted is True and r.objective == best.objective
    no_link = Plan.from_pairs([("a", 6), ("c", 6)])  # three_gpu has no a-c link
    short = Plan.from_pairs([("a", 6)])  # not a partition of the 12 layers
    r2 = run_memetic(three_gpu, 2, MemeticParams(population=20, max_generations=0),
                     warm_start=[no_link, short])
    assert r2.warm_start_accepted is False
    assert r2.init["warm_offered"] == 1  # the short plan cannot even be encoded


def test_registered_solver_result_and_warm_start_info(metro: Instance) -> None:
    res = solve(metro, "memetic", seed=4, time_limit=30,
                params={"population": 40, "max_generations": 10})
    assert res.status == "feasible" and res.plan is not None
    assert res.info["generations"] == 10 and res.info["evaluations"] > 0
    assert res.info["time_to_best_s"] is not None
    assert res.trace and res.trace[-1].incumbent == pytest.approx(res.objective)
    again = solve(metro, "memetic", seed=5, time_limit=30, warm_start=res.plan,
                  params={"population": 40, "max_generations": 0})
    assert again.info["warm_start_accepted"] is True
    assert again.info["warm_start"]["accepted"] is True
    assert again.objective <= res.objective
    with pytest.raises(InputError):
        solve(metro, "memetic", seed=1, params={"time_limit": 3})


def test_memetic_plan_warm_starts_another_solver(metro: Instance,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    got: list[tuple[Plan, ...]] = []

    def echo(instance: Instance, options: Any) -> Outcome:
        got.append(options.warm_start)
        return Outcome(options.warm_start[0], "feasible")

    # Registered for this test only (the registry is restored afterwards).
    monkeypatch.setitem(solvers._REGISTRY, "memetic-test-echo",
                        SolverSpec("memetic-test-echo", echo, "heuristic", "echoes", True))
    res = solve(metro, "memetic-test-echo", seed=3, time_limit=5, warm_start="memetic")
    assert got and len(got[0]) == 1
    assert res.info["warm_start"]["source"] == "memetic"
    assert res.objective == pytest.approx(res.info["warm_start"]["objective"])


def _no_links() -> Instance:
    """Three GPUs that each hold only part of the model and no links: no feasible plan."""
    d = {
        "name": "islands",
        "gpus": [{"id": f"g{i}", "peak_tflops": 100.0, "memory_gb": 6.0, "idle_w": 50.0,
                  "active_w": 300.0} for i in range(3)],
        "links": [],
        "model": {"layers": 12, "hidden": 2048, "seq_len": 2048, "vocab": 50257},
        "training": {"batch_size": 32, "micro_batch_size": 1},
    }
    return Instance.from_dict(d)


def test_no_feasible_plan_gives_no_solution_with_a_message() -> None:
    res = solve(_no_links(), "memetic", seed=0, time_limit=10,
                params={"max_init_samples": 5000})
    assert res.status == "no_solution" and res.plan is None
    assert "no feasible plan among 5000 sampled chromosomes" in res.message


def test_cli_solve_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["solve", "tests/data/three_gpu.json", "--solver", "memetic", "--seed", "1",
                   "--time-limit", "10", "--json", "--quiet"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("solver", "status", "plan", "objective", "t_iter_ms", "e_iter_j",
                "lower_bound", "gap", "wall_s", "t_ref_ms", "e_ref_j", "trace"):
        assert key in out
    assert out["solver"] == "memetic" and out["status"] == "feasible"
    assert out["lower_bound"] is None and out["trace"]
    assert out["info"]["generations"] >= 100  # w = 100 stale generations at least


def test_restarts_run_fresh_populations_and_keep_the_overall_best(metro: Instance) -> None:
    p = MemeticParams(population=30, no_improvement=5, restarts=3, stop="paper")
    r = run_memetic(metro, 7, p)
    assert r.restarts == 3
    assert [h.restart for h in r.history][-1] == 3
    per_run = {k: min(h.population_best for h in r.history if h.restart == k) for k in range(4)}
    assert r.objective == min(per_run.values())
    # Generations are numbered across runs; the best never goes up.
    assert [h.generation for h in r.history] == list(range(1, r.generations + 1))
    bests = [h.best for h in r.history]
    assert all(x >= y for x, y in itertools.pairwise(bests))
    # The first run is the run without restarts.
    one = run_memetic(metro, 7, MemeticParams(population=30, no_improvement=5, stop="paper"))
    assert [h.population_best for h in one.history] == [
        h.population_best for h in r.history if h.restart == 0]
    # A time limit ends the restarts too.
    t = run_memetic(metro, 7, MemeticParams(population=30, no_improvement=5, restarts=10**6,
                                            time_limit=0.3, stop="paper"))
    assert "MaxRuntime" in t.stop_reason and t.runtime_s < 1.5


def test_adaptive_stop_restarts_until_a_stall(metro: Instance) -> None:
    p = MemeticParams(population=30, no_improvement=5, stall_restarts=3)
    r = run_memetic(metro, 7, p)
    assert r.stop_reason.endswith("StallRestarts")
    runs = r.restarts + 1
    # The run that found the best, then max(3, its index) runs without a better plan.
    found = min(h.restart for h in r.history if h.best == r.objective) if r.history else 0
    assert runs - 1 - found == max(3, found)
    assert [h.generation for h in r.history] == list(range(1, r.generations + 1))
    assert r.time_to_best_s is not None and r.time_to_best_s <= r.runtime_s
    assert r.info()["time_to_best_s"] == round(r.time_to_best_s, 6)
    # Same seed, same runs (the stall count is in generations and runs, not seconds).
    again = run_memetic(metro, 7, p)
    assert [(h.restart, h.best) for h in again.history] == [(h.restart, h.best)
                                                           for h in r.history]


def test_budget_stop_restarts_until_g_max_of_all_runs(metro: Instance) -> None:
    p = MemeticParams(population=30, no_improvement=3, max_generations=40, stop="budget")
    r = run_memetic(metro, 2, p)
    assert r.generations == 40 and "MaxGenerations" in r.stop_reason and r.restarts >= 2


def test_tiny_plan_space_ends_the_restarts(three_gpu: Instance) -> None:
    r = run_memetic(three_gpu, 0, MemeticParams(population=200, no_improvement=5))
    assert r.init["saturated"] and r.stop_reason.endswith("PlanSpaceCovered")
    assert r.restarts == 0


def test_site_order_plans_seed_every_population(metro: Instance) -> None:
    from heuristics.site_order import site_order_plans

    so = site_order_plans(metro)
    r = run_memetic(metro, 0, MemeticParams(population=30, max_generations=0))
    assert r.site_order is not None and r.site_order["plans"] == len(so.plans)
    assert r.init["seeds_offered"] == len(so.plans) and r.init["seeds_accepted"] >= 1
    assert r.objective <= so.plans[0].objective  # the best seed is in the population
    off = run_memetic(metro, 0, MemeticParams(population=30, max_generations=0,
                                              site_order=False))
    assert off.site_order is None and off.init["seeds_offered"] == 0
    res = solve(metro, "memetic", seed=4, time_limit=30,
                params={"population": 30, "max_generations": 3})
    assert res.info["site_order"]["plans"] == len(so.plans)
    assert 0 <= res.info["time_to_best_s"] <= res.wall_s
