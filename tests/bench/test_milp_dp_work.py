"""bench/milp_dp_work.py: the default MILP beside milp_three_back's stored default arm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ab_bench_rows import ab_row, arm_params, stored_table

from bench import milp_dp_work, milp_three_back


def test_summary_sets_each_run_beside_the_stored_default(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    before = tmp_path / "before.jsonl"
    old = [ab_row(milp_three_back.KEY, "a", False, "feasible", 120.0, 0.0023, lam=1.0),
           ab_row(milp_three_back.KEY, "a", True, "optimal", 50.0, 0.0, lam=1.0),
           ab_row(milp_three_back.KEY, "b", False, "optimal", 43.3, 0.0, lam=1.0)]
    before.write_text("".join(json.dumps(r) + "\n" for r in old))
    monkeypatch.setattr(milp_dp_work, "BEFORE", before)
    rows = [ab_row(milp_dp_work.KEY, "a", True, "optimal", 80.5, 0.0, lam=1.0, load=0.9),
            ab_row(milp_dp_work.KEY, "b", True, "optimal", 20.0, 0.0, lam=1.0),
            ab_row(milp_dp_work.KEY, "c", True, "feasible", 120.0, 0.004, lam=1.0)]
    lines = milp_dp_work.summary(rows)
    assert lines[2] == "| a lambda 1 | 80.5 s | not run | gap 0.23 % | 0.90 / 1.50 |"
    assert lines[4] == "| c lambda 1 | gap 0.40 % | not run | not run | 1.50 / - |"
    assert lines[-1] == "proven: 2 of 3 now, 1 of 3 before"


def test_it_runs_the_default_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert arm_params(monkeypatch, tmp_path, milp_dp_work.KEY, milp_dp_work.main) == [{}]


def test_the_stored_count_is_the_one_the_results_readme_states() -> None:
    """bench/results/README.md quotes the stored run's count of proofs."""
    count, lines, readme = stored_table(milp_dp_work.OUT, milp_dp_work.summary)
    assert count == len(milp_three_back.CASES)
    assert lines[-1].startswith("proven: ")
    assert f"\n{lines[-1]}\n" in readme
