"""Warm starts are never lost (issue 9).

``solve()`` never returns a plan worse than a feasible warm start it was given: a
solver that cannot use one (greedy, the Metis baselines) says so in one line
(``info["warm_start"]["note"]``, and on stderr from the CLI), and when the solver's
plan is worse or missing the warm-start plan is returned with its trace row
(``info["warm_start"]["returned"]``), its status honest: the solver's bound still
applies, ``optimal`` only when a bound proves it. ``accepted`` means the same for
every solver: a warm-start plan was feasible and the solver used it; an infeasible
warm start is reported, never silently dropped.

Every run here stops on its own (tiny instances, generation/restart limits) under a
budget no load reaches, so no assertion depends on the machine's speed.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from geoplan.cli import main
from geoplan.cost import evaluate
from geoplan.errors import InputError
from geoplan.model.instance import Instance, load_instance
from geoplan.model.plan import Plan
from geoplan.solving import core
from geoplan.solving.core import SolverSpec, solve
from geoplan.solving.result import Outcome, TraceRow

ROOT = Path(__file__).resolve().parents[2]
TABLE7 = ROOT / "examples" / "table7-14gpu.json"
GENEROUS = 600.0  # seconds: never reached by these runs, whatever the load

# A memetic plan for examples/table7-14gpu.json (objective 0.79705), better than the
# plans of greedy (0.81498) and metis-default (1.0).
TABLE7_GOOD = {"stages": [
    {"gpu": "pcie-3", "layers": 2}, {"gpu": "pcie-4", "layers": 2},
    {"gpu": "pcie-2", "layers": 2}, {"gpu": "pcie-0", "layers": 2},
    {"gpu": "a30-0", "layers": 1}, {"gpu": "a30-4", "layers": 1},
    {"gpu": "pcie-1", "layers": 2}]}

# On tests/data/three_gpu.json (optimum a:7 | b:2 | c:3, 1509.27):
WARM = Plan.from_pairs([("a", 8), ("b", 4)])  # feasible, 1693.24
WORSE = Plan.from_pairs([("a", 6), ("b", 6)])  # feasible, 2276.03
INFEASIBLE = {
    "short": Plan.from_pairs([("a", 5), ("b", 5)]),  # 10 of the 12 layers
    "unlinked": Plan.from_pairs([("a", 6), ("c", 6)]),  # no a-c link
    "repeated": Plan.from_pairs([("a", 6), ("a", 6)]),  # one GPU twice
}

# Parameters that make every warm-start solver stop on its own.
STOPS: dict[str, dict[str, Any]] = {
    "bnb": {},
    "milp": {},
    "cpsat": {},
    "memetic": {"population": 20, "max_generations": 5},
    "random-restart": {"max_restarts": 3},
    "portfolio": {"exact": "bnb", "memetic.population": 20, "memetic.max_generations": 5},
}


def check_trace(res: Any) -> None:
    incumbents = [r.incumbent for r in res.trace if r.incumbent is not None]
    assert all(b <= a * (1 + 1e-9) for a, b in itertools.pairwise(incumbents)), \
        "the incumbent never worsens"
    assert res.trace[-1].incumbent == pytest.approx(res.objective)


@pytest.fixture(scope="module")
def table7() -> Instance:
    return load_instance(TABLE7)


@pytest.mark.parametrize("solver", ["greedy", "metis-default"])
def test_a_solver_without_warm_starts_returns_the_better_warm_start(
        table7: Instance, solver: str) -> None:
    good = Plan.from_dict(TABLE7_GOOD)
    value = evaluate(table7, good).objective
    own = solve(table7, solver, seed=0, time_limit=GENEROUS)
    assert own.objective > value * (1 + 1e-6)  # the premise: the solver alone is worse

    res = solve(table7, solver, seed=0, time_limit=GENEROUS, warm_start=good)
    ws = res.info["warm_start"]
    assert res.plan == good and res.objective == pytest.approx(value)
    assert res.status == "feasible" and res.lower_bound is None
    assert ws["returned"] is True and ws["accepted"] is False
    assert ws["solver_objective"] == pytest.approx(own.objective)
    assert f"{solver} cannot use a warm start" in ws["note"]
    assert "\n" not in ws["note"]
    assert res.trace[0] == TraceRow(0.0, pytest.approx(value), None)
    check_trace(res)


def test_warm_start_solver_on_greedy_is_not_lost(table7: Instance) -> None:
    """The issue's case: ``--warm-start memetic`` on greedy gave greedy's worse plan."""
    res = solve(table7, "greedy", seed=1, time_limit=GENEROUS, warm_start="memetic",
                warm_start_params={"population": 30, "max_generations": 20})
    ws = res.info["warm_start"]
    assert ws["source"] == "memetic" and ws["objective"] is not None
    assert res.objective <= ws["objective"] * (1 + 1e-12)
    assert ws["accepted"] is False and "greedy cannot use a warm start" in ws["note"]
    check_trace(res)


def test_cli_says_so_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan = tmp_path / "good.json"
    plan.write_text(json.dumps(TABLE7_GOOD))
    code = main(["solve", str(TABLE7), "--solver", "greedy", "--warm-start", str(plan),
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geoplan: warm start: ")
    assert "greedy cannot use a warm start" in lines[0] and "returned" in lines[0]
    d = json.loads(out)
    assert d["plan"] == TABLE7_GOOD and d["info"]["warm_start"]["returned"] is True
    # A solver that uses the warm start and does better says nothing.
    code = main(["solve", str(ROOT / "tests" / "data" / "three_gpu.json"), "--solver", "bnb",
                 "--warm-start", str(plan_file(tmp_path, WARM)), "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and "warm start" not in err
    assert json.loads(out)["info"]["warm_start"]["accepted"] is True


def plan_file(tmp_path: Path, plan: Plan) -> Path:
    p = tmp_path / "plan.json"
    p.write_text(plan.to_json())
    return p


@pytest.mark.parametrize("solver", sorted(STOPS))
def test_accepted_means_feasible_and_used(three_gpu: Instance, solver: str) -> None:
    res = solve(three_gpu, solver, seed=0, time_limit=GENEROUS, warm_start=WARM,
                params=STOPS[solver])
    ws = res.info["warm_start"]
    assert ws["accepted"] is True and ws["feasible"] == [True]
    assert "note" not in ws and not ws.get("returned")
    assert res.objective <= ws["objective"] * (1 + 1e-12)
    check_trace(res)


@pytest.mark.parametrize("kind", sorted(INFEASIBLE))
@pytest.mark.parametrize("solver", sorted(STOPS))
def test_an_infeasible_warm_start_is_reported(three_gpu: Instance, solver: str,
                                              kind: str) -> None:
    res = solve(three_gpu, solver, seed=0, time_limit=GENEROUS, warm_start=INFEASIBLE[kind],
                params=STOPS[solver])
    ws = res.info["warm_start"]
    assert ws["accepted"] is False and ws["feasible"] == [False]
    assert "the warm-start plan is infeasible" in ws["note"]
    assert res.plan is not None and evaluate(three_gpu, res.plan).feasible


def test_bnb_does_not_accept_a_plan_short_of_layers(three_gpu: Instance) -> None:
    """bnb used to report ``accepted: true`` for a 10-of-12-layer plan (its GPU order)."""
    res = solve(three_gpu, "bnb", seed=0, time_limit=GENEROUS, warm_start=INFEASIBLE["short"])
    assert res.info["warm_start_accepted"] is False
    assert res.info["warm_start_resplit"] is True  # the order a, b was still tried
    assert res.info["warm_start"]["accepted"] is False and res.status == "optimal"


def test_a_list_of_warm_starts(three_gpu: Instance) -> None:
    res = solve(three_gpu, "greedy", seed=0, time_limit=GENEROUS,
                warm_start=[INFEASIBLE["short"], WARM])
    ws = res.info["warm_start"]
    assert ws["feasible"] == [False, True]
    assert "1 of 2 warm-start plans are infeasible" in ws["note"]


# ------------------------------------------------------------------ solvers that do worse


def fake(monkeypatch: pytest.MonkeyPatch, outcome: Outcome, *, warm: bool = True,
         accepted: bool | None = None) -> str:
    """Register a solver (for one test) that returns ``outcome``."""

    def run(instance: Instance, options: Any) -> Outcome:
        out = Outcome(outcome.plan, outcome.status, lower_bound=outcome.lower_bound,
                      trace=list(outcome.trace), info=dict(outcome.info),
                      message=outcome.message)
        if accepted is not None:
            out.info["warm_start_accepted"] = accepted
        return out

    monkeypatch.setitem(core._REGISTRY, "ws-test-fake",
                        SolverSpec("ws-test-fake", run, "heuristic", "a test double", warm))
    return "ws-test-fake"


def value(instance: Instance, plan: Plan) -> float:
    return evaluate(instance, plan).objective


def test_a_worse_plan_keeps_the_solvers_bound(three_gpu: Instance,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    inst = three_gpu
    lb = 1000.0
    name = fake(monkeypatch, Outcome(WORSE, "feasible", lower_bound=lb,
                                     trace=[TraceRow(0.1, value(inst, WORSE), lb)]),
                accepted=False)
    res = solve(inst, name, seed=0, warm_start=WARM)
    ws = res.info["warm_start"]
    assert res.plan == WARM and res.status == "feasible"
    assert res.lower_bound == pytest.approx(lb)
    assert res.gap == pytest.approx((value(inst, WARM) - lb) / value(inst, WARM))
    assert ws["returned"] is True and ws["accepted"] is False
    assert "ws-test-fake did not use the warm start" in ws["note"]
    assert "the warm-start plan is returned" in (res.message or "")
    # The solver's row now carries the warm start's incumbent; its bound stays.
    assert res.trace[0] == TraceRow(0.0, pytest.approx(value(inst, WARM)), None)
    assert res.trace[1].bound == pytest.approx(lb)
    check_trace(res)


def test_a_bound_that_proves_the_warm_start(three_gpu: Instance,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    v = value(three_gpu, WARM)
    name = fake(monkeypatch, Outcome(WORSE, "feasible", lower_bound=v), accepted=True)
    res = solve(three_gpu, name, seed=0, warm_start=WARM)
    assert res.plan == WARM and res.status == "optimal" and res.gap == pytest.approx(0.0)
    assert res.info["warm_start"]["accepted"] is True


@pytest.mark.parametrize("status", ["no_solution", "infeasible"])
def test_no_plan_from_the_solver(three_gpu: Instance, monkeypatch: pytest.MonkeyPatch,
                                 status: str) -> None:
    lb = 1200.0 if status == "no_solution" else None
    name = fake(monkeypatch, Outcome(None, status, lower_bound=lb, message="gave up"),
                warm=False)
    res = solve(three_gpu, name, seed=0, warm_start=WARM)
    assert res.plan == WARM and res.status == "feasible"
    assert res.lower_bound == (None if lb is None else pytest.approx(lb))
    assert res.message.startswith("gave up; ws-test-fake ")
    assert res.info["warm_start"]["solver_status"] == status


def test_a_false_optimum_loses_its_bound(three_gpu: Instance,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A solver calling a plan worse than the warm start optimal proves nothing."""
    name = fake(monkeypatch, Outcome(WORSE, "optimal", lower_bound=value(three_gpu, WORSE)),
                accepted=True)
    res = solve(three_gpu, name, seed=0, warm_start=WARM)
    assert res.plan == WARM and res.status == "feasible" and res.lower_bound is None
    assert "bound exceeds it and is dropped" in res.info["warm_start"]["note"]


def test_a_better_plan_is_kept(three_gpu: Instance, monkeypatch: pytest.MonkeyPatch) -> None:
    best = solve(three_gpu, "bnb", seed=0, time_limit=GENEROUS).plan
    assert best is not None
    name = fake(monkeypatch, Outcome(best, "feasible"), accepted=True)
    res = solve(three_gpu, name, seed=0, warm_start=WARM)
    assert res.plan == best and not res.info["warm_start"].get("returned")
    assert res.info["warm_start"]["accepted"] is True


def test_solve_help_lists_the_solvers_and_warm_starts(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "--help"]) == 0
    out = capsys.readouterr().out
    for name in core.solver_names():
        assert f"\n  {name} " in out
    assert "(warm start)" in out and "geoplan solvers" in out and "docs/solvers.md" in out
    assert "the better of their plan" in " ".join(out.split())


# ---------------------------------------------------------------- deferred warm starts
#
# An exact solver that ``defers_warm_start`` runs a warm-start solver only when it asks
# (options.deferred_plans), after its own quick proof attempt: a proof that needs no
# warm start is not delayed by one.


def deferring(monkeypatch: pytest.MonkeyPatch, instance: Instance, asks: int
              ) -> tuple[Any, list[tuple[Plan, ...]]]:
    """Solve with a deferring solver (registered for one test) that asks ``asks`` times
    for the memetic warm start and returns the plan it got; the result and what it got."""
    got: list[tuple[Plan, ...]] = []

    def run(instance: Instance, options: Any) -> Outcome:
        for _ in range(asks):
            got.append(options.deferred_plans())
        plan = got[-1][0] if got and got[-1] else WORSE
        return Outcome(plan, "feasible", trace=[TraceRow(options.elapsed(), value(
            instance, plan), None)], info={"warm_start_accepted": bool(got and got[-1])})

    monkeypatch.setitem(core._REGISTRY, "ws-test-defer", SolverSpec(
        "ws-test-defer", run, "exact", "a test double", True, defers_warm_start=True))
    res = solve(instance, "ws-test-defer", seed=0, time_limit=GENEROUS, warm_start="memetic",
                warm_start_params=STOPS["memetic"])
    return res, got


def test_a_deferred_warm_start_not_asked_for_never_runs(
        three_gpu: Instance, monkeypatch: pytest.MonkeyPatch) -> None:
    res, got = deferring(monkeypatch, three_gpu, asks=0)
    ws = res.info["warm_start"]
    assert got == [] and ws["deferred"] is True and ws["ran"] is False
    assert ws["accepted"] is False and "not run" in ws["note"]
    assert res.plan == WORSE  # nothing to compare with: the solver's own plan


def test_a_deferred_warm_start_runs_once_when_asked(
        three_gpu: Instance, monkeypatch: pytest.MonkeyPatch) -> None:
    res, got = deferring(monkeypatch, three_gpu, asks=2)
    ws = res.info["warm_start"]
    assert len(got) == 2 and got[0] == got[1] and len(got[0]) == 1  # one run, one plan
    assert ws["ran"] is True and ws["accepted"] is True
    assert ws["objective"] == pytest.approx(value(three_gpu, got[0][0]))
    assert 0 <= ws["started_s"] <= res.wall_s
    # As a warm start the MA makes one run (its spec's as_warm_start), the caller's
    # parameters on top.
    assert ws["params"]["stop"] == "paper" and ws["params"]["population"] == 20
    secs = [r.seconds for r in res.trace]
    assert secs == sorted(secs)
    check_trace(res)


def test_a_caller_made_deferred_start_is_asked_like_a_solver(
        three_gpu: Instance) -> None:
    # The parallel portfolio's source: a plan found elsewhere, handed over on request.
    asked: list[float] = []

    def hand_over(share: float) -> Any:
        asked.append(share)
        return core.finish(three_gpu, "memetic", Outcome(WORSE, "feasible"), 0.0, 0)

    source = core.DeferredStart(hand_over, 0.0, source="elsewhere")
    res = solve(three_gpu, "milp", seed=0, time_limit=GENEROUS, threads=1,
                warm_start=source, params={"parametric": False})
    ws = res.info["warm_start"]
    assert len(asked) == 1 and ws["source"] == "elsewhere" and ws["ran"] is True
    assert ws["objective"] == pytest.approx(value(three_gpu, WORSE))
    assert res.status == "optimal" and res.objective <= ws["objective"]
    with pytest.raises(InputError, match="does not defer"):
        solve(three_gpu, "memetic", seed=0, time_limit=GENEROUS, warm_start=source)


@pytest.mark.parametrize("solver", ["milp", "cpsat", "bnb", "sliced"])
def test_an_exact_solver_that_proves_at_once_skips_the_warm_start(
        three_gpu: Instance, solver: str) -> None:
    cold = solve(three_gpu, solver, seed=0, time_limit=GENEROUS, threads=1)
    res = solve(three_gpu, solver, seed=0, time_limit=GENEROUS, threads=1,
                warm_start="memetic", warm_start_params=STOPS["memetic"])
    assert cold.status == res.status == "optimal"
    assert res.objective == pytest.approx(cold.objective)
    assert res.info["warm_start"]["ran"] is False


@pytest.mark.parametrize("solver", ["milp", "cpsat", "bnb"])
def test_an_exact_solver_asks_for_the_warm_start_when_its_bound_falls_short(
        three_gpu: Instance, solver: str) -> None:
    # Without the parametric bound (and B&B's root bound, here short of the optimum) the
    # quick proof fails, so the warm start runs and is used.
    res = solve(three_gpu, solver, seed=0, time_limit=GENEROUS, threads=1,
                warm_start="memetic", warm_start_params=STOPS["memetic"],
                params={"parametric": False})
    ws = res.info["warm_start"]
    assert res.status == "optimal" and ws["ran"] is True and ws["accepted"] is True
    assert res.objective <= ws["objective"] * (1 + 1e-9)
    check_trace(res)
