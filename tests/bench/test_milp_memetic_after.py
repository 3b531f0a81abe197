"""bench/milp_memetic_after.py: the table pairs each instance's runs with and without the
step, and the step is toggled alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ab_bench_rows import ab_row, arm_params

from bench import milp_memetic_after


def _row(name: str, on: bool, status: str, wall: float, gap: float | None) -> dict[str, Any]:
    return ab_row(milp_memetic_after.KEY, name, on, status, wall, gap, load=0.5)


def test_summary_pairs_the_variants_and_counts_proofs() -> None:
    rows = [_row("a", True, "feasible", 120.0, 0.0022), _row("a", False, "feasible", 120.0,
                                                             0.0108),
            _row("b", True, "optimal", 20.4, 0.0), _row("b", False, "optimal", 20.7, 0.0)]
    lines = milp_memetic_after.summary(rows)
    assert lines[0].startswith("| instance | memetic after | its HiGHS | none |")
    assert lines[2] == ("| a lambda 0.5 | gap 0.22 % | not run | gap 1.08 % | not run | "
                        "0.50 / 0.50 |")
    assert lines[-1] == "proven: 1 of 2 memetic after, 1 of 2 none"


def test_each_arm_sets_only_the_step_after_branching(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    seen = arm_params(monkeypatch, tmp_path, milp_memetic_after.KEY, milp_memetic_after.main)
    assert seen == [{"memetic_share": 0.0, "memetic_after_share": milp_memetic_after.SHARE},
                    {"memetic_share": 0.0, "memetic_after_share": 0.0}]
