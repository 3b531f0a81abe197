"""bench/milp_narrow.py: the table pairs each instance's narrowed and plain runs."""

from __future__ import annotations

from typing import Any

from bench import milp_narrow


def _row(name: str, narrow: bool, status: str, wall: float, gap: float | None,
         highs: str | None) -> dict[str, Any]:
    return {"instance": name, "lambda": 1.0, "narrow": narrow, "status": status,
            "wall_s": wall, "gap": gap, "highs_status": highs, "highs_s": 3.0,
            "load_before": 1.0}


def test_summary_pairs_the_variants_and_counts_proofs() -> None:
    rows = [_row("a", True, "optimal", 12.34, 0.0, "infeasible"),
            _row("a", False, "feasible", 120.0, 0.0026, "time_limit"),
            _row("b", True, "optimal", 1.5, 0.0, None),
            _row("b", False, "optimal", 1.6, 0.0, None),
            _row("c", True, "optimal", 2.0, 0.0, None)]  # no plain run: left out
    lines = milp_narrow.summary(rows)
    assert lines[2] == ("| a lambda 1 | 12.3 s | infeasible, 3.0 s | gap 0.26 % | "
                        "time_limit, 3.0 s | 1.00 / 1.00 |")
    assert lines[3].startswith("| b lambda 1 | 1.5 s | not run | 1.6 s | not run |")
    assert len(lines) == 6 and lines[-1] == "proven: 2 of 2 narrowed, 1 of 2 plain"
