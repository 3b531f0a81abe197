"""bench/portfolio_threads.py: the table lines up each instance's three arms."""

from __future__ import annotations

from typing import Any

from bench import portfolio_threads


def _row(name: str, arm: str, status: str, wall: float, gap: float | None,
         objective: float) -> dict[str, Any]:
    return {"instance": name, "lambda": 1.0, "arm": arm, "status": status, "wall_s": wall,
            "gap": gap, "objective": objective, "load_before": 0.5}


def test_summary_lines_up_the_arms_and_counts_proofs() -> None:
    rows = [_row("a", "milp", "optimal", 16.46, 0.0, 459.9),
            _row("a", "portfolio", "optimal", 16.42, 0.0, 459.9),
            _row("a", "portfolio, MA thread", "optimal", 24.01, 0.0, 459.9),
            _row("b", "milp", "feasible", 120.0, 0.0016, 440.0),
            _row("b", "portfolio", "feasible", 120.0, 0.0012, 439.5),
            _row("b", "portfolio, MA thread", "feasible", 120.0, 0.0031, 439.5),
            _row("c", "milp", "optimal", 2.0, 0.0, 300.0)]  # not every arm ran: left out
    lines = portfolio_threads.summary(rows)
    assert lines[2] == ("| a lambda 1 | 16.5 s | 16.4 s | 24.0 s | 459.9 / 459.9 / 459.9 | "
                        "0.50 / 0.50 / 0.50 |")
    assert lines[3].startswith("| b lambda 1 | gap 0.16 % | gap 0.12 % | gap 0.31 % | "
                               "440 / 439.5 / 439.5 |")
    assert len(lines) == 6
    assert lines[-1] == ("proven: 1 of 2 milp, 1 of 2 portfolio, 1 of 2 portfolio, "
                         "MA thread")
