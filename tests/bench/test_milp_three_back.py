"""bench/milp_three_back.py: each arm sets only site_branching_back, and the table pairs
each instance's two runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ab_bench_rows import ab_row, arm_params, stored_table

from bench import milp_three_back


def _row(name: str, on: bool, status: str, wall: float, gap: float | None) -> dict[str, Any]:
    return ab_row(milp_three_back.KEY, name, on, status, wall, gap, lam=1.0)


def test_summary_pairs_the_variants_and_counts_proofs() -> None:
    rows = [_row("a", True, "feasible", 120.0, 0.0016), _row("a", False, "feasible", 120.0,
                                                             0.0023),
            _row("b", True, "optimal", 96.1, 0.0), _row("b", False, "optimal", 43.3, 0.0)]
    lines = milp_three_back.summary(rows)
    assert lines[0].startswith("| instance | three steps back | its HiGHS | default |")
    assert lines[2] == ("| a lambda 1 | gap 0.16 % | not run | gap 0.23 % | not run | "
                        "1.50 / 1.50 |")
    assert lines[-1] == "proven: 1 of 2 three steps back, 1 of 2 default"


def test_each_arm_sets_only_the_steps_back(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    seen = arm_params(monkeypatch, tmp_path, milp_three_back.KEY, milp_three_back.main)
    assert seen == [{"site_branching_back": 3}, {"site_branching_back": 2}]


def test_the_stored_count_is_the_one_the_results_readme_states() -> None:
    """bench/results/README.md quotes the stored run's count of proofs."""
    count, lines, readme = stored_table(milp_three_back.OUT, milp_three_back.summary)
    assert count == 2 * len(milp_three_back.CASES)
    assert lines[-1].startswith("proven: ")
    assert f"\n{lines[-1]}\n" in readme


def test_the_rerun_after_the_speedups_is_the_one_the_readme_states() -> None:
    """bench/results/README.md quotes the rerun's count of proofs and its proof times."""
    _, lines, readme = stored_table(milp_three_back.OUT.parent / "after-speedups.jsonl",
                                    milp_three_back.summary)
    assert f"\n{lines[-1]}\n" in readme
    cells = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in lines[2:-2]}
    for seed in (661, 641):
        row = cells[f"metro-n64-l48-s{seed} lambda 1"]
        on, off = row[1], row[3]
        assert f"{on} against\n{off}" in readme or f"{on} against {off}" in readme
