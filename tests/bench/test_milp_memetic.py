"""bench/milp_memetic.py: the table pairs each instance's runs with and without the step."""

from __future__ import annotations

from typing import Any

from ab_bench_rows import ab_row

from bench import milp_memetic


def _row(name: str, on: bool, status: str, wall: float, gap: float | None) -> dict[str, Any]:
    return ab_row(milp_memetic.KEY, name, on, status, wall, gap)


def test_summary_pairs_the_variants_and_counts_proofs() -> None:
    rows = [_row("a", True, "feasible", 120.0, 0.0022), _row("a", False, "feasible", 120.0,
                                                             0.0103),
            _row("b", True, "optimal", 40.4, 0.0), _row("b", False, "optimal", 31.7, 0.0)]
    lines = milp_memetic.summary(rows)
    assert lines[0].startswith("| instance | memetic run | its HiGHS | none |")
    assert lines[2] == ("| a lambda 0.5 | gap 0.22 % | not run | gap 1.03 % | not run | "
                        "1.50 / 1.50 |")
    assert lines[-1] == "proven: 1 of 2 memetic run, 1 of 2 none"
