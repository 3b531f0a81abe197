"""The spread the README quotes, from hand-made rows; and the branching table's ratio."""

from __future__ import annotations

import pytest

from bench.bound_noise import spread
from bench.branching_workers import summary


def _row(solver: str, lb: float | None, load: float, status: str = "feasible") -> dict:
    return {"instance": "i", "budget_s": 5.0, "solver": solver, "lower_bound": lb,
            "status": status, "load_before": load}


def test_spread_per_solver() -> None:
    rows = [_row("milp", 10.0, 0.5), _row("milp", 12.0, 0.7), _row("portfolio", 11.0, 0.6),
            _row("portfolio", None, 0.9, "no_solution")]
    got = {s["solver"]: s for s in spread(rows)}
    assert got["milp"]["runs"] == 2 and (got["milp"]["lb_min"], got["milp"]["lb_max"]) == (
        10.0, 12.0)
    assert got["portfolio"]["runs"] == 2 and got["portfolio"]["lb_min"] == 11.0
    assert got["portfolio"]["load_max"] == 0.9 and got["milp"]["proven"] == 0


def _run(inst: str, threads: int, status: str, wall: float, gap: float | None = None) -> dict:
    return {"instance": inst, "threads": threads, "status": status, "wall_s": wall,
            "gap": gap, "branching_nodes": 10, "load_before": 0.5}


def test_branching_summary_counts_proofs_and_the_median_speed_up() -> None:
    rows = [_run("a", 1, "optimal", 30.0), _run("a", 2, "optimal", 20.0),
            _run("b", 1, "optimal", 10.0), _run("b", 2, "optimal", 10.0),
            _run("c", 1, "feasible", 120.0, 0.01), _run("c", 2, "optimal", 90.0)]
    text = "\n".join(summary(rows))
    assert "proven: 2 of 3 on 1 thread, 3 of 3 on 2" in text
    assert "2 instances proven by both): 1.25x (range 1.00-1.50)" in text
    assert "gap 1.00 %" in text and "| c lambda 1 |" in text
    # One seed at two lambdas: two rows, not one.
    other = [{**r, "lambda": 0.5} for r in rows if r["instance"] == "a"]
    assert "proven: 3 of 4 on 1 thread" in "\n".join(summary(rows + other))
    assert summary([])[-1] == pytest.approx("proven: 0 of 0 on 1 thread, 0 of 0 on 2")
