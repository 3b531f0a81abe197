"""SolveResult (the ``solve --json`` object of formats.md), its round trip and trace CSV;
and the pricing/checking that turns a solver's Outcome into it."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from geoplan.cost import evaluate
from geoplan.errors import FormulationError, SolverError
from geoplan.model.instance import Instance
from geoplan.model.plan import Plan
from geoplan.solving.core import finish, solve
from geoplan.solving.result import Outcome, SolveResult, TraceRow

SOLVE_KEYS = {"solver", "status", "plan", "objective", "t_iter_ms", "e_iter_j", "lower_bound",
              "gap", "wall_s", "t_ref_ms", "e_ref_j", "trace"}


def sample() -> SolveResult:
    return SolveResult(
        solver="bnb",
        status="feasible",
        plan=Plan.from_pairs([("a", 4), ("b", 2)], micro_batch_size=1),
        objective=62.0,
        t_iter_ms=62.0,
        e_iter_j=14.56,
        lower_bound=50.0,
        gap=(62.0 - 50.0) / 62.0,
        wall_s=1.25,
        t_ref_ms=70.0,
        e_ref_j=15.0,
        lam=1.0,
        seed=3,
        trace=[TraceRow(0.1, 80.0, None), TraceRow(0.5, 62.0, 40.0), TraceRow(1.25, 62.0, 50.0)],
        params={"time_limit": 2.0},
        info={"nodes": 17},
        instance_name="hand3",
        instance_hash="abc",
    )


def test_to_dict_has_the_keys_of_formats_md() -> None:
    d = sample().to_dict()
    assert SOLVE_KEYS <= d.keys()
    assert d["plan"] == {"stages": [{"gpu": "a", "layers": 4}, {"gpu": "b", "layers": 2}],
                         "micro_batch_size": 1}
    assert d["trace"] == [[0.1, 80.0, None], [0.5, 62.0, 40.0], [1.25, 62.0, 50.0]]
    assert d["gap"] == pytest.approx(12.0 / 62.0)
    json.dumps(d, allow_nan=False)  # strict JSON: no NaN or Infinity anywhere


def test_round_trip() -> None:
    r = sample()
    again = SolveResult.from_dict(json.loads(r.to_json()))
    assert again == r
    assert again.to_dict() == r.to_dict()


def test_non_finite_numbers_serialise_as_null() -> None:
    r = sample()
    r.lower_bound = -math.inf
    r.trace = [TraceRow(0.0, math.inf, -math.inf)]
    d = r.to_dict()
    assert d["lower_bound"] is None and d["trace"] == [[0.0, None, None]]
    json.dumps(d, allow_nan=False)


def test_no_solution_round_trip() -> None:
    r = SolveResult("x", "no_solution", None, None, None, None, None, None, 0.5, None, None,
                    1.0, 0, message="nothing fits")
    d = r.to_dict()
    assert d["plan"] is None and d["objective"] is None and d["status"] == "no_solution"
    assert SolveResult.from_dict(d) == r


def test_trace_csv(tmp_path: Path) -> None:
    r = sample()
    rows = list(csv.reader(io.StringIO(r.trace_csv())))
    assert rows == [["seconds", "incumbent", "bound"], ["0.1", "80.0", ""],
                    ["0.5", "62.0", "40.0"], ["1.25", "62.0", "50.0"]]
    p = tmp_path / "t.csv"
    r.write_trace_csv(p)
    assert p.read_text() == r.trace_csv()


def test_summary_mentions_the_numbers() -> None:
    s = sample().summary()
    for text in ("bnb", "feasible", "62", "14.56", "50", "19.355%"):
        assert text in s


# ----------------------------------------------------------------------------- finish / solve


def test_finish_prices_with_the_shared_evaluator(hand3: Instance) -> None:
    plan = Plan.from_pairs([("a", 4), ("b", 2)])
    r = finish(hand3, "mine", Outcome(plan, "optimal"), 0.2, seed=1)
    # T 62 ms, E 14.56 J (test_cost.py); optimal without a bound: the bound is the objective.
    assert r.objective == pytest.approx(62.0) and r.e_iter_j == pytest.approx(14.56)
    assert r.lower_bound == r.objective and r.gap == 0.0
    assert r.trace[-1].incumbent == r.objective


def test_finish_rejects_what_disagrees_with_the_evaluator(hand3: Instance) -> None:
    infeasible = Plan.from_pairs([("b", 2), ("a", 4)])  # memory over on a
    with pytest.raises(FormulationError, match="infeasible"):
        finish(hand3, "mine", Outcome(infeasible, "feasible"), 0.1, seed=1)
    plan = Plan.from_pairs([("a", 4), ("b", 2)])
    with pytest.raises(FormulationError, match="model objective"):
        finish(hand3, "mine", Outcome(plan, "optimal", model_objective=61.0), 0.1, seed=1)
    # Within the tolerance (relative 1e-6 of 62 ms) it is accepted.
    finish(hand3, "mine", Outcome(plan, "optimal", model_objective=62.0 + 1e-6), 0.1, seed=1)
    with pytest.raises(FormulationError, match="lower bound"):
        finish(hand3, "mine", Outcome(plan, "feasible", lower_bound=63.0), 0.1, seed=1)
    with pytest.raises(SolverError):
        finish(hand3, "mine", Outcome(None, "feasible"), 0.1, seed=1)
    with pytest.raises(SolverError):
        finish(hand3, "mine", Outcome(plan, "great"), 0.1, seed=1)


def test_solve_metis_default_result(hand3: Instance) -> None:
    r = solve(hand3, "metis-default", seed=0, time_limit=5)
    assert r.status == "feasible" and r.plan is not None
    ev = evaluate(hand3, r.plan)
    assert ev.feasible and r.objective == ev.objective == r.t_iter_ms
    # The normalisers it reports are those of the Metis-default plan itself.
    assert r.t_ref_ms == pytest.approx(ev.t_iter_ms) and r.e_ref_j == pytest.approx(ev.e_iter_j)
    assert SolveResult.from_dict(json.loads(r.to_json())).to_dict() == r.to_dict()
