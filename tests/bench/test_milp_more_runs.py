"""bench/milp_more_runs.py: the default MILP beside milp_dp_work's stored run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ab_bench_rows import ab_row, arm_params, stored_table

from bench import milp_dp_work, milp_more_runs, milp_three_back


def test_summary_sets_each_run_beside_milp_dp_work(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    before = tmp_path / "before.jsonl"
    old = [ab_row(milp_dp_work.KEY, "a", True, "feasible", 120.0, 0.0023, lam=1.0),
           ab_row(milp_dp_work.KEY, "b", True, "optimal", 43.3, 0.0, lam=0.5)]
    before.write_text("".join(json.dumps(r) + "\n" for r in old))
    monkeypatch.setattr(milp_more_runs, "BEFORE", before)
    rows = [ab_row(milp_more_runs.KEY, "a", True, "optimal", 67.3, 0.0, lam=1.0, load=0.9),
            ab_row(milp_more_runs.KEY, "b", True, "optimal", 40.0, 0.0, lam=0.5),
            ab_row(milp_more_runs.KEY, "b", True, "feasible", 120.0, 0.004, lam=1.0)]
    lines = milp_more_runs.summary(rows)
    assert lines[0].startswith("| instance | now | its HiGHS | before (b82e526) |")
    assert lines[2] == "| a lambda 1 | 67.3 s | not run | gap 0.23 % | 0.90 / 1.50 |"
    assert lines[3] == "| b lambda 0.5 | 40.0 s | not run | 43.3 s | 1.50 / 1.50 |"
    assert lines[4] == "| b lambda 1 | gap 0.40 % | not run | not run | 1.50 / - |"
    assert lines[-1] == "proven: 2 of 3 now, 1 of 3 before"


def test_it_runs_the_default_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert arm_params(monkeypatch, tmp_path, milp_more_runs.KEY, milp_more_runs.main) == [{}]


def test_the_stored_count_is_the_one_the_results_readme_states() -> None:
    """bench/results/README.md quotes the stored run's count of proofs."""
    count, lines, readme = stored_table(milp_more_runs.OUT, milp_more_runs.summary)
    assert count == len(milp_three_back.CASES)
    assert lines[-1].startswith("proven: ")
    assert f"\n{lines[-1]}\n" in readme


def test_the_proof_times_the_results_readme_states() -> None:
    """bench/results/README.md quotes how the proofs both stored runs made moved."""
    def proofs(path: Path) -> dict[str, float]:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        return {f"{r['instance']} {r['lambda']}": r["wall_s"] for r in rows
                if r["status"] == "optimal"}

    now, before = proofs(milp_more_runs.OUT), proofs(milp_more_runs.BEFORE)
    moved = {k: round(now[k] - before[k], 1) for k in now.keys() & before.keys()}
    slower = sorted(v for v in moved.values() if v > 0)
    faster = [k for k, v in moved.items() if v < 0]
    readme = (Path(milp_more_runs.__file__).resolve().parent / "results" / "README.md")
    words = {5: "five", 6: "six", 7: "seven"}
    quoted = (f"Of the {words[len(moved)]} proofs both runs made, five took\nlonger now (by "
              f"{slower[0]}-{slower[-1]} s) and one less (661, by {-moved[faster[0]]} s)")
    assert len(moved) == 6 and len(slower) == 5 and len(faster) == 1
    assert "s661" in faster[0]
    assert quoted in readme.read_text()
